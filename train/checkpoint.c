/* checkpoint.c -- rf_ckpt_save, rf_ckpt_load and rf_ckpt_probe (format: checkpoint.h,
 * its encoding and checks: ckpt-format.c).
 *
 * Save: validate, lay out the file, write the header and every tensor with the ring's
 * transfer pump (1 MiB chunks, 32 in flight), then the trailer (the commit marker),
 * fsync, publish over PATH, fsync the directory. The file is written unnamed
 * (O_TMPFILE in PATH's directory) and only then linked as PATH.tmp and renamed over
 * PATH, with the catchable signals blocked for those two calls: a process killed at
 * any other instant leaves the previous PATH and nothing else (the unnamed file goes
 * with its last descriptor). Where the filesystem has no O_TMPFILE, PATH.tmp is
 * written by name, as before (a kill mid-write can then leave it; the next save
 * replaces it). Load: read and check
 * the header, match the caller's tensors by name, read the data straight into the
 * caller's buffers and check each tensor's CRC. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt-impl.h"
#include "rf-internal.h"

/* ---- arguments ------------------------------------------------------------------ */

static int rf__check_blobs_in(const char *path, const struct rf_ckpt_blob *b, unsigned n,
			      struct rf__names *seen)
{
	for (unsigned i = 0; i < n; i++) {
		char d1[16], s1[96];
		if (!b[i].name || !b[i].name[0] || strlen(b[i].name) > RF_CKPT_NAME_MAX)
			return rf__fail(-EINVAL, "%s: tensor %u: name %s (1 to %d bytes)",
					path, i, b[i].name ? "empty or too long" : "is NULL", RF_CKPT_NAME_MAX);
		int ok;
		uint64_t want = rf__ck_expected_bytes(b[i].dtype, b[i].ndim, b[i].shape, &ok);
		if (!ok) {
			int known;
			(void)rf__ck_expected_bytes(b[i].dtype, 0, NULL, &known);
			return rf__fail(-EINVAL, "%s: tensor %s: %s %s: %s", path, b[i].name,
					rf__ck_dtype_name(b[i].dtype, d1, sizeof(d1)),
					rf__ck_shape_str(b[i].ndim, b[i].shape, s1, sizeof(s1)),
					!known ? "an unknown dtype" : b[i].ndim > 4 ?
					"more than 4 dimensions" : "its byte count overflows 64 bits");
		}
		if (want != b[i].nbytes)
			return rf__fail(-EINVAL,
					"%s: tensor %s: nbytes %" PRIu64 ", but %s %s is %" PRIu64 " bytes",
					path, b[i].name, b[i].nbytes, rf__ck_dtype_name(b[i].dtype, d1, sizeof(d1)),
					rf__ck_shape_str(b[i].ndim, b[i].shape, s1, sizeof(s1)), want);
		if (want && !b[i].data)
			return rf__fail(-EINVAL, "%s: tensor %s: data is NULL", path, b[i].name);
		if (rf__names_put(seen, b[i].name, i) >= 0)
			return rf__fail(-EINVAL, "%s: tensor name %s given twice", path, b[i].name);
	}
	return 0;
}

static int rf__check_blobs(const char *path, const struct rf_ckpt_blob *b, unsigned n, int load)
{
	struct rf__names seen;
	int ret;

	(void)load;
	if (n && !b)
		return rf__fail(-EINVAL, "%s: %u tensors but no blob array", path, n);
	if (n > RF_CKPT_MAX_TENSORS)
		return rf__fail(-EINVAL, "%s: %u tensors, at most %u", path, n,
				RF_CKPT_MAX_TENSORS);
	if (rf__names_init(&seen, n) < 0)
		return rf__fail(-ENOMEM, "%s: out of memory", path);
	ret = rf__check_blobs_in(path, b, n, &seen);
	rf__names_free(&seen);
	return ret;
}

static int rf__true(void *arg)
{
	return 1;
}

