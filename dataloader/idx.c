/* idx.c -- IDX files (LeCun's MNIST format), raw or gzip'd.
 *
 * An IDX file is a 4-byte magic (0x00, 0x00, dtype, ndim), ndim big-endian u32
 * dimensions, then the data, row-major. Only u8 data is accepted. A gzip'd file
 * (recognised by its 1f 8b magic) is inflated into memory; its decompressed size
 * must be exactly what the header says, and nothing but further gzip members may
 * follow the first one. A raw file stays on disk; its size must be exact. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset-impl.h"

#define IDX_MAX_DIMS (RF_DS_MAX_DIMS + 1)

struct idx_hdr {
	unsigned ndim;
	uint32_t dims[IDX_MAX_DIMS];
	uint64_t hdr_bytes;   /* 4 + 4*ndim */
	uint64_t data_bytes;  /* product of dims (u8) */
	uint64_t rec_bytes;   /* product of dims[1..] */
};

static void expect_str(char *buf, size_t len, unsigned expect_ndim)
{
	if (expect_ndim)
		snprintf(buf, len, "0x000008%02x (u8, %u dim%s)", expect_ndim, expect_ndim,
			 expect_ndim == 1 ? "" : "s");
	else
		snprintf(buf, len, "0x000008NN (u8, 1-%u dims)", IDX_MAX_DIMS);
}

static void dims_str(char *buf, size_t len, const struct idx_hdr *h)
{
	size_t n = 0;
	for (unsigned i = 0; i < h->ndim && n < len; i++) {
		int w = snprintf(buf + n, len - n, "%s%" PRIu32, i ? " x " : "", h->dims[i]);
		if (w < 0)
			return;
		n += (size_t)w;
	}
	if (n < len)
		snprintf(buf + n, len - n, " u8 after a %" PRIu64 "-byte header", h->hdr_bytes);
}

static int check_magic(const char *path, const uint8_t m[4], unsigned expect_ndim,
		       struct idx_hdr *h)
{
	uint32_t magic = rf__be32(m);
	enum rf_ds_dtype dt = (enum rf_ds_dtype)m[2];
	char exp[64];

	expect_str(exp, sizeof(exp), expect_ndim);
	if (m[0] || m[1])
		return rf__ds_fail(-EINVAL, path,
				   "offset 0: bad magic 0x%08" PRIx32 ", expected %s", magic, exp);
	if (!rf_ds_dtype_size(dt))
		return rf__ds_fail(-EINVAL, path,
				   "offset 0: bad magic 0x%08" PRIx32 " (unknown dtype 0x%02x), "
				   "expected %s", magic, m[2], exp);
	if (dt != RF_DS_DT_U8)
		return rf__ds_fail(-ENOTSUP, path,
				   "offset 2: dtype %s (0x%02x) in magic 0x%08" PRIx32 " not supported, "
				   "expected u8 (0x08): magic %s", rf_ds_dtype_name(dt), m[2], magic,
				   exp);
	if (m[3] == 0 || m[3] > IDX_MAX_DIMS || (expect_ndim && m[3] != expect_ndim))
		return rf__ds_fail(-EINVAL, path,
				   "offset 3: %u dims in magic 0x%08" PRIx32 ", expected %s",
				   m[3], magic, exp);
	h->ndim = m[3];
	h->hdr_bytes = 4 + 4ull * h->ndim;
	return 0;
}

static int check_dims(const char *path, const uint8_t *p, struct idx_hdr *h)
{
	uint64_t total = 1;

	for (unsigned i = 0; i < h->ndim; i++) {
		h->dims[i] = rf__be32(p + 4 * i);
		if (h->dims[i] == 0)
			return rf__ds_fail(-EINVAL, path,
					   "offset %u: dimension %u is 0, expected >= 1", 4 + 4 * i, i);
		total = rf__mul_sat(total, h->dims[i]);
	}
	if (total > RF__DS_MAX_BYTES)
		return rf__ds_fail(-EINVAL, path,
				   "offset 4: dimensions describe %" PRIu64 " bytes, expected at most %"
				   PRIu64, total, (uint64_t)RF__DS_MAX_BYTES);
	h->data_bytes = total;
	h->rec_bytes = total / h->dims[0];
	return 0;
}

/* ---- gzip ------------------------------------------------------------------------ */

