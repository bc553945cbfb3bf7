/* ringflow/ring-io.h -- the transfer pump: read or write a list of segments of one
 * file through a ring, in chunks with several requests in flight. A file: chunks go at
 * offsets, so a socket or a pipe is refused (-ESPIPE) before anything moves.
 * The ring's owner thread only. Chunking and the results: ring/README.md.
 */
#ifndef RINGFLOW_RING_IO_H
#define RINGFLOW_RING_IO_H

#include <stdint.h>

#include "ring.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_XFER_CHUNK (1u << 20) /* default chunk: 1 MiB */
#define RF_XFER_DEPTH 32u        /* default chunks in flight */
#define RF_XFER_DEPTH_MAX 4096u

enum rf_xfer_dir { RF_XFER_READ = 0, RF_XFER_WRITE = 1 };

/* One piece of the transfer: len bytes between buf and the file at offset off. */
struct rf_io_seg {
	void *buf;
	uint64_t len;
	uint64_t off;
};

struct rf_xfer_opts {
	uint64_t chunk;  /* bytes per request, 0: RF_XFER_CHUNK */
	unsigned depth;  /* requests in flight, 1..RF_XFER_DEPTH_MAX; 0: RF_XFER_DEPTH */
	unsigned flags;  /* RF_IO_FIXED_FILE and/or RF_IO_FIXED_BUF, as for rf_ring_read */
};

struct rf_xfer_result {
	int err;          /* 0 or -errno (ring/README.md, "The transfer pump") */
	uint64_t err_off; /* with err: file offset of the chunk that failed */
	int64_t err_res;  /* with err: that chunk's result (a short count >= 0, or -errno) */
	uint64_t bytes;   /* bytes transferred by chunks that completed in full */
};

/* Called once on the owner thread, from rf_ring_run*, when the transfer is over. res
 * is valid only during the call. */
typedef void (*rf_xfer_cb)(void *data, const struct rf_xfer_result *res);

/* Start transferring segs[0..nsegs) (copied: the array may go; the buffers must stay
 * valid until cb runs). opts may be NULL. Returns 0 (cb will run exactly once), or
 * -errno with nothing in flight and no callback (-EINVAL: bad arguments, -ENOMEM, or
 * the error of submitting the first chunk). Segments of length 0 are skipped; with
 * nothing to transfer cb still runs from the ring. */
int rf_xfer_start(struct rf_ring *r, int fd, enum rf_xfer_dir dir, const struct rf_io_seg *segs,
		  unsigned nsegs, const struct rf_xfer_opts *opts, rf_xfer_cb cb, void *data);

/* The blocking convenience: start the transfer and turn the ring with
 * rf_ring_run_until until it is over (other requests on the ring progress and their
 * callbacks run meanwhile). Returns res->err (res may be NULL). -EDEADLK from inside
 * a ring callback, before anything is queued. If turning the ring fails while
 * chunks are in flight (it should not) that error is returned and the transfer's
 * state is left to them (leaked, never freed under a live request). */
int rf_xfer(struct rf_ring *r, int fd, enum rf_xfer_dir dir, const struct rf_io_seg *segs,
	    unsigned nsegs, const struct rf_xfer_opts *opts, struct rf_xfer_result *res);

/* fsync (datasync: fdatasync) through the ring, waiting as rf_xfer does. 0 or -errno. */
int rf_ring_fsync_wait(struct rf_ring *r, int fd, int datasync);

#ifdef __cplusplus
}
#endif
#endif
