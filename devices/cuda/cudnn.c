/* devices/cuda/cudnn.c -- convolutions, batch norm, max and global average pooling on
 * the CUDA device through cuDNN's (legacy, descriptor-based) API, on the calling
 * stream thread's handle.
 *
 * libcudnn.so.9 is opened with dlopen on first use, not linked (cudnn-dl.c).
 *
 * Choices, for results that repeat: a convolution's plan -- descriptors and algorithm
 * -- is made once per (direction, shape, stride, pad, dtype, layout, math) and kept in
 * the device's plan cache (plan-cache.h): the first algorithm of cuDNN's heuristic
 * list (no timing: the same choice every run) that is deterministic and whose
 * workspace fits the budget (RF_CUDNN_WORKSPACE, else a share of free memory); in fp32
 * precision FMA math only (full float32, as cuBLAS's default), in tf32 the default
 * math's tensor-core entries first, bf16 and f16 asked and run in tensor-op math
 * (rf__cuda_conv_math: the default math gives them FMA engines). The workspace is the
 * stream's own, grown to the largest plan it has run (its ops run one after another on
 * the GPU): what ops in flight hold no longer grows with them. Max pooling CUDNN_POOLING_MAX_DETERMINISTIC with NaN
 * propagated; batch norm CUDNN_BATCHNORM_SPATIAL (per channel), momentum as
 * PyTorch's (cuDNN's exponentialAverageFactor), the saved mean and 1/sqrt(var + eps)
 * for the backward. Tensors are NCHW or NHWC (their layout), f32, bf16 or f16 (batch
 * norm's parameters f32), accumulated in f32. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "cuda-impl.h"
#include "cuda-rules.h"
#include "cudnn-dl.h"
#include "cudnn-impl.h"
#include "kernels-cuda-impl.h"
#include "plan-cache.h"
#include "rf-internal.h"

/* Every descriptor an op may need; rf__descs_free releases what was made. */
struct rf__descs {
	cudnnTensorDescriptor_t t[3];
	cudnnFilterDescriptor_t f;
	cudnnConvolutionDescriptor_t c;
	cudnnPoolingDescriptor_t p;
};

static void rf__descs_free(struct rf__descs *d)
{
	for (int i = 0; i < 3; i++)
		if (d->t[i])
			rf__dn.destroy_tensor(d->t[i]);
	if (d->f)
		rf__dn.destroy_filter(d->f);
	if (d->c)
		rf__dn.destroy_conv(d->c);
	if (d->p)
		rf__dn.destroy_pool(d->p);
}

static cudnnDataType_t rf__dtype(enum rf_tdtype dt)
{
	return dt == RF_BF16 ? CUDNN_DATA_BFLOAT16 : dt == RF_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

static cudnnTensorFormat_t rf__format(enum rf_layout lay)
{
	return lay == RF_LAYOUT_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

/* Tensor descriptor i: n x c x h x w (logical) in the format and data type given. */
static cudnnStatus_t rf__tensor(struct rf__descs *d, int i, int n, int c, int h, int w,
				cudnnTensorFormat_t fmt, cudnnDataType_t dt)
{
	cudnnStatus_t st = rf__dn.create_tensor(&d->t[i]);

	return st != CUDNN_STATUS_SUCCESS ? st : rf__dn.set_tensor4d(d->t[i], fmt, dt, n, c, h, w);
}

static int rf__dnn_fail(char *err, size_t len, const char *what, cudnnStatus_t st)
{
	snprintf(err, len, "%s: %s", what, rf__dn.error_string(st));
	return -EIO;
}

#define RF__CK(what, call) do { cudnnStatus_t _s = (call); \
	if (_s != CUDNN_STATUS_SUCCESS) { ret = rf__dnn_fail(err, len, what, _s); goto out; } } while (0)

/* ---- convolution plans ----------------------------------------------------------- */

/* A plan's descriptors (x t[0], y t[1], the bias (1, o, 1, 1) t[2], f, c) and the math
 * its algorithm runs in. */
struct rf__cplan {
	struct rf__descs d;
	cudnnMathType_t math;
	int other;              /* fp32: an algorithm of another math type's entry, run in
				 * FMA math (it may refuse: then im2col) */
};

static void rf__cplan_free(void *p)
{
	struct rf__cplan *cp = p;

	rf__descs_free(&cp->d);
	free(cp);
}

int rf__dnn_dev_init(struct rf__cuda_dev *cd)
{
	return rf__plan_cache_init(&cd->plans, 256, rf__cplan_free);
}

void rf__dnn_dev_fini(struct rf__cuda_dev *cd)
{
	if (cd->plans.p)
		rf__plan_cache_fini(&cd->plans);
}

/* The workspace budget, read once per device (RF_CUDNN_WORKSPACE, or free memory's
 * share). 0, or -EINVAL with err set. */
static int rf__budget(struct rf__cuda_dev *cd, char *err, size_t len)
{
	size_t free_b = 0, total = 0;

	if (cd->budget_state > 0)
		return 0;
	if (cd->budget_state < 0) {
		snprintf(err, len, "%s", cd->budget_err);
		return -EINVAL;
	}
	if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
		(void)cudaGetLastError();
		free_b = 0;
	}
	if (rf__ws_budget(getenv("RF_CUDNN_WORKSPACE"), free_b, &cd->ws_budget, cd->budget_err,
			  sizeof(cd->budget_err)) < 0) {
		cd->budget_state = -1;
		snprintf(err, len, "%s", cd->budget_err);
		return -EINVAL;
	}
	cd->budget_state = 1;
	return 0;
}

