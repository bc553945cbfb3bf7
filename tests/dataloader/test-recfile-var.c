/* The .rfrec version 2 file (records of any length, with an index and class names):
 * round trips through the writer and the reader for records of 1 byte to 300 KB with
 * labels and named classes, and without labels; every record and label is read back,
 * its place in the file comes from the index, the sections start at multiples of
 * 4096 with zero padding between them. Then corruption: any header byte flipped
 * fails; an index byte flipped fails its CRC; an index rewritten with a valid CRC but
 * a gap, an overlap, an empty record, a record past the data or a label out of range
 * fails naming the entry's offset and record; truncation, trailing bytes and non-zero
 * padding fail with their offsets; class names without their NULs or one too many
 * fail; a flipped data byte passes the cheap open and fails RF_DS_VERIFY. The writer
 * refuses the wrong append for its kind, empty records, labels out of range and
 * class names without labels. Fixed-size (version 1) files still open as before. */
#include "dl-test.h"

/* the version 2 header fields, as dataloader/README.md writes them */
enum { H_VERSION = 8, H_STRIDE = 24, H_NUM_CLASSES = 76, H_INDEX_OFF = 104, H_INDEX_CRC = 112,
       H_MAX_RECORD = 116, H_CLASSES_OFF = 120, H_CLASSES_BYTES = 128, H_CLASSES_CRC = 136, H_HDR_CRC = 4092 };

static uint32_t rf__le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rf__le64(const uint8_t *p)
{
	return (uint64_t)rf__le32(p) | (uint64_t)rf__le32(p + 4) << 32;
}

static void rf__put_le32(uint8_t *p, uint32_t v)
{
	for (int k = 0; k < 4; k++)
		p[k] = (uint8_t)(v >> (8 * k));
}

static void rf__put_le64(uint8_t *p, uint64_t v)
{
	rf__put_le32(p, (uint32_t)v);
	rf__put_le32(p + 4, (uint32_t)(v >> 32));
}

static char err[1024];

static size_t rec_len(uint64_t i)
{
	static const size_t lens[] = { 1, 7, 4095, 4096, 4097, 300000, 33, 12000 };
	return i < 8 ? lens[i] : 100 + (i * 7919) % 20000;
}

static void rec_fill(uint8_t *p, size_t n, uint64_t i)
{
	for (size_t k = 0; k < n; k++)
		p[k] = (uint8_t)(i * 37 + k * 11 + 1);
}

static const char *const names[] = { "cat", "dog", "n01440764", "snake eel" };

static void write_var(const char *path, uint64_t count, int labels)
{
	struct rf_rec_layout lay = { .variable = 1, .encoding = RF_REC_ENC_RAW,
				     .label_kind = labels ? RF_LABEL_I32 : RF_LABEL_NONE,
				     .num_classes = labels ? 4 : 0,
				     .classes = labels ? names : NULL };
	struct rf_rec_writer *w;
	uint8_t *p = malloc(300000);

	CHECK(p);
	CHECK_OPEN(rf_rec_writer_open(&w, path, &lay, RF_REC_OVERWRITE), rf_last_error());
	for (uint64_t i = 0; i < count; i++) {
		rec_fill(p, rec_len(i), i);
		CHECK_OPEN(rf_rec_writer_append_bytes(w, p, rec_len(i), labels ? (int32_t)(i % 4) : -1),
			   rf_last_error());
	}
	CHECK_OPEN(rf_rec_writer_finish(w), rf_last_error());
	free(p);
}

