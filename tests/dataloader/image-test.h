/* image-test.h -- images made in memory for the image decode's tests: JPEGs with
 * TurboJPEG's compressor (libjpeg's for samplings it has no name for), PNGs with
 * libpng's writer, and pixel patterns (solid, smooth, noise); and the references the
 * decode is held to: a whole JPEG decode, PIL's resize written from its definition.
 * Each image returns a malloc'd buffer (the caller frees); a failure exits 1. */
#ifndef RF_IMAGE_TEST_H
#define RF_IMAGE_TEST_H

#include <math.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
/* after stdio.h: it needs FILE and size_t */
#include <jpeglib.h>

#include "../test-util.h"
#include "image-impl.h"

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

/* The JPEG b[0..n) decoded whole at 1/d, RGB (a CMYK one converted as PIL does with an
 * Adobe marker, which TurboJPEG writes: R = C * K / 255), its size in *w, *h: by
 * TurboJPEG with its default flags (tj 1: its own copy of libjpeg) or by libjpeg's API
 * with its defaults (tj 0: for samplings TurboJPEG has no name for). Both are the
 * accurate integer IDCT and fancy upsampling. */
static uint8_t *whole_decode(const uint8_t *b, size_t n, int d, int cmyk, int tj, int *w, int *h)
{
	uint8_t *p;

	if (tj) {
		tjhandle t = tjInitDecompress();
		tjscalingfactor f = { 1, d };
		int W, H, sub, cs;
		CHECK(t && tjDecompressHeader3(t, b, n, &W, &H, &sub, &cs) == 0);
		*w = TJSCALED(W, f);
		*h = TJSCALED(H, f);
		p = malloc((size_t)*w * *h * 4);
		CHECK(p && tjDecompress2(t, b, n, p, *w, 0, *h, cmyk ? TJPF_CMYK : TJPF_RGB, 0) == 0);
		tjDestroy(t);
	} else {
		struct jpeg_decompress_struct ci;
		struct jpeg_error_mgr em;
		ci.err = jpeg_std_error(&em); /* an error: a message and exit */
		jpeg_create_decompress(&ci);
		jpeg_mem_src(&ci, b, (unsigned long)n);
		jpeg_read_header(&ci, TRUE);
		ci.scale_num = 1;
		ci.scale_denom = (unsigned)d;
		ci.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
		jpeg_start_decompress(&ci);
		*w = (int)ci.output_width;
		*h = (int)ci.output_height;
		p = malloc((size_t)*w * *h * 4);
		CHECK(p);
		while (ci.output_scanline < ci.output_height) {
			JSAMPROW r = p + (size_t)ci.output_scanline * *w * (cmyk ? 4 : 3);
			jpeg_read_scanlines(&ci, &r, 1);
		}
		jpeg_finish_decompress(&ci);
		jpeg_destroy_decompress(&ci);
	}
	for (size_t i = 0; cmyk && i < (size_t)*w * *h; i++)
		for (int c = 0; c < 3; c++) {
			unsigned v = p[4 * i + c] * p[4 * i + 3] + 128;
			p[3 * i + c] = (uint8_t)(((v >> 8) + v) >> 8);
		}
	return p;
}

/* px (h rows of w RGB pixels) as a JPEG by libjpeg's API, the luma sampled hs x vs
 * (chroma 1 x 1), arithmetic-coded if arith: what TurboJPEG 2.1 does not write */
