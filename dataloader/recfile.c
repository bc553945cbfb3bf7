/* recfile.c — the ringflow record file (.rfrec): reader/validator and streaming
 * writer. The layout is documented in dataset.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset-impl.h"

/* Header field offsets. */
enum {
	H_MAGIC = 0,
	H_VERSION = 8,
	H_HDR_BYTES = 12,
	H_COUNT = 16,
	H_STRIDE = 24,
	H_PAYLOAD_OFF = 32,
	H_PAYLOAD_BYTES = 40,
	H_DTYPE = 48,
	H_NDIM = 52,
	H_SHAPE = 56,
	H_LABEL_KIND = 72,
	H_NUM_CLASSES = 76,
	H_LABEL_OFF = 80,
	H_DATA_BYTES = 88,
	H_DATA_CRC = 96,
	H_RESERVED = 100,
	H_HDR_CRC = RF_REC_HEADER_BYTES - 4
};

static const uint8_t rec_magic[8] = RF_REC_MAGIC;

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static void rec_encode(uint8_t *h, const struct rf_dataset *ds)
{
	memset(h, 0, RF_REC_HEADER_BYTES);
	memcpy(h + H_MAGIC, rec_magic, 8);
	rf__put_le32(h + H_VERSION, RF_REC_VERSION);
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

static void bytes_str(char *buf, size_t len, const uint8_t *p, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k + 5 < len; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
			buf[k++] = (char)p[i];
		else
			k += (size_t)snprintf(buf + k, len - k, "\\x%02x", p[i]);
	}
	buf[k < len ? k : len - 1] = 0;
}

