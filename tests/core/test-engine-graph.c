/* test-engine-graph: capture and replay against the serial program.
 *
 * A random program of P ops over 20 variables and one placeholder (bound, per
 * iteration, to one of three "slot" variables, as a training step binds its batch),
 * on the inline stream, the async stream, two worker streams and two late streams
 * (tests/core/late-stream.h: in order, chained to each other, reporting late and out
 * of order). Ops read the iteration and slot from their arguments, fail now and then
 * (a function of the op and the iteration), some overwrite (RF_OP_OVERWRITE) and some
 * reset whatever they find (RF_OP_ALWAYS). Between iterations an op pushed outside the
 * graph reads and writes graph variables. The same ITERS iterations run pushed op by
 * op, and as one capture launched ITERS times (normal and synchronous mode); after
 * each run every variable's poison (error and op name) must be the serial program's,
 * and the contents of every unpoisoned variable must be identical. Then: what is
 * refused during a capture, binds that are refused, arguments, a graph destroyed with
 * launches in flight (each captured op's done callback runs once, after them), an
 * empty graph, a trace of replays, and a chain on a worker stream, replayed and op by
 * op, reported in order with at most one wake-up signal per op (the worker reports
 * through memory and signals only a parked reactor: test-engine-park). */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "log.h"
#include "late-stream.h"
#include "../test-util.h"

#define NV 20
#define NSLOT 3
#define NALL (NV + NSLOT)
#define PH NV            /* the placeholder's index in a program */
#define LEN 8
#define P 80
#define ITERS 48
#define PHASES 8         /* after each: wait, compare, clear every poison */
#define PER (ITERS / PHASES)
#define NSTREAMS 6       /* inline, async, 2 workers, 2 late */

struct gop {
	int nr, nw;
	int r[3], w[2];
	int stream;
	uint32_t salt;
	unsigned flags;
	char name[16];
};

struct args {
	int it, slot;
};

struct octx {
	const struct gop *op;
	const struct args *a;
	uint32_t (*data)[LEN];
	int *done_calls;
};

static int resolve(int v, int slot)
{
	return v == PH ? NV + slot : v;
}

static int fails(const struct gop *op, int it)
{
	return !(op->flags & RF_OP_ALWAYS) && (op->salt ^ ((uint32_t)it * 2654435761u)) % 211 == 0;
}

/* The op's effect on the data (not called for a failing op). */
static void apply(const struct gop *op, const struct args *a, uint32_t (*data)[LEN])
{
	for (int k = 0; k < op->nw; k++) {
		uint32_t *w = data[resolve(op->w[k], a->slot)];
		for (int j = 0; j < LEN; j++) {
			uint32_t acc = op->salt + (uint32_t)j + (uint32_t)a->it * 7919u;
			if (op->flags & RF_OP_ALWAYS) { /* a reset: reads nothing */
				w[j] = acc;
				continue;
			}
			if (!(op->flags & RF_OP_OVERWRITE))
				acc ^= w[j] * 2654435761u;
			for (int i = 0; i < op->nr; i++)
				acc = (acc ^ data[resolve(op->r[i], a->slot)][j]) * 16777619u;
			w[j] = acc;
		}
	}
}

static int op_fn(void *p)
{
	struct octx *c = p;

	if (fails(c->op, c->a->it))
		return -EIO;
	apply(c->op, c->a, c->data);
	return 0;
}

static int op_afn(void *p, struct rf_op *op)
{
	rf_engine_op_done(op, op_fn(p));
	return 0;
}

static void op_done(void *p, int status)
{
	struct octx *c = p;

	(void)status;
	if (c->done_calls)
		(*c->done_calls)++;
}

static void make_program(struct gop *ops, int n, unsigned long long s)
{
	for (int i = 0; i < n; i++) {
		struct gop *o = &ops[i];
		memset(o, 0, sizeof(*o));
		o->nw = 1 + (int)(t_splitmix64(&s) % 2);
		for (int k = 0; k < o->nw; k++)
			o->w[k] = (int)(t_splitmix64(&s) % (NV + 1));
		if (o->nw == 2 && o->w[0] == o->w[1])
			o->nw = 1;
		int nr = (int)(t_splitmix64(&s) % 4);
		for (int k = 0; k < nr; k++) {
			int v = (int)(t_splitmix64(&s) % (NV + 1)), clash = 0;
			for (int q = 0; q < o->nw; q++)
				clash |= v == o->w[q];
			for (int q = 0; q < o->nr; q++)
				clash |= v == o->r[q];
			if (!clash)
				o->r[o->nr++] = v;
		}
		o->stream = (int)(t_splitmix64(&s) % NSTREAMS);
		o->salt = (uint32_t)t_splitmix64(&s);
		unsigned f = (unsigned)(t_splitmix64(&s) % 16);
		o->flags = f == 0 ? RF_OP_ALWAYS | RF_OP_OVERWRITE : f == 1 ? RF_OP_ALWAYS : f < 6 ? RF_OP_OVERWRITE : 0;
		snprintf(o->name, sizeof(o->name), "op%d", i);
	}
}

