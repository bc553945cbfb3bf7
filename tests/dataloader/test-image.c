/* test-image -- the image decode (dataloader/image.c): one JPEG or PNG to one augmented
 * 3 x size x size sample. Checked: format sniffing and the header reader; the
 * RandomResizedCrop draw (inside the image, area and ratio in range up to rounding, a
 * function of (seed, epoch, index) only, different from record to record, the centered
 * fallback with the clamped ratio on a 4000 x 10 image, the eval center crop's box);
 * solid-color JPEGs decode to their color at size 32 and 224 with and without DCT
 * scaling, which is taken where it should be; the flip mirrors a two-color image
 * exactly; eval and train outputs equal, within 1, an independent resize written here
 * from PIL's definition (resize then crop for eval, crop then resize for training); a
 * constant image resizes exactly and a gradient stays monotone; gray, gray+alpha,
 * palette with transparency, RGBA, 16-bit, 1-bit and interlaced PNGs, gray and CMYK
 * JPEGs give their expected colors; a DCT-scaled decode stays close to the full one; a
 * JPEG's region decode (only the rows and columns the resize reads) has there every
 * pixel of a whole decode and gives its sample -- 4:2:0, 4:2:2, 4:4:4, 4:4:0, 4:1:1,
 * gray, CMYK, luma 4 x 2 and 2 x 4, progressive, arithmetic, sizes no multiple of 16,
 * DCT scaling 1/1 to 1/8, 768 crops -- and refuses it cut short at any eighth; a JPEG with a
 * benign warning decodes; four threads with a context each give the samples one
 * thread gives. Corrupt input -- truncations at every length, random bytes, a
 * flipped CRC, sizes past the limits (refused before allocating), no bytes -- gives a
 * negative code and a message, never a crash, and the next image decodes as in a fresh
 * context; so does a progressive JPEG of more than 500 scans. A JPEG that uses a
 * quantization table it never defines is refused, right after one that defines it too. The images are made here
 * (image-test.h). */
#include <errno.h>
#include <pthread.h>
#include <zlib.h>

#include "image-impl.h"
#include "image-test.h"

static char err[256];

static struct rf__img_opts opts(unsigned size, int train)
{
	struct rf__img_opts o = { 0 };
	o.size = size;
	o.train = train;
	o.seed = 1234;
	return o;
}

static void decode_ok(struct rf__imgctx *c, const struct rf__img_opts *o, const uint8_t *b,
		      size_t n, uint64_t ep, uint64_t idx, uint8_t *out)
{
	int r = rf__img_decode(c, o, b, n, ep, idx, out, err, sizeof(err));
	if (r != 0) {
		fprintf(stderr, "decode of record %llu: %d (%s)\n", (unsigned long long)idx, r,
			err);
		exit(1);
	}
}

/* every pixel of out (3 x s x s) within tol of rgb */
static void check_color(const uint8_t *out, unsigned s, const uint8_t *rgb, int tol,
			const char *what)
{
	for (int c = 0; c < 3; c++)
		for (size_t i = 0; i < (size_t)s * s; i++)
			if (abs(out[c * s * s + i] - rgb[c]) > tol) {
				fprintf(stderr,
					"%s: channel %d pixel %zu is %d, expected %d +- %d\n", what,
					c, i, out[c * s * s + i], rgb[c], tol);
				exit(1);
			}
}

static void check_ref(struct rf__imgctx *ctx, const struct rf__img_opts *o, const uint8_t *px,
		      int W, int H, uint64_t idx)
{
	size_t n, m = (size_t)3 * o->size * o->size;
	uint8_t *png = rgb_png(px, W, H, &n), *out = malloc(m);
	double *ref = malloc(m * sizeof(double));
	struct rf__crop cr;
	size_t ties = 0;

	CHECK(out && ref);
	decode_ok(ctx, o, png, n, 3, idx, out);
	rf__img_crop_of(o, 3, idx, W, H, &cr);
	ref_resize(px, W, H, &cr, o->size, o->resize, ref);
	for (size_t i = 0; i < m; i++) {
		double v = fmin(fmax(ref[i], 0), 255);
		if (ref[i] == -1) {
			ties++;
			continue;
		}
		if (fabs(out[i] - v) > 1.0) {
			fprintf(stderr,
				"%s %dx%d -> %u #%llu: [%zu] %d, ref %.3f (crop %d,%d %dx%d)\n",
				o->train ? "train" : "eval", W, H, o->size, (unsigned long long)idx,
				i, out[i], ref[i], cr.x, cr.y, cr.w, cr.h);
			exit(1);
		}
	}
	CHECK(ties < m && (o->resize == RF__RESIZE_AREA || ties == 0));
	free(png);
	free(out);
	free(ref);
}

/* ---- the tests ---- */

/* torchvision's fallback: the center crop at the ratio clamped into [3/4, 4/3] */
static int is_fallback(const struct rf__crop *c, unsigned W, unsigned H)
{
	double r = (double)W / H;
	int w = (int)W, h = (int)H;

	if (r < 0.75)
		h = (int)nearbyint(W / 0.75);
	else if (r > 4.0 / 3.0)
		w = (int)nearbyint(H * 4.0 / 3.0);
	return c->w == w && c->h == h && c->x == ((int)W - w) / 2 && c->y == ((int)H - h) / 2;
}

