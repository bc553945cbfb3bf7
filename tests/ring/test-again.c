/* ring-again: a request a completion sent on -- the next piece of a short transfer, a
 * rearm -- waits on the ring's again list until the run loop's submit stage queues it
 * (ring/README.md, "Where things happen"). What can happen to it there must end as it
 * would in the kernel (white-box: the test looks at the list through ring-impl.h):
 *   cancel   a pipe read that came back short (5 of 10 bytes) is on the list when a
 *            later CQE's callback cancels it: it ends with its 5 bytes (a stream's
 *            count, not -ECANCELED), is never queued, and nothing more is consumed;
 *   watch    an eventfd watch whose rearm is on the list is stopped by another
 *            watch's callback: freed by the submit stage (no read left in the
 *            kernel: the ring goes idle, nothing leaks);
 *   put      a multishot receive parked for a buffer is sent on by rf_bufgroup_put
 *            outside the run loop: the next turn queues it and the data comes; put,
 *            then rf_ring_cancel before any turn: one last callback, -ECANCELED;
 *            put, then rf_ring_destroy: the same;
 *   dgram    a parked datagram receive cancelled (or its ring destroyed): one last
 *            callback, -ECANCELED, and no event of 0 bytes before it;
 *   deadline a read past its deadline while sent on (an injected -EAGAIN retried with
 *            backoffs, the deadline shorter than the retries) ends -ETIMEDOUT.
 * Each ring turn is bounded (rf_ring_run_until with a timeout): a request lost between
 * the stages would hang a run, and here fails the test instead. */
#include "ring-test.h"

#include <sys/eventfd.h>
#include <sys/socket.h>

#include "ring-impl.h"
#include "ring-ops.h"

#define LIMIT_NS (5ull * 1000000000ull)

static struct rf_ring *r;

static int t_done(void *arg)
{
	return ((struct t_res *)arg)->calls > 0;
}

static int idle(void *arg)
{
	(void)arg;
	return rf_ring_pending(r) == 0;
}

/* ---- cancel ------------------------------------------------------------------- */

static rf_req_id victim;
static int victim_was_sent_on, cancel_ret = 1;

static void cancel_victim(void *data, int64_t res)
{
	(void)data;
	T_EQ(res, 0);
	struct rf__req *q = rf__req_by_id(r, victim);
	T_CHECK(q != NULL);
	victim_was_sent_on = q->again != 0;
	cancel_ret = rf_ring_cancel(r, victim);
}

static void test_cancel(void)
{
	T_OK(rf_ring_create(&r, NULL));
	int p[2];
	T_CHECK(pipe(p) == 0);
	T_CHECK(write(p[1], "abcde", 5) == 5);
	char buf[16] = { 0 };
	struct t_res rd = { 0 }, nop = { 0 };
	/* one enter: the read runs first (the pipe has data) and comes back short */
	T_OK(rf_ring_read(r, p[0], buf, 10, UINT64_MAX, 0, t_store, &rd, &victim));
	struct rf_io io = { .op = RF_IOP_NOP };
	T_OK(rf_ring_submit(r, &io, cancel_victim, &nop, NULL));
	T_OK(rf_ring_run_until(r, t_done, &rd, LIMIT_NS));
	T_EQ(victim_was_sent_on, 1);
	T_EQ(cancel_ret, 0);
	T_EQ(rd.calls, 1);
	T_EQ(rd.res, 5);
	T_CHECK(memcmp(buf, "abcde", 5) == 0);
	T_CHECK(r->again_head == NULL);
	/* nothing else was taken from the pipe */
	T_CHECK(write(p[1], "XYZ", 3) == 3);
	struct t_res rd2 = { 0 };
	T_OK(rf_ring_read(r, p[0], buf, 3, UINT64_MAX, 0, t_store, &rd2, NULL));
	T_OK(rf_ring_run_until(r, t_done, &rd2, LIMIT_NS));
	T_EQ(rd2.res, 3);
	T_CHECK(memcmp(buf, "XYZ", 3) == 0);
	T_OK(rf_ring_run_until(r, idle, NULL, LIMIT_NS));
	rf_ring_destroy(r);
	close(p[0]);
	close(p[1]);
}

/* ---- watch -------------------------------------------------------------------- */

static struct rf_watch *wa, *wb;
static int a_calls, b_calls, a_was_sent_on;

static void on_a(void *data, int64_t v)
{
	(void)data;
	T_EQ(v, 1);
	a_calls++;
}

static void on_b(void *data, int64_t v)
{
	(void)data;
	T_EQ(v, 1);
	b_calls++;
	if (wa) {
		a_was_sent_on = wa->rq && wa->rq->again;
		rf_watch_stop(wa);
		wa = NULL;
	}
}

