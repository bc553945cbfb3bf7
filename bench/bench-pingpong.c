/* bench/bench-pingpong.c -- the floor under a hop between two threads: two bare
 * threads hand a counter back and forth, by spinning on it or by futex. And the
 * floor under xchain's shape: three bare threads (a middle one and two ends) pass a
 * counter middle -> end 0 -> middle -> end 1 -> middle ..., each waiting by spinning
 * with a sched_yield every 4th poll, as the reactor's and the workers' spins do -- on
 * a machine with fewer cores than the three, the yield is what lets the thread with
 * the counter run. xchain's hop (rf-bench engine) is printed as a ratio to each,
 * measured in the same run. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ringflow/ring.h>
#include "bench.h"

struct pp {
	_Atomic uint32_t turn; /* even: thread 0 moves it, odd: thread 1 */
	long hops;
	int futex;
};

static void pp_wait(struct pp *p, uint32_t seen)
{
	if (p->futex) /* sleeps while turn == seen; any wake or a change returns */
		syscall(SYS_futex, &p->turn, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
	else
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#elif defined(__aarch64__)
		__asm__ __volatile__("yield");
#else
		;
#endif
}

/* Thread `me` (0 or 1) takes every hop whose number has its parity. */
static void pp_run(struct pp *p, uint32_t me)
{
	uint32_t t;

	for (;;) {
		t = atomic_load_explicit(&p->turn, memory_order_acquire);
		if ((long)t >= p->hops)
			return;
		if ((t & 1) != me) {
			pp_wait(p, t);
			continue;
		}
		atomic_store_explicit(&p->turn, t + 1, memory_order_release);
		if (p->futex)
			syscall(SYS_futex, &p->turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
}

static void *pp_thread(void *arg)
{
	pp_run(arg, 1);
	return NULL;
}

/* Seconds per hop (one hand-over), or < 0 when the thread cannot start. */
double bench_pingpong(long hops, int futex)
{
	struct pp p = { .hops = hops, .futex = futex };
	pthread_t th;
	uint64_t t0, t1;

	if (pthread_create(&th, NULL, pp_thread, &p) != 0) {
		fprintf(stderr, "rf-bench engine: pthread_create failed\n");
		return -1;
	}
	t0 = rf_now_ns();
	pp_run(&p, 0);
	t1 = rf_now_ns();
	pthread_join(th, NULL);
	return (double)(t1 - t0) / 1e9 / (double)hops;
}

struct relay {
	_Atomic uint32_t turn; /* turn % 4: 0 and 2 the middle's, 1 end 0's, 3 end 1's */
	uint32_t last;         /* the turn that ends the run */
};

struct relay_arg {
	struct relay *r;
	uint32_t me;           /* 0: the middle, 1: end 0, 3: end 1 */
};

static void relay_run(struct relay *r, uint32_t me)
{
	unsigned polls = 0;

	for (;;) {
		uint32_t t = atomic_load_explicit(&r->turn, memory_order_acquire);
		if (t >= r->last)
			return;
		if (me == 0 ? (t & 1) == 0 : (t & 3) == me) {
			atomic_store_explicit(&r->turn, t + 1, memory_order_release);
			continue;
		}
		if ((++polls & 3) == 3)
			sched_yield();
#if defined(__x86_64__) || defined(__i386__)
		else
			__builtin_ia32_pause();
#endif
	}
}

static void *relay_thread(void *arg)
{
	struct relay_arg *a = arg;

	relay_run(a->r, a->me);
	return NULL;
}

double bench_relay(long hops)
{
	struct relay r = { .last = (uint32_t)(2 * hops) };
	struct relay_arg a[2] = { { &r, 1 }, { &r, 3 } };
	pthread_t th[2];
	uint64_t t0, t1;
	int k;

	for (k = 0; k < 2; k++)
		if (pthread_create(&th[k], NULL, relay_thread, &a[k]) != 0) {
			fprintf(stderr, "rf-bench engine: pthread_create failed\n");
			atomic_store(&r.turn, r.last);
			while (k--)
				pthread_join(th[k], NULL);
			return -1;
		}
	t0 = rf_now_ns();
	relay_run(&r, 0);
	t1 = rf_now_ns();
	for (k = 0; k < 2; k++)
		pthread_join(th[k], NULL);
	return (double)(t1 - t0) / 1e9 / (double)hops;
}
