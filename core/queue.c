/* core/queue.c -- the variables' queues: queuing an entry, granting entries as the
 * group before them finishes or is ordered on an in-order stream (rf__advance), a
 * group reaching the front, entries leaving. O(1) per entry, amortized (README.md). */
#include <errno.h>
#include <stdlib.h>

#include "graph-impl.h"

static void rf__grant(struct rf_engine *e, struct rf__entry *en)
{
	struct rf_op *op = en->op;

	en->granted = 1;
	en->g->nungranted--;
	if (--op->pending == 0) {
		op->state = RF__OP_READY;
		rf__oplist_push(&e->ready, op);
	}
}

static void rf__at_front(struct rf_engine *e, struct rf__entry *en)
{
	struct rf_op *op = en->op;

	en->front = 1;
	if (++op->nfront == op->nent && op->state == RF__OP_REPORTED)
		rf__oplist_push(&e->finished, op);
	else if (op->nfront == op->nent && op->kind->at_front)
		op->kind->at_front(e, op);   /* a launch that had chained: graph-run.c */
}

/* May op follow group p, which is not finished, by stream order? Every unfinished
 * entry of p must sit enqueued on one in-order stream, and op's stream must be
 * that stream or able to wait for it (the optional chain hook: CUDA events). */
static int rf__can_chain(struct rf_engine *e, struct rf_op *op, const struct rf__group *p)
{
	struct rf_stream *s = op->qstream;

	if (p->ndio != p->n || p->ndio_s != p->ndio || !(s->flags & RF_STREAM_IN_ORDER))
		return 0;
	if (p->s != s && (!s->ops->chain || s->ops->chain(s, p->s, p->maxseq) != 0))
		return 0;
	e->st.chained++;
	return 1;
}

/* Grant what the frontier's predecessor now allows; move the frontier on. The group
 * after it follows entries granted but not yet dispatched: nothing more to grant. */
static void rf__advance(struct rf_engine *e, struct rf_var *v)
{
	struct rf__group *g = v->frontier;
	struct rf__entry *en;

	if (!g)
		return;
	for (en = g->head; en && g->nungranted; en = en->next)
		if (!en->granted && rf__can_chain(e, en->op, g->prev))
			rf__grant(e, en);
	if (!g->nungranted)
		v->frontier = g->next;
}

/* Group g became the queue's first: everything before it finished. */
static void rf__group_front(struct rf_engine *e, struct rf_var *v, struct rf__group *g)
{
	struct rf__entry *en;

	for (en = g->head; en; en = en->next) {
		if (!en->granted)
			rf__grant(e, en);
		rf__at_front(e, en);
	}
	if (v->frontier == g)
		v->frontier = g->next;
}

/* Groups come from the engine's slab (slab.h); the free list here holds those
 * reserved by rf__q_reserve, so a fill that started never fails for want of one. A
 * group on it is poisoned under AddressSanitizer: one used after it left its queue is
 * reported. */
static void rf__group_put(struct rf_engine *e, struct rf__group *g)
{
	g->next = e->free_groups;
	e->free_groups = g;
	e->nfree_groups++;
	RF__SLAB_POISON(g, sizeof(*g));
}

int rf__q_grow(struct rf_engine *e, uint32_t n)
{
	while (e->nfree_groups < n) {
		struct rf__group *g = rf__slab_get(&e->group_slab);

		if (!g)
			return -ENOMEM;
		rf__group_put(e, g);
	}
	return 0;
}

static struct rf__group *rf__group_get(struct rf_engine *e)
{
	struct rf__group *g = e->free_groups; /* reserved by rf__q_reserve */

	RF__SLAB_UNPOISON(g, sizeof(*g));
	e->free_groups = g->next;
	e->nfree_groups--;
	g->prev = g->next = NULL;
	g->head = g->tail = NULL;
	g->n = g->nungranted = g->ndio = g->ndio_s = 0;
	g->s = NULL;
	g->maxseq = 0;
	return g;
}

