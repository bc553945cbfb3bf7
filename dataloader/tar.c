/* tar.c -- a tar archive's regular files listed by one streaming scan of its headers
 * (512-byte blocks read with pread, or from a buffer), and WebDataset's samples made
 * of them. The formats read and the refusals: tar-impl.h. The index file that saves
 * a second scan: tar-index.c. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset-impl.h"
#include "tar-impl.h"

#define BLK RF__TAR_BLOCK

/* Header fields (POSIX ustar; GNU's differ only past the magic). */
enum {
	H_NAME = 0, H_SIZE = 124, H_CHKSUM = 148, H_TYPE = 156, H_MAGIC = 257,
	H_PREFIX = 345, H_GNU_ISEXT = 482, H_SPARSE_ISEXT = 504,
};

/* The scan's state: the members so far, and what the extended headers before the
 * next member said about it. */
struct scan {
	struct rf__tar *t;
	struct rf__tar_member *m;   /* m[i].name holds an offset into names until the end */
	size_t n, cap;
	char *names;
	size_t names_n, names_cap;
	uint8_t *ext;               /* an extended header's data */
	size_t ext_cap;
	/* for the next member */
	char long_name[RF__TAR_NAME_MAX + 2];   /* 'L' */
	size_t long_len;
	int has_long;
	char pax_path[RF__TAR_NAME_MAX + 1];    /* 'x' path= */
	size_t pax_len;
	int has_pax_path;
	uint64_t pax_size;                      /* 'x' size= */
	int has_pax_size;
	int sparse;                             /* 'x' GNU.sparse.* */
	const uint8_t *after;                   /* the block after this header, if read */
};

/* "FILE: offset AT: <fmt>" as the thread's message; returns code. */
static int RF__PRINTF(4, 5) tar_fail(const struct scan *s, int code, uint64_t at,
				     const char *fmt, ...)
{
	char msg[RF__DS_MSG_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rf__fail(code, "%s: offset %" PRIu64 ": %s", s->t->path, at, msg);
}

int rf__tar_read_at(void *ctx, uint64_t off, void *buf, size_t n)
{
	const struct rf__tar *t = ctx;

	if (off > t->size || n > t->size - off)
		return -EIO;
	if (!n)
		return 0;
	if (t->has_fd)
		return rf__pread_full(t->fd, buf, n, off, NULL);
	if (!t->mem)
		return -EBADF;
	memcpy(buf, t->mem + off, n);
	return 0;
}

static int tar_read(const struct scan *s, uint64_t at, uint64_t off, void *buf, size_t n)
{
	int ret = rf__tar_read_at(s->t, off, buf, n);
	if (ret)
		return tar_fail(s, ret, at, "cannot read %zu bytes at %" PRIu64 ": %s", n, off,
				strerror(-ret));
	return 0;
}

static int is_zero(const uint8_t *b)
{
	for (size_t i = 0; i < BLK; i++)
		if (b[i])
			return 0;
	return 1;
}

/* A numeric field: octal digits after optional spaces, ended by a NUL or a space or
 * the field's end, nothing but NULs and spaces after them; or GNU's base-256 (the
 * first byte's top bit set, its next bit the sign). 0, -1 (not a number), -2 (a
 * negative base-256 value) or -3 (above 2^63). */
static int tar_num(const uint8_t *f, size_t len, uint64_t *v)
{
	uint64_t x = 0;
	size_t i = 0, digits = 0;

	if (f[0] & 0x80) {
		if (f[0] & 0x40)
			return -2;
		x = f[0] & 0x3f;
		for (i = 1; i < len; i++) {
			if (x >> 55)
				return -3;
			x = x << 8 | f[i];
		}
		*v = x;
		return 0;
	}
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
		if (x >> 60)
			return -3;
		x = x << 3 | (uint64_t)(f[i] - '0');
	}
	if (!digits)
		return -1;
	for (; i < len; i++)
		if (f[i] != ' ' && f[i])
			return -1;
	*v = x;
	return 0;
}

