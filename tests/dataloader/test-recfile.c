/* The .rfrec record file: round trips through the streaming writer and the reader
 * for a packed u8 layout with an odd stride (22 bytes), a custom layout (f32
 * payload at +5 and an i32 label at +30 in a 37-byte stride) and a stride of exactly
 * 4096 (no padding); every record and label is read back and compared, the file
 * must be a multiple of 4096 with zero padding, and the aligned spans a loader
 * would read must contain whole records and stay inside the file. Then corruption:
 * flipping any single header byte fails (magic or header CRC), a flipped data byte
 * passes the cheap open but fails RF_DS_VERIFY's data CRC, truncations, trailing
 * bytes and non-zero padding fail with their offsets, random flips anywhere always
 * fail verification, and the writer refuses existing files, empty outputs and
 * out-of-range labels without leaving a .tmp behind. */
#include "dl-test.h"

static char err[1024];

struct layout_case {
	const char *name;
	struct rf_rec_layout l;
	uint64_t count;
	uint64_t stride;          /* expected */
	uint64_t payload_offset;  /* expected */
	uint64_t label_offset;    /* expected */
};

static void make_payload(uint8_t *p, size_t n, uint64_t i)
{
	for (size_t k = 0; k < n; k++)
		p[k] = (uint8_t)(i * 131 + k * 7 + 3);
}

static int32_t make_label(uint64_t i, uint32_t classes)
{
	return classes ? (int32_t)((i * 7 + 1) % classes) : 0; /* 0: no labels, ignored */
}

static void write_file(const char *path, const struct layout_case *c, unsigned flags)
{
	struct rf_rec_writer *w;
	size_t pb = rf_ds_dtype_size(c->l.dtype);
	uint8_t *p;

	for (unsigned k = 0; k < c->l.ndim; k++)
		pb *= c->l.shape[k];
	p = malloc(pb);
	CHECK(p);
	CHECK_OPEN(rf_rec_writer_open(&w, path, &c->l, flags), rf_last_error());
	CHECK(strstr(rf_rec_writer_tmp_path(w), ".tmp"));
	CHECK(t_exists(rf_rec_writer_tmp_path(w)));
	for (uint64_t i = 0; i < c->count; i++) {
		make_payload(p, pb, i);
		CHECK_OPEN(rf_rec_writer_append(w, p, make_label(i, c->l.num_classes)), rf_last_error());
		CHECK(!t_exists(path) || (flags & RF_REC_OVERWRITE));
	}
	CHECK_OPEN(rf_rec_writer_finish(w), rf_last_error());
	free(p);
}

static void round_trip(const struct layout_case *c)
{
	const char *path = t_path(c->name);
	char tmp[600];
	struct rf_dataset ds;
	struct stat st;
	uint8_t *p, *q;
	size_t pb;

	write_file(path, c, 0);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	CHECK(!t_exists(tmp));
	CHECK(stat(path, &st) == 0);
	CHECK_EQ(st.st_size % 4096, 0);
	CHECK_EQ((uint64_t)st.st_size, (4096 + c->count * c->stride + 4095) / 4096 * 4096);

	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, RF_DS_VERIFY), rf_last_error());
	CHECK_EQ(ds.kind, RF_DS_RFREC);
	CHECK_EQ(ds.version, 1);
	CHECK_EQ(ds.count, c->count);
	CHECK_EQ(ds.src[0].stride, c->stride);
	CHECK_EQ(ds.src[0].data_offset, 4096);
	CHECK_EQ(ds.payload_offset, c->payload_offset);
	CHECK_EQ(ds.label_offset, c->label_offset);
	CHECK_EQ(ds.label_kind, c->l.label_kind);
	CHECK_EQ(ds.label_src, RF_DS_SRC_PAYLOAD);
	CHECK_EQ(ds.num_classes, c->l.num_classes);
	CHECK_EQ(ds.dtype, c->l.dtype);
	CHECK_EQ(ds.ndim, c->l.ndim);
	for (unsigned k = 0; k < c->l.ndim; k++)
		CHECK_EQ(ds.shape[k], c->l.shape[k]);
	pb = ds.payload_bytes;
	p = malloc(pb);
	q = malloc(pb);
	for (uint64_t i = 0; i < ds.count; i++) {
		struct rf_dataset_loc loc;
		int32_t label = -7;
		make_payload(p, pb, i);
		CHECK_OPEN(rf_dataset_read_record(&ds, i, q, &label), "read_record");
		CHECK(memcmp(p, q, pb) == 0);
		CHECK_EQ(label, c->l.label_kind == RF_LABEL_NONE ? -1 :
			 make_label(i, c->l.num_classes));
		rf_dataset_payload_loc(&ds, i, &loc);
		CHECK_EQ(loc.offset, 4096 + i * c->stride + c->payload_offset);
		CHECK(rf_dataset_loc_mem(&ds, &loc) == NULL);
	}
	/* aligned spans: contain the records whole and end inside the padded file */
	for (uint64_t first = 0; first < ds.count; first += 17) {
		uint64_t n = ds.count - first < 29 ? ds.count - first : 29, off, len;
		rf_dataset_span(&ds, 0, first, n, 4096, &off, &len);
		CHECK_EQ(off % 4096, 0);
		CHECK_EQ(len % 4096, 0);
		CHECK(off <= 4096 + first * c->stride);
		CHECK(off + len >= 4096 + (first + n) * c->stride);
		CHECK(off + len <= (uint64_t)st.st_size);
	}
	CHECK_EQ(rf_dataset_read_record(&ds, ds.count, q, NULL), -ERANGE);
	rf_dataset_describe(&ds, err, sizeof(err));
	CHECK(strstr(err, c->name));
	rf_dataset_close(&ds);
	free(p);
	free(q);
}

