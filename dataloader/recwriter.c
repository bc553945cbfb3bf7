/* recwriter.c -- writing a ringflow record file (.rfrec): records stream to
 * "<path>.tmp"; finish writes the header, pads, fsyncs and renames it into place. */
#include <errno.h>
#include <sys/file.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "recfile-impl.h"

/* The header of ds into h; a variable file's sections lie where rf__rec_sections
 * puts them (cbytes, ccrc: its class names). */
static void rec_encode(uint8_t *h, const struct rf_dataset *ds, uint64_t cbytes, uint32_t ccrc)
{
	memset(h, 0, RF_REC_HEADER_BYTES);
	memcpy(h + H_MAGIC, rec_magic, 8);
	rf__put_le32(h + H_VERSION, rf_dataset_variable(ds) ? RF_REC_VERSION_VAR : RF_REC_VERSION);
	if (rf_dataset_variable(ds)) {
		uint64_t ioff, coff, end;
		rf__rec_sections(ds->src[0].data_bytes, ds->count, cbytes, &ioff, &coff, &end);
		rf__put_le32(h + H_ENCODING, ds->encoding);
		rf__put_le64(h + H_INDEX_OFF, ioff);
		rf__put_le32(h + H_INDEX_CRC, ds->index_crc32);
		rf__put_le32(h + H_MAX_RECORD, (uint32_t)ds->max_record);
		rf__put_le64(h + H_CLASSES_OFF, coff);
		rf__put_le64(h + H_CLASSES_BYTES, cbytes);
		rf__put_le32(h + H_CLASSES_CRC, ccrc);
	}
	rf__put_le32(h + H_HDR_BYTES, RF_REC_HEADER_BYTES);
	rf__put_le64(h + H_COUNT, ds->count);
	rf__put_le64(h + H_STRIDE, ds->src[0].stride);
	rf__put_le64(h + H_PAYLOAD_OFF, ds->payload_offset);
	rf__put_le64(h + H_PAYLOAD_BYTES, ds->payload_bytes);
	rf__put_le32(h + H_DTYPE, ds->dtype);
	rf__put_le32(h + H_NDIM, ds->ndim);
	for (unsigned i = 0; i < RF_DS_MAX_DIMS; i++)
		rf__put_le32(h + H_SHAPE + 4 * i, ds->shape[i]);
	rf__put_le32(h + H_LABEL_KIND, ds->label_kind);
	rf__put_le32(h + H_NUM_CLASSES, ds->num_classes);
	rf__put_le64(h + H_LABEL_OFF, ds->label_offset);
	rf__put_le64(h + H_DATA_BYTES, ds->src[0].data_bytes);
	rf__put_le32(h + H_DATA_CRC, ds->data_crc32);
	rf__put_le32(h + H_HDR_CRC, (uint32_t)crc32(0L, h, H_HDR_CRC));
}


struct rf_rec_writer {
	char *path, *tmp;
	int owns_tmp;           /* holds tmp's lock, truncated it: abort removes it */
	int fd;
	unsigned flags;
	struct rf_dataset d;      /* header fields; d.src[0].path unused */
	uint32_t crc;
	uint8_t *buf;
	size_t len, cap;
	uint64_t flushed;         /* data bytes written to the file */
	int io_err;               /* first write error, sticky */
	/* variable files: the index (16 bytes per record), the class names (each ends in
	 * a NUL) */
	uint8_t *index;
	size_t index_cap;
	char *classes;
	size_t classes_bytes;
	char last_err[RF__DS_MSG_LEN]; /* message of the last failed append */
};

const char *rf_rec_writer_tmp_path(const struct rf_rec_writer *w)
{
	return w ? w->tmp : NULL;
}

const char *rf_rec_writer_last_error(const struct rf_rec_writer *w)
{
	return w ? w->last_err : "";
}

