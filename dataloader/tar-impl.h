/* tar-impl.h -- POSIX tar archives (WebDataset shards) indexed for random access:
 * the members' names, data offsets and sizes listed by one streaming scan (tar.c),
 * grouped into WebDataset samples (tar.c), and kept in an index file beside the shard
 * so that a second open needs no scan (tar-index.c). Internal.
 *
 * What is read: ustar headers (the prefix field joined to the name), GNU long names
 * ('L'; 'K' long link names skipped), pax extended headers ('x': path= and size=
 * applied to the next member; 'g' global headers skipped; GNU.sparse.* marks the next
 * member sparse: not listed), old GNU sparse members ('S', with their extension
 * blocks: not listed), octal and base-256 (GNU binary) sizes. Listed: regular files
 * ('0', '\0', '7'; a '\0' member whose name ends in '/' is an old directory). Skipped:
 * directories, links, devices, FIFOs and unknown types (their data, if any, stepped
 * over). Every header's checksum is checked (the unsigned sum of its bytes with the
 * checksum field as spaces, or the signed sum some old tars wrote); the archive ends
 * at two zero blocks (what follows, the record's padding, is not read) or where the
 * file ends exactly at a block boundary. Failures are -EINVAL (or the read's -errno)
 * with "FILE: offset N: what was found: expected what" in rf_last_error(), N being the
 * byte offset of the header at fault. */
#ifndef RINGFLOW_TAR_IMPL_H
#define RINGFLOW_TAR_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define RF__TAR_BLOCK 512
#define RF__TAR_NAME_MAX 4095            /* bytes of a member's name, without its NUL */
#define RF__TAR_PAX_MAX (1u << 20)       /* bytes of one pax extended header's data */
#define RF__TAR_CLS_MAX 256              /* bytes of a WebDataset .cls member */
/* Members of at most this many bytes keep their data beside their name (the block
 * after a header is read with it) and in the index: a WebDataset label is read from
 * memory, and a second open of a shard reads no member of it. */
#define RF__TAR_SMALL_MAX 32

struct rf__tar_member {
	char *name;        /* NUL-terminated, non-empty, in rf__tar.names */
	uint64_t offset;   /* of the data: a multiple of 512 */
	uint64_t size;     /* bytes of data; offset + size <= the tar's size */
	/* its size bytes of data, in rf__tar.names, for a member of at most
	 * RF__TAR_SMALL_MAX bytes whose data followed its own header; else NULL */
	const uint8_t *small;
};

struct rf__tar {
	struct rf__tar_member *m;   /* (n) in archive order */
	size_t n;
	char *path;                 /* the tar's path (or the name given to _open_mem) */
	/* the tar's, for rf__tar_read_at */
	uint64_t size;              /* bytes of the tar */
	int fd;                     /* the open tar (valid when has_fd) */
	int has_fd;
	const uint8_t *mem;         /* _open_mem's buffer, borrowed (NULL for a file) */
	char *names;                /* the storage of m[].name (owned) */
	/* rf__tar_index_load_or_build's */
	int from_index;             /* 1: m[] came from an index file, no scan was made */
	char *index_path;           /* the index file read or written (NULL: none) */
};

/* List the regular files of the tar at path into *t (zeroed first). The file stays
 * open (t->fd) for rf__tar_read_at until rf__tar_close. 0, or -errno with the message
 * in rf_last_error() (t is then left zeroed). */
int rf__tar_open(struct rf__tar *t, const char *path);
/* The same over buf[0..n), which the caller keeps alive and unchanged until
 * rf__tar_close (rf__tar_read_at reads it); name is copied, used in messages. */
int rf__tar_open_mem(struct rf__tar *t, const uint8_t *buf, size_t n, const char *name);
/* Frees what t owns, closes its file, zeroes it; safe on a zeroed struct. */
void rf__tar_close(struct rf__tar *t);

struct stat;
/* rf__tar_open's two steps (tar-index.c opens without scanning when an index is
 * good): open path into a zeroed *t (path, fd, size; its fstat into *st), then list
 * the members of t's file or buffer. 0 or -errno with a message; on failure t holds
 * what rf__tar_close releases. */
int rf__tar_open_file(struct rf__tar *t, const char *path, struct stat *st);
int rf__tar_scan(struct rf__tar *t);

/* A read_at for rf__wds_samples: ctx is an open struct rf__tar; n bytes at off of its
 * file (pread) or its buffer (memcpy). 0, -EIO for bytes past the end, or -errno. */
int rf__tar_read_at(void *ctx, uint64_t off, void *buf, size_t n);

/* The parts of a member's name: its key is the name up to the first dot of its last
 * path component, its extension what follows that dot ("" when there is none):
 * "a/b.c.jpg" has key "a/b" (*key_len 3) and extension "c.jpg". */
const char *rf__wds_split(const char *name, size_t *key_len);

/* A WebDataset sample: its key, its image member's data and its label. */
struct rf__wds_sample {
	const char *key;             /* NUL-terminated, in the *out allocation */
	uint64_t img_off, img_size;  /* the image member's data in the tar */
	int32_t label;               /* the .cls member's value, -1 without one */
};