/* ---- the serial program ---- */

struct pois {
	int err;
	const char *name;
};

static int serial_failures;

static void serial_op(const struct gop *op, const struct args *a, uint32_t (*data)[LEN],
		      struct pois *pz)
{
	struct pois inh = { 0, NULL };

	if (!(op->flags & RF_OP_ALWAYS)) { /* the entries' order: writes, then reads */
		for (int k = 0; k < op->nw && !inh.err; k++)
			if (!(op->flags & RF_OP_OVERWRITE) && pz[resolve(op->w[k], a->slot)].err)
				inh = pz[resolve(op->w[k], a->slot)];
		for (int k = 0; k < op->nr && !inh.err; k++)
			if (pz[resolve(op->r[k], a->slot)].err)
				inh = pz[resolve(op->r[k], a->slot)];
	}
	if (!inh.err && fails(op, a->it)) {
		inh = (struct pois){ -EIO, op->name };
		serial_failures++;
	}
	for (int k = 0; k < op->nw; k++) {
		struct pois *w = &pz[resolve(op->w[k], a->slot)];
		if (inh.err && !w->err)
			*w = inh;
		else if (!inh.err && (op->flags & RF_OP_OVERWRITE))
			*w = (struct pois){ 0, NULL };
	}
	if (!inh.err)
		apply(op, a, data);
}

/* The op pushed between iterations, outside any graph. */
static const struct gop between = { .nr = 1, .nw = 1, .r = { 3 }, .w = { 5 }, .stream = 2,
				    .salt = 0x5eed, .name = "between" };

static void init_data(uint32_t (*data)[LEN])
{
	for (int v = 0; v < NALL; v++)
		for (int j = 0; j < LEN; j++)
			data[v][j] = (uint32_t)(v * 1000 + j);
}

struct snap {
	uint32_t data[NALL][LEN];
	struct pois pz[NALL];
	int failures;
};

/* The serial program, a snapshot after each phase (then every poison is cleared). */
static void serial_run(const struct gop *ops, struct snap *sn, const struct args *av)
{
	static uint32_t data[NALL][LEN];
	struct pois pz[NALL];

	init_data(data);
	memset(pz, 0, sizeof(pz));
	for (int ph = 0; ph < PHASES; ph++) {
		serial_failures = 0;
		for (int it = ph * PER; it < (ph + 1) * PER; it++) {
			for (int i = 0; i < P; i++)
				serial_op(&ops[i], &av[it], data, pz);
			serial_op(&between, &av[it], data, pz);
		}
		memcpy(sn[ph].data, data, sizeof(data));
		memcpy(sn[ph].pz, pz, sizeof(pz));
		sn[ph].failures = serial_failures;
		for (int v = 0; v < NALL; v++) /* reset what is poisoned (see compare) */
			if (pz[v].err) {
				pz[v] = (struct pois){ 0, NULL };
				for (int j = 0; j < LEN; j++)
					data[v][j] = (uint32_t)(v * 1000 + j);
			}
	}
}

/* ---- the engine ---- */

struct env {
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_stream *st[NSTREAMS];
	struct rf_var *v[NALL + 1]; /* the slots' variables, then the placeholder */
};

static void env_open(struct env *x, int sync, unsigned long long seed)
{
	struct rf_engine_opts eo = { .max_inflight = 256, .sync = sync };

	CHECK_OK(rf_ring_create(&x->ring, NULL));
	CHECK_OK(rf_engine_create(&x->e, x->ring, &eo));
	x->st[0] = NULL;
	x->st[1] = rf_engine_async_stream(x->e);
	CHECK_OK(rf_worker_stream_create(x->e, "w0", 64, &x->st[2]));
	CHECK_OK(rf_worker_stream_create(x->e, "w1", 64, &x->st[3]));
	x->st[4] = late_stream_create(x->e, "late0", 200, seed);
	x->st[5] = late_stream_create(x->e, "late1", 200, seed + 1);
	for (int i = 0; i <= NALL; i++) {
		char name[16];
		snprintf(name, sizeof(name), i == NALL ? "placeholder" : "v%d", i);
		CHECK_OK(rf_var_create(x->e, name, &x->v[i]));
	}
}

