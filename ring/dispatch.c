/* ring/dispatch.c -- the run loop: one io_uring_enter per turn (submit what is
 * queued, maybe wait), then reap the CQ and dispatch each CQE (rf__handle) to its
 * request's kind (kind.c: complete), a retry's backoff, or a notifier; then the
 * submit stage of what the completions sent on (rf__resubmit). Callbacks run only
 * from here. */
#include "ring-impl.h"

#include "rf-internal.h"

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <string.h>
#include <time.h>

#define RF__SPIN_YIELD 3  /* the spin yields every 4th poll (core/worker.c's too) */

/* A CQE to its request's kind (kind.c), or to a notifier; the callbacks run. */
static int rf__handle(struct rf_ring *r, uint64_t ud, int32_t res, uint32_t cflags)
{
	switch (ud & RF__TAG_MASK) {
	case RF__TAG_REQ: {
		struct rf__req *q = (struct rf__req *)(uintptr_t)(ud & RF__PTR_MASK);
		if (!q || !q->live || (q->gen & 7) != ((ud >> 3) & 7))
			return 0; /* cannot happen: every request SQE has one CQE */
		/* a request its linked deadline cancelled */
		if (res == -ECANCELED &&
		    (q->flags & (RF__RQ_DEADLINE | RF__RQ_CANCELLED)) == RF__RQ_DEADLINE)
			res = -ETIMEDOUT;
		return rf__kinds[q->kind].complete(r, q, res, cflags);
	}
	case RF__TAG_RETRY: {
		struct rf__req *q = (struct rf__req *)(uintptr_t)(ud & RF__PTR_MASK);
		if (!q || !q->live || (q->gen & 7) != ((ud >> 3) & 7) || !(q->flags & RF__RQ_BACKOFF))
			return 0; /* cannot happen: one CQE per armed backoff */
		/* the backoff ended (fired, or cancelled): the piece goes again */
		q->flags &= ~RF__RQ_BACKOFF;
		if (q->flags & RF__RQ_CANCELLED) /* a zero-copy send waits for its notifications */
			return rf__req_again(r, q, -ECANCELED);
		return rf__defer(r, q, RF__AG_REQUEUE);
	}
	case RF__TAG_NOTIFY:
		rf__notify_msg(r, ud, res);
		return 0;
	default:
		return 0;
	}
}

/* The submit stage of what completions sent on (the again list, oldest first): each
 * request's piece queued, or its retry's backoff armed; one cancelled meanwhile, past
 * its deadline, or whose SQE cannot be had (an SQ that cannot be flushed) has that
 * outcome -- -ECANCELED, -ETIMEDOUT, the error -- handed to its kind's complete as its
 * own CQE would be. A request past its deadline is not queued again: the kernel's
 * linked timeout ends a piece that waits, but one it interrupted comes back with
 * -EINTR or a short count, and only this check ends those. The callbacks it ran. */
static int rf__resubmit(struct rf_ring *r)
{
	int n = 0;
	struct rf__req *q;

	while ((q = r->again_head)) {
		r->again_head = q->next_free;
		if (!r->again_head)
			r->again_tail = NULL;
		q->next_free = NULL;
		unsigned a = q->again;
		q->again = 0;
		int dl = a != RF__AG_QUEUE && (q->flags & RF__RQ_DEADLINE);
		uint64_t now = dl ? rf_now_ns() : 0, ns;
		int ret;
		if (a == RF__AG_CANCEL || (q->flags & RF__RQ_CANCELLED))
			ret = -ECANCELED;
		else if (dl && now >= q->deadline)
			ret = -ETIMEDOUT;
		else if (a == RF__AG_RETRY && (ns = rf__retry_wait_ns(q, now)))
			ret = rf__queue_ctl(r, RF__CTL_BACKOFF, q, ns);
		else
			ret = rf__queue(r, q);
		if (ret < 0)
			n += r->kinds[q->kind].complete(r, q, ret, 0);
	}
	return n;
}

static int rf__reap(struct rf_ring *r)
{
	int n = 0;
	while (r->backlog_head < r->nbacklog) {
		struct rf__cqe c = r->backlog[r->backlog_head++];
		r->st.completions++;
		n += rf__handle(r, c.ud, c.res, c.flags);
	}
	r->nbacklog = r->backlog_head = 0;
	/* Bounded so that one turn ends even if callbacks keep completing inline, and by
	 * rf_ring_set_max_batch where set. */
	unsigned budget = r->ring.cq.ring_entries * 4;
	if (r->max_batch && r->max_batch < budget)
		budget = r->max_batch;
	struct io_uring_cqe *c;
	while (budget-- && !__io_uring_peek_cqe(&r->ring, &c, NULL) && c) {
		uint64_t ud = c->user_data;
		int32_t res = c->res;
		uint32_t cflags = c->flags;
		io_uring_cq_advance(&r->ring, 1);
		r->st.completions++;
		n += rf__handle(r, ud, res, cflags);
	}
	n += rf__notify_flush(r);
	return n + rf__resubmit(r);
}

