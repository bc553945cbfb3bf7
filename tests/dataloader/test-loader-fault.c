/* test-loader-fault -- fault injection in the ring (RF_FAULT_INJECT, set before the
 * ring is created). With only short reads ("short=0.3"), the ring completes them and
 * every epoch is complete and correct, for chunked small records and per-record
 * large reads. With "eio=0.05,short=0.3", failed reads surface as poisoned batches
 * whose messages name the file and the offset; every other batch is correct, no
 * record is served twice, served + lost = count (never a silently short epoch), and
 * nothing crashes. Three epochs per case, with the default bound on reads in flight and
 * with one read at a time (rf_loader_opts.read_bytes 1: every read waits in the queue,
 * and a failed one must not stall those behind it). */
#include "test-loader-util.h"

static void run(const char *path, const char *spec, struct rf_loader_opts o, int want_fail)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l;
	struct tl_run r;
	struct rf_ring_stats rs;
	uint64_t failed, total_failed = 0;

	CHECK(setenv("RF_FAULT_INJECT", spec, 1) == 0);
	tl_open(&v, 1);
	CHECK(unsetenv("RF_FAULT_INJECT") == 0);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, 0), rf_last_error());
	tl_run_init(&r, &ds);
	o.devices = v.dev;
	o.ndevices = 1;
	CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
	for (int ep = 0; ep < 3; ep++) {
		uint64_t lost = 0;
		tl_epoch(&v, l, &r, &failed, path);
		for (uint64_t i = 0; i < ds.count; i++)
			CHECK(r.seen[i] <= 1);
		for (uint64_t t = 0; t < r.nb; t++)
			if (!r.b[t].checked)
				lost += r.b[t].b.n;
		CHECK_EQ(r.records + lost, ds.count);
		if (!want_fail) {
			CHECK_EQ(failed, 0);
			tl_expect_complete(&r);
		}
		total_failed += failed;
	}
	rf_ring_get_stats(v.ring, &rs);
	printf("%-34s %s: %" PRIu64 " failed batches in 3 epochs, %" PRIu64 " faults, %" PRIu64
	       " short resubmits%s%s\n", spec, t_base(path), total_failed, rs.faults_injected,
	       rs.short_resubmits, total_failed ? "; last: " : "",
	       total_failed ? rf_loader_last_error(l) : "");
	CHECK(rs.faults_injected > 0);
	if (want_fail)
		CHECK(total_failed > 0 && strstr(rf_loader_last_error(l), "Input/output error"));
	else
		CHECK(rs.short_resubmits > 0);
	rf_loader_destroy(l);
	tl_run_free(&r);
	rf_dataset_close(&ds);
	tl_close(&v);
}

int main(void)
{
	struct rf_loader_opts o = { 0 };
	const char *small, *large;

	t_mkdir("loader-fault");
	small = tl_make_rfrec("small.rfrec", 5000, 100, RF_LABEL_I32);
	large = tl_make_rfrec("large.rfrec", 150, 70000, RF_LABEL_U8);

	o.batch = 64;
	o.seed = 11;
	o.chunk_bytes = 16 << 10; /* 4-page chunks: short reads split them */
	o.window_chunks = 4;
	run(small, "short=0.3,seed=1", o, 0);
	run(small, "eio=0.05,short=0.3,seed=2", o, 1);
	o.batch = 16;
	run(large, "short=0.3,seed=3", o, 0);
	run(large, "eio=0.05,short=0.3,seed=4", o, 1);
	o.read_bytes = 1;
	run(large, "eio=0.1,short=0.2,seed=9", o, 1);
	o.batch = 64;
	run(small, "eio=0.1,short=0.2,seed=9", o, 1);
	return 0;
}
