/* core/engine-impl.h -- engine internals shared by the files of core/. Not installed.
 * Everything here is touched on the reactor thread only, except the fields of struct
 * rf_op marked "executing thread". The queues' design: core/README.md. */
#ifndef RF_ENGINE_IMPL_H
#define RF_ENGINE_IMPL_H

#include <errno.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "opkind.h"
#include "rf-internal.h"
#include "slab.h"
#include "stream.h"

/* A variable's queue is a FIFO of groups: a write alone, or a run of consecutive
 * reads. An entry is "granted" when its op may go to its stream, "front" when its
 * group is the queue's first (README.md). */
struct rf__group;

struct rf__entry {
	struct rf_op *op;
	struct rf_var *var;
	struct rf__group *g;
	struct rf__entry *prev, *next; /* in g, unfinished entries */
	uint8_t write;
	uint8_t granted;
	uint8_t front;
	uint8_t dio;      /* dispatched on an in-order stream (counted in g) */
};

struct rf__group {
	struct rf__group *prev, *next; /* in the var's queue; next: free list too */
	struct rf__entry *head, *tail;
	uint32_t n;          /* unfinished entries */
	uint32_t nungranted;
	uint32_t ndio;       /* of n, dispatched on in-order streams */
	uint32_t ndio_s;     /* ... of which on stream s */
	struct rf_stream *s; /* stream of the first of the ndio (lost when it drains) */
	uint64_t maxseq;     /* newest seq on s */
	uint8_t write;
};

struct rf__glaunch;
struct rf__capture;

enum { RF__OP_FREE, RF__OP_PENDING, RF__OP_READY, RF__OP_DISPATCHED, RF__OP_REPORTED,
       RF__OP_DONE };

#define RF__INLINE_ENTRIES 4
/* An op naming more variables takes a block of this many entries from the engine's
 * slab (op.c: reused op to op, no malloc and no fresh page), more than this from
 * malloc. */
#define RF__ENT_BLOCK 8

/* A wait's outcome, on the heap: a wait that returns early (an error while turning
 * the reactor) abandons it and the op's completion frees it; nothing ever points
 * into a caller's stack frame. */
struct rf__waiter {
	int done;
	int abandoned;
	int err;             /* wait_var: the variable's poison at the wait's turn */
};

/* The fields every op's queueing, granting, dispatch and completion read come first,
 * in one cache line (queue.c grants a group's entries in a walk: a gate's readers, a
 * million of them in rf-bench engine --pattern queued, each cost its op's line, and the
 * list link on another line was a second miss); the record is a whole number of lines,
 * so with the slab's line-aligned records each op starts on one. */
struct rf_op {
	struct rf_op *next;      /* ready list / completion list / free list / stream's */
	uint32_t pending;        /* grants still missing (+1 guard while pushing) */
	uint32_t nfront;         /* entries at their queue's front */
	uint32_t nent, cap_ent;
	uint8_t state;
	uint8_t settled;         /* inputs were final and clean at dispatch */
	uint8_t traced;          /* record times (set at push, read by the executing thread) */
	unsigned flags;
	const struct rf__opkind *kind; /* what kind of op (opkind.h), and its argument: */
	struct rf__entry *ent;
	struct rf_stream *qstream; /* the stream its queue entries are ordered on (queue.c):
				    * its own, or a launch's graph's one in-order stream */
	struct rf_stream *stream;
	/* the second line */
	rf_op_fn fn;
	void *ctx;
	rf_async_fn afn;
	rf_op_done_fn done;
	struct rf_engine *eng;
	int status;              /* reported status */
	uint32_t ndeps;          /* tracing: producers' uids */
	uint64_t uid;            /* push order, 1-based */
	uint64_t seq;            /* stream sequence number */
	union {
		struct rf_var *var;              /* a wait's variable, a deletion's */
		struct rf__glaunch *gl;          /* a graph launch: its block */
		struct { struct rf__glaunch *gl; uint32_t i; } node; /* a launch's op i */
	} arg;
	const char *name;
	size_t bytes;
	uint64_t t0, t1;         /* executing thread (when tracing) */
	struct rf__waiter *waiter; /* wait_var and synchronous mode */
	uint64_t *deps;
	struct rf__entry ent_inline[RF__INLINE_ENTRIES]; /* last: not cleared at alloc */
};
_Static_assert(sizeof(void *) != 8 || sizeof(struct rf_op) % 64 == 0,
	       "struct rf_op: a whole number of cache lines (on 64-bit machines)");

