/* ringflow/dataset.h -- datasets on disk (IDX files, ringflow record files .rfrec,
 * generic fixed-size-record files), each opened into one struct rf_dataset that says
 * where every record's payload and label lie, and the .rfrec writer.
 * An opened dataset is immutable and may be read from any thread.
 * The layouts, the .rfrec format and the error codes: dataloader/README.md.
 */
#ifndef RINGFLOW_DATASET_H
#define RINGFLOW_DATASET_H

#include <stddef.h>
#include <stdint.h>
#include <errno.h>

#include "log.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types on disk; the values are the IDX type codes (third magic byte).
 * Distinct from devices' enum rf_dtype (tensor element types): a loader maps
 * RF_DS_DT_U8 / RF_DS_DT_F32 / RF_DS_DT_I32 to RF_U8 / RF_F32 / RF_I32. */
enum rf_ds_dtype {
	RF_DS_DT_NONE = 0,
	RF_DS_DT_U8 = 0x08,
	RF_DS_DT_I8 = 0x09,
	RF_DS_DT_I16 = 0x0B,
	RF_DS_DT_I32 = 0x0C,
	RF_DS_DT_F32 = 0x0D,
	RF_DS_DT_F64 = 0x0E
};

/* Bytes per element; 0 for an unknown code. */
size_t rf_ds_dtype_size(enum rf_ds_dtype t);
/* "u8", "i8", "i16", "i32", "f32", "f64", or "?" (static string, never freed). */
const char *rf_ds_dtype_name(enum rf_ds_dtype t);

/* How a label is stored. In IDX label files it is a u8 record of its own (src[1]);
 * in .rfrec and raw files it lies inside the record, little-endian for i32. */
enum rf_label_kind {
	RF_LABEL_NONE = 0,
	RF_LABEL_U8 = 1,
	RF_LABEL_I32 = 2
};

enum rf_dataset_kind {
	RF_DS_NONE = 0,
	RF_DS_IDX,        /* IDX images + IDX labels (src[0], src[1]) */
	RF_DS_IDX_SINGLE, /* one IDX file, no labels */
	RF_DS_RFREC,      /* ringflow record file */
	RF_DS_RAW,        /* generic fixed-size records */
	RF_DS_TAR         /* WebDataset shards (one, or several: parts): images where they
			   * lie in the tars */
};

#define RF_DS_MAX_DIMS 4 /* dims of one record (a sample); IDX adds the count dim */

/* Where records live. Record i of a source starts at byte
 *     data_offset + i * stride
 * of the file (fd/path) or of the memory buffer mem (mem != NULL). For gzip'd IDX
 * the buffer holds the whole decompressed file, header included, so offsets are the
 * same as they would be in the uncompressed file. */
struct rf_dataset_src {
	char *path;           /* owned by the dataset; the name used in messages */
	int fd;               /* O_RDONLY|O_CLOEXEC, buffered; -1 when in memory. A loader
	                       * wanting O_DIRECT reopens path itself. Owned. */
	const uint8_t *mem;   /* whole decompressed file, owned; NULL when on disk */
	uint64_t size;        /* bytes of the file (or of mem) */
	uint64_t data_offset; /* byte offset of record 0 (IDX header, .rfrec's 4096, raw header) */
	uint64_t stride;      /* bytes from one record to the next (any value >= 1) */
	uint64_t data_bytes;  /* count * stride */
	int compressed;       /* 1: the file on disk is gzip (mem holds it decompressed) */
	int remote;           /* 1: path is an http:// URL (fd -1): read with HTTP Range
			       * requests (.rfrec only) */
	char *validator;      /* remote: the server's ETag (else Last-Modified) at the open,
			       * owned; every later read must see it (a file replaced by one
			       * of the same size is refused, not mixed in); NULL: none given */
};

enum { RF_DS_SRC_PAYLOAD = 0, RF_DS_SRC_LABEL = 1 };

