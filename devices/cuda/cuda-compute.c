/* devices/cuda/cuda-compute.c -- the CUDA backend's ops: what it runs (f32 row-major
 * tensors; batch norm of NHWC tensors by our kernels, of NCHW ones and max and global
 * pooling through cuDNN; conversions in any float dtype and layout), the workspace it
 * wants, and each opcode to its kernel
 * (kernels_cuda.cu), cuBLAS GEMM or cuDNN call, queued on the op's CUDA stream (cuda.c
 * runs it from the stream's enqueue). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda-impl.h"
#include "cuda-rules.h"
#include "kernels-cuda-impl.h"
#if RF_HAVE_CUDNN
#include "cudnn-impl.h"
#endif

/* ---- what it runs (cuda-rules.c) ----------------------------------------------------- */

int rf__cuda_supports(const struct rf_device *d, const struct rf__op *op, char *why, size_t len)
{
	const char *dnn = NULL;
	int dnn_ok = rf__cuda_dnn_ok(&dnn);
	const struct rf__cuda_dev *cd = d ? d->ctx : NULL;  /* NULL: the kind, no device */

	return rf__cuda_rule_supports(op, dnn_ok, dnn, why, len) &&
	       rf__cuda_rule_cc(op, cd ? cd->cc : 0, why, len);
}

size_t rf__cuda_workspace(const struct rf_device *d, const struct rf__op *op, int min)
{
	(void)d;
	if (rf__cuda_bn_ours(op))
		return rf__cuda_bn_ws(op);
	if (rf__cuda_bias_grad_ours(op))   /* NHWC: cuDNN or refused, never im2col */
		return rf__cuda_bias_grad_ws(op);
	switch (op->code) {
	case RF__OP_CONV_FWD:
	case RF__OP_CONV_BWD_DATA:
	case RF__OP_CONV_BWD_FILTER:
		/* cuDNN's plans use the stream's workspace; without cuDNN, im2col's */
		if (rf__cuda_dnn_ok(NULL))
			return 0;
		return min ? rf__kc_conv2d_workspace_min(&op->p.conv.s)
			   : rf__kc_conv2d_workspace_size(&op->p.conv.s);
	case RF__OP_MAXPOOL_BWD:
		/* cuDNN's backward wants the forward's y, which the op recomputes here */
		return op->o.maxpool_bwd.dy.numel * rf_tdtype_size(op->o.maxpool_bwd.dy.dtype);
	case RF__OP_BN_RELU_BWD:
		/* dy masked by y > 0, which cuDNN's backward then reads */
		return op->o.bn_relu_bwd.dy.numel * rf_tdtype_size(op->o.bn_relu_bwd.dy.dtype);
	default:
		return 0;
	}
}

/* im2col's workspace where a plan has no algorithm: taken now, given back with op. */
static int rf__im2col_ws(struct rf_device *d, struct rf__op *op)
{
	size_t want = rf__kc_conv2d_workspace_size(&op->p.conv.s);
	size_t min = rf__kc_conv2d_workspace_min(&op->p.conv.s);

	if (op->ws && op->ws_bytes >= min)
		return 0;
	if (want && rf__cache_alloc(&d->mem, want, &op->ws) == 0) {
		op->ws_bytes = want;
		return 0;
	}
	if (min && rf__cache_alloc(&d->mem, min, &op->ws) == 0) {
		op->ws_bytes = min;
		return 0;
	}
	op->ws = NULL;
	snprintf(op->err, sizeof(op->err), "im2col: no device memory for its %zu-byte "
		 "workspace", min);
	return -ENOMEM;
}

/* A bf16 or f16 convolution's bias (grad 0: y += b) or its gradient (grad 1: db (+)= the
 * sum of dy) by our kernel: cuDNN's cudnnAddTensor and cudnnConvolutionBackwardBias
 * need not take 16-bit tensors, and ours are deterministic in any layout. 0 or -EIO
 * with op->err set. */
