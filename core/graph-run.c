/* core/graph-run.c -- running a graph launch. The launch's macro op holds the graph's
 * variables in the engine's queues; once it is dispatched (on the graph stream) every
 * variable is at its queue's front, so the launch owns them: its captured ops run by
 * the dependency counts precomputed at capture, with no queue walk, and the poison of
 * each variable is tracked per version (each write) exactly as the serial program
 * would leave it. When the last op finishes, the variables' poison is settled and the
 * macro op completes, letting whatever was pushed after the launch go. */
#include <stdlib.h>
#include <string.h>

#include "graph-impl.h"
#include "rf-internal.h"

/* The parts of op i's record that stay from launch to launch (a new launch block). */
void rf__glaunch_init_ops(struct rf_engine *e, struct rf__glaunch *L)
{
	for (uint32_t i = 0; i < L->g->n; i++) {
		const struct rf__gnode *nd = &L->g->nodes[i];
		struct rf_op *op = &L->ops[i];

		memset(op, 0, offsetof(struct rf_op, ent_inline));
		op->eng = e;
		op->fn = nd->fn;
		op->afn = nd->afn;
		op->ctx = nd->ctx;
		op->stream = nd->stream;
		op->name = nd->name;
		op->bytes = nd->bytes;
		op->flags = nd->flags;
		op->kind = &rf__kind_node;
		op->arg.node.gl = L;
		op->arg.node.i = i;
		op->qstream = nd->stream;
		op->ent = op->ent_inline;
		op->cap_ent = RF__INLINE_ENTRIES;
		L->fast[i] = nd->stream == &e->inline_stream && nd->fn;
	}
}

static void rf__glaunch_drain(struct rf_engine *e, struct rf__glaunch *L);

/* Op i may go to its stream: what changes per launch is set now. An inline op (not
 * traced) runs from the launch's own queue instead. */
static void rf__glaunch_ready(struct rf_engine *e, struct rf__glaunch *L, uint32_t i)
{
	struct rf_op *op = &L->ops[i];

	if (L->fast[i] && !e->trace) {
		L->runq[L->rq_tail++] = i;
		if (!L->draining)
			rf__glaunch_drain(e, L);
		return;
	}
	op->status = 0;
	op->uid = L->uid0 + i;
	op->traced = e->trace != NULL;
	op->t0 = op->t1 = 0;
	op->state = RF__OP_READY;
	rf__oplist_push(&e->ready, op);
}

/* The poison an entry sees: the version its producer left, or what the launch found. */
static inline int rf__gent_seen(const struct rf__glaunch *L, const struct rf__gent *en,
				const char **name)
{
	if (en->prod == RF__GNONE) {
		*name = L->init_name[en->var];
		return L->init_err[en->var];
	}
	*name = L->ver_name[en->prod];
	return L->ver_err[en->prod];
}

/* The poison a node inherits from what it reads (a mutated variable is read too,
 * unless RF_OP_OVERWRITE), as rf__inherited_error. Valid once every predecessor
 * finished. */
static int rf__gnode_inherited(const struct rf__glaunch *L, const struct rf__gnode *nd,
			       const char **name)
{
	const struct rf_graph *g = L->g;

	if (nd->flags & RF_OP_ALWAYS)
		return 0;
	for (uint32_t j = nd->ent0; j < nd->ent0 + nd->nent; j++) {
		const struct rf__gent *en = &g->ent[j];
		int err;

		if ((nd->flags & RF_OP_OVERWRITE) && en->write)
			continue;
		if ((err = rf__gent_seen(L, en, name)) != 0)
			return err;
	}
	return 0;
}

/* The poison the launch found on its variables. With none poisoned anywhere, the
 * launch checks nothing until one of its ops fails. */
static void rf__glaunch_init(struct rf_engine *e, struct rf__glaunch *L)
{
	struct rf_graph *g = L->g;

	L->init_done = 1;
	L->poison = e->npoisoned != 0;
	if (L->poison) {
		for (uint32_t x = 0; x < g->nvar; x++) {
			L->init_err[x] = L->bound[x]->err;
			L->init_name[x] = L->bound[x]->err_op;
		}
	} else {
		memset(L->init_err, 0, g->nvar * sizeof(*L->init_err));
	}
}

/* Dispatch: 1 if the node is skipped (its inputs are final and poisoned). */
static int rf__gnode_dispatch(struct rf_engine *e, struct rf_op *op)
{
	struct rf__glaunch *L = op->arg.node.gl;
	const char *name;

	(void)e;
	return L->poison && L->pend_fin[op->arg.node.i] == 0 &&
	       rf__gnode_inherited(L, &L->g->nodes[op->arg.node.i], &name) != 0;
}

