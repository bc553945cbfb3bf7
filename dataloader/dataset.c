/* dataset.c -- what all dataset kinds share: dtypes, errors, opening a source,
 * close, the synchronous record accessor, label/CRC scans and layout checks. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset-impl.h"
#include "http-impl.h"

size_t rf_ds_dtype_size(enum rf_ds_dtype t)
{
	switch (t) {
	case RF_DS_DT_U8:
	case RF_DS_DT_I8:
		return 1;
	case RF_DS_DT_I16:
		return 2;
	case RF_DS_DT_I32:
	case RF_DS_DT_F32:
		return 4;
	case RF_DS_DT_F64:
		return 8;
	default:
		return 0;
	}
}

const char *rf_ds_dtype_name(enum rf_ds_dtype t)
{
	switch (t) {
	case RF_DS_DT_U8: return "u8";
	case RF_DS_DT_I8: return "i8";
	case RF_DS_DT_I16: return "i16";
	case RF_DS_DT_I32: return "i32";
	case RF_DS_DT_F32: return "f32";
	case RF_DS_DT_F64: return "f64";
	default: return "?";
	}
}

int rf__ds_fail(int code, const char *path, const char *fmt, ...)
{
	char msg[RF__DS_MSG_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rf__fail(code, "%s: %s", path ? path : "(null)", msg);
}

int rf__ds_src_open(struct rf_dataset_src *s, const char *path, const char *what,
		    struct stat *st)
{
	int not_reg, fd;

	if (!(s->path = strdup(path)))
		return rf__ds_fail(-ENOMEM, path, "out of memory");
	fd = rf__open_regular(path, O_RDONLY, 0, st, &not_reg);
	if (fd < 0 && not_reg)
		return rf__ds_fail(fd, path, "is %s, not a regular file: expected %s",
				   rf__ftype(st->st_mode), what);
	if (fd < 0)
		return rf__ds_fail(fd, path, "cannot open: %s", strerror(-fd));
	s->fd = fd;
	return 0;
}

int rf__pread_full(int fd, void *buf, size_t n, uint64_t off, size_t *got)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (got)
				*got = done;
			return -errno;
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	if (got)
		*got = done;
	return done == n ? 0 : -EIO;
}

int rf__src_pread(const struct rf_dataset_src *s, void *buf, size_t n, uint64_t off)
{
	if (s->remote)
		return n ? rf__http_read(s->path, off, n, buf, NULL, s->validator, NULL, 0) : 0;
	return rf__pread_full(s->fd, buf, n, off, NULL);
}

int rf__pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = pwrite(fd, (const char *)buf + done, n - done, (off_t)(off + done));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		done += (size_t)r;
	}
	return 0;
}

void rf__shape_str(char *buf, size_t len, unsigned ndim, const uint32_t *shape)
{
	size_t n = 0;

	if (!len)
		return;
	buf[0] = 0;
	if (ndim == 0) {
		snprintf(buf, len, "scalar");
		return;
	}
	for (unsigned i = 0; i < ndim && n < len; i++) {
		int w = snprintf(buf + n, len - n, "%s%" PRIu32, i ? "x" : "", shape[i]);
		if (w < 0)
			return;
		n += (size_t)w;
	}
}

void rf_dataset_close(struct rf_dataset *ds)
{
	if (!ds)
		return;
	for (unsigned i = 0; i < 2; i++) {
		struct rf_dataset_src *s = &ds->src[i];
		if (i < ds->nsrc) {
			if (s->fd >= 0)
				close(s->fd);
			free((void *)s->mem);
			free(s->path);
			free(s->validator);
		}
	}
	for (uint32_t k = 0; ds->classes && k < ds->num_classes; k++)
		free(ds->classes[k]);
	free(ds->classes);
	rf__ds_parts_free(ds);
	memset(ds, 0, sizeof(*ds));
	ds->src[0].fd = ds->src[1].fd = -1;
}

/* Bytes [off, off + n) of source src, for record i's what ("payload", "label"); a
 * failure is recorded naming the file, the record and the bytes (a remote source's
 * own message names its URL; a shard of a set, its own file and offset). */
