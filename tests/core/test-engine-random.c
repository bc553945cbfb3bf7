/* test-engine-random: random programs in the style of MXNet's engine test. 12,000
 * random ops over 100 variables, each an array of integers; every op reads 0-3
 * variables -- one in eight 4-20, so that an op's names fill its record's own entries,
 * a block of the engine's or a malloc'd array, duplicates merged -- and mutates 1-2
 * (sometimes naming one variable twice, or as both read and write), and runs on one of
 * four worker streams or the inline stream. Each op
 * folds its inputs into its outputs with an order-sensitive hash, so any misordering
 * changes the result. The arrays after the engine run must be bit-identical to the
 * same program run serially -- in normal mode and in synchronous debug mode. Under
 * ThreadSanitizer this also checks that the worker-stream handoffs are race-free. */
#include <errno.h>
#include <stdint.h>

#include "engine.h"
#include "../test-util.h"

#define NVARS 100
#define LEN 16
#define NSTREAMS 4
#define MAXR 20

struct prog_op {
	int nr, nw;
	int r[MAXR], w[3];
	int stream; /* -1 inline */
	uint32_t salt;
};

struct run_ctx {
	uint32_t (*data)[LEN];
	const struct prog_op *op;
};

static void apply(uint32_t (*data)[LEN], const struct prog_op *op)
{
	int i, j, k;

	for (k = 0; k < op->nw; k++) {
		uint32_t *w = data[op->w[k]];
		for (j = 0; j < LEN; j++) {
			uint32_t acc = w[j] * 2654435761u + op->salt + (uint32_t)j;
			for (i = 0; i < op->nr; i++)
				acc = (acc ^ data[op->r[i]][j]) * 16777619u;
			w[j] = acc;
		}
	}
}

static int op_fn(void *p)
{
	struct run_ctx *c = p;

	apply(c->data, c->op);
	return 0;
}

static void make_program(struct prog_op *ops, int n, uint64_t seed)
{
	unsigned long long s = seed;
	int i, k;

	for (i = 0; i < n; i++) {
		struct prog_op *o = &ops[i];
		o->nr = i % 8 == 7 ? 4 + (int)(t_splitmix64(&s) % (MAXR - 3))
				   : (int)(t_splitmix64(&s) % 4);
		o->nw = 1 + (int)(t_splitmix64(&s) % 2);
		for (k = 0; k < o->nr; k++)
			o->r[k] = (int)(t_splitmix64(&s) % NVARS);
		for (k = 0; k < o->nw; k++)
			o->w[k] = (int)(t_splitmix64(&s) % NVARS);
		/* The semantics apply() assumes: a var both read and written is a write
		 * (it reads its own old value through w), reads of a written var see
		 * the value before this op's writes only if listed before... keep it
		 * simple and well defined: a write var never also appears as a read. */
		for (k = 0; k < o->nr; k++) {
			int q;
			for (q = 0; q < o->nw; q++)
				if (o->r[k] == o->w[q])
					o->r[k] = (o->r[k] + 1 + q) % NVARS;
		}
		for (k = 0; k < o->nr; k++) {
			int q;
			for (q = 0; q < o->nw; q++)
				if (o->r[k] == o->w[q])
					o->nr = k; /* drop the rest rather than loop */
		}
		if (o->nw == 2 && o->w[0] == o->w[1])
			o->nw = 1;
		o->stream = (int)(t_splitmix64(&s) % (NSTREAMS + 1)) - 1;
		o->salt = (uint32_t)t_splitmix64(&s);
	}
}

static void init_data(uint32_t (*data)[LEN])
{
	int v, j;

	for (v = 0; v < NVARS; v++)
		for (j = 0; j < LEN; j++)
			data[v][j] = (uint32_t)(v * 1000 + j);
}

static void run_engine(const struct prog_op *ops, int n, uint32_t (*data)[LEN], int sync,
		       int dup_names)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_engine_opts eo = { .max_inflight = 512, .sync = sync };
	struct rf_stream *st[NSTREAMS];
	struct rf_var *vars[NVARS];
	struct run_ctx *ctx = calloc((size_t)n, sizeof(*ctx));
	struct rf_engine_stats es;
	int i, k;

	CHECK(ctx);
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &eo));
	for (i = 0; i < NSTREAMS; i++) {
		char name[16];
		snprintf(name, sizeof(name), "w%d", i);
		CHECK_OK(rf_worker_stream_create(e, name, 64, &st[i]));
	}
	for (i = 0; i < NVARS; i++)
		CHECK_EQ(rf_var_create(e, NULL, &vars[i]), 0);
	for (i = 0; i < n; i++) {
		struct rf_var *r[MAXR + 1], *w[4];
		int nr = 0, nw = 0;
		ctx[i].data = data;
		ctx[i].op = &ops[i];
		for (k = 0; k < ops[i].nr; k++)
			r[nr++] = vars[ops[i].r[k]];
		for (k = 0; k < ops[i].nw; k++)
			w[nw++] = vars[ops[i].w[k]];
		if (dup_names && nw) {
			/* name a written var again, among the reads and the writes */
			r[nr++] = w[0];
			w[nw++] = w[0];
		}
		CHECK_OK(rf_engine_push_simple(e, op_fn, &ctx[i], r, (unsigned)nr, w, (unsigned)nw,
					       ops[i].stream < 0 ? NULL : st[ops[i].stream], "rand"));
	}
	CHECK_EQ(rf_engine_wait_all(e), 0);
	rf_engine_get_stats(e, &es);
	CHECK_EQ(es.completed, n);
	CHECK_EQ(es.failed, 0);
	CHECK(es.max_inflight_seen <= 512);
	if (!sync)
		fprintf(stderr, "  normal mode: %llu chained dependencies, max in flight %u, %llu cap waits\n",
			(unsigned long long)es.chained, es.max_inflight_seen,
			(unsigned long long)es.cap_waits);
	for (i = 0; i < NVARS; i++)
		CHECK_OK(rf_var_destroy(e, vars[i], NULL, NULL, NULL));
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	free(ctx);
}

int main(void)
{
	enum { N = 12000 };
	struct prog_op *ops = calloc(N, sizeof(*ops));
	static uint32_t serial[NVARS][LEN], par[NVARS][LEN];
	int i, round;

	CHECK(ops);
	for (round = 0; round < 2; round++) {
		make_program(ops, N, 1234 + (uint64_t)round);
		init_data(serial);
		for (i = 0; i < N; i++)
			apply(serial, &ops[i]);

		init_data(par);
		run_engine(ops, N, par, 0, round);
		CHECK(memcmp(serial, par, sizeof(serial)) == 0);

		init_data(par);
		run_engine(ops, N, par, 1, round);
		CHECK(memcmp(serial, par, sizeof(serial)) == 0);
		fprintf(stderr, "round %d: %d ops identical to serial (normal and sync)\n", round, N);
	}
	free(ops);
	return 0;
}
