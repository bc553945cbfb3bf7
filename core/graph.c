/* core/graph.c -- capture and replay (engine.h, capture and replay): beginning
 * and ending a capture, turning the recording into a graph with its dependencies
 * precomputed, launching it (one macro op on the graph's variables, bound per launch),
 * destroying it. Running a launch: graph-run.c. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph-impl.h"
#include "rf-internal.h"

static _Atomic uint64_t rf__graph_ids; /* rf_graph.id: unique in the process */

static int rf__cap_refused(struct rf_engine *e, const char *what)
{
	if (rf__gettid() != e->owner_tid)
		return rf__fail(-EDEADLK, "%s called from a thread other than the engine's "
				"reactor thread: refused", what);
	if (rf__in_callback(e))
		return rf__fail(-EBUSY, "%s called from inside an engine op, done callback or "
				"ring callback: refused (capture and launch from the code that "
				"pushes)", what);
	return 0;
}

int rf_engine_capture_begin(struct rf_engine *e, const struct rf_capture_opts *o)
{
	struct rf__capture *c;
	int ret;

	if (!e)
		return rf__fail(-EINVAL, "rf_engine_capture_begin: e is NULL");
	if ((ret = rf__cap_refused(e, "rf_engine_capture_begin")) < 0)
		return ret;
	if (e->cap)
		return rf__fail(-EBUSY, "rf_engine_capture_begin: a capture is already "
				"recording (end it first; captures do not nest)");
	if (o && o->args_size > ((size_t)1 << 30))
		return rf__fail(-EINVAL, "rf_engine_capture_begin: args_size %zu is above the "
				"limit of 1 GiB (arguments are copied at every launch)",
				o->args_size);
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->name = strdup(o && o->name ? o->name : "graph");
	c->args_size = o ? o->args_size : 0;
	if (!c->name || (c->args_size && !(c->args = calloc(1, c->args_size))) ||
	    (c->args_size && (ret = rf_var_create(e, "graph arguments", &c->args_var)) < 0)) {
		rf__capture_free(c);
		return -ENOMEM;
	}
	e->cap = c;
	return 0;
}

void *rf_engine_capture_args(struct rf_engine *e, struct rf_var **args_var)
{
	if (args_var)
		*args_var = e && e->cap ? e->cap->args_var : NULL;
	return e && e->cap ? e->cap->args : NULL;
}

/* ---- from the recording to a graph ---- */

struct rf__edges {
	uint32_t (*pair)[2];
	uint32_t n, cap;
};

static int rf__edge_add(struct rf__edges *E, uint32_t *stamp, uint32_t p, uint32_t s)
{
	if (stamp[p] == s + 1)
		return 0;
	stamp[p] = s + 1;
	if (E->n == E->cap) {
		uint32_t nc = E->cap ? 2 * E->cap : 256;
		void *n = nc > E->cap ? realloc(E->pair, (size_t)nc * sizeof(*E->pair)) : NULL;
		if (!n)
			return -ENOMEM;
		E->pair = n;
		E->cap = nc;
	}
	E->pair[E->n][0] = p;
	E->pair[E->n][1] = s;
	E->n++;
	return 0;
}

/* The dependencies of the serial program, as the queues would find them: a read after
 * the last write, a write after the last write and every read since. Sets each
 * entry's producer and each variable's last write. */