static int read_bytes(const struct rf_dataset *ds, unsigned src, uint64_t off, void *dst,
		      uint64_t n, uint64_t i, const char *what)
{
	const struct rf_dataset_src *s = &ds->src[src];
	const char *path = s->path;
	unsigned part;
	uint64_t real = off;
	int ret;

	if (off > s->size || n > s->size - off)
		return rf__ds_fail(-EIO, s->path, "record %" PRIu64 ": %s bytes [%" PRIu64
				   ", %" PRIu64 ") lie past the end (%" PRIu64 " bytes)", i, what,
				   off, off + n, s->size);
	if (s->mem) {
		memcpy(dst, s->mem + off, n);
		return 0;
	}
	if (src == RF_DS_SRC_PAYLOAD && ds->nparts) {
		if (rf_dataset_part_of(ds, off, n, &part, &real) < 0)
			return rf__ds_fail(-EIO, s->path, "record %" PRIu64 ": %s bytes [%" PRIu64
					   ", %" PRIu64 ") of the shards' payload lie in no one shard",
					   i, what, off, off + n);
		path = ds->parts[part].path;
		ret = rf__pread_full(ds->parts[part].fd, dst, n, real, NULL);
	} else {
		ret = rf__src_pread(s, dst, n, off);
	}
	if (ret < 0 && !s->remote)
		return rf__ds_fail(ret, path, "record %" PRIu64 ": %s bytes [%" PRIu64 ", %"
				   PRIu64 "): %s", i, what, real, real + n,
				   ret == -EIO ? "short read (the file shrank since it was opened?)"
					       : strerror(-ret));
	return ret;
}

int rf_dataset_read_record(const struct rf_dataset *ds, uint64_t i, void *payload,
			   int32_t *label)
{
	struct rf_dataset_loc loc;
	int ret;

	if (!ds || ds->kind == RF_DS_NONE)
		return rf__fail(-EINVAL, "rf_dataset_read_record: %s", ds ? "dataset not open"
										: "ds is NULL");
	if (i >= ds->count)
		return rf__ds_fail(-ERANGE, ds->src[0].path, "record %" PRIu64 " asked for, the "
				   "dataset has %" PRIu64, i, ds->count);
	if (payload) {
		rf_dataset_payload_loc(ds, i, &loc);
		ret = read_bytes(ds, loc.src, loc.offset, payload, loc.length, i, "payload");
		if (ret)
			return ret;
	}
	if (label) {
		uint8_t b[4];
		if (rf_dataset_label_loc(ds, i, &loc) < 0) {
			*label = -1;
			return 0;
		}
		ret = read_bytes(ds, loc.src, loc.offset, b, loc.length, i, "label");
		if (ret)
			return ret;
		*label = rf_dataset_decode_label(ds, b);
	}
	return 0;
}