static void corrupt(const struct layout_case *c)
{
	const char *path = t_path("c.rfrec"), *bad = t_path("bad.rfrec");
	struct rf_dataset ds;
	uint8_t *good, *b;
	size_t n;
	int ret;

	write_file(path, c, RF_REC_OVERWRITE);
	good = t_read(path, &n);
	b = malloc(n + 8192);
	CHECK(b);

	/* every header byte flipped: rejected (magic for the first 8, CRC for the rest) */
	t_write(bad, good, n);
	for (size_t k = 0; k < 4096; k++) {
		uint8_t x = good[k] ^ 0x01;
		t_poke(bad, k, &x, 1);
		ret = t_msg(rf_dataset_open_rfrec(&ds, bad, 0), err, sizeof(err));
		if (k < 8)
			EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "offset 0: bad magic");
		else
			EXPECT_FAIL(ret, -EBADMSG, err, "bad.rfrec", "offset 4092: header CRC-32");
		rf_dataset_close(&ds);
		t_poke(bad, k, good + k, 1);
	}
	/* a data byte: the cheap open passes, verification fails */
	memcpy(b, good, n);
	b[4096 + 5 * c->stride + c->payload_offset] ^= 0x80;
	t_write(bad, b, n);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, bad, 0), rf_last_error());
	ret = t_msg(rf_dataset_verify(&ds), err, sizeof(err));
	EXPECT_FAIL(ret, -EBADMSG, err, "bad.rfrec", "data CRC-32", "expected 0x");
	rf_dataset_close(&ds);
	ret = t_msg(rf_dataset_open_rfrec(&ds, bad, RF_DS_VERIFY), err, sizeof(err));
	EXPECT_FAIL(ret, -EBADMSG, err, "bad.rfrec", "data corrupt");

	/* truncations */
	memcpy(b, good, n);
	t_write(bad, b, 0);
	ret = t_msg(rf_dataset_open_rfrec(&ds, bad, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "offset 0: file is empty");
	t_write(bad, b, 5);
	ret = t_msg(rf_dataset_open_rfrec(&ds, bad, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "bad magic \"RFREC\"");
	t_write(bad, b, 100);
	ret = t_msg(rf_dataset_open_rfrec(&ds, bad, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "offset 100: file truncated: ends at 100 bytes inside the 4096-byte header");
	t_write(bad, b, 4096);
	ret = t_msg(rf_dataset_open_rfrec(&ds, bad, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "offset 4096: file truncated in record 0");
	{
		uint64_t cut = 4096 + 10 * c->stride + 3;
		char want[128];
		t_write(bad, b, cut);
		ret = t_msg(rf_dataset_open_rfrec(&ds, bad, 0), err, sizeof(err));
		snprintf(want, sizeof(want), "offset %" PRIu64 ": file truncated in record 10", cut);
		EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", want);
	}
	if (4096 + c->count * c->stride < n) {
		t_write(bad, b, n - 1);
		ret = t_msg(rf_dataset_open_rfrec(&ds, bad, 0), err, sizeof(err));
		EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "expected zero padding");
		/* non-zero padding */
		b[n - 1] = 0x42;
		t_write(bad, b, n);
		ret = t_msg(rf_dataset_open_rfrec(&ds, bad, 0), err, sizeof(err));
		EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "padding byte is 0x42, expected 0");
		b[n - 1] = 0;
	}
	/* trailing bytes */
	memset(b + n, 0, 4096);
	t_write(bad, b, n + 4096);
	ret = t_msg(rf_dataset_open_rfrec(&ds, bad, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "4096 trailing bytes");
	/* not an rfrec at all */
	t_write(bad, "\x00\x00\x08\x03hello", 9);
	ret = t_msg(rf_dataset_open_rfrec(&ds, bad, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "bad magic \"\\x00\\x00\\x08\\x03hell\"", "not an .rfrec file");
	ret = t_msg(rf_dataset_open_rfrec(&ds, t_path("missing.rfrec"), 0), err, sizeof(err));
	EXPECT_FAIL(ret, -ENOENT, err, "missing.rfrec", "cannot open");

	/* random flips anywhere: verification always fails, never crashes */
	{
		unsigned long long s = 42;
		t_write(bad, good, n);
		for (int it = 0; it < 400; it++) {
			size_t at;
			uint8_t x;
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			at = (s >> 33) % n;
			x = good[at] ^ (uint8_t)(1u << ((s >> 20) % 8));
			t_poke(bad, at, &x, 1);
			ret = t_msg(rf_dataset_open_rfrec(&ds, bad, RF_DS_VERIFY), err, sizeof(err));
			EXPECT_FAIL(ret, 0, err, "bad.rfrec");
			t_poke(bad, at, good + at, 1);
		}
	}
	free(b);
	free(good);
}

/* A header whose CRC is fixed up after a field is changed: field checks fire. */
static void bad_fields(const struct layout_case *c)
{
	const char *path = t_path("f.rfrec"), *bad = t_path("fbad.rfrec");
	struct rf_dataset ds;
	uint8_t *good, *b;
	size_t n;
	struct { unsigned off; uint32_t val; int want; const char *s; } cases[] = {
		{ 8, 3, -ENOTSUP, "offset 8: version 3, expected 1 or 2" },
		{ 8, 2, -EINVAL, "expected 0 in a version 2 file" },
		{ 12, 512, -EINVAL, "offset 12: header size 512" },
		{ 16, 0, -EINVAL, "offset 16: record count 0" },
		{ 24, 0, -EINVAL, "stride 0" },
		{ 48, 0x0F, -EINVAL, "unknown dtype 0x0f" },
		{ 52, 5, -EINVAL, "5 dims, expected at most 4" },
		{ 72, 7, -EINVAL, "label kind 7" },
		{ 88, 12345, -EINVAL, "offset 88: data size 12345" },
		{ 200, 1, -EINVAL, "offset 200: reserved header byte" },
		{ 16, 1000000, -EINVAL, "data size" },
	};

	write_file(path, c, RF_REC_OVERWRITE);
	good = t_read(path, &n);
	b = malloc(n);
	for (unsigned k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		memcpy(b, good, n);
		b[cases[k].off] = (uint8_t)cases[k].val;
		b[cases[k].off + 1] = (uint8_t)(cases[k].val >> 8);
		b[cases[k].off + 2] = (uint8_t)(cases[k].val >> 16);
		b[cases[k].off + 3] = (uint8_t)(cases[k].val >> 24);
		uint32_t crc = (uint32_t)crc32(0, b, 4092);
		b[4092] = (uint8_t)crc;
		b[4093] = (uint8_t)(crc >> 8);
		b[4094] = (uint8_t)(crc >> 16);
		b[4095] = (uint8_t)(crc >> 24);
		t_write(bad, b, n);
		int ret = t_msg(rf_dataset_open_rfrec(&ds, bad, 0), err, sizeof(err));
		EXPECT_FAIL(ret, cases[k].want, err, "fbad.rfrec", cases[k].s);
	}
	free(b);
	free(good);
}

static void writer_errors(void)
{
	const char *path = t_path("w.rfrec");
	char tmp[600];
	struct rf_rec_layout l = { .dtype = RF_DS_DT_U8, .ndim = 1, .shape = { 3 },
				   .label_kind = RF_LABEL_U8, .num_classes = 4 };
	struct rf_rec_writer *w;
	struct rf_dataset ds;
	int ret;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	/* zero records: refused, nothing left */
	CHECK_OPEN(rf_rec_writer_open(&w, path, &l, 0), rf_last_error());
	ret = t_msg(rf_rec_writer_finish(w), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "w.rfrec", "no records");
	CHECK(!t_exists(path) && !t_exists(tmp));
	/* out-of-range label refused, abort leaves nothing */
	CHECK_OPEN(rf_rec_writer_open(&w, path, &l, 0), rf_last_error());
	CHECK_OPEN(rf_rec_writer_append(w, "abc", 3), rf_last_error());
	ret = t_msg(rf_rec_writer_append(w, "abc", 4), err, sizeof(err));
	EXPECT_FAIL(ret, -ERANGE, err, "record 1: label 4 out of range, expected [0, 4)");
	ret = t_msg(rf_rec_writer_append(w, "abc", -1), err, sizeof(err));
	EXPECT_FAIL(ret, -ERANGE, err, "label -1");
	rf_rec_writer_abort(w);
	CHECK(!t_exists(path) && !t_exists(tmp));
	/* existing file: refused at open, and at finish if it appeared meanwhile */
	CHECK_OPEN(rf_rec_writer_open(&w, path, &l, 0), rf_last_error());
	CHECK_OPEN(rf_rec_writer_append(w, "abc", 1), rf_last_error());
	t_write(path, "other", 5);
	ret = t_msg(rf_rec_writer_finish(w), err, sizeof(err));
	EXPECT_FAIL(ret, -EEXIST, err, "w.rfrec", "exists");
	CHECK(!t_exists(tmp));
	{
		size_t n;
		uint8_t *b = t_read(path, &n);
		CHECK(n == 5 && !memcmp(b, "other", 5));
		free(b);
	}
	ret = t_msg(rf_rec_writer_open(&w, path, &l, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EEXIST, err, "w.rfrec", "exists");
	CHECK(w == NULL && !t_exists(tmp));
	/* overwrite allowed with the flag */
	CHECK_OPEN(rf_rec_writer_open(&w, path, &l, RF_REC_OVERWRITE), rf_last_error());
	CHECK_OPEN(rf_rec_writer_append(w, "xyz", 2), rf_last_error());
	CHECK_OPEN(rf_rec_writer_finish(w), rf_last_error());
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, RF_DS_VERIFY), rf_last_error());
	CHECK_EQ(ds.count, 1);
	CHECK_EQ(ds.src[0].stride, 4);
	CHECK_EQ(ds.src[0].size, 8192);
	rf_dataset_close(&ds);
	/* bad layouts */
	l.shape[0] = 0;
	ret = t_msg(rf_rec_writer_open(&w, t_path("l.rfrec"), &l, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "l.rfrec", "shape dim 0 is 0");
	l.shape[0] = 3;
	l.stride = 4;
	l.label_offset = 2;
	ret = t_msg(rf_rec_writer_open(&w, t_path("l.rfrec"), &l, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "l.rfrec", "overlaps payload");
	l.label_offset = 4;
	ret = t_msg(rf_rec_writer_open(&w, t_path("l.rfrec"), &l, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "l.rfrec", "does not fit in the 4-byte record");
	l.stride = 0;
	l.num_classes = 300;
	ret = t_msg(rf_rec_writer_open(&w, t_path("l.rfrec"), &l, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "300 classes with u8 labels");
	CHECK(!t_exists(t_path("l.rfrec.tmp")));
	/* a directory that does not exist */
	l.num_classes = 4;
	ret = t_msg(rf_rec_writer_open(&w, t_path("nodir/x.rfrec"), &l, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -ENOENT, err, "x.rfrec.tmp", "cannot create");
}

int main(void)
{
	static const struct layout_case cases[] = {
		/* packed: 21 bytes + u8 label = 22, not a multiple of anything useful */
		{ "packed.rfrec", { .dtype = RF_DS_DT_U8, .ndim = 2, .shape = { 3, 7 },
				    .label_kind = RF_LABEL_U8, .num_classes = 10 },
		  1000, 22, 0, 21 },
		/* custom: f32 2x3 at +5, i32 label at +30, stride 37 */
		{ "custom.rfrec", { .stride = 37, .payload_offset = 5, .dtype = RF_DS_DT_F32,
				    .ndim = 2, .shape = { 2, 3 }, .label_kind = RF_LABEL_I32,
				    .label_offset = 30, .num_classes = 100000 },
		  333, 37, 5, 30 },
		/* exactly 4096 per record: no padding at the end */
		{ "page.rfrec", { .dtype = RF_DS_DT_U8, .ndim = 1, .shape = { 4095 },
				  .label_kind = RF_LABEL_U8, .num_classes = 3 },
		  20, 4096, 0, 4095 },
		/* no labels, 1-byte records */
		{ "tiny.rfrec", { .dtype = RF_DS_DT_U8, .ndim = 0, .label_kind = RF_LABEL_NONE,
				  .num_classes = 0 },
		  5000, 1, 0, 0 },
	};

	t_mkdir("rec");
	for (unsigned k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
		round_trip(&cases[k]);
	corrupt(&cases[0]);
	corrupt(&cases[1]);
	bad_fields(&cases[0]);
	writer_errors();
	printf("dl-recfile: ok\n");
	return 0;
}
