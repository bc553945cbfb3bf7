/* core/worker.c -- worker streams: each a single-producer/single-consumer ring of
 * slots, a cache line each, ops in and completions out through memory (the slots'
 * `done` flags, read by a ring poller at every reactor turn) and a notifier signal
 * only when the reactor is parked (rf_ring_parked); no mutex, no condition variable
 * (README.md). Ops beyond a stream's capacity wait in a reactor-side overflow list. A
 * stream runs on a thread of its own, or on another worker stream's thread
 * (rf_worker_stream_create_shared): the thread serves each of its streams' queues in
 * turn. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <unistd.h>

#include "engine-impl.h"
#include "rf-internal.h"

#define RF__CACHELINE 64
#define RF__WORKER_MAX_CAP (1u << 24)
#define RF__WORKER_SPINS 4096     /* polls before the futex sleep, at most */
#define RF__WORKER_SPINS_MIN 16   /* ... at least */
/* The poller is busy this long after progress: about what a park and a wake-up cost
 * (a hop took 9.6 us with no spin at all), so a spin never costs more than the wake-up
 * it saves -- the competitive rule. 50 us cost the loader on 784-byte records a fifth
 * of its CPU (its gathers take ~40 us: the reactor spun half the run for them). */
#define RF__WORKER_BUSY_NS 10000ull
#define RF__WORKER_YIELD 3       /* of every 4 polls, one yields the CPU (measured:
				   * 31 or 7 cost xchain 2x on 2 cores) */
#define RF__WTHREAD_MAXQ 32      /* live streams on one thread */

struct rf__wthread;

/* One slot of a queue, a cache line of its own: op n goes into slot n mod cap. The
 * reactor fills it and publishes `pub` = n + 1 (release); the worker, which polls the
 * slot it will run next, runs it, stores the status and publishes `done` = n + 1
 * (release); the reactor's poller reads `done` of the oldest unreported slot. So a
 * hand-over moves one line each way: the op's pointer, function and argument travel
 * with the flag that publishes them (the worker reads the op record itself only when
 * the op is traced), and the status with the flag that reports it. */
struct rf__wslot {
	_Alignas(RF__CACHELINE) _Atomic uint64_t pub;
	struct rf_op *op;
	rf_op_fn fn;
	void *ctx;
	int traced;
	int status;                     /* worker */
	_Atomic uint64_t done;          /* worker */
};

/* One stream: its queue, served by a thread (its own or a shared one). */
struct rf__worker {
	struct rf_stream s;
	char name[48];
	unsigned cap;         /* power of two */
	struct rf__wslot *slot;
	struct rf__wthread *th;
	/* read by the worker after every op (rf__worker_run): with the fields above, set
	 * at creation and never written again, off the reactor's line */
	struct rf_ring *ring;
	struct rf_notifier *notifier;   /* wakes a parked reactor */
	_Alignas(RF__CACHELINE) uint64_t taken; /* worker only: ops it has started */
	/* the reactor's own line: written at every publish and reap */
	_Alignas(RF__CACHELINE) uint64_t head;  /* ops published */
	uint64_t reaped;                /* ops reported */
	struct rf__oplist ovf;          /* ops waiting for a free slot */
	uint64_t progress_ns;           /* the last completion or publish */
	int published;                  /* an op was given since the last poll */
	unsigned slow;                  /* completions in a row reaped by a wake-up signal
					 * (the reactor parked: no spin caught them), at most 4 */
	struct rf_poller *poller;       /* reads the slots' `done` at every turn */
};

/* A worker thread and the queues it serves. The reactor changes the list (q[] and nq,
 * then gen, with release); the thread takes a copy of the list at the start of every
 * pass (gen, then q[], then `seen` = that gen, released), and its spin and sleep poll
 * that copy, leaving for a new pass as soon as gen moves. So once `seen` equals the
 * gen of a removal, the thread holds no pointer to the removed queue
 * (rf__wthread_detach). */