/* A field's bytes for a message: printable ASCII kept, others as '?'. */
static const char *shown(const uint8_t *f, size_t len, char *buf)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = f[i] >= 0x20 && f[i] < 0x7f ? (char)f[i] : '?';
	buf[len] = 0;
	return buf;
}

static int check_sum(const struct scan *s, const uint8_t *h, uint64_t pos)
{
	uint64_t stored;
	unsigned us = 0;
	int ss = 0;
	char f[16];

	for (size_t i = 0; i < BLK; i++) {
		uint8_t b = i >= H_CHKSUM && i < H_CHKSUM + 8 ? ' ' : h[i];
		us += b;
		ss += (int8_t)b;
	}
	if (tar_num(h + H_CHKSUM, 8, &stored) || h[H_CHKSUM] & 0x80)
		return tar_fail(s, -EINVAL, pos, "checksum field '%s' is not an octal number: "
				"expected a tar header", shown(h + H_CHKSUM, 8, f));
	if (stored != us && (int64_t)stored != ss)
		return tar_fail(s, -EINVAL, pos, "bad header checksum: stored %" PRIu64 ", the "
				"header sums to %u: expected a tar header (a damaged archive, or "
				"not a tar)", stored, us);
	return 0;
}

/* A pax extended header's records, "LENGTH KEY=VALUE\n" each, into s's pending state. */
static int tar_pax(struct scan *s, const uint8_t *d, size_t n, uint64_t pos)
{
	size_t i = 0;

	while (i < n) {
		size_t rec = 0, j = i;
		while (j < n && d[j] >= '0' && d[j] <= '9' && rec <= n)
			rec = rec * 10 + (size_t)(d[j++] - '0');
		if (j == i || j >= n || d[j] != ' ' || rec > n - i || rec < j - i + 3 ||
		    d[i + rec - 1] != '\n')
			return tar_fail(s, -EINVAL, pos, "bad pax record at byte %zu of the extended "
					"header's data: expected \"LENGTH KEY=VALUE\\n\"", i);
		const uint8_t *key = d + j + 1, *end = d + i + rec - 1;
		const uint8_t *eq = memchr(key, '=', (size_t)(end - key));
		if (!eq || eq == key)
			return tar_fail(s, -EINVAL, pos, "pax record at byte %zu of the extended "
					"header's data has no KEY=: expected \"LENGTH KEY=VALUE\\n\"", i);
		size_t klen = (size_t)(eq - key), vlen = (size_t)(end - eq - 1);
		const uint8_t *val = eq + 1;
		if (klen == 4 && !memcmp(key, "path", 4)) {
			if (memchr(val, 0, vlen))
				return tar_fail(s, -EINVAL, pos, "pax path with a NUL byte inside: "
						"expected a name without NUL bytes");
			if (vlen > RF__TAR_NAME_MAX)
				return tar_fail(s, -EINVAL, pos, "pax path of %zu bytes: expected a "
						"name of at most %d bytes", vlen, RF__TAR_NAME_MAX);
			memcpy(s->pax_path, val, vlen);
			s->pax_path[vlen] = 0;
			s->pax_len = vlen;
			s->has_pax_path = vlen > 0;   /* empty: the header's name again */
		} else if (klen == 4 && !memcmp(key, "size", 4)) {
			uint64_t x = 0;
			for (size_t k = 0; k < vlen; k++) {
				if (val[k] < '0' || val[k] > '9' || x > (UINT64_MAX >> 1) / 10)
					return tar_fail(s, -EINVAL, pos, "pax size '%.*s': expected "
							"a decimal number below 2^63",
							vlen > 40 ? 40 : (int)vlen, (const char *)val);
				x = x * 10 + (uint64_t)(val[k] - '0');
			}
			s->pax_size = x;
			s->has_pax_size = vlen > 0;
		} else if (klen > 11 && !memcmp(key, "GNU.sparse.", 11)) {
			s->sparse = 1;
		}
		i += rec;
	}
	return 0;
}

