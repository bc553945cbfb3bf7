/* test-engine-gather: the protocol a stream relies on to run a graph launch as one
 * unit (the CUDA stream's CUDA graphs, devices/README.md): rf_op_graph, the order of
 * a launch's ops, and the flush hook.
 *
 * A test stream gathers the ops rf_op_graph names, and runs what it holds (in
 * order, reporting each) when it has the whole launch, when an op of something else
 * arrives, or at its flush call. Checked: a launch of a graph on that one stream
 * arrives whole, in one dispatch round, in the same order every time, and the values
 * are the op-by-op program's with ops pushed between launches; a graph that also uses
 * another stream, a plain op, and any op while tracing are not named; a launch whose
 * first op is skipped (its input poisoned) arrives in part, and the flush call runs
 * that part: no hang, the poison where the serial program puts it. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "stream.h"
#include "../test-util.h"

#define MAXH 64

struct gstream {
	struct rf_stream s;
	struct rf_op *held[MAXH];
	uint32_t idx[MAXH];
	int nheld;
	uint64_t gid;
	uint32_t gn;
	uint32_t first[MAXH];      /* the first whole launch's order */
	int have_first;
	int whole, partial, flushes, named, order_diff;
};

static void g_run_held(struct gstream *g)
{
	int n = g->nheld;

	g->nheld = 0;
	for (int i = 0; i < n; i++)
		rf_engine_op_done(g->held[i], rf_op_execute(g->held[i]));
}

static int g_enqueue(struct rf_stream *s, struct rf_op *op)
{
	struct gstream *g = s->ctx;
	struct rf_op_graph gi;

	if (!rf_op_graph(op, &gi)) {
		g_run_held(g); /* in order: what was gathered first */
		rf_engine_op_done(op, rf_op_execute(op));
		return 0;
	}
	g->named++;
	if (g->nheld && gi.id != g->gid)
		g_run_held(g);
	CHECK(g->nheld < MAXH);
	g->gid = gi.id;
	g->gn = gi.n;
	g->idx[g->nheld] = gi.index;
	g->held[g->nheld++] = op;
	if ((uint32_t)g->nheld == gi.n) {
		if (!g->have_first) {
			memcpy(g->first, g->idx, gi.n * sizeof(*g->idx));
			g->have_first = 1;
		} else if (memcmp(g->first, g->idx, gi.n * sizeof(*g->idx))) {
			g->order_diff++;
		}
		g->whole++;
		g_run_held(g);
	}
	return 0;
}

static void g_flush(struct rf_stream *s)
{
	struct gstream *g = s->ctx;

	g->flushes++;
	if (g->nheld) {
		g->partial++;
		g_run_held(g);
	}
}

static void g_destroy(struct rf_stream *s)
{
	free(s->ctx);
}

static const struct rf_stream_ops g_ops = {
	.enqueue = g_enqueue, .destroy = g_destroy, .flush = g_flush,
};

static struct gstream *g_create(struct rf_engine *e)
{
	struct gstream *g = calloc(1, sizeof(*g));

	CHECK(g != NULL);
	g->s.ops = &g_ops;
	g->s.ctx = g;
	g->s.name = "gather";
	g->s.flags = RF_STREAM_IN_ORDER;
	CHECK_OK(rf_engine_add_stream(e, &g->s));
	return g;
}

/* ---- a program over three variables --------------------------------------------- */

struct st {
	uint64_t a, b, c;
};

struct sop {
	struct st *st;
	int k;
	int fail;
};

/* op k: 0 a = a * 3 + 1; 1 b = b * 5 + a; 2 c = c + b; 3 a = a ^ c; 4 b = b + 7;
 * 5 (outside the graph) c = c * 11 + a; 6 (failing, outside) writes a */
static int sop_fn(void *arg)
{
	struct sop *o = arg;
	struct st *s = o->st;

	if (o->fail)
		return -EIO;
	switch (o->k) {
	case 0: s->a = s->a * 3 + 1; break;
	case 1: s->b = s->b * 5 + s->a; break;
	case 2: s->c = s->c + s->b; break;
	case 3: s->a ^= s->c; break;
	case 4: s->b += 7; break;
	default: s->c = s->c * 11 + s->a; break;
	}
	return 0;
}

static void sop_push(struct rf_engine *e, struct rf_stream *s, struct rf_var **v, struct sop *o)
{
	static const int rd[6][2] = { { 0, -1 }, { 1, 0 }, { 2, 1 }, { 0, 2 }, { 1, -1 }, { 2, 0 } };
	static const int wr[6] = { 0, 1, 2, 0, 1, 2 };
	struct rf_var *r[2];
	int nr = 0;

	for (int j = 0; j < 2; j++)
		if (rd[o->k][j] >= 0)
			r[nr++] = v[rd[o->k][j]];
	CHECK_OK(rf_engine_push(e, &(struct rf_op_desc){ .fn = sop_fn, .ctx = o, .reads = r,
			.nreads = nr, .writes = &v[wr[o->k]], .nwrites = 1, .stream = s,
			.name = "sop" }));
}

