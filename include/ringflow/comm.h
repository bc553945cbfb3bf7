/* ringflow/comm.h -- collectives across processes on a communication stream.
 *
 * A comm owns one worker stream whose thread owns MPI (init, every collective,
 * finalize); the reactor thread never calls MPI. Each collective is an engine op, so
 * its completion reaches the reactor as every worker completion does. Launched by
 * mpirun, a comm takes rank and size from MPI; launched by the environment (RANK,
 * WORLD_SIZE: opts.store_dir), it has no MPI and its collectives go by NCCL on GPU
 * tensors. How ordering, failures and the order check work: dist/README.md. */
#ifndef RINGFLOW_COMM_H
#define RINGFLOW_COMM_H

#include <stdint.h>

#include "engine.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rf_comm;

/* The watchdog's report: a collective has been running for `seconds`. */
struct rf_comm_stall {
	uint64_t seq;           /* its sequence number */
	uint32_t key;
	size_t bytes;
	double seconds;
	const char *what;       /* "allreduce" */
};
/* Called on the reactor thread when a collective has been outstanding longer than the
 * timeout. A blocking MPI call cannot be taken back: the callback ends the process
 * (after saying so); if it returns, the comm logs the message and calls _exit(124). */
typedef void (*rf_comm_stall_fn)(void *ctx, const struct rf_comm_stall *st, const char *msg);

struct rf_comm_opts {
	int check;      /* 1: compare (sequence, key, bytes) across ranks before every
			 * collective; 0: off; -1: the RF_DIST_CHECK environment variable */
	double timeout_s;          /* > 0: the watchdog (a ring timer) fires when one
				    * collective has run this long; 0: no watchdog */
	rf_comm_stall_fn on_stall; /* NULL: log the message, then _exit(124) */
	void *stall_ctx;
	/* NULL: launched by MPI (mpirun). Else the environment launch, without MPI: rank
	 * and size from RANK and WORLD_SIZE (required), LOCAL_RANK (default 0) and
	 * LOCAL_WORLD_SIZE (default LOCAL_RANK + 1); rank 0's NCCL id reaches the others
	 * through files in this directory (created if missing; on a file system every
	 * rank sees), by rf_comm_use_gpu. Only GPU tensors can then be reduced; host
	 * collectives go through the GPU, after rf_comm_use_gpu. */
	const char *store_dir;
	double store_timeout_s;    /* how long the rendezvous waits for every rank; 0: 300 */
};

/* Start the comm stream and MPI on it (MPI_THREAD_FUNNELED), waiting for the init;
 * with opts.store_dir, read the environment instead. Returns 0, -ENOSYS where
 * ringflow was built without MPI (and no store_dir), -EINVAL (a bad environment), or
 * -EIO; the message in rf_last_error(). One comm per process. */
int rf_comm_create(struct rf_engine *e, const struct rf_comm_opts *opts, struct rf_comm **out);
/* Finalize MPI on the comm stream after every collective pushed so far, then stop it. */
void rf_comm_destroy(struct rf_comm *c);

/* This process's rank in the communicator (0-based), and the number of ranks. */
int rf_comm_rank(const struct rf_comm *c);
/* The number of ranks in the communicator. */
int rf_comm_size(const struct rf_comm *c);
/* This rank's place among the ranks on its machine (MPI_COMM_TYPE_SHARED; where that
 * fails: OMPI_COMM_WORLD_LOCAL_RANK, else LOCAL_RANK, else 0), and how many there
 * are: to choose a GPU and split the cores. */
int rf_comm_local_rank(const struct rf_comm *c);
/* How many ranks run on this machine: the size of MPI's MPI_COMM_TYPE_SHARED group
 * (where that split fails, rf_comm_local_rank + 1: at least what the environment's
 * local rank implies), or LOCAL_WORLD_SIZE (default LOCAL_RANK + 1) in an environment
 * launch. */
int rf_comm_local_size(const struct rf_comm *c);
/* The comm's worker stream: its thread owns MPI and runs the collectives that go by MPI
 * (GPU ones run on the stream given to rf_comm_use_gpu). Owned by the comm:
 * rf_comm_destroy destroys it. */
struct rf_stream *rf_comm_stream(const struct rf_comm *c);