static void test_crop(void)
{
	static const unsigned sz[][2] = {
		{ 500, 375 }, { 375, 500 }, { 100, 100 }, { 1, 1 }, { 33, 2000 }
	};
	struct rf__img_opts o = opts(224, 1);
	struct rf__crop a, b;
	unsigned nflip = 0, ndraw = 0, same = 0;
	double area_sum = 0;

	o.hflip = 1;
	for (unsigned k = 0; k < sizeof(sz) / sizeof(sz[0]); k++) {
		unsigned W = sz[k][0], H = sz[k][1];
		for (uint64_t seed = 0; seed < 4; seed++)
			for (uint64_t ep = 0; ep < 5; ep++)
				for (uint64_t i = 0; i < 500; i++) {
					o.seed = seed;
					rf__img_crop_of(&o, ep, i, W, H, &a);
					CHECK(a.x >= 0 && a.y >= 0 && a.w >= 1 && a.h >= 1);
					CHECK(a.x + a.w <= (int)W && a.y + a.h <= (int)H);
					CHECK(a.bx == a.x && a.bw == a.w && !a.whole);
					rf__img_crop_of(&o, ep, i, W, H, &b);
					CHECK(!memcmp(&a, &b, sizeof(a)));
					nflip += a.flip;
					ndraw++;
					if (is_fallback(&a, W, H))
						continue;
					double w = a.w, h = a.h, A = (double)W * H;
					CHECK((w + 0.5) * (h + 0.5) >= 0.08 * A);
					CHECK((w - 0.5) * (h - 0.5) <= A);
					CHECK((w + 0.5) / (h - 0.5) >= 0.75);
					CHECK((w - 0.5) / (h + 0.5) <= 4.0 / 3.0);
					if (k == 0) {
						area_sum += w * h / A;
						rf__img_crop_of(&o, ep, i + 1, W, H, &b);
						same += a.x == b.x && a.y == b.y && a.w == b.w &&
							a.h == b.h;
						rf__img_crop_of(&o, ep + 1, i, W, H, &b);
						same += a.x == b.x && a.y == b.y && a.w == b.w &&
							a.h == b.h;
					}
				}
	}
	CHECK(same == 0);
	CHECK(nflip > ndraw * 45 / 100 && nflip < ndraw * 55 / 100);
	/* uniform(0.08, 1) has the mean 0.54; large areas miss more often (retried) */
	area_sum /= 10000;
	printf("crop: mean area fraction %.3f on 500 x 375\n", area_sum);
	CHECK(area_sum > 0.40 && area_sum < 0.47); /* 0.433 by a simulation */
	o.hflip = 0;
	rf__img_crop_of(&o, 0, 7, 500, 375, &a);
	CHECK(a.flip == 0);

	/* the fallback: no draw fits in 4000 x 10 */
	for (uint64_t i = 0; i < 100; i++) {
		rf__img_crop_of(&o, 1, i, 4000, 10, &a);
		CHECK(a.x == 1993 && a.y == 0 && a.w == 13 && a.h == 10);
		rf__img_crop_of(&o, 1, i, 10, 4000, &a);
		CHECK(a.x == 0 && a.y == 1993 && a.w == 10 && a.h == 13);
	}
	/* eval: Resize(256) of 500 x 375 is 341 x 256; CenterCrop(224) at 58 (58.5 to
	 * even), 16 */
	o = opts(224, 0);
	rf__img_crop_of(&o, 0, 0, 500, 375, &a);
	CHECK(a.whole && !a.flip);
	CHECK(fabs(a.bx - 58 * 500.0 / 341) < 1e-9 && fabs(a.bw - 224 * 500.0 / 341) < 1e-9);
	CHECK(fabs(a.by - 16 * 375.0 / 256) < 1e-9 && fabs(a.bh - 224 * 375.0 / 256) < 1e-9);
	CHECK(a.x == 85 && a.y == 23 && a.x + a.w == 414 && a.y + a.h == 352);
	printf("crop: %u draws in range, deterministic, distinct; fallback and eval boxes\n",
	       ndraw);
}

static void test_sniff_info(struct rf__imgctx *c)
{
	static const uint8_t gray[1] = { 9 };
	uint8_t *px = solid(40, 30, 3, (const uint8_t[]){ 1, 2, 3 });
	size_t nj, np;
	uint8_t *j = make_jpeg(px, 40, 30, TJPF_RGB, TJSAMP_420, 90, 0, &nj);
	uint8_t *p = rgb_png(px, 40, 30, &np);
	enum rf__img_fmt f;
	unsigned w, h;

	CHECK(rf__img_sniff(j, nj) == RF__IMG_JPEG && rf__img_sniff(p, np) == RF__IMG_PNG);
	CHECK(rf__img_sniff(j, 2) == RF__IMG_UNKNOWN && rf__img_sniff(p, 7) == RF__IMG_UNKNOWN);
	CHECK(rf__img_sniff(gray, 1) == RF__IMG_UNKNOWN &&
	      rf__img_sniff(NULL, 0) == RF__IMG_UNKNOWN);
	CHECK_EQ(rf__img_info(c, j, nj, &f, &w, &h, err, sizeof(err)), 0);
	CHECK(f == RF__IMG_JPEG && w == 40 && h == 30);
	CHECK_EQ(rf__img_info(c, p, np, &f, &w, &h, err, sizeof(err)), 0);
	CHECK(f == RF__IMG_PNG && w == 40 && h == 30);
	CHECK_EQ(rf__img_info(c, (const uint8_t *)"\0\1\2\3\4", 5, &f, &w, &h, err, sizeof(err)),
		 -EBADMSG);
	CHECK(f == RF__IMG_UNKNOWN && strstr(err, "first bytes 00 01 02 03"));
	CHECK_EQ(rf__img_info(c, j, 20, &f, &w, &h, err, sizeof(err)), -EBADMSG);
	CHECK(!strncmp(err, "JPEG: ", 6));
	CHECK_EQ(rf__img_info(c, p, 20, &f, &w, &h, err, sizeof(err)), -EBADMSG);
	CHECK(!strncmp(err, "PNG: ", 5));
	free(px);
	free(j);
	free(p);
	printf("sniff and info: JPEG, PNG, neither, cut short\n");
}