static void round_trip(uint64_t count, int labels)
{
	const char *path = t_path("v.rfrec");
	struct rf_dataset ds;
	uint8_t *p = malloc(300000), *q = malloc(300000);
	uint64_t total = 0, longest = 0, ioff;
	char desc[512];

	CHECK(p && q);
	write_var(path, count, labels);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, RF_DS_VERIFY), rf_last_error());
	CHECK(rf_dataset_variable(&ds));
	CHECK_EQ(ds.version, 2u);
	CHECK_EQ(ds.count, count);
	CHECK_EQ(ds.payload_bytes, 0u);
	for (uint64_t i = 0; i < count; i++) {
		struct rf_dataset_loc loc;
		int32_t lab = 7;
		rf_dataset_payload_loc(&ds, i, &loc);
		CHECK_EQ(loc.offset, 4096 + total);
		CHECK_EQ(loc.length, rec_len(i));
		CHECK_OPEN(rf_dataset_read_record(&ds, i, q, &lab), rf_last_error());
		rec_fill(p, rec_len(i), i);
		CHECK(memcmp(p, q, rec_len(i)) == 0);
		CHECK_EQ(lab, labels ? (int32_t)(i % 4) : -1);
		total += rec_len(i);
		if (rec_len(i) > longest)
			longest = rec_len(i);
	}
	CHECK_EQ(ds.src[0].data_bytes, total);
	CHECK_EQ(ds.max_record, longest);
	ioff = (4096 + total + 4095) / 4096 * 4096;
	CHECK_EQ(ds.src[0].size, labels ? (ioff + count * 16 + 4095) / 4096 * 4096 + 4096
					: (ioff + count * 16 + 4095) / 4096 * 4096);
	if (labels) {
		CHECK(ds.classes);
		for (unsigned k = 0; k < 4; k++)
			CHECK(strcmp(ds.classes[k], names[k]) == 0);
	} else {
		CHECK(!ds.classes);
	}
	rf_dataset_describe(&ds, desc, sizeof(desc));
	CHECK(strstr(desc, "rfrec v2"));
	{       /* the longest record's length, and no shortest the index does not say */
		char want[64];
		snprintf(want, sizeof(want), "records of up to %" PRIu64 " bytes", ds.max_record);
		CHECK(strstr(desc, want));
	}
	CHECK(rf_dataset_read_record(&ds, count, q, NULL) == -ERANGE);
	rf_dataset_close(&ds);
	free(p);
	free(q);
}

/* The header's CRC recomputed after an edit of b (so the check that follows is
 * reached). */
static void fix_hdr(uint8_t *b)
{
	rf__put_le32(b + H_HDR_CRC, (uint32_t)crc32(0L, b, H_HDR_CRC));
}

/* The index's CRC recomputed into the header after an edit of the index. */
static void fix_index(uint8_t *b, uint64_t count)
{
	uint64_t ioff = rf__le64(b + H_INDEX_OFF);
	rf__put_le32(b + H_INDEX_CRC, (uint32_t)crc32_z(0L, b + ioff, count * 16));
	fix_hdr(b);
}

static int open_bytes(const char *bad, const uint8_t *b, size_t n, unsigned flags)
{
	struct rf_dataset ds;
	int ret;

	t_write(bad, b, n);
	ret = t_msg(rf_dataset_open_rfrec(&ds, bad, flags), err, sizeof(err));
	rf_dataset_close(&ds);
	return ret;
}