/* The key of op's plan */
static struct rf__plan_key rf__conv_key(const struct rf__op *op)
{
	const struct rf__conv2d *s = &op->p.conv.s;
	const struct rf__tref *x = op->code == RF__OP_CONV_FWD ? &op->o.conv_fwd.x
				 : op->code == RF__OP_CONV_BWD_DATA ? &op->o.conv_bwd_data.dx
				 : &op->o.conv_bwd_filter.x;
	struct rf__plan_key k;

	memset(&k, 0, sizeof(k));
	k.dir = op->code == RF__OP_CONV_FWD ? 0 : op->code == RF__OP_CONV_BWD_DATA ? 1 : 2;
	k.n = s->n, k.c = s->c, k.h = s->h, k.w = s->w;
	k.o = s->o, k.kh = s->kh, k.kw = s->kw;
	k.stride = s->stride ? s->stride : 1;
	k.pad = s->pad;
	k.dtype = (int32_t)x->dtype;
	k.layout = (int32_t)x->layout;
	k.math = (int32_t)op->math;
	return k;
}

/* cuDNN's math types as RF__PLAN_MATH_* (plan-cache.h), both ways: the rules
 * (cuda-rules.c) speak the latter. */
static int rf__plan_math(cudnnMathType_t m)
{
	return m == CUDNN_FMA_MATH ? RF__PLAN_MATH_FMA
	     : m == CUDNN_TENSOR_OP_MATH ? RF__PLAN_MATH_TENSOR
	     : m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? RF__PLAN_MATH_TENSOR_CONV
	     : RF__PLAN_MATH_DEFAULT;
}

static cudnnMathType_t rf__dnn_math(int m)
{
	return m == RF__PLAN_MATH_FMA ? CUDNN_FMA_MATH
	     : m == RF__PLAN_MATH_TENSOR ? CUDNN_TENSOR_OP_MATH
	     : m == RF__PLAN_MATH_TENSOR_CONV ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
	     : CUDNN_DEFAULT_MATH;
}

/* Make plan p (its descriptors, its algorithm) for op on handle h. 0, or -EIO/-EINVAL
 * with err set. */
