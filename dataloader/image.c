/* image.c -- one encoded image (JPEG or PNG) into one augmented training sample of
 * 3 x size x size u8 RGB planes: the per-record work of an image loader, done on its
 * worker threads, one struct rf__imgctx each (no globals: contexts are independent).
 *
 * The pipeline: the header (size checked against the limits before anything is
 * allocated) -> the crop rectangle in full-resolution source pixels (rf__img_crop_of:
 * torchvision's RandomResizedCrop and flip for training; for eval the shorter side
 * resized to round(size * resize_ratio) and the center size x size, mapped back onto
 * the source) -> for a JPEG, the DCT scale: the largest d in {8, 4, 2} with the crop
 * still at least size x size after scaling by 1/d (so the final resize only shrinks;
 * never used with no_dct_scale) -> the crop mapped into the scaled image (coordinates
 * divided by d: real-valued, the resampler takes a fractional box) and the resampling
 * tables, which say what rows and columns the resize reads -> the decode at that
 * scale of those rows and columns only (libjpeg's row skipping and column cropping:
 * RandomResizedCrop keeps 43% of an image on average), to RGB (CMYK converted after)
 * -> the resize to size x size (image-resize.c: PIL's antialiased bilinear or box
 * filter), the flip, and the CHW planes, in one pass. A PNG (image-png.c) is read
 * whole at full size.
 *
 * The determinism rule: a record's augmentation is a function of (seed, epoch, index)
 * and the image's size only. Every random number comes from one splitmix64 stream
 * seeded from those three (no global state, no time, nothing of the thread), so the
 * same record gets the same crop and flip whichever worker decodes it, in whatever
 * order, after a prefetch or a resume. The output is a function of that draw and the
 * bytes, except that DCT scaling (on unless no_dct_scale) makes it differ a little from
 * a full-size decode of the same crop. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* after stdio.h: it needs FILE and size_t */
#include <jpeglib.h>

#include "image-impl.h"
#include "rf-internal.h"

enum rf__img_fmt rf__img_sniff(const uint8_t *b, size_t n)
{
	static const uint8_t png_sig[8] = { 0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a };

	if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
		return RF__IMG_JPEG;
	if (n >= 8 && !memcmp(b, png_sig, 8))
		return RF__IMG_PNG;
	return RF__IMG_UNKNOWN;
}

/* (what the buffer held is not kept: every use fills it anew) */
int rf__img_grow(void **p, size_t *cap, size_t need, size_t esz)
{
	if (need <= *cap)
		return 0;
	free(*p);
	*cap = 0;
	*p = need <= SIZE_MAX / esz ? malloc(need * esz) : NULL;
	if (!*p)
		return -ENOMEM;
	*cap = need;
	return 0;
}

/* ---- options and the crop ---- */

struct rf__img_par {
	double smin, smax, rmin, rmax, rr;
};

static void rf__img_params(const struct rf__img_opts *o, struct rf__img_par *p)
{
	int sdef = o->scale_min == 0 && o->scale_max == 0;
	int rdef = o->ratio_min == 0 && o->ratio_max == 0;

	p->smin = sdef ? 0.08 : o->scale_min;
	p->smax = sdef ? 1.0 : o->scale_max;
	p->rmin = rdef ? 3.0 / 4.0 : o->ratio_min;
	p->rmax = rdef ? 4.0 / 3.0 : o->ratio_max;
	p->rr = o->resize_ratio == 0 ? 256.0 / 224.0 : o->resize_ratio;
}

