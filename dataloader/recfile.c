/* recfile.c -- opening and validating a ringflow record file (.rfrec). The layout
 * is documented in dataset.h; the writer is recwriter.c. */
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

#include "http-impl.h"
#include "recfile-impl.h"

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

/* Read the header of s (size bytes) into h; check the magic and that it is whole. */
static int rfrec_read_header(struct rf_dataset_src *s, uint64_t size, uint8_t *h)
{
	const char *path = s->path;
	int ret;

	if (size == 0)
		return rf__ds_fail(-EINVAL, path, "offset 0: file is empty, expected "
				   "a %u-byte .rfrec header", RF_REC_HEADER_BYTES);
	memset(h, 0, RF_REC_HEADER_BYTES);
	ret = rf__src_pread(s, h, size < RF_REC_HEADER_BYTES ? size : RF_REC_HEADER_BYTES, 0);
	if (ret && s->remote)
		return ret; /* the message names the URL and the range */
	if (ret)
		return rf__ds_fail(ret, path, "offset 0: read: %s", strerror(-ret));
	if (size < 8 || memcmp(h, rec_magic, 8)) {
		char got[48];
		bytes_str(got, sizeof(got), h, size < 8 ? size : 8);
		return rf__ds_fail(-EINVAL, path,
				   "offset 0: bad magic \"%s\", expected \"RFRECv1\\x00\" (not an .rfrec file)",
				   got);
	}
	if (size < RF_REC_HEADER_BYTES)
		return rf__ds_fail(-EINVAL, path,
				   "offset %" PRIu64 ": file truncated: ends at %" PRIu64 " bytes inside "
				   "the %u-byte header, expected the whole header", size, size,
				   RF_REC_HEADER_BYTES);
	return 0;
}

/* Header CRC, version, header size, reserved bytes. */
static int rfrec_check_header(const char *path, const uint8_t *h)
{
	uint32_t crc = (uint32_t)crc32(0L, h, H_HDR_CRC), version;

	if (crc != rf__le32(h + H_HDR_CRC))
		return rf__ds_fail(-EBADMSG, path,
				   "offset %u: header CRC-32 is 0x%08" PRIx32 ", expected 0x%08" PRIx32
				   " computed over bytes [0, %u) (header corrupt)", H_HDR_CRC,
				   rf__le32(h + H_HDR_CRC), crc, H_HDR_CRC);
	version = rf__le32(h + H_VERSION);
	if (version != RF_REC_VERSION && version != RF_REC_VERSION_VAR)
		return rf__ds_fail(-ENOTSUP, path,
				   "offset %u: version %" PRIu32 ", expected %u or %u", H_VERSION,
				   version, RF_REC_VERSION, RF_REC_VERSION_VAR);
	if (rf__le32(h + H_HDR_BYTES) != RF_REC_HEADER_BYTES)
		return rf__ds_fail(-EINVAL, path,
				   "offset %u: header size %" PRIu32 ", expected %u", H_HDR_BYTES,
				   rf__le32(h + H_HDR_BYTES), RF_REC_HEADER_BYTES);
	for (unsigned i = version == RF_REC_VERSION ? H_RESERVED : H_RESERVED_V2; i < H_HDR_CRC; i++)
		if (h[i])
			return rf__ds_fail(-EINVAL, path,
					   "offset %u: reserved header byte is 0x%02x, expected 0", i, h[i]);
	return 0;
}

/* The header's fields into ds (the inverse of recwriter.c's rec_encode). */
static void rfrec_decode(struct rf_dataset *ds, const uint8_t *h)
{
	struct rf_dataset_src *s = &ds->src[0];

	ds->version = rf__le32(h + H_VERSION);
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
	if (ds->version == RF_REC_VERSION_VAR) {
		ds->encoding = rf__le32(h + H_ENCODING);
		ds->index_crc32 = rf__le32(h + H_INDEX_CRC);
		ds->max_record = rf__le32(h + H_MAX_RECORD);
	}
}

