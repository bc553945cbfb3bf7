/* test-spin: common/spin.c's rule for spinning threads -- a spin yields the CPU only
 * while the threads that spin (rings' reactors, worker threads) outnumber the CPUs the
 * process may run on. Pinned to one CPU here, so the count is known: one spinner is
 * not crowded, two are, and the count goes back down as they leave. (The library's
 * own rings and worker threads count themselves in its copy of these counters; the
 * yields are measured by rf-bench engine --pattern xchain, not asserted.) */
#include <sched.h>
#include <stdio.h>

#include "rf-internal.h"
#include "../test-util.h"

int main(void)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
	CHECK_OK(sched_setaffinity(0, sizeof(one), &one));
	CHECK(!rf__spin_crowded());          /* no spinner yet */
	rf__spinners_add(1);
	CHECK(!rf__spin_crowded());          /* one on one CPU */
	rf__spinners_add(1);
	CHECK(rf__spin_crowded());           /* two on one CPU: yield */
	rf__spinners_add(3);
	CHECK(rf__spin_crowded());
	rf__spinners_add(-4);
	CHECK(!rf__spin_crowded());          /* back to one */
	rf__spinners_add(-1);
	CHECK(!rf__spin_crowded());
	printf("test-spin: ok (one CPU: 1 spinner not crowded, 2 and 5 crowded)\n");
	return 0;
}
