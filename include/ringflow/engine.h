/* ringflow/engine.h -- the dependency engine: variables, pushing ops, waiting.
 * An op names the variables it reads and mutates; the engine runs it on its stream
 * once every earlier conflicting op has finished. Every function here is called on
 * the reactor thread of the engine's ring. Scheduling, failure, waiting and the
 * environment variables: core/README.md. Implementing a new kind of stream: stream.h.
 */
#ifndef RINGFLOW_ENGINE_H
#define RINGFLOW_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include "ring.h"
#include "ring-ops.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rf_engine;
struct rf_var;
struct rf_op;
struct rf_stream;

/* An operation: returns 0 or -errno. Runs on its stream's thread (the reactor thread
 * for the inline stream). Must not call engine functions, except rf_engine_push (and
 * the calls that push: rf_var_destroy, rf_var_clear_error, rf_graph_launch) from
 * inline-stream ops; the others refuse it (-EPERM from another thread, -EBUSY or
 * -EDEADLK from an op). */
typedef int (*rf_op_fn)(void *ctx);
/* Called on the reactor thread once the op is finished (ran, failed or was skipped),
 * with its final status. Use it to free ctx. */
typedef void (*rf_op_done_fn)(void *ctx, int status);

enum {
	RF_OP_ALWAYS = 1u << 0, /* run even if an input is poisoned (deletions, cleanup); its
				 * success leaves poison as it was (RF_OP_OVERWRITE clears) */
	RF_OP_OVERWRITE = 1u << 1, /* the op overwrites its mutated variables without reading
				    * them: it runs even if they are poisoned (not if a read
				    * variable is), and on success clears their poison */
};

/* An asynchronous op (I/O is just another stream): runs on the reactor thread, starts
 * work -- typically a ring request -- and returns 0; the work's completion calls
 * rf_engine_op_done(op, status) later, on the reactor thread. A negative return fails
 * the op at once. Such ops run on the engine's "async" stream. */
typedef int (*rf_async_fn)(void *ctx, struct rf_op *op);

struct rf_op_desc {
	rf_op_fn fn;                    /* or afn, not both */
	rf_async_fn afn;
	void *ctx;
	rf_op_done_fn done;             /* optional */
	struct rf_var *const *reads;    /* may repeat or overlap writes: deduplicated */
	unsigned nreads;
	struct rf_var *const *writes;
	unsigned nwrites;
	struct rf_stream *stream;       /* NULL: the engine's inline stream */
	const char *name;               /* static string, for traces and error messages */
	size_t bytes;                   /* counted against opts.max_bytes while in flight */
	unsigned flags;                 /* RF_OP_* */
};

struct rf_engine_opts {
	unsigned max_inflight;  /* ops pushed and not finished; 0: 4096. A push past the cap
				 * turns the reactor until there is room (a graph launch
				 * counts its ops, and their bytes below; one larger than a
				 * cap goes alone). */
	size_t max_bytes;       /* 0: unlimited */
	int sync;               /* 1: synchronous debug mode; 0: off; -1: RF_ENGINE_SYNC */
	const char *trace_path; /* NULL: RF_TRACE */
};

struct rf_engine_stats {
	uint64_t pushed, completed, failed, skipped;
	uint64_t chained;       /* dependencies satisfied early by stream order */
	uint64_t cap_waits;     /* pushes that had to turn the reactor for room */
	unsigned inflight, max_inflight_seen;
	size_t inflight_bytes;
	uint64_t graph_launches; /* rf_graph_launch calls (their ops count in pushed) */
};

/* Create an engine on ring (borrowed; must outlive the engine). The calling thread is
 * the engine's reactor thread: pushes, variables, waits and destruction happen on it
 * (from another thread they are refused, -EPERM or -EDEADLK with a message). */
int rf_engine_create(struct rf_engine **out, struct rf_ring *ring, const struct rf_engine_opts *opts);
/* Waits for all ops, destroys streams still registered (in reverse order), writes the
 * trace if one is on, frees. Reactor thread, outside every op and callback: called
 * from inside one (the engine is in use below it) or from another thread, it frees
 * nothing and logs an error (rf_last_error() says why). So does rf_stream_destroy.
 * Variables not destroyed are freed with it (their free functions are not called);
 * graphs not destroyed are destroyed with it (rf_graph_destroy: their recorded ops'
 * done callbacks run), after their launches. */
