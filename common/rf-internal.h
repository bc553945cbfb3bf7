/* common/rf-internal.h -- what every module of the library may use, never installed:
 * recording a failure's message, logging, opening a regular file without blocking,
 * writing a file whole, opening a library. */
#ifndef RF_INTERNAL_H
#define RF_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "log.h"

#define RF__PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Record "fmt..." as the calling thread's rf_last_error() and return code (a -errno),
 * so a failure reads: return rf__fail(-EINVAL, "tensor %s: bad shape", name); */
int rf__fail(int code, const char *fmt, ...) RF__PRINTF(2, 3);

/* Hand one line to the log callback, if one is installed. */
void rf__log(enum rf_log_level level, const char *fmt, ...) RF__PRINTF(2, 3);

/* Like rf__fail, the message then ": " and the message a call under it left in
 * rf_last_error(): return rf__fail_under(ret, "rf_engine_push_io") on a refusal of
 * the ring's gives "rf_engine_push_io: rf_ring_submit(readv): ...". */
int rf__fail_under(int code, const char *fmt, ...) RF__PRINTF(2, 3);

/* Format into a caller's buffer (an object's last-error field) and also make it the
 * thread's rf_last_error(); returns code. */
int rf__fail_into(char *buf, size_t len, int code, const char *fmt, ...) RF__PRINTF(4, 5);

#define RF__FNV0 0xcbf29ce484222325ull /* FNV-1a 64's offset basis */

/* FNV-1a 64 of n bytes at p, going on from h (RF__FNV0 to start). */
static inline uint64_t rf__fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t k = 0; k < n; k++)
		h = (h ^ b[k]) * 0x100000001b3ull;
	return h;
}

/* The calling thread's id, asked of the kernel once per thread (spin.c): the engine
 * checks it at every push, the ring at every request (their owner thread's only). */
uint64_t rf__gettid_slow(void) __attribute__((cold));
static inline uint64_t rf__gettid(void)
{
	/* initial-exec: a plain %fs load, not a __tls_get_addr call per push */
	extern __thread uint64_t rf__tid __attribute__((tls_model("initial-exec")));

	return __builtin_expect(rf__tid != 0, 1) ? rf__tid : rf__gettid_slow();
}

/* How many messages the calling thread has recorded (rf__fail and kin): a call that
 * returns an error set by no one under it (an op's status, reported by a wait) sees
 * the count unchanged since it began, and says what happened itself. */
unsigned rf__error_gen(void);

/* ThreadSanitizer and element loops. A loop over a buffer marked RF__TSAN_WHOLE is
 * built without TSan's check of every load and store; its caller declares the memory
 * it reads and writes to TSan first, whole (rf__tsan_read / rf__tsan_write), on the
 * same thread with nothing between that orders them -- so a race on that memory is
 * reported as before, at a check per buffer instead of per element. Under other builds
 * these are nothing. (GCC inlines a function only into one of the same sanitizer
 * attributes: a loop's helpers are marked too.) */
#ifdef __SANITIZE_THREAD__
#define RF__TSAN_WHOLE __attribute__((no_sanitize_thread))
static inline void rf__tsan_read(const void *p, size_t n)
{
	if (n)
		__tsan_read_range((void *)(uintptr_t)p, (long)n); /* GCC's built-ins */
}
static inline void rf__tsan_write(void *p, size_t n)
{
	if (n)
		__tsan_write_range(p, (long)n);
}
#else
#define RF__TSAN_WHOLE
static inline void rf__tsan_read(const void *p, size_t n)
{
	(void)p;
	(void)n;
}
static inline void rf__tsan_write(void *p, size_t n)
{
	(void)p;
	(void)n;
}
#endif

/* 1 when host code may use AVX-512 (with AVX2 and FMA): the CPU and OS support it and
 * the environment does not set RF_KERNELS_NO_AVX512 (not "0"). Decided once per
 * process, so that it is cheap to ask per call (the loader's decode asks per record)
 * and every caller -- the CPU kernels, the host decode -- takes the same path. */
int rf__isa_avx512(void);

/* env.c: NAME's VALUE (as getenv gave it; NULL: unset) as a whole number from lo to hi,
 * digits only, into *out. 0, or -EINVAL with "NAME=VALUE in the environment: expected
 * WHAT, a whole number from LO to HI (or the variable unset)"; unset or refused, *out
 * is dflt. */
int rf__env_u64(const char *name, const char *value, uint64_t lo, uint64_t hi, uint64_t dflt,
		const char *what, uint64_t *out);

