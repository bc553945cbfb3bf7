/* devices/cuda/kernels_cuda_norm.cu -- batch normalisation of NHWC tensors (f32, bf16 or
 * f16 data; parameters and statistics f32), the formulas of the CPU's rf__k_bn_* (two
 * passes for the variance, about the mean rounded to float, its residue removed).
 *
 * Why ours: cuDNN's batch norm (CUDNN_BATCHNORM_SPATIAL) on an NHWC tensor ran a
 * per-channel kernel that reads it with a stride of C -- 1.2 ms forward and 1.7 ms
 * backward for 256x64x28x28 f32 on an H200 (ncu, 2026-11-30), 76 % of a ResNet-18 step's
 * GPU time, for a tensor that takes ~20 us to read. Here a warp reads 32 neighbouring
 * channels of one row (coalesced), a block of 32 x 8 threads sums a chunk of rows into
 * one partial per channel, and a block per 32 channels adds the partials in double by
 * 8 lanes and then in order: fixed trees, the same bits every run, no atomics. eps is
 * the op's, as on the CPU (cuDNN's path raises it to CUDNN_BN_MIN_EPSILON).
 *
 * The fused ReLU reads and writes the values the separate ops would: y = max(v, 0)
 * before the store (rf_relu_fwd's bits), and dy taken as 0 where y <= 0 (rf_relu_bwd's). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <errno.h>
#include <stdint.h>

#include "kernels-cuda-common.cuh"

namespace {

constexpr int kCols = 32; /* channels per block: a warp's width */
constexpr int kRows = 8;  /* row lanes per block */

