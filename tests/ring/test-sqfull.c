/* ring-sqfull: a full submission queue is flushed, never dropped. On a ring of 4 SQ
 * entries (CQ 16) 1000 requests -- reads of distinct 512-byte blocks of a file and
 * 1-microsecond timeouts, alternating -- are queued before the loop runs; every one
 * must complete exactly once with the right result and data, stats.sq_full_flushes
 * must be > 0, and no callback may have run during the queuing (they run only inside
 * rf_ring_run). The completions overflow the 16-entry CQ, which the kernel keeps. */
#include "ring-test.h"

#define NR 1000
#define BLK 512

static int calls[NR];
static int64_t results[NR];
static int in_queueing;
static int cb_during_queueing;

static void cb(void *data, int64_t res)
{
	size_t i = (size_t)(uintptr_t)data;
	calls[i]++;
	results[i] = res;
	if (in_queueing)
		cb_during_queueing++;
}

int main(void)
{
	char path[256];
	int fd = t_tmpfile(path, sizeof(path), 0);
	unlink(path);
	size_t fsz = (size_t)NR / 2 * BLK;
	uint8_t *data = malloc(fsz), *out = calloc(1, fsz);
	T_CHECK(data && out);
	t_fill(data, fsz, 77, 0);
	T_EQ(pwrite(fd, data, fsz, 0), (ssize_t)fsz);

	struct rf_ring *r;
	struct rf_ring_opts o = { .entries = 4 };
	T_OK(rf_ring_create(&r, &o));
	struct rf_ring_info info;
	rf_ring_get_info(r, &info);
	T_EQ(info.sq_entries, 4);
	T_EQ(info.cq_entries, 16);

	in_queueing = 1;
	for (size_t i = 0; i < NR; i++) {
		if (i % 2 == 0)
			T_OK(rf_ring_read(r, fd, out + i / 2 * BLK, BLK, i / 2 * BLK, 0, cb,
					  (void *)(uintptr_t)i, NULL));
		else
			T_OK(rf_ring_timeout(r, 1000, cb, (void *)(uintptr_t)i, NULL));
	}
	in_queueing = 0;
	T_EQ(rf_ring_pending(r), NR);
	int n = rf_ring_run(r, RF_RUN_UNTIL_IDLE);
	T_OK(n);
	T_EQ(n, NR);
	T_EQ(cb_during_queueing, 0);
	for (size_t i = 0; i < NR; i++) {
		T_EQ(calls[i], 1);
		T_EQ(results[i], i % 2 == 0 ? BLK : 0);
	}
	T_EQ(t_verify(out, fsz, 77, 0), -1);
	struct rf_ring_stats st;
	rf_ring_get_stats(r, &st);
	printf("sq_full_flushes %llu, enters %llu, submissions %llu, completions %llu\n",
	       (unsigned long long)st.sq_full_flushes, (unsigned long long)st.enters,
	       (unsigned long long)st.submissions, (unsigned long long)st.completions);
	T_CHECK(st.sq_full_flushes > 0);
	T_EQ(st.submissions, NR);
	T_EQ(st.completions, NR);
	T_EQ(rf_ring_pending(r), 0);
	rf_ring_destroy(r);
	close(fd);
	free(data);
	free(out);
	return 0;
}