int rf_dataset_describe(const struct rf_dataset *ds, char *buf, size_t len)
{
	static const char *kinds[] = { "none", "idx", "idx", "rfrec", "raw", "tar" };
	char shape[96], lab[96], kind[48];
	const struct rf_dataset_src *s = &ds->src[0];

	rf__shape_str(shape, sizeof(shape), ds->ndim, ds->shape);
	if (ds->kind == RF_DS_TAR && ds->nparts)
		snprintf(kind, sizeof(kind), "%u WebDataset shards", ds->nparts);
	else
		snprintf(kind, sizeof(kind), "%s", ds->kind == RF_DS_TAR ? "WebDataset shard" :
			 "rfrec v2");
	if ((ds->kind == RF_DS_RFREC || ds->kind == RF_DS_TAR) && rf_dataset_variable(ds))
		return snprintf(buf, len, "%s: %s, %" PRIu64 " %s records of up to %" PRIu64
				" bytes (%" PRIu64 " %s), %s%" PRIu32 " classes%s", s->path,
				kind, ds->count, ds->encoding == RF_REC_ENC_IMAGE ? "image" : "raw",
				ds->max_record, s->data_bytes, ds->kind == RF_DS_TAR ?
				"bytes of tar" : "in all", ds->label_kind == RF_LABEL_NONE ?
				"no labels, " : "i32 labels, ", ds->num_classes,
				ds->classes ? " (named)" : "");
	if (ds->label_kind == RF_LABEL_NONE)
		snprintf(lab, sizeof(lab), "no labels");
	else if (ds->label_src == RF_DS_SRC_LABEL)
		snprintf(lab, sizeof(lab), "u8 labels in %s, %" PRIu32 " classes",
			 ds->src[1].path, ds->num_classes);
	else
		snprintf(lab, sizeof(lab), "%s label at +%" PRIu64 ", %" PRIu32 " classes",
			 ds->label_kind == RF_LABEL_U8 ? "u8" : "i32", ds->label_offset,
			 ds->num_classes);
	return snprintf(buf, len,
			"%s: %s%s, %" PRIu64 " records of %" PRIu64 " bytes from offset %" PRIu64
			", payload %s %s (%" PRIu64 " bytes at +%" PRIu64 "), %s",
			s->path, kinds[ds->kind <= RF_DS_TAR ? ds->kind : 0],
			s->compressed ? " (gzip)" : "", ds->count, s->stride, s->data_offset,
			rf_ds_dtype_name(ds->dtype), shape, ds->payload_bytes, ds->payload_offset,
			lab);
}

/* ---- scans ---------------------------------------------------------------------- */

struct label_scan {
	uint64_t next;      /* next record whose label is awaited */
	unsigned have;      /* bytes of it collected so far */
	uint8_t b[4];
	int32_t max;
};

/* Feed bytes [pos, pos+n) of the label source; check each complete label. */
static int label_feed(const struct rf_dataset *ds, struct label_scan *ls, uint64_t pos,
		      const uint8_t *p, uint64_t n)
{
	const struct rf_dataset_src *s = &ds->src[ds->label_src];
	unsigned lsize = ds->label_kind == RF_LABEL_I32 ? 4 : 1;

	while (ls->next < ds->count) {
		uint64_t lpos = s->data_offset + ls->next * s->stride + ds->label_offset + ls->have;
		if (lpos >= pos + n)
			break;
		ls->b[ls->have++] = p[lpos - pos];
		if (ls->have < lsize)
			continue;
		int32_t v = rf_dataset_decode_label(ds, ls->b);
		uint64_t at = lpos + 1 - lsize;
		if (v < 0 && !ds->num_classes)
			return rf__ds_fail(-ERANGE, s->path,
					   "offset %" PRIu64 " (record %" PRIu64 "): label %" PRId32
					   " out of range, expected >= 0", at, ls->next, v);
		if (v < 0 || (ds->num_classes && (uint32_t)v >= ds->num_classes)) {
			return rf__ds_fail(-ERANGE, s->path,
					   "offset %" PRIu64 " (record %" PRIu64 "): label %" PRId32
					   " out of range, expected [0, %" PRIu32 ")",
					   at, ls->next, v, ds->num_classes);
		}
		if (v > ls->max)
			ls->max = v;
		ls->have = 0;
		ls->next++;
	}
	return 0;
}

