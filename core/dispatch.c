/* core/dispatch.c -- the one loop (rf__pump) that empties the engine's two lists:
 * finished ops are completed (complete.c), ready ops are dispatched to their stream
 * (rf__dispatch). Nothing recurses: a completion or dispatch that makes more ops
 * ready or finished appends them to the lists. */
#include "graph-impl.h"
#include "rf-internal.h"

/* A stream's enqueue failed: the op fails with ret, unless the stream already
 * reported it (an async fn that called rf_engine_op_done, then returned an error). */
static void rf__enqueue_failed(struct rf_engine *e, struct rf_op *op, struct rf_stream *s,
			       uint64_t uid, const char *opname, int ret)
{
	if (op->uid != uid || op->state != RF__OP_DISPATCHED) {
		rf__log(RF_LOG_ERROR, "op '%s' on stream %s reported its completion and "
			"then returned %d; the return value is ignored (an async op returns "
			"0 once it has called rf_engine_op_done)", opname, s->name, ret);
		return;
	}
	s->done_seq++;
	rf__reported(e, op, ret);
}

static void rf__dispatch(struct rf_engine *e, struct rf_op *op)
{
	struct rf_stream *s = op->stream;
	const char *name, *opname = op->name;
	uint64_t uid = op->uid;
	const struct rf__opkind *k = op->kind;
	int ret;

	if (k->skip ? k->skip(e, op) : rf__inherited_error(op, 1, &name)) {
		/* Skipped: an input is poisoned for good. Not enqueued; it completes
		 * (poisoning its outputs) when it is first in all its queues. */
		rf__reported(e, op, 0);
		return;
	}
	/* Every input at the front and clean: nothing can poison it any more. */
	op->settled = op->nfront == op->nent;
	op->state = RF__OP_DISPATCHED;
	op->seq = ++s->seq;
	ret = s->ops->enqueue(s, op);
	/* Stream chaining: consumers on the same in-order stream (or on streams that
	 * can wait for this one) may go now -- after the enqueue, so that a stream's
	 * chain hook can wait for what it has been given (CUDA: the op's event). The
	 * op is still ours: what it reported goes on the finished list, which this
	 * loop empties later. An op the stream refused is never chained behind: its
	 * consumers wait for its (failed) completion. */
	if (ret < 0)
		rf__enqueue_failed(e, op, s, uid, opname, ret);
	else if (k->enqueued)          /* a launch: nothing (once its ops are enqueued) */
		k->enqueued(e, op);
	else
		rf__q_dispatched(e, op);
	if (s->ops->flush && !s->flush_queued) {
		s->flush_queued = 1;
		s->next_flush = e->flushq;
		e->flushq = s;
	}
}

/* Finishing first (it frees memory and may make more ops ready). Never re-entered:
 * nested calls return and the outer loop goes on. */
void rf__pump(struct rf_engine *e)
{
	struct rf_op *op;
	struct rf_stream *s;

	if (e->pumping)
		return;
	e->pumping = 1;
	for (;;) {
		if ((op = rf__oplist_pop(&e->finished)))
			rf__finish(e, op);
		else if ((op = rf__oplist_pop(&e->ready)))
			rf__dispatch(e, op);
		else if ((s = e->flushq)) {
			/* the round is over: streams that gather ops start them */
			e->flushq = s->next_flush;
			s->flush_queued = 0;
			s->ops->flush(s);
		} else
			break;
	}
	e->pumping = 0;
}