/* The data of an extended header ('L', 'x') at data, size bytes, into s->ext. */
static int tar_ext(struct scan *s, uint64_t pos, uint64_t data, uint64_t size)
{
	if (size + 1 > s->ext_cap) {
		uint8_t *e = realloc(s->ext, (size_t)size + 1);
		if (!e)
			return tar_fail(s, -ENOMEM, pos, "out of memory");
		s->ext = e;
		s->ext_cap = (size_t)size + 1;
	}
	s->ext[size] = 0;
	return tar_read(s, pos, data, s->ext, (size_t)size);
}

/* A member into the list; its data kept beside its name when it is small and came
 * with its header (the scan reads the block after each header with it). */
static int tar_push(struct scan *s, const char *name, size_t len, uint64_t off, uint64_t size,
		    uint64_t pos)
{
	int kept = s->after && off == pos + BLK && size <= RF__TAR_SMALL_MAX;
	size_t keep = kept ? (size_t)size : 0, need = len + 1 + keep;

	if (s->n == s->cap) {
		size_t c = s->cap ? s->cap * 2 : 64;
		struct rf__tar_member *m = realloc(s->m, c * sizeof(*m));
		if (!m)
			return tar_fail(s, -ENOMEM, pos, "out of memory (%zu members)", s->n);
		s->m = m;
		s->cap = c;
	}
	if (need > s->names_cap - s->names_n) {
		size_t c = s->names_cap ? s->names_cap * 2 : 4096;
		while (c - s->names_n < need)
			c *= 2;
		char *p = realloc(s->names, c);
		if (!p)
			return tar_fail(s, -ENOMEM, pos, "out of memory (%zu members)", s->n);
		s->names = p;
		s->names_cap = c;
	}
	memcpy(s->names + s->names_n, name, len);
	s->names[s->names_n + len] = 0;
	/* offsets into names until the scan ends (names moves as it grows); a kept
	 * member's data is never at offset 0 (a name comes first) */
	s->m[s->n++] = (struct rf__tar_member){
		.name = (char *)(uintptr_t)s->names_n, .offset = off, .size = size,
		.small = kept ? (const uint8_t *)(uintptr_t)(s->names_n + len + 1) : NULL };
	if (keep)
		memcpy(s->names + s->names_n + len + 1, s->after, keep);
	s->names_n += need;
	return 0;
}

/* The member's name: pax path=, else a GNU long name, else the header's (the ustar
 * prefix, a '/', then the name field). */
static int tar_name(struct scan *s, const uint8_t *h, uint64_t pos, char *out, size_t *len)
{
	size_t n;

	if (s->has_pax_path) {
		memcpy(out, s->pax_path, s->pax_len + 1);
		n = s->pax_len;
	} else if (s->has_long) {
		memcpy(out, s->long_name, s->long_len + 1);
		n = s->long_len;
	} else {
		size_t nl = strnlen((const char *)h + H_NAME, 100), pl = 0;
		if (!memcmp(h + H_MAGIC, "ustar\0", 6))
			pl = strnlen((const char *)h + H_PREFIX, 155);
		n = 0;
		if (pl) {
			memcpy(out, h + H_PREFIX, pl);
			out[pl] = '/';
			n = pl + 1;
		}
		memcpy(out + n, h + H_NAME, nl);
		n += nl;
		out[n] = 0;
	}
	if (!n)
		return tar_fail(s, -EINVAL, pos, "an empty member name: expected a path");
	if (n > RF__TAR_NAME_MAX)
		return tar_fail(s, -EINVAL, pos, "a name of %zu bytes: expected at most %d", n,
				RF__TAR_NAME_MAX);
	*len = n;
	return 0;
}

/* Old GNU sparse ('S'): extension blocks of sparse map entries follow the header
 * while the last one says so; *data moves past them. */
