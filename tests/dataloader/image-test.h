/* image-test.h -- images made in memory for the image decode's tests: JPEGs with
 * TurboJPEG's compressor, PNGs with libpng's writer, and pixel patterns (solid, smooth,
 * noise). Each returns a malloc'd buffer (the caller frees); a failure exits 1. */
#ifndef RF_IMAGE_TEST_H
#define RF_IMAGE_TEST_H

#include <math.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "../test-util.h"

/* px (h rows of w pixels of TurboJPEG's format pf) as a JPEG: subsampling sub, quality
 * q, TurboJPEG flags; its size in *n */
static uint8_t *make_jpeg(const uint8_t *px, int w, int h, int pf, int sub, int q, int flags,
			  size_t *n)
{
	tjhandle t = tjInitCompress();
	unsigned char *buf = NULL;
	unsigned long len = 0;

	CHECK(t);
	if (tjCompress2(t, px, w, 0, h, pf, &buf, &len, sub, q, flags) < 0) {
		fprintf(stderr, "tjCompress2: %s\n", tjGetErrorStr2(t));
		exit(1);
	}
	tjDestroy(t);
	uint8_t *out = malloc(len);
	CHECK(out);
	memcpy(out, buf, len);
	tjFree(buf);
	*n = len;
	return out;
}

struct membuf {
	uint8_t *p;
	size_t n, cap;
};

static void png_wr(png_structp png, png_bytep d, size_t len)
{
	struct membuf *m = png_get_io_ptr(png);
	if (m->n + len > m->cap) {
		m->cap = (m->n + len) * 2;
		m->p = realloc(m->p, m->cap);
		CHECK(m->p);
	}
	memcpy(m->p + m->n, d, len);
	m->n += len;
}

static void png_fl(png_structp png) { (void)png; }

/* A PNG of w x h, color type ct, depth bits, rows of the given bytes. pal: 3 * npal
 * entries, trns: ntrns alpha values (palette images). */
static uint8_t *make_png(const uint8_t *rows, unsigned w, unsigned h, int ct, int depth,
			 int interlace, const uint8_t *pal, int npal, const uint8_t *trns,
			 int ntrns, size_t *n)
{
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png_create_info_struct(png);
	struct membuf m = { 0 };
	size_t rb;

	CHECK(png && info);
	CHECK(!setjmp(png_jmpbuf(png)));
	png_set_write_fn(png, &m, png_wr, png_fl);
	png_set_IHDR(png, info, w, h, depth, ct,
		     interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	if (pal) {
		png_color c[256];
		for (int i = 0; i < npal; i++)
			c[i] = (png_color){ pal[3 * i], pal[3 * i + 1], pal[3 * i + 2] };
		png_set_PLTE(png, info, c, npal);
	}
	if (trns)
		png_set_tRNS(png, info, trns, ntrns, NULL);
	png_write_info(png, info);
	rb = png_get_rowbytes(png, info);
	png_bytep *rp = malloc(h * sizeof(*rp));
	CHECK(rp);
	for (unsigned y = 0; y < h; y++)
		rp[y] = (png_bytep)rows + (size_t)y * rb;
	png_write_image(png, rp);
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	free(rp);
	*n = m.n;
	return m.p;
}

/* px (h rows of w RGB pixels) as a PNG */
static uint8_t *rgb_png(const uint8_t *px, unsigned w, unsigned h, size_t *n)
{
	return make_png(px, w, h, PNG_COLOR_TYPE_RGB, 8, 0, NULL, 0, NULL, 0, n);
}

/* w x h pixels of ch bytes, each c */
static uint8_t *solid(unsigned w, unsigned h, int ch, const uint8_t *c)
{
	uint8_t *p = malloc((size_t)w * h * ch);
	CHECK(p);
	for (size_t i = 0; i < (size_t)w * h; i++)
		memcpy(p + i * ch, c, ch);
	return p;
}

/* a smooth pattern with some detail: what photographs mostly are */
static uint8_t *smooth(unsigned w, unsigned h)
{
	uint8_t *p = malloc((size_t)w * h * 3);
	CHECK(p);
	for (unsigned y = 0; y < h; y++)
		for (unsigned x = 0; x < w; x++) {
			double u = (double)x / w, v = (double)y / h;
			uint8_t *q = p + ((size_t)y * w + x) * 3;
			q[0] = (uint8_t)(127.5 + 120 * sin(6.0 * u + 2.0 * v));
			q[1] = (uint8_t)(127.5 + 120 * cos(4.0 * v - 3.0 * u));
			q[2] = (uint8_t)(255 * u * v);
		}
	return p;
}

/* w x h RGB of splitmix64 bytes */
static uint8_t *noise(unsigned w, unsigned h, unsigned long long seed)
{
	uint8_t *p = malloc((size_t)w * h * 3);
	CHECK(p);
	for (size_t i = 0; i < (size_t)w * h * 3; i++)
		p[i] = (uint8_t)(t_splitmix64(&seed) >> 56);
	return p;
}

#endif
