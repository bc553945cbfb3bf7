/* devices/cpu/conv-sp.c -- the copy loops of a strided or zero-padded conv2d
 * (ResNet's 3x3 pad 1 and 1x1 stride 2 shapes): im2col, its transpose im2row and
 * col2im, each row split once into the columns that fall in the padding (zeros) and
 * those that read the image, so the inner loop has no bounds check. */
#include <string.h>

#include "kernels-impl.h"

/* Output columns j whose input column j*s - p + kw lies in [0, w): [*lo, *hi). */
static void valid_cols(const struct rf__conv_geo *q, int kw, int *lo, int *hi)
{
	int a = q->p - kw;                      /* j*s >= a */
	int b = q->w - 1 + q->p - kw;           /* j*s <= b */
	int l = a <= 0 ? 0 : (a + q->s - 1) / q->s;
	int h = b < 0 ? 0 : b / q->s + 1;

	*lo = l < q->ow ? l : q->ow;
	*hi = h < q->ow ? h : q->ow;
	if (*hi < *lo)
		*hi = *lo;
}

/* Output columns [js, je) of output row i of tap (kh, kw) of channel plane xc:
 * dst[j - js] for j in [js, je) (a whole row: 0, ow). */
static void tap_row(float *restrict dst, const float *restrict xc, const struct rf__conv_geo *q,
		    int i, int kh, int kw, int js, int je)
{
	int ih = i * q->s - q->p + kh, lo, hi, j;

	if (ih < 0 || ih >= q->h) {
		memset(dst, 0, (size_t)(je - js) * sizeof(float));
		return;
	}
	valid_cols(q, kw, &lo, &hi);
	lo = lo < js ? js : lo > je ? je : lo;
	hi = hi < lo ? lo : hi > je ? je : hi;
	const float *restrict xr = xc + (size_t)ih * q->w;
	const int off = kw - q->p;              /* input column of output column j: j*s + off */
	for (j = js; j < lo; j++)
		dst[j - js] = 0.0f;
	if (q->s == 1 && hi > lo)
		memcpy(dst + (lo - js), xr + lo + off, (size_t)(hi - lo) * sizeof(float));
	else
		for (j = lo; j < hi; j++)
			dst[j - js] = xr[j * q->s + off];
	for (j = hi; j < je; j++)
		dst[j - js] = 0.0f;
}

void rf__im2col_sp(float *col, size_t ld, const float *x, struct rf__conv_geo q, int g)
{
	const size_t ohw = (size_t)q.oh * q.ow, plane = (size_t)q.h * q.w;
	const size_t img = (size_t)q.c * plane;

	for (int c = 0; c < q.c; c++)
		for (int kh = 0; kh < q.kh; kh++)
			for (int kw = 0; kw < q.kw; kw++) {
				size_t r = ((size_t)c * q.kh + kh) * q.kw + kw;
				for (int gi = 0; gi < g; gi++) {
					float *cp = col + r * ld + gi * ohw;
					const float *xc = x + gi * img + c * plane;
					for (int i = 0; i < q.oh; i++)
						tap_row(cp + (size_t)i * q.ow, xc, &q, i, kh, kw, 0, q.ow);
				}
			}
}

/* One output pixel's patch (c*kh*kw values) when every tap lies inside the image:
 * no bounds checks; 3x3 kernels with a compile-time row length. */
static inline __attribute__((always_inline)) void patch_inside(float *restrict rc,
							       const float *restrict xb,
							       const struct rf__conv_geo *q,
							       size_t plane, int KH, int KW)
{
	for (int c = 0; c < q->c; c++, rc += KH * KW, xb += plane)
		for (int kh = 0; kh < KH; kh++)
			for (int kw = 0; kw < KW; kw++)
				rc[kh * KW + kw] = xb[(size_t)kh * q->w + kw];
}

