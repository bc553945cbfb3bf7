/* devices/cuda/cuda-wd.h -- the CUDA stream watchdog's verdict on each tick, and how
 * long a host function retries its completion signal, kept apart from CUDA so that a
 * CPU test drives them (tests/devices/test-cuda-wd.c).
 *
 * Each period the reactor looks at a stream with ops outstanding. Progress (an op
 * reported since the last tick) resets everything. Otherwise cudaStreamQuery says:
 *   busy  -- the GPU still runs the stream's work: a hang once no op has finished for
 *            hang_ns of busy ticks;
 *   idle  -- the work is done, so its host functions ran or are about to: the signal
 *            they sent may still sit in this very reaping turn (a notifier's signals
 *            are delivered at the turn's end, a timer's callback at once), so one idle
 *            tick proves nothing; only RF__WD_IDLE_TICKS in a row, with no report in
 *            between, say the completions were lost;
 *   error -- a sticky CUDA error: host functions will never run.
 * Busy time before an idle tick does not count towards the idle verdict (a long
 * kernel followed by the race above used to fail a healthy stream with -EIO). */
#ifndef RF_DEVICES_CUDA_WD_H
#define RF_DEVICES_CUDA_WD_H

#include <errno.h>
#include <stdint.h>

#define RF__WD_IDLE_TICKS 3

enum rf__wd_seen { RF__WD_BUSY, RF__WD_IDLE, RF__WD_ERROR };
enum rf__wd_verdict {
	RF__WD_REARM,   /* look again next period */
	RF__WD_HUNG,    /* busy, no op finished for hang_ns: fail with -ETIMEDOUT */
	RF__WD_LOST,    /* idle, completions never arrived: fail with -EIO */
	RF__WD_FAILED,  /* a CUDA error: fail with it */
};

struct rf__wd {
	uint64_t mark;     /* ops reported at the last tick */
	uint64_t busy_ns;  /* busy time with no op reported */
	unsigned idle;     /* idle ticks in a row with no op reported */
};

/* Nothing outstanding (or the stream already failed): start afresh. */
static inline void rf__wd_reset(struct rf__wd *w, uint64_t tail)
{
	w->mark = tail;
	w->busy_ns = 0;
	w->idle = 0;
}

/* 1 (and reset) if an op was reported since the last tick: no query needed. */
static inline int rf__wd_progress(struct rf__wd *w, uint64_t tail)
{
	if (tail == w->mark)
		return 0;
	rf__wd_reset(w, tail);
	return 1;
}

/* A tick without progress, given what the stream query saw. */
static inline enum rf__wd_verdict rf__wd_tick(struct rf__wd *w, enum rf__wd_seen seen,
					      uint64_t period_ns, uint64_t hang_ns)
{
	switch (seen) {
	case RF__WD_BUSY:
		w->idle = 0;
		w->busy_ns += period_ns;
		return w->busy_ns >= hang_ns ? RF__WD_HUNG : RF__WD_REARM;
	case RF__WD_IDLE:
		return ++w->idle >= RF__WD_IDLE_TICKS ? RF__WD_LOST : RF__WD_REARM;
	default:
		return RF__WD_FAILED;
	}
}

/* A host function's notifier signal failed with ret, first tried at t0_ns (now now_ns):
 * 1 to try again. Only a transient failure (the target ring's completion queue full)
 * is retried, and only for RF__SIGNAL_RETRY_NS in all: one try may itself back off
 * for seconds (MSG_RING's does), and the thread that runs every stream's host
 * functions must not stall for long. A signal given up is the watchdog's "lost". */
#define RF__SIGNAL_RETRY_NS 10000000000ull

static inline int rf__signal_retry(int ret, uint64_t t0_ns, uint64_t now_ns)
{
	return (ret == -EAGAIN || ret == -EBUSY || ret == -EINTR || ret == -ENOMEM ||
		ret == -EOVERFLOW) && now_ns - t0_ns < RF__SIGNAL_RETRY_NS;
}

#endif