static int rf__graph_edges(struct rf_graph *g, struct rf__edges *E)
{
	uint32_t *lastw = malloc((size_t)g->nvar * sizeof(*lastw) + 1);
	uint32_t *rhead = malloc((size_t)g->nvar * sizeof(*rhead) + 1);
	uint32_t *rnext = malloc((size_t)g->nent * sizeof(*rnext) + 1);
	uint32_t *node_of = malloc((size_t)g->nent * sizeof(*node_of) + 1);
	uint32_t *stamp = calloc((size_t)g->n + 1, sizeof(*stamp));
	int ret = -ENOMEM;

	if (!lastw || !rhead || !rnext || !node_of || !stamp)
		goto out;
	for (uint32_t x = 0; x < g->nvar; x++)
		lastw[x] = rhead[x] = RF__GNONE;
	for (uint32_t i = 0; i < g->n; i++) {
		const struct rf__gnode *nd = &g->nodes[i];
		for (uint32_t j = nd->ent0; j < nd->ent0 + nd->nent; j++) {
			struct rf__gent *en = &g->ent[j];
			uint32_t x = en->var;

			node_of[j] = i;
			en->prod = lastw[x];
			if (en->prod != RF__GNONE &&
			    (ret = rf__edge_add(E, stamp, node_of[en->prod], i)) < 0)
				goto out;
			if (!en->write) {
				rnext[j] = rhead[x];
				rhead[x] = j;
				continue;
			}
			for (uint32_t r = rhead[x]; r != RF__GNONE; r = rnext[r])
				if ((ret = rf__edge_add(E, stamp, node_of[r], i)) < 0)
					goto out;
			rhead[x] = RF__GNONE;
			lastw[x] = j;
		}
	}
	for (uint32_t x = 0; x < g->nvar; x++)
		g->vars[x].last = lastw[x];
	ret = 0;
out:
	free(lastw);
	free(rhead);
	free(rnext);
	free(node_of);
	free(stamp);
	return ret;
}

/* Successor and predecessor lists (grouped per node), same-stream flags, roots. */
static int rf__graph_lists(struct rf_graph *g, const struct rf__edges *E)
{
	uint32_t *fill = calloc((size_t)g->n + 1, sizeof(*fill));
	uint32_t nr = 0;

	g->nedge = E->n;
	g->succ = malloc((size_t)E->n * sizeof(*g->succ) + 1);
	g->succ_same = malloc((size_t)E->n + 1);
	g->pred = malloc((size_t)E->n * sizeof(*g->pred) + 1);
	g->roots = malloc((size_t)g->n * sizeof(*g->roots) + 1);
	g->npred = malloc((size_t)g->n * sizeof(*g->npred) + 1);
	if (!fill || !g->succ || !g->succ_same || !g->pred || !g->roots || !g->npred) {
		free(fill);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < E->n; k++) {
		g->nodes[E->pair[k][0]].nsucc++;
		g->nodes[E->pair[k][1]].npred++;
	}
	for (uint32_t i = 0, so = 0, po = 0; i < g->n; i++) {
		g->nodes[i].succ0 = so;
		g->nodes[i].pred0 = po;
		so += g->nodes[i].nsucc;
		po += g->nodes[i].npred;
		g->npred[i] = g->nodes[i].npred;
		if (!g->nodes[i].npred)
			g->roots[nr++] = i;
	}
	g->nroots = nr;
	for (uint32_t k = 0; k < E->n; k++) { /* succ: in the order edges were found */
		uint32_t p = E->pair[k][0], s = E->pair[k][1];
		struct rf_stream *ps = g->nodes[p].stream;
		uint32_t at = g->nodes[p].succ0 + fill[p]++;
		g->succ[at] = s;
		g->succ_same[at] = ps == g->nodes[s].stream && (ps->flags & RF_STREAM_IN_ORDER);
	}
	for (uint32_t i = 0; i < g->n; i++) {
		struct rf__gnode *nd = &g->nodes[i];
		nd->quiet = nd->nsucc != 0;
		for (uint32_t k = nd->succ0; nd->quiet && k < nd->succ0 + nd->nsucc; k++)
			nd->quiet = g->succ_same[k];
	}
	memset(fill, 0, (size_t)g->n * sizeof(*fill));
	for (uint32_t k = 0; k < E->n; k++) {
		uint32_t p = E->pair[k][0], s = E->pair[k][1];
		g->pred[g->nodes[s].pred0 + fill[s]++] = p;
	}
	free(fill);
	return 0;
}