struct gz {
	int fd;
	const char *path;
	z_stream zs;
	int zinit;
	int eof;          /* the file is read to its end */
	int member_end;   /* inflate reported the end of a gzip member */
	uint64_t in_read; /* compressed bytes read from the file */
	uint64_t out;     /* decompressed bytes produced */
	uint8_t in[1 << 16];
};

static uint64_t gz_consumed(const struct gz *g)
{
	return g->in_read - g->zs.avail_in;
}

static int gz_refill(struct gz *g)
{
	ssize_t r;

	if (g->zs.avail_in || g->eof)
		return 0;
	do
		r = read(g->fd, g->in, sizeof(g->in));
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return rf__ds_fail(-errno, g->path, "compressed offset %" PRIu64
				   ": read: %s", g->in_read, strerror(errno));
	if (r == 0)
		g->eof = 1;
	g->zs.next_in = g->in;
	g->zs.avail_in = (uInt)r;
	g->in_read += (uint64_t)r;
	return 0;
}

/* Inflate up to n bytes into dst. Returns the count produced (< n only when the
 * compressed data ended cleanly) or -errno with a message. */
static int64_t gz_read(struct gz *g, uint8_t *dst, size_t n)
{
	size_t done = 0;
	int ret;

	while (done < n) {
		size_t want = n - done;
		if (want > (1u << 30))
			want = 1u << 30;
		if ((ret = gz_refill(g)))
			return ret;
		if (g->member_end) {
			/* Only another gzip member may follow, as gzip(1) writes for
			 * concatenated files. */
			if (!g->zs.avail_in && g->eof)
				break;
			if (g->zs.next_in[0] != 0x1f ||
			    (g->zs.avail_in >= 2 && g->zs.next_in[1] != 0x8b) ||
			    (g->zs.avail_in < 2 && g->eof))
				return rf__ds_fail(-EINVAL, g->path,
						   "compressed offset %" PRIu64 ": %" PRIu64 " bytes of "
						   "trailing garbage after the gzip stream, expected end "
						   "of file", gz_consumed(g),
						   g->in_read - gz_consumed(g));
			if (inflateReset(&g->zs) != Z_OK)
				return rf__ds_fail(-EINVAL, g->path, "inflateReset failed");
			g->member_end = 0;
		}
		g->zs.next_out = dst + done;
		g->zs.avail_out = (uInt)want;
		ret = inflate(&g->zs, Z_NO_FLUSH);
		done += want - g->zs.avail_out;
		g->out += want - g->zs.avail_out;
		switch (ret) {
		case Z_STREAM_END:
			g->member_end = 1;
			break;
		case Z_OK:
			break;
		case Z_BUF_ERROR:
			if (!g->zs.avail_in && g->eof)
				return rf__ds_fail(-EINVAL, g->path,
						   "compressed offset %" PRIu64 ": gzip stream truncated "
						   "(file ends inside it after %" PRIu64 " decompressed "
						   "bytes), expected more compressed data",
						   g->in_read, g->out);
			break;
		case Z_MEM_ERROR:
			return rf__ds_fail(-ENOMEM, g->path, "inflate: out of memory");
		default: /* Z_DATA_ERROR, Z_NEED_DICT, Z_STREAM_ERROR */
			return rf__ds_fail(-EBADMSG, g->path,
					   "compressed offset %" PRIu64 ": corrupt gzip stream (%s) "
					   "after %" PRIu64 " decompressed bytes", gz_consumed(g),
					   g->zs.msg ? g->zs.msg : "inflate error", g->out);
		}
	}
	return (int64_t)done;
}

/* The IDX header from the decompressed stream into hdr, checked into h. */
static int gz_idx_header(struct gz *g, unsigned expect_ndim, uint8_t *hdr, struct idx_hdr *h)
{
	const char *path = g->path;
	char exp[64];
	int64_t n = gz_read(g, hdr, 4);
	int ret;

	if (n < 0)
		return (int)n;
	if (n == 0) {
		expect_str(exp, sizeof(exp), expect_ndim);
		return rf__ds_fail(-EINVAL, path,
				   "offset 0: decompressed data is empty, expected an IDX header "
				   "(magic %s)", exp);
	}
	if (n < 4) {
		expect_str(exp, sizeof(exp), expect_ndim);
		return rf__ds_fail(-EINVAL, path,
				   "offset %" PRId64 ": decompressed data ends at %" PRId64 " bytes "
				   "inside the 4-byte IDX magic, expected magic %s", n, n, exp);
	}
	if ((ret = check_magic(path, hdr, expect_ndim, h)))
		return ret;
	n = gz_read(g, hdr + 4, 4 * h->ndim);
	if (n < 0)
		return (int)n;
	if ((uint64_t)n < 4ull * h->ndim)
		return rf__ds_fail(-EINVAL, path,
				   "offset %" PRIu64 ": decompressed data ends at %" PRIu64 " bytes "
				   "inside the %" PRIu64 "-byte header (%u dims), expected the dimensions",
				   4 + (uint64_t)n, 4 + (uint64_t)n, h->hdr_bytes, h->ndim);
	return check_dims(path, hdr + 4, h);
}