/* One loop turn: one io_uring_enter (submit what is queued and, if asked, wait for
 * one completion), then dispatch everything in the CQ. */
int rf__turn(struct rf_ring *r, int wait, struct __kernel_timespec *ts)
{
	struct io_uring_cqe *cqe;
	int busy = 0;
	/* pollers first: what they deliver is this turn's work, and may queue more */
	int polled = (int)rf__poll(r, &busy);
	/* what was sent on since the last turn (rf_bufgroup_put, a poller's callbacks) */
	polled += rf__resubmit(r);
	unsigned queued = io_uring_sq_ready(&r->ring);
	int have = polled > 0 || io_uring_cq_ready(&r->ring) > 0 || r->nbacklog > r->backlog_head;
	int overflow = (IO_URING_READ_ONCE(*r->ring.sq.kflags) & IORING_SQ_CQ_OVERFLOW) != 0;
	int ret = 0, parked = 0;
	if (wait && !have && busy && r->spin_ns) {
		/* A poller has work out and nothing else is ready: poll for a bounded time
		 * before sleeping. What is queued goes to the kernel first. */
		uint64_t t0 = rf_now_ns(), t;
		if (queued) {
			ret = io_uring_submit(&r->ring);
			r->st.enters++;
			rf__count_submitted(r);
			queued = io_uring_sq_ready(&r->ring);
		}
		r->st.spins++;
		unsigned k = 0;
		int crowded = rf__spin_crowded();
		do {
			if (crowded && (++k & RF__SPIN_YIELD) == 0)
				sched_yield();  /* fewer cores than spinners: let the one due run */
			else
				rf__cpu_relax();
			if (io_uring_cq_ready(&r->ring) > 0) {
				have = 1;
				break;
			}
			if ((polled = (int)rf__poll(r, &busy)) > 0) {
				have = 1;
				break;
			}
			if (r->again_head)
				break;  /* a poller's callback sent a request on: queued below */
			t = rf_now_ns();
		} while (busy && t - t0 < r->spin_ns);
		r->st.spin_ns += rf_now_ns() - t0;
		r->st.spin_hits += have;
		queued = io_uring_sq_ready(&r->ring); /* a poller's callbacks may queue */
	}
	if (wait && !have && r->pollers) {
		/* Parking: say so, then poll once more. An agent that publishes a completion
		 * and then finds parked set signals the ring; one that finds it clear is seen
		 * by this poll (both sides fence: rf_ring_parked). */
		parked = 1;
		atomic_store_explicit(&r->parked, 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		if ((polled = (int)rf__poll(r, &busy)) > 0)
			have = 1;
		queued = io_uring_sq_ready(&r->ring);
	}
	if (r->again_head) { /* sent on by a poller's callbacks since: queued before a wait */
		int k = rf__resubmit(r);
		if (k > 0) {
			polled += k;
			have = 1;
		}
		queued = io_uring_sq_ready(&r->ring);
	}
	if (wait && !have) {
		if (ts)
			ret = io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1, ts, NULL);
		else
			ret = io_uring_submit_and_wait(&r->ring, 1);
		r->st.enters++;
	} else if (queued || overflow || (!have && (r->nlive || r->nnotifiers))) {
		/* GETEVENTS without waiting: runs deferred task work, posts its CQEs */
		ret = io_uring_submit_and_get_events(&r->ring);
		r->st.enters++;
	}
	if (parked)     /* cleared only where set: the workers read its line after every op */
		atomic_store_explicit(&r->parked, 0, memory_order_relaxed);
	rf__count_submitted(r);
	if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EBUSY && ret != -EAGAIN)
		return ret;
	return rf__reap(r) + polled;
}

static int rf__has_work(struct rf_ring *r)
{
	return io_uring_sq_ready(&r->ring) || io_uring_cq_ready(&r->ring) ||
	       r->nbacklog > r->backlog_head || r->again_head;
}

int rf__owner_refused(const struct rf_ring *r, const char *fn)
{
	if (!r)
		return rf__fail(-EINVAL, "%s: the ring is NULL", fn);
	return rf__fail(-EPERM, "%s called from a thread other than the ring's owner (the "
			"thread that created it): refused; a ring is used by its owner only "
			"(rf_notifier_signal wakes it from elsewhere)", fn);
}

static int rf__nested(const char *fn)
{
	return rf__fail(-EDEADLK, "%s: called from inside a callback or rf_ring_run_until "
			"predicate of the same ring; expected a call from outside its run "
			"loop", fn);
}

static int rf__turn_failed(const char *fn, int ret)
{
	return rf__fail(ret, "%s: waiting for completions (io_uring_enter): %s", fn,
			strerror(-ret));
}

