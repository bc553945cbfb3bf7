/* test-loader-queue -- the loader's reads wait in one queue bounded in bytes
 * (rf_loader_opts.read_bytes), and the bound changes nothing that comes out:
 * - for per-record reads (large records) and chunk reads (small records), with one
 *   device and prefetch 1, and two devices and prefetch 3, and bounds from one read at
 *   a time to no bound at all, two epochs are complete, every row holds its record's bytes and label,
 *   and the order is the same as with the default bound;
 * - unshuffled, records next to each other share reads of up to 1 MiB, with the same
 *   bytes coming out;
 * - the stats keep the bound: one read at a time under read_bytes 1; never more bytes
 *   outstanding than the bound (or one read, when a read is larger); the default
 *   keeps many reads in flight;
 * - batches hold exactly the bits of x = (u8 * scale - mean) / std rounded step by
 *   step (the gather decodes host batches itself: the multiply-only, table and
 *   formula paths of common/decode.c);
 * - batches asked in another format (opts.x_dtype bf16/f16, x_layout NHWC: decoded by
 *   an op into the format a model's first layer reads) hold the formula's f32 rounded
 *   to nearest even, at the logical places of (n, c, h, w), from records of (h, w) and
 *   (c, h, w); 1-D records and unknown formats are refused naming them.
 * - reads in flight never outnumber the queue depth of the disk the file is on (its
 *   sysfs nr_requests, read here by this test's own code): with 1 GiB allowed in
 *   flight and up to 3000 one-record reads queued (3000 went out before), exactly
 *   that many go out (a batch's ~1000 at once where the file is on no block device:
 *   a tmpfs, an overlay);
 * Failing reads under a bound of one read: test-loader-fault; slots a consumer keeps
 * (rf_loader_ref): test-loader-slots. */
#include <fcntl.h>
#include <unistd.h>

#include "test-loader-util.h"

struct qrun {
	uint64_t *order;          /* two epochs' orders */
	struct rf_loader_stats st;
};

static void run(const char *path, struct rf_loader_opts o, unsigned ndev, struct qrun *q)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l;
	struct tl_run r;

	tl_open(&v, ndev);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, 0), rf_last_error());
	tl_run_init(&r, &ds);
	o.devices = v.dev;
	o.ndevices = ndev;
	CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
	q->order = malloc(2 * ds.count * sizeof(*q->order));
	CHECK(q->order);
	for (int ep = 0; ep < 2; ep++) {
		tl_epoch(&v, l, &r, NULL, NULL);
		tl_expect_complete(&r);
		memcpy(q->order + ep * ds.count, r.order, ds.count * sizeof(*q->order));
	}
	rf_loader_get_stats(l, &q->st);
	rf_loader_destroy(l);
	tl_run_free(&r);
	rf_dataset_close(&ds);
	tl_close(&v);
}

/* Bounds from one read at a time to none: same batches, bound kept. */
static void bounds(const char *path, struct rf_loader_opts o, size_t one_read)
{
	static const size_t rb[] = { 1, 100000, 1 << 20, 0, (size_t)1 << 30 };
	struct qrun ref;
	uint64_t n;
	struct rf_dataset ds;

	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, 0), rf_last_error());
	n = ds.count;
	rf_dataset_close(&ds);
	run(path, o, 1, &ref);
	CHECK_EQ(ref.st.read_limit, 8u << 20);
	CHECK(ref.st.max_reads_inflight > 1);
	for (unsigned ndev = 1, pf = 1; ndev <= 2; ndev++, pf += 2)
		for (size_t i = 0; i < sizeof(rb) / sizeof(rb[0]); i++) {
			struct rf_loader_opts oo = o;
			struct qrun q;
			oo.read_bytes = rb[i];
			oo.prefetch = pf;
			run(path, oo, ndev, &q);
			printf("%s: devices %u prefetch %u read_bytes %zu: %" PRIu64 " reads, at "
			       "most %u (%zu bytes) in flight, %" PRIu64 " waited\n", t_base(path),
			       ndev, pf, rb[i], q.st.reads, q.st.max_reads_inflight,
			       q.st.max_bytes_inflight, q.st.read_queued);
			CHECK(!memcmp(q.order, ref.order, 2 * n * sizeof(*q.order)));
			CHECK_EQ(q.st.read_limit, rb[i] ? rb[i] : 8u << 20);
			if (rb[i] == 1)
				CHECK_EQ(q.st.max_reads_inflight, 1);
			/* beyond the bound only while one read is alone in flight (records next
			 * to each other in a batch share a read: one may exceed one_read) */
			CHECK(q.st.largest_read >= 4096);
			CHECK(q.st.max_bytes_inflight <= (q.st.read_limit > q.st.largest_read ?
							  q.st.read_limit : q.st.largest_read));
			if (q.st.read_limit < one_read * 2)
				CHECK(q.st.read_queued > 0);
			free(q.order);
		}
	free(ref.order);
}

