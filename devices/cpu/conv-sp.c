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

/* One output row i of tap (kh, kw) of channel plane xc: dst[j] for j in [0, ow). */
static void tap_row(float *restrict dst, const float *restrict xc, const struct rf__conv_geo *q,
		    int i, int kh, int kw)
{
	int ih = i * q->s - q->p + kh, lo, hi, j;

	if (ih < 0 || ih >= q->h) {
		memset(dst, 0, (size_t)q->ow * sizeof(float));
		return;
	}
	valid_cols(q, kw, &lo, &hi);
	const float *restrict xr = xc + (size_t)ih * q->w;
	const int off = kw - q->p;              /* input column of output column j: j*s + off */
	for (j = 0; j < lo; j++)
		dst[j] = 0.0f;
	if (q->s == 1 && hi > lo)
		memcpy(dst + lo, xr + lo + off, (size_t)(hi - lo) * sizeof(float));
	else
		for (j = lo; j < hi; j++)
			dst[j] = xr[j * q->s + off];
	for (j = hi; j < q->ow; j++)
		dst[j] = 0.0f;
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
						tap_row(cp + (size_t)i * q.ow, xc, &q, i, kh, kw);
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