int rf__cuda_bias4(struct rf__cuda_stream *c, struct rf__op *op, int grad, void *y, const void *b,
		   int acc)
{
	const struct rf__conv2d *s = &op->p.conv.s;
	const struct rf__tref *ref = grad ? &op->o.conv_bwd_filter.dy : &op->o.conv_fwd.y;
	size_t hw = (size_t)rf__conv2d_oh(s) * (size_t)rf__conv2d_ow(s);
	int ret = rf__kc_bias4_h(c->cs, grad, (int)ref->dtype, ref->layout == RF_LAYOUT_NHWC, y,
				 b, s->n, s->o, hw, acc);

	if (ret < 0) {
		snprintf(op->err, sizeof(op->err), "%s: the bias%s: %s", op->name,
			 grad ? "'s gradient" : "", rf__kc_error_string(ret));
		return -EIO;
	}
	return 0;
}

/* An NHWC convolution's bias gradient by our column sum (cuda-rules.h), the op's
 * workspace its partial sums. 0 or -EIO / -EINVAL with op->err set. */
int rf__cuda_bias_grad(struct rf__cuda_stream *c, struct rf__op *op)
{
	const struct rf__conv2d *s = &op->p.conv.s;
	const int64_t M = (int64_t)s->n * rf__conv2d_oh(s) * rf__conv2d_ow(s);
	int ret;

	if (op->o.conv_bwd_filter.db.dtype != op->o.conv_bwd_filter.dy.dtype) {
		snprintf(op->err, sizeof(op->err), "%s: db is %s and dy %s: the bias's gradient "
			 "takes one dtype", op->name, rf_tdtype_name(op->o.conv_bwd_filter.db.dtype),
			 rf_tdtype_name(op->o.conv_bwd_filter.dy.dtype));
		return -EINVAL;
	}
	if (!M || !s->o)        /* cuDNN's path refuses empty shapes before it gets here */
		return 0;
	ret = rf__kc_colsum_nhwc(c->cs, (int)op->o.conv_bwd_filter.dy.dtype,
				 op->o.conv_bwd_filter.db.data, op->o.conv_bwd_filter.dy.data, M,
				 s->o, op->p.conv.acc, op->ws, op->ws ? op->ws_bytes : 0);
	if (ret < 0)
		snprintf(op->err, sizeof(op->err), "%s: the bias's gradient over %lld rows x %d "
			 "channels: %s (a workspace of %zu bytes, %zu wanted)", op->name,
			 (long long)M, s->o, ret == -EINVAL ? "refused" : rf__kc_error_string(ret),
			 op->ws ? op->ws_bytes : 0, rf__cuda_bias_grad_ws(op));
	return ret == -EINVAL ? -EINVAL : ret < 0 ? -EIO : 0;
}

/* ---- running it --------------------------------------------------------------------- */

/* A convolution's path (cuda-rules.h): cuDNN's plan where cuDNN is loaded and has one
 * (1, ret its result); else im2col + cuBLAS, only on the operands it computes and only
 * where the device allows a fallback, with its workspace taken now (0: the caller runs
 * it); else an error naming the op (1, ret < 0). */
static int rf__conv_by_dnn(struct rf__cuda_stream *c, struct rf__op *op, int *ret)
{
	struct rf__cuda_dev *cd = c->dev->ctx;
	int dnn = rf__cuda_dnn_ok(NULL), no = 0;

#if RF_HAVE_CUDNN
	if (dnn) {
		if ((*ret = rf__dnn_conv(c, op)) != -ENOTSUP)
			return 1;
		no = 1;
	}
#endif
	if (rf__cuda_conv_path(op, dnn, no, rf__cuda_fallback_allowed(c->dev), op->err,
			       sizeof(op->err)) == RF__CONV_REFUSE) {
		*ret = -ENOTSUP;
		return 1;
	}
	if (dnn && !rf__cuda_conv_empty(op))   /* an empty shape is no fallback */
		cd->fallbacks++;
	*ret = rf__im2col_ws(c->dev, op);
	return *ret < 0;
}

#define D(t) ((float *)(t).data)
#define C(t) ((const float *)(t).data)

