/* devices/cuda/bn-nhwc-body.h -- the bodies of the NHWC batch-norm kernels
 * and of the NHWC column sum (a convolution's bias gradient; kernels_cuda_norm.cu), each a
 * function of one thread's place in the grid and split at
 * the block's barrier. The kernels call them with CUDA's threadIdx / blockIdx and
 * __syncthreads between the two phases; tests/devices/test-bn-nhwc.cc runs the same
 * functions on the host -- every thread of a block through the first phase before any
 * enters the second, blocks one after another -- and compares what they compute with a
 * reference, so the indexing, the chunking and the order of the sums are tested on
 * machines without a GPU.
 *
 * C++ (nvcc, or the host compiler for the test). The includer defines RF_KB, the
 * functions' qualifiers (`__device__ __forceinline__`; `inline` on the host), and
 * ld(const T *, size_t) -> float and st(T *, size_t, float) for each element type
 * before including. Layout: element (row m, channel c) of M = n*h*w rows at m*C + c. */
#ifndef RF_BN_NHWC_BODY_H
#define RF_BN_NHWC_BODY_H

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels-cuda-impl.h"

namespace rf_bn {

constexpr int kCols = 32; /* channels per block: a warp's width */
constexpr int kRows = 8;  /* row lanes per block */

/* one thread's place: threadIdx.x / .y, blockIdx.x / .y, gridDim.y */
struct at {
	int tx, ty, bx, by, gy;
};

/* The launches (blocks of kCols x kRows threads): partial sums, a block per (32
 * channels, chunk of rows); per-channel results, a block per 32 channels; elementwise
 * passes, a block per 32 channels and up to 4096 groups of 8 rows. The workspace: R x C
 * partials twice, then 3 C factors (the evaluation: the factors only). Host code. */
struct geo {
	int64_t M, chunk;
	int C, R;
	unsigned part_x, part_y, elt_x, elt_y, chan_x;
	float *pa, *pb, *f;
};

enum use { TRAIN, EVAL, COLSUM }; /* the workspace: partials twice and the factors; the
				   * factors only; one set of partials (pb, f NULL) */

inline geo make_geo(int64_t M, int C, void *ws, use u)
{
	geo g;
	const int64_t rows = (M + kRows - 1) / kRows;

	g.M = M;
	g.C = C;
	g.chunk = rf__kc_bn_nhwc_chunk(M);
	g.R = u == EVAL ? 0 : (int)((M + g.chunk - 1) / g.chunk);
	g.part_x = g.elt_x = g.chan_x = (unsigned)((C + kCols - 1) / kCols);
	g.part_y = (unsigned)g.R;
	g.elt_y = (unsigned)(rows < 4096 ? rows : 4096);
	g.pa = (float *)ws;
	g.pb = u == COLSUM ? nullptr : g.pa + (size_t)g.R * C;
	g.f = u == COLSUM ? nullptr : g.pb + (size_t)g.R * C;
	return g;
}

/* dy, or 0 where the forward's ReLU gave y <= 0 (y NULL: no ReLU): rf_relu_bwd's */
template <typename T> RF_KB float grad(const T *dy, const T *y, size_t i)
{
	if (y)
		return ld(y, i) > 0.0f ? ld(dy, i) : 0.0f;
	return ld(dy, i);
}

/* ---- partial sums of chunk t.by (rows [by * chunk, (by + 1) * chunk) of M) -----------
 * mode 0: pa = sum x; mode 1: pb = sum (x - mean)^2 (mf: the float mean);
 * mode 2: pa = sum g, pb = sum g (x - mean) (g: dy masked by y > 0 if y).
 * Phase 1: row lane ty adds rows by * chunk + ty, + 8, ... into sa / sb[ty][tx];
 * phase 2: lane 0 adds the 8 lanes in order and writes partial (by, c). */
template <typename T, int MODE>
RF_KB void partial_lane(const at &t, const T *x, const T *dy, const T *y, const float *mf,
			int64_t M, int C, int64_t chunk, float (*sa)[kCols + 1],
			float (*sb)[kCols + 1])
{
	const int c = t.bx * kCols + t.tx;
	const int64_t r0 = (int64_t)t.by * chunk, r1 = r0 + chunk < M ? r0 + chunk : M;
	float a = 0.0f, b = 0.0f;

	if (c < C) {
		const float m = MODE ? mf[c] : 0.0f;
		for (int64_t r = r0 + t.ty; r < r1; r += kRows) {
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
	sa[t.ty][t.tx] = a;
	sb[t.ty][t.tx] = b;
}

template <int MODE>
RF_KB void partial_fold(const at &t, int C, const float (*sa)[kCols + 1],
			const float (*sb)[kCols + 1], float *pa, float *pb)
{
	const int c = t.bx * kCols + t.tx;
	float a, b;

	if (t.ty || c >= C)
		return;
	a = sa[0][t.tx];
	b = sb[0][t.tx];
	for (int k = 1; k < kRows; k++) {
		a += sa[k][t.tx];
		b += sb[k][t.tx];
	}
	if (MODE != 1)
		pa[(size_t)t.by * C + c] = a;
	if (MODE != 0)
		pb[(size_t)t.by * C + c] = b;
}

/* ---- a channel's sums over its R partials, of pa and (if pb) pb, in double ----------
 * Phase 1: lane ty adds partials ty, ty + 8, ...; phase 2: lane 0 adds the 8 lanes in
 * order, and is the one thread that returns 1 (with the sums) for each channel < C. */
RF_KB void colsum_lane(const at &t, const float *pa, const float *pb, int R, int C,
		       double (*ta)[kCols + 1], double (*tb)[kCols + 1])
{
	const int c = t.bx * kCols + t.tx;
	double a = 0.0, b = 0.0;

	if (c < C)
		for (int r = t.ty; r < R; r += kRows) {
			a += pa[(size_t)r * C + c];
			if (pb)
				b += pb[(size_t)r * C + c];
		}
	ta[t.ty][t.tx] = a;
	tb[t.ty][t.tx] = b;
}

RF_KB int colsum_fold(const at &t, int C, const double (*ta)[kCols + 1],
		      const double (*tb)[kCols + 1], double *sa, double *sb)
{
	if (t.ty || t.bx * kCols + t.tx >= C)
		return 0;
	*sa = ta[0][t.tx];
	*sb = tb[0][t.tx];
	for (int k = 1; k < kRows; k++) {
		*sa += ta[k][t.tx];
		*sb += tb[k][t.tx];
	}
	return 1;
}

/* ---- per-channel results (channel c, from its sums) --------------------------------- */

/* after pass 0: the mean rounded to float (the saved mean, and pass 1's mf) */
RF_KB void mean_of(int c, double sa, int64_t M, float *mean)
{
	mean[c] = (float)(sa / (double)M);
}

/* after pass 1: invstd, the running statistics (momentum, the unbiased variance; either
 * may be NULL) and k = gamma * invstd into kf. The variance about the float mean with
 * its residue removed: sum (v - mu)^2 = sum (v - mf)^2 - M (mu - mf)^2 (cpu/norm.c) */
RF_KB void stats_of(int c, double sa, double sb, int64_t M, float eps, float momentum,
		    const float *mean, float *invstd, float *run_mean, float *run_var,
		    const float *gamma, float *kf)
{
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

/* the evaluation's k = gamma / sqrt(run_var + eps) into kf */
RF_KB void eval_k_of(int c, float eps, const float *gamma, const float *run_var, float *kf)
{
	kf[c] = (float)((double)gamma[c] / sqrt((double)run_var[c] + (double)eps));
}

/* the backward's: dbeta = sum g, dgamma = invstd * sum g (x - mean), and dx's factors
 * k = gamma * invstd, a = sum g / M, cc = invstd^2 * sum g (x - mean) / M into f[c],
 * f[C + c], f[2C + c] */
RF_KB void bwd_of(int c, double sg, double sgx, int C, int64_t M, const float *invstd,
		  const float *gamma, float *dgamma, float *dbeta, float *f)
{
	const double is = invstd[c];

	dbeta[c] = (float)sg;
	dgamma[c] = (float)(sgx * is);
	f[c] = (float)((double)gamma[c] * is);
	f[C + c] = (float)(sg / (double)M);
	f[2 * C + c] = (float)(is * is * sgx / (double)M);
}

/* a column sum's result (an NHWC convolution's bias gradient, db = sum of dy over the
 * rows): out[c] = s, or out[c] + s (acc), added in double, rounded to f32 and then to
 * out's type */
template <typename T> RF_KB void colsum_store(int c, double s, T *out, int acc)
{
	st(out, (size_t)c, (float)(acc ? (double)ld(out, (size_t)c) + s : s));
}

/* ---- elementwise, over the rows of one thread's channel ------------------------------ */

/* y = (x - m) * k + beta, then max(., 0) if relu (rf_relu_fwd's: before the store) */
template <typename T>
RF_KB void apply_rows(const at &t, T *y, const T *x, const float *m, const float *kf,
		      const float *beta, int64_t M, int C, int relu)
{
	const int c = t.bx * kCols + t.tx;

	if (c >= C)
		return;
	const float mc = m[c], k = kf[c], b = beta[c];
	for (int64_t r = (int64_t)t.by * kRows + t.ty; r < M; r += (int64_t)t.gy * kRows) {
		const size_t i = (size_t)r * C + c;
		float v = (ld(x, i) - mc) * k + b;
		if (relu)
			v = v > 0.0f ? v : 0.0f;
		st(y, i, v);
	}
}

/* y = (acc ? y : 0) + b[c] along each row (an NHWC convolution's bias; acc 0 fills y
 * before a convolution adds its sums to it), one rounding into y's type: k_bias4's
 * bits, without its division per element */
template <typename T>
RF_KB void bias_rows(const at &t, T *y, const T *b, int64_t M, int C, int acc)
{
	const int c = t.bx * kCols + t.tx;

	if (c >= C)
		return;
	const float bc = ld(b, (size_t)c);
	for (int64_t r = (int64_t)t.by * kRows + t.ty; r < M; r += (int64_t)t.gy * kRows) {
		const size_t i = (size_t)r * C + c;
		st(y, i, acc ? ld(y, i) + bc : bc);
	}
}

/* dx = k * (g - a - (x - mean) * cc) */
template <typename T>
RF_KB void dx_rows(const at &t, T *dx, const T *dy, const T *y, const T *x, const float *mean,
		   const float *f, int64_t M, int C)
{
	const int c = t.bx * kCols + t.tx;

	if (c >= C)
		return;
	const float m = mean[c], k = f[c], a = f[C + c], cc = f[2 * C + c];
	for (int64_t r = (int64_t)t.by * kRows + t.ty; r < M; r += (int64_t)t.gy * kRows) {
		const size_t i = (size_t)r * C + c;
		st(dx, i, k * (grad(dy, y, i) - a - (ld(x, i) - m) * cc));
	}
}

/* the shape checks of the CPU's kernels and the dtypes (host) */
inline int check_shape(int64_t M, int C, int dt)
{
	if (M < 1 || C < 1 || C > (1 << 24) || (dt != RF_F32 && dt != RF_BF16 && dt != RF_F16))
		return -EINVAL;
	return 0;
}

/* those, and the batch norm's workspace's size */
inline int check(int64_t M, int C, size_t ws_bytes, int dt, int eval)
{
	if (check_shape(M, C, dt) < 0)
		return -EINVAL;
	return ws_bytes < rf__kc_bn_nhwc_ws(M, C, eval) ? -EINVAL : 0;
}

} // namespace rf_bn

#endif