static void corrupt(void)
{
	const char *path = t_path("c.rfrec"), *bad = t_path("bad.rfrec");
	const uint64_t count = 20;
	uint8_t *good, *b;
	uint64_t ioff, coff;
	size_t n;
	int ret;
	char want[160];

	write_var(path, count, 1);
	good = t_read(path, &n);
	b = malloc(n + 8192);
	CHECK(b);
	ioff = rf__le64(good + H_INDEX_OFF);
	coff = rf__le64(good + H_CLASSES_OFF);
	CHECK(ioff % 4096 == 0 && coff % 4096 == 0 && coff > ioff);

	/* every header byte flipped: rejected */
	for (size_t k = 0; k < 4096; k++) {
		memcpy(b, good, n);
		b[k] ^= 0x01;
		CHECK(open_bytes(bad, b, n, 0) < 0);
	}
	/* every index byte flipped: its CRC */
	for (size_t k = 0; k < count * 16; k += 3) {
		memcpy(b, good, n);
		b[ioff + k] ^= 0x10;
		ret = open_bytes(bad, b, n, 0);
		EXPECT_FAIL(ret, -EBADMSG, err, "bad.rfrec", "index CRC-32", "index corrupt");
	}
	/* consistent CRCs, wrong index: a gap, an overlap, an empty record, past the end */
	static const struct { unsigned rec, field; int64_t delta; } edits[] = {
		{ 3, 0, 1 }, { 3, 0, -1 }, { 5, 8, -(int64_t)4097 }, { 19, 8, 1 }, { 0, 0, 4096 },
	};
	for (unsigned e = 0; e < sizeof(edits) / sizeof(edits[0]); e++) {
		uint8_t *ent;
		memcpy(b, good, n);
		ent = b + ioff + edits[e].rec * 16;
		if (edits[e].field == 0)
			rf__put_le64(ent, rf__le64(ent) + (uint64_t)edits[e].delta);
		else
			rf__put_le32(ent + 8, rf__le32(ent + 8) + (uint32_t)edits[e].delta);
		fix_index(b, count);
		ret = open_bytes(bad, b, n, 0);
		/* the entry edited, or (its length) the next one */
		unsigned r = edits[e].rec + (edits[e].field == 8 && edits[e].rec + 1 < count);
		snprintf(want, sizeof(want), "offset %" PRIu64 " (index entry of record %u)",
			 ioff + r * 16, r);
		if (ret != -EINVAL || !(strstr(err, want) || strstr(err, "the index's records end at"))) {
			fprintf(stderr, "edit %u: %d %s (expected %s)\n", e, ret, err, want);
			exit(1);
		}
	}
	/* a label out of range, with the CRC made right */
	memcpy(b, good, n);
	rf__put_le32(b + ioff + 7 * 16 + 12, 4);
	fix_index(b, count);
	ret = open_bytes(bad, b, n, 0);
	snprintf(want, sizeof(want), "offset %" PRIu64 " (index entry of record 7): label 4",
		 ioff + 7 * 16 + 12);
	EXPECT_FAIL(ret, -ERANGE, err, "bad.rfrec", want, "expected [0, 4)");
	/* the longest record the header names is not the index's */
	memcpy(b, good, n);
	rf__put_le32(b + H_MAX_RECORD, rf__le32(b + H_MAX_RECORD) + 1);
	fix_hdr(b);
	ret = open_bytes(bad, b, n, 0);
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "the index's records end at");
	/* the index somewhere else */
	memcpy(b, good, n);
	rf__put_le64(b + H_INDEX_OFF, ioff + 4096);
	fix_hdr(b);
	ret = open_bytes(bad, b, n, 0);
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "index at", "after the records");
	/* a stride in a version 2 file */
	memcpy(b, good, n);
	rf__put_le64(b + H_STRIDE, 16);
	fix_hdr(b);
	ret = open_bytes(bad, b, n, 0);
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "stride 16, expected 0");
	/* a version 3 */
	memcpy(b, good, n);
	rf__put_le32(b + H_VERSION, 3);
	fix_hdr(b);
	ret = open_bytes(bad, b, n, 0);
	EXPECT_FAIL(ret, -ENOTSUP, err, "bad.rfrec", "version 3, expected 1 or 2");
	/* class names: a NUL replaced (one name fewer, bytes left over), CRC made right */
	memcpy(b, good, n);
	b[coff + 3] = 'X';   /* "cat\0" -> "catX" */
	rf__put_le32(b + H_CLASSES_CRC, (uint32_t)crc32_z(0L, b + coff,
							   rf__le64(b + H_CLASSES_BYTES)));
	fix_hdr(b);
	ret = open_bytes(bad, b, n, 0);
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "class 3's name is missing or unterminated");
	/* a class count the names' bytes cannot hold: refused before its table is
	 * allocated (2^32 - 16 asked for 32 GiB) */
	memcpy(b, good, n);
	rf__put_le32(b + H_NUM_CLASSES, 0xfffffff0u);
	fix_hdr(b);
	ret = open_bytes(bad, b, n, 0);
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "num_classes 4294967280", "hold");
	memcpy(b, good, n);
	b[coff + 1] ^= 0x20;
	ret = open_bytes(bad, b, n, 0);
	EXPECT_FAIL(ret, -EBADMSG, err, "bad.rfrec", "class names CRC-32");
	/* truncated, trailing bytes, non-zero padding after data, index and names */
	ret = open_bytes(bad, good, n - 1, 0);
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "truncated");
	ret = open_bytes(bad, good, ioff + 5, 0);
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "truncated");
	memcpy(b, good, n);
	memset(b + n, 0, 4096);
	ret = open_bytes(bad, b, n + 4096, 0);
	EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", "expected");
	uint64_t pads[] = { ioff - 1, ioff + count * 16, n - 1 };
	for (unsigned k = 0; k < 3; k++) {
		memcpy(b, good, n);
		b[pads[k]] = 0x42;
		ret = open_bytes(bad, b, n, 0);
		snprintf(want, sizeof(want), "offset %" PRIu64 ": padding byte is 0x42", pads[k]);
		EXPECT_FAIL(ret, -EINVAL, err, "bad.rfrec", want);
	}
	/* a data byte: the cheap open passes, verification fails */
	memcpy(b, good, n);
	b[4096 + 5000] ^= 0x80;
	CHECK(open_bytes(bad, b, n, 0) == 0);
	ret = open_bytes(bad, b, n, RF_DS_VERIFY);
	EXPECT_FAIL(ret, -EBADMSG, err, "bad.rfrec", "data CRC-32");
	/* random flips anywhere: never accepted by a verifying open, never a crash */
	srand(7);
	for (int t = 0; t < 300; t++) {
		memcpy(b, good, n);
		size_t k = (size_t)rand() % n;
		b[k] ^= (uint8_t)(1 + rand() % 255);
		ret = open_bytes(bad, b, n, RF_DS_VERIFY);
		CHECK(ret < 0 || k >= n);
	}
	free(good);
	free(b);
}