static int tar_sparse_ext(struct scan *s, const uint8_t *h, uint64_t pos, uint64_t *data)
{
	uint8_t b[BLK];
	int more = h[H_GNU_ISEXT] != 0;

	while (more) {
		if (s->t->size - *data < BLK)
			return tar_fail(s, -EINVAL, pos, "the sparse member's extension block at "
					"%" PRIu64 " runs past the end of the file (%" PRIu64 " bytes): "
					"expected a complete archive", *data, s->t->size);
		int ret = tar_read(s, pos, *data, b, BLK);
		if (ret)
			return ret;
		more = b[H_SPARSE_ISEXT] != 0;
		*data += BLK;
	}
	return 0;
}

static int is_ext_type(uint8_t type)
{
	return type == 'L' || type == 'K' || type == 'x' || type == 'X' || type == 'g';
}

/* One header at pos (checksum good): what it is, and where the next one starts. */
static int tar_header(struct scan *s, const uint8_t *h, uint64_t pos, uint64_t *next)
{
	uint8_t type = h[H_TYPE];
	uint64_t fsize = s->t->size, data = pos + BLK, size = 0;
	char name[RF__TAR_NAME_MAX + 2], f[16];
	size_t len = 0;
	int ret, ext = is_ext_type(type);

	if (ext || !s->has_pax_size) {
		int e = tar_num(h + H_SIZE, 12, &size);
		if (e)
			return tar_fail(s, -EINVAL, pos, "size field '%s' %s: expected an octal "
					"number (or GNU base-256)", shown(h + H_SIZE, 12, f),
					e == -1 ? "is not a number" : e == -2 ? "is negative" :
					"is above 2^63");
	} else {
		size = s->pax_size;
	}
	if (strchr("123456", type) && type)
		size = 0;                     /* links, devices, FIFOs: no data */
	if (type == 'S' && (ret = tar_sparse_ext(s, h, pos, &data)))
		return ret;
	if (size > fsize - data || ((size + BLK - 1) & ~(uint64_t)(BLK - 1)) > fsize - data) {
		if (!ext && (ret = tar_name(s, h, pos, name, &len)))
			return ret;
		if (!ext)
			return tar_fail(s, -EINVAL, pos, "member '%s' of %" PRIu64 " bytes (data at "
					"%" PRIu64 ", padded to 512) runs past the end of the file (%"
					PRIu64 " bytes): expected a complete member", name, size, data,
					fsize);
		return tar_fail(s, -EINVAL, pos, "extended header '%c' of %" PRIu64 " bytes runs "
				"past the end of the file (%" PRIu64 " bytes): expected a complete "
				"member", type, size, fsize);
	}
	*next = data + ((size + BLK - 1) & ~(uint64_t)(BLK - 1));
	switch (type) {
	case 'L':
		if (size > RF__TAR_NAME_MAX + 1)
			return tar_fail(s, -EINVAL, pos, "GNU long name of %" PRIu64 " bytes: "
					"expected a name of at most %d bytes and its NUL", size,
					RF__TAR_NAME_MAX);
		if ((ret = tar_read(s, pos, data, s->long_name, (size_t)size)))
			return ret;
		s->long_name[size] = 0;
		s->long_len = strlen(s->long_name);
		s->has_long = 1;
		return 0;
	case 'x':
	case 'X':
		if (size > RF__TAR_PAX_MAX)
			return tar_fail(s, -EINVAL, pos, "pax extended header of %" PRIu64 " bytes: "
					"expected at most %u", size, RF__TAR_PAX_MAX);
		if ((ret = tar_ext(s, pos, data, size)))
			return ret;
		return tar_pax(s, s->ext, (size_t)size, pos);
	case 'K':
	case 'g':
		return 0;
	case '0':
	case '\0':
	case '7':
		if ((ret = tar_name(s, h, pos, name, &len)))
			return ret;
		if (!s->sparse && !(type == '\0' && name[len - 1] == '/') &&
		    (ret = tar_push(s, name, len, data, size, pos)))
			return ret;
		break;
	default:
		break;                        /* directories, links, ...: stepped over */
	}
	s->has_long = s->has_pax_path = s->has_pax_size = s->sparse = 0;
	return 0;
}

