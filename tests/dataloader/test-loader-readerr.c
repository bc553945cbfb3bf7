/* test-loader-readerr -- a read that fails is reported with the file, the offset and
 * what the read was for, however the loader is driven. Reads fail by injection
 * (RF_FAULT_INJECT="eio=...", and "short" reads on top, which the ring completes)
 * for small records read in chunks and for large records read one by one, under
 * every combination of prefetch 1, 2, 4 and 7, a consumer that pushes everything
 * ahead without waiting (window 0) or waits for the batch 1 or 3 before (window 1,
 * 3), the engine's in-flight cap off, 1 op or 5 ops, and the engine's synchronous
 * mode, two epochs each. The consumer of every batch is an op that reads its
 * tensors; for each one the engine skipped (its status an error),
 * rf_loader_batch_error must name the file and the offset and say what was read
 * ("read of N bytes for records A..B"), and so must rf_loader_last_error. Every
 * configuration must see failures (under ASan/TSan half of the combinations run, a
 * different half for each prefetch). Last, files truncated under an open dataset:
 * "short read for records A..B", with the file and offset too. */
#include <limits.h>

#include "test-loader-util.h"

struct job {
	struct rf_batch b;
	struct rf_var *done_var;  /* written by the consumer op: the window waits on it */
	int ran, status, finished;
};

static int consume(void *arg)
{
	((struct job *)arg)->ran = 1;
	return 0;
}

static void consumed(void *arg, int status)
{
	struct job *j = arg;
	j->status = status;
	j->finished = 1;
}

static void check_msg(const char *what, const char *cfg, const char *m, const char *path)
{
	if (!strstr(m, path) || !strstr(m, "offset ") || !strstr(m, " bytes") ||
	    !strstr(m, " for record")) {
		fprintf(stderr, "%s: %s: message must name %s, the offset and the records "
			"read: '%s'\n", cfg, what, path, m);
		exit(1);
	}
}

static uint64_t run(const char *path, const char *spec, struct rf_loader_opts o, unsigned window,
		    unsigned cap, int sync, const char *cfg, int truncate_it)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l;
	uint64_t nfail = 0, nb;
	struct job *jobs;

	CHECK(setenv("RF_FAULT_INJECT", spec, 1) == 0);
	tl_max_inflight = cap;
	tl_sync = sync;
	tl_open(&v, 1);
	CHECK(unsetenv("RF_FAULT_INJECT") == 0);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, 0), rf_last_error());
	if (truncate_it) /* under the open dataset: reads past the new end come back short */
		CHECK(truncate(path, (off_t)(ds.src[0].size / 2)) == 0);
	o.devices = v.dev;
	o.ndevices = 1;
	CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
	nb = rf_loader_batches_per_epoch(l);
	jobs = calloc(2 * nb, sizeof(*jobs));
	CHECK(jobs);
	uint64_t n = 0;
	for (int ep = 0; ep < 2; ep++) {
		for (;;) {
			struct job *j = &jobs[n];
			if (window && n >= window) /* the window: wait for the consumer of n - w */
				(void)rf_engine_wait_var(v.e, jobs[n - window].done_var);
			int ret = rf_loader_next(l, &j->b);
			CHECK(ret >= 0);
			if (ret == 0)
				break;
			struct rf_var *rd[2] = { j->b.x[0]->var, j->b.y[0]->var };
			struct rf_op_desc d = { .fn = consume, .ctx = j, .done = consumed, .reads = rd,
						.nreads = 2, .name = "consume" };
			CHECK(rf_var_create(v.e, "consumed", &j->done_var) == 0 && j->done_var);
			d.writes = &j->done_var;
			d.nwrites = 1;
			CHECK(rf_engine_push(v.e, &d) == 0);
			n++;
		}
	}
	CHECK_EQ(n, 2 * nb);
	rf_engine_wait_all(v.e);
	for (uint64_t i = 0; i < n; i++) {
		CHECK(jobs[i].finished);
		CHECK(rf_var_destroy(v.e, jobs[i].done_var, NULL, NULL, NULL) == 0);
		if (jobs[i].ran) {
			CHECK_EQ(jobs[i].status, 0);
			continue;
		}
		nfail++;
		if (jobs[i].status >= 0) {
			fprintf(stderr, "%s: batch %" PRIu64 " was skipped with status %d\n", cfg, i,
				jobs[i].status);
			exit(1);
		}
		check_msg("rf_loader_batch_error", cfg, rf_loader_batch_error(l, &jobs[i].b), path);
	}
	rf_engine_wait_all(v.e);
	if (nfail)
		check_msg("rf_loader_last_error", cfg, rf_loader_last_error(l), path);
	if (nfail && truncate_it && !strstr(rf_loader_last_error(l), "short read for record")) {
		fprintf(stderr, "%s: want a short read: '%s'\n", cfg, rf_loader_last_error(l));
		exit(1);
	}
	rf_loader_destroy(l);
	rf_dataset_close(&ds);
	tl_close(&v);
	free(jobs);
	tl_max_inflight = 0;
	tl_sync = 0;
	return nfail;
}