struct rf__wthread {
	_Alignas(RF__CACHELINE) _Atomic unsigned seen; /* thread: the gen of its copy */
	unsigned spins;                 /* thread only: the idle spin's budget */
	_Alignas(RF__CACHELINE) _Atomic int sleeping;
	_Atomic uint32_t futex;
	_Atomic int stop;
	/* the reactor's, read by the thread: changed only when a stream comes or goes */
	_Alignas(RF__CACHELINE) _Atomic unsigned gen;
	_Atomic unsigned nq;
	struct rf__worker *_Atomic q[RF__WTHREAD_MAXQ];
	pthread_t thread;
	const struct rf__worker *named; /* the stream whose name the thread carries */
};

/* The thread's copy of its list. */
struct rf__wlist {
	unsigned gen, n;
	struct rf__worker *q[RF__WTHREAD_MAXQ];
};

static void rf__wthread_kick(struct rf__wthread *th)
{
	atomic_fetch_add_explicit(&th->futex, 1, memory_order_seq_cst);
	rf__futex(&th->futex, FUTEX_WAKE_PRIVATE, 1);
}

static void rf__wthread_wake(struct rf__wthread *th)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&th->sleeping, memory_order_relaxed))
		rf__wthread_kick(th);
}

/* Post count completions to the reactor: one syscall. Retried on transient failure. */
static void rf__worker_post(struct rf__worker *w, uint32_t count)
{
	while (rf_notifier_signal_n(w->notifier, count) < 0) {
		static _Atomic int warned;
		if (!atomic_exchange(&warned, 1))
			rf__log(RF_LOG_WARN, "worker stream %s: notifier signal failed, retrying",
				w->name);
		usleep(100);
	}
}

/* Whether op t is in its slot. */
static int rf__worker_ready(const struct rf__worker *w, uint64_t t)
{
	return atomic_load_explicit(&w->slot[t & (w->cap - 1)].pub, memory_order_acquire) == t + 1;
}

/* Run op t and publish its completion: the slot's `done`, which the reactor's poller
 * reads at every turn; a wake-up signal only if the reactor is parked (rf_ring_parked
 * fences after the store: the reactor either sees it in its last poll before it
 * blocks, or the signal follows). rf_op_execute's rule, without reading the op record
 * unless it is traced. */
static void rf__worker_run(struct rf__worker *w, uint64_t t)
{
	struct rf__wslot *c = &w->slot[t & (w->cap - 1)];
	int st = c->traced ? rf_op_execute(c->op) : c->fn ? c->fn(c->ctx) : 0;

	c->status = st > 0 ? 0 : st;
	atomic_store_explicit(&c->done, t + 1, memory_order_release);
	if (rf_ring_parked(w->ring))
		rf__worker_post(w, 1);
}

/* Take a copy of the list and say so (`seen`): a removal's gen seen means every
 * earlier use of the old list is over. */
static void rf__wthread_copy(struct rf__wthread *th, struct rf__wlist *l)
{
	l->gen = atomic_load_explicit(&th->gen, memory_order_acquire);
	/* acquire: a count that includes a queue added since comes with its pointer (q[]
	 * is stored before nq), never the NULL or a removed queue left in that entry */
	l->n = atomic_load_explicit(&th->nq, memory_order_acquire);
	for (unsigned i = 0; i < l->n; i++) /* acquire: a queue added since is whole */
		l->q[i] = atomic_load_explicit(&th->q[i], memory_order_acquire);
	atomic_store_explicit(&th->seen, l->gen, memory_order_release);
}

/* One pass: runs the ops published to each queue, at most a capacity's worth each
 * (the queues on a thread take turns). Returns 1 if it ran any. */
static int rf__wthread_pass(struct rf__wthread *th, struct rf__wlist *l)
{
	int ran = 0;

	rf__wthread_copy(th, l);
	for (unsigned i = 0; i < l->n; i++) {
		struct rf__worker *w = l->q[i];

		for (unsigned k = 0; k < w->cap && rf__worker_ready(w, w->taken); k++) {
			rf__worker_run(w, w->taken++);
			ran = 1;
		}
	}
	return ran;
}