__device__ inline float ld(const float *p, size_t i) { return p[i]; }
__device__ inline float ld(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ inline float ld(const __half *p, size_t i) { return __half2float(p[i]); }
__device__ inline void st(float *p, size_t i, float v) { p[i] = v; }
__device__ inline void st(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ inline void st(__half *p, size_t i, float v) { p[i] = __float2half_rn(v); }

/* dy, or 0 where the forward's ReLU gave y <= 0 (y NULL: no ReLU) */
template <typename T> __device__ inline float grad(const T *dy, const T *y, size_t i)
{
	if (y) {
		float v = ld(y, i);
		return v > 0.0f ? ld(dy, i) : 0.0f;
	}
	return ld(dy, i);
}

/* Partial sums of chunk r = blockIdx.y (rows [r * chunk, (r + 1) * chunk) of M) for the
 * block's 32 channels, at pa[r * C + c] and pb[r * C + c]:
 *   mode 0: pa = sum x
 *   mode 1: pb = sum (x - mean)^2             (mean: the float mean, mf)
 *   mode 2: pa = sum g, pb = sum g (x - mean) (g: dy, masked by y > 0 if y) */
template <typename T, int MODE>
__global__ void k_bn_partial(const T *x, const T *dy, const T *y, const float *mf, int64_t M,
			     int C, int64_t chunk, float *pa, float *pb)
{
	__shared__ float sa[kRows][kCols + 1], sb[kRows][kCols + 1];
	const int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * kCols + tx;
	const int64_t r0 = (int64_t)blockIdx.y * chunk;
	const int64_t r1 = r0 + chunk < M ? r0 + chunk : M;
	float a = 0.0f, b = 0.0f;

	if (c < C) {
		const float m = MODE ? mf[c] : 0.0f;
		for (int64_t r = r0 + ty; r < r1; r += kRows) {
			const size_t i = (size_t)r * C + c;
			const float v = ld(x, i);
			if (MODE == 0) {
				a += v;
			} else if (MODE == 1) {
				b += (v - m) * (v - m);
			} else {
				const float g = grad(dy, y, i);
				a += g;
				b += g * (v - m);
			}
		}
	}
	sa[ty][tx] = a;
	sb[ty][tx] = b;
	__syncthreads();
	if (ty || c >= C)
		return;
	for (int k = 1; k < kRows; k++) {
		a += sa[k][tx];
		b += sb[k][tx];
	}
	if (MODE != 1)
		pa[(size_t)blockIdx.y * C + c] = a;
	if (MODE != 0)
		pb[(size_t)blockIdx.y * C + c] = b;
}

/* The sums over the R partials of channel c = blockIdx.x * 32 + threadIdx.x, of pa and
 * (if pb) of pb, in double: row lane ty adds partials ty, ty + 8, ..., then lane 0 adds
 * the 8 lanes in order (a fixed tree). Every thread of the block calls it (a barrier
 * inside); the sums are lane 0's, the others get 0. */
__device__ inline void colsums(const float *pa, const float *pb, int R, int C, double *sa,
			       double *sb)
{
	__shared__ double ta[kRows][kCols + 1], tb[kRows][kCols + 1];
	const int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * kCols + tx;
	double a = 0.0, b = 0.0;

	if (c < C)
		for (int r = ty; r < R; r += kRows) {
			a += pa[(size_t)r * C + c];
			if (pb)
				b += pb[(size_t)r * C + c];
		}
	ta[ty][tx] = a;
	tb[ty][tx] = b;
	__syncthreads();
	if (!ty)
		for (int k = 1; k < kRows; k++) {
			a += ta[k][tx];
			b += tb[k][tx];
		}
	*sa = a;
	*sb = b;
}

/* After pass 0: the mean, rounded to float, into mean (the saved mean). */
__global__ void k_bn_mean(const float *pa, int R, int C, int64_t M, float *mean)
{
	const int c = blockIdx.x * kCols + threadIdx.x;
	double sa, sb;

	colsums(pa, nullptr, R, C, &sa, &sb);
	if (!threadIdx.y && c < C)
		mean[c] = (float)(sa / (double)M);
}

/* After pass 1: invstd, the running statistics (momentum; the unbiased variance), and
 * the factor k = gamma * invstd the normalisation applies (kf). */
__global__ void k_bn_stats(const float *pa, const float *pb, int R, int C, int64_t M, float eps,
			   float momentum, const float *mean, float *invstd, float *run_mean,
			   float *run_var, const float *gamma, float *kf)
{
	const int c = blockIdx.x * kCols + threadIdx.x;
	double sa, sb;

	colsums(pa, pb, R, C, &sa, &sb);
	if (threadIdx.y || c >= C)
		return;
	const double mu = sa / (double)M, d = mu - (double)mean[c];
	double var = sb / (double)M - d * d;
	if (var < 0.0)
		var = 0.0;
	const double is = 1.0 / sqrt(var + (double)eps);
	invstd[c] = (float)is;
	kf[c] = (float)((double)gamma[c] * is);
	if (run_mean)
		run_mean[c] = (float)((1.0 - momentum) * run_mean[c] + momentum * mu);
	if (run_var)
		run_var[c] = (float)((1.0 - momentum) * run_var[c] +
				     momentum * var * (double)M / (double)(M - 1));
}

/* Evaluation's factor: k = gamma / sqrt(run_var + eps), into kf. */
__global__ void k_bn_eval_k(int C, float eps, const float *gamma, const float *run_var, float *kf)
{
	const int c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c < C)
		kf[c] = (float)((double)gamma[c] / sqrt((double)run_var[c] + eps));
}

/* y = (x - m) * k + beta (then max(., 0) if relu), per row of C channels */
template <typename T>
__global__ void k_bn_apply(T *y, const T *x, const float *m, const float *kf, const float *beta,
			   int64_t M, int C, int relu)
{
	const int c = blockIdx.x * kCols + threadIdx.x;

	if (c >= C)
		return;
	const float mc = m[c], k = kf[c], b = beta[c];
	for (int64_t r = (int64_t)blockIdx.y * kRows + threadIdx.y; r < M;
	     r += (int64_t)gridDim.y * kRows) {
		const size_t i = (size_t)r * C + c;
		float v = (ld(x, i) - mc) * k + b;
		if (relu)
			v = v > 0.0f ? v : 0.0f;
		st(y, i, v);
	}
}

/* The backward's per-channel results from the partial sums: dbeta = sum g,
 * dgamma = invstd * sum g (x - mean), and dx's factors k = gamma * invstd,
 * a = sum g / M, cc = invstd^2 * sum g (x - mean) / M (into f[0..C), [C..2C), [2C..3C)). */
__global__ void k_bn_bwd_fin(const float *pa, const float *pb, int R, int C, int64_t M,
			     const float *invstd, const float *gamma, float *dgamma, float *dbeta,
			     float *f)
{
	const int c = blockIdx.x * kCols + threadIdx.x;
	double sg, sgx;

	colsums(pa, pb, R, C, &sg, &sgx);
	if (threadIdx.y || c >= C)
		return;
	const double is = invstd[c];
	dbeta[c] = (float)sg;
	dgamma[c] = (float)(sgx * is);
	f[c] = (float)((double)gamma[c] * is);
	f[C + c] = (float)(sg / (double)M);
	f[2 * C + c] = (float)(is * is * sgx / (double)M);
}

/* dx = k * (g - a - (x - mean) * cc) */
template <typename T>
__global__ void k_bn_dx(T *dx, const T *dy, const T *y, const T *x, const float *mean,
			const float *f, int64_t M, int C)
{
	const int c = blockIdx.x * kCols + threadIdx.x;

	if (c >= C)
		return;
	const float m = mean[c], k = f[c], a = f[C + c], cc = f[2 * C + c];
	for (int64_t r = (int64_t)blockIdx.y * kRows + threadIdx.y; r < M;
	     r += (int64_t)gridDim.y * kRows) {
		const size_t i = (size_t)r * C + c;
		st(dx, i, k * (grad(dy, y, i) - a - (ld(x, i) - m) * cc));
	}
}

/* the grids, blocks of 32 channels x 8 row lanes: partial sums one block per (32
 * channels, chunk); the per-channel results one per 32 channels; elementwise passes
 * one per 32 channels and up to 4096 row groups of 8 */
struct geo {
	int64_t M, chunk;
	int C, R;
	dim3 blk, part, elt, chan;
	float *pa, *pb, *f; /* the workspace: R x C partials each, then 3 C factors (the
			     * evaluation: the factors only) */
};

geo make_geo(int64_t M, int C, void *ws, int eval)
{
	geo g;
	int64_t rows = (M + kRows - 1) / kRows;

	g.M = M;
	g.C = C;
	g.chunk = rf__kc_bn_nhwc_chunk(M);
	g.R = eval ? 0 : (int)((M + g.chunk - 1) / g.chunk);
	g.blk = dim3(kCols, kRows);
	g.part = dim3((unsigned)((C + kCols - 1) / kCols), (unsigned)g.R);
	g.elt = dim3((unsigned)((C + kCols - 1) / kCols), (unsigned)(rows < 4096 ? rows : 4096));
	g.chan = dim3((unsigned)((C + kCols - 1) / kCols));
	g.pa = (float *)ws;
	g.pb = g.pa + (size_t)g.R * C;
	g.f = g.pb + (size_t)g.R * C;
	return g;
}

template <typename T>
int train(void *s, void *y, const void *x, const float *gamma, const float *beta, float *mean,
	  float *invstd, float *run_mean, float *run_var, float eps, float momentum, int relu,
	  const geo &g)
{
	k_bn_partial<T, 0><<<g.part, g.blk, 0, S(s)>>>((const T *)x, nullptr, nullptr, nullptr, g.M,
						       g.C, g.chunk, g.pa, nullptr);
	k_bn_mean<<<g.chan, g.blk, 0, S(s)>>>(g.pa, g.R, g.C, g.M, mean);
	k_bn_partial<T, 1><<<g.part, g.blk, 0, S(s)>>>((const T *)x, nullptr, nullptr, mean, g.M,
						       g.C, g.chunk, nullptr, g.pb);
	k_bn_stats<<<g.chan, g.blk, 0, S(s)>>>(g.pa, g.pb, g.R, g.C, g.M, eps, momentum, mean,
					       invstd, run_mean, run_var, gamma, g.f);
	k_bn_apply<T><<<g.elt, g.blk, 0, S(s)>>>((T *)y, (const T *)x, mean, g.f, beta, g.M, g.C,
						 relu);
	return launch_rc();
}

template <typename T>
int eval(void *s, void *y, const void *x, const float *gamma, const float *beta,
	 const float *run_mean, const float *run_var, float eps, int relu, const geo &g)
{
	k_bn_eval_k<<<(g.C + 127) / 128, 128, 0, S(s)>>>(g.C, eps, gamma, run_var, g.f);
	k_bn_apply<T><<<g.elt, g.blk, 0, S(s)>>>((T *)y, (const T *)x, run_mean, g.f, beta, g.M,
						 g.C, relu);
	return launch_rc();
}

template <typename T>
int bwd(void *s, void *dx, float *dgamma, float *dbeta, const void *dy, const void *y,
	const void *x, const float *mean, const float *invstd, const float *gamma, const geo &g)
{
	k_bn_partial<T, 2><<<g.part, g.blk, 0, S(s)>>>((const T *)x, (const T *)dy, (const T *)y,
						       mean, g.M, g.C, g.chunk, g.pa, g.pb);
	k_bn_bwd_fin<<<g.chan, g.blk, 0, S(s)>>>(g.pa, g.pb, g.R, g.C, g.M, invstd, gamma, dgamma,
						 dbeta, g.f);
	k_bn_dx<T><<<g.elt, g.blk, 0, S(s)>>>((T *)dx, (const T *)dy, (const T *)y, (const T *)x,
					      mean, g.f, g.M, g.C);
	return launch_rc();
}

/* the shape checks of the CPU's kernels, and the workspace's size */
int check(int64_t M, int C, size_t ws_bytes, int dt, int eval)
{
	if (M < 1 || C < 1 || C > (1 << 24) || (dt != RF_F32 && dt != RF_BF16 && dt != RF_F16))
		return -EINVAL;
	return ws_bytes < rf__kc_bn_nhwc_ws(M, C, eval) ? -EINVAL : 0;
}

} // namespace

