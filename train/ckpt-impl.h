/* train/ckpt-impl.h -- inside the checkpoint code: the file format's constants and
 * fields, the parsed header, and what checkpoint.c (save, load, probe) uses from
 * ckpt-format.c (encoding, decoding and checking the header). */
#ifndef RF_CKPT_IMPL_H
#define RF_CKPT_IMPL_H

#include <stdint.h>
#include <sys/types.h>
#include <zlib.h>

#include "checkpoint.h"
#include "ring-io.h"

#define RF__CK_MAGIC "RFCKPTv1"
#define RF__CK_END_MAGIC "RFCKEND1"
#define RF__CK_FIXED 384u       /* bytes before the table */
#define RF__CK_ENTRY 128u       /* bytes per table entry */
#define RF__CK_TRAILER 32u
#define RF__CK_ALIGN 4096u
#define RF__CK_CHUNK (1u << 20) /* bytes per read/write request */
#define RF__CK_INFLIGHT 32u     /* requests in flight per transfer */

#define RF__CK_HIDDEN __attribute__((visibility("hidden")))

static inline void rf__put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void rf__put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t rf__get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static inline uint64_t rf__get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static inline uint64_t rf__align(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static inline uint32_t rf__crc(const void *p, uint64_t len)
{
	return (uint32_t)crc32_z(0L, (const Bytef *)p, (z_size_t)len);
}

static inline uint64_t rf__header_size(uint32_t n)
{
	return RF__CK_FIXED + (uint64_t)RF__CK_ENTRY * n + 8;
}

/* A source of bytes for the header checks: the ring (load) or pread (probe). */
struct rf__src {
	struct rf_ring *ring; /* NULL: pread */
	int fd;
};

/* ---- the header ------------------------------------------------------------------- */

struct rf__entry {
	char name[RF_CKPT_NAME_MAX + 1];
	uint32_t dtype, ndim;
	uint64_t shape[4];
	uint64_t offset, nbytes;
	uint32_t crc;
	int used;
};

struct rf__hdr {
	uint32_t version, ntensors;
	uint64_t header_size, file_size, trailer_off;
	uint32_t header_crc;
	struct rf_ckpt_meta meta;
	struct rf__entry *e; /* ntensors, malloc'd */
};

/* A set of tensor names (up to RF_CKPT_MAX_TENSORS): open addressing on their FNV-1a,
 * so that checking a table for duplicates and matching the caller's tensors to it is
 * linear in their count (a table of 65,536 names took minutes pairwise). */
struct rf__names {
	const char **name;
	uint32_t *idx;
	uint32_t mask;
};
/* For n names: 0 or -ENOMEM. */
RF__CK_HIDDEN int rf__names_init(struct rf__names *x, uint32_t n);
RF__CK_HIDDEN void rf__names_free(struct rf__names *x);
/* The index name was put with, or -1 after putting it with idx (name borrowed). */
RF__CK_HIDDEN int64_t rf__names_put(struct rf__names *x, const char *name, uint32_t idx);
/* The index name was put with, or -1. */
RF__CK_HIDDEN int64_t rf__names_find(const struct rf__names *x, const char *name);

/* ckpt-format.c */
RF__CK_HIDDEN const char *rf__ck_dtype_name(uint32_t dt, char *buf, size_t len);
RF__CK_HIDDEN const char *rf__ck_shape_str(uint32_t ndim, const uint64_t *shape, char *buf, size_t len);
RF__CK_HIDDEN uint64_t rf__ck_expected_bytes(uint32_t dtype, uint32_t ndim, const uint64_t *shape,
					  int *ok);
RF__CK_HIDDEN int rf__ck_transfer(struct rf_ring *ring, int fd, enum rf_xfer_dir dir,
			       const struct rf_io_seg *segs, unsigned nsegs, uint64_t *err_off,
			       int64_t *err_res);
RF__CK_HIDDEN void rf__ck_meta_encode(uint8_t *p, const struct rf_ckpt_meta *m);
/* Read and check the header, trailer and table of a checkpoint of fsize bytes; 0 or
 * -errno with the message in rf_last_error(). h->e is malloc'd on success. */
RF__CK_HIDDEN int rf__ck_read_header(const struct rf__src *src, const char *path, uint64_t fsize,
				  struct rf__hdr *h);

/* checkpoint.c: rf_ckpt_save, saying in *published whether the new file is at path --
 * a failure after its rename (its directory's fsync) leaves it there: an export must
 * then name its model.json over the old one too (export.c). */
RF__CK_HIDDEN int rf__ckpt_save(struct rf_ring *ring, const char *path,
				const struct rf_ckpt_meta *meta, const struct rf_ckpt_blob *blobs,
				unsigned n, int *published);

#endif
