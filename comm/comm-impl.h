/* comm/comm-impl.h -- the comm's record, the transports' tables (what comm.c calls of
 * them; registered in transports.c), and what they call back. */
#ifndef RF_COMM_IMPL_H
#define RF_COMM_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "comm.h"

#define RF__COMM_MAXT 64          /* tensors in one span collective */

struct rf__host_transport;
struct rf__dev_transport;

struct rf_comm {
	struct rf_engine *eng;
	struct rf_stream *stream;      /* the worker stream that owns the host transport */
	struct rf_var *order;          /* written by every collective: push order = issue order */
	int rank, size, local_rank, local_size;
	const struct rf__host_transport *host; /* the one that launched the processes and
					* carries host collectives; NULL: launched by the
					* environment, with a store directory (collectives by
					* a device transport only) */
	char *store_dir;               /* the environment launch's rendezvous directory */
	double store_timeout_s;
	int check;                     /* compare (seq, key, bytes) across ranks first */
	int apart;                     /* an rf_comm_agree found the ranks' settings differ */
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

	/* device tensors (rf_comm_use_gpu): a device transport on a stream of one device */
	const struct rf__dev_transport *dtr;
	void *dctx;                    /* the transport's state */
	struct rf_device *dev;
	struct rf_stream *dstream;
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

/* ---- transports ------------------------------------------------------------------
 * A host transport launches the processes (rank, size) and carries collectives of
 * host memory; every call runs on the comm's worker thread, which owns it (as a
 * library that allows one thread does). Each returns 0, or -errno with msg set. */
enum rf__ctype { RF__CT_F32, RF__CT_I32, RF__CT_F64, RF__CT_U64 };
struct rf__host_transport {
	const char *name;
	int (*init)(struct rf_comm *c, char *msg, size_t len);   /* rank, size, local_* */
	void (*finalize)(void);
	int (*allreduce)(void *buf, size_t n, enum rf__ctype t, enum rf_comm_reduce op,
			 const char *what, char *msg, size_t len);
	int (*allgather3)(const uint64_t me[3], uint64_t *all, char *msg, size_t len);
	int (*bcast)(void *buf, size_t n, char *msg, size_t len);
};

/* A device transport carries collectives of one device's memory, launched on one of
 * its streams (attach); reactor thread. */
struct rf__dev_transport {
	const char *name;
	/* Take device dev and its stream s: make the communicator (blocks until every
	 * rank has); -ENOTSUP (nothing done) when dev is not of a kind it carries. */
	int (*attach)(struct rf_comm *c, struct rf_device *dev, struct rf_stream *s);
	/* A span of tensors of the attached device, numel elements from ts[0]->data. */
	int (*allreduce)(struct rf_comm *c, struct rf_tensor *const *ts, unsigned n,
			 size_t numel, uint32_t key);
	/* A host collective where there is no host transport: n values of res, through
	 * the device; pushed, not waited for. */
	int (*allreduce_host)(struct rf_comm *c, struct rf__hostres *res, size_t n,
			      enum rf_comm_dtype dt, enum rf_comm_reduce op, uint32_t key);
	/* Abort the communicator (the watchdog, before the process ends): nothing of it
	 * may outlive the process. Free it (after the collectives pushed). */
	void (*abort)(struct rf_comm *c);
	void (*destroy)(struct rf_comm *c);
};

/* transports.c: the registry. */
extern const struct rf__host_transport *const rf__host_transport;
extern const struct rf__dev_transport *const rf__dev_transports[];  /* NULL-terminated */

#endif
