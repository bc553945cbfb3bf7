/* bench/bench-hybridize.c -- the seeds' section 12.1 experiment: the same MLP
 * (512 -> 256 -> 128 -> 2, ReLU between, batch 1) evaluated N times op by op, and
 * captured once and replayed N times (rf_engine_capture_begin/end, rf_graph_launch).
 *
 * rf-bench hybridize [--n N] [--reps R] [--small] [--device cpu|cuda] [--json]
 *   Both on the device's compute stream (CPU: one OpenBLAS thread, a batch of one is a
 *   GEMV; CUDA: replays from the third on run as CUDA graphs, RF_CUDA_GRAPHS=0 turns
 *   that off), one wait at the end, as the seeds' timing ends with waitall. The replayed
 *   time includes the capture. The outputs of both must be bit-identical (checked).
 *   Prints both times (best of R), the ratio, and the cost per op; the seeds measured
 *   0.54 s op by op and 0.265 s hybridized for N = 1000 (2.04x). --small: the same
 *   graph with 16 -> 16 -> 16 -> 2, where the kernels cost next to nothing and what is
 *   left is the front end: pushing device ops vs launching the graph. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringflow/ring.h>
#include <ringflow/engine.h>
#include <ringflow/device.h>
#include <ringflow/tensor.h>
#include <ringflow/ops.h>
#include <ringflow/log.h>
#include "bench.h"
#include "bench-args.h"

#define NL 3

struct mlp {
	struct rf_stream *s;
	struct rf_tensor *x, *w[NL], *b[NL], *h[NL], *a[NL - 1];
};

static int dims[NL + 1] = { 512, 256, 128, 2 };

/* One forward pass: 8 ops. */
static int forward(struct mlp *m)
{
	struct rf_tensor *in = m->x;
	int ret;

	for (int l = 0; l < NL; l++) {
		if ((ret = rf_gemm(m->s, 0, 0, 1.0f, in, m->w[l], 0.0f, m->h[l])) < 0 ||
		    (ret = rf_bias_add(m->s, m->h[l], m->b[l])) < 0)
			return ret;
		if (l < NL - 1) {
			if ((ret = rf_relu_fwd(m->s, m->a[l], m->h[l])) < 0)
				return ret;
			in = m->a[l];
		}
	}
	return 0;
}

static int mlp_make(struct rf_engine *e, struct rf_device *d, struct mlp *m)
{
	struct rf_prng *g;
	int ret;

	m->s = rf_device_stream(d, 0);
	if ((ret = rf_prng_create(e, 12, "init", &g)) < 0 ||
	    (ret = rf_tensor_create(d, RF_F32, "x", RF_DIMS(1, dims[0]), &m->x)) < 0 ||
	    (ret = rf_rand_uniform(m->s, m->x, g, -1, 1)) < 0)
		return ret;
	for (int l = 0; l < NL; l++) {
		float r = 1.0f / (float)dims[l];
		if ((ret = rf_tensor_create(d, RF_F32, "w", RF_DIMS(dims[l], dims[l + 1]), &m->w[l])) < 0 ||
		    (ret = rf_tensor_create(d, RF_F32, "b", RF_DIMS(dims[l + 1]), &m->b[l])) < 0 ||
		    (ret = rf_tensor_create(d, RF_F32, "h", RF_DIMS(1, dims[l + 1]), &m->h[l])) < 0 ||
		    (ret = rf_rand_uniform(m->s, m->w[l], g, -r, r)) < 0 ||
		    (ret = rf_rand_uniform(m->s, m->b[l], g, -r, r)) < 0)
			return ret;
		if (l < NL - 1 &&
		    (ret = rf_tensor_create(d, RF_F32, "a", RF_DIMS(1, dims[l + 1]), &m->a[l])) < 0)
			return ret;
	}
	return rf_engine_wait_all(e);
}

/* op by op (graph NULL) or replayed: seconds for n forward passes and one wait. */
static double run(struct rf_engine *e, struct mlp *m, long n, int replay)
{
	struct rf_graph *g = NULL;
	uint64_t t0 = rf_now_ns();
	int ret = 0;

	if (replay) {
		if ((ret = rf_engine_capture_begin(e, &(struct rf_capture_opts){ .name = "mlp" })) < 0)
			return -1;
		ret = forward(m);
		if (rf_engine_capture_end(e, &g) < 0 || ret < 0)
			return -1;
		for (long i = 0; i < n && ret >= 0; i++)
			ret = rf_graph_launch(g, NULL, NULL, 0);
	} else {
		for (long i = 0; i < n && ret >= 0; i++)
			ret = forward(m);
	}
	if (ret < 0 || rf_engine_wait_all(e) < 0)
		return -1;
	double s = (double)(rf_now_ns() - t0) / 1e9;
	rf_graph_destroy(g);
	return s;
}

