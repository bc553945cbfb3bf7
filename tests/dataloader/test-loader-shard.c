/* test-loader-shard -- data-parallel shards and the last partial batch. With K = 3
 * CPU devices, shard i of every batch is a tensor on device i; the shards' rows,
 * in shard order, are exactly the batch's records (their sizes differ by at most
 * one and sum to the batch). 95 records in batches of 10: kept, the last batch has
 * 5 records (shards 1/2/2) and the epoch covers every record once; dropped
 * (drop_last), there are 9 batches, 90 distinct records, and the 5 left out change
 * with the epoch's order. Also checks a batch smaller than K (shards of 0 rows). */
#include "test-loader-util.h"

static void check_shards(struct tl_run *r, uint64_t B, unsigned K)
{
	for (uint64_t t = 0; t < r->nb; t++) {
		const struct rf_batch *b = &r->b[t].b;
		unsigned sum = 0;
		CHECK_EQ(b->nshards, K);
		for (unsigned k = 0; k < K; k++) {
			CHECK(b->x[k] && b->y[k]);
			CHECK(b->x[k]->dev == b->y[k]->dev);
			CHECK_EQ(b->x[k]->shape[0], b->shard_n[k]);
			CHECK_EQ(b->y[k]->shape[0], b->shard_n[k]);
			CHECK_EQ(b->shard_n[k], (uint64_t)b->n * (k + 1) / K - (uint64_t)b->n * k / K);
			sum += b->shard_n[k];
		}
		CHECK_EQ(sum, b->n);
		if (t + 1 < r->nb)
			CHECK_EQ(b->n, B);
	}
}

int main(void)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l;
	struct rf_loader_opts o = { 0 };
	struct tl_run r;
	const unsigned K = 3;

	t_mkdir("loader-shard");
	tl_open(&v, K);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, tl_make_rfrec("s.rfrec", 95, 64, RF_LABEL_I32), 0), rf_last_error());
	tl_run_init(&r, &ds);
	o.batch = 10;
	o.seed = 5;
	o.devices = v.dev;
	o.ndevices = K;
	o.chunk_bytes = 1024;
	o.window_chunks = 2;

	/* kept */
	CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
	CHECK_EQ(rf_loader_batches_per_epoch(l), 10);
	for (int ep = 0; ep < 2; ep++) {
		tl_epoch(&v, l, &r, NULL, NULL);
		tl_expect_complete(&r);
		check_shards(&r, 10, K);
		CHECK_EQ(r.b[9].b.n, 5);
		for (unsigned k = 0; k < K; k++)
			CHECK(r.b[0].b.x[k]->dev == v.dev[k]);
	}
	rf_loader_destroy(l);

	/* dropped */
	o.drop_last = 1;
	CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
	CHECK_EQ(rf_loader_batches_per_epoch(l), 9);
	{
		uint32_t missing[2][95];
		for (int ep = 0; ep < 2; ep++) {
			tl_epoch(&v, l, &r, NULL, NULL);
			check_shards(&r, 10, K);
			CHECK_EQ(r.records, 90);
			for (uint64_t i = 0; i < 95; i++) {
				CHECK(r.seen[i] <= 1);
				missing[ep][i] = !r.seen[i];
			}
		}
		CHECK(memcmp(missing[0], missing[1], sizeof(missing[0])) != 0);
	}
	rf_loader_destroy(l);

	/* batch of 2 over 3 shards: one shard is empty */
	o.drop_last = 0;
	o.batch = 2;
	CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
	tl_epoch(&v, l, &r, NULL, NULL);
	tl_expect_complete(&r);
	check_shards(&r, 2, K);
	rf_loader_destroy(l);

	tl_run_free(&r);
	rf_dataset_close(&ds);
	tl_close(&v);
	return 0;
}