static int tar_walk(struct scan *s)
{
	uint8_t h[2 * BLK];
	uint64_t pos = 0, size = s->t->size;
	int ret;

	for (;;) {
		if (pos == size)
			return 0;             /* no end blocks: what GNU tar accepts too */
		if (size - pos < BLK)
			return tar_fail(s, -EINVAL, pos, "a truncated header (the file ends %" PRIu64
					" bytes in): expected a 512-byte header or the end of the "
					"archive", size - pos);
		/* the header and the block after it: a small member's data, in one read */
		s->after = size - pos >= 2 * BLK ? h + BLK : NULL;
		if ((ret = tar_read(s, pos, pos, h, s->after ? 2 * BLK : BLK)))
			return ret;
		if (is_zero(h)) {
			pos += BLK;
			if (pos == size)
				return 0;     /* a lone zero block at the end */
			if (size - pos < BLK)
				return tar_fail(s, -EINVAL, pos, "a truncated block after a zero "
						"block: expected a second zero block (the end of the "
						"archive)");
			if ((ret = tar_read(s, pos, pos, h, BLK)))
				return ret;
			if (!is_zero(h))
				return tar_fail(s, -EINVAL, pos, "a non-zero block after the zero "
						"block at %" PRIu64 ": expected a second zero block "
						"(the end of the archive)", pos - BLK);
			return 0;
		}
		if ((ret = check_sum(s, h, pos)) || (ret = tar_header(s, h, pos, &pos)))
			return ret;
	}
}

int rf__tar_scan(struct rf__tar *t)
{
	struct scan *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return rf__fail(-ENOMEM, "%s: out of memory", t->path);
	s->t = t;
	ret = tar_walk(s);
	if (ret == 0) {
		for (size_t i = 0; i < s->n; i++) {
			s->m[i].name = s->names + (uintptr_t)s->m[i].name;
			if (s->m[i].small)
				s->m[i].small = (const uint8_t *)s->names + (uintptr_t)s->m[i].small;
		}
		free(t->m);
		free(t->names);
		t->m = s->m;
		t->n = s->n;
		t->names = s->names;
	} else {
		free(s->m);
		free(s->names);
	}
	free(s->ext);
	free(s);
	return ret;
}

void rf__tar_close(struct rf__tar *t)
{
	if (t->has_fd)
		close(t->fd);
	free(t->m);
	free(t->names);
	free(t->path);
	free(t->index_path);
	memset(t, 0, sizeof(*t));
}

int rf__tar_open_file(struct rf__tar *t, const char *path, struct stat *st)
{
	int not_reg, fd;

	memset(t, 0, sizeof(*t));
	if (!(t->path = strdup(path)))
		return rf__fail(-ENOMEM, "%s: out of memory", path);
	fd = rf__open_regular(path, O_RDONLY, 0, st, &not_reg);
	if (fd < 0 && not_reg)
		return rf__fail(fd, "%s: is %s, not a regular file: expected a tar archive", path,
				rf__ftype(st->st_mode));
	if (fd < 0)
		return rf__fail(fd, "%s: cannot open: %s", path, strerror(-fd));
	t->fd = fd;
	t->has_fd = 1;
	t->size = (uint64_t)st->st_size;
	return 0;
}

int rf__tar_open(struct rf__tar *t, const char *path)
{
	struct stat st;
	int ret = rf__tar_open_file(t, path, &st);

	if (ret == 0)
		ret = rf__tar_scan(t);
	if (ret)
		rf__tar_close(t);
	return ret;
}

int rf__tar_open_mem(struct rf__tar *t, const uint8_t *buf, size_t n, const char *name)
{
	int ret;

	memset(t, 0, sizeof(*t));
	if (!name)
		name = "(buffer)";
	if (!(t->path = strdup(name)))
		return rf__fail(-ENOMEM, "%s: out of memory", name);
	t->mem = buf;
	t->size = n;
	if ((ret = rf__tar_scan(t)))
		rf__tar_close(t);
	return ret;
}

/* WebDataset */

const char *rf__wds_split(const char *name, size_t *key_len)
{
	const char *base = strrchr(name, '/'), *dot;

	base = base ? base + 1 : name;
	if (!(dot = strchr(base, '.'))) {
		*key_len = strlen(name);
		return name + *key_len;
	}
	*key_len = (size_t)(dot - name);
	return dot + 1;
}

