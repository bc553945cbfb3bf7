/* core/turn.c -- turning the reactor until a condition holds: room under the cap, a
 * waiter's op finished, nothing in flight. The callers checked that turning it is
 * allowed here (not from inside an op or callback). */
#include <errno.h>
#include <stdlib.h>

#include "engine-impl.h"

struct rf__room {
	struct rf_engine *e;
	uint32_t n;
	size_t bytes;
};

static int rf__room_cond(void *arg)
{
	struct rf__room *r = arg;

	return rf__has_room(r->e, r->n, r->bytes);
}

/* Inside user code the engine called (an op, an async fn, a done callback), or a
 * ring callback: the reactor cannot be turned from here. */
int rf__in_callback(struct rf_engine *e)
{
	return e->in_callback || e->pumping || rf_ring_in_callback(e->ring);
}

int rf__make_room(struct rf_engine *e, uint32_t n, size_t bytes)
{
	struct rf__room room = { e, n, bytes };
	int ret;

	if (rf__room_cond(&room) || rf__in_callback(e))
		return 0;
	e->st.cap_waits++;
	rf__pump(e);
	if (rf__room_cond(&room))
		return 0;
	ret = rf_ring_run_until(e->ring, rf__room_cond, &room, 0);
	return ret < 0 && ret != -EDEADLK ? ret : 0;
}

int rf__room_for(struct rf_engine *e, const struct rf_op_desc *d,
		 const struct rf_graph_bind *binds, unsigned nbinds, uint32_t n, size_t bytes)
{
	int ret;

	if (e->room_desc || e->room_binds)  /* not re-entered: callbacks do not turn it */
		return rf__make_room(e, n, bytes);
	e->room_desc = d;
	e->room_binds = binds;
	e->room_nbinds = nbinds;
	ret = rf__make_room(e, n, bytes);
	e->room_desc = NULL;
	e->room_binds = NULL;
	e->room_nbinds = 0;
	return ret;
}

static int rf__waiter_done(void *arg)
{
	return ((struct rf__waiter *)arg)->done;
}

/* Turn the ring until pred(arg), asking the engine's interrupt (if any) every period:
 * 0, -EINTR when it asked to stop, or the ring's error. */
static int rf__run_until(struct rf_engine *e, int (*pred)(void *), void *arg)
{
	int ret;

	if (!e->interrupt)
		return rf_ring_run_until(e->ring, pred, arg, 0);
	for (;;) {
		ret = rf_ring_run_until(e->ring, pred, arg, e->interrupt_ns);
		if (ret != -ETIMEDOUT)
			return ret;
		if (e->interrupt(e->interrupt_arg))
			return -EINTR;
	}
}

void rf_engine_set_interrupt(struct rf_engine *e, int (*fn)(void *arg), void *arg,
			     uint64_t period_ns)
{
	if (!e || rf__admin_refused(e, "rf_engine_set_interrupt") < 0) {
		rf__log(RF_LOG_ERROR, "%s (the interrupt left as it was)",
			e ? rf_last_error() : "rf_engine_set_interrupt: e is NULL");
		return;
	}
	e->interrupt = fn;
	e->interrupt_arg = arg;
	e->interrupt_ns = period_ns ? period_ns : 100000000ull;
}

void rf_engine_get_interrupt(const struct rf_engine *e, int (**fn)(void *arg), void **arg)
{
	*fn = e ? e->interrupt : NULL;
	*arg = e ? e->interrupt_arg : NULL;
}

/* Turn the reactor until w's op finished. Returns 0 (w freed, *err its outcome),
 * -EINTR (interrupted) or the ring's error (w abandoned: the op's completion frees
 * it). */
int rf__wait_waiter(struct rf_engine *e, struct rf__waiter *w, int *err)
{
	int ret = 0;

	rf__pump(e);
	if (!w->done)
		ret = rf__run_until(e, rf__waiter_done, w);
	if (!w->done) {
		w->abandoned = 1;
		return ret < 0 ? ret : -EIO;
	}
	if (err)
		*err = w->err;
	free(w);
	return 0;
}

static int rf__all_done(void *arg)
{
	struct rf_engine *e = arg;

	return e->inflight == 0;
}

/* Turn the reactor until nothing is in flight; interruptible: the engine's interrupt
 * may end it (-EINTR) -- never for a teardown, which must drain. */
int rf__wait_idle(struct rf_engine *e, int interruptible)
{
	int ret;

	rf__pump(e);
	if (e->inflight) {
		ret = interruptible ? rf__run_until(e, rf__all_done, e)
				    : rf_ring_run_until(e->ring, rf__all_done, e, 0);
		if (ret < 0)
			return ret;
	}
	return 0;
}
