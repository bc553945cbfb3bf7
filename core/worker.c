/* core/worker.c -- the worker-thread stream: a single-producer/single-consumer ring of
 * ops in; completions out through memory (the tail counter, read by a ring poller at
 * every reactor turn) and a notifier signal only when the reactor is parked
 * (rf_ring_parked); no mutex, no condition variable (README.md). Ops beyond its
 * capacity wait in a reactor-side overflow list. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine-impl.h"
#include "rf-internal.h"

#define RF__CACHELINE 64
#define RF__WORKER_MAX_CAP (1u << 24)
#define RF__WORKER_SPINS 4096     /* polls of head before the futex sleep, at most */
#define RF__WORKER_SPINS_MIN 16   /* ... at least */
#define RF__WORKER_BUSY_NS 50000ull /* the poller is busy this long after progress */
#define RF__WORKER_YIELD 3       /* of every 4 polls, one yields the CPU (measured:
				   * 31 or 7 cost xchain 2x on 2 cores) */

struct rf__worker {
	struct rf_stream s;
	char name[48];
	unsigned cap;         /* power of two */
	struct rf_op **slot;
	int *status;
	/* Each side's word on a cache line of its own: the reactor writes head, the
	 * worker tail; sharing a line would bounce it between the cores on every op. */
	_Alignas(RF__CACHELINE) _Atomic uint64_t head; /* ops published (reactor writes) */
	_Alignas(RF__CACHELINE) _Atomic uint64_t tail; /* ops finished (worker writes) */
	/* the reactor's own line: written at every publish and reap */
	_Alignas(RF__CACHELINE) uint64_t reaped;       /* ops reported */
	struct rf__oplist ovf;          /* ops waiting for a free slot */
	uint64_t progress_ns;           /* the last completion or publish */
	int published;                  /* an op was given since the last poll */
	_Alignas(RF__CACHELINE) unsigned spins; /* worker only: the idle spin's budget */
	_Alignas(RF__CACHELINE) _Atomic int sleeping;
	_Atomic uint32_t futex;
	_Atomic int stop;
	struct rf_ring *ring;
	struct rf_notifier *notifier;   /* wakes a parked reactor */
	struct rf_poller *poller;       /* reads tail at every turn */
	pthread_t thread;
	int started;
};

static long rf__futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
	return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

static void rf__worker_wake(struct rf__worker *w)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&w->sleeping, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&w->futex, 1, memory_order_seq_cst);
		rf__futex(&w->futex, FUTEX_WAKE_PRIVATE, 1);
	}
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

/* Run the op in slot t and publish its completion: the tail counter, which the
 * reactor's poller reads at every turn; a wake-up signal only if the reactor is parked
 * (rf_ring_parked fences after the tail's store: the reactor either sees the tail in
 * its last poll before it blocks, or the signal follows). */
static void rf__worker_run(struct rf__worker *w, uint64_t t)
{
	struct rf_op *op = w->slot[t & (w->cap - 1)];
	int st = rf_op_execute(op);

	w->status[t & (w->cap - 1)] = st;
	atomic_store_explicit(&w->tail, t + 1, memory_order_release);
	if (rf_ring_parked(w->ring))
		rf__worker_post(w, 1);
}

/* Spin a while (a producer usually pushes bursts, and the next op of a chain comes
 * one reactor turn after this one's completion): 1 if work or stop came. The spin
 * yields the CPU every few pauses, so that on a machine with fewer cores than
 * spinning threads (the reactor, other workers) the thread that has the work runs.
 * Its length adapts: doubled when work came during it, halved when it did not -- a
 * stream fed ops back to back keeps polling, one whose ops come far apart (a
 * loader's gathers, waiting on I/O) goes to sleep at once and burns no CPU. */
static int rf__worker_spin(struct rf__worker *w, uint64_t t)
{
	for (unsigned spin = 0; spin < w->spins; spin++) {
		if (atomic_load_explicit(&w->head, memory_order_acquire) != t ||
		    atomic_load_explicit(&w->stop, memory_order_acquire)) {
			if (w->spins < RF__WORKER_SPINS)
				w->spins *= 2;
			return 1;
		}
		if ((spin & RF__WORKER_YIELD) == RF__WORKER_YIELD)
			sched_yield();
#if defined(__x86_64__) || defined(__i386__)
		else
			__builtin_ia32_pause();
#endif
	}
	if (w->spins > RF__WORKER_SPINS_MIN)
		w->spins /= 2;
	return 0;
}