static int rf__ring_begin(struct rf_ring **ring, int *own, const char *path)
{
	*own = 0;
	if (*ring) {
		/* The ring must be turnable from here: not inside a callback or another
		 * rf_ring_run*. rf_ring_run_until refuses those before looking at its
		 * predicate, so a predicate that is already true makes a free probe. This
		 * keeps I/O from ever being queued that could not be waited for. */
		int r = rf_ring_in_callback(*ring) ? -EDEADLK : rf_ring_run_until(*ring, rf__true,
										  NULL, 0);
		if (r == -EPERM)        /* another thread's ring: said by the ring */
			return rf__fail_under(r, "%s: checkpoint I/O", path);
		if (r < 0)
			return rf__fail(-EDEADLK,
					"%s: checkpoint I/O called from inside a ring callback "
					"(the ring cannot be turned from there)", path);
		return 0;
	}
	int ret = rf_ring_create(ring, NULL);
	if (ret < 0)
		return rf__fail_under(ret, "%s: cannot create a ring", path);
	*own = 1;
	return 0;
}

/* ---- save ------------------------------------------------------------------------ */

/* The file being written: header bytes, segments to write, the trailer. */
struct rf__image {
	uint8_t *hb;             /* the header, hsize bytes */
	uint64_t hsize;
	struct rf_io_seg *segs;  /* header, then each non-empty tensor */
	unsigned nsegs;
	uint64_t trailer_off, file_size;
	uint8_t tr[RF__CK_TRAILER];
};

/* Lay out the data and fill the table; returns the end of the last tensor's data. */
static uint64_t rf__layout(struct rf__image *im, const struct rf_ckpt_blob *b, unsigned n)
{
	uint64_t off = rf__align(im->hsize, RF__CK_ALIGN), end = im->hsize;
	im->nsegs = 0;
	im->segs[im->nsegs++] = (struct rf_io_seg){ im->hb, im->hsize, 0 };
	for (unsigned i = 0; i < n; i++) {
		uint8_t *p = im->hb + RF__CK_FIXED + (uint64_t)RF__CK_ENTRY * i;
		memcpy(p, b[i].name, strlen(b[i].name));
		rf__put32(p + 64, b[i].dtype);
		rf__put32(p + 68, b[i].ndim);
		for (uint32_t d = 0; d < b[i].ndim; d++)
			rf__put64(p + 72 + 8 * d, b[i].shape[d]);
		rf__put64(p + 104, off);
		rf__put64(p + 112, b[i].nbytes);
		rf__put32(p + 120, rf__crc(b[i].data, b[i].nbytes));
		if (b[i].nbytes)
			im->segs[im->nsegs++] = (struct rf_io_seg){ b[i].data, b[i].nbytes, off };
		end = off + b[i].nbytes;
		off = rf__align(end, RF__CK_ALIGN);
	}
	return end;
}

/* The fixed header fields, its CRC, and the trailer that commits them. */
static void rf__seal(struct rf__image *im, const struct rf_ckpt_meta *meta, unsigned n,
		     uint64_t end)
{
	uint8_t *hb = im->hb, *tr = im->tr;
	im->trailer_off = rf__align(end, 8);
	im->file_size = im->trailer_off + RF__CK_TRAILER;
	memcpy(hb, RF__CK_MAGIC, 8);
	rf__put32(hb + 8, RF_CKPT_VERSION);
	rf__put32(hb + 12, (uint32_t)im->hsize);
	rf__put64(hb + 16, im->file_size);
	rf__put32(hb + 24, n);
	rf__ck_meta_encode(hb, meta);
	uint32_t hcrc = rf__crc(hb, im->hsize - 8);
	rf__put32(hb + im->hsize - 8, hcrc);
	memset(tr, 0, RF__CK_TRAILER);
	memcpy(tr, RF__CK_END_MAGIC, 8);
	rf__put64(tr + 8, im->file_size);
	rf__put32(tr + 16, hcrc);
	rf__put32(tr + 28, rf__crc(tr, 28));
}

/* Something other than a regular file at PATH.tmp (a FIFO, a directory) is the user's:
 * left alone, and the save refused with code. */
static int rf__tmp_not_regular(int code, const char *path, const char *tmp, mode_t mode)
{
	return rf__fail(code, "%s: cannot create %s: it is %s, expected a regular file or "
			"nothing; previous checkpoint left as it was", path, tmp, rf__ftype(mode));
}

/* Open PATH.tmp for writing: without blocking (a FIFO there would block open()
 * until a reader came), and only a regular file; one that is not is left alone.
 * Returns the fd (blocking again) or -errno; *created says whether tmp is ours. */