void rf__im2row_sp(float *row, const float *x, struct rf__conv_geo q, int g)
{
	const size_t plane = (size_t)q.h * q.w, img = (size_t)q.c * plane;
	const size_t ckk = (size_t)q.c * q.kh * q.kw;

	for (int gi = 0; gi < g; gi++)
		for (int i = 0; i < q.oh; i++)
			for (int j = 0; j < q.ow; j++, row += ckk) {
				const int ih0 = i * q.s - q.p, iw0 = j * q.s - q.p;
				if (ih0 >= 0 && ih0 + q.kh <= q.h && iw0 >= 0 && iw0 + q.kw <= q.w) {
					const float *xb = x + gi * img + (size_t)ih0 * q.w + iw0;
					if (q.kh == 3 && q.kw == 3)
						patch_inside(row, xb, &q, plane, 3, 3);
					else if (q.kh == 1 && q.kw == 1)
						patch_inside(row, xb, &q, plane, 1, 1);
					else
						patch_inside(row, xb, &q, plane, q.kh, q.kw);
					continue;
				}
				for (int c = 0; c < q.c; c++) {
					const float *xc = x + gi * img + c * plane;
					float *rc = row + (size_t)c * q.kh * q.kw;
					for (int kh = 0; kh < q.kh; kh++) {
						int ih = ih0 + kh;
						for (int kw = 0; kw < q.kw; kw++) {
							int iw = iw0 + kw;
							rc[kh * q.kw + kw] =
								ih >= 0 && ih < q.h && iw >= 0 && iw < q.w
									? xc[(size_t)ih * q.w + iw]
									: 0.0f;
						}
					}
				}
			}
}

void rf__col2im_sp(float *dx, const float *dcol, size_t ld, struct rf__conv_geo q, int g)
{
	const size_t ohw = (size_t)q.oh * q.ow, plane = (size_t)q.h * q.w;
	const size_t img = (size_t)q.c * plane;

	for (int gi = 0; gi < g; gi++) {
		float *dxi = dx + gi * img;
		memset(dxi, 0, img * sizeof(float));
		for (int c = 0; c < q.c; c++)
			for (int kh = 0; kh < q.kh; kh++)
				for (int kw = 0; kw < q.kw; kw++) {
					size_t r = ((size_t)c * q.kh + kh) * q.kw + kw;
					const float *cp = dcol + r * ld + gi * ohw;
					int lo, hi;
					valid_cols(&q, kw, &lo, &hi);
					for (int i = 0; i < q.oh; i++) {
						int ih = i * q.s - q.p + kh;
						if (ih < 0 || ih >= q.h)
							continue;
						float *restrict xr = dxi + c * plane + (size_t)ih * q.w;
						const float *restrict cr = cp + (size_t)i * q.ow;
						const int off = kw - q.p;
						if (q.s == 1) { /* contiguous: vectorised, the same adds */
							float *restrict xo = xr + off;
							for (int j = lo; j < hi; j++)
								xo[j] += cr[j];
						} else {
							for (int j = lo; j < hi; j++)
								xr[j * q.s + off] += cr[j];
						}
					}
				}
	}
}

#if RF__X86_DISPATCH
#include <immintrin.h>

/* rf__im2col_panel for stride 1 and kernels up to 16 wide: the panel's columns cut
 * once into pieces of output rows (segs), then each row (c, kh, kw, stepped without a
 * division) a piece at a time in 16-lane masked loads and stores (a lane whose tap
 * falls in the padding is not loaded: it stays 0). */
