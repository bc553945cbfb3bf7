/* kernels_cpu.c — CPU kernels (see kernels.h for the contracts).
 *
 * Elementwise loops are written as plain restrict-qualified loops so that GCC
 * vectorises them at -O2/-O3. Convolutions are im2col + one GEMM per group of
 * images: the im2col matrix of g images is laid out (c·kh·kw, g·oh·ow), so a single
 * GEMM covers the whole group, and the outputs are scattered back to NCHW.
 */
#include "rf-config.h"
#include "kernels.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if RF_HAVE_OPENBLAS
#include <cblas.h>
#endif

/* GCC contracts a*b+c into an FMA under -ffp-contract=fast (its default in GNU C
 * mode) when the target has one; the functions promising bit-identical results with
 * CUDA must not let it. */
#if defined(__GNUC__) && !defined(__clang__)
#define RF__NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define RF__NO_CONTRACT
#endif

/* ---- gemm ------------------------------------------------------------------- */

static int gemm_check(int ta, int tb, int m, int n, int k, const float *a, int lda,
		      const float *b, int ldb, float *c, int ldc)
{
	if (m < 0 || n < 0 || k < 0)
		return -EINVAL;
	if (lda < (ta ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) ||
	    ldb < (tb ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) || ldc < (n > 1 ? n : 1))
		return -EINVAL;
	if ((m && n && !c) || (m && n && k && (!a || !b)))
		return -EINVAL;
	return 0;
}

/* C (m, n) = beta · C, as BLAS does it: beta == 0 writes zeros (NaNs in C ignored),
 * beta == 1 leaves C alone. */
static void gemm_beta(int m, int n, float beta, float *c, int ldc)
{
	if (beta == 1.0f)
		return;
	for (int i = 0; i < m; i++) {
		float *restrict cr = c + (size_t)i * ldc;
		if (beta == 0.0f)
			for (int j = 0; j < n; j++)
				cr[j] = 0.0f;
		else
			for (int j = 0; j < n; j++)
				cr[j] *= beta;
	}
}

/* Blocking of the portable gemm: a (MC × KC) block of op(A) and a (KC × NC) panel of
 * op(B) are packed row-major on the stack, then C's (MC × NC) block is updated one
 * row at a time with a vectorisable inner loop over columns. */
enum { RF__MC = 32, RF__KC = 128, RF__NC = 128 };