void rf_engine_destroy(struct rf_engine *e);
/* The ring e was created on (the caller's, borrowed by the engine). */
struct rf_ring *rf_engine_ring(struct rf_engine *e);
/* Copy e's counters, with the ops and bytes now in flight, into *st. */
void rf_engine_get_stats(const struct rf_engine *e, struct rf_engine_stats *st);
/* 1 when e runs in synchronous debug mode (opts.sync nonzero; where that is -1 or opts
 * NULL, the RF_ENGINE_SYNC environment variable set and not "0"), else 0 (e NULL too). */
int rf_engine_is_sync(const struct rf_engine *e);

/* A new variable in *out. name (copied, may be NULL) is used in traces and errors.
 * Returns 0, or -ENOMEM, or -EPERM from a thread other than the reactor's (*out NULL). */
int rf_var_create(struct rf_engine *e, const char *name, struct rf_var **out);
/* v's name as given to rf_var_create (the variable's copy), "(unnamed)" without one,
 * "(null)" for a NULL v. */
const char *rf_var_name(const struct rf_var *v);

/* Push an op. Returns 0, or -errno (-EINVAL for a bad descriptor, -ENOMEM); on an
 * error nothing of the op remains and its done callback never runs. Once 0 is
 * returned the op belongs to the engine: it runs (or is skipped) and its done
 * callback runs exactly once. In synchronous mode push returns after the op
 * finished, except when called from inside an op or callback (it runs right after). */
int rf_engine_push(struct rf_engine *e, const struct rf_op_desc *d);

/* Shorthand for the common case. */
int rf_engine_push_simple(struct rf_engine *e, rf_op_fn fn, void *ctx,
			  struct rf_var *const *reads, unsigned nreads,
			  struct rf_var *const *writes, unsigned nwrites,
			  struct rf_stream *stream, const char *name);

/* Destroy a variable: pushed as a mutation (running even if poisoned), so free_fn(arg)
 * runs only after every earlier reader and writer. The variable must not be used
 * after this call; a second destroy while the first is still queued is refused with
 * -EINVAL. free_fn may be NULL. stream NULL: inline. */
int rf_var_destroy(struct rf_engine *e, struct rf_var *v, void (*free_fn)(void *), void *arg,
		  struct rf_stream *stream);

/* Turn the reactor until every op pushed so far that mutates v has finished. Returns
 * 0 or v's poison error (-errno of the failing op). */
int rf_engine_wait_var(struct rf_engine *e, struct rf_var *v);
/* Turn the reactor until every op pushed so far has finished. Returns 0, or the first
 * op error since the previous wait_all (then cleared). */
int rf_engine_wait_all(struct rf_engine *e);
/* Turn the reactor until every op pushed so far has finished, leaving the pending
 * error for the next wait_all (what library code that must drain uses: stream and
 * loader teardown). Returns 0, -EDEADLK (refused) or the ring's error. */
int rf_engine_wait_idle(struct rf_engine *e);
/* Whether the calling code may turn e's reactor (wait, drain, tear down): 0 on the
 * reactor thread outside ops and callbacks, else -EDEADLK with a message naming what
 * (a library's teardown asks before it touches its state); -EINVAL for a NULL e. */
int rf_engine_may_wait(struct rf_engine *e, const char *what);

/* An interruptible wait: while rf_engine_wait_var or rf_engine_wait_all turn the
 * reactor (not rf_engine_wait_idle: teardown drains whatever is asked), fn(arg) is called every period_ns (0: 100 ms); when it returns nonzero the
 * wait returns -EINTR at once, its condition not met (the ops go on; wait again or
 * tear down). A program's Ctrl-C, a Python binding's pending signal. fn NULL: waits
 * end only when their condition holds (the default). Reactor thread. */
void rf_engine_set_interrupt(struct rf_engine *e, int (*fn)(void *arg), void *arg,
			     uint64_t period_ns);
/* The interrupt rf_engine_set_interrupt set into *fn (NULL: none), its argument into
 * *arg: for waits of the caller's own that should end as the engine's do (an open's,
 * say). e NULL: none. */
void rf_engine_get_interrupt(const struct rf_engine *e, int (**fn)(void *arg), void **arg);

/* The poison of a variable: 0, or the error and (if op_name) the failing op's name
 * (-EINVAL, op_name NULL, for a NULL v). */
int rf_var_error(const struct rf_var *v, const char **op_name);
/* Clear a variable's poison (pushed as a mutation). */
int rf_var_clear_error(struct rf_engine *e, struct rf_var *v);