/* ---- each op to its launch ----------------------------------------------------------
 * One function per opcode, queued on c's stream: grouped by what it calls (the
 * kernels of kernels_cuda.cu, kernels_cuda_half.cu, kernels_cuda_optim.cu and
 * kernels_cuda_convert.cu, cuBLAS, cuDNN); rf__cuda_fns indexes them by opcode. 0 or
 * a negative code (op->err may say more). */

/* cuBLAS */
static int rf__cu_gemm(struct rf__cuda_stream *c, struct rf__op *op)
{
	int m = op->p.gemm.m, n = op->p.gemm.n, k = op->p.gemm.k;
	int lda = op->p.gemm.ta ? m : k;
	int ldb = op->p.gemm.tb ? k : n;

	return rf__kc_gemm_ex(c->blas, op->p.gemm.ta, op->p.gemm.tb, m, n, k, op->p.gemm.alpha,
			      op->o.gemm.a.data, (int)op->o.gemm.a.dtype, lda > 0 ? lda : 1,
			      op->o.gemm.b.data, (int)op->o.gemm.b.dtype, ldb > 0 ? ldb : 1,
			      op->p.gemm.beta, op->o.gemm.c.data, (int)op->o.gemm.c.dtype,
			      n > 0 ? n : 1,
			      rf__cuda_gemm_call(op->o.gemm.a.dtype, op->o.gemm.b.dtype,
						 op->o.gemm.c.dtype, op->math == RF__MATH_TF32));
}

/* layers: f32 kernels, and the 16-bit ones (kernels_cuda_half.cu) for other dtypes */
static int rf__cu_bias_add(struct rf__cuda_stream *c, struct rf__op *op)
{
	return rf__kc_bias_add(c->cs, D(op->o.bias_add.y), C(op->o.bias_add.b), op->p.bias.rows,
			       op->p.bias.cols);
}

static int rf__cu_bias_grad(struct rf__cuda_stream *c, struct rf__op *op)
{
	return rf__kc_bias_grad(c->cs, D(op->o.bias_grad.db), C(op->o.bias_grad.dy),
				op->p.bias.rows, op->p.bias.cols, op->p.bias.acc);
}

static int rf__cu_relu_fwd(struct rf__cuda_stream *c, struct rf__op *op)
{
	if (op->o.relu_fwd.y.dtype != RF_F32)
		return rf__kc_relu_fwd_h(c->cs, (int)op->o.relu_fwd.y.dtype, op->o.relu_fwd.y.data,
					 op->o.relu_fwd.x.data, op->p.ew.n);
	return rf__kc_relu_fwd(c->cs, D(op->o.relu_fwd.y), C(op->o.relu_fwd.x), op->p.ew.n);
}

static int rf__cu_add_relu(struct rf__cuda_stream *c, struct rf__op *op)
{
	if (op->o.add_relu.y.dtype != RF_F32)
		return rf__kc_add_relu_h(c->cs, (int)op->o.add_relu.y.dtype, op->o.add_relu.y.data,
					 op->o.add_relu.a.data, op->o.add_relu.b.data, op->p.ew.n);
	return rf__kc_add_relu(c->cs, D(op->o.add_relu.y), C(op->o.add_relu.a),
			       C(op->o.add_relu.b), op->p.ew.n);
}

static int rf__cu_relu_bwd(struct rf__cuda_stream *c, struct rf__op *op)
{
	if (op->o.relu_bwd.dx.dtype != RF_F32)
		return rf__kc_relu_bwd_h(c->cs, (int)op->o.relu_bwd.dx.dtype, op->o.relu_bwd.dx.data,
					 op->o.relu_bwd.dy.data, op->o.relu_bwd.y.data, op->p.ew.n);
	return rf__kc_relu_bwd(c->cs, D(op->o.relu_bwd.dx), C(op->o.relu_bwd.dy),
			       C(op->o.relu_bwd.y), op->p.ew.n);
}

