/* devices/cpu/cpu-ops.c -- the CPU backend's ops: what it runs (every opcode, in every
 * float dtype and layout), the workspace it wants, and running one on the worker
 * thread.
 *
 * The kernels (kernels.h) take f32 row-major tensors. An op with a bf16 or f16
 * operand, or a 4-D one in NHWC, runs by the reference path: each such operand is
 * converted into f32 row-major scratch (carved from the op's workspace), the f32
 * kernel runs on the scratch, and the written operands are converted back (rounded to
 * nearest even). Correct by construction and slow; the default f32 row-major ops
 * never take it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cpu-impl.h"
#include "par.h"

#define RF__STAGE_ALIGN 64

/* Ops whose kernels take any dtype and layout as they are. */
static int rf__any_format(enum rf__opcode code)
{
	return code == RF__OP_FILL || code == RF__OP_COPY || code == RF__OP_CONVERT ||
	       code == RF__OP_HOST;
}

/* Operand i must be staged: a float operand not f32 row-major. */
static int rf__staged(const struct rf__tref *t)
{
	return t->dtype && rf__is_float(t->dtype) &&
	       (t->dtype != RF_F32 || t->layout != RF_LAYOUT_ROWMAJOR);
}

static size_t rf__stage_round(size_t n)
{
	return (n + RF__STAGE_ALIGN - 1) & ~(size_t)(RF__STAGE_ALIGN - 1);
}

/* Bytes of f32 scratch the reference path needs (0: the op runs as it is). */
static size_t rf__stage_bytes(const struct rf__op *op)
{
	size_t n = 0;

	if (rf__any_format(op->code))
		return 0;
	for (unsigned i = 0; i < op->nt; i++) {
		const struct rf__tref *t = rf__op_tc(op, i);
		if (rf__staged(t))
			n += rf__stage_round(t->numel * sizeof(float));
	}
	return n;
}

int rf__cpu_supports(const struct rf_device *d, const struct rf__op *op, char *why, size_t len)
{
	(void)d;
	/* NHWC exists only for 4-D tensors (tensor.c), and every kernel takes f32 row-major
	 * tensors directly or through the reference path: every op, every float dtype */
	if (op->code >= RF__OP_COUNT) {
		snprintf(why, len, "unknown opcode %d", (int)op->code);
		return 0;
	}
	return 1;
}

static int rf__conv_op(enum rf__opcode code)
{
	return code == RF__OP_CONV_FWD || code == RF__OP_CONV_BWD_DATA ||
	       code == RF__OP_CONV_BWD_FILTER;
}

size_t rf__cpu_workspace(const struct rf_device *d, const struct rf__op *op, int min)
{
	size_t ws = 0;

	(void)d;
	if (rf__conv_op(op->code))
		ws = min ? rf__k_conv2d_workspace_min(&op->p.conv.s)
		   : op->code == RF__OP_CONV_FWD ? rf__k_conv2d_fwd_workspace_size(&op->p.conv.s)
			 : rf__k_conv2d_workspace_size(&op->p.conv.s);
	else if (op->code == RF__OP_BN_RELU_BWD)   /* one plane of dy masked by y > 0 */
		ws = rf__stage_round((size_t)op->p.bn.s.hw * sizeof(float));
	return ws + rf__stage_bytes(op);
}

static void rf__fill_any(void *x, size_t n, float v, enum rf_tdtype dtype)
{
	uint32_t b;
	size_t i;

	switch (rf__fill_bits(dtype, v, &b)) {
	case 4:
		if (dtype == RF_F32) {
			rf__k_fill(x, v, n);
			break;
		}
		for (i = 0; i < n; i++)
			((uint32_t *)x)[i] = b;
		break;
	case 2:
		for (i = 0; i < n; i++)
			((uint16_t *)x)[i] = (uint16_t)b;
		break;
	default:
		memset(x, (int)b, n);
		break;
	}
}

#define D(t) ((float *)(t).data)
#define C(t) ((const float *)(t).data)

/* ---- each op to its kernel, on f32 row-major operands (and its fixed-dtype ones) ----
 * One function per opcode, grouped by the file of the kernel it calls; rf__cpu_fns
 * indexes them by opcode. */

