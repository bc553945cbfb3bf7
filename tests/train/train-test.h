/* tests/train/train-test.h -- helpers shared by the train tests: a ring + engine on the
 * calling thread, the dataset directory (skip when Fashion-MNIST is not installed),
 * and bitwise comparison of host float arrays. */
#ifndef RF_TRAIN_TEST_H
#define RF_TRAIN_TEST_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rf-config.h"
#include "ring.h"
#include "engine.h"
#include "device.h"
#include "tensor.h"
#include "ops.h"
#include "dataset.h"
#include "log.h"
#include "../test-util.h"

struct tt_env {
	struct rf_ring *ring;
	struct rf_engine *eng;
};

static inline void tt_open(struct tt_env *t)
{
	CHECK_OK(rf_ring_create(&t->ring, NULL));
	CHECK_OK(rf_engine_create(&t->eng, t->ring, NULL));
}

static inline void tt_close(struct tt_env *t)
{
	rf_engine_destroy(t->eng);
	rf_ring_destroy(t->ring);
}

/* A .rfrec of n records of Fashion-MNIST's shape (28 x 28 u8) at path: record i's
 * label i % 10 (200 for record bad_at; -1: none), its pixels 0, or with vary a pattern
 * of i; num_classes as given (0: the file does not say). */
static inline void tt_write_rfrec(const char *path, unsigned n, uint32_t num_classes,
				  int vary, int bad_at)
{
	struct rf_rec_layout lay = { 0 };
	struct rf_rec_writer *w;
	unsigned char img[28 * 28] = { 0 };

	lay.dtype = RF_DS_DT_U8;
	lay.ndim = 2;
	lay.shape[0] = lay.shape[1] = 28;
	lay.label_kind = RF_LABEL_U8;
	lay.num_classes = num_classes;
	CHECK_OK(rf_rec_writer_open(&w, path, &lay, RF_REC_OVERWRITE));
	for (unsigned i = 0; i < n; i++) {
		for (unsigned k = 0; vary && k < sizeof(img); k++)
			img[k] = (unsigned char)(i * 7 + k * (i % 10 + 1));
		CHECK_OK(rf_rec_writer_append(w, img, (int)i == bad_at ? 200 : (int32_t)(i % 10)));
	}
	CHECK_OK(rf_rec_writer_finish(w));
}

/* The Fashion-MNIST directory, or exit 77 when it is not installed. */
static inline const char *tt_data_dir(void)
{
	const char *d = getenv("RF_FASHION_MNIST");
	static char path[512];

	if (!d)
		d = "/usr/share/datasets/fashion-mnist";
	snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte.gz", d);
	if (access(path, R_OK) != 0) {
		snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte", d);
		if (access(path, R_OK) != 0) {
			printf("SKIP: Fashion-MNIST not found in %s (apt-get install "
			       "dataset-fashion-mnist)\n", d);
			exit(T_SKIP);
		}
	}
	return d;
}

/* Index of the first differing float (bitwise), or -1. */
static inline long tt_bitdiff(const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
			return (long)i;
	return -1;
}

#endif
