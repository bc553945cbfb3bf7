/* devices/cpu/gemm.c -- rf__k_gemm: the AVX-512 sgemm when it applies, else OpenBLAS,
 * else the portable blocked gemm; and OpenBLAS's thread count. */
#include <errno.h>
#include <stdlib.h>

#include "kernels-impl.h"

#if RF_HAVE_OPENBLAS
#include "blas-dl.h"
#endif

/* ---- gemm ------------------------------------------------------------------- */

/* Blocking of the portable gemm: a (MC x KC) block of op(A) and a (KC x NC) panel of
 * op(B) are packed row-major on the stack, then C's (MC x NC) block is updated one
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

int rf__k_gemm_portable(int ta, int tb, int m, int n, int k, float alpha,
		       const float *a, int lda, const float *b, int ldb,
		       float beta, float *c, int ldc)
{
	int rc = rf__k_gemm_check(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
	if (rc)
		return rc;
	rf__k_gemm_beta(m, n, beta, c, ldc);
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
				/* pack alpha * op(A)[i0:i0+mc, p0:p0+kc] */
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

/* rf__k_gemm_avx512 instead of OpenBLAS unless the environment asks for BLAS
 * (RF_KERNELS_BLAS_GEMM set and not 0; rf__k_gemm_avx512 itself honours
 * RF_KERNELS_NO_AVX512 and returns -ENOTSUP without AVX-512). Whatever OpenBLAS's thread
 * count: a stream's GEMM spreads over idle cores through the CPU devices' helpers, with
 * the same bits on one thread or several. */
static int gemm_fast_ok(void)
{
	const char *e = getenv("RF_KERNELS_BLAS_GEMM");
	return !(e && *e && *e != '0');
}

/* Whether OpenBLAS is there for a GEMV (it is opened at the first ask) */
static int rf__gemv_blas(void)
{
#if RF_HAVE_OPENBLAS
	return rf__openblas(NULL) != NULL;
#else
	return 0;
#endif
}

/* Whether an m-row product is ringflow's AVX-512 GEMM's to try (it still says -ENOTSUP
 * without AVX-512): not where RF_KERNELS_BLAS_GEMM gives OpenBLAS everything, nor a
 * one-row GEMV where OpenBLAS's sgemv is there */
static int gemm_ours(int m)
{
	return gemm_fast_ok() && !(m == 1 && rf__gemv_blas());
}

const char *rf__k_gemm_who(void)
{
	/* an empty product: rf__k_gemm_avx512 says -ENOTSUP where it would not run */
	if (gemm_ours(2) && rf__k_gemm_avx512(0, 0, 0, 0, 0, 1.0f, NULL, 1, NULL, 1, 0.0f, NULL,
					      1) != -ENOTSUP)
		return "ringflow's AVX-512 GEMM";
#if RF_HAVE_OPENBLAS
	if (rf__openblas(NULL))
		return "OpenBLAS";
#endif
	return "the portable GEMM";
}

int rf__k_gemm_gen(int m, int n, int k, const float *a, int lda, const struct rf__k_bgen *bg,
		   float beta, float *c, int ldc)
{
	if (!gemm_ours(m)) /* rf__k_gemm's choice, below */
		return -ENOTSUP;
	return rf__k_gemm_avx512_gen(m, n, k, a, lda, bg, beta, c, ldc);
}

int rf__k_gemm(int ta, int tb, int m, int n, int k, float alpha,
	      const float *a, int lda, const float *b, int ldb,
	      float beta, float *c, int ldc)
{
	/* (one row, m == 1, is a GEMV: OpenBLAS's sgemv streams op(B) once, below) */
	if (gemm_ours(m)) {
		int rc = rf__k_gemm_avx512(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
		if (rc != -ENOTSUP)
			return rc;
	}
#if RF_HAVE_OPENBLAS
	const struct rf__openblas *ob = rf__openblas(NULL);
	if (!ob)
		return rf__k_gemm_portable(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	int rc = rf__k_gemm_check(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
	if (rc)
		return rc;
	if (m == 0 || n == 0)
		return 0;
	if (m == 1 && k > 0) {
		/* One row: a GEMV. OpenBLAS 0.3.21's sgemm packs all of op(B) for it (perf:
		 * sgemm_itcopy was 40 % of a batch-1 MLP pass); sgemv streams B once.
		 * y = op(B)^T x, with x = op(A)'s row (stride lda when A is transposed). */
		rf__k_gemm_beta(1, n, beta, c, ldc);
		ob->sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? n : k,
			    tb ? k : n, alpha, b, ldb, a, ta ? lda : 1, 1.0f, c, 1);
		return 0;
	}
	ob->sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
		    tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
		    beta, c, ldc);
	return 0;
#else
	return rf__k_gemm_portable(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

int rf__k_blas_set_threads(int n)
{
#if RF_HAVE_OPENBLAS
	if (n < 1)
		return -EINVAL;
	rf__openblas_set_threads(n); /* applied when OpenBLAS opens, if it is not yet */
	return 0;
#else
	return -ENOTSUP;
#endif
}

int rf__k_blas_get_threads(void)
{
#if RF_HAVE_OPENBLAS
	const struct rf__openblas *ob = rf__openblas(NULL);
	return ob ? ob->get_num_threads() : -ENOTSUP;
#else
	return -ENOTSUP;
#endif
}

const char *rf__k_blas_core(void)
{
#if RF_HAVE_OPENBLAS
	const struct rf__openblas *ob = rf__openblas(NULL);
	const char *core = ob && ob->get_corename ? ob->get_corename() : NULL;
	return ob ? (core ? core : "?") : NULL;
#else
	return NULL;
#endif
}