static void test_solid_jpeg(struct rf__imgctx *c)
{
	static const uint8_t col[3] = { 200, 60, 30 };
	static const unsigned sizes[] = { 32, 224 };
	uint8_t *px = solid(400, 300, 3, col), *out = malloc(3 * 224 * 224);
	size_t n;
	uint8_t *j = make_jpeg(px, 400, 300, TJPF_RGB, TJSAMP_420, 95, 0, &n);
	unsigned scaled = 0, full = 0;

	CHECK(out);
	for (int k = 0; k < 2; k++)
		for (int train = 0; train <= 1; train++)
			for (int nodct = 0; nodct <= 1; nodct++)
				for (uint64_t i = 0; i < 20; i++) {
					struct rf__img_opts o = opts(sizes[k], train);
					o.no_dct_scale = nodct;
					o.hflip = 1;
					decode_ok(c, &o, j, n, 0, i, out);
					check_color(out, o.size, col, 3, "solid JPEG");
					scaled += c->last_d > 1;
					full += c->last_d == 1;
					CHECK(!nodct || c->last_d == 1);
					/* at 224 no crop of 400 x 300 is 448 wide */
					CHECK(k == 0 || c->last_d == 1);
				}
	CHECK(scaled > 10 && full > 100);
	free(px);
	free(j);
	free(out);
	printf("solid JPEG: its color within 3 at 32 and 224, %u decodes DCT-scaled\n", scaled);
}

static void test_flip(struct rf__imgctx *c)
{
	uint8_t *px = malloc(256 * 256 * 3), a[3 * 32 * 32], b[3 * 32 * 32];
	struct rf__img_opts o = opts(32, 1);
	struct rf__crop cr;
	uint64_t i0 = UINT64_MAX, i1 = UINT64_MAX;
	size_t n;

	CHECK(px);
	for (int i = 0; i < 256 * 256; i++) {
		int left = i % 256 < 128;
		px[3 * i] = left ? 250 : 5;
		px[3 * i + 1] = 10;
		px[3 * i + 2] = left ? 5 : 250;
	}
	uint8_t *j = make_jpeg(px, 256, 256, TJPF_RGB, TJSAMP_444, 95, 0, &n);
	o.scale_min = o.scale_max = 1; /* the whole image, every time */
	o.ratio_min = o.ratio_max = 1;
	o.hflip = 1;
	for (uint64_t i = 0; i < 64 && (i0 == UINT64_MAX || i1 == UINT64_MAX); i++) {
		rf__img_crop_of(&o, 0, i, 256, 256, &cr);
		CHECK(cr.x == 0 && cr.y == 0 && cr.w == 256 && cr.h == 256);
		*(cr.flip ? &i1 : &i0) = i;
	}
	CHECK(i0 != UINT64_MAX && i1 != UINT64_MAX);
	decode_ok(c, &o, j, n, 0, i0, a);
	decode_ok(c, &o, j, n, 0, i1, b);
	for (int y = 0; y < 32; y++)
		for (int x = 0; x < 32; x++) {
			CHECK(a[y * 32 + x] == b[y * 32 + 31 - x]);
			CHECK(a[2048 + y * 32 + x] == b[2048 + y * 32 + 31 - x]);
		}
	for (int y = 0; y < 32; y++) {
		CHECK(a[y * 32 + 2] > 240 && a[2048 + y * 32 + 2] < 15);   /* red on the left */
		CHECK(a[y * 32 + 29] < 15 && a[2048 + y * 32 + 29] > 240); /* blue on the right */
	}
	free(px);
	free(j);
	printf("flip: records %llu and %llu are mirror images, red left unless flipped\n",
	       (unsigned long long)i0, (unsigned long long)i1);
}

static void test_reference(struct rf__imgctx *c)
{
	uint8_t *px = noise(300, 200, 5), *out = malloc(3 * 200 * 200);
	size_t n;
	struct rf__img_opts o = opts(200, 0);

	CHECK(out);
	/* eval with no resize: the center 200 x 200 of 300 x 200 exactly */
	o.resize_ratio = 1;
	uint8_t *p = rgb_png(px, 300, 200, &n);
	decode_ok(c, &o, p, n, 0, 0, out);
	for (int y = 0; y < 200; y++)
		for (int x = 0; x < 200; x++)
			for (int k = 0; k < 3; k++)
				CHECK(out[(k * 200 + y) * 200 + x] ==
				      px[(y * 300 + x + 50) * 3 + k]);
	free(p);
	free(px);
	free(out);
	/* against the reference: eval (resize, then crop) and train (crop, then resize) */
	px = noise(157, 97, 6);
	for (int f = 0; f <= 1; f++) {
		for (unsigned s = 24; s <= 120; s += 48) {
			o = opts(s, 0);
			o.resize = f;
			check_ref(c, &o, px, 157, 97, 0);
			o.resize_ratio = 1.5f;
			check_ref(c, &o, px, 157, 97, 0);
			o = opts(s, 1);
			o.resize = f;
			o.hflip = 1;
			o.no_dct_scale = 1;
			for (uint64_t i = 0; i < 6; i++)
				check_ref(c, &o, px, 157, 97, i);
		}
	}
	free(px);
	printf("resize: eval center crop exact; eval and train within 1 of the reference\n");
}