static int rf__open_tmp(const char *path, const char *tmp, int *created)
{
	struct stat st;
	int not_reg, fd;

	*created = 0;
	fd = rf__open_regular(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644, &st, &not_reg);
	if (fd < 0 && not_reg)
		return rf__tmp_not_regular(fd, path, tmp, st.st_mode);
	if (fd < 0)
		return rf__fail(fd, "%s: cannot create %s: %s", path, tmp, strerror(-fd));
	*created = 1;
	return fd;
}

/* Header and data, then (only once they are written) the trailer, then fsync. */
static int rf__write_image(struct rf_ring *ring, const char *path, const char *tmp, int fd,
			   const struct rf__image *im)
{
	uint64_t eoff = 0;
	int64_t eres = 0;
	int ret = rf__ck_transfer(ring, fd, RF_XFER_WRITE, im->segs, im->nsegs, &eoff, &eres);
	if (ret == 0) {
		struct rf_io_seg ts = { (void *)im->tr, RF__CK_TRAILER, im->trailer_off };
		ret = rf__ck_transfer(ring, fd, RF_XFER_WRITE, &ts, 1, &eoff, &eres);
	}
	if (ret < 0)
		return rf__fail(ret, "%s: writing %s at offset %" PRIu64 " (of %" PRIu64
				" bytes): %s; previous checkpoint left as it was", path, tmp, eoff,
				im->file_size, eres >= 0 ? "short write" : strerror(-ret));
	ret = rf_ring_fsync_wait(ring, fd, 0);
	if (ret < 0)
		return rf__fail(ret, "%s: fsync of %s: %s; previous checkpoint left as it was",
				path, tmp, strerror(-ret));
	return 0;
}

/* PATH's directory, for O_TMPFILE ("." for a bare name). Caller frees. */
static char *rf__dir_of(const char *path)
{
	char *dir = strdup(path), *slash;

	if (!dir)
		return NULL;
	slash = strrchr(dir, '/');
	if (!slash) {
		free(dir);
		return strdup(".");
	}
	if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
	return dir;
}

/* An unnamed regular file in PATH's directory (O_TMPFILE), or -errno: -EOPNOTSUPP (or
 * -EISDIR, -EINVAL from older kernels) where the filesystem cannot make one. */
static int rf__open_anon(const char *path)
{
	const char *no = getenv("RF_CKPT_NO_TMPFILE"); /* tests: the named path */
	char *dir;
	int fd;

	if (no && *no && *no != '0')
		return -EOPNOTSUPP;
	if (!(dir = rf__dir_of(path)))
		return -ENOMEM;
	fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
	fd = fd < 0 ? -errno : fd;
	free(dir);
	return fd;
}

/* Name the unnamed file fd as tmp, then rename tmp over path: two calls between which
 * SIGINT, SIGTERM, SIGHUP and the rest wait (only SIGKILL could come between them). */
