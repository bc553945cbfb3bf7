/* dl-tar: tar shards indexed for random access (dataloader/tar.c, tar-index.c). Archives
 * written by GNU tar (ustar with a prefix-split name, gnu with a 200-byte name in 'L'
 * records, pax with a 300-byte name and a non-ASCII one) and headers built here byte by
 * byte (a base-256 size, pax 'x' path= and size=, a 'g' global header, a directory, a
 * symbolic link, a hard link, an old GNU sparse member with an extension block, a
 * signed checksum, garbage after the end blocks, a sparse file whose member ends near
 * 1 TiB) list the regular files with their names, sizes and data offsets, checked
 * against the bytes written. Damage -- a flipped checksum byte, a size past the end,
 * a file cut mid-header and mid-data, a non-octal size, garbage for the end blocks, an
 * empty name, a NUL in a pax path, a 4096-byte name -- fails with -EINVAL and a
 * message naming the file and the header's offset; a few thousand random byte flips
 * never crash. WebDataset: samples a (jpg, cls), b (png, cls), c (jpg, no cls) and a
 * skipped d (txt) with their labels, jpg preferred over jpeg over png whatever the
 * case, a key split apart refused with both offsets, bad .cls contents refused by
 * name. The index: written beside the shard, loaded the second time, rebuilt when the
 * shard's mtime or contents change or the index is damaged or another's, written in
 * $XDG_CACHE_HOME/ringflow/ when the shard's directory cannot take it, and an open
 * that can write no index still succeeds. Small members (at most RF__TAR_SMALL_MAX
 * bytes: the labels) keep their data from the scan and in the index, so that making
 * the samples reads no label from the shard (counted); a longer .cls is read; a bad
 * kept-data flag, kept data too long or cut short, and version 1's index are misses. */
#include <sys/stat.h>
#include <sys/wait.h>

#include <zlib.h>

#include "dl-test.h"
#include "tar-impl.h"

static const char *dir;

/* A shell command that must succeed. */
static void sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "command failed: %s\n", cmd);
		exit(1);
	}
}

/* The member named name: its size and the bytes at its offset are want[0..n). */
static void expect_member(struct rf__tar *t, const char *name, const void *want, size_t n)
{
	for (size_t i = 0; i < t->n; i++) {
		if (strcmp(t->m[i].name, name))
			continue;
		uint8_t *got = malloc(n + 1);
		CHECK(got);
		CHECK_EQ(t->m[i].size, n);
		CHECK_EQ(t->m[i].offset % 512, 0);
		CHECK_OK(rf__tar_read_at(t, t->m[i].offset, got, n));
		CHECK(memcmp(got, want, n) == 0);
		free(got);
		return;
	}
	fprintf(stderr, "member '%s' missing from %s (%zu members)\n", name, t->path, t->n);
	exit(1);
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 131 + seed * 7 + (i >> 8));
}

/* Archives by GNU tar. */
static void test_gnu_tar(void)
{
	char pre[122], longn[201], paxn[301], dname[128];
	uint8_t big[1000];
	struct rf__tar t;
	char err[1024];

	fill(big, sizeof(big), 1);
	/* 60 + 1 + 60 bytes of directories, a 200-byte name, a 300-byte path */
	memset(pre, 'p', 121);
	pre[60] = '/';
	pre[121] = 0;
	memset(longn, 'L', 196);
	memcpy(longn + 196, ".bin", 5);
	memset(paxn, 'x', 296);
	paxn[150] = '/';
	memcpy(paxn + 296, ".bin", 5);
	sh("mkdir -p %s/src/sub %s/src/%s %s/src/%.150s && cd %s/src && printf hello > a.txt && "
	   ": > e && ln -s a.txt lnk && printf 12 > %s/f.txt && printf 123 > %s && "
	   "printf 1234 > %s && printf 12345 > 'caf\303\251.txt'", dir, dir, pre, dir, paxn, dir,
	   pre, longn, paxn);
	t_write(t_path("src/sub/b.bin"), big, sizeof(big));
	snprintf(dname, sizeof(dname), "%s/f.txt", pre);

	sh("cd %s/src && /bin/tar --format=ustar -b1 -cf ../u.tar a.txt sub e lnk %.60s", dir,
	   pre);
	CHECK_OPEN(t_msg(rf__tar_open(&t, t_path("u.tar")), err, sizeof(err)), err);
	CHECK_EQ(t.n, 4);
	expect_member(&t, "a.txt", "hello", 5);
	expect_member(&t, "sub/b.bin", big, sizeof(big));
	expect_member(&t, "e", "", 0);
	expect_member(&t, dname, "12", 2);  /* 127 bytes: ustar's prefix and name */
	CHECK(!t.from_index);
	rf__tar_close(&t);

	sh("cd %s/src && /bin/tar --format=gnu -b1 -cf ../g.tar a.txt %s", dir, longn);
	size_t n;
	uint8_t *g = t_read(t_path("g.tar"), &n);
	CHECK(g[1024 + 156] == 'L');       /* the long name's record */
	free(g);
	CHECK_OPEN(t_msg(rf__tar_open(&t, t_path("g.tar")), err, sizeof(err)), err);
	CHECK_EQ(t.n, 2);
	expect_member(&t, "a.txt", "hello", 5);
	expect_member(&t, longn, "123", 3);
	rf__tar_close(&t);

	sh("cd %s/src && /bin/tar --format=pax -b1 -cf ../p.tar a.txt %s 'caf\303\251.txt' sub",
	   dir, paxn);
	CHECK_OPEN(t_msg(rf__tar_open(&t, t_path("p.tar")), err, sizeof(err)), err);
	CHECK_EQ(t.n, 4);
	expect_member(&t, "a.txt", "hello", 5);
	expect_member(&t, paxn, "1234", 4);
	expect_member(&t, "caf\303\251.txt", "12345", 5);
	expect_member(&t, "sub/b.bin", big, sizeof(big));
	rf__tar_close(&t);
}

