/* devices/cuda/kernels_cuda_norm.cu -- batch normalisation of NHWC tensors (f32, bf16 or
 * f16 data; parameters and statistics f32) and the NHWC column sum (a convolution's bias
 * gradient, by the same partial sums), the formulas of the CPU's rf__k_bn_* (two
 * passes for the variance, about the mean rounded to float, its residue removed; eps
 * the op's, as on the CPU -- cuDNN's path raises it to CUDNN_BN_MIN_EPSILON).
 *
 * Why ours: cuDNN's batch norm (CUDNN_BATCHNORM_SPATIAL) on an NHWC tensor ran a
 * per-channel kernel that reads it with a stride of C -- 1.2 ms forward and 1.7 ms
 * backward for 256x64x28x28 f32 on an H200 (ncu, 2026-11-30), 76 % of a ResNet-18 step's
 * GPU time, for a tensor that takes ~20 us to read. Here a warp reads 32 neighbouring
 * channels of one row (coalesced), a block of 32 x 8 threads sums a chunk of rows into
 * one partial per channel, and a block per 32 channels adds the partials in double by
 * 8 lanes and then in order: fixed trees, the same bits every run, no atomics.
 *
 * The threads' work is in bn-nhwc-body.h, which test-bn-nhwc runs on the host; here
 * are the kernels around it (the barrier between its phases) and the order of the
 * launches (the test's emulation launches in the same order). The fused ReLU reads
 * and writes what the separate ops would: max(v, 0) before the store, dy as 0 where
 * the forward's y <= 0. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <errno.h>
#include <stdint.h>

#include "kernels-cuda-common.cuh"

namespace {

__device__ inline float ld(const float *p, size_t i) { return p[i]; }
__device__ inline float ld(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ inline float ld(const __half *p, size_t i) { return __half2float(p[i]); }
__device__ inline void st(float *p, size_t i, float v) { p[i] = v; }
__device__ inline void st(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ inline void st(__half *p, size_t i, float v) { p[i] = __float2half_rn(v); }

} // namespace

#define RF_KB __device__ __forceinline__
#include "bn-nhwc-body.h"

namespace {

using rf_bn::at;
using rf_bn::geo;
using rf_bn::kCols;
using rf_bn::kRows;

__device__ inline at me()
{
	return at{ (int)threadIdx.x, (int)threadIdx.y, (int)blockIdx.x, (int)blockIdx.y,
		   (int)gridDim.y };
}

template <typename T, int MODE>
__global__ void k_bn_partial(const T *x, const T *dy, const T *y, const float *mf, int64_t M,
			     int C, int64_t chunk, float *pa, float *pb)
{
	__shared__ float sa[kRows][kCols + 1], sb[kRows][kCols + 1];
	const at t = me();

	rf_bn::partial_lane<T, MODE>(t, x, dy, y, mf, M, C, chunk, sa, sb);
	__syncthreads();
	rf_bn::partial_fold<MODE>(t, C, sa, sb, pa, pb);
}

/* The per-channel step: a block per 32 channels sums the R partials of pa (and pb) in
 * double (colsum_lane, the barrier, colsum_fold), then f(c, sum of pa, sum of pb) on
 * the one thread per channel that holds them. */
template <class F> __global__ void k_bn_chan(const float *pa, const float *pb, int R, int C, F f)
{
	__shared__ double ta[kRows][kCols + 1], tb[kRows][kCols + 1];
	const at t = me();
	double sa, sb;

	rf_bn::colsum_lane(t, pa, pb, R, C, ta, tb);
	__syncthreads();
	if (rf_bn::colsum_fold(t, C, ta, tb, &sa, &sb))
		f(t.bx * kCols + t.tx, sa, sb);
}

/* what k_bn_chan does with the sums, by launch */
struct mean_fn {        /* after the forward's pass 0 */
	int64_t M;
	float *mean;
	__device__ void operator()(int c, double sa, double) const { rf_bn::mean_of(c, sa, M, mean); }
};
struct stats_fn {       /* after its pass 1 */
	int64_t M;
	float eps, momentum;
	const float *mean;
	float *invstd, *run_mean, *run_var;
	const float *gamma;
	float *kf;
	__device__ void operator()(int c, double sa, double sb) const
	{
		rf_bn::stats_of(c, sa, sb, M, eps, momentum, mean, invstd, run_mean, run_var, gamma,
				kf);
	}
};
struct bwd_fn {         /* after the backward's pass */
	int C;
	int64_t M;
	const float *invstd, *gamma;
	float *dgamma, *dbeta, *f;
	__device__ void operator()(int c, double sg, double sgx) const
	{
		rf_bn::bwd_of(c, sg, sgx, C, M, invstd, gamma, dgamma, dbeta, f);
	}
};
template <typename T> struct store_fn { /* the column sum's */
	T *out;
	int acc;
	__device__ void operator()(int c, double s, double) const
	{
		rf_bn::colsum_store<T>(c, s, out, acc);
	}
};

