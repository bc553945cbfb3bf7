/* dataloader/image-impl.h -- one encoded image (JPEG or PNG) in, one augmented
 * fixed-size training sample out (3 x size x size, u8 RGB planes): the per-record work
 * of an image loader, run on its worker threads with a context each (image.c; the
 * resampler is image-resize.c, the PNG reader image-png.c). */
#ifndef RF_IMAGE_IMPL_H
#define RF_IMAGE_IMPL_H

#include <stddef.h>
#include <stdint.h>

enum rf__img_fmt { RF__IMG_UNKNOWN = 0, RF__IMG_JPEG, RF__IMG_PNG };
/* By magic bytes: JPEG FF D8 FF, PNG's 8-byte signature. */
enum rf__img_fmt rf__img_sniff(const uint8_t *b, size_t n);

enum rf__img_resize { RF__RESIZE_BILINEAR = 0, RF__RESIZE_AREA = 1 };

/* What an image may be before it is refused (-E2BIG): checked from the header. The
 * pixels are PIL's own bound (Image.MAX_IMAGE_PIXELS x 2, where it raises
 * DecompressionBombError): a PNG of a few hundred KB may declare 2^28 pixels, which a
 * whole decode holds as 805 MB -- per decode worker (one per CPU by default). */
#define RF__IMG_MAX_SIDE 32768u
#define RF__IMG_MAX_PIXELS 178956970ull
#define RF__IMG_MAX_SIZE 4096u
#define RF__IMG_MAX_RATIO 8     /* eval: the resize before the centre crop, at most */

struct rf__img_opts {
	unsigned size;          /* output is 3 x size x size (CHW planes, u8 RGB), 1..4096 */
	int train;              /* 1: RandomResizedCrop + flip; 0: eval: resize shorter side to
				 * round(size * resize_ratio) then center crop size x size */
	float scale_min, scale_max;   /* RRC area fraction; 0,0 means 0.08, 1.0 */
	float ratio_min, ratio_max;   /* RRC aspect ratio w/h; 0,0 means 3/4, 4/3 */
	float resize_ratio;     /* eval: 0 means 256/224 (1.142857); else 1..RF__IMG_MAX_RATIO */
	int hflip;              /* train: flip with probability 1/2 */
	enum rf__img_resize resize;
	int no_dct_scale;       /* 1: always decode JPEG at full size (exact torchvision-like
				 * pipeline); 0: use libjpeg-turbo's DCT scaling (1/2,1/4,1/8)
				 * when the crop will be shrunk at least that much */
	uint64_t seed;
};

/* 0, or -EINVAL with err naming the option and its range (rf__img_decode checks). */
int rf__img_opts_check(const struct rf__img_opts *o, char *err, size_t len);

/* A crop rectangle in source pixels and the flip; the RRC draw. The box (bx, by, bw, bh)
 * is the same region real-valued: the train crop's exactly, eval's fractional (the
 * center crop of the resized image mapped back, which x, y, w, h enclose). */
struct rf__crop {
	int x, y, w, h;
	int flip;
	double bx, by, bw, bh;  /* the region the output maps onto, in source pixels */
	int whole;              /* 1: the filter reads anywhere in the image (eval: resize,
				 * then crop); 0: only inside x, y, w, h (train: crop, then
				 * resize) */
};

/* torchvision's RandomResizedCrop.get_params for an image of W x H: up to 10 tries of
 * area = W*H*uniform(scale_min, scale_max), log-ratio uniform in [log rmin, log rmax],
 * w = round(sqrt(area*r)), h = round(sqrt(area/r)), accepted if 0 < w <= W and
 * 0 < h <= H, then x uniform in [0, W-w], y in [0, H-h]; else the fallback: the
 * center crop at the ratio clamped into [rmin, rmax] (exactly torchvision's code,
 * rounding half to even as Python's round does). Plus flip (1/2 when o->hflip). Every
 * random number comes from a splitmix64 stream seeded from (o->seed, epoch, index)
 * only -- no global state, no time -- so a record's augmentation is the same whatever
 * thread, prefetch or resume. Eval (o->train 0): the center crop of the resized image,
 * expressed in source pixels. W, H >= 1; o is assumed valid (rf__img_opts_check). */
void rf__img_crop_of(const struct rf__img_opts *o, uint64_t epoch, uint64_t index,
		     unsigned W, unsigned H, struct rf__crop *c);

/* Per worker thread: a JPEG decompressor, scratch buffers (grown, reused). Not shared
 * between threads; separate contexts are independent. */
struct rf__imgctx;
int rf__imgctx_create(struct rf__imgctx **out);          /* 0 or -ENOMEM */
void rf__imgctx_destroy(struct rf__imgctx *c);            /* NULL ok */