void rf_rec_writer_abort(struct rf_rec_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0) {
		/* only a scratch file this writer holds the lock of: another writer's is its */
		if (w->owns_tmp)
			unlink(w->tmp);
		close(w->fd);
	}
	free(w->buf);
	free(w->index);
	free(w->classes);
	free(w->path);
	free(w->tmp);
	free(w);
}

/* The output path may be missing, or a regular file (with RF_REC_OVERWRITE): a
 * directory, FIFO, socket or device there is refused (rename would fail on a
 * directory after all the work, or replace the FIFO someone reads). */
static int target_check(const char *path, unsigned flags)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return errno == ENOENT ? 0 : rf__ds_fail(-errno, path, "stat: %s",
							 strerror(errno));
	if (!S_ISREG(st.st_mode))
		return rf__ds_fail(S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL, path,
				   "is %s, not a regular file: expected a new .rfrec file's path "
				   "(or a regular file to overwrite)", rf__ftype(st.st_mode));
	if (!(flags & RF_REC_OVERWRITE))
		return rf__ds_fail(-EEXIST, path, "file exists, not overwriting it");
	return 0;
}

/* A variable layout: its label kind, encoding and class names (into w). */
static int writer_layout_var(struct rf_rec_writer *w, const char *path,
			     const struct rf_rec_layout *l)
{
	struct rf_dataset *d = &w->d;
	size_t total = 0;

	if (l->label_kind != RF_LABEL_NONE && l->label_kind != RF_LABEL_I32)
		return rf__ds_fail(-EINVAL, path, "layout: label kind %d: a variable file keeps "
				   "its labels as i32 in the index (RF_LABEL_I32) or has none",
				   (int)l->label_kind);
	if (l->encoding > RF_REC_ENC_IMAGE)
		return rf__ds_fail(-EINVAL, path, "layout: encoding %u, expected 0 (raw) or 1 "
				   "(image)", l->encoding);
	if (l->classes && (!l->num_classes || l->label_kind == RF_LABEL_NONE))
		return rf__ds_fail(-EINVAL, path, "layout: class names need labels and "
				   "num_classes > 0");
	d->src[0].stride = 0;
	d->version = RF_REC_VERSION_VAR;
	d->encoding = l->encoding;
	d->dtype = RF_DS_DT_U8;
	d->label_kind = l->label_kind;
	d->num_classes = l->num_classes;
	d->label_offset = 12;
	for (uint32_t k = 0; l->classes && k < l->num_classes; k++) {
		size_t n = l->classes[k] ? strlen(l->classes[k]) : 0;
		if (n == 0 || n > 4095)
			return rf__ds_fail(-EINVAL, path, "layout: class %u's name is %s, expected "
					   "1 to 4095 bytes", k, n ? "too long" : "empty");
		total += n + 1;
	}
	if (!total)
		return 0;
	if (!(w->classes = malloc(total)))
		return rf__ds_fail(-ENOMEM, path, "out of memory");
	for (uint32_t k = 0; k < l->num_classes; k++) {
		size_t n = strlen(l->classes[k]) + 1;
		memcpy(w->classes + w->classes_bytes, l->classes[k], n);
		w->classes_bytes += n;
	}
	return 0;
}

/* The record layout of l into d (packed when l->stride is 0). */
static int writer_layout(struct rf_dataset *d, const char *path, const struct rf_rec_layout *l)
{
	size_t es = rf_ds_dtype_size(l->dtype);
	uint64_t elems = 1, lsize;

	d->dtype = l->dtype;
	d->ndim = l->ndim;
	memcpy(d->shape, l->shape, sizeof(d->shape));
	d->label_kind = l->label_kind;
	d->num_classes = l->num_classes;
	for (unsigned i = 0; i < l->ndim && i < RF_DS_MAX_DIMS; i++)
		elems = rf__mul_sat(elems, l->shape[i]);
	d->payload_bytes = rf__mul_sat(elems, es);
	lsize = l->label_kind == RF_LABEL_I32 ? 4 : l->label_kind == RF_LABEL_U8 ? 1 : 0;
	if (l->stride == 0) {
		d->payload_offset = 0;
		d->label_offset = lsize ? d->payload_bytes : 0;
		d->src[0].stride = rf__add_sat(d->payload_bytes, lsize);
	} else {
		d->payload_offset = l->payload_offset;
		d->label_offset = l->label_offset;
		d->src[0].stride = l->stride;
	}
	if (d->payload_bytes > RF__DS_MAX_BYTES || d->src[0].stride > RF__DS_MAX_BYTES)
		return rf__ds_fail(-EINVAL, path, "layout: record too large");
	return 0;
}

