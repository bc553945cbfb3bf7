/* devices/op-sig.c -- every opcode's signature: its public name and its operands (name,
 * what dtype they take, their rank, whether optional or read as well as written), in
 * the order struct rf__op names them. Used to build ops, to describe them in
 * messages, and by backends and the conformance test to walk their operands. */
#include <stdio.h>
#include <string.h>

#include "op-impl.h"

#define F(n) { n, RF__OK_FLOAT, 0, 0, 0, 0, 0 }
#define F4(n) { n, RF__OK_FLOAT, 4, 0, 0, 0, 0 }
#define FO(n) { n, RF__OK_FLOAT, 0, 1, 0, 0, 0 }
#define F4IO(n) { n, RF__OK_FLOAT, 4, 0, 1, 0, 0 }
#define FN(n, of) { n, RF__OK_FLOAT, 0, 0, 0, RF__REL_NUMEL, of }   /* of's numel */
#define FNIO(n, of) { n, RF__OK_FLOAT, 0, 0, 1, RF__REL_NUMEL, of }
#define F4S(n, of) { n, RF__OK_FLOAT, 4, 0, 0, RF__REL_SHAPE, of }  /* of's shape */
#define P(n, x) { n, RF__OK_CHAN, 0, 0, 0, RF__REL_CHAN, x }  /* per-channel of x: f32
							      * in a model */
#define PIO(n, x) { n, RF__OK_CHAN, 0, 1, 1, RF__REL_CHAN, x } /* per-channel, optional,
								* updated */

