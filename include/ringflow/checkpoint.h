/* ringflow/checkpoint.h -- training checkpoints written and read through the reactor.
 *
 * A checkpoint is one file holding a model's named tensors (parameters, optimizer
 * state) and a little metadata (model name, epoch, seed, lr, opaque PRNG state).
 * All its I/O goes through the calling thread's struct rf_ring: rf_ckpt_save and
 * rf_ckpt_load queue their reads and writes (several in flight) and turn the ring with
 * rf_ring_run_until until their own requests are done. Other requests on the same ring
 * (engine work, loader reads, timers) keep completing meanwhile and their callbacks
 * run as usual; the ring is never run "until idle".
 *
 * Crash safety: rf_ckpt_save writes PATH.tmp (O_CREAT|O_TRUNC, 0644), fsyncs it,
 * renames it over PATH and fsyncs the directory. A crash or an error at any point
 * before the rename leaves the previous PATH untouched; an error also removes
 * PATH.tmp (a crash may leave it; the next save truncates it). Two saves to the same
 * PATH at once are not supported (they share PATH.tmp).
 *
 * File format, version 1 (all integers little-endian; offsets in bytes):
 *
 *   header   0  magic "RFCKPTv1" (8)      8 version u32 (1)   12 header_size u32
 *           16  file_size u64 (whole file, trailer included)
 *           24  ntensors u32              28 flags u32 (0)
 *           32  model char[32] (NUL-terminated)
 *           64  epoch u64   72 seed u64   80 step u64   88 lr f64 (IEEE 754)
 *           96  batch_size u32  100 devices u32  104 extra_len u32  108 reserved u32
 *          112  extra u8[256]
 *          368  reserved (16, zero)
 *   table  384  ntensors entries of 128 bytes:
 *               +0 name char[64] (NUL-terminated)  +64 dtype u32  +68 ndim u32
 *               +72 shape u64[4] (unused dims 0)   +104 offset u64  +112 nbytes u64
 *               +120 crc32 of the data u32         +124 reserved u32
 *          ...  header crc32 u32 (over bytes [0, 384 + 128*ntensors)), reserved u32
 *          header_size = 384 + 128*ntensors + 8
 *   data        each tensor at a 4096-aligned offset, in table order, from
 *               align4096(header_size); gaps are zero (holes)
 *   trailer     the last 32 bytes, at align8(end of the last tensor's data, or of
 *               the header when there is none): the commit marker, written only
 *               after the header and all data were written:
 *               +0 magic "RFCKEND1"  +8 file_size u64  +16 header crc32 u32
 *               +20 reserved u32  +24 reserved u32  +28 crc32 of bytes +0..+27 u32
 *
 * CRC32 is zlib's (the IEEE/gzip polynomial).
 *
 * Errors: every function returns 0 or -errno and leaves one line in rf_last_error()
 * (log.h) that names the file and says what was expected and what was found. The
 * errno says which kind of refusal it is:
 *   -ENOENT            no such file
 *   -ENOEXEC           not a ringflow checkpoint (wrong magic)
 *   -EPROTONOSUPPORT   written by a newer ringflow (version > 1)
 *   -ENODATA           truncated: the file is shorter than its header says
 *   -EBADMSG           corrupt: CRC mismatch or an inconsistent header/trailer
 *   -ESTALE            valid checkpoint for something else: other model, a tensor with
 *                      another dtype or shape, a tensor missing or an extra one
 *   -EINVAL            bad arguments (NULL, name too long, nbytes != shape * dtype size,
 *                      duplicate names, extra_len > 256)
 *   -EDEADLK           called from inside a ring callback (or rf_ring_run), where
 *                      the ring cannot be turned
 *   other              I/O errors (-EIO, -ENOSPC, -EFBIG, ...) from the kernel
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

/* Write the checkpoint atomically to path (see the top of this file).
 * ring: the calling thread's ring, turned with rf_ring_run_until until the save's own
 * requests are done (other requests on it progress meanwhile); NULL: a private ring
 * is created for the call. Must not be called from inside a ring callback.
 * path, meta, blobs (and their names and data) stay the caller's; nothing is kept
 * after the call returns. n may be 0.
 * Returns 0, or -errno (see above); on error the previous file at path is intact and
 * path.tmp has been removed. */
int rf_ckpt_save(struct rf_ring *ring, const char *path, const struct rf_ckpt_meta *meta,
		 const struct rf_ckpt_blob *blobs, unsigned n);

/* Read a checkpoint into the caller's tensors.
 * meta_inout->model must be set by the caller to the expected model. blobs[i].name,
 * dtype, ndim, shape and nbytes say what the caller expects; data must hold nbytes.
 * Load checks the model and every blob's name/dtype/shape against the file (every
 * file tensor must be asked for, and every asked one must be in the file), then
 * reads data through the ring and checks each tensor's CRC, then fills the rest of
 * *meta_inout. The order of blobs need not match the file's.
 * ring: as for rf_ckpt_save (NULL: a private ring). Everything passed stays the
 * caller's. Returns 0 or -errno (see above). On error *meta_inout is unchanged; the
 * blobs' data is untouched when the refusal is found in the header (missing file,
 * magic, version, truncation, header CRC, model, names, shapes) and unspecified
 * (partly overwritten) after a data CRC mismatch or a read error. */
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