static void gemm_block(int mc, int nc, int kc, const float *restrict ap,
		       const float *restrict bp, float *restrict c, int ldc)
{
	for (int i = 0; i < mc; i++) {
		float *restrict cr = c + (size_t)i * ldc;
		const float *ar = ap + (size_t)i * kc;
		int p = 0;
		for (; p + 4 <= kc; p += 4) {
			const float a0 = ar[p], a1 = ar[p + 1], a2 = ar[p + 2], a3 = ar[p + 3];
			const float *b0 = bp + (size_t)p * nc, *b1 = b0 + nc, *b2 = b1 + nc,
				    *b3 = b2 + nc;
			for (int j = 0; j < nc; j++)
				cr[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
		}
		for (; p < kc; p++) {
			const float a0 = ar[p];
			const float *b0 = bp + (size_t)p * nc;
			for (int j = 0; j < nc; j++)
				cr[j] += a0 * b0[j];
		}
	}
}

int rf_k_gemm_portable(int ta, int tb, int m, int n, int k, float alpha,
		       const float *a, int lda, const float *b, int ldb,
		       float beta, float *c, int ldc)
{
	int rc = gemm_check(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
	if (rc)
		return rc;
	gemm_beta(m, n, beta, c, ldc);
	if (alpha == 0.0f || k == 0)
		return 0;

	float ap[RF__MC * RF__KC];
	float bp[RF__KC * RF__NC];
	for (int j0 = 0; j0 < n; j0 += RF__NC) {
		int nc = n - j0 < RF__NC ? n - j0 : RF__NC;
		for (int p0 = 0; p0 < k; p0 += RF__KC) {
			int kc = k - p0 < RF__KC ? k - p0 : RF__KC;
			/* pack op(B)[p0:p0+kc, j0:j0+nc] */
			for (int p = 0; p < kc; p++)
				for (int j = 0; j < nc; j++)
					bp[p * nc + j] = tb ? b[(size_t)(j0 + j) * ldb + p0 + p]
							    : b[(size_t)(p0 + p) * ldb + j0 + j];
			for (int i0 = 0; i0 < m; i0 += RF__MC) {
				int mc = m - i0 < RF__MC ? m - i0 : RF__MC;
				/* pack alpha · op(A)[i0:i0+mc, p0:p0+kc] */
				for (int i = 0; i < mc; i++)
					for (int p = 0; p < kc; p++)
						ap[i * kc + p] = alpha *
							(ta ? a[(size_t)(p0 + p) * lda + i0 + i]
							    : a[(size_t)(i0 + i) * lda + p0 + p]);
				gemm_block(mc, nc, kc, ap, bp, c + (size_t)i0 * ldc + j0, ldc);
			}
		}
	}
	return 0;
}

/* rf_k_gemm_avx512 instead of OpenBLAS: for op(B) = B, when OpenBLAS would run a single
 * thread (or is absent) and the environment does not ask for BLAS (RF_KERNELS_BLAS_GEMM
 * set and not 0; rf_k_gemm_avx512 itself honours RF_KERNELS_NO_AVX512). */
static int gemm_fast_ok(int tb)
{
	if (tb)
		return 0;
	const char *e = getenv("RF_KERNELS_BLAS_GEMM");
	if (e && *e && *e != '0')
		return 0;
#if RF_HAVE_OPENBLAS
	return openblas_get_num_threads() == 1;
#else
	return 1;
#endif
}

int rf_k_gemm(int ta, int tb, int m, int n, int k, float alpha,
	      const float *a, int lda, const float *b, int ldb,
	      float beta, float *c, int ldc)
{
	if (gemm_fast_ok(tb)) {
		int rc = rf_k_gemm_avx512(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
		if (rc != -ENOTSUP)
			return rc;
	}
#if RF_HAVE_OPENBLAS
	int rc = gemm_check(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
	if (rc)
		return rc;
	if (m == 0 || n == 0)
		return 0;
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
		    tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
		    beta, c, ldc);
	return 0;
#else
	return rf_k_gemm_portable(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

int rf_k_blas_set_threads(int n)
{
#if RF_HAVE_OPENBLAS
	if (n < 1)
		return -EINVAL;
	openblas_set_num_threads(n);
	return 0;
#else
	return -ENOTSUP;
#endif
}

int rf_k_blas_get_threads(void)
{
#if RF_HAVE_OPENBLAS
	return openblas_get_num_threads();
#else
	return -ENOTSUP;
#endif
}

/* ---- linear pieces ---------------------------------------------------------- */

void rf_k_bias_add(float *y, const float *b, int rows, int cols)
{
	for (int r = 0; r < rows; r++) {
		float *restrict yr = y + (size_t)r * cols;
		const float *restrict bb = b;
		for (int j = 0; j < cols; j++)
			yr[j] += bb[j];
	}
}

void rf_k_bias_grad(float *db, const float *dy, int rows, int cols, int accumulate)
{
	float *restrict d = db;
	if (!accumulate)
		for (int j = 0; j < cols; j++)
			d[j] = 0.0f;
	for (int r = 0; r < rows; r++) {
		const float *restrict g = dy + (size_t)r * cols;
		for (int j = 0; j < cols; j++)
			d[j] += g[j];
	}
}

void rf_k_relu_fwd(float *y, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void rf_k_relu_bwd(float *dx, const float *dy, const float *y, size_t n)
{
	/* load dy unconditionally: a select vectorises, a conditional load branches */
	for (size_t i = 0; i < n; i++) {
		float g = dy[i];
		dx[i] = y[i] > 0.0f ? g : 0.0f;
	}
}

/* ---- loss ---------------------------------------------------------------------- */

int rf_k_softmax_xent(float *dlogits, float *loss_sum, int32_t *correct,
		      const float *logits, const int32_t *labels, int rows, int cols)
{
	if (rows < 0 || cols < 1)
		return -EINVAL;
	for (int r = 0; r < rows; r++)
		if (labels[r] < 0 || labels[r] >= cols)
			return -EINVAL;
	double loss = 0.0;
	int32_t ok = 0;
	const float inv_rows = rows ? 1.0f / (float)rows : 0.0f;
	for (int r = 0; r < rows; r++) {
		const float *x = logits + (size_t)r * cols;
		int lab = labels[r], arg = 0;
		float mx = x[0];
		for (int j = 1; j < cols; j++)
			if (x[j] > mx) {
				mx = x[j];
				arg = j;
			}
		float sum = 0.0f;
		for (int j = 0; j < cols; j++)
			sum += expf(x[j] - mx);
		loss += (double)(logf(sum) - (x[lab] - mx));
		ok += arg == lab;
		if (dlogits) {
			/* x may alias dlogits: x[j] is read before dl[j] is written */
			float *dl = dlogits + (size_t)r * cols;
			const float inv_sum = 1.0f / sum;
			for (int j = 0; j < cols; j++)
				dl[j] = (expf(x[j] - mx) * inv_sum - (j == lab ? 1.0f : 0.0f)) *
					inv_rows;
		}
	}
	if (loss_sum)
		*loss_sum = (float)loss;
	if (correct)
		*correct = ok;
	return 0;
}

int rf_k_softmax_xent_eval(float *loss_sum, int32_t *correct, const float *logits,
			   const int32_t *labels, int rows, int cols)
{
	return rf_k_softmax_xent(NULL, loss_sum, correct, logits, labels, rows, cols);
}

/* ---- convolution ---------------------------------------------------------------- */

/* Aim for about this many columns (g·oh·ow) per GEMM: enough to amortise OpenBLAS's
 * packing on LeNet's small images, small enough that the im2col block stays in L2.
 * Measured on the LeNet batch-256 step (1 thread): 1024 ≈ 512 ≈ 2048 < 4096 (+10 %)
 * < whole batch (+35 %). */
#ifndef RF__CONV_TARGET_COLS
#define RF__CONV_TARGET_COLS 1024
#endif

/* The copy loops (im2col, col2im) and the direct single-channel convolutions are
 * compiled twice: for the build's baseline ISA and, on x86-64 with GCC or clang, for
 * AVX-512 (chosen at run time when the CPU and OS support it, or never if the
 * environment sets RF_KERNELS_NO_AVX512). Each choice is deterministic: the same
 * inputs give the same bits run to run on one machine. The bodies are always_inline
 * and are instantiated with compile-time kernel and row sizes for LeNet's shapes so
 * that the short inner loops (9 or 26 floats) unroll into straight vector code. */
#define RF__INLINE static inline __attribute__((always_inline))
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RF__X86_DISPATCH 1
#if defined(__clang__)
#define RF__AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#else
#define RF__AVX512 \
	__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=512")))
#endif
#include <stdlib.h>
static int use_avx512(void)
{
	__builtin_cpu_init();
	if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
	      __builtin_cpu_supports("fma")))
		return 0;
	const char *e = getenv("RF_KERNELS_NO_AVX512");
	return !(e && *e && *e != '0');
}
#else
#define RF__X86_DISPATCH 0
#endif

/* Defines name_def (baseline) and name_avx512, and name() that picks one. The body is
 * the always_inline function name_body taking the same arguments. */
#if RF__X86_DISPATCH
#define RF__DISPATCH(name, params, args)                                   \
	static void name##_def params { name##_body args; }                    \
	RF__AVX512 static void name##_avx512 params { name##_body args; }      \
	static void name params                                                \
	{                                                                      \
		if (use_avx512())                                              \
			name##_avx512 args;                                    \
		else                                                           \
			name##_def args;                                       \
	}
#else
#define RF__DISPATCH(name, params, args) \
	static void name params { name##_body args; }
#endif

/* ---- AVX-512 gemm ----------------------------------------------------------------- */

/* A single-threaded sgemm for op(B) = B (any op(A)), used by rf_k_gemm when the CPU
 * has AVX-512 and OpenBLAS runs one thread per stream (the policy when a device has
 * a stream per core, as LeNet's two streams do): OpenBLAS here is pinned to its
 * Haswell (AVX2) kernels by OPENBLAS_CORETYPE, at half the FMA width.
 *
 * Blocking: for each KC-deep slice of K, alpha·op(A) is packed in MR-row panels
 * (p-major: the MR values of one k are adjacent), then for each NR-wide panel of B,
 * read in place (row stride ldb, no copy: B is the large operand here — im2col
 * columns, output gradients — and its panel of KC × NR floats stays in L1 while every
 * A panel of the block passes over it), the micro-kernel computes an MR × NR tile in
 * 24 zmm accumulators: per k, 4 loads of B, 6 broadcasts of A, 24 FMAs. A column edge
 * uses as many zmm columns as it needs, the last with masked loads and stores
 * (masked-off lanes are neither read nor written); row edges store only valid rows.
 * Each C element is Σ_p in ascending p, FMA by FMA, one KC slice at a time, added to C:
 * the result is deterministic. */
enum { RF__GM_MR = 6, RF__GM_NR = 64, RF__GM_KC = 128, RF__GM_APACK = 96 * 128 };

#if RF__X86_DISPATCH
#include <immintrin.h>

/* C[0:mr, 0:nr] = (acc ? C : 0) + ap (kc × MR panel) · B[0:kc, 0:nr], nr <= 16·NV: NV
 * zmm columns per row (a compile-time constant in every instance), the last one
 * masked unless full. */
RF__AVX512 RF__INLINE void gm_ukr_body(int kc, const float *restrict ap,
				       const float *restrict b, size_t ldb, float *restrict c,
				       size_t ldc, int mr, int nr, int acc, const int NV,
				       const int full)
{
	__mmask16 mk[4];
	__m512 r[RF__GM_MR][4], bv[4];

	for (int v = 0; v < NV; v++) {
		int left = nr - 16 * v;
		mk[v] = full || left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
	}
	for (int i = 0; i < RF__GM_MR; i++)
		for (int v = 0; v < NV; v++)
			r[i][v] = _mm512_setzero_ps();
	for (int p = 0; p < kc; p++, ap += RF__GM_MR, b += ldb) {
		for (int v = 0; v < NV; v++)
			bv[v] = full || v < NV - 1 ? _mm512_loadu_ps(b + 16 * v)
						   : _mm512_maskz_loadu_ps(mk[v], b + 16 * v);
#pragma GCC unroll 6
		for (int i = 0; i < RF__GM_MR; i++) {
			const __m512 a = _mm512_set1_ps(ap[i]);
			for (int v = 0; v < NV; v++)
				r[i][v] = _mm512_fmadd_ps(a, bv[v], r[i][v]);
		}
	}
	for (int i = 0; i < mr; i++) {
		float *cr = c + (size_t)i * ldc;
		for (int v = 0; v < NV; v++) {
			__m512 x = r[i][v];
			if (full || v < NV - 1) {
				if (acc)
					x = _mm512_add_ps(_mm512_loadu_ps(cr + 16 * v), x);
				_mm512_storeu_ps(cr + 16 * v, x);
			} else {
				if (acc)
					x = _mm512_add_ps(_mm512_maskz_loadu_ps(mk[v], cr + 16 * v), x);
				_mm512_mask_storeu_ps(cr + 16 * v, mk[v], x);
			}
		}
	}
}

RF__AVX512 static void gm_ukr_full(int kc, const float *ap, const float *b, size_t ldb,
				   float *c, size_t ldc, int mr, int acc)
{
	gm_ukr_body(kc, ap, b, ldb, c, ldc, mr, RF__GM_NR, acc, 4, 1);
}

/* a column edge of nr < NR: as many zmm columns as it needs */
RF__AVX512 static void gm_ukr_edge(int kc, const float *ap, const float *b, size_t ldb,
				   float *c, size_t ldc, int mr, int nr, int acc)
{
	switch ((nr + 15) / 16) {
	case 1:
		gm_ukr_body(kc, ap, b, ldb, c, ldc, mr, nr, acc, 1, 0);
		break;
	case 2:
		gm_ukr_body(kc, ap, b, ldb, c, ldc, mr, nr, acc, 2, 0);
		break;
	case 3:
		gm_ukr_body(kc, ap, b, ldb, c, ldc, mr, nr, acc, 3, 0);
		break;
	default:
		gm_ukr_body(kc, ap, b, ldb, c, ldc, mr, nr, acc, 4, 0);
		break;
	}
}

/* ap ← alpha · op(A)[i0:i0+mc, p0:p0+kc] in MR-row panels, rows past mc zero */
static void gm_pack_a(float *restrict ap, int ta, const float *restrict a, size_t lda, int i0,
		      int p0, int mc, int kc, float alpha)
{
	for (int q = 0; q < mc; q += RF__GM_MR, ap += (size_t)kc * RF__GM_MR)
		for (int i = 0; i < RF__GM_MR; i++) {
			float *restrict d = ap + i;
			if (q + i >= mc) {
				for (int p = 0; p < kc; p++)
					d[p * RF__GM_MR] = 0.0f;
			} else if (ta) {
				const float *s = a + (size_t)p0 * lda + i0 + q + i;
				for (int p = 0; p < kc; p++)
					d[p * RF__GM_MR] = alpha * s[(size_t)p * lda];
			} else {
				const float *s = a + (size_t)(i0 + q + i) * lda + p0;
				for (int p = 0; p < kc; p++)
					d[p * RF__GM_MR] = alpha * s[p];
			}
		}
}

/* C = alpha · op(A) · B + beta · C for alpha != 0, k > 0 (rf_k_gemm's contract). */
static void gemm_avx512(int ta, int m, int n, int k, float alpha, const float *a, int lda,
			const float *b, int ldb, float beta, float *c, int ldc)
{
	float ap[RF__GM_APACK] __attribute__((aligned(64)));

	if (beta != 0.0f) /* beta == 0: the first K slice overwrites C instead */
		gemm_beta(m, n, beta, c, ldc);
	for (int p0 = 0; p0 < k; p0 += RF__GM_KC) {
		const int kc = k - p0 < RF__GM_KC ? k - p0 : RF__GM_KC;
		/* rows of A per packed block: as many MR panels as the buffer holds */
		const int mcb = RF__GM_APACK / kc / RF__GM_MR * RF__GM_MR;
		const int acc = p0 > 0 || beta != 0.0f;
		for (int i0 = 0; i0 < m; i0 += mcb) {
			const int mc = m - i0 < mcb ? m - i0 : mcb;
			gm_pack_a(ap, ta, a, (size_t)lda, i0, p0, mc, kc, alpha);
			for (int j0 = 0; j0 < n; j0 += RF__GM_NR) {
				const int nr = n - j0 < RF__GM_NR ? n - j0 : RF__GM_NR;
				const float *bp = b + (size_t)p0 * ldb + j0;
				for (int q = 0; q < mc; q += RF__GM_MR) {
					const int mr = mc - q < RF__GM_MR ? mc - q : RF__GM_MR;
					float *cp = c + (size_t)(i0 + q) * ldc + j0;
					if (nr == RF__GM_NR)
						gm_ukr_full(kc, ap + (size_t)q * kc, bp, (size_t)ldb, cp,
							    (size_t)ldc, mr, acc);
					else
						gm_ukr_edge(kc, ap + (size_t)q * kc, bp, (size_t)ldb, cp,
							    (size_t)ldc, mr, nr, acc);
				}
			}
		}
	}
}
#endif

int rf_k_gemm_avx512(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
		     const float *b, int ldb, float beta, float *c, int ldc)
{
	int rc = gemm_check(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
	if (rc)
		return rc;
#if RF__X86_DISPATCH
	if (tb || !use_avx512())
		return -ENOTSUP;
	if (m == 0 || n == 0)
		return 0;
	if (alpha == 0.0f || k == 0) {
		gemm_beta(m, n, beta, c, ldc);
		return 0;
	}
	gemm_avx512(ta, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	return 0;
#else
	return -ENOTSUP;
#endif
}

static int conv_check(const struct rf_k_conv2d *s)
{
	if (!s || s->n < 0 || s->c < 1 || s->o < 1 || s->kh < 1 || s->kw < 1 ||
	    s->h < s->kh || s->w < s->kw)
		return -EINVAL;
	return 0;
}

/* single-channel convolutions are computed directly, without im2col or GEMM */
static int conv_direct(const struct rf_k_conv2d *s)
{
	return s->c == 1;
}

static size_t conv_per_image(const struct rf_k_conv2d *s)
{
	size_t ckk = (size_t)s->c * s->kh * s->kw;
	size_t ohw = (size_t)rf_k_conv2d_oh(s) * rf_k_conv2d_ow(s);
	return (ckk + (size_t)s->o) * ohw * sizeof(float);
}

size_t rf_k_conv2d_workspace_min(const struct rf_k_conv2d *s)
{
	return conv_check(s) ? 0 : conv_per_image(s);
}

size_t rf_k_conv2d_workspace_size(const struct rf_k_conv2d *s)
{
	if (conv_check(s))
		return 0;
	size_t ohw = (size_t)rf_k_conv2d_oh(s) * rf_k_conv2d_ow(s);
	size_t g = (RF__CONV_TARGET_COLS + ohw - 1) / ohw;
	if (g > (size_t)s->n)
		g = (size_t)s->n;
	if (g < 1)
		g = 1;
	return g * conv_per_image(s);
}

/* images per group that the workspace holds (>= 1), or 0 if it holds none */
static int conv_group(const struct rf_k_conv2d *s, const void *ws, size_t ws_bytes)
{
	size_t per = conv_per_image(s);
	if (!ws || ws_bytes < per)
		return 0;
	size_t g = ws_bytes / per;
	if (g > (size_t)s->n)
		g = (size_t)s->n;
	return g < 1 ? 1 : (int)g;
}

/* Geometry passed to the copy bodies; the specialised callers pass constants for
 * kh, kw, w and ow so that the inner loops have fixed trip counts. */
struct conv_geo {
	int c, h, w, kh, kw, oh, ow;
};

static struct conv_geo conv_geo(const struct rf_k_conv2d *s)
{
	return (struct conv_geo){ s->c, s->h, s->w, s->kh, s->kw, rf_k_conv2d_oh(s),
				  rf_k_conv2d_ow(s) };
}

/* col (c·kh·kw, ld) columns [gi·ohw, (gi+1)·ohw) for each of the g images at x. */
RF__INLINE void im2col_b(float *restrict col, size_t ld, const float *restrict x, int C,
			 int H, int W, int KH, int KW, int OH, int OW, int g)
{
	const size_t ohw = (size_t)OH * OW, img = (size_t)C * H * W;
	for (int c = 0; c < C; c++)
		for (int kh = 0; kh < KH; kh++)
			for (int kw = 0; kw < KW; kw++) {
				size_t r = ((size_t)c * KH + kh) * KW + kw;
				float *restrict cp = col + r * ld;
				const float *xp = x + (size_t)c * H * W + (size_t)kh * W + kw;
				for (int gi = 0; gi < g; gi++, cp += ohw, xp += img)
					for (int i = 0; i < OH; i++)
						for (int j = 0; j < OW; j++)
							cp[i * OW + j] = xp[i * W + j];
			}
}

RF__INLINE void im2col_body(float *col, size_t ld, const float *x, struct conv_geo q, int g)
{
	if (q.kh == 5 && q.kw == 5 && q.w == 13)
		im2col_b(col, ld, x, q.c, q.h, 13, 5, 5, q.oh, 9, g);
	else if (q.kh == 3 && q.kw == 3 && q.w == 28)
		im2col_b(col, ld, x, q.c, q.h, 28, 3, 3, q.oh, 26, g);
	else
		im2col_b(col, ld, x, q.c, q.h, q.w, q.kh, q.kw, q.oh, q.ow, g);
}
RF__DISPATCH(im2col, (float *col, size_t ld, const float *x, struct conv_geo q, int g),
	     (col, ld, x, q, g))

/* row (g·oh·ow, c·kh·kw): one row per output pixel of the g images at x, holding the
 * patch it sees (the transpose of im2col's matrix, so that the filter gradient is
 * dy · row, a gemm with op(B) = B). */
RF__INLINE void im2row_b(float *restrict row, const float *restrict x, int C, int H, int W,
			 int KH, int KW, int OH, int OW, int g)
{
	const size_t img = (size_t)C * H * W, ckk = (size_t)C * KH * KW;
	for (int gi = 0; gi < g; gi++)
		for (int i = 0; i < OH; i++)
			for (int j = 0; j < OW; j++, row += ckk) {
				const float *xp = x + gi * img + (size_t)i * W + j;
				for (int c = 0; c < C; c++)
					for (int kh = 0; kh < KH; kh++)
						for (int kw = 0; kw < KW; kw++)
							row[((size_t)c * KH + kh) * KW + kw] =
								xp[(size_t)c * H * W + kh * W + kw];
			}
}

RF__INLINE void im2row_body(float *row, const float *x, struct conv_geo q, int g)
{
	if (q.kh == 5 && q.kw == 5 && q.w == 13)
		im2row_b(row, x, q.c, q.h, 13, 5, 5, q.oh, 9, g);
	else
		im2row_b(row, x, q.c, q.h, q.w, q.kh, q.kw, q.oh, q.ow, g);
}
RF__DISPATCH(im2row, (float *row, const float *x, struct conv_geo q, int g), (row, x, q, g))

/* dx (g images) = col2im(dcol (c·kh·kw, ld)), image by image so that each image's dx
 * is zeroed and accumulated while it sits in L1. */
RF__INLINE void col2im_b(float *restrict dx, const float *restrict dcol, size_t ld, int C,
			 int H, int W, int KH, int KW, int OH, int OW, int g)
{
	const size_t ohw = (size_t)OH * OW, img = (size_t)C * H * W;
	for (int gi = 0; gi < g; gi++) {
		float *dxi = dx + gi * img;
		for (size_t p = 0; p < img; p++)
			dxi[p] = 0.0f;
		for (int c = 0; c < C; c++)
			for (int kh = 0; kh < KH; kh++)
				for (int kw = 0; kw < KW; kw++) {
					size_t r = ((size_t)c * KH + kh) * KW + kw;
					float *restrict xp = dxi + (size_t)c * H * W +
							     (size_t)kh * W + kw;
					const float *restrict cp = dcol + r * ld + gi * ohw;
					for (int i = 0; i < OH; i++)
						for (int j = 0; j < OW; j++)
							xp[i * W + j] += cp[i * OW + j];
				}
	}
}

RF__INLINE void col2im_body(float *dx, const float *dcol, size_t ld, struct conv_geo q, int g)
{
	if (q.kh == 5 && q.kw == 5 && q.w == 13)
		col2im_b(dx, dcol, ld, q.c, q.h, 13, 5, 5, q.oh, 9, g);
	else if (q.kh == 3 && q.kw == 3 && q.w == 28)
		col2im_b(dx, dcol, ld, q.c, q.h, 28, 3, 3, q.oh, 26, g);
	else
		col2im_b(dx, dcol, ld, q.c, q.h, q.w, q.kh, q.kw, q.oh, q.ow, g);
}
RF__DISPATCH(col2im, (float *dx, const float *dcol, size_t ld, struct conv_geo q, int g),
	     (dx, dcol, ld, q, g))

/* t (o, ld) <- dy (g, o, ohw): the group's output gradients as one matrix */
static void gather_nchw(float *restrict t, size_t ld, const float *restrict dy, int o,
			size_t ohw, int g)
{
	for (int oc = 0; oc < o; oc++)
		for (int gi = 0; gi < g; gi++)
			memcpy(t + (size_t)oc * ld + gi * ohw, dy + ((size_t)gi * o + oc) * ohw,
			       ohw * sizeof(float));
}

/* Direct single-channel forward: y[n][o][i][j] = Σ_{kh,kw} w[o][kh][kw]·x[n][i+kh][j+kw]
 * (kh-major, kw-minor order) + b[o]. */
RF__INLINE void conv1_fwd_b(float *restrict y, const float *restrict x, const float *restrict w,
			    const float *restrict b, int n, int o, int H, int W, int KH, int KW,
			    int OH, int OW)
{
	float wk[KH * KW];
	for (int im = 0; im < n; im++) {
		const float *xp = x + (size_t)im * H * W;
		for (int oc = 0; oc < o; oc++) {
			for (int t = 0; t < KH * KW; t++)
				wk[t] = w[(size_t)oc * KH * KW + t];
			const float bias = b ? b[oc] : 0.0f;
			float *yp = y + ((size_t)im * o + oc) * OH * OW;
			for (int i = 0; i < OH; i++)
				for (int j = 0; j < OW; j++) {
					float acc = 0.0f;
					for (int kh = 0; kh < KH; kh++)
						for (int kw = 0; kw < KW; kw++)
							acc += wk[kh * KW + kw] *
							       xp[(i + kh) * W + j + kw];
					yp[i * OW + j] = acc + bias;
				}
		}
	}
}

/* Row i (OW floats) of dy = avgpool2_bwd(pp) · (py > 0) for one (image, channel) plane:
 * pp the pooled gradient plane (OH/2, OW/2), py the ReLU output plane (OH, OW). The same
 * bits as rf_k_avgpool2_relu_bwd. */
RF__INLINE void pool_relu_row(float *restrict d, const float *restrict pp,
			      const float *restrict py, int i, int OH, int OW)
{
	const int PH = OH / 2, PW = OW / 2;
	if (i / 2 >= PH) {
		for (int j = 0; j < OW; j++)
			d[j] = 0.0f;
		return;
	}
	const float *restrict g = pp + (size_t)(i / 2) * PW;
	const float *restrict y = py + (size_t)i * OW;
	for (int j = 0; j < PW; j++) {
		float v = g[j] * (1.0f / 4.0f);
		d[2 * j] = y[2 * j] > 0.0f ? v : 0.0f;
		d[2 * j + 1] = y[2 * j + 1] > 0.0f ? v : 0.0f;
	}
	for (int j = 2 * PW; j < OW; j++)
		d[j] = 0.0f;
}

#if RF__X86_DISPATCH
#include <immintrin.h>
/* Hand-vectorised single-channel 3×3 kernels for 16 < ow <= 32 (LeNet's 28×28 →
 * 26×26): an output row is two 16-lane chunks, the second masked, so no lane reads
 * or writes outside the row and masked-off lanes are exact zeros. Same order of
 * additions as conv1_fwd_b / conv1_bwdf_b except that FMA is used. */
RF__AVX512 static void conv1_fwd_3x3_avx512(float *restrict y, const float *restrict x,
					    const float *restrict w, const float *restrict b,
					    int n, int o, int H, int W, int OH, int OW)
{
	const __mmask16 m1 = (__mmask16)((1u << (OW - 16)) - 1);
	for (int im = 0; im < n; im++) {
		const float *xp = x + (size_t)im * H * W;
		for (int oc = 0; oc < o; oc++) {
			__m512 wk[9];
			for (int t = 0; t < 9; t++)
				wk[t] = _mm512_set1_ps(w[(size_t)oc * 9 + t]);
			const __m512 bias = _mm512_set1_ps(b ? b[oc] : 0.0f);
			float *yp = y + ((size_t)im * o + oc) * OH * OW;
			for (int i = 0; i < OH; i++) {
				__m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
				for (int kh = 0; kh < 3; kh++)
					for (int kw = 0; kw < 3; kw++) {
						const float *xr = xp + (i + kh) * W + kw;
						a0 = _mm512_fmadd_ps(wk[kh * 3 + kw],
								     _mm512_loadu_ps(xr), a0);
						a1 = _mm512_fmadd_ps(wk[kh * 3 + kw],
								     _mm512_maskz_loadu_ps(m1, xr + 16),
								     a1);
					}
				_mm512_storeu_ps(yp + i * OW, _mm512_add_ps(a0, bias));
				_mm512_mask_storeu_ps(yp + i * OW + 16, m1, _mm512_add_ps(a1, bias));
			}
		}
	}
}

/* pool_relu_row for 16 < OW <= 32, in two registers (lanes past OW zero): the same
 * product g·(1/4) and the same y > 0 test, so the same bits. */
RF__AVX512 RF__INLINE void pool_relu_row_avx512(__m512 *d0, __m512 *d1,
						const float *restrict pp,
						const float *restrict py, int i, int OH, int OW)
{
	const int PH = OH / 2, PW = OW / 2;
	if (i / 2 >= PH) {
		*d0 = *d1 = _mm512_setzero_ps();
		return;
	}
	/* lane j takes pooled column j / 2; columns j >= 2·PW (odd OW) get 0 */
	const __m512i lo = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
	const __m512i hi = _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9,
					    8, 8);
	const __mmask16 mg = (__mmask16)((1u << PW) - 1);
	const __mmask16 m1 = (__mmask16)((1u << (2 * PW - 16)) - 1);
	const __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(mg, pp + (size_t)(i / 2) * PW),
				       _mm512_set1_ps(1.0f / 4.0f));
	const float *y = py + (size_t)i * OW;
	const __m512 z = _mm512_setzero_ps();
	const __mmask16 k0 = _mm512_cmp_ps_mask(_mm512_loadu_ps(y), z, _CMP_GT_OQ);
	const __mmask16 k1 =
		_mm512_mask_cmp_ps_mask(m1, _mm512_maskz_loadu_ps(m1, y + 16), z, _CMP_GT_OQ);
	*d0 = _mm512_maskz_mov_ps(k0, _mm512_permutexvar_ps(lo, g));
	*d1 = _mm512_maskz_mov_ps(k1, _mm512_permutexvar_ps(hi, g));
}

/* Output channels in blocks of RF__C1_OB whose accumulators (18 + 2 vectors each) live
 * on the stack between images, so that each image's x (28×28) is read from L1 by every
 * channel of the block instead of once per channel from L2. Per channel and lane the
 * FMAs run in the same order as one channel at a time would (images, then rows,
 * ascending), so the bits do not depend on the blocking. */
enum { RF__C1_OB = 8 };

/* Σ of the first `ow` lanes of (lo, hi), j ascending: the sum conv1_bwdf_b makes */
RF__AVX512 RF__INLINE float lanes_sum(__m512 lo, __m512 hi, int ow)
{
	float l[32], s = 0.0f;
	_mm512_storeu_ps(l, lo);
	_mm512_storeu_ps(l + 16, hi);
	for (int j = 0; j < ow; j++)
		s += l[j];
	return s;
}

RF__AVX512 static void conv1_bwdf_3x3_avx512(float *restrict dw, float *restrict db,
					     const float *restrict dy, const float *restrict x,
					     int accumulate, int n, int o, int H, int W, int OH,
					     int OW, const float *pp, const float *py)
{
	const __mmask16 m1 = (__mmask16)((1u << (OW - 16)) - 1);
	for (int o0 = 0; o0 < o; o0 += RF__C1_OB) {
		const int ob = o - o0 < RF__C1_OB ? o - o0 : RF__C1_OB;
		/* acc[k]: 0..8 the taps' first 16 lanes, 9..17 the rest, 18..19 the bias */
		__m512 acc[RF__C1_OB][20];
		for (int k = 0; k < ob; k++)
			for (int t = 0; t < 20; t++)
				acc[k][t] = _mm512_setzero_ps();
		for (int im = 0; im < n; im++) {
			const float *xp = x + (size_t)im * H * W;
			for (int k = 0; k < ob; k++) {
				const int oc = o0 + k;
				const float *dp = pp ? NULL : dy + ((size_t)im * o + oc) * OH * OW;
				const float *gp =
					pp ? pp + ((size_t)im * o + oc) * (OH / 2) * (OW / 2) : NULL;
				const float *yp = pp ? py + ((size_t)im * o + oc) * OH * OW : NULL;
				__m512 a0[9], a1[9], b0 = acc[k][18], b1 = acc[k][19];
				for (int t = 0; t < 9; t++) {
					a0[t] = acc[k][t];
					a1[t] = acc[k][9 + t];
				}
				for (int i = 0; i < OH; i++) {
					__m512 d0, d1;
					if (dp) {
						d0 = _mm512_loadu_ps(dp + i * OW);
						d1 = _mm512_maskz_loadu_ps(m1, dp + i * OW + 16);
					} else {
						pool_relu_row_avx512(&d0, &d1, gp, yp, i, OH, OW);
					}
					for (int kh = 0; kh < 3; kh++)
						for (int kw = 0; kw < 3; kw++) {
							const float *xr = xp + (i + kh) * W + kw;
							a0[kh * 3 + kw] = _mm512_fmadd_ps(
								d0, _mm512_loadu_ps(xr), a0[kh * 3 + kw]);
							a1[kh * 3 + kw] = _mm512_fmadd_ps(
								d1, _mm512_maskz_loadu_ps(m1, xr + 16),
								a1[kh * 3 + kw]);
						}
					b0 = _mm512_add_ps(b0, d0);
					b1 = _mm512_add_ps(b1, d1);
				}
				for (int t = 0; t < 9; t++) {
					acc[k][t] = a0[t];
					acc[k][9 + t] = a1[t];
				}
				acc[k][18] = b0;
				acc[k][19] = b1;
			}
		}
		for (int k = 0; k < ob; k++) {
			const int oc = o0 + k;
			for (int t = 0; t < 9; t++) {
				float s = lanes_sum(acc[k][t], acc[k][9 + t], OW);
				float *d = dw + (size_t)oc * 9 + t;
				*d = accumulate ? *d + s : s;
			}
			if (db) {
				float s = lanes_sum(acc[k][18], acc[k][19], OW);
				db[oc] = accumulate ? db[oc] + s : s;
			}
		}
	}
}
#endif

RF__INLINE void conv1_fwd_body(float *y, const float *x, const float *w, const float *b,
			       int n, int o, struct conv_geo q)
{
	if (q.kh == 3 && q.kw == 3 && q.w == 28 && q.h == 28)
		conv1_fwd_b(y, x, w, b, n, o, 28, 28, 3, 3, 26, 26);
	else
		conv1_fwd_b(y, x, w, b, n, o, q.h, q.w, q.kh, q.kw, q.oh, q.ow);
}
RF__DISPATCH(conv1_fwd, (float *y, const float *x, const float *w, const float *b, int n, int o,
			 struct conv_geo q),
	     (y, x, w, b, n, o, q))

/* Direct single-channel filter gradient, one output channel at a time:
 * acc[kh][kw][j] = Σ_n Σ_i dy[n][o][i][j]·x[n][i+kh][j+kw] (n, i ascending), then
 * dw[o][kh][kw] (+)= Σ_j acc[kh][kw][j] (j ascending); db likewise. */
enum { RF__C1_MAXT = 25, RF__C1_MAXJ = 64 };

RF__INLINE void conv1_bwdf_b(float *restrict dw, float *restrict db, const float *restrict dy,
			     const float *restrict x, int accumulate, int n, int o, int H, int W,
			     int KH, int KW, int OH, int OW, const float *pp, const float *py)
{
	float drow[RF__C1_MAXJ];
	float acc[RF__C1_MAXT][RF__C1_MAXJ], accb[RF__C1_MAXJ];
	for (int oc = 0; oc < o; oc++) {
		for (int t = 0; t < KH * KW; t++)
			for (int j = 0; j < OW; j++)
				acc[t][j] = 0.0f;
		for (int j = 0; j < OW; j++)
			accb[j] = 0.0f;
		for (int im = 0; im < n; im++) {
			const float *xp = x + (size_t)im * H * W;
			const float *dp = pp ? NULL : dy + ((size_t)im * o + oc) * OH * OW;
			const float *gp = pp ? pp + ((size_t)im * o + oc) * (OH / 2) * (OW / 2) : NULL;
			const float *yp = pp ? py + ((size_t)im * o + oc) * OH * OW : NULL;
			for (int i = 0; i < OH; i++) {
				if (!dp)
					pool_relu_row(drow, gp, yp, i, OH, OW);
				const float *restrict d = dp ? dp + i * OW : drow;
				for (int kh = 0; kh < KH; kh++)
					for (int kw = 0; kw < KW; kw++) {
						const float *restrict xr = xp + (i + kh) * W + kw;
						float *restrict a = acc[kh * KW + kw];
						for (int j = 0; j < OW; j++)
							a[j] += d[j] * xr[j];
					}
				for (int j = 0; j < OW; j++)
					accb[j] += d[j];
			}
		}
		for (int t = 0; t < KH * KW; t++) {
			float s = 0.0f;
			for (int j = 0; j < OW; j++)
				s += acc[t][j];
			float *d = dw + (size_t)oc * KH * KW + t;
			*d = accumulate ? *d + s : s;
		}
		if (db) {
			float s = 0.0f;
			for (int j = 0; j < OW; j++)
				s += accb[j];
			db[oc] = accumulate ? db[oc] + s : s;
		}
	}
}

RF__INLINE void conv1_bwdf_body(float *dw, float *db, const float *dy, const float *x,
				int accumulate, int n, int o, struct conv_geo q, const float *pp,
				const float *py)
{
	if (q.kh == 3 && q.kw == 3 && q.w == 28 && q.h == 28)
		conv1_bwdf_b(dw, db, dy, x, accumulate, n, o, 28, 28, 3, 3, 26, 26, pp, py);
	else
		conv1_bwdf_b(dw, db, dy, x, accumulate, n, o, q.h, q.w, q.kh, q.kw, q.oh, q.ow,
			     pp, py);
}
RF__DISPATCH(conv1_bwdf, (float *dw, float *db, const float *dy, const float *x, int accumulate,
			  int n, int o, struct conv_geo q, const float *pp, const float *py),
	     (dw, db, dy, x, accumulate, n, o, q, pp, py))

int rf_k_conv2d_fwd(const struct rf_k_conv2d *s, float *y, const float *x,
		    const float *w, const float *b, void *ws, size_t ws_bytes)
{
	if (conv_check(s))
		return -EINVAL;
	if (s->n == 0)
		return 0;
	int G = conv_group(s, ws, ws_bytes);
	if (!G)
		return -EINVAL;
	const struct conv_geo q = conv_geo(s);
	if (conv_direct(s)) {
#if RF__X86_DISPATCH
		if (q.kh == 3 && q.kw == 3 && q.ow > 16 && q.ow <= 32 && use_avx512()) {
			conv1_fwd_3x3_avx512(y, x, w, b, s->n, s->o, q.h, q.w, q.oh, q.ow);
			return 0;
		}
#endif
		conv1_fwd(y, x, w, b, s->n, s->o, q);
		return 0;
	}
	const int o = s->o, ckk = s->c * s->kh * s->kw;
	const size_t ohw = (size_t)rf_k_conv2d_oh(s) * rf_k_conv2d_ow(s);
	const size_t img = (size_t)s->c * s->h * s->w;
	for (int n0 = 0; n0 < s->n; n0 += G) {
		int g = s->n - n0 < G ? s->n - n0 : G;
		size_t ld = g * ohw;
		float *col = ws, *out = col + (size_t)ckk * ld;
		float *yn = y + (size_t)n0 * o * ohw;
		im2col(col, ld, x + n0 * img, q, g);
		/* (o, ld) = w (o, ckk) · col (ckk, ld); one image lands directly in y */
		if (g == 1)
			out = yn;
		int rc = rf_k_gemm(0, 0, o, (int)ld, ckk, 1.0f, w, ckk, col, (int)ld, 0.0f,
				   out, (int)ld);
		if (rc)
			return rc;
		for (int gi = 0; gi < g; gi++)
			for (int oc = 0; oc < o; oc++) {
				const float bias = b ? b[oc] : 0.0f;
				const float *restrict src = out + (size_t)oc * ld + gi * ohw;
				float *restrict dst = yn + ((size_t)gi * o + oc) * ohw;
				if (g == 1) {
					if (b)
						for (size_t p = 0; p < ohw; p++)
							dst[p] += bias;
				} else {
					for (size_t p = 0; p < ohw; p++)
						dst[p] = src[p] + bias;
				}
			}
	}
	return 0;
}

int rf_k_conv2d_bwd_data(const struct rf_k_conv2d *s, float *dx, const float *dy,
			 const float *w, void *ws, size_t ws_bytes)
{
	if (conv_check(s))
		return -EINVAL;
	if (s->n == 0)
		return 0;
	int G = conv_group(s, ws, ws_bytes);
	if (!G)
		return -EINVAL;
	const struct conv_geo q = conv_geo(s);
	const int o = s->o, ckk = s->c * s->kh * s->kw;
	const size_t ohw = (size_t)rf_k_conv2d_oh(s) * rf_k_conv2d_ow(s);
	const size_t img = (size_t)s->c * s->h * s->w;
	for (int n0 = 0; n0 < s->n; n0 += G) {
		int g = s->n - n0 < G ? s->n - n0 : G;
		size_t ld = g * ohw;
		float *dcol = ws, *t = dcol + (size_t)ckk * ld;
		const float *dyn = dy + (size_t)n0 * o * ohw, *dyt = dyn;
		if (g > 1) {
			gather_nchw(t, ld, dyn, o, ohw, g);
			dyt = t;
		}
		/* dcol (ckk, ld) = wᵀ (ckk, o) · dy (o, ld) */
		int rc = rf_k_gemm(1, 0, ckk, (int)ld, o, 1.0f, w, ckk, dyt, (int)ld, 0.0f,
				   dcol, (int)ld);
		if (rc)
			return rc;
		col2im(dx + n0 * img, dcol, ld, q, g);
	}
	return 0;
}

int rf_k_conv2d_bwd_filter(const struct rf_k_conv2d *s, float *dw, float *db,
			   const float *dy, const float *x, int accumulate,
			   void *ws, size_t ws_bytes)
{
	if (conv_check(s))
		return -EINVAL;
	const int o = s->o, ckk = s->c * s->kh * s->kw;
	if (s->n == 0) {
		if (!accumulate) {
			memset(dw, 0, (size_t)o * ckk * sizeof(float));
			if (db)
				memset(db, 0, (size_t)o * sizeof(float));
		}
		return 0;
	}
	int G = conv_group(s, ws, ws_bytes);
	if (!G)
		return -EINVAL;
	const struct conv_geo q = conv_geo(s);
	if (conv_direct(s) && s->kh * s->kw <= RF__C1_MAXT && q.ow <= RF__C1_MAXJ) {
#if RF__X86_DISPATCH
		if (q.kh == 3 && q.kw == 3 && q.ow > 16 && q.ow <= 32 && use_avx512()) {
			conv1_bwdf_3x3_avx512(dw, db, dy, x, accumulate, s->n, o, q.h, q.w, q.oh,
					      q.ow, NULL, NULL);
			return 0;
		}
#endif
		conv1_bwdf(dw, db, dy, x, accumulate, s->n, o, q, NULL, NULL);
		return 0;
	}
	const size_t ohw = (size_t)rf_k_conv2d_oh(s) * rf_k_conv2d_ow(s);
	const size_t img = (size_t)s->c * s->h * s->w;
	if (db && !accumulate)
		memset(db, 0, (size_t)o * sizeof(float));
	for (int n0 = 0; n0 < s->n; n0 += G) {
		int g = s->n - n0 < G ? s->n - n0 : G;
		size_t ld = g * ohw;
		float *row = ws, *t = row + (size_t)ckk * ld;
		const float *dyn = dy + (size_t)n0 * o * ohw, *dyt = dyn;
		if (g > 1) {
			gather_nchw(t, ld, dyn, o, ohw, g);
			dyt = t;
		}
		im2row(row, x + n0 * img, q, g);
		/* dw (o, ckk) (+)= dy (o, ld) · row (ld, ckk) */
		float beta = (n0 == 0 && !accumulate) ? 0.0f : 1.0f;
		int rc = rf_k_gemm(0, 0, o, ckk, (int)ld, 1.0f, dyt, (int)ld, row, ckk, beta, dw,
				   ckk);
		if (rc)
			return rc;
		if (db)
			for (int oc = 0; oc < o; oc++) {
				const float *restrict src = dyt + (size_t)oc * ld;
				float acc = 0.0f;
				for (size_t p = 0; p < ld; p++)
					acc += src[p];
				db[oc] += acc;
			}
	}
	return 0;
}

int rf_k_conv2d_bwd_filter_pool_relu(const struct rf_k_conv2d *s, float *dw, float *db,
				     const float *dp, const float *y, const float *x,
				     int accumulate)
{
	if (conv_check(s) || !conv_direct(s) || s->kh * s->kw > RF__C1_MAXT ||
	    rf_k_conv2d_ow(s) > RF__C1_MAXJ)
		return -EINVAL;
	const int o = s->o;
	if (s->n == 0) {
		if (!accumulate) {
			memset(dw, 0, (size_t)o * s->kh * s->kw * sizeof(float));
			if (db)
				memset(db, 0, (size_t)o * sizeof(float));
		}
		return 0;
	}
	const struct conv_geo q = conv_geo(s);
#if RF__X86_DISPATCH
	if (q.kh == 3 && q.kw == 3 && q.ow > 16 && q.ow <= 32 && use_avx512()) {
		conv1_bwdf_3x3_avx512(dw, db, NULL, x, accumulate, s->n, o, q.h, q.w, q.oh, q.ow,
				      dp, y);
		return 0;
	}
#endif
	conv1_bwdf(dw, db, NULL, x, accumulate, s->n, o, q, dp, y);
	return 0;
}

/* ---- pooling ------------------------------------------------------------------------ */

void rf_k_avgpool2d_fwd(float *y, const float *x, int n, int c, int h, int w, int k)
{
	if (k < 1)
		return;
	const int oh = h / k, ow = w / k;
	const float inv = 1.0f / (float)(k * k);
	const size_t planes = (size_t)n * c;
	if (k == 2) { /* LeNet's case, same order of additions as the general loop */
		for (size_t pl = 0; pl < planes; pl++)
			for (int i = 0; i < oh; i++) {
				const float *restrict x0 = x + (pl * h + 2 * i) * w, *restrict x1 = x0 + w;
				float *restrict yr = y + (pl * oh + i) * ow;
				for (int j = 0; j < ow; j++)
					yr[j] = ((((0.0f + x0[2 * j]) + x0[2 * j + 1]) + x1[2 * j]) +
						 x1[2 * j + 1]) * inv;
			}
		return;
	}
	for (size_t pl = 0; pl < planes; pl++) {
		const float *xp = x + pl * h * w;
		float *yp = y + pl * oh * ow;
		for (int i = 0; i < oh; i++) {
			float *restrict yr = yp + (size_t)i * ow;
			for (int j = 0; j < ow; j++)
				yr[j] = 0.0f;
			for (int a = 0; a < k; a++) {
				const float *restrict xr = xp + (size_t)(i * k + a) * w;
				for (int j = 0; j < ow; j++)
					for (int bb = 0; bb < k; bb++)
						yr[j] += xr[j * k + bb];
			}
			for (int j = 0; j < ow; j++)
				yr[j] *= inv;
		}
	}
}

void rf_k_avgpool2d_bwd(float *dx, const float *dy, int n, int c, int h, int w, int k)
{
	if (k < 1)
		return;
	const int oh = h / k, ow = w / k;
	const float inv = 1.0f / (float)(k * k);
	const size_t planes = (size_t)n * c;
	for (size_t pl = 0; pl < planes; pl++) {
		float *xp = dx + pl * h * w;
		const float *yp = dy + pl * oh * ow;
		for (int r = 0; r < h; r++) {
			float *restrict xr = xp + (size_t)r * w;
			int i = r / k;
			if (i >= oh) {
				for (int col = 0; col < w; col++)
					xr[col] = 0.0f;
				continue;
			}
			const float *restrict yr = yp + (size_t)i * ow;
			if (k == 2)
				for (int j = 0; j < ow; j++) {
					float v = yr[j] * inv;
					xr[2 * j] = v;
					xr[2 * j + 1] = v;
				}
			else
				for (int j = 0; j < ow; j++)
					for (int bb = 0; bb < k; bb++)
						xr[j * k + bb] = yr[j] * inv;
			for (int col = ow * k; col < w; col++)
				xr[col] = 0.0f;
		}
	}
}

void rf_k_relu_avgpool2_fwd(float *p, float *y, int n, int c, int h, int w)
{
	const int oh = h / 2, ow = w / 2;
	const float inv = 1.0f / 4.0f;
	const size_t planes = (size_t)n * c;
	for (size_t pl = 0; pl < planes; pl++) {
		float *yp = y + pl * h * w;
		for (int i = 0; i < oh; i++) {
			float *restrict x0 = yp + (size_t)(2 * i) * w, *restrict x1 = x0 + w;
			float *restrict pr = p + (pl * oh + i) * ow;
			for (int col = 0; col < w; col++) {
				x0[col] = x0[col] > 0.0f ? x0[col] : 0.0f;
				x1[col] = x1[col] > 0.0f ? x1[col] : 0.0f;
			}
			for (int j = 0; j < ow; j++)
				pr[j] = ((((0.0f + x0[2 * j]) + x0[2 * j + 1]) + x1[2 * j]) +
					 x1[2 * j + 1]) * inv;
		}
		for (int r = 2 * oh; r < h; r++) {
			float *restrict xr = yp + (size_t)r * w;
			for (int col = 0; col < w; col++)
				xr[col] = xr[col] > 0.0f ? xr[col] : 0.0f;
		}
	}
}

void rf_k_avgpool2_relu_bwd(float *dx, const float *dy, const float *y, int n, int c, int h,
			    int w)
{
	const int oh = h / 2, ow = w / 2;
	const float inv = 1.0f / 4.0f;
	const size_t planes = (size_t)n * c;
	for (size_t pl = 0; pl < planes; pl++) {
		float *xp = dx + pl * h * w;
		const float *yp = y + pl * h * w;
		const float *gp = dy + pl * oh * ow;
		for (int r = 0; r < h; r++) {
			float *restrict xr = xp + (size_t)r * w;
			const float *restrict yr = yp + (size_t)r * w;
			int i = r / 2;
			if (i >= oh) {
				for (int col = 0; col < w; col++)
					xr[col] = 0.0f;
				continue;
			}
			const float *restrict gr = gp + (size_t)i * ow;
			for (int j = 0; j < ow; j++) {
				float v = gr[j] * inv;
				xr[2 * j] = yr[2 * j] > 0.0f ? v : 0.0f;
				xr[2 * j + 1] = yr[2 * j + 1] > 0.0f ? v : 0.0f;
			}
			for (int col = ow * 2; col < w; col++)
				xr[col] = 0.0f;
		}
	}
}

/* ---- optimiser and vector helpers ------------------------------------------------- */

void rf_k_sgd(float *restrict w, const float *restrict g, size_t n, float lr,
	      float weight_decay)
{
	/* As PyTorch does it, w - lr·g with the product kept exact: a float times a float
	 * fits a double's mantissa, so only the difference is rounded (to double, then to
	 * float: on these operands that matches a fused multiply-add except in rare ties,
	 * and unlike fmaf without -mfma it stays vectorised). */
	if (weight_decay == 0.0f)
		for (size_t i = 0; i < n; i++)
			w[i] = (float)((double)w[i] - (double)lr * (double)g[i]);
	else
		for (size_t i = 0; i < n; i++)
			w[i] -= lr * (g[i] + weight_decay * w[i]);
}

void rf_k_sgd_momentum(float *restrict w, float *restrict v, const float *restrict g,
		       size_t n, float lr, float momentum, float weight_decay)
{
	for (size_t i = 0; i < n; i++) {
		float d = g[i] + weight_decay * w[i];
		float vi = momentum * v[i] + d;
		v[i] = vi;
		w[i] -= lr * vi;
	}
}

void rf_k_axpy(float *restrict y, float a, const float *restrict x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

void rf_k_scale(float *restrict x, float a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] *= a;
}

void rf_k_reduce_sum(float *out, const float *const *in, int k, size_t n)
{
	if (k <= 0) {
		memset(out, 0, n * sizeof(float));
		return;
	}
	/* Left to right, blocked so that out stays in cache across inputs. */
	enum { BLK = 4096 };
	for (size_t i0 = 0; i0 < n; i0 += BLK) {
		size_t m = n - i0 < BLK ? n - i0 : BLK;
		float *o = out + i0;
		if (k == 1) {
			if (in[0] != out)
				memcpy(o, in[0] + i0, m * sizeof(float));
			continue;
		}
		{
			const float *restrict a = in[0] + i0, *restrict b = in[1] + i0;
			for (size_t i = 0; i < m; i++)
				o[i] = a[i] + b[i];
		}
		for (int j = 2; j < k; j++) {
			const float *restrict a = in[j] + i0;
			float *restrict oo = o;
			for (size_t i = 0; i < m; i++)
				oo[i] += a[i];
		}
	}
}

void rf_k_copy(float *dst, const float *src, size_t n)
{
	if (n && dst != src)
		memmove(dst, src, n * sizeof(float));
}

void rf_k_fill(float *restrict x, float v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = v;
}

/* ---- input decoding ------------------------------------------------------------------ */

RF__NO_CONTRACT
void rf_k_u8_to_f32(float *restrict out, const uint8_t *restrict in, size_t n,
		    float scale, float mean, float std)
{
	for (size_t i = 0; i < n; i++) {
		float t = (float)in[i] * scale;
		t = t - mean;
		out[i] = t / std;
	}
}

void rf_k_u8_to_i32(int32_t *restrict out, const uint8_t *restrict in, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = in[i];
}

/* ---- random numbers -------------------------------------------------------------------- */

static inline void philox10(uint32_t x[4], uint32_t k0, uint32_t k1)
{
	for (int r = 0; r < 10; r++) {
		if (r) {
			k0 += 0x9E3779B9u;
			k1 += 0xBB67AE85u;
		}
		uint64_t p0 = (uint64_t)0xD2511F53u * x[0];
		uint64_t p1 = (uint64_t)0xCD9E8D57u * x[2];
		uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
		uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
		uint32_t y0 = hi1 ^ x[1] ^ k0, y2 = hi0 ^ x[3] ^ k1;
		x[0] = y0;
		x[1] = lo1;
		x[2] = y2;
		x[3] = lo0;
	}
}

void rf_k_philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2])
{
	uint32_t x[4] = { ctr[0], ctr[1], ctr[2], ctr[3] };
	philox10(x, key[0], key[1]);
	memcpy(out, x, sizeof(x));
}

RF__NO_CONTRACT
void rf_k_rand_uniform(float *out, size_t n, uint64_t seed, uint64_t counter,
		       float lo, float hi)
{
	const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
	const float d = hi - lo;
	for (size_t i = 0; i < n; i++) {
		uint64_t idx = counter + i;
		uint32_t x[4] = { (uint32_t)idx, (uint32_t)(idx >> 32), 0, 0 };
		philox10(x, k0, k1);
		float u = (float)(x[0] >> 8) * 0x1p-24f;
		float t = d * u;
		out[i] = lo + t;
	}
}

void rf_k_rand_normal(float *out, size_t n, uint64_t seed, uint64_t counter,
		      float mean, float std)
{
	const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
	const double two_pi = 6.283185307179586476925286766559;
	for (size_t i = 0; i < n; i++) {
		uint64_t idx = counter + i;
		uint32_t x[4] = { (uint32_t)idx, (uint32_t)(idx >> 32), 0, 0 };
		philox10(x, k0, k1);
		double u1 = ((double)x[0] + 1.0) * 0x1p-32;
		double u2 = (double)x[1] * 0x1p-32;
		double z = sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
		out[i] = (float)((double)mean + (double)std * z);
	}
}