static void env_close(struct env *x)
{
	CHECK_OK(rf_engine_wait_idle(x->e));
	for (int i = 0; i <= NALL; i++)
		CHECK_OK(rf_var_destroy(x->e, x->v[i], NULL, NULL, NULL));
	rf_engine_destroy(x->e);
	rf_ring_destroy(x->ring);
}

/* the variable of program index v: the placeholder stays itself when capturing */
static struct rf_var *var_of(struct env *x, int v, int slot, int capturing)
{
	if (v == PH)
		return capturing ? x->v[NALL] : x->v[NV + slot];
	return x->v[v];
}

static void push_op(struct env *x, const struct gop *op, struct octx *c, int slot, int cap,
		    struct rf_var *args_var)
{
	struct rf_var *r[4], *w[2];
	struct rf_op_desc d = { 0 };
	int nr = 0;

	for (int k = 0; k < op->nr; k++)
		r[nr++] = var_of(x, op->r[k], slot, cap);
	if (args_var)
		r[nr++] = args_var;
	for (int k = 0; k < op->nw; k++)
		w[k] = var_of(x, op->w[k], slot, cap);
	d.ctx = c;
	if (op->stream == 1)
		d.afn = op_afn;
	else
		d.fn = op_fn;
	d.done = op_done;
	d.reads = r;
	d.nreads = (unsigned)nr;
	d.writes = w;
	d.nwrites = (unsigned)op->nw;
	d.stream = op->stream == 1 ? NULL : x->st[op->stream];
	d.name = op->name;
	d.flags = op->flags;
	CHECK_OK(rf_engine_push(x->e, &d));
}

static int total_poisoned, total_clean, resets;

struct reset {
	uint32_t *row;
	int v;
};

static int reset_fn(void *p)
{
	struct reset *r = p;

	for (int j = 0; j < LEN; j++)
		r->row[j] = (uint32_t)(r->v * 1000 + j);
	return 0;
}

static void reset_done(void *p, int status)
{
	(void)status;
	free(p);
}

/* Every variable against the serial program after phase ph; then each poisoned one is
 * reset, as a user recovers: its contents are unspecified (an op chained behind a
 * failed one may have run and written there), so clearing the poison alone would
 * not do -- an RF_OP_OVERWRITE | RF_OP_ALWAYS op rewrites it. */
static void compare(struct env *x, uint32_t (*data)[LEN], const struct snap *sn, int ph,
		    const char *what)
{
	const struct pois *pz = sn[ph].pz;
	uint32_t (*ref)[LEN] = (uint32_t (*)[LEN])sn[ph].data;
	int poisoned = 0;

	CHECK_EQ(rf_engine_wait_all(x->e) != 0, sn[ph].failures > 0);

	for (int v = 0; v < NALL; v++) {
		const char *name = NULL;
		int err = rf_var_error(x->v[v], &name);
		if (err != pz[v].err || (err && strcmp(name, pz[v].name) != 0)) {
			fprintf(stderr, "%s: v%d: poison %d (%s), the serial program's %d (%s)\n",
				what, v, err, err ? name : "-", pz[v].err, pz[v].err ? pz[v].name : "-");
			CHECK(0);
		}
		poisoned += err != 0;
		if (!err && memcmp(data[v], ref[v], sizeof(ref[v])) != 0) {
			fprintf(stderr, "%s: phase %d: v%d: contents differ from the serial program's\n", what, ph, v);
			CHECK(0);
		}
	}
	total_poisoned += poisoned;
	resets += poisoned;
	total_clean += NALL - poisoned;
	if (ph == PHASES - 1)
		fprintf(stderr, "  %s: every phase as serial (%d poisoned, %d identical)\n",
			what, total_poisoned, total_clean);
	for (int v = 0; v < NALL; v++) {
		struct reset *r = malloc(sizeof(*r));
		struct rf_op_desc d = { .fn = reset_fn, .ctx = r, .done = reset_done,
					.writes = &x->v[v], .nwrites = 1, .name = "reset",
					.flags = RF_OP_OVERWRITE | RF_OP_ALWAYS };
		CHECK(r);
		*r = (struct reset){ data[v], v };
		if (pz[v].err)
			CHECK_OK(rf_engine_push(x->e, &d));
		else
			free(r);
	}
	if (ph == PHASES - 1)
		total_poisoned = total_clean = 0;
}

static void run_imperative(const struct gop *ops, const struct args *av, int sync,
			   const struct snap *sn)
{
	static uint32_t data[NALL][LEN];
	static struct octx ctx[ITERS][P + 1];
	struct env x;

	init_data(data);
	env_open(&x, sync, 7);
	for (int it = 0; it < ITERS; it++) {
		for (int i = 0; i <= P; i++) {
			ctx[it][i] = (struct octx){ i < P ? &ops[i] : &between, &av[it], data, NULL };
			push_op(&x, i < P ? &ops[i] : &between, &ctx[it][i], av[it].slot, 0, NULL);
		}
		if ((it + 1) % PER == 0)
			compare(&x, data, sn, it / PER, sync ? "op by op, synchronous" : "op by op");
	}
	env_close(&x);
}