/* Per-record reads (the uniform order of small records) with no bound in bytes to
 * speak of: the disk's queue depth bounds them. */
static void depth_cap(const char *path)
{
	struct rf_loader_opts o = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	unsigned depth;
	struct qrun q;

	CHECK(fd >= 0);
	depth = t_disk_depth(fd);
	close(fd);

	o.batch = 1000;
	o.prefetch = 2;
	o.seed = 3;
	o.read_bytes = (size_t)1 << 30;
	run(path, o, 1, &q);
	printf("%s: uniform order, batches of 1000, 1 GiB allowed: at most %u reads in flight (the "
	       "disk's queue depth: %u)\n", t_base(path), q.st.max_reads_inflight, depth);
	CHECK(q.st.reads > 2 * 3000 * 9 / 10);   /* a read a record (a few share one) */
	if (depth && depth < 1000)
		CHECK_EQ(q.st.max_reads_inflight, depth);
	else if (depth)    /* a deep queue (NVMe: 1023): within it */
		CHECK(q.st.max_reads_inflight <= depth);
	else               /* no disk: a batch's reads go out at once */
		CHECK(q.st.max_reads_inflight > 900);
	free(q.order);
}

/* One batch's rows against the formula, bit for bit. */
static void exact(const char *path, float scale, float mean, float std, unsigned ndev)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l;
	struct rf_loader_opts o = { 0 };
	struct rf_batch b;
	uint64_t *order;
	uint8_t *rec;

	tl_open(&v, ndev);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, 0), rf_last_error());
	o.batch = 8;
	o.seed = 5;
	o.scale = scale;
	o.mean = mean;
	o.std = std;
	o.devices = v.dev;
	o.ndevices = ndev;
	o.read_bytes = 1;
	CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
	order = malloc(ds.count * sizeof(*order));
	rec = malloc(ds.payload_bytes);
	CHECK(order && rec);
	CHECK(rf_loader_next(l, &b) == 1);
	CHECK(rf_loader_wait(l, &b) == 0);
	CHECK(rf_loader_order(l, 0, order, ds.count) == 0);
	unsigned row = 0;
	for (unsigned k = 0; k < b.nshards; k++) {
		const float *x = b.x[k]->data;
		for (unsigned j = 0; j < b.shard_n[k]; j++, row++) {
			CHECK(rf_dataset_read_record(&ds, order[row], rec, NULL) == 0);
			for (size_t q = 0; q < ds.payload_bytes; q++) {
				volatile float t = (float)rec[q] * scale;
				volatile float u = t - mean;
				float want = u / std;
				if (memcmp(&x[(size_t)j * ds.payload_bytes + q], &want, sizeof(want))) {
					fprintf(stderr, "%s: scale %g mean %g std %g: row %u byte %zu: %.9g, "
						"want %.9g\n", t_base(path), scale, mean, std, row, q,
						x[(size_t)j * ds.payload_bytes + q], want);
					exit(1);
				}
			}
		}
	}
	CHECK_EQ(row, 8);
	free(order);
	free(rec);
	rf_loader_destroy(l);
	rf_dataset_close(&ds);
	tl_close(&v);
}

