/* bench/bench-engine.c -- the engine's own cost, and the asynchrony experiment (a wait
 * after every op versus one at the end).
 *
 * rf-bench engine [--n N] [--reps R] [--pattern NAME] [--json]
 *   No-op ops through the inline stream for the DAG patterns of the TBB flow-graph
 *   peer benchmark (chain; fan-out groups of 64: root, 62
 *   children, join; random: node i depends on 1-3 distinct nodes among the 64 before
 *   it, drawn with splitmix64(seed 42) exactly as the peer does). Each node is an op
 *   that mutates its own variable and reads its producers' variables. Time counted:
 *   creating the variables + pushing + running to completion, as the peer counts
 *   building its graph + running it. Prints ops_per_s and ns_per_op per pattern.
 *
 *   queued: the random DAG with its root held behind a gate until every op is pushed,
 *   as the peer's graph is built and then started by a message to its root (see
 *   run_pattern): every op waits in the queues for its producers, none takes the
 *   immediate path -- checked before the gate opens.
 *   Then the queue patterns (no peer: they show the engine's own scaling):
 *   readers-N: N no-op readers of one variable on a worker stream, then one inline
 *   writer, N = 1000, 4096, 16000 (cap raised above N): each reader's completion must
 *   cost O(1) -- the ns/op stays flat as N grows. xchain: a chain of --n/10 ops
 *   alternating between two worker streams (every edge crosses streams, so each op
 *   waits for the previous one's completion), each on its own thread; xchain-shared:
 *   the same with both streams on one thread (rf_worker_stream_create_shared), a hop
 *   being worker -> reactor -> worker between two threads instead of three. Then the floor under a hop, in the same
 *   run: two bare threads handing a counter back and forth by spinning (pingpong-spin)
 *   and by futex (pingpong-futex); three bare threads relaying a counter in xchain's
 *   shape, end -> middle -> end, spinning with a yield every 4th poll (relay-3: its
 *   hop is two hand-overs, as xchain's is worker -> reactor -> worker); and xchain's
 *   hop as a ratio to each.
 *   Every row also gives the minor page faults per million ops of its best run.
 *
 * rf-bench async [--n N] [--len L] [--json]
 *   N times y = x + 1 on a worker stream with a wait after each
 *   (synchronous), versus one wait at the end (asynchronous); prints both and the
 *   ratio. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <ringflow/engine.h>
#include "bench.h"
#include "bench-args.h"

#define MAX_N 10000000L     /* ops of one pattern, y = x + 1 repetitions */
#define MAX_REPS 1000L
#define MAX_LEN 16777216L   /* async: floats of x and y (64 MiB each) */

static const char engine_usage[] =
	"usage: rf-bench engine [--n N] [--reps R] [--pattern NAME] [--json]\n"
	"  --n N         ops per pattern, 1..10000000 (default 1000000)\n"
	"  --reps R      repetitions, the best one counted, 1..1000 (default 3)\n"
	"  --pattern P   only chain, fanout, random, queued, replay, readers or xchain\n"
	"  --json        one JSON object per pattern\n";

static const char async_usage[] =
	"usage: rf-bench async [--n N] [--len L] [--json]\n"
	"  --n N         y = x + 1 ops, 1..10000000 (default 1000)\n"
	"  --len L       floats in x and y, 1..16777216 (default 1024)\n"
	"  --json        one JSON object\n";