static void test_constant_gradient(struct rf__imgctx *c)
{
	static const uint8_t col[3] = { 77, 128, 201 };
	uint8_t *px = solid(331, 217, 3, col), *out = malloc(3 * 150 * 150);
	size_t n;
	uint8_t *p = rgb_png(px, 331, 217, &n);

	CHECK(out);
	for (int f = 0; f <= 1; f++)
		for (uint64_t i = 0; i < 16; i++) {
			struct rf__img_opts o = opts(i & 1 ? 150 : 61, (int)(i >> 1 & 1));
			o.resize = f;
			decode_ok(c, &o, p, n, 0, i, out);
			check_color(out, o.size, col, 0, "constant PNG");
		}
	free(p);
	for (int y = 0; y < 217; y++)
		for (int x = 0; x < 331; x++)
			px[(y * 331 + x) * 3] = (uint8_t)(x * 255 / 330);
	p = rgb_png(px, 331, 217, &n);
	for (uint64_t i = 0; i < 16; i++) {
		struct rf__img_opts o = opts(i & 1 ? 150 : 61, 1);
		o.hflip = 1;
		o.resize = (int)(i >> 1 & 1);
		struct rf__crop cr;
		rf__img_crop_of(&o, 0, i, 331, 217, &cr);
		decode_ok(c, &o, p, n, 0, i, out);
		for (unsigned y = 0; y < o.size; y++)
			for (unsigned x = 1; x < o.size; x++) {
				int d = out[y * o.size + x] - out[y * o.size + x - 1];
				CHECK(cr.flip ? d <= 0 : d >= 0);
			}
	}
	free(p);
	free(px);
	free(out);
	printf("constant image exact, gradient monotone (both filters)\n");
}

static void test_formats(struct rf__imgctx *c)
{
	enum {
		W = 37,
		H = 23
	};
	uint8_t rows[W * H * 8], out[3 * 16 * 16];
	struct rf__img_opts o = opts(16, 1);
	size_t n;
	uint8_t *b;

	/* gray JPEG, a gradient: R = G = B everywhere */
	for (int i = 0; i < W * H; i++)
		rows[i] = (uint8_t)(i * 7);
	b = make_jpeg(rows, W, H, TJPF_GRAY, TJSAMP_GRAY, 90, 0, &n);
	decode_ok(c, &o, b, n, 0, 1, out);
	for (int i = 0; i < 256; i++)
		CHECK(out[i] == out[256 + i] && out[i] == out[512 + i]);
	free(b);
	/* PNG: gray 8, gray+alpha, RGBA, 16-bit RGB, 16-bit gray: constant colors */
	memset(rows, 150, W * H);
	b = make_png(rows, W, H, PNG_COLOR_TYPE_GRAY, 8, 0, NULL, 0, NULL, 0, &n);
	decode_ok(c, &o, b, n, 0, 2, out);
	check_color(out, 16, (const uint8_t[]){ 150, 150, 150 }, 0, "gray PNG");
	free(b);
	for (int i = 0; i < W * H; i++)
		rows[2 * i] = 90, rows[2 * i + 1] = (uint8_t)i;
	b = make_png(rows, W, H, PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0, NULL, 0, NULL, 0, &n);
	decode_ok(c, &o, b, n, 0, 3, out);
	check_color(out, 16, (const uint8_t[]){ 90, 90, 90 }, 0, "gray+alpha PNG");
	free(b);
	for (int i = 0; i < W * H; i++)
		memcpy(rows + 4 * i, (const uint8_t[]){ 10, 20, 30, (uint8_t)i }, 4);
	b = make_png(rows, W, H, PNG_COLOR_TYPE_RGBA, 8, 0, NULL, 0, NULL, 0, &n);
	decode_ok(c, &o, b, n, 0, 4, out);
	check_color(out, 16, (const uint8_t[]){ 10, 20, 30 }, 0, "RGBA PNG");
	free(b);
	for (int i = 0; i < W * H; i++)
		memcpy(rows + 6 * i, (const uint8_t[]){ 0xab, 0xcd, 0x12, 0xff, 0x80, 0x01 }, 6);
	b = make_png(rows, W, H, PNG_COLOR_TYPE_RGB, 16, 0, NULL, 0, NULL, 0, &n);
	decode_ok(c, &o, b, n, 0, 5, out);
	check_color(out, 16, (const uint8_t[]){ 0xab, 0x12, 0x80 }, 0, "16-bit RGB PNG");
	free(b);
	for (int i = 0; i < W * H; i++)
		rows[2 * i] = 0xab, rows[2 * i + 1] = (uint8_t)i;
	b = make_png(rows, W, H, PNG_COLOR_TYPE_GRAY, 16, 1, NULL, 0, NULL, 0, &n);
	decode_ok(c, &o, b, n, 0, 6, out);
	check_color(out, 16, (const uint8_t[]){ 0xab, 0xab, 0xab }, 0, "16-bit gray PNG");
	free(b);
	/* 1-bit gray: left half black, right half white (one byte is 8 pixels) */
	memset(rows, 0, sizeof(rows));
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++)
			if (x >= 16)
				rows[y * 5 + x / 8] |= (uint8_t)(0x80 >> (x % 8));
	b = make_png(rows, W, H, PNG_COLOR_TYPE_GRAY, 1, 0, NULL, 0, NULL, 0, &n);
	o = opts(W, 0);
	o.resize_ratio = 1; /* W > H: the crop is the center 23 x 23, at 7 */
	uint8_t big[3 * W * W];
	o.size = H;
	decode_ok(c, &o, b, n, 0, 0, big);
	for (int y = 0; y < H; y++)
		for (int x = 0; x < H; x++)
			CHECK(big[y * H + x] == (x + 7 >= 16 ? 255 : 0));
	free(b);
	/* palette with transparency: two colors, alpha dropped */
	static const uint8_t pal[6] = { 255, 0, 0, 0, 0, 255 }, trns[2] = { 0, 128 };
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++)
			rows[y * W + x] = x >= W / 2;
	b = make_png(rows, W, H, PNG_COLOR_TYPE_PALETTE, 8, 0, pal, 2, trns, 2, &n);
	decode_ok(c, &o, b, n, 0, 0, big);
	for (int y = 0; y < H; y++)
		for (int x = 0; x < H; x++) {
			int blue = x + 7 >= W / 2;
			CHECK(big[y * H + x] == (blue ? 0 : 255) &&
			      big[2 * H * H + y * H + x] == (blue ? 255 : 0) &&
			      big[H * H + y * H + x] == 0);
		}
	free(b);
	/* interlaced RGB decodes as the plain one */
	uint8_t *px = noise(W, H, 9), other[3 * H * H];
	b = make_png(px, W, H, PNG_COLOR_TYPE_RGB, 8, 1, NULL, 0, NULL, 0, &n);
	decode_ok(c, &o, b, n, 0, 0, big);
	free(b);
	b = rgb_png(px, W, H, &n);
	decode_ok(c, &o, b, n, 0, 0, other);
	CHECK(!memcmp(big, other, sizeof(other)));
	free(b);
	free(px);
	/* CMYK (TurboJPEG writes YCCK with an Adobe marker, values as given) */
	uint8_t *cmyk = solid(64, 48, 4, (const uint8_t[]){ 200, 100, 50, 220 });
	b = make_jpeg(cmyk, 64, 48, TJPF_CMYK, TJSAMP_444, 95, 0, &n);
	o = opts(16, 1);
	decode_ok(c, &o, b, n, 0, 0, out);
	check_color(out, 16, (const uint8_t[]){ 173, 86, 43 }, 3, "CMYK JPEG");
	free(b);
	free(cmyk);
	printf("formats: gray, CMYK JPEG; gray(+alpha), RGBA, 16/1-bit, palette, Adam7 PNG\n");
}