/* First allocation for expected bytes: all at once when the gzip trailer's size
 * (mod 2^32) agrees with the header; otherwise 1 MiB, grown as data arrives, so a
 * lying header in a tiny file cannot make us allocate its claim up front. */
static uint64_t gz_first_cap(const struct rf_dataset_src *s, uint64_t expected)
{
	uint64_t cap = expected < (1u << 20) ? expected : (1u << 20);
	uint8_t t[4];

	if (s->size >= 18 && !rf__pread_full(s->fd, t, 4, s->size - 4, NULL) &&
	    rf__le32(t) == (uint32_t)expected)
		cap = expected;
	return cap;
}

/* Inflate the data after the header (hdr_bytes already in *bufp) up to expected
 * bytes; *bufp grows as needed. desc names the dims for messages. */
static int gz_data(struct gz *g, const struct rf_dataset_src *s, const struct idx_hdr *h,
		   uint64_t expected, const char *desc, uint8_t **bufp, uint64_t cap)
{
	uint64_t have = h->hdr_bytes;
	int64_t n;

	while (have < expected) {
		if (have == cap) {
			uint64_t ncap = cap * 2 < expected ? cap * 2 : expected;
			uint8_t *nb = realloc(*bufp, ncap);
			if (!nb)
				return rf__ds_fail(-ENOMEM, s->path, "out of memory "
						   "for %" PRIu64 " bytes", ncap);
			*bufp = nb;
			cap = ncap;
		}
		n = gz_read(g, *bufp + have, cap - have);
		if (n < 0)
			return (int)n;
		if (n == 0)
			break;
		have += (uint64_t)n;
	}
	if (have < expected)
		return rf__ds_fail(-EINVAL, s->path,
				   "offset %" PRIu64 ": data truncated: decompressed size %" PRIu64
				   " bytes, expected %" PRIu64 " (%s)", have, have, expected, desc);
	return 0;
}

/* Anything after the data is an error; count it (up to a bound) for the message. */
static int gz_trailing(struct gz *g, uint64_t expected, const char *desc)
{
	uint8_t scratch[4096];
	uint64_t extra = 0;
	int64_t n;

	for (;;) {
		n = gz_read(g, scratch, sizeof(scratch));
		if (n < 0)
			return (int)n;
		extra += (uint64_t)n;
		if (n == 0 || extra >= (1u << 30))
			break;
	}
	if (!extra)
		return 0;
	return rf__ds_fail(-EINVAL, g->path,
			   "offset %" PRIu64 ": %s%" PRIu64 " trailing bytes after the data: "
			   "decompressed size %s%" PRIu64 ", expected %" PRIu64 " (%s)",
			   expected, extra >= (1u << 30) ? "at least " : "", extra,
			   extra >= (1u << 30) ? "at least " : "", expected + extra, expected,
			   desc);
}

/* Header, size claim, data and nothing after it, into a new buffer *bufp. */
static int gz_load_into(struct gz *g, struct rf_dataset_src *s, unsigned expect_ndim,
			struct idx_hdr *h, uint8_t **bufp, uint64_t *expectedp)
{
	uint8_t hdr[4 + 4 * IDX_MAX_DIMS];
	uint64_t expected, cap;
	char desc[160];
	int ret = gz_idx_header(g, expect_ndim, hdr, h);