/* A variable file's fixed fields, and the places of its sections (h: the header). */
static int rfrec_check_var(const struct rf_dataset *ds, const uint8_t *h)
{
	const struct rf_dataset_src *s = &ds->src[0];
	const char *path = s->path;
	uint64_t ioff, coff, end, cbytes = rf__le64(h + H_CLASSES_BYTES);
	static const struct { unsigned off; const char *name; } zero[] = {
		{ H_PAYLOAD_OFF, "payload offset" }, { H_PAYLOAD_BYTES, "payload bytes" },
		{ H_NDIM, "ndim" },
	};

	for (unsigned i = 0; i < sizeof(zero) / sizeof(zero[0]); i++)
		if (rf__le32(h + zero[i].off) || (zero[i].off != H_NDIM &&
						  rf__le32(h + zero[i].off + 4)))
			return rf__ds_fail(-EINVAL, path, "offset %u: %s is not 0, expected 0 in "
					   "a version 2 file (records of any length)", zero[i].off,
					   zero[i].name);
	for (unsigned i = 0; i < RF_DS_MAX_DIMS; i++)
		if (ds->shape[i])
			return rf__ds_fail(-EINVAL, path, "offset %u: shape[%u] is %" PRIu32
					   ", expected 0 in a version 2 file", H_SHAPE + 4 * i, i,
					   ds->shape[i]);
	if (ds->dtype != RF_DS_DT_U8)
		return rf__ds_fail(-EINVAL, path, "offset %u: dtype 0x%02x, expected 0x08 (u8 "
				   "bytes) in a version 2 file", H_DTYPE, (unsigned)ds->dtype);
	if (ds->label_kind != RF_LABEL_NONE && ds->label_kind != RF_LABEL_I32)
		return rf__ds_fail(-EINVAL, path, "offset %u: label kind %u, expected 0 (none) "
				   "or 2 (i32, in the index)", H_LABEL_KIND, (unsigned)ds->label_kind);
	if (ds->label_offset != 12)
		return rf__ds_fail(-EINVAL, path, "offset %u: label offset %" PRIu64 ", expected "
				   "12 (in the index entry)", H_LABEL_OFF, ds->label_offset);
	if (ds->encoding > RF_REC_ENC_IMAGE)
		return rf__ds_fail(-ENOTSUP, path, "offset %u: record encoding %" PRIu32
				   ", expected 0 (raw) or 1 (image)", H_ENCODING, ds->encoding);
	if (ds->count > s->data_bytes || s->data_bytes > RF__DS_MAX_BYTES)
		return rf__ds_fail(-EINVAL, path, "offset %u: data size %" PRIu64 " for %" PRIu64
				   " records, expected at least 1 byte per record (and at most %"
				   PRIu64 " bytes)", H_DATA_BYTES, s->data_bytes, ds->count,
				   (uint64_t)RF__DS_MAX_BYTES);
	if (ds->max_record == 0 || ds->max_record > s->data_bytes)
		return rf__ds_fail(-EINVAL, path, "offset %u: longest record %" PRIu64 " bytes, "
				   "expected 1 to the data size %" PRIu64, H_MAX_RECORD,
				   ds->max_record, s->data_bytes);
	if (cbytes > RF__DS_MAX_BYTES || (cbytes && (!ds->num_classes ||
						     ds->label_kind == RF_LABEL_NONE)))
		return rf__ds_fail(-EINVAL, path, "offset %u: %" PRIu64 " bytes of class names, "
				   "expected none without labels and num_classes", H_CLASSES_BYTES,
				   cbytes);
	rf__rec_sections(s->data_bytes, ds->count, cbytes, &ioff, &coff, &end);
	if (rf__le64(h + H_INDEX_OFF) != ioff)
		return rf__ds_fail(-EINVAL, path, "offset %u: index at %" PRIu64 ", expected %"
				   PRIu64 " (after the records, at a multiple of %u)", H_INDEX_OFF,
				   rf__le64(h + H_INDEX_OFF), ioff, RF_REC_ALIGN);
	if (rf__le64(h + H_CLASSES_OFF) != coff)
		return rf__ds_fail(-EINVAL, path, "offset %u: class names at %" PRIu64 ", expected %"
				   PRIu64, H_CLASSES_OFF, rf__le64(h + H_CLASSES_OFF), coff);
	if (!cbytes && rf__le32(h + H_CLASSES_CRC))
		return rf__ds_fail(-EINVAL, path, "offset %u: class names' CRC without class "
				   "names, expected 0", H_CLASSES_CRC);
	return 0;
}