/* The keys seen: an open-addressed table of the member index that began each. */
struct keyset {
	size_t *slot;      /* SIZE_MAX: empty */
	size_t mask;
};

static uint64_t key_hash(const char *k, size_t n)
{
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)k[i]) * 1099511628211ull;
	return h;
}

/* The member that began key k[0..n) before, or SIZE_MAX after recording i for it. */
static size_t key_seen(struct keyset *ks, const struct rf__tar *t, const char *k, size_t n,
		       size_t i)
{
	size_t at = (size_t)key_hash(k, n) & ks->mask, kl;

	while (ks->slot[at] != SIZE_MAX) {
		const char *o = t->m[ks->slot[at]].name;
		rf__wds_split(o, &kl);
		if (kl == n && !memcmp(o, k, n))
			return ks->slot[at];
		at = (at + 1) & ks->mask;
	}
	ks->slot[at] = i;
	return SIZE_MAX;
}

/* A .cls member's value: whitespace, decimal digits, whitespace; 0 .. 2^31-1. */
static int wds_label(const struct rf__tar *t, int (*read_at)(void *, uint64_t, void *, size_t),
		     void *ctx, const struct rf__tar_member *m, int32_t *label)
{
	char b[RF__TAR_CLS_MAX + 1], f[41];
	size_t i = 0, n = (size_t)m->size, digits = 0;
	uint64_t v = 0;
	int ret;

	if (m->size > RF__TAR_CLS_MAX)
		return rf__fail(-EINVAL, "%s: member '%s' (data at offset %" PRIu64 "): a label "
				"of %" PRIu64 " bytes: expected a decimal integer 0..2147483647 in at "
				"most %d bytes", t->path, m->name, m->offset, m->size,
				RF__TAR_CLS_MAX);
	if (m->small)
		memcpy(b, m->small, n);     /* kept by the scan or the index: no read */
	else if ((ret = read_at(ctx, m->offset, b, n)))
		return rf__fail(ret, "%s: member '%s' (data at offset %" PRIu64 "): cannot read "
				"the label: %s", t->path, m->name, m->offset, strerror(-ret));
	while (i < n && strchr(" \t\r\n\v\f", b[i]) && b[i])
		i++;
	for (; i < n && b[i] >= '0' && b[i] <= '9'; i++, digits++)
		if ((v = v * 10 + (uint64_t)(b[i] - '0')) > INT32_MAX)
			break;
	while (i < n && strchr(" \t\r\n\v\f", b[i]) && b[i])
		i++;
	if (!digits || i < n || v > INT32_MAX)
		return rf__fail(-EINVAL, "%s: member '%s' (data at offset %" PRIu64 "): label "
				"'%s': expected a decimal integer 0..2147483647", t->path, m->name,
				m->offset, shown((const uint8_t *)b, n < 40 ? n : 40, f));
	*label = (int32_t)v;
	return 0;
}

/* A sample being gathered: its first member, image (and its preference) and .cls. */
struct wds_cur {
	size_t first, img, cls;
	int rank;
};

static int wds_ext_rank(const char *ext)
{
	static const char *const img[] = { "jpg", "jpeg", "png" };
	for (int r = 0; r < 3; r++)
		if (!strcasecmp(ext, img[r]))
			return r;
	return 3;
}

