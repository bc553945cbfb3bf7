/* core/engine-impl.h — engine internals shared by engine.c, worker.c and trace.c.
 * Not installed. Everything here is touched on the reactor thread only, except the
 * fields of struct rf_op marked "executing thread". */
#ifndef RF_ENGINE_IMPL_H
#define RF_ENGINE_IMPL_H

#include <stdint.h>
#include <stddef.h>
#include "engine.h"

struct rf__entry {
	struct rf_op *op;
	struct rf_var *var;
	struct rf__entry *prev, *next; /* in var's queue */
	uint8_t write;
	uint8_t granted;
	uint8_t dio;      /* counted in the var's dispatched-in-order summary */
};

/* Summary of a set of queue entries, kept incrementally so a push decides its grant
 * in O(1): how many block (op not yet enqueued, or on a stream without order), and of
 * those enqueued on in-order streams, whether they all sit on one stream (and the
 * newest one's sequence number there). */
struct rf__sum {
	uint32_t nblock;
	uint32_t ndio;        /* dispatched on in-order streams */
	uint32_t ndio_s;      /* ... of which on stream s */
	struct rf_stream *s;
	uint64_t maxseq;      /* newest seq on s (valid while ndio_s > 0) */
};

enum { RF__OP_PENDING, RF__OP_READY, RF__OP_DISPATCHED, RF__OP_DONE };

#define RF__INLINE_ENTRIES 4

struct rf_op {
	struct rf_engine *eng;
	rf_op_fn fn;
	rf_async_fn afn;
	void *ctx;
	rf_op_done_fn done;
	struct rf_stream *stream;
	const char *name;
	size_t bytes;
	unsigned flags;
	uint32_t pending;        /* grants still missing (+1 guard while pushing) */
	uint8_t state;
	uint8_t chained;         /* some dependency was satisfied by stream order */
	uint8_t internal;        /* engine-made op (waits), not counted in stats.pushed */
	uint8_t traced;          /* record times (set at push, read by the executing thread) */
	int status;
	uint64_t uid;            /* push order, 1-based */
	uint64_t seq;            /* stream sequence number */
	uint64_t t0, t1;         /* executing thread (when tracing) */
	int *done_flag;          /* set to 1 at completion (waits, sync mode) */
	struct rf_var *delete_var; /* deletion op: free this var after completion */
	uint32_t nent, cap_ent;
	struct rf__entry *ent;
	struct rf__entry ent_inline[RF__INLINE_ENTRIES];
	struct rf_op *next;      /* ready list / free list */
	/* tracing: producers' uids */
	uint32_t ndeps;
	uint64_t *deps;
};

struct rf_var {
	struct rf_engine *eng;
	struct rf__entry *head, *tail;
	uint32_t nqueued;
	uint32_t n_ungranted;
	struct rf__sum sum_all, sum_w; /* over all entries / write entries in the queue */
	int err;
	const char *err_op;
	char *name;
	/* tracing */
	uint64_t last_writer;
	uint32_t nreaders, cap_readers;
	uint64_t *readers;
};

struct rf__trace_ev {
	const char *name;
	int tid;
	uint64_t t0, t1;
	uint64_t uid;
	uint32_t ndeps;
	uint64_t *deps;
};

struct rf__trace_track {
	int tid;
	char *name;
};

struct rf__trace {
	char *path;
	struct rf__trace_track *tracks; /* names kept: streams may be gone at write time */
	size_t ntracks, cap_tracks;
	uint64_t t_origin;
	size_t n, cap;
	struct rf__trace_ev *ev;
};

struct rf_engine {
	struct rf_ring *ring;
	unsigned max_inflight;
	size_t max_bytes;
	int sync;
	unsigned inflight;
	size_t inflight_bytes;
	int first_error;
	const char *first_error_op;
	int draining;
	int in_inline_op;         /* depth of inline ops running (waits refused) */
	const char *cur_op_name;
	struct rf_op *ready_head, *ready_tail;
	struct rf_op *free_ops;
	struct rf_stream inline_stream;
	struct rf_stream async_stream;
	struct rf_stream *streams; /* registered, newest first */
	int next_stream_id;
	struct rf_engine_stats st;
	uint64_t owner_tid;
	struct rf__trace *trace;
};

/* trace.c */
int rf__trace_open(struct rf_engine *e, const char *path);
void rf__trace_record(struct rf_engine *e, struct rf_op *op);
int rf__trace_close(struct rf_engine *e);
void rf__trace_deps_at_push(struct rf_engine *e, struct rf_op *op);
void rf__trace_var_free(struct rf_var *v);
void rf__trace_track(struct rf_engine *e, struct rf_stream *s);

#endif