static void test_dct(struct rf__imgctx *c)
{
	uint8_t *px = smooth(1600, 1200), *a = malloc(3 * 96 * 96), *b = malloc(3 * 96 * 96);
	size_t n;
	uint8_t *j = make_jpeg(px, 1600, 1200, TJPF_RGB, TJSAMP_420, 92, TJFLAG_PROGRESSIVE, &n);
	unsigned d[9] = { 0 };
	double worst = 0;

	CHECK(a && b);
	for (int train = 0; train <= 1; train++)
		for (uint64_t i = 0; i < 24; i++) {
			struct rf__img_opts o = opts(96, train);
			decode_ok(c, &o, j, n, 2, i, a);
			d[c->last_d]++;
			o.no_dct_scale = 1;
			decode_ok(c, &o, j, n, 2, i, b);
			double mae = 0;
			for (int k = 0; k < 3 * 96 * 96; k++)
				mae += abs(a[k] - b[k]);
			mae /= 3 * 96 * 96;
			worst = fmax(worst, mae);
			if (mae >= 4) {
				fprintf(stderr, "DCT scale 1/%u: mean abs difference %.2f\n",
					c->last_d, mae);
				exit(1);
			}
		}
	CHECK(d[2] + d[4] + d[8] > 24);
	free(px);
	free(a);
	free(b);
	free(j);
	printf("DCT scaling (1/2: %u, 1/4: %u, 1/8: %u of 48): mean abs difference at most %.2f\n",
	       d[2], d[4], d[8], worst);
}

static void expect_fail(struct rf__imgctx *c, const uint8_t *b, size_t n, int code,
			const char *what)
{
	struct rf__img_opts o = opts(32, (int)(n & 1));
	uint8_t out[3 * 32 * 32];
	int r;

	err[0] = 0;
	r = rf__img_decode(c, &o, b, n, 0, n, out, err, sizeof(err));
	if (r >= 0 || (code && r != code) || !err[0] || strchr(err, '\n')) {
		fprintf(stderr, "%s (%zu bytes): returned %d (%s), expected %d and a message\n",
			what, n, r, err, code);
		exit(1);
	}
}

/* ---- the region decode: what the resize reads is what a whole decode has there ---- */