/* An archive built here, one block at a time. */
struct tb {
	uint8_t *b;
	size_t n, cap;
};

static uint8_t *tb_grow(struct tb *b, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->b = realloc(b->b, b->cap);
		CHECK(b->b);
	}
	memset(b->b + b->n, 0, n);
	b->n += n;
	return b->b + b->n - n;
}

static void h_sum(uint8_t *h, int sign)
{
	unsigned us = 0;
	int ss = 0;
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++) {
		us += h[i];
		ss += (int8_t)h[i];
	}
	snprintf((char *)h + 148, 8, "%06o", sign ? (unsigned)ss : us);
	h[155] = ' ';
}

/* A ustar header: name (up to 100 bytes), type, an octal size. */
static uint8_t *tb_hdr(struct tb *b, const char *name, char type, uint64_t size)
{
	uint8_t *h = tb_grow(b, 512);
	memcpy(h, name, strnlen(name, 100));
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
	memcpy(h + 136, "14000000000", 12);
	h[156] = (uint8_t)type;
	memcpy(h + 257, "ustar\0" "00", 8);
	h_sum(h, 0);
	return h;
}

static uint64_t tb_data(struct tb *b, const void *d, size_t n)
{
	uint64_t at = b->n;
	memcpy(tb_grow(b, (n + 511) / 512 * 512), d, n);
	return at;
}

/* A pax record "LEN key=val\n" appended to p (its length in *pn). */
static void pax_rec(char *p, size_t *pn, const char *key, const char *val, size_t vlen)
{
	size_t body = strlen(key) + vlen + 3, len = body + 1;
	while ((size_t)snprintf(NULL, 0, "%zu", len) + body != len)
		len++;
	int w = sprintf(p + *pn, "%zu %s=", len, key);
	memcpy(p + *pn + w, val, vlen);
	p[*pn + w + vlen] = '\n';
	*pn += len;
}