/* Up to this many variables an op's duplicates are found by comparing entries; past
 * it, by rf_var.mark. */
#define RF__SCAN_MAX 16

struct rf_var {
	struct rf_engine *eng;
	struct rf__group *head, *tail; /* head: the front group */
	struct rf__group *frontier;    /* first group with an ungranted entry, or NULL */
	uint32_t nqueued;              /* unfinished entries */
	int err;
	int deleting;                  /* its deletion is pushed (on the line a push reads) */
	const char *err_op;
	char *name;
	/* tracing */
	uint64_t last_writer;
	uint32_t nreaders, cap_readers;
	uint64_t *readers;
	/* an op being filled (op.c: rf__op_fill_entries) or recorded (capture.c:
	 * rf__cap_record): which of its entries holds v (mark == that fill's generation,
	 * ++e->mark; used past RF__SCAN_MAX variables) */
	uint64_t mark;
	uint32_t mark_ent;
	struct rf_var *prev, *next;    /* the engine's variables */
	void (*del_fn)(void *);        /* rf_var_destroy's free_fn and its argument */
	void *del_arg;
};

struct rf__trace_ev {
	const char *name;
	char *own_name;                 /* a mark's copy of its name */
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
	char *tmp;                      /* the file written, renamed to path at stop (NULL:
					 * path itself, a device or a file in a directory
					 * that takes no new one) */
	int fd;                         /* opened (checked) at start, written at stop */
	struct rf__trace_track *tracks; /* names kept: streams may be gone at write time */
	size_t ntracks, cap_tracks;
	uint64_t t_origin;
	size_t n, cap;
	struct rf__trace_ev *ev;
};

struct rf__oplist {
	struct rf_op *head, *tail;
};

struct rf_engine {
	struct rf_ring *ring;
	struct rf_graph *graphs;        /* made and not yet freed: destroyed with the engine */
	/* rf_engine_set_interrupt: asked every interrupt_ns while a wait turns the
	 * reactor; nonzero ends the wait with -EINTR */
	int (*interrupt)(void *arg);
	void *interrupt_arg;
	uint64_t interrupt_ns;
	unsigned max_inflight;
	size_t max_bytes;
	int sync;
	unsigned inflight;
	size_t inflight_bytes;
	int first_error;
	const char *first_error_op;
	int pumping;              /* the dispatch/completion loop is running */
	int in_callback;          /* depth of user code running: inline ops, async fns,
				   * done callbacks (waits are refused there) */
	/* The immediate path (rf__run_now): the op running, its descriptor, and the op
	 * record it got if a push from inside it needed it in the queues. */
	const struct rf_op_desc *now_desc;
	uint64_t now_uid;
	/* a push (its descriptor) or launch (its binds) waiting for room (turn.c) */
	const struct rf_op_desc *room_desc;
	const struct rf_graph_bind *room_binds;
	unsigned room_nbinds;
	struct rf_op *now_op;
	struct rf__oplist ready;    /* granted, to dispatch */
	struct rf__oplist finished; /* reported and at every front, to complete */
	struct rf__slab op_slab;      /* op records (slab.h) */
	struct rf__slab ent_slab;     /* blocks of RF__ENT_BLOCK entries (op.c) */
	struct rf__slab var_slab;     /* variables */
	struct rf__group *free_groups; /* reserved (queue.c) */
	struct rf__slab group_slab;
	uint32_t nfree_groups;
	struct rf_stream inline_stream;
	struct rf_stream async_stream;
	struct rf_stream graph_stream; /* where graph launches run (graph-run.c) */
	struct rf__capture *cap;       /* a capture in progress (capture.c) */
	uint64_t next_uid;
	size_t npoisoned;              /* variables poisoned now (graph launches skip checks) */
	struct rf_var *vars;           /* every live variable (freed by rf_engine_destroy) */
	uint64_t mark;                 /* rf__op_fill_entries' dedup generation */
	struct rf_stream *streams; /* registered, newest first */
	struct rf_stream *flushq;  /* given ops this dispatch round, with a flush hook */
	int next_stream_id;
	struct rf_engine_stats st;
	uint64_t owner_tid;
	struct rf__trace *trace;
};