/* Count, layout, and data size against the header. */
static int rfrec_check_fields(const struct rf_dataset *ds, const uint8_t *h)
{
	const struct rf_dataset_src *s = &ds->src[0];
	int ret;

	if (ds->count == 0)
		return rf__ds_fail(-EINVAL, s->path,
				   "offset %u: record count 0, expected >= 1", H_COUNT);
	if (ds->version == RF_REC_VERSION_VAR) {
		if (s->stride)
			return rf__ds_fail(-EINVAL, s->path, "offset %u: stride %" PRIu64 ", "
					   "expected 0 in a version 2 file (records of any length)",
					   H_STRIDE, s->stride);
		return rfrec_check_var(ds, h);
	}
	if ((ret = rf__ds_check_layout(ds, "header")))
		return ret;
	if (rf__mul_sat(ds->count, s->stride) != s->data_bytes ||
	    s->data_bytes > RF__DS_MAX_BYTES)
		return rf__ds_fail(-EINVAL, s->path,
				   "offset %u: data size %" PRIu64 ", expected count x stride = %" PRIu64
				   " x %" PRIu64 " (at most %" PRIu64 ")", H_DATA_BYTES, s->data_bytes,
				   ds->count, s->stride, (uint64_t)RF__DS_MAX_BYTES);
	return 0;
}

/* The file is exactly the header, the data and zero padding to RF_REC_ALIGN; buf
 * (RF_REC_HEADER_BYTES) is scratch for the padding. */
static int rfrec_check_size(const struct rf_dataset *ds, uint8_t *buf)
{
	const struct rf_dataset_src *s = &ds->src[0];
	const char *path = s->path;
	uint64_t size = s->size, end = RF_REC_HEADER_BYTES + s->data_bytes;
	uint64_t padded = round_up(end, RF_REC_ALIGN);
	int ret;

	if (size < end) {
		uint64_t rec = (size - RF_REC_HEADER_BYTES) / s->stride;
		return rf__ds_fail(-EINVAL, path,
				   "offset %" PRIu64 ": file truncated in record %" PRIu64 ": ends at %"
				   PRIu64 " bytes, expected %" PRIu64 " (4096 + %" PRIu64 " records x %"
				   PRIu64 " bytes, padded to %" PRIu64 ")", size, rec, size, end,
				   ds->count, s->stride, padded);
	}
	if (size < padded)
		return rf__ds_fail(-EINVAL, path,
				   "offset %" PRIu64 ": file ends at %" PRIu64 " bytes, expected zero "
				   "padding to %" PRIu64 " (a multiple of %u)", size, size, padded,
				   RF_REC_ALIGN);
	if (size > padded)
		return rf__ds_fail(-EINVAL, path,
				   "offset %" PRIu64 ": %" PRIu64 " trailing bytes after the padded end, "
				   "expected the file to end at %" PRIu64, padded, size - padded, padded);
	if (padded == end)
		return 0;
	ret = rf__src_pread(s, buf, padded - end, end);
	if (ret && s->remote)
		return ret;
	if (ret)
		return rf__ds_fail(ret, path, "offset %" PRIu64 ": read: %s", end, strerror(-ret));
	for (uint64_t i = 0; i < padded - end; i++)
		if (buf[i])
			return rf__ds_fail(-EINVAL, path,
					   "offset %" PRIu64 ": padding byte is 0x%02x, expected 0",
					   end + i, buf[i]);
	return 0;
}

