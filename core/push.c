/* core/push.c -- pushing an op: checking the descriptor, bounded asynchrony, queuing
 * the op on its variables; synchronous mode; deleting and clearing a variable (both
 * pushed mutations). Short ops on idle variables take the immediate path
 * (immediate.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph-impl.h"
#include "rf-internal.h"

int rf__push_thread_refused(const char *what)
{
	return rf__fail(-EPERM, "%s from a thread other than the engine's reactor thread (from "
			"inside a worker-stream op?): refused; call it on the reactor thread, e.g. "
			"from the op's done callback", what);
}

/* A stream an fn op may name: the inline stream, or one registered with e (never the
 * async stream, which runs rf_async_fn ops: those get it anyway). 0, or -EINVAL with
 * the message "WHO 'NAME': why" (WHO NAME without quotes when quote is 0); s itself is
 * never read (it may be freed memory). The text is made only on failure: this runs at
 * every push onto a stream. */
int rf__check_stream(struct rf_engine *e, const struct rf_stream *s, const char *who,
		     const char *name, int quote)
{
	const struct rf_stream *r;
	const char *q = quote ? "'" : "";

	if (s == &e->inline_stream)
		return 0;
	if (s == &e->async_stream)
		return rf__fail(-EINVAL, "%s %s%s%s: the async stream runs rf_async_fn ops (afn), "
				"not fn", who, q, name, q);
	for (r = e->streams; r; r = r->next_registered)
		if (r == s)
			return 0;
	return rf__fail(-EINVAL, "%s %s%s%s: its stream is not registered with this engine "
			"(another engine's, destroyed, or never registered)", who, q, name, q);
}

/* reads[i] (writes[i] if w) of d is no variable it may name: NULL, another engine's, or
 * one whose rf_var_destroy is queued (its deletion frees it when it runs: a later op
 * would use it after that). The refusal, off the push's path. */
static int __attribute__((cold, noinline))
rf__bad_var(struct rf_engine *e, const char *name, int w, uint32_t i, const struct rf_var *v)
{
	const char *list = w ? "writes" : "reads";

	if (!v || v->eng != e)
		return rf__fail(-EINVAL, "rf_engine_push: op '%s': %s[%u] is %s", name, list, i,
				v ? "a variable of another engine" : "NULL");
	return rf__fail(-EINVAL, "rf_engine_push: op '%s': %s[%u] (%s) is being destroyed "
			"(rf_var_destroy was called): expected a live variable", name, list, i,
			rf_var_name(v));
}

/* k: an engine-made op (wait, deletion) may have no function (k->no_fn). */
static int rf__check_desc(struct rf_engine *e, const struct rf_op_desc *d,
			  const struct rf__opkind *k)
{
	const char *name = d && d->name ? d->name : "op";
	int no_fn = k->no_fn;
	uint32_t i;

	if (!d)
		return rf__fail(-EINVAL, "rf_engine_push: no descriptor (d is NULL)");
	if (!d->fn && !d->afn && !no_fn)
		return rf__fail(-EINVAL, "rf_engine_push: op '%s' has neither fn nor afn", name);
	if (d->fn && d->afn)
		return rf__fail(-EINVAL, "rf_engine_push: op '%s' has both fn and afn: expected "
				"one", name);
	if (d->flags & ~(unsigned)(RF_OP_ALWAYS | RF_OP_OVERWRITE))
		return rf__fail(-EINVAL, "rf_engine_push: op '%s': flags 0x%x: bits 0x%x are no "
				"RF_OP_* flag", name, d->flags,
				d->flags & ~(unsigned)(RF_OP_ALWAYS | RF_OP_OVERWRITE));
	if ((d->nreads && !d->reads) || (d->nwrites && !d->writes))
		return rf__fail(-EINVAL, "rf_engine_push: op '%s': %s is NULL with %s %u", name,
				d->nreads && !d->reads ? "reads" : "writes",
				d->nreads && !d->reads ? "nreads" : "nwrites",
				d->nreads && !d->reads ? d->nreads : d->nwrites);
	/* a deletion names its own variable, which is deleting by then */
	int live = k != &rf__kind_delete;
	for (i = 0; i < d->nreads; i++) {
		const struct rf_var *v = d->reads[i];
		if (!v || v->eng != e || (v->deleting & live))
			return rf__bad_var(e, name, 0, i, v);
	}
	for (i = 0; i < d->nwrites; i++) {
		const struct rf_var *v = d->writes[i];
		if (!v || v->eng != e || (v->deleting & live))
			return rf__bad_var(e, name, 1, i, v);
	}
	if (d->stream && !d->afn)
		return rf__check_stream(e, d->stream, "rf_engine_push: op", name, 1);
	return 0;
}

