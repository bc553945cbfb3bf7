/* devices/cuda/cuda-waker.h -- a CUDA stream's waker: the thread that wakes a sleeping
 * reactor when the stream's work finishes, without holding the stream. Plain C (no
 * CUDA), so that tests/devices/test-cuda-waker.c drives it with a fake stream.
 *
 * The completion counter (cuda-ctr.h) tells a reactor that is awake what finished by
 * a memory read. Something must still wake a reactor that went to sleep. A host
 * function after each signal does, but it holds the stream until it has run: ~10-30 us
 * of GPU idle per op outside a graph. The waker does it from beside the stream:
 *
 *   reactor (issue k)                          waker thread
 *   record the signal's event, then            loop: k = what it saw + 1
 *   issued = k            (release)              if issued < k: park (below)
 *   if exchange(parked, 0): futex wake          spin: until signal k is done or spin_ns
 *                                                  (the counter word, and now and
 *                                                  then cudaEventQuery; 0: none)
 *                                                wait(k): block until signal k is done
 *                                                  (cudaEventSynchronize, blocking sync)
 *                                                seen = max(k, the counter word)
 *                                                if reported < seen and the reactor
 *                                                  is parked: wake it
 *
 *   park: parked = 1; if issued > seen: parked = 0, go on; else futex wait while
 *         parked == 1.
 *
 * `seen` is itself a completion source: the reactor reports up to the larger of the
 * counter word and `seen` (cuda-ctr.h: rf__ctr_at_least), so a counter write refused
 * midway loses nothing.
 *
 * Why nothing is lost: the reactor publishes `issued` before it reads `parked`, the
 * waker publishes `parked` before it reads `issued` (both sequentially consistent), so
 * at least one of them sees the other's store -- the waker does not sleep past a
 * signal it has not seen, or the reactor wakes it. And every signal k the waker saw
 * finish is either already reported (the reactor read the counter) or gets a wake:
 * the reactor, woken, reads the counter and reports it. A reactor that is awake gets
 * no wake (asleep(), rf_ring_parked): it polls the counter and `seen` every turn, and
 * before it blocks it sets its parked flag, fences and polls once more, while the
 * waker stores `seen` and then fences and reads the flag -- the same store-buffering
 * argument: the last poll sees `seen`, or the waker sees the flag and wakes it. A
 * wake for a signal reported
 * in the meantime costs one notifier delivery that reports nothing -- never a lost or
 * doubled report (cuda-ctr.h's `done` only grows). The reactor stops the waker by
 * setting `stop` and waking it; a waker blocked in wait() on a stream that never
 * finishes (a hung GPU) cannot be joined: the stream is then left allocated, as with
 * host functions after a watchdog timeout.
 *
 * Why the spin: a thread blocked in the driver is woken by the GPU's interrupt and the
 * scheduler, tens of microseconds on a virtual machine: on an H200 under Firecracker a
 * parked reactor learned of a 64 MiB memset 49 us after a polling one, of a 4-byte one
 * 7.4 us after (gpu-check, 2026-11-30; the 4-byte one had finished before the waker
 * blocked). Spinning for a while first trades a CPU for that latency;
 * RF_CUDA_WAKER_SPIN_US sets how long (default 0: block at once). The spin reads the
 * counter word -- a memory load, which a busy reactor's poller showed sees a
 * completion as soon as polling the event does -- and asks the driver
 * (cudaEventQuery) only every RF__WAKER_QUERY_EVERY turns, for a stream whose word is
 * missing or no longer written: with the event alone, a parked reactor still learned
 * of a 64 MiB memset 10-12 us after a polling one (H200, 2026-11-30). The spin changes
 * no argument above: it is a wait() that returns sooner.
 *
 * The events are a ring of `window` slots (RF__WEV, 256): signal k's record replaces
 * signal k - window's. With more than `window` signals outstanding, k+1's slot holds a
 * later signal's record, and a wait on it would end only when that one did -- the
 * reactor, asleep, learning of k+1 up to `window` signals late (a stream's queue has
 * no bound; the engine's default cap is 4096 ops). With three quarters of the window
 * outstanding (a burst of issues could overwrite the slot while the waker blocks on
 * it; looked at before the spin and again before the wait) the waker polls instead
 * (rf__waker_overflow): the counter word, and the oldest intact record's event; a
 * later record over it says done only when it is, and signals finish in order, so
 * nothing is seen early. A block that a burst overtakes all the same ends late, not
 * wrong. */