/* One shard of a dataset of several (struct rf_dataset's parts). */
struct rf_dataset_part {
	char *path;     /* the shard's file, owned; what messages about its bytes name */
	int fd;         /* O_RDONLY|O_CLOEXEC, buffered, owned; a loader reopens path itself */
	uint64_t base;  /* where its bytes start in the virtual payload (a multiple of 4096) */
	uint64_t size;  /* bytes of the shard's file */
};

/* Virtual bases of several shards are aligned to this (so an offset aligned for
 * O_DIRECT in the virtual payload is aligned in its shard's file as well). */
#define RF_DS_PART_ALIGN 4096u
/* Most shards one dataset takes (rf_dataset_open_wds_list, a brace pattern). */
#define RF_DS_MAX_SHARDS 65536u

struct rf_dataset {
	enum rf_dataset_kind kind;
	uint64_t count;               /* records (>= 1) */
	unsigned nsrc;                /* 1 or 2 */
	struct rf_dataset_src src[2]; /* [0] payloads (and in-record labels); [1] IDX labels */

	/* payload of record i: src[0], at src[0].data_offset + i*stride + payload_offset */
	uint64_t payload_offset;      /* within the record */
	uint64_t payload_bytes;       /* = product(shape) * rf_ds_dtype_size(dtype) */
	enum rf_ds_dtype dtype;
	unsigned ndim;                /* 0..RF_DS_MAX_DIMS; 0 is a scalar */
	uint32_t shape[RF_DS_MAX_DIMS]; /* unused dims are 0 */

	/* label of record i: src[label_src] at data_offset + i*stride + label_offset */
	enum rf_label_kind label_kind;
	unsigned label_src;           /* RF_DS_SRC_PAYLOAD or RF_DS_SRC_LABEL */
	uint64_t label_offset;        /* within the label source's record */
	uint32_t num_classes;         /* labels lie in [0, num_classes); 0: unknown */

	/* .rfrec only */
	uint32_t version;
	uint32_t data_crc32;          /* CRC-32 (zlib) of the count*stride record bytes
				       * (version 2: of every record's bytes) */
	/* .rfrec version 2 only: records of any length (stride 0, rf_dataset_variable).
	 * Record i's place and label are in the index, held in memory as src[1]: 16
	 * bytes per record (u64 byte offset in the file, u32 length, i32 label; LE),
	 * so labels come from src[1] (label_src 1, label_offset 12). */
	uint32_t encoding;            /* RF_REC_ENC_*: what a record's bytes are */
	uint32_t index_crc32;         /* CRC-32 of the index */
	uint64_t max_record;          /* bytes of the longest record */
	char **classes;               /* num_classes class names, or NULL; owned */
	/* raw only, with RF_DS_ALLOW_TAIL: bytes after the last whole record */
	uint64_t tail_bytes;
	/* Several WebDataset shards opened as one (rf_dataset_open_wds_list, 2 or more
	 * shards): the payload source src[0] is their virtual concatenation -- shard k
	 * occupies [parts[k].base, parts[k].base + parts[k].size), each base a multiple of
	 * RF_DS_PART_ALIGN -- and the index's offsets are virtual; src[0] then has fd -1
	 * (read through the parts: rf_dataset_part_of), size the virtual size, path the
	 * name the set was opened by. NULL and 0 for every other dataset (one shard too). */
	struct rf_dataset_part *parts; /* nparts, owned */
	unsigned nparts;
};

/* A byte range of one source: what a loader reads for one payload or label. */
struct rf_dataset_loc {
	unsigned src;     /* index into ds->src */
	uint64_t offset;  /* byte offset in that source's file (or in its mem buffer) */
	uint64_t length;
};

/* Flags for the open functions. */
enum {
	RF_DS_VERIFY = 1u << 0,     /* read all data: .rfrec data CRC and label range;
	                             * raw: label range (IDX labels are always checked) */
	RF_DS_ALLOW_TAIL = 1u << 1  /* raw: accept a partial record at the end (ignored,
	                             * counted in tail_bytes) instead of failing */
};

