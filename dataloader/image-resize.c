/* image-resize.c -- the resampler of the image decode (image.c): a box of an RGB image
 * to out x out, separable, antialiased as PIL's resize (which torchvision calls on PIL
 * images, and antialias=True follows): bilinear is a triangle filter, area a box
 * filter, each widened by the downscale factor; output pixel i of an axis is centered
 * at b0 + (i + 0.5) * scale and reads the input pixels within the filter's support,
 * clipped to the window [wlo, whi), its weights normalized. A fractional box (after
 * the JPEG's DCT scaling) is resampled as PIL's resize(box=...) does, so scaling does
 * not shift the image. The horizontal pass runs once per input row the vertical pass
 * needs, into a ring of as many rows as one output row reads (small: it stays in
 * cache), each row already split into the R, G and B planes and mirrored if the sample
 * is flipped; the vertical pass sums the ring rows an output row reads and writes the
 * bytes of its planes in the same loop. Float accumulation in one order (the same
 * as one pass per tap would take), rounded to nearest and clamped to 0..255 once, at
 * the end. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "image-impl.h"

static double rf__filter(int f, double x)
{
	if (f == RF__RESIZE_AREA)
		return x > -0.5 && x <= 0.5 ? 1.0 : 0.0;
	x = fabs(x);
	return x < 1.0 ? 1.0 - x : 0.0;
}

int rf__rs_axis_make(struct rf__rs_axis *a, double b0, double b1, int wlo, int whi, unsigned out,
		     enum rf__img_resize f)
{
	double scale = (b1 - b0) / out, fs = scale < 1.0 ? 1.0 : scale;
	double support = (f == RF__RESIZE_AREA ? 0.5 : 1.0) * fs, ss = 1.0 / fs;
	unsigned ksize = (unsigned)ceil(support) * 2 + 2, outp = (out + 3) & ~3u;
	size_t need = (size_t)outp * (2 * sizeof(int) + (size_t)ksize * sizeof(float));

	if (a->valid && a->b0 == b0 && a->b1 == b1 && a->wlo == wlo && a->whi == whi &&
	    a->out == out && a->filter == (int)f)
		return 0;
	a->valid = 0;
	if (need > a->cap) {
		void *m = realloc(a->mem, need);
		if (!m)
			return -ENOMEM;
		a->mem = m;
		a->cap = need;
	}
	a->k = a->mem;
	a->lo = (int *)(a->k + (size_t)outp * ksize);
	a->cnt = a->lo + outp;
	a->out = out;
	a->ksize = ksize;
	a->kmax = 1;
	for (unsigned i = 0; i < out; i++) {
		double center = b0 + (i + 0.5) * scale, ww = 0.0;
		int x0 = (int)floor(center - support + 0.5),
		    x1 = (int)floor(center + support + 0.5);
		float *k = a->k + (size_t)i * ksize;

		x0 = x0 < wlo ? wlo : x0 > whi - 1 ? whi - 1 : x0;
		x1 = x1 > whi ? whi : x1 < x0 + 1 ? x0 + 1 : x1;
		if (x1 - x0 > (int)ksize)
			x1 = x0 + (int)ksize;
		for (int t = 0; t < x1 - x0; t++)
			ww += rf__filter(f, (x0 + t - center + 0.5) * ss);
		for (int t = 0; t < (int)ksize; t++)
			k[t] = t < x1 - x0 && ww > 0.0
				       ? (float)(rf__filter(f, (x0 + t - center + 0.5) * ss) / ww)
				       : 0.0f;
		if (ww <= 0.0) { /* nothing under the filter: the nearest pixel */
			int c = (int)floor(center);
			x0 = c < wlo ? wlo : c >= whi ? whi - 1 : c;
			x1 = x0 + 1;
			k[0] = 1.0f;
		}
		a->lo[i] = x0;
		a->cnt[i] = x1 - x0;
		a->kmax = x1 - x0 > a->kmax ? x1 - x0 : a->kmax;
		a->rlo = i == 0 || x0 < a->rlo ? x0 : a->rlo;
		a->rhi = i == 0 || x1 > a->rhi ? x1 : a->rhi;
	}
	/* up to a multiple of 4 outputs: weights 0 on the last one's pixels */
	for (unsigned i = out; i < outp; i++) {
		a->lo[i] = a->lo[out - 1];
		a->cnt[i] = 1;
		memset(a->k + (size_t)i * ksize, 0, ksize * sizeof(float));
	}
	a->b0 = b0;
	a->b1 = b1;
	a->wlo = wlo;
	a->whi = whi;
	a->filter = (int)f;
	a->valid = 1;
	return 0;
}

/* Four lanes (R, G, B and an unused one): SSE2 on any x86-64, NEON on arm64, plain code
 * elsewhere; the same operations in the same order wherever the binary runs. */
typedef float rf__v4 __attribute__((vector_size(16), may_alias));

/* Output pixel i of a row: the sum of kn taps from q (a pixel a vector), in tap order.
 * Every output sums kmax taps, those past its own count weighted 0 (adding +0 leaves a
 * sum of non-negative terms as it is): no branch on the count, which varies. */