static uint64_t rf__sm(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The random DAG's node i: 1-3 distinct producers among the 64 nodes before it, drawn
 * from the stream seed exactly as the peer draws them. Their variables go to r. */
static unsigned random_deps(long i, uint64_t *seed, struct rf_var *const *v, struct rf_var **r)
{
	long lo = i > 64 ? i - 64 : 0, span = i - lo, picked[3];
	int k, m = 0;
	unsigned nr = 0;

	if (i == 0)
		return 0;
	k = (int)(rf__sm(seed) % 3) + 1;
	if (k > span)
		k = (int)span;
	while (m < k) {
		long d = lo + (long)(rf__sm(seed) % (uint64_t)span);
		int dup = 0;
		for (int q = 0; q < m; q++)
			dup |= picked[q] == d;
		if (!dup) {
			picked[m++] = d;
			r[nr++] = v[d];
		}
	}
	return nr;
}

/* Minor page faults of the process so far; the run functions leave theirs in
 * run_faults. */
static long run_faults;

static long minor_faults(void)
{
	struct rusage u;

	return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_minflt : 0;
}

static long nop_runs;   /* the queued pattern checks that none ran before its gate opened */

static int nop_fn(void *ctx)
{
	(void)ctx;
	nop_runs++;
	return 0;
}

static struct rf_op *gate_op;

static int gate_start(void *ctx, struct rf_op *op)
{
	(void)ctx;
	gate_op = op;
	return 0;
}

/* Runs one pattern, returns seconds, or < 0 on error. "queued": the random DAG with
 * its root (op 0, the one op without producers) also reading a gate variable whose
 * writer is held until all are pushed -- oneTBB's peer connects its start node to the
 * root alone. Every other op depends on the root through its producers, so every op
 * goes the whole way through the queues (granted later, dispatched from the ready
 * list) instead of running at push; that no op completed before the gate opens is
 * checked. (Until 2026-12-01 every op read the gate: an extra entry an op, and a
 * grant walk over a million readers, that the peer's graph does not have.) */
static double run_pattern(const char *pattern, long n)
{
	int gated = !strcmp(pattern, "queued");
	struct rf_var *gate = NULL;
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_var **v = malloc((size_t)n * sizeof(*v));
	uint64_t seed = 42, t0, t1;
	long i;
	int ret;

	if (!v) {
		fprintf(stderr, "rf-bench engine: out of memory\n");
		return -1;
	}
	if (rf_ring_create(&ring, NULL) < 0)
		return bench_lib_fail("rf-bench engine");
	/* The cap is far above what the inline stream ever holds (queued: all of it). */
	if (rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = 0,
			     .max_inflight = gated ? (unsigned)n + 16 : 0 }) < 0)
		return bench_lib_fail("rf-bench engine");

	long f0 = minor_faults();
	nop_runs = 0;
	t0 = rf_now_ns();
	if (gated) {
		rf_var_create(e, "gate", &gate);
		if (rf_engine_push(e, &(struct rf_op_desc){ .afn = gate_start, .writes = &gate,
							    .nwrites = 1, .name = "gate" }) < 0)
			return bench_lib_fail("rf-bench engine: the gate op");
	}
	for (i = 0; i < n; i++) {
		struct rf_var *r[64];
		unsigned nr = 0;

		rf_var_create(e, NULL, &v[i]);
		if (!strcmp(pattern, "chain")) {
			if (i > 0)
				r[nr++] = v[i - 1];
		} else if (!strcmp(pattern, "fanout")) {
			long base = i - i % 64, pos = i % 64, j;
			if (pos == 0) {
				if (base > 0)
					r[nr++] = v[base - 1];
			} else if (pos < 63) {
				r[nr++] = v[base];
			} else {
				for (j = base + 1; j < base + 63; j++)
					r[nr++] = v[j];
			}
		} else {
			nr += random_deps(i, &seed, v, r + nr);
		}
		if (gated && nr == 0)
			r[nr++] = gate;
		ret = rf_engine_push_simple(e, nop_fn, NULL, r, nr, &v[i], 1, NULL, "nop");
		if (ret < 0) {
			fprintf(stderr, "rf-bench engine: push failed: %s\n", rf_last_error());
			return -1;
		}
	}
	if (gated) {
		struct rf_engine_stats st;
		rf_engine_get_stats(e, &st);
		if (nop_runs != 0 || st.completed != 0 || st.inflight != (unsigned)n + 1) {
			fprintf(stderr, "rf-bench engine: queued: %ld of %ld ops ran (%llu "
				"completed) before the gate opened (%u in flight): the pattern "
				"does not queue\n", nop_runs, n, (unsigned long long)st.completed,
				st.inflight);
			return -1;
		}
		rf_engine_op_done(gate_op, 0);
	}
	ret = rf_engine_wait_all(e);
	t1 = rf_now_ns();
	run_faults = minor_faults() - f0;
	if (ret < 0)
		return bench_lib_fail("rf-bench engine: waiting");
	for (i = 0; i < n; i++)
		rf_var_destroy(e, v[i], NULL, NULL, NULL);
	if (gate)
		rf_var_destroy(e, gate, NULL, NULL, NULL);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	free(v);
	return (double)(t1 - t0) / 1e9;
}

