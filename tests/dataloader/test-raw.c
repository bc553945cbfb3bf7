/* Generic fixed-size-record files (rf_dataset_open_raw): a 10-byte header followed
 * by 50 records of 13 bytes (3x4 u8 payload, u8 label at +12) opens with count 50
 * and reads back; the same file with 5 extra bytes fails saying 5 bytes are left
 * over after 50 whole records (and opens with RF_DS_ALLOW_TAIL, tail_bytes 5); a
 * header longer than the file, a file with no whole record, overlapping or
 * out-of-record label/payload, a payload that is not a whole number of elements,
 * and an out-of-range label under RF_DS_VERIFY all fail with messages naming the
 * file and the offset or record; an i32 label in front of an f32 payload whose size
 * is inferred ("the rest of the record") reads back exactly; labels-free records
 * and inferred num_classes work. */
#include "dl-test.h"

static char err[1024];

static void fill_records(uint8_t *b, size_t hdr, size_t rb, unsigned n, int label_at_end)
{
	memset(b, 0xEE, hdr);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *r = b + hdr + (size_t)i * rb;
		for (size_t k = 0; k < rb; k++)
			r[k] = (uint8_t)(i * 13 + k);
		if (label_at_end)
			r[rb - 1] = (uint8_t)(i % 6);
	}
}

