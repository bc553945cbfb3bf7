/* image-resize.c -- the resampler of the image decode (image.c): a box of an RGB image
 * to out x out, separable, antialiased as PIL's resize (which torchvision calls on PIL
 * images, and antialias=True follows): bilinear is a triangle filter, area a box
 * filter, each widened by the downscale factor; output pixel i of an axis is centered
 * at b0 + (i + 0.5) * scale and reads the input pixels within the filter's support,
 * clipped to the window [wlo, whi), its weights normalized. A fractional box (after
 * the JPEG's DCT scaling) is resampled as PIL's resize(box=...) does, so scaling does
 * not shift the image. The horizontal pass runs once per input row the vertical pass
 * needs, into a ring of as many rows as one output row reads (small: it stays in
 * cache); the vertical pass sums whole rows of that ring. Float accumulation, rounded
 * to nearest and clamped to 0..255 once, at the end. */
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
	unsigned ksize = (unsigned)ceil(support) * 2 + 2;
	size_t need = (size_t)out * (2 * sizeof(int) + (size_t)ksize * sizeof(float));

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
	a->lo = (int *)(a->k + (size_t)out * ksize);
	a->cnt = a->lo + out;
	a->out = out;
	a->ksize = ksize;
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
		a->rlo = i == 0 || x0 < a->rlo ? x0 : a->rlo;
		a->rhi = i == 0 || x1 > a->rhi ? x1 : a->rhi;
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

/* dst (a->out, 3) = the row s (RGB) resampled by a; px (whi - wlo, 4) is scratch: the
 * pixels the outputs read (rlo .. rhi) as floats, a vector a pixel. dst has room for one
 * float past its end. */
static void rf__rs_row(float *restrict dst, float *restrict px, const uint8_t *restrict s,
		       const struct rf__rs_axis *a)
{
	int x0 = a->rlo, n = a->rhi - a->rlo, x = 0;
	const uint8_t *p = s + 3 * (size_t)x0;
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
	for (unsigned i = 0; i < a->out; i++) {
		const rf__v4 *q = v + (a->lo[i] - x0);
		const float *k = a->k + (size_t)i * a->ksize;
		rf__v4 acc = q[0] * k[0];

		for (int t = 1; t < a->cnt[i]; t++)
			acc += q[t] * k[t];
		memcpy(dst + 3 * i, &acc, sizeof(acc)); /* its fourth lane: the next pixel's */
	}
}

int rf__rs_run(struct rf__rs *r, const uint8_t *src, size_t stride, int flip, uint8_t *out)
{
	const struct rf__rs_axis *ax = &r->x, *ay = &r->y;
	size_t rowf = (size_t)ax->out * 3, plane = (size_t)ax->out * ay->out;
	size_t rstride = rowf + 4; /* a ring row, with room for rf__rs_row's last store */
	unsigned R = ay->ksize;
	long next = -1; /* the next input row the ring lacks */

	if (rf__img_grow((void **)&r->ring, &r->ring_cap, rstride * R, sizeof(float)) < 0 ||
	    rf__img_grow((void **)&r->acc, &r->acc_cap, rowf * 2, sizeof(float)) < 0 ||
	    rf__img_grow((void **)&r->px, &r->px_cap, (size_t)(ax->whi - ax->wlo) * 4,
			 sizeof(float)) < 0)
		return -ENOMEM;
	for (unsigned j = 0; j < ay->out; j++) {
		long lo = ay->lo[j], hi = lo + ay->cnt[j];
		const float *k = ay->k + (size_t)j * ay->ksize;
		float *restrict acc = r->acc;

		if (next < lo || lo < next - (long)R)
			next = lo; /* rows skipped, or no longer in the ring */
		for (; next < hi; next++)
			rf__rs_row(r->ring + (size_t)(next % R) * rstride, r->px,
				   src + (size_t)next * stride, ax);
		for (long y = lo; y < hi; y++) {
			const float *restrict row = r->ring + (size_t)(y % R) * rstride;
			float w = k[y - lo];

			if (y == lo)
				for (size_t q = 0; q < rowf; q++)
					acc[q] = w * row[q];
			else
				for (size_t q = 0; q < rowf; q++)
					acc[q] += w * row[q];
		}
		/* rounded to nearest and clamped (no branch: vectorized), then the planes */
		uint8_t *restrict b = (uint8_t *)(acc + rowf);
		for (size_t q = 0; q < rowf; q++) {
			float v = acc[q] + 0.5f;
			v = v > 0.0f ? v : 0.0f;
			v = v < 255.0f ? v : 255.0f;
			b[q] = (uint8_t)(int)v;
		}
		uint8_t *o0 = out + (size_t)j * ax->out, *o1 = o0 + plane, *o2 = o1 + plane;
		if (flip) {
			for (unsigned i = 0, m = ax->out - 1; i < ax->out; i++) {
				o0[m - i] = b[3 * i];
				o1[m - i] = b[3 * i + 1];
				o2[m - i] = b[3 * i + 2];
			}
		} else {
			for (unsigned i = 0; i < ax->out; i++) {
				o0[i] = b[3 * i];
				o1[i] = b[3 * i + 1];
				o2[i] = b[3 * i + 2];
			}
		}
	}
	return 0;
}

void rf__rs_free(struct rf__rs *r)
{
	free(r->x.mem);
	free(r->y.mem);
	free(r->ring);
	free(r->acc);
	free(r->px);
	memset(r, 0, sizeof(*r));
}