static int rf__cu_xent(struct rf__cuda_stream *c, struct rf__op *op)
{
	return rf__kc_softmax_xent(c->cs, D(op->o.xent.dlogits), D(op->o.xent.loss),
				   op->o.xent.correct.data, C(op->o.xent.logits),
				   op->o.xent.labels.data, op->p.xent.rows, op->p.xent.cols);
}

/* (out, in): f32 row-major by the f32 kernels, any other format by one kernel that
 * reads each dtype and layout as it is (supports_op: x and y alike) */
static int rf__cu_avgpool(struct rf__cuda_stream *c, struct rf__op *op)
{
	const struct rf__tref *o = &op->o.t[0], *in = &op->o.t[1];
	int bwd = op->code == RF__OP_AVGPOOL_BWD;

	if (o->dtype != RF_F32 || o->layout != RF_LAYOUT_ROWMAJOR)
		return rf__kc_avgpool2d_h(c->cs, bwd, (int)o->dtype, o->layout == RF_LAYOUT_NHWC,
					  o->data, in->data, op->p.pool.n, op->p.pool.c,
					  op->p.pool.h, op->p.pool.w, op->p.pool.k);
	if (bwd)
		return rf__kc_avgpool2d_bwd(c->cs, D(*o), C(*in), op->p.pool.n, op->p.pool.c,
					    op->p.pool.h, op->p.pool.w, op->p.pool.k);
	return rf__kc_avgpool2d_fwd(c->cs, D(*o), C(*in), op->p.pool.n, op->p.pool.c,
				    op->p.pool.h, op->p.pool.w, op->p.pool.k);
}

/* cuDNN's plan, else im2col + cuBLAS (rf__conv_by_dnn) */
static int rf__cu_conv_fwd(struct rf__cuda_stream *c, struct rf__op *op)
{
	int ret;

	if (rf__conv_by_dnn(c, op, &ret))
		return ret;
	return rf__kc_conv2d_fwd(c->cs, c->blas, &op->p.conv.s, D(op->o.conv_fwd.y),
				 C(op->o.conv_fwd.x), C(op->o.conv_fwd.w), C(op->o.conv_fwd.b),
				 op->ws, op->ws_bytes);
}

static int rf__cu_conv_bwd_data(struct rf__cuda_stream *c, struct rf__op *op)
{
	int ret;

	if (rf__conv_by_dnn(c, op, &ret))
		return ret;
	return rf__kc_conv2d_bwd_data(c->cs, c->blas, &op->p.conv.s, D(op->o.conv_bwd_data.dx),
				      C(op->o.conv_bwd_data.dy), C(op->o.conv_bwd_data.w), op->ws,
				      op->ws_bytes);
}

static int rf__cu_conv_bwd_filter(struct rf__cuda_stream *c, struct rf__op *op)
{
	int ret;

	if (rf__conv_by_dnn(c, op, &ret))
		return ret;
	return rf__kc_conv2d_bwd_filter(c->cs, c->blas, &op->p.conv.s,
					D(op->o.conv_bwd_filter.dw), D(op->o.conv_bwd_filter.db),
					C(op->o.conv_bwd_filter.dy), C(op->o.conv_bwd_filter.x),
					op->p.conv.acc, op->ws, op->ws_bytes);
}

/* batch norm of NHWC tensors: our kernels (kernels_cuda_norm.cu; the rule in
 * cuda-rules.c), the op's workspace their partial sums */