/* The node goes to its stream: successors on the same in-order stream, or on an
 * in-order stream that can wait for this one (the chain hook), need not wait for it
 * to finish. */
static void rf__gnode_chain(struct rf_engine *e, struct rf_op *op)
{
	struct rf__glaunch *L = op->arg.node.gl;
	struct rf_graph *g = L->g;
	const struct rf__gnode *nd = &g->nodes[op->arg.node.i];
	struct rf_stream *ps = op->stream;

	if (++L->ndisp == g->n && g->single) {
		/* the whole launch is enqueued on one in-order stream: what follows it
		 * there may chain behind it, as behind a single op (queue.c) */
		L->macro->seq = op->seq;
		rf__q_dispatched(e, L->macro);
	}
	if (!(ps->flags & RF_STREAM_IN_ORDER))
		return;
	for (uint32_t k = nd->succ0; k < nd->succ0 + nd->nsucc; k++) {
		uint32_t s = g->succ[k];
		struct rf_stream *ss = g->nodes[s].stream;

		if (!g->succ_same[k] && (!(ss->flags & RF_STREAM_IN_ORDER) || !ss->ops->chain ||
					 ss->ops->chain(ss, ps, op->seq) != 0))
			continue;
		L->chained[k] = 1;
		e->st.chained++;
		if (--L->pend_disp[s] == 0)
			rf__glaunch_ready(e, L, s);
	}
}

/* Reported (or skipped): finished once every predecessor has finished, so its
 * inputs' poison is final -- whatever order the streams report in. */
static void rf__gnode_reported(struct rf_engine *e, struct rf_op *op)
{
	struct rf__glaunch *L = op->arg.node.gl;

	if (L->pend_fin[op->arg.node.i] != 0)
		L->reported[op->arg.node.i] = 1;
	else if (!L->at_front) /* chained: the inputs' poison is not final yet */
		rf__oplist_push(&L->deferred, op);
	else
		rf__oplist_push(&e->finished, op);
}

/* The launch's poison goes to the variables it holds, and its macro op completes. */
static void rf__glaunch_done(struct rf_engine *e, struct rf__glaunch *L)
{
	struct rf_graph *g = L->g;
	struct rf_op *m = L->macro;

	for (uint32_t x = 0; L->poison && x < g->nvar; x++) {
		uint32_t last = g->vars[x].last;
		if (last != RF__GNONE)
			rf__var_set_err(L->bound[x], L->ver_err[last], L->ver_name[last]);
	}
	if (m->traced)
		m->t1 = rf_now_ns();
	e->graph_stream.done_seq++;
	m->status = 0;
	m->state = RF__OP_REPORTED;
	if (m->nfront == m->nent) /* always: it was dispatched at every front */
		rf__oplist_push(&e->finished, m);
	L->draining = 0;
}

/* The macro op completed and left the queues (its entries are L->ents): the launch
 * block goes back to the graph, and a destroyed graph is freed after its last. */
static void rf__glaunch_release(struct rf__glaunch *L)
{
	struct rf_graph *g = L->g;

	L->macro = NULL;
	L->next = g->free_launches;
	g->free_launches = L;
	if (--g->inflight == 0 && g->doomed)
		rf__graph_free(g);
}

/* The trace's edges of a node: its predecessors in this launch. */
static void rf__gnode_trace(struct rf_engine *e, struct rf__glaunch *L, struct rf_op *op)
{
	const struct rf__gnode *nd = &L->g->nodes[op->arg.node.i];

	if (nd->npred && (op->deps = malloc(nd->npred * sizeof(*op->deps)))) {
		for (uint32_t k = 0; k < nd->npred; k++)
			op->deps[k] = L->uid0 + L->g->pred[nd->pred0 + k];
		op->ndeps = nd->npred;
	}
	rf__trace_record(e, op);
	free(op->deps); /* NULL unless the trace could not take it */
	op->deps = NULL;
}

/* Node i's outcome: its final status (skipped if an input is poisoned: a chained
 * node's result is then discarded), the versions it wrote, its successors. op: its
 * record, NULL for an op run inline by rf__glaunch_drain. Returns 1 if that was the
 * launch's last op (L may be gone). */
static int rf__gnode_done(struct rf_engine *e, struct rf__glaunch *L, uint32_t i, int status,
			  struct rf_op *op)
{
	struct rf_graph *g = L->g;
	const struct rf__gnode *nd = &g->nodes[i];
	const char *ename = nd->name, *iname = NULL;
	int inh;

	if (!L->init_done)
		rf__glaunch_init(e, L);
	inh = L->poison ? rf__gnode_inherited(L, nd, &iname) : 0;

