/* IDX files: with no argument, crafted files in a scratch directory, raw and gzip'd:
 * a valid pair is opened and every record compared with its source bytes (from disk
 * for raw, from memory for gzip, through the locators and rf_dataset_read_record);
 * then each kind of bad file (wrong magic, wrong or unknown dtype, wrong dims, zero
 * dimension, truncated data, trailing bytes, count mismatch between images and
 * labels, label out of range, zero-length, header-only, partial header, corrupt,
 * truncated or garbage-tailed gzip stream, missing file) must fail with the
 * expected code and a message naming the file and the offset or word expected; and
 * every truncation plus thousands of random byte flips must fail cleanly or succeed,
 * never crash. With the argument "fmnist", the real Fashion-MNIST files are parsed
 * and checked against counts, shapes and checksums computed once with Python (exit
 * 77 when they are not installed). */
#include "dl-test.h"

#define N 7
#define R 5
#define C 4

static uint8_t img_fill(uint64_t i) { return (uint8_t)(i * 37 + 11); }
static uint8_t lab_fill(uint64_t i) { return (uint8_t)((i * 3) % 10); }

static uint8_t *img, *lab;
static size_t img_n, lab_n;
static char err[1024];

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Write bytes as name (raw) and name.gz. */
static void write_both(const char *name, const uint8_t *b, size_t n)
{
	char gz[256];
	snprintf(gz, sizeof(gz), "%s.gz", name);
	t_write(t_path(name), b, n);
	t_write_gz(t_path(gz), b, n);
}

static int open_pair(const char *ip, const char *lp, uint32_t classes, struct rf_dataset *ds)
{
	err[0] = 0;
	return t_msg(rf_dataset_open_idx_pair(ds, ip, lp, classes, 0), err, sizeof(err));
}

/* Open a crafted bad images file (raw and gz) against good labels; expect failure
 * with the given substrings. */
static void bad_images(const char *name, const uint8_t *b, size_t n, int want,
		       const char *s1, const char *s2)
{
	struct rf_dataset ds;
	char gz[256];

	snprintf(gz, sizeof(gz), "%s.gz", name);
	write_both(name, b, n);
	for (int z = 0; z < 2; z++) {
		const char *p = t_path(z ? gz : name);
		int ret = open_pair(p, t_path("lab"), 10, &ds);
		EXPECT_FAIL(ret, want, err, t_base(p), s1, s2 ? s2 : "");
		rf_dataset_close(&ds);
	}
}

static void bad_labels(const char *name, const uint8_t *b, size_t n, int want,
		       const char *s1, const char *s2)
{
	struct rf_dataset ds;
	char gz[256];

	snprintf(gz, sizeof(gz), "%s.gz", name);
	write_both(name, b, n);
	for (int z = 0; z < 2; z++) {
		const char *p = t_path(z ? gz : name);
		int ret = open_pair(t_path("img"), p, 10, &ds);
		EXPECT_FAIL(ret, want, err, t_base(p), s1, s2 ? s2 : "");
		rf_dataset_close(&ds);
	}
}