static int rf__plan_make(struct rf__cuda_dev *cd, cudnnHandle_t h, struct rf__plan *p,
			 const struct rf__op *op, char *err, size_t len)
{
	const struct rf__conv2d *s = &op->p.conv.s;
	struct rf__cplan *cp = calloc(1, sizeof(*cp));
	cudnnTensorFormat_t fmt = rf__format((enum rf_layout)p->key.layout);
	cudnnDataType_t dt = rf__dtype((enum rf_tdtype)p->key.dtype);
	int st = p->key.stride, n = 0, ret = 0, k = -1, other = 0;
	int want = rf__cuda_conv_math((enum rf_tdtype)p->key.dtype, op->math == RF__MATH_TF32);
	struct rf__algo_perf pf[16];
	struct rf__descs *d;

	if (!cp) {
		snprintf(err, len, "cuDNN plan: out of memory");
		return -ENOMEM;
	}
	d = &cp->d;
	RF__CK("cuDNN x descriptor", rf__tensor(d, 0, s->n, s->c, s->h, s->w, fmt, dt));
	RF__CK("cuDNN y descriptor", rf__tensor(d, 1, s->n, s->o, rf__conv2d_oh(s), rf__conv2d_ow(s),
						fmt, dt));
	RF__CK("cuDNN bias descriptor", rf__tensor(d, 2, 1, s->o, 1, 1, fmt, dt));
	RF__CK("cudnnCreateFilterDescriptor", rf__dn.create_filter(&d->f));
	RF__CK("cudnnSetFilter4dDescriptor",
	       rf__dn.set_filter4d(d->f, dt, fmt, s->o, s->c, s->kh, s->kw));
	RF__CK("cudnnCreateConvolutionDescriptor", rf__dn.create_conv(&d->c));
	/* PyTorch's conv2d is cross-correlation; sums in f32 whatever the data */
	RF__CK("cudnnSetConvolution2dDescriptor",
	       rf__dn.set_conv2d(d->c, s->pad, s->pad, st, st, 1, 1, CUDNN_CROSS_CORRELATION,
				 CUDNN_DATA_FLOAT));
	RF__CK("cudnnSetConvolutionMathType",
	       rf__dn.set_conv_math(d->c, rf__dnn_math(want)));
	switch (p->key.dir) {
	case 0: {
		cudnnConvolutionFwdAlgoPerf_t perf[16];
		RF__CK("cudnnGetConvolutionForwardAlgorithm_v7",
		       rf__dn.fwd_algos(h, d->t[0], d->f, d->c, d->t[1], 16, &n, perf));
		for (int i = 0; i < n && i < 16; i++)
			pf[i] = (struct rf__algo_perf){
				(int)perf[i].algo, perf[i].status == CUDNN_STATUS_SUCCESS &&
				perf[i].determinism == CUDNN_DETERMINISTIC,
				rf__plan_math(perf[i].mathType), perf[i].memory };
		break;
	}
	case 1: {
		cudnnConvolutionBwdDataAlgoPerf_t perf[16];
		RF__CK("cudnnGetConvolutionBackwardDataAlgorithm_v7",
		       rf__dn.bwd_data_algos(h, d->f, d->t[1], d->c, d->t[0], 16, &n, perf));
		for (int i = 0; i < n && i < 16; i++)
			pf[i] = (struct rf__algo_perf){
				(int)perf[i].algo, perf[i].status == CUDNN_STATUS_SUCCESS &&
				perf[i].determinism == CUDNN_DETERMINISTIC,
				rf__plan_math(perf[i].mathType), perf[i].memory };
		break;
	}
	default: {
		cudnnConvolutionBwdFilterAlgoPerf_t perf[16];
		RF__CK("cudnnGetConvolutionBackwardFilterAlgorithm_v7",
		       rf__dn.bwd_filter_algos(h, d->t[0], d->t[1], d->c, d->f, 16, &n, perf));
		for (int i = 0; i < n && i < 16; i++)
			pf[i] = (struct rf__algo_perf){
				(int)perf[i].algo, perf[i].status == CUDNN_STATUS_SUCCESS &&
				perf[i].determinism == CUDNN_DETERMINISTIC,
				rf__plan_math(perf[i].mathType), perf[i].memory };
		break;
	}
	}
	k = rf__cuda_pick_algo(pf, n < 16 ? n : 16, cd->ws_budget, want, &other);
	cp->other = other;
	if (k >= 0) {
		p->algo = pf[k].algo, p->ws = pf[k].memory;
		/* fp32 runs FMA math, even an algorithm another math type's entry reported;
		 * otherwise the entry's math, tensor-op for bf16 and f16 (cuda-rules.h) */
		p->math = rf__cuda_run_math(want, pf[k].math);
		cp->math = rf__dnn_math(p->math);
		RF__CK("cudnnSetConvolutionMathType", rf__dn.set_conv_math(d->c, cp->math));
	} else {
		p->math = want;
		cp->math = rf__dnn_math(want);
	}
	p->descs = cp;
	return 0;
out:
	rf__cplan_free(cp);
	return ret;
}

