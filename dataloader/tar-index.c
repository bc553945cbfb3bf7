/* tar-index.c -- a shard's member list kept in an index file, so that opening it again
 * needs no scan of its headers: PATH.idx beside the shard, or in the user's cache
 * directory where the shard's directory cannot take it. The layout and when an index
 * is trusted: tar-impl.h. An index is a cache: whatever is wrong with it (another
 * shard's, a stale one, a damaged one, one that cannot be written) costs a scan and
 * never an open. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset-impl.h"
#include "tar-impl.h"

enum {
	X_MAGIC = 0, X_VERSION = 8, X_HDR_BYTES = 12, X_SIZE = 16, X_MTIME = 24, X_INO = 32,
	X_COUNT = 40, X_BODY = 48, X_BODY_CRC = 56, X_HDR_CRC = 60,
};
#define ENTRY_HEAD 24   /* u64 offset, u64 size, u32 name bytes, u32 data kept (0/1);
			 * then the name, a NUL, and the data kept */

static uint32_t crc(const uint8_t *p, size_t n)
{
	return (uint32_t)crc32_z(crc32(0L, Z_NULL, 0), p, n);
}

int rf__tar_index_encode(const struct rf__tar *t, uint64_t size, int64_t mtime_ns,
			 uint64_t ino, uint8_t **out, size_t *out_n)
{
	size_t body = 0;
	uint8_t *b, *p;

	for (size_t i = 0; i < t->n; i++)
		body += ENTRY_HEAD + strlen(t->m[i].name) + 1 +
			(t->m[i].small ? (size_t)t->m[i].size : 0);
	if (!(b = malloc(RF__TAR_IDX_HDR + body)))
		return -ENOMEM;
	memset(b, 0, RF__TAR_IDX_HDR);
	memcpy(b + X_MAGIC, RF__TAR_IDX_MAGIC, 8);
	rf__put_le32(b + X_VERSION, RF__TAR_IDX_VERSION);
	rf__put_le32(b + X_HDR_BYTES, RF__TAR_IDX_HDR);
	rf__put_le64(b + X_SIZE, size);
	rf__put_le64(b + X_MTIME, (uint64_t)mtime_ns);
	rf__put_le64(b + X_INO, ino);
	rf__put_le64(b + X_COUNT, t->n);
	rf__put_le64(b + X_BODY, body);
	p = b + RF__TAR_IDX_HDR;
	for (size_t i = 0; i < t->n; i++) {
		size_t nl = strlen(t->m[i].name);
		rf__put_le64(p, t->m[i].offset);
		rf__put_le64(p + 8, t->m[i].size);
		rf__put_le32(p + 16, (uint32_t)nl);
		rf__put_le32(p + 20, t->m[i].small != NULL);
		memcpy(p + ENTRY_HEAD, t->m[i].name, nl + 1);
		p += ENTRY_HEAD + nl + 1;
		if (t->m[i].small) {
			memcpy(p, t->m[i].small, (size_t)t->m[i].size);
			p += t->m[i].size;
		}
	}
	rf__put_le32(b + X_BODY_CRC, crc(b + RF__TAR_IDX_HDR, body));
	rf__put_le32(b + X_HDR_CRC, crc(b, X_HDR_CRC));
	*out = b;
	*out_n = RF__TAR_IDX_HDR + body;
	return 0;
}

#define MISS(...) do { snprintf(why, whylen, __VA_ARGS__); goto miss; } while (0)

