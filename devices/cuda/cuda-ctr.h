/* devices/cuda/cuda-ctr.h -- a CUDA stream's completion counter, kept apart from CUDA
 * so that a CPU test drives it with a fake stream (tests/devices/test-cuda-ctr.c).
 *
 * Each signal the stream issues (an op, or a graph launch, whose completion the
 * reactor must learn) gets the next number k = 1, 2, ...; the stream then does two
 * things, in stream order, after the op's work:
 *   1. writes k into a word of pinned host memory (cuStreamWriteValue64, or a
 *      one-thread kernel where stream memory operations are refused);
 *   2. launches a host function that signals the ring's notifier (one count).
 * The reactor reads the word at every turn (a ring poller) and reports every signal up
 * to it: a busy reactor learns of a completion by a memory read, ~1-2 us after the GPU
 * wrote it. The host function, ~20-30 us behind, is what wakes a sleeping reactor; when
 * its count arrives the signals it covers are reported if the word did not already
 * report them. So the two paths race, and this header makes the race harmless:
 *   - a signal is reported once: `done` only grows;
 *   - the word and the host functions' count are each a lower bound on what the
 *     stream finished (the write precedes the host function in stream order), so the
 *     larger of the two is, too -- and when the word is missing or a write was refused,
 *     the host functions alone still report everything;
 *   - a word read that claims more than was issued (garbage, a reused buffer) is
 *     clamped: nothing is reported before it was issued. */
#ifndef RF_DEVICES_CUDA_CTR_H
#define RF_DEVICES_CUDA_CTR_H

#include <stdint.h>

struct rf__ctr {
	uint64_t *word;   /* written by the stream; NULL: no counter (host functions only) */
	uint64_t issued;  /* signals issued: the last number handed out */
	uint64_t hf;      /* signals the host functions reported (notifier counts) */
	uint64_t done;    /* signals reported to the reactor */
};

/* The number the stream writes for the signal being issued. */
static inline uint64_t rf__ctr_issue(struct rf__ctr *k)
{
	return ++k->issued;
}

/* A notifier delivery: count more host functions ran. */
static inline void rf__ctr_hf(struct rf__ctr *k, uint64_t count)
{
	k->hf += count;
}

/* Another source says signals 1..v are finished (the waker's `seen`, cuda-waker.h):
 * counted as the host functions' count is (which, one host function per signal, is
 * also the number of the last signal reported that way). */
static inline void rf__ctr_at_least(struct rf__ctr *k, uint64_t v)
{
	if (v > k->hf)
		k->hf = v;
}

/* Signals finished since the last call (each reported once): the word or the host
 * functions' count, whichever is further, never past what was issued. */
static inline uint64_t rf__ctr_ready(struct rf__ctr *k)
{
	uint64_t v = k->word ? __atomic_load_n(k->word, __ATOMIC_ACQUIRE) : 0, n;

	if (v < k->hf)
		v = k->hf;
	if (v > k->issued)
		v = k->issued;
	n = v > k->done ? v - k->done : 0;
	k->done += n;
	return n;
}

/* Signals issued and not yet reported: a poller with these is busy. */
static inline uint64_t rf__ctr_out(const struct rf__ctr *k)
{
	return k->issued - k->done;
}

#endif
