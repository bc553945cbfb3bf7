/* devices/cpu/par.c -- the helper threads of par.h.
 *
 * One kernel's work is on offer at a time, in a slot: its function and argument, and a
 * 64-bit ticket (generation << 32 | chunks << 16 | next chunk). The caller owns the slot
 * (owner 0 -> 1), fills it, publishes a new generation with a release store and wakes
 * sleeping helpers; then it takes chunks itself. A chunk is claimed by a CAS of the
 * ticket from (gen, n, k) to (gen, n, k + 1) with k below n -- the count is in the same
 * word, since a count stored apart could be the next generation's, read beside the
 * old ticket: a claim of a chunk the old one never had, while fn was being rewritten
 * (ThreadSanitizer found that one). A helper that woke late, for a generation already
 * finished or replaced, claims nothing: its CAS sees another generation. fn and arg are
 * read only after a claim succeeds; the slot cannot be refilled before that chunk is
 * counted done (the caller waits for every chunk a helper claimed before it gives the
 * slot up), so they are the claimed generation's.
 * Helpers count their chunks in `done` (release); the caller waits until it reaches
 * the chunks it did not run itself (acquire), which orders the helpers' writes before
 * its return.
 *
 * Helpers spin for RF__PAR_SPIN_NS after their last work (a convolution offers one
 * GEMM per group of images, back to back), then sleep on a futex: `seq` moves at every
 * offer and at stop; a sleeper counts itself in `sleepers` before it waits, and an
 * offer wakes only when some helper sleeps (seq_cst on both sides: one of them sees
 * the other). */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "par.h"
#include "rf-internal.h"

enum { RF__PAR_MAX = 63 };
#define RF__PAR_SPIN_NS 20000ull

static struct {
	pthread_mutex_t lock;     /* acquire and release */
	unsigned refs, nth;
	pid_t pid;                /* the process that started the helpers */
	pthread_t th[RF__PAR_MAX];
	_Atomic unsigned running; /* nth, read without the lock */
	/* the slot */
	_Atomic int owner;
	_Atomic uint64_t ticket;  /* gen << 32 | n << 16 | next */
	void (*fn)(void *arg, unsigned i);
	void *arg;
	_Atomic unsigned done;
	/* the helpers' wake-ups */
	_Atomic uint32_t seq;
	_Atomic uint32_t sleepers;
	_Atomic int stop;
	_Atomic int busy;         /* ops running on CPU streams */
	_Atomic int cpus;         /* the CPUs this process may run on, read at start */
	_Atomic unsigned long long offered, helped;
} P = { .lock = PTHREAD_MUTEX_INITIALIZER };

#define RF__PAR_CHUNKS 0xFFFFu /* at most, a kernel's work on offer */

/* Claim the next chunk of generation gen: 1 and *i, or 0 when it has none left. */
static int rf__par_claim(uint32_t gen, unsigned *i)
{
	uint64_t v = atomic_load_explicit(&P.ticket, memory_order_acquire);

	for (;;) {
		if ((uint32_t)(v >> 32) != gen || (v & 0xFFFF) >= ((v >> 16) & 0xFFFF))
			return 0;
		if (atomic_compare_exchange_weak_explicit(&P.ticket, &v, v + 1,
							  memory_order_acq_rel,
							  memory_order_acquire)) {
			*i = (unsigned)(v & 0xFFFF);
			return 1;
		}
	}
}

/* Wait until seq moves from seen, or stop is set: spin a while, then sleep. (A helper
 * that starts after its pool was told to stop reads the stopped seq as seen: stop is
 * what ends its wait then.) */
static void rf__par_wait(uint32_t seen)
{
	uint64_t t0 = rf__mono_ns();
	unsigned k = 0;

	while (atomic_load_explicit(&P.seq, memory_order_acquire) == seen &&
	       !atomic_load_explicit(&P.stop, memory_order_acquire)) {
		if (rf__mono_ns() - t0 < RF__PAR_SPIN_NS) {
			if ((++k & 15) == 0 && rf__spin_crowded())
				sched_yield();
			else
				rf__cpu_relax();
			continue;
		}
		atomic_fetch_add_explicit(&P.sleepers, 1, memory_order_seq_cst);
		if (atomic_load_explicit(&P.seq, memory_order_seq_cst) == seen &&
		    !atomic_load_explicit(&P.stop, memory_order_seq_cst))
			rf__futex(&P.seq, FUTEX_WAIT_PRIVATE, seen);
		atomic_fetch_sub_explicit(&P.sleepers, 1, memory_order_relaxed);
	}
}

static void *rf__par_main(void *unused)
{
	uint32_t seen = atomic_load_explicit(&P.seq, memory_order_acquire);

	(void)unused;
	for (;;) {
		rf__par_wait(seen);
		seen = atomic_load_explicit(&P.seq, memory_order_acquire);
		if (atomic_load_explicit(&P.stop, memory_order_acquire))
			break;
		uint32_t gen = (uint32_t)(atomic_load_explicit(&P.ticket, memory_order_acquire) >> 32);
		unsigned i;
		while (rf__par_claim(gen, &i)) {
			P.fn(P.arg, i);
			atomic_fetch_add_explicit(&P.helped, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&P.done, 1, memory_order_release);
		}
	}
	return NULL;
}