int rf__tar_index_decode(struct rf__tar *t, uint8_t *buf, size_t n, uint64_t size,
			 int64_t mtime_ns, uint64_t ino, char *why, size_t whylen)
{
	struct rf__tar_member *m = NULL;
	uint64_t count, body, end = 0;
	size_t p = RF__TAR_IDX_HDR;

	if (n < RF__TAR_IDX_HDR)
		MISS("%zu bytes, shorter than its %d-byte header", n, RF__TAR_IDX_HDR);
	if (memcmp(buf + X_MAGIC, RF__TAR_IDX_MAGIC, 8))
		MISS("no magic \"%s\"", RF__TAR_IDX_MAGIC);
	if (rf__le32(buf + X_HDR_CRC) != crc(buf, X_HDR_CRC))
		MISS("header CRC-32 mismatch (a damaged index)");
	if (rf__le32(buf + X_VERSION) != RF__TAR_IDX_VERSION ||
	    rf__le32(buf + X_HDR_BYTES) != RF__TAR_IDX_HDR)
		MISS("version %" PRIu32 " with a %" PRIu32 "-byte header, expected version %d",
		     rf__le32(buf + X_VERSION), rf__le32(buf + X_HDR_BYTES), RF__TAR_IDX_VERSION);
	if (rf__le64(buf + X_SIZE) != size || (int64_t)rf__le64(buf + X_MTIME) != mtime_ns ||
	    rf__le64(buf + X_INO) != ino)
		MISS("stale: made for a shard of another size, mtime or inode");
	count = rf__le64(buf + X_COUNT);
	body = rf__le64(buf + X_BODY);
	if (body != n - RF__TAR_IDX_HDR)
		MISS("a body of %" PRIu64 " bytes in a file of %zu, expected %zu", body, n,
		     n - RF__TAR_IDX_HDR);
	if (rf__le32(buf + X_BODY_CRC) != crc(buf + RF__TAR_IDX_HDR, (size_t)body))
		MISS("body CRC-32 mismatch (a damaged index)");
	if (count > body / (ENTRY_HEAD + 2))
		MISS("%" PRIu64 " members in a body of %" PRIu64 " bytes", count, body);
	if (count && !(m = malloc((size_t)count * sizeof(*m)))) {
		free(buf);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < count; i++) {
		uint64_t off, sz;
		uint32_t nl, kept;
		if (n - p < ENTRY_HEAD)
			MISS("member %" PRIu64 " cut short", i);
		off = rf__le64(buf + p);
		sz = rf__le64(buf + p + 8);
		nl = rf__le32(buf + p + 16);
		kept = rf__le32(buf + p + 20);
		p += ENTRY_HEAD;
		if (nl == 0 || nl > RF__TAR_NAME_MAX || n - p < (size_t)nl + 1 || buf[p + nl] ||
		    memchr(buf + p, 0, nl))
			MISS("member %" PRIu64 ": a bad name", i);
		/* its header (at least) before its data, the data after the last member's */
		if (off % RF__TAR_BLOCK || off < end + RF__TAR_BLOCK || off > size ||
		    sz > size - off)
			MISS("member %" PRIu64 ": data of %" PRIu64 " bytes at %" PRIu64 " out of "
			     "place in a shard of %" PRIu64, i, sz, off, size);
		end = off + ((sz + RF__TAR_BLOCK - 1) & ~(uint64_t)(RF__TAR_BLOCK - 1));
		m[i] = (struct rf__tar_member){ .name = (char *)buf + p, .offset = off, .size = sz };
		p += (size_t)nl + 1;
		if (kept > 1 || (kept && (sz > RF__TAR_SMALL_MAX || n - p < sz)))
			MISS("member %" PRIu64 ": data kept flag %" PRIu32 " for %" PRIu64 " bytes "
			     "(%zu left): expected 0, or 1 for at most %d bytes that follow", i, kept,
			     sz, n - p, RF__TAR_SMALL_MAX);
		if (kept) {
			m[i].small = buf + p;
			p += (size_t)sz;
		}
	}
	if (p != n)
		MISS("%zu bytes after the last member", n - p);
	t->m = m;
	t->n = (size_t)count;
	t->names = (char *)buf;
	return 0;
miss:
	free(m);
	free(buf);
	return -EINVAL;
}

/* The index at ipath for t's shard (st), if it is good. 0, or -errno (a miss). */
static int idx_load(struct rf__tar *t, const char *ipath, const struct stat *st,
		    int64_t mtime_ns)
{
	struct stat ist;
	char why[200];
	uint8_t *buf;
	int not_reg, fd, ret;

	if ((fd = rf__open_regular(ipath, O_RDONLY, 0, &ist, &not_reg)) < 0)
		return fd;
	/* an entry is never larger than what it costs in the shard (a 512-byte header,
	 * and a long name's records where the header cannot hold it) */
	if ((uint64_t)ist.st_size > (uint64_t)st->st_size + RF__TAR_IDX_HDR) {
		close(fd);
		rf__log(RF_LOG_INFO, "%s: index %s: larger than its shard: scanning the shard",
			t->path, ipath);
		return -EINVAL;
	}
	if (!(buf = malloc((size_t)ist.st_size + 1))) {
		close(fd);
		return -ENOMEM;
	}
	ret = rf__pread_full(fd, buf, (size_t)ist.st_size, 0, NULL);
	close(fd);
	if (ret) {
		free(buf);
		return ret;
	}
	ret = rf__tar_index_decode(t, buf, (size_t)ist.st_size, (uint64_t)st->st_size, mtime_ns,
				   (uint64_t)st->st_ino, why, sizeof(why));
	if (ret == -EINVAL)
		rf__log(RF_LOG_INFO, "%s: index %s: %s: scanning the shard", t->path, ipath, why);
	return ret;
}

/* dir and its parents made, as mkdir -p does (mode for those made). 0 or -errno. */
static int mkdirs(char *dir, mode_t mode)
{
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int e = mkdir(dir, mode) < 0 && errno != EEXIST ? -errno : 0;
		*p = '/';
		if (e)
			return e;
	}
	return mkdir(dir, mode) < 0 && errno != EEXIST ? -errno : 0;
}

/* The cache directory: $XDG_CACHE_HOME/ringflow (an absolute one), else
 * $HOME/.cache/ringflow. 0, -ENOENT or -ENAMETOOLONG. */