int rf_dataset_open_rfrec(struct rf_dataset *ds, const char *path, unsigned flags)
{
	struct rf_dataset_src *s = &ds->src[0];
	uint8_t *h = NULL;
	struct stat st;
	uint64_t size, end, padded;
	uint32_t crc;
	int ret;

	memset(ds, 0, sizeof(*ds));
	ds->src[0].fd = ds->src[1].fd = -1;
	if (!path)
		return rf__ds_fail(-EINVAL, path, "no path given");
	ds->kind = RF_DS_RFREC;
	ds->nsrc = 1;
	if ((ret = rf__ds_src_open(s, path, "an .rfrec file", &st)) < 0)
		goto fail;
	if (!(h = malloc(RF_REC_HEADER_BYTES))) {
		ret = rf__ds_fail(-ENOMEM, path, "out of memory");
		goto fail;
	}
	size = s->size = (uint64_t)st.st_size;
	if (size == 0) {
		ret = rf__ds_fail(-EINVAL, path, "offset 0: file is empty, expected "
				  "a %u-byte .rfrec header", RF_REC_HEADER_BYTES);
		goto fail;
	}
	memset(h, 0, RF_REC_HEADER_BYTES);
	ret = rf__pread_full(s->fd, h, size < RF_REC_HEADER_BYTES ? size : RF_REC_HEADER_BYTES,
			     0, NULL);
	if (ret) {
		ret = rf__ds_fail(ret, path, "offset 0: read: %s", strerror(-ret));
		goto fail;
	}
	if (size < 8 || memcmp(h, rec_magic, 8)) {
		char got[48];
		bytes_str(got, sizeof(got), h, size < 8 ? size : 8);
		ret = rf__ds_fail(-EINVAL, path,
				  "offset 0: bad magic \"%s\", expected \"RFRECv1\\x00\" (not an .rfrec file)",
				  got);
		goto fail;
	}
	if (size < RF_REC_HEADER_BYTES) {
		ret = rf__ds_fail(-EINVAL, path,
				  "offset %" PRIu64 ": file truncated: ends at %" PRIu64 " bytes inside "
				  "the %u-byte header, expected the whole header", size, size,
				  RF_REC_HEADER_BYTES);
		goto fail;
	}
	crc = (uint32_t)crc32(0L, h, H_HDR_CRC);
	if (crc != rf__le32(h + H_HDR_CRC)) {
		ret = rf__ds_fail(-EBADMSG, path,
				  "offset %u: header CRC-32 is 0x%08" PRIx32 ", expected 0x%08" PRIx32
				  " computed over bytes [0, %u) (header corrupt)", H_HDR_CRC,
				  rf__le32(h + H_HDR_CRC), crc, H_HDR_CRC);
		goto fail;
	}
	ds->version = rf__le32(h + H_VERSION);
	if (ds->version != RF_REC_VERSION) {
		ret = rf__ds_fail(-ENOTSUP, path,
				  "offset %u: version %" PRIu32 ", expected %u", H_VERSION,
				  ds->version, RF_REC_VERSION);
		goto fail;
	}
	if (rf__le32(h + H_HDR_BYTES) != RF_REC_HEADER_BYTES) {
		ret = rf__ds_fail(-EINVAL, path,
				  "offset %u: header size %" PRIu32 ", expected %u", H_HDR_BYTES,
				  rf__le32(h + H_HDR_BYTES), RF_REC_HEADER_BYTES);
		goto fail;
	}
	for (unsigned i = H_RESERVED; i < H_HDR_CRC; i++) {
		if (h[i]) {
			ret = rf__ds_fail(-EINVAL, path,
					  "offset %u: reserved header byte is 0x%02x, expected 0", i, h[i]);
			goto fail;
		}
	}
	ds->count = rf__le64(h + H_COUNT);
	s->stride = rf__le64(h + H_STRIDE);
	ds->payload_offset = rf__le64(h + H_PAYLOAD_OFF);
	ds->payload_bytes = rf__le64(h + H_PAYLOAD_BYTES);
	ds->dtype = (enum rf_ds_dtype)rf__le32(h + H_DTYPE);
	ds->ndim = rf__le32(h + H_NDIM);
	for (unsigned i = 0; i < RF_DS_MAX_DIMS; i++)
		ds->shape[i] = rf__le32(h + H_SHAPE + 4 * i);
	ds->label_kind = (enum rf_label_kind)rf__le32(h + H_LABEL_KIND);
	ds->num_classes = rf__le32(h + H_NUM_CLASSES);
	ds->label_offset = rf__le64(h + H_LABEL_OFF);
	ds->label_src = RF_DS_SRC_PAYLOAD;
	s->data_bytes = rf__le64(h + H_DATA_BYTES);
	ds->data_crc32 = rf__le32(h + H_DATA_CRC);
	s->data_offset = RF_REC_HEADER_BYTES;

	if (ds->count == 0) {
		ret = rf__ds_fail(-EINVAL, path,
				  "offset %u: record count 0, expected >= 1", H_COUNT);
		goto fail;
	}
	if ((ret = rf__ds_check_layout(ds, "header")))
		goto fail;
	if (rf__mul_sat(ds->count, s->stride) != s->data_bytes ||
	    s->data_bytes > RF__DS_MAX_BYTES) {
		ret = rf__ds_fail(-EINVAL, path,
				  "offset %u: data size %" PRIu64 ", expected count x stride = %" PRIu64
				  " x %" PRIu64 " (at most %" PRIu64 ")", H_DATA_BYTES, s->data_bytes,
				  ds->count, s->stride, (uint64_t)RF__DS_MAX_BYTES);
		goto fail;
	}
	end = RF_REC_HEADER_BYTES + s->data_bytes;
	padded = round_up(end, RF_REC_ALIGN);
	if (size < end) {
		uint64_t rec = (size - RF_REC_HEADER_BYTES) / s->stride;
		ret = rf__ds_fail(-EINVAL, path,
				  "offset %" PRIu64 ": file truncated in record %" PRIu64 ": ends at %"
				  PRIu64 " bytes, expected %" PRIu64 " (4096 + %" PRIu64 " records x %"
				  PRIu64 " bytes, padded to %" PRIu64 ")", size, rec, size, end,
				  ds->count, s->stride, padded);
		goto fail;
	}
	if (size < padded) {
		ret = rf__ds_fail(-EINVAL, path,
				  "offset %" PRIu64 ": file ends at %" PRIu64 " bytes, expected zero "
				  "padding to %" PRIu64 " (a multiple of %u)", size, size, padded,
				  RF_REC_ALIGN);
		goto fail;
	}
	if (size > padded) {
		ret = rf__ds_fail(-EINVAL, path,
				  "offset %" PRIu64 ": %" PRIu64 " trailing bytes after the padded end, "
				  "expected the file to end at %" PRIu64, padded, size - padded, padded);
		goto fail;
	}
	if (padded > end) {
		ret = rf__pread_full(s->fd, h, padded - end, end, NULL);
		if (ret) {
			ret = rf__ds_fail(ret, path, "offset %" PRIu64 ": read: %s", end,
					  strerror(-ret));
			goto fail;
		}
		for (uint64_t i = 0; i < padded - end; i++) {
			if (h[i]) {
				ret = rf__ds_fail(-EINVAL, path,
						  "offset %" PRIu64 ": padding byte is 0x%02x, expected 0",
						  end + i, h[i]);
				goto fail;
			}
		}
	}
	if (flags & RF_DS_VERIFY) {
		ret = rf_dataset_verify(ds);
		if (ret)
			goto fail;
	}
	free(h);
	return 0;
fail:
	free(h);
	rf_dataset_close(ds);
	return ret;
}

/* ---- writer --------------------------------------------------------------------- */

struct rf_rec_writer {
	char *path, *tmp;
	int fd;
	unsigned flags;
	struct rf_dataset d;      /* header fields; d.src[0].path unused */
	uint32_t crc;
	uint8_t *buf;
	size_t len, cap;
	uint64_t flushed;         /* data bytes written to the file */
	int io_err;               /* first write error, sticky */
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
		close(w->fd);
		unlink(w->tmp);
	}
	free(w->buf);
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
				   "(or a regular file to overwrite)", rf__ds_ftype(st.st_mode));
	if (!(flags & RF_REC_OVERWRITE))
		return rf__ds_fail(-EEXIST, path, "file exists, not overwriting it");
	return 0;
}

