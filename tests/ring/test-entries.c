/* ring-entries: ring sizes up to the kernel's limit. RF_RING_MAX_ENTRIES is checked
 * against the kernel itself (a plain io_uring of that many entries works, one of
 * twice that is refused). rf_ring_create then makes rings of 1, 2, 3, 16384, 16385,
 * 32768 and RF_RING_MAX_ENTRIES entries: each must succeed with an SQ of the next
 * power of 2 (2 at least: the smallest takes a request with a deadline, two SQEs),
 * a CQ of 4x that capped at 2 * RF_RING_MAX_ENTRIES, and the same fast setup flags
 * (SINGLE_ISSUER, DEFER_TASKRUN, COOP_TASKRUN, SUBMIT_ALL) as a default ring, so a large size never makes setup fall back to slower flags; the largest
 * ring also takes 20000 requests queued at once without flushing a full SQ and
 * completes them all. An SQPOLL ring of the largest size works too (skipped where
 * SQPOLL is not allowed). Counts above the maximum (RF_RING_MAX_ENTRIES + 1, 2^31,
 * UINT_MAX) are refused with -EINVAL and leave *out NULL. */
#include "ring-test.h"

#include <limits.h>
#include <liburing.h>

#include "ringflow/ring-ops.h"

#define FAST (IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | \
	      IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL)
#define NREQ 20000

static unsigned pow2ceil(unsigned n)
{
	unsigned e = 2;   /* at least 2: a request and its deadline */
	while (e < n)
		e <<= 1;
	return e;
}

static int ndone;

static void count_cb(void *data, int64_t res)
{
	if (res != 8) {
		fprintf(stderr, "request %zu: res %lld\n", (size_t)(uintptr_t)data, (long long)res);
		exit(1);
	}
	ndone++;
}

static void check_ring(unsigned n, unsigned flags, unsigned base_flags, int fd)
{
	struct rf_ring *r = NULL;
	struct rf_ring_opts o = { .entries = n, .flags = flags, .sqpoll_idle_ms = 50 };
	int ret = rf_ring_create(&r, &o);
	if (ret < 0) {
		fprintf(stderr, "entries %u: rf_ring_create: %s\n", n, strerror(-ret));
		exit(1);
	}
	struct rf_ring_info info;
	rf_ring_get_info(r, &info);
	unsigned sq = pow2ceil(n);
	unsigned cq = sq * 4 > 2 * RF_RING_MAX_ENTRIES ? 2 * RF_RING_MAX_ENTRIES : sq * 4;
	printf("entries %u%s: sq %u cq %u setup_flags 0x%x\n", n, flags ? " (sqpoll)" : "",
	       info.sq_entries, info.cq_entries, info.setup_flags);
	T_EQ(info.sq_entries, sq);
	T_EQ(info.cq_entries, cq);
	T_EQ(info.setup_flags & FAST, base_flags & FAST);
	if (flags & RF_RING_SQPOLL)
		T_CHECK(info.setup_flags & IORING_SETUP_SQPOLL);

	if (n <= 2 && !flags) {
		/* the smallest ring takes a request with a deadline (two SQEs at once: on
		 * an SQ of one it spun in rf_ring_submit for good) */
		static uint64_t d;
		ndone = 0;
		struct rf_io io = { .op = RF_IOP_READ, .fd = fd, .buf = &d, .len = 8,
				    .timeout_ns = 5000000000ull };
		T_OK(rf_ring_submit(r, &io, count_cb, NULL, NULL));
		T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
		T_EQ(ndone, 1);
	}
	if (n == RF_RING_MAX_ENTRIES && !flags) {
		/* The whole SQ is usable: NREQ requests queue without a flush. */
		static uint64_t dst[NREQ];
		ndone = 0;
		for (uintptr_t i = 0; i < NREQ; i++)
			T_OK(rf_ring_read(r, fd, &dst[i], 8, (i % 512) * 8, 0, count_cb, (void *)i, NULL));
		T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
		T_EQ(ndone, NREQ);
		struct rf_ring_stats st;
		rf_ring_get_stats(r, &st);
		T_EQ(st.sq_full_flushes, 0);
		T_EQ(st.completions, NREQ);
		for (unsigned i = 0; i < NREQ; i++)
			T_EQ(t_verify((const uint8_t *)&dst[i], 8, 5, (i % 512) * 8), -1);
	}
	rf_ring_destroy(r);
}

int main(void)
{
	/* The constant is the kernel's limit. */
	struct io_uring ring;
	T_OK(io_uring_queue_init(RF_RING_MAX_ENTRIES, &ring, 0));
	io_uring_queue_exit(&ring);
	T_EQ(io_uring_queue_init(2 * RF_RING_MAX_ENTRIES, &ring, 0), -EINVAL);

	char path[256];
	int fd = t_tmpfile(path, sizeof(path), 0);
	unlink(path);
	uint8_t block[4096];
	t_fill(block, sizeof(block), 5, 0);
	T_EQ(pwrite(fd, block, sizeof(block), 0), (ssize_t)sizeof(block));

	struct rf_ring *r;
	T_OK(rf_ring_create(&r, NULL));
	struct rf_ring_info base;
	rf_ring_get_info(r, &base);
	rf_ring_destroy(r);
	printf("default: sq %u cq %u setup_flags 0x%x\n", base.sq_entries, base.cq_entries,
	       base.setup_flags);
	T_EQ(base.sq_entries, 256);
	T_EQ(base.cq_entries, 1024);

	static const unsigned sizes[] = { 1, 2, 3, 16384, 16385, 32768, RF_RING_MAX_ENTRIES };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		check_ring(sizes[i], 0, base.setup_flags, fd);

	/* SQPOLL: DEFER_TASKRUN and COOP_TASKRUN do not apply; the rest must stay. */
	struct rf_ring_opts so = { .entries = 8, .flags = RF_RING_SQPOLL, .sqpoll_idle_ms = 50 };
	int ret = rf_ring_create(&r, &so);
	if (ret == 0) {
		struct rf_ring_info sbase;
		rf_ring_get_info(r, &sbase);
		rf_ring_destroy(r);
		check_ring(RF_RING_MAX_ENTRIES, RF_RING_SQPOLL, sbase.setup_flags, fd);
	} else {
		printf("SQPOLL not available (%s): not checked\n", strerror(-ret));
	}

	static const unsigned bad[] = { RF_RING_MAX_ENTRIES + 1, 1u << 31, UINT_MAX };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct rf_ring_opts o = { .entries = bad[i] };
		r = (struct rf_ring *)&o; /* must be reset to NULL */
		T_EQ(rf_ring_create(&r, &o), -EINVAL);
		T_CHECK(r == NULL);
	}
	close(fd);
	return 0;
}
