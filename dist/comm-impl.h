/* dist/comm-impl.h -- the comm's record, and what comm.c, mpi.c, nccl.c and store.c
 * call of each other. */
#ifndef RF_DIST_COMM_IMPL_H
#define RF_DIST_COMM_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "comm.h"

#define RF__COMM_MAXT 64          /* tensors in one span collective */

struct rf__nccl;

struct rf_comm {
	struct rf_engine *eng;
	struct rf_stream *stream;      /* the worker stream that owns MPI */
	struct rf_var *order;          /* written by every collective: push order = issue order */
	int rank, size, local_rank, local_size;
	int mpi;                       /* 1: launched by MPI; 0: by the environment, with a
					* store directory (collectives by NCCL only) */
	char *store_dir;               /* the environment launch's rendezvous directory */
	double store_timeout_s;
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
/* comm.c: compare every rank's (seq, key, bytes) in all (3 words per rank) with me;
 * 0, or -EPROTO with a message naming both sides. */
int rf__order_compare(const struct rf_comm *c, const uint64_t me[3], const uint64_t *all,
		      const char *what, char *msg, size_t len);
/* comm.c: publish the collective now outstanding, for the watchdog (seq + 1 in
 * run_seq1; rf__comm_unpublish clears it if it is still seq's). */
void rf__comm_publish(struct rf_comm *c, uint64_t seq, uint32_t key, size_t bytes);
void rf__comm_unpublish(struct rf_comm *c, uint64_t seq);

/* A host collective's values: owned by the op and the caller together (reactor thread
 * only), so that a wait that returns early never leaves the comm thread writing into
 * a caller's frame that is gone. */
struct rf__hostres {
	int refs;
	uint64_t vals[];
};
void rf__hostres_put(struct rf__hostres *h);

/* mpi.c (or mpi-none.c): MPI, on the comm thread only. 0, or -errno with msg set. */
enum rf__ctype { RF__CT_F32, RF__CT_I32, RF__CT_F64, RF__CT_U64 };
int rf__mpi_init(struct rf_comm *c, char *msg, size_t len);   /* rank, size, local_* */
void rf__mpi_finalize(void);
int rf__mpi_allreduce(void *buf, size_t n, enum rf__ctype t, enum rf_comm_reduce op,
		      const char *what, char *msg, size_t len);
int rf__mpi_allgather3(const uint64_t me[3], uint64_t *all, char *msg, size_t len);
int rf__mpi_bcast(void *buf, size_t n, char *msg, size_t len);

/* nccl.c (or nccl-none.c): a span of GPU tensors, numel elements from ts[0]->data;
 * abort the communicator (the watchdog, before the process ends); free it. */
int rf__nccl_allreduce(struct rf_comm *c, struct rf_tensor *const *ts, unsigned n,
		       size_t numel, uint32_t key);
/* nccl.c: a host collective (an environment launch has no MPI): n values of res,
 * through the GPU; pushed, not waited for. */
int rf__nccl_allreduce_host(struct rf_comm *c, struct rf__hostres *res, size_t n,
			    enum rf_comm_dtype dt, enum rf_comm_reduce op, uint32_t key);
void rf__nccl_abort(struct rf_comm *c);
void rf__nccl_destroy(struct rf_comm *c);

#endif
