/* core/engine.c — the dependency engine of seeds/dependency-engine.txt on the reactor.
 *
 * Each variable keeps a FIFO queue of entries (op, read|write) for ops not yet
 * finished. An entry is *granted* when nothing before it conflicts any more:
 *   - a read conflicts with earlier writes, a write with every earlier entry;
 *   - an earlier entry stops conflicting when its op finished (it then leaves the
 *     queue), or — stream chaining — when its op is already enqueued on the same
 *     in-order stream as the candidate (the stream itself keeps the order).
 * An op holds one entry per distinct variable (reads and writes deduplicated, a var
 * both read and written is a write) and a pending counter of entries not yet
 * granted; at zero it is ready and goes to its stream.
 *
 * Everything runs on the reactor thread; dispatch never recurses: ops that become
 * ready are appended to a FIFO ready list which one drain loop empties. */
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

static void rf__drain_ready(struct rf_engine *e);

/* ---- inline stream ----------------------------------------------------------- */

static int rf__inline_enqueue(struct rf_stream *s, struct rf_op *op)
{
	struct rf_engine *e = s->eng;
	int st;

	e->in_inline_op++;
	st = rf_op_execute(op);
	e->in_inline_op--;
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
	int st;

	(void)s;
	if (op->traced)
		op->t0 = rf_now_ns();
	st = op->afn(op->ctx, op);
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
		rf_engine_wait_all(e);
		rf_engine_remove_stream(e, s);
	}
	s->ops->destroy(s);
}

void rf_engine_destroy(struct rf_engine *e)
{
	struct rf_op *op;

	if (!e)
		return;
	rf_engine_wait_all(e);
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
	free(op->deps);
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
	op->ent[op->nent].granted = 0;
	op->nent++;
	return 0;
}

static void rf__make_ready(struct rf_engine *e, struct rf_op *op)
{
	op->state = RF__OP_READY;
	op->next = NULL;
	if (e->ready_tail)
		e->ready_tail->next = op;
	else
		e->ready_head = op;
	e->ready_tail = op;
}

static void rf__grant(struct rf_engine *e, struct rf__entry *en)
{
	en->granted = 1;
	en->var->n_ungranted--;
	if (--en->op->pending == 0)
		rf__make_ready(e, en->op);
}

/* Summary of a set of earlier entries: none, all enqueued on one in-order stream, or
 * blocking. */
#define RF__SUM_NONE ((struct rf_stream *)0)
#define RF__SUM_BLOCK ((struct rf_stream *)1)

static inline struct rf_stream *rf__sum_merge(struct rf_stream *sum, struct rf_stream *st)
{
	if (sum == RF__SUM_NONE)
		return st;
	return sum == st ? sum : RF__SUM_BLOCK;
}

/* Can op (on its stream) go after earlier conflicting work that all sits enqueued on
 * in-order stream `on`, newest sequence number seq? Same stream: yes, the stream keeps
 * the order. Another stream: only if the consumer's stream can make its future work
 * wait for that point of `on` (CUDA events), via the optional chain hook. */
static int rf__can_chain(struct rf_engine *e, struct rf_op *op, struct rf_stream *on, uint64_t seq)
{
	struct rf_stream *s = op->stream;

	if (!(s->flags & RF_STREAM_IN_ORDER))
		return 0;
	if (on != s && (!s->ops->chain || s->ops->chain(s, on, seq) != 0))
		return 0;
	op->chained = 1;
	e->st.chained++;
	return 1;
}

/* Grant every entry of v that can be granted now. */
static void rf__var_scan(struct rf_engine *e, struct rf_var *v)
{
	struct rf_stream *all = RF__SUM_NONE, *writes = RF__SUM_NONE;
	uint64_t all_seq = 0, w_seq = 0;
	struct rf__entry *en;

	for (en = v->head; en && v->n_ungranted; en = en->next) {
		struct rf_op *op = en->op;
		struct rf_stream *st;

		if (!en->granted) {
			struct rf_stream *need = en->write ? all : writes;
			if (need == RF__SUM_NONE ||
			    (need != RF__SUM_BLOCK && rf__can_chain(e, op, need, en->write ? all_seq : w_seq)))
				rf__grant(e, en);
		}
		st = (op->state == RF__OP_DISPATCHED && (op->stream->flags & RF_STREAM_IN_ORDER))
			? op->stream : RF__SUM_BLOCK;
		all = rf__sum_merge(all, st);
		if (st != RF__SUM_BLOCK && op->seq > all_seq)
			all_seq = op->seq;
		if (en->write) {
			writes = rf__sum_merge(writes, st);
			if (st != RF__SUM_BLOCK && op->seq > w_seq)
				w_seq = op->seq;
		}
		if (all == RF__SUM_BLOCK && writes == RF__SUM_BLOCK)
			break;
	}
}