/* A transparent huge page's size (x86-64, arm64 with 4 KiB pages). */
#define RF__HUGE_PAGE ((size_t)2 << 20)

/* mem.c: bytes for a large array, to be freed with free(): from 2 MiB up, 2 MiB-aligned
 * and advised MADV_HUGEPAGE (one fault per 2 MiB where transparent huge pages are on,
 * "madvise" or "always"); smaller, plain malloc. NULL when out of memory. */
void *rf__alloc_big(size_t bytes);

/* Fault in the pages of p[0..n) now, by writing a zero into each (through a volatile
 * pointer, so the compiler cannot drop it as a store to calloc'd memory). For arrays
 * whose first touches would otherwise land under a hot path: a fault costs 1-16 us a
 * page on a virtual machine. For memory that is zero already (calloc) or whose bytes do
 * not matter yet (malloc): a write, not a read and a write back, which would fault an
 * untouched page twice (the zero page mapped, then copied on the write). */
static inline void rf__prefault(void *p, size_t n)
{
	volatile char *c = p;

	for (size_t i = 0; i < n; i += 4096)
		c[i] = 0;
	if (n)
		c[n - 1] = 0;
}

/* spin.c: the threads that spin before they sleep (a ring's reactor, each worker
 * thread) count themselves in and out; rf__spin_crowded() says whether there are more
 * of them than CPUs this process may run on -- then a spin yields every few polls. */
void rf__spinners_add(int delta);
int rf__spin_crowded(void);
/* One pause of a spin-wait loop (x86 PAUSE, arm64 YIELD; nothing elsewhere). */
static inline void rf__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}
/* spin.c: the CPUs this process may run on (its affinity; else those online; >= 1). */
int rf__cpus(void);
/* spin.c: futex(2) on the 32-bit word at `word`, no timeout (op FUTEX_WAIT_PRIVATE with
 * the value expected, FUTEX_WAKE_PRIVATE with how many): what a thread that spun and
 * found nothing sleeps on. */
long rf__futex(void *word, int op, uint32_t val);
/* CLOCK_MONOTONIC in ns: ring's rf_now_ns, and the layers below ring that time a spin
 * (the CPU devices' helpers link without ring in the kernels' tests). */
static inline uint64_t rf__mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct stat;

/* file.c: what a file of mode m is, for messages: "a directory", "a FIFO", "a socket",
 * "a character device", "a block device", "a regular file" ... */
const char *rf__ftype(unsigned m);

/* file.c: open(path, flags, mode) for a regular file only, without ever blocking: a
 * path that stat() shows is not a regular file is refused before it is opened (a
 * FIFO would block open(), a device may act on it); the open itself adds O_NONBLOCK
 * (a FIFO put there in between cannot block it either), O_NOCTTY and O_CLOEXEC,
 * fstat()s into *st and refuses anything but a regular file; O_NONBLOCK is cleared
 * again unless flags has it (io_uring may complete a read of an O_NONBLOCK file with
 * -EAGAIN instead of waiting for it). Returns the fd, or -errno (no message): on a
 * refusal *not_reg is 1, *st holds what was found, and the return is -EISDIR for a
 * directory, -EINVAL otherwise. A missing path with O_CREAT is created. */
int rf__open_regular(const char *path, int flags, unsigned mode, struct stat *st, int *not_reg);

/* file.c: write len bytes of buf to path whole -- under tmp, then renamed into place;
 * with sync, fsync'd before the rename and the directory after. 0, or -errno with
 * *step naming what failed ("create", "write", "sync", "rename"); tmp is removed.
 * path NULL: tmp is left written (and synced), for the caller to rename when the
 * files it goes with are written too. tmp is created new (a stale file there is removed first; O_EXCL, O_NOFOLLOW: never
 * written through a link planted there). */
int rf__write_whole(const char *path, const char *tmp, const void *buf, size_t len, int sync,
		    const char **step);
/* file.c: the directory part of path, synced (best effort: a directory fsync may be
 * refused). */
void rf__sync_dir(const char *path);

/* dl.c: dlopen (RTLD_NOW | RTLD_LOCAL) the first of libs (NULL-terminated) that loads
 * and resolve each symbol into its slot (a function pointer's address, as void **).
 * The handle, kept open to the process's end by its caller; or NULL with err saying
 * "cannot load LIBS[0]: why" or "LIB lacks SYMBOL" (nothing left open). */
struct rf__dlsym {
	const char *name;
	void **slot;
};
void *rf__dl_open(const char *const *libs, const struct rf__dlsym *syms, size_t n, char *err,
		  size_t errlen);

#endif