/* Sleep on the futex unless work or stop came after `sleeping` was set. */
static void rf__worker_sleep(struct rf__worker *w, uint64_t t)
{
	uint32_t fv = atomic_load_explicit(&w->futex, memory_order_seq_cst);

	atomic_store_explicit(&w->sleeping, 1, memory_order_seq_cst);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&w->head, memory_order_seq_cst) == t &&
	    !atomic_load_explicit(&w->stop, memory_order_seq_cst))
		rf__futex(&w->futex, FUTEX_WAIT_PRIVATE, fv);
	atomic_store_explicit(&w->sleeping, 0, memory_order_relaxed);
}

static void *rf__worker_main(void *arg)
{
	struct rf__worker *w = arg;
	uint64_t t = 0, h = 0;

	for (;;) {
		/* head is read again only when the ops seen are done: while the reactor
		 * publishes a burst, its line is not pulled over once per op */
		if (t < h || t < (h = atomic_load_explicit(&w->head, memory_order_acquire))) {
			rf__worker_run(w, t++);
			continue;
		}
		if (atomic_load_explicit(&w->stop, memory_order_acquire))
			break;
		if (!rf__worker_spin(w, t))
			rf__worker_sleep(w, t);
	}
	return NULL;
}

static void rf__worker_publish(struct rf__worker *w, struct rf_op *op)
{
	uint64_t h = atomic_load_explicit(&w->head, memory_order_relaxed);

	w->slot[h & (w->cap - 1)] = op;
	atomic_store_explicit(&w->head, h + 1, memory_order_release);
	rf_poller_hold(w->poller, 1);   /* pending for the ring until reaped */
	w->published = 1;               /* the poller's spin-worthiness clock restarts */
	rf__worker_wake(w);
}

static int rf__worker_enqueue(struct rf_stream *s, struct rf_op *op)
{
	struct rf__worker *w = s->ctx;
	uint64_t h = atomic_load_explicit(&w->head, memory_order_relaxed);

	if (w->ovf.head || h - w->reaped >= w->cap) {
		rf__oplist_push(&w->ovf, op);
		return 0;
	}
	rf__worker_publish(w, op);
	return 0;
}

/* Report the ops finished since the last reap: the count. Reactor thread. */
static unsigned rf__worker_reap(struct rf__worker *w)
{
	uint64_t t = atomic_load_explicit(&w->tail, memory_order_acquire), r0 = w->reaped;

	if (t == r0)
		return 0;
	rf_poller_hold(w->poller, -(int64_t)(t - r0));
	while (w->reaped < t) {
		unsigned i = (unsigned)(w->reaped & (w->cap - 1));
		struct rf_op *op = w->slot[i];
		int st = w->status[i];
		w->reaped++;
		/* Refill from the overflow list before reporting: order is preserved since
		 * overflowed ops were enqueued after every published one. */
		while (w->ovf.head && atomic_load_explicit(&w->head, memory_order_relaxed) - w->reaped < w->cap) {
			rf__worker_publish(w, rf__oplist_pop(&w->ovf));
		}
		rf_engine_op_done(op, st);
	}
	return (unsigned)(t - r0);
}

/* The poller: what finished; busy while ops are out and the stream has made progress
 * (a completion, or an op given to it) within RF__WORKER_BUSY_NS. A reactor spins only
 * for a busy poller: for short ops handed between streams that is a completion caught
 * without a wake-up; for long ones (a loader's image decodes, tens of ms) it would
 * take a core from them for nothing -- past that time the reactor parks and the
 * worker's signal wakes it. */
static unsigned rf__worker_poll(void *data, int *busy)
{
	struct rf__worker *w = data;
	unsigned n = rf__worker_reap(w);
	uint64_t now;

	*busy = 0;
	if (atomic_load_explicit(&w->head, memory_order_relaxed) == w->reaped)
		return n;
	now = rf_now_ns();
	if (n || w->published)
		w->progress_ns = now;
	w->published = 0;
	*busy = now - w->progress_ns < RF__WORKER_BUSY_NS;
	return n;
}