const struct rf__opsig rf__opsigs[RF__OP_COUNT] = {
	[RF__OP_GEMM] = { "gemm", 1, 2, { { "C", RF__OK_FLOAT, 2, 0, 1, 0, 0 },
					  { "A", RF__OK_FLOAT, 2, 0, 0, 0, 0 },
					  { "B", RF__OK_FLOAT, 2, 0, 0, 0, 0 } } },
	[RF__OP_BIAS_ADD] = { "bias_add", 1, 1, { { "y", RF__OK_FLOAT, 0, 0, 1, 0, 0 }, F("b") } },
	[RF__OP_BIAS_GRAD] = { "bias_grad", 1, 1, { { "db", RF__OK_FLOAT, 0, 0, 1, 0, 0 },
						    F("dy") } },
	[RF__OP_RELU_FWD] = { "relu_fwd", 1, 1, { F("y"), FN("x", 0) } },
	[RF__OP_RELU_BWD] = { "relu_bwd", 1, 2, { F("dx"), FN("dy", 0), FN("y", 0) } },
	[RF__OP_XENT] = { "softmax_xent", 3, 2, { { "dlogits", RF__OK_FLOAT, 0, 1, 0,
						    RF__REL_NUMEL, 3 },
						  FO("loss"),
						  { "correct", RF__OK_I32, 0, 1, 0, 0, 0 },
						  { "logits", RF__OK_FLOAT, 2, 0, 0, 0, 0 },
						  { "labels", RF__OK_I32, 0, 0, 0, 0, 0 } } },
	[RF__OP_CONV_FWD] = { "conv2d_fwd", 1, 3, { F4("y"), F4("x"), F4("w"), FO("b") } },
	[RF__OP_CONV_BWD_DATA] = { "conv2d_bwd_data", 1, 2, { F4("dx"), F4("dy"), F4("w") } },
	[RF__OP_CONV_BWD_FILTER] = { "conv2d_bwd_filter", 2, 2,
				     { F4IO("dw"), { "db", RF__OK_FLOAT, 0, 1, 1, 0, 0 }, F4("dy"),
				       F4("x") } },
	[RF__OP_CONV_BWD_FILTER_POOL_RELU] = { "conv2d_bwd_filter_pool_relu", 2, 3,
					       { F4IO("dw"), { "db", RF__OK_FLOAT, 0, 1, 1, 0, 0 },
						 F4("dp"), F4("y"), F4("x") } },
	[RF__OP_AVGPOOL_FWD] = { "avgpool2d_fwd", 1, 1, { F4("y"), F4("x") } },
	[RF__OP_AVGPOOL_BWD] = { "avgpool2d_bwd", 1, 1, { F4("dx"), F4("dy") } },
	[RF__OP_RELU_AVGPOOL2_FWD] = { "relu_avgpool2d_fwd", 2, 0, { F4("p"), F4IO("y") } },
	[RF__OP_AVGPOOL2_RELU_BWD] = { "avgpool2d_relu_bwd", 1, 2,
				       { F4("dx"), F4("dy"), F4S("y", 0) } },
	[RF__OP_MAXPOOL_FWD] = { "maxpool2d_fwd", 1, 1, { F4("y"), F4("x") } },
	[RF__OP_MAXPOOL_BWD] = { "maxpool2d_bwd", 1, 2, { F4S("dx", 2), F4("dy"), F4("x") } },
	[RF__OP_GAP_FWD] = { "gavgpool_fwd", 1, 1, { F("y"), F4("x") } },
	[RF__OP_GAP_BWD] = { "gavgpool_bwd", 1, 1, { F4("dx"), F("dy") } },
	[RF__OP_BN_TRAIN] = { "batchnorm_fwd", 5, 3,
			      { F4S("y", 5), P("mean", 5), P("invstd", 5), PIO("run_mean", 5),
				PIO("run_var", 5), F4("x"), P("gamma", 5), P("beta", 5) } },
	[RF__OP_BN_EVAL] = { "batchnorm_eval", 1, 5,
			     { F4S("y", 1), F4("x"), P("gamma", 1), P("beta", 1), P("run_mean", 1),
			       P("run_var", 1) } },
	[RF__OP_BN_BWD] = { "batchnorm_bwd", 3, 5,
			    { F4S("dx", 4), P("dgamma", 4), P("dbeta", 4), F4S("dy", 4), F4("x"),
			      P("mean", 4), P("invstd", 4), P("gamma", 4) } },
	[RF__OP_BN_RELU_TRAIN] = { "batchnorm_relu_fwd", 5, 3,
				   { F4S("y", 5), P("mean", 5), P("invstd", 5), PIO("run_mean", 5),
				     PIO("run_var", 5), F4("x"), P("gamma", 5), P("beta", 5) } },
	[RF__OP_BN_RELU_EVAL] = { "batchnorm_relu_eval", 1, 5,
				  { F4S("y", 1), F4("x"), P("gamma", 1), P("beta", 1),
				    P("run_mean", 1), P("run_var", 1) } },
	[RF__OP_BN_RELU_BWD] = { "batchnorm_relu_bwd", 3, 6,
				 { F4S("dx", 4), P("dgamma", 4), P("dbeta", 4), F4S("dy", 4),
				   F4("x"), P("mean", 4), P("invstd", 4), P("gamma", 4), F4S("y", 4) } },
	[RF__OP_SGD] = { "sgd", 1, 1, { { "w", RF__OK_FLOAT, 0, 0, 1, 0, 0 }, FN("g", 0) } },
	[RF__OP_SGD_MOMENTUM] = { "sgd_momentum", 2, 1, { { "w", RF__OK_FLOAT, 0, 0, 1, 0, 0 },
							  FNIO("v", 0), FN("g", 0) } },
	[RF__OP_ADAMW] = { "adamw", 3, 1, { { "w", RF__OK_FLOAT, 0, 0, 1, 0, 0 }, FNIO("m", 0),
					    FNIO("v", 0), FN("g", 0) } },
	[RF__OP_AXPY] = { "axpy", 1, 1, { { "y", RF__OK_FLOAT, 0, 0, 1, 0, 0 }, FN("x", 0) } },
	[RF__OP_SCALE] = { "scale", 1, 0, { { "x", RF__OK_FLOAT, 0, 0, 1, 0, 0 } } },
	[RF__OP_SUM] = { "sum", 1, 1, { F("out"), FN("in", 0) } },
	[RF__OP_ADD_RELU] = { "add_relu_fwd", 1, 2, { F("y"), FN("a", 0), FN("b", 0) } },
	[RF__OP_FILL] = { "fill", 1, 0, { { "x", RF__OK_ANY, 0, 0, 0, 0, 0 } } },
	[RF__OP_U8_F32] = { "u8_to_f32", 1, 1, { F("out"), { "in", RF__OK_U8, 0, 0, 0,
								RF__REL_NUMEL, 0 } } },
	[RF__OP_U8_I32] = { "u8_to_i32", 1, 1, { { "out", RF__OK_I32, 0, 0, 0, 0, 0 },
						 { "in", RF__OK_U8, 0, 0, 0, RF__REL_NUMEL, 0 } } },
	[RF__OP_RAND_UNIFORM] = { "rand_uniform", 1, 0, { F("x") } },
	[RF__OP_RAND_NORMAL] = { "rand_normal", 1, 0, { F("x") } },
	[RF__OP_CONVERT] = { "convert", 1, 1, { { "dst", RF__OK_ANY, 0, 0, 0, 0, 0 },
						{ "src", RF__OK_ANY, 0, 0, 0, 0, 0 } } },
	[RF__OP_COPY] = { "copy", 1, 1, { { "dst", RF__OK_ANY, 0, 0, 0, 0, 0 },
					  { "src", RF__OK_ANY, 0, 0, 0, 0, 0 } } },
	[RF__OP_HOST] = { "host_op", 0, 0, { { NULL, 0, 0, 0, 0, 0, 0 } } },
};

