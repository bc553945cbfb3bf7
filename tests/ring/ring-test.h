/* tests/ring/ring-test.h -- helpers shared by the ring tests: checks that exit 1 with
 * file:line, a scratch file under $TMPDIR (or /var/tmp, where O_DIRECT works), and a
 * deterministic byte pattern. */
#ifndef RF_RING_TEST_H
#define RF_RING_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ring.h"

#include "../test-util.h"

#define T_CHECK(cond) CHECK(cond)
#define T_EQ(a, b) CHECK_EQ(a, b)
#define T_OK(expr) CHECK_OK(expr)

/* Byte i of the pattern for a given seed. */
static inline uint8_t t_pat(uint64_t seed, uint64_t i)
{
	uint64_t z = (seed + i / 8) * 0x9e3779b97f4a7c15ull;
	z ^= z >> 29;
	return (uint8_t)(z >> (8 * (i % 8)));
}

static inline void t_fill(uint8_t *p, size_t n, uint64_t seed, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		p[i] = t_pat(seed, off + i);
}

/* Index of the first byte that differs from the pattern, or -1. */
static inline long long t_verify(const uint8_t *p, size_t n, uint64_t seed, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != t_pat(seed, off + i))
			return (long long)i;
	return -1;
}

/* Creates an unlinked-on-exit scratch file; path written to buf. Returns the fd. */
static inline int t_tmpfile(char *buf, size_t bufsz, int flags)
{
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/var/tmp";
	snprintf(buf, bufsz, "%s/rf-ring-test-XXXXXX", dir);
	int fd = mkostemp(buf, O_CLOEXEC | flags);
	if (fd < 0) {
		fprintf(stderr, "cannot create a scratch file in %s: %s\n", dir, strerror(errno));
		exit(1);
	}
	return fd;
}

/* A callback that stores its result into an int64_t and counts calls. */
struct t_res {
	int64_t res;
	int calls;
};

static inline void t_store(void *data, int64_t res)
{
	struct t_res *t = data;
	t->res = res;
	t->calls++;
}

/* Turn r until t's callback ran; it must have run once. Its result. */
static inline int64_t t_wait1(struct rf_ring *r, struct t_res *t)
{
	while (!t->calls)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(t->calls, 1);
	return t->res;
}

#endif
