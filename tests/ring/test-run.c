/* ring-run: the run modes. RF_RUN_NOWAIT returns at once with nothing to do and
 * does not wait for a pending timer; RF_RUN_ONCE waits for at least one completion
 * and dispatches it; RF_RUN_UNTIL_IDLE returns when nothing is pending and reports
 * the callbacks run. rf_ring_run_until: returns 0 as soon as the predicate holds
 * (checked before the first turn too), -EDEADLK when the ring is idle with the
 * predicate false, -ETIMEDOUT when its timeout passes first (a 10 s timer pending,
 * 20 ms limit); a timeout of UINT64_MAX ns is no limit, not one that wrapped past
 * the clock (it waits for a 20 ms timer). A callback that calls rf_ring_run or
 * rf_ring_run_until gets -EDEADLK, rf_ring_in_callback is true only inside
 * callbacks, and a callback that queues a new request has it run within the same
 * rf_ring_run(UNTIL_IDLE). */
#include "ring-test.h"

struct ctx {
	struct rf_ring *r;
	int nested_run, nested_until, in_cb, chained, fired;
	struct t_res chain;
};

static int always_false(void *arg)
{
	return 0;
}

static int always_true(void *arg)
{
	return 1;
}

static int fired(void *arg)
{
	return ((struct ctx *)arg)->fired > 0;
}

static int stored(void *arg)
{
	return ((struct t_res *)arg)->calls > 0;
}

static void nested(void *data, int64_t res)
{
	struct ctx *c = data;
	c->nested_run = rf_ring_run(c->r, RF_RUN_NOWAIT);
	c->nested_until = rf_ring_run_until(c->r, always_true, NULL, 0);
	c->in_cb = rf_ring_in_callback(c->r);
	/* queue a follow-up from inside the callback */
	if (!c->chained++)
		T_OK(rf_ring_timeout(c->r, 1000, t_store, &c->chain, NULL));
	c->fired++;
}

int main(void)
{
	struct rf_ring *r;
	T_OK(rf_ring_create(&r, NULL));
	struct ctx c = { .r = r };

	T_EQ(rf_ring_run(r, RF_RUN_NOWAIT), 0);
	T_EQ(rf_ring_run(r, RF_RUN_ONCE), 0); /* nothing in flight: does not block */
	T_EQ(rf_ring_run(r, RF_RUN_UNTIL_IDLE), 0);
	T_EQ(rf_ring_run_until(r, always_false, NULL, 0), -EDEADLK);
	T_EQ(rf_ring_run_until(r, always_true, NULL, 0), 0);
	T_EQ(rf_ring_in_callback(r), 0);

	/* A long timer: NOWAIT does not wait for it; run_until times out. */
	struct t_res longt = { 0 };
	rf_req_id lid;
	T_OK(rf_ring_timeout(r, 10ull * 1000000000ull, t_store, &longt, &lid));
	T_EQ(rf_ring_run(r, RF_RUN_NOWAIT), 0);
	T_EQ(longt.calls, 0);
	T_EQ(rf_ring_run_until(r, always_false, NULL, 20ull * 1000000), -ETIMEDOUT);
	T_EQ(longt.calls, 0);

	/* The largest timeout: run_until waits for the predicate, it does not time out. */
	struct t_res shortt = { 0 };
	T_OK(rf_ring_timeout(r, 20ull * 1000000, t_store, &shortt, NULL));
	T_EQ(rf_ring_run_until(r, stored, &shortt, UINT64_MAX), 0);
	T_EQ(shortt.calls, 1);

	/* ONCE waits for the 1 ms timer and dispatches it; nested runs are refused. */
	T_OK(rf_ring_timeout(r, 1000000, nested, &c, NULL));
	int n = 0;
	while (!c.fired) {
		int k = rf_ring_run(r, RF_RUN_ONCE);
		T_OK(k);
		n += k;
	}
	T_EQ(n, 1);
	T_EQ(c.nested_run, -EDEADLK);
	T_EQ(c.nested_until, -EDEADLK);
	T_EQ(c.in_cb, 1);
	T_EQ(rf_ring_in_callback(r), 0);

	/* run_until with a predicate that becomes true. */
	T_OK(rf_ring_run_until(r, always_true, NULL, 0));
	T_EQ(c.chain.calls, 0); /* not turned: the predicate held before the first turn */
	c.fired = 0;
	T_OK(rf_ring_timeout(r, 2000000, nested, &c, NULL));
	T_EQ(rf_ring_run_until(r, fired, &c, 0), 0);
	T_EQ(c.fired, 1);

	/* Cancel the long timer; UNTIL_IDLE finishes everything left and reports the
	 * callbacks run. The timeout chained from the first callback ran exactly once. */
	T_OK(rf_ring_cancel(r, lid));
	n = rf_ring_run(r, RF_RUN_UNTIL_IDLE);
	T_OK(n);
	T_CHECK(n >= 1);
	T_EQ(longt.res, -ECANCELED);
	T_EQ(c.chain.calls, 1);
	T_EQ(c.chain.res, 0);
	T_EQ(rf_ring_pending(r), 0);
	T_EQ(rf_ring_run_until(r, always_false, NULL, 1000000000ull), -EDEADLK);
	rf_ring_destroy(r);
	return 0;
}