/* ---- opening ------------------------------------------------------------------
 * All open functions take a caller-owned struct rf_dataset, zero it first, and on
 * success fill it with resources it then owns (paths, fds, memory) that
 * rf_dataset_close() releases. On failure nothing is held, the struct is left
 * zeroed (fds -1), and rf_dataset_close() on it is a harmless no-op. Paths are
 * copied; the caller keeps its strings. */

/* IDX images + labels. Each file may be gzip'd (detected by content, not name) or
 * raw. Images: magic 0x00000803 (u8, 3 dims: count, rows, cols); labels: 0x00000801.
 * Other IDX dtypes are recognised and refused with -ENOTSUP. Checks: header, dims
 * >= 1, exact file size (raw) or exact decompressed size (gzip: truncation and
 * trailing data both fail), equal counts, every label < num_classes.
 * num_classes: 1..65536, or 0 to accept any u8 label and set num_classes to
 * max label + 1. Raw files stay on disk (src[i].fd, data_offset = 8 + 4*ndim);
 * gzip'd ones are decompressed into memory (src[i].mem, freed by close). */
int rf_dataset_open_idx_pair(struct rf_dataset *ds, const char *images_path,
			     const char *labels_path, uint32_t num_classes,
			     unsigned flags);

/* The name a Fashion-MNIST (or MNIST) IDX file has in its directory, without the
 * ".gz" it may also have: test 0 the training set's, 1 the test set's; labels 0 the
 * images', 1 the labels' -- (0, 0) "train-images-idx3-ubyte", (1, 1)
 * "t10k-labels-idx1-ubyte". A static string, never NULL (a non-zero value is 1). */
const char *rf_dataset_fmnist_name(unsigned test, unsigned labels);

/* One IDX file (u8, 1..5 dims: count then up to 4 record dims), no labels.
 * expect_ndim: 0 for any, else the number of dims the file must have. */
int rf_dataset_open_idx(struct rf_dataset *ds, const char *path, unsigned expect_ndim,
			unsigned flags);

/* A .rfrec file. Checks magic, version, header CRC, field consistency, and that the
 * file is exactly 4096 + count*stride rounded up to 4096 with zero padding (version 2:
 * the records, the index and the class names, each section padded to 4096; the
 * index read into memory and checked whole: its CRC, records back to back from 4096
 * covering the data exactly, each 1 byte or more, every label in range; the class
 * names' CRC and count). With
 * RF_DS_VERIFY also reads every record: data CRC and label range. path may be an
 * http://HOST[:PORT]/PATH URL (HOST may be an [IPv6 literal]) of a server that
 * answers Range requests (nginx, ...): the same checks run on ranges fetched from it,
 * and a loader then reads record spans with Range requests (dataloader/README.md,
 * "Over HTTP"). */
int rf_dataset_open_rfrec(struct rf_dataset *ds, const char *path, unsigned flags);
/* The deadline of each connect, send and receive of an http:// dataset (and of a
 * response's headers), from RF_HTTP_TIMEOUT_MS in the environment: whole milliseconds
 * from 1 to 3600000 (default 10000). 0 with *ns set, or -EINVAL with a message naming
 * the variable. Programs check it before they start; opening a URL checks it too. */
int rf_dataset_http_timeout(uint64_t *ns);

/* A WebDataset shard (POSIX tar; GNU and pax names too): its samples are the members
 * grouped by key (the name up to the first dot of its last component), each with a
 * .jpg, .jpeg or .png image of 1 byte or more (the first extension of these the
 * sample has; extensions in any case) and, for every sample or none, a .cls label
 * (decimal). The result is a variable dataset of encoded images (rf_dataset_variable,
 * encoding RF_REC_ENC_IMAGE) read where the images lie in the tar; samples without an
 * image are passed over, with a warning (rf_log_set) naming the shard, their count and
 * the first one. The member list, with the bytes
 * of every member of at most 32 (the labels), is cached in PATH.idx (or under
 * $XDG_CACHE_HOME/ringflow/ when the shard's folder is not writable) with the shard's
 * size, mtime and inode, so the next open reads no more than that. num_classes: labels must lie in [0, num_classes); 0: max label + 1.
 * Refusals name the shard, the byte offset and what was expected: a bad header
 * checksum, a member past the end, a key whose members are apart, an extension twice
 * in one sample (in any case: 'k.cls' twice, 'k.jpg' and 'k.JPG'), a bad .cls, a
 * sample without a label among labelled ones. */