static void test_roi(struct rf__imgctx *c)
{
	/* sub: TurboJPEG's; 1hv: libjpeg's, luma h x v (2hv: arithmetic); flags -1: CMYK */
	static const struct { int w, h, sub, flags; } J[] = {
		{ 237, 181, TJSAMP_420, 0 }, { 301, 153, TJSAMP_422, 0 }, { 190, 251, TJSAMP_444, 0 },
		{ 263, 199, TJSAMP_GRAY, 0 }, { 229, 171, TJSAMP_440, 0 }, { 245, 187, TJSAMP_411, 0 },
		{ 237, 181, TJSAMP_420, TJFLAG_PROGRESSIVE }, { 211, 277, TJSAMP_422, TJFLAG_PROGRESSIVE },
		{ 201, 149, TJSAMP_444, -1 }, { 253, 179, 142, 0 }, { 179, 253, 124, 0 },
		{ 227, 163, 222, 0 } };
	static const unsigned sizes[] = { 16, 40, 96, 224 };
	unsigned nroi = 0, nwhole = 0, nd[9] = { 0 }, nedge = 0;
	uint8_t *out = malloc(3 * 224 * 224), *full = malloc(3 * 224 * 224);

	CHECK(out && full);
	for (size_t k = 0; k < sizeof(J) / sizeof(J[0]); k++) {
		int cmyk = J[k].flags < 0, tj = J[k].sub < 100, w = J[k].w, h = J[k].h, sw, sh;
		int pf = cmyk ? TJPF_CMYK : J[k].sub == TJSAMP_GRAY ? TJPF_GRAY : TJPF_RGB;
		uint8_t *px = noise(w, h * 4 / 3 + 1, k), *ref[9] = { 0 };
		size_t n;
		uint8_t *j = tj ? make_jpeg(px, w, h, pf, J[k].sub, 85, cmyk ? 0 : J[k].flags, &n)
				: make_jpeg_sampled(px, w, h, J[k].sub / 10 % 10, J[k].sub % 10,
						    J[k].sub >= 200, &n);
		for (uint64_t i = 0; i < 64; i++) {
			struct rf__img_opts o = opts(sizes[i % 4], (int)(i / 4 % 2));
			o.seed = k * 1000 + i, o.hflip = 1;
			o.no_dct_scale = i / 8 % 4 == 3, o.resize = i % 3 == 0;
			decode_ok(c, &o, j, n, i, i, out);
			unsigned d = c->last_d;
			if (!ref[d]) {
				ref[d] = whole_decode(j, n, (int)d, cmyk, tj, &sw, &sh);
				uint8_t *other = whole_decode(j, n, (int)d, cmyk, 0, &sw, &sh);
				CHECK(!memcmp(ref[d], other, (size_t)sw * sh * 3)); /* the same */
				free(other);
			}
			sw = (w + (int)d - 1) / (int)d, sh = (h + (int)d - 1) / (int)d;
			nd[d]++;
			*(c->pix_w < (unsigned)sw || c->pix_h < (unsigned)sh ? &nroi : &nwhole) += 1;
			/* every pixel in a column the tables read is the whole decode's */
			const struct rf__rs_axis *ax = &c->rs.x, *ay = &c->rs.y;
			CHECK(ax->rlo >= (int)c->pix_x && ax->rhi <= (int)(c->pix_x + c->pix_w));
			CHECK(ay->rlo >= (int)c->pix_y && ay->rhi <= (int)(c->pix_y + c->pix_h));
			for (unsigned y = c->pix_y; y < c->pix_y + c->pix_h; y++)
				for (unsigned x = c->pix_x; x < c->pix_x + c->pix_w; x++) {
					const uint8_t *a = c->pix + ((size_t)(y - c->pix_y) * c->pix_w +
								     x - c->pix_x) * 3;
					const uint8_t *b = ref[d] + ((size_t)y * sw + x) * 3;
					if (!memcmp(a, b, 3))
						continue;
					if ((int)x >= ax->rlo && (int)x < ax->rhi) {
						fprintf(stderr, "JPEG %zu at 1/%u, record %d: pixel "
							"%u,%u is not a whole decode's\n", k, d, (int)i, x, y);
						exit(1);
					}
					nedge++; /* the window's margin, not read */
				}
			/* and the sample is the whole decode's, cropped and resized */
			struct rf__crop cr;
			rf__img_crop_of(&o, i, i, (unsigned)w, (unsigned)h, &cr);
			CHECK_EQ(rf__rs_run(&c->rs, ref[d], (size_t)sw * 3, 0, 0, cr.flip, full), 0);
			CHECK(!memcmp(out, full, 3 * o.size * o.size));
		}
		/* cut short anywhere (the crop's rows may all be there): refused */
		for (size_t cut = n / 8; cut < n; cut += n / 8) {
			uint8_t *b = memcpy(malloc(cut), j, cut);
			expect_fail(c, b, cut, -EBADMSG, "truncated JPEG (region decode)");
			free(b);
		}
		for (int d = 0; d < 9; d++)
			free(ref[d]);
		free(j);
		free(px);
	}
	CHECK(nroi > 500 && nwhole > 5 && nd[2] + nd[4] + nd[8] > 100);
	free(out);
	free(full);
	printf("region decode: %u of %u samples from a window (1/2: %u, 1/4: %u, 1/8: %u), "
	       "the pixels read the whole decode's; %u margin pixels differ\n",
	       nroi, nroi + nwhole, nd[2], nd[4], nd[8], nedge);
}