/* replay: the random DAG captured once (rf_engine_capture_begin/end), then launched
 * `launches` times, a wait after each; returns the best launch + wait in seconds, or
 * < 0 on error. The capture itself is not counted (it happens once). */
static double run_replay_pattern(long n, long launches)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_graph *g;
	struct rf_var **v = malloc((size_t)n * sizeof(*v));
	uint64_t seed = 42;
	double best = 1e30;
	long i;
	int ret;

	if (!v || rf_ring_create(&ring, NULL) < 0)
		return bench_lib_fail("rf-bench engine");
	if (rf_engine_create(&e, ring, NULL) < 0)
		return bench_lib_fail("rf-bench engine");
	for (i = 0; i < n; i++)
		rf_var_create(e, NULL, &v[i]);
	if (rf_engine_capture_begin(e, &(struct rf_capture_opts){ .name = "random" }) < 0)
		return bench_lib_fail("rf-bench engine: capture");
	for (i = 0; i < n; i++) {
		struct rf_var *r[3];
		unsigned nr = random_deps(i, &seed, v, r);
		if (rf_engine_push_simple(e, nop_fn, NULL, r, nr, &v[i], 1, NULL, "nop") < 0)
			return bench_lib_fail("rf-bench engine: push");
	}
	if ((ret = rf_engine_capture_end(e, &g)) < 0) {
		fprintf(stderr, "rf-bench engine: capture failed: %s\n", rf_last_error());
		return -1;
	}
	for (i = 0; i < launches; i++) {
		uint64_t t0 = rf_now_ns();
		if (rf_graph_launch(g, NULL, NULL, 0) < 0 || rf_engine_wait_all(e) < 0)
			return bench_lib_fail("rf-bench engine: replay");
		double sec = (double)(rf_now_ns() - t0) / 1e9;
		if (sec < best)
			best = sec;
	}
	rf_graph_destroy(g);
	for (i = 0; i < n; i++)
		rf_var_destroy(e, v[i], NULL, NULL, NULL);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	free(v);
	return best;
}

/* The queue patterns; returns seconds, or < 0 on error. shared: the two worker streams
 * share one thread (rf_worker_stream_create_shared). */