int rf__img_opts_check(const struct rf__img_opts *o, char *err, size_t len)
{
	struct rf__img_par p;

	rf__img_params(o, &p);
	if (o->size < 1 || o->size > RF__IMG_MAX_SIZE)
		return rf__fail_into(err, len, -EINVAL, "image size %u: expected 1..%u", o->size,
				     RF__IMG_MAX_SIZE);
	if (!(p.smin > 0 && p.smin <= p.smax && p.smax <= 1))
		return rf__fail_into(
			err, len, -EINVAL,
			"image scale %g..%g: expected 0 < min <= max <= 1 (or 0, 0 for 0.08..1)",
			p.smin, p.smax);
	if (!(p.rmin > 0 && p.rmin <= p.rmax && p.rmax < 1e6))
		return rf__fail_into(
			err, len, -EINVAL,
			"image ratio %g..%g: expected 0 < min <= max (or 0, 0 for 3/4..4/3)",
			p.rmin, p.rmax);
	if (!(p.rr >= 1 && p.rr <= RF__IMG_MAX_RATIO))
		return rf__fail_into(err, len, -EINVAL,
				     "image resize_ratio %g: expected 1..%d (or 0 for 256/224)",
				     p.rr, RF__IMG_MAX_RATIO);
	if (o->resize != RF__RESIZE_BILINEAR && o->resize != RF__RESIZE_AREA)
		return rf__fail_into(err, len, -EINVAL,
				     "image resize %d: expected bilinear (0) or area (1)",
				     (int)o->resize);
	return 0;
}

static uint64_t rf__mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* splitmix64: the next number of the stream */
static uint64_t rf__next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rf__uniform(uint64_t *s, double a, double b)
{
	return a + (b - a) * ((double)(rf__next(s) >> 11) * 0x1p-53);
}

/* an integer in [0, n) */
static unsigned rf__below(uint64_t *s, unsigned n)
{
	return (unsigned)(((unsigned __int128)rf__next(s) * n) >> 64);
}

void rf__img_crop_of(const struct rf__img_opts *o, uint64_t epoch, uint64_t index, unsigned W,
		     unsigned H, struct rf__crop *c)
{
	struct rf__img_par p;
	uint64_t s = rf__mix(rf__mix(rf__mix(o->seed ^ 0x696d616765727263ull) ^ epoch) ^ index);
	double area = (double)W * H;

	rf__img_params(o, &p);
	memset(c, 0, sizeof(*c));
	if (!o->train) {
		/* torchvision Resize(S) (the long side int(S * long / short)), CenterCrop */
		double S = nearbyint(o->size * p.rr);
		double nw = W <= H ? S : floor(S * W / H), nh = W <= H ? floor(S * H / W) : S;
		double top = nearbyint((nh - o->size) / 2.0),
		       left = nearbyint((nw - o->size) / 2.0);
		double sx = W / nw, sy = H / nh;

		c->bx = left * sx;
		c->by = top * sy;
		c->bw = o->size * sx;
		c->bh = o->size * sy;
		c->whole = 1;
		c->x = (int)floor(c->bx);
		c->y = (int)floor(c->by);
		c->w = (int)fmin(ceil(c->bx + c->bw), W) - c->x;
		c->h = (int)fmin(ceil(c->by + c->bh), H) - c->y;
		return;
	}
	/* the flip first: its draw is at a fixed place of the stream */
	c->flip = o->hflip ? (int)(rf__next(&s) >> 63) : 0;
	double lr0 = log(p.rmin), lr1 = log(p.rmax);
	for (int t = 0; t < 10; t++) {
		double target = area * rf__uniform(&s, p.smin, p.smax);
		double r = exp(rf__uniform(&s, lr0, lr1));
		double w = nearbyint(sqrt(target * r)), h = nearbyint(sqrt(target / r));

		if (w > 0 && w <= W && h > 0 && h <= H) {
			c->h = (int)h;
			c->w = (int)w;
			c->y = (int)rf__below(&s, H - c->h + 1);
			c->x = (int)rf__below(&s, W - c->w + 1);
			goto done;
		}
	}
	/* the fallback: the whole image, or its center at the nearest ratio allowed */
	double in_ratio = (double)W / H;
	c->w = (int)W;
	c->h = (int)H;
	if (in_ratio < p.rmin)
		c->h = (int)nearbyint(W / p.rmin);
	else if (in_ratio > p.rmax)
		c->w = (int)nearbyint(H * p.rmax);
	c->w = c->w < 1 ? 1 : c->w > (int)W ? (int)W : c->w;
	c->h = c->h < 1 ? 1 : c->h > (int)H ? (int)H : c->h;
	c->y = ((int)H - c->h) / 2;
	c->x = ((int)W - c->w) / 2;
done:
	c->bx = c->x;
	c->by = c->y;
	c->bw = c->w;
	c->bh = c->h;
}

