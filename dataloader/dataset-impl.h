/* dataset-impl.h -- helpers shared by the dataset readers and writer (dataset.c,
 * raw.c, idx.c, recfile.c, recwriter.c). Internal. */
#ifndef RINGFLOW_DATASET_IMPL_H
#define RINGFLOW_DATASET_IMPL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "dataset.h"

#include "rf-internal.h"

#define RF__DS_MSG_LEN 512

/* Record "path: <fmt>" as the thread's rf_last_error() and return code (a -errno). */
int rf__ds_fail(int code, const char *path, const char *fmt, ...) RF__PRINTF(3, 4);
/* An rf_dataset_open_*'s ds and flags (fn: its name): 0, or -EINVAL with the message
 * -- ds NULL, or bits that are no RF_DS_* flag (ds then zeroed, fds -1, as dataset.h
 * promises of a refused open). */
int rf__ds_open_args(struct rf_dataset *ds, unsigned flags, const char *fn);

struct stat;

/* Open path for a source: copy the path into s->path, open it read-only into s->fd
 * (rf__open_regular, common/) and fstat it into *st. what names the expected contents for the
 * message on a refusal ("an IDX file"): "PATH: is a FIFO, not a regular
 * file: expected an IDX file". Returns 0, or the error with its message recorded; whatever was
 * set in s is the caller's to release (as rf_dataset_close does). */
int rf__ds_src_open(struct rf_dataset_src *s, const char *path, const char *what,
		    struct stat *st);

/* pread exactly n bytes at off. Returns 0, -EIO if the file ended first (*got says
 * how many were read, may be NULL), or -errno. */
int rf__pread_full(int fd, void *buf, size_t n, uint64_t off, size_t *got);
/* rf__pread_full on s's file, or a Range request where s is remote. 0 or -errno (a
 * remote failure's message is left in rf_last_error()). */
int rf__src_pread(const struct rf_dataset_src *s, void *buf, size_t n, uint64_t off);
/* pwrite exactly n bytes at off. 0 or -errno. */
int rf__pwrite_full(int fd, const void *buf, size_t n, uint64_t off);

/* a*b, or UINT64_MAX on overflow. */
static inline uint64_t rf__mul_sat(uint64_t a, uint64_t b)
{
	uint64_t r;
	if (__builtin_mul_overflow(a, b, &r))
		return UINT64_MAX;
	return r;
}

static inline uint64_t rf__add_sat(uint64_t a, uint64_t b)
{
	uint64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return UINT64_MAX;
	return r;
}

static inline uint32_t rf__be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint32_t rf__le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t rf__le64(const uint8_t *p)
{
	return (uint64_t)rf__le32(p) | (uint64_t)rf__le32(p + 4) << 32;
}

static inline void rf__put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void rf__put_le64(uint8_t *p, uint64_t v)
{
	rf__put_le32(p, (uint32_t)v);
	rf__put_le32(p + 4, (uint32_t)(v >> 32));
}

/* Largest size a dataset may declare (1 TiB): bounds arithmetic and allocations. */
#define RF__DS_MAX_BYTES (1ull << 40)

/* "28x28" (or "scalar") into buf. */
void rf__shape_str(char *buf, size_t len, unsigned ndim, const uint32_t *shape);

/* Read all labels of ds (and, if crc != NULL, the CRC-32 of src[crc_src]'s data
 * bytes) and check labels against num_classes (if > 0). If max_label != NULL it
 * receives the largest label seen. 0 or -errno with a message. */
int rf__ds_scan(const struct rf_dataset *ds, int check_labels, int32_t *max_label,
		uint32_t *crc);

/* ---- several shards (shards.c) ---- */

#define RF__NAME_MAX 4095 /* bytes of a file name a brace pattern may expand to */

/* The names a brace pattern expands to (the syntax: rf_dataset_open_file in
 * dataset.h), in order, at most max of them: *out one allocation holding n pointers
 * and the strings (free(*out)), *n >= 1. A pattern without braces is its one name.
 * 0, or -EINVAL (bad syntax), -E2BIG (more than max names), -ENAMETOOLONG (the pattern
 * or a name over RF__NAME_MAX bytes), -ENOMEM, with why[0..wl) saying what ("offset 7:
 * '{1..}': LAST is empty, ...": the offset in the pattern); no rf_last_error(). */
int rf__brace_expand(const char *pat, size_t max, char ***out, size_t *n, char *why,
		     size_t wl);

/* Close and free ds->parts (the shards' files and paths); parts NULL, nparts 0. */
void rf__ds_parts_free(struct rf_dataset *ds);

/* Layout checks shared by .rfrec and raw: dtype, shape vs payload bytes, payload
 * and label inside the stride, no overlap. what: "header" / "description". */
int rf__ds_check_layout(const struct rf_dataset *ds, const char *what);

#endif