static int cache_dir(char *buf, size_t len)
{
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	int w;

	if (x && x[0] == '/')
		w = snprintf(buf, len, "%s/ringflow", x);
	else if (h && h[0] == '/')
		w = snprintf(buf, len, "%s/.cache/ringflow", h);
	else
		return -ENOENT;
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

int rf__tar_index_cache_name(const char *abs, char *buf, size_t len)
{
	char esc[3 * PATH_MAX + 1];
	size_t e = 0, dl;
	uint64_t h = 1469598103934665603ull;
	int ret, w;

	if ((ret = cache_dir(buf, len)))
		return ret;
	for (const char *s = abs; *s; s++) {
		if (e + 4 > sizeof(esc))
			return -ENAMETOOLONG;
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
		if (*s == '/' || *s == '%') {
			memcpy(esc + e, *s == '/' ? "%2F" : "%25", 3);
			e += 3;
		} else {
			esc[e++] = *s;
		}
	}
	esc[e] = 0;
	dl = strlen(buf);
	if (e + 4 <= 255)
		w = snprintf(buf + dl, len - dl, "/%s.idx", esc);
	else
		w = snprintf(buf + dl, len - dl, "/%016" PRIx64 "-%s.idx", h, esc + e - 200);
	return w < 0 || (size_t)w >= len - dl ? -ENAMETOOLONG : 0;
}

/* Write the index buf[0..n) to ipath through a temporary name of this process's. */
static int idx_write(const char *ipath, const uint8_t *buf, size_t n, const char **step)
{
	static atomic_uint seq;
	char tmp[PATH_MAX + 64];
	int w = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%u", ipath, (long)getpid(),
			 atomic_fetch_add(&seq, 1));

	*step = "name";
	if (w < 0 || (size_t)w >= sizeof(tmp))
		return -ENAMETOOLONG;
	return rf__write_whole(ipath, tmp, buf, n, 0, step);
}

/* PATH.idx, and the cache directory's name for it (NULL where it has none). */
static void idx_names(const char *path, char *beside, char *cached, size_t len,
		      const char *cand[2])
{
	char *abs = realpath(path, NULL);

	cand[0] = snprintf(beside, len, "%s.idx", path) >= (int)len ? NULL : beside;
	cand[1] = abs && rf__tar_index_cache_name(abs, cached, len) == 0 ? cached : NULL;
	free(abs);
}

int rf__tar_index_load_or_scan(struct rf__tar *t, const char *path)
{
	char beside[PATH_MAX + 8], cached[PATH_MAX + 8];
	const char *cand[2];
	struct stat st;
	int ret;

	if ((ret = rf__tar_open_file(t, path, &st)))
		return ret;
	int64_t mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	idx_names(path, beside, cached, sizeof(beside), cand);
	for (int i = 0; i < 2; i++) {
		if (!cand[i] || (ret = idx_load(t, cand[i], &st, mtime_ns)) == -ENOENT)
			continue;
		if (ret == -ENOMEM)
			goto oom;
		if (ret == 0) {
			t->from_index = 1;
			if (!(t->index_path = strdup(cand[i])))
				goto oom;
			return 0;
		}
	}
	if ((ret = rf__tar_scan(t)))
		goto fail;
	return 0;
oom:
	ret = rf__fail(-ENOMEM, "%s: out of memory", path);
fail:
	rf__tar_close(t);
	memset(t, 0, sizeof(*t));
	return ret;
}

int rf__tar_index_save(struct rf__tar *t, const char *path)
{
	char beside[PATH_MAX + 8], cached[PATH_MAX + 8];
	const char *cand[2], *step = "", *wrote = NULL;
	struct stat st;
	uint8_t *buf = NULL;
	size_t n = 0;
	int e1 = 0, e2 = -ENOENT;

	if (t->from_index || !t->has_fd)
		return 0;                   /* read from one: nothing to write */
	if (fstat(t->fd, &st) < 0)
		return 0;                   /* a cache: the next open scans again */
	int64_t mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	idx_names(path, beside, cached, sizeof(beside), cand);
	if (rf__tar_index_encode(t, t->size, mtime_ns, (uint64_t)st.st_ino, &buf, &n))
		return rf__fail(-ENOMEM, "%s: out of memory", path);
	if (cand[0] && !(e1 = idx_write(beside, buf, n, &step)))
		wrote = beside;
	else if (cand[1]) {
		char dir[PATH_MAX + 8];
		snprintf(dir, sizeof(dir), "%s", cached);
		*strrchr(dir, '/') = 0;
		step = "mkdir";
		if (!(e2 = mkdirs(dir, 0700)) && !(e2 = idx_write(cached, buf, n, &step)))
			wrote = cached;
	}
	free(buf);
	if (!wrote)
		rf__log(RF_LOG_WARN, "%s: no index written (beside it: %s; in the cache "
			"directory: %s at %s): the next open scans it again", path,
			strerror(e1 ? -e1 : ENAMETOOLONG), cand[1] ? strerror(-e2) : "none",
			cand[1] ? step : "-");
	if (wrote && !(t->index_path = strdup(wrote)))
		return rf__fail(-ENOMEM, "%s: out of memory", path);
	return 0;
}

int rf__tar_index_load_or_build(struct rf__tar *t, const char *path)
{
	int ret = rf__tar_index_load_or_scan(t, path);

	if (!ret && (ret = rf__tar_index_save(t, path)) < 0) {
		rf__tar_close(t);
		memset(t, 0, sizeof(*t));
	}
	return ret;
}
