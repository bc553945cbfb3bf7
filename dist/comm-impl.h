/* dist/comm-impl.h -- the comm's record, shared by comm.c and its stand-in. */
#ifndef RF_DIST_COMM_IMPL_H
#define RF_DIST_COMM_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "comm.h"

#define RF__COMM_MAXT 64          /* tensors in one span collective */

struct rf__nccl;

struct rf_comm {
	struct rf_engine *eng;
	struct rf_stream *stream;      /* the worker stream that owns MPI */
	struct rf_var *order;          /* written by every collective: push order = issue order */
	int rank, size, local_rank, local_size;
	int check;                     /* compare (seq, key, bytes) across ranks first */
	uint64_t seq;                  /* collectives pushed */
	uint64_t *peers;               /* the order check's gather buffer: 3 words per rank */
	char last_error[512];          /* set on the reactor thread, from an op's message */

	/* The watchdog: the comm thread publishes the collective it is in (seq + 1, 0:
	 * none) and when it began; a ring timer on the reactor thread reads them. */
	_Atomic uint64_t run_seq1;
	_Atomic int64_t run_start_ns;
	_Atomic uint64_t run_key, run_bytes;
	double timeout_s;
	rf_comm_stall_fn on_stall;
	void *stall_ctx;
	uint64_t timer_id;             /* the armed timer (0: none) */
	int timer_live;                /* a timer callback is still to come */

	/* Fault injection for tests (RF_DIST_FAULT=kill|stall|fail:RANK:SEQ): at
	 * collective SEQ, rank RANK kills itself, stops forever, or fails it. */
	int fault_kind, fault_rank;    /* kind 0: none */
	uint64_t fault_seq;

	/* GPU tensors (rf_comm_use_gpu): NCCL on a CUDA stream of one GPU */
	struct rf__nccl *nccl;
	struct rf_device *gpu;
	struct rf_stream *gstream;
};

/* comm.c: keep a failed collective's message as the comm's last error (the first). */
void rf__comm_keep_error(struct rf_comm *c, int status, const char *msg);

/* nccl.c (or nccl-none.c): a span of GPU tensors, numel elements from ts[0]->data;
 * abort the communicator (the watchdog, before the process ends); free it. */
int rf__nccl_allreduce(struct rf_comm *c, struct rf_tensor *const *ts, unsigned n,
		       size_t numel, uint32_t key);
void rf__nccl_abort(struct rf_comm *c);
void rf__nccl_destroy(struct rf_comm *c);

#endif