int rf_rec_writer_open(struct rf_rec_writer **out, const char *path,
		       const struct rf_rec_layout *l, unsigned flags)
{
	struct rf_rec_writer *w;
	struct rf_dataset *d;
	struct stat st;
	int ret, fd, not_reg;

	*out = NULL;
	if (!path || !*path || !l)
		return rf__ds_fail(-EINVAL, path, "no path or layout given");
	if (!(w = calloc(1, sizeof(*w))))
		return rf__ds_fail(-ENOMEM, path, "out of memory");
	w->fd = -1;
	w->flags = flags;
	w->crc = (uint32_t)crc32(0L, Z_NULL, 0);
	d = &w->d;
	if (!(w->path = strdup(path)) || asprintf(&w->tmp, "%s.tmp", path) < 0) {
		w->tmp = NULL;
		ret = rf__ds_fail(-ENOMEM, path, "out of memory");
		goto fail;
	}
	d->src[0].path = w->path; /* for messages only */
	if (l->variable)
		ret = writer_layout_var(w, path, l);
	else if (!(ret = writer_layout(d, path, l)))
		ret = rf__ds_check_layout(d, "layout");
	if (!ret && l->num_classes && l->label_kind == RF_LABEL_NONE) /* either layout */
		ret = rf__ds_fail(-EINVAL, path, "layout: num_classes %u without labels: a file "
				  "without labels has no classes (expected 0)", l->num_classes);
	if (ret)
		goto fail;
	if ((ret = target_check(path, flags)))
		goto fail;
	w->cap = 1u << 20;
	if (w->cap < d->src[0].stride)
		w->cap = d->src[0].stride;
	if (!(w->buf = malloc(w->cap))) {
		ret = rf__ds_fail(-ENOMEM, path, "out of memory");
		goto fail;
	}
	/* Never blocks on a FIFO, never writes into anything but a regular file, never
	 * through a symbolic link (a link planted there would have the records written
	 * over its target) or a hard link, and never into a scratch file another writer of
	 * the same path is filling (its lock): truncated only once this writer holds the
	 * lock on the file the name still leads to (flock locks the file, not the name: one
	 * opened just before another writer renamed or removed it is not this one's). */
	for (int tries = 0;; tries++) {
		struct stat ln;
		fd = rf__open_regular(w->tmp, O_WRONLY | O_CREAT | O_NOFOLLOW, 0644, &st, &not_reg);
		if (fd < 0) {
			if (not_reg)
				ret = rf__ds_fail(fd, w->tmp, "is %s, not a regular file: expected a "
						  "scratch file to write the .rfrec into (remove it)",
						  rf__ftype(st.st_mode));
			else if (fd == -ELOOP)
				ret = rf__ds_fail(fd, w->tmp, "is a symbolic link: expected a scratch "
						  "file to write the .rfrec into, never written through "
						  "a link (remove it)");
			else
				ret = rf__ds_fail(fd, w->tmp, "cannot create: %s", strerror(-fd));
			goto fail;
		}
		w->fd = fd;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0 && errno != ENOLCK && errno != EOPNOTSUPP) {
			/* (a file system without flock: written unlocked, as before) */
			ret = rf__ds_fail(errno == EWOULDBLOCK ? -EBUSY : -errno, w->tmp,
					  "%s: another writer of %s is using this scratch file",
					  errno == EWOULDBLOCK ? "locked" : strerror(errno), path);
			goto fail;
		}
		/* st: rf__open_regular's fstat of the open file */
		int same = lstat(w->tmp, &ln) == 0 && st.st_dev == ln.st_dev &&
			   st.st_ino == ln.st_ino;
		if (same && st.st_nlink == 1)
			break;
		if (same) {
			ret = rf__ds_fail(-EMLINK, w->tmp, "has %ju names (a hard link): expected a "
					  "scratch file of its own (remove it)", (uintmax_t)st.st_nlink);
			goto fail;
		}
		close(fd); /* renamed or removed meanwhile: open the name again */
		w->fd = -1;
		if (tries == 8) {
			ret = rf__ds_fail(-EBUSY, w->tmp, "keeps changing: another writer of %s?",
					  path);
			goto fail;
		}
	}
	if (ftruncate(fd, 0) < 0) {
		ret = rf__ds_fail(-errno, w->tmp, "truncate: %s", strerror(errno));
		goto fail;
	}
	w->owns_tmp = 1;
	*out = w;
	return 0;