/* ---- the context ---- */

/* libjpeg's decompressor, one per context, made again for each image (rf__jpeg_header:
 * libjpeg would carry an image's tables over to the next), and what its error manager
 * learns about the image at hand. */
struct rf__jpeg {
	struct jpeg_decompress_struct d; /* first: the callbacks' cinfo is this struct */
	struct jpeg_error_mgr em;
	struct jpeg_progress_mgr pm;
	jmp_buf jb;                      /* where an error returns to */
	unsigned nwarn;                  /* warnings in this image */
	char warn[JMSG_LENGTH_MAX];      /* the first warning's message */
	char msg[JMSG_LENGTH_MAX];       /* the error's */
};

static void rf__jpeg_error_exit(j_common_ptr ci)
{
	struct rf__jpeg *j = (struct rf__jpeg *)(void *)ci;

	ci->err->format_message(ci, j->msg);
	longjmp(j->jb, 1);
}

/* Warnings (level < 0) are counted and the first one's text kept; trace messages
 * dropped. Nothing reaches the terminal. */
static void rf__jpeg_emit(j_common_ptr ci, int level)
{
	struct rf__jpeg *j = (struct rf__jpeg *)(void *)ci;

	if (level >= 0)
		return;
	if (!j->nwarn++)
		ci->err->format_message(ci, j->warn);
}

static void rf__jpeg_output(j_common_ptr ci)
{
	(void)ci;
}

/* A bound on progressive scans (what TurboJPEG's TJFLAG_LIMITSCANS does): a JPEG of
 * thousands of tiny scans costs seconds of decoding and is no photograph. */
static void rf__jpeg_progress(j_common_ptr ci)
{
	struct rf__jpeg *j = (struct rf__jpeg *)(void *)ci;

	if (j->d.input_scan_number > 500) {
		snprintf(j->msg, sizeof(j->msg), "Progressive JPEG image has more than 500 scans");
		longjmp(j->jb, 1);
	}
}

/* 0, or -1 when out of memory */
static int rf__jpeg_init(struct rf__jpeg *j)
{
	j->d.err = jpeg_std_error(&j->em);
	j->em.error_exit = rf__jpeg_error_exit;
	j->em.emit_message = rf__jpeg_emit;
	j->em.output_message = rf__jpeg_output;
	if (setjmp(j->jb))
		return -1;
	jpeg_create_decompress(&j->d);
	j->pm.progress_monitor = rf__jpeg_progress;
	j->d.progress = &j->pm;
	return 0;
}