static inline void rf__oplist_push(struct rf__oplist *l, struct rf_op *op)
{
	op->next = NULL;
	if (l->tail)
		l->tail->next = op;
	else
		l->head = op;
	l->tail = op;
}

static inline struct rf_op *rf__oplist_pop(struct rf__oplist *l)
{
	struct rf_op *op = l->head;

	if (op) {
		l->head = op->next;
		if (!l->head)
			l->tail = NULL;
		op->next = NULL;
	}
	return op;
}

/* rf__gettid (rf-internal.h): the calling thread's id; every push checks it. */

/* Pushes come from the reactor thread only: an op running on a worker stream that
 * pushed would race the reactor on every queue. -EPERM with a message naming what. */
int rf__push_thread_refused(const char *what) __attribute__((cold));
static inline int rf__push_thread(struct rf_engine *e, const char *what)
{
	if (__builtin_expect(e && rf__gettid() == e->owner_tid, 1))
		return 0;
	return e ? rf__push_thread_refused(what) : rf__fail(-EINVAL, "%s: e is NULL", what);
}

/* An op enters or leaves flight (counted against the cap). */
static inline void rf__inflight_add(struct rf_engine *e, size_t bytes)
{
	if (++e->inflight > e->st.max_inflight_seen)
		e->st.max_inflight_seen = e->inflight;
	e->inflight_bytes += bytes;
}

static inline void rf__inflight_sub(struct rf_engine *e, size_t bytes)
{
	e->inflight--;
	e->inflight_bytes -= bytes;
}

/* var.c: a variable's record */
void rf__var_free(struct rf_var *v);
void rf__vars_free(struct rf_engine *e);

/* op.c: op records */
/* An op record from the engine's slab (per push and per completion: inline). */
static inline struct rf_op *rf__op_alloc(struct rf_engine *e)
{
	struct rf_op *op = rf__slab_get(&e->op_slab);

	if (!op)
		return NULL;
	memset(op, 0, offsetof(struct rf_op, ent_inline));
	op->eng = e;
	op->kind = &rf__kind_user;
	op->ent = op->ent_inline;
	op->cap_ent = RF__INLINE_ENTRIES;
	return op;
}

static inline void rf__op_free(struct rf_engine *e, struct rf_op *op)
{
	if (op->ent != op->ent_inline && !op->kind->own_entries) {
		if (op->cap_ent == RF__ENT_BLOCK)  /* op.c: rf__op_reserve_entries */
			rf__slab_put(&e->ent_slab, op->ent);
		else
			free(op->ent);
	}
	if (op->deps)
		free(op->deps);
	op->state = RF__OP_FREE;
	rf__slab_put(&e->op_slab, op);
}
void rf__ops_release(struct rf_engine *e);
int rf__op_fill(struct rf_engine *e, struct rf_op *op, const struct rf_op_desc *d);

/* push.c: queue an op of kind k with its argument (w: its waiter, or NULL). On success
 * the op belongs to the engine; on failure nothing of it remains. */
int rf__push_op(struct rf_engine *e, const struct rf_op_desc *d, const struct rf__opkind *k,
		void *arg, struct rf__waiter *w);
/* push.c: a push as the user's (synchronous mode, the capture's refusal) of kind k */
int rf__push_as(struct rf_engine *e, const struct rf_op_desc *d, const struct rf__opkind *k,
		void *arg, const char *who);
int rf__capturing(struct rf_engine *e, const char *what);
/* push.c: s is a stream of e (who and name name the call in the message). 0 or -EINVAL. */
int rf__check_stream(struct rf_engine *e, const struct rf_stream *s, const char *who,
		     const char *name, int quote);

/* immediate.c: the immediate path (1: ran it, 0: not taken, <0: error) */
int rf__push_now(struct rf_engine *e, const struct rf_op_desc *d);
int rf__now_materialize(struct rf_engine *e);

/* dispatch.c: the loop that dispatches ready ops and completes finished ones */
void rf__pump(struct rf_engine *e);

/* A failed or skipped op poisons what it writes (a variable keeps its first poison). */
static inline void rf__poison_var(struct rf_var *v, int status, const char *ename)
{
	if (!v->err) {
		v->eng->npoisoned++;
		v->err = status;
		v->err_op = ename;
	}
}

