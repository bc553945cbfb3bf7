/* ring-retry: reads and writes that complete with -EAGAIN or -EINTR are resubmitted,
 * never reported. With RF_FAULT_INJECT="eagain=0.4,eintr=0.3,short=0.2,ops=read+write"
 * every kind of request (plain, fixed buffer, fixed file, both; buffered and
 * O_DIRECT; 4 KiB to 1 MiB; RF_IO_NO_RETRY_SHORT) writes a pattern and reads it back:
 * each callback runs once with the full length (or, with NO_RETRY_SHORT, a positive
 * count whose bytes are right), the file and buffers hold the right bytes, and
 * stats.retries and faults_injected are > 0. A device that always says -EAGAIN
 * (eagain=1), or always -EINTR, makes each request end with that error after
 * exactly 64 retries instead of hanging; rf_ring_cancel and rf_ring_destroy of a
 * request waiting out its retry backoff give -ECANCELED. Requests the injection
 * must leave alone (writes under the default ops=read, reads at the file position)
 * complete untouched. */
#include "ring-test.h"

#define RETRY_MAX 64 /* ring.h: "only after 64 such results in a row" */
#define NSLOT 16
#define SLOT (1024 * 1024)

struct req {
	int64_t res;
	int calls;
};

static void cb(void *data, int64_t res)
{
	struct req *q = data;
	q->res = res;
	q->calls++;
	if (res == -EAGAIN || res == -EINTR) {
		fprintf(stderr, "callback saw %s\n", strerror((int)-res));
		exit(1);
	}
}

static void cb_any(void *data, int64_t res)
{
	struct req *q = data;
	q->res = res;
	q->calls++;
}

static struct rf_ring *ring_with(const char *spec)
{
	struct rf_ring *r;
	T_CHECK(setenv("RF_FAULT_INJECT", spec, 1) == 0);
	T_OK(rf_ring_create(&r, NULL));
	T_CHECK(unsetenv("RF_FAULT_INJECT") == 0);
	return r;
}

/* One round over a file: write NSLOT slots of assorted sizes with assorted flags,
 * read them back into other buffers, check everything. fd is the plain fd; the
 * same file is registered as fixed file 0. */
static void round_trip(struct rf_ring *r, int fd, int direct, uint64_t seed,
		       uint8_t *wbuf, uint8_t *rbuf)
{
	static const size_t sizes[] = { 4096, 65536, 12288, 1024 * 1024 };
	struct req w[NSLOT], rd[NSLOT];
	size_t len[NSLOT];
	unsigned fl[NSLOT];
	memset(w, 0, sizeof(w));
	memset(rd, 0, sizeof(rd));
	for (int i = 0; i < NSLOT; i++) {
		len[i] = sizes[i % 4];
		/* bit 0: fixed file, bit 1: fixed buffer; every combination with each size */
		fl[i] = ((i / 4) & 1 ? RF_IO_FIXED_FILE : 0) | ((i / 8) & 1 ? RF_IO_FIXED_BUF : 0);
		t_fill(wbuf + (size_t)i * SLOT, len[i], seed, (uint64_t)i * SLOT);
		memset(rbuf + (size_t)i * SLOT, 0, len[i]);
	}
	for (int i = 0; i < NSLOT; i++) {
		int f = (fl[i] & RF_IO_FIXED_FILE) ? 0 : fd;
		T_OK(rf_ring_write(r, f, wbuf + (size_t)i * SLOT, len[i], (uint64_t)i * SLOT, fl[i],
				   cb, &w[i], NULL));
	}
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	for (int i = 0; i < NSLOT; i++) {
		T_EQ(w[i].calls, 1);
		T_EQ(w[i].res, (int64_t)len[i]);
	}
	/* What reached the file, read without the ring. */
	uint8_t *chk = aligned_alloc(4096, SLOT);
	T_CHECK(chk);
	for (int i = 0; i < NSLOT; i++) {
		T_EQ(pread(fd, chk, len[i], (off_t)i * SLOT), (ssize_t)len[i]);
		T_EQ(t_verify(chk, len[i], seed, (uint64_t)i * SLOT), -1);
	}
	free(chk);
	for (int i = 0; i < NSLOT; i++) {
		int f = (fl[i] & RF_IO_FIXED_FILE) ? 0 : fd;
		T_OK(rf_ring_read(r, f, rbuf + (size_t)i * SLOT, len[i], (uint64_t)i * SLOT, fl[i],
				  cb, &rd[i], NULL));
	}
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	for (int i = 0; i < NSLOT; i++) {
		T_EQ(rd[i].calls, 1);
		T_EQ(rd[i].res, (int64_t)len[i]);
		T_EQ(t_verify(rbuf + (size_t)i * SLOT, len[i], seed, (uint64_t)i * SLOT), -1);
	}
	/* NO_RETRY_SHORT: may stop short, but never reports -EAGAIN/-EINTR. */
	if (!direct) {
		for (int i = 0; i < NSLOT; i++) {
			memset(&rd[i], 0, sizeof(rd[i]));
			memset(rbuf + (size_t)i * SLOT, 0, len[i]);
			int f = (fl[i] & RF_IO_FIXED_FILE) ? 0 : fd;
			T_OK(rf_ring_read(r, f, rbuf + (size_t)i * SLOT, len[i], (uint64_t)i * SLOT,
					  fl[i] | RF_IO_NO_RETRY_SHORT, cb, &rd[i], NULL));
		}
		T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
		for (int i = 0; i < NSLOT; i++) {
			T_EQ(rd[i].calls, 1);
			T_CHECK(rd[i].res > 0 && rd[i].res <= (int64_t)len[i]);
			T_EQ(t_verify(rbuf + (size_t)i * SLOT, (size_t)rd[i].res, seed,
				      (uint64_t)i * SLOT), -1);
		}
	}
}

