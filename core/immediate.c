/* core/immediate.c -- the immediate path. An inline op pushed while the engine is not
 * dispatching, with no flags, no trace, and every variable's queue empty, is granted
 * at once and would be dispatched and run at once: it runs right at push, without
 * queue entries. A push from inside it first gives it its op record and entries
 * (rf__now_materialize), exactly as if it had gone the long way, so the nested op
 * orders behind it. */
#include <errno.h>

#include "engine-impl.h"

static int rf__now_vars_idle(struct rf_engine *e, struct rf_var *const *vars, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (!vars[i] || vars[i]->eng != e || vars[i]->nqueued)
			return 0;
	return 1;
}

static int rf__now_eligible(struct rf_engine *e, const struct rf_op_desc *d)
{
	if (!d || !d->fn || d->afn || d->flags || e->pumping || e->trace ||
	    (d->stream && d->stream != &e->inline_stream) ||
	    (d->nreads && !d->reads) || (d->nwrites && !d->writes))
		return 0;
	return rf__now_vars_idle(e, d->writes, d->nwrites) &&
	       rf__now_vars_idle(e, d->reads, d->nreads);
}

/* A push from inside the op running on the immediate path: queue that op first. */
int rf__now_materialize(struct rf_engine *e)
{
	const struct rf_op_desc *d = e->now_desc;
	struct rf_op *op = rf__op_alloc(e);
	int ret;

	if (!op)
		return -ENOMEM;
	op->uid = e->now_uid;
	if ((ret = rf__op_fill(e, op, d)) < 0) { /* empty queues: granted, at the front */
		rf__op_free(e, op);
		return ret;
	}
	op->pending = 0;
	op->settled = 1;
	op->state = RF__OP_DISPATCHED;
	op->seq = ++e->inline_stream.seq;
	e->now_op = op;
	return 0;
}

/* Queues empty: the variables' poison is final for this op. */
static int rf__now_inherited(const struct rf_op_desc *d, const char **ename)
{
	uint32_t i;

	for (i = 0; i < d->nwrites; i++) {
		if (d->writes[i]->err) {
			*ename = d->writes[i]->err_op;
			return d->writes[i]->err;
		}
	}
	for (i = 0; i < d->nreads; i++) {
		if (d->reads[i]->err) {
			*ename = d->reads[i]->err_op;
			return d->reads[i]->err;
		}
	}
	return 0;
}

static int rf__now_call(struct rf_engine *e, const struct rf_op_desc *d)
{
	int st;

	e->now_desc = d;
	e->in_callback++;
	st = d->fn(d->ctx);
	e->in_callback--;
	e->now_desc = NULL;
	return st > 0 ? 0 : st;
}

/* A push from inside it queued it: finish it the long way. */
static void rf__now_report_queued(struct rf_engine *e, int st)
{
	struct rf_op *op = e->now_op;

	e->now_op = NULL;
	e->inline_stream.done_seq++;
	rf__reported(e, op, st);
	e->pumping = 0;
	rf__pump(e);
}

/* Its outcome, as rf__finish would record it. */
static void rf__now_complete(struct rf_engine *e, const struct rf_op_desc *d, int st,
			     int skipped, const char *ename)
{
	uint32_t i;

	if (skipped)
		e->st.skipped++;
	else if (st < 0)
		e->st.failed++;
	if (st < 0) {
		for (i = 0; i < d->nwrites; i++)
			rf__poison_var(d->writes[i], st, ename);
		rf__note_error(e, st, ename);
	}
	rf__inflight_sub(e, d->bytes);
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

static void rf__run_now(struct rf_engine *e, const struct rf_op_desc *d)
{
	const char *ename = d->name ? d->name : "op";
	int inh = rf__now_inherited(d, &ename);
	int st = 0;

	e->now_uid = ++e->next_uid;
	e->st.pushed++;
	rf__inflight_add(e, d->bytes);
	e->pumping = 1;
	if (!inh)
		st = rf__now_call(e, d);
	if (e->now_op) {
		rf__now_report_queued(e, st);
		return;
	}
	rf__now_complete(e, d, inh ? inh : st, inh != 0, ename);
}

/* Run d at once if it is eligible and there is room (after turning the reactor for
 * room, if it still is): 1. Not eligible: 0. */
int rf__push_now(struct rf_engine *e, const struct rf_op_desc *d)
{
	int ret;

	if (!rf__now_eligible(e, d))
		return 0;
	if (!rf__has_room(e, 1, d->bytes)) {
		if ((ret = rf__room_for(e, d, NULL, 0, 1, d->bytes)) < 0)
			return ret;
		if (!rf__now_eligible(e, d))
			return 0;
	}
	rf__run_now(e, d);
	return 1;
}