static double run_queue_pattern(const char *pattern, long n, int shared)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_stream *w[2];
	struct rf_var **v;
	uint64_t t0, t1;
	long i;
	int ret;

	if (rf_ring_create(&ring, NULL) < 0)
		return bench_lib_fail("rf-bench engine");
	if (rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = 0,
			     .max_inflight = (unsigned)n + 16 }) < 0 ||
	    rf_worker_stream_create(e, "w0", 0, &w[0]) < 0 ||
	    (shared ? rf_worker_stream_create_shared(e, "w1", 0, w[0], &w[1])
		    : rf_worker_stream_create(e, "w1", 0, &w[1])) < 0)
		return bench_lib_fail("rf-bench engine");
	v = calloc((size_t)n + 1, sizeof(*v));
	if (!v) {
		fprintf(stderr, "rf-bench engine: out of memory\n");
		return -1;
	}
	/* the bench's own array faulted in now: the faults counted are the engine's */
	memset(v, 0, ((size_t)n + 1) * sizeof(*v));
	long f0 = minor_faults();
	t0 = rf_now_ns();
	if (!strcmp(pattern, "readers")) {
		rf_var_create(e, "x", &v[0]);
		for (i = 0; i < n; i++)
			if ((ret = rf_engine_push_simple(e, nop_fn, NULL, &v[0], 1, NULL, 0, w[0], "read")) < 0)
				return bench_lib_fail("rf-bench engine: push");
		if (rf_engine_push_simple(e, nop_fn, NULL, NULL, 0, &v[0], 1, NULL, "write") < 0)
			return bench_lib_fail("rf-bench engine: push");
		n = 1;
	} else {
		for (i = 0; i < n; i++) {
			rf_var_create(e, NULL, &v[i]);
			if ((ret = rf_engine_push_simple(e, nop_fn, NULL, i ? &v[i - 1] : NULL, i ? 1 : 0,
							 &v[i], 1, w[i & 1], "link")) < 0)
				return bench_lib_fail("rf-bench engine: push");
		}
	}
	ret = rf_engine_wait_all(e);
	t1 = rf_now_ns();
	run_faults = minor_faults() - f0;
	for (i = 0; i < n; i++)
		rf_var_destroy(e, v[i], NULL, NULL, NULL);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	free(v);
	return ret < 0 ? -1 : (double)(t1 - t0) / 1e9;
}

/* One row: the best time of reps, and that run's page faults per million ops
 * (faults < 0: not counted). */
static void print_result(const char *pattern, long n, double best, long reps, long faults,
			 int json)
{
	double fpm = faults < 0 ? -1 : (double)faults * 1e6 / (double)n;

	if (json) { /* a time too short to measure gives no rate: null, JSON has no inf */
		printf("{\"pattern\":\"%s\",\"nodes\":%ld,\"ops_per_s\":", pattern, n);
		rf_cli_json_num(stdout, "%.0f", n / best);
		printf(",\"ns_per_op\":");
		rf_cli_json_num(stdout, "%.1f", best * 1e9 / n);
		if (faults >= 0)
			printf(",\"faults_per_mop\":%.0f", fpm);
		printf("}\n");
	} else if (faults >= 0) {
		printf("%-14s %8ld ops  %10.0f ops/s  %7.1f ns/op  %7.0f faults/Mop (best of %ld)\n",
		       pattern, n, n / best, best * 1e9 / n, fpm, reps);
	} else {
		printf("%-14s %8ld ops  %10.0f ops/s  %7.1f ns/op (best of %ld)\n", pattern, n,
		       n / best, best * 1e9 / n, reps);
	}
	fflush(stdout);
}

/* The ping-pong peers after xchain (whose best hop was `hop` seconds; xchain-shared's
 * `hop2`): each hop count keeps a peer near a second at the costs measured here (0.3 us,
 * 12 us a hop). A shared-thread hop is two hand-overs between two threads (worker ->
 * reactor -> worker): its floor is a spinning round trip, two ping-pong hops. */
static int print_pingpong(double hop, double hop2, long reps, int json)
{
	static const long hops[3] = { 1000000, 50000, 200000 };
	static const char *const name[3] = { "pingpong-spin", "pingpong-futex", "relay-3" };
	double best[3] = { 1e30, 1e30, 1e30 };
	int k;

	for (k = 0; k < 3; k++) {
		for (long r = 0; r < reps; r++) {
			double s = k < 2 ? bench_pingpong(hops[k], k) : bench_relay(hops[k]);
			if (s < 0)
				return 1;
			if (s < best[k])
				best[k] = s;
		}
		print_result(name[k], hops[k], best[k] * (double)hops[k], reps, -1, json);
	}
	if (json) {
		printf("{\"pattern\":\"xchain-vs-pingpong\",\"spin_ratio\":");
		rf_cli_json_num(stdout, "%.2f", hop / best[0]);
		printf(",\"futex_ratio\":");
		rf_cli_json_num(stdout, "%.2f", hop / best[1]);
		printf(",\"relay_ratio\":");
		rf_cli_json_num(stdout, "%.2f", hop / best[2]);
		printf(",\"shared_roundtrip_ratio\":");
		rf_cli_json_num(stdout, "%.2f", hop2 / (2 * best[0]));
		printf("}\n");
	} else {
		printf("xchain's hop: %.2fx a spinning hand-over, %.2fx a futex one, %.2fx a "
		       "three-thread relay's\n", hop / best[0], hop / best[1], hop / best[2]);
		printf("xchain-shared's hop: %.2fx a spinning round trip (two hand-overs)\n",
		       hop2 / (2 * best[0]));
	}
	fflush(stdout);
	return 0;
}