/* A wake-up signal (the reactor was parked): reap as the poller does. */
static void rf__worker_notified(void *data, uint32_t count)
{
	(void)count;
	rf__worker_reap(data);
}

static void rf__worker_destroy(struct rf_stream *s)
{
	struct rf__worker *w = s->ctx;

	if (w->started) {
		atomic_store_explicit(&w->stop, 1, memory_order_seq_cst);
		atomic_fetch_add_explicit(&w->futex, 1, memory_order_seq_cst);
		rf__futex(&w->futex, FUTEX_WAKE_PRIVATE, 1);
		pthread_join(w->thread, NULL);
	}
	/* Every op was reported (the engine waited for them). A wake-up signal still on
	 * its way finds the notifier gone and is dropped (ring.h). */
	rf_poller_remove(w->poller);
	if (w->notifier)
		rf_notifier_destroy(w->notifier);
	free(w->slot);
	free(w->status);
	free(w);
}

static const struct rf_stream_ops rf__worker_ops = {
	/* .enqueue = */ rf__worker_enqueue,
	/* .chain   = */ NULL, /* optional: same-stream chaining needs no help */
	/* .destroy = */ rf__worker_destroy,
};

static void rf__worker_free(struct rf__worker *w)
{
	rf_poller_remove(w->poller);
	if (w->notifier)
		rf_notifier_destroy(w->notifier);
	free(w->slot);
	free(w->status);
	free(w);
}

/* The worker's record, its slots (cap rounded up to a power of two) and notifier. */
static int rf__worker_alloc(struct rf_engine *e, const char *name, unsigned capacity,
			    struct rf__worker **out)
{
	struct rf__worker *w;
	unsigned cap = 1;
	int ret;

	while (cap < capacity)
		cap <<= 1;
	w = aligned_alloc(RF__CACHELINE, sizeof(*w));
	if (!w)
		return rf__fail(-ENOMEM, "rf_worker_stream_create %s: out of memory",
				name ? name : "");
	memset(w, 0, sizeof(*w));
	snprintf(w->name, sizeof(w->name), "%s", name ? name : "worker");
	w->cap = cap;
	w->spins = RF__WORKER_SPINS;
	w->slot = calloc(cap, sizeof(*w->slot));
	w->status = calloc(cap, sizeof(*w->status));
	if (!w->slot || !w->status) {
		rf__worker_free(w);
		return rf__fail(-ENOMEM, "rf_worker_stream_create %s: out of memory for %u slots",
				w->name, cap);
	}
	/* their pages faulted in now, not under the first ops */
	rf__prefault(w->slot, cap * sizeof(*w->slot));
	rf__prefault(w->status, cap * sizeof(*w->status));
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

/* "rf-NAME", cut to the kernel's limit of 16 bytes, NUL included. */
static void rf__worker_name_thread(struct rf__worker *w)
{
	char tn[16];
	size_t l = strnlen(w->name, sizeof(tn) - 4);

	memcpy(tn, "rf-", 3);
	memcpy(tn + 3, w->name, l);
	tn[3 + l] = 0;
	pthread_setname_np(w->thread, tn);
}

int rf_worker_stream_create(struct rf_engine *e, const char *name, unsigned capacity,
			    struct rf_stream **out)
{
	struct rf__worker *w = NULL;
	int ret;

	if (!e || !out)
		return rf__fail(-EINVAL, "rf_worker_stream_create: %s is NULL", e ? "out" : "e");
	*out = NULL; /* on any failure */
	if (!capacity)
		capacity = 1024;
	if (capacity > RF__WORKER_MAX_CAP) /* the overflow list takes any number beyond */
		return rf__fail(-EINVAL, "rf_worker_stream_create %s: capacity %u, expected at "
				"most %u", name ? name : "", capacity, (unsigned)RF__WORKER_MAX_CAP);
	if ((ret = rf__worker_alloc(e, name, capacity, &w)) < 0)
		return ret;
	ret = pthread_create(&w->thread, NULL, rf__worker_main, w);
	if (ret) {
		rf__worker_free(w);
		return rf__fail(-ret, "rf_worker_stream_create %s: cannot start its thread: %s",
				name ? name : "", strerror(ret));
	}
	w->started = 1;
	rf__worker_name_thread(w);
	rf_engine_add_stream(e, &w->s);
	*out = &w->s;
	return 0;
}