static void run_replay(const struct gop *ops, const struct args *av, int sync,
		       const struct snap *sn)
{
	static uint32_t data[NALL][LEN];
	static struct octx ctx[P];
	static struct octx bctx[ITERS];
	struct rf_capture_opts co = { .args_size = sizeof(struct args), .name = "step" };
	struct rf_engine_stats es;
	struct rf_graph *g;
	struct rf_var *args_var;
	struct args *ab;
	int done_calls = 0;
	struct env x;

	init_data(data);
	resets = 0;
	env_open(&x, sync, 11);
	CHECK_OK(rf_engine_capture_begin(x.e, &co));
	ab = rf_engine_capture_args(x.e, &args_var);
	CHECK(ab && args_var);
	for (int i = 0; i < P; i++) {
		ctx[i] = (struct octx){ &ops[i], ab, data, &done_calls };
		push_op(&x, &ops[i], &ctx[i], 0, 1, args_var);
	}
	CHECK_OK(rf_engine_capture_end(x.e, &g));
	CHECK_EQ(rf_graph_size(g), P);
	CHECK_EQ(done_calls, 0);
	for (int it = 0; it < ITERS; it++) {
		struct rf_graph_bind b = { x.v[NALL], x.v[NV + av[it].slot] };
		CHECK_OK(rf_graph_launch(g, &av[it], &b, 1));
		bctx[it] = (struct octx){ &between, &av[it], data, NULL };
		push_op(&x, &between, &bctx[it], av[it].slot, 0, NULL);
		if ((it + 1) % PER == 0)
			compare(&x, data, sn, it / PER, sync ? "replayed, synchronous" : "replayed");
	}
	rf_engine_get_stats(x.e, &es);
	CHECK_EQ(es.graph_launches, ITERS);
	CHECK_EQ(es.completed, (uint64_t)ITERS * (P + 1) + (uint64_t)resets);
	rf_graph_destroy(g);
	CHECK_EQ(done_calls, P);
	env_close(&x);
}

/* ---- the rest ---- */

static int nop(void *p)
{
	(void)p;
	return 0;
}

static int count_fn(void *p)
{
	(*(int *)p)++;
	return 0;
}

static void count_done(void *p, int status)
{
	(void)status;
	((int *)p)[1]++;
}

static void test_refusals(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_var *a, *b, *c;
	struct rf_graph *g, *g2;
	struct rf_capture_opts co = { .args_size = 8 };

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	CHECK_OK(rf_var_create(e, "a", &a));
	CHECK_OK(rf_var_create(e, "b", &b));
	CHECK_OK(rf_var_create(e, "c", &c));
	CHECK_EQ(rf_engine_capture_end(e, &g), -EINVAL);
	CHECK(g == NULL);
	CHECK_OK(rf_engine_capture_begin(e, NULL));
	CHECK(rf_engine_capture_args(e, NULL) == NULL);
	CHECK_EQ(rf_engine_capture_begin(e, NULL), -EBUSY);
	CHECK_EQ(rf_engine_wait_all(e), -EBUSY);
	CHECK(strstr(rf_last_error(), "capture"));
	CHECK_EQ(rf_engine_wait_var(e, a), -EBUSY);
	CHECK_EQ(rf_var_clear_error(e, a), -EBUSY);
	CHECK_OK(rf_engine_push_simple(e, nop, NULL, &a, 1, &b, 1, NULL, "a->b"));
	CHECK_OK(rf_engine_capture_end(e, &g));
	CHECK_EQ(rf_graph_size(g), 1);
	/* binds: a variable the graph does not use; two captured ones made one */
	struct rf_graph_bind bad1 = { c, a }, bad2 = { a, b };
	CHECK_EQ(rf_graph_launch(g, NULL, &bad1, 1), -EINVAL);
	CHECK(strstr(rf_last_error(), "'c'"));
	CHECK_EQ(rf_graph_launch(g, NULL, &bad2, 1), -EINVAL);
	CHECK(strstr(rf_last_error(), "their order was not captured"));
	CHECK_EQ(rf_graph_launch(g, NULL, NULL, 1), -EINVAL);
	/* a launch while capturing */
	CHECK_OK(rf_engine_capture_begin(e, &co));
	CHECK(rf_engine_capture_args(e, NULL) != NULL);
	CHECK_EQ(rf_graph_launch(g, NULL, NULL, 0), -EBUSY);
	CHECK_OK(rf_engine_capture_end(e, &g2));
	CHECK_EQ(rf_graph_size(g2), 0);
	CHECK_OK(rf_graph_launch(g2, "12345678", NULL, 0)); /* empty: finishes at once */
	CHECK_OK(rf_graph_launch(g, NULL, NULL, 0));
	CHECK_OK(rf_engine_wait_all(e));
	rf_graph_destroy(g2);
	rf_graph_destroy(g);
	CHECK_OK(rf_var_destroy(e, a, NULL, NULL, NULL));
	CHECK_OK(rf_var_destroy(e, b, NULL, NULL, NULL));
	CHECK_OK(rf_var_destroy(e, c, NULL, NULL, NULL));
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	fprintf(stderr, "  refusals: waits, clears and launches during a capture; bad binds\n");
}

