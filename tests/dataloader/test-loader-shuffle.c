/* test-loader-shuffle -- the epoch order is a function of (seed, epoch) alone. Two
 * loaders with the same seed serve identical orders; epochs differ from each other;
 * another seed gives another order; no_shuffle gives file order. For small records
 * the quasi-random order keeps its documented shape (README "Shuffling"): the records
 * of one chunk stay within one window of W chunks' records, and every epoch still
 * moves chunks across the whole file; for large records and memory the order is a
 * full permutation (records leave their neighbourhood). */
#include "test-loader-util.h"

static uint64_t *epoch_order(struct tl_env *v, const struct rf_dataset *ds,
			     struct rf_loader_opts o, uint64_t epochs)
{
	struct rf_loader *l;
	struct tl_run r;
	uint64_t *all = malloc(epochs * ds->count * sizeof(*all));

	CHECK(all);
	o.devices = v->dev;
	o.ndevices = 1;
	CHECK_OPEN(rf_loader_create(&l, v->e, ds, &o), rf_last_error());
	tl_run_init(&r, ds);
	for (uint64_t ep = 0; ep < epochs; ep++) {
		tl_epoch(v, l, &r, NULL, NULL);
		tl_expect_complete(&r);
		memcpy(all + ep * ds->count, r.order, ds->count * sizeof(*all));
	}
	rf_loader_destroy(l);
	tl_run_free(&r);
	return all;
}

static int same(const uint64_t *a, const uint64_t *b, uint64_t n)
{
	return !memcmp(a, b, n * sizeof(*a));
}

int main(void)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader_opts o = { 0 };
	const uint64_t n = 4000, R = 40, W = 4; /* chunk 4000 B / 100 B stride */
	uint64_t *a, *b, *c, *d;

	t_mkdir("loader-shuffle");
	tl_open(&v, 1);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, tl_make_rfrec("s.rfrec", n, 96, RF_LABEL_I32), 0), rf_last_error());
	CHECK_EQ(ds.src[0].stride, 100);
	o.batch = 32;
	o.seed = 1234;
	o.chunk_bytes = R * 100;
	o.window_chunks = W;
	o.order = RF_LOADER_ORDER_WINDOWED; /* the mode under test: chunks in windows */

	a = epoch_order(&v, &ds, o, 3);
	b = epoch_order(&v, &ds, o, 3);
	CHECK(same(a, b, 3 * n));                 /* same seed: same orders */
	CHECK(!same(a, a + n, n));                /* epochs differ */
	CHECK(!same(a + n, a + 2 * n, n));
	o.seed = 1235;
	c = epoch_order(&v, &ds, o, 1);
	CHECK(!same(a, c, n));                    /* another seed: another order */

	/* shape of the quasi-random order */
	for (uint64_t ep = 0; ep < 3; ep++) {
		uint64_t *pmin = calloc(n / R, sizeof(*pmin)), *pmax = calloc(n / R, sizeof(*pmax));
		uint64_t first_chunk_moved = 0, displaced = 0;
		CHECK(pmin && pmax);
		for (uint64_t i = 0; i < n / R; i++)
			pmin[i] = UINT64_MAX;
		for (uint64_t p = 0; p < n; p++) {
			uint64_t ch = a[ep * n + p] / R;
			if (p < pmin[ch])
				pmin[ch] = p;
			if (p > pmax[ch])
				pmax[ch] = p;
			if (a[ep * n + p] / (R * W) != p / (R * W))
				displaced++;
		}
		for (uint64_t i = 0; i < n / R; i++) {
			CHECK(pmax[i] - pmin[i] < R * W); /* a chunk stays inside its window */
			if (pmin[i] / (R * W) != i / W)
				first_chunk_moved++;
		}
		printf("epoch %" PRIu64 ": %" PRIu64 " of %" PRIu64 " chunks left their window, %"
		       PRIu64 " of %" PRIu64 " records moved out of their window\n", ep,
		       first_chunk_moved, n / R, displaced, n);
		CHECK(first_chunk_moved > n / R / 2);
		free(pmin);
		free(pmax);
	}

	/* no shuffle: file order */
	o.no_shuffle = 1;
	d = epoch_order(&v, &ds, o, 2);
	for (uint64_t p = 0; p < 2 * n; p++)
		CHECK_EQ(d[p], p % n);
	free(d);
	o.no_shuffle = 0;

	/* memory: a full permutation; many neighbours in the file end up far apart */
	o.in_memory = 1;
	o.seed = 99;
	d = epoch_order(&v, &ds, o, 2);
	{
		uint64_t far = 0;
		for (uint64_t p = 0; p + 1 < n; p++) {
			uint64_t x = d[p], y = d[p + 1];
			if ((x > y ? x - y : y - x) > R * W)
				far++;
		}
		printf("memory: %" PRIu64 " of %" PRIu64 " consecutive pairs lie > %" PRIu64
		       " records apart in the file\n", far, n - 1, R * W);
		CHECK(far > n / 2);
		CHECK(!same(d, d + n, n));
	}
	free(d);
	free(a);
	free(b);
	free(c);
	rf_dataset_close(&ds);
	tl_close(&v);
	return 0;
}