static void writer_errors(void)
{
	const char *path = t_path("w.rfrec");
	struct rf_rec_layout var = { .variable = 1, .label_kind = RF_LABEL_I32, .num_classes = 3 };
	struct rf_rec_layout fixed = { .dtype = RF_DS_DT_U8, .ndim = 1, .shape = { 4 },
				       .label_kind = RF_LABEL_U8 };
	struct rf_rec_writer *w;
	uint8_t p[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	int ret;

	CHECK_OPEN(rf_rec_writer_open(&w, path, &var, RF_REC_OVERWRITE), rf_last_error());
	ret = t_msg(rf_rec_writer_append(w, p, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "w.rfrec", "rf_rec_writer_append_bytes");
	ret = t_msg(rf_rec_writer_append_bytes(w, p, 0, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "w.rfrec", "0 bytes, expected 1");
	ret = t_msg(rf_rec_writer_append_bytes(w, p, 3, 3), err, sizeof(err));
	EXPECT_FAIL(ret, -ERANGE, err, "w.rfrec", "label 3 out of range");
	CHECK(strstr(rf_rec_writer_last_error(w), "label 3"));
	CHECK_OPEN(rf_rec_writer_append_bytes(w, p, 3, 2), rf_last_error());
	CHECK_OPEN(rf_rec_writer_finish(w), rf_last_error());

	CHECK_OPEN(rf_rec_writer_open(&w, path, &fixed, RF_REC_OVERWRITE), rf_last_error());
	ret = t_msg(rf_rec_writer_append_bytes(w, p, 4, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "w.rfrec", "fixed-size records");
	rf_rec_writer_abort(w);

	var.classes = names;
	var.label_kind = RF_LABEL_NONE;
	ret = t_msg(rf_rec_writer_open(&w, path, &var, RF_REC_OVERWRITE), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "w.rfrec", "class names need labels");
	/* a class count without labels (ringflow.pack(labels=None, num_classes=10) wrote
	 * one): refused for a variable and a fixed layout */
	var.classes = NULL;
	ret = t_msg(rf_rec_writer_open(&w, path, &var, RF_REC_OVERWRITE), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "w.rfrec", "without labels has no classes");
	{
		struct rf_rec_layout f2 = fixed;
		f2.label_kind = RF_LABEL_NONE;
		f2.num_classes = 10;
		ret = t_msg(rf_rec_writer_open(&w, path, &f2, RF_REC_OVERWRITE), err, sizeof(err));
		EXPECT_FAIL(ret, -EINVAL, err, "w.rfrec", "num_classes 10 without labels");
	}
	var.classes = names;
	var.label_kind = RF_LABEL_U8;
	var.classes = NULL;
	ret = t_msg(rf_rec_writer_open(&w, path, &var, RF_REC_OVERWRITE), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "w.rfrec", "label kind");
	{
		const char *const bad_names[] = { "a", "" , "c" };
		var.label_kind = RF_LABEL_I32;
		var.classes = bad_names;
		ret = t_msg(rf_rec_writer_open(&w, path, &var, RF_REC_OVERWRITE), err, sizeof(err));
		EXPECT_FAIL(ret, -EINVAL, err, "w.rfrec", "class 1's name is empty");
	}
	CHECK(!t_exists(t_path("w.rfrec.tmp")));
}

int main(void)
{
	t_mkdir("recvar");
	round_trip(1, 1);
	round_trip(300, 1);
	round_trip(57, 0);
	corrupt();
	writer_errors();
	printf("ok\n");
	return 0;
}
