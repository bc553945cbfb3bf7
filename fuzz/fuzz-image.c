/* fuzz-image: one encoded image to one training sample (dataloader/image.c): JPEG
 * through libjpeg's API (only the rows and columns the crop needs), PNG through libpng,
 * then the crop and the resize. The first byte selects the options (bit 0: no DCT
 * scaling, bit 1: the area filter, bit 2: flips, the rest: the seed); the rest is the
 * image. Both the training (RandomResizedCrop) and the eval path run at size 32.
 * Oracles: a refusal is -EBADMSG, -E2BIG or -ENOMEM with a one-line message; a decode
 * succeeds only where the header reads, and a size the header reader refuses is
 * refused by the decode too; a header that reads has a size inside the limits; a
 * decode that succeeds gives the same sample again. Images above 2048 x 2048 are only
 * read to the header (a regression run stays fast). */
#include "fuzz.h"

#include <errno.h>

#include "image-impl.h"

static void fz_check_err(int r, const char *err)
{
	FZ_ASSERT(r == -EBADMSG || r == -E2BIG || r == -ENOMEM);
	FZ_ASSERT(err[0] && !strchr(err, '\n'));
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct rf__imgctx *c;
	struct rf__img_opts o = { 0 };
	enum rf__img_fmt fmt;
	unsigned w = 0, h = 0;
	uint8_t out[3 * 32 * 32], again[3 * 32 * 32];
	char err[256] = "";
	int ri;

	if (n < 1)
		return 0;
	FZ_ASSERT(rf__imgctx_create(&c) == 0);
	o.size = 32;
	o.no_dct_scale = d[0] & 1;
	o.resize = d[0] & 2 ? RF__RESIZE_AREA : RF__RESIZE_BILINEAR;
	o.hflip = (d[0] >> 2) & 1;
	o.seed = d[0] >> 3;
	d++;
	n--;
	ri = rf__img_info(c, d, n, &fmt, &w, &h, err, sizeof(err));
	if (ri < 0)
		fz_check_err(ri, err);
	else
		FZ_ASSERT(fmt != RF__IMG_UNKNOWN && w >= 1 && h >= 1 && w <= RF__IMG_MAX_SIDE &&
			  h <= RF__IMG_MAX_SIDE && (uint64_t)w * h <= RF__IMG_MAX_PIXELS);
	if (ri == 0 && (uint64_t)w * h > 2048 * 2048)
		goto out;
	for (int train = 0; train <= 1; train++) {
		o.train = train;
		err[0] = 0;
		int r = rf__img_decode(c, &o, d, n, 1, 7, out, err, sizeof(err));
		if (r < 0)
			fz_check_err(r, err);
		FZ_ASSERT(r < 0 || ri == 0);
		if (r == 0)
			FZ_ASSERT(rf__img_decode(c, &o, d, n, 1, 7, again, err, sizeof(err)) == 0 &&
				  !memcmp(out, again, sizeof(out)));
		FZ_ASSERT(ri != -E2BIG || r == -E2BIG);
	}
out:
	rf__imgctx_destroy(c);
	return 0;
}