/* Whether a queue of the copy has an op not yet started (1), or the list changed or
 * stop came (2: no work, but a reason to leave), else 0. */
static int rf__wthread_pending(struct rf__wthread *th, const struct rf__wlist *l)
{
	if (atomic_load_explicit(&th->stop, memory_order_acquire) ||
	    atomic_load_explicit(&th->gen, memory_order_acquire) != l->gen)
		return 2;
	for (unsigned i = 0; i < l->n; i++)
		if (rf__worker_ready(l->q[i], l->q[i]->taken))
			return 1;
	return 0;
}

/* Spin a while (a producer usually pushes bursts, and the next op of a chain comes
 * one reactor turn after this one's completion): 1 if work or stop came. The spin
 * yields the CPU every few pauses, so that on a machine with fewer cores than
 * spinning threads (the reactor, other workers) the thread that has the work runs.
 * (Where the spinning threads are no more than the CPUs, rf__spin_crowded, it does not
 * yield.) Its length adapts: doubled when work came during it, halved when it did not -- a
 * thread fed ops back to back keeps polling, one whose ops come far apart (a loader's
 * gathers, waiting on I/O) goes to sleep at once and burns no CPU. */
static int rf__wthread_spin(struct rf__wthread *th, const struct rf__wlist *l)
{
	unsigned yield = rf__spin_crowded() ? RF__WORKER_YIELD : ~0u; /* ~0u: never */

	for (unsigned spin = 0; spin < th->spins; spin++) {
		int p = rf__wthread_pending(th, l);
		if (p) {
			/* only work lengthens the next spin; a stream added or removed, or
			 * stop, is no sign that ops come back to back */
			if (p == 1 && th->spins < RF__WORKER_SPINS)
				th->spins *= 2;
			return 1;
		}
		if ((spin & yield) == yield)
			sched_yield();
		else
			rf__cpu_relax();
	}
	if (th->spins > RF__WORKER_SPINS_MIN)
		th->spins /= 2;
	return 0;
}

/* Sleep on the futex unless work, a change of the list or stop came after `sleeping`
 * was set. */
static void rf__wthread_sleep(struct rf__wthread *th, const struct rf__wlist *l)
{
	uint32_t fv = atomic_load_explicit(&th->futex, memory_order_seq_cst);

	atomic_store_explicit(&th->sleeping, 1, memory_order_seq_cst);
	atomic_thread_fence(memory_order_seq_cst);
	if (!rf__wthread_pending(th, l))
		rf__futex(&th->futex, FUTEX_WAIT_PRIVATE, fv);
	atomic_store_explicit(&th->sleeping, 0, memory_order_relaxed);
}

static void *rf__wthread_main(void *arg)
{
	struct rf__wthread *th = arg;
	struct rf__wlist l;

	for (;;) {
		if (rf__wthread_pass(th, &l))
			continue;
		if (atomic_load_explicit(&th->stop, memory_order_acquire))
			break;
		if (!rf__wthread_spin(th, &l))
			rf__wthread_sleep(th, &l);
	}
	return NULL;
}

/* Publish a changed list: q[] and nq first, then gen (release). */
static void rf__wthread_publish_list(struct rf__wthread *th, unsigned n)
{
	atomic_store_explicit(&th->nq, n, memory_order_release);
	atomic_store_explicit(&th->gen, atomic_load_explicit(&th->gen, memory_order_relaxed) + 1,
			      memory_order_release);
}

static void rf__wthread_name(struct rf__wthread *th, const struct rf__worker *w);

/* Take w off its thread's list and wait until the thread has taken a copy without it
 * (`seen` reaches the new gen): from then on nothing it does touches w. A sleeping
 * thread is woken to take it; one running an op of another stream takes it when that
 * op ends. A thread named after w takes the name of a stream it still serves.
 * Reactor thread; the thread runs on. */