/* gemm.c */
static int rf__cpu_gemm(struct rf__op *op)
{
	int m = op->p.gemm.m, n = op->p.gemm.n, k = op->p.gemm.k;
	int lda = op->p.gemm.ta ? m : k;
	int ldb = op->p.gemm.tb ? k : n;

	return rf__k_gemm(op->p.gemm.ta, op->p.gemm.tb, m, n, k, op->p.gemm.alpha,
			  C(op->o.gemm.a), lda > 0 ? lda : 1, C(op->o.gemm.b), ldb > 0 ? ldb : 1,
			  op->p.gemm.beta, D(op->o.gemm.c), n > 0 ? n : 1);
}

/* layers.c */
static int rf__cpu_bias_add(struct rf__op *op)
{
	rf__k_bias_add(D(op->o.bias_add.y), C(op->o.bias_add.b), op->p.bias.rows, op->p.bias.cols);
	return 0;
}

static int rf__cpu_bias_grad(struct rf__op *op)
{
	rf__k_bias_grad(D(op->o.bias_grad.db), C(op->o.bias_grad.dy), op->p.bias.rows,
			op->p.bias.cols, op->p.bias.acc);
	return 0;
}

static int rf__cpu_relu_fwd(struct rf__op *op)
{
	rf__k_relu_fwd(D(op->o.relu_fwd.y), C(op->o.relu_fwd.x), op->p.ew.n);
	return 0;
}

static int rf__cpu_add_relu(struct rf__op *op)
{
	rf__k_add_relu_fwd(D(op->o.add_relu.y), C(op->o.add_relu.a), C(op->o.add_relu.b),
			   op->p.ew.n);
	return 0;
}

static int rf__cpu_relu_bwd(struct rf__op *op)
{
	rf__k_relu_bwd(D(op->o.relu_bwd.dx), C(op->o.relu_bwd.dy), C(op->o.relu_bwd.y), op->p.ew.n);
	return 0;
}

static int rf__cpu_xent(struct rf__op *op)
{
	int ret = rf__k_softmax_xent(D(op->o.xent.dlogits), D(op->o.xent.loss),
				     op->o.xent.correct.data, C(op->o.xent.logits),
				     op->o.xent.labels.data, op->p.xent.rows, op->p.xent.cols);

	if (ret < 0)
		snprintf(op->err, sizeof(op->err), "a label is outside [0, %d) (logits %d x %d)",
			 op->p.xent.cols, op->p.xent.rows, op->p.xent.cols);
	return ret;
}

static int rf__cpu_avgpool_fwd(struct rf__op *op)
{
	rf__k_avgpool2d_fwd(D(op->o.avgpool_fwd.y), C(op->o.avgpool_fwd.x), op->p.pool.n,
			    op->p.pool.c, op->p.pool.h, op->p.pool.w, op->p.pool.k);
	return 0;
}

static int rf__cpu_avgpool_bwd(struct rf__op *op)
{
	rf__k_avgpool2d_bwd(D(op->o.avgpool_bwd.dx), C(op->o.avgpool_bwd.dy), op->p.pool.n,
			    op->p.pool.c, op->p.pool.h, op->p.pool.w, op->p.pool.k);
	return 0;
}

static int rf__cpu_relu_avgpool2_fwd(struct rf__op *op)
{
	rf__k_relu_avgpool2_fwd(D(op->o.relu_avgpool2_fwd.p), D(op->o.relu_avgpool2_fwd.y),
				op->p.pool.n, op->p.pool.c, op->p.pool.h, op->p.pool.w);
	return 0;
}

static int rf__cpu_avgpool2_relu_bwd(struct rf__op *op)
{
	rf__k_avgpool2_relu_bwd(D(op->o.avgpool2_relu_bwd.dx), C(op->o.avgpool2_relu_bwd.dy),
				C(op->o.avgpool2_relu_bwd.y), op->p.pool.n, op->p.pool.c,
				op->p.pool.h, op->p.pool.w);
	return 0;
}