static int rf__graph_build(struct rf_engine *e, struct rf__capture *c, struct rf_graph **out)
{
	struct rf_graph *g = calloc(1, sizeof(*g));
	struct rf__edges E = { 0 };
	int ret = -ENOMEM;

	if (!g)
		return -ENOMEM;
	g->eng = e;
	g->n = c->n;
	g->nent = c->nent;
	g->nvar = c->nvar;
	g->nodes = c->nodes;         /* the recording's arrays move to the graph */
	g->ent = c->ent;
	g->name = c->name;
	g->args = c->args;
	g->args_size = c->args_size;
	g->args_var = c->args_var;
	c->nodes = NULL;
	c->ent = NULL;
	c->name = NULL;
	c->args = NULL;
	if (!(g->vars = calloc((size_t)g->nvar + 1, sizeof(*g->vars))))
		goto fail;
	for (uint32_t x = 0; x < g->nvar; x++)
		g->vars[x].v = c->vars[x];
	for (uint32_t i = 0; i < g->n; i++)   /* saturating: a cap, not an account */
		g->bytes = g->nodes[i].bytes > SIZE_MAX - g->bytes ? SIZE_MAX
								   : g->bytes + g->nodes[i].bytes;
	if ((ret = rf__graph_edges(g, &E)) < 0 || (ret = rf__graph_lists(g, &E)) < 0)
		goto fail;
	g->one_stream = g->n != 0;
	for (uint32_t i = 1; g->one_stream && i < g->n; i++)
		g->one_stream = g->nodes[i].stream == g->nodes[0].stream;
	g->single = g->one_stream && !g->args_size &&
		    (g->nodes[0].stream->flags & RF_STREAM_IN_ORDER) ? g->nodes[0].stream : NULL;
	g->id = atomic_fetch_add(&rf__graph_ids, 1) + 1;
	free(E.pair);
	g->next = e->graphs;    /* the engine's: destroyed with it if the caller does not */
	if (g->next)
		g->next->prev = g;
	e->graphs = g;
	*out = g;
	return 0;
fail:
	free(E.pair);
	rf__graph_free(g); /* calls the recorded ops' done callbacks, as an ended capture must */
	return ret;
}

int rf_engine_capture_end(struct rf_engine *e, struct rf_graph **out)
{
	struct rf__capture *c;
	int ret;

	if (out)
		*out = NULL;
	if (!e || !out)
		return rf__fail(-EINVAL, "rf_engine_capture_end: %s is NULL", e ? "out" : "e");
	if (!(c = e->cap))
		return rf__fail(-EINVAL, "rf_engine_capture_end: no capture is recording");
	if ((ret = rf__cap_refused(e, "rf_engine_capture_end")) < 0)
		return ret;  /* an op or callback of the program before it: not its capturer */
	e->cap = NULL;
	/* a variable destroyed while recording is gone once the capture ends: a graph that
	 * names it would launch on a freed variable */
	struct rf_var *gone = c->err ? NULL : rf__capture_deleted_used(c);
	if (c->err || gone) { /* the graph would not be the program */
		char name[96], what[160];
		snprintf(name, sizeof(name), "%s", c->name);
		if (gone)
			snprintf(what, sizeof(what), "variable '%s', which the recorded ops use, "
				 "was destroyed while capturing", gone->name);
		else
			snprintf(what, sizeof(what), "a push was refused while capturing (%s)",
				 strerror(-c->err));
		ret = gone ? -EBUSY : c->err;
		rf__capture_cancel(e, c);  /* the recorded ops never run: -ECANCELED */
		(void)rf__capture_push_deletes(e, c);
		if (c->args_var)
			rf_var_destroy(e, c->args_var, NULL, NULL, NULL);
		rf__capture_free(c);
		return rf__fail(ret, "rf_engine_capture_end(%s): %s: no graph", name, what);
	}
	ret = rf__graph_build(e, c, out);
	/* after the ops it holds (none names them); a deletion that cannot be pushed
	 * leaves its variable, said in the log */
	if (rf__capture_push_deletes(e, c) < 0)
		rf__log(RF_LOG_ERROR, "rf_engine_capture_end: %s", rf_last_error());
	if (ret < 0 && c->args_var)
		rf_var_destroy(e, c->args_var, NULL, NULL, NULL);
	rf__capture_free(c);
	return ret;
}

/* ---- launching ---- */

static struct rf__glaunch *rf__glaunch_new(struct rf_graph *g)
{
	struct rf__glaunch *L = calloc(1, sizeof(*L));
	size_t n = (size_t)g->n + 1, nv = (size_t)g->nvar + 1;

