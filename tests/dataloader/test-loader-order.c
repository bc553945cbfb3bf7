/* test-loader-order -- the default shuffle is a uniform shuffle, for every record size
 * and every way records are read. A record file sorted by class (record i of n is
 * class 10 i / n: what an ImageFolder packed in class order is) is read for several
 * epochs with a fixed seed; each batch's class counts are compared with the uniform
 * expectation by Pearson's chi-square, summed over every batch of every epoch. A
 * uniform shuffle gives chi2 / dof near 1; the windowed order (asked for by name)
 * gives many times that -- the test tells the two apart, so it can fail. Cases:
 * small records (100-byte stride) read from the file (each record by itself), the same
 * in memory, large records (66 KB) from the file, and the windowed order of small
 * records. The uniform reads of small records stay within the read bound. */
#include "test-loader-util.h"

#include <math.h>

#define CLASSES 10

/* chi2 / dof of the epochs' batches against classes spread evenly */
static double batch_chi2(struct tl_env *v, const struct rf_dataset *ds, struct rf_loader_opts o,
			 uint64_t epochs, struct rf_loader_stats *st)
{
	struct rf_loader *l;
	struct tl_run r;
	const uint64_t n = ds->count;
	double chi2 = 0;
	uint64_t dof = 0;

	o.devices = v->dev;
	o.ndevices = 1;
	CHECK_OPEN(rf_loader_create(&l, v->e, ds, &o), rf_last_error());
	tl_run_init(&r, ds);
	for (uint64_t ep = 0; ep < epochs; ep++) {
		tl_epoch(v, l, &r, NULL, NULL);
		tl_expect_complete(&r);
		for (uint64_t b0 = 0; b0 + o.batch <= n; b0 += o.batch) {
			unsigned cnt[CLASSES] = { 0 };
			double e = (double)o.batch / CLASSES;
			for (uint64_t p = b0; p < b0 + o.batch; p++)
				cnt[r.order[p] * CLASSES / n]++;
			for (int c = 0; c < CLASSES; c++)
				chi2 += (cnt[c] - e) * (cnt[c] - e) / e;
			dof += CLASSES - 1;
		}
	}
	rf_loader_get_stats(l, st);
	rf_loader_destroy(l);
	tl_run_free(&r);
	return chi2 / (double)dof;
}

int main(void)
{
	struct tl_env v;
	struct rf_dataset small, large;
	struct rf_loader_opts o = { 0 };
	struct rf_loader_stats st;
	double x;

	t_mkdir("loader-order");
	tl_open(&v, 1);
	CHECK_OPEN(rf_dataset_open_rfrec(&small, tl_make_rfrec("small.rfrec", 5000, 96,
							       RF_LABEL_I32), 0), rf_last_error());
	CHECK_OPEN(rf_dataset_open_rfrec(&large, tl_make_rfrec("large.rfrec", 400, 66000,
							       RF_LABEL_I32), 0), rf_last_error());
	o.seed = 20261128;

	/* small records from the file: the default order, each record read by itself */
	o.batch = 200;
	o.read_bytes = 64 << 10;
	x = batch_chi2(&v, &small, o, 4, &st);
	printf("small records, file, default order: chi2/dof %.3f (mode %d, %" PRIu64 " reads, "
	       "at most %zu bytes in flight of %zu)\n", x, st.mode, st.reads, st.max_bytes_inflight,
	       st.read_limit);
	CHECK(x < 1.25);
	CHECK_EQ(st.mode, 2);
	CHECK(st.max_bytes_inflight <= st.read_limit);

	/* the same records in memory */
	o.in_memory = 1;
	x = batch_chi2(&v, &small, o, 4, &st);
	printf("small records, memory: chi2/dof %.3f (mode %d)\n", x, st.mode);
	CHECK(x < 1.25);
	CHECK_EQ(st.mode, 0);
	o.in_memory = 0;

	/* large records from the file */
	o.batch = 40;
	o.read_bytes = 0;
	x = batch_chi2(&v, &large, o, 6, &st);
	printf("large records, file: chi2/dof %.3f (mode %d)\n", x, st.mode);
	CHECK(x < 1.4);
	CHECK_EQ(st.mode, 2);

	/* the windowed order, by name: far from uniform on a sorted file */
	o.batch = 200;
	o.order = RF_LOADER_ORDER_WINDOWED;
	o.chunk_bytes = 50 * 100;
	o.window_chunks = 4;
	x = batch_chi2(&v, &small, o, 4, &st);
	printf("small records, file, windowed order: chi2/dof %.3f (mode %d)\n", x, st.mode);
	CHECK_EQ(st.mode, 1);
	CHECK(x > 3.0);

	/* an order that is neither is refused by name */
	o.order = 7;
	o.devices = v.dev;
	o.ndevices = 1;
	{
		struct rf_loader *l = NULL;
		CHECK_EQ(rf_loader_create(&l, v.e, &small, &o), -EINVAL);
		CHECK(strstr(rf_last_error(), "order 7"));
	}
	rf_dataset_close(&small);
	rf_dataset_close(&large);
	tl_close(&v);
	printf("ok: the default order is uniform for small records on disk and in memory and "
	       "for large records; the windowed order is not, and is told apart\n");
	return 0;
}