int rf__opcode_of(const char *name)
{
	for (int i = 0; name && i < RF__OP_COUNT; i++)
		if (rf__opsigs[i].name && !strcmp(rf__opsigs[i].name, name))
			return i;
	return -1;
}

const char *rf__op_tname(const struct rf__op *op, unsigned i)
{
	const struct rf__opsig *g = &rf__opsigs[op->code];

	if (op->code == RF__OP_SUM)
		return i ? "in" : "out";
	return i < (unsigned)(g->nout + g->nin) ? g->o[i].name : "?";
}

int rf__op_writes(const struct rf__op *op, unsigned i)
{
	return i < rf__opsigs[op->code].nout;
}

const char *rf__tref_describe(const struct rf__op *op, unsigned i, char *buf, size_t len)
{
	const struct rf__tref *t = rf__op_tc(op, i);
	int o, d;

	o = snprintf(buf, len, "%s (", rf__op_tname(op, i));
	for (d = 0; d < t->ndim && o >= 0 && (size_t)o < len; d++)
		o += snprintf(buf + o, len - (size_t)o, "%s%lld", d ? ", " : "",
			      (long long)t->shape[d]);
	if (o >= 0 && (size_t)o < len)
		snprintf(buf + o, len - (size_t)o, ") %s%s%s", rf_tdtype_name(t->dtype),
			 t->layout != RF_LAYOUT_ROWMAJOR ? " " : "",
			 t->layout != RF_LAYOUT_ROWMAJOR ? rf_layout_name(t->layout) : "");
	return buf;
}

int rf__op_first_not(const struct rf__op *op, enum rf_tdtype dt, enum rf_layout lay)
{
	for (unsigned i = 0; i < op->nt; i++) {
		const struct rf__tref *t = rf__op_tc(op, i);
		if (!t->dtype || !rf__is_float(t->dtype))
			continue; /* left out, or not a float operand */
		if (t->dtype != dt || (t->ndim == 4 && t->layout != lay))
			return (int)i;
	}
	return -1;
}

/* ---- checking the arguments ------------------------------------------------------------ */

/* Operand i of the tensors a front end passes (for RF__OP_SUM, in[i - 1]): its
 * signature entry. */
static const struct rf__osig *rf__sig_at(enum rf__opcode code, unsigned i)
{
	return &rf__opsigs[code].o[code == RF__OP_SUM && i ? 1 : i];
}

/* Its name, for a message ("gamma", "in[2]"). */
static const char *rf__sig_name(enum rf__opcode code, unsigned i, char *buf, size_t len)
{
	if (code == RF__OP_SUM && i)
		snprintf(buf, len, "in[%u]", i - 1);
	else
		snprintf(buf, len, "%s", rf__sig_at(code, i)->name);
	return buf;
}

