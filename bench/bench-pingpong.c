/* bench/bench-pingpong.c -- the floor under a hop between two threads: two bare
 * threads hand a counter back and forth, by spinning on it or by futex. xchain's
 * hop (rf-bench engine) is printed as a ratio to each, measured in the same run. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
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