/* Before an op record is taken: a valid descriptor, the op on the immediate path
 * queued if this push comes from inside it, room under the cap for a user's op. */
static int rf__push_admit(struct rf_engine *e, const struct rf_op_desc *d,
			  const struct rf__opkind *k)
{
	int ret;

	if (!k->prechecked && (ret = rf__check_desc(e, d, k)) < 0)
		return ret;
	if (e->now_desc && !e->now_op && (ret = rf__now_materialize(e)) < 0)
		return ret;
	if (k->counted && !rf__has_room(e, 1, d->bytes) &&
	    (ret = rf__room_for(e, d, NULL, 0, 1, d->bytes)) < 0)
		return ret;
	return 0;
}

/* Its push number (a user's op counts in the stats) and, when tracing, its edges. */
static void rf__op_number(struct rf_engine *e, struct rf_op *op)
{
	op->uid = ++e->next_uid;
	if (op->kind->counted)
		e->st.pushed++;
	if (e->trace) {
		op->traced = 1;
		rf__trace_deps_at_push(e, op);
	}
}

int rf__push_op(struct rf_engine *e, const struct rf_op_desc *d, const struct rf__opkind *k,
		void *arg, struct rf__waiter *w)
{
	struct rf_op *op;
	int ret;

	if ((ret = rf__push_admit(e, d, k)) < 0)
		return ret;
	op = rf__op_alloc(e);
	if (!op)
		return rf__fail(-ENOMEM, "push of op '%s': out of memory", d->name ? d->name : "op");
	op->kind = k;
	op->arg.var = arg;       /* the union's pointer: var or gl alike */
	op->state = RF__OP_PENDING;
	if ((ret = rf__op_fill(e, op, d)) < 0) {
		rf__op_free(e, op);
		return ret;
	}
	rf__op_number(e, op);
	op->waiter = w;
	rf__inflight_add(e, op->bytes);
	if (--op->pending == 0) {
		op->state = RF__OP_READY;
		rf__oplist_push(&e->ready, op);
	}
	rf__pump(e);
	return 0;
}

const struct rf__opkind rf__kind_user = {
	.name = "op", .counted = 1, .traced = 1,
};

static int rf__names(struct rf_var *const *vs, unsigned n, const struct rf_var *v)
{
	for (unsigned i = 0; vs && i < n; i++)
		if (vs[i] == v)
			return 1;
	return 0;
}

int rf__delete_refused(struct rf_engine *e, struct rf_var *v, const char *who)
{
	const struct rf_op_desc *d = e->room_desc;
	int waiting = d && (rf__names(d->reads, d->nreads, v) || rf__names(d->writes, d->nwrites, v));

	for (unsigned i = 0; !waiting && e->room_binds && i < e->room_nbinds; i++)
		waiting = e->room_binds[i].actual == v;
	if (waiting)
		return rf__fail(-EBUSY, "%s('%s') from inside an op or callback while a push "
				"naming it waits for room under the in-flight cap: refused (it "
				"would be freed under that push)", who, v->name);
	if (e->cap && rf__capture_uses(e->cap, v))
		return rf__fail(-EBUSY, "%s('%s') from inside an op or callback while a capture "
				"recording it is on: refused (the graph would keep it)", who,
				v->name);
	return 0;
}