/* ---- incremental summaries -------------------------------------------------------- */

static inline void rf__sum_dio_add(struct rf__sum *m, struct rf_stream *s, uint64_t seq)
{
	m->nblock--;
	if (m->ndio++ == 0) {
		m->s = s;
		m->ndio_s = 0;
		m->maxseq = 0;
	}
	if (m->s == s) {
		m->ndio_s++;
		if (seq > m->maxseq)
			m->maxseq = seq;
	}
}

static inline void rf__sum_dio_del(struct rf__sum *m, struct rf_stream *s)
{
	m->ndio--;
	if (m->s == s)
		m->ndio_s--;
}

/* Decide the grant of a new entry at the tail of v's queue from the summaries.
 * Returns 1 grant, 0 wait, -1 the summary cannot tell (scan). */
static int rf__tail_grantable(struct rf_engine *e, struct rf_var *v, struct rf_op *op, int write)
{
	const struct rf__sum *m = write ? &v->sum_all : &v->sum_w;

	if (m->nblock)
		return 0;
	if (!m->ndio)
		return 1;
	if (m->ndio_s != m->ndio)
		return m->ndio_s ? 0 : -1; /* several streams, or lost track of which */
	return rf__can_chain(e, op, m->s, m->maxseq);
}

static void rf__poison(struct rf_engine *e, struct rf_op *op, int status, const char *name)
{
	uint32_t i;

	for (i = 0; i < op->nent; i++) {
		if (op->ent[i].write && !op->ent[i].var->err) {
			op->ent[i].var->err = status;
			op->ent[i].var->err_op = name;
		}
	}
	if (!e->first_error) {
		e->first_error = status;
		e->first_error_op = name;
	}
}

/* The poison an op inherits from its inputs, 0 if none. An RF_OP_OVERWRITE op
 * inherits only from the variables it reads. */
static int rf__inherited_error(struct rf_op *op, const char **name)
{
	uint32_t i;

	for (i = 0; i < op->nent; i++) {
		if ((op->flags & RF_OP_OVERWRITE) && op->ent[i].write)
			continue;
		if (op->ent[i].var->err) {
			*name = op->ent[i].var->err_op;
			return op->ent[i].var->err;
		}
	}
	return 0;
}

/* Finish op with status. ename: NULL when status is the op's own result, else the
 * name of the failing producer whose poison a skipped op carries on. */
static void rf__complete(struct rf_engine *e, struct rf_op *op, int status, const char *ename)
{
	struct rf_var *scan[RF__INLINE_ENTRIES * 4];
	uint32_t i, nscan = 0;

	int own = ename == NULL;

	if (own)
		ename = op->name;
	op->state = RF__OP_DONE;
	if (!(op->flags & RF_OP_ALWAYS) && op->chained) {
		/* A chained op may have run after a producer on its stream failed. */
		const char *n2 = NULL;
		int inh = rf__inherited_error(op, &n2);
		if (inh && status >= 0) {
			status = inh;
			ename = n2;
			own = 0;
			e->st.skipped++;
		}
	}
	if (status < 0) {
		if (own)
			e->st.failed++;
		rf__poison(e, op, status, ename);
	} else if (op->flags & RF_OP_OVERWRITE) {
		for (i = 0; i < op->nent; i++) {
			if (op->ent[i].write) {
				op->ent[i].var->err = 0;
				op->ent[i].var->err_op = NULL;
			}
		}
	}

	op->status = status;
	if (e->trace)
		rf__trace_record(e, op);
	for (i = 0; i < op->nent; i++) {
		struct rf__entry *en = &op->ent[i];
		struct rf_var *v = en->var;

		if (en->prev)
			en->prev->next = en->next;
		else
			v->head = en->next;
		if (en->next)
			en->next->prev = en->prev;
		else
			v->tail = en->prev;
		v->nqueued--;
		if (en->dio) {
			rf__sum_dio_del(&v->sum_all, op->stream);
			if (en->write)
				rf__sum_dio_del(&v->sum_w, op->stream);
		} else {
			v->sum_all.nblock--;
			if (en->write)
				v->sum_w.nblock--;
		}
		if (!en->granted)
			v->n_ungranted--; /* cannot happen: an op runs only when all granted */
		if (v->n_ungranted) {
			if (nscan < sizeof(scan) / sizeof(scan[0]))
				scan[nscan++] = v;
			else
				rf__var_scan(e, v);
		}
	}
	for (i = 0; i < nscan; i++)
		rf__var_scan(e, scan[i]);
	e->inflight--;
	e->inflight_bytes -= op->bytes;
	if (!op->internal)
		e->st.completed++;
	if (op->done_flag)
		*op->done_flag = 1;
	if (op->done)
		op->done(op->ctx, status);
	if (op->delete_var)
		rf__var_free(op->delete_var);
	rf__op_free(e, op);
}