static void check_valid(const char *ip, const char *lp, int img_gz, int lab_gz)
{
	struct rf_dataset ds;
	uint8_t rec[R * C];

	CHECK_OPEN(open_pair(ip, lp, 10, &ds), err);
	CHECK_EQ(ds.kind, RF_DS_IDX);
	CHECK_EQ(ds.count, N);
	CHECK_EQ(ds.ndim, 2);
	CHECK_EQ(ds.shape[0], R);
	CHECK_EQ(ds.shape[1], C);
	CHECK_EQ(ds.dtype, RF_DS_DT_U8);
	CHECK_EQ(ds.payload_bytes, R * C);
	CHECK_EQ(ds.label_kind, RF_LABEL_U8);
	CHECK_EQ(ds.label_src, RF_DS_SRC_LABEL);
	CHECK_EQ(ds.num_classes, 10);
	CHECK_EQ(ds.src[0].data_offset, 16);
	CHECK_EQ(ds.src[1].data_offset, 8);
	CHECK_EQ(ds.src[0].compressed, img_gz);
	CHECK_EQ(ds.src[1].compressed, lab_gz);
	CHECK_EQ(ds.src[0].fd >= 0, !img_gz);
	CHECK_EQ(ds.src[0].mem != NULL, img_gz);
	for (uint64_t i = 0; i < N; i++) {
		struct rf_dataset_loc pl, ll;
		int32_t label = -5;
		rf_dataset_payload_loc(&ds, i, &pl);
		CHECK_EQ(pl.offset, 16 + i * R * C);
		CHECK_EQ(pl.length, R * C);
		CHECK(rf_dataset_label_loc(&ds, i, &ll) == 0);
		CHECK_EQ(ll.src, 1);
		CHECK_EQ(ll.offset, 8 + i);
		if (img_gz)
			CHECK(memcmp(rf_dataset_loc_mem(&ds, &pl), img + pl.offset, R * C) == 0);
		else
			CHECK(rf_dataset_loc_mem(&ds, &pl) == NULL);
		CHECK_OPEN(rf_dataset_read_record(&ds, i, rec, &label), "read_record");
		CHECK(memcmp(rec, img + 16 + i * R * C, R * C) == 0);
		CHECK_EQ(label, lab_fill(i));
	}
	CHECK_EQ(rf_dataset_read_record(&ds, N, rec, NULL), -ERANGE);
	CHECK_OPEN(rf_dataset_verify(&ds), rf_last_error());
	rf_dataset_close(&ds);
	rf_dataset_close(&ds); /* idempotent */

	/* num_classes 0 infers max + 1 = 9 (labels are 0,3,6,9,2,5,8). */
	CHECK_OPEN(rf_dataset_open_idx_pair(&ds, ip, lp, 0, 0), rf_last_error());
	CHECK_EQ(ds.num_classes, 10);
	rf_dataset_close(&ds);
}

/* Every truncation and many random flips: no crash; failures name the file. */
static void fuzz(const char *name, const uint8_t *good, size_t n, int images, int gz)
{
	const char *p = t_path(name);
	uint8_t *b = malloc(n + 1);
	unsigned long long seed = 0x5eed0000u + n;
	struct rf_dataset ds;
	int ret;

	CHECK(b);
	t_write(p, good, n);
	for (size_t len = n; len-- > 0;) {
		CHECK(truncate(p, (off_t)len) == 0);
		ret = images ? open_pair(p, t_path("lab"), 10, &ds) : open_pair(t_path("img"), p, 10, &ds);
		if (!strstr(err, t_base(p)))
			fprintf(stderr, "truncated to %zu bytes:\n", len);
		EXPECT_FAIL(ret, 0, err, t_base(p));
		rf_dataset_close(&ds);
	}
	t_write(p, good, n);
	for (int it = 0; it < 1500; it++) {
		size_t at[4];
		unsigned flips = 1 + (unsigned)((seed = seed * 6364136223846793005ull + 1) >> 60) % 4;
		memcpy(b, good, n);
		for (unsigned k = 0; k < flips; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			at[k] = (seed >> 33) % n;
			b[at[k]] ^= (uint8_t)(1u << ((seed >> 20) % 8));
		}
		for (unsigned k = 0; k < flips; k++)
			t_poke(p, at[k], b + at[k], 1);
		ret = images ? open_pair(p, t_path("lab"), 10, &ds) : open_pair(t_path("img"), p, 10, &ds);
		if (ret) {
			if (!strstr(err, t_base(p)))
				fprintf(stderr, "flip iteration %d: ret %d\n", it, ret);
			EXPECT_FAIL(ret, 0, err, t_base(p));
		} else {
			uint8_t rec[R * C];
			for (uint64_t i = 0; i < ds.count; i++)
				CHECK_OPEN(rf_dataset_read_record(&ds, i, rec, NULL), "read_record");
		}
		rf_dataset_close(&ds);
		for (unsigned k = 0; k < flips; k++)
			t_poke(p, at[k], good + at[k], 1);
	}
	(void)gz;
	free(b);
}