/* A graph destroyed with launches in flight on a worker stream: freed by the last one;
 * the done callback once, after every launch ran. And a trace of replays. */
static void test_destroy_inflight(void)
{
	char trace[256];
	const char *tmp = getenv("TMPDIR");
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_stream *w;
	struct rf_var *a;
	struct rf_graph *g;
	int cnt[2] = { 0, 0 };
	struct rf_op_desc d = { .fn = count_fn, .ctx = cnt, .done = count_done, .name = "count" };

	snprintf(trace, sizeof(trace), "%s/test-engine-graph.%d.json", tmp && *tmp ? tmp : "/tmp",
		 (int)getpid());
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .trace_path = trace }));
	CHECK_OK(rf_worker_stream_create(e, "w", 16, &w));
	CHECK_OK(rf_var_create(e, "a", &a));
	d.writes = &a;
	d.nwrites = 1;
	d.stream = w;
	CHECK_OK(rf_engine_capture_begin(e, NULL));
	CHECK_OK(rf_engine_push(e, &d));
	CHECK_OK(rf_engine_push(e, &d));
	CHECK_OK(rf_engine_capture_end(e, &g));
	CHECK_EQ(cnt[0], 0);
	for (int i = 0; i < 50; i++)
		CHECK_OK(rf_graph_launch(g, NULL, NULL, 0));
	rf_graph_destroy(g);
	CHECK_EQ(rf_graph_launch(g, NULL, NULL, 0), -EINVAL); /* doomed, not yet freed */
	CHECK_OK(rf_engine_wait_var(e, a));
	CHECK_EQ(cnt[0], 100);
	CHECK_EQ(cnt[1], 2);
	CHECK_OK(rf_var_destroy(e, a, NULL, NULL, NULL));
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	/* the trace: each replayed op on the worker's track, each launch on its own */
	FILE *f = fopen(trace, "r");
	static char buf[1 << 20];
	size_t n;
	int ops = 0, launches = 0;
	CHECK(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	unlink(trace);
	buf[n] = 0;
	for (char *p = buf; (p = strstr(p, "\"name\":\"count\"")); p++)
		ops++;
	for (char *p = buf; (p = strstr(p, "\"name\":\"graph launch\"")); p++)
		launches++;
	CHECK_EQ(ops, 100);
	CHECK_EQ(launches, 50);
	CHECK(strstr(buf, "graph launches"));
	fprintf(stderr, "  destroyed with 50 launches in flight: freed after them, done once "
		"each; the trace has 100 replayed ops and 50 launches\n");
}

/* ---- lifetimes (the cases a review found) ---- */

struct arg_seen {
	int *buf;      /* the graph's arguments buffer */
	int seen[8];
	int n;
};

static int record_arg(void *p)
{
	struct arg_seen *a = p;

	if (a->n < 8)
		a->seen[a->n++] = *a->buf;
	return 0;
}

static struct rf_graph *relaunch_g;

static void relaunch_done(void *p, int status)
{
	(void)status;
	if (relaunch_g && (*(int *)p)++ == 0)
		CHECK_OK(rf_graph_launch(relaunch_g, NULL, NULL, 0));
}

static void canceled_done(void *p, int status)
{
	*(int *)p = status;
}

static struct rf_op *gate;

static int gate_afn(void *p, struct rf_op *op)
{
	(void)p;
	gate = op;
	return 0;
}

