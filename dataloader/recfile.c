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
	if (version != RF_REC_VERSION)
		return rf__ds_fail(-ENOTSUP, path,
				   "offset %u: version %" PRIu32 ", expected %u", H_VERSION,
				   version, RF_REC_VERSION);
	if (rf__le32(h + H_HDR_BYTES) != RF_REC_HEADER_BYTES)
		return rf__ds_fail(-EINVAL, path,
				   "offset %u: header size %" PRIu32 ", expected %u", H_HDR_BYTES,
				   rf__le32(h + H_HDR_BYTES), RF_REC_HEADER_BYTES);
	for (unsigned i = H_RESERVED; i < H_HDR_CRC; i++)
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
}

/* Count, layout, and data size against the header. */
static int rfrec_check_fields(const struct rf_dataset *ds)
{
	const struct rf_dataset_src *s = &ds->src[0];
	int ret;

	if (ds->count == 0)
		return rf__ds_fail(-EINVAL, s->path,
				   "offset %u: record count 0, expected >= 1", H_COUNT);
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

int rf_dataset_open_rfrec(struct rf_dataset *ds, const char *path, unsigned flags)
{
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
		if ((ret = rf__http_read(path, 0, 1, &one, &s->size)) < 0)
			goto fail;
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
		ret = rfrec_check_fields(ds);
	}
	if (!ret)
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