int rf__imgctx_create(struct rf__imgctx **out)
{
	struct rf__imgctx *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->jpeg = calloc(1, sizeof(*c->jpeg));
	if (!c->jpeg || rf__jpeg_init(c->jpeg) < 0) {
		free(c->jpeg);
		free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

void rf__imgctx_destroy(struct rf__imgctx *c)
{
	if (!c)
		return;
	if (c->jpeg) {
		jpeg_destroy_decompress(&c->jpeg->d);
		free(c->jpeg);
	}
	rf__rs_free(&c->rs);
	free(c->pix);
	free(c->rows);
	free(c);
}

/* A one-off large image's buffer is not kept for the rest of the epoch. */
#define RF__IMG_KEEP ((size_t)64 << 20)

static void rf__img_trim(struct rf__imgctx *c)
{
	if (c->pix_cap > RF__IMG_KEEP) {
		free(c->pix);
		c->pix = NULL;
		c->pix_cap = 0;
	}
	if (c->rows_cap > RF__IMG_MAX_SIDE / 4) {
		free(c->rows);
		c->rows = NULL;
		c->rows_cap = 0;
	}
}

/* ---- JPEG ---- */

/* The marker segments from SOI to the first SOS (what libjpeg reads before the
 * image data): whether an Adobe APP14 segment is among them, and where the data of
 * the first scan starts (0 if the walk found no SOS). */
static void rf__jpeg_markers(const uint8_t *b, size_t n, int *adobe, size_t *sos)
{
	size_t i = 2;

	*adobe = 0;
	*sos = 0;
	while (i + 4 <= n) {
		uint8_t m = b[i + 1];
		size_t seg;

		if (b[i] != 0xff) {
			/* bytes between segments: libjpeg skips to the next FF with a
			 * warning ("extraneous bytes before marker"), and so does this walk
			 * (it stopped, found no SOS, and called a whole file truncated) */
			const uint8_t *f = memchr(b + i, 0xff, n - i);
			if (!f)
				return;
			i = (size_t)(f - b);
			continue;
		}
		if (m == 0xff) { /* fill byte */
			i++;
			continue;
		}
		if (m == 0x00) { /* FF 00 between segments: no marker, skipped as libjpeg does */
			i += 2;
			continue;
		}
		if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7)) {
			i += 2;
			continue;
		}
		if (m == 0xd9)
			return;
		seg = (size_t)b[i + 2] << 8 | b[i + 3];
		if (seg < 2)
			return;
		if (m == 0xee && seg >= 7 && i + 9 <= n && !memcmp(b + i + 4, "Adobe", 5))
			*adobe = 1;
		if (m == 0xda) {
			*sos = i + 2 + seg;
			return;
		}
		i += 2 + seg;
	}
}

/* Whether the image data is followed by the end-of-image marker: FF D9 never occurs
 * inside entropy-coded data (an FF there is followed by 00 or a restart marker). */
static int rf__jpeg_has_eoi(const uint8_t *b, size_t n, size_t sos)
{
	for (size_t i = sos; sos && i + 1 < n; i++) {
		const uint8_t *f = memchr(b + i, 0xff, n - 1 - i);
		if (!f)
			return 0;
		i = (size_t)(f - b);
		if (b[i + 1] == 0xd9)
			return 1;
	}
	return 0;
}

/* Whether libjpeg's first warning is one of those (jerror.h's JWRN_*) that leave a
 * whole, if damaged, image -- "Premature end of JPEG file" is not among them. */
static int rf__jpeg_benign(const char *m)
{
	static const char *const ok[] = {
		"Corrupt JPEG data:", "Warning:", "Unknown Adobe color transform",
		"Inconsistent progression sequence", "Invalid SOS parameters for sequential JPEG"
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strncmp(m, ok[i], strlen(ok[i])))
			return 1;
	return 0;
}

/* Read the header of in[0..n) into c->jpeg (left there for rf__jpeg_decode; the
 * caller aborts it): its size into *w, *h, checked against the limits. */
static int rf__jpeg_header(struct rf__imgctx *c, const uint8_t *in, size_t n, unsigned *w,
			   unsigned *h, char *err, size_t len)
{
	struct rf__jpeg *j = c->jpeg;

	j->nwarn = 0;
	if (setjmp(j->jb)) {
		jpeg_abort_decompress(&j->d);
		return rf__fail_into(err, len, -EBADMSG, "JPEG: %s", j->msg);
	}
	/* a fresh decompressor for each image: libjpeg keeps the Huffman and quantization
	 * tables an image defined for the next one, so a file that uses a table it never
	 * defines decoded with the last image's -- its pixels, and whether it decoded at
	 * all, depended on what the worker had decoded before (the shuffle, the threads) */
	jpeg_destroy_decompress(&j->d);
	jpeg_create_decompress(&j->d);   /* keeps err and the error manager's hooks */
	j->d.progress = &j->pm;
	jpeg_mem_src(&j->d, in, (unsigned long)n);
	jpeg_read_header(&j->d, TRUE);
	if (j->nwarn && !rf__jpeg_benign(j->warn))
		return rf__fail_into(err, len, -EBADMSG, "JPEG: %s", j->warn);
	*w = j->d.image_width;
	*h = j->d.image_height;
	if (*w > RF__IMG_MAX_SIDE || *h > RF__IMG_MAX_SIDE ||
	    (uint64_t)*w * *h > RF__IMG_MAX_PIXELS)
		return rf__fail_into(
			err, len, -E2BIG,
			"JPEG: %u x %u pixels: larger than the limit (%u on a side, %llu pixels)",
			*w, *h, RF__IMG_MAX_SIDE, (unsigned long long)RF__IMG_MAX_PIXELS);
	return 0;
}