RF__AVX512 static void im2col_panel_s1(float *dst, const float *x, const struct rf__conv_geo *q,
				       int p0, int kc, int j0, int nr)
{
	const size_t plane = (size_t)q->h * q->w, img = (size_t)q->c * plane;
	const int ohw = q->oh * q->ow;
	struct { size_t base; int i, jj, len; } seg[RF__K_PANEL_NR];
	int ns = 0, lo[16], hi[16];

	for (int gi = j0 / ohw, i = j0 % ohw / q->ow, jj = j0 % q->ow, left = nr; left > 0;) {
		const int len = q->ow - jj < left ? q->ow - jj : left;
		seg[ns].base = (size_t)gi * img, seg[ns].i = i, seg[ns].jj = jj, seg[ns].len = len;
		ns++, left -= len, jj = 0;
		if (++i == q->oh)
			i = 0, gi++;
	}
	for (int kw = 0; kw < q->kw; kw++)
		valid_cols(q, kw, &lo[kw], &hi[kw]);
	int c = p0 / (q->kh * q->kw), kh = p0 % (q->kh * q->kw) / q->kw, kw = p0 % q->kw;
	for (int r = 0; r < kc; r++, dst += RF__K_PANEL_NR) {
		const float *xc = x + (size_t)c * plane;
		const int off = kw - q->p;
		float *d = dst;
		for (int k = 0; k < ns; k++) {
			const int ih = seg[k].i - q->p + kh, jj = seg[k].jj, len = seg[k].len;
			const float *xr = ih < 0 || ih >= q->h ? NULL
					  : xc + seg[k].base + (size_t)ih * q->w;
			for (int t = 0; t < len; t += 16) {
				const int n = len - t < 16 ? len - t : 16, j = jj + t;
				int va = lo[kw] - j, vb = hi[kw] - j; /* the lanes that read */
				va = va < 0 ? 0 : va > n ? n : va;
				vb = vb < va ? va : vb > n ? n : vb;
				const __mmask16 st = (__mmask16)((1u << n) - 1);
				const __mmask16 ld = (__mmask16)(((1u << vb) - 1) & ~((1u << va) - 1));
				__m512 v = xr && ld ? _mm512_maskz_loadu_ps(ld, xr + j + off)
						    : _mm512_setzero_ps();
				_mm512_mask_storeu_ps(d + t, st, v);
			}
			d += len;
		}
		if (++kw == q->kw) {
			kw = 0;
			if (++kh == q->kh)
				kh = 0, c++;
		}
	}
}
#endif

void rf__im2col_panel(float *dst, const float *x, const struct rf__conv_geo *q, int p0, int kc,
		      int j0, int nr)
{
#if RF__X86_DISPATCH
	if (q->s == 1 && q->kw <= 16 && rf__k_use_avx512()) {
		im2col_panel_s1(dst, x, q, p0, kc, j0, nr);
		return;
	}
#endif
	const size_t plane = (size_t)q->h * q->w, img = (size_t)q->c * plane;
	const int kk = q->kh * q->kw, ohw = q->oh * q->ow;

	for (int r = 0; r < kc; r++, dst += RF__K_PANEL_NR) {
		const int p = p0 + r, c = p / kk, kh = p % kk / q->kw, kw = p % q->kw;
		int gi = j0 / ohw, i = j0 % ohw / q->ow, jj = j0 % q->ow, left = nr;
		float *d = dst;
		/* output rows, or the pieces of them in the panel */
		while (left > 0) {
			const int len = q->ow - jj < left ? q->ow - jj : left;
			tap_row(d, x + (size_t)gi * img + (size_t)c * plane, q, i, kh, kw, jj, jj + len);
			d += len, left -= len, jj = 0;
			if (++i == q->oh)
				i = 0, gi++;
		}
	}
}

#if RF__X86_DISPATCH
/* rf__im2row_panel with AVX-512: the panel's columns' (c, kh, kw) and their offsets
 * in an image tabled once; then each row (an output pixel) 16 lanes at a time by a
 * masked gather -- a lane whose tap falls in the padding (or past nr) is not read: 0 */