/* Bytes [off, off + n) of s are zero (buf: RF_REC_HEADER_BYTES of scratch; n less). */
static int rfrec_zeros(const struct rf_dataset_src *s, uint64_t off, uint64_t n, uint8_t *buf)
{
	int ret;

	if (!n)
		return 0;
	ret = rf__src_pread(s, buf, n, off);
	if (ret && s->remote)
		return ret;
	if (ret)
		return rf__ds_fail(ret, s->path, "offset %" PRIu64 ": read: %s", off, strerror(-ret));
	for (uint64_t i = 0; i < n; i++)
		if (buf[i])
			return rf__ds_fail(-EINVAL, s->path, "offset %" PRIu64 ": padding byte is "
					   "0x%02x, expected 0", off + i, buf[i]);
	return 0;
}

/* A section of n bytes at off into a new buffer whose CRC-32 must be crc. */
static int rfrec_section(const struct rf_dataset_src *s, uint64_t off, uint64_t n, uint32_t crc,
			 const char *what, unsigned crc_at, uint8_t **out)
{
	uint8_t *b = malloc(n ? n : 1);
	uint32_t got;
	int ret;

	*out = NULL;
	if (!b)
		return rf__ds_fail(-ENOMEM, s->path, "%s: no memory for %" PRIu64 " bytes", what, n);
	ret = rf__src_pread(s, b, n, off);
	if (ret) {
		free(b);
		return s->remote ? ret : rf__ds_fail(ret, s->path, "offset %" PRIu64 ": read "
						     "of the %s: %s", off, what, strerror(-ret));
	}
	got = (uint32_t)crc32_z(0L, b, n);
	if (got != crc) {
		free(b);
		return rf__ds_fail(-EBADMSG, s->path, "offset %" PRIu64 ": %s CRC-32 0x%08" PRIx32
				   " over %" PRIu64 " bytes, expected 0x%08" PRIx32 " (header offset "
				   "%u): %s corrupt", off, what, got, n, crc, crc_at, what);
	}
	*out = b;
	return 0;
}

/* The index: records back to back from the header's end over the data exactly, each
 * of 1 byte or more and at most the longest the header says (which one is), labels
 * in range (-1 without labels). */
static int rfrec_check_index(const struct rf_dataset *ds, const uint8_t *ix, uint64_t ioff)
{
	const char *path = ds->src[0].path;
	uint64_t at = RF_REC_HEADER_BYTES, longest = 0;

	for (uint64_t i = 0; i < ds->count; i++) {
		const uint8_t *e = ix + i * RF_REC_INDEX_ENTRY;
		uint64_t off = rf__le64(e), eoff = ioff + i * RF_REC_INDEX_ENTRY;
		uint32_t len = rf__le32(e + 8);
		int32_t lab = (int32_t)rf__le32(e + 12);
		if (off != at || len == 0 || len > ds->max_record ||
		    len > RF_REC_HEADER_BYTES + ds->src[0].data_bytes - at)
			return rf__ds_fail(-EINVAL, path, "offset %" PRIu64 " (index entry of record %"
					   PRIu64 "): record at %" PRIu64 " of %" PRIu32 " bytes, "
					   "expected it at %" PRIu64 " (right after the one before) with "
					   "1 to %" PRIu64 " bytes inside the data", eoff, i, off, len, at,
					   ds->max_record);
		if (ds->label_kind == RF_LABEL_NONE ? lab != -1 :
		    lab < 0 || (ds->num_classes && (uint32_t)lab >= ds->num_classes))
			return rf__ds_fail(-ERANGE, path, "offset %" PRIu64 " (index entry of record %"
					   PRIu64 "): label %" PRId32 ", expected %s%" PRIu32 ")",
					   eoff + 12, i, lab, ds->label_kind == RF_LABEL_NONE ?
					   "-1 (no labels) (" : "[0, ", ds->num_classes ?
					   ds->num_classes : (uint32_t)INT32_MAX);
		at += len;
		if (len > longest)
			longest = len;
	}
	if (at != RF_REC_HEADER_BYTES + ds->src[0].data_bytes || longest != ds->max_record)
		return rf__ds_fail(-EINVAL, path, "offset %" PRIu64 ": the index's records end at %"
				   PRIu64 " with the longest of %" PRIu64 " bytes, expected the end of "
				   "the data at %" PRIu64 " and %" PRIu64 " (the header's)", ioff, at,
				   longest, RF_REC_HEADER_BYTES + ds->src[0].data_bytes, ds->max_record);
	return 0;
}

