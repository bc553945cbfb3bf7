/* tests/test-util.h -- tiny helpers shared by the test programs. Exit codes follow
 * the automake convention meson uses: 0 pass, 1 fail, 77 skip. */
#ifndef RF_TEST_UTIL_H
#define RF_TEST_UTIL_H
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define T_SKIP 77

#define CHECK(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
		exit(1); \
	} \
} while (0)

#define CHECK_EQ(a, b) do { \
	long long _a = (long long)(a), _b = (long long)(b); \
	if (_a != _b) { \
		fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld vs %lld)\n", \
			__FILE__, __LINE__, #a, #b, _a, _b); \
		exit(1); \
	} \
} while (0)

#define CHECK_OK(expr) do { \
	long long _r = (long long)(expr); \
	if (_r < 0) { \
		fprintf(stderr, "%s:%d: %s returned %lld (%s)\n", __FILE__, __LINE__, #expr, \
			_r, strerror((int)-_r)); \
		exit(1); \
	} \
} while (0)

/* A test's element loop over a buffer the library shares with other threads (a batch),
 * marked T_TSAN_WHOLE, is built without ThreadSanitizer's check of each element; the
 * test declares the buffer to TSan whole first (t_tsan_read / t_tsan_write), so a race
 * on it is still reported -- as the library does for its kernels (rf-internal.h). */
#ifdef __SANITIZE_THREAD__
#define T_TSAN_WHOLE __attribute__((no_sanitize_thread))
static inline void t_tsan_read(const void *p, size_t n)
{
	if (n)
		__tsan_read_range((void *)(size_t)p, (long)n);
}
static inline void t_tsan_write(void *p, size_t n)
{
	if (n)
		__tsan_write_range(p, (long)n);
}
#else
#define T_TSAN_WHOLE
static inline void t_tsan_read(const void *p, size_t n) { (void)p; (void)n; }
static inline void t_tsan_write(void *p, size_t n) { (void)p; (void)n; }
#endif

static inline unsigned long long t_splitmix64(unsigned long long *s)
{
	unsigned long long z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Threads of this process whose name (/proc/self/task/TID/comm) is name, or starts
 * with it when prefix is set. */
static inline int t_threads_named(const char *name, int prefix)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	CHECK(d != NULL);
	while ((de = readdir(d))) {
		char path[300], comm[32] = "";
		FILE *f;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		if (!(f = fopen(path, "r")))
			continue;               /* a thread that has just ended */
		if (fgets(comm, sizeof(comm), f)) {
			comm[strcspn(comm, "\n")] = 0;
			n += prefix ? !strncmp(comm, name, strlen(name)) : !strcmp(comm, name);
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

/* The queue depth (sysfs queue/nr_requests) of the disk the file fd is on, the whole
 * disk's for a partition, read here and not by the library: the oracle for
 * rf_blk_queue_attr and the loader's bound on reads in flight. 0: no block device (a
 * tmpfs, an overlay) or no sysfs. */
static inline unsigned t_disk_depth(int fd)
{
	struct stat st;
	char p[128];
	unsigned d = 0;

	CHECK(fstat(fd, &st) == 0);
	for (int up = 0; up < 2 && !d && major(st.st_dev); up++) {
		snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/%squeue/nr_requests",
			 major(st.st_dev), minor(st.st_dev), up ? "../" : "");
		FILE *f = fopen(p, "r");
		if (f) {
			if (fscanf(f, "%u", &d) != 1)
				d = 0;
			fclose(f);
		}
	}
	return d;
}

#endif