int rf_bench_hybridize(int argc, char **argv)
{
	long n = 1000, reps = 5;
	int json = 0, cuda = 0;
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *d;
	struct mlp m;
	float y0[2], y1[2];
	double best[2] = { 1e30, 1e30 };

	for (int i = 1; i < argc; i++) {
		long *dst = !strcmp(argv[i], "--n") ? &n : !strcmp(argv[i], "--reps") ? &reps : NULL;
		int rc;
		if (bench_is_help(argv[i])) {
			fputs("usage: rf-bench hybridize [--n N] [--reps R] [--small] [--device "
			      "cpu|cuda] [--json]\n"
			      "  --n N            forward passes of the MLP, 1..10000000 "
			      "(default 1000)\n"
			      "  --reps R         repetitions, the best counted, 1..1000 "
			      "(default 5)\n"
			      "  --small          16-16-16 layers instead of the seed's\n"
			      "  --device D       cpu (default) or cuda\n",
			      stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--json")) {
			json = 1;
			continue;
		}
		if (!strcmp(argv[i], "--small")) {
			dims[0] = dims[1] = dims[2] = 16;
			continue;
		}
		if (!strcmp(argv[i], "--device") && i + 1 < argc &&
		    (!strcmp(argv[i + 1], "cpu") || !strcmp(argv[i + 1], "cuda"))) {
			cuda = !strcmp(argv[++i], "cuda");
			continue;
		}
		if (!strcmp(argv[i], "--device")) {
			fprintf(stderr,
				"rf-bench hybridize: --device: got '%s', expected cpu or cuda\n",
				i + 1 < argc ? argv[i + 1] : "(nothing)");
			return 2;
		}
		if (!dst)
			return bench_unknown("hybridize", argv[i]);
		if ((rc = bench_long("hybridize", argc, argv, &i, 1, dst == &n ? 10000000 : 1000,
				     dst)))
			return rc;
	}
	if (cuda && rf_cuda_count() <= 0) {
		fprintf(stderr, "rf-bench hybridize: --device cuda: no CUDA device here\n");
		return 1;
	}
	if (rf_ring_create(&ring, NULL) < 0 || rf_engine_create(&e, ring, NULL) < 0 ||
	    (cuda ? rf_cuda_open(e, 0, NULL, &d)
		  : rf_cpu_open(e, &(struct rf_cpu_opts){ .streams = 1, .blas_threads = 1 }, &d)) < 0 ||
	    mlp_make(e, d, &m) < 0) {
		fprintf(stderr, "rf-bench hybridize: setup failed: %s\n", rf_last_error());
		return 1;
	}
	for (long r = 0; r < reps; r++) {
		for (int mode = 0; mode < 2; mode++) {
			double s = run(e, &m, n, mode);
			if (s < 0) {
				fprintf(stderr, "rf-bench hybridize: run failed: %s\n", rf_last_error());
				return 1;
			}
			if (s < best[mode])
				best[mode] = s;
			if (rf_tensor_read(m.h[NL - 1], mode ? y1 : y0) < 0)
				return 1;
		}
		if (memcmp(y0, y1, sizeof(y0)) != 0) {
			fprintf(stderr, "rf-bench hybridize: replayed output differs from op by op\n");
			return 1;
		}
	}
	double ops = (double)n * 8;
	if (json)
		printf("{\"bench\":\"hybridize\",\"device\":\"%s\",\"dims\":\"%d-%d-%d-%d\",\"n\":%ld,\"op_by_op_s\":%.6f,\"replay_s\":%.6f,"
		       "\"ratio\":%s,\"op_by_op_ns_per_op\":%.1f,\"replay_ns_per_op\":%.1f}\n",
		       cuda ? "cuda" : "cpu", dims[0], dims[1], dims[2], dims[3], n, best[0], best[1],
		       BJ("%.3f", best[0] / best[1]), best[0] * 1e9 / ops,
		       best[1] * 1e9 / ops);
	else
		printf("MLP %d-%d-%d-%d on %s, batch 1, %ld passes of 8 ops, best of %ld:\n"
		       "  op by op   %8.4f s  (%6.0f ns per op)\n"
		       "  replayed   %8.4f s  (%6.0f ns per op, capture included)\n"
		       "  ratio      %8.2fx  (seeds: 0.54 s / 0.265 s = 2.04x; outputs identical)\n",
		       dims[0], dims[1], dims[2], dims[3], rf_device_name(d), n, reps, best[0],
		       best[0] * 1e9 / ops,
		       best[1], best[1] * 1e9 / ops,
		       best[0] / best[1]);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