static int rf__publish_anon(int fd, const char *tmp, const char *path)
{
	char proc[64];
	sigset_t all, old;
	int ret = 0;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	(void)unlink(tmp); /* one an earlier kill -9 left (linkat will not replace) */
	if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) < 0)
		ret = -errno;
	else if (rename(tmp, path) < 0) {
		ret = -errno;
		unlink(tmp);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

/* Write the checkpoint completely: into an unnamed file (*anon_fd, open, for
 * rf__publish_anon) where the filesystem allows, else into PATH.tmp (removed again
 * on error; *anon_fd -1). */
static int rf__save(struct rf_ring *ring, const char *path, const char *tmp,
		    const struct rf_ckpt_meta *meta, const struct rf_ckpt_blob *b, unsigned n,
		    int *anon_fd)
{
	struct rf__image im = { .hsize = rf__header_size(n) };
	int ret, fd = -1, created = 0;

	*anon_fd = -1;
	im.hb = calloc(1, im.hsize);
	im.segs = calloc((size_t)n + 1, sizeof(*im.segs));
	if (!im.hb || !im.segs) {
		ret = rf__fail(-ENOMEM, "%s: out of memory", path);
		goto out;
	}
	rf__seal(&im, meta, n, rf__layout(&im, b, n));
	/* PATH.tmp is where the file is named before the rename: something other than a
	 * regular file there (a FIFO, a directory) is the user's, left alone and refused */
	struct stat st;
	if (stat(tmp, &st) == 0 && !S_ISREG(st.st_mode)) {
		ret = rf__tmp_not_regular(S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL, path, tmp,
					  st.st_mode);
		goto out;
	}
	fd = rf__open_anon(path);
	if (fd < 0 && fd != -EOPNOTSUPP && fd != -EISDIR && fd != -EINVAL) {
		ret = rf__fail(fd, "%s: cannot create a file in its directory: %s", path,
			       strerror(-fd));
		goto out;
	}
	if (fd >= 0) {
		ret = rf__write_image(ring, path, "the unnamed file", fd, &im);
		if (ret == 0) {
			*anon_fd = fd;
			fd = -1;
		}
		goto out;
	}
	ret = fd = rf__open_tmp(path, tmp, &created);
	if (fd < 0)
		goto out;
	ret = rf__write_image(ring, path, tmp, fd, &im);
	if (ret < 0)
		goto out;
	ret = close(fd) < 0 ? -errno : 0;
	fd = -1;
	if (ret < 0)
		rf__fail(ret, "%s: close of %s: %s; previous checkpoint left as it was",
			 path, tmp, strerror(-ret));
out:
	if (fd >= 0)
		close(fd);
	if (ret < 0 && created)
		unlink(tmp);
	free(im.hb);
	free(im.segs);
	return ret;
}

static int rf__fsync_dir(struct rf_ring *ring, const char *path)
{
	char *dir = rf__dir_of(path);
	if (!dir)
		return -ENOMEM;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret = dfd < 0 ? -errno : rf_ring_fsync_wait(ring, dfd, 0);
	if (dfd >= 0)
		close(dfd);
	free(dir);
	return ret;
}

int rf_ckpt_save(struct rf_ring *ring, const char *path, const struct rf_ckpt_meta *meta,
		 const struct rf_ckpt_blob *blobs, unsigned n)
{
	int published;

	return rf__ckpt_save(ring, path, meta, blobs, n, &published);
}

int rf__ckpt_save(struct rf_ring *ring, const char *path, const struct rf_ckpt_meta *meta,
		  const struct rf_ckpt_blob *blobs, unsigned n, int *published)
{
	*published = 0;
	if (!path || !*path || !meta)
		return rf__fail(-EINVAL, "checkpoint save: path and meta are required");
	if (!memchr(meta->model, 0, sizeof(meta->model)) || !meta->model[0])
		return rf__fail(-EINVAL, "%s: model name empty or longer than %d bytes",
				path, RF_CKPT_MODEL_MAX);
	if (meta->extra_len > RF_CKPT_EXTRA_MAX)
		return rf__fail(-EINVAL, "%s: extra_len %" PRIu32 ", at most %d", path,
				meta->extra_len, RF_CKPT_EXTRA_MAX);
	int ret = rf__check_blobs(path, blobs, n, 0);
	if (ret < 0)
		return ret;
	/* The rename would replace whatever is at path: a FIFO, a device node (as root,
	 * /dev/null itself) or an empty directory. Only a regular file is replaced. */
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return rf__fail(S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
				"%s: is %s, expected a regular file (or a new file's name); nothing "
				"written", path, rf__ftype(st.st_mode));
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 5);
	if (!tmp)
		return rf__fail(-ENOMEM, "%s: out of memory", path);
	memcpy(tmp, path, plen);
	memcpy(tmp + plen, ".tmp", 5);
	int own;
	ret = rf__ring_begin(&ring, &own, path);
	if (ret < 0) {
		free(tmp);
		return ret;
	}
	int afd;
	/* the previous file at path is untouched until the file is named over it */
	ret = rf__save(ring, path, tmp, meta, blobs, n, &afd); /* removes tmp on error */
	if (ret == 0 && afd >= 0) {
		ret = rf__publish_anon(afd, tmp, path);
		if (close(afd) < 0 && ret == 0)
			ret = -errno;
		if (ret < 0)
			rf__fail(ret, "%s: publishing the written file (link as %s, rename): %s; "
				 "previous checkpoint left as it was", path, tmp, strerror(-ret));
	} else if (ret == 0 && rename(tmp, path) < 0) {
		ret = -errno;
		rf__fail(ret, "%s: rename from %s: %s; previous checkpoint left as it was",
			 path, tmp, strerror(-ret));
		unlink(tmp);
	}
	*published = ret == 0;  /* the new file is at path (its directory's fsync next) */
	if (ret == 0 && (ret = rf__fsync_dir(ring, path)) < 0)
		rf__fail(ret, "%s: written and renamed, but fsync of its directory failed: %s",
			 path, strerror(-ret));
	if (own)
		rf_ring_destroy(ring);
	free(tmp);
	return ret;
}

