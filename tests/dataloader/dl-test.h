/* dl-test.h -- helpers for the dataloader format tests: checks, a scratch directory
 * removed at exit, writing raw and gzip'd files, crafting IDX files, and asserting
 * on error codes and message contents. Exit codes: 0 pass, 1 fail, 77 skip. */
#ifndef RF_DL_TEST_H
#define RF_DL_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset.h"

#include "../test-util.h" /* CHECK, CHECK_EQ, T_SKIP */

/* Pass ret through; when it is an error, copy the call's message (rf_last_error())
 * into buf, which the tests then check. */
static inline int t_msg(int ret, char *buf, size_t len)
{
	if (ret < 0 && buf && len)
		snprintf(buf, len, "%s", rf_last_error());
	return ret;
}

/* ret must be 0; on failure print err. */
#define CHECK_OPEN(expr, err) do { \
	int _r = (expr); \
	if (_r != 0) { \
		fprintf(stderr, "%s:%d: %s returned %d (%s): %s\n", __FILE__, __LINE__, #expr, \
			_r, strerror(-_r), (err)); \
		exit(1); \
	} \
} while (0)

static char t_dir[256];

static int t_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	remove(p);
	return 0;
}

struct t_str;
static void t_free_strs(void);

static void t_cleanup(void)
{
	if (t_dir[0] && !getenv("RF_KEEP_TMP"))
		nftw(t_dir, t_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	t_free_strs();
}

/* Create a scratch directory (removed at exit unless RF_KEEP_TMP is set). */
static inline const char *t_mkdir(const char *tag)
{
	const char *base = getenv("TMPDIR");
	snprintf(t_dir, sizeof(t_dir), "%s/rf-%s-XXXXXX", base && *base ? base : "/tmp", tag);
	if (!mkdtemp(t_dir)) {
		perror("mkdtemp");
		exit(1);
	}
	atexit(t_cleanup);
	return t_dir;
}

/* A path in the scratch directory; valid until exit (freed by t_cleanup). */
struct t_str { struct t_str *next; char s[]; };
static struct t_str *t_strs;

static inline const char *t_path(const char *name)
{
	size_t n = strlen(t_dir) + strlen(name) + 2;
	struct t_str *e = malloc(sizeof(*e) + n);
	CHECK(e);
	snprintf(e->s, n, "%s/%s", t_dir, name);
	e->next = t_strs;
	t_strs = e;
	return e->s;
}

static void t_free_strs(void)
{
	while (t_strs) {
		struct t_str *e = t_strs;
		t_strs = e->next;
		free(e);
	}
}

static inline void t_write(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	CHECK(f);
	CHECK(n == 0 || fwrite(data, 1, n, f) == n);
	CHECK(fclose(f) == 0);
}

/* Overwrite n bytes at off of an existing file, in place. */
static inline void t_poke(const char *path, size_t off, const void *data, size_t n)
{
	int fd = open(path, O_WRONLY);
	CHECK(fd >= 0);
	CHECK(pwrite(fd, data, n, (off_t)off) == (ssize_t)n);
	CHECK(close(fd) == 0);
}

static inline void t_write_gz(const char *path, const void *data, size_t n)
{
	gzFile g = gzopen(path, "wb6");
	CHECK(g);
	CHECK(n == 0 || gzwrite(g, data, (unsigned)n) == (int)n);
	CHECK(gzclose(g) == Z_OK);
}

/* Whole file into malloc'd memory; *n its size. */
static inline uint8_t *t_read(const char *path, size_t *n)
{
	struct stat st;
	FILE *f = fopen(path, "rb");
	uint8_t *b;
	CHECK(f);
	CHECK(fstat(fileno(f), &st) == 0);
	b = malloc((size_t)st.st_size + 1);
	CHECK(b);
	CHECK(fread(b, 1, (size_t)st.st_size, f) == (size_t)st.st_size);
	fclose(f);
	*n = (size_t)st.st_size;
	return b;
}

static inline int t_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* An IDX file in memory: magic (0, 0, dtype, ndim), big-endian dims, then data
 * filled by fill(i) (or zeros). *n receives the size. */
static inline uint8_t *t_idx(uint8_t dtype, unsigned ndim, const uint32_t *dims,
			     uint8_t (*fill)(uint64_t), size_t *n)
{
	uint64_t data = 1;
	size_t hdr = 4 + 4 * ndim;
	uint8_t *b;

	for (unsigned i = 0; i < ndim; i++)
		data *= dims[i];
	b = calloc(1, hdr + data + 1);
	CHECK(b);
	b[2] = dtype;
	b[3] = (uint8_t)ndim;
	for (unsigned i = 0; i < ndim; i++) {
		b[4 + 4 * i] = (uint8_t)(dims[i] >> 24);
		b[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
		b[6 + 4 * i] = (uint8_t)(dims[i] >> 8);
		b[7 + 4 * i] = (uint8_t)dims[i];
	}
	if (fill)
		for (uint64_t i = 0; i < data; i++)
			b[hdr + i] = fill(i);
	*n = hdr + data;
	return b;
}

/* Check that ret is negative (== want if want != 0) and that err contains each
 * of the NULL-terminated substrings. */
static inline void t_expect_fail_at(const char *file, int line, int ret, int want,
				    const char *err, ...)
{
	va_list ap;
	const char *s;

	if (ret >= 0 || (want && ret != want)) {
		fprintf(stderr, "%s:%d: expected failure %d (%s), got %d; message: %s\n", file,
			line, want, want ? strerror(-want) : "any", ret, err);
		exit(1);
	}
	va_start(ap, err);
	while ((s = va_arg(ap, const char *))) {
		if (!strstr(err, s)) {
			fprintf(stderr, "%s:%d: message lacks \"%s\": %s\n", file, line, s, err);
			exit(1);
		}
	}
	va_end(ap);
}
#define EXPECT_FAIL(ret, want, err, ...) \
	t_expect_fail_at(__FILE__, __LINE__, (ret), (want), (err), __VA_ARGS__, (const char *)NULL)

static inline const char *t_base(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

#endif