	if (ret)
		return ret;
	expected = h->hdr_bytes + h->data_bytes;
	dims_str(desc, sizeof(desc), h);
	/* deflate cannot expand more than 1032:1: fail early on a lying header */
	if (expected > rf__mul_sat(s->size, 1032) + 4096)
		return rf__ds_fail(-EINVAL, s->path,
				   "offset 4: header claims %" PRIu64 " bytes (%s), more than a %"
				   PRIu64 "-byte gzip file can hold, expected at most %" PRIu64,
				   expected, desc, s->size, s->size * 1032 + 4096);
	cap = gz_first_cap(s, expected);
	if (!(*bufp = rf__alloc_big(cap)))   /* the whole set, usually: huge pages */
		return rf__ds_fail(-ENOMEM, s->path, "out of memory for %" PRIu64
				   " bytes", cap);
	memcpy(*bufp, hdr, h->hdr_bytes);
	ret = gz_data(g, s, h, expected, desc, bufp, cap);
	if (!ret)
		ret = gz_trailing(g, expected, desc);
	*expectedp = expected;
	return ret;
}

static int load_gz(struct rf_dataset_src *s, unsigned expect_ndim, struct idx_hdr *h)
{
	struct gz *g = calloc(1, sizeof(*g));
	uint8_t *buf = NULL;
	uint64_t expected = 0;
	int ret;

	if (!g)
		return rf__ds_fail(-ENOMEM, s->path, "out of memory");
	g->fd = s->fd;
	g->path = s->path;
	if (inflateInit2(&g->zs, 16 + MAX_WBITS) != Z_OK) {
		ret = rf__ds_fail(-ENOMEM, s->path, "inflateInit2: out of memory");
		goto out;
	}
	g->zinit = 1;
	ret = gz_load_into(g, s, expect_ndim, h, &buf, &expected);
	if (ret)
		goto out;
	s->mem = buf;
	buf = NULL;
	s->compressed = 1;
	s->size = expected;
	close(s->fd);
	s->fd = -1;
out:
	if (g->zinit)
		inflateEnd(&g->zs);
	free(g);
	free(buf);
	return ret;
}

static int load_raw(struct rf_dataset_src *s, unsigned expect_ndim, struct idx_hdr *h)
{
	uint8_t hdr[4 + 4 * IDX_MAX_DIMS];
	uint64_t expected;
	char desc[160];
	int ret;

	if (s->size < 4) {
		char exp[64];
		expect_str(exp, sizeof(exp), expect_ndim);
		return rf__ds_fail(-EINVAL, s->path,
				   "offset %" PRIu64 ": file ends at %" PRIu64 " bytes inside the "
				   "4-byte IDX magic, expected magic %s", s->size, s->size, exp);
	}
	if ((ret = rf__pread_full(s->fd, hdr, 4, 0, NULL)))
		return rf__ds_fail(ret, s->path, "offset 0: read: %s", strerror(-ret));
	if ((ret = check_magic(s->path, hdr, expect_ndim, h)))
		return ret;
	if (s->size < h->hdr_bytes)
		return rf__ds_fail(-EINVAL, s->path,
				   "offset %" PRIu64 ": file ends at %" PRIu64 " bytes inside the %"
				   PRIu64 "-byte header (%u dims), expected the dimensions",
				   s->size, s->size, h->hdr_bytes, h->ndim);
	if ((ret = rf__pread_full(s->fd, hdr + 4, 4 * h->ndim, 4, NULL)))
		return rf__ds_fail(ret, s->path, "offset 4: read: %s", strerror(-ret));
	if ((ret = check_dims(s->path, hdr + 4, h)))
		return ret;
	expected = h->hdr_bytes + h->data_bytes;
	dims_str(desc, sizeof(desc), h);
	if (s->size < expected)
		return rf__ds_fail(-EINVAL, s->path,
				   "offset %" PRIu64 ": data truncated: file ends at %" PRIu64
				   " bytes, expected %" PRIu64 " (%s)", s->size, s->size, expected,
				   desc);
	if (s->size > expected)
		return rf__ds_fail(-EINVAL, s->path,
				   "offset %" PRIu64 ": %" PRIu64 " trailing bytes after the data: "
				   "file is %" PRIu64 " bytes, expected %" PRIu64 " (%s)", expected,
				   s->size - expected, s->size, expected, desc);
	return 0;
}

/* Open path into s, validate it, and fill the source's geometry. */
static int idx_load(struct rf_dataset_src *s, const char *path, unsigned expect_ndim,
		    struct idx_hdr *h)
{
	struct stat st;
	uint8_t m[2];
	int ret;