#ifndef RF_DEVICES_CUDA_WAKER_H
#define RF_DEVICES_CUDA_WAKER_H

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"        /* rf_now_ns */
#include "rf-internal.h" /* rf__cpu_relax */

struct rf__waker {
	_Atomic uint64_t issued;     /* reactor: signals issued (their events recorded) */
	_Atomic uint64_t reported;   /* reactor: signals reported (cuda-ctr.h's done) */
	_Atomic uint64_t seen;       /* waker: signals it saw finish */
	_Atomic uint64_t wakes;      /* waker: reactor wake-ups sent */
	_Atomic uint64_t parks;      /* waker: times it slept for want of signals */
	_Atomic uint64_t spun;       /* waker: signals it saw done while spinning */
	_Atomic uint64_t overflowed; /* waker: signals seen past an overwritten slot */
	_Atomic uint32_t parked;     /* the futex word: 1 while the waker waits for work */
	_Atomic int stop;
	/* the stream's side, on the waker thread: block until signal k is done (0), or
	 * fail (< 0: a broken context, which the watchdog judges; the waker tries again a
	 * millisecond later, and k is not seen); the counter word (may return 0); wake the
	 * reactor */
	int (*wait)(void *ctx, uint64_t k);
	/* 1 if signal k is done, 0 if not yet, < 0 on an error (wait() then judges); NULL
	 * or spin_ns 0: no spinning */
	int (*query)(void *ctx, uint64_t k);
	uint64_t spin_ns;
	/* the stream's event slots: signal k's is slot k % window, which the issue of
	 * k + window records again (0: one of its own per signal) */
	unsigned window;
	uint64_t (*word)(void *ctx);
	int (*wake)(void *ctx);
	int (*asleep)(void *ctx);    /* 1 if the reactor is parked (NULL: always wake) */
	void *ctx;
	pthread_t thread;
	int running;
};

static inline void rf__waker_futex_wait(_Atomic uint32_t *w, uint32_t v)
{
	rf__futex(w, FUTEX_WAIT_PRIVATE, v);
}

static inline void rf__waker_futex_wake(_Atomic uint32_t *w)
{
	rf__futex(w, FUTEX_WAKE_PRIVATE, 1);
}

/* Reactor: signal k (the next number) is issued, its event recorded. */
static inline void rf__waker_issue(struct rf__waker *w, uint64_t k)
{
	atomic_store(&w->issued, k);
	if (atomic_exchange(&w->parked, 0))
		rf__waker_futex_wake(&w->parked);
}

/* Reactor: signals up to done are reported (the waker skips their wakes). */
static inline void rf__waker_reported(struct rf__waker *w, uint64_t done)
{
	atomic_store_explicit(&w->reported, done, memory_order_release);
}

/* The spin's turns per driver query of the event (the counter word is read every
 * turn). */
#define RF__WAKER_QUERY_EVERY 64u

/* Watch signal k for up to spin_ns -- the counter word every turn, the event every
 * RF__WAKER_QUERY_EVERY turns: 1 if it was done (no wait needed), 0 if not (or the
 * query failed: wait() judges), -1 if the waker was told to stop meanwhile. */
static inline int rf__waker_spin(struct rf__waker *w, uint64_t k)
{
	uint64_t t0;

	if (!w->query || !w->spin_ns)
		return 0;
	t0 = rf_now_ns();
	for (unsigned turn = 0;; turn++) {
		int r = 0;
		if (w->word && w->word(w->ctx) >= k)
			return 1;
		if (turn % RF__WAKER_QUERY_EVERY == 0 && (r = w->query(w->ctx, k)) > 0)
			return 1;
		if (atomic_load(&w->stop))
			return -1;
		if (r < 0 || rf_now_ns() - t0 >= w->spin_ns)
			return 0;
		rf__cpu_relax();
	}
}

/* How often the waker looks while its next signal's event slot is overwritten. */
#define RF__WAKER_OVF_NS 20000L

/* Whether signal k+1's slot is overwritten, or near enough to it that a burst of
 * issues could overwrite it while the waker blocks on it: more than three quarters of
 * the window outstanding. */
static inline int rf__waker_crowded(struct rf__waker *w, uint64_t k)
{
	return w->window && atomic_load(&w->issued) - (k + 1) >= w->window - w->window / 4;
}

