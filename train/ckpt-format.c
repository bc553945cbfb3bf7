/* train/ckpt-format.c -- the checkpoint file format (layout: checkpoint.h): the
 * metadata's encoding, reading and checking a header step by step (fixed part,
 * header CRC, sizes, trailer, table), names for messages, and the ring transfers
 * both directions use. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt-impl.h"
#include "rf-internal.h"

/* ---- messages ------------------------------------------------------------------- */

/* What a non-regular file is, for the refusals ("is a FIFO"). */
static size_t rf__dtype_size(uint32_t dt)
{
	switch (dt) {
	case RF_CKPT_U8:
	case RF_CKPT_I8:
		return 1;
	case RF_CKPT_I16:
		return 2;
	case RF_CKPT_I32:
	case RF_CKPT_F32:
		return 4;
	case RF_CKPT_F64:
		return 8;
	}
	return 0;
}

const char *rf__ck_dtype_name(uint32_t dt, char *buf, size_t len)
{
	switch (dt) {
	case RF_CKPT_U8: return "u8";
	case RF_CKPT_I8: return "i8";
	case RF_CKPT_I16: return "i16";
	case RF_CKPT_I32: return "i32";
	case RF_CKPT_F32: return "f32";
	case RF_CKPT_F64: return "f64";
	}
	snprintf(buf, len, "0x%02x", (unsigned)dt);
	return buf;
}

const char *rf__ck_shape_str(uint32_t ndim, const uint64_t *shape, char *buf, size_t len)
{
	if (ndim == 0) {
		snprintf(buf, len, "scalar");
		return buf;
	}
	size_t o = 0;
	buf[0] = 0;
	for (uint32_t i = 0; i < ndim && i < 4 && o < len; i++) {
		int w = snprintf(buf + o, len - o, "%s%" PRIu64, i ? "x" : "", shape[i]);
		if (w < 0)
			break;
		o += (size_t)w;
	}
	return buf;
}

/* Bytes as text: printable ASCII as is, the rest as \xNN. */
static const char *rf__bytes_str(const uint8_t *p, size_t n, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = 0;
	for (size_t i = 0; i < n && o + 5 < len; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
			buf[o++] = (char)p[i];
		else
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", p[i]);
	}
	buf[o] = 0;
	return buf;
}

/* Elements times dtype size; 0 with *ok = 0 on overflow or a bad dtype/ndim. */
uint64_t rf__ck_expected_bytes(uint32_t dtype, uint32_t ndim, const uint64_t *shape, int *ok)
{
	size_t es = rf__dtype_size(dtype);
	*ok = es != 0 && ndim <= 4;
	if (!*ok)
		return 0;
	uint64_t n = es;
	for (uint32_t i = 0; i < ndim; i++) {
		if (shape[i] && n > UINT64_MAX / shape[i]) {
			*ok = 0;
			return 0;
		}
		n *= shape[i];
	}
	return n;
}

/* ---- transfers through the ring ---------------------------------------------- */

/* Transfer the segments with the ring's pump; 0 or -errno; on error *err_off and
 * *err_res say which chunk failed and how (when not NULL). */
int rf__ck_transfer(struct rf_ring *ring, int fd, enum rf_xfer_dir dir,
			const struct rf_io_seg *segs, unsigned nsegs, uint64_t *err_off,
			int64_t *err_res)
{
	struct rf_xfer_opts o = { .chunk = RF__CK_CHUNK, .depth = RF__CK_INFLIGHT };
	struct rf_xfer_result res;
	int ret = rf_xfer(ring, fd, dir, segs, nsegs, &o, &res);
	if (ret && err_off)
		*err_off = res.err_off;
	if (ret && err_res)
		*err_res = res.err_res;
	return ret;
}