__global__ void k_bn_eval_k(int C, float eps, const float *gamma, const float *run_var, float *kf)
{
	const int c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c < C)
		rf_bn::eval_k_of(c, eps, gamma, run_var, kf);
}

template <typename T>
__global__ void k_bn_apply(T *y, const T *x, const float *m, const float *kf, const float *beta,
			   int64_t M, int C, int relu)
{
	rf_bn::apply_rows<T>(me(), y, x, m, kf, beta, M, C, relu);
}

template <typename T> __global__ void k_bias_rows(T *y, const T *b, int64_t M, int C, int acc)
{
	rf_bn::bias_rows<T>(me(), y, b, M, C, acc);
}

template <typename T>
__global__ void k_bn_dx(T *dx, const T *dy, const T *y, const T *x, const float *mean,
			const float *f, int64_t M, int C)
{
	rf_bn::dx_rows<T>(me(), dx, dy, y, x, mean, f, M, C);
}

const dim3 kBlock(kCols, kRows);

template <typename T>
int train(void *s, void *y, const void *x, const float *gamma, const float *beta, float *mean,
	  float *invstd, float *run_mean, float *run_var, float eps, float momentum, int relu,
	  const geo &g)
{
	const dim3 part(g.part_x, g.part_y), elt(g.elt_x, g.elt_y);

	k_bn_partial<T, 0><<<part, kBlock, 0, S(s)>>>((const T *)x, nullptr, nullptr, nullptr, g.M,
						       g.C, g.chunk, g.pa, nullptr);
	k_bn_chan<<<g.chan_x, kBlock, 0, S(s)>>>(g.pa, nullptr, g.R, g.C, mean_fn{ g.M, mean });
	k_bn_partial<T, 1><<<part, kBlock, 0, S(s)>>>((const T *)x, nullptr, nullptr, mean, g.M,
						       g.C, g.chunk, nullptr, g.pb);
	k_bn_chan<<<g.chan_x, kBlock, 0, S(s)>>>(g.pa, g.pb, g.R, g.C,
						 stats_fn{ g.M, eps, momentum, mean, invstd,
							   run_mean, run_var, gamma, g.f });
	k_bn_apply<T><<<elt, kBlock, 0, S(s)>>>((T *)y, (const T *)x, mean, g.f, beta, g.M, g.C,
						relu);
	return launch_rc();
}

template <typename T>
int eval(void *s, void *y, const void *x, const float *gamma, const float *beta,
	 const float *run_mean, const float *run_var, float eps, int relu, const geo &g)
{
	k_bn_eval_k<<<(g.C + 127) / 128, 128, 0, S(s)>>>(g.C, eps, gamma, run_var, g.f);
	k_bn_apply<T><<<dim3(g.elt_x, g.elt_y), kBlock, 0, S(s)>>>((T *)y, (const T *)x, run_mean,
								   g.f, beta, g.M, g.C, relu);
	return launch_rc();
}

template <typename T>
int bwd(void *s, void *dx, float *dgamma, float *dbeta, const void *dy, const void *y,
	const void *x, const float *mean, const float *invstd, const float *gamma, const geo &g)
{
	k_bn_partial<T, 2><<<dim3(g.part_x, g.part_y), kBlock, 0, S(s)>>>(
		(const T *)x, (const T *)dy, (const T *)y, mean, g.M, g.C, g.chunk, g.pa, g.pb);
	k_bn_chan<<<g.chan_x, kBlock, 0, S(s)>>>(
		g.pa, g.pb, g.R, g.C, bwd_fn{ g.C, g.M, invstd, gamma, dgamma, dbeta, g.f });
	k_bn_dx<T><<<dim3(g.elt_x, g.elt_y), kBlock, 0, S(s)>>>(
		(T *)dx, (const T *)dy, (const T *)y, (const T *)x, mean, g.f, g.M, g.C);
	return launch_rc();
}

template <typename T>
int colsum(void *s, void *out, const void *x, int acc, const geo &g)
{
	k_bn_partial<T, 0><<<dim3(g.part_x, g.part_y), kBlock, 0, S(s)>>>(
		(const T *)x, nullptr, nullptr, nullptr, g.M, g.C, g.chunk, g.pa, nullptr);
	k_bn_chan<<<g.chan_x, kBlock, 0, S(s)>>>(g.pa, nullptr, g.R, g.C,
						 store_fn<T>{ (T *)out, acc });
	return launch_rc();
}