int rf_dataset_open_wds(struct rf_dataset *ds, const char *path, uint32_t num_classes,
			unsigned flags);

/* Several WebDataset shards paths[0..n) (1 <= n <= RF_DS_MAX_SHARDS) opened as one
 * dataset: records numbered shard by shard in the order given (shard 0's samples
 * first, each shard's in its own order), each shard checked and cached as
 * rf_dataset_open_wds does. Labels over the whole set: every sample labelled or none,
 * num_classes 0 gives the largest label of every shard + 1. One shard is exactly
 * rf_dataset_open_wds. Two or more: ds->parts holds each shard's path, open file and
 * place in the virtual payload (struct rf_dataset's parts); the dataset keeps one
 * open file per shard and a loader reopens each once more, so n shards take 2n file
 * descriptors: more than (RLIMIT_NOFILE's soft limit - 64) / 2 are refused with
 * -EMFILE before any is opened (raise the limit, ulimit -n, or pack the shards into
 * one file: rf-pack --webdataset). Remote shards (http://) are refused with -ENOTSUP
 * when there are two or more. A file named twice (the same device and inode, by one
 * path or two) is refused with -EINVAL naming both places, before any shard is
 * indexed: its samples would be read twice an epoch. Refusals name the shard, the byte
 * offset in it and what
 * was expected (a missing shard: its path and "(shard K of N)"). src[0].path names the
 * set: "FIRST and N-1 more shards". paths are copied; the caller keeps them. */
int rf_dataset_open_wds_list(struct rf_dataset *ds, const char *const *paths, size_t n,
			     uint32_t num_classes, unsigned flags);

/* A file of records by its name: PATH.tar (local) a WebDataset shard
 * (rf_dataset_open_wds, num_classes 0); a name ending in .tar with brace groups that
 * is not itself a file (rf_dataset_is_shard_pattern), e.g. DIR/train-{000..146}.tar,
 * the shards it expands to (rf_dataset_open_wds_list, num_classes 0; src[0].path is the
 * pattern); anything else an .rfrec, local or http:// (rf_dataset_open_rfrec). The
 * tools and the Python package open --data this way.
 * Brace groups, as Python's braceexpand and bash expand them: {FIRST..LAST} and
 * {FIRST..LAST..STEP} of unsigned decimal numbers (ascending or descending; padded with
 * zeros to the wider of FIRST and LAST when either is written with a leading zero, as
 * {000..146}), {A,B,...} lists (items may be empty and may hold groups), several groups
 * in one name (the first varies slowest). Refused with -EINVAL naming the pattern and
 * the offset of the group: an unmatched brace, a group that is neither ({}, {a},
 * {1..}, {1..x}), a step of 0, a number over 18 digits; more than RF_DS_MAX_SHARDS
 * names (-E2BIG) or a name over 4095 bytes (-ENAMETOOLONG). A pattern that names a
 * shard twice ({0,1,0}) is refused as a list with a repeat is. No escapes, no letter
 * ranges. A pattern of http:// shards is refused with -ENOTSUP. */
int rf_dataset_open_file(struct rf_dataset *ds, const char *path, unsigned flags);

