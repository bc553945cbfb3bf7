/* ringflow/comm.h -- collectives across processes on a communication stream.
 *
 * A comm owns one worker stream whose thread owns MPI (init, every collective,
 * finalize); the reactor thread never calls MPI. Each collective is an engine op, so
 * its completion reaches the reactor as every worker completion does. How ordering,
 * failures and the order check work: dist/README.md. */
#ifndef RINGFLOW_COMM_H
#define RINGFLOW_COMM_H

#include <stdint.h>

#include "engine.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rf_comm;

struct rf_comm_opts {
	int check;      /* 1: compare (sequence, key, bytes) across ranks before every
			 * collective; 0: off; -1: the RF_DIST_CHECK environment variable */
};

/* Start the comm stream and MPI on it (MPI_THREAD_FUNNELED), waiting for the init.
 * Returns 0, -ENOSYS where ringflow was built without MPI, or -EIO; the message in
 * rf_last_error(). One comm per process. */
int rf_comm_create(struct rf_engine *e, const struct rf_comm_opts *opts, struct rf_comm **out);
/* Finalize MPI on the comm stream after every collective pushed so far, then stop it. */
void rf_comm_destroy(struct rf_comm *c);

int rf_comm_rank(const struct rf_comm *c);
int rf_comm_size(const struct rf_comm *c);
/* The ring's node-local rank (OMPI_COMM_WORLD_LOCAL_RANK, else LOCAL_RANK, else 0). */
int rf_comm_local_rank(const struct rf_comm *c);
struct rf_stream *rf_comm_stream(const struct rf_comm *c);

/* Push a sum of t (f32 or i32, on a CPU device) over every rank, in place. key names
 * the tensor for the order check and in messages. Every rank must push its collectives
 * in the same order; they are issued in push order (each writes the comm's ordering
 * variable). Returns 0 or -EINVAL (the op was not pushed); a failed collective fails
 * the op (poisoning t) with its message in rf_comm_last_error(). */
int rf_comm_allreduce(struct rf_comm *c, struct rf_tensor *t, uint32_t key);

/* Wait until every collective pushed so far has run; their first error, or 0. */
int rf_comm_wait(struct rf_comm *c);

/* The number of collectives pushed so far (the next one's sequence number). */
uint64_t rf_comm_seq(const struct rf_comm *c);
const char *rf_comm_last_error(const struct rf_comm *c);

#ifdef __cplusplus
}
#endif
#endif