static int crafted(void)
{
	uint32_t idims[3] = { N, R, C }, ldims[1] = { N };
	struct rf_dataset ds;
	uint8_t *b;
	size_t n;
	int ret;

	t_mkdir("idx");
	img = t_idx(0x08, 3, idims, img_fill, &img_n);
	lab = t_idx(0x08, 1, ldims, lab_fill, &lab_n);
	write_both("img", img, img_n);
	write_both("lab", lab, lab_n);

	check_valid(t_path("img"), t_path("lab"), 0, 0);
	check_valid(t_path("img.gz"), t_path("lab.gz"), 1, 1);
	check_valid(t_path("img"), t_path("lab.gz"), 0, 1);
	check_valid(t_path("img.gz"), t_path("lab"), 1, 0);

	/* A single IDX file, no labels. */
	CHECK_OPEN(rf_dataset_open_idx(&ds, t_path("img.gz"), 0, 0), rf_last_error());
	CHECK_EQ(ds.kind, RF_DS_IDX_SINGLE);
	CHECK_EQ(ds.count, N);
	CHECK_EQ(ds.label_kind, RF_LABEL_NONE);
	{
		int32_t l = 0;
		uint8_t rec[R * C];
		CHECK_OPEN(rf_dataset_read_record(&ds, 3, rec, &l), "read");
		CHECK_EQ(l, -1);
		CHECK(memcmp(rec, img + 16 + 3 * R * C, R * C) == 0);
	}
	rf_dataset_close(&ds);
	CHECK_OPEN(rf_dataset_open_idx(&ds, t_path("lab"), 1, 0), rf_last_error());
	CHECK_EQ(ds.ndim, 0);
	CHECK_EQ(ds.payload_bytes, 1);
	rf_dataset_close(&ds);

	/* Concatenated gzip members are one valid stream (gzip(1) semantics). */
	{
		uint8_t *a, *c;
		size_t an, cn;
		t_write_gz(t_path("part1.gz"), img, 30);
		t_write_gz(t_path("part2.gz"), img + 30, img_n - 30);
		a = t_read(t_path("part1.gz"), &an);
		c = t_read(t_path("part2.gz"), &cn);
		b = malloc(an + cn);
		memcpy(b, a, an);
		memcpy(b + an, c, cn);
		t_write(t_path("multi.gz"), b, an + cn);
		check_valid(t_path("multi.gz"), t_path("lab"), 1, 0);
		/* garbage after the stream */
		memcpy(b + an, "JUNKJUNK", 8);
		memcpy(b, a, an);
		free(a);
		a = t_read(t_path("img.gz"), &an);
		b = realloc(b, an + 8);
		memcpy(b, a, an);
		memcpy(b + an, "JUNKJUNK", 8);
		t_write(t_path("junk.gz"), b, an + 8);
		ret = open_pair(t_path("junk.gz"), t_path("lab"), 10, &ds);
		EXPECT_FAIL(ret, -EINVAL, err, "junk.gz", "8 bytes of trailing garbage after the gzip stream");
		/* truncated compressed file */
		t_write(t_path("cut.gz"), a, an - 10);
		ret = open_pair(t_path("cut.gz"), t_path("lab"), 10, &ds);
		EXPECT_FAIL(ret, -EINVAL, err, "cut.gz", "gzip stream truncated");
		/* corrupt CRC in the gzip trailer: deterministic data check failure */
		memcpy(b, a, an);
		b[an - 8] ^= 0xff;
		t_write(t_path("crc.gz"), b, an);
		ret = open_pair(t_path("crc.gz"), t_path("lab"), 10, &ds);
		EXPECT_FAIL(ret, -EBADMSG, err, "crc.gz", "corrupt gzip stream", "compressed offset");
		/* corrupt deflate data in the middle */
		memcpy(b, a, an);
		for (size_t k = 12; k < an - 8; k += 3)
			b[k] ^= 0x5a;
		t_write(t_path("mid.gz"), b, an);
		ret = open_pair(t_path("mid.gz"), t_path("lab"), 10, &ds);
		EXPECT_FAIL(ret, 0, err, "mid.gz");
		/* a gzip header with nothing after it */
		t_write(t_path("hdronly.gz"), a, 10);
		ret = open_pair(t_path("hdronly.gz"), t_path("lab"), 10, &ds);
		EXPECT_FAIL(ret, -EINVAL, err, "hdronly.gz", "truncated");
		free(a);
		free(c);
		free(b);
	}

	/* wrong magic */
	b = malloc(img_n + 64);
	memcpy(b, img, img_n);
	b[0] = 0x12; b[1] = 0x34;
	bad_images("magic", b, img_n, -EINVAL, "offset 0: bad magic 0x12340803, expected 0x00000803 (u8, 3 dims)", NULL);
	memset(b, 0, 4);
	bad_images("zeromagic", b, img_n, -EINVAL, "bad magic 0x00000000", NULL);
	/* recognised dtype that is not u8 */
	memcpy(b, img, img_n);
	b[2] = 0x0D;
	bad_images("f32", b, img_n, -ENOTSUP, "dtype f32 (0x0d)", "expected u8");
	b[2] = 0x0C;
	bad_images("i32", b, img_n, -ENOTSUP, "dtype i32", "offset 2");
	/* unknown dtype */
	b[2] = 0x0F;
	bad_images("dt0f", b, img_n, -EINVAL, "unknown dtype 0x0f", "offset 0");
	/* images with 1 dim, labels with 3 */
	bad_images("ndim", lab, lab_n, -EINVAL, "offset 3: 1 dims", "expected 0x00000803");
	bad_labels("lndim", img, img_n, -EINVAL, "offset 3: 3 dims", "expected 0x00000801 (u8, 1 dim)");
	/* zero dimension */
	memcpy(b, img, img_n);
	put_be32(b + 8, 0);
	bad_images("zerodim", b, 16, -EINVAL, "offset 8: dimension 1 is 0", NULL);
	/* truncated data */
	memcpy(b, img, img_n);
	bad_images("trunc", b, img_n - 3, -EINVAL, "data truncated", "expected 156 (7 x 5 x 4 u8 after a 16-byte header)");
	bad_labels("ltrunc", lab, lab_n - 1, -EINVAL, "offset 14", "expected 15");
	/* trailing bytes */
	memset(b + img_n, 0xAB, 5);
	bad_images("trail", b, img_n + 5, -EINVAL, "offset 156: 5 trailing bytes", "expected 156");
	/* zero-length, header only, partial header */
	bad_images("empty", b, 0, -EINVAL, "offset 0", "empty");
	bad_images("hdr", b, 16, -EINVAL, "offset 16", "truncated");
	bad_images("phdr", b, 10, -EINVAL, "offset 10", "inside the 16-byte header");
	bad_images("pmagic", b, 3, -EINVAL, "offset 3", "inside the 4-byte IDX magic");
	/* count mismatch */
	{
		uint32_t d6[1] = { N - 1 };
		uint8_t *l6 = t_idx(0x08, 1, d6, lab_fill, &n);
		bad_labels("lab6", l6, n, -EINVAL, "offset 4: 6 labels, expected 7 to match the images", "img");
		free(l6);
	}
	/* label out of range */
	memcpy(b, lab, lab_n);
	b[8 + 4] = 10;
	bad_labels("lrange", b, lab_n, -ERANGE, "offset 12 (record 4): label 10 out of range, expected [0, 10)", NULL);
	/* ... and fine with more classes */
	t_write(t_path("lab11"), b, lab_n);
	CHECK_OPEN(open_pair(t_path("img"), t_path("lab11"), 11, &ds), err);
	CHECK_EQ(ds.num_classes, 11);
	rf_dataset_close(&ds);
	/* missing file, directory */
	ret = open_pair(t_path("nope.gz"), t_path("lab"), 10, &ds);
	EXPECT_FAIL(ret, -ENOENT, err, "nope.gz", "cannot open");
	ret = open_pair(t_dir, t_path("lab"), 10, &ds);
	EXPECT_FAIL(ret, -EISDIR, err, "directory");
	/* classes out of range for u8 */
	ret = open_pair(t_path("img"), t_path("lab"), 300, &ds);
	EXPECT_FAIL(ret, -EINVAL, err, "300 classes");
	/* a header claiming a huge size in a tiny gzip file must not allocate it */
	memcpy(b, img, 16);
	put_be32(b + 4, 0xffffffffu);
	put_be32(b + 8, 0xffffu);
	put_be32(b + 12, 0xffu);
	bad_images("huge", b, 16, -EINVAL, "offset 4", "at most");
	put_be32(b + 4, 100000);
	put_be32(b + 8, 1000);
	put_be32(b + 12, 1000);
	t_write(t_path("big"), b, 16);
	ret = open_pair(t_path("big"), t_path("lab"), 10, &ds);
	EXPECT_FAIL(ret, -EINVAL, err, "big", "offset 16: data truncated");
	t_write_gz(t_path("big.gz"), b, 16);
	ret = open_pair(t_path("big.gz"), t_path("lab"), 10, &ds);
	EXPECT_FAIL(ret, -EINVAL, err, "big.gz", "offset 4: header claims 100000000016 bytes",
		    "more than a");
	free(b);

	/* A file that shrinks after the open: the read names that file (images or
	 * labels), the record and the bytes -- rf-pack reports this message. */
	for (int which = 0; which < 2; which++) {
		const char *shr = which ? "shr-lab" : "shr-img";
		int32_t l;
		uint8_t rec[R * C];
		t_write(t_path("shr-img"), img, img_n);
		t_write(t_path("shr-lab"), lab, lab_n);
		CHECK_OPEN(open_pair(t_path("shr-img"), t_path("shr-lab"), 10, &ds), err);
		CHECK(truncate(t_path(shr), which ? 8 + 3 : 16 + 3 * R * C) == 0);
		CHECK_OPEN(rf_dataset_read_record(&ds, 2, rec, &l), "read before the cut");
		ret = rf_dataset_read_record(&ds, 3, rec, &l);
		snprintf(err, sizeof(err), "%s", rf_last_error());
		EXPECT_FAIL(ret, -EIO, err, shr, "record 3:", which ? "label bytes [11, 12)"
			    : "payload bytes [76, 96)", "short read");
		ret = rf_dataset_read_record(&ds, N, rec, &l);
		snprintf(err, sizeof(err), "%s", rf_last_error());
		EXPECT_FAIL(ret, -ERANGE, err, "shr-img", "record 7 asked for", "has 7");
		rf_dataset_close(&ds);
	}

	/* fuzz: raw and gz, images and labels */
	fuzz("fz-img", img, img_n, 1, 0);
	fuzz("fz-lab", lab, lab_n, 0, 0);
	{
		uint8_t *g = t_read(t_path("img.gz"), &n);
		fuzz("fz-img.gz", g, n, 1, 1);
		free(g);
		g = t_read(t_path("lab.gz"), &n);
		fuzz("fz-lab.gz", g, n, 0, 1);
		free(g);
	}
	free(img);
	free(lab);
	printf("dl-idx: crafted files ok\n");
	return 0;
}

