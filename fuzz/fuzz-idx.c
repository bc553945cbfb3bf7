/* fuzz-idx: IDX files (dataloader/idx.c), raw and gzip'd, alone and as an image/label
 * pair (the first byte chooses; two more split the bytes between the pair): opened as
 * files; when one opens, every record it promises can be read. */
#include "fuzz.h"

#include "dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct rf_dataset ds;
	int ret;
	if (n < 3 || n > (1u << 20))
		return 0;
	size_t il = (d[1] | (size_t)d[2] << 8) % (n - 2);
	if (d[0] & 1)
		ret = rf_dataset_open_idx_pair(&ds, fz_file(0, d + 3, il), fz_file(1, d + 3 + il,
					       n - 3 - il), d[0] >> 1, 0);
	else
		ret = rf_dataset_open_idx(&ds, fz_file(0, d + 3, n - 3), (d[0] >> 1) % 6, 0);
	if (ret == 0) {
		uint8_t *rec = malloc(ds.payload_bytes + 1);
		int32_t lab;
		FZ_ASSERT(rec);
		for (uint64_t i = 0; i < ds.count && i < 64; i++)
			FZ_ASSERT(rf_dataset_read_record(&ds, i, rec, &lab) == 0);
		(void)rf_dataset_verify(&ds);
		free(rec);
		rf_dataset_close(&ds);
	}
	return 0;
}
