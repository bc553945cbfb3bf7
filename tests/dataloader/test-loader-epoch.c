/* test-loader-epoch -- every record exactly once per epoch, payloads and labels paired.
 * For each way records reach a batch -- small records read in chunks through the ring
 * (.rfrec, 100-byte records, and a raw IDX pair whose labels live in the second file),
 * large records read one aligned span each (70,000-byte records), and records served
 * from memory (opts.in_memory, and a gzip'd IDX pair) -- one epoch is pushed without
 * waiting, a host op per batch decodes the f32 rows back to bytes and matches each
 * against rf_dataset_read_record (payload checksum and label), every record must be
 * seen exactly once, and the order must be the one rf_loader_order reports. Two
 * epochs run per case (the slots are reused across the epoch boundary; one case runs
 * under an engine cap of 6 ops in flight, so pushes turn the reactor), and the
 * device memory in use after them is what the loader allocated at create. */
#include <limits.h>
#include <stdint.h>

#include "test-loader-util.h"

static void run_case(const char *what, const struct rf_dataset *ds, struct rf_loader_opts o,
		     int expect_mode)
{
	struct tl_env v;
	struct rf_loader *l;
	struct tl_run r;
	struct rf_loader_stats st;
	uint64_t *ord = malloc(ds->count * sizeof(*ord));

	CHECK(ord);
	tl_open(&v, 1);
	o.devices = v.dev;
	o.ndevices = 1;
	CHECK_OPEN(rf_loader_create(&l, v.e, ds, &o), rf_last_error());
	rf_loader_get_stats(l, &st);
	CHECK_EQ(st.mode, expect_mode);
	struct rf_mem_stats m0, m1;
	rf_device_mem_stats(v.dev[0], &m0);
	tl_run_init(&r, ds);
	for (uint64_t ep = 0; ep < 2; ep++) {
		tl_epoch(&v, l, &r, NULL, NULL);
		tl_expect_complete(&r);
		CHECK(rf_loader_order(l, ep, ord, ds->count) == 0);
		for (uint64_t i = 0; i < ds->count; i++)
			if (ord[i] != r.order[i]) {
				fprintf(stderr, "%s: epoch %" PRIu64 " position %" PRIu64 ": got record %"
					PRIu64 ", rf_loader_order says %" PRIu64 "\n", what, ep, i,
					r.order[i], ord[i]);
				exit(1);
			}
	}
	/* resuming inside an epoch: after a seek to batch s of epoch 5, the records of
	 * positions s*batch.. each once, in that epoch's order, and no others; a seek to
	 * the epoch's end gives no batch; past it is refused */
	uint64_t nb = rf_loader_batches_per_epoch(l);
	for (uint64_t s = nb / 2; s <= nb; s += nb - nb / 2) {
		CHECK(rf_loader_seek(l, 5, s) == 0);
		r.start = s;
		r.bsz = o.batch;
		tl_epoch(&v, l, &r, NULL, NULL);
		CHECK(rf_loader_order(l, 5, ord, ds->count) == 0);
		for (uint64_t i = 0; i < ds->count; i++)
			if (r.seen[ord[i]] != (i >= s * o.batch)) {
				fprintf(stderr, "%s: seek to batch %" PRIu64 ": position %" PRIu64
					" (record %" PRIu64 ") seen %u times\n", what, s, i, ord[i],
					r.seen[ord[i]]);
				exit(1);
			}
		CHECK_EQ(r.records, ds->count - (s * o.batch < ds->count ? s * o.batch : ds->count));
	}
	r.start = 0;
	CHECK(rf_loader_seek(l, 5, nb + 1) == -ERANGE);
	CHECK(strstr(rf_last_error(), "batch"));
	/* the pool allocated at create is all the device memory it ever uses */
	rf_device_mem_stats(v.dev[0], &m1);
	CHECK_EQ(m1.in_use, m0.in_use);
	CHECK_EQ(m1.allocs, m0.allocs);
	rf_loader_get_stats(l, &st);
	printf("%-28s mode %d: %" PRIu64 " records x 2 epochs, %" PRIu64 " reads, direct %d, "
	       "registered %d, %zu KiB of buffers, R %" PRIu64 " W %u, %u fetch units\n", what,
	       st.mode, ds->count, st.reads, st.direct, st.registered, st.buffer_bytes >> 10,
	       st.chunk_records, st.window_chunks, st.fetch_units);
	if (expect_mode != 0)
		CHECK(st.reads > 0);
	CHECK_EQ(st.read_errors, 0);
	rf_loader_destroy(l);
	tl_run_free(&r);
	tl_close(&v);
	free(ord);
}

