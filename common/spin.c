/* common/spin.c -- whether a spinning thread should give its CPU away. A reactor and
 * each worker thread poll for a while before they sleep; where there are more such
 * threads than CPUs this process may run on, a pure spin keeps the thread that has the
 * work off a CPU, so the spins yield every few polls (sched_yield). Where there are
 * not, a yield is only a system call (0.3-1.5 us on these virtual machines) in the
 * middle of a hand-over, so they do not. The count is of the threads that spin: a ring
 * with pollers (its reactor) and each worker thread. The thread ids (rf__gettid) live
 * here too. */
#include <sched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rf-internal.h"

__thread uint64_t rf__tid __attribute__((tls_model("initial-exec")));

/* In a forked child the one thread left keeps its parent's cached id: forget it, so that
 * the child is asked anew -- and a ring or engine the parent made (whose rings the
 * child shares with it) is refused there as another thread's, not driven from two
 * processes. */
static void rf__tid_forget(void)
{
	rf__tid = 0;
}

static void rf__tid_atfork(void)
{
	pthread_atfork(NULL, NULL, rf__tid_forget);
}

uint64_t rf__gettid_slow(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, rf__tid_atfork);
	return rf__tid = (uint64_t)syscall(SYS_gettid);
}

static _Atomic int rf__spinners;
static _Atomic int rf__spin_cpus; /* 0: not read yet */

void rf__spinners_add(int delta)
{
	atomic_fetch_add_explicit(&rf__spinners, delta, memory_order_relaxed);
}

int rf__cpus(void)
{
	cpu_set_t set;
	long n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

int rf__spin_crowded(void)
{
	int cpus = atomic_load_explicit(&rf__spin_cpus, memory_order_relaxed);

	if (!cpus) {
		cpus = rf__cpus();
		atomic_store_explicit(&rf__spin_cpus, cpus, memory_order_relaxed);
	}
	return atomic_load_explicit(&rf__spinners, memory_order_relaxed) > cpus;
}

long rf__futex(void *word, int op, uint32_t val)
{
	return syscall(SYS_futex, (uint32_t *)word, op, val, NULL, NULL, 0);
}
