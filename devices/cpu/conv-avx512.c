/* devices/cpu/conv-avx512.c -- hand-vectorised AVX-512 single-channel 3x3
 * convolutions (LeNet's first layer); conv.c calls them when the CPU has AVX-512. */
#include "kernels-impl.h"

#if RF__X86_DISPATCH
#include <immintrin.h>
/* Hand-vectorised single-channel 3x3 kernels for 16 < ow <= 32 (LeNet's 28x28 ->
 * 26x26): an output row is two 16-lane chunks, the second masked, so no lane reads
 * or writes outside the row and masked-off lanes are exact zeros. Same order of
 * additions as conv1_fwd_b / conv1_bwdf_b except that FMA is used. */
RF__AVX512 void rf__k_conv1_fwd_3x3_avx512(float *restrict y, const float *restrict x,
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
 * product g*(1/4) and the same y > 0 test, so the same bits. */
RF__AVX512 RF__INLINE void pool_relu_row_avx512(__m512 *d0, __m512 *d1,
						const float *restrict pp,
						const float *restrict py, int i, int OH, int OW)
{
	const int PH = OH / 2, PW = OW / 2;
	if (i / 2 >= PH) {
		*d0 = *d1 = _mm512_setzero_ps();
		return;
	}
	/* lane j takes pooled column j / 2; columns j >= 2*PW (odd OW) get 0 */
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
 * on the stack between images, so that each image's x (28x28) is read from L1 by every
 * channel of the block instead of once per channel from L2. Per channel and lane the
 * FMAs run in the same order as one channel at a time would (images, then rows,
 * ascending), so the bits do not depend on the blocking. */
enum { RF__C1_OB = 8 };

/* sum of the first `ow` lanes of (lo, hi), j ascending: the sum conv1_bwdf_b makes */
RF__AVX512 RF__INLINE float lanes_sum(__m512 lo, __m512 hi, int ow)
{
	float l[32], s = 0.0f;
	_mm512_storeu_ps(l, lo);
	_mm512_storeu_ps(l + 16, hi);
	for (int j = 0; j < ow; j++)
		s += l[j];
	return s;
}

RF__AVX512 void rf__k_conv1_bwdf_3x3_avx512(float *restrict dw, float *restrict db,
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