/* Reads exactly len bytes at off: 0, -ENODATA at end of file, or -errno. */
static int rf__src_read(const struct rf__src *s, void *buf, uint64_t len, uint64_t off)
{
	if (s->ring) {
		struct rf_io_seg seg = { buf, len, off };
		return rf__ck_transfer(s->ring, s->fd, RF_XFER_READ, &seg, 1, NULL, NULL);
	}
	uint64_t done = 0;
	while (done < len) {
		ssize_t r = pread(s->fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -ENODATA;
		done += (uint64_t)r;
	}
	return 0;
}

void rf__ck_meta_encode(uint8_t *p, const struct rf_ckpt_meta *m)
{
	memcpy(p + 32, m->model, strnlen(m->model, sizeof(m->model)));
	rf__put64(p + 64, m->epoch);
	rf__put64(p + 72, m->seed);
	rf__put64(p + 80, m->step);
	uint64_t lr;
	memcpy(&lr, &m->lr, 8);
	rf__put64(p + 88, lr);
	rf__put32(p + 96, m->batch_size);
	rf__put32(p + 100, m->devices);
	rf__put32(p + 104, m->extra_len);
	memcpy(p + 112, m->extra, m->extra_len);
}

static void rf__meta_decode(struct rf_ckpt_meta *m, const uint8_t *p)
{
	memset(m, 0, sizeof(*m));
	memcpy(m->model, p + 32, sizeof(m->model) - 1);
	m->epoch = rf__get64(p + 64);
	m->seed = rf__get64(p + 72);
	m->step = rf__get64(p + 80);
	uint64_t lr = rf__get64(p + 88);
	memcpy(&m->lr, &lr, 8);
	m->batch_size = rf__get32(p + 96);
	m->devices = rf__get32(p + 100);
	m->extra_len = rf__get32(p + 104);
	memcpy(m->extra, p + 112, sizeof(m->extra));
}

/* Read and check everything but the tensor data: magic, version, sizes, header CRC,
 * file size, trailer, table entries. Fills *h (h->e malloc'd on success). */
/* Step 1: the fixed part: magic, version, header size for the tensor count. */
static int rf__read_fixed(const struct rf__src *src, const char *path, uint64_t fsize,
			  struct rf__hdr *h, uint8_t *fixed)
{
	char b1[64];
	if (fsize == 0)
		return rf__fail(-ENODATA,
				"%s: truncated checkpoint: file is empty (the header alone is at least %u bytes)",
				path, (unsigned)rf__header_size(0));
	uint64_t first = fsize < RF__CK_FIXED ? fsize : RF__CK_FIXED;
	int ret = rf__src_read(src, fixed, first, 0);
	if (ret < 0)
		return rf__fail(ret, "%s: reading the header (%" PRIu64 " bytes at offset 0): %s",
				path, first, strerror(-ret));
	size_t mlen = first < 8 ? (size_t)first : 8;
	if (memcmp(fixed, RF__CK_MAGIC, mlen) != 0)
		return rf__fail(-ENOEXEC,
				"%s: not a ringflow checkpoint: starts with \"%s\", expected magic \"%s\"",
				path, rf__bytes_str(fixed, mlen, b1, sizeof(b1)), RF__CK_MAGIC);
	if (fsize < RF__CK_FIXED)
		return rf__fail(-ENODATA,
				"%s: truncated checkpoint: file is %" PRIu64 " bytes, shorter than the %u-byte fixed header",
				path, fsize, RF__CK_FIXED);
	h->version = rf__get32(fixed + 8);
	if (h->version > RF_CKPT_VERSION)
		return rf__fail(-EPROTONOSUPPORT,
				"%s: checkpoint format version %" PRIu32 " is newer than this ringflow reads (version %d)",
				path, h->version, RF_CKPT_VERSION);
	if (h->version == 0)
		return rf__fail(-EBADMSG, "%s: corrupt checkpoint: format version 0 (expected %d)",
				path, RF_CKPT_VERSION);
	uint32_t hs = rf__get32(fixed + 12);
	h->ntensors = rf__get32(fixed + 24);
	if (h->ntensors > RF_CKPT_MAX_TENSORS || hs != rf__header_size(h->ntensors))
		return rf__fail(-EBADMSG,
				"%s: corrupt checkpoint header: header size %" PRIu32 " does not fit %" PRIu32
				" tensors (expected %" PRIu64 ", at most %u tensors)",
				path, hs, h->ntensors, rf__header_size(h->ntensors > RF_CKPT_MAX_TENSORS ? 0 : h->ntensors),
				RF_CKPT_MAX_TENSORS);
	h->header_size = hs;
	if (fsize < h->header_size)
		return rf__fail(-ENODATA,
				"%s: truncated checkpoint: file is %" PRIu64 " bytes, its header alone is %" PRIu64,
				path, fsize, h->header_size);
	return 0;
}

/* Step 2: the whole header into hb (the fixed part is already there), its CRC. */
static int rf__read_rest(const struct rf__src *src, const char *path, struct rf__hdr *h,
			 uint8_t *hb)
{
	if (h->header_size > RF__CK_FIXED) {
		int ret = rf__src_read(src, hb + RF__CK_FIXED, h->header_size - RF__CK_FIXED, RF__CK_FIXED);
		if (ret == -ENODATA)
			return rf__fail(ret, "%s: truncated checkpoint: end of file inside the header (%" PRIu64 " bytes)",
					path, h->header_size);
		if (ret < 0)
			return rf__fail(ret, "%s: reading the header (%" PRIu64 " bytes): %s",
					path, h->header_size, strerror(-ret));
	}
	uint64_t crc_len = h->header_size - 8;
	uint32_t stored = rf__get32(hb + crc_len), computed = rf__crc(hb, crc_len);
	if (stored != computed)
		return rf__fail(-EBADMSG,
				"%s: corrupt checkpoint header: CRC32 of bytes 0-%" PRIu64 " is 0x%08" PRIx32
				", header says 0x%08" PRIx32, path, crc_len - 1, computed, stored);
	/* the u32 after the CRC is the one reserved field the CRC does not cover: zero, as
	 * the writer leaves it (else a flipped bit there loads unseen) */
	if (rf__get32(hb + crc_len + 4) != 0)
		return rf__fail(-EBADMSG, "%s: corrupt checkpoint header: the reserved u32 after "
				"the header CRC (byte %" PRIu64 ") is 0x%08" PRIx32 ", expected 0",
				path, crc_len + 4, rf__get32(hb + crc_len + 4));
	h->header_crc = stored;
	return 0;
}

/* Step 3: the metadata, and the file's size against the header's. */
static int rf__check_sizes(const char *path, uint64_t fsize, struct rf__hdr *h, const uint8_t *hb)
{
	h->file_size = rf__get64(hb + 16);
	rf__meta_decode(&h->meta, hb);
	if (fsize < h->file_size)
		return rf__fail(-ENODATA,
				"%s: truncated checkpoint: file is %" PRIu64 " bytes, header says %" PRIu64,
				path, fsize, h->file_size);
	if (fsize > h->file_size)
		return rf__fail(-EBADMSG,
				"%s: corrupt checkpoint: file is %" PRIu64 " bytes, header says %" PRIu64
				" (data after the end)", path, fsize, h->file_size);
	if (h->file_size < h->header_size + RF__CK_TRAILER || h->meta.extra_len > RF_CKPT_EXTRA_MAX ||
	    memchr(hb + 32, 0, 32) == NULL)
		return rf__fail(-EBADMSG,
				"%s: corrupt checkpoint header: file size %" PRIu64 ", extra_len %" PRIu32
				" or model name out of range", path, h->file_size, h->meta.extra_len);
	h->trailer_off = h->file_size - RF__CK_TRAILER;
	return 0;
}

/* Step 4: the commit marker. */
static int rf__read_trailer(const struct rf__src *src, const char *path, const struct rf__hdr *h)
{
	uint8_t tr[RF__CK_TRAILER];
	char b1[64];
	int ret = rf__src_read(src, tr, RF__CK_TRAILER, h->trailer_off);
	if (ret < 0)
		return rf__fail(ret, "%s: reading the trailer at offset %" PRIu64 ": %s",
				path, h->trailer_off, strerror(-ret));
	if (memcmp(tr, RF__CK_END_MAGIC, 8) != 0 || rf__get32(tr + 28) != rf__crc(tr, 28) ||
	    rf__get64(tr + 8) != h->file_size || rf__get32(tr + 16) != h->header_crc)
		return rf__fail(-EBADMSG,
				"%s: corrupt checkpoint: no valid commit marker at offset %" PRIu64
				" (expected \"%s\" with file size %" PRIu64 " and header CRC 0x%08" PRIx32
				"; found \"%s\")", path, h->trailer_off, RF__CK_END_MAGIC, h->file_size,
				h->header_crc, rf__bytes_str(tr, 8, b1, sizeof(b1)));
	return 0;
}

static void rf__entry_decode(struct rf__entry *e, const uint8_t *p)
{
	memcpy(e->name, p, 64);
	e->name[RF_CKPT_NAME_MAX] = 0;
	e->dtype = rf__get32(p + 64);
	e->ndim = rf__get32(p + 68);
	for (int d = 0; d < 4; d++)
		e->shape[d] = rf__get64(p + 72 + 8 * d);
	e->offset = rf__get64(p + 104);
	e->nbytes = rf__get64(p + 112);
	e->crc = rf__get32(p + 120);
}

int rf__names_init(struct rf__names *x, uint32_t n)
{
	uint32_t cap = 16;

	while (cap < 2 * (uint64_t)n)
		cap *= 2;
	x->name = calloc(cap, sizeof(*x->name));
	x->idx = malloc(cap * sizeof(*x->idx));
	x->mask = cap - 1;
	if (!x->name || !x->idx) {
		rf__names_free(x);
		return -ENOMEM;
	}
	return 0;
}

void rf__names_free(struct rf__names *x)
{
	free(x->name);
	free(x->idx);
	x->name = NULL;
	x->idx = NULL;
}

/* name's slot: where it is, or the empty one where it would go */
static uint32_t rf__names_slot(const struct rf__names *x, const char *name)
{
	uint32_t s = (uint32_t)rf__fnv(RF__FNV0, name, strlen(name)) & x->mask;

	while (x->name[s] && strcmp(x->name[s], name) != 0)
		s = (s + 1) & x->mask;
	return s;
}

int64_t rf__names_put(struct rf__names *x, const char *name, uint32_t idx)
{
	uint32_t s = rf__names_slot(x, name);

	if (x->name[s])
		return x->idx[s];
	x->name[s] = name;
	x->idx[s] = idx;
	return -1;
}

int64_t rf__names_find(const struct rf__names *x, const char *name)
{
	uint32_t s = rf__names_slot(x, name);

	return x->name[s] ? (int64_t)x->idx[s] : -1;
}

/* What is wrong with table entry i (raw bytes p, decoded h->e[i]), or NULL; its name
 * joins seen. */
static const char *rf__entry_check(const struct rf__hdr *h, uint32_t i, const uint8_t *p,
				   uint64_t prev_end, struct rf__names *seen)
{
	const struct rf__entry *e = &h->e[i];
	if (!memchr(p, 0, 64) || p[0] == 0)
		return "name empty or not terminated";
	int ok;
	uint64_t want = rf__ck_expected_bytes(e->dtype, e->ndim, e->shape, &ok);
	if (!ok)
		return rf__dtype_size(e->dtype) == 0 ? "unknown dtype"
		       : e->ndim > 4		     ? "more than 4 dimensions"
						     : "shape's byte count overflows 64 bits";
	if (want != e->nbytes)
		return "byte count does not match dtype and shape";
	if (e->offset % RF__CK_ALIGN || e->offset < prev_end)
		return "data offset unaligned or overlapping";
	if (e->offset > h->trailer_off || e->nbytes > h->trailer_off - e->offset)
		return "data runs past the trailer";
	if (rf__names_put(seen, e->name, i) >= 0)
		return "duplicate name";
	return NULL;
}

/* Step 5: the tensor table into h->e (freed again on error). */
static int rf__read_table(const char *path, struct rf__hdr *h, const uint8_t *hb)
{
	struct rf__names seen;

	h->e = calloc(h->ntensors ? h->ntensors : 1, sizeof(*h->e));
	if (!h->e || rf__names_init(&seen, h->ntensors) < 0) {
		free(h->e);
		h->e = NULL;
		return rf__fail(-ENOMEM, "%s: out of memory", path);
	}
	uint64_t prev_end = rf__align(h->header_size, RF__CK_ALIGN);
	for (uint32_t i = 0; i < h->ntensors; i++) {
		const uint8_t *p = hb + RF__CK_FIXED + (uint64_t)RF__CK_ENTRY * i;
		struct rf__entry *e = &h->e[i];
		rf__entry_decode(e, p);
		const char *why = rf__entry_check(h, i, p, prev_end, &seen);
		if (why) {
			char nb[80];
			int ret = rf__fail(-EBADMSG,
					   "%s: corrupt checkpoint header: tensor entry %" PRIu32 " ('%s', offset %"
					   PRIu64 ", %" PRIu64 " bytes): %s", path, i,
					   rf__bytes_str((const uint8_t *)e->name, strnlen(e->name, 64), nb, sizeof(nb)),
					   e->offset, e->nbytes, why);
			free(h->e);
			h->e = NULL;
			rf__names_free(&seen);
			return ret;
		}
		prev_end = e->offset + e->nbytes;
	}
	rf__names_free(&seen);
	return 0;
}

/* Read and check the header, trailer and table of a checkpoint of fsize bytes. */
int rf__ck_read_header(const struct rf__src *src, const char *path, uint64_t fsize,
			   struct rf__hdr *h)
{
	uint8_t fixed[RF__CK_FIXED];
	memset(h, 0, sizeof(*h));
	int ret = rf__read_fixed(src, path, fsize, h, fixed);
	if (ret < 0)
		return ret;
	uint8_t *hb = malloc(h->header_size);
	if (!hb)
		return rf__fail(-ENOMEM, "%s: out of memory", path);
	memcpy(hb, fixed, RF__CK_FIXED);
	ret = rf__read_rest(src, path, h, hb);
	if (ret == 0)
		ret = rf__check_sizes(path, fsize, h, hb);
	if (ret == 0)
		ret = rf__read_trailer(src, path, h);
	if (ret == 0)
		ret = rf__read_table(path, h, hb);
	free(hb);
	return ret;
}

