/* devices/cpu/gemm-avx512.c -- rf__k_gemm_avx512, the single-threaded AVX-512 sgemm
 * (-ENOTSUP where AVX-512 is absent or disabled). */
#include <errno.h>

#include "kernels-impl.h"

/* ---- AVX-512 gemm ----------------------------------------------------------------- */

/* A single-threaded sgemm for op(B) = B (any op(A)), used by rf__k_gemm when the CPU
 * has AVX-512 and OpenBLAS runs one thread per stream (the policy when a device has
 * a stream per core, as LeNet's two streams do): OpenBLAS here is pinned to its
 * Haswell (AVX2) kernels by OPENBLAS_CORETYPE, at half the FMA width.
 *
 * Blocking: for each KC-deep slice of K, alpha*op(A) is packed in MR-row panels
 * (p-major: the MR values of one k are adjacent), then for each NR-wide panel of B,
 * read in place (row stride ldb, no copy: B is the large operand here -- im2col
 * columns, output gradients -- and its panel of KC x NR floats stays in L1 while every
 * A panel of the block passes over it), the micro-kernel computes an MR x NR tile in
 * 24 zmm accumulators: per k, 4 loads of B, 6 broadcasts of A, 24 FMAs. A column edge
 * uses as many zmm columns as it needs, the last with masked loads and stores
 * (masked-off lanes are neither read nor written); row edges store only valid rows.
 * Each C element is sum_p in ascending p, FMA by FMA, one KC slice at a time, added to C:
 * the result is deterministic. */
enum { RF__GM_MR = 6, RF__GM_NR = 64, RF__GM_KC = 128, RF__GM_APACK = 96 * 128 };

#if RF__X86_DISPATCH
#include <immintrin.h>

/* C[0:mr, 0:nr] = (acc ? C : 0) + ap (kc x MR panel) * B[0:kc, 0:nr], nr <= 16*NV: NV
 * zmm columns per row (a compile-time constant in every instance), the last one
 * masked unless full. */
RF__AVX512 RF__INLINE void gm_ukr_body(int kc, const float *restrict ap,
				       const float *restrict b, size_t ldb, float *restrict c,
				       size_t ldc, int mr, int nr, int acc, const int NV,
				       const int full)
{
	__mmask16 mk[4];
	__m512 r[RF__GM_MR][4], bv[4];

#pragma GCC unroll 4
	for (int v = 0; v < NV; v++) {
		int left = nr - 16 * v;
		mk[v] = full || left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
	}
#pragma GCC unroll 6
	for (int i = 0; i < RF__GM_MR; i++)
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
			r[i][v] = _mm512_setzero_ps();
	for (int p = 0; p < kc; p++, ap += RF__GM_MR, b += ldb) {
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
			bv[v] = full || v < NV - 1 ? _mm512_loadu_ps(b + 16 * v)
						   : _mm512_maskz_loadu_ps(mk[v], b + 16 * v);
#pragma GCC unroll 6
		for (int i = 0; i < RF__GM_MR; i++) {
			const __m512 a = _mm512_set1_ps(ap[i]);
#pragma GCC unroll 4
			for (int v = 0; v < NV; v++)
				r[i][v] = _mm512_fmadd_ps(a, bv[v], r[i][v]);
		}
	}
	for (int i = 0; i < mr; i++) {
		float *cr = c + (size_t)i * ldc;
#pragma GCC unroll 4
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

/* ap <- alpha * op(A)[i0:i0+mc, p0:p0+kc] in MR-row panels, rows past mc zero */
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

/* C = alpha * op(A) * B + beta * C for alpha != 0, k > 0 (rf__k_gemm's contract). */
static void gemm_avx512(int ta, int m, int n, int k, float alpha, const float *a, int lda,
			const float *b, int ldb, float beta, float *c, int ldc)
{
	float ap[RF__GM_APACK] __attribute__((aligned(64)));

	if (beta != 0.0f) /* beta == 0: the first K slice overwrites C instead */
		rf__k_gemm_beta(m, n, beta, c, ldc);
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

int rf__k_gemm_avx512(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
		     const float *b, int ldb, float beta, float *c, int ldc)
{
	int rc = rf__k_gemm_check(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
	if (rc)
		return rc;
#if RF__X86_DISPATCH
	if (tb || !rf__k_use_avx512())
		return -ENOTSUP;
	if (m == 0 || n == 0)
		return 0;
	if (alpha == 0.0f || k == 0) {
		rf__k_gemm_beta(m, n, beta, c, ldc);
		return 0;
	}
	gemm_avx512(ta, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	return 0;
#else
	return -ENOTSUP;
#endif
}