int rf__wds_samples(const struct rf__tar *t, int (*read_at)(void *ctx, uint64_t off, void *buf,
		    size_t n), void *ctx, struct rf__wds_sample **out, size_t *n, size_t *no_image,
		    size_t *first_no_image)
{
	struct keyset ks = { 0 };
	struct rf__wds_sample *smp = NULL, *res;
	struct wds_cur c = { SIZE_MAX, SIZE_MAX, SIZE_MAX, 3 };
	size_t ns = 0, noimg = 0, first_noimg = t->n, keybytes = 0, cap = 4, cur_kl = 0;
	int ret = 0;

	*out = NULL;
	*n = 0;
	while (cap < 2 * t->n)
		cap *= 2;
	ks.mask = cap - 1;
	ks.slot = malloc(cap * sizeof(*ks.slot));
	smp = malloc((t->n ? t->n : 1) * sizeof(*smp));
	if (!ks.slot || !smp) {
		ret = rf__fail(-ENOMEM, "%s: out of memory (%zu members)", t->path, t->n);
		goto out;
	}
	memset(ks.slot, 0xff, cap * sizeof(*ks.slot));
	for (size_t i = 0; i <= t->n && !ret; i++) {
		size_t kl = 0, prev;
		const char *ext = i < t->n ? rf__wds_split(t->m[i].name, &kl) : "";
		if (i < t->n && c.first != SIZE_MAX && kl == cur_kl &&
		    !memcmp(t->m[i].name, t->m[c.first].name, kl)) {
			/* the same sample: each extension once */
			for (size_t j = c.first; j < i && !ret; j++) {
				size_t jl;
				if (strcasecmp(rf__wds_split(t->m[j].name, &jl), ext))
					continue;
				ret = rf__fail(-EINVAL, "%s: member '%s' (data at offset %" PRIu64
					       ") repeats member '%s' (data at offset %" PRIu64 ") "
					       "of the same sample: expected each of a sample's "
					       "members once (which one is meant?)", t->path,
					       t->m[i].name, t->m[i].offset, t->m[j].name,
					       t->m[j].offset);
			}
			if (ret)
				break;
		} else {
			if (c.first != SIZE_MAX && c.img == SIZE_MAX) {
				if (!noimg++)
					first_noimg = c.first;
			} else if (c.first != SIZE_MAX) {
				struct rf__wds_sample *sp = &smp[ns++];
				sp->key = t->m[c.first].name;   /* its first cur_kl bytes */
				sp->img_off = t->m[c.img].offset;
				sp->img_size = t->m[c.img].size;
				sp->label = -1;
				keybytes += cur_kl + 1;
				if (c.cls != SIZE_MAX)
					ret = wds_label(t, read_at, ctx, &t->m[c.cls], &sp->label);
			}
			if (i == t->n || ret)
				break;
			if ((prev = key_seen(&ks, t, t->m[i].name, kl, i)) != SIZE_MAX) {
				ret = rf__fail(-EINVAL, "%s: member '%s' (data at offset %" PRIu64 ") "
					       "has the key '%.*s' of member '%s' (data at offset %"
					       PRIu64 "), with other keys between: expected the "
					       "members of a key adjacent (WebDataset)", t->path,
					       t->m[i].name, t->m[i].offset, (int)kl, t->m[i].name,
					       t->m[prev].name, t->m[prev].offset);
				break;
			}
			c = (struct wds_cur){ i, SIZE_MAX, SIZE_MAX, 3 };
			cur_kl = kl;
		}
		int r = wds_ext_rank(ext);
		if (r < c.rank && t->m[i].size > 0) {    /* an empty file is no image */
			c.rank = r;
			c.img = i;
		}
		if (c.cls == SIZE_MAX && !strcasecmp(ext, "cls"))
			c.cls = i;
	}
	if (ret || !ns)
		goto out;
	if (!(res = malloc(ns * sizeof(*res) + keybytes))) {
		ret = rf__fail(-ENOMEM, "%s: out of memory (%zu samples)", t->path, ns);
		goto out;
	}
	char *kp = (char *)(res + ns);
	for (size_t i = 0; i < ns; i++) {
		size_t kl;
		rf__wds_split(smp[i].key, &kl);
		res[i] = smp[i];
		memcpy(kp, smp[i].key, kl);
		kp[kl] = 0;
		res[i].key = kp;
		kp += kl + 1;
	}
	*out = res;
	*n = ns;
out:
	if (!ret && no_image)
		*no_image = noimg;
	if (!ret && first_no_image)
		*first_no_image = first_noimg;
	free(ks.slot);
	free(smp);
	return ret;
}