int rf__ds_scan(const struct rf_dataset *ds, int check_labels, int32_t *max_label,
		uint32_t *crc)
{
	enum { CHUNK = 1 << 20 };
	struct label_scan ls = { .max = -1 };
	uint8_t *buf = NULL;
	int ret = 0;

	if (ds->label_kind == RF_LABEL_NONE)
		check_labels = 0;
	for (unsigned si = 0; si < ds->nsrc; si++) {
		const struct rf_dataset_src *s = &ds->src[si];
		int labels_here = check_labels && ds->label_src == si;
		int crc_here = crc && si == RF_DS_SRC_PAYLOAD;
		uint32_t c = (uint32_t)crc32(0L, Z_NULL, 0);

		if (!labels_here && !crc_here)
			continue;
		for (uint64_t pos = s->data_offset; pos < s->data_offset + s->data_bytes;) {
			uint64_t n = s->data_offset + s->data_bytes - pos;
			const uint8_t *p;
			if (n > CHUNK)
				n = CHUNK;
			if (s->mem) {
				p = s->mem + pos;
			} else {
				size_t got = 0;
				if (!buf && !(buf = malloc(CHUNK))) {
					ret = rf__ds_fail(-ENOMEM, s->path, "out of memory");
					goto out;
				}
				if (s->remote) {
					ret = rf__src_pread(s, buf, n, pos);
					if (ret)
						goto out; /* the message names the URL and range */
				} else {
					ret = rf__pread_full(s->fd, buf, n, pos, &got);
				}
				if (ret) {
					ret = rf__ds_fail(ret, s->path,
							  "offset %" PRIu64 ": read failed: %s",
							  pos + got, ret == -EIO ?
							  "file ends early" : strerror(-ret));
					goto out;
				}
				p = buf;
			}
			if (crc_here)
				c = (uint32_t)crc32(c, p, (uInt)n);
			if (labels_here) {
				ret = label_feed(ds, &ls, pos, p, n);
				if (ret)
					goto out;
			}
			pos += n;
		}
		if (crc_here)
			*crc = c;
	}
	if (max_label)
		*max_label = ls.max;
out:
	free(buf);
	return ret;
}

int rf__ds_open_args(struct rf_dataset *ds, unsigned flags, const char *fn)
{
	if (!ds)
		return rf__fail(-EINVAL, "%s: ds is NULL", fn);
	if (flags & ~(unsigned)(RF_DS_VERIFY | RF_DS_ALLOW_TAIL)) {
		memset(ds, 0, sizeof(*ds));    /* refused: zeroed, fds -1 (dataset.h) */
		ds->src[0].fd = ds->src[1].fd = -1;
		return rf__fail(-EINVAL, "%s: flags 0x%x: bits 0x%x are no RF_DS_* flag", fn, flags,
				flags & ~(unsigned)(RF_DS_VERIFY | RF_DS_ALLOW_TAIL));
	}
	return 0;
}

int rf_dataset_verify(const struct rf_dataset *ds)
{
	uint32_t crc = 0;
	int ret;

	if (!ds || ds->kind == RF_DS_NONE)
		return rf__fail(-EINVAL, "rf_dataset_verify: %s", ds ? "the dataset is not open"
								 : "ds is NULL");
	ret = rf__ds_scan(ds, 1, NULL, ds->kind == RF_DS_RFREC ? &crc : NULL);
	if (ret)
		return ret;
	if (ds->kind == RF_DS_RFREC && crc != ds->data_crc32)
		return rf__ds_fail(-EBADMSG, ds->src[0].path,
				   "offset %u: data CRC-32 0x%08" PRIx32 " over %" PRIu64
				   " bytes, expected 0x%08" PRIx32 " from the header (data corrupt)",
				   RF_REC_HEADER_BYTES, crc, ds->src[0].data_bytes, ds->data_crc32);
	return 0;
}

/* ---- layout --------------------------------------------------------------------- */

