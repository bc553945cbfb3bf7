/* devices/cuda/kernels_cuda_half.cu -- the elementwise kernels a bf16 or f16
 * convolutional part needs (ReLU forward and backward, axpy, scale, sum), each value
 * read into f32, computed there (no fused multiply-add), and rounded to nearest even
 * into its 16-bit type: what the CPU's reference path computes. Grid-stride loops on
 * the caller's stream. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <errno.h>
#include <stdint.h>

#include "kernels-cuda-common.cuh"

namespace {

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

} // extern "C"
