/* test-engine-poison: failures in random programs follow the serial program exactly.
 * 10,000-op random programs over 100 variables, 1% of ops failing (each with its own
 * error code, so a poison's origin is identified), a quarter RF_OP_OVERWRITE ops and
 * 6% error clears plus a clear of every variable each 200 ops (so poison comes
 * and goes instead of taking over), deletions that replace a variable (its memory freed by the deletion, so
 * a deletion run before a reader finished is a use-after-free under ASan), waits in
 * the middle, and async ops completed by ring timers. Ops run on the inline stream,
 * two worker streams and two "late" streams (late-stream.h) that chain across each
 * other and report after random delays, so a consumer is often reported before its
 * producer. Checked against a serial model: every op's final status (ran, failed
 * with its own code, or skipped with the poison it inherited), every mid-program
 * wait's result, every variable's final poison, and every value the model can know
 * (a poisoned variable's contents are unspecified). In synchronous mode, additionally,
 * no skipped op ever ran. Several seeds and caps, asynchronous and synchronous. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"
#include "late-stream.h"
#include "../test-util.h"

#define NVARS 100
#define LEN 8
#define NWORKERS 2
#define NLATE 2

enum { K_OP, K_CLEAR, K_DELETE, K_WAIT };

struct pop {
	int kind;
	int nr, nw;
	int r[3], w[2];
	int stream;      /* -2 async (timer), -1 inline, 0..1 worker, 2..3 late */
	int fail;        /* the op returns this code (< 0) */
	int overwrite;
	uint32_t salt;
	int spin;        /* iterations of busy work */
};

struct inst {            /* one incarnation of a variable */
	uint32_t val[LEN];
};

struct octx {
	const struct pop *p;
	struct inst *r[3], *w[2];
	int *status;     /* where done writes the final status */
	int *ran;
	int *ndone;
	struct rf_ring *ring;
	struct rf_op *aop;
};

static uint32_t init_val(int slot, int gen, int j)
{
	return (uint32_t)(slot * 7919 + gen * 104729 + j);
}

static void apply(const struct pop *p, struct inst *const *r, struct inst *const *w)
{
	int i, j, k;

	for (k = 0; k < p->nw; k++) {
		for (j = 0; j < LEN; j++) {
			uint32_t acc = (p->overwrite ? 0u : w[k]->val[j] * 2654435761u) + p->salt + (uint32_t)j;
			for (i = 0; i < p->nr; i++)
				acc = (acc ^ r[i]->val[j]) * 16777619u;
			w[k]->val[j] = acc;
		}
	}
}

static int op_fn(void *arg)
{
	struct octx *c = arg;
	volatile int s = 0;
	int i;

	for (i = 0; i < c->p->spin; i++)  /* a delay: the volatile keeps it */
		s += i;
	(void)s;
	*c->ran = 1;
	if (c->p->fail)
		return c->p->fail;
	apply(c->p, c->r, c->w);
	return 0;
}

static void op_done(void *arg, int status)
{
	struct octx *c = arg;

	*c->status = status;
	(*c->ndone)++;
}

static void timer_fired(void *arg, int64_t res)
{
	struct octx *c = arg;

	(void)res;
	rf_engine_op_done(c->aop, op_fn(c));
}

static int async_start(void *arg, struct rf_op *op)
{
	struct octx *c = arg;

	c->aop = op;
	return rf_ring_timeout(c->ring, 1000 * (uint64_t)(c->p->salt % 50), timer_fired, c, NULL);
}

static void free_inst(void *p)
{
	free(p);
}

static void make_program(struct pop *ops, int n, unsigned long long seed)
{
	unsigned long long s = seed;
	int i, k;

	for (i = 0; i < n; i++) {
		struct pop *o = &ops[i];
		unsigned x = (unsigned)(t_splitmix64(&s) % 1000);

		o->kind = x < 60 ? K_CLEAR : x < 70 ? K_DELETE : x < 80 ? K_WAIT : K_OP;
		o->w[0] = (int)(t_splitmix64(&s) % NVARS);
		o->stream = (int)(t_splitmix64(&s) % (NWORKERS + NLATE + 2)) - 2;
		if (o->kind != K_OP)
			continue;
		o->nr = (int)(t_splitmix64(&s) % 4);
		o->nw = 1 + (int)(t_splitmix64(&s) % 2);
		for (k = 1; k < o->nw; k++)
			o->w[k] = (int)(t_splitmix64(&s) % NVARS);
		if (o->nw == 2 && o->w[1] == o->w[0])
			o->nw = 1;
		for (k = 0; k < o->nr; k++) {
			int v, q, clash;
			do {
				v = (int)(t_splitmix64(&s) % NVARS);
				clash = 0;
				for (q = 0; q < o->nw; q++)
					clash |= v == o->w[q];
			} while (clash);
			o->r[k] = v;
		}
		o->fail = t_splitmix64(&s) % 100 == 0 ? -(1000 + i) : 0;
		o->overwrite = t_splitmix64(&s) % 4 == 0;
		o->salt = (uint32_t)t_splitmix64(&s);
		o->spin = t_splitmix64(&s) % 4 == 0 ? (int)(t_splitmix64(&s) % 20000) : 0;
	}
}