/* The stream's workspace, at least `bytes`: grown from the device's allocator. The
 * buffer it replaces may still be read by work queued before this op, and is baked into
 * CUDA graphs captured until now: it is retired on the stream (freed once every op
 * queued so far is reported done, cuda.c) and the workspace's generation moves on, so
 * no such graph is replayed again (cuda-rules.h: rf__cg_replayable). 0 or -ENOMEM with
 * err set. */
static int rf__stream_ws(struct rf__cuda_stream *c, size_t bytes, char *err, size_t len)
{
	void *p;

	if (bytes <= c->dnn_ws_bytes)
		return 0;
	if (rf__cache_alloc(&c->dev->mem, bytes, &p) < 0) {
		snprintf(err, len, "cuDNN workspace: no device memory for %zu bytes (the plan's "
			 "algorithm; RF_CUDNN_WORKSPACE caps it)", bytes);
		return -ENOMEM;
	}
	if (c->dnn_ws)
		rf__cs_retire(c, c->dnn_ws, c->dnn_ws_bytes);
	c->dnn_ws = p;
	c->dnn_ws_bytes = bytes;
	c->dnn_ws_gen++;
	return 0;
}

/* A convolution cuDNN does not run (no deterministic algorithm within the budget, or
 * the chosen one refused at run time): said once per shape, and counted on the plan. */
static void rf__plan_fallback(struct rf__cuda_dev *cd, struct rf__plan *p, const struct rf__op *op,
			      const char *what)
{
	const struct rf__conv2d *s = &op->p.conv.s;

	if (p->fallback)
		return;
	p->fallback = 1;
	rf__log(RF_LOG_WARN, "cuDNN: %s for %s %dx%d, %d -> %d channels, %dx%d input, batch %d "
		"(%s %s, %zu-byte workspace budget): no cuDNN path for this shape", what, op->name,
		s->kh, s->kw, s->c, s->o, s->h, s->w, s->n,
		rf_tdtype_name((enum rf_tdtype)p->key.dtype),
		rf_layout_name((enum rf_layout)p->key.layout), cd->ws_budget);
}

/* The convolution itself, by rf__cuda_dnn_outcome: a refusal (in fp32, an algorithm
 * taken from another math type's entry refusing FMA math; in any math, one the
 * heuristics ranked that refuses this call) is the caller's path rule's, not an error.
 * cuDNN 9 refuses with a sub-code (BAD_PARAM_SIZE_INSUFFICIENT, NOT_SUPPORTED_SHAPE,
 * ...): its category is what counts. A CUDA error the refusal left pending is
 * cleared: im2col's first launch check would take it for its own. */
static int rf__conv_status(struct rf__cuda_dev *cd, struct rf__plan *p,
			   const struct rf__cplan *cp, const struct rf__op *op, const char *what,
			   cudnnStatus_t st, char *err, size_t len)
{
	int cat = CUDNN_STATUS_CATEGORY(st);
	int ret = rf__cuda_dnn_outcome(st == CUDNN_STATUS_SUCCESS,
				       cat == CUDNN_STATUS_BAD_PARAM ||
				       cat == CUDNN_STATUS_NOT_SUPPORTED);

	if (ret == -ENOTSUP) {
		char why[160];
		(void)cudaGetLastError();
		p->algo = -1;
		/* cuDNN's own status said: BAD_PARAM also covers a caller's mistake */
		snprintf(why, sizeof(why), "the algorithm chosen %s (%s: %s)", cp->other ?
			 "was refused in FMA math" : "refused the call", what,
			 rf__dn.error_string(st));
		rf__plan_fallback(cd, p, op, why);
	}
	return ret == -EIO ? rf__dnn_fail(err, len, what, st) : ret;
}