	if (!L)
		return NULL;
	L->g = g;
	L->ops = malloc(n * sizeof(*L->ops));
	L->pend_disp = malloc(n * sizeof(*L->pend_disp));
	L->pend_fin = malloc(n * sizeof(*L->pend_fin));
	L->reported = malloc(n);
	L->chained = malloc((size_t)g->nedge + 1);
	L->ver_err = malloc(((size_t)g->nent + 1) * sizeof(*L->ver_err));
	L->ver_name = malloc(((size_t)g->nent + 1) * sizeof(*L->ver_name));
	L->init_err = malloc(nv * sizeof(*L->init_err));
	L->init_name = malloc(nv * sizeof(*L->init_name));
	L->bound = malloc(nv * sizeof(*L->bound));
	L->rd = malloc(nv * sizeof(*L->rd));
	L->wr = malloc((nv + 1) * sizeof(*L->wr));
	L->ents = malloc((nv + 1) * sizeof(*L->ents));
	L->fast = malloc(n);
	L->runq = malloc(n * sizeof(*L->runq));
	L->args = malloc(g->args_size + 1);
	if (!L->ops || !L->pend_disp || !L->pend_fin || !L->reported || !L->chained ||
	    !L->ver_err || !L->ver_name || !L->init_err || !L->init_name || !L->bound ||
	    !L->rd || !L->wr || !L->ents || !L->fast || !L->runq || !L->args) {
		rf__glaunch_free(L);
		return NULL;
	}
	rf__glaunch_init_ops(g->eng, L);
	return L;
}

static int rf__gvar_index(const struct rf_graph *g, const struct rf_var *v)
{
	for (uint32_t x = 0; x < g->nvar; x++)
		if (g->vars[x].v == v)
			return (int)x;
	return -1;
}

/* The variables this launch stands on: the captured ones, with binds applied. */
static int rf__glaunch_bind(struct rf_graph *g, struct rf__glaunch *L,
			    const struct rf_graph_bind *b, unsigned nb)
{
	for (uint32_t x = 0; x < g->nvar; x++)
		L->bound[x] = g->vars[x].v;
	for (unsigned i = 0; i < nb; i++) {
		int x = b[i].captured ? rf__gvar_index(g, b[i].captured) : -1;
		if (x < 0 || b[i].captured == g->args_var)
			return rf__fail(-EINVAL, "rf_graph_launch(%s): bind %u: variable '%s' is "
					"not one the graph's ops use%s", g->name, i,
					b[i].captured ? rf_var_name(b[i].captured) : "(null)",
					b[i].captured && b[i].captured == g->args_var ?
					" (the arguments' variable is bound by the arguments)" : "");
		if (!b[i].actual || b[i].actual->eng != g->eng || b[i].actual == g->args_var)
			return rf__fail(-EINVAL, "rf_graph_launch(%s): bind %u: no variable of "
					"this engine to put in place of '%s'", g->name, i,
					rf_var_name(b[i].captured));
		L->bound[x] = b[i].actual;
	}
	for (unsigned i = 0; i < nb; i++) {
		int x = rf__gvar_index(g, b[i].captured);
		for (uint32_t y = 0; y < g->nvar; y++)
			if ((int)y != x && L->bound[y] == b[i].actual)
				return rf__fail(-EINVAL, "rf_graph_launch(%s): bind %u puts '%s' "
						"where the graph has two distinct variables ('%s' "
						"and '%s'): their order was not captured",
						g->name, i, rf_var_name(b[i].actual),
						rf_var_name(g->vars[x].v), rf_var_name(g->vars[y].v));
	}
	/* a variable whose deletion is queued is freed when it runs (as a push refuses) */
	for (uint32_t x = 0; x < g->nvar; x++)
		if (L->bound[x]->deleting)
			return rf__fail(-EINVAL, "rf_graph_launch(%s): variable '%s' is being "
					"destroyed (rf_var_destroy was called): expected a live "
					"variable", g->name, rf_var_name(L->bound[x]));
	L->nrd = L->nwr = 0;
	for (uint32_t x = 0; x < g->nvar; x++) {
		if (g->vars[x].v == g->args_var)
			continue;
		if (g->vars[x].last != RF__GNONE)
			L->wr[L->nwr++] = L->bound[x];
		else
			L->rd[L->nrd++] = L->bound[x];
	}
	if (g->args_var) /* written: launches take turns with the one buffer */
		L->wr[L->nwr++] = g->args_var;
	return 0;
}

