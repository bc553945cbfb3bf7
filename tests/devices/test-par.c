/* test-par -- the CPU devices' helper threads (devices/cpu/par.h) and the kernels that
 * use them. Every chunk runs exactly once and its writes are seen by the caller when
 * rf__par_for returns, with two callers offering work at once (one kernel is on offer
 * at a time: the other runs alone) -- under ThreadSanitizer this is the protocol's
 * check; helpers do take chunks; no work is offered while the CPUs are all busy; the
 * pool counts its users; RF_CPU_HELPERS is checked; a forked child runs its chunks
 * itself and its release does not wait for helpers it does not have; and the GEMM and
 * the three convolutions and batch norm give the same bits with helpers as on one
 * thread. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels.h"
#include "log.h"
#include "par.h"
#include "rf-internal.h"
#include "test-util.h"

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- chunks: each marks its slot and says which thread ran it ------------------------ */
enum { MAXN = 256 };
struct marks {
	int count[MAXN];
	pid_t tid[MAXN];
	unsigned spin; /* work in each chunk, so that a helper has time to join */
};

static void mark(void *arg, unsigned i)
{
	struct marks *m = arg;
	volatile unsigned x = 0;

	for (unsigned k = 0; k < m->spin; k++)  /* a delay: the volatile keeps it */
		x += k;
	(void)x;
	m->count[i]++;
	m->tid[i] = (pid_t)syscall(SYS_gettid);
}

static void count_one(void *arg, unsigned i)
{
	((int *)arg)[i]++;
}

/* rf__par_for(n) on m, then every chunk exactly once; the chunks helpers ran */
static unsigned run_marks(struct marks *m, unsigned n)
{
	pid_t me = (pid_t)syscall(SYS_gettid);
	unsigned other = 0;

	memset(m->count, 0, sizeof(m->count));
	rf__par_for(n, mark, m);
	for (unsigned i = 0; i < n; i++) {
		CHECK_EQ(m->count[i], 1);
		other += m->tid[i] != me;
	}
	for (unsigned i = n; i < MAXN; i++)
		CHECK_EQ(m->count[i], 0);
	return other;
}

static void test_serial_without_pool(void)
{
	struct marks m = { .spin = 10 };

	CHECK_EQ(rf__par_helpers(), 0);
	struct rf__par_stats a = rf__par_stats();
	CHECK_EQ(run_marks(&m, 100), 0);
	CHECK_EQ(run_marks(&m, 1), 0);
	rf__par_for(0, mark, &m); /* nothing */
	CHECK_EQ(rf__par_stats().offered, a.offered);
	printf("ok: without helpers every chunk runs once on the caller\n");
}

static void test_env(void)
{
	static const char *bad[] = { "abc", "-1", "64", "1x", "" };

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("RF_CPU_HELPERS", bad[i], 1);
		CHECK(rf__par_acquire() < 0);
		CHECK(strstr(rf_last_error(), "RF_CPU_HELPERS") != NULL);
		CHECK_EQ(rf__par_helpers(), 0);
	}
	setenv("RF_CPU_HELPERS", "0", 1);
	CHECK_OK(rf__par_acquire());
	CHECK_EQ(rf__par_helpers(), 0);
	rf__par_release();
	setenv("RF_CPU_HELPERS", "1", 1);
	CHECK_OK(rf__par_acquire());
	CHECK_OK(rf__par_acquire());
	CHECK_EQ(rf__par_helpers(), 1);
	CHECK_EQ(t_threads_named("rf-helper", 1), 1);
	rf__par_release();
	CHECK_EQ(rf__par_helpers(), 1); /* one user left */
	rf__par_release();
	CHECK_EQ(rf__par_helpers(), 0);
	CHECK_EQ(t_threads_named("rf-helper", 1), 0);
	rf__par_release(); /* one too many: nothing */
	/* started and stopped at once, 63 helpers at a time: some first run after the stop
	 * (its seq already moved), and must still end */
	setenv("RF_CPU_HELPERS", "63", 1);
	for (int r = 0; r < 100; r++) {
		CHECK_OK(rf__par_acquire());
		rf__par_release();
	}
	CHECK_EQ(t_threads_named("rf-helper", 1), 0);
	printf("ok: RF_CPU_HELPERS checked (junk, a sign, past 63, empty refused, naming it); the "
	       "pool counts its users; 100 starts and stops of 63 helpers\n");
}

/* Two callers at once, many rounds: every chunk once, seen by its caller; helpers
 * take part. */
struct caller {
	unsigned rounds, helped;
	unsigned long long seed;
};