static void rf__wthread_detach(struct rf__wthread *th, struct rf__worker *w)
{
	unsigned n = atomic_load_explicit(&th->nq, memory_order_relaxed), i, g;

	for (i = 0; i < n && atomic_load_explicit(&th->q[i], memory_order_relaxed) != w; i++)
		;
	if (i == n)
		return;
	atomic_store_explicit(&th->q[i], atomic_load_explicit(&th->q[n - 1], memory_order_relaxed),
			      memory_order_release);
	rf__wthread_publish_list(th, n - 1);
	g = atomic_load_explicit(&th->gen, memory_order_relaxed);
	rf__wthread_kick(th);
	while (atomic_load_explicit(&th->seen, memory_order_acquire) != g)
		sched_yield();
	if (th->named == w && n > 1)
		rf__wthread_name(th, atomic_load_explicit(&th->q[0], memory_order_relaxed));
}

static void rf__worker_publish(struct rf__worker *w, struct rf_op *op)
{
	uint64_t h = w->head;
	struct rf__wslot *c = &w->slot[h & (w->cap - 1)];

	c->op = op;
	c->fn = op->fn;
	c->ctx = op->ctx;
	c->traced = op->traced;
	atomic_store_explicit(&c->pub, h + 1, memory_order_release);
	w->head = h + 1;
	rf_poller_hold(w->poller, 1);   /* pending for the ring until reaped */
	w->published = 1;               /* the poller's spin-worthiness clock restarts */
	rf__wthread_wake(w->th);
}

static int rf__worker_enqueue(struct rf_stream *s, struct rf_op *op)
{
	struct rf__worker *w = s->ctx;

	if (w->ovf.head || w->head - w->reaped >= w->cap) {
		rf__oplist_push(&w->ovf, op);
		return 0;
	}
	rf__worker_publish(w, op);
	return 0;
}

/* Whether op t has finished (its slot's `done`). */
static int rf__worker_done(const struct rf__worker *w, uint64_t t)
{
	return atomic_load_explicit(&w->slot[t & (w->cap - 1)].done, memory_order_acquire) == t + 1;
}

/* Report the ops finished since the last reap, oldest first (a worker finishes them in
 * order): the count. Reactor thread. */
static unsigned rf__worker_reap(struct rf__worker *w)
{
	uint64_t t = w->reaped, r0 = w->reaped;

	while (t < w->head && rf__worker_done(w, t))
		t++;
	if (t == r0)
		return 0;
	rf_poller_hold(w->poller, -(int64_t)(t - r0));
	while (w->reaped < t) {
		struct rf__wslot *c = &w->slot[w->reaped & (w->cap - 1)];
		struct rf_op *op = c->op;
		int st = c->status;
		w->reaped++;
		/* Refill from the overflow list before reporting: order is preserved since
		 * overflowed ops were enqueued after every published one. */
		while (w->ovf.head && w->head - w->reaped < w->cap)
			rf__worker_publish(w, rf__oplist_pop(&w->ovf));
		rf_engine_op_done(op, st);
	}
	return (unsigned)(t - r0);
}

/* The poller: what finished; busy while ops are out and the stream has made progress
 * (a completion, or an op given to it) within RF__WORKER_BUSY_NS. A reactor spins only
 * for a busy poller: for short ops handed between streams that is a completion caught
 * without a wake-up; for long ones (a loader's gathers, ~40 us; its image decodes,
 * tens of ms) it would take a core from them for more than the wake-up costs -- past
 * that time the reactor parks and the worker's signal wakes it. A stream whose last
 * four completions in a row came by that signal is spun for only on every eighth op
 * (a probe: ops that turn short again are caught by it, and any completion a poll
 * finds ends the row), so a stream of long ops costs the reactor an eighth of the
 * spins, and a late op now and then (the worker preempted) changes nothing. */
static unsigned rf__worker_poll(void *data, int *busy)
{
	struct rf__worker *w = data;
	unsigned n = rf__worker_reap(w);
	uint64_t now;

	*busy = 0;
	if (n)
		w->slow = 0;
	if (w->head == w->reaped)
		return n;
	now = rf_now_ns();
	if (n || w->published)
		w->progress_ns = now;
	w->published = 0;
	*busy = (w->slow < 4 || (w->reaped & 7) == 0) && now - w->progress_ns < RF__WORKER_BUSY_NS;
	return n;
}