/* Decode in[0..n) (JPEG or PNG, sniffed), apply o for record `index` of epoch `epoch`,
 * write 3*size*size bytes of CHW u8 RGB into out. Grayscale is expanded to RGB, RGBA/LA
 * PNGs drop alpha, palette PNGs are expanded, 16-bit PNGs reduced to 8 (the high byte);
 * CMYK/YCCK JPEGs are converted to RGB as PIL does (R = C*K/255 on the inverted values
 * an Adobe marker announces, R = (255-C)*(255-K)/255 without one). Returns 0, or
 * -EINVAL (bad o), -EBADMSG (corrupt/truncated/unsupported image), -E2BIG (image larger
 * than 32768 on a side or 178,956,970 pixels: refused before allocating), -ENOMEM; on error
 * err (len bytes) holds one line saying what is wrong ("JPEG: Premature end of JPEG
 * file", "PNG: IHDR: CRC error", "not a JPEG or PNG (first bytes 00 01 02 03)"),
 * without a file name (the caller adds file and record), and so does rf_last_error().
 * Never reads outside in[0..n). libjpeg's warnings on a decodable image (extraneous
 * bytes, a bad Huffman code) are not errors; a JPEG whose data ends before its image
 * does is, and so is one of more than 500 scans. A JPEG is decoded with libjpeg's
 * defaults (the accurate integer IDCT and fancy upsampling, as PIL), only the rows and
 * columns the resize reads: the same pixels there as a whole decode's, but a warning
 * in the rows below them goes unseen. */
int rf__img_decode(struct rf__imgctx *c, const struct rf__img_opts *o, const uint8_t *in,
		   size_t n, uint64_t epoch, uint64_t index, uint8_t *out, char *err, size_t len);

/* The header only: format, width, height (for tools and the loader's checks). 0 or
 * -EBADMSG with err (-E2BIG for a size past the limits, w and h still set). */
int rf__img_info(struct rf__imgctx *c, const uint8_t *in, size_t n, enum rf__img_fmt *fmt,
		 unsigned *w, unsigned *h, char *err, size_t len);

/* ---- inside the module: what image.c, image-resize.c and image-png.c share ---- */

/* A resampling table for one axis: output pixel i is the sum over t < cnt[i] of
 * k[i*ksize + t] * input pixel lo[i] + t (PIL's precompute_coeffs, with a window). The
 * entries go on to a multiple of 4 outputs, weights 0; past cnt[i] a weight is 0. */
struct rf__rs_axis {
	unsigned out;           /* output pixels */
	unsigned ksize;         /* coefficients kept per output pixel */
	int *lo;                /* (out) first input pixel */
	int *cnt;               /* (out) input pixels used, 1..ksize */
	int kmax;               /* the largest cnt */
	float *k;               /* (out, ksize) weights, summing to 1 */
	int rlo, rhi;           /* the input pixels any output reads: [rlo, rhi) */
	void *mem;              /* lo, cnt and k in one allocation */
	size_t cap;             /* bytes of mem */
	double b0, b1;          /* what the table is for: the box [b0, b1) */
	int wlo, whi;           /* ... the input pixels it may read [wlo, whi) */
	int filter, valid;      /* ... the filter (enum rf__img_resize); valid once made */
};

/* Resample the box (b0 .. b1 on each axis) of an interleaved RGB image to out x out. */
struct rf__rs {
	struct rf__rs_axis x, y;
	float *ring;            /* (y.ksize, 3, xp) horizontally resampled rows: planes,
				 * each of xp = x.out rounded up to 4 */
	size_t ring_cap;        /* floats */
	const float **rows;     /* (3, y.ksize) the ring rows an output row sums, a plane's */
	size_t rows_cap;        /* entries */
	float *px;              /* (x.rhi - x.rlo + x.kmax, 4) one input row as floats */
	size_t px_cap;          /* floats */
};

/* Make a's table for the box [b0, b1) of an axis read only inside [wlo, whi) (0 <= wlo
 * < whi), out pixels, filter f; kept when the same table is asked again. 0 or -ENOMEM. */
int rf__rs_axis_make(struct rf__rs_axis *a, double b0, double b1, int wlo, int whi,
		     unsigned out, enum rf__img_resize f);
/* out (3, y.out, x.out) = the image resampled by the tables, mirrored left-right if
 * flip; src (rows of stride bytes, RGB) holds its pixel (ox, oy) first, and every pixel
 * the tables read. 0 or -ENOMEM. */
int rf__rs_run(struct rf__rs *r, const uint8_t *src, size_t stride, unsigned ox, unsigned oy,
	       int flip, uint8_t *out);
void rf__rs_free(struct rf__rs *r);

struct rf__jpeg; /* libjpeg's decompressor and its error state (image.c) */

struct rf__imgctx {
	struct rf__jpeg *jpeg;
	unsigned last_d;        /* the last decode's scale 1/d (1: full size, and PNGs) */
	uint8_t *pix;           /* the decoded window, interleaved RGB (CMYK while converting) */
	size_t pix_cap;         /* bytes */
	unsigned pix_x, pix_y;  /* ... where it lies in the (scaled) image: for a JPEG what */
	unsigned pix_w, pix_h;  /* the resize reads and a margin, for a PNG all; pix_w a row */
	uint8_t **rows;         /* row pointers into pix */
	size_t rows_cap;        /* entries */
	struct rf__rs rs;
};

/* Grow *p (of *cap elements of esz bytes) to at least need elements, its contents not
 * kept. 0 or -ENOMEM (*p NULL, *cap 0). */
int rf__img_grow(void **p, size_t *cap, size_t need, size_t esz);

/* image-png.c: read the PNG in[0..n): its size into *w, *h, and unless header_only the
 * pixels, 8-bit RGB, into c->pix (rows of w*3 bytes). 0, -EBADMSG, -E2BIG (before the
 * pixels are allocated), -ENOMEM; with err ("PNG: ..."). */
int rf__png_read(struct rf__imgctx *c, const uint8_t *in, size_t n, int header_only,
		 unsigned *w, unsigned *h, char *err, size_t len);

#endif