fail:
	rf_rec_writer_abort(w);
	return ret;
}

static int writer_flush(struct rf_rec_writer *w)
{
	int ret;

	if (w->io_err)
		return rf__fail(w->io_err, "%s", w->last_err);
	if (!w->len)
		return 0;
	ret = rf__pwrite_full(w->fd, w->buf, w->len, RF_REC_HEADER_BYTES + w->flushed);
	if (ret) {
		w->io_err = ret;
		return rf__ds_fail(ret, w->tmp, "offset %" PRIu64 ": write: %s",
				   RF_REC_HEADER_BYTES + w->flushed, strerror(-ret));
	}
	w->flushed += w->len;
	w->len = 0;
	return 0;
}

static int writer_label_check(const struct rf_rec_writer *w, int32_t label)
{
	const struct rf_dataset *d = &w->d;

	if (d->label_kind != RF_LABEL_NONE &&
	    (label < 0 || (d->num_classes && (uint32_t)label >= d->num_classes) ||
	     (d->label_kind == RF_LABEL_U8 && label > 255)))
		return rf__ds_fail(-ERANGE, w->path,
				   "record %" PRIu64 ": label %" PRId32 " out of range, expected [0, %"
				   PRIu32 ")", d->count, label,
				   d->num_classes ? d->num_classes :
				   d->label_kind == RF_LABEL_U8 ? 256u : (uint32_t)INT32_MAX);
	return 0;
}

static int writer_append(struct rf_rec_writer *w, const void *payload, int32_t label)
{
	struct rf_dataset *d = &w->d;
	uint64_t stride = d->src[0].stride;
	uint8_t *r;
	int ret;

	if ((ret = writer_label_check(w, label)))
		return ret;
	if (rf_dataset_variable(d))
		return rf__ds_fail(-EINVAL, w->path, "record %" PRIu64 ": the file is of "
				   "variable-length records: append with rf_rec_writer_append_bytes",
				   d->count);
	if (rf__mul_sat(d->count + 1, stride) > RF__DS_MAX_BYTES)
		return rf__ds_fail(-EFBIG, w->path, "record %" PRIu64 ": file would "
				   "exceed %" PRIu64 " bytes", d->count, (uint64_t)RF__DS_MAX_BYTES);
	if (w->cap - w->len < stride && (ret = writer_flush(w)))
		return ret;
	r = w->buf + w->len;
	memset(r, 0, stride);
	if (payload)
		memcpy(r + d->payload_offset, payload, d->payload_bytes);
	if (d->label_kind == RF_LABEL_U8)
		r[d->label_offset] = (uint8_t)label;
	else if (d->label_kind == RF_LABEL_I32)
		rf__put_le32(r + d->label_offset, (uint32_t)label);
	w->crc = (uint32_t)crc32_z(w->crc, r, stride);
	w->len += stride;
	d->count++;
	return 0;
}