/* A wake-up signal (the reactor was parked): reap as the poller does. */
static void rf__worker_notified(void *data, uint32_t count)
{
	struct rf__worker *w = data;

	(void)count;
	if (rf__worker_reap(w) && w->slow < 4)
		w->slow++;
}

static void rf__worker_free(struct rf__worker *w)
{
	rf_poller_remove(w->poller);
	if (w->notifier)
		rf_notifier_destroy(w->notifier);
	free(w->slot);
	free(w);
}

/* The stream's thread goes with its last stream: stopped and joined. A stream that
 * shares it with others is first taken off its list (rf__wthread_detach). Either way
 * every op was reported (the engine waited for them), and a wake-up signal still on
 * its way finds the notifier gone and is dropped (ring.h). */
static void rf__worker_destroy(struct rf_stream *s)
{
	struct rf__worker *w = s->ctx;
	struct rf__wthread *th = w->th;

	/* the list holds the thread's live streams, this one included */
	if (th && atomic_load_explicit(&th->nq, memory_order_relaxed) == 1) {
		atomic_store_explicit(&th->stop, 1, memory_order_seq_cst);
		rf__wthread_kick(th);
		pthread_join(th->thread, NULL);
		rf__spinners_add(-1);
		free(th);
	} else if (th) {
		rf__wthread_detach(th, w);
	}
	rf__worker_free(w);
}

static const struct rf_stream_ops rf__worker_ops = {
	/* .enqueue = */ rf__worker_enqueue,
	/* .chain   = */ NULL, /* optional: same-stream chaining needs no help */
	/* .destroy = */ rf__worker_destroy,
};

/* The worker's record, its slots (cap rounded up to a power of two) and notifier. */
static int rf__worker_alloc(const char *fn, struct rf_engine *e, const char *name,
			    unsigned capacity, struct rf__worker **out)
{
	struct rf__worker *w;
	unsigned cap = 1;
	int ret;

	while (cap < capacity)
		cap <<= 1;
	w = aligned_alloc(RF__CACHELINE, sizeof(*w));
	if (!w)
		return rf__fail(-ENOMEM, "%s %s: out of memory", fn, name ? name : "");
	memset(w, 0, sizeof(*w));
	snprintf(w->name, sizeof(w->name), "%s", name ? name : "worker");
	w->cap = cap;
	w->slot = aligned_alloc(RF__CACHELINE, cap * sizeof(*w->slot));
	if (!w->slot) {
		ret = rf__fail(-ENOMEM, "%s %s: out of memory for %u slots", fn, w->name, cap);
		rf__worker_free(w);
		return ret;
	}
	/* zero (no slot published or done: op n's flags are n + 1), and its pages faulted
	 * in now, not under the first ops */
	memset(w->slot, 0, cap * sizeof(*w->slot));
	w->ring = rf_engine_ring(e);
	ret = rf_notifier_create(w->ring, rf__worker_notified, w, &w->notifier);
	if (ret == 0)
		ret = rf_poller_add(w->ring, rf__worker_poll, w, &w->poller);
	if (ret < 0) {
		rf__worker_free(w);
		return ret;
	}
	w->s.ops = &rf__worker_ops;
	w->s.ctx = w;
	w->s.name = w->name;
	w->s.flags = RF_STREAM_IN_ORDER;
	*out = w;
	return 0;
}

/* The thread named "rf-NAME" after stream w, cut to the kernel's limit of 16 bytes,
 * NUL included. */
static void rf__wthread_name(struct rf__wthread *th, const struct rf__worker *w)
{
	const char *name = w->name;
	char tn[16];
	size_t l = strnlen(name, sizeof(tn) - 4);

	memcpy(tn, "rf-", 3);
	memcpy(tn + 3, name, l);
	tn[3 + l] = 0;
	pthread_setname_np(th->thread, tn);
	th->named = w;
}