static int rf__cu_bn_nhwc(struct rf__cuda_stream *c, struct rf__op *op)
{
	const struct rf__bn *s = &op->p.bn.s;
	const int64_t M = (int64_t)s->n * op->p.bn.h * op->p.bn.w;
	const int dt = (int)op->o.t[0].dtype;
	int ret;

	if (!M || !s->c)        /* as on the CPU: no element to write */
		return 0;
	switch (op->code) {
	case RF__OP_BN_TRAIN: case RF__OP_BN_RELU_TRAIN:
		ret = rf__kc_bn_nhwc_train(c->cs, dt, op->o.bn_train.y.data, op->o.bn_train.x.data,
					   D(op->o.bn_train.gamma), D(op->o.bn_train.beta),
					   D(op->o.bn_train.mean), D(op->o.bn_train.invstd),
					   D(op->o.bn_train.run_mean), D(op->o.bn_train.run_var), M,
					   s->c, s->eps, s->momentum,
					   op->code == RF__OP_BN_RELU_TRAIN, op->ws, op->ws_bytes);
		break;
	case RF__OP_BN_EVAL: case RF__OP_BN_RELU_EVAL:
		ret = rf__kc_bn_nhwc_eval(c->cs, dt, op->o.bn_eval.y.data, op->o.bn_eval.x.data,
					  D(op->o.bn_eval.gamma), D(op->o.bn_eval.beta),
					  D(op->o.bn_eval.run_mean), D(op->o.bn_eval.run_var), M, s->c,
					  s->eps, op->code == RF__OP_BN_RELU_EVAL, op->ws, op->ws_bytes);
		break;
	default:                /* the backward, with the forward's y for its ReLU */
		ret = rf__kc_bn_nhwc_bwd(c->cs, dt, op->o.bn_bwd.dx.data, D(op->o.bn_bwd.dgamma),
					 D(op->o.bn_bwd.dbeta), op->o.bn_bwd.dy.data,
					 op->code == RF__OP_BN_RELU_BWD ? op->o.bn_relu_bwd.y.data
									: NULL,
					 op->o.bn_bwd.x.data, D(op->o.bn_bwd.mean),
					 D(op->o.bn_bwd.invstd), D(op->o.bn_bwd.gamma), M, s->c, op->ws,
					 op->ws_bytes);
		break;
	}
	if (ret == -EINVAL)
		snprintf(op->err, sizeof(op->err), "%s: NHWC batch norm of %lld rows x %d channels: "
			 "a bad shape, eps %g or a workspace of %zu bytes (expected %zu)", op->name,
			 (long long)M, s->c, (double)s->eps, op->ws ? op->ws_bytes : 0,
			 rf__cuda_bn_ws(op));
	return ret;
}

/* batch norm (NCHW), max and global pooling: cuDNN (cudnn.c) */
static int rf__cu_dnn_norm(struct rf__cuda_stream *c, struct rf__op *op)
{
	if (rf__cuda_bn_ours(op))
		return rf__cu_bn_nhwc(c, op);
#if RF_HAVE_CUDNN
	return rf__dnn_norm(c, op);
#else
	(void)c;
	(void)op;
	return -ENOSYS;
#endif
}

/* optimisers (kernels_cuda_optim.cu) and vector ops */
static int rf__cu_sgd(struct rf__cuda_stream *c, struct rf__op *op)
{
	return rf__kc_sgd(c->cs, D(op->o.sgd.w), C(op->o.sgd.g), op->p.sgd.n, rf__sgd_lr(op),
			  op->p.sgd.wd);
}

static int rf__cu_sgd_momentum(struct rf__cuda_stream *c, struct rf__op *op)
{
	return rf__kc_sgd_momentum(c->cs, D(op->o.sgd_momentum.w), D(op->o.sgd_momentum.v),
				   C(op->o.sgd_momentum.g), op->p.sgd.n, rf__sgd_lr(op),
				   op->p.sgd.mom, op->p.sgd.wd, op->p.sgd.nesterov);
}

static int rf__cu_adamw(struct rf__cuda_stream *c, struct rf__op *op)
{
	struct rf_adamw_params p = rf__adamw_p(op);

	return rf__kc_adamw(c->cs, D(op->o.adamw.w), D(op->o.adamw.m), D(op->o.adamw.v),
			    C(op->o.adamw.g), op->p.adamw.n, &p);
}

static int rf__cu_axpy(struct rf__cuda_stream *c, struct rf__op *op)
{
	if (op->o.axpy.y.dtype != RF_F32)
		return rf__kc_axpy_h(c->cs, (int)op->o.axpy.y.dtype, op->o.axpy.y.data,
				     op->p.axpy.a, op->o.axpy.x.data, op->p.axpy.n);
	return rf__kc_axpy(c->cs, D(op->o.axpy.y), op->p.axpy.a, C(op->o.axpy.x), op->p.axpy.n);
}