int rf__ds_check_layout(const struct rf_dataset *ds, const char *what)
{
	const char *path = ds->src[0].path;
	uint64_t stride = ds->src[0].stride;
	size_t es = rf_ds_dtype_size(ds->dtype);
	uint64_t elems = 1;

	if (!es)
		return rf__ds_fail(-EINVAL, path, "%s: unknown dtype 0x%02x, expected "
				   "one of u8 i8 i16 i32 f32 f64 (IDX codes 0x08-0x0E)", what,
				   (unsigned)ds->dtype);
	if (ds->ndim > RF_DS_MAX_DIMS)
		return rf__ds_fail(-EINVAL, path, "%s: %u dims, expected at most %u",
				   what, ds->ndim, RF_DS_MAX_DIMS);
	for (unsigned i = 0; i < RF_DS_MAX_DIMS; i++) {
		if (i < ds->ndim && ds->shape[i] == 0)
			return rf__ds_fail(-EINVAL, path,
					   "%s: shape dim %u is 0, expected >= 1", what, i);
		if (i >= ds->ndim && ds->shape[i] != 0)
			return rf__ds_fail(-EINVAL, path,
					   "%s: shape dim %u is %" PRIu32 " beyond ndim %u, expected 0",
					   what, i, ds->shape[i], ds->ndim);
		if (i < ds->ndim)
			elems = rf__mul_sat(elems, ds->shape[i]);
	}
	if (rf__mul_sat(elems, es) != ds->payload_bytes)
		return rf__ds_fail(-EINVAL, path,
				   "%s: payload is %" PRIu64 " bytes, expected %" PRIu64
				   " for shape with %" PRIu64 " %s elements", what,
				   ds->payload_bytes, rf__mul_sat(elems, es), elems,
				   rf_ds_dtype_name(ds->dtype));
	if (stride == 0)
		return rf__ds_fail(-EINVAL, path, "%s: record stride 0, expected >= 1",
				   what);
	if (rf__add_sat(ds->payload_offset, ds->payload_bytes) > stride)
		return rf__ds_fail(-EINVAL, path,
				   "%s: payload [%" PRIu64 ", +%" PRIu64 ") does not fit in the %"
				   PRIu64 "-byte record", what, ds->payload_offset,
				   ds->payload_bytes, stride);
	if (ds->label_kind != RF_LABEL_NONE) {
		uint64_t lsize = ds->label_kind == RF_LABEL_I32 ? 4 : 1;
		uint64_t lend = rf__add_sat(ds->label_offset, lsize);
		if (ds->label_kind != RF_LABEL_U8 && ds->label_kind != RF_LABEL_I32)
			return rf__ds_fail(-EINVAL, path,
					   "%s: label kind %u, expected 0 (none), 1 (u8) or 2 (i32)",
					   what, (unsigned)ds->label_kind);
		if (lend > stride)
			return rf__ds_fail(-EINVAL, path,
					   "%s: label [%" PRIu64 ", +%" PRIu64 ") does not fit in the %"
					   PRIu64 "-byte record", what, ds->label_offset, lsize, stride);
		if (ds->payload_bytes && ds->label_offset < ds->payload_offset + ds->payload_bytes &&
		    ds->payload_offset < lend)
			return rf__ds_fail(-EINVAL, path,
					   "%s: label [%" PRIu64 ", +%" PRIu64 ") overlaps payload [%"
					   PRIu64 ", +%" PRIu64 ")", what, ds->label_offset, lsize,
					   ds->payload_offset, ds->payload_bytes);
		if (ds->label_kind == RF_LABEL_U8 && ds->num_classes > 256)
			return rf__ds_fail(-EINVAL, path,
					   "%s: %" PRIu32 " classes with u8 labels, expected <= 256",
					   what, ds->num_classes);
		if (ds->num_classes > (uint32_t)INT32_MAX)
			return rf__ds_fail(-EINVAL, path,
					   "%s: %" PRIu32 " classes, expected <= %d", what,
					   ds->num_classes, INT32_MAX);
	} else if (ds->label_offset) {
		return rf__ds_fail(-EINVAL, path,
				   "%s: label offset %" PRIu64 " without a label, expected 0", what,
				   ds->label_offset);
	}
	return 0;
}