static int fmnist(void)
{
	static const char *dir = "/usr/share/datasets/fashion-mnist";
	static const struct {
		const char *name;
		uint64_t count, label_sum, pixel_sum;
		uint32_t pixel_crc;
		uint8_t first[5];
	} sets[] = {
		{ "train", 60000, 270000, 3431114169ull, 0xae65dccdu, { 9, 0, 0, 3, 0 } },
		{ "t10k", 10000, 45000, 573469082ull, 0x12728439u, { 9, 2, 1, 1, 6 } },
	};
	char ip[512], lp[512];

	snprintf(ip, sizeof(ip), "%s/train-images-idx3-ubyte.gz", dir);
	if (!t_exists(ip)) {
		printf("dl-idx: %s not installed, skipping\n", ip);
		return T_SKIP;
	}
	for (unsigned s = 0; s < 2; s++) {
		struct rf_dataset ds;
		uint64_t lsum = 0, psum = 0;
		uint8_t rec[784];

		snprintf(ip, sizeof(ip), "%s/%s-images-idx3-ubyte.gz", dir, sets[s].name);
		snprintf(lp, sizeof(lp), "%s/%s-labels-idx1-ubyte.gz", dir, sets[s].name);
		CHECK_OPEN(rf_dataset_open_idx_pair(&ds, ip, lp, 10, 0), rf_last_error());
		CHECK_EQ(ds.count, sets[s].count);
		CHECK_EQ(ds.ndim, 2);
		CHECK_EQ(ds.shape[0], 28);
		CHECK_EQ(ds.shape[1], 28);
		CHECK_EQ(ds.payload_bytes, 784);
		CHECK_EQ(ds.src[0].size, 16 + sets[s].count * 784);
		CHECK_EQ(crc32(0, ds.src[0].mem + 16, (uInt)(sets[s].count * 784)), sets[s].pixel_crc);
		for (uint64_t i = 0; i < ds.count; i++) {
			int32_t l;
			CHECK_OPEN(rf_dataset_read_record(&ds, i, rec, &l), "read");
			CHECK(l >= 0 && l < 10);
			if (i < 5)
				CHECK_EQ(l, sets[s].first[i]);
			lsum += (uint64_t)l;
			for (unsigned k = 0; k < 784; k++)
				psum += rec[k];
		}
		CHECK_EQ(lsum, sets[s].label_sum);
		CHECK_EQ(psum, sets[s].pixel_sum);
		rf_dataset_close(&ds);
		printf("dl-idx: %s: %" PRIu64 " records ok\n", sets[s].name, sets[s].count);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "fmnist"))
		return fmnist();
	return crafted();
}
