/* checkpoint.c -- checkpoints through the ring (format: see checkpoint.h).
 *
 * Save: validate, lay out the file, write the header and every tensor to PATH.tmp
 * in chunks of up to 1 MiB with up to 32 writes in flight, then the trailer (the
 * commit marker), fsync, rename over PATH, fsync the directory. Load: read the fixed
 * header, check magic, version, sizes, header CRC, file size and trailer, match the
 * caller's tensors by name, then read the data straight into the caller's buffers
 * (chunks, several in flight) and check each tensor's CRC.
 *
 * The I/O helpers keep their state on the heap: if turning the ring fails while
 * requests are in flight (it should not), the state is leaked rather than freed
 * under a request that may still complete. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint.h"
#include "rf-internal.h"
#include "ring-io.h"

#define RF__CK_MAGIC "RFCKPTv1"
#define RF__CK_END_MAGIC "RFCKEND1"
#define RF__CK_FIXED 384u       /* bytes before the table */
#define RF__CK_ENTRY 128u       /* bytes per table entry */
#define RF__CK_TRAILER 32u
#define RF__CK_ALIGN 4096u
#define RF__CK_CHUNK (1u << 20) /* bytes per read/write request */
#define RF__CK_INFLIGHT 32u     /* requests in flight per transfer */

/* ---- little-endian fields ------------------------------------------------------ */

