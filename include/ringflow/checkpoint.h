/* ringflow/checkpoint.h -- training checkpoints: one file of a model's named tensors
 * and run metadata, saved atomically and read back through the caller's ring.
 * Functions return 0 or -errno and leave one line in rf_last_error().
 * The file format, crash safety and the meaning of each errno: train/README.md.
 */
#ifndef RINGFLOW_CHECKPOINT_H
#define RINGFLOW_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "log.h"
#include "ring.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_CKPT_VERSION 1
#define RF_CKPT_NAME_MAX 63   /* longest tensor name, in bytes */
#define RF_CKPT_MODEL_MAX 31  /* longest model name */
#define RF_CKPT_EXTRA_MAX 256
#define RF_CKPT_MAX_TENSORS 65536

/* dtype codes: those of the IDX format. */
enum {
	RF_CKPT_U8 = 0x08,
	RF_CKPT_I8 = 0x09,
	RF_CKPT_I16 = 0x0B,
	RF_CKPT_I32 = 0x0C,
	RF_CKPT_F32 = 0x0D,
	RF_CKPT_F64 = 0x0E
};

/* One named tensor. The caller owns every pointer in it. */
struct rf_ckpt_blob {
	const char *name;   /* e.g. "fc1.w"; at most RF_CKPT_NAME_MAX bytes; unique */
	uint32_t dtype;     /* RF_CKPT_*: 0x0D f32, 0x0C i32, 0x08 u8 (IDX codes) */
	uint32_t ndim;      /* 0..4 (0: a scalar, one element) */
	uint64_t shape[4];  /* shape[0..ndim-1]; the rest is ignored */
	void *data;         /* save: read from it; load: written into it. Must stay valid
	                     * for the whole call. Any alignment. */
	uint64_t nbytes;    /* must equal the product of the shape times the dtype size */
};

/* Metadata saved with the tensors. */
struct rf_ckpt_meta {
	char model[32];     /* "mlp" / "lenet", NUL-terminated. Load: set by the caller to
	                     * the expected model and refused on a mismatch; "" accepts any
	                     * model (then filled from the file). */
	uint64_t epoch;     /* epochs completed */
	uint64_t seed;      /* the run's seed */
	uint64_t step;      /* optional: optimizer steps taken (0 if unused) */
	double lr;          /* learning rate */
	uint32_t batch_size, devices;
	uint8_t extra[256]; /* opaque, e.g. PRNG state; saved and returned as is */
	uint32_t extra_len; /* bytes used in extra, <= RF_CKPT_EXTRA_MAX */
};

/* Write the checkpoint atomically to path (train/README.md, "Crash safety").
 * ring: the calling thread's ring, turned until the save's own requests are done;
 * NULL: a private ring for the call. Not from inside a ring callback (-EDEADLK).
 * Nothing passed is kept after the call; n may be 0. On error the previous file at
 * path is intact and path.tmp has been removed. */
int rf_ckpt_save(struct rf_ring *ring, const char *path, const struct rf_ckpt_meta *meta,
		 const struct rf_ckpt_blob *blobs, unsigned n);

/* Read a checkpoint into the caller's tensors. meta_inout->model names the expected
 * model; each blob's name, dtype, ndim, shape and nbytes say what is expected (any
 * order; file and blobs must hold the same set), data must hold nbytes. Checks the
 * header, reads the data through ring (as for rf_ckpt_save) and checks each CRC.
 * On error *meta_inout is unchanged; which blob data may have been overwritten:
 * train/README.md, "Loading". */
int rf_ckpt_load(struct rf_ring *ring, const char *path, struct rf_ckpt_meta *meta_inout,
		 struct rf_ckpt_blob *blobs, unsigned n);

/* Read and check only the header (magic, version, header CRC, file size against the
 * header's) with plain pread, no ring: for tools and for deciding which model to
 * build before loading. Fills *meta (caller-owned). Returns the number of tensors in
 * the file (>= 0) or -errno. */
int rf_ckpt_probe(const char *path, struct rf_ckpt_meta *meta);

#ifdef __cplusplus
}
#endif
#endif