/* ITERS iterations of ops 0..4, op 5 after every third; op by op or replayed. */
static void prog_run(int replay, struct st *out, struct gstream **gout)
{
	enum { ITERS = 30 };
	static struct sop ops[ITERS][5], gops[5], outside[ITERS];
	struct rf_ring *ring;
	struct rf_engine *e;
	struct gstream *g;
	struct rf_var *v[3];
	struct rf_graph *gr = NULL;
	struct st st = { 1, 2, 3 };

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	g = g_create(e);
	for (int i = 0; i < 3; i++)
		CHECK_OK(rf_var_create(e, NULL, &v[i]));
	if (replay) {
		CHECK_OK(rf_engine_capture_begin(e, NULL));
		for (int k = 0; k < 5; k++) {
			gops[k] = (struct sop){ &st, k, 0 };
			sop_push(e, &g->s, v, &gops[k]);
		}
		CHECK_OK(rf_engine_capture_end(e, &gr));
	}
	for (int it = 0; it < ITERS; it++) {
		if (replay)
			CHECK_OK(rf_graph_launch(gr, NULL, NULL, 0));
		for (int k = 0; !replay && k < 5; k++) {
			ops[it][k] = (struct sop){ &st, k, 0 };
			sop_push(e, &g->s, v, &ops[it][k]);
		}
		if (it % 3 == 2) {
			outside[it] = (struct sop){ &st, 5, 0 };
			sop_push(e, &g->s, v, &outside[it]);
		}
	}
	CHECK_OK(rf_engine_wait_all(e));
	*out = st;
	*gout = malloc(sizeof(**gout));
	**gout = *g;
	rf_graph_destroy(gr);
	for (int i = 0; i < 3; i++)
		CHECK_OK(rf_var_destroy(e, v[i], NULL, NULL, NULL));
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
}

static void test_whole_launches(void)
{
	struct st a, b;
	struct gstream *ga, *gb;

	prog_run(0, &a, &ga);
	prog_run(1, &b, &gb);
	CHECK_EQ(a.a, b.a);
	CHECK_EQ(a.b, b.b);
	CHECK_EQ(a.c, b.c);
	CHECK_EQ(ga->named, 0);          /* op by op: nothing is a graph's */
	CHECK_EQ(gb->named, 30 * 5);
	CHECK_EQ(gb->whole, 30);         /* each launch whole, in one round */
	CHECK_EQ(gb->partial, 0);
	CHECK_EQ(gb->order_diff, 0);
	CHECK(gb->flushes >= 30);
	fprintf(stderr, "  30 launches of a 5-op graph: each gathered whole in one round, the "
		"same order; values as op by op (%d flush calls)\n", gb->flushes);
	free(ga);
	free(gb);
}

/* A graph on the gather stream and a worker stream, and any op while tracing: not
 * named. A launch whose root is skipped arrives in part: the flush runs it. */
static void test_not_named_and_partial(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct gstream *g;
	struct rf_stream *w;
	struct rf_var *v[3];
	struct rf_graph *gr;
	struct st st = { 1, 2, 3 };
	static struct sop o[5], bad = { NULL, 0, 1 };
	const char *name;

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	g = g_create(e);
	CHECK_OK(rf_worker_stream_create(e, "w", 16, &w));
	for (int i = 0; i < 3; i++)
		CHECK_OK(rf_var_create(e, NULL, &v[i]));

	/* two streams */
	CHECK_OK(rf_engine_capture_begin(e, NULL));
	for (int k = 0; k < 5; k++) {
		o[k] = (struct sop){ &st, k, 0 };
		sop_push(e, k == 2 ? w : &g->s, v, &o[k]);
	}
	CHECK_OK(rf_engine_capture_end(e, &gr));
	CHECK_OK(rf_graph_launch(gr, NULL, NULL, 0));
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(g->named, 0);
	rf_graph_destroy(gr);

	/* one stream, while tracing; op 4 first: two roots (ops 4 and 0) */
	CHECK_OK(rf_engine_capture_begin(e, NULL));
	for (int k = 0; k < 5; k++)
		sop_push(e, &g->s, v, &o[(k + 4) % 5]);
	CHECK_OK(rf_engine_capture_end(e, &gr));
	char tpath[] = "/tmp/rf-gather-trace-XXXXXX";
	int tfd = mkstemp(tpath);
	CHECK(tfd >= 0);
	close(tfd);
	CHECK(rf_engine_trace_start(e, NULL) == -EINVAL);
	CHECK_OK(rf_engine_trace_start(e, tpath));
	CHECK_OK(rf_graph_launch(gr, NULL, NULL, 0));
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(g->named, 0);
	CHECK_OK(rf_engine_trace_stop(e));
	unlink(tpath);
	CHECK_OK(rf_graph_launch(gr, NULL, NULL, 0));
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(g->named, 5);
	CHECK_EQ(g->whole, 1);

	/* a poisoned a: root op 0 is skipped; root op 4 arrives, and the ops behind it
	 * (their producer unfinished, so not skipped), poisoned when they finish: the
	 * launch arrives in part, and the flush call runs it */
	bad.st = &st;
	sop_push(e, &g->s, v, &bad);
	CHECK(rf_engine_wait_all(e) == -EIO);
	int before = g->named;
	CHECK_OK(rf_graph_launch(gr, NULL, NULL, 0));
	CHECK(rf_engine_wait_all(e) == -EIO);
	CHECK_EQ(g->nheld, 0);           /* nothing left held */
	CHECK_EQ(g->named - before, 4);  /* the skipped op never arrives */
	CHECK_EQ(g->partial, 1);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(rf_var_error(v[i], &name), -EIO);
	/* the same launch with a clean slate arrives whole again */
	for (int i = 0; i < 3; i++)
		CHECK_OK(rf_var_clear_error(e, v[i]));
	before = g->whole;
	CHECK_OK(rf_graph_launch(gr, NULL, NULL, 0));
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(g->whole, before + 1);
	fprintf(stderr, "  not named: a two-stream graph, a traced launch; a launch with its "
		"root skipped: %d partial run(s) at flush, poison as serial\n", g->partial);
	rf_graph_destroy(gr);
	for (int i = 0; i < 3; i++)
		CHECK_OK(rf_var_destroy(e, v[i], NULL, NULL, NULL));
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
}

int main(void)
{
	test_whole_launches();
	test_not_named_and_partial();
	return 0;
}