/* Refused while a capture records: what cannot be part of a graph. */
int rf__capturing(struct rf_engine *e, const char *what)
{
	if (!e->cap)
		return 0;
	return rf__fail(-EBUSY, "%s while a capture is recording: refused (a graph records "
			"ops only; do it before rf_engine_capture_begin or after "
			"rf_engine_capture_end)", what);
}

/* A user push: in synchronous debug mode the op runs to completion before push
 * returns (when the reactor can be turned here; from inside an op or callback it
 * runs right after). Once the op is accepted push returns 0 whatever happens while
 * waiting: the op and its done callback belong to the engine from then on. k: the
 * user's kind (rf_engine_push and its like: captured while a capture records, and
 * tried on the immediate path) or another a user asks for (a deletion: refused while
 * capturing). */
static inline __attribute__((always_inline)) int rf__push_user(struct rf_engine *e,
							  const struct rf_op_desc *d,
							  const struct rf__opkind *k,
							  void *arg, const char *who)
{
	struct rf__waiter *w = NULL;
	int ret;

	if ((ret = rf__push_thread(e, who)) < 0)
		return ret;
	/* recorded: a push of the code that captures, not one from an op or callback of
	 * what was pushed before (that program runs on, as pushed) */
	if (e->cap && !rf__in_callback(e)) {
		if (k == &rf__kind_delete)  /* pushed when the capture ends (capture.c) */
			return rf__capture_defer_delete(e, arg, d->stream);
		if (k != &rf__kind_user)
			return rf__capturing(e, who);
		return rf__capture_add(e, d, rf__check_desc(e, d, &rf__kind_user));
	}
	if (k == &rf__kind_delete && rf__delete_may_be_refused(e) &&
	    (ret = rf__delete_refused(e, arg, who)) < 0)
		return ret;
	if (k == &rf__kind_user && (ret = rf__push_now(e, d)) != 0)
		return ret < 0 ? ret : 0;
	if (e->sync && !rf__in_callback(e) && !(w = calloc(1, sizeof(*w))))
		return rf__fail(-ENOMEM, "push of op '%s': out of memory", d->name ? d->name : "op");
	ret = rf__push_op(e, d, k, arg, w);
	if (ret < 0) {
		free(w);
		return ret;
	}
	if (w)
		(void)rf__wait_waiter(e, w, NULL);
	return 0;
}

int rf__push_as(struct rf_engine *e, const struct rf_op_desc *d, const struct rf__opkind *k,
		void *arg, const char *who)
{
	return rf__push_user(e, d, k, arg, who);
}

int rf_engine_push(struct rf_engine *e, const struct rf_op_desc *d)
{
	return rf__push_user(e, d, &rf__kind_user, NULL, "rf_engine_push");
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
	return rf__push_user(e, &d, &rf__kind_user, NULL, "rf_engine_push");
}

/* ---- clearing a variable's error: a pushed mutation (deleting one: var.c) ---- */

static int rf__clear_run(void *ctx)
{
	struct rf_var *v = ctx;

	rf__var_set_err(v, 0, NULL);
	return 0;
}

int rf_var_clear_error(struct rf_engine *e, struct rf_var *v)
{
	struct rf_op_desc d = { 0 };

	if (!v || v->eng != e)
		return rf__fail(-EINVAL, "rf_var_clear_error: %s", v ? "a variable of another "
								     "engine" : "v is NULL");
	if (e->cap && !rf__in_callback(e))
		return rf__capturing(e, "rf_var_clear_error");
	int ret = rf__push_thread(e, "rf_var_clear_error");
	if (ret < 0)
		return ret;
	d.fn = rf__clear_run;
	d.ctx = v;
	d.writes = &v;
	d.nwrites = 1;
	d.name = "clear_error";
	d.flags = RF_OP_ALWAYS;
	return rf__push_user(e, &d, &rf__kind_user, NULL, "rf_engine_push");
}