static uint8_t *make_jpeg_sampled(const uint8_t *px, int w, int h, int hs, int vs, int arith,
				  size_t *n)
{
	struct jpeg_compress_struct ci;
	struct jpeg_error_mgr em;
	unsigned char *buf = NULL;
	unsigned long len = 0;

	ci.err = jpeg_std_error(&em);
	jpeg_create_compress(&ci);
	jpeg_mem_dest(&ci, &buf, &len);
	ci.image_width = (unsigned)w;
	ci.image_height = (unsigned)h;
	ci.input_components = 3;
	ci.in_color_space = JCS_RGB;
	jpeg_set_defaults(&ci);
	jpeg_set_quality(&ci, 85, TRUE);
	ci.comp_info[0].h_samp_factor = hs;
	ci.comp_info[0].v_samp_factor = vs;
	ci.arith_code = arith;
	jpeg_start_compress(&ci, TRUE);
	while (ci.next_scanline < ci.image_height) {
		JSAMPROW r = (JSAMPROW)px + (size_t)ci.next_scanline * w * 3;
		jpeg_write_scanlines(&ci, &r, 1);
	}
	jpeg_finish_compress(&ci);
	jpeg_destroy_compress(&ci);
	uint8_t *out = malloc(len);
	CHECK(out);
	memcpy(out, buf, len);
	free(buf);
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

/* v big-endian at p (PNG's and JPEG's integers) */
static void be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* The JPEG j[0..n) with its first scan repeated k times more after it (a progressive
 * JPEG: libjpeg warns of an inconsistent progression, and counts the scans); its size
 * in *m */
static uint8_t *repeat_scan(const uint8_t *j, size_t n, int k, size_t *m)
{
	size_t s = 2, e;

	while (s + 3 < n && !(j[s] == 0xff && j[s + 1] == 0xda))
		s++;
	CHECK(s + 3 < n);
	/* the scan's data ends at a marker other than a stuffed byte or a restart */
	for (e = s + 2 + ((size_t)j[s + 2] << 8 | j[s + 3]); e + 1 < n; e++)
		if (j[e] == 0xff && j[e + 1] && (j[e + 1] & 0xf8) != 0xd0)
			break;
	uint8_t *b = malloc(n + (e - s) * k);
	CHECK(b);
	memcpy(b, j, e);
	for (int i = 0; i < k; i++)
		memcpy(b + e + (e - s) * i, j + s, e - s);
	memcpy(b + e + (e - s) * k, j + e, n - e);
	*m = n + (e - s) * k;
	return b;
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

/* ---- an independent reference: PIL's resize from its definition ---- */

static double ref_filter(int f, double x)
{
	if (f)
		return (x > -0.5 && x <= 0.5) ? 1 : 0;
	return fabs(x) < 1 ? 1 - fabs(x) : 0;
}

/* weights (out, W) of resampling [b0, b1) of an axis of W pixels, reading [lo, hi); tie[i]
 * set where the box filter's edge falls on a pixel's center (in or out is rounding) */
static double *ref_weights(double b0, double b1, int lo, int hi, int W, unsigned out, int f,
			   uint8_t *tie)
{
	double *k = calloc((size_t)out * W, sizeof(double));
	double scale = (b1 - b0) / out, fs = fmax(scale, 1);
	CHECK(k);
	for (unsigned i = 0; i < out; i++) {
		double c = b0 + (i + 0.5) * scale, s = 0;
		tie[i] = 0;
		for (int x = lo; x < hi; x++) {
			double t = (x + 0.5 - c) / fs;
			if (fabs(t) < (f ? 0.5 : 1.0) + 1e-9)
				s += k[i * W + x] = ref_filter(f, t);
			tie[i] |= f && fabs(fabs(t) - 0.5) < 1e-7;
		}
		for (int x = lo; x < hi; x++)
			k[i * W + x] /= s;
	}
	return k;
}

/* out (3, s, s) as doubles from src (W x H RGB): rows then columns, in double; -1 where
 * a tie makes the value a matter of rounding */
static void ref_resize(const uint8_t *src, int W, int H, const struct rf__crop *cr, unsigned s,
		       int f, double *out)
{
	int x0 = cr->whole ? 0 : cr->x, x1 = cr->whole ? W : cr->x + cr->w;
	int y0 = cr->whole ? 0 : cr->y, y1 = cr->whole ? H : cr->y + cr->h;
	uint8_t tx[4096], ty[4096];
	double *kx = ref_weights(cr->bx, cr->bx + cr->bw, x0, x1, W, s, f, tx);
	double *ky = ref_weights(cr->by, cr->by + cr->bh, y0, y1, H, s, f, ty);
	for (int c = 0; c < 3; c++)
		for (unsigned j = 0; j < s; j++)
			for (unsigned i = 0; i < s; i++) {
				double v = 0;
				for (int y = y0; y < y1; y++) {
					double wy = ky[j * H + y], r = 0;
					if (wy == 0)
						continue;
					for (int x = x0; x < x1; x++)
						r += kx[i * W + x] *
						     src[((size_t)y * W + x) * 3 + c];
					v += wy * r;
				}
				out[((size_t)c * s + j) * s + (cr->flip ? s - 1 - i : i)] =
					tx[i] || ty[j] ? -1 : v;
			}
	free(kx);
	free(ky);
}

#endif