static int both_called(void *arg)
{
	(void)arg;
	return b_calls > 0;
}

static void test_watch(void)
{
	/* The order of the two CQEs is the kernel's: A's first puts its rearm on the list
	 * when B's callback stops it. Tried a few times until that order came. */
	for (int tries = 0; tries < 20 && !a_was_sent_on; tries++) {
		T_OK(rf_ring_create(&r, NULL));
		int ea = eventfd(0, EFD_CLOEXEC), eb = eventfd(0, EFD_CLOEXEC);
		T_CHECK(ea >= 0 && eb >= 0);
		a_calls = b_calls = 0;
		T_OK(rf_watch_eventfd(r, ea, 1, on_a, NULL, &wa));
		T_OK(rf_watch_eventfd(r, eb, 1, on_b, NULL, &wb));
		T_OK(rf_ring_run(r, RF_RUN_NOWAIT)); /* both reads in the kernel */
		uint64_t one = 1;
		T_CHECK(write(ea, &one, 8) == 8);
		T_CHECK(write(eb, &one, 8) == 8);
		T_OK(rf_ring_run_until(r, both_called, NULL, LIMIT_NS));
		T_CHECK(wa == NULL);
		rf_watch_stop(wb);
		/* A and B gone: nothing left pending, no read left in the kernel */
		T_OK(rf_ring_run_until(r, idle, NULL, LIMIT_NS));
		T_CHECK(r->watches == NULL);
		T_EQ(r->nlive, 0);
		rf_ring_destroy(r);
		close(ea);
		close(eb);
	}
	T_EQ(a_was_sent_on, 1);
}

/* ---- put ---------------------------------------------------------------------- */

static struct rf_bufgroup *g;
static void *held;
static int nev, nfinal;
static int64_t final_res;
static char got[64];
static size_t ngot;

static void on_recv(void *data, int64_t res, void *buf, int more)
{
	(void)data;
	if (!more) {
		nfinal++;
		final_res = res;
		return;
	}
	T_CHECK(res > 0 && buf && ngot + (size_t)res <= sizeof(got));
	memcpy(got + ngot, buf, (size_t)res);
	ngot += (size_t)res;
	nev++;
	if (!held)
		held = buf; /* kept: the one buffer of the group, so the next receive parks */
	else
		T_OK(rf_bufgroup_put(g, buf));
}

static int parked(void *arg)
{
	struct rf__req *q = rf__req_by_id(r, *(rf_req_id *)arg);
	return q && (q->flags & RF__RQ_PARKED);
}

static int got_one(void *arg)
{
	(void)arg;
	return nev >= 1;
}

static int got_two(void *arg)
{
	(void)arg;
	return nev >= 2;
}

static int final_seen(void *arg)
{
	(void)arg;
	return nfinal > 0;
}

/* A new ring whose multishot receive on a socketpair of type (into a group of one
 * buffer) took "first" and keeps its buffer, then parked with "second" waiting. Its
 * id; the socketpair in sv. */
static rf_req_id park_one(int type, int sv[2], const char *first, const char *second)
{
	T_OK(rf_ring_create(&r, NULL));
	T_CHECK(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) == 0);
	T_OK(rf_bufgroup_create(r, 1, 16, &g));
	held = NULL;
	nev = nfinal = 0;
	ngot = 0;
	final_res = 1;
	rf_req_id id = 0;
	T_OK(rf_ring_recv_multishot(r, sv[0], g, 0, on_recv, NULL, &id));
	T_CHECK(write(sv[1], first, strlen(first)) == (ssize_t)strlen(first));
	while (nev < 1)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_CHECK(write(sv[1], second, strlen(second)) == (ssize_t)strlen(second));
	T_OK(rf_ring_run_until(r, parked, &id, LIMIT_NS));
	T_EQ(nev, 1);
	return id;
}

/* A receive parked for a buffer, then the buffer put back outside the run loop:
 * what comes next is the mode's ("run", "cancel", "destroy"). */