/* ---- load --------------------------------------------------------------------------- */

/* Match the caller's blobs to the file's table: which[i] is blob i's entry. Every
 * file tensor must be asked for, with the same dtype and shape. ix: the table's names. */
static int rf__match_in(const char *path, struct rf__hdr *h, const struct rf_ckpt_blob *b,
			unsigned n, int *which, const struct rf__names *ix)
{
	char d1[16], d2[16], s1[96], s2[96];
	for (unsigned i = 0; i < n; i++) {
		int64_t j = rf__names_find(ix, b[i].name);
		if (j < 0)
			return rf__fail(-ESTALE,
					"%s: tensor %s: missing from the checkpoint (it has %" PRIu32
					" tensors, %u expected)", path, b[i].name, h->ntensors, n);
		struct rf__entry *e = &h->e[j];
		if (e->dtype != b[i].dtype)
			return rf__fail(-ESTALE, "%s: tensor %s: dtype %s in file, expected %s",
					path, b[i].name, rf__ck_dtype_name(e->dtype, d1, sizeof(d1)),
					rf__ck_dtype_name(b[i].dtype, d2, sizeof(d2)));
		int same = e->ndim == b[i].ndim;
		for (uint32_t d = 0; same && d < e->ndim; d++)
			same = e->shape[d] == b[i].shape[d];
		if (!same)
			return rf__fail(-ESTALE, "%s: tensor %s: shape %s in file, expected %s",
					path, b[i].name, rf__ck_shape_str(e->ndim, e->shape, s1, sizeof(s1)),
					rf__ck_shape_str(b[i].ndim, b[i].shape, s2, sizeof(s2)));
		e->used = 1;
		which[i] = (int)j;
	}
	for (uint32_t j = 0; j < h->ntensors; j++)
		if (!h->e[j].used)
			return rf__fail(-ESTALE,
					"%s: checkpoint has tensor %s (%s %s) that was not expected (%" PRIu32
					" tensors in file, %u expected)", path, h->e[j].name,
					rf__ck_dtype_name(h->e[j].dtype, d1, sizeof(d1)),
					rf__ck_shape_str(h->e[j].ndim, h->e[j].shape, s1, sizeof(s1)),
					h->ntensors, n);
	return 0;
}

static int rf__match_blobs(const char *path, struct rf__hdr *h, const struct rf_ckpt_blob *b,
			   unsigned n, int *which)
{
	struct rf__names ix;
	int ret;

	if (rf__names_init(&ix, h->ntensors) < 0)
		return rf__fail(-ENOMEM, "%s: out of memory", path);
	for (uint32_t j = 0; j < h->ntensors; j++)
		rf__names_put(&ix, h->e[j].name, j);   /* unique: the header read checked */
	ret = rf__match_in(path, h, b, n, which, &ix);
	rf__names_free(&ix);
	return ret;
}

/* The data, straight into the caller's buffers. */
static int rf__read_data(const struct rf__src *src, const char *path, const struct rf__hdr *h,
			 struct rf_ckpt_blob *b, unsigned n, const int *which)
{
	struct rf_io_seg *segs = calloc(n ? n : 1, sizeof(*segs));
	if (!segs)
		return rf__fail(-ENOMEM, "%s: out of memory", path);
	unsigned ns = 0;
	for (unsigned i = 0; i < n; i++)
		if (b[i].nbytes)
			segs[ns++] = (struct rf_io_seg){ b[i].data, b[i].nbytes, h->e[which[i]].offset };
	uint64_t eoff = 0;
	int64_t eres = 0;
	int ret = rf__ck_transfer(src->ring, src->fd, RF_XFER_READ, segs, ns, &eoff, &eres);
	free(segs);
	if (ret == -ENODATA)
		return rf__fail(ret, "%s: truncated checkpoint: end of file at offset %" PRIu64
				" while reading tensor data (file changed while loading?)", path, eoff);
	if (ret < 0)
		return rf__fail(ret, "%s: reading tensor data at offset %" PRIu64 ": %s", path,
				eoff, strerror(-ret));
	return 0;
}

