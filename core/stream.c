/* core/stream.c -- streams as the engine sees them: the built-in inline and async
 * streams, registering and destroying streams, and the calls a stream makes for an
 * op (rf_op_execute on any thread, rf_engine_op_done on the reactor thread). */
#include <errno.h>
#include <stdlib.h>

#include "graph-impl.h"
#include "rf-internal.h"

/* The inline stream: runs the op right away on the reactor thread. */
static int rf__inline_enqueue(struct rf_stream *s, struct rf_op *op)
{
	struct rf_engine *e = s->eng;
	int st;

	e->in_callback++;
	st = rf_op_execute(op);
	e->in_callback--;
	rf_engine_op_done(op, st);
	return 0;
}

static void rf__builtin_destroy(struct rf_stream *s)
{
	(void)s;
}

/* The async stream: the op's afn starts the work; its completion reports. */
static int rf__async_enqueue(struct rf_stream *s, struct rf_op *op)
{
	struct rf_engine *e = s->eng;
	int st;

	if (op->traced)
		op->t0 = rf_now_ns();
	e->in_callback++;
	st = op->afn(op->ctx, op);
	e->in_callback--;
	return st < 0 ? st : 0; /* < 0: the engine finishes the op with it */
}

static const struct rf_stream_ops rf__async_ops = {
	/* .enqueue = */ rf__async_enqueue,
	/* .chain   = */ NULL, /* optional */
	/* .destroy = */ rf__builtin_destroy,
};

static const struct rf_stream_ops rf__inline_ops = {
	/* .enqueue = */ rf__inline_enqueue,
	/* .chain   = */ NULL, /* optional */
	/* .destroy = */ rf__builtin_destroy,
};

static void rf__builtin_init(struct rf_engine *e, struct rf_stream *s,
			     const struct rf_stream_ops *ops, const char *name, int id)
{
	s->ops = ops;
	s->name = name;
	s->flags = 0;
	s->eng = e;
	s->id = id;
}

/* The built-in streams take ids 0 to 2; registered streams follow. */
void rf__streams_init(struct rf_engine *e)
{
	rf__builtin_init(e, &e->inline_stream, &rf__inline_ops, "inline", 0);
	rf__builtin_init(e, &e->async_stream, &rf__async_ops, "async (ring)", 1);
	rf__builtin_init(e, &e->graph_stream, &rf__graph_stream_ops, "graph launches", 2);
	e->next_stream_id = 3;
}

/* Destroy the streams still registered, newest first. */
void rf__streams_destroy(struct rf_engine *e)
{
	while (e->streams) {
		struct rf_stream *s = e->streams;
		e->streams = s->next_registered;
		s->ops->destroy(s);
	}
}

struct rf_stream *rf_engine_inline_stream(struct rf_engine *e)
{
	return &e->inline_stream;
}

struct rf_stream *rf_engine_async_stream(struct rf_engine *e)
{
	return &e->async_stream;
}

const char *rf_stream_name(const struct rf_stream *s)
{
	return s->name;
}

int rf_engine_add_stream(struct rf_engine *e, struct rf_stream *s)
{
	const struct rf_stream *r;
	int ret;

	if ((ret = rf__admin_refused(e, "rf_engine_add_stream")) < 0)
		return ret;
	if (!s || !s->ops || !s->ops->enqueue || !s->ops->destroy)
		return rf__fail(-EINVAL, "rf_engine_add_stream: %s", !s ? "s is NULL" : !s->ops ?
				"s->ops is NULL" : "s->ops lacks enqueue or destroy");
	if (s == &e->inline_stream || s == &e->async_stream || s == &e->graph_stream)
		return rf__fail(-EEXIST, "rf_engine_add_stream: stream '%s' is one of the "
				"engine's own", s->name);
	for (r = e->streams; r; r = r->next_registered)
		if (r == s)
			return rf__fail(-EEXIST, "rf_engine_add_stream: stream '%s' is already "
					"registered", s->name ? s->name : "");
	if (s->eng && s->eng != e) /* its list link belongs to that engine's list */
		return rf__fail(-EBUSY, "rf_engine_add_stream: stream '%s' belongs to another "
				"engine (s->eng is set: zero a new struct rf_stream)",
				s->name ? s->name : "");
	s->eng = e;
	s->id = e->next_stream_id++;
	s->seq = 0;
	s->done_seq = 0;
	s->next_flush = NULL;
	s->flush_queued = 0;
	s->next_registered = e->streams;
	e->streams = s;
	rf__trace_track(e, s);
	return 0;
}