/* The class names: exactly num_classes, each non-empty and ending in a NUL. */
static int rfrec_classes(struct rf_dataset *ds, const uint8_t *b, uint64_t n, uint64_t coff)
{
	uint64_t at = 0;

	/* each name takes 2 bytes at least (a character and its NUL): a count the names'
	 * bytes cannot hold is refused before the table is allocated (2^32 - 16 asked
	 * for 32 GiB) */
	if (ds->num_classes > n / 2)
		return rf__ds_fail(-EINVAL, ds->src[0].path, "offset %u: num_classes %" PRIu32
				   ": the %" PRIu64 " bytes of class names hold %" PRIu64 " at most",
				   H_NUM_CLASSES, ds->num_classes, n, n / 2);
	if (!(ds->classes = calloc(ds->num_classes, sizeof(char *))))
		return rf__ds_fail(-ENOMEM, ds->src[0].path, "out of memory");
	for (uint32_t k = 0; k < ds->num_classes; k++) {
		const uint8_t *z = at < n ? memchr(b + at, 0, n - at) : NULL;
		if (!z || z == b + at)
			return rf__ds_fail(-EINVAL, ds->src[0].path, "offset %" PRIu64 ": class %"
					   PRIu32 "'s name is %s, expected %" PRIu32 " names, each "
					   "non-empty and ending in a NUL", coff + at, k,
					   z ? "empty" : "missing or unterminated", ds->num_classes);
		if (!(ds->classes[k] = strdup((const char *)b + at)))
			return rf__ds_fail(-ENOMEM, ds->src[0].path, "out of memory");
		at = (uint64_t)(z - b) + 1;
	}
	if (at != n)
		return rf__ds_fail(-EINVAL, ds->src[0].path, "offset %" PRIu64 ": %" PRIu64 " bytes "
				   "after the %" PRIu32 " class names, expected none", coff + at,
				   n - at, ds->num_classes);
	return 0;
}

/* A variable file: its size, its padding, the index (into src[1], in memory) and the
 * class names. h: the header, then scratch. */