/* The largest d (libjpeg's 1/d) that keeps the crop at least size x size. */
static unsigned rf__dct_denom(const struct rf__img_opts *o, const struct rf__crop *cr)
{
	if (o->no_dct_scale)
		return 1;
	for (unsigned d = 8; d > 1; d /= 2)
		if (cr->bw >= (double)o->size * d && cr->bh >= (double)o->size * d)
			return d;
	return 1;
}

/* CMYK (4 bytes a pixel, as stored) to RGB (3) in place, as PIL: Adobe's inverted
 * values give R = C * K / 255, plain ones R = (255 - C) * (255 - K) / 255. */
static void rf__cmyk_rgb(uint8_t *p, size_t npix, int inverted)
{
	for (size_t i = 0; i < npix; i++) {
		unsigned k = p[4 * i + 3], q[3];

		for (int j = 0; j < 3; j++) {
			unsigned v = p[4 * i + j];
			unsigned t = inverted ? v * k + 128 : (255 - v) * (255 - k) + 128;
			q[j] = ((t >> 8) + t) >> 8; /* t / 255, rounded (PIL's MULDIV255) */
		}
		p[3 * i] = (uint8_t)q[0];
		p[3 * i + 1] = (uint8_t)q[1];
		p[3 * i + 2] = (uint8_t)q[2];
	}
}

/* Whether the region decode below gives exactly the pixels of a whole decode: not
 * where libjpeg-turbo 2.1's jpeg_crop_scanline miscounts the width of a component
 * that is both IDCT-scaled and upsampled (luma 4 x 2 or 2 x 4 at 1/2, say), nor
 * where block smoothing (a progressive JPEG lacking some AC scans) treats the region's
 * edge blocks as the image's. */
static int rf__jpeg_roi_exact(const struct jpeg_decompress_struct *d)
{
	/* the IDCT's output block, across and down: one size before the jpeg7 API
	 * (Debian's libjpeg62-turbo), two after (libjpeg-turbo built for jpeg8) */
#if JPEG_LIB_VERSION >= 70
	const int mh = d->min_DCT_h_scaled_size, mv = d->min_DCT_v_scaled_size;
#else
	const int mh = d->min_DCT_scaled_size, mv = d->min_DCT_scaled_size;
#endif
	for (int i = 0; i < d->num_components; i++) {
		const jpeg_component_info *k = &d->comp_info[i];
#if JPEG_LIB_VERSION >= 70
		const int kh = k->DCT_h_scaled_size, kv = k->DCT_v_scaled_size;
#else
		const int kh = k->DCT_scaled_size, kv = k->DCT_scaled_size;
#endif

		if ((kh != mh || kv != mv) && (k->h_samp_factor * kh != d->max_h_samp_factor * mh ||
					       k->v_samp_factor * kv != d->max_v_samp_factor * mv))
			return 0;
		for (int t = 0; d->progressive_mode && d->coef_bits && t < 10; t++)
			if (d->coef_bits[i][t] != 0)
				return 0;
	}
	return 1;
}

/* Decode, at 1/d, what the resampler's tables (c->rs) read of the JPEG whose header
 * rf__jpeg_header read: libjpeg skips the rows above, crops the columns (to an iMCU
 * boundary on the left: the window starts there) and is stopped after the last row.
 * A column of margin on each side stays out of what the tables read: fancy
 * upsampling treats the window's edges as the image's, and those columns may differ
 * from a whole decode's. The window goes into c->pix (RGB) and c->pix_x .. pix_h. */