static inline rf__v4 rf__rs_taps(const rf__v4 *q, const float *k, int kn)
{
	rf__v4 acc = q[0] * k[0];

	for (int t = 1; t < kn; t++)
		acc += q[t] * k[t];
	return acc;
}

/* Outputs 4g .. 4g + 3 of a row into the three planes' rows (p, p + xp, p + 2 xp), at
 * 4g or, flipped, at xp - 4 - 4g in reverse. */
static inline void rf__rs_put4(float *restrict p, size_t xp, size_t g, int flip, rf__v4 a0,
			       rf__v4 a1, rf__v4 a2, rf__v4 a3)
{
#ifdef __SSE2__
	__m128 r0 = (__m128)a0, r1 = (__m128)a1, r2 = (__m128)a2, r3 = (__m128)a3;
	_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
	if (flip) {
		r0 = _mm_shuffle_ps(r0, r0, 0x1b);
		r1 = _mm_shuffle_ps(r1, r1, 0x1b);
		r2 = _mm_shuffle_ps(r2, r2, 0x1b);
	}
	size_t at = flip ? xp - 4 - 4 * g : 4 * g;
	_mm_store_ps(p + at, r0);
	_mm_store_ps(p + xp + at, r1);
	_mm_store_ps(p + 2 * xp + at, r2);
#else
	rf__v4 a[4] = { a0, a1, a2, a3 };
	for (int c = 0; c < 3; c++)
		for (int i = 0; i < 4; i++)
			p[c * xp + (flip ? xp - 1 - 4 * g - i : 4 * g + i)] = a[i][c];
#endif
}

/* The row s (RGB, its first pixel at ox) resampled by a into dst: three planes' rows
 * of xp = a's outputs rounded up to 4 floats (mirrored if flip: the outputs at the
 * end). px (rhi - rlo + kmax, 4) is scratch: the pixels the outputs read as floats, a
 * vector a pixel, then zeros. KN: kmax when the caller knows it (unrolled), else 0. */
static inline void rf__rs_row_kn(float *restrict dst, float *restrict px,
				 const uint8_t *restrict s, unsigned ox,
				 const struct rf__rs_axis *a, int flip, const int KN)
{
	int x0 = a->rlo, n = a->rhi - a->rlo, x = 0, kn = KN ? KN : a->kmax;
	size_t xp = (a->out + 3) & ~3u;
	const uint8_t *p = s + 3 * (size_t)(x0 - (int)ox);
	rf__v4 *v = (rf__v4 *)(void *)px;

#ifdef __SSE2__
	for (; x < n - 1; x++, p += 3) { /* 4 bytes: this pixel and the next one's R */
		const __m128i z = _mm_setzero_si128();
		int32_t b;
		memcpy(&b, p, sizeof(b));
		__m128i i = _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(b), z), z);
		v[x] = (rf__v4)_mm_cvtepi32_ps(i);
	}
#endif
	for (; x < n; x++, p += 3)
		v[x] = (rf__v4){ p[0], p[1], p[2], 0.0f };
	for (; x < n + kn; x++)
		v[x] = (rf__v4){ 0.0f, 0.0f, 0.0f, 0.0f };
	for (size_t g = 0, ks = a->ksize; g < xp / 4; g++) {
		const int *lo = a->lo + 4 * g;
		const float *k = a->k + 4 * g * ks;
		rf__v4 a0 = rf__rs_taps(v + (lo[0] - x0), k, kn);
		rf__v4 a1 = rf__rs_taps(v + (lo[1] - x0), k + ks, kn);
		rf__v4 a2 = rf__rs_taps(v + (lo[2] - x0), k + 2 * ks, kn);
		rf__v4 a3 = rf__rs_taps(v + (lo[3] - x0), k + 3 * ks, kn);
		rf__rs_put4(dst, xp, g, flip, a0, a1, a2, a3);
	}
}

static void rf__rs_row(float *restrict dst, float *restrict px, const uint8_t *restrict s,
		       unsigned ox, const struct rf__rs_axis *a, int flip)
{
	switch (a->kmax) { /* the common counts with the tap loop unrolled */
	case 1:
		rf__rs_row_kn(dst, px, s, ox, a, flip, 1);
		break;
	case 2:
		rf__rs_row_kn(dst, px, s, ox, a, flip, 2);
		break;
	case 3:
		rf__rs_row_kn(dst, px, s, ox, a, flip, 3);
		break;
	case 4:
		rf__rs_row_kn(dst, px, s, ox, a, flip, 4);
		break;
	default:
		rf__rs_row_kn(dst, px, s, ox, a, flip, 0);
	}
}

/* o[0 .. X) = the rows' sum weighted by k, in row order (the order of a pass per row),
 * rounded to nearest and clamped to 0 .. 255 (float v + 0.5, clamped, truncated). */
