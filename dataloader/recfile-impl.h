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
	H_HDR_CRC = RF_REC_HEADER_BYTES - 4
};

static const uint8_t rec_magic[8] = RF_REC_MAGIC; /* with its NUL */

static inline uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

#endif