/* Options of rf_dataset_open_file_opts. */
struct rf_dataset_open_opts {
	unsigned flags;           /* RF_DS_*, as rf_dataset_open_file's */
	unsigned http_timeout_ms; /* an http:// dataset: the deadline of each connect, send
				   * and receive of the open's requests, 1 to 3600000 ms
				   * (0: RF_HTTP_TIMEOUT_MS's, else 10000); a loader's reads
				   * take rf_loader_opts.http_timeout_ms */
	/* NULL, or asked every 100 ms (on the opening thread) while the open waits for
	 * a server (an http:// dataset, its retries included): non-zero ends the open
	 * with -EINTR ("URL: interrupted"), nothing left open -- as
	 * rf_engine_set_interrupt does for an engine's waits */
	int (*interrupt)(void *arg);
	void *interrupt_arg;
};

/* rf_dataset_open_file with options (o NULL: all 0). A timeout out of range is
 * refused with -EINVAL naming it. A request that times out fails, after its retries,
 * with -ETIMEDOUT and a message naming the URL, the byte range and the timeout. */
int rf_dataset_open_file_opts(struct rf_dataset *ds, const char *path,
			      const struct rf_dataset_open_opts *o);

/* 1 when rf_dataset_open_file reads path as a brace pattern of WebDataset shards: a
 * name ending in ".tar" (in any case) that holds a brace group and is not an existing file (a file
 * named so is opened as the one shard it is); else 0. For callers that stat a data
 * path before they open it: such a name is no file. path may be NULL (0). */
int rf_dataset_is_shard_pattern(const char *path);

/* Description of a generic file of fixed-size records. */
struct rf_raw_desc {
	uint64_t header_bytes;    /* skipped at the start of the file */
	uint64_t record_bytes;    /* stride, >= 1 */
	uint64_t payload_offset;  /* within the record */
	uint64_t payload_bytes;   /* 0: the whole record except the label */
	enum rf_ds_dtype dtype;      /* RF_DS_DT_NONE: u8 */
	unsigned ndim;            /* 0: shape = {payload_bytes / dtype size} */
	uint32_t shape[RF_DS_MAX_DIMS];
	enum rf_label_kind label_kind;
	uint64_t label_offset;    /* within the record */
	uint32_t num_classes;     /* 0: don't check (or infer with RF_DS_VERIFY) */
};

/* Validates that (file size - header_bytes) is a whole number (>= 1) of records,
 * else fails saying how many bytes are left over (unless RF_DS_ALLOW_TAIL), and
 * that payload and label fit in the record without overlapping. The label range is
 * checked only with RF_DS_VERIFY and num_classes > 0 (this reads the whole file). */
int rf_dataset_open_raw(struct rf_dataset *ds, const char *path,
			const struct rf_raw_desc *desc, unsigned flags);

/* Release what an open function acquired; the struct is zeroed. NULL is fine. */
void rf_dataset_close(struct rf_dataset *ds);

/* Re-read all data: .rfrec data CRC, labels in [0, num_classes) (all kinds). */
int rf_dataset_verify(const struct rf_dataset *ds);

/* ---- access -------------------------------------------------------------------- */

/* Copy record i's payload (payload_bytes into payload, if not NULL; a variable
 * dataset's record i: its own length, rf_dataset_payload_loc, at most max_record) and its label
 * (into *label, if not NULL; -1 when the dataset has none). pread for files,
 * memcpy for memory. Returns 0, -ERANGE for i >= count, -EIO on a short read, or
 * -errno; rf_last_error() then names the file (or URL), the record and the bytes.
 * Thread-safe. */
int rf_dataset_read_record(const struct rf_dataset *ds, uint64_t i, void *payload,
			   int32_t *label);

/* One line describing the dataset, for tools ("60000 records, u8 28x28, ...").
 * Returns snprintf's result. */
int rf_dataset_describe(const struct rf_dataset *ds, char *buf, size_t len);

/* 1 when records differ in length (.rfrec version 2): payload_bytes is 0, and
 * rf_dataset_payload_loc gives each record's own length (at most max_record). */
static inline int rf_dataset_variable(const struct rf_dataset *ds)
{
	return ds->src[RF_DS_SRC_PAYLOAD].stride == 0;
}