static int rf__check_crcs(const char *path, const struct rf__hdr *h,
			  const struct rf_ckpt_blob *b, unsigned n, const int *which)
{
	for (unsigned i = 0; i < n; i++) {
		const struct rf__entry *e = &h->e[which[i]];
		uint32_t c = rf__crc(b[i].data, b[i].nbytes);
		if (c != e->crc)
			return rf__fail(-EBADMSG,
					"%s: corrupt checkpoint: tensor %s (offset %" PRIu64 ", %" PRIu64
					" bytes): CRC32 0x%08" PRIx32 " computed, header says 0x%08" PRIx32,
					path, b[i].name, e->offset, e->nbytes, c, e->crc);
	}
	return 0;
}

static int rf__load(const struct rf__src *src, const char *path, uint64_t fsize,
		    struct rf_ckpt_meta *meta, struct rf_ckpt_blob *b, unsigned n)
{
	struct rf__hdr h;
	int *which = NULL;
	int ret = rf__ck_read_header(src, path, fsize, &h);
	if (ret < 0)
		return ret;
	if (meta->model[0] && strncmp(meta->model, h.meta.model, sizeof(meta->model)) != 0) {
		char m[40];
		snprintf(m, sizeof(m), "%.31s", meta->model);
		ret = rf__fail(-ESTALE, "%s: checkpoint is for model '%s', expected '%s'",
			       path, h.meta.model, m);
		goto out;
	}
	which = calloc(n ? n : 1, sizeof(*which));
	if (!which) {
		ret = rf__fail(-ENOMEM, "%s: out of memory", path);
		goto out;
	}
	ret = rf__match_blobs(path, &h, b, n, which);
	if (ret == 0)
		ret = rf__read_data(src, path, &h, b, n, which);
	if (ret == 0)
		ret = rf__check_crcs(path, &h, b, n, which);
	if (ret == 0)
		*meta = h.meta;
out:
	free(h.e);
	free(which);
	return ret;
}

static int rf__open_ckpt(const char *path, uint64_t *size)
{
	/* never blocking: open() of a FIFO would wait for a writer */
	struct stat st;
	int not_reg, fd = rf__open_regular(path, O_RDONLY, 0, &st, &not_reg);
	if (fd < 0 && not_reg)
		return rf__fail(-ENOEXEC, "%s: not a ringflow checkpoint: not a regular "
				"file (%s)", path, rf__ftype(st.st_mode));
	if (fd == -ENOENT)
		return rf__fail(-ENOENT, "%s: no such checkpoint file", path);
	if (fd < 0)
		return rf__fail(fd, "%s: cannot open checkpoint: %s", path, strerror(-fd));
	*size = (uint64_t)st.st_size;
	return fd;
}

int rf_ckpt_load(struct rf_ring *ring, const char *path, struct rf_ckpt_meta *meta_inout,
		 struct rf_ckpt_blob *blobs, unsigned n)
{
	if (!path || !*path || !meta_inout)
		return rf__fail(-EINVAL, "checkpoint load: path and meta are required");
	if (!memchr(meta_inout->model, 0, sizeof(meta_inout->model)))
		return rf__fail(-EINVAL, "%s: expected model name longer than %d bytes",
				path, RF_CKPT_MODEL_MAX);
	int ret = rf__check_blobs(path, blobs, n, 1);
	if (ret < 0)
		return ret;
	int own;
	ret = rf__ring_begin(&ring, &own, path);
	if (ret < 0)
		return ret;
	uint64_t size;
	int fd = rf__open_ckpt(path, &size);
	if (fd >= 0) {
		struct rf__src src = { ring, fd };
		ret = rf__load(&src, path, size, meta_inout, blobs, n);
		close(fd);
	} else {
		ret = fd;
	}
	if (own)
		rf_ring_destroy(ring);
	return ret;
}

int rf_ckpt_probe(const char *path, struct rf_ckpt_meta *meta)
{
	if (!path || !*path || !meta)
		return rf__fail(-EINVAL, "checkpoint probe: path and meta are required");
	uint64_t size;
	int fd = rf__open_ckpt(path, &size);
	if (fd < 0)
		return fd;
	struct rf__src src = { NULL, fd };
	struct rf__hdr h;
	int ret = rf__ck_read_header(&src, path, size, &h);
	close(fd);
	if (ret < 0)
		return ret;
	free(h.e);
	*meta = h.meta;
	return (int)h.ntensors;
}