static void *caller_main(void *arg)
{
	struct caller *c = arg;
	struct marks *m = calloc(1, sizeof(*m));

	CHECK(m != NULL);
	m->spin = 2000;
	for (unsigned r = 0; r < c->rounds; r++)
		c->helped += run_marks(m, 2 + (unsigned)(t_splitmix64(&c->seed) % 62));
	free(m);
	return NULL;
}

static void test_two_callers(void)
{
	struct caller c[2] = { { 300, 0, 1 }, { 300, 0, 2 } };
	pthread_t t[2];
	struct rf__par_stats a = rf__par_stats();

	for (int i = 0; i < 2; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, caller_main, &c[i]), 0);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	struct rf__par_stats b = rf__par_stats();
	CHECK(b.offered > a.offered);
	CHECK_EQ(b.helped - a.helped, c[0].helped + c[1].helped);
	printf("ok: two callers, %u rounds: every chunk once; %llu offers, helpers ran %llu "
	       "chunks\n", c[0].rounds + c[1].rounds, b.offered - a.offered,
	       b.helped - a.helped);
}

/* One caller offering tiny kernels back to back, faster than a helper wakes: a helper
 * reads the slot while the next kernel is being written into it. Each chunk exactly
 * once (a count stored apart from the ticket once let a helper claim a chunk of the old
 * kernel with the new one's function: ThreadSanitizer's report, and a double run). */
static void test_back_to_back(void)
{
	int cnt[8];
	struct rf__par_stats a = rf__par_stats();

	for (unsigned r = 0; r < 100000; r++) {
		unsigned n = 2 + r % 6;
		memset(cnt, 0, sizeof(cnt));
		rf__par_for(n, count_one, cnt);
		for (unsigned i = 0; i < 8; i++)
			CHECK_EQ(cnt[i], i < n);
	}
	struct rf__par_stats b = rf__par_stats();
	printf("ok: 100000 tiny kernels back to back: every chunk once; helpers ran %llu\n",
	       b.helped - a.helped);
}

/* Helpers do take chunks: offers until one has (a helper asleep or descheduled may
 * miss some), for at most 20 s. */
static void test_helpers_join(void)
{
	struct marks m = { .spin = 20000 };
	double t0 = now_s();
	unsigned other = 0, rounds = 0;

	while (!other && now_s() - t0 < 20) {
		other += run_marks(&m, 64);
		rounds++;
	}
	CHECK(other > 0);
	printf("ok: a helper ran chunks within %u offers\n", rounds);
}

/* No offer while ops run on every CPU */
static void test_busy(void)
{
	struct marks m = { .spin = 10 };
	int cpus = rf__cpus();

	rf__par_busy(cpus);
	CHECK(!rf__par_open());
	struct rf__par_stats a = rf__par_stats();
	for (int r = 0; r < 50; r++)
		CHECK_EQ(run_marks(&m, 64), 0);
	CHECK_EQ(rf__par_stats().offered, a.offered);
	rf__par_busy(-cpus);
	CHECK(rf__par_open());
	printf("ok: with %d ops running on %d CPUs nothing is offered\n", cpus, cpus);
}

#ifndef __SANITIZE_THREAD__
/* A child forked while helpers run has none: it runs its chunks itself and its
 * release joins nobody. */