static void test_corrupt(struct rf__imgctx *c)
{
	uint8_t *px = smooth(120, 90), *j, *p, *cut;
	size_t nj, np, nb = 0;
	unsigned long long s = 77;
	char first[256];

	j = make_jpeg(px, 120, 90, TJPF_RGB, TJSAMP_420, 90, 0, &nj);
	p = rgb_png(px, 120, 90, &np);
	/* truncations, each in a buffer of its own size (ASan sees any read past it) */
	for (size_t k = 0; k < nj; k++) {
		cut = malloc(k ? k : 1);
		memcpy(cut, j, k);
		expect_fail(c, cut, k, -EBADMSG, "truncated JPEG");
		if (k == nj / 2)
			snprintf(first, sizeof(first), "%s", err);
		free(cut);
	}
	printf("a JPEG cut in half: %s\n", first);
	CHECK(strstr(first, "JPEG: ") == first);
	/* after a failed header read TurboJPEG 2.1's decompressor would go on inside it */
	enum rf__img_fmt f;
	unsigned w, h;
	CHECK_EQ(rf__img_info(c, j, 22, &f, &w, &h, err, sizeof(err)), -EBADMSG);
	CHECK_EQ(rf__img_info(c, j, nj, &f, &w, &h, err, sizeof(err)), 0);
	CHECK(w == 120 && h == 90);
	CHECK_EQ(rf__img_info(c, j, 22, &f, &w, &h, err, sizeof(err)), -EBADMSG);
	struct rf__img_opts o = opts(32, 1);
	uint8_t out[3 * 32 * 32], out2[3 * 32 * 32];
	decode_ok(c, &o, j, nj, 0, 0, out);
	struct rf__imgctx *fresh;
	CHECK_EQ(rf__imgctx_create(&fresh), 0);
	decode_ok(fresh, &o, j, nj, 0, 0, out2);
	CHECK(!memcmp(out, out2, sizeof(out)));
	for (size_t k = 0; k < np; k++) {
		cut = malloc(k ? k : 1);
		memcpy(cut, p, k);
		expect_fail(c, cut, k, -EBADMSG, "truncated PNG");
		free(cut);
	}
	/* random bytes, bare and behind each magic */
	for (int t = 0; t < 300; t++) {
		size_t n = 1 + (size_t)(t_splitmix64(&s) % 3000);
		uint8_t *r = malloc(n);
		for (size_t i = 0; i < n; i++)
			r[i] = (uint8_t)(t_splitmix64(&s) >> 56);
		if (t % 3 == 1 && n >= 3)
			memcpy(r, j, 3);
		if (t % 3 == 2 && n >= 8)
			memcpy(r, p, 8);
		expect_fail(c, r, n, 0, "random bytes");
		free(r);
	}
	/* a flipped CRC byte of IHDR (at 29..32) */
	p[30] ^= 0x20;
	expect_fail(c, p, np, -EBADMSG, "PNG with a bad CRC");
	CHECK(strstr(err, "CRC"));
	printf("a PNG with a flipped CRC byte: %s\n", err);
	p[30] ^= 0x20;
	/* sizes past the limits, refused before the pixels are allocated */
	rf__imgctx_destroy(fresh);
	CHECK_EQ(rf__imgctx_create(&fresh), 0);
	be32(p + 16, 100000);
	be32(p + 20, 100000);
	be32(p + 29, (uint32_t)crc32(0, p + 12, 17));
	expect_fail(fresh, p, np, -E2BIG, "PNG of 100000 x 100000");
	printf("%s\n", err);
	/* within the side, past the pixels: 2^28 (805 MB decoded), PIL's bomb too */
	be32(p + 16, 16384);
	be32(p + 20, 16384);
	be32(p + 29, (uint32_t)crc32(0, p + 12, 17));
	expect_fail(fresh, p, np, -E2BIG, "PNG of 16384 x 16384");
	CHECK(strstr(err, "178956970 pixels"));
	for (size_t i = 2; i + 9 < nj; i++)
		if (j[i] == 0xff && j[i + 1] == 0xc0) { /* SOF0: height, width at +5 */
			j[i + 5] = j[i + 7] = 0x9c; /* 40000 x 40000 (libjpeg's own limit: 65500) */
			j[i + 6] = j[i + 8] = 0x40;
			expect_fail(fresh, j, nj, -E2BIG, "JPEG of 40000 x 40000");
			printf("%s\n", err);
			j[i + 5] = j[i + 7] = 0x4e; /* 20000 x 20000 */
			j[i + 6] = j[i + 8] = 0x20;
			expect_fail(fresh, j, nj, -E2BIG, "JPEG of 20000 x 20000");
			nb++;
			break;
		}
	CHECK(nb == 1 && fresh->pix_cap == 0);
	rf__imgctx_destroy(fresh);
	expect_fail(c, NULL, 0, -EBADMSG, "no bytes");
	CHECK(strstr(err, "no bytes"));
	free(j);
	j = make_jpeg(px, 120, 90, TJPF_RGB, TJSAMP_420, 90, TJFLAG_PROGRESSIVE, &nj);
	uint8_t *many = repeat_scan(j, nj, 600, &nb); /* 602 scans: slow, and no photo */
	expect_fail(c, many, nb, -EBADMSG, "a progressive JPEG of 602 scans");
	CHECK(strstr(err, "more than 500 scans"));
	free(many);
	free(j);
	/* a benign warning (bytes before the end marker) is no error; nor trailing bytes */
	j = make_jpeg(px, 120, 90, TJPF_RGB, TJSAMP_420, 90, 0, &nj);
	uint8_t *wj = malloc(nj + 8);
	memcpy(wj, j, nj - 2);
	memcpy(wj + nj - 2, "\x12\x34\xff\xd9trail", 9);
	decode_ok(c, &o, wj, nj + 7, 0, 0, out);
	free(wj);
	/* extraneous bytes before a marker (libjpeg: a warning, the image whole; PIL reads
	 * it): decoded, not "the data ends before the end-of-image marker" */
	for (size_t i = 2; i + 1 < nj; i++)
		if (j[i] == 0xff && j[i + 1] == 0xc4) {  /* the first DHT */
			wj = malloc(nj + 4);
			memcpy(wj, j, i);
			memcpy(wj + i, "\x01\xff\x00\x04", 4);  /* an FF 00 among them */
			memcpy(wj + i + 4, j + i, nj - i);
			decode_ok(c, &o, wj, nj + 4, 0, 0, out);
			break;
		}
	o.size = 0;
	CHECK_EQ(rf__img_decode(c, &o, wj, nj + 4, 0, 0, out, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "size 0"));
	free(wj);
	free(j);
	free(p);
	free(px);
	printf("corrupt: cut anywhere, random, bad CRC, too large, empty: refused with a message\n");
}

/* ---- threads: a context each gives the samples one thread gives, in any order ---- */