/* ---- capture and replay ------------------------------------------------------
 * Between capture_begin and capture_end, pushes are recorded, not run: the result is a
 * graph whose dependencies are computed once. rf_graph_launch pushes the whole graph
 * as one unit: it waits in the queues of the variables its ops use (reads of those it
 * only reads, a write of every one it writes), so it orders like a single op against
 * what is pushed before and after it; inside, its ops run on their own streams by the
 * precomputed counts, with no per-variable queue walk. Each op's poison follows the
 * serial program exactly as if the ops had been pushed one by one, and errors surface
 * at the waits as usual. A captured op's done callback runs once, with status 0, when
 * the graph is freed (so its ctx lives as long as the graph); per launch, outcomes are
 * the variables' poison and rf_engine_wait_all's error. The variables a graph uses
 * must outlive it. During a capture, rf_engine_wait_var/_all, rf_var_clear_error and
 * launches are refused with -EBUSY (rf_engine_wait_idle waits for what was pushed
 * before it; rf_engine_destroy discards the recording, each done callback called with
 * -ECANCELED); rf_var_destroy's deletion is pushed when the capture ends (a variable
 * the recorded ops use then voids it: -EBUSY from capture_end, no graph). What the
 * ops, done callbacks and ring callbacks of that earlier program push or launch
 * meanwhile is not recorded: it belongs to that program and goes as outside a capture
 * (they may destroy a variable too, but not one the recording names: -EBUSY; nor end
 * the capture). A callback that runs while a push waits for room under the caps may
 * not destroy a variable that push names (-EBUSY). Synchronous mode and traces apply
 * to launches (a launch returns after its ops ran; the trace shows each op on its
 * stream and the launch on the "graph launches" track). core/README.md, "Capture and
 * replay". */
struct rf_graph;

struct rf_capture_opts {
	size_t args_size;  /* bytes of arguments each launch passes (0: none; at most 1 GiB) */
	const char *name;  /* for messages (copied); NULL: "graph" */
};

/* Start recording pushes. -EBUSY: a capture is already on, or called from inside an op
 * or callback. */
int rf_engine_capture_begin(struct rf_engine *e, const struct rf_capture_opts *opts);
/* While recording: the arguments' buffer (args_size bytes, owned by the graph, zeroed)
 * and the variable that orders it. A captured op that reads the buffer (through its
 * ctx) lists *args_var among its reads; every launch copies its arguments in before
 * its ops run, and launches of one graph with arguments run one after the other.
 * NULL (and *args_var NULL) without arguments or outside a capture. */
void *rf_engine_capture_args(struct rf_engine *e, struct rf_var **args_var);
/* Stop recording: *out the graph (may hold no op). If a push was refused while
 * recording (a bad descriptor, no memory), the capture is void -- the pushes after it
 * are refused too, saying so -- and this returns no graph (*out NULL) and that error;
 * the recorded ops' done callbacks have then run, with -ECANCELED. (A call refused
 * with -EBUSY because a capture records leaves it as it was.) -EINVAL: no capture;
 * -EBUSY: called from inside an op or callback. */
int rf_engine_capture_end(struct rf_engine *e, struct rf_graph **out);

/* One launch may put another variable in place of a captured one (the batch's slot,
 * say): the launch then orders on `actual` instead. Two distinct captured variables
 * may not become one. */
struct rf_graph_bind {
	struct rf_var *captured;
	struct rf_var *actual;
};

/* Push one replay of g. args: args_size bytes copied now (NULL: the buffer keeps its
 * contents); binds: nbinds substitutions for this launch. Returns 0 or -errno
 * (-EINVAL with rf_last_error() for a bad bind; -EBUSY during a capture); on an error
 * nothing was pushed. In synchronous mode it returns after the replay finished. */
int rf_graph_launch(struct rf_graph *g, const void *args, const struct rf_graph_bind *binds,
		    unsigned nbinds);
/* The number of ops captured. */
unsigned rf_graph_size(const struct rf_graph *g);
/* Free g once its launches have finished (at once if none is in flight); then each
 * captured op's done callback runs once. Never waits. */
void rf_graph_destroy(struct rf_graph *g);

/* Chrome-trace JSON (opens in Perfetto): one track per stream, each op with name,
 * start and end, and its dependency edges as flow events. rf_engine_trace_start begins
 * recording (a path that cannot take the file fails here, not at the end of a run;
 * -EBUSY while a trace is on); rf_engine_trace_stop writes the file and stops -- a
 * regular file under a name of its own beside path, renamed over it when whole, so that
 * a full disk leaves the file that was there (-ENOENT when no trace is on). Reactor
 * thread, outside ops and callbacks. Returns 0 or -errno. */
int rf_engine_trace_start(struct rf_engine *e, const char *path);
int rf_engine_trace_stop(struct rf_engine *e);
/* Add an instant or complete event on a stream's track (for annotations; the name is
 * copied). Reactor thread; from another thread it records nothing. */