/* Checks shared by both creators; *out is NULL on any failure. */
static int rf__worker_args(const char *fn, struct rf_engine *e, const char *name,
			   unsigned *capacity, struct rf_stream **out)
{
	int ret;

	if (!e || !out)
		return rf__fail(-EINVAL, "%s: %s is NULL", fn, e ? "out" : "e");
	*out = NULL;
	if ((ret = rf__admin_refused(e, fn)) < 0)
		return ret;
	if (!*capacity)
		*capacity = 1024;
	if (*capacity > RF__WORKER_MAX_CAP) /* the overflow list takes any number beyond */
		return rf__fail(-EINVAL, "%s %s: capacity %u, expected at most %u", fn,
				name ? name : "", *capacity, (unsigned)RF__WORKER_MAX_CAP);
	return 0;
}

int rf_worker_stream_create(struct rf_engine *e, const char *name, unsigned capacity,
			    struct rf_stream **out)
{
	struct rf__worker *w = NULL;
	struct rf__wthread *th;
	int ret;

	if ((ret = rf__worker_args("rf_worker_stream_create", e, name, &capacity, out)) < 0)
		return ret;
	if ((ret = rf__worker_alloc("rf_worker_stream_create", e, name, capacity, &w)) < 0)
		return ret;
	th = aligned_alloc(RF__CACHELINE, sizeof(*th));
	if (!th) {
		ret = rf__fail(-ENOMEM, "rf_worker_stream_create %s: out of memory", w->name);
		rf__worker_free(w);
		return ret;
	}
	memset(th, 0, sizeof(*th));
	th->spins = RF__WORKER_SPINS;
	atomic_store_explicit(&th->q[0], w, memory_order_relaxed);
	atomic_store_explicit(&th->nq, 1, memory_order_relaxed);
	ret = pthread_create(&th->thread, NULL, rf__wthread_main, th);
	if (ret) {
		free(th);
		rf__worker_free(w);
		return rf__fail(-ret, "rf_worker_stream_create %s: cannot start its thread: %s%s",
				name ? name : "", strerror(ret), ret == EAGAIN ? " (the threads "
				"this user may run: ulimit -u, or the cgroup's pids.max)" : "");
	}
	w->th = th;
	rf__spinners_add(1);
	rf__wthread_name(th, w);
	rf_engine_add_stream(e, &w->s);
	*out = &w->s;
	return 0;
}

int rf_worker_stream_create_shared(struct rf_engine *e, const char *name, unsigned capacity,
				   struct rf_stream *with, struct rf_stream **out)
{
	static const char fn[] = "rf_worker_stream_create_shared";
	struct rf__worker *w = NULL, *wo;
	struct rf__wthread *th;
	unsigned n;
	int ret;

	if ((ret = rf__worker_args(fn, e, name, &capacity, out)) < 0)
		return ret;
	if (!with)
		return rf__fail(-EINVAL, "%s %s: `with` is NULL, expected a worker stream",
				fn, name ? name : "");
	if (with->ops != &rf__worker_ops)
		return rf__fail(-EINVAL, "%s %s: stream %s is not a worker stream", fn,
				name ? name : "", with->name ? with->name : "?");
	if (with->eng != e)
		return rf__fail(-EINVAL, "%s %s: worker stream %s belongs to another engine",
				fn, name ? name : "", with->name);
	wo = with->ctx;
	th = wo->th;
	n = atomic_load_explicit(&th->nq, memory_order_relaxed);
	if (n >= RF__WTHREAD_MAXQ)
		return rf__fail(-EINVAL, "%s %s: thread of %s already serves %u streams, the most",
				fn, name ? name : "", with->name, n);
	if ((ret = rf__worker_alloc(fn, e, name, capacity, &w)) < 0)
		return ret;
	w->th = th;
	atomic_store_explicit(&th->q[n], w, memory_order_release); /* w is whole */
	rf__wthread_publish_list(th, n + 1); /* the thread sees it at its next pass */
	rf_engine_add_stream(e, &w->s);
	*out = &w->s;
	return 0;
}