static int rf__jpeg_decode(struct rf__imgctx *c, const uint8_t *in, size_t n, unsigned d,
			   char *err, size_t len)
{
	struct rf__jpeg *j = c->jpeg;
	struct jpeg_decompress_struct *ci = &j->d;
	int cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
	int adobe, ret = 0;
	size_t sos;

	if (setjmp(j->jb))
		return rf__fail_into(err, len, -EBADMSG, "JPEG: %s", j->msg);
	ci->scale_num = 1;
	ci->scale_denom = d;
	ci->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
	ci->dct_method = JDCT_ISLOW;
	jpeg_start_decompress(ci);

	unsigned sw = ci->output_width, sh = ci->output_height, bpp = cmyk ? 4 : 3;
	unsigned x0 = 0, x1 = sw, y0 = 0, y1 = sh;
	if (c->rs.x.rhi > (int)sw || c->rs.y.rhi > (int)sh) /* the tables' size is libjpeg's */
		return rf__fail_into(err, len, -EBADMSG, "JPEG: decoded at 1/%u to %u x %u pixels, "
				     "expected %d x %d", d, sw, sh, c->rs.x.rhi, c->rs.y.rhi);
	if (rf__jpeg_roi_exact(ci)) {
		x0 = c->rs.x.rlo > 1 ? (unsigned)c->rs.x.rlo - 1 : 0;
		x1 = (unsigned)c->rs.x.rhi + 1 < sw ? (unsigned)c->rs.x.rhi + 1 : sw;
		if (x1 - x0 < 16) { /* a component 2 samples wide is upsampled otherwise */
			x1 = x0 + 16 < sw ? x0 + 16 : sw;
			x0 = x1 > 16 ? x1 - 16 : 0;
		}
		y0 = (unsigned)c->rs.y.rlo;
		y1 = (unsigned)c->rs.y.rhi;
	}
	JDIMENSION xoff = x0, width = x1 - x0;
	jpeg_crop_scanline(ci, &xoff, &width);
	c->pix_x = xoff;
	c->pix_w = width;
	c->pix_y = y0;
	c->pix_h = y1 - y0;
	size_t stride = (size_t)width * bpp;
	if (rf__img_grow((void **)&c->pix, &c->pix_cap, stride * (y1 - y0), 1) < 0 ||
	    rf__img_grow((void **)&c->rows, &c->rows_cap, y1 - y0, sizeof(*c->rows)) < 0)
		return rf__fail_into(err, len, -ENOMEM, "JPEG: %u x %u pixels: out of memory",
				     width, y1 - y0);
	for (unsigned y = 0; y < y1 - y0; y++)
		c->rows[y] = c->pix + y * stride;
	if (y0)
		jpeg_skip_scanlines(ci, y0);
	while (ci->output_scanline < y1)
		jpeg_read_scanlines(ci, c->rows + (ci->output_scanline - y0),
				    y1 - ci->output_scanline);
	/* the rest is not decoded: a warning there goes unseen, a cut end does not (the
	 * end-of-image marker is looked for); a benign warning passes only with it */
	rf__jpeg_markers(in, n, &adobe, &sos);
	if (j->nwarn && !rf__jpeg_benign(j->warn))
		ret = rf__fail_into(err, len, -EBADMSG, "JPEG: %s", j->warn);
	else if (!rf__jpeg_has_eoi(in, n, sos))
		ret = j->nwarn ? rf__fail_into(err, len, -EBADMSG,
					       "JPEG: the data ends before the end-of-image "
					       "marker (after \"%s\")",
					       j->warn)
			       : rf__fail_into(err, len, -EBADMSG,
					       "JPEG: Premature end of JPEG file");
	else if (cmyk)
		rf__cmyk_rgb(c->pix, (size_t)width * (y1 - y0), adobe);
	return ret;
}

/* ---- the pipeline ---- */