extern "C" {

int rf__kc_bn_nhwc_train(void *stream, int dt, void *y, const void *x, const float *gamma,
			 const float *beta, float *mean, float *invstd, float *run_mean,
			 float *run_var, int64_t M, int C, float eps, float momentum, int relu,
			 void *ws, size_t ws_bytes)
{
	if (M < 2 || !(eps > 0.0f) || check(M, C, ws_bytes, dt, 0) < 0)
		return -EINVAL;
	const geo g = make_geo(M, C, ws, 0);
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
	if (!(eps > 0.0f) || check(M, C, ws_bytes, dt, 1) < 0)
		return -EINVAL;
	const geo g = make_geo(M, C, ws, 1);
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
	if (check(M, C, ws_bytes, dt, 0) < 0)
		return -EINVAL;
	const geo g = make_geo(M, C, ws, 0);
	return dt == RF_BF16 ? bwd<__nv_bfloat16>(stream, dx, dgamma, dbeta, dy, y, x, mean, invstd,
						  gamma, g)
	     : dt == RF_F16 ? bwd<__half>(stream, dx, dgamma, dbeta, dy, y, x, mean, invstd, gamma, g)
			    : bwd<float>(stream, dx, dgamma, dbeta, dy, y, x, mean, invstd, gamma, g);
}

} // extern "C"