	s->fd = -1;
	if (!path)
		return rf__ds_fail(-EINVAL, path, "no path given");
	if ((ret = rf__ds_src_open(s, path, expect_ndim == 1 ? "an IDX labels file" :
				   expect_ndim == 3 ? "an IDX images file" : "an IDX file",
				   &st)) < 0)
		return ret;
	s->size = (uint64_t)st.st_size;
	if (s->size == 0) {
		char exp[64];
		expect_str(exp, sizeof(exp), expect_ndim);
		return rf__ds_fail(-EINVAL, path,
				   "offset 0: file is empty, expected an IDX header (magic %s)", exp);
	}
	if (s->size >= 2 && !rf__pread_full(s->fd, m, 2, 0, NULL) && m[0] == 0x1f && m[1] == 0x8b)
		ret = load_gz(s, expect_ndim, h);
	else
		ret = load_raw(s, expect_ndim, h);
	if (ret)
		return ret;
	s->data_offset = h->hdr_bytes;
	s->stride = h->rec_bytes;
	s->data_bytes = h->data_bytes;
	return 0;
}

static void set_record_shape(struct rf_dataset *ds, const struct idx_hdr *h)
{
	ds->count = h->dims[0];
	ds->dtype = RF_DS_DT_U8;
	ds->ndim = h->ndim - 1;
	for (unsigned i = 1; i < h->ndim; i++)
		ds->shape[i - 1] = h->dims[i];
	ds->payload_offset = 0;
	ds->payload_bytes = h->rec_bytes;
}

int rf_dataset_open_idx(struct rf_dataset *ds, const char *path, unsigned expect_ndim,
			unsigned flags)
{
	int aret = rf__ds_open_args(ds, flags, __func__);
	if (aret < 0)
		return aret;
	struct idx_hdr h = { 0 };
	int ret;

	memset(ds, 0, sizeof(*ds));
	ds->src[0].fd = ds->src[1].fd = -1;
	if (expect_ndim > IDX_MAX_DIMS)
		return rf__ds_fail(-EINVAL, path, "expect_ndim %u, expected 0..%u",
				   expect_ndim, IDX_MAX_DIMS);
	ds->kind = RF_DS_IDX_SINGLE;
	ds->nsrc = 1;
	ret = idx_load(&ds->src[0], path, expect_ndim, &h);
	if (ret) {
		rf_dataset_close(ds);
		return ret;
	}
	set_record_shape(ds, &h);
	return 0;
}

const char *rf_dataset_fmnist_name(unsigned test, unsigned labels)
{
	static const char *const names[2][2] = {
		{ "train-images-idx3-ubyte", "train-labels-idx1-ubyte" },
		{ "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte" },
	};

	return names[test != 0][labels != 0];
}

int rf_dataset_open_idx_pair(struct rf_dataset *ds, const char *images_path,
			     const char *labels_path, uint32_t num_classes,
			     unsigned flags)
{
	int aret = rf__ds_open_args(ds, flags, __func__);
	if (aret < 0)
		return aret;
	struct idx_hdr hi = { 0 }, hl = { 0 };
	int32_t max = -1;
	int ret;

	memset(ds, 0, sizeof(*ds));
	ds->src[0].fd = ds->src[1].fd = -1;
	if (num_classes > 256)
		return rf__ds_fail(-EINVAL, labels_path,
				   "%" PRIu32 " classes requested, expected <= 256 for u8 labels",
				   num_classes);
	ds->kind = RF_DS_IDX;
	ds->nsrc = 2;
	ret = idx_load(&ds->src[0], images_path, 3, &hi);
	if (ret)
		goto fail;
	ret = idx_load(&ds->src[1], labels_path, 1, &hl);
	if (ret)
		goto fail;
	if (hl.dims[0] != hi.dims[0]) {
		ret = rf__ds_fail(-EINVAL, labels_path,
				  "offset 4: %" PRIu32 " labels, expected %" PRIu32 " to match the "
				  "images in %s", hl.dims[0], hi.dims[0], images_path);
		goto fail;
	}
	set_record_shape(ds, &hi);
	ds->label_kind = RF_LABEL_U8;
	ds->label_src = RF_DS_SRC_LABEL;
	ds->label_offset = 0;
	ds->num_classes = num_classes;
	ret = rf__ds_scan(ds, 1, &max, NULL);
	if (ret)
		goto fail;
	if (!num_classes)
		ds->num_classes = (uint32_t)max + 1;
	return 0;
fail:
	rf_dataset_close(ds);
	return ret;
}