static int rfrec_open_var(struct rf_dataset *ds, uint8_t *h)
{
	struct rf_dataset_src *s = &ds->src[0], *x = &ds->src[1];
	uint64_t cbytes = rf__le64(h + H_CLASSES_BYTES), ib = ds->count * RF_REC_INDEX_ENTRY;
	uint64_t ioff, coff, end, dend = RF_REC_HEADER_BYTES + s->data_bytes;
	uint32_t ccrc = rf__le32(h + H_CLASSES_CRC);
	uint8_t *ix = NULL, *cb = NULL;
	int ret;

	rf__rec_sections(s->data_bytes, ds->count, cbytes, &ioff, &coff, &end);
	if (s->size != end)
		return rf__ds_fail(-EINVAL, s->path, "offset %" PRIu64 ": file is %" PRIu64
				   " bytes, expected %" PRIu64 " (%" PRIu64 " bytes of records, the "
				   "index of %" PRIu64 " and %" PRIu64 " bytes of class names, each "
				   "padded to %u)%s", s->size < end ? s->size : end, s->size, end,
				   s->data_bytes, ds->count, cbytes, RF_REC_ALIGN,
				   s->size < end ? ": truncated" : "");
	if ((ret = rfrec_zeros(s, dend, ioff - dend, h)) ||
	    (ret = rfrec_zeros(s, ioff + ib, (coff ? coff : end) - ioff - ib, h)) ||
	    (coff && (ret = rfrec_zeros(s, coff + cbytes, end - coff - cbytes, h))))
		return ret;
	if ((ret = rfrec_section(s, ioff, ib, ds->index_crc32, "index", H_INDEX_CRC, &ix)))
		return ret;
	/* the index is src[1]: labels at 12 in each 16-byte entry */
	x->fd = -1;
	x->mem = ix;
	x->size = x->data_bytes = ib;
	x->stride = RF_REC_INDEX_ENTRY;
	x->data_offset = 0;
	ds->nsrc = 2;
	ds->label_src = RF_DS_SRC_LABEL;
	if (!(x->path = strdup(s->path)))
		return rf__ds_fail(-ENOMEM, s->path, "out of memory");
	if ((ret = rfrec_check_index(ds, ix, ioff)))
		return ret;
	if (!coff)
		return 0;
	if ((ret = rfrec_section(s, coff, cbytes, ccrc, "class names", H_CLASSES_CRC, &cb)))
		return ret;
	ret = rfrec_classes(ds, cb, cbytes, coff);
	free(cb);
	return ret;
}

int rf_dataset_open_rfrec(struct rf_dataset *ds, const char *path, unsigned flags)
{
	int aret = rf__ds_open_args(ds, flags, __func__);
	if (aret < 0)
		return aret;
	struct rf_dataset_src *s = &ds->src[0];
	uint8_t *h = NULL;
	struct stat st;
	int ret;

	memset(ds, 0, sizeof(*ds));
	ds->src[0].fd = ds->src[1].fd = -1;
	if (!path)
		return rf__ds_fail(-EINVAL, path, "no path given");
	ds->kind = RF_DS_RFREC;
	ds->nsrc = 1;
	if (rf__is_http(path)) {
		/* the size from a first one-byte Range request's Content-Range */
		uint8_t one;
		s->remote = 1;
		if (!(s->path = strdup(path))) {
			ret = rf__ds_fail(-ENOMEM, path, "out of memory");
			goto fail;
		}
		char v[128];
		if ((ret = rf__http_read(path, 0, 1, &one, &s->size, NULL, v, sizeof(v))) < 0)
			goto fail;
		if (!s->size) {  /* a Content-Range total of "*": unknown (not an empty file) */
			ret = rf__ds_fail(-EPROTO, path, "the server gives no size (Content-Range "
					  "total \"*\"): expected the file's size, which its records' "
					  "places are checked against");
			goto fail;
		}
		if (v[0] && !(s->validator = strdup(v))) {
			ret = rf__ds_fail(-ENOMEM, path, "out of memory");
			goto fail;
		}
	} else {
		if ((ret = rf__ds_src_open(s, path, "an .rfrec file", &st)) < 0)
			goto fail;
		s->size = (uint64_t)st.st_size;
	}
	if (!(h = malloc(RF_REC_HEADER_BYTES))) {
		ret = rf__ds_fail(-ENOMEM, path, "out of memory");
		goto fail;
	}
	ret = rfrec_read_header(s, s->size, h);
	if (!ret)
		ret = rfrec_check_header(path, h);
	if (!ret) {
		rfrec_decode(ds, h);
		ret = rfrec_check_fields(ds, h);
	}
	if (!ret && ds->version == RF_REC_VERSION_VAR)
		ret = rfrec_open_var(ds, h);
	else if (!ret)
		ret = rfrec_check_size(ds, h);
	if (!ret && (flags & RF_DS_VERIFY))
		ret = rf_dataset_verify(ds);
	if (ret)
		goto fail;
	free(h);
	return 0;
fail:
	free(h);
	rf_dataset_close(ds);
	return ret;
}