void rf_engine_remove_stream(struct rf_engine *e, struct rf_stream *s)
{
	struct rf_stream **pp;

	if (!e || !s)
		return;
	if (rf__gettid() != e->owner_tid) {  /* its lists are the reactor thread's */
		rf__log(RF_LOG_ERROR, "rf_engine_remove_stream of '%s' from a thread other "
			"than the engine's reactor thread: refused, the stream left registered",
			s->name ? s->name : "(unnamed)");
		return;
	}

	for (pp = &e->streams; *pp; pp = &(*pp)->next_registered) {
		if (*pp == s) {
			*pp = s->next_registered;
			break;
		}
	}
	for (pp = &e->flushq; s->flush_queued && *pp; pp = &(*pp)->next_flush) {
		if (*pp == s) {
			*pp = s->next_flush;
			s->flush_queued = 0;
			break;
		}
	}
}

void rf_stream_destroy(struct rf_stream *s)
{
	struct rf_engine *e;

	if (!s)
		return;
	e = s->eng;
	if (e && rf__wait_refused(e, "rf_stream_destroy", 1) < 0) {
		/* its own ops may be running below us: refused (leaked), said in the log */
		rf__log(RF_LOG_ERROR, "%s", rf_last_error());
		return;
	}
	if (e) {
		/* leaves the ops' errors for the user's next wait; a wait the ring itself
		 * failed leaves ops out, whose streams must outlive them: refused (leaked),
		 * said in the log, rather than freed under them */
		if (rf_engine_wait_idle(e) < 0 && e->inflight) {
			rf__log(RF_LOG_ERROR, "rf_stream_destroy %s: the wait for the engine's %u "
				"ops in flight failed (%s): the stream is left, not freed under them",
				s->name ? s->name : "", e->inflight, rf_last_error());
			return;
		}
		rf_engine_remove_stream(e, s);
	}
	s->ops->destroy(s);
}

int rf_op_execute(struct rf_op *op)
{
	int st;

	if (op->traced)
		op->t0 = rf_now_ns();
	st = op->fn ? op->fn(op->ctx) : 0;
	if (op->traced && !op->t1)
		op->t1 = rf_now_ns();
	if (st > 0)
		st = 0;
	return st;
}

uint64_t rf_op_seq(const struct rf_op *op)
{
	return op->seq;
}

int rf_op_quiet(const struct rf_op *op)
{
	return op->kind->quiet && !op->traced && op->kind->quiet(op);
}

int rf_op_graph(const struct rf_op *op, struct rf_op_graph *out)
{
	return op->kind->graph && !op->traced ? op->kind->graph(op, out) : 0;
}

void rf_op_fn_ctx(const struct rf_op *op, rf_op_fn *fn, void **ctx)
{
	*fn = op->fn;
	*ctx = op->ctx;
}

void rf_op_set_times(struct rf_op *op, uint64_t t0_ns, uint64_t t1_ns)
{
	op->t0 = t0_ns;
	op->t1 = t1_ns;
}

/* A stream (or an async op's work) reports: the op completes once it is first in
 * every queue (complete.c). */
void rf_engine_op_done(struct rf_op *op, int status)
{
	struct rf_engine *e = op->eng;

	if (op->state != RF__OP_DISPATCHED) {
		rf__log(RF_LOG_ERROR, "rf_engine_op_done on op '%s', which is not running "
			"(reported twice, or never dispatched): a stream broke its contract",
			op->state == RF__OP_FREE ? "(finished)" : op->name);
		abort();
	}
	if (rf__gettid() != e->owner_tid) {
		/* the engine's state is the reactor thread's alone: changed from here it
		 * would race, and the op's done callback would run on this thread */
		rf__log(RF_LOG_ERROR, "rf_engine_op_done on op '%s' from a thread other than "
			"the engine's reactor thread: a stream (or an async op) broke its "
			"contract; report from the reactor (a notifier or a poller brings the "
			"completion there)", op->name);
		abort();
	}
	if (op->traced && !op->t1)
		op->t1 = rf_now_ns();
	op->stream->done_seq++;
	rf__reported(e, op, status);
	rf__pump(e);
}
