/* fuzz-rfrec: .rfrec record files (dataloader/recfile.c). The header's CRC would stop
 * almost every mutation at the first check, so the harness reseals it (and, when the
 * first byte says so, the data's CRC, a version 2 file's index and class names) before opening: the checks behind it are what is
 * fuzzed. When a file opens, its records can be read. */
#include "fuzz.h"

#include <zlib.h>

#include "dataset.h"

static void le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The CRC at crc_at of the section whose offset is the u64 at off_at and whose size is
 * unit times the u64 at n_at, when it lies inside b. */
static void fz_reseal(uint8_t *b, size_t m, unsigned off_at, unsigned n_at, uint64_t unit,
		      unsigned crc_at)
{
	uint64_t off = le64(b + off_at), n = le64(b + n_at);
	if (n > m / unit)
		return;
	n *= unit;
	if (off <= m && n <= m - off)
		le32(b + crc_at, (uint32_t)crc32(0, b + off, (uInt)n));
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct rf_dataset ds;
	if (n < 1 || n > (1u << 20))
		return 0;
	uint8_t *b = malloc(n);
	FZ_ASSERT(b);
	memcpy(b, d + 1, n - 1);
	size_t m = n - 1;
	if ((d[0] & 1) && m >= 4096) {
		uint64_t db = 0;
		for (int i = 7; i >= 0; i--)
			db = db << 8 | b[88 + i];              /* data bytes */
		if ((d[0] & 4) && db <= m - 4096)
			le32(b + 96, (uint32_t)crc32(0, b + 4096, (uInt)db)); /* the data's CRC */
		if (d[0] & 8)                                          /* version 2's index */
			fz_reseal(b, m, 104, 16, 16, 112);
		if (d[0] & 16)                                         /* and class names */
			fz_reseal(b, m, 120, 128, 1, 136);
		le32(b + 4092, (uint32_t)crc32(0, b, 4092));          /* the header's CRC */
	}
	if (rf_dataset_open_rfrec(&ds, fz_file(0, b, m), d[0] & 2 ? RF_DS_VERIFY : 0) == 0) {
		uint8_t *rec = malloc(ds.payload_bytes + ds.max_record + 1);
		int32_t lab;
		FZ_ASSERT(rec);
		for (uint64_t i = 0; i < ds.count && i < 64; i++)
			FZ_ASSERT(rf_dataset_read_record(&ds, i, rec, &lab) == 0);
		free(rec);
		rf_dataset_close(&ds);
	}
	free(b);
	return 0;
}