static uint8_t fill_img(uint64_t i)
{
	return (uint8_t)(i * 2654435761u >> 13);
}

static uint8_t fill_lab(uint64_t i)
{
	return (uint8_t)((i * 7 + 3) % 10);
}

int main(void)
{
	struct rf_dataset ds;
	struct rf_loader_opts o = { 0 };
	const char *small, *large;

	t_mkdir("loader-epoch");
	small = tl_make_rfrec("small.rfrec", 5000, 100, RF_LABEL_I32);
	large = tl_make_rfrec("large.rfrec", 150, 70000, RF_LABEL_U8);

	/* small records, chunks: 16 KiB chunks (160 records), windows of 4 chunks */
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, small, 0), rf_last_error());
	o.batch = 64;
	o.seed = 7;
	o.chunk_bytes = 16 << 10;
	o.window_chunks = 4;
	o.order = RF_LOADER_ORDER_WINDOWED; /* the mode under test: chunks in windows */
	run_case("rfrec small, chunks", &ds, o, 1);
	/* batch larger than a window: a batch spans several groups */
	o.batch = 700;
	o.prefetch = 3;
	run_case("rfrec small, big batches", &ds, o, 1);
	/* a tight engine cap: pushes past it turn the reactor (bounded asynchrony) */
	tl_max_inflight = 6;
	run_case("rfrec small, engine cap 6", &ds, o, 1);
	tl_max_inflight = 0;
	o.prefetch = 0;
	/* one batch is the whole file: the windows are widened to hold it */
	o.batch = 5000;
	run_case("rfrec small, batch = file", &ds, o, 1);
	o.batch = 4999; /* and a last batch of 1 */
	run_case("rfrec small, batch = file-1", &ds, o, 1);
	/* chunks and windows past the file (a size_t's worth: the buffers were sized by
	 * them and overflowed): one chunk of the whole file, one window */
	o.batch = 64;
	o.chunk_bytes = SIZE_MAX / 2;
	o.window_chunks = UINT_MAX;
	run_case("rfrec small, chunk and window past the file", &ds, o, 1);
	o.chunk_bytes = 16 << 10;
	o.window_chunks = 1u << 30;
	run_case("rfrec small, windows of 2^30 chunks", &ds, o, 1);
	o.window_chunks = 4;
	/* in memory */
	o.batch = 64;
	o.in_memory = 1;
	run_case("rfrec small, in memory", &ds, o, 0);
	o.in_memory = 0;
	/* buffered */
	o.buffered = 1;
	run_case("rfrec small, buffered", &ds, o, 1);
	o.buffered = 0;
	rf_dataset_close(&ds);

	/* large records: a read per record, batch 16, last batch 150 % 16 = 6 */
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, large, 0), rf_last_error());
	o.batch = 16;
	run_case("rfrec large, per record", &ds, o, 2);
	rf_dataset_close(&ds);

	/* raw IDX pair on disk (labels in the second file), 3000 images of 12x10 */
	{
		uint32_t di[3] = { 3000, 12, 10 }, dl[1] = { 3000 };
		size_t ni, nl;
		uint8_t *img = t_idx(0x08, 3, di, fill_img, &ni), *lab = t_idx(0x08, 1, dl, fill_lab, &nl);
		t_write(t_path("img-idx3-ubyte"), img, ni);
		t_write(t_path("lab-idx1-ubyte"), lab, nl);
		t_write_gz(t_path("img-idx3-ubyte.gz"), img, ni);
		t_write_gz(t_path("lab-idx1-ubyte.gz"), lab, nl);
		free(img);
		free(lab);
		CHECK_OPEN(rf_dataset_open_idx_pair(&ds, t_path("img-idx3-ubyte"),
						    t_path("lab-idx1-ubyte"), 10, 0), rf_last_error());
		o.batch = 50;
		o.chunk_bytes = 8 << 10;
		run_case("IDX pair raw, chunks", &ds, o, 1);
		rf_dataset_close(&ds);
		CHECK_OPEN(rf_dataset_open_idx_pair(&ds, t_path("img-idx3-ubyte.gz"),
						    t_path("lab-idx1-ubyte.gz"), 10, 0), rf_last_error());
		run_case("IDX pair gzip, memory", &ds, o, 0);
		rf_dataset_close(&ds);
	}
	return 0;
}