/* GPU tensors: make the NCCL communicator for GPU `gpu` (one per rank; every rank
 * calls this, in the same place of its collective order) and launch GPU collectives
 * on s, one of gpu's streams, kept for them. Blocks: the NCCL id goes out from rank 0
 * by MPI (or through the store directory), ncclCommInitRank waits for every rank, and
 * a warm-up collective checks the sum. Returns 0, -ENOSYS without NCCL, -EINVAL,
 * -ETIMEDOUT (the store's rendezvous), or -EIO with the message. */
int rf_comm_use_gpu(struct rf_comm *c, struct rf_device *gpu, struct rf_stream *s);

/* Push a sum of t (f32 or i32; on a CPU device by MPI on the comm stream, on the
 * comm's GPU by NCCL on its stream) over every rank, in place. key names
 * the tensor for the order check and in messages. Every rank must push its collectives
 * in the same order; they are issued in push order (each writes the comm's ordering
 * variable). Returns 0 or -EINVAL (the op was not pushed); a failed collective fails
 * the op (poisoning t) with its message in rf_comm_last_error(). */
int rf_comm_allreduce(struct rf_comm *c, struct rf_tensor *t, uint32_t key);

enum rf_comm_dtype { RF_COMM_F64 = 0, RF_COMM_U64 = 1 };
enum rf_comm_reduce { RF_COMM_SUM = 0, RF_COMM_MIN = 1, RF_COMM_MAX = 2 };

/* Reduce n (1..4096) host values in buf (the caller's) over every rank, in place, and wait for
 * it: for small things the reactor needs now (metrics, parameter hashes). Ordered
 * after every collective pushed before it. Returns 0 or -errno (the message in
 * rf_comm_last_error() and rf_last_error()). */
int rf_comm_allreduce_host(struct rf_comm *c, void *buf, size_t n, enum rf_comm_dtype dt,
			   enum rf_comm_reduce op, uint32_t key);

/* 1 when host values (rf_comm_allreduce_host, rf_comm_agree) can go now: the comm has
 * MPI, or (an environment launch) rf_comm_use_gpu has set up the GPU they go through.
 * Else 0. */
int rf_comm_host_ready(const struct rf_comm *c);

/* A setting a process was given, for rf_comm_agree. */
enum rf_comm_setting_kind { RF_COMM_SET_INT = 0, RF_COMM_SET_REAL = 1, RF_COMM_SET_HASH = 2 };
struct rf_comm_setting {
	const char *name;
	uint64_t value;          /* an integer; a double's bits (REAL); a hash (HASH: the
				  * message says only that it differs) */
	enum rf_comm_setting_kind kind;
};

/* Whether every rank was given the same n (1..2048) settings: one rf_comm_allreduce_host
 * (key) of each value's minimum and maximum -- a collective: every rank calls it, with
 * the same n (a rank that fails before it leaves the others waiting there; under
 * mpirun its exit ends the job). Run it before whatever depends on them,
 * so that processes started with different arguments stop at once, together, instead
 * of hanging in collectives of other sizes or training a mix. 0; -EPROTO with a
 * message "WHAT: the N processes were given different settings: NAME LO to HI, ...
 * (this rank, R: NAME V, ...)" naming up to 4 of them; or the collective's -errno. */
int rf_comm_agree(struct rf_comm *c, const char *what, const struct rf_comm_setting *s,
		  unsigned n, uint32_t key);
/* 1 once an rf_comm_agree of c found the ranks given different settings (its -EPROTO;
 * other failures -- a collective's, a server's -- may say -EPROTO too): every rank
 * knows it, so a program may say it once and exit as for a usage error. Else 0. */
int rf_comm_apart(const struct rf_comm *c);

/* One collective over ts[0..n-1] (n <= 64): adjacent views of one block in ascending
 * order (a bucket of gradients), summed as one range in place: no fusion copy. The
 * alignment padding between views is summed too. Otherwise as rf_comm_allreduce. */
int rf_comm_allreduce_span(struct rf_comm *c, struct rf_tensor *const *ts, unsigned n,
			   uint32_t key);

/* Wait until every collective pushed so far has run; their first error, or 0. */
int rf_comm_wait(struct rf_comm *c);

/* The number of collectives pushed so far (the next one's sequence number). */
uint64_t rf_comm_seq(const struct rf_comm *c);
/* The message of the first collective of c that failed, "" if none (the comm's own
 * string, kept while c lives). */
const char *rf_comm_last_error(const struct rf_comm *c);

#ifdef __cplusplus
}
#endif
#endif