/* The serial model: what each op's status, each wait and each variable end as. */
struct model {
	int err[NVARS];
	int gen[NVARS];
	int known[NVARS];
	struct inst val[NVARS];
};

static int model_inherit(const struct model *m, const struct pop *p)
{
	int k;

	/* the engine's entry order: writes, then reads */
	if (!p->overwrite)
		for (k = 0; k < p->nw; k++)
			if (m->err[p->w[k]])
				return m->err[p->w[k]];
	for (k = 0; k < p->nr; k++)
		if (m->err[p->r[k]])
			return m->err[p->r[k]];
	return 0;
}

static void run(const struct pop *ops, int n, int sync, unsigned cap, unsigned long long seed)
{
	struct model m;
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_stream *st[NWORKERS + NLATE];
	struct rf_var *var[NVARS];
	struct inst *cur[NVARS];
	struct octx *ctx = calloc((size_t)n, sizeof(*ctx));
	int *status = calloc((size_t)n, sizeof(int)), *want = calloc((size_t)n, sizeof(int));
	int *ran = calloc((size_t)n, sizeof(int));
	int ndone = 0, nops = 0, i, j, k, waits = 0;

	CHECK(ctx && status && want && ran);
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .max_inflight = cap, .sync = sync }));
	for (i = 0; i < NWORKERS; i++)
		CHECK_OK(rf_worker_stream_create(e, i ? "w1" : "w0", 16, &st[i]));
	for (i = 0; i < NLATE; i++)
		st[NWORKERS + i] = late_stream_create(e, i ? "late1" : "late0", 200, seed + (unsigned)i);
	memset(&m, 0, sizeof(m));
	for (i = 0; i < NVARS; i++) {
		CHECK_EQ(rf_var_create(e, "v", &var[i]), 0);
		CHECK(cur[i] = malloc(sizeof(*cur[i])));
		for (j = 0; j < LEN; j++)
			cur[i]->val[j] = m.val[i].val[j] = init_val(i, 0, j);
		m.known[i] = 1;
	}
	for (i = 0; i < n; i++) {
		const struct pop *p = &ops[i];
		struct rf_stream *s = p->stream >= 0 ? st[p->stream] : NULL;
		int slot = p->w[0];

		if (i % 200 == 199) { /* every variable's poison cleared, now and then */
			for (k = 0; k < NVARS; k++) {
				CHECK_OK(rf_var_clear_error(e, var[k]));
				m.err[k] = 0;
			}
		}
		if (p->kind == K_CLEAR) {
			CHECK_OK(rf_var_clear_error(e, var[slot]));
			m.err[slot] = 0;
			continue;
		}
		if (p->kind == K_DELETE) {
			CHECK_OK(rf_var_destroy(e, var[slot], free_inst, cur[slot], s));
			CHECK_EQ(rf_var_create(e, "v", &var[slot]), 0);
			CHECK(cur[slot] = malloc(sizeof(*cur[slot])));
			m.gen[slot]++;
			for (j = 0; j < LEN; j++)
				cur[slot]->val[j] = m.val[slot].val[j] = init_val(slot, m.gen[slot], j);
			m.err[slot] = 0;
			m.known[slot] = 1;
			continue;
		}
		if (p->kind == K_WAIT) {
			int got = rf_engine_wait_var(e, var[slot]);
			CHECK_EQ(got, m.err[slot]);
			if (!m.err[slot] && m.known[slot])
				CHECK(!memcmp(cur[slot]->val, m.val[slot].val, sizeof(m.val[slot].val)));
			waits++;
			continue;
		}
		{
			struct octx *c = &ctx[i];
			struct rf_var *r[3], *w[2];
			struct rf_op_desc d = { 0 };
			int inh = model_inherit(&m, p);

			c->p = p;
			c->status = &status[i];
			c->ran = &ran[i];
			c->ndone = &ndone;
			c->ring = ring;
			for (k = 0; k < p->nr; k++) {
				r[k] = var[p->r[k]];
				c->r[k] = cur[p->r[k]];
			}
			for (k = 0; k < p->nw; k++) {
				w[k] = var[p->w[k]];
				c->w[k] = cur[p->w[k]];
			}
			d.ctx = c;
			d.done = op_done;
			d.reads = r;
			d.nreads = (unsigned)p->nr;
			d.writes = w;
			d.nwrites = (unsigned)p->nw;
			d.name = "op";
			d.flags = p->overwrite ? RF_OP_OVERWRITE : 0;
			if (p->stream == -2)
				d.afn = async_start;
			else
				d.fn = op_fn, d.stream = s;
			status[i] = 1; /* not done yet */
			CHECK_OK(rf_engine_push(e, &d));
			nops++;
			/* the model */
			want[i] = inh ? inh : p->fail;
			if (want[i] < 0) {
				for (k = 0; k < p->nw; k++) {
					if (!m.err[p->w[k]])
						m.err[p->w[k]] = want[i];
					m.known[p->w[k]] = 0;
				}
			} else {
				struct inst *mr[3], *mw[2];
				int kn = 1;
				for (k = 0; k < p->nr; k++) {
					mr[k] = &m.val[p->r[k]];
					kn &= m.known[p->r[k]];
				}
				for (k = 0; k < p->nw; k++) {
					mw[k] = &m.val[p->w[k]];
					if (!p->overwrite)
						kn &= m.known[p->w[k]];
				}
				apply(p, mr, mw);
				for (k = 0; k < p->nw; k++) {
					if (p->overwrite)
						m.err[p->w[k]] = 0;
					m.known[p->w[k]] = kn;
				}
			}
		}
	}
	(void)rf_engine_wait_all(e);
	CHECK_EQ(ndone, nops);
	{
		/* the run exercised what it is meant to: failures, skips, and (async)
		 * dependencies satisfied by stream order, within and across streams */
		struct rf_engine_stats es;
		rf_engine_get_stats(e, &es);
		fprintf(stderr, "seed %llu sync %d cap %u: %d ops, %llu failed, %llu skipped, "
			"%llu chained, %d waits\n", seed, sync, cap, nops,
			(unsigned long long)es.failed, (unsigned long long)es.skipped,
			(unsigned long long)es.chained, waits);
		CHECK(es.failed > 0 && es.skipped > 0);
		CHECK(sync || es.chained > 0);
	}
	for (i = 0; i < n; i++) {
		if (ops[i].kind != K_OP)
			continue;
		if (status[i] != want[i]) {
			fprintf(stderr, "seed %llu sync %d cap %u: op %d status %d, serially %d\n",
				seed, sync, cap, i, status[i], want[i]);
			exit(1);
		}
		/* skipped (inherited, not its own failure): in sync mode it never ran */
		if (sync && want[i] < 0 && want[i] != ops[i].fail)
			CHECK(!ran[i]);
	}
	for (i = 0; i < NVARS; i++) {
		CHECK_EQ(rf_var_error(var[i], NULL), m.err[i]);
		if (!m.err[i] && m.known[i] &&
		    memcmp(cur[i]->val, m.val[i].val, sizeof(m.val[i].val))) {
			fprintf(stderr, "seed %llu sync %d cap %u: var %d value differs\n", seed, sync, cap, i);
			exit(1);
		}
	}
	for (i = 0; i < NVARS; i++)
		CHECK_OK(rf_var_destroy(e, var[i], free_inst, cur[i], NULL));
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	free(ctx);
	free(status);
	free(want);
	free(ran);
}

int main(void)
{
	static const unsigned caps[] = { 0, 64, 7 };
	int n = 10000, si, sync;

	for (si = 0; si < 3; si++) {
		unsigned long long seed = 0x5eed0000ull + (unsigned)si;
		struct pop *ops = calloc((size_t)n, sizeof(*ops));

		CHECK(ops);
		make_program(ops, n, seed);
		for (sync = 0; sync <= 1; sync++)
			run(ops, sync ? n / 4 : n, sync, caps[si], seed);
		free(ops);
	}
	printf("poison follows the serial program: 3 seeds, async and sync\n");
	return 0;
}