int main(void)
{
	const char *small, *large;
	static const unsigned prefetch[] = { 1, 2, 4, 7 }, windows[] = { 0, 1, 3 },
			      caps[] = { UINT_MAX, 1, 5 }; /* UINT_MAX: no cap */
	unsigned ncfg = 0;
	uint64_t total = 0;
	char cfg[200], spec[64];

	t_mkdir("loader-readerr");
	small = tl_make_rfrec("small.rfrec", 1500, 100, RF_LABEL_I32);
	large = tl_make_rfrec("large.rfrec", 60, 70000, RF_LABEL_U8);

	for (int big = 0; big < 2; big++)
		for (unsigned pi = 0; pi < 4; pi++)
			for (unsigned wi = 0; wi < 3; wi++)
				for (unsigned ci = 0; ci < 3; ci++)
					for (int sync = 0; sync < 2; sync++) {
		struct rf_loader_opts o = { 0 };
		uint64_t nf;
		o.prefetch = prefetch[pi];
		o.seed = ncfg;
		if (big) {
			o.batch = 8;
		} else {
			o.batch = 50;
			o.chunk_bytes = 8 << 10;
			o.window_chunks = 2;
		}
		snprintf(spec, sizeof(spec), "eio=0.2,short=0.2,seed=%u", ncfg + 1);
		snprintf(cfg, sizeof(cfg), "%s records, prefetch %u, window %u, cap %d, sync %d, %s",
			 big ? "large" : "small", prefetch[pi], windows[wi], (int)caps[ci], sync, spec);
		nf = run(big ? large : small, spec, o, windows[wi], caps[ci], sync, cfg, 0);
		if (!nf) {
			fprintf(stderr, "%s: no batch failed: the injection did not reach the "
				"loader\n", cfg);
			exit(1);
		}
		total += nf;
		ncfg++;
	}
	/* files truncated after the open: short reads, reported as such */
	for (int big = 0; big < 2; big++) {
		struct rf_loader_opts o = { .batch = big ? 8 : 50, .chunk_bytes = 8 << 10 };
		const char *p = tl_make_rfrec(big ? "large-cut.rfrec" : "small-cut.rfrec",
					      big ? 60 : 1500, big ? 70000 : 100, RF_LABEL_I32);
		snprintf(cfg, sizeof(cfg), "%s records, file truncated after open",
			 big ? "large" : "small");
		uint64_t nf = run(p, "", o, 0, 0, 0, cfg, 1);
		CHECK(nf > 0);
		total += nf;
		ncfg++;
	}
	printf("%u configurations, %" PRIu64 " failed batches, each naming the file, the offset "
	       "and the records\n", ncfg, total);
	return 0;
}
