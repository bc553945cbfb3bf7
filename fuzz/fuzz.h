/* fuzz/fuzz.h -- what the harnesses share. Each harness defines
 * LLVMFuzzerTestOneInput (and may define LLVMFuzzerInitialize); it is linked either
 * with libFuzzer (clang -fsanitize=fuzzer: tools/fuzz) or with standalone.c, a driver
 * that replays the corpus and a fixed number of deterministic mutations of it (the
 * regression run of tools/test-all, any compiler). */
#ifndef RF_FUZZ_H
#define RF_FUZZ_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* An oracle that failed: abort, so that both drivers report the input. */
#define FZ_ASSERT(c) do { if (!(c)) { fprintf(stderr, "fuzz: %s:%d: %s\n", __FILE__, \
	__LINE__, #c); abort(); } } while (0)

/* A path naming the bytes d[0..n) as a regular file (a memfd; slot 0..3 are separate
 * files, reused across inputs). Parsers that take a path read it like any file. */
static inline const char *fz_file(int slot, const void *d, size_t n)
{
	static int fd[4] = { -1, -1, -1, -1 };
	static char p[4][40];

	if (fd[slot] < 0) {
		fd[slot] = memfd_create("fuzz", MFD_CLOEXEC);
		if (fd[slot] < 0)
			abort();
		snprintf(p[slot], sizeof(p[slot]), "/proc/self/fd/%d", fd[slot]);
	}
	if (ftruncate(fd[slot], 0) < 0 || (n && pwrite(fd[slot], d, n, 0) != (ssize_t)n))
		abort();
	return p[slot];
}

/* d[0..n) as a NUL-terminated string (caller frees) */
static inline char *fz_str(const uint8_t *d, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, d, n);
	s[n] = 0;
	return s;
}

#endif
