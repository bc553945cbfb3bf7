/* test-loader-augment -- random crop and flip as the loader gathers (opts.crop_pad,
 * opts.hflip). Every row of every batch must be the record at its position of the
 * epoch's order (rf_loader_order), cropped and flipped exactly as rf_loader_augment_of
 * says for (seed, epoch, record) -- checked against an independent transform written
 * here from the documented definition (torchvision's RandomCrop(padding) then
 * RandomHorizontalFlip). So the draw cannot depend on the batch, the shard, the read
 * mode or a seek: cases run with chunked reads, in memory with two shards, 2-D and
 * 3-D images, and from a seek into the epoch, as f32 rows and as u8 batches in NCHW
 * and NHWC. The draws must also look random: about
 * half the records flipped, every offset in [-pad, pad] drawn, and a record's draw
 * changing from one epoch to the next. A record that is not an image is refused. */
#include "test-loader-util.h"

/* The definition: pad by p zeros, take the H x W window at (p+dy, p+dx), flip. */
static uint8_t ref_pixel(const uint8_t *img, unsigned c, unsigned H, unsigned W, unsigned y,
			 unsigned x, int dy, int dx, int flip)
{
	unsigned xc = flip ? W - 1 - x : x;     /* the flip is of the cropped image */
	long sy = (long)y + dy, sx = (long)xc + dx;

	if (sy < 0 || sy >= (long)H || sx < 0 || sx >= (long)W)
		return 0;
	return img[((size_t)c * H + (size_t)sy) * W + (size_t)sx];
}

static const char *make_images(const char *name, uint64_t count, unsigned ndim,
			       const uint32_t *shape)
{
	const char *path = t_path(name);
	struct rf_rec_layout lay = { 0 };
	struct rf_rec_writer *w;
	size_t P = 1;

	lay.dtype = RF_DS_DT_U8;
	lay.ndim = ndim;
	for (unsigned d = 0; d < ndim; d++)
		P *= (lay.shape[d] = shape[d]);
	lay.label_kind = RF_LABEL_U8;
	lay.num_classes = 10;
	uint8_t *buf = malloc(P);
	CHECK(buf);
	CHECK_OPEN(rf_rec_writer_open(&w, path, &lay, RF_REC_OVERWRITE), rf_last_error());
	for (uint64_t i = 0; i < count; i++) {
		for (size_t k = 0; k < P; k++)
			buf[k] = (uint8_t)(1 + (i * 131 + k * 7 + (i >> 3)) % 255);  /* never 0 */
		CHECK_OPEN(rf_rec_writer_append(w, buf, (int32_t)(i % 10)), rf_last_error());
	}
	CHECK_OPEN(rf_rec_writer_finish(w), rf_last_error());
	free(buf);
	return path;
}

struct tally {
	uint64_t rows, flips, moved;
	uint64_t dy[129];
	int *prev;                 /* per record: the last epoch's draw, packed */
	uint64_t same;             /* records whose draw did not change between epochs */
};

static void check_batch(const struct rf_dataset *ds, const struct rf_loader_opts *o,
			const struct rf_batch *b, const uint64_t *order, uint64_t pos,
			struct tally *ta)
{
	unsigned C = ds->ndim == 3 ? ds->shape[0] : 1;
	unsigned H = ds->shape[ds->ndim - 2], W = ds->shape[ds->ndim - 1];
	uint8_t *img = malloc(ds->payload_bytes);
	int32_t lab;

	CHECK(img);
	for (unsigned k = 0; k < b->nshards; k++) {
		const float *x = b->x[k]->data;
		const uint8_t *xu = b->x[k]->data;       /* x_dtype u8 */
		int u8 = b->x[k]->dtype == RF_U8, hwc = b->x[k]->layout == RF_LAYOUT_NHWC;
		CHECK(!hwc || (b->x[k]->ndim == 4 && b->x[k]->shape[1] == C));
		for (unsigned j = 0; j < b->shard_n[k]; j++, pos++) {
			uint64_t rec = order[pos];
			int dy, dx, flip;
			CHECK(rf_dataset_read_record(ds, rec, img, &lab) == 0);
			rf_loader_augment_of(o, b->epoch, rec, &dy, &dx, &flip);
			CHECK(dy >= -(int)o->crop_pad && dy <= (int)o->crop_pad);
			CHECK(dx >= -(int)o->crop_pad && dx <= (int)o->crop_pad);
			for (unsigned c = 0; c < C; c++)
				for (unsigned y = 0; y < H; y++)
					for (unsigned xx = 0; xx < W; xx++) {
						size_t q = ((size_t)c * H + y) * W + xx;
						size_t qh = ((size_t)y * W + xx) * C + c;
						size_t r0 = (size_t)j * ds->payload_bytes;
						long got = !u8 ? lrintf(x[r0 + q] * 255.0f) :
							   hwc ? xu[r0 + qh] : xu[r0 + q];
						uint8_t want = ref_pixel(img, c, H, W, y, xx, dy, dx, flip);
						if (got != want) {
							fprintf(stderr, "epoch %" PRIu64 " record %" PRIu64
								" (dy %d dx %d flip %d): pixel (%u,%u,%u) "
								"is %ld, want %u\n", b->epoch, rec, dy, dx,
								flip, c, y, xx, got, want);
							exit(1);
						}
					}
			int packed = ((dy + 64) << 16) | ((dx + 64) << 1) | flip;
			if (b->epoch > 0 && ta->prev[rec] == packed)
				ta->same++;
			ta->prev[rec] = packed;
			ta->rows++;
			ta->flips += (uint64_t)flip;
			ta->moved += dy || dx;
			ta->dy[dy + 64]++;
		}
	}
	free(img);
}