int rf__dnn_conv(struct rf__cuda_stream *c, struct rf__op *op)
{
	struct rf__cuda_dev *cd = c->dev->ctx;
	char *err = op->err;
	size_t len = sizeof(op->err);
	cudnnHandle_t h;
	struct rf__plan_key key;
	struct rf__plan *p;
	struct rf__cplan *cp;
	cudnnStatus_t st;
	const float one = 1.0f, zero = 0.0f, acc = op->p.conv.acc ? 1.0f : 0.0f;
	int ret = 0;

	/* An empty shape is the caller's im2col, which does what the CPU does: no image
	 * zeroes a dw and db that are not accumulated, an empty plane with padding still
	 * has outputs (the bias), no channel is refused. cuDNN takes no zero dimension. */
	if (rf__cuda_conv_empty(op))
		return -ENOTSUP;
	if (!(h = rf__dnn_handle(&c->dnn, c->cs, err, len)))
		return -EIO;
	if ((ret = rf__budget(cd, err, len)) < 0)
		return ret;
	key = rf__conv_key(op);
	if (!(p = rf__plan_find(&cd->plans, &key))) {
		p = rf__plan_add(&cd->plans, &key);
		if ((ret = rf__plan_make(cd, h, p, op, err, len)) < 0) {
			p->algo = -1;
			p->key.dir = -1;   /* not a plan: found by no key */
			return ret;
		}
	}
	cp = p->descs;
	p->uses++;
	if (p->algo < 0) {
		rf__plan_fallback(cd, p, op, "no deterministic algorithm within the workspace "
				  "budget");
		return -ENOTSUP;
	}
	if ((ret = rf__stream_ws(c, p->ws, err, len)) < 0)
		return ret;
	switch (op->code) {
	case RF__OP_CONV_FWD: {
		/* bf16 and f16: y filled with the bias first, the convolution adding its f32
		 * sums to it (beta 1) -- one rounding, as the CPU's; adding the bias to a
		 * rounded y rounds twice, the first time at the size of the sums before the
		 * bias cancels them: 2 ulps off on an H200 (test-op-table) */
		int fill = op->o.conv_fwd.b.data && key.dtype != RF_F32;
		if (fill && (ret = rf__cuda_bias4(c, op, 0, op->o.conv_fwd.y.data,
						   op->o.conv_fwd.b.data, 0)) < 0)
			goto out;
		st = rf__dn.conv_fwd(h, &one, cp->d.t[0], op->o.conv_fwd.x.data, cp->d.f,
				     op->o.conv_fwd.w.data, cp->d.c, (cudnnConvolutionFwdAlgo_t)p->algo,
				     c->dnn_ws, p->ws, fill ? &one : &zero, cp->d.t[1],
				     op->o.conv_fwd.y.data);
		if ((ret = rf__conv_status(cd, p, cp, op, "cudnnConvolutionForward", st, err, len)) < 0)
			goto out;
		if (op->o.conv_fwd.b.data && !fill)
			RF__CK("cudnnAddTensor (bias)",
			       rf__dn.add_tensor(h, &one, cp->d.t[2], op->o.conv_fwd.b.data, &one,
						 cp->d.t[1], op->o.conv_fwd.y.data));
		break;
	}
	case RF__OP_CONV_BWD_DATA:
		st = rf__dn.conv_bwd_data(h, &one, cp->d.f, op->o.conv_bwd_data.w.data, cp->d.t[1],
					  op->o.conv_bwd_data.dy.data, cp->d.c,
					  (cudnnConvolutionBwdDataAlgo_t)p->algo, c->dnn_ws, p->ws,
					  &zero, cp->d.t[0], op->o.conv_bwd_data.dx.data);
		if ((ret = rf__conv_status(cd, p, cp, op, "cudnnConvolutionBackwardData", st, err,
					   len)) < 0)
			goto out;
		break;
	case RF__OP_CONV_BWD_FILTER:
		st = rf__dn.conv_bwd_filter(h, &one, cp->d.t[0], op->o.conv_bwd_filter.x.data,
					    cp->d.t[1], op->o.conv_bwd_filter.dy.data, cp->d.c,
					    (cudnnConvolutionBwdFilterAlgo_t)p->algo, c->dnn_ws,
					    p->ws, &acc, cp->d.f, op->o.conv_bwd_filter.dw.data);
		if ((ret = rf__conv_status(cd, p, cp, op, "cudnnConvolutionBackwardFilter", st, err,
					   len)) < 0)
			goto out;
		if (op->o.conv_bwd_filter.db.data && rf__cuda_bias_grad_ours(op))
			ret = rf__cuda_bias_grad(c, op);
		else if (op->o.conv_bwd_filter.db.data && key.dtype == RF_F32)
			RF__CK("cudnnConvolutionBackwardBias",
			       rf__dn.conv_bwd_bias(h, &one, cp->d.t[1], op->o.conv_bwd_filter.dy.data,
						    &acc, cp->d.t[2], op->o.conv_bwd_filter.db.data));
		else if (op->o.conv_bwd_filter.db.data)
			ret = rf__cuda_bias4(c, op, 1, op->o.conv_bwd_filter.db.data,
					      op->o.conv_bwd_filter.dy.data, op->p.conv.acc);
		break;
	default:
		snprintf(err, len, "cuDNN: op %s is not a convolution", op->name);
		ret = -EINVAL;
	}
out:
	return ret;
}