static int rf__img_fail_fmt(const uint8_t *in, size_t n, char *err, size_t len)
{
	char hex[16] = "";

	if (!n)
		return rf__fail_into(err, len, -EBADMSG, "not a JPEG or PNG (no bytes)");
	for (size_t i = 0; i < n && i < 4; i++)
		snprintf(hex + strlen(hex), sizeof(hex) - strlen(hex), "%s%02x", i ? " " : "",
			 in[i]);
	return rf__fail_into(err, len, -EBADMSG, "not a JPEG or PNG (first bytes %s)", hex);
}

int rf__img_info(struct rf__imgctx *c, const uint8_t *in, size_t n, enum rf__img_fmt *fmt,
		 unsigned *w, unsigned *h, char *err, size_t len)
{
	int ret;

	*fmt = rf__img_sniff(in, n);
	*w = *h = 0;
	if (*fmt == RF__IMG_JPEG) {
		ret = rf__jpeg_header(c, in, n, w, h, err, len);
		jpeg_abort_decompress(&c->jpeg->d);
		return ret;
	}
	if (*fmt == RF__IMG_PNG)
		return rf__png_read(c, in, n, 1, w, h, err, len);
	return rf__img_fail_fmt(in, n, err, len);
}

int rf__img_decode(struct rf__imgctx *c, const struct rf__img_opts *o, const uint8_t *in, size_t n,
		   uint64_t epoch, uint64_t index, uint8_t *out, char *err, size_t len)
{
	enum rf__img_fmt fmt = rf__img_sniff(in, n);
	unsigned W, H, sw, sh, d = 1;
	struct rf__crop cr;
	int ret;

	ret = rf__img_opts_check(o, err, len);
	if (ret < 0)
		return ret;
	if (fmt == RF__IMG_JPEG) {
		ret = rf__jpeg_header(c, in, n, &W, &H, err, len);
		if (ret < 0)
			goto out;
		rf__img_crop_of(o, epoch, index, W, H, &cr);
		d = rf__dct_denom(o, &cr);
		sw = (W + d - 1) / d; /* libjpeg's size at 1/d */
		sh = (H + d - 1) / d;
	} else if (fmt == RF__IMG_PNG) {
		ret = rf__png_read(c, in, n, 0, &W, &H, err, len);
		if (ret < 0)
			goto out;
		rf__img_crop_of(o, epoch, index, W, H, &cr);
		sw = c->pix_w = W;
		sh = c->pix_h = H;
		c->pix_x = c->pix_y = 0;
	} else {
		return rf__img_fail_fmt(in, n, err, len);
	}
	c->last_d = d;
	/* the crop in the decoded image's pixels: the box scaled, the window around it */
	double b0x = cr.bx / d, b1x = (cr.bx + cr.bw) / d;
	double b0y = cr.by / d, b1y = (cr.by + cr.bh) / d;
	int wx0 = 0, wx1 = (int)sw, wy0 = 0, wy1 = (int)sh;
	if (!cr.whole) {
		wx0 = (int)floor(b0x);
		wy0 = (int)floor(b0y);
		wx1 = (int)fmin(ceil(b1x), sw);
		wy1 = (int)fmin(ceil(b1y), sh);
	}
	if (rf__rs_axis_make(&c->rs.x, b0x, b1x, wx0, wx1, o->size, o->resize) < 0 ||
	    rf__rs_axis_make(&c->rs.y, b0y, b1y, wy0, wy1, o->size, o->resize) < 0) {
		ret = rf__fail_into(err, len, -ENOMEM, "image: out of memory for the resize to %u x %u",
				    o->size, o->size);
		goto out;
	}
	/* the JPEG: only the rows and columns the tables read */
	if (fmt == RF__IMG_JPEG && (ret = rf__jpeg_decode(c, in, n, d, err, len)) < 0)
		goto out;
	if (rf__rs_run(&c->rs, c->pix, (size_t)c->pix_w * 3, c->pix_x, c->pix_y, cr.flip, out) < 0)
		ret = rf__fail_into(err, len, -ENOMEM,
				    "image: out of memory for the resize to %u x %u", o->size,
				    o->size);
out:
	if (fmt == RF__IMG_JPEG)
		jpeg_abort_decompress(&c->jpeg->d);
	rf__img_trim(c);
	return ret;
}
