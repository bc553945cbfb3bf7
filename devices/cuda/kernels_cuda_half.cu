/* devices/cuda/kernels_cuda_half.cu -- the kernels a bf16, f16 or NHWC convolutional
 * part needs besides cuDNN's (ReLU forward and backward, axpy, scale, sum, average
 * pooling, a convolution's bias and its gradient), each value read into f32, computed
 * there (no fused multiply-add), and rounded to nearest even into its type: what the
 * CPU's reference path computes. Grid-stride loops on the caller's stream; the
 * reductions are fixed trees (the same bits every run). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <errno.h>
#include <stdint.h>

#include "kernels-cuda-common.cuh"

namespace {

__device__ inline float ld(const float *p, size_t i) { return p[i]; }
__device__ inline void st(float *p, size_t i, float v) { p[i] = v; }
__device__ inline float ld(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ inline float ld(const __half *p, size_t i) { return __half2float(p[i]); }
__device__ inline void st(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ inline void st(__half *p, size_t i, float v) { p[i] = __float2half_rn(v); }

template <typename T> __global__ void k_relu_fwd(T *y, const T *x, size_t n)
{
	GRID_STRIDE(i, n) {
		float v = ld(x, i);
		st(y, i, v > 0.0f ? v : 0.0f);
	}
}

template <typename T> __global__ void k_add_relu(T *y, const T *a, const T *b, size_t n)
{
	/* the sum rounded once, at the store: the bits of k_sum then k_relu_fwd (rounding
	 * keeps the sign, and both give +0 for a sum <= 0) */
	GRID_STRIDE(i, n) {
		float v = __fadd_rn(ld(a, i), ld(b, i));
		st(y, i, v > 0.0f ? v : 0.0f);
	}
}

template <typename T> __global__ void k_relu_bwd(T *dx, const T *dy, const T *y, size_t n)
{
	GRID_STRIDE(i, n)
		st(dx, i, ld(y, i) > 0.0f ? ld(dy, i) : 0.0f);
}

template <typename T> __global__ void k_axpy(T *y, float a, const T *x, size_t n)
{
	GRID_STRIDE(i, n)
		st(y, i, __fadd_rn(ld(y, i), __fmul_rn(a, ld(x, i))));
}

template <typename T> __global__ void k_scale(T *x, float a, size_t n)
{
	GRID_STRIDE(i, n)
		st(x, i, __fmul_rn(ld(x, i), a));
}

constexpr int kSumMax = 63;
struct ptrs {
	const void *p[kSumMax];
};

template <typename T> __global__ void k_sum(T *out, ptrs in, int k, size_t n)
{
	GRID_STRIDE(i, n) {
		float acc = ld((const T *)in.p[0], i);
		for (int j = 1; j < k; j++)
			acc = __fadd_rn(acc, ld((const T *)in.p[j], i));
		st(out, i, acc);
	}
}

template <typename T> int relu_fwd(void *s, void *y, const void *x, size_t n)
{
	k_relu_fwd<T><<<blocks_for(n), kThreads, 0, S(s)>>>((T *)y, (const T *)x, n);
	return launch_rc();
}

template <typename T> int add_relu(void *s, void *y, const void *a, const void *b, size_t n)
{
	k_add_relu<T><<<blocks_for(n), kThreads, 0, S(s)>>>((T *)y, (const T *)a, (const T *)b, n);
	return launch_rc();
}

template <typename T> int relu_bwd(void *s, void *dx, const void *dy, const void *y, size_t n)
{
	k_relu_bwd<T><<<blocks_for(n), kThreads, 0, S(s)>>>((T *)dx, (const T *)dy, (const T *)y, n);
	return launch_rc();
}

template <typename T> int axpy(void *s, void *y, float a, const void *x, size_t n)
{
	k_axpy<T><<<blocks_for(n), kThreads, 0, S(s)>>>((T *)y, a, (const T *)x, n);
	return launch_rc();
}

template <typename T> int scale(void *s, void *x, float a, size_t n)
{
	k_scale<T><<<blocks_for(n), kThreads, 0, S(s)>>>((T *)x, a, n);
	return launch_rc();
}

template <typename T> int sum(void *s, void *out, const void *const *in, int k, size_t n)
{
	ptrs p = {};
	for (int j = 0; j < k; j++)
		p.p[j] = in[j];
	k_sum<T><<<blocks_for(n), kThreads, 0, S(s)>>>((T *)out, p, k, n);
	return launch_rc();
}