/* Where bytes [offset, offset + length) of the payload source (src[0]) lie in a file:
 * for a dataset of several shards (nparts >= 2), the shard whose part of the virtual
 * payload holds them whole, its index in ds->parts into *part and the byte offset in
 * its file into *real; for any other dataset *part 0 and *real = offset. A record's
 * payload (rf_dataset_payload_loc) always lies in one shard. Returns 0, or -ERANGE
 * when the bytes pass the end of src[0] or (several shards) do not lie inside one. */
int rf_dataset_part_of(const struct rf_dataset *ds, uint64_t offset, uint64_t length,
		       unsigned *part, uint64_t *real);

/* Entry i of a variable dataset's index (16 bytes, little-endian). */
#define RF_REC_INDEX_ENTRY 16u

/* Where record i's payload lies: its source (ds->src index), byte offset and length. */
static inline void rf_dataset_payload_loc(const struct rf_dataset *ds, uint64_t i,
					  struct rf_dataset_loc *loc)
{
	const struct rf_dataset_src *s = &ds->src[RF_DS_SRC_PAYLOAD];
	loc->src = RF_DS_SRC_PAYLOAD;
	if (rf_dataset_variable(ds)) {
		const uint8_t *e = ds->src[RF_DS_SRC_LABEL].mem + i * RF_REC_INDEX_ENTRY;
		uint64_t off = 0;
		uint32_t len = 0;
		for (int k = 7; k >= 0; k--)
			off = off << 8 | e[k];
		for (int k = 11; k >= 8; k--)
			len = len << 8 | e[k];
		loc->offset = off;
		loc->length = len;
		return;
	}
	loc->offset = s->data_offset + i * s->stride + ds->payload_offset;
	loc->length = ds->payload_bytes;
}

/* Returns 0, or -ENOENT when the dataset has no labels. */
static inline int rf_dataset_label_loc(const struct rf_dataset *ds, uint64_t i,
				       struct rf_dataset_loc *loc)
{
	const struct rf_dataset_src *s = &ds->src[ds->label_src];
	if (ds->label_kind == RF_LABEL_NONE)
		return -ENOENT;
	loc->src = ds->label_src;
	loc->offset = s->data_offset + i * s->stride + ds->label_offset;
	loc->length = ds->label_kind == RF_LABEL_I32 ? 4 : 1;
	return 0;
}

/* The bytes at loc when its source is in memory; NULL when it is on disk. */
static inline const void *rf_dataset_loc_mem(const struct rf_dataset *ds,
					     const struct rf_dataset_loc *loc)
{
	const uint8_t *m = ds->src[loc->src].mem;
	return m ? m + loc->offset : NULL;
}