static void test_lifetimes(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_stream *w;
	struct rf_var *v[6], *args_var;
	struct rf_graph *g;
	struct arg_seen as = { 0 };
	int a1 = 11, relaunched = 0, canceled = 1;
	struct rf_op_desc gd = { .afn = gate_afn, .writes = v, .nwrites = 6, .name = "gate" };

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .max_inflight = 1 }));
	CHECK_OK(rf_worker_stream_create(e, "w", 16, &w));
	for (int i = 0; i < 6; i++)
		CHECK_OK(rf_var_create(e, NULL, &v[i]));
	/* a graph of 6 variables (its launch's entries outgrow the inline ones), with
	 * arguments; launched behind a gate holding every variable, twice (the second
	 * passing no arguments), then destroyed with both in flight */
	CHECK_OK(rf_engine_capture_begin(e, &(struct rf_capture_opts){ .args_size = sizeof(int) }));
	as.buf = rf_engine_capture_args(e, &args_var);
	struct rf_var *rd[2] = { args_var, v[0] };
	CHECK_OK(rf_engine_push_simple(e, record_arg, &as, rd, 2, v + 1, 5, w, "record"));
	CHECK_EQ(rf_engine_wait_idle(e), 0); /* allowed while recording */
	CHECK_OK(rf_engine_capture_end(e, &g));
	struct rf_graph_bind bad = { v[0], args_var };
	CHECK_EQ(rf_graph_launch(g, &a1, &bad, 1), -EINVAL);
	CHECK_OK(rf_engine_push(e, &gd));
	CHECK_OK(rf_graph_launch(g, &a1, NULL, 0));
	CHECK_OK(rf_graph_launch(g, NULL, NULL, 0));
	rf_graph_destroy(g);
	rf_engine_op_done(gate, 0);
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(as.n, 2);
	CHECK_EQ(as.seen[0], 11);
	CHECK_EQ(as.seen[1], 11); /* no arguments: the buffer kept the last */
	/* a done callback of an op ahead of a launch's macro relaunches the graph */
	CHECK_OK(rf_engine_capture_begin(e, NULL));
	CHECK_OK(rf_engine_push_simple(e, nop, NULL, NULL, 0, v, 6, w, "nop6"));
	CHECK_OK(rf_engine_capture_end(e, &g));
	relaunch_g = g;
	struct rf_op_desc rd_op = { .fn = nop, .ctx = &relaunched, .done = relaunch_done,
				    .writes = v, .nwrites = 1, .stream = w, .name = "relaunch" };
	CHECK_OK(rf_engine_push(e, &rd_op));
	CHECK_OK(rf_graph_launch(g, NULL, NULL, 0));
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(relaunched, 1);
	relaunch_g = NULL;
	/* a trace stopped while a launch's op is on the worker */
	CHECK_OK(rf_engine_trace_start(e, "/dev/null"));
	CHECK_OK(rf_engine_push(e, &gd));
	CHECK_OK(rf_graph_launch(g, NULL, NULL, 0));
	rf_engine_op_done(gate, 0);
	(void)rf_engine_trace_stop(e);
	CHECK_OK(rf_engine_wait_all(e));
	rf_graph_destroy(g);
	for (int i = 0; i < 6; i++)
		CHECK_OK(rf_var_destroy(e, v[i], NULL, NULL, NULL));
	rf_engine_destroy(e);
	/* an engine destroyed while recording: each recorded op's done, -ECANCELED */
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	CHECK_OK(rf_engine_capture_begin(e, &(struct rf_capture_opts){ .args_size = 4 }));
	struct rf_op_desc cd = { .fn = nop, .ctx = &canceled, .done = canceled_done,
				 .name = "never" };
	CHECK_OK(rf_engine_push(e, &cd));
	rf_engine_destroy(e);
	CHECK_EQ(canceled, -ECANCELED);
	/* an engine destroyed with a graph never destroyed (launched, and not): the graphs
	 * go with it, their recorded ops' done callbacks run (they leaked, under ASan, and
	 * rf_graph_destroy could not be called after the engine was gone) */
	{
		int cnt[2] = { 0, 0 };
		struct rf_var *u;
		struct rf_graph *g1, *g2;
		struct rf_op_desc cd2 = { .fn = count_fn, .ctx = cnt, .done = count_done,
					  .name = "kept" };
		CHECK_OK(rf_engine_create(&e, ring, NULL));
		CHECK_OK(rf_var_create(e, "u", &u));
		cd2.writes = &u;
		cd2.nwrites = 1;
		CHECK_OK(rf_engine_capture_begin(e, NULL));
		CHECK_OK(rf_engine_push(e, &cd2));
		CHECK_OK(rf_engine_capture_end(e, &g1));
		CHECK_OK(rf_engine_capture_begin(e, NULL));
		CHECK_OK(rf_engine_push(e, &cd2));
		CHECK_OK(rf_engine_capture_end(e, &g2));
		CHECK_OK(rf_graph_launch(g1, NULL, NULL, 0));
		CHECK_OK(rf_graph_launch(g1, NULL, NULL, 0));
		rf_engine_destroy(e);
		CHECK_EQ(cnt[0], 2);        /* both launches ran */
		CHECK_EQ(cnt[1], 2);        /* a done per recorded op, at each graph's end */
	}
	rf_ring_destroy(ring);
	fprintf(stderr, "  lifetimes: launches behind a gate then destroyed, arguments kept, "
		"a relaunch from a done callback, a trace stopped mid-launch, the engine "
		"destroyed while recording, and with graphs never destroyed\n");
}

