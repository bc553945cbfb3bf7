/* kernel-test.h -- what the kernel tests (test-kernels.c, test-kernels-cuda.c) share:
 * the failure counter and CHECK, splitmix64 test data independent of the kernels
 * under test, and allocation that exits on failure. Define KERNEL_TEST_SEED (the
 * splitmix64 state) before including. */
#ifndef RF_KERNEL_TEST_H
#define RF_KERNEL_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;

#define CHECK(cond, ...)                                                          \
	do {                                                                      \
		if (!(cond)) {                                                    \
			failures++;                                               \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);      \
			fprintf(stderr, __VA_ARGS__);                             \
			fputc('\n', stderr);                                      \
		}                                                                 \
	} while (0)

static uint64_t rng_state = KERNEL_TEST_SEED;

static inline uint64_t rnext(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static inline int rint_in(int lo, int hi) /* [lo, hi] */
{
	return lo + (int)(rnext() % (uint64_t)(hi - lo + 1));
}

static inline float runif(float lo, float hi)
{
	return lo + (hi - lo) * (float)((rnext() >> 40) * 0x1p-24);
}

static inline void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	return p;
}

static inline float *falloc(size_t n)
{
	return xmalloc(n * sizeof(float));
}

static inline float *frand(size_t n, float lo, float hi)
{
	float *p = falloc(n);
	for (size_t i = 0; i < n; i++)
		p[i] = runif(lo, hi);
	return p;
}

#endif