static void transient(int fd, int direct)
{
	struct rf_ring *r = ring_with("eagain=0.4,eintr=0.3,short=0.2,seed=5,ops=read+write");
	T_OK(rf_ring_register_files(r, &fd, 1));
	/* Writes come from the arena's first half, reads land in its second. */
	T_OK(rf_ring_register_buffers(r, 2 * NSLOT, SLOT, 4096));
	uint8_t *wbuf = rf_ring_buffer(r, 0), *rbuf = rf_ring_buffer(r, NSLOT);
	T_CHECK(wbuf && rbuf && rf_ring_buffer_size(r) == SLOT);
	for (uint64_t seed = 1; seed <= 3; seed++)
		round_trip(r, fd, direct, seed + 10 * (uint64_t)direct, wbuf, rbuf);
	struct rf_ring_stats st;
	rf_ring_get_stats(r, &st);
	printf("%s: faults %llu, retries %llu, short resubmits %llu\n",
	       direct ? "O_DIRECT" : "buffered", (unsigned long long)st.faults_injected,
	       (unsigned long long)st.retries, (unsigned long long)st.short_resubmits);
	T_CHECK(st.retries > 0 && st.faults_injected >= st.retries);
	rf_ring_destroy(r);
}

/* eagain=1 or eintr=1: every piece fails; each request must end with the error
 * after RETRY_MAX retries. */
static void persistent(int fd, const char *spec, int write, int64_t want)
{
	enum { N = 8 };
	struct rf_ring *r = ring_with(spec);
	uint8_t *buf = malloc((size_t)N * 4096);
	T_CHECK(buf);
	t_fill(buf, (size_t)N * 4096, 3, 0);
	struct req q[N];
	memset(q, 0, sizeof(q));
	for (int i = 0; i < N; i++) {
		if (write)
			T_OK(rf_ring_write(r, fd, buf + i * 4096, 4096, (uint64_t)i * 4096, 0,
					   cb_any, &q[i], NULL));
		else
			T_OK(rf_ring_read(r, fd, buf + i * 4096, 4096, (uint64_t)i * 4096, 0,
					  cb_any, &q[i], NULL));
	}
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	for (int i = 0; i < N; i++) {
		T_EQ(q[i].calls, 1);
		T_EQ(q[i].res, want);
	}
	struct rf_ring_stats st;
	rf_ring_get_stats(r, &st);
	printf("%s (%s): retries %llu, enters %llu\n", spec, write ? "writes" : "reads",
	       (unsigned long long)st.retries, (unsigned long long)st.enters);
	T_EQ(st.retries, (uint64_t)N * RETRY_MAX);
	T_EQ(st.faults_injected, (uint64_t)N * (RETRY_MAX + 1));
	rf_ring_destroy(r);
	free(buf);
}