int rf_ring_run(struct rf_ring *r, enum rf_run_mode mode)
{
	if (!r)
		return rf__fail(-EINVAL, "rf_ring_run: r is NULL");
	RF__OWNER_OR_RETURN(r, "rf_ring_run");
	if (r->in_run || r->cb_depth)
		return rf__nested("rf_ring_run");
	r->in_run = 1;
	int total = 0, ret = 0;
	switch (mode) {
	case RF_RUN_UNTIL_IDLE:
		for (int looked = 0;; looked = 0) {
			int busy = rf_ring_pending(r) > 0;
			if (!busy && !rf__has_work(r) && !looked) {
				/* deferred completions (undeclared MSG_RING signals) show only
				 * after an enter: one turn that does not wait, as run_until */
				looked = 1;
				if ((ret = rf__turn(r, 0, NULL)) < 0)
					break;
				total += ret;
				busy = rf_ring_pending(r) > 0;
			}
			if (!busy && !rf__has_work(r))
				break;
			ret = rf__turn(r, busy, NULL);
			if (ret < 0)
				break;
			total += ret;
			if (!busy)
				break;
		}
		break;
	case RF_RUN_ONCE:
		ret = rf__turn(r, r->nlive > 0 || r->nnotifiers > 0, NULL);
		if (ret > 0)
			total += ret;
		break;
	case RF_RUN_NOWAIT:
		ret = rf__turn(r, 0, NULL);
		if (ret > 0)
			total += ret;
		break;
	default:
		r->in_run = 0;
		return rf__fail(-EINVAL, "rf_ring_run: mode = %d, expected RF_RUN_UNTIL_IDLE, "
				"RF_RUN_ONCE or RF_RUN_NOWAIT", (int)mode);
	}
	r->in_run = 0;
	return ret < 0 ? rf__turn_failed("rf_ring_run", ret) : total;
}

int rf_ring_run_until(struct rf_ring *r, int (*pred)(void *arg), void *arg, uint64_t timeout_ns)
{
	if (!r || !pred)
		return rf__fail(-EINVAL, "rf_ring_run_until: %s is NULL", !r ? "r" : "pred");
	RF__OWNER_OR_RETURN(r, "rf_ring_run_until");
	if (r->in_run || r->cb_depth)
		return rf__nested("rf_ring_run_until");
	r->in_run = 1;
	uint64_t deadline = rf__deadline_after(timeout_ns);
	int ret, looked = 0;
	for (;;) {
		if (pred(arg)) {
			ret = 0;
			break;
		}
		int busy = rf_ring_pending(r) > 0;
		if (!busy && !rf__has_work(r) && !looked) {
			/* what the kernel holds as deferred task work (a notifier's signals
			 * sent without rf_notifier_expect: MSG_RING completions) shows only
			 * after an enter: one turn that does not wait, before idle is said */
			looked = 1;
			if ((ret = rf__turn(r, 0, NULL)) < 0) {
				rf__turn_failed("rf_ring_run_until", ret);
				break;
			}
			continue;
		}
		if (!busy && !rf__has_work(r)) {
			ret = rf__fail(-EDEADLK, "rf_ring_run_until: the ring is idle (nothing "
				       "pending) with the predicate still false: it cannot "
				       "become true");
			break;
		}
		looked = 0;
		struct __kernel_timespec ts, *tsp = NULL;
		if (deadline) {
			uint64_t now = rf_now_ns();
			if (now >= deadline) {
				ret = rf__fail(-ETIMEDOUT, "rf_ring_run_until: the predicate still "
					       "false after timeout_ns = %llu",
					       (unsigned long long)timeout_ns);
				break;
			}
			ts.tv_sec = (long long)((deadline - now) / 1000000000ull);
			ts.tv_nsec = (long long)((deadline - now) % 1000000000ull);
			tsp = &ts;
		}
		ret = rf__turn(r, busy, tsp);
		if (ret < 0) {
			rf__turn_failed("rf_ring_run_until", ret);
			break;
		}
	}
	r->in_run = 0;
	return ret;
}

void rf_ring_set_max_batch(struct rf_ring *r, unsigned max_completions)
{
	if (!r) {
		rf__fail(-EINVAL, "rf_ring_set_max_batch: r is NULL");
		return;
	}
	if (rf__owner_check_void(r, "rf_ring_set_max_batch") < 0)
		return;
	r->max_batch = max_completions;
}

unsigned rf_ring_pending(const struct rf_ring *r)
{
	if (!r)
		return 0;
	uint64_t n = r->npending + r->owed + r->poll_held;
	return n > UINT_MAX ? UINT_MAX : (unsigned)n;
}

int rf_ring_in_callback(const struct rf_ring *r)
{
	return r->cb_depth > 0;
}
