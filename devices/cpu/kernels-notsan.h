/* devices/cpu/kernels-notsan.h -- included first (-include) into each CPU kernel file in
 * a ThreadSanitizer build only (meson.build). The kernels are built without TSan's
 * instrumentation there, their operands declared to it whole by cpu-ops.c; but a
 * memcpy, memmove or memset they call -- written, or made by the compiler from a loop
 * -- would still go through TSan's interceptor, which checks the range at each call:
 * im2col's row copies made that most of a LeNet step's cost under TSan. Here these
 * three are string instructions inline instead (the compiler's loop-to-call rewriting
 * is off in that build too). Nothing here exists in the other builds. */
#ifndef RF_KERNELS_NOTSAN_H
#define RF_KERNELS_NOTSAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void *rf__k_memcpy(void *d, const void *s, size_t n)
{
	void *r = d;

	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
	return r;
}

static inline void *rf__k_memmove(void *d, const void *s, size_t n)
{
	unsigned char *dp = d;
	const unsigned char *sp = s;

	if (dp <= sp || dp >= sp + n)
		return rf__k_memcpy(d, s, n);
	while (n--) /* overlapping, the destination above: backwards */
		dp[n] = sp[n];
	return d;
}

static inline void *rf__k_memset(void *d, int c, size_t n)
{
	void *r = d;

	__asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(c) : "memory");
	return r;
}

#define memcpy(d, s, n) rf__k_memcpy((d), (s), (n))
#define memmove(d, s, n) rf__k_memmove((d), (s), (n))
#define memset(d, c, n) rf__k_memset((d), (c), (n))

#endif
