/* ring-cancel: rf_ring_cancel. A 10-second timeout cancelled right away completes
 * with -ECANCELED (and the run returns long before it would fire); a read on a pipe
 * that has no data (its writer stays open but silent) is cancelled and completes with
 * -ECANCELED; cancelling the same id twice is harmless; an id whose request already
 * completed returns -ENOENT -- also after its slot was reused by a newer request,
 * which must not be disturbed; id 0 and made-up ids return -ENOENT. A timeout that is
 * not cancelled fires with 0. A cancel issued from inside another request's callback
 * also works. */
#include "ring-test.h"

struct pair {
	struct rf_ring *r;
	rf_req_id victim;
	int ret;
};

static void cancel_other(void *data, int64_t res)
{
	struct pair *p = data;
	p->ret = rf_ring_cancel(p->r, p->victim);
}

int main(void)
{
	struct rf_ring *r;
	T_OK(rf_ring_create(&r, NULL));
	int p[2];
	T_CHECK(pipe(p) == 0);

	struct t_res tmo = { 0 }, rd = { 0 }, fired = { 0 };
	rf_req_id tid = 0, rid = 0, fid = 0;
	char buf[64];
	T_OK(rf_ring_timeout(r, 10ull * 1000000000ull, t_store, &tmo, &tid));
	T_OK(rf_ring_read(r, p[0], buf, sizeof(buf), UINT64_MAX, 0, t_store, &rd, &rid));
	T_OK(rf_ring_timeout(r, 1000000, t_store, &fired, &fid)); /* 1 ms */
	T_CHECK(tid && rid && fid && tid != rid && rid != fid);
	T_EQ(rf_ring_pending(r), 3);
	/* Let them reach the kernel before cancelling. */
	T_OK(rf_ring_run(r, RF_RUN_NOWAIT));
	T_EQ(tmo.calls + rd.calls, 0);
	T_EQ(rf_ring_cancel(r, tid), 0);
	T_EQ(rf_ring_cancel(r, rid), 0);
	T_EQ(rf_ring_cancel(r, rid), 0); /* again: still in flight, harmless */
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(tmo.calls, 1);
	T_EQ(tmo.res, -ECANCELED);
	T_EQ(rd.calls, 1);
	T_EQ(rd.res, -ECANCELED);
	T_EQ(fired.calls, 1);
	T_EQ(fired.res, 0);

	/* Stale ids. */
	T_EQ(rf_ring_cancel(r, tid), -ENOENT);
	T_EQ(rf_ring_cancel(r, rid), -ENOENT);
	T_EQ(rf_ring_cancel(r, fid), -ENOENT);
	T_EQ(rf_ring_cancel(r, 0), -ENOENT);
	T_EQ(rf_ring_cancel(r, 0xdeadbeef00000000ull | 12345), -ENOENT);

	/* The slot of a finished request is reused; its old id must not cancel the new one. */
	struct t_res again = { 0 };
	rf_req_id nid = 0;
	T_OK(rf_ring_timeout(r, 1000000, t_store, &again, &nid));
	T_CHECK(nid != fid && nid != tid && nid != rid);
	T_EQ(rf_ring_cancel(r, fid), -ENOENT);
	T_EQ(rf_ring_cancel(r, tid), -ENOENT);
	T_EQ(rf_ring_cancel(r, rid), -ENOENT);
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(again.res, 0);

	/* Cancel from inside a callback: a 1 ms timeout cancels a pipe read. */
	struct t_res rd2 = { 0 };
	struct pair pr = { r, 0, 1 };
	T_OK(rf_ring_read(r, p[0], buf, sizeof(buf), UINT64_MAX, 0, t_store, &rd2, &pr.victim));
	T_OK(rf_ring_timeout(r, 1000000, cancel_other, &pr, NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(pr.ret, 0);
	T_EQ(rd2.calls, 1);
	T_EQ(rd2.res, -ECANCELED);

	/* The pipe still works: nothing was consumed by the cancelled reads. */
	T_EQ(write(p[1], "xyz", 3), 3);
	struct t_res rd3 = { 0 };
	T_OK(rf_ring_read(r, p[0], buf, 3, UINT64_MAX, 0, t_store, &rd3, NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(rd3.res, 3);
	T_CHECK(memcmp(buf, "xyz", 3) == 0);

	rf_ring_destroy(r);
	close(p[0]);
	close(p[1]);
	return 0;
}