int rf_bench_engine(int argc, char **argv)
{
	static const char *patterns[] = { "chain", "fanout", "random", "queued" };
	long n = 1000000, reps = 3;
	const char *only = NULL;
	int json = 0, i, p;

	static const char *const known[] = { "chain", "fanout", "random", "queued", "replay",
					     "readers", "xchain" };
	int rc;

	for (i = 1; i < argc; i++) {
		if (bench_is_help(argv[i])) {
			fputs(engine_usage, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--n")) {
			if ((rc = bench_long("engine", argc, argv, &i, 1, MAX_N, &n)))
				return rc;
		} else if (!strcmp(argv[i], "--reps")) {
			if ((rc = bench_long("engine", argc, argv, &i, 1, MAX_REPS, &reps)))
				return rc;
		} else if (!strcmp(argv[i], "--pattern")) {
			/* a name not among them ran nothing and exited 0 */
			only = i + 1 < argc ? argv[++i] : NULL;
			for (p = 0; only && p < 7 && strcmp(only, known[p]); p++)
				;
			if (!only || p == 7) {
				fprintf(stderr,
					"rf-bench engine: --pattern: got '%s', expected chain, "
					"fanout, random, queued, replay, readers or xchain\n",
					only ? only : "(nothing)");
				return 2;
			}
		} else {
			return bench_unknown("engine", argv[i]);
		}
	}
	for (p = 0; p < 4; p++) {
		double best = 1e30;
		long r, faults = 0;
		if (only && strcmp(only, patterns[p]))
			continue;
		for (r = 0; r < reps; r++) {
			double s = run_pattern(patterns[p], n);
			if (s < 0)
				return 1;
			if (s < best) {
				best = s;
				faults = run_faults;
			}
		}
		print_result(patterns[p], n, best, reps, faults, json);
	}
	if (!only || !strcmp(only, "replay")) {
		double s = run_replay_pattern(n, reps + 2);
		if (s < 0)
			return 1;
		print_result("replay", n, s, reps + 2, -1, json);
	}
	double xhop = 0;
	for (p = 0; p < 5; p++) {
		static const long nreaders[] = { 1000, 4096, 16000 };
		long m = p < 3 ? nreaders[p] : (n / 10 > 1000 ? n / 10 : 1000);
		double best = 1e30;
		char name[32];
		long r, faults = 0;
		if (only && strcmp(only, p < 3 ? "readers" : "xchain"))
			continue;
		for (r = 0; r < reps; r++) {
			double s = run_queue_pattern(p < 3 ? "readers" : "xchain", m, p == 4);
			if (s < 0)
				return 1;
			if (s < best) {
				best = s;
				faults = run_faults;
			}
		}
		if (p < 3)
			snprintf(name, sizeof(name), "readers-%ld", m);
		else
			snprintf(name, sizeof(name), p == 3 ? "xchain" : "xchain-shared");
		print_result(name, m + (p < 3), best, reps, faults, json);
		if (p == 3)
			xhop = best / (double)m;
		if (p == 4 && print_pingpong(xhop, best / (double)m, reps, json))
			return 1;
	}
	return 0;
}

/* ---- async: a wait after every op versus one at the end ---- */

struct add_ctx {
	const float *x;
	float *y;
	long len;
};

static int add_one(void *p)
{
	struct add_ctx *c = p;
	long i;

	for (i = 0; i < c->len; i++)
		c->y[i] = c->x[i] + 1.0f;
	return 0;
}

int rf_bench_async(int argc, char **argv)
{
	long n = 1000, len = 1024, i;
	int json = 0, k;
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_stream *w;
	struct rf_var *xv, *yv;
	float *x, *y;
	struct add_ctx c;
	double t_sync = 1e30, t_async = 1e30;

	for (k = 1; k < argc; k++) {
		int rc;
		if (bench_is_help(argv[k])) {
			fputs(async_usage, stdout);
			return 0;
		} else if (!strcmp(argv[k], "--json")) {
			json = 1;
		} else if (!strcmp(argv[k], "--n")) {
			if ((rc = bench_long("async", argc, argv, &k, 1, MAX_N, &n)))
				return rc;
		} else if (!strcmp(argv[k], "--len")) {
			if ((rc = bench_long("async", argc, argv, &k, 1, MAX_LEN, &len)))
				return rc;
		} else {
			return bench_unknown("async", argv[k]);
		}
	}
	x = calloc((size_t)len, sizeof(float));
	y = calloc((size_t)len, sizeof(float));
	if (!x || !y || rf_ring_create(&ring, NULL) < 0 ||
	    rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = 0 }) < 0 ||
	    rf_worker_stream_create(e, "worker", 0, &w) < 0) {
		fprintf(stderr, "rf-bench async: setup failed: %s\n", !x || !y ? "out of memory"
			: rf_last_error());
		return 1;
	}
	rf_var_create(e, "x", &xv);
	rf_var_create(e, "y", &yv);
	c.x = x;
	c.y = y;
	c.len = len;
	for (k = 0; k < 5; k++) {
		uint64_t t0 = rf_now_ns();
		for (i = 0; i < n; i++) {
			rf_engine_push_simple(e, add_one, &c, &xv, 1, &yv, 1, w, "y=x+1");
			rf_engine_wait_var(e, yv);
		}
		double s = (double)(rf_now_ns() - t0) / 1e9;
		if (s < t_sync)
			t_sync = s;
		t0 = rf_now_ns();
		for (i = 0; i < n; i++)
			rf_engine_push_simple(e, add_one, &c, &xv, 1, &yv, 1, w, "y=x+1");
		rf_engine_wait_var(e, yv);
		s = (double)(rf_now_ns() - t0) / 1e9;
		if (s < t_async)
			t_async = s;
	}
	if (y[0] != 1.0f) {
		fprintf(stderr, "rf-bench async: wrong result %g\n", y[0]);
		return 1;
	}
	if (json) {
		printf("{\"n\":%ld,\"len\":%ld,\"sync_s\":%.6f,\"async_s\":%.6f,\"ratio\":", n,
		       len, t_sync, t_async);
		rf_cli_json_num(stdout, "%.2f", t_sync / t_async); /* null: nothing measured */
		printf(",\"sync_us_per_op\":%.2f,\"async_us_per_op\":%.2f}\n", t_sync * 1e6 / n,
		       t_async * 1e6 / n);
	} else
		printf("Synchronous : %.4f sec (%.2f us/op)\nAsynchronous: %.4f sec (%.2f us/op)\n"
		       "ratio sync/async: %.2f  (%ld x y = x + 1 on %ld floats, worker stream, best of 5)\n",
		       t_sync, t_sync * 1e6 / n, t_async, t_async * 1e6 / n, t_sync / t_async, n, len);
	rf_var_destroy(e, xv, NULL, NULL, NULL);
	rf_var_destroy(e, yv, NULL, NULL, NULL);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	free(x);
	free(y);
	return 0;
}