int main(void)
{
	enum { HDR = 10, RB = 13, NREC = 50 };
	uint8_t *b = malloc(HDR + RB * NREC + 64);
	struct rf_rec_layout dummy;
	struct rf_dataset ds;
	struct rf_raw_desc d;
	uint8_t rec[256];
	int ret;

	(void)dummy;
	CHECK(b);
	t_mkdir("raw");
	fill_records(b, HDR, RB, NREC, 1);
	t_write(t_path("r.bin"), b, HDR + RB * NREC);

	memset(&d, 0, sizeof(d));
	d.header_bytes = HDR;
	d.record_bytes = RB;
	d.ndim = 2;
	d.shape[0] = 3;
	d.shape[1] = 4;
	d.payload_bytes = 12;
	d.label_kind = RF_LABEL_U8;
	d.label_offset = 12;
	d.num_classes = 6;
	CHECK_OPEN(rf_dataset_open_raw(&ds, t_path("r.bin"), &d, RF_DS_VERIFY), rf_last_error());
	CHECK_EQ(ds.kind, RF_DS_RAW);
	CHECK_EQ(ds.count, NREC);
	CHECK_EQ(ds.src[0].data_offset, HDR);
	CHECK_EQ(ds.src[0].stride, RB);
	CHECK_EQ(ds.dtype, RF_DS_DT_U8);
	CHECK_EQ(ds.tail_bytes, 0);
	for (unsigned i = 0; i < NREC; i++) {
		int32_t l;
		struct rf_dataset_loc loc;
		CHECK_OPEN(rf_dataset_read_record(&ds, i, rec, &l), "read");
		CHECK(memcmp(rec, b + HDR + i * RB, 12) == 0);
		CHECK_EQ(l, i % 6);
		CHECK(rf_dataset_label_loc(&ds, i, &loc) == 0);
		CHECK_EQ(loc.offset, HDR + i * RB + 12);
	}
	rf_dataset_close(&ds);

	/* payload_bytes 0 with a label at the end: payload is the 12 bytes before it,
	 * shape inferred as {12}; num_classes inferred with VERIFY */
	d.payload_bytes = 0;
	d.ndim = 0;
	d.num_classes = 0;
	CHECK_OPEN(rf_dataset_open_raw(&ds, t_path("r.bin"), &d, RF_DS_VERIFY), rf_last_error());
	CHECK_EQ(ds.payload_bytes, 12);
	CHECK_EQ(ds.ndim, 1);
	CHECK_EQ(ds.shape[0], 12);
	CHECK_EQ(ds.num_classes, 6);
	rf_dataset_close(&ds);

	/* sizes that don't divide */
	t_write(t_path("r5.bin"), b, HDR + RB * NREC + 5);
	ret = t_msg(rf_dataset_open_raw(&ds, t_path("r5.bin"), &d, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "r5.bin", "offset 660: 5 bytes left over after 50 whole records of 13 bytes",
		    "header 10", "expected a multiple of 13");
	CHECK_OPEN(rf_dataset_open_raw(&ds, t_path("r5.bin"), &d, RF_DS_ALLOW_TAIL), rf_last_error());
	CHECK_EQ(ds.count, NREC);
	CHECK_EQ(ds.tail_bytes, 5);
	rf_dataset_close(&ds);
	/* divides with another header size: 10+650 = 660 = 20 + 640 (640 = 5 x 128) */
	{
		struct rf_raw_desc d2 = { .header_bytes = 20, .record_bytes = 128 };
		CHECK_OPEN(rf_dataset_open_raw(&ds, t_path("r.bin"), &d2, 0), rf_last_error());
		CHECK_EQ(ds.count, 5);
		CHECK_EQ(ds.payload_bytes, 128);
		CHECK_EQ(ds.label_kind, RF_LABEL_NONE);
		int32_t l = 0;
		CHECK_OPEN(rf_dataset_read_record(&ds, 4, rec, &l), "read");
		CHECK_EQ(l, -1);
		rf_dataset_close(&ds);
		d2.record_bytes = 7;   /* 640 = 91*7 + 3 */
		ret = t_msg(rf_dataset_open_raw(&ds, t_path("r.bin"), &d2, 0), err, sizeof(err));
		EXPECT_FAIL(ret, -EINVAL, err, "r.bin", "3 bytes left over after 91 whole records of 7 bytes");
		d2.record_bytes = 0;
		ret = t_msg(rf_dataset_open_raw(&ds, t_path("r.bin"), &d2, 0), err, sizeof(err));
		EXPECT_FAIL(ret, -EINVAL, err, "r.bin", "record size 0");
		d2.record_bytes = 4;
		d2.header_bytes = 1000;
		ret = t_msg(rf_dataset_open_raw(&ds, t_path("r.bin"), &d2, 0), err, sizeof(err));
		EXPECT_FAIL(ret, -EINVAL, err, "r.bin", "file is 660 bytes, shorter than its 1000-byte header");
		d2.header_bytes = 658;
		ret = t_msg(rf_dataset_open_raw(&ds, t_path("r.bin"), &d2, 0), err, sizeof(err));
		EXPECT_FAIL(ret, -EINVAL, err, "r.bin", "2 bytes left over after 0 whole records");
		d2.header_bytes = 660;
		ret = t_msg(rf_dataset_open_raw(&ds, t_path("r.bin"), &d2, 0), err, sizeof(err));
		EXPECT_FAIL(ret, -EINVAL, err, "r.bin", "no records");
		t_write(t_path("empty.bin"), b, 0);
		d2.header_bytes = 0;
		ret = t_msg(rf_dataset_open_raw(&ds, t_path("empty.bin"), &d2, 0), err, sizeof(err));
		EXPECT_FAIL(ret, -EINVAL, err, "empty.bin", "no records");
		ret = t_msg(rf_dataset_open_raw(&ds, t_path("none.bin"), &d2, 0), err, sizeof(err));
		EXPECT_FAIL(ret, -ENOENT, err, "none.bin", "cannot open");
	}

	/* layout errors */
	d.label_offset = 11;
	d.payload_bytes = 12;
	ret = t_msg(rf_dataset_open_raw(&ds, t_path("r.bin"), &d, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "r.bin", "label [11, +1) overlaps payload [0, +12)");
	d.label_offset = 13;
	ret = t_msg(rf_dataset_open_raw(&ds, t_path("r.bin"), &d, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "r.bin", "does not fit in the 13-byte record");
	d.label_offset = 12;
	d.dtype = RF_DS_DT_F32;
	d.payload_bytes = 10;
	ret = t_msg(rf_dataset_open_raw(&ds, t_path("r.bin"), &d, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "r.bin", "not a whole number of f32 elements");
	d.dtype = RF_DS_DT_U8;
	d.payload_bytes = 12;
	d.ndim = 2;
	d.shape[0] = 5;
	d.shape[1] = 5;
	ret = t_msg(rf_dataset_open_raw(&ds, t_path("r.bin"), &d, 0), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "r.bin", "payload is 12 bytes, expected 25");
	d.ndim = 0;

	/* label out of range, found only with VERIFY */
	d.num_classes = 5;  /* labels go up to 5 */
	CHECK_OPEN(rf_dataset_open_raw(&ds, t_path("r.bin"), &d, 0), rf_last_error());
	rf_dataset_close(&ds);
	ret = t_msg(rf_dataset_open_raw(&ds, t_path("r.bin"), &d, RF_DS_VERIFY), err, sizeof(err));
	EXPECT_FAIL(ret, -ERANGE, err, "r.bin", "offset 87 (record 5): label 5 out of range, expected [0, 5)");

	/* i32 label first, f32 payload after it, payload size inferred */
	{
		enum { RB2 = 4 + 8 * 4, N2 = 33 };
		uint8_t *f = calloc(N2, RB2);
		for (int i = 0; i < N2; i++) {
			int32_t lab = i * 1000 - 5000 < 0 ? i : i * 1000;
			float v[8];
			for (int k = 0; k < 8; k++)
				v[k] = (float)i + (float)k / 8.0f;
			memcpy(f + i * RB2, &lab, 4);  /* little-endian host */
			memcpy(f + i * RB2 + 4, v, sizeof(v));
		}
		t_write(t_path("f.bin"), f, (size_t)N2 * RB2);
		struct rf_raw_desc d3 = { .record_bytes = RB2, .payload_offset = 4,
					  .dtype = RF_DS_DT_F32, .label_kind = RF_LABEL_I32,
					  .label_offset = 0 };
		CHECK_OPEN(rf_dataset_open_raw(&ds, t_path("f.bin"), &d3, RF_DS_VERIFY), rf_last_error());
		CHECK_EQ(ds.count, N2);
		CHECK_EQ(ds.payload_bytes, 32);
		CHECK_EQ(ds.shape[0], 8);
		CHECK_EQ(ds.num_classes, 32001);
		for (int i = 0; i < N2; i++) {
			float v[8];
			int32_t l;
			CHECK_OPEN(rf_dataset_read_record(&ds, (uint64_t)i, v, &l), "read");
			CHECK(memcmp(v, f + i * RB2 + 4, 32) == 0);
			CHECK_EQ(l, i * 1000 - 5000 < 0 ? i : i * 1000);
		}
		rf_dataset_close(&ds);
		/* a negative i32 label */
		int32_t neg = -3;
		memcpy(f + 7 * RB2, &neg, 4);
		t_write(t_path("f.bin"), f, (size_t)N2 * RB2);
		ret = t_msg(rf_dataset_open_raw(&ds, t_path("f.bin"), &d3, RF_DS_VERIFY), err, sizeof(err));
		EXPECT_FAIL(ret, -ERANGE, err, "f.bin", "record 7", "label -3");
		free(f);
	}
	free(b);
	printf("dl-raw: ok\n");
	return 0;
}