static int retried_past_now(void *arg)
{
	struct rf_ring_stats st;
	rf_ring_get_stats(arg, &st);
	return st.retries >= 8; /* past the immediate retries: a backoff timeout is armed */
}

static void cancel_in_backoff(int fd)
{
	uint8_t buf[4096];
	struct req q = { 0 };
	rf_req_id id;
	struct rf_ring *r = ring_with("eagain=1");
	T_OK(rf_ring_read(r, fd, buf, sizeof(buf), 0, 0, cb_any, &q, &id));
	T_OK(rf_ring_run_until(r, retried_past_now, r, 0));
	T_EQ(q.calls, 0);
	T_EQ(rf_ring_cancel(r, id), 0);
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(q.calls, 1);
	T_EQ(q.res, -ECANCELED);
	T_EQ(rf_ring_cancel(r, id), -ENOENT);

	/* Teardown while waiting. */
	memset(&q, 0, sizeof(q));
	struct rf_ring_stats st0;
	rf_ring_get_stats(r, &st0);
	T_OK(rf_ring_read(r, fd, buf, sizeof(buf), 0, 0, cb_any, &q, NULL));
	while (1) {
		struct rf_ring_stats st;
		rf_ring_get_stats(r, &st);
		if (st.retries >= st0.retries + 8)
			break;
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	}
	T_EQ(q.calls, 0);
	rf_ring_destroy(r);
	T_EQ(q.calls, 1);
	T_EQ(q.res, -ECANCELED);
}

/* Left alone: writes under the default ops (read), and reads at the file position. */
static void untouched(int fd, const char *path)
{
	uint8_t buf[8192];
	struct req q = { 0 };
	struct rf_ring *r = ring_with("eagain=1,eintr=1,eio=1");
	t_fill(buf, sizeof(buf), 21, 0);
	T_OK(rf_ring_write(r, fd, buf, sizeof(buf), 0, 0, cb, &q, NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(q.calls, 1);
	T_EQ(q.res, (int64_t)sizeof(buf));
	int pfd = open(path, O_RDONLY | O_CLOEXEC);
	T_CHECK(pfd >= 0);
	memset(buf, 0, sizeof(buf));
	memset(&q, 0, sizeof(q));
	T_OK(rf_ring_read(r, pfd, buf, sizeof(buf), UINT64_MAX, 0, cb, &q, NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(q.calls, 1);
	T_EQ(q.res, (int64_t)sizeof(buf));
	T_EQ(t_verify(buf, sizeof(buf), 21, 0), -1);
	struct rf_ring_stats st;
	rf_ring_get_stats(r, &st);
	T_EQ(st.faults_injected, 0);
	T_EQ(st.retries, 0);
	close(pfd);
	rf_ring_destroy(r);
}

int main(void)
{
	char path[256];
	int fd = t_tmpfile(path, sizeof(path), 0);
	T_CHECK(ftruncate(fd, (off_t)NSLOT * SLOT) == 0);

	untouched(fd, path);
	transient(fd, 0);
	int dfd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (dfd >= 0) {
		transient(dfd, 1);
		close(dfd);
	} else {
		printf("O_DIRECT not supported here (%s): buffered only\n", strerror(errno));
	}

	persistent(fd, "eagain=1", 0, -EAGAIN);
	persistent(fd, "eintr=1", 0, -EINTR);
	persistent(fd, "eagain=1,ops=write", 1, -EAGAIN);
	cancel_in_backoff(fd);

	unlink(path);
	close(fd);
	return 0;
}