/* Waker, seen up to k, with the window crowded (rf__waker_crowded): signal k+1's slot
 * holds a later signal's record (or will, at any moment), and waiting on it would
 * tell of that one -- up to `window` signals late, the reactor asleep all the while.
 * Instead, every RF__WAKER_OVF_NS: the counter word (each signal's own count), and the
 * event of the oldest signal whose record is intact, issued - window + 1 or k + 1 (should a
 * later record replace it meanwhile, that one says done only after it). Returns the
 * newest signal so seen done (> k), k when no longer crowded (the event is then
 * k+1's own), or UINT64_MAX when told to stop. */
static inline uint64_t rf__waker_overflow(struct rf__waker *w, uint64_t k)
{
	for (;;) {
		uint64_t iss = atomic_load(&w->issued), v = w->word ? w->word(w->ctx) : 0, e;
		int q;
		if (v > k && v <= iss)
			return v;
		if (!rf__waker_crowded(w, k))
			return k;
		e = iss - w->window + 1;   /* the oldest intact record, or k+1's own */
		if (e <= k)
			e = k + 1;
		q = w->query ? w->query(w->ctx, e) : w->wait(w->ctx, e) == 0 ? 1 : -1;
		if (q > 0)
			return e;
		if (atomic_load(&w->stop))
			return UINT64_MAX;
		/* a broken context fails every query: the watchdog's to judge, looked at
		 * every millisecond, as the blocking path does */
		struct timespec ts = { 0, q < 0 ? 1000000L : RF__WAKER_OVF_NS };
		nanosleep(&ts, NULL);
	}
}

static inline void *rf__waker_main(void *arg)
{
	struct rf__waker *w = arg;
	uint64_t k = atomic_load(&w->seen);

	while (!atomic_load(&w->stop)) {
		uint64_t v;
		if (atomic_load(&w->issued) <= k) {
			atomic_store(&w->parked, 1);
			if (atomic_load(&w->issued) > k || atomic_load(&w->stop)) {
				atomic_store(&w->parked, 0);
				continue;
			}
			atomic_fetch_add_explicit(&w->parks, 1, memory_order_relaxed);
			while (atomic_load(&w->parked) == 1)
				rf__waker_futex_wait(&w->parked, 1);
			continue;
		}
		if (rf__waker_crowded(w, k)) {
			v = rf__waker_overflow(w, k);
			if (v == UINT64_MAX)
				break;  /* stopped */
			if (v == k)
				continue;
			atomic_fetch_add_explicit(&w->overflowed, 1, memory_order_relaxed);
			k = v;
		} else {
			int spun = rf__waker_spin(w, k + 1);
			if (spun < 0)
				break;  /* stopped: the reactor no longer listens */
			if (spun)
				atomic_fetch_add_explicit(&w->spun, 1, memory_order_relaxed);
			else if (rf__waker_crowded(w, k))
				continue;  /* issues during the spin crowded the slot: poll */
			else if (w->wait(w->ctx, k + 1) < 0) {
				/* a broken context: the watchdog fails the stream; nothing is
				 * seen */
				usleep(1000);
				continue;
			}
			k++;
			/* signals are done in order: what the counter says is done too */
			v = w->word ? w->word(w->ctx) : 0;
			if (v > k && v <= atomic_load(&w->issued))
				k = v;
		}
		atomic_store(&w->seen, k);
		if (atomic_load(&w->stop))
			break;  /* the reactor no longer listens */
		if (atomic_load_explicit(&w->reported, memory_order_acquire) < k &&
		    (!w->asleep || w->asleep(w->ctx))) {
			atomic_fetch_add_explicit(&w->wakes, 1, memory_order_relaxed);
			(void)w->wake(w->ctx);
		}
	}
	return NULL;
}

/* Start the waker thread (w's callbacks and ctx set, the rest zero). 0 or -errno. */
static inline int rf__waker_start(struct rf__waker *w)
{
	int ret = pthread_create(&w->thread, NULL, rf__waker_main, w);

	if (ret)
		return -ret;
	w->running = 1;
	return 0;
}

/* Stop and join it (the stream's work must be able to finish: see above). */
static inline void rf__waker_stop(struct rf__waker *w)
{
	if (!w->running)
		return;
	atomic_store(&w->stop, 1);
	if (atomic_exchange(&w->parked, 0))
		rf__waker_futex_wake(&w->parked);
	pthread_join(w->thread, NULL);
	w->running = 0;
}

#endif