static void test_fork(void)
{
	pid_t pid = fork();
	int st;

	CHECK(pid >= 0);
	if (pid == 0) {
		struct marks m = { .spin = 10 };
		alarm(20);
		for (int r = 0; r < 20; r++)
			if (run_marks(&m, 64) != 0)
				_exit(2);
		rf__par_release();
		CHECK_OK(rf__par_acquire()); /* a pool of its own */
		CHECK_EQ(rf__par_helpers(), 1);
		for (int r = 0; r < 20; r++)
			(void)run_marks(&m, 64);
		rf__par_release();
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	printf("ok: a forked child runs its chunks itself, releases and starts its own\n");
}
#endif

/* ---- the kernels: the same bits with helpers as without ------------------------------ */
static float *rnd(size_t n, unsigned long long *seed)
{
	float *p = malloc(n * sizeof(float) + 4);

	CHECK(p != NULL);
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((double)(t_splitmix64(seed) >> 11) * 0x1p-53 * 2.0 - 1.0);
	return p;
}

struct gshape {
	int ta, tb, m, n, k, pad; /* pad: extra leading dimension */
	float alpha, beta;
};

static const struct gshape gshapes[] = {
	{ 0, 0, 64, 1568, 576, 0, 1.0f, 0.0f },   /* ResNet-18's 64-channel forward */
	{ 1, 0, 576, 1568, 64, 0, 1.0f, 0.0f },   /* its data gradient */
	{ 0, 0, 64, 576, 1568, 0, 1.0f, 1.0f },   /* its filter gradient, accumulated */
	{ 0, 0, 37, 1000, 300, 3, 0.7f, 0.5f },   /* edges: rows, columns, K slices, lds */
	{ 1, 0, 131, 200, 257, 5, -1.5f, 0.0f },
	{ 0, 0, 6, 130, 6000, 0, 1.0f, 1.0f },    /* one row panel, three column panels */
	{ 0, 1, 256, 256, 784, 0, 1.0f, 0.0f },   /* the MLP's forward: B^T */
	{ 1, 1, 100, 333, 200, 7, 0.5f, 1.0f },   /* both transposed, edges */
};

/* C of shape s from the same inputs, as it stands after rf__k_gemm_avx512 */
static float *gemm_run(const struct gshape *s, unsigned long long seed)
{
	int lda = (s->ta ? s->m : s->k) + s->pad, ldb = (s->tb ? s->k : s->n) + s->pad;
	int ldc = s->n + s->pad;
	size_t na = (size_t)(s->ta ? s->k : s->m) * lda, nb = (size_t)(s->tb ? s->n : s->k) * ldb,
	       nc = (size_t)s->m * ldc;
	float *a = rnd(na, &seed), *b = rnd(nb, &seed), *c = rnd(nc, &seed);

	CHECK_EQ(rf__k_gemm_avx512(s->ta, s->tb, s->m, s->n, s->k, s->alpha, a, lda, b, ldb,
				   s->beta, c, ldc), 0);
	free(a);
	free(b);
	return c;
}

static size_t gemm_c_len(const struct gshape *s)
{
	return (size_t)s->m * (s->n + s->pad);
}

static const struct rf__conv2d cshapes[] = {
	{ 4, 16, 28, 28, 32, 3, 3, 1, 1 },  /* 3x3 pad 1: two images a group */
	{ 16, 32, 7, 7, 64, 3, 3, 2, 1 },   /* stride 2 */
	{ 8, 24, 14, 14, 16, 1, 1, 2, 0 },  /* 1x1 stride 2 */
	{ 6, 5, 13, 13, 7, 5, 5, 0, 0 },    /* LeNet's plain 5x5 */
};

/* y, dx, dw and db of conv s from the same inputs, one after the other in one buffer */
static float *conv_run(const struct rf__conv2d *s, unsigned long long seed, size_t *len)
{
	int oh = rf__conv2d_oh(s), ow = rf__conv2d_ow(s);
	size_t nx = (size_t)s->n * s->c * s->h * s->w, nw = (size_t)s->o * s->c * s->kh * s->kw;
	size_t ny = (size_t)s->n * s->o * oh * ow;
	size_t ws1 = rf__k_conv2d_fwd_workspace_size(s), ws2 = rf__k_conv2d_workspace_size(s);
	size_t wsb = ws1 > ws2 ? ws1 : ws2;
	float *x = rnd(nx, &seed), *w = rnd(nw, &seed), *b = rnd((size_t)s->o, &seed);
	float *dy = rnd(ny, &seed), *ws = malloc(wsb + 64);
	float *out = malloc((ny + nx + nw + (size_t)s->o) * sizeof(float));

	CHECK(ws != NULL && out != NULL);
	float *y = out, *dx = y + ny, *dw = dx + nx, *db = dw + nw;
	CHECK_EQ(rf__k_conv2d_fwd(s, y, x, w, b, ws, ws1), 0);
	CHECK_EQ(rf__k_conv2d_bwd_data(s, dx, dy, w, ws, ws2), 0);
	CHECK_EQ(rf__k_conv2d_bwd_filter(s, dw, db, dy, x, 0, ws, ws2), 0);
	*len = ny + nx + nw + (size_t)s->o;
	free(x), free(w), free(b), free(dy), free(ws);
	return out;
}

static const struct rf__bn bshapes[] = {
	{ 8, 24, 784, 1e-5f, 0.1f, 0 },     /* ResNet-18's first stage, smaller */
	{ 8, 24, 784, 1e-5f, 0.1f, 1 },     /* with the fused ReLU */
	{ 4, 37, 600, 1e-3f, 0.2f, 1 },     /* channels not a multiple of the chunks */
};

/* batch norm s: training forward (y, mean, invstd, running statistics), evaluation
 * forward, backward (dx, dgamma, dbeta; through y's mask if relu) in one buffer */
static float *bn_run(const struct rf__bn *s, unsigned long long seed, size_t *len)
{
	size_t nx = (size_t)s->n * s->c * s->hw, C = (size_t)s->c;
	float *x = rnd(nx, &seed), *dy = rnd(nx, &seed), *g = rnd(C, &seed), *b = rnd(C, &seed);
	float *rm = rnd(C, &seed), *rv = rnd(C, &seed), *t = malloc((size_t)s->hw * sizeof(float));
	float *out = malloc((3 * nx + 7 * C) * sizeof(float));

	CHECK(t != NULL && out != NULL);
	for (size_t c = 0; c < C; c++)
		rv[c] = rv[c] * rv[c] + 0.1f;
	float *y = out, *ye = y + nx, *dx = ye + nx, *mean = dx + nx, *is = mean + C;
	float *dg = is + C, *db = dg + C, *orm = db + C, *orv = orm + C, *pad = orv + C;
	CHECK_EQ(rf__k_bn_fwd_train(s, y, mean, is, rm, rv, x, g, b), 0);
	memcpy(orm, rm, C * sizeof(float));
	memcpy(orv, rv, C * sizeof(float));
	CHECK_EQ(rf__k_bn_fwd_eval(s, ye, x, g, b, rm, rv), 0);
	CHECK_EQ(rf__k_bn_bwd(s, dx, dg, db, dy, x, mean, is, g, s->relu ? y : NULL, t), 0);
	memset(pad, 0, C * sizeof(float));
	*len = 3 * nx + 7 * C;
	free(x), free(dy), free(g), free(b), free(rm), free(rv), free(t);
	return out;
}

static void test_kernels_same_bits(void)
{
	enum { NG = sizeof(gshapes) / sizeof(gshapes[0]), NC = sizeof(cshapes) / sizeof(cshapes[0]),
	       NB = sizeof(bshapes) / sizeof(bshapes[0]) };
	float *g1[NG] = { 0 }, *c1[NC], *b1[NB];
	size_t clen[NC], blen[NB];
	int avx = rf__k_gemm_avx512(0, 0, 0, 0, 0, 1.0f, NULL, 1, NULL, 1, 0.0f, NULL, 1) !=
		  -ENOTSUP;

	/* one thread: no pool */
	CHECK_EQ(rf__par_helpers(), 0);
	for (int i = 0; avx && i < NG; i++)
		g1[i] = gemm_run(&gshapes[i], 100 + (unsigned)i);
	for (int i = 0; i < NC; i++)
		c1[i] = conv_run(&cshapes[i], 200 + (unsigned)i, &clen[i]);
	for (int i = 0; i < NB; i++)
		b1[i] = bn_run(&bshapes[i], 300 + (unsigned)i, &blen[i]);
	/* with a helper: each call offered (no other caller, no op busy) */
	setenv("RF_CPU_HELPERS", "1", 1);
	CHECK_OK(rf__par_acquire());
	CHECK_EQ(rf__par_helpers(), 1);
	for (int i = 0; avx && i < NG; i++) {
		struct rf__par_stats a = rf__par_stats();
		float *g2 = gemm_run(&gshapes[i], 100 + (unsigned)i);
		CHECK(rf__par_stats().offered > a.offered);
		CHECK(memcmp(g1[i], g2, gemm_c_len(&gshapes[i]) * sizeof(float)) == 0);
		free(g1[i]), free(g2);
	}
	for (int i = 0; i < NC; i++) {
		size_t len;
		struct rf__par_stats a = rf__par_stats();
		float *c2 = conv_run(&cshapes[i], 200 + (unsigned)i, &len);
		CHECK(rf__par_stats().offered > a.offered);
		CHECK_EQ(len, clen[i]);
		CHECK(memcmp(c1[i], c2, len * sizeof(float)) == 0);
		free(c1[i]), free(c2);
	}
	for (int i = 0; i < NB; i++) {
		size_t len;
		struct rf__par_stats a = rf__par_stats();
		float *b2 = bn_run(&bshapes[i], 300 + (unsigned)i, &len);
		CHECK(rf__par_stats().offered >= a.offered + 3); /* each of the three passes */
		CHECK_EQ(len, blen[i]);
		CHECK(memcmp(b1[i], b2, len * sizeof(float)) == 0);
		free(b1[i]), free(b2);
	}
	rf__par_release();
	printf("ok: %d GEMMs%s, %d convolutions (forward, data and filter gradients) and %d "
	       "batch norms (training, evaluation, backward): the same bits with a helper as "
	       "on one thread\n", avx ? NG : 0, avx ? "" : " (no AVX-512 here: not run)", NC, NB);
}

int main(void)
{
	rf_log_set(NULL, NULL);
	test_serial_without_pool();
	test_kernels_same_bits();
	test_env();
	setenv("RF_CPU_HELPERS", "1", 1);
	CHECK_OK(rf__par_acquire());
	test_busy();
	test_helpers_join();
	test_back_to_back();
	test_two_callers();
#ifndef __SANITIZE_THREAD__
	test_fork();
#endif
	rf__par_release();
	CHECK_EQ(t_threads_named("rf-helper", 1), 0);
	return 0;
}
