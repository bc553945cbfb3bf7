/* core/complete.c -- an op's completion: once it was reported and is first in every
 * queue it is in, its final status is decided on the serial state of its variables
 * (rf__finish), the variables it writes are poisoned or healed, its waiter and done
 * callback are told, and it leaves the queues. */
#include <stdlib.h>

#include "graph-impl.h"

/* The poison op inherits from the variables it reads (a mutated variable is read
 * too, unless the op is RF_OP_OVERWRITE), 0 if none. front_only: look only at the
 * entries already at their queue's front, whose state is final. */
int rf__inherited_error(const struct rf_op *op, int front_only, const char **name)
{
	uint32_t i;

	/* no variable of the engine is poisoned (the count rf__poison_var and
	 * rf__var_set_err keep): nothing to inherit, no variable read */
	if ((op->flags & RF_OP_ALWAYS) || !op->eng->npoisoned)
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
			rf__var_set_err(v, 0, NULL); /* RF_OP_OVERWRITE succeeded */
		}
	}
	if (status < 0)
		rf__note_error(e, status, ename);
}

/* The final status: skipped if an input is poisoned (if it ran, chained, its result
 * is discarded), else what the stream reported. Counts it. */
static int rf__final_status(struct rf_engine *e, struct rf_op *op, const char **ename)
{
	const char *iname = NULL;
	int inh = op->settled ? 0 : rf__inherited_error(op, 0, &iname);

	if (inh) {
		*ename = iname;
		e->st.skipped++;
		return inh;
	}
	if (op->status < 0)
		e->st.failed++;
	return op->status;
}

static void rf__wake_waiter(struct rf_op *op, int status)
{
	struct rf__waiter *w = op->waiter;

	if (!w)
		return;
	w->err = op->kind->wait_status ? op->kind->wait_status(op, status) : status;
	if (w->abandoned)
		free(w);
	else
		w->done = 1;
}

static void rf__call_done(struct rf_engine *e, struct rf_op *op, int status)
{
	if (!op->done)
		return;
	e->in_callback++;
	op->done(op->ctx, status);
	e->in_callback--;
}

/* op was reported (or skipped) and is first in every queue it is in. */
void rf__finish(struct rf_engine *e, struct rf_op *op)
{
	const char *ename = op->name;
	int status;

	if (op->kind->finish) {
		op->kind->finish(e, op);
		return;
	}
	status = rf__final_status(e, op, &ename);

	rf__settle_vars(e, op, status, ename);
	op->status = status;
	op->state = RF__OP_DONE;
	if (e->trace)
		rf__trace_record(e, op);
	rf__wake_waiter(op, status);
	rf__q_remove(e, op);
	rf__inflight_sub(e, op->bytes);
	if (op->kind->counted)
		e->st.completed++;
	rf__call_done(e, op, status);
	if (op->kind->finished)        /* after rf__q_remove: a launch's entries are its own */
		op->kind->finished(e, op);
	rf__op_free(e, op);
}

/* The op left its stream (or never went there): complete it once it is first in
 * every queue; until then it waits there (queue.c puts it on the finished list). */
void rf__reported(struct rf_engine *e, struct rf_op *op, int status)
{
	op->status = status;
	op->state = RF__OP_REPORTED;
	if (op->kind->reported)
		op->kind->reported(e, op);
	else if (op->nfront == op->nent)
		rf__oplist_push(&e->finished, op);
}
