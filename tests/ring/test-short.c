/* ring-short: short transfers are completed by resubmitting the remainder. A writer
 * thread feeds a pipe in small, irregular chunks while the ring reads 256 KiB
 * requests from it: every read must come back with its full length and the bytes in
 * order, and stats.short_resubmits must show the remainders were resubmitted. A read
 * with RF_IO_NO_RETRY_SHORT reports the first short piece as it comes. Short reads of
 * a regular file (made with RF_FAULT_INJECT short=...) are covered by ring-fault. */
#include "ring-test.h"

#include <pthread.h>
#include <sched.h>

#define REQ (256 * 1024)
#define NREQ 8

struct feeder {
	int fd;
	size_t total;
};

static void *feed(void *arg)
{
	struct feeder *f = arg;
	uint8_t chunk[7000];
	uint64_t s = 42;
	size_t off = 0;
	while (off < f->total) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		size_t n = 1 + (s >> 33) % sizeof(chunk);
		if (n > f->total - off)
			n = f->total - off;
		t_fill(chunk, n, 9, off);
		ssize_t w = write(f->fd, chunk, n);
		if (w <= 0) {
			perror("pipe write");
			exit(1);
		}
		off += (size_t)w;
		if ((s >> 20) % 4 == 0)
			sched_yield();
	}
	return NULL;
}

int main(void)
{
	int p[2];
	T_CHECK(pipe(p) == 0);
	struct rf_ring *r;
	T_OK(rf_ring_create(&r, NULL));

	/* Reads are queued in order and a pipe hands out bytes in order, but the kernel
	 * may serve pieces of two requests interleaved, so read the requests one at a
	 * time: each must complete in full with consecutive bytes. */
	uint8_t *buf = malloc(REQ);
	T_CHECK(buf);
	struct feeder f = { p[1], (size_t)REQ * NREQ };
	pthread_t th;
	T_CHECK(pthread_create(&th, NULL, feed, &f) == 0);
	for (int i = 0; i < NREQ; i++) {
		struct t_res t = { 0 };
		memset(buf, 0, REQ);
		T_OK(rf_ring_read(r, p[0], buf, REQ, UINT64_MAX, 0, t_store, &t, NULL));
		T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
		T_EQ(t.calls, 1);
		T_EQ(t.res, REQ);
		T_EQ(t_verify(buf, REQ, 9, (uint64_t)i * REQ), -1);
	}
	pthread_join(th, NULL);
	struct rf_ring_stats st;
	rf_ring_get_stats(r, &st);
	printf("short resubmits: %llu over %d reads\n", (unsigned long long)st.short_resubmits, NREQ);
	T_CHECK(st.short_resubmits > 0);
	T_EQ(st.bytes_read, (uint64_t)REQ * NREQ);

	/* RF_IO_NO_RETRY_SHORT: 100 bytes in the pipe, a 4096-byte read gets 100. */
	uint8_t small[100];
	t_fill(small, sizeof(small), 3, 0);
	T_EQ(write(p[1], small, sizeof(small)), sizeof(small));
	struct t_res t = { 0 };
	T_OK(rf_ring_read(r, p[0], buf, 4096, UINT64_MAX, RF_IO_NO_RETRY_SHORT, t_store, &t, NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(t.calls, 1);
	T_EQ(t.res, 100);
	T_EQ(t_verify(buf, 100, 3, 0), -1);
	rf_ring_get_stats(r, &st);
	T_EQ(st.bytes_read, (uint64_t)REQ * NREQ + 100);

	rf_ring_destroy(r);
	free(buf);
	close(p[0]);
	close(p[1]);
	return 0;
}