int rf_rec_writer_append(struct rf_rec_writer *w, const void *payload, int32_t label)
{
	int ret = writer_append(w, payload, label);

	if (ret < 0)
		snprintf(w->last_err, sizeof(w->last_err), "%s", rf_last_error());
	return ret;
}

/* Bytes through the buffer (large ones past it) at the data's end. */
static int writer_data(struct rf_rec_writer *w, const uint8_t *p, size_t n)
{
	int ret;

	w->crc = (uint32_t)crc32_z(w->crc, p, n);
	if (w->cap - w->len < n && (ret = writer_flush(w)))
		return ret;
	if (n <= w->cap) {
		memcpy(w->buf + w->len, p, n);
		w->len += n;
		return 0;
	}
	ret = rf__pwrite_full(w->fd, p, n, RF_REC_HEADER_BYTES + w->flushed);
	if (ret) {
		w->io_err = ret;
		return rf__ds_fail(ret, w->tmp, "offset %" PRIu64 ": write: %s",
				   RF_REC_HEADER_BYTES + w->flushed, strerror(-ret));
	}
	w->flushed += n;
	return 0;
}

static int writer_append_var(struct rf_rec_writer *w, const void *rec, size_t len,
			     int32_t label)
{
	struct rf_dataset *d = &w->d;
	uint64_t at = RF_REC_HEADER_BYTES + w->flushed + w->len;
	size_t need = (size_t)(d->count + 1) * RF_REC_INDEX_ENTRY;
	uint8_t *e;
	int ret;

	if (!rf_dataset_variable(d))
		return rf__ds_fail(-EINVAL, w->path, "record %" PRIu64 ": the file is of "
				   "fixed-size records: append with rf_rec_writer_append", d->count);
	if (d->label_kind == RF_LABEL_NONE)
		label = -1;
	else if ((ret = writer_label_check(w, label)))
		return ret;
	if (!rec || len == 0 || len > UINT32_MAX)
		return rf__ds_fail(-EINVAL, w->path, "record %" PRIu64 ": %zu bytes, expected 1 "
				   "to %u", d->count, rec ? len : 0, UINT32_MAX);
	if (rf__add_sat(at, len) > RF__DS_MAX_BYTES)
		return rf__ds_fail(-EFBIG, w->path, "record %" PRIu64 ": file would "
				   "exceed %" PRIu64 " bytes", d->count, (uint64_t)RF__DS_MAX_BYTES);
	if (need > w->index_cap) {
		size_t cap = w->index_cap ? 2 * w->index_cap : 4096;
		uint8_t *p = realloc(w->index, cap);
		if (!p)
			return rf__ds_fail(-ENOMEM, w->path, "out of memory");
		w->index = p;
		w->index_cap = cap;
	}
	if ((ret = writer_data(w, rec, len)))
		return ret;
	e = w->index + d->count * RF_REC_INDEX_ENTRY;
	rf__put_le64(e, at);
	rf__put_le32(e + 8, (uint32_t)len);
	rf__put_le32(e + 12, (uint32_t)label);
	if (len > d->max_record)
		d->max_record = len;
	d->count++;
	return 0;
}

int rf_rec_writer_append_bytes(struct rf_rec_writer *w, const void *rec, size_t len,
			       int32_t label)
{
	int ret = writer_append_var(w, rec, len, label);

	if (ret < 0)
		snprintf(w->last_err, sizeof(w->last_err), "%s", rf_last_error());
	return ret;
}

static int fsync_dir(const char *path)
{
	char *copy = strdup(path);
	int fd, ret = 0;

	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	free(copy);
	return ret;
}

/* n bytes of p at off, then zeros to the next multiple of RF_REC_ALIGN (z: that many
 * zero bytes of scratch). */