/* Set (or clear: err 0) a variable's poison, keeping the engine's count. */
static inline void rf__var_set_err(struct rf_var *v, int err, const char *ename)
{
	v->eng->npoisoned += (size_t)(err != 0) - (size_t)(v->err != 0);
	v->err = err;
	v->err_op = err ? ename : NULL;
}

/* The first error since the last wait_all. */
static inline void rf__note_error(struct rf_engine *e, int status, const char *ename)
{
	if (!e->first_error) {
		e->first_error = status;
		e->first_error_op = ename;
	}
}

/* complete.c: an op's outcome, poison */
int rf__inherited_error(const struct rf_op *op, int front_only, const char **name);
void rf__reported(struct rf_engine *e, struct rf_op *op, int status);
void rf__finish(struct rf_engine *e, struct rf_op *op);

/* turn.c: turning the reactor until a condition holds */
int rf__in_callback(struct rf_engine *e);
/* What may not wait (another thread, an op or callback, a capture unless capture_ok):
 * -EDEADLK or -EBUSY with the message naming what (wait.c); 0 otherwise. */
int rf__wait_refused(struct rf_engine *e, const char *what, int capture_ok);
/* The engine's other calls (streams, traces): -EPERM from another thread, -EBUSY from
 * inside an op or callback, with a message naming what. */
int rf__admin_refused(struct rf_engine *e, const char *what);
/* Room under the caps for n more ops of `bytes` (one unit over a cap goes alone, when
 * nothing is in flight); make_room turns the reactor until there is (not from inside
 * an op or callback: there the cap is exceeded rather than deadlock): 0 or the ring's
 * error. */
static inline int rf__has_room(const struct rf_engine *e, uint32_t n, size_t bytes)
{
	if (!e->inflight)
		return 1;  /* alone, a unit over a cap goes */
	if ((uint64_t)e->inflight + n > e->max_inflight)
		return 0;
	return !e->max_bytes || (e->inflight_bytes <= e->max_bytes &&
				 bytes <= e->max_bytes - e->inflight_bytes);
}
int rf__make_room(struct rf_engine *e, uint32_t n, size_t bytes);
/* make_room for a push of d, or a launch with binds: while the reactor turns, the
 * callbacks it runs may not destroy a variable that push names (rf__delete_refused):
 * freed, it would be queued on after the turn. */
int rf__room_for(struct rf_engine *e, const struct rf_op_desc *d,
		 const struct rf_graph_bind *binds, unsigned nbinds, uint32_t n, size_t bytes);
/* A deletion of v (from a callback) refused while a push naming v waits for room or a
 * capture records it: -EBUSY with a message; else 0. push.c. */
int rf__delete_refused(struct rf_engine *e, struct rf_var *v, const char *who);
/* var.c: push v's deletion (v->deleting, del_fn and del_arg set by the caller); refused,
 * the deletion is undone (v stays, as before the call) */
int rf__var_delete_push(struct rf_engine *e, struct rf_var *v, struct rf_stream *stream);
static inline int rf__delete_may_be_refused(const struct rf_engine *e)
{
	return e->room_desc || e->room_binds || e->cap;
}

int rf__wait_waiter(struct rf_engine *e, struct rf__waiter *w, int *err);
int rf__wait_idle(struct rf_engine *e, int interruptible);

/* stream.c: the built-in streams */
void rf__streams_init(struct rf_engine *e);
void rf__streams_destroy(struct rf_engine *e);

/* queue.c: the variables' queues */
int rf__q_grow(struct rf_engine *e, uint32_t n);
/* Make sure n groups can be taken without allocating: queuing an op then cannot
 * fail half-way. */
static inline int rf__q_reserve(struct rf_engine *e, uint32_t n)
{
	return e->nfree_groups >= n ? 0 : rf__q_grow(e, n);
}
void rf__q_add(struct rf_engine *e, struct rf__entry *en);
void rf__q_dispatched(struct rf_engine *e, struct rf_op *op);
void rf__q_remove(struct rf_engine *e, struct rf_op *op);
void rf__q_free_groups(struct rf_engine *e);

/* trace.c */
int rf__trace_open(struct rf_engine *e, const char *path);
void rf__trace_record(struct rf_engine *e, struct rf_op *op);
int rf__trace_close(struct rf_engine *e);
void rf__trace_deps_at_push(struct rf_engine *e, struct rf_op *op);
void rf__trace_var_free(struct rf_var *v);
void rf__trace_track(struct rf_engine *e, struct rf_stream *s);

#endif
