/* devices/cuda/cuda-compute.c -- the CUDA device's compute hook: each op code of the
 * device layer to its kernel (kernels_cuda.cu), cuBLAS GEMM or cuDNN call, queued on
 * the op's CUDA stream (cuda.c runs it from the stream's enqueue). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda-impl.h"
#include "kernels-cuda-impl.h"
#if RF_HAVE_CUDNN
#include "cudnn-impl.h"
#endif

/* A convolution by cuDNN where it is loaded and has an algorithm for it (ret its
 * result, and true), else false: im2col and cuBLAS. */
#if RF_HAVE_CUDNN
#define RF__DNN(c, op, ret) \
	(rf__cuda_dnn_ok(NULL) && ((ret) = rf__dnn_conv(&(c)->dnn, (c)->cs, (op))) != -ENOTSUP)
#else
#define RF__DNN(c, op, ret) 0
#endif

int rf__cuda_compute(struct rf_device *d, struct rf__dstream *ds, struct rf__opctx *op)
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
	case RF__GEMM: {
		int lda = op->u.gemm.ta ? op->u.gemm.m : op->u.gemm.k;
		int ldb = op->u.gemm.tb ? op->u.gemm.k : op->u.gemm.n;
		ret = rf__kc_gemm(bl, op->u.gemm.ta, op->u.gemm.tb, op->u.gemm.m, op->u.gemm.n,
				 op->u.gemm.k, op->u.gemm.alpha, op->u.gemm.a, lda > 0 ? lda : 1,
				 op->u.gemm.b, ldb > 0 ? ldb : 1, op->u.gemm.beta, op->u.gemm.c,
				 op->u.gemm.n > 0 ? op->u.gemm.n : 1);
		break;
	}
	case RF__BIAS_ADD:
		ret = rf__kc_bias_add(st, op->u.bias.y, op->u.bias.b, op->u.bias.rows, op->u.bias.cols);
		break;
	case RF__BIAS_GRAD:
		ret = rf__kc_bias_grad(st, op->u.bias.y, op->u.bias.b, op->u.bias.rows,
				      op->u.bias.cols, op->u.bias.acc);
		break;
	case RF__RELU_FWD:
		ret = rf__kc_relu_fwd(st, op->u.ew.y, op->u.ew.x, op->u.ew.n);
		break;
	case RF__RELU_BWD:
		ret = rf__kc_relu_bwd(st, op->u.ew.y, op->u.ew.x, op->u.ew.aux, op->u.ew.n);
		break;
	case RF__XENT:
		ret = rf__kc_softmax_xent(st, op->u.xent.dlogits, op->u.xent.loss, op->u.xent.correct,
					 op->u.xent.logits, op->u.xent.labels, op->u.xent.rows,
					 op->u.xent.cols);
		break;
	case RF__NORM:
#if RF_HAVE_CUDNN
		ret = rf__dnn_norm(&c->dnn, c->cs, op);
#else
		ret = -ENOSYS;