/* conv.c */
static int rf__cpu_conv_fwd(struct rf__op *op)
{
	return rf__k_conv2d_fwd(&op->p.conv.s, D(op->o.conv_fwd.y), C(op->o.conv_fwd.x),
				C(op->o.conv_fwd.w), C(op->o.conv_fwd.b), op->ws, op->ws_bytes);
}

static int rf__cpu_conv_bwd_data(struct rf__op *op)
{
	return rf__k_conv2d_bwd_data(&op->p.conv.s, D(op->o.conv_bwd_data.dx),
				     C(op->o.conv_bwd_data.dy), C(op->o.conv_bwd_data.w), op->ws,
				     op->ws_bytes);
}

static int rf__cpu_conv_bwd_filter(struct rf__op *op)
{
	return rf__k_conv2d_bwd_filter(&op->p.conv.s, D(op->o.conv_bwd_filter.dw),
				       D(op->o.conv_bwd_filter.db), C(op->o.conv_bwd_filter.dy),
				       C(op->o.conv_bwd_filter.x), op->p.conv.acc, op->ws,
				       op->ws_bytes);
}

static int rf__cpu_conv_bwd_filter_pr(struct rf__op *op)
{
	return rf__k_conv2d_bwd_filter_pool_relu(&op->p.conv.s, D(op->o.conv_bwd_filter_pr.dw),
						 D(op->o.conv_bwd_filter_pr.db),
						 C(op->o.conv_bwd_filter_pr.dp),
						 C(op->o.conv_bwd_filter_pr.y),
						 C(op->o.conv_bwd_filter_pr.x), op->p.conv.acc);
}

/* norm.c */
static int rf__cpu_maxpool_fwd(struct rf__op *op)
{
	rf__k_maxpool2d_fwd(D(op->o.maxpool_fwd.y), C(op->o.maxpool_fwd.x), op->p.pool.n,
			    op->p.pool.c, op->p.pool.h, op->p.pool.w, op->p.pool.k, op->p.pool.st);
	return 0;
}

static int rf__cpu_maxpool_bwd(struct rf__op *op)
{
	rf__k_maxpool2d_bwd(D(op->o.maxpool_bwd.dx), C(op->o.maxpool_bwd.dy),
			    C(op->o.maxpool_bwd.x), op->p.pool.n, op->p.pool.c, op->p.pool.h,
			    op->p.pool.w, op->p.pool.k, op->p.pool.st);
	return 0;
}

static int rf__cpu_gap_fwd(struct rf__op *op)
{
	rf__k_gavgpool_fwd(D(op->o.gap_fwd.y), C(op->o.gap_fwd.x),
			   (size_t)op->p.pool.n * op->p.pool.c, op->p.pool.h * op->p.pool.w);
	return 0;
}

static int rf__cpu_gap_bwd(struct rf__op *op)
{
	rf__k_gavgpool_bwd(D(op->o.gap_bwd.dx), C(op->o.gap_bwd.dy),
			   (size_t)op->p.pool.n * op->p.pool.c, op->p.pool.h * op->p.pool.w);
	return 0;
}

static int rf__cpu_bn_train(struct rf__op *op)        /* and with its ReLU */
{
	return rf__k_bn_fwd_train(&op->p.bn.s, D(op->o.bn_train.y), D(op->o.bn_train.mean),
				  D(op->o.bn_train.invstd), D(op->o.bn_train.run_mean),
				  D(op->o.bn_train.run_var), C(op->o.bn_train.x),
				  C(op->o.bn_train.gamma), C(op->o.bn_train.beta));
}

static int rf__cpu_bn_eval(struct rf__op *op)         /* and with its ReLU */
{
	return rf__k_bn_fwd_eval(&op->p.bn.s, D(op->o.bn_eval.y), C(op->o.bn_eval.x),
				 C(op->o.bn_eval.gamma), C(op->o.bn_eval.beta),
				 C(op->o.bn_eval.run_mean), C(op->o.bn_eval.run_var));
}