static void rf__dispatch(struct rf_engine *e, struct rf_op *op)
{
	struct rf_stream *s = op->stream;
	const char *name;
	uint32_t i;
	int inh, ret;

	if (!(op->flags & RF_OP_ALWAYS) && (inh = rf__inherited_error(op, &name))) {
		/* Skip: inputs are poisoned. The poison carries the failing op's name. */
		e->st.skipped++;
		op->chained = 0;
		rf__complete(e, op, inh, name);
		return;
	}
	op->state = RF__OP_DISPATCHED;
	op->seq = ++s->seq;
	/* Stream chaining: consumers on the same in-order stream (or on streams that
	 * can wait for this one) may go now. */
	if (s->flags & RF_STREAM_IN_ORDER) {
		for (i = 0; i < op->nent; i++) {
			struct rf__entry *en = &op->ent[i];
			struct rf_var *v = en->var;

			en->dio = 1;
			rf__sum_dio_add(&v->sum_all, s, op->seq);
			if (en->write)
				rf__sum_dio_add(&v->sum_w, s, op->seq);
			if (v->n_ungranted)
				rf__var_scan(e, v);
		}
	}
	ret = s->ops->enqueue(s, op);
	if (ret < 0)
		rf_engine_op_done(op, ret);
}

static void rf__drain_ready(struct rf_engine *e)
{
	struct rf_op *op;

	if (e->draining)
		return;
	e->draining = 1;
	while ((op = e->ready_head)) {
		e->ready_head = op->next;
		if (!e->ready_head)
			e->ready_tail = NULL;
		op->next = NULL;
		rf__dispatch(e, op);
	}
	e->draining = 0;
}