static int writer_section(struct rf_rec_writer *w, const void *p, uint64_t n, uint64_t off,
			  uint8_t *z)
{
	uint64_t end = off + n, padded = round_up(end, RF_REC_ALIGN);
	int ret = n ? rf__pwrite_full(w->fd, p, n, off) : 0;

	if (!ret && padded > end) {
		memset(z, 0, padded - end);
		off = end;
		ret = rf__pwrite_full(w->fd, z, padded - end, end);
	}
	if (ret)
		return rf__ds_fail(ret, w->tmp, "offset %" PRIu64 ": write: %s", off,
				   strerror(-ret));
	return 0;
}

/* Zero padding to RF_REC_ALIGN (a variable file's index and class names after the
 * data), the header, fsync. h is RF_REC_HEADER_BYTES of scratch. */
static int writer_write_header(struct rf_rec_writer *w, uint8_t *h)
{
	struct rf_dataset *d = &w->d;
	uint64_t end = RF_REC_HEADER_BYTES + w->flushed;
	uint32_t ccrc = 0;
	int ret;

	d->src[0].data_bytes = w->flushed;
	d->data_crc32 = w->crc;
	if ((ret = writer_section(w, NULL, 0, end, h)))
		return ret;
	if (rf_dataset_variable(d)) {
		uint64_t ioff, coff, fend, ib = d->count * RF_REC_INDEX_ENTRY;
		rf__rec_sections(w->flushed, d->count, w->classes_bytes, &ioff, &coff, &fend);
		d->index_crc32 = (uint32_t)crc32_z(0L, w->index, ib);
		ccrc = (uint32_t)crc32_z(0L, (const uint8_t *)w->classes, w->classes_bytes);
		if ((ret = writer_section(w, w->index, ib, ioff, h)) ||
		    (coff && (ret = writer_section(w, w->classes, w->classes_bytes, coff, h))))
			return ret;
	}
	rec_encode(h, d, w->classes_bytes, ccrc);
	if ((ret = rf__pwrite_full(w->fd, h, RF_REC_HEADER_BYTES, 0)))
		return rf__ds_fail(ret, w->tmp, "offset 0: write: %s", strerror(-ret));
	if (fsync(w->fd) < 0)
		return rf__ds_fail(-errno, w->tmp, "fsync: %s", strerror(errno));
	return 0;
}

/* The tmp file to its path: replacing a file there only with RF_REC_OVERWRITE. */
static int writer_rename(struct rf_rec_writer *w)
{
	int ret;

	/* again: something may have appeared at the target since the open */
	if ((ret = target_check(w->path, w->flags | RF_REC_OVERWRITE)))
		return ret;
	if (w->flags & RF_REC_OVERWRITE) {
		if (rename(w->tmp, w->path) < 0)
			return rf__ds_fail(-errno, w->path, "rename from %s: %s", w->tmp,
					   strerror(errno));
	} else if (renameat2(AT_FDCWD, w->tmp, AT_FDCWD, w->path, RENAME_NOREPLACE) < 0) {
		/* Filesystems without RENAME_NOREPLACE: link() also refuses to replace. */
		if ((errno != EINVAL && errno != ENOSYS) || link(w->tmp, w->path) < 0)
			return rf__ds_fail(-errno, w->path, "%s%s",
					   errno == EEXIST ? "file exists, not overwriting it: " : "rename: ",
					   strerror(errno));
		unlink(w->tmp);
	}
	return 0;
}

int rf_rec_writer_finish(struct rf_rec_writer *w)
{
	uint8_t *h = NULL;
	int ret;

	if (w->d.count == 0)
		ret = rf__ds_fail(-EINVAL, w->path, "no records written, expected >= 1");
	else
		ret = writer_flush(w);
	if (!ret && !(h = malloc(RF_REC_HEADER_BYTES)))
		ret = rf__ds_fail(-ENOMEM, w->path, "out of memory");
	if (!ret)
		ret = writer_write_header(w, h);
	if (!ret)
		ret = writer_rename(w);
	if (!ret) {
		close(w->fd);
		w->fd = -1; /* the tmp name is gone: abort must not unlink it */
		fsync_dir(w->path);
	}
	free(h);
	rf_rec_writer_abort(w);
	return ret;
}