int rf__dnn_capturable(const struct rf__cuda_stream *c, const struct rf__op *op)
{
	struct rf__cuda_dev *cd = c->dev->ctx;
	struct rf__plan_key key;
	const struct rf__plan *p;

	if (!c->dnn)            /* the handle is made at first use: not inside a capture */
		return 0;
	switch (op->code) {
	case RF__OP_CONV_FWD: case RF__OP_CONV_BWD_DATA: case RF__OP_CONV_BWD_FILTER:
		if (cd->budget_state <= 0)
			return 0;
		key = rf__conv_key(op);
		/* made at an earlier run, and its workspace already the stream's: nothing to
		 * choose or allocate. A plan without an algorithm is im2col + cuBLAS, whose
		 * workspace is the op's own */
		p = rf__plan_find(&cd->plans, &key);
		return p && (p->algo < 0 || p->ws <= c->dnn_ws_bytes);
	case RF__OP_BN_TRAIN: case RF__OP_BN_EVAL: case RF__OP_BN_BWD:
	case RF__OP_BN_RELU_TRAIN: case RF__OP_BN_RELU_EVAL: case RF__OP_BN_RELU_BWD:
	case RF__OP_MAXPOOL_FWD: case RF__OP_MAXPOOL_BWD: case RF__OP_GAP_FWD: case RF__OP_GAP_BWD:
		return 1;               /* descriptors are host objects; the calls queue kernels */
	default:
		return 0;
	}
}

/* ---- batch norm and pooling --------------------------------------------------------- */

/* The ReLU half of a fused batch norm: y = max(y, 0) in place after the forward, or
 * dm = dy * (y > 0) before the backward; the kernels of rf_relu_fwd / rf_relu_bwd, so
 * the bits of the two separate ops. cuDNN's own BN+activation (bnOps) takes only f16
 * NHWC with a reserve space kept from forward to backward; not used. */
static int rf__bn_relu_half(struct rf__cuda_stream *c, struct rf__op *op, int bwd)
{
	const struct rf__tref *y = bwd ? &op->o.bn_relu_bwd.y : &op->o.bn_train.y;
	size_t n = y->numel;
	int ret;

	if (!bwd)
		ret = y->dtype == RF_F32 ? rf__kc_relu_fwd(c->cs, y->data, y->data, n)
					 : rf__kc_relu_fwd_h(c->cs, (int)y->dtype, y->data, y->data, n);
	else if (!op->ws || op->ws_bytes < n * rf_tdtype_size(y->dtype))
		ret = -EINVAL;
	else
		ret = y->dtype == RF_F32
			      ? rf__kc_relu_bwd(c->cs, op->ws, op->o.bn_relu_bwd.dy.data, y->data, n)
			      : rf__kc_relu_bwd_h(c->cs, (int)y->dtype, op->ws,
						  op->o.bn_relu_bwd.dy.data, y->data, n);
	if (ret < 0)
		snprintf(op->err, sizeof(op->err), "%s: the ReLU %s: %s", op->name,
			 bwd ? "mask of dy" : "on y",
			 ret == -EINVAL && bwd ? "no workspace for the mask" : rf__kc_error_string(ret));
	return ret < 0 ? -EIO : 0;
}

