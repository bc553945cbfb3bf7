/* devices/op-sig.c -- every opcode's signature: its public name and its operands (name,
 * what dtype they take, their rank, whether optional or read as well as written), in
 * the order struct rf__op names them. Used to build ops, to describe them in
 * messages, and by backends and the conformance test to walk their operands. */
#include <stdio.h>
#include <string.h>

#include "backend-impl.h"

#define F(n) { n, RF__OK_FLOAT, 0, 0, 0 }
#define F4(n) { n, RF__OK_FLOAT, 4, 0, 0 }
#define FO(n) { n, RF__OK_FLOAT, 0, 1, 0 }
#define F4IO(n) { n, RF__OK_FLOAT, 4, 0, 1 }
#define P(n) { n, RF__OK_CHAN, 0, 0, 0 }      /* per-channel: f32 in a model */
#define PIO(n) { n, RF__OK_CHAN, 0, 1, 1 }    /* per-channel, optional, updated */

const struct rf__opsig rf__opsigs[RF__OP_COUNT] = {
	[RF__OP_GEMM] = { "gemm", 1, 2, { { "C", RF__OK_FLOAT, 2, 0, 1 },
					  { "A", RF__OK_FLOAT, 2, 0, 0 },
					  { "B", RF__OK_FLOAT, 2, 0, 0 } } },
	[RF__OP_BIAS_ADD] = { "bias_add", 1, 1, { { "y", RF__OK_FLOAT, 0, 0, 1 }, F("b") } },
	[RF__OP_BIAS_GRAD] = { "bias_grad", 1, 1, { { "db", RF__OK_FLOAT, 0, 0, 1 }, F("dy") } },
	[RF__OP_RELU_FWD] = { "relu_fwd", 1, 1, { F("y"), F("x") } },
	[RF__OP_RELU_BWD] = { "relu_bwd", 1, 2, { F("dx"), F("dy"), F("y") } },
	[RF__OP_XENT] = { "softmax_xent", 3, 2, { FO("dlogits"), FO("loss"),
						  { "correct", RF__OK_I32, 0, 1, 0 },
						  { "logits", RF__OK_FLOAT, 2, 0, 0 },
						  { "labels", RF__OK_I32, 0, 0, 0 } } },
	[RF__OP_CONV_FWD] = { "conv2d_fwd", 1, 3, { F4("y"), F4("x"), F4("w"), FO("b") } },
	[RF__OP_CONV_BWD_DATA] = { "conv2d_bwd_data", 1, 2, { F4("dx"), F4("dy"), F4("w") } },
	[RF__OP_CONV_BWD_FILTER] = { "conv2d_bwd_filter", 2, 2,
				     { F4IO("dw"), { "db", RF__OK_FLOAT, 0, 1, 1 }, F4("dy"),
				       F4("x") } },
	[RF__OP_CONV_BWD_FILTER_POOL_RELU] = { "conv2d_bwd_filter_pool_relu", 2, 3,
					       { F4IO("dw"), { "db", RF__OK_FLOAT, 0, 1, 1 },
						 F4("dp"), F4("y"), F4("x") } },
	[RF__OP_AVGPOOL_FWD] = { "avgpool2d_fwd", 1, 1, { F4("y"), F4("x") } },
	[RF__OP_AVGPOOL_BWD] = { "avgpool2d_bwd", 1, 1, { F4("dx"), F4("dy") } },
	[RF__OP_RELU_AVGPOOL2_FWD] = { "relu_avgpool2d_fwd", 2, 0, { F4("p"), F4IO("y") } },
	[RF__OP_AVGPOOL2_RELU_BWD] = { "avgpool2d_relu_bwd", 1, 2, { F4("dx"), F4("dy"), F4("y") } },
	[RF__OP_MAXPOOL_FWD] = { "maxpool2d_fwd", 1, 1, { F4("y"), F4("x") } },
	[RF__OP_MAXPOOL_BWD] = { "maxpool2d_bwd", 1, 2, { F4("dx"), F4("dy"), F4("x") } },
	[RF__OP_GAP_FWD] = { "gavgpool_fwd", 1, 1, { F("y"), F4("x") } },
	[RF__OP_GAP_BWD] = { "gavgpool_bwd", 1, 1, { F4("dx"), F("dy") } },
	[RF__OP_BN_TRAIN] = { "batchnorm_fwd", 5, 3,
			      { F4("y"), P("mean"), P("invstd"), PIO("run_mean"), PIO("run_var"),
				F4("x"), P("gamma"), P("beta") } },
	[RF__OP_BN_EVAL] = { "batchnorm_eval", 1, 5, { F4("y"), F4("x"), P("gamma"), P("beta"),
						       P("run_mean"), P("run_var") } },
	[RF__OP_BN_BWD] = { "batchnorm_bwd", 3, 5, { F4("dx"), P("dgamma"), P("dbeta"), F4("dy"),
						     F4("x"), P("mean"), P("invstd"), P("gamma") } },
	[RF__OP_BN_RELU_TRAIN] = { "batchnorm_relu_fwd", 5, 3,
				   { F4("y"), P("mean"), P("invstd"), PIO("run_mean"),
				     PIO("run_var"), F4("x"), P("gamma"), P("beta") } },
	[RF__OP_BN_RELU_EVAL] = { "batchnorm_relu_eval", 1, 5,
				  { F4("y"), F4("x"), P("gamma"), P("beta"), P("run_mean"),
				    P("run_var") } },
	[RF__OP_BN_RELU_BWD] = { "batchnorm_relu_bwd", 3, 6,
				 { F4("dx"), P("dgamma"), P("dbeta"), F4("dy"), F4("x"), P("mean"),
				   P("invstd"), P("gamma"), F4("y") } },
	[RF__OP_SGD] = { "sgd", 1, 1, { { "w", RF__OK_FLOAT, 0, 0, 1 }, F("g") } },
	[RF__OP_SGD_MOMENTUM] = { "sgd_momentum", 2, 1, { { "w", RF__OK_FLOAT, 0, 0, 1 },
							  { "v", RF__OK_FLOAT, 0, 0, 1 }, F("g") } },
	[RF__OP_ADAMW] = { "adamw", 3, 1, { { "w", RF__OK_FLOAT, 0, 0, 1 },
					    { "m", RF__OK_FLOAT, 0, 0, 1 },
					    { "v", RF__OK_FLOAT, 0, 0, 1 }, F("g") } },
	[RF__OP_AXPY] = { "axpy", 1, 1, { { "y", RF__OK_FLOAT, 0, 0, 1 }, F("x") } },
	[RF__OP_SCALE] = { "scale", 1, 0, { { "x", RF__OK_FLOAT, 0, 0, 1 } } },
	[RF__OP_SUM] = { "sum", 1, 1, { F("out"), F("in") } },
	[RF__OP_ADD_RELU] = { "add_relu_fwd", 1, 2, { F("y"), F("a"), F("b") } },
	[RF__OP_FILL] = { "fill", 1, 0, { { "x", RF__OK_ANY, 0, 0, 0 } } },
	[RF__OP_U8_F32] = { "u8_to_f32", 1, 1, { F("out"), { "in", RF__OK_U8, 0, 0, 0 } } },
	[RF__OP_U8_I32] = { "u8_to_i32", 1, 1, { { "out", RF__OK_I32, 0, 0, 0 },
						 { "in", RF__OK_U8, 0, 0, 0 } } },
	[RF__OP_RAND_UNIFORM] = { "rand_uniform", 1, 0, { F("x") } },
	[RF__OP_RAND_NORMAL] = { "rand_normal", 1, 0, { F("x") } },
	[RF__OP_CONVERT] = { "convert", 1, 1, { { "dst", RF__OK_ANY, 0, 0, 0 },
						{ "src", RF__OK_ANY, 0, 0, 0 } } },
	[RF__OP_COPY] = { "copy", 1, 1, { { "dst", RF__OK_ANY, 0, 0, 0 },
					  { "src", RF__OK_ANY, 0, 0, 0 } } },
	[RF__OP_HOST] = { "host_op", 0, 0, { { NULL, 0, 0, 0, 0 } } },
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