	if (status < 0)
		L->poison = 1;
	if (inh) {
		status = inh;
		ename = iname;
		e->st.skipped++;
	} else if (status < 0) {
		e->st.failed++;
	}
	e->st.completed++;
	/* without poison every version stays clean (zeroed at the start) */
	for (uint32_t j = nd->ent0; L->poison && j < nd->ent0 + nd->nent; j++) {
		const struct rf__gent *en = &g->ent[j];
		const char *pname;
		int prior;

		if (!en->write)
			continue;
		prior = rf__gent_seen(L, en, &pname);
		if (status < 0 && !prior) {
			L->ver_err[j] = status;
			L->ver_name[j] = ename;
		} else if (status >= 0 && (nd->flags & RF_OP_OVERWRITE)) {
			L->ver_err[j] = 0;
			L->ver_name[j] = NULL;
		} else {
			L->ver_err[j] = prior;
			L->ver_name[j] = pname;
		}
	}
	if (status < 0)
		rf__note_error(e, status, ename);
	if (op) {
		op->status = status;
		op->state = RF__OP_DONE;
		if (op->traced && e->trace)
			rf__gnode_trace(e, L, op);
	}
	for (uint32_t k = nd->succ0; k < nd->succ0 + nd->nsucc; k++) {
		uint32_t s = g->succ[k];
		if (!L->chained[k] && --L->pend_disp[s] == 0)
			rf__glaunch_ready(e, L, s);
		if (--L->pend_fin[s] == 0 && L->reported[s])
			rf__oplist_push(&e->finished, &L->ops[s]);
	}
	if (--L->nleft == 0) {
		rf__glaunch_done(e, L);
		return 1;
	}
	return 0;
}

static void rf__gnode_finish(struct rf_engine *e, struct rf_op *op)
{
	rf__gnode_done(e, op->arg.node.gl, op->arg.node.i, op->status, op);
}

/* Run the inline ops that became ready, in order, right here: no op record, no
 * dispatch, no stream (what makes a replay cheap). Not re-entered: ops that become
 * ready meanwhile join the queue. */
static void rf__glaunch_drain(struct rf_engine *e, struct rf__glaunch *L)
{
	L->draining = 1;
	while (L->rq_head != L->rq_tail) {
		uint32_t i = L->runq[L->rq_head++];
		const struct rf__gnode *nd = &L->g->nodes[i];
		const char *name;
		int st = 0;

		if (!L->poison || !rf__gnode_inherited(L, nd, &name)) {
			e->in_callback++;
			st = nd->fn(nd->ctx);
			e->in_callback--;
			st = st > 0 ? 0 : st;
		}
		if (rf__gnode_done(e, L, i, st, NULL))
			return; /* the launch is over (its block may be reused or freed) */
	}
	L->draining = 0;
}

/* ---- the graph stream: a launch's macro op starts its captured ops ---- */

static int rf__graph_enqueue(struct rf_stream *s, struct rf_op *m)
{
	struct rf_engine *e = s->eng;
	struct rf__glaunch *L = m->arg.gl;
	struct rf_graph *g = L->g;

	if (m->traced)
		m->t0 = rf_now_ns();
	/* At every front (not chained) the variables' poison is final: read it now.
	 * Chained behind what precedes it on its stream, the launch reads it when its
	 * macro op reaches every front; its ops' completions wait for that. */
	L->at_front = m->nfront == m->nent;
	L->init_done = 0;
	L->poison = 0;
	L->ndisp = 0;
	L->deferred.head = L->deferred.tail = NULL;
	if (L->at_front)
		rf__glaunch_init(e, L);
	memset(L->ver_err, 0, g->nent * sizeof(*L->ver_err));
	if (g->args_size && L->has_args)
		memcpy(g->args, L->args, g->args_size);
	L->uid0 = e->next_uid + 1;
	e->next_uid += g->n;
	memcpy(L->pend_disp, g->npred, g->n * sizeof(*g->npred));
	memcpy(L->pend_fin, g->npred, g->n * sizeof(*g->npred));
	memset(L->reported, 0, g->n);
	memset(L->chained, 0, g->nedge);
	L->rq_head = L->rq_tail = 0;
	L->nleft = g->n;
	if (!g->n) {
		rf__glaunch_done(e, L);
		return 0;
	}
	for (uint32_t r = 0; r < g->nroots; r++)
		rf__glaunch_ready(e, L, g->roots[r]);
	return 0;
}

static void rf__graph_stream_destroy(struct rf_stream *s)
{
	(void)s;
}

const struct rf_stream_ops rf__graph_stream_ops = {
	/* .enqueue = */ rf__graph_enqueue,
	/* .chain   = */ NULL,
	/* .destroy = */ rf__graph_stream_destroy,
};

