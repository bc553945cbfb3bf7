/* test-loader-ranks -- the shards of several processes: loaders with shard_base /
 * shard_total, one per "rank", each deliver exactly their shards of every global batch
 * (rows [n*i/T, n*(i+1)/T) of its n records), decoded from the right records; together
 * they cover the epoch once, in the order one loader of all the shards gives. For the
 * three ways records reach a batch (in memory, chunked spans, one read per record),
 * P = 2, 3 ranks of K = 1, 2 devices, batches whose last one leaves some ranks with
 * empty shards or no rows at all. And a shard range past shard_total is refused. */
#include "test-loader-util.h"

static void check_ranks(struct tl_env *v, struct rf_dataset *ds, struct rf_loader_opts o,
			unsigned P, unsigned K, const char *what)
{
	uint64_t count = ds->count, *first_order = calloc(count, sizeof(uint64_t));
	uint32_t *total = calloc(count, sizeof(uint32_t));
	unsigned T = P * K;
	struct tl_run r;

	CHECK(first_order && total);
	tl_run_init(&r, ds);
	o.ndevices = K;
	o.shard_total = T;
	for (unsigned p = 0; p < P; p++) {
		struct rf_loader *l;
		o.shard_base = p * K;
		o.devices = v->dev + p * K;     /* any CPU devices will do */
		r.base = o.shard_base;
		r.T = T;
		CHECK_OPEN(rf_loader_create(&l, v->e, ds, &o), rf_last_error());
		struct rf_loader_stats st;
		rf_loader_get_stats(l, &st);
		CHECK_EQ(st.mode, o.in_memory ? 0 : o.large_record ? 2 : 1);
		tl_epoch(v, l, &r, NULL, NULL);
		for (uint64_t t = 0; t < r.nb; t++) {
			const struct rf_batch *b = &r.b[t].b;
			unsigned n = 0, gn = b->global_n;
			CHECK_EQ(b->nshards, K);
			for (unsigned k = 0; k < K; k++) {
				uint64_t i = o.shard_base + k;
				CHECK_EQ(b->shard_n[k], gn * (i + 1) / T - gn * i / T);
				n += b->shard_n[k];
			}
			CHECK_EQ(b->n, n);
			CHECK(gn == o.batch || t + 1 == r.nb);
		}
		for (uint64_t i = 0; i < count; i++)
			total[i] += r.seen[i];
		if (p == 0)
			memcpy(first_order, r.expect, count * sizeof(uint64_t));
		else   /* every rank plans the same order */
			CHECK(memcmp(first_order, r.expect, count * sizeof(uint64_t)) == 0);
		rf_loader_destroy(l);
	}
	for (uint64_t i = 0; i < count; i++)
		if (total[i] != 1) {
			fprintf(stderr, "%s, P=%u K=%u: record %" PRIu64 " delivered %u times\n", what, P,
				K, i, total[i]);
			exit(1);
		}
	printf("ok: %s, %u ranks x %u devices, batch %u: every record once, each rank its "
	       "shards\n", what, P, K, o.batch);
	tl_run_free(&r);
	free(first_order);
	free(total);
}

int main(void)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l;
	struct rf_loader_opts o = { 0 };

	t_mkdir("loader-ranks");
	tl_open(&v, 6);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, tl_make_rfrec("r.rfrec", 95, 64, RF_LABEL_I32), 0),
		   rf_last_error());
	o.seed = 9;
	o.chunk_bytes = 1024;
	o.window_chunks = 2;
	o.order = RF_LOADER_ORDER_WINDOWED; /* the mode under test: chunks in windows */
	for (int mode = 0; mode < 3; mode++) {
		static const char *names[] = { "in memory", "chunked spans", "one read per record" };
		o.in_memory = mode == 0;
		o.large_record = mode == 2 ? 64 : 0;
		static const unsigned batches[] = { 10, 2 };     /* tails of 5 and 1 */
		for (unsigned bi = 0; bi < 2; bi++) {
			o.batch = batches[bi];
			check_ranks(&v, &ds, o, 2, 1, names[mode]);
			check_ranks(&v, &ds, o, 3, 2, names[mode]);
			check_ranks(&v, &ds, o, 2, 2, names[mode]);
		}
	}
	/* refused: shards 2..3 of 3 */
	o.batch = 10;
	o.devices = v.dev;
	o.ndevices = 2;
	o.shard_base = 2;
	o.shard_total = 3;
	CHECK_EQ(rf_loader_create(&l, v.e, &ds, &o), -EINVAL);
	CHECK(strstr(rf_last_error(), "shard_base + ndevices <= shard_total"));
	rf_dataset_close(&ds);
	tl_close(&v);
	return 0;
}