template <typename T> int bias(void *s, void *y, const void *b, int acc, const geo &g)
{
	k_bias_rows<T><<<dim3(g.elt_x, g.elt_y), kBlock, 0, S(s)>>>((T *)y, (const T *)b, g.M, g.C,
								     acc);
	return launch_rc();
}

} // namespace

extern "C" {

int rf__kc_bias_nhwc(void *stream, int dt, void *y, const void *b, int64_t M, int C, int acc)
{
	if (!M || !C)
		return 0;
	if (rf_bn::check_shape(M, C, dt) < 0)
		return -EINVAL;
	const geo g = rf_bn::make_geo(M, C, nullptr, rf_bn::EVAL);
	return dt == RF_BF16 ? bias<__nv_bfloat16>(stream, y, b, acc, g)
	     : dt == RF_F16 ? bias<__half>(stream, y, b, acc, g) : bias<float>(stream, y, b, acc, g);
}

int rf__kc_colsum_nhwc(void *stream, int dt, void *out, const void *x, int64_t M, int C, int acc,
		       void *ws, size_t ws_bytes)
{
	if (rf_bn::check_shape(M, C, dt) < 0 || ws_bytes < rf__kc_colsum_nhwc_ws(M, C))
		return -EINVAL;
	const geo g = rf_bn::make_geo(M, C, ws, rf_bn::COLSUM);
	return dt == RF_BF16 ? colsum<__nv_bfloat16>(stream, out, x, acc, g)
	     : dt == RF_F16 ? colsum<__half>(stream, out, x, acc, g)
			    : colsum<float>(stream, out, x, acc, g);
}

int rf__kc_bn_nhwc_train(void *stream, int dt, void *y, const void *x, const float *gamma,
			 const float *beta, float *mean, float *invstd, float *run_mean,
			 float *run_var, int64_t M, int C, float eps, float momentum, int relu,
			 void *ws, size_t ws_bytes)
{
	if (M < 2 || !(eps > 0.0f) || rf_bn::check(M, C, ws_bytes, dt, 0) < 0)
		return -EINVAL;
	const geo g = rf_bn::make_geo(M, C, ws, rf_bn::TRAIN);
	return dt == RF_BF16 ? train<__nv_bfloat16>(stream, y, x, gamma, beta, mean, invstd, run_mean,
						    run_var, eps, momentum, relu, g)
	     : dt == RF_F16 ? train<__half>(stream, y, x, gamma, beta, mean, invstd, run_mean,
					    run_var, eps, momentum, relu, g)
			    : train<float>(stream, y, x, gamma, beta, mean, invstd, run_mean,
					   run_var, eps, momentum, relu, g);
}

int rf__kc_bn_nhwc_eval(void *stream, int dt, void *y, const void *x, const float *gamma,
			const float *beta, const float *run_mean, const float *run_var, int64_t M,
			int C, float eps, int relu, void *ws, size_t ws_bytes)
{
	if (!(eps > 0.0f) || rf_bn::check(M, C, ws_bytes, dt, 1) < 0)
		return -EINVAL;
	const geo g = rf_bn::make_geo(M, C, ws, rf_bn::EVAL);
	return dt == RF_BF16 ? eval<__nv_bfloat16>(stream, y, x, gamma, beta, run_mean, run_var, eps,
						   relu, g)
	     : dt == RF_F16 ? eval<__half>(stream, y, x, gamma, beta, run_mean, run_var, eps, relu, g)
			    : eval<float>(stream, y, x, gamma, beta, run_mean, run_var, eps, relu, g);
}

int rf__kc_bn_nhwc_bwd(void *stream, int dt, void *dx, float *dgamma, float *dbeta,
		       const void *dy, const void *y, const void *x, const float *mean,
		       const float *invstd, const float *gamma, int64_t M, int C, void *ws,
		       size_t ws_bytes)
{
	if (rf_bn::check(M, C, ws_bytes, dt, 0) < 0)
		return -EINVAL;
	const geo g = rf_bn::make_geo(M, C, ws, rf_bn::TRAIN);
	return dt == RF_BF16 ? bwd<__nv_bfloat16>(stream, dx, dgamma, dbeta, dy, y, x, mean, invstd,
						  gamma, g)
	     : dt == RF_F16 ? bwd<__half>(stream, dx, dgamma, dbeta, dy, y, x, mean, invstd, gamma, g)
			    : bwd<float>(stream, dx, dgamma, dbeta, dy, y, x, mean, invstd, gamma, g);
}

} // extern "C"