void rf__glaunch_free(struct rf__glaunch *L)
{
	free(L->ops);
	free(L->pend_disp);
	free(L->pend_fin);
	free(L->reported);
	free(L->chained);
	free(L->ver_err);
	free(L->ver_name);
	free(L->init_err);
	free(L->init_name);
	free(L->bound);
	free(L->rd);
	free(L->wr);
	free(L->ents);
	free(L->runq);
	free(L->fast);
	free(L->args);
	free(L);
}

void rf__graph_free(struct rf_graph *g)
{
	struct rf_engine *e = g->eng;
	struct rf__glaunch *L;

	if (g->prev)
		g->prev->next = g->next;
	else if (e->graphs == g)
		e->graphs = g->next;
	if (g->next)
		g->next->prev = g->prev;
	e->in_callback++;
	for (uint32_t i = 0; i < g->n; i++)
		if (g->nodes[i].done)
			g->nodes[i].done(g->nodes[i].ctx, 0);
	e->in_callback--;
	while ((L = g->free_launches)) {
		g->free_launches = L->next;
		rf__glaunch_free(L);
	}
	free(g->nodes);
	free(g->ent);
	free(g->vars);
	free(g->succ);
	free(g->succ_same);
	free(g->pred);
	free(g->roots);
	free(g->npred);
	free(g->args);
	free(g->name);
	free(g);
}

/* ---- the two kinds of op graphs make (opkind.h) ---- */

/* A launch's variables are known distinct (bound at capture): its entries are the
 * launch block's own, kept from launch to launch (rf__op_free leaves them); the
 * launch is ordered on its graph's one in-order stream, where it has one. */
static int rf__glaunch_fill(struct rf_op *op, const struct rf_op_desc *d)
{
	struct rf__glaunch *L = op->arg.gl;
	uint32_t n = d->nwrites + d->nreads, i;

	L->macro = op;
	op->qstream = L->g->single ? L->g->single : op->stream;
	if (n > op->cap_ent) {
		op->ent = L->ents;
		op->cap_ent = n;
	}
	for (i = 0; i < n; i++) {
		struct rf__entry *en = &op->ent[i];
		en->op = op;
		en->var = i < d->nwrites ? d->writes[i] : d->reads[i - d->nwrites];
		en->write = i < d->nwrites;
	}
	op->nent = n;
	return 0;
}

/* Its stream took it: its ops go on their own (graph stream); nothing to chain yet. */
static void rf__glaunch_enqueued(struct rf_engine *e, struct rf_op *op)
{
	(void)e;
	(void)op;
}

/* A launch that chained behind its predecessors is at every front now: its ops'
 * completions, held until its inputs' poison was final, go on. */
static void rf__glaunch_at_front(struct rf_engine *e, struct rf_op *op)
{
	struct rf__glaunch *L = op->arg.gl;
	struct rf_op *d;

	L->at_front = 1;
	while ((d = rf__oplist_pop(&L->deferred)))
		rf__oplist_push(&e->finished, d);
}

/* The launch left the queues: its block is free again. */
static void rf__glaunch_finished(struct rf_engine *e, struct rf_op *op)
{
	e->inflight -= rf__glaunch_extra(op->arg.gl->g);
	rf__glaunch_release(op->arg.gl);
}

/* Every op that depends on node i follows it on its in-order stream. */
static int rf__gnode_quiet(const struct rf_op *op)
{
	return op->arg.node.gl->g->nodes[op->arg.node.i].quiet;
}

static int rf__gnode_graph(const struct rf_op *op, struct rf_op_graph *out)
{
	const struct rf_graph *g = op->arg.node.gl->g;

	if (!g->one_stream)
		return 0;
	out->id = g->id;
	out->index = op->arg.node.i;
	out->n = g->n;
	return 1;
}

/* A graph launch: engine-made (its captured ops are what the stats count), traced. */
const struct rf__opkind rf__kind_launch = {
	.name = "graph launch", .traced = 1, .prechecked = 1, .own_entries = 1,
	.fill = rf__glaunch_fill, .enqueued = rf__glaunch_enqueued,
	.at_front = rf__glaunch_at_front, .finished = rf__glaunch_finished,
};

/* One of a launch's ops: dispatched, chained, reported and finished by the launch. */
const struct rf__opkind rf__kind_node = {
	.name = "graph op", .counted = 1, .traced = 1,
	.skip = rf__gnode_dispatch, .enqueued = rf__gnode_chain,
	.reported = rf__gnode_reported, .finish = rf__gnode_finish,
	.quiet = rf__gnode_quiet, .graph = rf__gnode_graph,
};