int rf_graph_launch(struct rf_graph *g, const void *args, const struct rf_graph_bind *binds,
		    unsigned nbinds)
{
	struct rf_engine *e;
	struct rf__glaunch *L;
	struct rf__waiter *w = NULL;
	struct rf_op_desc d = { 0 };
	int ret;

	if (!g || g->doomed || (nbinds && !binds))
		return rf__fail(-EINVAL, "rf_graph_launch: %s", !g ? "g is NULL" : g->doomed ?
				"the graph is being destroyed" : "binds is NULL with nbinds > 0");
	e = g->eng;
	if (e->cap && !rf__in_callback(e))
		return rf__fail(-EBUSY, "rf_graph_launch(%s) while a capture is recording: "
				"refused (graphs do not nest)", g->name);
	if (rf__gettid() != e->owner_tid)  /* as a push from there (engine.h) */
		return rf__fail(-EPERM, "rf_graph_launch(%s) from a thread other than the "
				"engine's reactor thread: refused", g->name);
	/* Room first (it may turn the reactor, whose callbacks may destroy g or a variable
	 * to bind): g held meanwhile, the binds checked after. An empty graph's macro op
	 * still counts one. */
	g->inflight++;
	ret = rf__room_for(e, NULL, binds, nbinds, g->n ? g->n : 1, g->bytes);
	if (g->doomed) {
		if (--g->inflight == 0)
			rf__graph_free(g);
		return rf__fail(-EINVAL, "rf_graph_launch: the graph was destroyed while the "
				"launch waited for room under the in-flight cap");
	}
	g->inflight--;
	if (ret < 0)
		return ret;
	if ((L = g->free_launches))
		g->free_launches = L->next;
	else if (!(L = rf__glaunch_new(g)))
		return -ENOMEM;
	L->next = NULL;
	if ((ret = rf__glaunch_bind(g, L, binds, nbinds)) < 0)
		goto back;
	L->has_args = args != NULL;
	if (g->args_size && args)
		memcpy(L->args, args, g->args_size);
	if (e->sync && !rf__in_callback(e) && !(w = calloc(1, sizeof(*w)))) {
		ret = -ENOMEM;
		goto back;
	}
	d.reads = L->rd;
	d.nreads = L->nrd;
	d.writes = L->wr;
	d.nwrites = L->nwr;
	d.stream = &e->graph_stream;
	d.name = "graph launch";
	d.bytes = g->bytes;
	d.flags = RF_OP_ALWAYS; /* each captured op decides on its own inputs' poison */
	g->inflight++;
	L->macro = NULL;
	e->inflight += rf__glaunch_extra(g);  /* the macro op adds itself */
	if ((ret = rf__push_op(e, &d, &rf__kind_launch, L, w)) < 0) {
		e->inflight -= rf__glaunch_extra(g);
		g->inflight--;
		free(w);
		goto back;
	}
	e->st.pushed += g->n;
	e->st.graph_launches++;
	if (w)
		(void)rf__wait_waiter(e, w, NULL);
	return 0;
back:
	L->next = g->free_launches;
	g->free_launches = L;
	return ret;
}

void rf_graph_destroy(struct rf_graph *g)
{
	if (!g || g->doomed)
		return;
	if (rf__gettid() != g->eng->owner_tid) {  /* its engine's lists, its callbacks */
		rf__log(RF_LOG_ERROR, "rf_graph_destroy(%s) from a thread other than the "
			"engine's reactor thread: refused, the graph left as it was", g->name);
		return;
	}
	g->doomed = 1;
	g->inflight++; /* the deletion's push may turn the reactor: launches may end */
	if (g->args_var) { /* after every launch: each wrote it */
		struct rf__capture *c = g->eng->cap; /* a real op, even during a capture */
		g->eng->cap = NULL;
		rf_var_destroy(g->eng, g->args_var, NULL, NULL, NULL);
		g->eng->cap = c;
	}
	g->args_var = NULL;
	if (--g->inflight == 0)
		rf__graph_free(g);
}

unsigned rf_graph_size(const struct rf_graph *g)
{
	return g ? g->n : 0;
}