int rf_rec_writer_open(struct rf_rec_writer **out, const char *path,
		       const struct rf_rec_layout *l, unsigned flags)
{
	struct rf_rec_writer *w;
	struct rf_dataset *d;
	struct stat st;
	size_t es;
	uint64_t elems = 1, lsize;
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
	d->dtype = l->dtype;
	d->ndim = l->ndim;
	memcpy(d->shape, l->shape, sizeof(d->shape));
	d->label_kind = l->label_kind;
	d->num_classes = l->num_classes;
	es = rf_ds_dtype_size(l->dtype);
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
	if (d->payload_bytes > RF__DS_MAX_BYTES || d->src[0].stride > RF__DS_MAX_BYTES) {
		ret = rf__ds_fail(-EINVAL, path, "layout: record too large");
		goto fail;
	}
	if ((ret = rf__ds_check_layout(d, "layout")))
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
	/* never blocks on a FIFO, never writes into anything but a regular file */
	fd = rf__open_regular(w->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644, &st, &not_reg);
	if (fd < 0) {
		if (not_reg)
			ret = rf__ds_fail(fd, w->tmp, "is %s, not a regular file: "
					  "expected a scratch file to write the .rfrec into (remove it)",
					  rf__ds_ftype(st.st_mode));
		else
			ret = rf__ds_fail(fd, w->tmp, "cannot create: %s", strerror(-fd));
		goto fail;
	}
	w->fd = fd;
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

static int writer_append(struct rf_rec_writer *w, const void *payload, int32_t label)
{
	struct rf_dataset *d = &w->d;
	uint64_t stride = d->src[0].stride;
	uint8_t *r;
	int ret;

	if (d->label_kind != RF_LABEL_NONE &&
	    (label < 0 || (d->num_classes && (uint32_t)label >= d->num_classes) ||
	     (d->label_kind == RF_LABEL_U8 && label > 255)))
		return rf__ds_fail(-ERANGE, w->path,
				   "record %" PRIu64 ": label %" PRId32 " out of range, expected [0, %"
				   PRIu32 ")", d->count, label,
				   d->num_classes ? d->num_classes :
				   d->label_kind == RF_LABEL_U8 ? 256u : (uint32_t)INT32_MAX);
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

int rf_rec_writer_finish(struct rf_rec_writer *w)
{
	struct rf_dataset *d = &w->d;
	uint8_t *h = NULL;
	uint64_t end, padded;
	int ret;

	if (d->count == 0) {
		ret = rf__ds_fail(-EINVAL, w->path, "no records written, expected >= 1");
		goto fail;
	}
	if ((ret = writer_flush(w)))
		goto fail;
	d->src[0].data_bytes = w->flushed;
	d->data_crc32 = w->crc;
	end = RF_REC_HEADER_BYTES + w->flushed;
	padded = round_up(end, RF_REC_ALIGN);
	if (!(h = malloc(RF_REC_HEADER_BYTES))) {
		ret = rf__ds_fail(-ENOMEM, w->path, "out of memory");
		goto fail;
	}
	if (padded > end) {
		memset(h, 0, padded - end);
		if ((ret = rf__pwrite_full(w->fd, h, padded - end, end))) {
			ret = rf__ds_fail(ret, w->tmp, "offset %" PRIu64 ": write: %s",
					  end, strerror(-ret));
			goto fail;
		}
	}
	rec_encode(h, d);
	if ((ret = rf__pwrite_full(w->fd, h, RF_REC_HEADER_BYTES, 0))) {
		ret = rf__ds_fail(ret, w->tmp, "offset 0: write: %s", strerror(-ret));
		goto fail;
	}
	if (fsync(w->fd) < 0) {
		ret = rf__ds_fail(-errno, w->tmp, "fsync: %s", strerror(errno));
		goto fail;
	}
	/* again: something may have appeared at the target since the open */
	if ((ret = target_check(w->path, w->flags | RF_REC_OVERWRITE)))
		goto fail;
	if (w->flags & RF_REC_OVERWRITE) {
		if (rename(w->tmp, w->path) < 0) {
			ret = rf__ds_fail(-errno, w->path, "rename from %s: %s", w->tmp,
					  strerror(errno));
			goto fail;
		}
	} else if (renameat2(AT_FDCWD, w->tmp, AT_FDCWD, w->path, RENAME_NOREPLACE) < 0) {
		/* Filesystems without RENAME_NOREPLACE: link() also refuses to replace. */
		if ((errno != EINVAL && errno != ENOSYS) || link(w->tmp, w->path) < 0) {
			ret = rf__ds_fail(-errno, w->path, "%s%s",
					  errno == EEXIST ? "file exists, not overwriting it: " : "rename: ",
					  strerror(errno));
			goto fail;
		}
		unlink(w->tmp);
	}
	close(w->fd);
	w->fd = -1; /* the tmp name is gone: abort must not unlink it */
	fsync_dir(w->path);
	free(h);
	rf_rec_writer_abort(w);
	return 0;
fail:
	free(h);
	rf_rec_writer_abort(w);
	return ret;
}