static int rf__cpu_bn_bwd(struct rf__op *op)          /* and with its ReLU */
{
	return rf__k_bn_bwd(&op->p.bn.s, D(op->o.bn_bwd.dx), D(op->o.bn_bwd.dgamma),
			    D(op->o.bn_bwd.dbeta), C(op->o.bn_bwd.dy), C(op->o.bn_bwd.x),
			    C(op->o.bn_bwd.mean), C(op->o.bn_bwd.invstd), C(op->o.bn_bwd.gamma),
			    op->code == RF__OP_BN_RELU_BWD ? C(op->o.bn_relu_bwd.y) : NULL,
			    op->ws_bytes >= (size_t)op->p.bn.s.hw * sizeof(float) ? op->ws : NULL);
}

/* vec.c */
static int rf__cpu_sgd(struct rf__op *op)
{
	rf__k_sgd(D(op->o.sgd.w), C(op->o.sgd.g), op->p.sgd.n, rf__sgd_lr(op), op->p.sgd.wd);
	return 0;
}

static int rf__cpu_sgd_momentum(struct rf__op *op)
{
	rf__k_sgd_momentum(D(op->o.sgd_momentum.w), D(op->o.sgd_momentum.v),
			   C(op->o.sgd_momentum.g), op->p.sgd.n, rf__sgd_lr(op), op->p.sgd.mom,
			   op->p.sgd.wd, op->p.sgd.nesterov);
	return 0;
}

static int rf__cpu_adamw(struct rf__op *op)
{
	struct rf_adamw_params p = rf__adamw_p(op);

	rf__k_adamw(D(op->o.adamw.w), D(op->o.adamw.m), D(op->o.adamw.v), C(op->o.adamw.g),
		    op->p.adamw.n, &p);
	return 0;
}

static int rf__cpu_axpy(struct rf__op *op)
{
	rf__k_axpy(D(op->o.axpy.y), op->p.axpy.a, C(op->o.axpy.x), op->p.axpy.n);
	return 0;
}

static int rf__cpu_scale(struct rf__op *op)
{
	rf__k_scale(D(op->o.scale.x), op->p.axpy.a, op->p.axpy.n);
	return 0;
}

static int rf__cpu_sum(struct rf__op *op)
{
	const float *in[RF__OP_SUM_MAX];
	int k = op->p.sum.k;

	for (int i = 0; i < k; i++)
		in[i] = op->p.sum.in[i].data;
	rf__k_reduce_sum(D(op->o.sum.out), in, k, op->p.sum.n);
	return 0;
}

static int rf__cpu_fill(struct rf__op *op)
{
	rf__fill_any(op->o.fill.x.data, op->p.fill.n, op->p.fill.v, op->o.fill.x.dtype);
	return 0;
}

static int rf__cpu_u8_f32(struct rf__op *op)
{
	rf__k_u8_norm(D(op->o.dec.out), op->o.dec.in.data, op->p.dec.n, &op->p.dec.nm);
	return 0;
}

static int rf__cpu_u8_i32(struct rf__op *op)
{
	rf__k_u8_to_i32(op->o.dec.out.data, op->o.dec.in.data, op->p.dec.n);
	return 0;
}

/* philox.c: the generator is the op's written variable: it is advanced here */
static int rf__cpu_rand(struct rf__op *op)
{
	struct rf_prng *g = op->p.rand.g;

	if (op->code == RF__OP_RAND_UNIFORM)
		rf__k_rand_uniform(D(op->o.rand.x), op->p.rand.n, g->seed, g->counter, op->p.rand.a,
				   op->p.rand.b);
	else
		rf__k_rand_normal(D(op->o.rand.x), op->p.rand.n, g->seed, g->counter, op->p.rand.a,
				  op->p.rand.b);
	g->counter += op->p.rand.n;
	return 0;
}

/* convert.c, memcpy and the host op's own function: any dtype and layout */
static int rf__cpu_convert(struct rf__op *op)
{
	const struct rf__tref *d = &op->o.convert.dst, *s = &op->o.convert.src;
	int ret = rf__convert_host(d->data, d->dtype, d->layout, s->data, s->dtype, s->layout,
				   s->ndim, s->shape);

	if (ret < 0)
		snprintf(op->err, sizeof(op->err), "cannot convert %s to %s",
			 rf_tdtype_name(s->dtype), rf_tdtype_name(d->dtype));
	return ret;
}