/* Element (n, c, h, w) of a 4-D tensor of dims (C, H, W), NCHW or NHWC. */
__device__ inline size_t at4(int nhwc, size_t n, int c, int h, int w, int C, int H, int W)
{
	return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}

/* Average pooling, window k, stride k (rf__k_avgpool2d_*'s order of additions): t runs
 * over the output in its memory order. */
template <typename T>
__global__ void k_avgpool_fwd4(T *y, const T *x, int nhwc, int C, int H, int W, int k, size_t total)
{
	const int oh = H / k, ow = W / k;
	const float inv = 1.0f / (float)(k * k);
	GRID_STRIDE(t, total) {
		int c, i, j;
		size_t n;
		if (nhwc) {
			c = (int)(t % C), j = (int)((t / C) % ow), i = (int)((t / C / ow) % oh);
			n = t / ((size_t)C * ow * oh);
		} else {
			j = (int)(t % ow), i = (int)((t / ow) % oh), c = (int)((t / ow / oh) % C);
			n = t / ((size_t)C * ow * oh);
		}
		float acc = 0.0f;
		for (int a = 0; a < k; a++)
			for (int b = 0; b < k; b++)
				acc = __fadd_rn(acc, ld(x, at4(nhwc, n, c, i * k + a, j * k + b, C, H, W)));
		st(y, t, __fmul_rn(acc, inv));
	}
}

template <typename T>
__global__ void k_avgpool_bwd4(T *dx, const T *dy, int nhwc, int C, int H, int W, int k, size_t total)
{
	const int oh = H / k, ow = W / k;
	const float inv = 1.0f / (float)(k * k);
	GRID_STRIDE(t, total) {
		int c, r, col;
		size_t n;
		if (nhwc) {
			c = (int)(t % C), col = (int)((t / C) % W), r = (int)((t / C / W) % H);
			n = t / ((size_t)C * W * H);
		} else {
			col = (int)(t % W), r = (int)((t / W) % H), c = (int)((t / W / H) % C);
			n = t / ((size_t)C * W * H);
		}
		int i = r / k, j = col / k;
		st(dx, t, (i < oh && j < ow) ? __fmul_rn(ld(dy, at4(nhwc, n, c, i, j, C, oh, ow)), inv)
					   : 0.0f);
	}
}

/* y[n, c, h, w] = (acc ? y[n, c, h, w] : 0) + b[c] (NCHW), one rounding */
template <typename T>
__global__ void k_bias4(T *y, const T *b, int C, size_t hw, size_t total, int acc)
{
	GRID_STRIDE(t, total) {
		int c = (int)((t / hw) % C);
		st(y, t, acc ? __fadd_rn(ld(y, t), ld(b, (size_t)c)) : ld(b, (size_t)c));
	}
}

/* db[c] (+)= sum over n, h, w of dy[n, c, h, w] (NCHW): one block per channel, each
 * thread's sum over its planes' elements then a fixed tree, in f32; one rounding into
 * db's type */
template <typename T>
__global__ void k_bias4_grad(T *db, const T *dy, int N, int C, size_t hw, int acc)
{
	__shared__ float sh[kThreads];
	const int c = blockIdx.x;
	const size_t total = (size_t)N * hw;
	float a = 0.0f;
	for (size_t t = threadIdx.x; t < total; t += blockDim.x) {
		size_t n = t / hw, p = t % hw;
		a = __fadd_rn(a, ld(dy, (n * C + c) * hw + p));
	}
	sh[threadIdx.x] = a;
	__syncthreads();
	for (int s = kThreads / 2; s > 0; s >>= 1) {
		if ((int)threadIdx.x < s)
			sh[threadIdx.x] = __fadd_rn(sh[threadIdx.x], sh[threadIdx.x + s]);
		__syncthreads();
	}
	if (threadIdx.x == 0)
		st(db, (size_t)c, acc ? __fadd_rn(ld(db, (size_t)c), sh[0]) : sh[0]);
}

template <typename T>
int avgpool4(void *s, int bwd, int nhwc, void *out, const void *in, int n, int c, int h, int w, int k)
{
	size_t total = bwd ? (size_t)n * c * h * w : (size_t)n * c * (h / k) * (w / k);
	if (!total)
		return 0;
	if (bwd)
		k_avgpool_bwd4<T><<<blocks_for(total), kThreads, 0, S(s)>>>((T *)out, (const T *)in,
									   nhwc, c, h, w, k, total);
	else
		k_avgpool_fwd4<T><<<blocks_for(total), kThreads, 0, S(s)>>>((T *)out, (const T *)in,
									   nhwc, c, h, w, k, total);
	return launch_rc();
}