static void test_put(const char *mode)
{
	int sv[2];
	rf_req_id id = park_one(SOCK_STREAM, sv, "first", "second");
	T_OK(rf_bufgroup_put(g, held)); /* outside the run loop: the receive is sent on */
	struct rf__req *q = rf__req_by_id(r, id);
	T_CHECK(q && q->again == RF__AG_QUEUE && r->again_head == q);
	if (!strcmp(mode, "run")) {
		T_OK(rf_ring_run_until(r, got_two, NULL, LIMIT_NS));
		T_CHECK(ngot == 11 && memcmp(got, "firstsecond", 11) == 0);
		T_EQ(nfinal, 0);
		T_OK(rf_ring_cancel(r, id));
		T_OK(rf_ring_run_until(r, final_seen, NULL, LIMIT_NS));
		T_EQ(final_res, -ECANCELED);
	} else if (!strcmp(mode, "cancel")) {
		T_OK(rf_ring_cancel(r, id));
		T_CHECK(q->again == RF__AG_CANCEL);
		T_OK(rf_ring_run_until(r, final_seen, NULL, LIMIT_NS));
		T_EQ(final_res, -ECANCELED);
		T_EQ(nev, 1); /* never queued: "second" is still in the socket */
		char b[8];
		T_CHECK(read(sv[0], b, sizeof(b)) == 6 && memcmp(b, "second", 6) == 0);
	} else {
		rf_ring_destroy(r); /* the request on the list ends with the rest */
		r = NULL;
		T_EQ(nfinal, 1);
		T_EQ(final_res, -ECANCELED);
	}
	if (r) {
		T_OK(rf_ring_run_until(r, idle, NULL, LIMIT_NS));
		T_OK(rf_bufgroup_destroy(g));
		rf_ring_destroy(r);
	}
	close(sv[0]);
	close(sv[1]);
}

/* ---- a parked datagram receive cancelled ---------------------------------------- */

/* Its one callback is the last (-ECANCELED): before, the NOP that ended it gave a
 * result of 0, which a datagram receive takes for an empty datagram. */
static void test_dgram_cancel(void)
{
	int sv[2];
	rf_req_id id = park_one(SOCK_DGRAM, sv, "one", "two");
	T_OK(rf_ring_cancel(r, id));
	T_OK(rf_ring_run_until(r, final_seen, NULL, LIMIT_NS));
	T_EQ(nev, 1);           /* no event of 0 bytes before the end */
	T_EQ(nfinal, 1);
	T_EQ(final_res, -ECANCELED);
	T_OK(rf_bufgroup_put(g, held));
	T_OK(rf_ring_run_until(r, idle, NULL, LIMIT_NS));
	/* parked again, then the ring destroyed: the same single ending */
	held = NULL;
	nev = nfinal = 0;
	T_OK(rf_ring_recv_multishot(r, sv[0], g, 0, on_recv, NULL, &id));
	T_OK(rf_ring_run_until(r, got_one, NULL, LIMIT_NS)); /* "two", still queued */
	T_CHECK(write(sv[1], "three", 5) == 5);
	T_OK(rf_ring_run_until(r, parked, &id, LIMIT_NS));
	rf_ring_destroy(r);
	T_EQ(nev, 1);
	T_EQ(nfinal, 1);
	T_EQ(final_res, -ECANCELED);
	close(sv[0]);
	close(sv[1]);
}

/* ---- deadline ----------------------------------------------------------------- */

static void test_deadline(void)
{
	/* every read piece fails -EAGAIN: 4 retries at once, then backoffs of 50, 100,
	 * 200 us, ...; a 2 ms deadline passes while a retry waits on the list or in its
	 * backoff */
	T_CHECK(setenv("RF_FAULT_INJECT", "eagain=1,seed=1", 1) == 0);
	T_OK(rf_ring_create(&r, NULL));
	T_CHECK(unsetenv("RF_FAULT_INJECT") == 0);
	char path[256];
	int fd = t_tmpfile(path, sizeof(path), 0);
	unlink(path);
	T_CHECK(write(fd, "0123456789", 10) == 10);
	char buf[10];
	struct t_res rd = { 0 };
	struct rf_io io = { .op = RF_IOP_READ, .fd = fd, .buf = buf, .len = 10, .off = 0,
			    .timeout_ns = 2000000 };
	T_OK(rf_ring_submit(r, &io, t_store, &rd, NULL));
	T_OK(rf_ring_run_until(r, t_done, &rd, LIMIT_NS));
	T_EQ(rd.res, -ETIMEDOUT);
	struct rf_ring_stats st;
	rf_ring_get_stats(r, &st);
	T_CHECK(st.retries > 4);
	T_CHECK(r->again_head == NULL);
	rf_ring_destroy(r);
	close(fd);
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	if (!only || !strcmp(only, "cancel"))
		test_cancel();
	if (!only || !strcmp(only, "watch"))
		test_watch();
	if (!only || !strcmp(only, "put")) {
		test_put("run");
		test_put("cancel");
		test_put("destroy");
	}
	if (!only || !strcmp(only, "dgram"))
		test_dgram_cancel();
	if (!only || !strcmp(only, "deadline"))
		test_deadline();
	return 0;
}
