/* core/engine.c — the dependency engine of seeds/dependency-engine.txt on the reactor.
 *
 * Each variable keeps a FIFO queue of the unfinished ops that use it (queue.c). An op
 * is granted on a variable when nothing before it there conflicts any more, or when
 * what conflicts is already enqueued on an in-order stream the op can follow (stream
 * chaining); at its last grant it is ready and goes to its stream.
 *
 * Failure follows the serial program exactly: a variable is poisoned iff the last op
 * that wrote it failed or was skipped, and an op is skipped iff a variable it reads
 * is poisoned at its turn in that variable's queue. An op's completion is processed
 * only when it is first in every queue it is in, so the poison it sees is the serial
 * one, whatever order streams report in. An op whose inputs are already known to be
 * poisoned when it is dispatched is not run; one that was chained before that was
 * known may run, and its result is then discarded (a poisoned variable's contents
 * are unspecified).
 *
 * Everything runs on the reactor thread; nothing recurses: ops that become ready or
 * finished are appended to two FIFO lists which one loop (rf__pump) empties. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "engine-impl.h"

static uint64_t rf__gettid(void)
{
	return (uint64_t)syscall(SYS_gettid);
}

static void rf__pump(struct rf_engine *e);
static int rf__now_materialize(struct rf_engine *e);

/* ---- inline and async streams ------------------------------------------------------ */

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

static void rf__inline_destroy(struct rf_stream *s)
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
	/* .destroy = */ rf__inline_destroy,
};

static const struct rf_stream_ops rf__inline_ops = {
	/* .enqueue = */ rf__inline_enqueue,
	/* .chain   = */ NULL, /* optional */
	/* .destroy = */ rf__inline_destroy,
};

/* ---- creation ------------------------------------------------------------------ */

int rf_engine_create(struct rf_engine **out, struct rf_ring *ring, const struct rf_engine_opts *opts)
{
	struct rf_engine *e;
	const char *env;
	const char *trace_path = NULL;

	if (!out || !ring)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->ring = ring;
	e->max_inflight = opts && opts->max_inflight ? opts->max_inflight : 4096;
	e->max_bytes = opts ? opts->max_bytes : 0;
	e->sync = opts ? opts->sync : -1;
	if (e->sync < 0) {
		env = getenv("RF_ENGINE_SYNC");
		e->sync = env && *env && strcmp(env, "0") != 0;
	}
	e->owner_tid = rf__gettid();
	e->inline_stream.ops = &rf__inline_ops;
	e->inline_stream.name = "inline";
	e->inline_stream.flags = 0;
	e->inline_stream.eng = e;
	e->inline_stream.id = 0;
	e->async_stream.ops = &rf__async_ops;
	e->async_stream.name = "async (ring)";
	e->async_stream.flags = 0;
	e->async_stream.eng = e;
	e->async_stream.id = 1;
	e->next_stream_id = 2;
	trace_path = opts && opts->trace_path ? opts->trace_path : getenv("RF_TRACE");
	if (trace_path && *trace_path) {
		int ret = rf__trace_open(e, trace_path);
		if (ret < 0) {
			free(e);
			return ret;
		}
	}
	*out = e;
	return 0;
}

struct rf_ring *rf_engine_ring(struct rf_engine *e)
{
	return e->ring;
}

int rf_engine_is_sync(const struct rf_engine *e)
{
	return e->sync;
}

void rf_engine_get_stats(const struct rf_engine *e, struct rf_engine_stats *st)
{
	*st = e->st;
	st->inflight = e->inflight;
	st->inflight_bytes = e->inflight_bytes;
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
	if (!s || !s->ops || !s->ops->enqueue || !s->ops->destroy)
		return -EINVAL;
	s->eng = e;
	s->id = e->next_stream_id++;
	s->seq = 0;
	s->done_seq = 0;
	s->next_registered = e->streams;
	e->streams = s;
	rf__trace_track(e, s);
	return 0;
}

