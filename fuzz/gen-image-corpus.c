/* fuzz/gen-image-corpus.c -- writes the seeds of fuzz/corpus/image/ (small JPEGs of
 * every subsampling, progressive, grayscale and CMYK; PNGs of every colour type, an
 * interlaced 16-bit one), each behind fuzz-image's selector byte:
 *
 *   build/fuzz/fuzz-gen-image-corpus fuzz/corpus/image
 *
 * Not part of any test run; kept so that the corpus can be made again. */
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

static const char *dir;

static void put(const char *name, unsigned char sel, const unsigned char *b, size_t n)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "wb");
	fputc(sel, f);
	fwrite(b, 1, n, f);
	fclose(f);
	printf("%s: %zu bytes\n", name, n + 1);
}

static void jpeg(const char *name, unsigned char sel, const unsigned char *px, int w, int h,
		 int pf, int sub, int q, int flags)
{
	tjhandle t = tjInitCompress();
	unsigned char *b = NULL;
	unsigned long n = 0;
	if (tjCompress2(t, px, w, 0, h, pf, &b, &n, sub, q, flags) < 0)
		exit(1);
	put(name, sel, b, n);
	tjFree(b);
	tjDestroy(t);
}

struct mb { unsigned char *p; size_t n; };
static void wr(png_structp png, png_bytep d, size_t len)
{
	struct mb *m = png_get_io_ptr(png);
	m->p = realloc(m->p, m->n + len);
	memcpy(m->p + m->n, d, len);
	m->n += len;
}
static void fl(png_structp png) { (void)png; }

static void pngw(const char *name, unsigned char sel, const unsigned char *rows, int w, int h,
		 int ct, int depth, int il, int npal, const unsigned char *trns, int ntrns)
{
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png_create_info_struct(png);
	struct mb m = { 0 };
	if (setjmp(png_jmpbuf(png)))
		exit(1);
	png_set_write_fn(png, &m, wr, fl);
	png_set_IHDR(png, info, w, h, depth, ct, il, 0, 0);
	if (npal) {
		png_color c[16];
		for (int i = 0; i < npal; i++)
			c[i] = (png_color){ (png_byte)(i * 17), (png_byte)(255 - i * 13), (png_byte)(i * 5) };
		png_set_PLTE(png, info, c, npal);
	}
	if (trns)
		png_set_tRNS(png, info, trns, ntrns, NULL);
	png_write_info(png, info);
	size_t rb = png_get_rowbytes(png, info);
	png_bytep rp[64];
	for (int y = 0; y < h; y++)
		rp[y] = (png_bytep)rows + y * rb;
	png_write_image(png, rp);
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	put(name, sel, m.p, m.n);
	free(m.p);
}

int main(int argc, char **argv)
{
	enum { W = 40, H = 30 };
	static unsigned char rgb[W * H * 3], g[W * H], cmyk[W * H * 4], rows[W * H * 8];
	dir = argc > 1 ? argv[1] : ".";
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++) {
			unsigned char *q = rgb + (y * W + x) * 3;
			q[0] = (unsigned char)(127 + 120 * sin(x * 0.3));
			q[1] = (unsigned char)(y * 8);
			q[2] = (unsigned char)((x ^ y) * 6);
			g[y * W + x] = q[0];
			memcpy(cmyk + (y * W + x) * 4, (unsigned char[]){ q[0], q[1], q[2], (unsigned char)(x * 6) }, 4);
		}
	jpeg("jpeg-baseline-420", 0x00, rgb, W, H, TJPF_RGB, TJSAMP_420, 75, 0);
	jpeg("jpeg-baseline-444-flip", 0x0c, rgb, W, H, TJPF_RGB, TJSAMP_444, 90, 0);
	static unsigned char big[160 * 140 * 3];
	for (int i = 0; i < 160 * 140; i++)
		memcpy(big + 3 * i, (unsigned char[]){ (unsigned char)(i % 160), (unsigned char)(i / 160),
		       (unsigned char)(128 + 100 * sin(i * 0.001)) }, 3);
	jpeg("jpeg-dct-scaled", 0x08, big, 160, 140, TJPF_RGB, TJSAMP_420, 40, 0);
	jpeg("jpeg-progressive", 0x05, rgb, W, H, TJPF_RGB, TJSAMP_422, 80, TJFLAG_PROGRESSIVE);
	jpeg("jpeg-gray", 0x02, g, W, H, TJPF_GRAY, TJSAMP_GRAY, 85, 0);
	jpeg("jpeg-cmyk", 0x10, cmyk, 16, 16, TJPF_CMYK, TJSAMP_420, 80, 0);
	pngw("png-rgb", 0x00, rgb, W, H, PNG_COLOR_TYPE_RGB, 8, 0, 0, NULL, 0);
	pngw("png-gray", 0x06, g, W, H, PNG_COLOR_TYPE_GRAY, 8, 0, 0, NULL, 0);
	for (int i = 0; i < W * H; i++)
		rows[i] = (unsigned char)(i % 11);
	static const unsigned char tr[3] = { 0, 128, 255 };
	pngw("png-palette-trns", 0x01, rows, W, H, PNG_COLOR_TYPE_PALETTE, 8, 0, 11, tr, 3);
	for (int i = 0; i < W * H * 8; i++)
		rows[i] = (unsigned char)(i * 13 + (i >> 7));
	pngw("png-rgba16-interlaced", 0x0b, rows, 24, 20, PNG_COLOR_TYPE_RGBA, 16, 1, 0, NULL, 0);
	pngw("png-gray-alpha", 0x03, rows, W, H, PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0, 0, NULL, 0);
	pngw("png-gray-1bit", 0x00, rows, W, H, PNG_COLOR_TYPE_GRAY, 1, 0, 0, NULL, 0);
	return 0;
}
