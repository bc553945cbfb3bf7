/* ringflow/stream.h -- implementing a kind of stream (devices, tests): the fields of
 * struct rf_stream and its ops, registering it with an engine, running its ops and
 * reporting them (rf_engine_op_done, engine.h). Users of the engine need only
 * engine.h. */
#ifndef RINGFLOW_STREAM_H
#define RINGFLOW_STREAM_H

#include <stdint.h>
#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	RF_STREAM_IN_ORDER = 1u << 0, /* ops finish in enqueue order: a consumer on the same
				       * stream is enqueued as soon as its producers are */
};

struct rf_stream_ops {
	/* Reactor thread. Take op: run rf_op_execute(op) (on any thread) and afterwards
	 * call rf_engine_op_done(op, status) on the reactor thread; in enqueue order for an
	 * in-order stream. Returns 0 or -errno (then the op fails with it). */
	int (*enqueue)(struct rf_stream *s, struct rf_op *op);
	/* optional: make s's future work wait for producer's op with stream sequence
	 * number seq (producer's enqueue of it has returned 0; maybe not finished). Return
	 * 0 if done (the engine then counts the dependency satisfied), -ENOTSUP
	 * otherwise. */
	int (*chain)(struct rf_stream *s, struct rf_stream *producer, uint64_t seq);
	/* Reactor thread, no op in flight. Free the stream (including s itself). */
	void (*destroy)(struct rf_stream *s);
	/* optional, reactor thread: called once the engine has dispatched what was ready
	 * (the end of each dispatch round in which s was given an op). A stream that
	 * gathers enqueued ops to run them as one (a graph launch's, rf_op_graph) must
	 * start what it holds by the time this returns. */
	void (*flush)(struct rf_stream *s);
};

struct rf_stream {
	const struct rf_stream_ops *ops;
	void *ctx;              /* the implementation's */
	const char *name;
	unsigned flags;         /* RF_STREAM_* */
	/* filled by rf_engine_add_stream */
	struct rf_engine *eng;
	int id;
	struct rf_stream *next_registered;
	uint64_t seq;           /* ops enqueued so far */
	uint64_t done_seq;      /* ops reported done so far */
	struct rf_stream *next_flush; /* the engine's: streams owed a flush call */
	int flush_queued;
};

/* Register a stream the caller allocated (ops, ctx, name, flags set; the fields
 * below them zero). -EEXIST if it already is, -EBUSY if another engine has it. */
int rf_engine_add_stream(struct rf_engine *e, struct rf_stream *s);
/* Unregister (no op of it may be in flight). Does not call ops->destroy. */
void rf_engine_remove_stream(struct rf_engine *e, struct rf_stream *s);

/* Any thread: run the op's function (recording start/end times for the trace) and
 * return its status. A stream calls it exactly once per op. */
int rf_op_execute(struct rf_op *op);
/* Stream sequence number assigned at enqueue (1-based). */
uint64_t rf_op_seq(const struct rf_op *op);
/* 1 if nothing waits for op's completion alone: it is an op of a graph launch, and
 * every op that depends on it is enqueued behind it on the same in-order stream.
 * Such a stream may report op together with a later op's completion (one
 * rf_notifier_signal_n for several), provided that later one is already enqueued
 * when the choice is made, or is sure to be: a dependent of op cannot be skipped
 * while op is unreported, so one is enqueued after it. Else 0, and 0 while the
 * engine traces (a stream that times an op by its report keeps each op's time). */
int rf_op_quiet(const struct rf_op *op);
/* An op of a graph launch (rf_graph_launch) whose graph runs every op on this one
 * stream: the graph's id (unique in the process, never reused), the op's index in
 * the capture and the graph's size. A launch enqueues the graph's ops in the same
 * order each time, all in one dispatch round unless poison or an error makes it
 * skip some; a stream may gather them and run a recording of the first launch's
 * work instead (the CUDA stream: devices/README.md, "CUDA graphs"), provided it
 * starts what it holds by its flush call. */
struct rf_op_graph {
	uint64_t id;
	uint32_t index, n;
};
/* 1 and *out filled for such an op; 0 for any other op, and while the engine traces
 * (each op then runs, and is timed, on its own). */
int rf_op_graph(const struct rf_op *op, struct rf_op_graph *out);
/* The op's function (or NULL: an async op) and its context, for a stream that must
 * know what an op does before it records it. */
void rf_op_fn_ctx(const struct rf_op *op, rf_op_fn *fn, void **ctx);
/* Let an asynchronous stream (CUDA) supply device-side start/end times. */
void rf_op_set_times(struct rf_op *op, uint64_t t0_ns, uint64_t t1_ns);

#ifdef __cplusplus
}
#endif
#endif