/* ---- launches chained on one in-order stream ----
 * A graph whose ops all run on one in-order stream chains behind what precedes it
 * there: launch N+1 is enqueued while launch N still runs, and its inputs' poison is
 * read when it reaches every front. Five ops on a counter and four values, one
 * failing every seventh iteration, one overwriting; an op pushed outside the graph
 * between launches, on the same stream; op by op vs replayed, values and poison. */
struct cst {
	uint64_t c, a, b, d, e;
};

struct cop {
	struct cst *st;
	int k;
};

static int chain_fn(void *p)
{
	struct cop *o = p;
	struct cst *s = o->st;

	switch (o->k) {
	case 0: s->c++; return 0;
	case 1: if (s->c % 7 == 3) return -EPIPE; s->a = s->a * 31 + s->c; return 0;
	case 2: s->b = s->b * 17 + s->a; return 0;
	case 3: s->a = s->c * 3; return 0;
	case 4: s->d += s->b; return 0;
	default: s->e = s->e * 5 + s->d; return 0;
	}
}

static void chain_push(struct rf_engine *e, struct rf_stream *w, struct rf_var **v, struct cop *o)
{
	/* v: c a b d e; reads and writes of op k */
	static const int rd[6][2] = { { -1, -1 }, { 0, -1 }, { 1, -1 }, { 0, -1 }, { 2, -1 }, { 3, -1 } };
	static const int wr[6] = { 0, 1, 2, 1, 3, 4 };
	static const char *names[6] = { "count", "mix_a", "mix_b", "reset_a", "sum_d", "outside" };
	struct rf_var *r[1], *wv[1] = { v[wr[o->k]] };
	struct rf_op_desc d = { .fn = chain_fn, .ctx = o, .writes = wv, .nwrites = 1,
				.stream = w, .name = names[o->k],
				.flags = o->k == 3 ? RF_OP_OVERWRITE : 0 };
	if (rd[o->k][0] >= 0) {
		r[0] = v[rd[o->k][0]];
		d.reads = r;
		d.nreads = 1;
	}
	CHECK_OK(rf_engine_push(e, &d));
}

static void chain_run(int replay, int late, struct cst *out, int *err, const char **ename)
{
	enum { IT = 40 };
	static struct cop ops[IT][6], gops[5], outside[IT];
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_stream *w;
	struct rf_var *v[5];
	struct rf_graph *g = NULL;
	struct cst st = { 0, 1, 2, 3, 4 };

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	if (late)
		w = late_stream_create(e, "late", 100, 5);
	else
		CHECK_OK(rf_worker_stream_create(e, "w", 64, &w));
	for (int i = 0; i < 5; i++)
		CHECK_OK(rf_var_create(e, NULL, &v[i]));
	if (replay) {
		CHECK_OK(rf_engine_capture_begin(e, NULL));
		for (int k = 0; k < 5; k++) {
			gops[k] = (struct cop){ &st, k };
			chain_push(e, w, v, &gops[k]);
		}
		CHECK_OK(rf_engine_capture_end(e, &g));
	}
	for (int it = 0; it < IT; it++) {
		if (replay)
			CHECK_OK(rf_graph_launch(g, NULL, NULL, 0));
		for (int k = 0; !replay && k < 5; k++) {
			ops[it][k] = (struct cop){ &st, k };
			chain_push(e, w, v, &ops[it][k]);
		}
		if (it % 3 == 1) {
			outside[it] = (struct cop){ &st, 5 };
			chain_push(e, w, v, &outside[it]);
		}
	}
	CHECK(rf_engine_wait_all(e) != 0); /* mix_a fails on some iterations */
	for (int i = 0; i < 5; i++)
		err[i] = rf_var_error(v[i], &ename[i]);
	*out = st;
	rf_graph_destroy(g);
	for (int i = 0; i < 5; i++)
		CHECK_OK(rf_var_destroy(e, v[i], NULL, NULL, NULL));
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
}