/* f to bf16 or f16 (round to nearest even) and back */
static float round_to(enum rf_tdtype dt, float f)
{
	if (dt == RF_F16) {     /* (no _Float16 in every compiler that builds this) */
		float a = fabsf(f);
		uint32_t u;
		if (a < 6.103515625e-05f) {     /* subnormal: multiples of 2^-24 */
			a = nearbyintf(a * 16777216.0f) / 16777216.0f;
		} else {                        /* 10 bits of mantissa kept, ties to even */
			memcpy(&u, &a, 4);
			u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
			memcpy(&a, &u, 4);
		}
		return f < 0 ? -a : a;  /* (no value here reaches f16's overflow) */
	}
	if (dt == RF_BF16) {
		uint32_t u;
		memcpy(&u, &f, 4);
		u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;   /* no NaN here */
		memcpy(&f, &u, 4);
	}
	return f;
}

/* A batch in dtype dt and layout lay: its logical values against the formula. */
static void formats(const char *path, enum rf_tdtype dt, enum rf_layout lay, unsigned ndev)
{
	const float scale = 1.0f / 255.0f, mean = 0.2860f, std = 0.3530f;
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l;
	struct rf_loader_opts o = { 0 };
	struct rf_batch b;
	uint64_t *order;
	uint8_t *rec;
	float *x;
	unsigned row = 0;

	tl_open(&v, ndev);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, 0), rf_last_error());
	o.batch = 8;
	o.seed = 3;
	o.scale = scale;
	o.mean = mean;
	o.std = std;
	o.devices = v.dev;
	o.ndevices = ndev;
	o.x_dtype = dt;
	o.x_layout = lay;
	CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
	order = malloc(ds.count * sizeof(*order));
	rec = malloc(ds.payload_bytes);
	x = malloc(8 * ds.payload_bytes * sizeof(float));
	CHECK(order && rec && x);
	for (int it = 0; it < 3; it++) {      /* past the prefetch: slots reused */
		int rn = rf_loader_next(l, &b);
		if (rn != 1)
			fprintf(stderr, "rf_loader_next: %d: %s\n", rn, rf_last_error());
		CHECK(rn == 1);
		CHECK(rf_loader_wait(l, &b) == 0);
	}
	CHECK(rf_loader_order(l, 0, order, ds.count) == 0);
	row = 16;
	for (unsigned k = 0; k < b.nshards; k++) {
		struct rf_tensor *t = b.x[k];
		CHECK_EQ(t->dtype, dt);
		CHECK_EQ(t->layout, lay);
		CHECK_EQ(t->ndim, lay == RF_LAYOUT_NHWC ? 4 : 1 + (int)ds.ndim);
		CHECK_EQ(t->shape[0], b.shard_n[k]);
		if (lay == RF_LAYOUT_NHWC)
			CHECK_EQ(t->shape[1], ds.ndim == 2 ? 1 : ds.shape[0]);
		CHECK_OK(rf_tensor_read_as(t, RF_F32, x));
		for (unsigned j = 0; j < b.shard_n[k]; j++, row++) {
			CHECK(rf_dataset_read_record(&ds, order[row], rec, NULL) == 0);
			for (size_t q = 0; q < ds.payload_bytes; q++) {
				volatile float a = (float)rec[q] * scale;
				volatile float u = a - mean;
				float want = round_to(dt, u / std), got = x[(size_t)j * ds.payload_bytes + q];
				if (memcmp(&got, &want, 4)) {
					fprintf(stderr, "%s as %s %s: row %u value %zu: %.9g, want %.9g\n",
						t_base(path), rf_tdtype_name(dt), rf_layout_name(lay), row,
						q, got, want);
					exit(1);
				}
			}
		}
	}
	CHECK_EQ(row, 24);
	free(order);
	free(rec);
	free(x);
	rf_loader_destroy(l);
	rf_dataset_close(&ds);
	tl_close(&v);
}

