/* image-png.c -- PNG for the image decode (image.c): libpng reading from memory through
 * a bounds-checked reader, its errors caught by setjmp into a message; every PNG
 * becomes 8-bit RGB (palettes and low bit depths expanded, 16 bits reduced to the high
 * byte, alpha dropped as PIL's convert("RGB") drops it, gray copied to R, G and B;
 * interlaced images deinterlaced). The size is checked against the limits as soon as
 * the header is read, before the pixels are allocated. Warnings are ignored. */
#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <string.h>

#include "image-impl.h"
#include "rf-internal.h"

struct rf__png_io {
	const uint8_t *p;
	size_t n, off;
	int code; /* a refusal of ours (-E2BIG, -ENOMEM), else 0 */
	unsigned w, h;
	char msg[192]; /* libpng's error */
};

static void rf__png_error(png_structp png, png_const_charp m)
{
	struct rf__png_io *io = png_get_error_ptr(png);

	snprintf(io->msg, sizeof(io->msg), "%s", m ? m : "error");
	png_longjmp(png, 1);
}

static void rf__png_warning(png_structp png, png_const_charp m)
{
	(void)png;
	(void)m;
}

static void rf__png_read_fn(png_structp png, png_bytep d, size_t len)
{
	struct rf__png_io *io = png_get_io_ptr(png);

	if (len > io->n - io->off)
		png_error(png, "the data ends inside a chunk (truncated)");
	memcpy(d, io->p + io->off, len);
	io->off += len;
}

/* The part under setjmp: only png and info live across it, set before and not changed
 * after; what it learns goes to *io, which lives in the caller's frame. */
static int rf__png_run(struct rf__imgctx *c, struct rf__png_io *io, png_structp png, png_infop info,
		       int header_only)
{
	png_uint_32 w, h;
	int depth, ctype;

	if (setjmp(png_jmpbuf(png)))
		return -EBADMSG;
	png_set_read_fn(png, io, rf__png_read_fn);
	/* the size is ours to judge (-E2BIG), not refused by libpng's default limits */
	png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
	png_read_info(png, info);
	png_get_IHDR(png, info, &w, &h, &depth, &ctype, NULL, NULL, NULL);
	io->w = w;
	io->h = h;
	if (w > RF__IMG_MAX_SIDE || h > RF__IMG_MAX_SIDE || (uint64_t)w * h > RF__IMG_MAX_PIXELS) {
		io->code = -E2BIG;
		return io->code;
	}
	if (header_only)
		return 0;
	png_set_expand(png);
	png_set_strip_16(png);
	png_set_strip_alpha(png);
	png_set_gray_to_rgb(png);
	png_set_interlace_handling(png);
	png_read_update_info(png, info);
	if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8 ||
	    png_get_rowbytes(png, info) != (size_t)w * 3)
		png_error(png, "cannot convert this color type to 8-bit RGB");
	if (rf__img_grow((void **)&c->pix, &c->pix_cap, (size_t)w * h * 3, 1) < 0 ||
	    rf__img_grow((void **)&c->rows, &c->rows_cap, h, sizeof(*c->rows)) < 0) {
		io->code = -ENOMEM;
		return io->code;
	}
	for (png_uint_32 y = 0; y < h; y++)
		c->rows[y] = c->pix + (size_t)y * w * 3;
	png_read_image(png, c->rows);
	png_read_end(png, NULL);
	return 0;
}

int rf__png_read(struct rf__imgctx *c, const uint8_t *in, size_t n, int header_only, unsigned *w,
		 unsigned *h, char *err, size_t len)
{
	struct rf__png_io io = { .p = in, .n = n };
	png_structp png =
		png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, rf__png_error, rf__png_warning);
	png_infop info = png ? png_create_info_struct(png) : NULL;
	int ret;

	if (!info) {
		png_destroy_read_struct(&png, NULL, NULL);
		return rf__fail_into(err, len, -ENOMEM, "PNG: out of memory for the reader");
	}
	ret = rf__png_run(c, &io, png, info, header_only);
	png_destroy_read_struct(&png, &info, NULL);
	*w = io.w;
	*h = io.h;
	if (ret == -E2BIG)
		return rf__fail_into(
			err, len, ret,
			"PNG: %u x %u pixels: larger than the limit (%u on a side, %llu pixels)",
			io.w, io.h, RF__IMG_MAX_SIDE, (unsigned long long)RF__IMG_MAX_PIXELS);
	if (ret == -ENOMEM)
		return rf__fail_into(err, len, ret, "PNG: %u x %u pixels: out of memory", io.w,
				     io.h);
	if (ret < 0)
		return rf__fail_into(err, len, -EBADMSG, "PNG: %s", io.msg);
	return 0;
}