RF__AVX512 static void im2row_panel_avx512(float *dst, const float *x,
					   const struct rf__conv_geo *q, int p0, int kc, int j0,
					   int nr)
{
	const size_t plane = (size_t)q->h * q->w, img = (size_t)q->c * plane;
	const int kk = q->kh * q->kw;
	int32_t offt[RF__K_PANEL_NR], kht[RF__K_PANEL_NR], kwt[RF__K_PANEL_NR];

	for (int t = 0, c = j0 / kk, kh = j0 % kk / q->kw, kw = j0 % q->kw; t < RF__K_PANEL_NR;
	     t++) {
		offt[t] = (int32_t)((size_t)c * plane + (size_t)kh * q->w + (size_t)kw);
		kht[t] = kh, kwt[t] = kw;
		if (++kw == q->kw && (kw = 0, ++kh == q->kh))
			kh = 0, c++;
	}
	const __m512i hv = _mm512_set1_epi32(q->h), wv = _mm512_set1_epi32(q->w);
	int gi = p0 / (q->oh * q->ow), i = p0 % (q->oh * q->ow) / q->ow, jj = p0 % q->ow;
	for (int r = 0; r < kc; r++, dst += RF__K_PANEL_NR) {
		const int ih0 = i * q->s - q->p, iw0 = jj * q->s - q->p;
		const float *base = x + (size_t)gi * img;
		const __m512i dv = _mm512_set1_epi32(ih0 * q->w + iw0);
		const __m512i ihv = _mm512_set1_epi32(ih0), iwv = _mm512_set1_epi32(iw0);
		for (int t = 0; t < RF__K_PANEL_NR; t += 16) {
			const __mmask16 live = t >= nr ? 0
					     : (__mmask16)(nr - t >= 16 ? 0xFFFF : (1u << (nr - t)) - 1);
			const __m512i ih = _mm512_add_epi32(_mm512_loadu_si512(kht + t), ihv);
			const __m512i iw = _mm512_add_epi32(_mm512_loadu_si512(kwt + t), iwv);
			__mmask16 m = live;
			m &= _mm512_cmpge_epi32_mask(ih, _mm512_setzero_si512());
			m &= _mm512_cmplt_epi32_mask(ih, hv);
			m &= _mm512_cmpge_epi32_mask(iw, _mm512_setzero_si512());
			m &= _mm512_cmplt_epi32_mask(iw, wv);
			const __m512i idx = _mm512_add_epi32(_mm512_loadu_si512(offt + t), dv);
			_mm512_storeu_ps(dst + t, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx,
									   base, 4));
		}
		if (++jj == q->ow && (jj = 0, ++i == q->oh))
			i = 0, gi++;
	}
}
#endif

void rf__im2row_panel(float *dst, const float *x, const struct rf__conv_geo *q, int p0, int kc,
		      int j0, int nr)
{
	const size_t plane = (size_t)q->h * q->w, img = (size_t)q->c * plane;
	const int kk = q->kh * q->kw;

#if RF__X86_DISPATCH
	if ((size_t)q->c * plane < ((size_t)1 << 31) && rf__k_use_avx512()) {
		im2row_panel_avx512(dst, x, q, p0, kc, j0, nr);
		return;
	}
#endif
	int gi = p0 / (q->oh * q->ow), i = p0 % (q->oh * q->ow) / q->ow, jj = p0 % q->ow;
	for (int r = 0; r < kc; r++, dst += RF__K_PANEL_NR) {
		const int ih0 = i * q->s - q->p, iw0 = jj * q->s - q->p;
		for (int t = 0, c = j0 / kk, kh = j0 % kk / q->kw, kw = j0 % q->kw; t < nr; t++) {
			const int ih = ih0 + kh, iw = iw0 + kw;
			dst[t] = ih >= 0 && ih < q->h && iw >= 0 && iw < q->w
					 ? x[(size_t)gi * img + (size_t)c * plane + (size_t)ih * q->w + iw]
					 : 0.0f;
			if (++kw == q->kw && (kw = 0, ++kh == q->kh))
				kh = 0, c++;
		}
		if (++jj == q->ow && (jj = 0, ++i == q->oh))
			i = 0, gi++;
	}
}