#endif
		break;
	case RF__CONV_FWD:
		if (RF__DNN(c, op, ret))
			break;
		ret = rf__kc_conv2d_fwd(st, bl, &op->u.conv.s, op->u.conv.out, op->u.conv.in,
				       op->u.conv.in2, op->u.conv.in3, op->ws, op->ws_bytes);
		break;
	case RF__CONV_BWD_DATA:
		if (RF__DNN(c, op, ret))
			break;
		ret = rf__kc_conv2d_bwd_data(st, bl, &op->u.conv.s, op->u.conv.out, op->u.conv.in,
					    op->u.conv.in2, op->ws, op->ws_bytes);
		break;
	case RF__CONV_BWD_FILTER:
		if (RF__DNN(c, op, ret))
			break;
		ret = rf__kc_conv2d_bwd_filter(st, bl, &op->u.conv.s, op->u.conv.out, op->u.conv.out2,
					      op->u.conv.in, op->u.conv.in2, op->u.conv.acc, op->ws,
					      op->ws_bytes);
		break;
	case RF__POOL_FWD:
		ret = rf__kc_avgpool2d_fwd(st, op->u.pool.y, op->u.pool.x, op->u.pool.n, op->u.pool.c,
					  op->u.pool.h, op->u.pool.w, op->u.pool.k);
		break;
	case RF__POOL_BWD:
		ret = rf__kc_avgpool2d_bwd(st, op->u.pool.y, op->u.pool.x, op->u.pool.n, op->u.pool.c,
					  op->u.pool.h, op->u.pool.w, op->u.pool.k);
		break;
	case RF__SGD:
		ret = rf__kc_sgd(st, op->u.sgd.w, op->u.sgd.g, op->u.sgd.n, rf__sgd_lr(op), op->u.sgd.wd);
		break;
	case RF__SGD_MOMENTUM:
		ret = rf__kc_sgd_momentum(st, op->u.sgd.w, op->u.sgd.v, op->u.sgd.g, op->u.sgd.n,
					 rf__sgd_lr(op), op->u.sgd.mom, op->u.sgd.wd, op->u.sgd.nesterov);
		break;
	case RF__ADAMW:
	{
		struct rf_k_adamw p = rf__adamw_p(op);
		ret = rf__kc_adamw(st, op->u.adamw.w, op->u.adamw.m, op->u.adamw.v, op->u.adamw.g,
				   op->u.adamw.n, &p);
	}
		break;
	case RF__AXPY:
		ret = rf__kc_axpy(st, op->u.axpy.y, op->u.axpy.a, op->u.axpy.x, op->u.axpy.n);
		break;
	case RF__SCALE:
		ret = rf__kc_scale(st, op->u.axpy.y, op->u.axpy.a, op->u.axpy.n);
		break;
	case RF__SUM:
		ret = rf__kc_reduce_sum(st, op->u.sum.out, op->u.sum.in, op->u.sum.k, op->u.sum.n);
		break;
	case RF__FILL:
		if (op->u.fill.dtype == RF_F32) {
			ret = rf__kc_fill(st, op->u.fill.x, op->u.fill.v, op->u.fill.n);
		} else if (op->u.fill.dtype == RF_U8 || op->u.fill.v == 0.0f) {
			size_t bytes = op->u.fill.n * (op->u.fill.dtype == RF_U8 ? 1 : 4);
			ret = rf__cuerr(cudaMemsetAsync(op->u.fill.x, (int)(uint8_t)op->u.fill.v, bytes,
							c->cs));
		} else {
			snprintf(op->err, sizeof(op->err),
				 "filling an i32 tensor with a non-zero value is not supported on CUDA");
			ret = -ENOTSUP;
		}
		break;
	case RF__U8_F32:
		ret = rf__kc_u8_to_f32(st, op->u.dec.out, op->u.dec.in, op->u.dec.n, op->u.dec.scale,
				      op->u.dec.mean, op->u.dec.std);
		break;
	case RF__U8_I32:
		ret = rf__kc_u8_to_i32(st, op->u.dec.out, op->u.dec.in, op->u.dec.n);
		break;
	case RF__RAND_UNIFORM:
	case RF__RAND_NORMAL: {
		struct rf_prng *g = op->u.rand.g;
		if (op->code == RF__RAND_UNIFORM)
			ret = rf__kc_rand_uniform(st, op->u.rand.x, op->u.rand.n, g->seed, g->counter,
						 op->u.rand.a, op->u.rand.b);
		else
			ret = rf__kc_rand_normal(st, op->u.rand.x, op->u.rand.n, g->seed, g->counter,
						op->u.rand.a, op->u.rand.b);
		if (ret == 0)
			g->counter += op->u.rand.n;
		break;
	}
	case RF__COPY:
		if (op->u.copy.bytes)
			ret = rf__cuerr(cudaMemcpyAsync(op->u.copy.dst, op->u.copy.src, op->u.copy.bytes,
							cudaMemcpyDefault, c->cs));
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