static void rf__put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void rf__put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t rf__get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t rf__get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static uint64_t rf__align(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static uint32_t rf__crc(const void *p, uint64_t len)
{
	return (uint32_t)crc32_z(0L, (const Bytef *)p, (z_size_t)len);
}

static uint64_t rf__header_size(uint32_t n)
{
	return RF__CK_FIXED + (uint64_t)RF__CK_ENTRY * n + 8;
}

/* ---- messages ------------------------------------------------------------------- */

/* What a non-regular file is, for the refusals ("is a FIFO"). */
static const char *rf__ftype(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
	       : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* Clear O_NONBLOCK once the file is known to be regular: an io_uring read or write
 * on a non-blocking file returns -EAGAIN instead of waiting. */
static int rf__set_blocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

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

static const char *rf__dtype_name(uint32_t dt, char *buf, size_t len)
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

static const char *rf__shape_str(uint32_t ndim, const uint64_t *shape, char *buf, size_t len)
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
static uint64_t rf__expected_bytes(uint32_t dtype, uint32_t ndim, const uint64_t *shape, int *ok)
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
static int rf__transfer(struct rf_ring *ring, int fd, enum rf_xfer_dir dir,
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

/* A source of bytes for the header checks: the ring (load) or pread (probe). */
struct rf__src {
	struct rf_ring *ring; /* NULL: pread */
	int fd;
};

/* Reads exactly len bytes at off: 0, -ENODATA at end of file, or -errno. */
static int rf__src_read(const struct rf__src *s, void *buf, uint64_t len, uint64_t off)
{
	if (s->ring) {
		struct rf_io_seg seg = { buf, len, off };
		return rf__transfer(s->ring, s->fd, RF_XFER_READ, &seg, 1, NULL, NULL);
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

/* ---- the header ------------------------------------------------------------------- */

struct rf__entry {
	char name[RF_CKPT_NAME_MAX + 1];
	uint32_t dtype, ndim;
	uint64_t shape[4];
	uint64_t offset, nbytes;
	uint32_t crc;
	int used;
};

struct rf__hdr {
	uint32_t version, ntensors;
	uint64_t header_size, file_size, trailer_off;
	uint32_t header_crc;
	struct rf_ckpt_meta meta;
	struct rf__entry *e; /* ntensors, malloc'd */
};

static void rf__meta_encode(uint8_t *p, const struct rf_ckpt_meta *m)
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

/* What is wrong with table entry i (raw bytes p, decoded h->e[i]), or NULL. */
static const char *rf__entry_check(const struct rf__hdr *h, uint32_t i, const uint8_t *p,
				   uint64_t prev_end)
{
	const struct rf__entry *e = &h->e[i];
	if (!memchr(p, 0, 64) || p[0] == 0)
		return "name empty or not terminated";
	int ok;
	uint64_t want = rf__expected_bytes(e->dtype, e->ndim, e->shape, &ok);
	if (!ok)
		return "bad dtype or ndim";
	if (want != e->nbytes)
		return "byte count does not match dtype and shape";
	if (e->offset % RF__CK_ALIGN || e->offset < prev_end)
		return "data offset unaligned or overlapping";
	if (e->offset > h->trailer_off || e->nbytes > h->trailer_off - e->offset)
		return "data runs past the trailer";
	for (uint32_t j = 0; j < i; j++)
		if (strcmp(h->e[j].name, e->name) == 0)
			return "duplicate name";
	return NULL;
}

/* Step 5: the tensor table into h->e (freed again on error). */
static int rf__read_table(const char *path, struct rf__hdr *h, const uint8_t *hb)
{
	h->e = calloc(h->ntensors ? h->ntensors : 1, sizeof(*h->e));
	if (!h->e)
		return rf__fail(-ENOMEM, "%s: out of memory", path);
	uint64_t prev_end = rf__align(h->header_size, RF__CK_ALIGN);
	for (uint32_t i = 0; i < h->ntensors; i++) {
		const uint8_t *p = hb + RF__CK_FIXED + (uint64_t)RF__CK_ENTRY * i;
		struct rf__entry *e = &h->e[i];
		rf__entry_decode(e, p);
		const char *why = rf__entry_check(h, i, p, prev_end);
		if (why) {
			char nb[80];
			int ret = rf__fail(-EBADMSG,
					   "%s: corrupt checkpoint header: tensor entry %" PRIu32 " ('%s', offset %"
					   PRIu64 ", %" PRIu64 " bytes): %s", path, i,
					   rf__bytes_str((const uint8_t *)e->name, strnlen(e->name, 64), nb, sizeof(nb)),
					   e->offset, e->nbytes, why);
			free(h->e);
			h->e = NULL;
			return ret;
		}
		prev_end = e->offset + e->nbytes;
	}
	return 0;
}

/* Read and check the header, trailer and table of a checkpoint of fsize bytes. */
static int rf__read_header(const struct rf__src *src, const char *path, uint64_t fsize,
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

/* ---- arguments ------------------------------------------------------------------ */

static int rf__check_blobs(const char *path, const struct rf_ckpt_blob *b, unsigned n, int load)
{
	if (n && !b)
		return rf__fail(-EINVAL, "%s: %u tensors but no blob array", path, n);
	if (n > RF_CKPT_MAX_TENSORS)
		return rf__fail(-EINVAL, "%s: %u tensors, at most %u", path, n,
				RF_CKPT_MAX_TENSORS);
	for (unsigned i = 0; i < n; i++) {
		char d1[16], s1[96];
		if (!b[i].name || !b[i].name[0] || strlen(b[i].name) > RF_CKPT_NAME_MAX)
			return rf__fail(-EINVAL, "%s: tensor %u: name %s (1 to %d bytes)",
					path, i, b[i].name ? "empty or too long" : "is NULL", RF_CKPT_NAME_MAX);
		int ok;
		uint64_t want = rf__expected_bytes(b[i].dtype, b[i].ndim, b[i].shape, &ok);
		if (!ok)
			return rf__fail(-EINVAL, "%s: tensor %s: dtype %s or ndim %u not supported",
					path, b[i].name, rf__dtype_name(b[i].dtype, d1, sizeof(d1)), b[i].ndim);
		if (want != b[i].nbytes)
			return rf__fail(-EINVAL,
					"%s: tensor %s: nbytes %" PRIu64 ", but %s %s is %" PRIu64 " bytes",
					path, b[i].name, b[i].nbytes, rf__dtype_name(b[i].dtype, d1, sizeof(d1)),
					rf__shape_str(b[i].ndim, b[i].shape, s1, sizeof(s1)), want);
		if (want && !b[i].data)
			return rf__fail(-EINVAL, "%s: tensor %s: data is NULL", path, b[i].name);
		for (unsigned j = 0; j < i; j++)
			if (strcmp(b[i].name, b[j].name) == 0)
				return rf__fail(-EINVAL, "%s: tensor name %s given twice", path,
						b[i].name);
	}
	(void)load;
	return 0;
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
		if (rf_ring_in_callback(*ring) || rf_ring_run_until(*ring, rf__true, NULL, 0) < 0)
			return rf__fail(-EDEADLK,
					"%s: checkpoint I/O called from inside a ring callback "
					"(the ring cannot be turned from there)", path);
		return 0;
	}
	int ret = rf_ring_create(ring, NULL);
	if (ret < 0)
		return rf__fail(ret, "%s: cannot create a ring: %s", path, strerror(-ret));
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
	rf__meta_encode(hb, meta);
	uint32_t hcrc = rf__crc(hb, im->hsize - 8);
	rf__put32(hb + im->hsize - 8, hcrc);
	memset(tr, 0, RF__CK_TRAILER);
	memcpy(tr, RF__CK_END_MAGIC, 8);
	rf__put64(tr + 8, im->file_size);
	rf__put32(tr + 16, hcrc);
	rf__put32(tr + 28, rf__crc(tr, 28));
}

/* Open PATH.tmp for writing: without blocking (a FIFO there would block open()
 * until a reader came), and only a regular file; one that is not is left alone.
 * Returns the fd (blocking again) or -errno; *created says whether tmp is ours. */
static int rf__open_tmp(const char *path, const char *tmp, int *created)
{
	struct stat st;
	*created = 0;
	if (stat(tmp, &st) == 0 && !S_ISREG(st.st_mode))
		return rf__fail(S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
				"%s: cannot create %s: it is %s, expected a regular file or "
				"nothing; previous checkpoint left as it was", path, tmp,
				rf__ftype(st.st_mode));
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0644);
	if (fd < 0)
		return rf__fail(-errno, "%s: cannot create %s: %s", path, tmp, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return rf__fail(-EINVAL, "%s: cannot create %s: not a regular file; previous "
				"checkpoint left as it was", path, tmp);
	}
	*created = 1;
	int ret = rf__set_blocking(fd);
	if (ret < 0) {
		close(fd);
		return rf__fail(ret, "%s: fcntl of %s: %s", path, tmp, strerror(-ret));
	}
	return fd;
}

/* Header and data, then (only once they are written) the trailer, then fsync. */
static int rf__write_image(struct rf_ring *ring, const char *path, const char *tmp, int fd,
			   const struct rf__image *im)
{
	uint64_t eoff = 0;
	int64_t eres = 0;
	int ret = rf__transfer(ring, fd, RF_XFER_WRITE, im->segs, im->nsegs, &eoff, &eres);
	if (ret == 0) {
		struct rf_io_seg ts = { (void *)im->tr, RF__CK_TRAILER, im->trailer_off };
		ret = rf__transfer(ring, fd, RF_XFER_WRITE, &ts, 1, &eoff, &eres);
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

/* Write PATH.tmp completely (removed again on error). */
static int rf__save(struct rf_ring *ring, const char *path, const char *tmp,
		    const struct rf_ckpt_meta *meta, const struct rf_ckpt_blob *b, unsigned n)
{
	struct rf__image im = { .hsize = rf__header_size(n) };
	int ret, fd = -1, created = 0;
	im.hb = calloc(1, im.hsize);
	im.segs = calloc((size_t)n + 1, sizeof(*im.segs));
	if (!im.hb || !im.segs) {
		ret = rf__fail(-ENOMEM, "%s: out of memory", path);
		goto out;
	}
	rf__seal(&im, meta, n, rf__layout(&im, b, n));
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
	char *dir = strdup(path);
	if (!dir)
		return -ENOMEM;
	char *slash = strrchr(dir, '/');
	const char *d = dir;
	if (!slash)
		d = ".";
	else if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
	int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret = dfd < 0 ? -errno : rf_ring_fsync_wait(ring, dfd, 0);
	if (dfd >= 0)
		close(dfd);
	free(dir);
	return ret;
}

int rf_ckpt_save(struct rf_ring *ring, const char *path, const struct rf_ckpt_meta *meta,
		 const struct rf_ckpt_blob *blobs, unsigned n)
{
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
	ret = rf__save(ring, path, tmp, meta, blobs, n); /* removes tmp on error */
	if (ret < 0) {
		/* nothing more: the previous file at path was never touched */
	} else if (rename(tmp, path) < 0) {
		ret = -errno;
		rf__fail(ret, "%s: rename from %s: %s; previous checkpoint left as it was",
			 path, tmp, strerror(-ret));
		unlink(tmp);
	} else {
		ret = rf__fsync_dir(ring, path);
		if (ret < 0)
			rf__fail(ret, "%s: written and renamed, but fsync of its directory "
				 "failed: %s", path, strerror(-ret));
	}
	if (own)
		rf_ring_destroy(ring);
	free(tmp);
	return ret;
}

/* ---- load --------------------------------------------------------------------------- */

/* Match the caller's blobs to the file's table: which[i] is blob i's entry. Every
 * file tensor must be asked for, with the same dtype and shape. */
static int rf__match_blobs(const char *path, struct rf__hdr *h, const struct rf_ckpt_blob *b,
			   unsigned n, int *which)
{
	char d1[16], d2[16], s1[96], s2[96];
	for (unsigned i = 0; i < n; i++) {
		uint32_t j;
		for (j = 0; j < h->ntensors; j++)
			if (strcmp(h->e[j].name, b[i].name) == 0)
				break;
		if (j == h->ntensors)
			return rf__fail(-ESTALE,
					"%s: tensor %s: missing from the checkpoint (it has %" PRIu32
					" tensors, %u expected)", path, b[i].name, h->ntensors, n);
		struct rf__entry *e = &h->e[j];
		if (e->dtype != b[i].dtype)
			return rf__fail(-ESTALE, "%s: tensor %s: dtype %s in file, expected %s",
					path, b[i].name, rf__dtype_name(e->dtype, d1, sizeof(d1)),
					rf__dtype_name(b[i].dtype, d2, sizeof(d2)));
		int same = e->ndim == b[i].ndim;
		for (uint32_t d = 0; same && d < e->ndim; d++)
			same = e->shape[d] == b[i].shape[d];
		if (!same)
			return rf__fail(-ESTALE, "%s: tensor %s: shape %s in file, expected %s",
					path, b[i].name, rf__shape_str(e->ndim, e->shape, s1, sizeof(s1)),
					rf__shape_str(b[i].ndim, b[i].shape, s2, sizeof(s2)));
		e->used = 1;
		which[i] = (int)j;
	}
	for (uint32_t j = 0; j < h->ntensors; j++)
		if (!h->e[j].used)
			return rf__fail(-ESTALE,
					"%s: checkpoint has tensor %s (%s %s) that was not expected (%" PRIu32
					" tensors in file, %u expected)", path, h->e[j].name,
					rf__dtype_name(h->e[j].dtype, d1, sizeof(d1)),
					rf__shape_str(h->e[j].ndim, h->e[j].shape, s1, sizeof(s1)),
					h->ntensors, n);
	return 0;
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
	int ret = rf__transfer(src->ring, src->fd, RF_XFER_READ, segs, ns, &eoff, &eres);
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
	int ret = rf__read_header(src, path, fsize, &h);
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
	/* O_NONBLOCK: open() of a FIFO would block until a writer came. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT)
			return rf__fail(-ENOENT, "%s: no such checkpoint file", path);
		return rf__fail(-e, "%s: cannot open checkpoint: %s", path, strerror(e));
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return rf__fail(-e, "%s: fstat: %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return rf__fail(-ENOEXEC, "%s: not a ringflow checkpoint: not a regular "
				"file (%s)", path, rf__ftype(st.st_mode));
	}
	int ret = rf__set_blocking(fd);
	if (ret < 0) {
		close(fd);
		return rf__fail(ret, "%s: fcntl: %s", path, strerror(-ret));
	}
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
	int ret = rf__read_header(&src, path, size, &h);
	close(fd);
	if (ret < 0)
		return ret;
	free(h.e);
	*meta = h.meta;
	return (int)h.ntensors;
}