/* The helpers to start: RF_CPU_HELPERS if set, else one fewer than the CPUs. */
static int rf__par_want(unsigned *n)
{
	int cpus = rf__cpus();
	uint64_t v;
	int ret = rf__env_u64("RF_CPU_HELPERS", getenv("RF_CPU_HELPERS"), 0, RF__PAR_MAX,
			      (uint64_t)(cpus > RF__PAR_MAX ? RF__PAR_MAX : cpus - 1),
			      "the CPU devices' helper threads at most", &v);

	*n = (unsigned)v;
	return ret;
}

static void rf__par_stop(void)
{
	atomic_store_explicit(&P.stop, 1, memory_order_release);
	atomic_fetch_add_explicit(&P.seq, 1, memory_order_seq_cst);
	rf__futex(&P.seq, FUTEX_WAKE_PRIVATE, INT_MAX);
	for (unsigned i = 0; i < P.nth; i++)
		pthread_join(P.th[i], NULL);
	P.nth = 0;
	atomic_store_explicit(&P.running, 0, memory_order_release);
	atomic_store_explicit(&P.stop, 0, memory_order_relaxed);
}

int rf__par_acquire(void)
{
	unsigned want;
	int ret = rf__par_want(&want);

	if (ret < 0)
		return ret;
	pthread_mutex_lock(&P.lock);
	if (P.refs && P.pid != getpid()) { /* forked since: the helpers stayed behind */
		P.refs = 0, P.nth = 0;
		atomic_store_explicit(&P.running, 0, memory_order_relaxed);
	}
	if (P.refs++ == 0) {
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old); /* helpers take no signals */
		P.pid = getpid();
		for (; P.nth < want; P.nth++) {
			if ((ret = pthread_create(&P.th[P.nth], NULL, rf__par_main, NULL)) != 0)
				break;
			char nm[16];
			snprintf(nm, sizeof(nm), "rf-helper%u", P.nth);
			pthread_setname_np(P.th[P.nth], nm);
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (ret) { /* a helper fewer is no failure of the device: run with those there are */
			rf__log(RF_LOG_WARN, "CPU helpers: %u of %u started: %s", P.nth, want,
				strerror(ret));
			ret = 0;
		}
		atomic_store_explicit(&P.cpus, rf__cpus(), memory_order_relaxed);
		atomic_store_explicit(&P.running, P.nth, memory_order_release);
	}
	pthread_mutex_unlock(&P.lock);
	return 0;
}

void rf__par_release(void)
{
	pthread_mutex_lock(&P.lock);
	if (P.refs && --P.refs == 0) {
		if (P.pid == getpid())
			rf__par_stop();
		P.nth = 0;
		atomic_store_explicit(&P.running, 0, memory_order_relaxed);
	}
	pthread_mutex_unlock(&P.lock);
}

void rf__par_busy(int delta)
{
	atomic_fetch_add_explicit(&P.busy, delta, memory_order_relaxed);
}

unsigned rf__par_helpers(void)
{
	return atomic_load_explicit(&P.running, memory_order_acquire);
}

struct rf__par_stats rf__par_stats(void)
{
	return (struct rf__par_stats){ atomic_load_explicit(&P.offered, memory_order_relaxed),
				       atomic_load_explicit(&P.helped, memory_order_relaxed) };
}

int rf__par_open(void)
{
	return atomic_load_explicit(&P.running, memory_order_acquire) &&
	       atomic_load_explicit(&P.busy, memory_order_relaxed) <
		       atomic_load_explicit(&P.cpus, memory_order_relaxed) &&
	       !atomic_load_explicit(&P.owner, memory_order_relaxed);
}

/* Offer the work and take part in it: 0 where it cannot be offered now. */
static int rf__par_offer(unsigned n, void (*fn)(void *arg, unsigned i), void *arg)
{
	int free_ = 0;
	unsigned i, mine = 0;

	if (!rf__par_open() ||
	    !atomic_compare_exchange_strong_explicit(&P.owner, &free_, 1, memory_order_acquire,
						     memory_order_relaxed))
		return 0;
	P.fn = fn, P.arg = arg;
	atomic_store_explicit(&P.done, 0, memory_order_relaxed);
	uint32_t gen = (uint32_t)(atomic_load_explicit(&P.ticket, memory_order_relaxed) >> 32) + 1;
	atomic_store_explicit(&P.ticket, (uint64_t)gen << 32 | (uint64_t)n << 16,
			      memory_order_release);
	atomic_fetch_add_explicit(&P.offered, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&P.seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&P.sleepers, memory_order_seq_cst))
		rf__futex(&P.seq, FUTEX_WAKE_PRIVATE, INT_MAX);
	while (rf__par_claim(gen, &i)) {
		fn(arg, i);
		mine++;
	}
	/* the chunks helpers claimed: each is running, none is waiting to start */
	uint64_t t0 = 0;
	for (unsigned k = 0; atomic_load_explicit(&P.done, memory_order_acquire) != n - mine; k++) {
		if ((k & 63) == 63 && !t0)
			t0 = rf__mono_ns();
		if (t0 && rf__mono_ns() - t0 > RF__PAR_SPIN_NS)
			sched_yield(); /* a helper preempted: let it finish */
		else
			rf__cpu_relax();
	}
	atomic_store_explicit(&P.owner, 0, memory_order_release);
	return 1;
}

void rf__par_for(unsigned n, void (*fn)(void *arg, unsigned i), void *arg)
{
	if (n > 1 && n <= RF__PAR_CHUNKS && rf__par_offer(n, fn, arg))
		return;
	for (unsigned i = 0; i < n; i++)
		fn(arg, i);
}