/* Operand i on its own: present unless optional, its dtype, its rank. */
static int rf__sig_own(const char *fn, enum rf__opcode code, unsigned i,
		       const struct rf_tensor *t)
{
	const struct rf__osig *o = rf__sig_at(code, i);
	enum rf_tdtype dt = o->kind == RF__OK_I32 ? RF_I32 : RF_U8;
	char name[32], buf[96];

	if (!t) {
		if (o->opt)
			return 0;
		return rf__bad(fn, "%s is NULL", rf__sig_name(code, i, name, sizeof(name)));
	}
	if ((o->kind == RF__OK_FLOAT || o->kind == RF__OK_CHAN) && !rf__is_float(t->dtype))
		return rf__bad(fn, "%s %s: expected a float tensor (f32, bf16 or f16)",
			       rf__sig_name(code, i, name, sizeof(name)),
			       rf_tensor_describe(t, buf, sizeof(buf)));
	if ((o->kind == RF__OK_I32 || o->kind == RF__OK_U8) && t->dtype != dt)
		return rf__bad(fn, "%s %s: expected %s", rf__sig_name(code, i, name, sizeof(name)),
			       rf_tensor_describe(t, buf, sizeof(buf)), rf_tdtype_name(dt));
	if (o->ndim && t->ndim != o->ndim)
		return rf__bad(fn, "%s %s: expected %d dimensions",
			       rf__sig_name(code, i, name, sizeof(name)),
			       rf_tensor_describe(t, buf, sizeof(buf)), o->ndim);
	return 0;
}

/* Operand i against the operand its shape follows (both present; that one's own
 * checks passed). */
static int rf__sig_rel(const char *fn, enum rf__opcode code, unsigned i,
		       const struct rf_tensor *t, const struct rf_tensor *of)
{
	const struct rf__osig *o = rf__sig_at(code, i);
	char name[32], oname[32], b1[96], b2[96];
	int bad;

	switch (o->rel) {
	case RF__REL_NUMEL:
		if (t->numel == of->numel && t->numel <= (size_t)INT32_MAX * 64)
			return 0;
		if (t->numel == of->numel)
			return rf__bad(fn, "%s %s: tensor too large",
				       rf__sig_name(code, i, name, sizeof(name)),
				       rf_tensor_describe(t, b2, sizeof(b2)));
		bad = 1;
		break;
	case RF__REL_SHAPE:
		if (t->ndim == of->ndim &&
		    !memcmp(t->shape, of->shape, sizeof(int64_t) * (size_t)t->ndim))
			return 0;
		bad = 2;
		break;
	case RF__REL_CHAN:
		if (t->numel == (size_t)of->shape[1])
			return 0;
		return rf__bad(fn, "%s has %zu elements, %zu expected (one per channel of %s)",
			       rf__sig_name(code, i, name, sizeof(name)), t->numel,
			       (size_t)of->shape[1],
			       rf__sig_name(code, o->of, oname, sizeof(oname)));
	default:
		return 0;
	}
	return rf__bad(fn, "%s %s and %s %s differ in %s",
		       rf__sig_name(code, o->of, oname, sizeof(oname)),
		       rf_tensor_describe(of, b1, sizeof(b1)),
		       rf__sig_name(code, i, name, sizeof(name)),
		       rf_tensor_describe(t, b2, sizeof(b2)), bad == 1 ? "size" : "shape");
}

int rf__sig_check(const char *fn, enum rf__opcode code, struct rf_tensor *const *t, unsigned n,
		  unsigned what)
{
	const struct rf__opsig *g = &rf__opsigs[code];
	unsigned i;

	if (code != RF__OP_SUM && n != (unsigned)(g->nout + g->nin))
		return rf__bad(fn, "%u operands for %s, which has %u", n, g->name,
			       (unsigned)(g->nout + g->nin));
	for (i = 0; (what & RF__SIG_OWN) && i < n; i++)
		RF__TRY(rf__sig_own(fn, code, i, t[i]));
	for (i = 0; (what & RF__SIG_REL) && i < n; i++) {
		const struct rf__osig *o = rf__sig_at(code, i);
		if (o->rel != RF__REL_NONE && t[i] && t[o->of])
			RF__TRY(rf__sig_rel(fn, code, i, t[i], t[o->of]));
	}
	return 0;
}