void rf_engine_op_done(struct rf_op *op, int status)
{
	struct rf_engine *e = op->eng;

	if (op->traced && !op->t1)
		op->t1 = rf_now_ns();
	op->stream->done_seq++;
	rf__complete(e, op, status, NULL);
	rf__drain_ready(e);
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

static int rf__flag_set(void *arg)
{
	return *(int *)arg != 0;
}

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

/* Non-zero (and a message) if waiting now would deadlock. */
static int rf__wait_refused(struct rf_engine *e, const char *what)
{
	if (rf__gettid() != e->owner_tid) {
		fprintf(stderr, "ringflow: %s called from a thread other than the engine's "
			"reactor thread (from inside a worker-stream op?): refused, it would "
			"deadlock; push a dependent op instead\n", what);
		return 1;
	}
	if (e->in_inline_op || rf_ring_in_callback(e->ring)) {
		fprintf(stderr, "ringflow: %s called from inside an engine op or ring callback: "
			"refused (it would deadlock: the op cannot finish while it waits)\n", what);
		return 1;
	}
	return 0;
}

static int rf__run_until_flag(struct rf_engine *e, int *flag)
{
	int ret;

	rf__drain_ready(e);
	if (*flag)
		return 0;
	ret = rf_ring_run_until(e->ring, rf__flag_set, flag, 0);
	return ret < 0 ? ret : 0;
}

/* ---- push ---------------------------------------------------------------------- */

static int rf__push(struct rf_engine *e, const struct rf_op_desc *d, struct rf_var *delete_var,
		    int internal, int *done_flag)
{
	struct rf_op *op;
	uint32_t i;
	int ret, g, sync_flag = 0;

	if (!d || (!d->fn && !d->afn && !internal && !delete_var) || (d->fn && d->afn) ||
	    (d->nreads && !d->reads) || (d->nwrites && !d->writes))
		return -EINVAL;
	for (i = 0; i < d->nreads; i++)
		if (!d->reads[i] || d->reads[i]->eng != e)
			return -EINVAL;
	for (i = 0; i < d->nwrites; i++)
		if (!d->writes[i] || d->writes[i]->eng != e)
			return -EINVAL;

	/* Bounded asynchrony: turn the reactor until there is room (not possible from
	 * inside an op or callback: there the cap is exceeded rather than deadlock). */
	if (!internal) {
		struct rf__room room = { e, d->bytes };
		if (!rf__has_room(&room) && !e->in_inline_op && !rf_ring_in_callback(e->ring) &&
		    !e->draining) {
			e->st.cap_waits++;
			rf__drain_ready(e);
			if (!rf__has_room(&room)) {
				ret = rf_ring_run_until(e->ring, rf__has_room, &room, 0);
				if (ret < 0 && ret != -EDEADLK)
					return ret;
			}
		}
	}

	op = rf__op_alloc(e);
	if (!op)
		return -ENOMEM;
	op->fn = d->fn;
	op->afn = d->afn;
	op->ctx = d->ctx;
	op->done = d->done;
	op->stream = d->afn ? &e->async_stream : d->stream ? d->stream : &e->inline_stream;
	op->name = d->name ? d->name : "op";
	op->bytes = d->bytes;
	op->flags = d->flags;
	op->internal = (uint8_t)internal;
	op->delete_var = delete_var;
	op->done_flag = done_flag;
	for (i = 0; i < d->nwrites; i++)
		if ((ret = rf__op_add_var(op, d->writes[i], 1)) < 0)
			goto fail;
	for (i = 0; i < d->nreads; i++)
		if ((ret = rf__op_add_var(op, d->reads[i], 0)) < 0)
			goto fail;
	op->uid = ++e->st.pushed;
	if (internal)
		e->st.pushed--;
	if (e->trace) {
		op->traced = 1;
		rf__trace_deps_at_push(e, op);
	}
	if (e->sync && !op->done_flag)
		op->done_flag = &sync_flag;

	e->inflight++;
	e->inflight_bytes += op->bytes;
	if (e->inflight > e->st.max_inflight_seen)
		e->st.max_inflight_seen = e->inflight;

	op->pending = op->nent + 1;
	for (i = 0; i < op->nent; i++) {
		struct rf__entry *en = &op->ent[i];
		struct rf_var *v = en->var;

		en->next = NULL;
		en->prev = v->tail;
		if (v->tail)
			v->tail->next = en;
		else
			v->head = en;
		v->tail = en;
		en->dio = 0;
		g = rf__tail_grantable(e, v, op, en->write);
		v->nqueued++;
		v->n_ungranted++;
		v->sum_all.nblock++;
		if (en->write)
			v->sum_w.nblock++;
		if (g > 0)
			rf__grant(e, en);
		else if (g < 0)
			rf__var_scan(e, v);
	}
	if (--op->pending == 0)
		rf__make_ready(e, op);
	rf__drain_ready(e);

	if (op->done_flag == &sync_flag) {
		/* Synchronous debug mode: run it to completion inside push. */
		if (e->in_inline_op || rf_ring_in_callback(e->ring))
			return 0; /* cannot turn the reactor here; it runs right after */
		ret = rf__run_until_flag(e, &sync_flag);
		if (ret < 0)
			return ret;
	}
	return 0;
fail:
	rf__op_free(e, op);
	return ret;
}

int rf_engine_push(struct rf_engine *e, const struct rf_op_desc *d)
{
	return rf__push(e, d, NULL, 0, NULL);
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
	return rf__push(e, &d, NULL, 0, NULL);
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
	ret = rf__push(e, &d, v, 0, NULL);
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

	d.fn = rf__clear_run;
	d.ctx = v;
	d.writes = &v;
	d.nwrites = 1;
	d.name = "clear_error";
	d.flags = RF_OP_ALWAYS;
	return rf__push(e, &d, NULL, 0, NULL);
}

int rf_engine_wait_var(struct rf_engine *e, struct rf_var *v)
{
	struct rf_op_desc d = { 0 };
	int flag = 0, ret;

	if (!v || v->eng != e)
		return -EINVAL;
	if (rf__wait_refused(e, "rf_engine_wait_var"))
		return -EDEADLK;
	if (v->nqueued) {
		/* A no-op read at the end of v's queue: it is granted once every earlier
		 * write finished. It always runs, even if v is poisoned. */
		d.reads = &v;
		d.nreads = 1;
		d.name = "wait_var";
		d.flags = RF_OP_ALWAYS;
		ret = rf__push(e, &d, NULL, 1, &flag);
		if (ret < 0)
			return ret;
		ret = rf__run_until_flag(e, &flag);
		if (ret < 0)
			return ret;
	}
	return v->err;
}

static int rf__all_done(void *arg)
{
	struct rf_engine *e = arg;

	return e->inflight == 0;
}

int rf_engine_wait_all(struct rf_engine *e)
{
	int ret;

	if (rf__wait_refused(e, "rf_engine_wait_all"))
		return -EDEADLK;
	rf__drain_ready(e);
	if (e->inflight) {
		ret = rf_ring_run_until(e->ring, rf__all_done, e, 0);
		if (ret < 0)
			return ret;
	}
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
