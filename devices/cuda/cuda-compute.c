/* devices/cuda/cuda-compute.c -- the CUDA backend's ops: what it runs (f32 row-major
 * tensors; batch norm and max and global pooling through cuDNN; conversions in any
 * float dtype and layout), the workspace it wants, and each opcode to its kernel
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

	(void)d;
	return rf__cuda_rule_supports(op, dnn_ok, dnn, why, len);
}

size_t rf__cuda_workspace(const struct rf_device *d, const struct rf__op *op, int min)
{
	(void)d;
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
	if (dnn)
		cd->fallbacks++;
	*ret = rf__im2col_ws(c->dev, op);
	return *ret < 0;
}

#define D(t) ((float *)(t).data)
#define C(t) ((const float *)(t).data)

int rf__cuda_compute(struct rf_device *d, struct rf__dstream *ds, struct rf__op *op)
{
	struct rf__cuda_stream *c = ds ? ds->impl : NULL;
	void *st, *bl;
	int ret = 0;

	(void)d;
	if (!c)
		return -EINVAL;
	st = c->cs;
	bl = c->blas;
	switch (op->code) {
	case RF__OP_GEMM: {
		int m = op->p.gemm.m, n = op->p.gemm.n, k = op->p.gemm.k;
		int lda = op->p.gemm.ta ? m : k;
		int ldb = op->p.gemm.tb ? k : n;
		ret = rf__kc_gemm_ex(bl, op->p.gemm.ta, op->p.gemm.tb, m, n, k, op->p.gemm.alpha,
				     op->o.gemm.a.data, (int)op->o.gemm.a.dtype, lda > 0 ? lda : 1,
				     op->o.gemm.b.data, (int)op->o.gemm.b.dtype, ldb > 0 ? ldb : 1,
				     op->p.gemm.beta, op->o.gemm.c.data, (int)op->o.gemm.c.dtype,
				     n > 0 ? n : 1, op->math == RF__MATH_TF32);
		break;
	}
	case RF__OP_BIAS_ADD:
		ret = rf__kc_bias_add(st, D(op->o.bias_add.y), C(op->o.bias_add.b), op->p.bias.rows,
				      op->p.bias.cols);
		break;
	case RF__OP_BIAS_GRAD:
		ret = rf__kc_bias_grad(st, D(op->o.bias_grad.db), C(op->o.bias_grad.dy),
				       op->p.bias.rows, op->p.bias.cols, op->p.bias.acc);
		break;
	case RF__OP_RELU_FWD:
		if (op->o.relu_fwd.y.dtype != RF_F32)
			ret = rf__kc_relu_fwd_h(st, (int)op->o.relu_fwd.y.dtype, op->o.relu_fwd.y.data,
						op->o.relu_fwd.x.data, op->p.ew.n);
		else
			ret = rf__kc_relu_fwd(st, D(op->o.relu_fwd.y), C(op->o.relu_fwd.x), op->p.ew.n);
		break;
	case RF__OP_ADD_RELU:
		if (op->o.add_relu.y.dtype != RF_F32)
			ret = rf__kc_add_relu_h(st, (int)op->o.add_relu.y.dtype, op->o.add_relu.y.data,
						op->o.add_relu.a.data, op->o.add_relu.b.data,
						op->p.ew.n);
		else
			ret = rf__kc_add_relu(st, D(op->o.add_relu.y), C(op->o.add_relu.a),
					      C(op->o.add_relu.b), op->p.ew.n);
		break;
	case RF__OP_RELU_BWD:
		if (op->o.relu_bwd.dx.dtype != RF_F32)
			ret = rf__kc_relu_bwd_h(st, (int)op->o.relu_bwd.dx.dtype, op->o.relu_bwd.dx.data,
						op->o.relu_bwd.dy.data, op->o.relu_bwd.y.data,
						op->p.ew.n);
		else
			ret = rf__kc_relu_bwd(st, D(op->o.relu_bwd.dx), C(op->o.relu_bwd.dy),
					      C(op->o.relu_bwd.y), op->p.ew.n);
		break;
	case RF__OP_XENT:
		ret = rf__kc_softmax_xent(st, D(op->o.xent.dlogits), D(op->o.xent.loss),
					  op->o.xent.correct.data, C(op->o.xent.logits),
					  op->o.xent.labels.data, op->p.xent.rows, op->p.xent.cols);
		break;
	case RF__OP_BN_TRAIN: case RF__OP_BN_EVAL: case RF__OP_BN_BWD:
	case RF__OP_BN_RELU_TRAIN: case RF__OP_BN_RELU_EVAL: case RF__OP_BN_RELU_BWD:
	case RF__OP_MAXPOOL_FWD: case RF__OP_MAXPOOL_BWD:
	case RF__OP_GAP_FWD: case RF__OP_GAP_BWD:
#if RF_HAVE_CUDNN
		ret = rf__dnn_norm(c, op);
#else
		ret = -ENOSYS;
#endif
		break;
	case RF__OP_CONV_FWD:
		if (rf__conv_by_dnn(c, op, &ret))
			break;
		ret = rf__kc_conv2d_fwd(st, bl, &op->p.conv.s, D(op->o.conv_fwd.y),
					C(op->o.conv_fwd.x), C(op->o.conv_fwd.w), C(op->o.conv_fwd.b),
					op->ws, op->ws_bytes);
		break;
	case RF__OP_CONV_BWD_DATA:
		if (rf__conv_by_dnn(c, op, &ret))
			break;
		ret = rf__kc_conv2d_bwd_data(st, bl, &op->p.conv.s, D(op->o.conv_bwd_data.dx),
					     C(op->o.conv_bwd_data.dy), C(op->o.conv_bwd_data.w),
					     op->ws, op->ws_bytes);
		break;
	case RF__OP_CONV_BWD_FILTER:
		if (rf__conv_by_dnn(c, op, &ret))
			break;
		ret = rf__kc_conv2d_bwd_filter(st, bl, &op->p.conv.s, D(op->o.conv_bwd_filter.dw),
					       D(op->o.conv_bwd_filter.db),
					       C(op->o.conv_bwd_filter.dy), C(op->o.conv_bwd_filter.x),
					       op->p.conv.acc, op->ws, op->ws_bytes);
		break;
	case RF__OP_AVGPOOL_FWD:
	case RF__OP_AVGPOOL_BWD: {
		/* (out, in): f32 row-major by the f32 kernels, any other format by one kernel
		 * that reads each dtype and layout as it is (supports_op: x and y alike) */
		const struct rf__tref *o = &op->o.t[0], *in = &op->o.t[1];
		int bwd = op->code == RF__OP_AVGPOOL_BWD;
		if (o->dtype != RF_F32 || o->layout != RF_LAYOUT_ROWMAJOR)
			ret = rf__kc_avgpool2d_h(st, bwd, (int)o->dtype,
						 o->layout == RF_LAYOUT_NHWC, o->data, in->data,
						 op->p.pool.n, op->p.pool.c, op->p.pool.h, op->p.pool.w,
						 op->p.pool.k);
		else if (bwd)
			ret = rf__kc_avgpool2d_bwd(st, D(*o), C(*in), op->p.pool.n, op->p.pool.c,
						   op->p.pool.h, op->p.pool.w, op->p.pool.k);
		else
			ret = rf__kc_avgpool2d_fwd(st, D(*o), C(*in), op->p.pool.n, op->p.pool.c,
						   op->p.pool.h, op->p.pool.w, op->p.pool.k);
		break;
	}
	case RF__OP_SGD:
		ret = rf__kc_sgd(st, D(op->o.sgd.w), C(op->o.sgd.g), op->p.sgd.n, rf__sgd_lr(op),
				 op->p.sgd.wd);
		break;
	case RF__OP_SGD_MOMENTUM:
		ret = rf__kc_sgd_momentum(st, D(op->o.sgd_momentum.w), D(op->o.sgd_momentum.v),
					  C(op->o.sgd_momentum.g), op->p.sgd.n, rf__sgd_lr(op),
					  op->p.sgd.mom, op->p.sgd.wd, op->p.sgd.nesterov);
		break;
	case RF__OP_ADAMW: {
		struct rf_adamw_params p = rf__adamw_p(op);
		ret = rf__kc_adamw(st, D(op->o.adamw.w), D(op->o.adamw.m), D(op->o.adamw.v),
				   C(op->o.adamw.g), op->p.adamw.n, &p);
		break;
	}
	case RF__OP_AXPY:
		if (op->o.axpy.y.dtype != RF_F32)
			ret = rf__kc_axpy_h(st, (int)op->o.axpy.y.dtype, op->o.axpy.y.data, op->p.axpy.a,
					    op->o.axpy.x.data, op->p.axpy.n);
		else
			ret = rf__kc_axpy(st, D(op->o.axpy.y), op->p.axpy.a, C(op->o.axpy.x),
					  op->p.axpy.n);
		break;
	case RF__OP_SCALE:
		if (op->o.scale.x.dtype != RF_F32)
			ret = rf__kc_scale_h(st, (int)op->o.scale.x.dtype, op->o.scale.x.data,
					     op->p.axpy.a, op->p.axpy.n);
		else
			ret = rf__kc_scale(st, D(op->o.scale.x), op->p.axpy.a, op->p.axpy.n);
		break;
	case RF__OP_SUM: {
		const float *in[RF__OP_SUM_MAX];
		for (int i = 0; i < op->p.sum.k; i++)
			in[i] = op->p.sum.in[i].data;
		if (op->o.sum.out.dtype != RF_F32)
			ret = rf__kc_sum_h(st, (int)op->o.sum.out.dtype, op->o.sum.out.data,
					   (const void *const *)in, op->p.sum.k, op->p.sum.n);
		else
			ret = rf__kc_reduce_sum(st, D(op->o.sum.out), in, op->p.sum.k, op->p.sum.n);
		break;
	}
	case RF__OP_FILL: {
		const struct rf__tref *x = &op->o.fill.x;
		if (x->dtype == RF_F32)
			ret = rf__kc_fill(st, x->data, op->p.fill.v, op->p.fill.n);
		else /* u8, or zeros (supports_op) */
			ret = rf__cuerr(cudaMemsetAsync(x->data, (int)(uint8_t)op->p.fill.v,
							op->p.fill.n * rf_tdtype_size(x->dtype), c->cs));
		break;
	}
	case RF__OP_U8_F32:
		if (op->o.dec.out.dtype == RF_F32 && op->o.dec.out.layout == RF_LAYOUT_ROWMAJOR)
			ret = rf__kc_u8_to_f32(st, D(op->o.dec.out), op->o.dec.in.data, op->p.dec.n,
					       &op->p.dec.nm);
		else    /* straight into bf16/f16 or NHWC: one kernel, no f32 copy */
			ret = rf__kc_u8_decode(st, op->o.dec.out.data, (int)op->o.dec.out.dtype,
					       op->o.dec.out.layout == RF_LAYOUT_NHWC,
					       op->o.dec.in.data, op->o.dec.out.ndim,
					       op->o.dec.out.shape, &op->p.dec.nm);
		break;
	case RF__OP_U8_I32:
		ret = rf__kc_u8_to_i32(st, op->o.dec.out.data, op->o.dec.in.data, op->p.dec.n);
		break;
	case RF__OP_RAND_UNIFORM:
	case RF__OP_RAND_NORMAL: {
		struct rf_prng *g = op->p.rand.g;
		if (op->code == RF__OP_RAND_UNIFORM)
			ret = rf__kc_rand_uniform(st, D(op->o.rand.x), op->p.rand.n, g->seed,
						  g->counter, op->p.rand.a, op->p.rand.b);
		else
			ret = rf__kc_rand_normal(st, D(op->o.rand.x), op->p.rand.n, g->seed,
						 g->counter, op->p.rand.a, op->p.rand.b);
		if (ret == 0)
			g->counter += op->p.rand.n;
		break;
	}
	case RF__OP_CONVERT: {
		const struct rf__tref *dt = &op->o.convert.dst, *sr = &op->o.convert.src;
		ret = rf__kc_convert(st, dt->data, (int)dt->dtype, dt->layout == RF_LAYOUT_NHWC,
				     sr->data, (int)sr->dtype, sr->layout == RF_LAYOUT_NHWC, sr->ndim,
				     sr->shape);
		break;
	}
	case RF__OP_COPY:
		if (op->p.copy.bytes)
			ret = rf__cuerr(cudaMemcpyAsync(op->o.copy.dst.data, op->o.copy.src.data,
							op->p.copy.bytes, cudaMemcpyDefault, c->cs));
		break;
	default:
		ret = -ENOSYS;
	}
	if (ret < 0 && !op->err[0])
		snprintf(op->err, sizeof(op->err), "%s", rf__kc_error_string(ret));
	/* A failed op leaves no non-sticky error pending for the next launch's check:
	 * a refused memset or copy leaves one, and so can a cuBLAS or cuDNN call that
	 * reports its own status */
	if (ret < 0)
		(void)cudaGetLastError();
	return ret;
}