static void test_handmade(void)
{
	struct tb b = { 0 };
	struct rf__tar t;
	uint8_t d1[600], d2[700], d3[64];
	char pax[8192], name150[151], err[1024];
	size_t pn = 0;
	uint64_t o1, o2, o3, o4;
	uint8_t *h;

	fill(d1, sizeof(d1), 2);
	fill(d2, sizeof(d2), 3);
	fill(d3, sizeof(d3), 4);
	memset(name150, 'n', 150);
	name150[150] = 0;
	/* a global header (its path= is not the next member's), a directory, links */
	pax_rec(pax, &pn, "path", "global-name", 11);
	tb_hdr(&b, "pax_global_header", 'g', pn);
	tb_data(&b, pax, pn);
	tb_hdr(&b, "dir/", '5', 0);
	tb_hdr(&b, "dir/sym", '2', 0);
	tb_hdr(&b, "dir/hard", '1', 0);
	/* base-256 size 600 */
	h = tb_hdr(&b, "b256.bin", '0', 0);
	memset(h + 124, 0, 12);
	h[124] = 0x80;
	h[134] = 0x02;
	h[135] = 0x58;
	h_sum(h, 0);
	o1 = tb_data(&b, d1, sizeof(d1));
	/* pax path= and size= (the header's size field says 0) */
	pn = 0;
	pax_rec(pax, &pn, "mtime", "1.5", 3);
	pax_rec(pax, &pn, "path", name150, 150);
	pax_rec(pax, &pn, "size", "700", 3);
	tb_hdr(&b, "PaxHeaders/x", 'x', pn);
	tb_data(&b, pax, pn);
	tb_hdr(&b, "short-name", '0', 0);
	o2 = tb_data(&b, d2, sizeof(d2));
	/* a signed checksum, on a name with bytes above 0x7f */
	h = tb_hdr(&b, "sig\351\351.bin", '0', sizeof(d3));
	h_sum(h, 1);
	o3 = tb_data(&b, d3, sizeof(d3));
	/* old GNU sparse with one extension block: not listed */
	h = tb_hdr(&b, "sparse", 'S', 100);
	memcpy(h + 257, "ustar  \0", 8);
	h[482] = 1;
	h_sum(h, 0);
	tb_grow(&b, 512);
	tb_data(&b, d1, 100);
	/* old-style regular ('\0') and directory (name ending in '/') */
	tb_hdr(&b, "v7dir/", '\0', 0);
	tb_hdr(&b, "v7file", '\0', 5);
	o4 = tb_data(&b, "abcde", 5);
	tb_grow(&b, 1024);
	memset(tb_grow(&b, 512), 0xab, 512);   /* the record's tail: not read */

	CHECK_OPEN(t_msg(rf__tar_open_mem(&t, b.b, b.n, "handmade"), err, sizeof(err)), err);
	CHECK_EQ(t.n, 4);
	CHECK(!strcmp(t.m[0].name, "b256.bin") && t.m[0].offset == o1 + 0 && t.m[0].size == 600);
	CHECK(!strcmp(t.m[1].name, name150) && t.m[1].offset == o2 && t.m[1].size == 700);
	CHECK(!strcmp(t.m[2].name, "sig\351\351.bin") && t.m[2].offset == o3);
	CHECK(!strcmp(t.m[3].name, "v7file") && t.m[3].offset == o4);
	expect_member(&t, "b256.bin", d1, sizeof(d1));
	expect_member(&t, name150, d2, sizeof(d2));
	expect_member(&t, "sig\351\351.bin", d3, sizeof(d3));
	rf__tar_close(&t);
	rf__tar_close(&t);                        /* twice: zeroed */

	/* refusals of headers only built by hand: an empty name, a NUL in a pax path, a
	 * name of 4096 bytes, a pax path of 4096 bytes */
	struct { const char *what; char type; const char *key; size_t vlen; const char *msg; }
	bad[] = {
		{ "empty", '0', NULL, 0, "empty member name" },
		{ "nul", 'x', "path", 5, "NUL" },
		{ "long L", 'L', NULL, 4096, "a name of 4096 bytes" },
		{ "long pax", 'x', "path", 4096, "pax path of 4096 bytes" },
		{ "pax size", 'x', "size", 3, "pax size" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		static char v[4097];
		struct tb c = { 0 };
		memset(v, 'v', 4096);
		if (i == 1)
			v[2] = 0;
		if (i == 4)
			memcpy(v, "1x3", 3);
		tb_hdr(&c, "ok", '0', 1);
		tb_data(&c, "z", 1);
		uint64_t at = c.n;
		if (bad[i].type == 'x') {
			pn = 0;
			pax_rec(pax, &pn, bad[i].key, v, bad[i].vlen);
			tb_hdr(&c, "x", 'x', pn);
			tb_data(&c, pax, pn);
		} else if (bad[i].type == 'L') {
			tb_hdr(&c, "././@LongLink", 'L', 4096);
			tb_data(&c, v, 4096);
			at = c.n;
		}
		tb_hdr(&c, bad[i].type == '0' ? "" : "f", '0', 0);
		tb_grow(&c, 1024);
		char off[64];
		snprintf(off, sizeof(off), "offset %llu:", (unsigned long long)at);
		EXPECT_FAIL(t_msg(rf__tar_open_mem(&t, c.b, c.n, bad[i].what), err, sizeof(err)),
			    -EINVAL, err, bad[i].what, off, bad[i].msg);
		printf("refused: %s\n", err);
		CHECK(t.m == NULL && t.path == NULL);
		free(c.b);
	}

	/* a sparse file: one member of almost 1 TiB (base-256), then another */
	const char *big = t_path("big.tar");
	uint64_t sz = (1ull << 40) - 4096;
	struct tb c = { 0 };
	h = tb_hdr(&c, "huge.bin", '0', 0);
	memset(h + 124, 0, 12);
	h[124] = 0x80;
	for (int k = 0; k < 8; k++)
		h[135 - k] = (uint8_t)(sz >> (8 * k));
	h_sum(h, 0);
	t_write(big, c.b, c.n);
	int fd = open(big, O_WRONLY);
	CHECK(fd >= 0);
	c.n = 0;
	tb_hdr(&c, "after", '0', 3);
	tb_data(&c, "xyz", 3);
	if (pwrite(fd, c.b, c.n, (off_t)(512 + sz)) == (ssize_t)c.n) {
		CHECK(close(fd) == 0);
		CHECK_OPEN(t_msg(rf__tar_open(&t, big), err, sizeof(err)), err);
		CHECK_EQ(t.n, 2);
		CHECK(t.m[0].offset == 512 && t.m[0].size == sz);
		CHECK(t.m[1].offset == 1024 + sz && t.m[1].size == 3);
		expect_member(&t, "after", "xyz", 3);
		rf__tar_close(&t);
	} else {
		fprintf(stderr, "dl-tar: no sparse file of 1 TiB here: that part skipped\n");
		close(fd);
	}
	unlink(big);
	free(c.b);
	free(b.b);
}

/* A copy of src at name with n bytes of data at off (NULL data: cut the file at off),
 * the header at hdr resealed when hdr is not -1. */
static const char *damaged(const char *src, const char *name, size_t off, const void *data,
			   size_t n, long hdr)
{
	size_t len;
	uint8_t *b = t_read(t_path(src), &len);
	if (data)
		memcpy(b + off, data, n);
	else
		len = off;
	if (hdr >= 0)
		h_sum(b + hdr, 0);
	const char *p = t_path(name);
	t_write(p, b, len);
	free(b);
	return p;
}

static void expect_refused(const char *path, uint64_t at, const char *what)
{
	struct rf__tar t;
	char err[1024], off[64];
	snprintf(off, sizeof(off), "offset %llu:", (unsigned long long)at);
	EXPECT_FAIL(t_msg(rf__tar_open(&t, path), err, sizeof(err)), -EINVAL, err, path, off,
		    what);
	printf("refused: %s\n", err);
}

static void test_damage(void)
{
	struct rf__tar t;
	char err[1024];
	size_t n;
	/* u.tar: a.txt (header 0), sub/ (1024), sub/b.bin (1536, data 2048..3048) */
	CHECK_OPEN(t_msg(rf__tar_open(&t, t_path("u.tar")), err, sizeof(err)), err);
	CHECK(!strcmp(t.m[1].name, "sub/b.bin") && t.m[1].offset == 2048);
	rf__tar_close(&t);

	expect_refused(damaged("u.tar", "flip.tar", 1536 + 3, "Q", 1, -1), 1536, "checksum");
	expect_refused(damaged("u.tar", "past.tar", 1536 + 124, "77777777777", 11, 1536), 1536,
		       "runs past the end of the file");
	expect_refused(damaged("u.tar", "cut-hdr.tar", 1536 + 100, NULL, 0, -1), 1536,
		       "truncated header");
	expect_refused(damaged("u.tar", "cut-data.tar", 2048 + 10, NULL, 0, -1), 1536,
		       "runs past the end");
	expect_refused(damaged("u.tar", "cut-data2.tar", 2048 + 512, NULL, 0, -1), 1536,
		       "runs past the end");
	expect_refused(damaged("u.tar", "octal.tar", 1536 + 124, "00000001a00", 11, 1536), 1536,
		       "not a number");
	expect_refused(damaged("u.tar", "octal8.tar", 1536 + 124, "00000001800", 11, 1536), 1536,
		       "size field");
	/* the end: the first zero block at fend */
	uint8_t *b = t_read(t_path("u.tar"), &n);
	size_t fend = n;
	for (size_t p = 0; p + 512 <= n; p += 512) {
		int z = 1;
		for (int k = 0; k < 512; k++)
			z &= !b[p + k];
		if (z) {
			fend = p;
			break;
		}
	}
	free(b);
	CHECK(fend < n);
	uint8_t junk[1024];
	memset(junk, 0x5a, sizeof(junk));
	expect_refused(damaged("u.tar", "end1.tar", fend, junk, 1024, -1), fend, "checksum");
	expect_refused(damaged("u.tar", "end2.tar", fend + 512, junk, 512, -1), fend + 512,
		       "second zero block");
	/* cut at the first zero block, and after it: accepted (what GNU tar accepts) */
	CHECK_OPEN(t_msg(rf__tar_open(&t, damaged("u.tar", "noend.tar", fend, NULL, 0, -1)), err,
			 sizeof(err)), err);
	CHECK_EQ(t.n, 4);
	rf__tar_close(&t);
	CHECK_OPEN(t_msg(rf__tar_open(&t, damaged("u.tar", "lone.tar", fend + 512, NULL, 0, -1)),
			 err, sizeof(err)), err);
	rf__tar_close(&t);
	expect_refused(damaged("u.tar", "lone2.tar", fend + 700, NULL, 0, -1), fend + 512,
		       "second zero block");
	/* not a regular file */
	EXPECT_FAIL(t_msg(rf__tar_open(&t, dir), err, sizeof(err)), -EISDIR, err, "a directory");
	EXPECT_FAIL(t_msg(rf__tar_open(&t, t_path("none.tar")), err, sizeof(err)), -ENOENT, err,
		    "none.tar");
}

/* Random byte flips over what rf__tar_open_mem accepts: no crash, and what opens is
 * inside the buffer and readable. */
static void flip_run(const char *name, unsigned rounds, unsigned long long *seed)
{
	size_t n;
	uint8_t *orig = t_read(t_path(name), &n), *b = malloc(n);
	CHECK(b);
	for (unsigned r = 0; r < rounds; r++) {
		struct rf__tar t;
		memcpy(b, orig, n);
		unsigned k = 1 + (unsigned)(t_splitmix64(seed) % 4);
		for (unsigned j = 0; j < k; j++) {
			uint64_t x = t_splitmix64(seed);
			/* half the flips in the first headers, where the checks are */
			size_t at = (x & 1 ? x >> 8 : (x >> 8) % 1536) % n;
			b[at] = (uint8_t)(x >> 1 & 1 ? b[at] ^ (1u << (x >> 2 & 7)) : x >> 16);
		}
		if (rf__tar_open_mem(&t, b, n, name))
			continue;
		for (size_t i = 0; i < t.n; i++) {
			CHECK(t.m[i].name[0] && strlen(t.m[i].name) <= RF__TAR_NAME_MAX);
			CHECK(t.m[i].offset <= n && t.m[i].size <= n - t.m[i].offset);
		}
		struct rf__wds_sample *s;
		size_t ns, noimg;
		if (rf__wds_samples(&t, rf__tar_read_at, &t, &s, &ns, &noimg, NULL) == 0) {
			for (size_t i = 0; i < ns; i++)
				CHECK(s[i].img_off + s[i].img_size <= n && s[i].label >= -1);
			free(s);
		}
		rf__tar_close(&t);
	}
	free(b);
	free(orig);
}

/* rf__tar_read_at, counted: which reads a WebDataset open still makes. */
static unsigned reads;
static int counted_read_at(void *ctx, uint64_t off, void *buf, size_t n)
{
	reads++;
	return rf__tar_read_at(ctx, off, buf, n);
}

/* Members of a and b alike: names, places, and the data kept (small members). */
static void same_members(const struct rf__tar *a, const struct rf__tar *b)
{
	CHECK_EQ(a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		CHECK(!strcmp(a->m[i].name, b->m[i].name) && a->m[i].offset == b->m[i].offset &&
		      a->m[i].size == b->m[i].size);
		CHECK(!a->m[i].small == !b->m[i].small);
		CHECK(!a->m[i].small || !memcmp(a->m[i].small, b->m[i].small, (size_t)a->m[i].size));
	}
}

/* A WebDataset shard in dir/name of the files given, written in that order. */
static void wds_shard(const char *name, const char *files)
{
	sh("cd %s/w && /bin/tar --format=ustar -b1 -cf ../%s %s", dir, name, files);
}

static int wds_open(const char *name, struct rf__tar *t, struct rf__wds_sample **s,
		    size_t *ns, size_t *noimg, char *err, size_t errlen)
{
	CHECK_OPEN(t_msg(rf__tar_open(t, t_path(name)), err, errlen), err);
	return t_msg(rf__wds_samples(t, rf__tar_read_at, t, s, ns, noimg, NULL), err, errlen);
}

static void test_wds(void)
{
	struct rf__tar t;
	struct rf__wds_sample *s;
	size_t ns, noimg, kl;
	char err[1024];

	CHECK(!strcmp(rf__wds_split("a/b.c.jpg", &kl), "c.jpg") && kl == 3);
	CHECK(!strcmp(rf__wds_split("a.b/c", &kl), "") && kl == 5);
	CHECK(!strcmp(rf__wds_split("x.cls", &kl), "cls") && kl == 1);
	sh("mkdir -p %s/w/n1 && cd %s/w && printf JPGA > a.jpg && printf '3\\n' > a.cls && "
	   "printf PNGB > b.png && printf ' 7 ' > b.cls && printf JPGC > c.jpg && printf t > d.txt"
	   " && printf P > e.PNG && printf JJ > e.JPEG && printf 2147483647 > e.cls && "
	   "printf I > n1/i.jpg && printf x1 > x.cls && printf -- -3 > m.cls && "
	   "printf 99999999999 > big.cls && printf 1 > n1/i.cls", dir, dir);
	wds_shard("w.tar", "a.jpg a.cls b.png b.cls c.jpg d.txt e.PNG e.JPEG e.cls n1/i.jpg "
		  "n1/i.cls");
	CHECK_OPEN(wds_open("w.tar", &t, &s, &ns, &noimg, err, sizeof(err)), err);
	CHECK_EQ(ns, 5);
	CHECK_EQ(noimg, 1);
	const char *keys[] = { "a", "b", "c", "e", "n1/i" };
	const char *img[] = { "JPGA", "PNGB", "JPGC", "JJ", "I" };
	int32_t labels[] = { 3, 7, -1, 2147483647, 1 };
	for (size_t i = 0; i < ns; i++) {
		char got[8] = { 0 };
		CHECK(!strcmp(s[i].key, keys[i]));
		CHECK_EQ(s[i].img_size, strlen(img[i]));
		CHECK_OK(rf__tar_read_at(&t, s[i].img_off, got, (size_t)s[i].img_size));
		CHECK(!strcmp(got, img[i]));
		CHECK_EQ(s[i].label, labels[i]);
	}
	free(s);
	/* the scan kept the small members' bytes: each is the member's data */
	for (size_t i = 0; i < t.n; i++) {
		uint8_t got[RF__TAR_SMALL_MAX];
		CHECK(t.m[i].small != NULL);           /* every member here is small */
		CHECK_OK(rf__tar_read_at(&t, t.m[i].offset, got, (size_t)t.m[i].size));
		CHECK(!memcmp(got, t.m[i].small, (size_t)t.m[i].size));
	}
	rf__tar_close(&t);
	/* a label of RF__TAR_SMALL_MAX + 8 bytes (padded with spaces): not kept, read */
	sh("mkdir -p %s/w/long && cd %s/w/long && printf JPGL > l.jpg && "
	   "printf '%%-40s' 6 > l.cls && printf JPGM > m.jpg && printf 4 > m.cls", dir, dir);
	sh("cd %s/w/long && /bin/tar --format=ustar -b1 -cf ../../long.tar l.jpg l.cls m.jpg "
	   "m.cls", dir);
	CHECK_OPEN(t_msg(rf__tar_open(&t, t_path("long.tar")), err, sizeof(err)), err);
	CHECK(t.n == 4 && t.m[1].size == 40 && !t.m[1].small && t.m[3].small);
	reads = 0;
	CHECK_OK(rf__wds_samples(&t, counted_read_at, &t, &s, &ns, NULL, NULL));
	CHECK(ns == 2 && s[0].label == 6 && s[1].label == 4 && reads == 1);
	free(s);
	rf__tar_close(&t);
	/* without no_image; then the first sample without an image named (d.txt) */
	CHECK_OPEN(t_msg(rf__tar_open(&t, t_path("w.tar")), err, sizeof(err)), err);
	CHECK_OK(rf__wds_samples(&t, rf__tar_read_at, &t, &s, &ns, NULL, NULL));
	free(s);
	size_t first = 0;
	CHECK_OK(rf__wds_samples(&t, rf__tar_read_at, &t, &s, &ns, &noimg, &first));
	CHECK(noimg == 1 && first == 5 && !strcmp(t.m[first].name, "d.txt"));
	free(s);
	rf__tar_close(&t);

	/* an extension twice in one sample -- the same name (tar keeps both), or two cases
	 * of it: refused naming both (the first was taken silently, maybe the wrong label) */
	sh("cd %s/w && mkdir -p d1 d2 && cp a.jpg a.cls d1/ && printf 1 > d2/a.cls && "
	   "cp a.jpg d2/a.JPG", dir);
	sh("cd %s/w && /bin/tar --format=ustar -b1 -cf ../dupcls.tar -C d1 a.jpg a.cls "
	   "-C ../d2 a.cls && /bin/tar --format=ustar -b1 -cf ../dupjpg.tar -C d1 a.jpg a.cls "
	   "-C ../d2 a.JPG", dir);
	EXPECT_FAIL(wds_open("dupcls.tar", &t, &s, &ns, &noimg, err, sizeof(err)), -EINVAL, err,
		    "dupcls.tar", "member 'a.cls' (data at offset 2560) repeats member 'a.cls' "
		    "(data at offset 1536)", "once");
	printf("refused: %s\n", err);
	rf__tar_close(&t);
	EXPECT_FAIL(wds_open("dupjpg.tar", &t, &s, &ns, &noimg, err, sizeof(err)), -EINVAL, err,
		    "dupjpg.tar", "'a.JPG'", "repeats member 'a.jpg'");
	rf__tar_close(&t);
	/* an empty image member is no image: its sample passed over, counted (it failed the
	 * whole shard at open, skip_bad_images or not) */
	sh("cd %s/w && mkdir -p z && cp a.jpg a.cls z/ && : > z/z.jpg && printf 1 > z/z.cls && "
	   "cd z && /bin/tar --format=ustar -b1 -cf ../../zero.tar a.jpg a.cls z.jpg z.cls", dir);
	CHECK_OPEN(wds_open("zero.tar", &t, &s, &ns, &noimg, err, sizeof(err)), err);
	CHECK(ns == 1 && noimg == 1 && !strcmp(s[0].key, "a"));
	free(s);
	rf__tar_close(&t);

	/* a key split apart: a.jpg, b.png, a.cls */
	wds_shard("split.tar", "a.jpg b.png a.cls");
	CHECK_OPEN(t_msg(rf__tar_open(&t, t_path("split.tar")), err, sizeof(err)), err);
	CHECK_EQ(t.n, 3);
	char o0[64], o2[64];
	snprintf(o0, sizeof(o0), "offset %llu)", (unsigned long long)t.m[0].offset);
	snprintf(o2, sizeof(o2), "offset %llu)", (unsigned long long)t.m[2].offset);
	rf__tar_close(&t);
	EXPECT_FAIL(wds_open("split.tar", &t, &s, &ns, &noimg, err, sizeof(err)), -EINVAL, err,
		    "split.tar", "'a.cls'", "'a.jpg'", o0, o2, "adjacent");
	printf("refused: %s\n", err);
	CHECK(s == NULL && ns == 0);
	rf__tar_close(&t);

	/* bad labels, each as a.cls beside a.jpg */
	const char *bad[] = { "x.cls", "m.cls", "big.cls" };
	const char *shown[] = { "'x1'", "'-3'", "'99999999999'" };
	for (int i = 0; i < 3; i++) {
		char name[32], off[64];
		sh("cd %s/w && mkdir -p bad%d && cp a.jpg bad%d/ && cp %s bad%d/a.cls", dir, i, i,
		   bad[i], i);
		snprintf(name, sizeof(name), "bad%d.tar", i);
		sh("cd %s/w/bad%d && /bin/tar --format=ustar -b1 -cf ../../%s a.jpg a.cls", dir, i,
		   name);
		snprintf(off, sizeof(off), "offset %d)", 1536);   /* a.cls's data */
		EXPECT_FAIL(wds_open(name, &t, &s, &ns, &noimg, err, sizeof(err)), -EINVAL, err,
			    name, "'a.cls'", off, shown[i], "expected a decimal integer");
		printf("refused: %s\n", err);
		rf__tar_close(&t);
	}
}

/* The index: t_path("ix/...") shards, $XDG_CACHE_HOME at t_path("xdg"). */
static void ix_open(const char *shard, int want_from_index, const char *want_idx)
{
	struct rf__tar t, ref;
	char err[1024];

	CHECK_OPEN(t_msg(rf__tar_index_load_or_build(&t, shard), err, sizeof(err)), err);
	if (t.from_index != want_from_index) {
		fprintf(stderr, "%s: from_index %d, expected %d\n", shard, t.from_index,
			want_from_index);
		exit(1);
	}
	if (want_idx && (!t.index_path || strcmp(t.index_path, want_idx))) {
		fprintf(stderr, "%s: index %s, expected %s\n", shard, t.index_path, want_idx);
		exit(1);
	}
	if (!want_idx)
		CHECK(t.index_path == NULL);
	CHECK_OPEN(t_msg(rf__tar_open(&ref, shard), err, sizeof(err)), err);
	same_members(&t, &ref);
	/* the labels (.cls of at most RF__TAR_SMALL_MAX bytes here) come from memory,
	 * whether the members were scanned or taken from the index: no read */
	struct rf__wds_sample *s;
	size_t ns;
	reads = 0;
	CHECK_OK(rf__wds_samples(&t, counted_read_at, &t, &s, &ns, NULL, NULL));
	CHECK_EQ(reads, 0u);
	free(s);
	rf__tar_close(&ref);
	rf__tar_close(&t);
}

/* An index's body length and CRCs made right again after an edit. */
static void reseal(uint8_t *b, size_t n)
{
	uint64_t body = n - RF__TAR_IDX_HDR;
	for (int i = 0; i < 8; i++)
		b[48 + i] = (uint8_t)(body >> (8 * i));
	uint32_t c = (uint32_t)crc32(0, b + RF__TAR_IDX_HDR, (uInt)body);
	for (int i = 0; i < 4; i++)
		b[56 + i] = (uint8_t)(c >> (8 * i));
	c = (uint32_t)crc32(0, b, 60);
	for (int i = 0; i < 4; i++)
		b[60 + i] = (uint8_t)(c >> (8 * i));
}

static void test_index(void)
{
	char idx[512], xidx[4096], *abs;
	struct timespec ts[2] = { { 1000000, 5 }, { 1000000, 5 } };
	size_t n;

	sh("mkdir -p %s/ix %s/xdg %s/ro && cp %s/w.tar %s/ix/s.tar && cp %s/w.tar %s/ro/s.tar",
	   dir, dir, dir, dir, dir, dir, dir);
	CHECK(setenv("XDG_CACHE_HOME", t_path("xdg"), 1) == 0);
	const char *s = t_path("ix/s.tar");
	snprintf(idx, sizeof(idx), "%s.idx", s);
	ix_open(s, 0, idx);
	CHECK(t_exists(idx));
	ix_open(s, 1, idx);
	/* a new mtime */
	CHECK(utimensat(AT_FDCWD, s, ts, 0) == 0);
	ix_open(s, 0, idx);
	ix_open(s, 1, idx);
	/* rewritten in place (same inode): other members */
	uint8_t *b = t_read(t_path("u.tar"), &n);
	int fd = open(s, O_WRONLY | O_TRUNC);
	CHECK(fd >= 0 && write(fd, b, n) == (ssize_t)n && close(fd) == 0);
	CHECK(utimensat(AT_FDCWD, s, ts, 0) == 0);      /* even with the old mtime */
	free(b);
	ix_open(s, 0, idx);
	ix_open(s, 1, idx);
	/* damaged: a flipped byte in the body, in the header, cut short, emptied */
	size_t in;
	uint8_t *ib = t_read(idx, &in);
	size_t at[] = { in - 3, 70, 20, 61 };
	for (int i = 0; i < 4; i++) {
		uint8_t x = ib[at[i]] ^ 0x10;
		t_poke(idx, at[i], &x, 1);
		ix_open(s, 0, idx);
		ix_open(s, 1, idx);
	}
	t_write(idx, ib, in / 2);
	ix_open(s, 0, idx);
	t_write(idx, "", 0);
	ix_open(s, 0, idx);
	free(ib);
	/* another shard's index */
	const char *s2 = t_path("ix/s2.tar");
	sh("cp %s/g.tar %s", dir, s2);
	char idx2[512];
	snprintf(idx2, sizeof(idx2), "%s.idx", s2);
	ix_open(s2, 0, idx2);
	sh("cp %s %s", idx2, idx);
	ix_open(s, 0, idx);
	ix_open(s, 1, idx);

	/* an index with good CRCs whose members lie outside the shard: not trusted */
	struct rf__tar t = { 0 }, d = { 0 };
	struct rf__tar_member m = { .name = "x", .offset = 512, .size = 5000 };
	uint8_t *enc;
	size_t en;
	char why[200];
	t.m = &m;
	t.n = 1;
	CHECK_OK(rf__tar_index_encode(&t, 4096, 7, 9, &enc, &en));
	CHECK_EQ(rf__tar_index_decode(&d, enc, en, 4096, 7, 9, why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "out of place") && d.m == NULL);
	m.size = 100;
	CHECK_OK(rf__tar_index_encode(&t, 4096, 7, 9, &enc, &en));
	CHECK_OK(rf__tar_index_decode(&d, enc, en, 4096, 7, 9, why, sizeof(why)));
	CHECK(d.n == 1 && !strcmp(d.m[0].name, "x") && d.m[0].size == 100 && !d.m[0].small);
	rf__tar_close(&d);
	/* a member's data kept: decoded as written; a flag other than 0/1, kept data past
	 * RF__TAR_SMALL_MAX, or kept bytes cut short are misses */
	m.size = 3;
	m.small = (const uint8_t *)"7\n ";
	CHECK_OK(rf__tar_index_encode(&t, 4096, 7, 9, &enc, &en));
	CHECK_OK(rf__tar_index_decode(&d, enc, en, 4096, 7, 9, why, sizeof(why)));
	CHECK(d.n == 1 && d.m[0].size == 3 && d.m[0].small && !memcmp(d.m[0].small, "7\n ", 3));
	rf__tar_close(&d);
	for (int k = 0; k < 3; k++) {
		CHECK_OK(rf__tar_index_encode(&t, 4096, 7, 9, &enc, &en));
		size_t e = RF__TAR_IDX_HDR;                 /* the one entry */
		if (k == 0)
			enc[e + 20] = 2;
		if (k == 1)
			enc[e + 8] = RF__TAR_SMALL_MAX + 1;  /* its size */
		if (k == 2)
			en -= 1;                             /* the last kept byte gone */
		reseal(enc, en);
		CHECK_EQ(rf__tar_index_decode(&d, enc, en, 4096, 7, 9, why, sizeof(why)), -EINVAL);
		CHECK(strstr(why, "data kept flag") && d.m == NULL);
		printf("index miss: %s\n", why);
	}
	m.small = NULL;
	/* version 1's index (without kept data) is a miss: the shard is scanned again */
	CHECK_OK(rf__tar_index_encode(&t, 4096, 7, 9, &enc, &en));
	enc[8] = 1;
	reseal(enc, en);
	CHECK_EQ(rf__tar_index_decode(&d, enc, en, 4096, 7, 9, why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "version 1") && strstr(why, "expected version 2"));

	/* the shard's directory cannot take the index: $XDG_CACHE_HOME/ringflow/ */
	const char *r = t_path("ro/s.tar");
	CHECK((abs = realpath(r, NULL)));
	CHECK_OK(rf__tar_index_cache_name(abs, xidx, sizeof(xidx)));
	free(abs);
	CHECK(!strncmp(xidx, t_path("xdg/ringflow/"), strlen(t_path("xdg/ringflow/"))));
	CHECK(strstr(xidx, "%2Fro%2Fs.tar.idx"));
	sh("mkdir -p %s/ro/s.tar.idx/in-the-way", dir);   /* what even root cannot replace */
	if (geteuid() != 0) {
		sh("rmdir %s/ro/s.tar.idx/in-the-way %s/ro/s.tar.idx", dir, dir);
		CHECK(chmod(t_path("ro"), 0555) == 0);
	}
	ix_open(r, 0, xidx);
	CHECK(t_exists(xidx));
	ix_open(r, 1, xidx);
	/* nowhere to write: still opens */
	sh("rm -rf %s/xdg && : > %s/xdg", dir, dir);
	ix_open(r, 0, NULL);
	CHECK(unsetenv("XDG_CACHE_HOME") == 0);
	CHECK(setenv("HOME", t_path("home"), 1) == 0);
	CHECK_OK(rf__tar_index_cache_name("/d/%x/s.tar", xidx, sizeof(xidx)));
	CHECK(!strcmp(t_base(xidx), "%2Fd%2F%25x%2Fs.tar.idx"));
	CHECK(strstr(xidx, "home/.cache/ringflow/"));
	CHECK((abs = realpath(r, NULL)));
	CHECK_OK(rf__tar_index_cache_name(abs, xidx, sizeof(xidx)));
	free(abs);
	ix_open(r, 0, xidx);       /* ~/.cache/ringflow made, the index written there */
	ix_open(r, 1, xidx);
	if (geteuid() != 0)
		CHECK(chmod(t_path("ro"), 0755) == 0);
	/* a name too long for one component: hashed */
	char longp[1200];
	memset(longp, 'a', sizeof(longp));
	longp[0] = '/';
	longp[sizeof(longp) - 1] = 0;
	CHECK_OK(rf__tar_index_cache_name(longp, xidx, sizeof(xidx)));
	CHECK(strlen(t_base(xidx)) <= 255);
}

int main(void)
{
	unsigned long long seed = 42;

	if (access("/bin/tar", X_OK)) {
		fprintf(stderr, "dl-tar: no /bin/tar\n");
		return T_SKIP;
	}
	dir = t_mkdir("tar");
	setenv("LC_ALL", "C", 1);
	test_gnu_tar();
	test_handmade();
	test_damage();
	test_wds();
	test_index();
	flip_run("u.tar", 1500, &seed);
	flip_run("w.tar", 1500, &seed);
	flip_run("p.tar", 1000, &seed);
	printf("dl-tar: ok\n");
	return 0;
}