int rf__dnn_norm(struct rf__cuda_stream *c, struct rf__op *op)
{
	char *err = op->err;
	size_t len = sizeof(op->err);
	cudnnHandle_t h;
	struct rf__descs d = { 0 };
	const float one = 1.0f, zero = 0.0f;
	const cudnnBatchNormMode_t bm = CUDNN_BATCHNORM_SPATIAL;
	int relu = op->code == RF__OP_BN_RELU_TRAIN || op->code == RF__OP_BN_RELU_EVAL ||
		   op->code == RF__OP_BN_RELU_BWD;
	int bn = relu || op->code == RF__OP_BN_TRAIN || op->code == RF__OP_BN_EVAL ||
		 op->code == RF__OP_BN_BWD;
	/* a fused backward reads dy masked by y > 0, from its workspace */
	const void *bwd_dy = op->code == RF__OP_BN_RELU_BWD ? op->ws : op->o.bn_bwd.dy.data;
	int n = bn ? op->p.bn.s.n : op->p.pool.n, ch = bn ? op->p.bn.s.c : op->p.pool.c;
	int hh = bn ? op->p.bn.h : op->p.pool.h, ww = bn ? op->p.bn.w : op->p.pool.w;
	double eps = !bn ? 0 : op->p.bn.s.eps >= CUDNN_BN_MIN_EPSILON ? op->p.bn.s.eps
								     : CUDNN_BN_MIN_EPSILON;
	/* the big (n, c, h, w) tensor of the op sets the format and the data type
	 * (supports_op: its partner has the same): the first output, or the forward
	 * poolings' input */
	const struct rf__tref *big = &op->o.t[0];
	cudnnTensorFormat_t fmt;
	cudnnDataType_t dt;
	int ret = 0;

	switch (op->code) {
	case RF__OP_GAP_FWD:
		big = &op->o.gap_fwd.x;
		break;
	case RF__OP_MAXPOOL_FWD:
		big = &op->o.maxpool_fwd.x;
		break;
	default:
		break;
	}
	fmt = rf__format(big->layout);
	dt = rf__dtype(big->dtype);
	/* ops-norm.c refuses the empty shapes that the CPU kernels refuse (batch norm's
	 * empty channels or planes, its backward's empty batch): what is left here has
	 * no output element, and the CPU writes none either */
	if (!n || !ch || !hh || !ww)
		return 0;
	if (!(h = rf__dnn_handle(&c->dnn, c->cs, err, len)))
		return -EIO;
	RF__CK("cuDNN tensor descriptor", rf__tensor(&d, 0, n, ch, hh, ww, fmt, dt));
	if (op->code == RF__OP_BN_RELU_BWD && (ret = rf__bn_relu_half(c, op, 1)) < 0)
		goto out;
	switch (op->code) {
	case RF__OP_BN_TRAIN: case RF__OP_BN_RELU_TRAIN:
		RF__CK("cuDNN tensor descriptor", rf__tensor(&d, 1, 1, ch, 1, 1, CUDNN_TENSOR_NCHW,
							     CUDNN_DATA_FLOAT));
		RF__CK("cudnnBatchNormalizationForwardTraining",
		       rf__dn.bn_train(h, bm, &one, &zero, d.t[0], op->o.bn_train.x.data, d.t[0],
				       op->o.bn_train.y.data, d.t[1], op->o.bn_train.gamma.data,
				       op->o.bn_train.beta.data, op->p.bn.s.momentum,
				       op->o.bn_train.run_mean.data, op->o.bn_train.run_var.data, eps,
				       op->o.bn_train.mean.data, op->o.bn_train.invstd.data));
		break;
	case RF__OP_BN_EVAL: case RF__OP_BN_RELU_EVAL:
		RF__CK("cuDNN tensor descriptor", rf__tensor(&d, 1, 1, ch, 1, 1, CUDNN_TENSOR_NCHW,
							     CUDNN_DATA_FLOAT));
		RF__CK("cudnnBatchNormalizationForwardInference",
		       rf__dn.bn_infer(h, bm, &one, &zero, d.t[0], op->o.bn_eval.x.data, d.t[0],
				       op->o.bn_eval.y.data, d.t[1], op->o.bn_eval.gamma.data,
				       op->o.bn_eval.beta.data, op->o.bn_eval.run_mean.data,
				       op->o.bn_eval.run_var.data, eps));
		break;
	case RF__OP_BN_BWD: case RF__OP_BN_RELU_BWD:
		RF__CK("cuDNN tensor descriptor", rf__tensor(&d, 1, 1, ch, 1, 1, CUDNN_TENSOR_NCHW,
							     CUDNN_DATA_FLOAT));
		RF__CK("cudnnBatchNormalizationBackward",
		       rf__dn.bn_bwd(h, bm, &one, &zero, &one, &zero, d.t[0], op->o.bn_bwd.x.data,
				     d.t[0], bwd_dy, d.t[0], op->o.bn_bwd.dx.data, d.t[1],
				     op->o.bn_bwd.gamma.data, op->o.bn_bwd.dgamma.data,
				     op->o.bn_bwd.dbeta.data, eps, op->o.bn_bwd.mean.data,
				     op->o.bn_bwd.invstd.data));
		break;
	case RF__OP_MAXPOOL_FWD:
	case RF__OP_MAXPOOL_BWD:
	case RF__OP_GAP_FWD:
	case RF__OP_GAP_BWD: {
		int gap = op->code == RF__OP_GAP_FWD || op->code == RF__OP_GAP_BWD;
		int kh = gap ? hh : op->p.pool.k, kw = gap ? ww : op->p.pool.k;
		int sh = gap ? hh : op->p.pool.st, sw = gap ? ww : op->p.pool.st;
		int oh = (hh - kh) / sh + 1, ow = (ww - kw) / sw + 1;
		RF__CK("cuDNN tensor descriptor", rf__tensor(&d, 1, n, ch, oh, ow, fmt, dt));
		RF__CK("cudnnCreatePoolingDescriptor", rf__dn.create_pool(&d.p));
		RF__CK("cudnnSetPooling2dDescriptor",
		       rf__dn.set_pool2d(d.p, gap ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
						  : CUDNN_POOLING_MAX_DETERMINISTIC,
					 CUDNN_PROPAGATE_NAN, kh, kw, 0, 0, sh, sw));
		if (op->code == RF__OP_MAXPOOL_FWD) {
			RF__CK("cudnnPoolingForward",
			       rf__dn.pool_fwd(h, d.p, &one, d.t[0], op->o.maxpool_fwd.x.data, &zero,
					       d.t[1], op->o.maxpool_fwd.y.data));
		} else if (op->code == RF__OP_GAP_FWD) {
			RF__CK("cudnnPoolingForward",
			       rf__dn.pool_fwd(h, d.p, &one, d.t[0], op->o.gap_fwd.x.data, &zero,
					       d.t[1], op->o.gap_fwd.y.data));
		} else if (op->code == RF__OP_GAP_BWD) {
			/* average pooling's backward reads neither y nor x: dy stands for y
			 * and dx for x (their shapes), which cuDNN does not look into */
			const void *dy = op->o.gap_bwd.dy.data;
			void *dx = op->o.gap_bwd.dx.data;
			RF__CK("cudnnPoolingBackward",
			       rf__dn.pool_bwd(h, d.p, &one, d.t[1], dy, d.t[1], dy, d.t[0], dx, &zero,
					       d.t[0], dx));
		} else if (!op->ws || op->ws_bytes < (size_t)n * ch * oh * ow *
						    rf_tdtype_size(big->dtype)) {
			snprintf(err, len, "cuDNN max-pooling backward: no workspace for y");
			ret = -EINVAL;
		} else {
			/* cuDNN's backward wants y, which rf_maxpool2d_bwd does not keep: the
			 * forward again, into the op's workspace */
			const void *x = op->o.maxpool_bwd.x.data;
			RF__CK("cudnnPoolingForward",
			       rf__dn.pool_fwd(h, d.p, &one, d.t[0], x, &zero, d.t[1], op->ws));
			RF__CK("cudnnPoolingBackward",
			       rf__dn.pool_bwd(h, d.p, &one, d.t[1], op->ws, d.t[1],
					       op->o.maxpool_bwd.dy.data, d.t[0], x, &zero, d.t[0],
					       op->o.maxpool_bwd.dx.data));
		}
		break;
	}
	default:
		snprintf(err, len, "cuDNN: op %s is no normalisation or pooling", op->name);
		ret = -EINVAL;
	}
	if (ret == 0 && relu && op->code != RF__OP_BN_RELU_BWD)
		ret = rf__bn_relu_half(c, op, 0);
out:
	rf__descs_free(&d);
	return ret;
}