/* Decode a label from the bytes a loc points at. */
static inline int32_t rf_dataset_decode_label(const struct rf_dataset *ds, const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	if (ds->label_kind == RF_LABEL_U8)
		return b[0];
	if (ds->label_kind == RF_LABEL_I32)
		return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 |
				 (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
	return -1;
}

/* The aligned span of source src that contains records [first, first+n) whole:
 * [*off, *off + *len) with off and len multiples of align (a power of two, e.g. the
 * O_DIRECT alignment). Record i lies at (data_offset + i*stride - *off) in it. Where
 * the span may pass the end of the file: dataloader/README.md, "Reading in spans". */
static inline void rf_dataset_span(const struct rf_dataset *ds, unsigned src,
				   uint64_t first, uint64_t n, uint64_t align,
				   uint64_t *off, uint64_t *len)
{
	const struct rf_dataset_src *s = &ds->src[src];
	uint64_t a = s->data_offset + first * s->stride;
	uint64_t b = a + n * s->stride;
	*off = a & ~(align - 1);
	*len = ((b + align - 1) & ~(align - 1)) - *off;
}

/* ---- .rfrec: the ringflow record file -----------------------------------------
 * A 4096-byte header, the records back to back, zeros up to a multiple of 4096.
 * The layout, field by field: dataloader/README.md, "The .rfrec format". */
#define RF_REC_MAGIC "RFRECv1"    /* 8 bytes with its NUL */
#define RF_REC_VERSION 1u         /* fixed-size records */
#define RF_REC_VERSION_VAR 2u     /* records of any length, with an index */
#define RF_REC_HEADER_BYTES 4096u
#define RF_REC_ALIGN 4096u

/* Record layout for the writer. stride 0: packed (payload at 0, label right after
 * it, stride = payload + label bytes; payload_offset and label_offset are then
 * computed). */
struct rf_rec_layout {
	uint64_t stride;
	uint64_t payload_offset;
	enum rf_ds_dtype dtype;
	unsigned ndim;
	uint32_t shape[RF_DS_MAX_DIMS];
	enum rf_label_kind label_kind;
	uint64_t label_offset;
	uint32_t num_classes;   /* > 0: append refuses labels outside [0, num_classes) */
	/* 1: a version 2 file of records of any length (encoded images), appended with
	 * rf_rec_writer_append_bytes; stride, payload_offset, dtype, ndim, shape and
	 * label_offset are then unused, and label_kind is RF_LABEL_NONE or RF_LABEL_I32. */
	int variable;
	uint32_t encoding;      /* variable: RF_REC_ENC_* */
	/* variable, optional: num_classes class names (label k is classes[k]), written
	 * into the file; each non-empty, without NUL, at most 4095 bytes. Borrowed for
	 * the open call only (copied). */
	const char *const *classes;
};

/* What the records of a variable .rfrec hold. */
enum { RF_REC_ENC_RAW = 0, RF_REC_ENC_IMAGE = 1 /* each an encoded JPEG or PNG */ };

struct rf_rec_writer;

enum {
	RF_REC_OVERWRITE = 1u << 0 /* finish may replace an existing file at path */
};

/* Start writing path. Records go to "<path>.tmp" (created, mode 0644, or truncated
 * once this writer holds its flock: one another writer of path is filling fails with
 * -EBUSY and is left alone; a symbolic link there, -ELOOP, is never written through);
 * rf_rec_writer_finish() writes the header, pads, fsyncs and renames it to path,
 * so path only ever appears complete. Without RF_REC_OVERWRITE, open fails with
 * -EEXIST if path exists, and finish refuses to replace one created meanwhile.
 * On success *out is owned by the caller until finish or abort frees it. */
int rf_rec_writer_open(struct rf_rec_writer **out, const char *path,
		       const struct rf_rec_layout *layout, unsigned flags);

/* Append one record: payload_bytes from payload (NULL: zeros) and label (ignored
 * for RF_LABEL_NONE). Buffered. -ERANGE for a label out of range (nothing is
 * written); an I/O error is reported here or by finish. */
int rf_rec_writer_append(struct rf_rec_writer *w, const void *payload, int32_t label);

/* Append one record of a variable file: len bytes (1 .. 2^32 - 1) from rec and its
 * label (-1 when the layout has none). -EINVAL when the layout is not variable (or
 * rf_rec_writer_append on a variable one), -ERANGE for a label out of range. */
int rf_rec_writer_append_bytes(struct rf_rec_writer *w, const void *rec, size_t len,
			       int32_t label);

/* The message of the writer's last failed append or flush, "" if none. Owned by w. */
const char *rf_rec_writer_last_error(const struct rf_rec_writer *w);

/* The tmp file's name ("<path>.tmp"), e.g. for a signal handler that unlinks it.
 * Owned by the writer. */
const char *rf_rec_writer_tmp_path(const struct rf_rec_writer *w);

/* Complete the file (>= 1 record required), fsync, rename into place, fsync the
 * directory. Frees w whatever the result; on failure the tmp file is removed and
 * path is untouched. */
int rf_rec_writer_finish(struct rf_rec_writer *w);

/* Drop everything written: close and unlink the tmp file, free w. NULL is fine. */
void rf_rec_writer_abort(struct rf_rec_writer *w);

#ifdef __cplusplus
}
#endif

#endif