static int rf__cpu_copy(struct rf__op *op)
{
	if (op->p.copy.bytes && op->o.copy.dst.data != op->o.copy.src.data)
		memcpy(op->o.copy.dst.data, op->o.copy.src.data, op->p.copy.bytes);
	return 0;
}

static int rf__cpu_host(struct rf__op *op)
{
	return op->p.host.fn(op->p.host.arg);
}

static int (*const rf__cpu_fns[RF__OP_COUNT])(struct rf__op *op) = {
	[RF__OP_GEMM] = rf__cpu_gemm,
	[RF__OP_BIAS_ADD] = rf__cpu_bias_add,
	[RF__OP_BIAS_GRAD] = rf__cpu_bias_grad,
	[RF__OP_RELU_FWD] = rf__cpu_relu_fwd,
	[RF__OP_RELU_BWD] = rf__cpu_relu_bwd,
	[RF__OP_XENT] = rf__cpu_xent,
	[RF__OP_CONV_FWD] = rf__cpu_conv_fwd,
	[RF__OP_CONV_BWD_DATA] = rf__cpu_conv_bwd_data,
	[RF__OP_CONV_BWD_FILTER] = rf__cpu_conv_bwd_filter,
	[RF__OP_CONV_BWD_FILTER_POOL_RELU] = rf__cpu_conv_bwd_filter_pr,
	[RF__OP_AVGPOOL_FWD] = rf__cpu_avgpool_fwd,
	[RF__OP_AVGPOOL_BWD] = rf__cpu_avgpool_bwd,
	[RF__OP_RELU_AVGPOOL2_FWD] = rf__cpu_relu_avgpool2_fwd,
	[RF__OP_AVGPOOL2_RELU_BWD] = rf__cpu_avgpool2_relu_bwd,
	[RF__OP_MAXPOOL_FWD] = rf__cpu_maxpool_fwd,
	[RF__OP_MAXPOOL_BWD] = rf__cpu_maxpool_bwd,
	[RF__OP_GAP_FWD] = rf__cpu_gap_fwd,
	[RF__OP_GAP_BWD] = rf__cpu_gap_bwd,
	[RF__OP_BN_TRAIN] = rf__cpu_bn_train,
	[RF__OP_BN_EVAL] = rf__cpu_bn_eval,
	[RF__OP_BN_BWD] = rf__cpu_bn_bwd,
	[RF__OP_BN_RELU_TRAIN] = rf__cpu_bn_train,
	[RF__OP_BN_RELU_EVAL] = rf__cpu_bn_eval,
	[RF__OP_BN_RELU_BWD] = rf__cpu_bn_bwd,
	[RF__OP_SGD] = rf__cpu_sgd,
	[RF__OP_SGD_MOMENTUM] = rf__cpu_sgd_momentum,
	[RF__OP_ADAMW] = rf__cpu_adamw,
	[RF__OP_AXPY] = rf__cpu_axpy,
	[RF__OP_SCALE] = rf__cpu_scale,
	[RF__OP_SUM] = rf__cpu_sum,
	[RF__OP_ADD_RELU] = rf__cpu_add_relu,
	[RF__OP_FILL] = rf__cpu_fill,
	[RF__OP_U8_F32] = rf__cpu_u8_f32,
	[RF__OP_U8_I32] = rf__cpu_u8_i32,
	[RF__OP_RAND_UNIFORM] = rf__cpu_rand,
	[RF__OP_RAND_NORMAL] = rf__cpu_rand,
	[RF__OP_CONVERT] = rf__cpu_convert,
	[RF__OP_COPY] = rf__cpu_copy,
	[RF__OP_HOST] = rf__cpu_host,
};

/* The op on f32 row-major operands (and its fixed-dtype ones). */
static int rf__cpu_run(struct rf__op *op)
{
	if ((unsigned)op->code >= RF__OP_COUNT || !rf__cpu_fns[op->code])
		return -ENOSYS;
	return rf__cpu_fns[op->code](op);
}