static void test_chained(void)
{
	for (int late = 0; late < 2; late++) {
		struct cst a, b;
		int ea[5], eb[5];
		const char *na[5], *nb[5];
		chain_run(0, late, &a, ea, na);
		chain_run(1, late, &b, eb, nb);
		for (int i = 0; i < 5; i++) {
			CHECK_EQ(ea[i], eb[i]);
			CHECK(!ea[i] || strcmp(na[i], nb[i]) == 0);
		}
		/* contents of unpoisoned variables: c, and d/e/b when clean */
		CHECK_EQ(a.c, b.c);
		if (!ea[2])
			CHECK_EQ(a.b, b.b);
		if (!ea[3])
			CHECK_EQ(a.d, b.d);
		if (!ea[4])
			CHECK_EQ(a.e, b.e);
	}
	fprintf(stderr, "  launches chained on one in-order stream (worker, late): values and "
		"poison as op by op\n");
}

/* ---- quiet completions: a graph's chain on a worker stream posts once ---------- */

struct qctx {
	_Atomic int *gate;   /* op 0 waits for it */
	int *count;
	int k;
};

static int quiet_fn(void *arg)
{
	struct qctx *q = arg;
	while (q->k == 0 && !atomic_load(q->gate))
		usleep(100);
	if (*q->count != q->k)
		return -EPROTO; /* ran out of order */
	++*q->count;
	return 0;
}

/* N ops in a chain on one worker stream, op 0 held until all are enqueued, replayed or
 * pushed op by op: the ring CQEs and wake-up signals it took (a signal only where the
 * reactor was parked when an op finished: at most one per op). */
static void quiet_run(int replay, uint64_t *cqes, uint64_t *signals)
{
	enum { N = 32 };
	static struct qctx q[N];
	_Atomic int gate = 0;
	int count = 0;
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_stream *w;
	struct rf_var *v;
	struct rf_graph *g = NULL;
	struct rf_ring_stats s0, s1;

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	CHECK_OK(rf_worker_stream_create(e, "w", 64, &w));
	CHECK_OK(rf_var_create(e, "v", &v));
	if (replay)
		CHECK_OK(rf_engine_capture_begin(e, NULL));
	for (int k = 0; k < N; k++) {
		q[k] = (struct qctx){ &gate, &count, k };
		CHECK_OK(rf_engine_push(e, &(struct rf_op_desc){ .fn = quiet_fn, .ctx = &q[k],
				.writes = &v, .nwrites = 1, .stream = w, .name = "q" }));
	}
	if (replay) {
		CHECK_OK(rf_engine_capture_end(e, &g));
		CHECK_OK(rf_graph_launch(g, NULL, NULL, 0));
	}
	rf_ring_get_stats(ring, &s0);
	atomic_store(&gate, 1); /* every op is on the worker's queue by now (push pumps) */
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(count, N);
	rf_graph_destroy(g);
	CHECK_OK(rf_var_destroy(e, v, NULL, NULL, NULL));
	/* a report reaps every op the worker finished, so signals can still be on their
	 * way after the wait: the stream's teardown takes them all in */
	rf_engine_destroy(e);
	rf_ring_get_stats(ring, &s1);
	*cqes = s1.completions - s0.completions;
	*signals = s1.notifications - s0.notifications;
	rf_ring_destroy(ring);
}

static void test_quiet(void)
{
	uint64_t c_ops, s_ops, c_graph, s_graph;

	quiet_run(0, &c_ops, &s_ops);
	quiet_run(1, &c_graph, &s_graph);
	CHECK(s_ops <= 32 && s_graph <= 32);
	CHECK(c_ops <= 32 && c_graph <= 32);
	fprintf(stderr, "  a 32-op chain on a worker stream: %llu CQEs and %llu signals op by "
		"op, %llu and %llu replayed\n", (unsigned long long)c_ops,
		(unsigned long long)s_ops, (unsigned long long)c_graph,
		(unsigned long long)s_graph);
}

int main(void)
{
	static struct gop ops[P];
	static struct snap sn[PHASES];
	struct args av[ITERS];

	for (int round = 0; round < 3; round++) {
		unsigned long long s = 99 + (unsigned long long)round;
		make_program(ops, P, 1000 + (unsigned long long)round);
		for (int it = 0; it < ITERS; it++)
			av[it] = (struct args){ it, (int)(t_splitmix64(&s) % NSLOT) };
		serial_run(ops, sn, av);
		int nf = 0;
		for (int ph = 0; ph < PHASES; ph++)
			nf += sn[ph].failures;
		fprintf(stderr, "round %d (%d ops x %d iterations in %d phases, %d failures):\n",
			round, P, ITERS, PHASES, nf);
		run_imperative(ops, av, 0, sn);
		run_replay(ops, av, 0, sn);
		run_replay(ops, av, 1, sn);
	}
	test_refusals();
	test_destroy_inflight();
	test_lifetimes();
	test_chained();
	test_quiet();
	return 0;
}