void rf_engine_remove_stream(struct rf_engine *e, struct rf_stream *s)
{
	struct rf_stream **pp;

	for (pp = &e->streams; *pp; pp = &(*pp)->next_registered) {
		if (*pp == s) {
			*pp = s->next_registered;
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
	if (e) {
		rf_engine_wait_idle(e); /* leaves errors for the user's next wait */
		rf_engine_remove_stream(e, s);
	}
	s->ops->destroy(s);
}

void rf_engine_destroy(struct rf_engine *e)
{
	struct rf_op *op;

	if (!e)
		return;
	rf_engine_wait_idle(e);
	while (e->streams) {
		struct rf_stream *s = e->streams;
		e->streams = s->next_registered;
		s->ops->destroy(s);
	}
	if (e->trace)
		rf__trace_close(e);
	while ((op = e->free_ops)) {
		e->free_ops = op->next;
		free(op);
	}
	rf__q_free_groups(e);
	free(e);
}

/* ---- variables ----------------------------------------------------------------- */

struct rf_var *rf_var_new(struct rf_engine *e, const char *name)
{
	struct rf_var *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->eng = e;
	if (name && !(v->name = strdup(name))) {
		free(v);
		return NULL;
	}
	return v;
}

const char *rf_var_name(const struct rf_var *v)
{
	return v->name ? v->name : "(unnamed)";
}

int rf_var_error(const struct rf_var *v, const char **op_name)
{
	if (op_name)
		*op_name = v->err_op;
	return v->err;
}

static void rf__var_free(struct rf_var *v)
{
	rf__trace_var_free(v);
	free(v->name);
	free(v);
}

/* ---- ops ------------------------------------------------------------------------- */

static struct rf_op *rf__op_alloc(struct rf_engine *e)
{
	struct rf_op *op = e->free_ops;

	if (op) {
		e->free_ops = op->next;
	} else {
		op = malloc(sizeof(*op));
		if (!op)
			return NULL;
	}
	memset(op, 0, offsetof(struct rf_op, ent_inline));
	op->next = NULL;
	op->ndeps = 0;
	op->deps = NULL;
	op->eng = e;
	op->ent = op->ent_inline;
	op->cap_ent = RF__INLINE_ENTRIES;
	return op;
}

static void rf__op_free(struct rf_engine *e, struct rf_op *op)
{
	if (op->ent != op->ent_inline)
		free(op->ent);
	if (op->deps)
		free(op->deps);
	op->state = RF__OP_FREE;
	op->next = e->free_ops;
	e->free_ops = op;
}

/* Add var v to op with mode write (1) or read (0), merging duplicates. */
static int rf__op_add_var(struct rf_op *op, struct rf_var *v, int write)
{
	uint32_t i;

	for (i = 0; i < op->nent; i++) {
		if (op->ent[i].var == v) {
			op->ent[i].write |= (uint8_t)write;
			return 0;
		}
	}
	if (op->nent == op->cap_ent) {
		uint32_t cap = op->cap_ent * 2;
		struct rf__entry *n = malloc(cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		memcpy(n, op->ent, op->nent * sizeof(*n));
		if (op->ent != op->ent_inline)
			free(op->ent);
		op->ent = n;
		op->cap_ent = cap;
	}
	op->ent[op->nent].op = op;
	op->ent[op->nent].var = v;
	op->ent[op->nent].write = (uint8_t)write;
	op->nent++;
	return 0;
}

/* Fill op from d: its function, stream and names, its entries (writes, then reads,
 * deduplicated), queued on their variables. On failure nothing is queued. */
static int rf__op_fill(struct rf_engine *e, struct rf_op *op, const struct rf_op_desc *d)
{
	uint32_t i;
	int ret;

	op->fn = d->fn;
	op->afn = d->afn;
	op->ctx = d->ctx;
	op->done = d->done;
	op->stream = d->afn ? &e->async_stream : d->stream ? d->stream : &e->inline_stream;
	op->name = d->name ? d->name : "op";
	op->bytes = d->bytes;
	op->flags = d->flags;
	for (i = 0; i < d->nwrites; i++)
		if ((ret = rf__op_add_var(op, d->writes[i], 1)) < 0)
			return ret;
	for (i = 0; i < d->nreads; i++)
		if ((ret = rf__op_add_var(op, d->reads[i], 0)) < 0)
			return ret;
	if ((ret = rf__q_reserve(e, op->nent)) < 0)
		return ret;
	op->pending = op->nent + 1; /* +1: not ready before every entry is queued */
	for (i = 0; i < op->nent; i++)
		rf__q_add(e, &op->ent[i]);
	return 0;
}

/* The poison op inherits from the variables it reads (a mutated variable is read
 * too, unless the op is RF_OP_OVERWRITE), 0 if none. front_only: look only at the
 * entries already at their queue's front, whose state is final. */
static int rf__inherited_error(const struct rf_op *op, int front_only, const char **name)
{
	uint32_t i;

	if (op->flags & RF_OP_ALWAYS)
		return 0;
	for (i = 0; i < op->nent; i++) {
		const struct rf__entry *en = &op->ent[i];

		if ((op->flags & RF_OP_OVERWRITE) && en->write)
			continue;
		if (front_only && !en->front)
			continue;
		if (en->var->err) {
			*name = en->var->err_op;
			return en->var->err;
		}
	}
	return 0;
}

/* A failed or skipped op poisons what it writes (a variable keeps its first poison). */
static void rf__poison_var(struct rf_var *v, int status, const char *ename)
{
	if (!v->err) {
		v->err = status;
		v->err_op = ename;
	}
}

static void rf__note_error(struct rf_engine *e, int status, const char *ename)
{
	if (!e->first_error) {
		e->first_error = status;
		e->first_error_op = ename;
	}
}

/* Record op's outcome on the variables it writes. */
static void rf__settle_vars(struct rf_engine *e, struct rf_op *op, int status, const char *ename)
{
	uint32_t i;

	if (status >= 0 && !(op->flags & RF_OP_OVERWRITE))
		return;
	for (i = 0; i < op->nent; i++) {
		struct rf_var *v = op->ent[i].var;

		if (!op->ent[i].write)
			continue;
		if (status < 0) {
			rf__poison_var(v, status, ename);
		} else {
			v->err = 0; /* RF_OP_OVERWRITE succeeded */
			v->err_op = NULL;
		}
	}
	if (status < 0)
		rf__note_error(e, status, ename);
}

/* op was reported (or skipped) and is first in every queue it is in: its final
 * status is decided now, on the serial state of its variables. */
static void rf__finish(struct rf_engine *e, struct rf_op *op)
{
	const char *ename = op->name, *iname = NULL;
	struct rf__waiter *w = op->waiter;
	int status = op->status;
	int inh = op->settled ? 0 : rf__inherited_error(op, 0, &iname);

	if (inh) {
		status = inh; /* skipped; if it ran (chained), its result is discarded */
		ename = iname;
		e->st.skipped++;
	} else if (status < 0) {
		e->st.failed++;
	}
	rf__settle_vars(e, op, status, ename);
	op->status = status;
	op->state = RF__OP_DONE;
	if (e->trace)
		rf__trace_record(e, op);
	if (w) {
		w->err = op->wait_var ? op->wait_var->err : status;
		if (w->abandoned)
			free(w);
		else
			w->done = 1;
	}
	rf__q_remove(e, op);
	e->inflight--;
	e->inflight_bytes -= op->bytes;
	if (!op->internal)
		e->st.completed++;
	if (op->done) {
		e->in_callback++;
		op->done(op->ctx, status);
		e->in_callback--;
	}
	if (op->delete_var)
		rf__var_free(op->delete_var);
	rf__op_free(e, op);
}

/* The op left its stream (or never went there): complete it once it is first in
 * every queue; until then it waits there. */
static void rf__reported(struct rf_engine *e, struct rf_op *op, int status)
{
	op->status = status;
	op->state = RF__OP_REPORTED;
	if (op->nfront == op->nent)
		rf__oplist_push(&e->finished, op);
}

static void rf__dispatch(struct rf_engine *e, struct rf_op *op)
{
	struct rf_stream *s = op->stream;
	const char *name, *opname = op->name;
	uint64_t uid = op->uid;
	int ret;

	if (rf__inherited_error(op, 1, &name)) {
		/* Skipped: an input is poisoned for good. Not enqueued; it completes
		 * (poisoning its outputs) when it is first in all its queues. */
		rf__reported(e, op, 0);
		return;
	}
	/* Every input at the front and clean: nothing can poison it any more. */
	op->settled = op->nfront == op->nent;
	op->state = RF__OP_DISPATCHED;
	op->seq = ++s->seq;
	/* Stream chaining: consumers on the same in-order stream (or on streams that
	 * can wait for this one) may go now. */
	rf__q_dispatched(e, op);
	ret = s->ops->enqueue(s, op);
	if (ret < 0) {
		if (op->uid != uid || op->state != RF__OP_DISPATCHED) {
			fprintf(stderr, "ringflow: op '%s' on stream %s reported its completion and "
				"then returned %d; the return value is ignored (an async op returns "
				"0 once it has called rf_engine_op_done)\n", opname,
				s->name, ret);
			return;
		}
		s->done_seq++;
		rf__reported(e, op, ret);
	}
}

/* Empty the finished and ready lists: finishing first (it frees memory and may make
 * more ops ready). Never re-entered: nested calls return and the outer loop goes on. */
static void rf__pump(struct rf_engine *e)
{
	struct rf_op *op;

	if (e->pumping)
		return;
	e->pumping = 1;
	for (;;) {
		if ((op = rf__oplist_pop(&e->finished)))
			rf__finish(e, op);
		else if ((op = rf__oplist_pop(&e->ready)))
			rf__dispatch(e, op);
		else
			break;
	}
	e->pumping = 0;
}

void rf_engine_op_done(struct rf_op *op, int status)
{
	struct rf_engine *e = op->eng;

	if (op->state != RF__OP_DISPATCHED) {
		fprintf(stderr, "ringflow: rf_engine_op_done on op '%s', which is not running "
			"(reported twice, or never dispatched): a stream broke its contract\n",
			op->state == RF__OP_FREE ? "(finished)" : op->name);
		abort();
	}
	if (op->traced && !op->t1)
		op->t1 = rf_now_ns();
	op->stream->done_seq++;
	rf__reported(e, op, status);
	rf__pump(e);
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

void rf_op_set_times(struct rf_op *op, uint64_t t0_ns, uint64_t t1_ns)
{
	op->t0 = t0_ns;
	op->t1 = t1_ns;
}

/* ---- waiting --------------------------------------------------------------------- */

struct rf__room {
	struct rf_engine *e;
	size_t bytes;
};

static int rf__has_room(void *arg)
{
	struct rf__room *r = arg;
	struct rf_engine *e = r->e;

	if (e->inflight >= e->max_inflight)
		return 0;
	if (e->max_bytes && e->inflight && e->inflight_bytes + r->bytes > e->max_bytes)
		return 0;
	return 1;
}

/* Inside user code the engine called (an op, an async fn, a done callback), or a
 * ring callback: the reactor cannot be turned from here. */
static int rf__in_callback(struct rf_engine *e)
{
	return e->in_callback || e->pumping || rf_ring_in_callback(e->ring);
}

/* Non-zero (and a message) if waiting now would deadlock. */
static int rf__wait_refused(struct rf_engine *e, const char *what)
{
	if (rf__gettid() != e->owner_tid) {
		fprintf(stderr, "ringflow: %s called from a thread other than the engine's "
			"reactor thread (from inside a worker-stream op?): refused, it would "
			"deadlock; push a dependent op instead\n", what);
		return 1;
	}
	if (rf__in_callback(e)) {
		fprintf(stderr, "ringflow: %s called from inside an engine op, done callback or "
			"ring callback: refused (it would deadlock: the op cannot finish while "
			"it waits)\n", what);
		return 1;
	}
	return 0;
}

static int rf__waiter_done(void *arg)
{
	return ((struct rf__waiter *)arg)->done;
}

/* Turn the reactor until w's op finished. Returns 0 (w freed, *err its outcome) or
 * the ring's error (w abandoned: the op's completion frees it). */
static int rf__wait_waiter(struct rf_engine *e, struct rf__waiter *w, int *err)
{
	int ret = 0;

	rf__pump(e);
	if (!w->done)
		ret = rf_ring_run_until(e->ring, rf__waiter_done, w, 0);
	if (!w->done) {
		w->abandoned = 1;
		return ret < 0 ? ret : -EIO;
	}
	if (err)
		*err = w->err;
	free(w);
	return 0;
}

/* ---- push ---------------------------------------------------------------------- */

static int rf__check_desc(struct rf_engine *e, const struct rf_op_desc *d, int special)
{
	uint32_t i;

	if (!d || (!d->fn && !d->afn && !special) || (d->fn && d->afn) ||
	    (d->nreads && !d->reads) || (d->nwrites && !d->writes))
		return -EINVAL;
	for (i = 0; i < d->nreads; i++)
		if (!d->reads[i] || d->reads[i]->eng != e)
			return -EINVAL;
	for (i = 0; i < d->nwrites; i++)
		if (!d->writes[i] || d->writes[i]->eng != e)
			return -EINVAL;
	return 0;
}

/* Bounded asynchrony: turn the reactor until there is room (not possible from inside
 * an op or callback: there the cap is exceeded rather than deadlock). */
static int rf__make_room(struct rf_engine *e, size_t bytes)
{
	struct rf__room room = { e, bytes };
	int ret;

	if (rf__has_room(&room) || rf__in_callback(e))
		return 0;
	e->st.cap_waits++;
	rf__pump(e);
	if (rf__has_room(&room))
		return 0;
	ret = rf_ring_run_until(e->ring, rf__has_room, &room, 0);
	return ret < 0 && ret != -EDEADLK ? ret : 0;
}

/* Build op from d and queue it. On success the op belongs to the engine (its done
 * callback will run); on failure nothing of it remains. */
static int rf__push(struct rf_engine *e, const struct rf_op_desc *d, struct rf_var *delete_var,
		    int internal, struct rf__waiter *w, struct rf_var *wait_var)
{
	struct rf_op *op;
	int ret;

	if ((ret = rf__check_desc(e, d, internal || delete_var)) < 0)
		return ret;
	if (e->now_desc && !e->now_op && (ret = rf__now_materialize(e)) < 0)
		return ret; /* a push from inside the op on the immediate path */
	if (!internal && (ret = rf__make_room(e, d->bytes)) < 0)
		return ret;
	op = rf__op_alloc(e);
	if (!op)
		return -ENOMEM;
	op->internal = (uint8_t)internal;
	op->delete_var = delete_var;
	op->wait_var = wait_var;
	op->state = RF__OP_PENDING;
	if ((ret = rf__op_fill(e, op, d)) < 0)
		goto fail;
	op->uid = ++e->st.pushed;
	if (internal)
		e->st.pushed--;
	if (e->trace) {
		op->traced = 1;
		rf__trace_deps_at_push(e, op);
	}
	op->waiter = w;
	e->inflight++;
	e->inflight_bytes += op->bytes;
	if (e->inflight > e->st.max_inflight_seen)
		e->st.max_inflight_seen = e->inflight;
	if (--op->pending == 0) {
		op->state = RF__OP_READY;
		rf__oplist_push(&e->ready, op);
	}
	rf__pump(e);
	return 0;
fail:
	rf__op_free(e, op);
	return ret;
}

/* ---- the immediate path -----------------------------------------------------------
 * An inline op pushed while the engine is not dispatching, with no flags, no trace,
 * and every variable's queue empty, is granted at once and would be dispatched and
 * run at once: run it right here, without building its queue entries. Nothing can
 * look at the queues while it runs except a push from inside it (an inline op may
 * push); that push first gives it its op record and entries (rf__now_materialize),
 * exactly as if it had gone the long way, so the nested op orders behind it. */

static int rf__now_eligible(struct rf_engine *e, const struct rf_op_desc *d)
{
	uint32_t i;

	if (!d || !d->fn || d->afn || d->flags || e->pumping || e->trace ||
	    (d->stream && d->stream != &e->inline_stream) ||
	    (d->nreads && !d->reads) || (d->nwrites && !d->writes))
		return 0;
	for (i = 0; i < d->nwrites; i++)
		if (!d->writes[i] || d->writes[i]->eng != e || d->writes[i]->nqueued)
			return 0;
	for (i = 0; i < d->nreads; i++)
		if (!d->reads[i] || d->reads[i]->eng != e || d->reads[i]->nqueued)
			return 0;
	return 1;
}

/* A push from inside the op running on the immediate path: queue that op first. */
static int rf__now_materialize(struct rf_engine *e)
{
	const struct rf_op_desc *d = e->now_desc;
	struct rf_op *op = rf__op_alloc(e);
	int ret;

	if (!op)
		return -ENOMEM;
	op->uid = e->now_uid;
	if ((ret = rf__op_fill(e, op, d)) < 0) /* empty queues: granted, at the front */
		goto fail;
	op->pending = 0;
	op->settled = 1;
	op->state = RF__OP_DISPATCHED;
	op->seq = ++e->inline_stream.seq;
	e->now_op = op;
	return 0;
fail:
	rf__op_free(e, op);
	return ret;
}

static void rf__run_now(struct rf_engine *e, const struct rf_op_desc *d)
{
	const char *ename = d->name ? d->name : "op";
	struct rf_op *op;
	uint32_t i;
	int st = 0, inh = 0;

	/* Queues empty: the variables' poison is final for this op. */
	for (i = 0; i < d->nwrites && !inh; i++)
		if ((inh = d->writes[i]->err))
			ename = d->writes[i]->err_op;
	for (i = 0; i < d->nreads && !inh; i++)
		if ((inh = d->reads[i]->err))
			ename = d->reads[i]->err_op;
	e->now_uid = ++e->st.pushed;
	if (++e->inflight > e->st.max_inflight_seen)
		e->st.max_inflight_seen = e->inflight;
	e->inflight_bytes += d->bytes;
	e->pumping = 1;
	if (!inh) {
		e->now_desc = d;
		e->in_callback++;
		st = d->fn(d->ctx);
		e->in_callback--;
		e->now_desc = NULL;
		if (st > 0)
			st = 0;
	}
	if ((op = e->now_op)) {
		/* a push from inside it queued it: finish it the long way */
		e->now_op = NULL;
		e->inline_stream.done_seq++;
		rf__reported(e, op, st);
		e->pumping = 0;
		rf__pump(e);
		return;
	}
	if (inh) {
		st = inh;
		e->st.skipped++;
	} else if (st < 0) {
		e->st.failed++;
	}
	if (st < 0) {
		for (i = 0; i < d->nwrites; i++)
			rf__poison_var(d->writes[i], st, ename);
		rf__note_error(e, st, ename);
	}
	e->inflight--;
	e->inflight_bytes -= d->bytes;
	e->st.completed++;
	if (d->done) {
		e->in_callback++;
		d->done(d->ctx, st);
		e->in_callback--;
	}
	e->pumping = 0;
	if (e->ready.head || e->finished.head)
		rf__pump(e); /* ops its done callback pushed */
}

/* A user push: in synchronous debug mode the op runs to completion before push
 * returns (when the reactor can be turned here; from inside an op or callback it
 * runs right after). Once the op is accepted push returns 0 whatever happens while
 * waiting: the op and its done callback belong to the engine from then on. */
static int rf__push_user(struct rf_engine *e, const struct rf_op_desc *d, struct rf_var *delete_var)
{
	struct rf__waiter *w = NULL;
	int ret;

	if (!delete_var && rf__now_eligible(e, d)) {
		struct rf__room room = { e, d->bytes };
		if (rf__has_room(&room)) {
			rf__run_now(e, d);
			return 0;
		}
		if ((ret = rf__make_room(e, d->bytes)) < 0)
			return ret;
		if (rf__now_eligible(e, d)) { /* still, after turning the reactor */
			rf__run_now(e, d);
			return 0;
		}
	}
	if (e->sync && !rf__in_callback(e) && !(w = calloc(1, sizeof(*w))))
		return -ENOMEM;
	ret = rf__push(e, d, delete_var, 0, w, NULL);
	if (ret < 0) {
		free(w);
		return ret;
	}
	if (w)
		(void)rf__wait_waiter(e, w, NULL);
	return 0;
}

int rf_engine_push(struct rf_engine *e, const struct rf_op_desc *d)
{
	return rf__push_user(e, d, NULL);
}

int rf_engine_push_simple(struct rf_engine *e, rf_op_fn fn, void *ctx,
			  struct rf_var *const *reads, unsigned nreads,
			  struct rf_var *const *writes, unsigned nwrites,
			  struct rf_stream *stream, const char *name)
{
	struct rf_op_desc d = {
		.fn = fn, .ctx = ctx, .reads = reads, .nreads = nreads,
		.writes = writes, .nwrites = nwrites, .stream = stream, .name = name,
	};
	return rf__push_user(e, &d, NULL);
}

struct rf__del {
	void (*free_fn)(void *);
	void *arg;
};

static int rf__del_run(void *ctx)
{
	struct rf__del *d = ctx;

	if (d->free_fn)
		d->free_fn(d->arg);
	return 0;
}

static void rf__del_done(void *ctx, int status)
{
	(void)status;
	free(ctx);
}

int rf_var_delete(struct rf_engine *e, struct rf_var *v, void (*free_fn)(void *), void *arg,
		  struct rf_stream *stream)
{
	struct rf__del *ctx;
	struct rf_op_desc d = { 0 };
	int ret;

	if (!v || v->eng != e)
		return -EINVAL;
	ctx = malloc(sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->free_fn = free_fn;
	ctx->arg = arg;
	d.fn = rf__del_run;
	d.ctx = ctx;
	d.done = rf__del_done;
	d.writes = &v;
	d.nwrites = 1;
	d.stream = stream;
	d.name = "delete";
	d.flags = RF_OP_ALWAYS;
	ret = rf__push_user(e, &d, v);
	if (ret < 0)
		free(ctx);
	return ret;
}

static int rf__clear_run(void *ctx)
{
	struct rf_var *v = ctx;

	v->err = 0;
	v->err_op = NULL;
	return 0;
}

int rf_var_clear_error(struct rf_engine *e, struct rf_var *v)
{
	struct rf_op_desc d = { 0 };

	if (!v || v->eng != e)
		return -EINVAL;
	d.fn = rf__clear_run;
	d.ctx = v;
	d.writes = &v;
	d.nwrites = 1;
	d.name = "clear_error";
	d.flags = RF_OP_ALWAYS;
	return rf__push_user(e, &d, NULL);
}

int rf_engine_wait_var(struct rf_engine *e, struct rf_var *v)
{
	struct rf_op_desc d = { 0 };
	struct rf__waiter *w;
	int ret, err = 0;

	if (!v || v->eng != e)
		return -EINVAL;
	if (rf__wait_refused(e, "rf_engine_wait_var"))
		return -EDEADLK;
	if (!v->nqueued)
		return v->err;
	/* A no-op read at the end of v's queue: it completes after every earlier write,
	 * and reports v's poison at that point. It always runs, even if v is poisoned. */
	if (!(w = calloc(1, sizeof(*w))))
		return -ENOMEM;
	d.reads = &v;
	d.nreads = 1;
	d.name = "wait_var";
	d.flags = RF_OP_ALWAYS;
	if ((ret = rf__push(e, &d, NULL, 1, w, v)) < 0) {
		free(w);
		return ret;
	}
	ret = rf__wait_waiter(e, w, &err);
	return ret < 0 ? ret : err;
}

static int rf__all_done(void *arg)
{
	struct rf_engine *e = arg;

	return e->inflight == 0;
}

/* Turn the reactor until nothing is in flight (the caller checked it may). */
static int rf__wait_idle(struct rf_engine *e)
{
	int ret;

	rf__pump(e);
	if (e->inflight) {
		ret = rf_ring_run_until(e->ring, rf__all_done, e, 0);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int rf_engine_wait_idle(struct rf_engine *e)
{
	if (rf__wait_refused(e, "rf_engine_wait_idle"))
		return -EDEADLK;
	return rf__wait_idle(e);
}

int rf_engine_wait_all(struct rf_engine *e)
{
	int ret;

	if (rf__wait_refused(e, "rf_engine_wait_all"))
		return -EDEADLK;
	if ((ret = rf__wait_idle(e)) < 0)
		return ret;
	ret = e->first_error;
	e->first_error = 0;
	e->first_error_op = NULL;
	return ret;
}

int rf_engine_trace_start(struct rf_engine *e, const char *path)
{
	if (e->trace)
		return -EBUSY;
	return rf__trace_open(e, path);
}

int rf_engine_trace_stop(struct rf_engine *e)
{
	if (!e->trace)
		return -ENOENT;
	return rf__trace_close(e);
}
