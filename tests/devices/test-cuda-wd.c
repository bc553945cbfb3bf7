/* test-cuda-wd: the CUDA stream watchdog's verdicts (devices/cuda/cuda-wd.h), driven on
 * the CPU tick by tick. A stream busy for a long time and then found idle, with its
 * completion signal still in the reaping turn, must not be failed (it was: the busy
 * time counted towards "idle but completions never arrived"); only RF__WD_IDLE_TICKS
 * idle ticks in a row without a report are; a busy stream with no report for hang_ns
 * is hung; any report resets both; a CUDA error fails at once. A host function retries
 * a transiently failed completion signal for RF__SIGNAL_RETRY_NS from its first try in
 * all, not per try (a try can itself back off for seconds), and no other failure. */
#include <stdio.h>

#include "../../devices/cuda/cuda-wd.h"
#include "../test-util.h"

#define P 2000000000ull   /* period: 2 s */
#define H 60000000000ull  /* hang: 60 s */

int main(void)
{
	struct rf__wd w;
	unsigned i;

	rf__wd_reset(&w, 0);
	/* a 20 s kernel: busy ticks, then idle with the signal still in flight */
	for (i = 0; i < 10; i++)
		CHECK_EQ(rf__wd_tick(&w, RF__WD_BUSY, P, H), RF__WD_REARM);
	CHECK_EQ(rf__wd_tick(&w, RF__WD_IDLE, P, H), RF__WD_REARM);
	/* the signal lands: progress resets */
	CHECK(rf__wd_progress(&w, 1));
	CHECK(!rf__wd_progress(&w, 1));
	CHECK_EQ(w.busy_ns, 0);
	CHECK_EQ(w.idle, 0);

	/* completions lost: idle ticks in a row */
	for (i = 1; i < RF__WD_IDLE_TICKS; i++)
		CHECK_EQ(rf__wd_tick(&w, RF__WD_IDLE, P, H), RF__WD_REARM);
	CHECK_EQ(rf__wd_tick(&w, RF__WD_IDLE, P, H), RF__WD_LOST);

	/* idle, then busy again (more work queued behind): the idle run starts over */
	rf__wd_reset(&w, 5);
	for (i = 1; i < RF__WD_IDLE_TICKS; i++)
		CHECK_EQ(rf__wd_tick(&w, RF__WD_IDLE, P, H), RF__WD_REARM);
	CHECK_EQ(rf__wd_tick(&w, RF__WD_BUSY, P, H), RF__WD_REARM);
	for (i = 1; i < RF__WD_IDLE_TICKS; i++)
		CHECK_EQ(rf__wd_tick(&w, RF__WD_IDLE, P, H), RF__WD_REARM);

	/* hung: busy with no report for exactly hang_ns */
	rf__wd_reset(&w, 9);
	for (i = 1; i < H / P; i++)
		CHECK_EQ(rf__wd_tick(&w, RF__WD_BUSY, P, H), RF__WD_REARM);
	CHECK_EQ(rf__wd_tick(&w, RF__WD_BUSY, P, H), RF__WD_HUNG);

	/* a report in between restarts the hang clock */
	rf__wd_reset(&w, 9);
	for (i = 1; i < H / P; i++)
		CHECK_EQ(rf__wd_tick(&w, RF__WD_BUSY, P, H), RF__WD_REARM);
	CHECK(rf__wd_progress(&w, 10));
	CHECK_EQ(rf__wd_tick(&w, RF__WD_BUSY, P, H), RF__WD_REARM);

	/* a CUDA error */
	CHECK_EQ(rf__wd_tick(&w, RF__WD_ERROR, P, H), RF__WD_FAILED);
	printf("cuda watchdog verdicts: ok\n");

	/* a host function's signal: transient failures retried, others not */
	const uint64_t t0 = 5000000000ull, R = RF__SIGNAL_RETRY_NS;
	CHECK(rf__signal_retry(-EAGAIN, t0, t0));
	CHECK(rf__signal_retry(-EBUSY, t0, t0 + 50000));
	CHECK(rf__signal_retry(-EINTR, t0, t0));
	CHECK(rf__signal_retry(-ENOMEM, t0, t0));
	CHECK(rf__signal_retry(-EOVERFLOW, t0, t0 + R - 1));
	CHECK(!rf__signal_retry(-EBADF, t0, t0));
	CHECK(!rf__signal_retry(-EINVAL, t0, t0));
	/* the bound is elapsed time from the first try, however long each try took:
	 * one MSG_RING try that backed off for its full ~10 s is not tried again */
	CHECK(!rf__signal_retry(-EAGAIN, t0, t0 + R));
	CHECK(!rf__signal_retry(-EAGAIN, t0, t0 + 10 * R));
	printf("host function signal retries: ok\n");
	return 0;
}