void rf_engine_trace_mark(struct rf_engine *e, struct rf_stream *s, const char *name,
			  uint64_t t0_ns, uint64_t t1_ns);

/* ---- streams -------------------------------------------------------------------
 * A stream runs ops. The inline stream runs them on the reactor thread; a worker
 * stream runs them on its own thread (single-producer/single-consumer queue in, a ring
 * notifier out: no mutex, no condition variable). Devices add their own. */
struct rf_stream *rf_engine_inline_stream(struct rf_engine *e);
/* The stream rf_async_fn ops run on (a trace track of its own). An async fn that
 * called rf_engine_op_done must return 0 (a negative return after it is ignored,
 * with a logged error); rf_engine_op_done on an op that is not running aborts. */
struct rf_stream *rf_engine_async_stream(struct rf_engine *e);
/* Create a worker stream with its own thread, named "rf-" and the stream's name (15
 * bytes at most; ps, top, perf), or another live stream's of that thread once this
 * one is gone. capacity: queue slots (0: 1024; at
 * most 2^24, -EINVAL above; more ops wait in an overflow list), a cache line (64
 * bytes) each, allocated and zeroed here. The
 * engine owns it (destroyed by rf_engine_destroy) unless rf_stream_destroy is called
 * first, which waits for all the engine's work. */
int rf_worker_stream_create(struct rf_engine *e, const char *name, unsigned capacity,
			    struct rf_stream **out);
/* Create a worker stream that runs its ops on the thread of `with`, a worker stream of
 * the same engine, instead of a thread of its own. It is a stream of its own for the
 * engine (its ops' order, dependencies, trace track), but its ops and those of every
 * stream on that thread run one at a time, on that one thread (an op's thread-local
 * state is that thread's). Fewer threads than streams: on a machine with fewer cores
 * than spinning threads, a hop between two streams sharing a thread is a hand-over
 * between two threads (worker -> reactor -> worker), not three. The thread goes with
 * the last of its streams; at most 32 live streams share one. -EINVAL if `with` is
 * NULL, not a worker stream, or another engine's. */
int rf_worker_stream_create_shared(struct rf_engine *e, const char *name, unsigned capacity,
				   struct rf_stream *with, struct rf_stream **out);
/* Wait for all the engine's work (rf_engine_wait_idle: an error stays pending for the
 * next rf_engine_wait_all), take s out of the engine and destroy it. Reactor thread,
 * outside every op and callback: otherwise, or when the wait fails with ops still in
 * flight, it frees nothing and logs an error. NULL is ignored. */
void rf_stream_destroy(struct rf_stream *s);
/* s's name, as traces and messages give it (the stream's own string). */
const char *rf_stream_name(const struct rf_stream *s);

/* ---- ring operations as ops ------------------------------------------------------
 * Any operation of ring-ops.h pushed as an async op: it is submitted when its
 * dependencies allow, and its completion (the CQE) finishes the op -- status 0, or
 * the result if negative (which poisons the written variables, as any failure does).
 * A send that ends short (the ring reports what went before a reset, its deadline or
 * a cancel: ring-ops.h) fails with -EIO, its count in *result; a receive or a splice
 * that ends short succeeds with its count, as at the end of a stream: compare
 * *result with io.len. */
struct rf_io_push {
	struct rf_io io;             /* copied at push, with its path(s), address and iovec
				      * array; buffers must live until the op is done */
	const int64_t *fd_from;      /* non-NULL: io.fd is *fd_from when the op starts -- the
				      * result of an earlier op (an openat, socket, accept)
				      * that this one depends on through a variable. For the
				      * ops that take a directory fd (openat, statx, renameat,
				      * unlinkat) it is io.dirfd instead: statx with path ""
				      * and AT_EMPTY_PATH stats the fd itself */
	int64_t *result;             /* non-NULL: receives the result (bytes, fd, ...) before
				      * the op is done; -errno on failure */
	struct rf_var *const *reads;
	unsigned nreads;
	struct rf_var *const *writes;
	unsigned nwrites;
	const char *name;            /* static string; NULL: the op's name ("io:recv", ...) */
};
/* Returns 0, or -errno as rf_engine_push (-EINVAL: a malformed descriptor). */
int rf_engine_push_io(struct rf_engine *e, const struct rf_io_push *p);

/* Reactor thread: the op finished with status. An async op's work calls it once;
 * so does a stream (stream.h) for each op it took. A call from another thread, or on
 * an op that is not running, is a broken contract: logged, then abort(). */
void rf_engine_op_done(struct rf_op *op, int status);

#ifdef __cplusplus
}
#endif
#endif