static int rf__cu_scale(struct rf__cuda_stream *c, struct rf__op *op)
{
	if (op->o.scale.x.dtype != RF_F32)
		return rf__kc_scale_h(c->cs, (int)op->o.scale.x.dtype, op->o.scale.x.data,
				      op->p.axpy.a, op->p.axpy.n);
	return rf__kc_scale(c->cs, D(op->o.scale.x), op->p.axpy.a, op->p.axpy.n);
}

static int rf__cu_sum(struct rf__cuda_stream *c, struct rf__op *op)
{
	const float *in[RF__OP_SUM_MAX];

	for (int i = 0; i < op->p.sum.k; i++)
		in[i] = op->p.sum.in[i].data;
	if (op->o.sum.out.dtype != RF_F32)
		return rf__kc_sum_h(c->cs, (int)op->o.sum.out.dtype, op->o.sum.out.data,
				    (const void *const *)in, op->p.sum.k, op->p.sum.n);
	return rf__kc_reduce_sum(c->cs, D(op->o.sum.out), in, op->p.sum.k, op->p.sum.n);
}

static int rf__cu_fill(struct rf__cuda_stream *c, struct rf__op *op)
{
	const struct rf__tref *x = &op->o.fill.x;
	uint32_t bits;
	unsigned w = rf__fill_bits(x->dtype, op->p.fill.v, &bits);

	/* the CPU's bits in every dtype (rf__fill_bits) */
	return rf__kc_fill(c->cs, x->data, w, bits, op->p.fill.n);
}

static int rf__cu_u8_f32(struct rf__cuda_stream *c, struct rf__op *op)
{
	if (op->o.dec.out.dtype == RF_F32 && op->o.dec.out.layout == RF_LAYOUT_ROWMAJOR)
		return rf__kc_u8_to_f32(c->cs, D(op->o.dec.out), op->o.dec.in.data, op->p.dec.n,
					&op->p.dec.nm);
	/* straight into bf16/f16 or NHWC: one kernel, no f32 copy */
	return rf__kc_u8_decode(c->cs, op->o.dec.out.data, (int)op->o.dec.out.dtype,
				op->o.dec.out.layout == RF_LAYOUT_NHWC, op->o.dec.in.data,
				op->o.dec.out.ndim, op->o.dec.out.shape, &op->p.dec.nm);
}

static int rf__cu_u8_i32(struct rf__cuda_stream *c, struct rf__op *op)
{
	return rf__kc_u8_to_i32(c->cs, op->o.dec.out.data, op->o.dec.in.data, op->p.dec.n);
}

/* the generator is the op's written variable: advanced here once queued */
static int rf__cu_rand(struct rf__cuda_stream *c, struct rf__op *op)
{
	struct rf_prng *g = op->p.rand.g;
	int ret;

	if (op->code == RF__OP_RAND_UNIFORM)
		ret = rf__kc_rand_uniform(c->cs, D(op->o.rand.x), op->p.rand.n, g->seed, g->counter,
					  op->p.rand.a, op->p.rand.b);
	else
		ret = rf__kc_rand_normal(c->cs, D(op->o.rand.x), op->p.rand.n, g->seed, g->counter,
					 op->p.rand.a, op->p.rand.b);
	if (ret == 0)
		g->counter += op->p.rand.n;
	return ret;
}

/* kernels_cuda_convert.cu, and the copy engine */
static int rf__cu_convert(struct rf__cuda_stream *c, struct rf__op *op)
{
	const struct rf__tref *dt = &op->o.convert.dst, *sr = &op->o.convert.src;

	return rf__kc_convert(c->cs, dt->data, (int)dt->dtype, dt->layout == RF_LAYOUT_NHWC,
			      sr->data, (int)sr->dtype, sr->layout == RF_LAYOUT_NHWC, sr->ndim,
			      sr->shape);
}

