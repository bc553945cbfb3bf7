/* test-engine-interrupt: rf_engine_set_interrupt makes the user's waits interruptible
 * (a program's Ctrl-C, a binding's pending signal) and nothing else.
 *  - an asynchronous op that finishes only when the test says (a ring timeout far
 *    away) holds v: rf_engine_wait_var(v) and rf_engine_wait_all return -EINTR once the
 *    interrupt function says stop (its third call, every 2 ms), not before, and the op
 *    is still in flight;
 *  - waiting again after the interrupt is cleared ends when the op does, with 0, and
 *    the abandoned wait's record is freed by its op (ASan checks);
 *  - rf_engine_wait_idle, a teardown's drain, is never interrupted: with the interrupt
 *    asking to stop at every call it still waits for the op. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ring.h"
#include "engine.h"
#include "../test-util.h"

struct held {
	struct rf_ring *r;
	struct rf_op *op;
	int done;
};

static void release(void *data, int64_t res)
{
	struct held *h = data;

	(void)res;
	h->done = 1;
	rf_engine_op_done(h->op, 0);
}

/* starts, and finishes when its timer fires (ms from now) */
static uint64_t hold_ms;
static int start(void *ctx, struct rf_op *op)
{
	struct held *h = ctx;

	h->op = op;
	return rf_ring_timeout(h->r, hold_ms * 1000000ull, release, h, NULL);
}

static int calls, stop_after;
static int interrupt(void *arg)
{
	(void)arg;
	return ++calls >= stop_after;
}

static void push_held(struct rf_engine *e, struct held *h, struct rf_var *v)
{
	struct rf_op_desc d = { 0 };

	d.afn = start;
	d.ctx = h;
	d.writes = &v;
	d.nwrites = 1;
	d.name = "held";
	CHECK_OK(rf_engine_push(e, &d));
}

int main(void)
{
	struct rf_ring *r;
	struct rf_engine *e;
	struct rf_var *v;
	struct held h = { 0 };

	CHECK_OK(rf_ring_create(&r, NULL));
	CHECK_OK(rf_engine_create(&e, r, NULL));
	CHECK_OK(rf_var_create(e, "v", &v));
	h.r = r;

	/* wait_var and wait_all: -EINTR at the interrupt's third call, the op still out */
	hold_ms = 300;
	push_held(e, &h, v);
	calls = 0, stop_after = 3;
	rf_engine_set_interrupt(e, interrupt, NULL, 2000000ull);
	CHECK_EQ(rf_engine_wait_var(e, v), -EINTR);
	CHECK_EQ(calls, 3);
	CHECK(!h.done);
	calls = 0;
	CHECK_EQ(rf_engine_wait_all(e), -EINTR);
	CHECK_EQ(calls, 3);
	CHECK(!h.done);
	/* cleared: the next wait ends with the op */
	rf_engine_set_interrupt(e, NULL, NULL, 0);
	CHECK_OK(rf_engine_wait_var(e, v));
	CHECK(h.done);
	CHECK_OK(rf_engine_wait_all(e));

	/* wait_idle drains whatever the interrupt says */
	h.done = 0;
	hold_ms = 30;
	push_held(e, &h, v);
	calls = 0, stop_after = 1;
	rf_engine_set_interrupt(e, interrupt, NULL, 1000000ull);
	CHECK_OK(rf_engine_wait_idle(e));
	CHECK(h.done);
	rf_engine_set_interrupt(e, NULL, NULL, 0);
	CHECK_OK(rf_engine_wait_all(e));

	rf_var_destroy(e, v, NULL, NULL, NULL);
	rf_engine_destroy(e);
	rf_ring_destroy(r);
	printf("ok: waits end with -EINTR when the interrupt says so; wait_idle drains\n");
	return 0;
}