void rf__q_free_groups(struct rf_engine *e)
{
	rf__slab_release(&e->group_slab);
	e->free_groups = NULL;
	e->nfree_groups = 0;
}

/* The group en joins at v's tail: the tail's run of reads for a read, else a new
 * group (one was reserved). */
static struct rf__group *rf__q_tail_group(struct rf_engine *e, struct rf_var *v, int write)
{
	struct rf__group *g = v->tail;

	if (!write && g && !g->write)
		return g;
	g = rf__group_get(e);
	g->write = (uint8_t)write;
	g->prev = v->tail;
	if (v->tail)
		v->tail->next = g;
	else
		v->head = g;
	v->tail = g;
	return g;
}

static void rf__group_append(struct rf__group *g, struct rf__entry *en)
{
	en->g = g;
	en->prev = g->tail;
	if (g->tail)
		g->tail->next = en;
	else
		g->head = en;
	g->tail = en;
	g->n++;
	g->nungranted++;
}

/* Queue entry en (op, var, write set) at the tail of its variable's queue, granting
 * it if it can go now. */
void rf__q_add(struct rf_engine *e, struct rf__entry *en)
{
	struct rf_var *v = en->var;
	struct rf__group *g;

	en->granted = en->front = en->dio = 0;
	en->next = NULL;
	g = rf__q_tail_group(e, v, en->write);
	rf__group_append(g, en);
	v->nqueued++;
	if (g == v->head) {
		rf__grant(e, en);
		rf__at_front(e, en);
	} else if (!v->frontier || v->frontier == g) {
		/* Everything before g is granted: en may follow g's predecessor. */
		if (rf__can_chain(e, en->op, g->prev))
			rf__grant(e, en);
		else if (!v->frontier)
			v->frontier = g;
	}
}

/* op was enqueued on its stream. On an in-order stream its entries now count as
 * ordered there, which may let the next group follow them. */
void rf__q_dispatched(struct rf_engine *e, struct rf_op *op)
{
	struct rf_stream *s = op->qstream;
	uint32_t i;

	if (!(s->flags & RF_STREAM_IN_ORDER))
		return;
	for (i = 0; i < op->nent; i++) {
		struct rf__entry *en = &op->ent[i];
		struct rf__group *g = en->g;
		struct rf_var *v = en->var;

		en->dio = 1;
		if (g->ndio++ == 0) {
			g->s = s;
			g->ndio_s = 0;
			g->maxseq = 0;
		}
		if (g->s == s) {
			g->ndio_s++;
			if (op->seq > g->maxseq)
				g->maxseq = op->seq;
		}
		if (v->frontier && v->frontier->prev == g)
			rf__advance(e, v);
	}
}

static void rf__group_unlink(struct rf__group *g, struct rf__entry *en, struct rf_stream *s)
{
	if (en->prev)
		en->prev->next = en->next;
	else
		g->head = en->next;
	if (en->next)
		en->next->prev = en->prev;
	else
		g->tail = en->prev;
	g->n--;
	if (en->dio) {
		g->ndio--;
		if (g->s == s)
			g->ndio_s--;
	}
}

/* v's front group g emptied: the next one becomes the front. */
static void rf__q_pop_front(struct rf_engine *e, struct rf_var *v, struct rf__group *g)
{
	v->head = g->next;
	rf__group_put(e, g);
	if (v->head) {
		v->head->prev = NULL;
		rf__group_front(e, v, v->head);
	} else {
		v->tail = NULL;
	}
}

/* op finished and every entry of it is at the front: take them out. Groups that
 * empty hand the front to the next. */
void rf__q_remove(struct rf_engine *e, struct rf_op *op)
{
	uint32_t i;

	for (i = 0; i < op->nent; i++) {
		struct rf__entry *en = &op->ent[i];
		struct rf__group *g = en->g;
		struct rf_var *v = en->var;

		rf__group_unlink(g, en, op->qstream);
		v->nqueued--;
		if (g->n == 0)
			rf__q_pop_front(e, v, g);
		else if (v->frontier && v->frontier->prev == g)
			rf__advance(e, v);
	}
}