/* Epochs 0 and 1 whole, then epoch 2 from batch `seek` on. */
static void run_case(const char *what, const char *path, struct rf_loader_opts o, unsigned ndev,
		     uint64_t seek)
{
	struct rf_dataset ds;
	struct tl_env v;
	struct rf_loader *l;
	struct tally ta = { 0 };

	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, 0), rf_last_error());
	uint64_t *order = malloc(ds.count * sizeof(*order));
	ta.prev = calloc(ds.count, sizeof(*ta.prev));
	CHECK(order && ta.prev);
	tl_open(&v, ndev);
	o.devices = v.dev;
	o.ndevices = ndev;
	CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
	for (uint64_t ep = 0; ep < 3; ep++) {
		uint64_t pos = 0;
		struct rf_batch b;
		if (ep == 2) {
			CHECK(rf_loader_seek(l, 2, seek) == 0);
			pos = seek * o.batch;
		}
		CHECK(rf_loader_order(l, ep, order, ds.count) == 0);
		while (rf_loader_next(l, &b) == 1) {
			CHECK(rf_loader_wait(l, &b) == 0);
			check_batch(&ds, &o, &b, order, pos, &ta);
			pos += b.global_n;
		}
		CHECK_EQ(pos, ds.count);
	}
	uint64_t n2 = 2 * ds.count, drawn = 0;
	for (int d = -(int)o.crop_pad; d <= (int)o.crop_pad; d++)
		drawn += ta.dy[d + 64] > 0;
	printf("%-34s %" PRIu64 " rows: %.3f flipped, %.3f shifted, %" PRIu64 "/%u offsets "
	       "drawn, %" PRIu64 " of %" PRIu64 " draws repeated across epochs\n", what, ta.rows,
	       (double)ta.flips / (double)ta.rows, (double)ta.moved / (double)ta.rows, drawn,
	       2 * o.crop_pad + 1, ta.same, ta.rows - ds.count);
	CHECK_EQ(ta.rows, n2 + ds.count - seek * o.batch);
	if (o.hflip)
		CHECK(ta.flips > ta.rows * 2 / 5 && ta.flips < ta.rows * 3 / 5);
	else
		CHECK_EQ(ta.flips, 0);
	CHECK_EQ(drawn, 2 * o.crop_pad + 1);
	/* a draw repeats by chance with probability q = 1/((2p+1)^2 (flip ? 2 : 1)) */
	double q = 1.0 / ((2.0 * o.crop_pad + 1) * (2.0 * o.crop_pad + 1) * (o.hflip ? 2 : 1));
	CHECK((double)ta.same < (double)(ta.rows - ds.count) * (1.5 * q + 0.02));
	rf_loader_destroy(l);
	tl_close(&v);
	rf_dataset_close(&ds);
	free(order);
	free(ta.prev);
}

int main(void)
{
	struct rf_loader_opts o = { 0 };
	struct rf_dataset ds;
	struct tl_env v;
	struct rf_loader *l;
	const uint32_t s2[2] = { 9, 11 }, s3[3] = { 3, 8, 6 };

	t_mkdir("loader-augment");
	const char *p2 = make_images("hw.rfrec", 1200, 2, s2);
	const char *p3 = make_images("chw.rfrec", 700, 3, s3);

	o.batch = 64;
	o.seed = 11;
	o.crop_pad = 3;
	o.hflip = 1;
	o.chunk_bytes = 4 << 10;
	o.window_chunks = 2;
	run_case("(9,11) pad 3 + flip, chunks", p2, o, 1, 7);
	o.in_memory = 1;
	run_case("(9,11) pad 3 + flip, memory, 2 shards", p2, o, 2, 3);
	o.in_memory = 0;
	o.crop_pad = 2;
	o.hflip = 0;
	o.batch = 50;
	run_case("(3,8,6) pad 2, no flip", p3, o, 2, 13);
	o.crop_pad = 0;
	o.hflip = 1;
	run_case("(3,8,6) flip only", p3, o, 1, 1);
	/* u8 batches, NCHW and NHWC (interleaved by the gather, from its scratch) */
	o.x_dtype = RF_U8;
	o.crop_pad = 2;
	run_case("(3,8,6) pad 2 + flip, u8", p3, o, 1, 2);
	o.x_layout = RF_LAYOUT_NHWC;
	run_case("(3,8,6) pad 2 + flip, u8 NHWC", p3, o, 2, 5);
	o.crop_pad = 0;
	o.hflip = 0;
	run_case("(3,8,6) u8 NHWC, no augmentation", p3, o, 1, 0);
	o.hflip = 1;
	run_case("(9,11) flip, u8 NHWC (one channel)", p2, o, 1, 3);
	o.x_dtype = 0;
	o.x_layout = RF_LAYOUT_ROWMAJOR;

	/* a record that is not an image is refused, naming the file */
	const char *flat = tl_make_rfrec("flat.rfrec", 100, 30, RF_LABEL_U8);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, flat, 0), rf_last_error());
	tl_open(&v, 1);
	o.devices = v.dev;
	o.ndevices = 1;
	o.crop_pad = 2;
	CHECK(rf_loader_create(&l, v.e, &ds, &o) == -EINVAL);
	printf("1-D records refused: %s\n", rf_last_error());
	CHECK(strstr(rf_last_error(), "flat.rfrec") && strstr(rf_last_error(), "(H, W)"));
	o.crop_pad = 65;
	rf_dataset_close(&ds);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, p2, 0), rf_last_error());
	CHECK(rf_loader_create(&l, v.e, &ds, &o) == -EINVAL);
	CHECK(strstr(rf_last_error(), "at most 64"));
	rf_dataset_close(&ds);
	tl_close(&v);
	return 0;
}