/* The samples of t: members grouped by key in the order of each key's first member.
 * A sample's image is its member with extension (case-insensitive) jpg, else jpeg,
 * else png, of 1 byte or more; its
 * label the ASCII decimal integer of its .cls member (surrounding whitespace allowed,
 * 0 .. 2^31-1, at most RF__TAR_CLS_MAX bytes), read with read_at(ctx, off, buf, n)
 * (0 or -errno; rf__tar_read_at with ctx = t for a tar of rf__tar_open*). A key's
 * members must be adjacent: a key seen again after another is -EINVAL naming both
 * offsets; so is an extension twice in one sample (case-insensitively: 'k.cls' twice,
 * or 'k.jpg' and 'k.JPG' -- which one is meant? WebDataset refuses a repeated name);
 * a bad .cls is -EINVAL naming the member and its offset. A sample without an image
 * is skipped and counted in *no_image (if not NULL), the first such sample's first
 * member in *first_no_image (if not NULL; t->n when none); one without .cls has
 * label -1. On success *out is one allocation holding the samples and their keys
 * (the caller frees it with free(); NULL when *n is 0). 0 or -errno with a message. */
int rf__wds_samples(const struct rf__tar *t, int (*read_at)(void *ctx, uint64_t off, void *buf,
		    size_t n), void *ctx, struct rf__wds_sample **out, size_t *n, size_t *no_image,
		    size_t *first_no_image);

/* The index file of a shard (tar-index.c), little-endian:
 *   0  magic "RFTARIX1"        8  u32 version (2)       12 u32 header bytes (64)
 *   16 u64 the shard's size    24 i64 its mtime (ns)    32 u64 its inode
 *   40 u64 member count        48 u64 body bytes        56 u32 CRC-32 of the body
 *   60 u32 CRC-32 of bytes 0..60
 * then the body, per member: u64 data offset, u64 size, u32 name bytes, u32 1 when
 * the member's data is kept (its small bytes, size <= RF__TAR_SMALL_MAX) or 0, the
 * name and a NUL, then the data kept. An index is used only when both CRCs are right,
 * the shard's size, mtime and inode are those recorded, and every member lies inside
 * the shard in order, with a valid name; anything else is a cache miss (the shard is
 * scanned and the index written again): version 1's, without the data, among them. */
#define RF__TAR_IDX_MAGIC "RFTARIX1"
#define RF__TAR_IDX_VERSION 2
#define RF__TAR_IDX_HDR 64

/* Open the shard at path into *t like rf__tar_open, its members taken from its index
 * when a valid one is found -- PATH.idx, else the one in the cache directory
 * ($XDG_CACHE_HOME/ringflow/, or ~/.cache/ringflow/, named by the shard's absolute
 * path with '%' written "%25" and '/' written "%2F", then ".idx") -- and t->from_index
 * set; otherwise the shard is scanned and its index written (atomically: a temporary
 * file renamed into place) beside it, or where that fails in the cache directory. An
 * index that cannot be written fails nothing (a warning goes to the log callback).
 * t->index_path names the index read or written. 0, or -errno as rf__tar_open. */
int rf__tar_index_load_or_build(struct rf__tar *t, const char *path);
/* The two halves of it, for a caller that checks the members first (wds.c: a file
 * that is no shard of images -- an empty file, a tar of text -- gets no index):
 * _load_or_scan opens and lists (from an index, else by a scan; no file written);
 * _save writes the index of a scanned t (nothing when it came from one; a failure
 * to write is a warning). Each 0, or -errno with the message in rf_last_error(). */
int rf__tar_index_load_or_scan(struct rf__tar *t, const char *path);
int rf__tar_index_save(struct rf__tar *t, const char *path);

/* The cache-directory name of the index of the shard at abs (an absolute path) into
 * buf: 0, or -ENAMETOOLONG / -ENOENT (no $XDG_CACHE_HOME nor $HOME). A name that would
 * be longer than 255 bytes keeps its last 200 and is prefixed by a hash of the whole. */
int rf__tar_index_cache_name(const char *abs, char *buf, size_t len);

/* Decode an index (buf[0..n), taken over: kept as t->names or freed) for a shard of
 * size bytes, mtime_ns and inode ino into t's members. 0, or -EINVAL with why in
 * why[0..whylen) (no rf_last_error()). t->m, n, names set; the rest left to the caller. */
int rf__tar_index_decode(struct rf__tar *t, uint8_t *buf, size_t n, uint64_t size,
			 int64_t mtime_ns, uint64_t ino, char *why, size_t whylen);
/* Encode t's members as the index of a shard of size, mtime_ns, ino: a malloc'd buffer
 * (*out, *out_n). 0 or -ENOMEM. */
int rf__tar_index_encode(const struct rf__tar *t, uint64_t size, int64_t mtime_ns,
			 uint64_t ino, uint8_t **out, size_t *out_n);

#endif