template <typename T>
int bias4(void *s, int grad, void *y, const void *b, int n, int c, size_t hw, int acc)
{
	if (grad) {
		if (!c)
			return 0;
		k_bias4_grad<T><<<c, kThreads, 0, S(s)>>>((T *)y, (const T *)b, n, c, hw, acc);
	} else {
		size_t total = (size_t)n * c * hw;
		if (!total)
			return 0;
		k_bias4<T><<<blocks_for(total), kThreads, 0, S(s)>>>((T *)y, (const T *)b, c, hw,
								     total, acc);
	}
	return launch_rc();
}

} // namespace

extern "C" {

int rf__kc_relu_fwd_h(void *stream, int dt, void *y, const void *x, size_t n)
{
	if (!n)
		return 0;
	return dt == RF_BF16 ? relu_fwd<__nv_bfloat16>(stream, y, x, n)
	     : dt == RF_F16 ? relu_fwd<__half>(stream, y, x, n) : -EINVAL;
}

int rf__kc_add_relu_h(void *stream, int dt, void *y, const void *a, const void *b, size_t n)
{
	if (!n)
		return 0;
	return dt == RF_BF16 ? add_relu<__nv_bfloat16>(stream, y, a, b, n)
	     : dt == RF_F16 ? add_relu<__half>(stream, y, a, b, n) : -EINVAL;
}

int rf__kc_relu_bwd_h(void *stream, int dt, void *dx, const void *dy, const void *y, size_t n)
{
	if (!n)
		return 0;
	return dt == RF_BF16 ? relu_bwd<__nv_bfloat16>(stream, dx, dy, y, n)
	     : dt == RF_F16 ? relu_bwd<__half>(stream, dx, dy, y, n) : -EINVAL;
}

int rf__kc_axpy_h(void *stream, int dt, void *y, float a, const void *x, size_t n)
{
	if (!n)
		return 0;
	return dt == RF_BF16 ? axpy<__nv_bfloat16>(stream, y, a, x, n)
	     : dt == RF_F16 ? axpy<__half>(stream, y, a, x, n) : -EINVAL;
}

int rf__kc_scale_h(void *stream, int dt, void *x, float a, size_t n)
{
	if (!n)
		return 0;
	return dt == RF_BF16 ? scale<__nv_bfloat16>(stream, x, a, n)
	     : dt == RF_F16 ? scale<__half>(stream, x, a, n) : -EINVAL;
}

int rf__kc_sum_h(void *stream, int dt, void *out, const void *const *in, int k, size_t n)
{
	if (k < 1 || k > kSumMax)
		return -EINVAL;
	if (!n)
		return 0;
	return dt == RF_BF16 ? sum<__nv_bfloat16>(stream, out, in, k, n)
	     : dt == RF_F16 ? sum<__half>(stream, out, in, k, n) : -EINVAL;
}

int rf__kc_avgpool2d_h(void *stream, int bwd, int dt, int nhwc, void *out, const void *in, int n,
		       int c, int h, int w, int k)
{
	if (n < 0 || c < 0 || h < 0 || w < 0 || k < 1)
		return -EINVAL;
	return dt == RF_F32 ? avgpool4<float>(stream, bwd, nhwc, out, in, n, c, h, w, k)
	     : dt == RF_BF16 ? avgpool4<__nv_bfloat16>(stream, bwd, nhwc, out, in, n, c, h, w, k)
	     : dt == RF_F16 ? avgpool4<__half>(stream, bwd, nhwc, out, in, n, c, h, w, k) : -EINVAL;
}

int rf__kc_bias4_h(void *stream, int grad, int dt, int nhwc, void *y, const void *b, int n,
		   int c, size_t hw, int accumulate)
{
	if (n < 0 || c < 0)
		return -EINVAL;
	/* NHWC: along rows (kernels_cuda_norm.cu); its gradient wants a workspace */
	if (nhwc)
		return grad ? -EINVAL : rf__kc_bias_nhwc(stream, dt, y, b, (int64_t)n * (int64_t)hw, c,
							 accumulate);
	return dt == RF_F32 ? bias4<float>(stream, grad, y, b, n, c, hw, accumulate)
	     : dt == RF_BF16 ? bias4<__nv_bfloat16>(stream, grad, y, b, n, c, hw, accumulate)
	     : dt == RF_F16 ? bias4<__half>(stream, grad, y, b, n, c, hw, accumulate) : -EINVAL;
}

} // extern "C"
