/* test-engine-cap: bounded asynchrony. A front end pushes a million ops as fast as it
 * can onto a worker stream; with a cap of 1024 ops in flight, push turns the reactor
 * whenever the cap is reached, so the number in flight never exceeds it and the
 * process's resident memory does not grow with the number of ops pushed (measured
 * between 50,000 and 1,000,000 ops). A byte cap is checked the same way. */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "engine.h"
#include "../test-util.h"

static long rss_kb(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &res) != 2)
		res = -1;
	fclose(f);
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static uint64_t sum;
static int add_fn(void *p)
{
	sum += (uintptr_t)p;
	return 0;
}

int main(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_stream *w;
	struct rf_engine_stats es;
	struct rf_var *v;
	const long n = 1000000;
	long i, rss0 = 0, rss1;
	uint64_t expect = 0;

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .max_inflight = 1024, .sync = 0 }));
	CHECK_OK(rf_worker_stream_create(e, "w", 256, &w));
	rf_var_create(e, "acc", &v);
	for (i = 0; i < n; i++) {
		CHECK_OK(rf_engine_push_simple(e, add_fn, (void *)(uintptr_t)(i & 7), NULL, 0, &v, 1, w, "add"));
		expect += (uint64_t)(i & 7);
		if (i == 50000)
			rss0 = rss_kb();
	}
	rf_engine_get_stats(e, &es);
	CHECK(es.max_inflight_seen <= 1024);
	CHECK(es.cap_waits > 0);
	rss1 = rss_kb();
	CHECK_EQ(rf_engine_wait_all(e), 0);
	CHECK_EQ(sum, expect);
	fprintf(stderr, "%ld ops: max in flight %u, cap waits %llu, RSS %ld kB -> %ld kB\n", n,
		es.max_inflight_seen, (unsigned long long)es.cap_waits, rss0, rss1);
	CHECK(rss0 > 0 && rss1 - rss0 < 4096);
	rf_var_destroy(e, v, NULL, NULL, NULL);

	/* byte cap: each op claims 1 MiB, at most 8 MiB in flight */
	rf_engine_destroy(e);
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .max_bytes = 8 << 20, .sync = 0 }));
	CHECK_OK(rf_worker_stream_create(e, "w", 256, &w));
	rf_var_create(e, "acc", &v);
	for (i = 0; i < 2000; i++) {
		struct rf_op_desc d = { .fn = add_fn, .ctx = (void *)1, .writes = &v, .nwrites = 1,
					.stream = w, .name = "big", .bytes = 1 << 20 };
		CHECK_OK(rf_engine_push(e, &d));
		rf_engine_get_stats(e, &es);
		CHECK(es.inflight_bytes <= (8u << 20));
	}
	CHECK_EQ(rf_engine_wait_all(e), 0);
	rf_var_destroy(e, v, NULL, NULL, NULL);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
