/* devices/cuda/kernels_cuda.cu -- CUDA kernels (see kernels-cuda-impl.h; formulas as in kernels.h);
 * the optimiser updates are in kernels_cuda_optim.cu.
 *
 * All launches are asynchronous on the caller's stream. Elementwise kernels use
 * grid-stride loops; reductions use one block per output with a fixed shared-memory
 * tree, so results are reproducible run to run. Where the CPU result is promised
 * bit for bit, the arithmetic uses the _rn intrinsics so nvcc cannot fuse it.
 */
#include <cuda_runtime.h>
#include "cublas-dl.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../kernel-args.h"
#include "kernels-cuda-common.cuh"

namespace {

constexpr size_t kConvWsCap = (size_t)256 << 20;

inline int cublas_rc(cublasStatus_t s)
{
	return s == CUBLAS_STATUS_SUCCESS ? 0 : -(RF_KC_ECUBLAS + (int)s);
}

/* ---- elementwise ---------------------------------------------------------------- */

__global__ void k_bias_add(float *y, const float *b, size_t total, int cols)
{
	GRID_STRIDE(i, total)
		y[i] += b[i % (size_t)cols];
}

__global__ void k_relu_fwd(float *y, const float *x, size_t n)
{
	GRID_STRIDE(i, n) {
		float v = x[i];
		y[i] = v > 0.0f ? v : 0.0f;
	}
}

__global__ void k_add_relu(float *y, const float *a, const float *b, size_t n)
{
	GRID_STRIDE(i, n) {
		float v = __fadd_rn(a[i], b[i]);
		y[i] = v > 0.0f ? v : 0.0f;
	}
}

__global__ void k_relu_bwd(float *dx, const float *dy, const float *y, size_t n)
{
	GRID_STRIDE(i, n)
		dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void k_axpy(float *y, float a, const float *x, size_t n)
{
	GRID_STRIDE(i, n)
		y[i] += a * x[i];
}

__global__ void k_scale(float *x, float a, size_t n)
{
	GRID_STRIDE(i, n)
		x[i] *= a;
}

template <typename T> __global__ void k_fill(T *x, T v, size_t n)
{
	GRID_STRIDE(i, n)
		x[i] = v;
}

constexpr int kReduceMax = 8;
struct ptrs8 {
	const float *p[kReduceMax];
};

/* out = (first ? in[0] : out + in[0]) + in[1] + ... + in[k-1], left to right */
__global__ void k_reduce_sum(float *out, ptrs8 in, int k, int first, size_t n)
{
	GRID_STRIDE(i, n) {
		float acc;
		int j = 0;
		if (first) {
			acc = in.p[0][i];
			j = 1;
		} else {
			acc = out[i];
		}
		for (; j < k; j++)
			acc = __fadd_rn(acc, in.p[j][i]);
		out[i] = acc;
	}
}

__global__ void k_u8_to_f32(float *out, const uint8_t *in, size_t n, rf__u8norm m)
{
	GRID_STRIDE(i, n) {
		unsigned c = m.nch > 1 ? (unsigned)((i / m.plane) % m.nch) : 0;
		out[i] = __fdiv_rn(__fsub_rn(__fmul_rn((float)in[i], m.scale), m.mean[c]), m.std[c]);
	}
}

__global__ void k_u8_to_i32(int32_t *out, const uint8_t *in, size_t n)
{
	GRID_STRIDE(i, n)
		out[i] = in[i];
}

/* ---- Philox4x32-10 ------------------------------------------------------------------- */

__device__ __forceinline__ void philox10(uint32_t x[4], uint32_t k0, uint32_t k1)
{
#pragma unroll
	for (int r = 0; r < 10; r++) {
		if (r) {
			k0 += 0x9E3779B9u;
			k1 += 0xBB67AE85u;
		}
		uint32_t lo0 = 0xD2511F53u * x[0], hi0 = __umulhi(0xD2511F53u, x[0]);
		uint32_t lo1 = 0xCD9E8D57u * x[2], hi1 = __umulhi(0xCD9E8D57u, x[2]);
		uint32_t y0 = hi1 ^ x[1] ^ k0, y2 = hi0 ^ x[3] ^ k1;
		x[0] = y0;
		x[1] = lo1;
		x[2] = y2;
		x[3] = lo0;
	}
}

__global__ void k_rand_uniform(float *out, size_t n, uint32_t k0, uint32_t k1,
			       uint64_t counter, float lo, float d)
{
	GRID_STRIDE(i, n) {
		uint64_t idx = counter + i;
		uint32_t x[4] = { (uint32_t)idx, (uint32_t)(idx >> 32), 0u, 0u };
		philox10(x, k0, k1);
		float u = (float)(x[0] >> 8) * 5.9604644775390625e-08f; /* 2^-24, exact */
		out[i] = __fadd_rn(lo, __fmul_rn(d, u));
	}
}

__global__ void k_rand_normal(float *out, size_t n, uint32_t k0, uint32_t k1,
			      uint64_t counter, double mean, double std)
{
	const double two_pi = 6.283185307179586476925286766559;
	const double two_m32 = 2.3283064365386962890625e-10; /* 2^-32 */
	GRID_STRIDE(i, n) {
		uint64_t idx = counter + i;
		uint32_t x[4] = { (uint32_t)idx, (uint32_t)(idx >> 32), 0u, 0u };
		philox10(x, k0, k1);
		double u1 = __dmul_rn(__dadd_rn((double)x[0], 1.0), two_m32);
		double u2 = __dmul_rn((double)x[1], two_m32);
		double z = __dmul_rn(sqrt(__dmul_rn(-2.0, log(u1))), cos(__dmul_rn(two_pi, u2)));
		out[i] = (float)__dadd_rn(mean, __dmul_rn(std, z));
	}
}

/* ---- reductions ------------------------------------------------------------------------ */

/* out[c] (+)= sum_{n < outer, p < inner} x[(n*ch + c)*inner + p]; one block per channel */
__global__ void k_channel_sum(float *out, const float *x, int outer, int ch, size_t inner,
			      int accumulate)
{
	__shared__ float sh[kThreads];
	const int c = blockIdx.x;
	const size_t total = (size_t)outer * inner;
	float acc = 0.0f;
	for (size_t t = threadIdx.x; t < total; t += blockDim.x) {
		size_t nn = t / inner, p = t % inner;
		acc += x[(nn * ch + c) * inner + p];
	}
	sh[threadIdx.x] = acc;
	__syncthreads();
	for (int s = kThreads / 2; s > 0; s >>= 1) {
		if ((int)threadIdx.x < s)
			sh[threadIdx.x] += sh[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[c] = accumulate ? out[c] + sh[0] : sh[0];
}

/* One block; each thread takes rows tid, tid + 256, ...; fixed-tree reduction. */
__global__ void k_softmax_xent(float *dl, float *loss_sum, int32_t *correct,
			       const float *logits, const int32_t *labels, int rows,
			       int cols, float inv_rows)
{
	__shared__ double sl[kThreads];
	__shared__ int sc[kThreads];
	double loss = 0.0;
	int ok = 0;
	for (int r = threadIdx.x; r < rows; r += blockDim.x) {
		const float *x = logits + (size_t)r * cols;
		const int lab = labels[r];
		const bool valid = lab >= 0 && lab < cols;
		int arg = 0;
		float mx = x[0];
		for (int j = 1; j < cols; j++)
			if (x[j] > mx) {
				mx = x[j];
				arg = j;
			}
		float sum = 0.0f;
		for (int j = 0; j < cols; j++)
			sum += expf(x[j] - mx);
		if (valid) {
			loss += (double)(logf(sum) - (x[lab] - mx));
			ok += arg == lab;
		} else {
			loss += __longlong_as_double(0x7ff8000000000000ll); /* NaN */
		}
		if (dl) {
			float *d = dl + (size_t)r * cols;
			const float inv_sum = 1.0f / sum;
			for (int j = 0; j < cols; j++)
				d[j] = valid ? (expf(x[j] - mx) * inv_sum -
						(j == lab ? 1.0f : 0.0f)) * inv_rows
					     : 0.0f;
		}
	}
	sl[threadIdx.x] = loss;
	sc[threadIdx.x] = ok;
	__syncthreads();
	for (int s = kThreads / 2; s > 0; s >>= 1) {
		if ((int)threadIdx.x < s) {
			sl[threadIdx.x] += sl[threadIdx.x + s];
			sc[threadIdx.x] += sc[threadIdx.x + s];
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		if (loss_sum)
			*loss_sum = (float)sl[0];
		if (correct)
			*correct = sc[0];
	}
}

/* ---- convolution helpers ----------------------------------------------------------------- */

struct conv_geom {
	int C, H, W, O, KH, KW, OH, OW, S, P;   /* S stride (>= 1), P zero padding */
};

inline conv_geom geom(const rf__conv2d *s)
{
	return conv_geom{ s->c, s->h, s->w, s->o, s->kh, s->kw, rf__conv2d_oh(s),
			  rf__conv2d_ow(s), rf__conv2d_stride(s), s->pad };
}

/* col (C*KH*KW, g*OH*OW) from g images at x (g, C, H, W); taps in the padding read 0 */
__global__ void k_im2col(float *col, const float *x, conv_geom q, int g)
{
	const size_t ohw = (size_t)q.OH * q.OW, ld = (size_t)g * ohw;
	const size_t total = (size_t)q.C * q.KH * q.KW * ld;
	GRID_STRIDE(t, total) {
		size_t r = t / ld, qq = t % ld;
		size_t gi = qq / ohw, p = qq % ohw;
		int i = (int)(p / q.OW), j = (int)(p % q.OW);
		int c = (int)(r / (q.KH * q.KW)), rem = (int)(r % (q.KH * q.KW));
		int a = rem / q.KW, b = rem % q.KW;
		int ih = i * q.S - q.P + a, iw = j * q.S - q.P + b;
		col[t] = ih >= 0 && ih < q.H && iw >= 0 && iw < q.W
				 ? x[((gi * q.C + c) * q.H + ih) * q.W + iw]
				 : 0.0f;
	}
}

/* dx (g, C, H, W) = col2im(dcol (C*KH*KW, g*OH*OW)); each thread one dx element,
 * summed kh-major then kw, as the CPU does. */
__global__ void k_col2im(float *dx, const float *dcol, conv_geom q, int g)
{
	const size_t ohw = (size_t)q.OH * q.OW, ld = (size_t)g * ohw;
	const size_t total = (size_t)g * q.C * q.H * q.W;
	GRID_STRIDE(t, total) {
		int wi = (int)(t % q.W);
		int hi = (int)((t / q.W) % q.H);
		int c = (int)((t / ((size_t)q.W * q.H)) % q.C);
		size_t gi = t / ((size_t)q.W * q.H * q.C);
		float acc = 0.0f;
		for (int a = 0; a < q.KH; a++) {
			int si = hi + q.P - a, i = si / q.S;    /* i*S - P + a == hi */
			if (si < 0 || si % q.S || i >= q.OH)
				continue;
			for (int b = 0; b < q.KW; b++) {
				int sj = wi + q.P - b, j = sj / q.S;
				if (sj < 0 || sj % q.S || j >= q.OW)
					continue;
				size_t r = ((size_t)c * q.KH + a) * q.KW + b;
				acc += dcol[r * ld + gi * ohw + (size_t)i * q.OW + j];
			}
		}
		dx[t] = acc;
	}
}

/* y (g, O, ohw) = out (O, g*ohw) + b; out may equal y when g == 1 */
__global__ void k_scatter_bias(float *y, const float *out, const float *b, int g, int O,
			       size_t ohw)
{
	const size_t ld = (size_t)g * ohw, total = (size_t)g * O * ohw;
	GRID_STRIDE(t, total) {
		size_t gi = t / ((size_t)O * ohw), rem = t % ((size_t)O * ohw);
		size_t oc = rem / ohw, p = rem % ohw;
		float v = out[oc * ld + gi * ohw + p];
		y[t] = b ? v + b[oc] : v;
	}
}

/* t (O, g*ohw) = dy (g, O, ohw) */
__global__ void k_gather(float *tm, const float *dy, int g, int O, size_t ohw)
{
	const size_t ld = (size_t)g * ohw, total = (size_t)g * O * ohw;
	GRID_STRIDE(t, total) {
		size_t gi = t / ((size_t)O * ohw), rem = t % ((size_t)O * ohw);
		size_t oc = rem / ohw, p = rem % ohw;
		tm[oc * ld + gi * ohw + p] = dy[t];
	}
}

/* ---- pooling ------------------------------------------------------------------------------- */

__global__ void k_avgpool_fwd(float *y, const float *x, size_t planes, int h, int w, int k)
{
	const int oh = h / k, ow = w / k;
	const float inv = 1.0f / (float)(k * k);
	const size_t total = planes * oh * ow;
	GRID_STRIDE(t, total) {
		int j = (int)(t % ow), i = (int)((t / ow) % oh);
		size_t pl = t / ((size_t)oh * ow);
		const float *xp = x + pl * h * w + (size_t)i * k * w + (size_t)j * k;
		float acc = 0.0f;
		for (int a = 0; a < k; a++)
			for (int b = 0; b < k; b++)
				acc = __fadd_rn(acc, xp[(size_t)a * w + b]);
		y[t] = __fmul_rn(acc, inv);
	}
}

__global__ void k_avgpool_bwd(float *dx, const float *dy, size_t planes, int h, int w, int k)
{
	const int oh = h / k, ow = w / k;
	const float inv = 1.0f / (float)(k * k);
	const size_t total = planes * h * w;
	GRID_STRIDE(t, total) {
		int col = (int)(t % w), r = (int)((t / w) % h);
		size_t pl = t / ((size_t)h * w);
		int i = r / k, j = col / k;
		dx[t] = (i < oh && j < ow) ? __fmul_rn(dy[(pl * oh + i) * ow + j], inv) : 0.0f;
	}
}

/* The completion counter's write where stream memory operations are refused: one
 * thread, after every kernel before it in the stream (stream order); the fence makes
 * their writes visible before the count is. */
__global__ void k_write_u64(volatile unsigned long long *p, unsigned long long v)
{
	__threadfence_system();
	*p = v;
}

/* ---- shared argument checks ------------------------------------------------------------------ */

int gemm_check(int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc)
{
	if (m < 0 || n < 0 || k < 0)
		return -EINVAL;
	auto mx1 = [](int v) { return v > 1 ? v : 1; };
	if (lda < (ta ? mx1(m) : mx1(k)) || ldb < (tb ? mx1(k) : mx1(n)) || ldc < mx1(n))
		return -EINVAL;
	return 0;
}


} // namespace

/* ---- public entry points -------------------------------------------------------------------- */

extern "C" {

const char *rf__kc_error_string(int code)
{
	if (code == 0)
		return "success";
	if (code > 0)
		return "unknown (positive) code";
	int e = -code;
	if (e >= RF_KC_ECUBLAS)
		return rf__blas_status_string((cublasStatus_t)(e - RF_KC_ECUBLAS));
	if (e >= RF_KC_ECUDA)
		return cudaGetErrorString((cudaError_t)(e - RF_KC_ECUDA));
	return strerror(e);
}

int rf__kc_device_count(int *n)
{
	int c = 0;
	if (cudaGetDeviceCount(&c) != cudaSuccess) {
		(void)cudaGetLastError();
		c = 0;
	}
	*n = c;
	return 0;
}

int rf__kc_gemm(void *cublas, int ta, int tb, int m, int n, int k, float alpha,
	       const float *a, int lda, const float *b, int ldb, float beta, float *c,
	       int ldc)
{
	int rc = gemm_check(ta, tb, m, n, k, lda, ldb, ldc);
	if (rc)
		return rc;
	if (m == 0 || n == 0)
		return 0;
	/* row-major C = op(A)*op(B)  <=>  column-major C^T = op(B)^T*op(A)^T */
	return cublas_rc(rf__blas_sgemm((cublasHandle_t)cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
				     ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb,
				     a, lda, &beta, c, ldc));
}

static cudaDataType_t cuda_type(int dt)
{
	return dt == RF_BF16 ? CUDA_R_16BF : dt == RF_F16 ? CUDA_R_16F : CUDA_R_32F;
}

int rf__kc_gemm_ex(void *cublas, int ta, int tb, int m, int n, int k, float alpha,
		   const void *a, int adt, int lda, const void *b, int bdt, int ldb, float beta,
		   void *c, int cdt, int ldc, int call)
{
	int all32 = adt == RF_F32 && bdt == RF_F32 && cdt == RF_F32;
	int rc = gemm_check(ta, tb, m, n, k, lda, ldb, ldc);
	if (rc || (call != RF__KC_GEMM_32F && !all32) || call < 0 || call > RF__KC_GEMM_TF32)
		return rc ? rc : -EINVAL;
	if (m == 0 || n == 0)
		return 0;
	/* full float32 with every operand f32: cublasSgemm, as it always was (the same
	 * kernels, the same bits) */
	if (call == RF__KC_SGEMM)
		return rf__kc_gemm(cublas, ta, tb, m, n, k, alpha, (const float *)a, lda,
				   (const float *)b, ldb, beta, (float *)c, ldc);
	/* f32 accumulation always; TF32 tensor cores on f32 inputs where allowed (bf16 and
	 * f16 inputs take tensor cores as they are, under CUBLAS_COMPUTE_32F) */
	return cublas_rc(rf__blas_gemm_ex((cublasHandle_t)cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
					  ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
					  cuda_type(bdt), ldb, a, cuda_type(adt), lda, &beta, c,
					  cuda_type(cdt), ldc,
					  call == RF__KC_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
								   : CUBLAS_COMPUTE_32F));
}

int rf__kc_bias_add(void *stream, float *y, const float *b, int rows, int cols)
{
	if (rows < 0 || cols < 0)
		return -EINVAL;
	size_t total = (size_t)rows * cols;
	if (!total)
		return 0;
	k_bias_add<<<blocks_for(total), kThreads, 0, S(stream)>>>(y, b, total, cols);
	return launch_rc();
}

int rf__kc_bias_grad(void *stream, float *db, const float *dy, int rows, int cols,
		    int accumulate)
{
	if (rows < 0 || cols < 0)
		return -EINVAL;
	if (!cols)
		return 0;
	k_channel_sum<<<cols, kThreads, 0, S(stream)>>>(db, dy, rows, cols, 1, accumulate);
	return launch_rc();
}

int rf__kc_write_u64(void *stream, uint64_t *p, uint64_t v)
{
	k_write_u64<<<1, 1, 0, S(stream)>>>((volatile unsigned long long *)p,
					    (unsigned long long)v);
	return launch_rc();
}

int rf__kc_relu_fwd(void *stream, float *y, const float *x, size_t n)
{
	if (!n)
		return 0;
	k_relu_fwd<<<blocks_for(n), kThreads, 0, S(stream)>>>(y, x, n);
	return launch_rc();
}

int rf__kc_add_relu(void *stream, float *y, const float *a, const float *b, size_t n)
{
	if (!n)
		return 0;
	k_add_relu<<<blocks_for(n), kThreads, 0, S(stream)>>>(y, a, b, n);
	return launch_rc();
}

int rf__kc_relu_bwd(void *stream, float *dx, const float *dy, const float *y, size_t n)
{
	if (!n)
		return 0;
	k_relu_bwd<<<blocks_for(n), kThreads, 0, S(stream)>>>(dx, dy, y, n);
	return launch_rc();
}

int rf__kc_softmax_xent(void *stream, float *dlogits, float *loss_sum, int32_t *correct,
		       const float *logits, const int32_t *labels, int rows, int cols)
{
	if (rows < 0 || cols < 1)
		return -EINVAL;
	float inv_rows = rows ? 1.0f / (float)rows : 0.0f;
	k_softmax_xent<<<1, kThreads, 0, S(stream)>>>(dlogits, loss_sum, correct, logits,
						      labels, rows, cols, inv_rows);
	return launch_rc();
}

int rf__kc_softmax_xent_eval(void *stream, float *loss_sum, int32_t *correct,
			    const float *logits, const int32_t *labels, int rows, int cols)
{
	return rf__kc_softmax_xent(stream, NULL, loss_sum, correct, logits, labels, rows, cols);
}

size_t rf__kc_conv2d_workspace_min(const struct rf__conv2d *s)
{
	return rf__conv_workspace_min(s);
}

size_t rf__kc_conv2d_workspace_size(const struct rf__conv2d *s)
{
	if (rf__conv_check(s))
		return 0;
	size_t per = rf__conv_per_image(s);
	size_t g = kConvWsCap / per;
	if (g > (size_t)s->n)
		g = (size_t)s->n;
	if (g < 1)
		g = 1;
	return g * per;
}

int rf__kc_conv2d_fwd(void *stream, void *cublas, const struct rf__conv2d *s, float *y,
		     const float *x, const float *w, const float *b, void *ws,
		     size_t ws_bytes)
{
	int G = rf__conv_begin(s, ws, ws_bytes);
	if (G <= 0)
		return G;
	const conv_geom q = geom(s);
	const int ckk = q.C * q.KH * q.KW;
	const size_t ohw = (size_t)q.OH * q.OW, img = (size_t)q.C * q.H * q.W;
	for (int n0 = 0; n0 < s->n; n0 += G) {
		int g = s->n - n0 < G ? s->n - n0 : G;
		size_t ld = (size_t)g * ohw;
		float *col = (float *)ws, *out = col + (size_t)ckk * ld;
		float *yn = y + (size_t)n0 * q.O * ohw;
		k_im2col<<<blocks_for((size_t)ckk * ld), kThreads, 0, S(stream)>>>(
			col, x + n0 * img, q, g);
		int rc = launch_rc();
		if (rc)
			return rc;
		if (g == 1)
			out = yn;
		rc = rf__kc_gemm(cublas, 0, 0, q.O, (int)ld, ckk, 1.0f, w, ckk, col, (int)ld,
				0.0f, out, (int)ld);
		if (rc)
			return rc;
		if (g > 1 || b) {
			size_t total = (size_t)g * q.O * ohw;
			k_scatter_bias<<<blocks_for(total), kThreads, 0, S(stream)>>>(
				yn, out, b, g, q.O, ohw);
			rc = launch_rc();
			if (rc)
				return rc;
		}
	}
	return 0;
}

int rf__kc_conv2d_bwd_data(void *stream, void *cublas, const struct rf__conv2d *s,
			  float *dx, const float *dy, const float *w, void *ws,
			  size_t ws_bytes)
{
	int G = rf__conv_begin(s, ws, ws_bytes);
	if (G <= 0)
		return G;
	const conv_geom q = geom(s);
	const int ckk = q.C * q.KH * q.KW;
	const size_t ohw = (size_t)q.OH * q.OW, img = (size_t)q.C * q.H * q.W;
	for (int n0 = 0; n0 < s->n; n0 += G) {
		int g = s->n - n0 < G ? s->n - n0 : G;
		size_t ld = (size_t)g * ohw;
		float *dcol = (float *)ws, *t = dcol + (size_t)ckk * ld;
		const float *dyn = dy + (size_t)n0 * q.O * ohw, *dyt = dyn;
		int rc;
		if (g > 1) {
			size_t total = (size_t)g * q.O * ohw;
			k_gather<<<blocks_for(total), kThreads, 0, S(stream)>>>(t, dyn, g, q.O,
										ohw);
			if ((rc = launch_rc()))
				return rc;
			dyt = t;
		}
		rc = rf__kc_gemm(cublas, 1, 0, ckk, (int)ld, q.O, 1.0f, w, ckk, dyt, (int)ld,
				0.0f, dcol, (int)ld);
		if (rc)
			return rc;
		size_t total = (size_t)g * img;
		k_col2im<<<blocks_for(total), kThreads, 0, S(stream)>>>(dx + n0 * img, dcol, q,
									g);
		if ((rc = launch_rc()))
			return rc;
	}
	return 0;
}

int rf__kc_conv2d_bwd_filter(void *stream, void *cublas, const struct rf__conv2d *s,
			    float *dw, float *db, const float *dy, const float *x,
			    int accumulate, void *ws, size_t ws_bytes)
{
	if (rf__conv_check(s))
		return -EINVAL;
	const conv_geom q = geom(s);
	const int ckk = q.C * q.KH * q.KW;
	int rc;
	if (s->n == 0) {
		if (!accumulate) {
			if ((rc = cuda_rc(cudaMemsetAsync(dw, 0, (size_t)q.O * ckk * sizeof(float),
							  S(stream)))))
				return rc;
			if (db && (rc = cuda_rc(cudaMemsetAsync(db, 0, (size_t)q.O * sizeof(float),
								S(stream)))))
				return rc;
		}
		return 0;
	}
	int G = rf__conv_group(s, ws, ws_bytes);
	if (!G)
		return -EINVAL;
	const size_t ohw = (size_t)q.OH * q.OW, img = (size_t)q.C * q.H * q.W;
	for (int n0 = 0; n0 < s->n; n0 += G) {
		int g = s->n - n0 < G ? s->n - n0 : G;
		size_t ld = (size_t)g * ohw;
		float *col = (float *)ws, *t = col + (size_t)ckk * ld;
		const float *dyn = dy + (size_t)n0 * q.O * ohw, *dyt = dyn;
		if (g > 1) {
			size_t total = (size_t)g * q.O * ohw;
			k_gather<<<blocks_for(total), kThreads, 0, S(stream)>>>(t, dyn, g, q.O,
										ohw);
			if ((rc = launch_rc()))
				return rc;
			dyt = t;
		}
		k_im2col<<<blocks_for((size_t)ckk * ld), kThreads, 0, S(stream)>>>(
			col, x + n0 * img, q, g);
		if ((rc = launch_rc()))
			return rc;
		float beta = (n0 == 0 && !accumulate) ? 0.0f : 1.0f;
		rc = rf__kc_gemm(cublas, 0, 1, q.O, ckk, (int)ld, 1.0f, dyt, (int)ld, col,
				(int)ld, beta, dw, ckk);
		if (rc)
			return rc;
	}
	if (db) {
		k_channel_sum<<<q.O, kThreads, 0, S(stream)>>>(db, dy, s->n, q.O, ohw,
							       accumulate);
		if ((rc = launch_rc()))
			return rc;
	}
	return 0;
}

int rf__kc_avgpool2d_fwd(void *stream, float *y, const float *x, int n, int c, int h,
			int w, int k)
{
	if (n < 0 || c < 0 || h < 0 || w < 0 || k < 1)
		return -EINVAL;
	size_t planes = (size_t)n * c, total = planes * (h / k) * (w / k);
	if (!total)
		return 0;
	k_avgpool_fwd<<<blocks_for(total), kThreads, 0, S(stream)>>>(y, x, planes, h, w, k);
	return launch_rc();
}

int rf__kc_avgpool2d_bwd(void *stream, float *dx, const float *dy, int n, int c, int h,
			int w, int k)
{
	if (n < 0 || c < 0 || h < 0 || w < 0 || k < 1)
		return -EINVAL;
	size_t planes = (size_t)n * c, total = planes * h * w;
	if (!total)
		return 0;
	k_avgpool_bwd<<<blocks_for(total), kThreads, 0, S(stream)>>>(dx, dy, planes, h, w, k);
	return launch_rc();
}

int rf__kc_axpy(void *stream, float *y, float a, const float *x, size_t n)
{
	if (!n)
		return 0;
	k_axpy<<<blocks_for(n), kThreads, 0, S(stream)>>>(y, a, x, n);
	return launch_rc();
}

int rf__kc_scale(void *stream, float *x, float a, size_t n)
{
	if (!n)
		return 0;
	k_scale<<<blocks_for(n), kThreads, 0, S(stream)>>>(x, a, n);
	return launch_rc();
}

int rf__kc_reduce_sum(void *stream, float *out, const float *const *in, int k, size_t n)
{
	if (k < 0)
		return -EINVAL;
	if (!n)
		return 0;
	if (k == 0)
		return cuda_rc(cudaMemsetAsync(out, 0, n * sizeof(float), S(stream)));
	if (k == 1)
		return in[0] == out ? 0 : rf__kc_copy(stream, out, in[0], n);
	for (int j0 = 0; j0 < k; j0 += kReduceMax) {
		int kk = k - j0 < kReduceMax ? k - j0 : kReduceMax;
		ptrs8 p = {};
		for (int j = 0; j < kk; j++)
			p.p[j] = in[j0 + j];
		k_reduce_sum<<<blocks_for(n), kThreads, 0, S(stream)>>>(out, p, kk, j0 == 0, n);
		int rc = launch_rc();
		if (rc)
			return rc;
	}
	return 0;
}

int rf__kc_copy(void *stream, float *dst, const float *src, size_t n)
{
	if (!n || dst == src)
		return 0;
	return cuda_rc(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice,
				       S(stream)));
}

int rf__kc_fill(void *stream, void *x, unsigned width, uint32_t bits, size_t n)
{
	if (!n)
		return 0;
	if (width == 1)
		return cuda_rc(cudaMemsetAsync(x, (int)(bits & 0xff), n, S(stream)));
	if (width == 2)
		k_fill<uint16_t><<<blocks_for(n), kThreads, 0, S(stream)>>>((uint16_t *)x,
									   (uint16_t)bits, n);
	else if (width == 4)
		k_fill<uint32_t><<<blocks_for(n), kThreads, 0, S(stream)>>>((uint32_t *)x, bits, n);
	else
		return -EINVAL;
	return launch_rc();
}

int rf__kc_u8_to_f32(void *stream, float *out, const uint8_t *in, size_t n,
		     const struct rf__u8norm *m)
{
	if (!n)
		return 0;
	k_u8_to_f32<<<blocks_for(n), kThreads, 0, S(stream)>>>(out, in, n, *m);
	return launch_rc();
}

int rf__kc_u8_to_i32(void *stream, int32_t *out, const uint8_t *in, size_t n)
{
	if (!n)
		return 0;
	k_u8_to_i32<<<blocks_for(n), kThreads, 0, S(stream)>>>(out, in, n);
	return launch_rc();
}

int rf__kc_rand_uniform(void *stream, float *out, size_t n, uint64_t seed,
		       uint64_t counter, float lo, float hi)
{
	if (!n)
		return 0;
	float d = hi - lo;
	k_rand_uniform<<<blocks_for(n), kThreads, 0, S(stream)>>>(
		out, n, (uint32_t)seed, (uint32_t)(seed >> 32), counter, lo, d);
	return launch_rc();
}

int rf__kc_rand_normal(void *stream, float *out, size_t n, uint64_t seed,
		      uint64_t counter, float mean, float std)
{
	if (!n)
		return 0;
	k_rand_normal<<<blocks_for(n), kThreads, 0, S(stream)>>>(
		out, n, (uint32_t)seed, (uint32_t)(seed >> 32), counter, (double)mean,
		(double)std);
	return launch_rc();
}

} // extern "C"
