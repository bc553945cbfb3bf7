/* test-loader-fmnist -- one full Fashion-MNIST training epoch through the loader
 * matches a direct read. The gzip'd IDX pair from /usr/share/datasets/fashion-mnist
 * (skip, 77, if missing) is served from memory; the same data decompressed into raw
 * IDX files is then read from disk through the ring (O_DIRECT chunks, labels from
 * the second file). Each batch's rows, decoded back to bytes, must equal the records
 * rf_dataset_read_record returns for those positions of the order, labels included,
 * and the order-independent checksum over the epoch (sum of per-record hashes and
 * labels) must equal the one over the file. */
#include "test-loader-util.h"

#define DIR "/usr/share/datasets/fashion-mnist"

static uint64_t epoch_sum(const struct tl_run *r)
{
	uint64_t s = 0;
	for (uint64_t p = 0; p < r->ds->count; p++)
		s += r->ref[r->order[p]] * 3 + (uint64_t)r->ref_label[r->order[p]];
	return s;
}

static void one(const char *img, const char *lab, int order, int mode)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l;
	struct rf_loader_opts o = { 0 };
	struct rf_loader_stats st;
	struct tl_run r;
	uint64_t direct = 0, t0;

	tl_open(&v, 1);
	CHECK_OPEN(rf_dataset_open_idx_pair(&ds, img, lab, 10, 0), rf_last_error());
	CHECK_EQ(ds.count, 60000);
	tl_run_init(&r, &ds);
	for (uint64_t i = 0; i < ds.count; i++)
		direct += r.ref[i] * 3 + (uint64_t)r.ref_label[i];
	o.batch = 256;
	o.seed = 42;
	o.order = order;
	o.devices = v.dev;
	o.ndevices = 1;
	CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
	rf_loader_get_stats(l, &st);
	CHECK_EQ(st.mode, mode);
	t0 = rf_now_ns();
	CHECK_EQ(tl_epoch(&v, l, &r, NULL, NULL), 235);
	tl_expect_complete(&r);
	CHECK_EQ(epoch_sum(&r), direct);
	CHECK_EQ(r.b[234].b.n, 60000 - 234 * 256);
	rf_loader_get_stats(l, &st);
	printf("%s: 60000 records in 235 batches, mode %d, %" PRIu64 " reads, checksum %016" PRIx64
	       " matches (%.2f s with checking)\n", t_base(img), st.mode, st.reads, direct,
	       (double)(rf_now_ns() - t0) / 1e9);
	rf_loader_destroy(l);
	tl_run_free(&r);
	rf_dataset_close(&ds);
	tl_close(&v);
}

int main(void)
{
	const char *img = DIR "/train-images-idx3-ubyte.gz", *lab = DIR "/train-labels-idx1-ubyte.gz";
	struct rf_dataset ds;

	if (!t_exists(img) || !t_exists(lab)) {
		fprintf(stderr, "skip: %s not installed (apt-get install dataset-fashion-mnist)\n", DIR);
		return T_SKIP;
	}
	t_mkdir("loader-fmnist");
	one(img, lab, RF_LOADER_ORDER_UNIFORM, 0);

	/* raw IDX on disk: the decompressed bytes of both files */
	CHECK_OPEN(rf_dataset_open_idx_pair(&ds, img, lab, 10, 0), rf_last_error());
	t_write(t_path("train-images-idx3-ubyte"), ds.src[0].mem, ds.src[0].size);
	t_write(t_path("train-labels-idx1-ubyte"), ds.src[1].mem, ds.src[1].size);
	rf_dataset_close(&ds);
	/* on disk: each record read by itself (the uniform order), or by chunks (windowed) */
	one(t_path("train-images-idx3-ubyte"), t_path("train-labels-idx1-ubyte"),
	    RF_LOADER_ORDER_UNIFORM, 2);
	one(t_path("train-images-idx3-ubyte"), t_path("train-labels-idx1-ubyte"),
	    RF_LOADER_ORDER_WINDOWED, 1);
	return 0;
}