struct tjob {
	const uint8_t *img[2];
	size_t n[2];
	const uint8_t *want; /* (64, 3, 48, 48) */
	int ok;
};

/* A JPEG that uses a quantization table it does not define (its DQT's table 1
 * relabelled 2) is refused -- also right after a JPEG that defines table 1 was decoded
 * on the same context: libjpeg kept an image's tables for the next one, which then
 * decoded with them (its pixels, and whether it decoded at all, depended on what the
 * worker had decoded before; found by fuzz-image's decode-twice oracle). */
static void test_table_carryover(struct rf__imgctx *c)
{
	uint8_t *px = smooth(64, 48), *j, *bad;
	size_t nj, pos = 2;
	int relabelled = 0;
	struct rf__img_opts o = opts(32, 0);
	uint8_t out[3 * 32 * 32];
	struct rf__imgctx *fresh;

	j = make_jpeg(px, 64, 48, TJPF_RGB, TJSAMP_420, 90, 0, &nj);
	bad = malloc(nj);
	memcpy(bad, j, nj);
	while (pos + 4 <= nj && bad[pos] == 0xFF && bad[pos + 1] != 0xDA) {
		size_t len = (size_t)bad[pos + 2] << 8 | bad[pos + 3], q = pos + 4;
		if (bad[pos + 1] == 0xDB)
			while (q < pos + 2 + len) {
				unsigned pq = bad[q] >> 4;
				if ((bad[q] & 15) == 1) {
					bad[q] = (uint8_t)(pq << 4 | 2);
					relabelled++;
				}
				q += 1 + 64 * (pq ? 2 : 1);
			}
		pos += 2 + len;
	}
	CHECK_EQ(relabelled, 1);
	CHECK_EQ(rf__imgctx_create(&fresh), 0);
	expect_fail(fresh, bad, nj, -EBADMSG, "a JPEG without its table 1, fresh");
	printf("a JPEG using a table it does not define: %s\n", err);
	decode_ok(c, &o, j, nj, 0, 0, out);
	expect_fail(c, bad, nj, -EBADMSG, "a JPEG without its table 1, after one with it");
	decode_ok(c, &o, j, nj, 0, 0, out);
	rf__imgctx_destroy(fresh);
	free(bad);
	free(j);
	free(px);
}

static void *thread_run(void *arg)
{
	struct tjob *j = arg;
	struct rf__img_opts o = opts(48, 1);
	struct rf__imgctx *c;
	uint8_t out[3 * 48 * 48];

	o.hflip = 1;
	j->ok = rf__imgctx_create(&c) == 0;
	for (uint64_t i = 64; j->ok && i-- > 0;)
		j->ok = rf__img_decode(c, &o, j->img[i & 1], j->n[i & 1], 5, i, out, NULL, 0) ==
				0 &&
			!memcmp(out, j->want + i * sizeof(out), sizeof(out));
	rf__imgctx_destroy(c);
	return NULL;
}

static void test_threads(struct rf__imgctx *c)
{
	uint8_t *a = smooth(300, 260), *b = noise(150, 170, 3), *want = malloc(64 * 3 * 48 * 48);
	struct tjob j[4];
	pthread_t t[4];
	struct rf__img_opts o = opts(48, 1);

	CHECK(want);
	o.hflip = 1;
	j[0].img[0] = make_jpeg(a, 300, 260, TJPF_RGB, TJSAMP_420, 90, 0, &j[0].n[0]);
	j[0].img[1] = rgb_png(b, 150, 170, &j[0].n[1]);
	j[0].want = want;
	for (uint64_t i = 0; i < 64; i++)
		decode_ok(c, &o, j[0].img[i & 1], j[0].n[i & 1], 5, i, want + i * 3 * 48 * 48);
	for (int k = 1; k < 4; k++)   /* before any thread writes its j->ok */
		j[k] = j[0];
	for (int k = 0; k < 4; k++)
		CHECK(pthread_create(&t[k], NULL, thread_run, &j[k]) == 0);
	for (int k = 0; k < 4; k++) {
		CHECK(pthread_join(t[k], NULL) == 0);
		CHECK(j[k].ok);
	}
	free((void *)j[0].img[0]);
	free((void *)j[0].img[1]);
	free(a);
	free(b);
	free(want);
	printf("threads: 4 contexts at once, records in reverse: the samples of one\n");
}

int main(void)
{
	struct rf__imgctx *c, *c2;

	CHECK_EQ(rf__imgctx_create(&c), 0);
	test_crop();
	test_sniff_info(c);
	test_solid_jpeg(c);
	test_flip(c);
	test_reference(c);
	test_constant_gradient(c);
	test_formats(c);
	test_dct(c);
	test_roi(c);
	test_corrupt(c);
	test_table_carryover(c);
	test_threads(c);
	/* a context that has seen errors and one that has not give the same sample */
	CHECK_EQ(rf__imgctx_create(&c2), 0);
	uint8_t *px = smooth(300, 260), a[3 * 64 * 64], b[3 * 64 * 64];
	size_t n;
	uint8_t *j = make_jpeg(px, 300, 260, TJPF_RGB, TJSAMP_420, 90, 0, &n);
	struct rf__img_opts o = opts(64, 1);
	o.hflip = 1;
	decode_ok(c, &o, j, n, 4, 5, a);
	decode_ok(c2, &o, j, n, 4, 5, b);
	CHECK(!memcmp(a, b, sizeof(a)));
	free(px);
	free(j);
	rf__imgctx_destroy(c);
	rf__imgctx_destroy(c2);
	rf__imgctx_destroy(NULL);
	printf("test-image: all passed\n");
	return 0;
}