static void rf__rs_col(uint8_t *restrict o, const float *const *rows, const float *k, int cnt,
		       size_t X)
{
	size_t q = 0;

#ifdef __SSE2__
	const __m128 half = _mm_set1_ps(0.5f), zero = _mm_setzero_ps(), top = _mm_set1_ps(255.0f);
#define RF__RS_U8(v) _mm_cvttps_epi32(_mm_min_ps(_mm_max_ps(_mm_add_ps(v, half), zero), top))
	for (; q + 16 <= X; q += 16) {
		__m128 w = _mm_set1_ps(k[0]);
		const float *p = rows[0] + q;
		__m128 v0 = _mm_mul_ps(w, _mm_loadu_ps(p)), v1 = _mm_mul_ps(w, _mm_loadu_ps(p + 4));
		__m128 v2 = _mm_mul_ps(w, _mm_loadu_ps(p + 8)), v3 = _mm_mul_ps(w, _mm_loadu_ps(p + 12));
		for (int t = 1; t < cnt; t++) {
			w = _mm_set1_ps(k[t]);
			p = rows[t] + q;
			v0 = _mm_add_ps(v0, _mm_mul_ps(w, _mm_loadu_ps(p)));
			v1 = _mm_add_ps(v1, _mm_mul_ps(w, _mm_loadu_ps(p + 4)));
			v2 = _mm_add_ps(v2, _mm_mul_ps(w, _mm_loadu_ps(p + 8)));
			v3 = _mm_add_ps(v3, _mm_mul_ps(w, _mm_loadu_ps(p + 12)));
		}
		__m128i lo = _mm_packs_epi32(RF__RS_U8(v0), RF__RS_U8(v1));
		__m128i hi = _mm_packs_epi32(RF__RS_U8(v2), RF__RS_U8(v3));
		_mm_storeu_si128((__m128i *)(void *)(o + q), _mm_packus_epi16(lo, hi));
	}
	for (; q + 4 <= X; q += 4) {
		__m128 v = _mm_mul_ps(_mm_set1_ps(k[0]), _mm_loadu_ps(rows[0] + q));
		for (int t = 1; t < cnt; t++)
			v = _mm_add_ps(v, _mm_mul_ps(_mm_set1_ps(k[t]), _mm_loadu_ps(rows[t] + q)));
		__m128i i = RF__RS_U8(v);
		i = _mm_packus_epi16(_mm_packs_epi32(i, i), i);
		int32_t b = _mm_cvtsi128_si32(i);
		memcpy(o + q, &b, sizeof(b));
	}
#undef RF__RS_U8
#endif
	for (; q < X; q++) {
		float v = k[0] * rows[0][q];
		for (int t = 1; t < cnt; t++)
			v += k[t] * rows[t][q];
		v += 0.5f;
		v = v > 0.0f ? v : 0.0f;
		v = v < 255.0f ? v : 255.0f;
		o[q] = (uint8_t)(int)v;
	}
}

int rf__rs_run(struct rf__rs *r, const uint8_t *src, size_t stride, unsigned ox, unsigned oy,
	       int flip, uint8_t *out)
{
	const struct rf__rs_axis *ax = &r->x, *ay = &r->y;
	size_t X = ax->out, xp = (X + 3) & ~(size_t)3, plane = X * ay->out;
	size_t rstride = 3 * xp, base = flip ? xp - X : 0; /* where a plane's outputs start */
	unsigned R = ay->ksize;
	long next = -1; /* the next input row the ring lacks */
	const float **rows;

	if (rf__img_grow((void **)&r->ring, &r->ring_cap, rstride * R, sizeof(float)) < 0 ||
	    rf__img_grow((void **)&r->rows, &r->rows_cap, 3 * (size_t)R, sizeof(*rows)) < 0 ||
	    rf__img_grow((void **)&r->px, &r->px_cap,
			 (size_t)(ax->rhi - ax->rlo + ax->kmax) * 4, sizeof(float)) < 0)
		return -ENOMEM;
	rows = r->rows;
	for (unsigned j = 0; j < ay->out; j++) {
		long lo = ay->lo[j], hi = lo + ay->cnt[j];

		if (next < lo || lo < next - (long)R)
			next = lo; /* rows skipped, or no longer in the ring */
		for (; next < hi; next++)
			rf__rs_row(r->ring + (size_t)(next % R) * rstride, r->px,
				   src + (size_t)(next - oy) * stride, ox, ax, flip);
		for (long y = lo; y < hi; y++)
			for (int c = 0; c < 3; c++)
				rows[c * R + (y - lo)] =
					r->ring + (size_t)(y % R) * rstride + c * xp + base;
		for (int c = 0; c < 3; c++)
			rf__rs_col(out + c * plane + (size_t)j * X, rows + c * R,
				   ay->k + (size_t)j * ay->ksize, ay->cnt[j], X);
	}
	return 0;
}

void rf__rs_free(struct rf__rs *r)
{
	free(r->x.mem);
	free(r->y.mem);
	free(r->ring);
	free(r->rows);
	free(r->px);
	memset(r, 0, sizeof(*r));
}
