/* recfile-impl.h -- the .rfrec header's field offsets, shared by the reader
 * (recfile.c) and the writer (recwriter.c). Internal; the layout is in dataset.h. */
#ifndef RINGFLOW_RECFILE_IMPL_H
#define RINGFLOW_RECFILE_IMPL_H

#include "dataset-impl.h"

/* Header field offsets. */
enum {
	H_MAGIC = 0,
	H_VERSION = 8,
	H_HDR_BYTES = 12,
	H_COUNT = 16,
	H_STRIDE = 24,
	H_PAYLOAD_OFF = 32,
	H_PAYLOAD_BYTES = 40,
	H_DTYPE = 48,
	H_NDIM = 52,
	H_SHAPE = 56,
	H_LABEL_KIND = 72,
	H_NUM_CLASSES = 76,
	H_LABEL_OFF = 80,
	H_DATA_BYTES = 88,
	H_DATA_CRC = 96,
	H_RESERVED = 100,
	/* version 2 (variable-length records) */
	H_ENCODING = 100,       /* u32 RF_REC_ENC_* */
	H_INDEX_OFF = 104,      /* u64: the index, 16 bytes per record */
	H_INDEX_CRC = 112,      /* u32 */
	H_MAX_RECORD = 116,     /* u32: bytes of the longest record */
	H_CLASSES_OFF = 120,    /* u64: the class names (0: none) */
	H_CLASSES_BYTES = 128,  /* u64 */
	H_CLASSES_CRC = 136,    /* u32 */
	H_RESERVED_V2 = 140,
	H_HDR_CRC = RF_REC_HEADER_BYTES - 4
};

static const uint8_t rec_magic[8] = RF_REC_MAGIC; /* with its NUL */

static inline uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* Where a variable file's sections lie: the records from 4096 (data bytes), then the
 * index (16 bytes per record) at *ioff, then the class names (cbytes; *coff 0 when
 * none), each section starting at a multiple of RF_REC_ALIGN; *end: the file's size. */
static inline void rf__rec_sections(uint64_t data, uint64_t count, uint64_t cbytes,
				    uint64_t *ioff, uint64_t *coff, uint64_t *end)
{
	*ioff = round_up(RF_REC_HEADER_BYTES + data, RF_REC_ALIGN);
	*end = round_up(*ioff + count * RF_REC_INDEX_ENTRY, RF_REC_ALIGN);
	*coff = cbytes ? *end : 0;
	if (cbytes)
		*end = round_up(*coff + cbytes, RF_REC_ALIGN);
}

#endif