static int rf__cu_copy(struct rf__cuda_stream *c, struct rf__op *op)
{
	if (!op->p.copy.bytes)
		return 0;
	return rf__cuerr(cudaMemcpyAsync(op->o.copy.dst.data, op->o.copy.src.data,
					 op->p.copy.bytes, cudaMemcpyDefault, c->cs));
}

static int (*const rf__cuda_fns[RF__OP_COUNT])(struct rf__cuda_stream *c, struct rf__op *op) = {
	[RF__OP_GEMM] = rf__cu_gemm,
	[RF__OP_BIAS_ADD] = rf__cu_bias_add,
	[RF__OP_BIAS_GRAD] = rf__cu_bias_grad,
	[RF__OP_RELU_FWD] = rf__cu_relu_fwd,
	[RF__OP_RELU_BWD] = rf__cu_relu_bwd,
	[RF__OP_XENT] = rf__cu_xent,
	[RF__OP_CONV_FWD] = rf__cu_conv_fwd,
	[RF__OP_CONV_BWD_DATA] = rf__cu_conv_bwd_data,
	[RF__OP_CONV_BWD_FILTER] = rf__cu_conv_bwd_filter,
	[RF__OP_AVGPOOL_FWD] = rf__cu_avgpool,
	[RF__OP_AVGPOOL_BWD] = rf__cu_avgpool,
	[RF__OP_MAXPOOL_FWD] = rf__cu_dnn_norm,
	[RF__OP_MAXPOOL_BWD] = rf__cu_dnn_norm,
	[RF__OP_GAP_FWD] = rf__cu_dnn_norm,
	[RF__OP_GAP_BWD] = rf__cu_dnn_norm,
	[RF__OP_BN_TRAIN] = rf__cu_dnn_norm,
	[RF__OP_BN_EVAL] = rf__cu_dnn_norm,
	[RF__OP_BN_BWD] = rf__cu_dnn_norm,
	[RF__OP_BN_RELU_TRAIN] = rf__cu_dnn_norm,
	[RF__OP_BN_RELU_EVAL] = rf__cu_dnn_norm,
	[RF__OP_BN_RELU_BWD] = rf__cu_dnn_norm,
	[RF__OP_SGD] = rf__cu_sgd,
	[RF__OP_SGD_MOMENTUM] = rf__cu_sgd_momentum,
	[RF__OP_ADAMW] = rf__cu_adamw,
	[RF__OP_AXPY] = rf__cu_axpy,
	[RF__OP_SCALE] = rf__cu_scale,
	[RF__OP_SUM] = rf__cu_sum,
	[RF__OP_ADD_RELU] = rf__cu_add_relu,
	[RF__OP_FILL] = rf__cu_fill,
	[RF__OP_U8_F32] = rf__cu_u8_f32,
	[RF__OP_U8_I32] = rf__cu_u8_i32,
	[RF__OP_RAND_UNIFORM] = rf__cu_rand,
	[RF__OP_RAND_NORMAL] = rf__cu_rand,
	[RF__OP_CONVERT] = rf__cu_convert,
	[RF__OP_COPY] = rf__cu_copy,
};

int rf__cuda_compute(struct rf_device *d, struct rf__dstream *ds, struct rf__op *op)
{
	struct rf__cuda_stream *c = ds ? ds->impl : NULL;
	int ret;

	(void)d;
	if (!c)
		return -EINVAL;
	if ((unsigned)op->code < RF__OP_COUNT && rf__cuda_fns[op->code])
		ret = rf__cuda_fns[op->code](c, op);
	else
		ret = -ENOSYS;
	if (ret < 0 && !op->err[0])
		snprintf(op->err, sizeof(op->err), "%s", rf__kc_error_string(ret));
	/* A failed op leaves no non-sticky error pending for the next launch's check:
	 * a refused memset or copy leaves one, and so can a cuBLAS or cuDNN call that
	 * reports its own status */
	if (ret < 0)
		(void)cudaGetLastError();
	return ret;
}