/* The reference path: every staged operand through f32 row-major scratch. */
static int rf__cpu_staged(struct rf__op *op)
{
	struct rf__tref sum_in[RF__OP_SUM_MAX];
	struct rf__op tmp = *op;
	char *ws = op->ws;
	size_t used = 0;
	int ret;

	if (op->code == RF__OP_SUM) {
		memcpy(sum_in, op->p.sum.in, (size_t)op->p.sum.k * sizeof(sum_in[0]));
		tmp.p.sum.in = sum_in;
	}
	for (unsigned i = 0; i < op->nt; i++) {
		struct rf__tref *t = rf__op_t(&tmp, i);
		if (!rf__staged(t))
			continue;
		if (!ws || used + rf__stage_round(t->numel * sizeof(float)) > op->ws_bytes) {
			snprintf(op->err, sizeof(op->err), "no workspace for the f32 copy of %s",
				 rf__op_tname(op, i));
			return -EINVAL;
		}
		/* written operands are read too (accumulation, in place): all go in */
		ret = rf__convert_host(ws + used, RF_F32, RF_LAYOUT_ROWMAJOR, t->data, t->dtype,
				       t->layout, t->ndim, t->shape);
		if (ret < 0)
			return ret;
		t->data = ws + used;
		t->dtype = RF_F32;
		t->layout = RF_LAYOUT_ROWMAJOR;
		used += rf__stage_round(t->numel * sizeof(float));
	}
	tmp.ws = ws ? ws + used : NULL;
	tmp.ws_bytes = op->ws_bytes - used;
	ret = rf__cpu_run(&tmp);
	memcpy(op->err, tmp.err, sizeof(op->err));
	for (unsigned i = 0; ret == 0 && i < op->nt; i++) {
		const struct rf__tref *t = rf__op_t(op, i);
		if (rf__staged(t) && rf__op_writes(op, i))
			ret = rf__convert_host(t->data, t->dtype, t->layout, rf__op_t(&tmp, i)->data,
					       RF_F32, RF_LAYOUT_ROWMAJOR, t->ndim, t->shape);
	}
	return ret;
}

/* The kernels are built without ThreadSanitizer's instrumentation (meson.build): the
 * op's operands are declared to it here, each whole, as the signature reads or writes
 * it, and the workspace as written, before the kernel touches them (rf__tsan_read in
 * rf-internal.h). Another op's access to the same memory that the engine did not
 * order against this one is reported as a race, as it was when every load and store
 * of the kernel was checked (test-tsan-operands). */
static void rf__cpu_tsan_operands(struct rf__op *op)
{
#ifndef __SANITIZE_THREAD__
	(void)op; /* nothing to declare: no per-op work outside the TSan build */
#else
	for (unsigned i = 0; i < op->nt; i++) {
		const struct rf__tref *t = rf__op_tc(op, i);
		size_t n = t->data && t->dtype ? t->numel * rf_tdtype_size(t->dtype) : 0;
		if (rf__op_writes(op, i))
			rf__tsan_write(t->data, n);
		else
			rf__tsan_read(t->data, n);
	}
	/* the workspace is the op's own block of the device's caching allocator (a size
	 * class, whole): its first and last lines are enough for two live ops handed one
	 * block to collide, and declaring all of it (an im2col buffer of tens of MB,
	 * mostly unused by a small batch) was most of TSan's cost in some ops */
	if (op->ws && op->ws_bytes) {
		size_t n = op->ws_bytes < 64 ? op->ws_bytes : 64;
		rf__tsan_write(op->ws, n);
		rf__tsan_write((char *)op->ws + op->ws_bytes - n, n);
	}
#endif
}

int rf__cpu_compute(struct rf_device *d, struct rf__dstream *ds, struct rf__op *op)
{
	(void)d;
	(void)ds;
	int ret;

	rf__cpu_tsan_operands(op);
	rf__par_busy(1); /* a core taken: helpers join kernels only on the others */
	if (!rf__any_format(op->code) && rf__stage_bytes(op))
		ret = rf__cpu_staged(op);
	else
		ret = rf__cpu_run(op);
	rf__par_busy(-1);
	return ret;
}