/* What a format request refuses before anything is allocated. */
static void format_refusals(const char *flat)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l = NULL;
	struct rf_loader_opts o = { 0 };

	tl_open(&v, 1);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, flat, 0), rf_last_error());
	o.batch = 8;
	o.devices = v.dev;
	o.ndevices = 1;
	o.x_layout = RF_LAYOUT_NHWC;
	CHECK_EQ(rf_loader_create(&l, v.e, &ds, &o), -EINVAL);
	CHECK(!l && strstr(rf_last_error(), "NHWC") && strstr(rf_last_error(), t_base(flat)));
	o.x_layout = (enum rf_layout)7;
	CHECK_EQ(rf_loader_create(&l, v.e, &ds, &o), -EINVAL);
	CHECK(strstr(rf_last_error(), "x_layout 7"));
	o.x_layout = RF_LAYOUT_ROWMAJOR;
	o.x_dtype = RF_I32;
	CHECK_EQ(rf_loader_create(&l, v.e, &ds, &o), -EINVAL);
	CHECK(strstr(rf_last_error(), "x_dtype"));
	rf_dataset_close(&ds);
	tl_close(&v);
}

int main(void)
{
	struct rf_loader_opts o = { 0 };
	const char *small, *large;

	t_mkdir("loader-queue");
	small = tl_make_rfrec("small.rfrec", 3000, 96, RF_LABEL_I32);   /* stride 100 */
	large = tl_make_rfrec("large.rfrec", 90, 70000, RF_LABEL_U8);   /* >= 64 KiB: one read each */

	o.batch = 16;
	o.seed = 7;
	bounds(large, o, 80 << 10);
	{
		struct rf_loader_opts u = o;
		struct qrun q;
		u.no_shuffle = 1;
		bounds(large, u, 80 << 10);
		run(large, u, 1, &q);
		printf("large.rfrec unshuffled: %" PRIu64 " reads for 180 records, the largest %zu "
		       "bytes\n", q.st.reads, q.st.largest_read);
		CHECK(q.st.reads < 180 / 4 && q.st.largest_read > 512 << 10 &&
		      q.st.largest_read <= 1 << 20);
		for (uint64_t i = 0; i < 2 * 90; i++)
			CHECK_EQ(q.order[i], i % 90);
		free(q.order);
	}
	o.batch = 64;
	o.chunk_bytes = 16 << 10;
	o.window_chunks = 4;
	bounds(small, o, 24 << 10);
	depth_cap(small);

	for (unsigned ndev = 1; ndev <= 2; ndev++) {
		exact(large, 1.0f / 255.0f, 0.0f, 1.0f, ndev);        /* the multiply alone */
		exact(large, 1.0f / 255.0f, 0.2860f, 0.3530f, ndev);  /* a table: 70000 >= 1024 */
		exact(small, 1.0f / 255.0f, 0.2860f, 0.3530f, ndev);  /* the formula */
		exact(small, 0.5f, 0.0f, 1.0f, ndev);
	}
	{
		static const uint32_t hw[2] = { 9, 11 }, chw[3] = { 3, 5, 7 };
		static const enum rf_tdtype dts[3] = { RF_F32, RF_BF16, RF_F16 };
		const char *img = tl_make_rfrec_shape("hw.rfrec", 60, 2, hw, RF_LABEL_I32);
		const char *img3 = tl_make_rfrec_shape("chw.rfrec", 60, 3, chw, RF_LABEL_I32);
		for (unsigned a = 0; a < 3; a++)
			for (int lay = 0; lay < 2; lay++)
				for (unsigned ndev = 1; ndev <= 2; ndev++) {
					formats(img, dts[a], (enum rf_layout)lay, ndev);
					formats(img3, dts[a], (enum rf_layout)lay, ndev);
				}
		format_refusals(small);
		printf("batches in f32/bf16/f16, row-major and NHWC: the formula's values\n");
	}
	return 0;
}
