/* bench/bench-devices.c -- the devices' benchmarks (every figure is a ratio measured
 * within one run; each timing is the best of --reps runs).
 *
 * rf-bench parallel [--n N] [--gpu-n N] [--count C] [--reps R] [--cpu] [--json]
 *   Seeds section 12.3.1: C matmuls y_i = x*x (NxN) on one device, C on another, then both
 *   pushed without a barrier. With a GPU: the CPU device (x 2000^2, every core to
 *   OpenBLAS) and cuda:0 (x 6000^2, as the seed). Without one (or with --cpu): two
 *   compute streams of the CPU device, one OpenBLAS thread each (the threading policy
 *   of device.h). Prints t1, t2, t_both, overlap = (t1 + t2) / t_both and the ideal
 *   (t1 + t2) / max(t1, t2).
 *
 * rf-bench copy [--n N] [--count C] [--reps R] [--cpu] [--json]
 *   Seeds section 12.3.2: C matmuls on the compute stream (t1), then copying the C results
 *   off the device on the d2h stream (t2), versus both pushed together so copy i
 *   overlaps matmul i+1 (t_both). With a GPU: cuda:0 into pinned host memory. Without
 *   one: the CPU device's compute stream (OpenBLAS on cores-1 threads, leaving the
 *   copy stream a core) and its memcpy copy stream into other host tensors.
 *
 * rf-bench gemm [--reps R] [--threads T] [--inflight I] [--json]
 *   GEMM through the engine (ops pushed on a CPU compute stream, run by its worker
 *   thread) versus rf__k_gemm (cblas_sgemm) called directly in a loop, on the same
 *   shapes and OpenBLAS threads: 2000^2, the MLP's (batch 256, 784-256-10) forward and
 *   backward GEMMs, and LeNet's im2col GEMMs. ratio = engine GFLOPS / direct GFLOPS.
 *
 * rf-bench threads [--reps R] [--json]   (its GEMMs through OpenBLAS: RF_KERNELS_BLAS_GEMM=1
 *   unless set -- ringflow's AVX-512 GEMM, which rf__k_gemm takes where it can, ignores
 *   OpenBLAS's threads)
 *   The CPU threading policy. The same total work run three ways on the cores:
 *     1x<cores>  one stream, OpenBLAS on every core
 *     2x1        two streams, half the work each, one OpenBLAS thread each
 *     2x<cores>  two streams, OpenBLAS on every core each (oversubscribed)
 *   for workloads: 2000^2 GEMMs; MLP train-step GEMMs (batch 256); LeNet conv
 *   forward+backward ops (batch 256); and MLP data parallel (one stream on batch 256
 *   vs two streams on batch 128 each). Prints times and speed-ups over 1x<cores>.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ringflow/ring.h>
#include <ringflow/engine.h>
#include <ringflow/device.h>
#include <ringflow/tensor.h>
#include <ringflow/ops.h>
#include "kernels.h"   /* the CPU backend's own (devices/cpu): rf-bench links it */
#include "par.h"       /* its helper threads: how many a GEMM may use */
#include "bench.h"
#include "bench-args.h"

struct bopts {
	long n, gpu_n, count, reps, threads, inflight;
	int json, cpu_only;
};

static const char parallel_usage[] =
	"usage: rf-bench parallel [--n N] [--gpu-n N] [--count C] [--reps R] [--cpu] [--json]\n"
	"  --n N       the CPU's matrices are N x N, 1..16384 (default 2000)\n"
	"  --gpu-n N   the GPU's, 1..32768 (default 6000)\n"
	"  --count C   matmuls per device, 1..10000 (default 10)\n"
	"  --reps R    repetitions, the best counted, 1..1000 (default 3)\n"
	"  --cpu       two CPU compute streams even where there is a GPU\n";
static const char copy_usage[] =
	"usage: rf-bench copy [--n N] [--count C] [--reps R] [--cpu] [--json]\n"
	"  --n N       N x N matrices, 1..32768 (default 6000 on a GPU, 2000 on the CPU)\n"
	"  --count C   matmuls and copies, 1..10000 (default 10)\n"
	"  --reps R    repetitions, the best counted, 1..1000 (default 3)\n"
	"  --cpu       the CPU device even where there is a GPU\n";
static const char gemm_usage[] =
	"usage: rf-bench gemm [--reps R] [--threads T] [--inflight I] [--json]\n"
	"  --reps R      repetitions, the best counted, 1..1000 (default 5)\n"
	"  --threads T   OpenBLAS threads, 1..1024 (default: the device's policy; they apply\n"
	"                where OpenBLAS multiplies: without AVX-512, or with RF_KERNELS_BLAS_GEMM=1)\n"
	"  --inflight I  the engine's cap on ops in flight, 1..1000000 (default 64)\n";
static const char threads_usage[] =
	"usage: rf-bench threads [--reps R] [--json]\n"
	"  --reps R      repetitions, the best counted, 1..1000 (default 3)\n";

/* The options every subcommand of this file shares (each usage lists its own; the
 * others are accepted and ignored, as before). -1: go on; else the exit status (0
 * after --help, 2 for a bad argument, said in one line). */
static int bparse(const char *cmd, const char *usage, int argc, char **argv, struct bopts *o)
{
	for (int i = 1; i < argc; i++) {
		long *dst = NULL, max = 0;
		int rc;
		if (bench_is_help(argv[i])) {
			fputs(usage, stdout);
			fputs("  --json      one JSON object per result\n", stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--json")) {
			o->json = 1;
			continue;
		}
		if (!strcmp(argv[i], "--cpu")) {
			o->cpu_only = 1;
			continue;
		}
		if (!strcmp(argv[i], "--n"))
			dst = &o->n, max = !strcmp(cmd, "copy") ? 32768 : 16384;
		else if (!strcmp(argv[i], "--gpu-n"))
			dst = &o->gpu_n, max = 32768;
		else if (!strcmp(argv[i], "--count"))
			dst = &o->count, max = 10000;
		else if (!strcmp(argv[i], "--reps"))
			dst = &o->reps, max = 1000;
		else if (!strcmp(argv[i], "--threads"))
			dst = &o->threads, max = 1024;
		else if (!strcmp(argv[i], "--inflight"))
			dst = &o->inflight, max = 1000000;
		if (!dst)
			return bench_unknown(cmd, argv[i]);
		if ((rc = bench_long(cmd, argc, argv, &i, 1, max, dst)))
			return rc;
	}
	return -1;
}

/* Out of memory (or another failure) allocating what the options ask for: one line
 * naming them, exit status 1. */
static int alloc_failed(const char *cmd, const struct bopts *o)
{
	fprintf(stderr, "rf-bench %s: cannot allocate %ld matrices of %ld x %ld floats (--count, "
		"--n): out of memory\n", cmd, o->count, o->n, o->n);
	return 1;
}

struct benv {
	struct rf_ring *ring;
	struct rf_engine *e;
};

/* max_inflight: the engine's cap (0: its default). */
static int benv_open(struct benv *b, unsigned max_inflight)
{
	int ret = rf_ring_create(&b->ring, NULL);
	if (ret < 0)
		return ret;
	ret = rf_engine_create(&b->e, b->ring,
			       &(struct rf_engine_opts){ .sync = 0, .max_inflight = max_inflight });
	if (ret < 0)
		rf_ring_destroy(b->ring);
	return ret;
}

static void benv_close(struct benv *b)
{
	rf_engine_destroy(b->e);
	rf_ring_destroy(b->ring);
}

static double now_s(void)
{
	return (double)rf_now_ns() * 1e-9;
}

static int online_cores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

#define BTRY(x) do { int _r = (x); if (_r < 0) { \
	fprintf(stderr, "rf-bench: %s failed: %s\n", #x, rf_last_error()); return -1; } } while (0)

/* A square f32 tensor of uniform numbers (a PRNG op), waited for. */
static struct rf_tensor *rand_square(struct rf_device *d, struct rf_prng *g, long n, const char *nm)
{
	struct rf_tensor *t;
	rf_tensor_create(d, RF_F32, nm, RF_DIMS(n, n), &t);
	if (!t || rf_rand_uniform(NULL, t, g, 0.0f, 1.0f) < 0 || rf_tensor_wait(t) < 0)
		return NULL;
	return t;
}

/* Push count matmuls ys[i] = x*x on s. */
static int push_run(struct rf_stream *s, struct rf_tensor *x, struct rf_tensor **ys, long count)
{
	for (long i = 0; i < count; i++)
		BTRY(rf_gemm(s, 0, 0, 1.0f, x, x, 0.0f, ys[i]));
	return 0;
}

static void print_overlap(const char *name, const struct bopts *o, const char *mode,
			  const char *what1, const char *what2, double t1, double t2, double tb)
{
	double ov = (t1 + t2) / tb, ideal = (t1 + t2) / (t1 > t2 ? t1 : t2);

	if (o->json) {
		printf("{\"bench\":\"%s\",\"mode\":\"%s\",\"count\":%ld,\"t1_s\":%.6f,\"t2_s\":%.6f,"
		       "\"t_both_s\":%.6f,\"overlap\":%s,\"ideal\":%s,\"efficiency\":%s}\n",
		       name, mode, o->count, t1, t2, tb, BJ("%.4f", ov), BJ("%.4f", ideal),
		       BJ("%.4f", ov / ideal));
		return;
	}
	printf("%s (%s)\n", name, mode);
	printf("  %-28s %8.4f s\n", what1, t1);
	printf("  %-28s %8.4f s\n", what2, t2);
	printf("  %-28s %8.4f s\n", "both, no barrier", tb);
	printf("  overlap (t1+t2)/t_both      %8.3f   ideal (t1+t2)/max %6.3f   efficiency %5.1f%%\n",
	       ov, ideal, 100.0 * ov / ideal);
}

/* ---- parallel ---------------------------------------------------------------------- */

int rf_bench_parallel(int argc, char **argv)
{
	struct bopts o = { .n = 2000, .gpu_n = 6000, .count = 10, .reps = 3 };
	struct benv b;
	struct rf_device *cpu, *gpu = NULL;
	struct rf_stream *s1, *s2;
	struct rf_tensor *x1, *x2, **y1, **y2;
	struct rf_prng *g;
	double t1 = 1e30, t2 = 1e30, tb = 1e30;
	int use_gpu;
	char mode[96];

	int rc;

	if ((rc = bparse("parallel", parallel_usage, argc, argv, &o)) >= 0)
		return rc;
	/* x and the C results: on the host twice without a GPU, once with one */
	if ((rc = bench_mem("parallel", "--n x --count", 4.0 * (double)o.n * (double)o.n *
			    (double)(o.count + 1) * (o.cpu_only || rf_cuda_count() <= 0 ? 2 : 1))))
		return rc;
	if ((rc = benv_open(&b, 0)) < 0) {
		fprintf(stderr, "rf-bench parallel: setup failed: %s\n", rf_last_error());
		return 1;
	}
	use_gpu = !o.cpu_only && rf_cuda_count() > 0;
	if (use_gpu) {
		BTRY(rf_cpu_open(b.e, NULL, &cpu));
		BTRY(rf_cuda_open(b.e, 0, NULL, &gpu));
		s1 = rf_device_stream(cpu, 0);
		s2 = rf_device_stream(gpu, 0);
		snprintf(mode, sizeof(mode), "cpu:0 %ld^2 (%s, %u helpers) || cuda:0 %ld^2", o.n,
			 rf__k_gemm_who(), rf__par_helpers(), o.gpu_n);
	} else {
		BTRY(rf_cpu_open(b.e, &(struct rf_cpu_opts){ .streams = 2 }, &cpu));
		s1 = rf_device_stream(cpu, 0);
		s2 = rf_device_stream(cpu, 1);
		snprintf(mode, sizeof(mode), "two CPU streams, %ld^2, %s (%u helpers)", o.n,
			 rf__k_gemm_who(), rf__par_helpers());
	}
	rf_prng_create(b.e, 1, "x", &g);
	x1 = rand_square(cpu, g, o.n, "x1");
	x2 = rand_square(gpu ? gpu : cpu, g, gpu ? o.gpu_n : o.n, "x2");
	y1 = calloc((size_t)o.count, sizeof(*y1));
	y2 = calloc((size_t)o.count, sizeof(*y2));
	if (!x1 || !x2 || !y1 || !y2)
		return alloc_failed("parallel", &o);
	for (long i = 0; i < o.count; i++) {
		rf_tensor_create(x1->dev, RF_F32, "y1", RF_DIMS(x1->shape[0], x1->shape[0]), &y1[i]);
		rf_tensor_create(x2->dev, RF_F32, "y2", RF_DIMS(x2->shape[0], x2->shape[0]), &y2[i]);
		if (!y1[i] || !y2[i])
			return alloc_failed("parallel", &o);
	}
	/* warm up both */
	push_run(s1, x1, y1, 1);
	push_run(s2, x2, y2, 1);
	BTRY(rf_engine_wait_all(b.e));
	for (long r = 0; r < o.reps; r++) {
		double t0 = now_s(), t;
		push_run(s1, x1, y1, o.count);
		BTRY(rf_engine_wait_all(b.e));
		t = now_s() - t0;
		t1 = t < t1 ? t : t1;
		t0 = now_s();
		push_run(s2, x2, y2, o.count);
		BTRY(rf_engine_wait_all(b.e));
		t = now_s() - t0;
		t2 = t < t2 ? t : t2;
		t0 = now_s();
		push_run(s1, x1, y1, o.count);
		push_run(s2, x2, y2, o.count);
		BTRY(rf_engine_wait_all(b.e));
		t = now_s() - t0;
		tb = t < tb ? t : tb;
	}
	print_overlap("parallel", &o, mode, use_gpu ? "run(x_cpu) on cpu:0" : "run(x) on stream 0",
		      use_gpu ? "run(x_gpu) on cuda:0" : "run(x) on stream 1", t1, t2, tb);
	for (long i = 0; i < o.count; i++) {
		rf_tensor_destroy(y1[i]);
		rf_tensor_destroy(y2[i]);
	}
	rf_tensor_destroy(x1);
	rf_tensor_destroy(x2);
	rf_prng_destroy(g);
	free(y1);
	free(y2);
	BTRY(rf_engine_wait_all(b.e));
	if (gpu)
		rf_device_close(gpu);
	rf_device_close(cpu);
	benv_close(&b);
	return 0;
}

/* ---- copy -------------------------------------------------------------------------- */

int rf_bench_copy(int argc, char **argv)
{
	struct bopts o = { .n = 0, .count = 10, .reps = 3 };
	struct benv b;
	struct rf_device *dev, *cpu = NULL;
	struct rf_stream *sc, *sd;
	struct rf_tensor *x, **y, **h;
	struct rf_pinned *pin = NULL;
	struct rf_prng *g;
	double t1 = 1e30, t2 = 1e30, tb = 1e30;
	int use_gpu, bt = online_cores() > 1 ? online_cores() - 1 : 1;
	char mode[128];

	int rc;

	if ((rc = bparse("copy", copy_usage, argc, argv, &o)) >= 0)
		return rc;
	use_gpu = !o.cpu_only && rf_cuda_count() > 0;
	/* the host copies (and on the CPU x and the results too) */
	long nn = o.n ? o.n : use_gpu ? 6000 : 2000;
	if ((rc = bench_mem("copy", "--n x --count", 4.0 * (double)nn * (double)nn *
			    (use_gpu ? (double)o.count : 2.0 * (double)o.count + 1))))
		return rc;
	if ((rc = benv_open(&b, 0)) < 0) {
		fprintf(stderr, "rf-bench copy: setup failed: %s\n", rf_last_error());
		return 1;
	}
	if (use_gpu) {
		if (!o.n)
			o.n = 6000;
		BTRY(rf_cpu_open(b.e, NULL, &cpu));
		BTRY(rf_cuda_open(b.e, 0, NULL, &dev));
		if (rf_pinned_create((size_t)o.count * (size_t)o.n * (size_t)o.n * 4 + (8u << 20), &pin) < 0)
			pin = NULL;
		snprintf(mode, sizeof(mode), "cuda:0 %ld^2, d2h into %s host memory", o.n,
			 pin ? "pinned" : "pageable");
	} else {
		if (!o.n)
			o.n = 2000;
		BTRY(rf_cpu_open(b.e, &(struct rf_cpu_opts){ .streams = 1, .blas_threads = bt }, &dev));
		cpu = dev;
		snprintf(mode, sizeof(mode), "CPU: compute stream (%s, %u helpers) + memcpy copy "
			 "stream, %ld^2", rf__k_gemm_who(), rf__par_helpers(), o.n);
	}
	sc = rf_device_stream(dev, 0);
	sd = rf_device_d2h_stream(dev);
	rf_prng_create(b.e, 2, "x", &g);
	x = rand_square(dev, g, o.n, "x");
	y = calloc((size_t)o.count, sizeof(*y));
	h = calloc((size_t)o.count, sizeof(*h));
	if (!x || !y || !h)
		return alloc_failed("copy", &o);
	for (long i = 0; i < o.count; i++) {
		rf_tensor_create(dev, RF_F32, "y", RF_DIMS(o.n, o.n), &y[i]);
		if (pin)
			rf_tensor_create_pinned(cpu, pin, RF_F32, "y_host", RF_DIMS(o.n, o.n), &h[i]);
		else
			rf_tensor_create(cpu, RF_F32, "y_host", RF_DIMS(o.n, o.n), &h[i]);
		if (!y[i] || !h[i])
			return alloc_failed("copy", &o);
		BTRY(rf_fill(NULL, h[i], 0.0f)); /* touch the pages */
	}
	push_run(sc, x, y, 1);
	BTRY(rf_copy(sd, h[0], y[0]));
	BTRY(rf_engine_wait_all(b.e));
	for (long r = 0; r < o.reps; r++) {
		double t0 = now_s(), t;
		push_run(sc, x, y, o.count);
		BTRY(rf_engine_wait_all(b.e));
		t = now_s() - t0;
		t1 = t < t1 ? t : t1;
		t0 = now_s();
		for (long i = 0; i < o.count; i++)
			BTRY(rf_copy(sd, h[i], y[i]));
		BTRY(rf_engine_wait_all(b.e));
		t = now_s() - t0;
		t2 = t < t2 ? t : t2;
		t0 = now_s();
		for (long i = 0; i < o.count; i++) {
			BTRY(rf_gemm(sc, 0, 0, 1.0f, x, x, 0.0f, y[i]));
			BTRY(rf_copy(sd, h[i], y[i]));
		}
		BTRY(rf_engine_wait_all(b.e));
		t = now_s() - t0;
		tb = t < tb ? t : tb;
	}
	print_overlap("copy", &o, mode, "compute (ten matmuls)", "copy results off the device",
		      t1, t2, tb);
	for (long i = 0; i < o.count; i++) {
		rf_tensor_destroy(y[i]);
		rf_tensor_destroy(h[i]);
	}
	rf_tensor_destroy(x);
	rf_prng_destroy(g);
	free(y);
	free(h);
	BTRY(rf_engine_wait_all(b.e));
	if (pin)
		rf_pinned_destroy(pin);
	rf_device_close(dev);
	if (cpu && cpu != dev)
		rf_device_close(cpu);
	benv_close(&b);
	return 0;
}

/* ---- gemm ---------------------------------------------------------------------------- */

struct gshape {
	const char *name;
	int m, n, k, ta, tb;
};

static const struct gshape gshapes[] = {
	{ "square 2000", 2000, 2000, 2000, 0, 0 },
	{ "mlp fc1 fwd x*W1^T", 256, 256, 784, 0, 1 },
	{ "mlp fc1 dW1 dy^T*x", 256, 784, 256, 1, 0 },
	{ "mlp fc2 fwd h*W2^T", 256, 10, 256, 0, 1 },
	{ "mlp fc2 dW2 dy^T*h", 10, 256, 256, 1, 0 },
	{ "mlp fc2 dh dy*W2", 256, 256, 10, 0, 0 },
	{ "lenet conv1 im2col", 6, 147456, 25, 0, 0 },
	{ "lenet conv2 im2col", 16, 16384, 150, 0, 0 },
};

int rf_bench_gemm(int argc, char **argv)
{
	struct bopts o = { .reps = 5 };
	struct benv b;
	struct rf_device *d;
	struct rf_prng *g;
	int worst_ok = 1;

	int rc;

	if ((rc = bparse("gemm", gemm_usage, argc, argv, &o)) >= 0)
		return rc;
	/* A bounded window of ops in flight, as a training loop has (see the report on
	 * rf__var_scan: its cost grows with the ops queued on one variable). */
	if ((rc = benv_open(&b, o.inflight ? (unsigned)o.inflight : 64)) < 0) {
		fprintf(stderr, "rf-bench gemm: setup failed: %s\n", rf_last_error());
		return 1;
	}
	BTRY(rf_cpu_open(b.e, &(struct rf_cpu_opts){ .blas_threads = (int)o.threads }, &d));
	rf_prng_create(b.e, 3, "g", &g);
	if (!o.json)
		printf("gemm: engine (worker stream) vs direct rf__k_gemm: %s, %u helper "
		       "threads (OpenBLAS's: %d)\n"
		       "  %-22s %6s %6s %6s %9s %10s %10s %7s\n", rf__k_gemm_who(),
		       rf__par_helpers(), rf__k_blas_get_threads(), "shape",
		       "m", "n", "k", "calls", "direct GF", "engine GF", "ratio");
	for (size_t si = 0; si < sizeof(gshapes) / sizeof(gshapes[0]); si++) {
		const struct gshape *s = &gshapes[si];
		struct rf_tensor *A;
		rf_tensor_create(d, RF_F32, "A", RF_DIMS(s->ta ? s->k : s->m, s->ta ? s->m : s->k), &A);
		struct rf_tensor *B;
		rf_tensor_create(d, RF_F32, "B", RF_DIMS(s->tb ? s->n : s->k, s->tb ? s->k : s->n), &B);
		struct rf_tensor *C;
		rf_tensor_create(d, RF_F32, "C", RF_DIMS(s->m, s->n), &C);
		double flop = 2.0 * s->m * s->n * s->k, td = 1e30, te = 1e30, t0, t;
		long calls;
		if (!A || !B || !C)
			return 1;
		BTRY(rf_rand_uniform(NULL, A, g, -1, 1));
		BTRY(rf_rand_uniform(NULL, B, g, -1, 1));
		BTRY(rf_engine_wait_all(b.e));
		/* calls for ~0.4 s at ~100 GFLOPS */
		calls = (long)(40e9 / flop);
		if (calls < 5)
			calls = 5;
		for (long r = 0; r < o.reps; r++) {
			int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
			t0 = now_s();
			for (long i = 0; i < calls; i++)
				rf__k_gemm(s->ta, s->tb, s->m, s->n, s->k, 1.0f, A->data, lda, B->data, ldb,
					  0.0f, C->data, s->n);
			t = now_s() - t0;
			td = t < td ? t : td;
			t0 = now_s();
			for (long i = 0; i < calls; i++)
				BTRY(rf_gemm(NULL, s->ta, s->tb, 1.0f, A, B, 0.0f, C));
			BTRY(rf_engine_wait_all(b.e));
			t = now_s() - t0;
			te = t < te ? t : te;
		}
		{
			double gd = flop * calls / td * 1e-9, ge = flop * calls / te * 1e-9;
			if (si < 3 && ge / gd < 0.95)
				worst_ok = 0;
			if (o.json)
				printf("{\"bench\":\"gemm\",\"shape\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,"
				       "\"calls\":%ld,\"blas_threads\":%d,\"direct_gflops\":%s,"
				       "\"engine_gflops\":%s,\"us_per_call_direct\":%.2f,"
				       "\"us_per_call_engine\":%.2f,\"ratio\":%s}\n",
				       s->name, s->m, s->n, s->k, calls, rf__k_blas_get_threads(),
				       BJ("%.2f", gd), BJ("%.2f", ge), td / calls * 1e6,
				       te / calls * 1e6, BJ("%.4f", ge / gd));
			else
				printf("  %-22s %6d %6d %6d %9ld %10.1f %10.1f %7.3f\n", s->name, s->m, s->n,
				       s->k, calls, gd, ge, ge / gd);
		}
		rf_tensor_destroy(A);
		rf_tensor_destroy(B);
		rf_tensor_destroy(C);
	}
	if (!o.json && !worst_ok)
		printf("  (a ratio below 0.95 on a large shape: a noisy machine? rerun with --reps 5)\n");
	rf_prng_destroy(g);
	BTRY(rf_engine_wait_all(b.e));
	rf_device_close(d);
	benv_close(&b);
	return 0;
}

/* ---- threads --------------------------------------------------------------------------- */

/* One unit of work of a workload, pushed on s with tensors of set k. */
struct tw {
	const char *name;
	int units;                       /* total units (split in half over two streams) */
	int batch;
	struct rf_tensor *t[2][12];      /* per stream */
};

enum { W_SQUARE, W_MLP, W_LENET, W_MLP_DP, W_N };

static int tw_alloc(struct rf_device *d, struct rf_prng *g, int w, struct tw *x)
{
	for (int k = 0; k < 2; k++) {
		struct rf_tensor **t = x->t[k];
		int bs = x->batch;
		switch (w) {
		case W_SQUARE:
			rf_tensor_create(d, RF_F32, "a", RF_DIMS(2000, 2000), &t[0]);
			rf_tensor_create(d, RF_F32, "c", RF_DIMS(2000, 2000), &t[1]);
			break;
		case W_MLP:
		case W_MLP_DP:
			rf_tensor_create(d, RF_F32, "x", RF_DIMS(bs, 784), &t[0]);
			rf_tensor_create(d, RF_F32, "w1", RF_DIMS(256, 784), &t[1]);
			rf_tensor_create(d, RF_F32, "h", RF_DIMS(bs, 256), &t[2]);
			rf_tensor_create(d, RF_F32, "w2", RF_DIMS(10, 256), &t[3]);
			rf_tensor_create(d, RF_F32, "o", RF_DIMS(bs, 10), &t[4]);
			rf_tensor_create(d, RF_F32, "dw2", RF_DIMS(10, 256), &t[5]);
			rf_tensor_create(d, RF_F32, "dh", RF_DIMS(bs, 256), &t[6]);
			rf_tensor_create(d, RF_F32, "dw1", RF_DIMS(256, 784), &t[7]);
			break;
		case W_LENET:
			rf_tensor_create(d, RF_F32, "x", RF_DIMS(bs, 1, 28, 28), &t[0]);
			rf_tensor_create(d, RF_F32, "w1", RF_DIMS(6, 1, 5, 5), &t[1]);
			rf_tensor_create(d, RF_F32, "y1", RF_DIMS(bs, 6, 24, 24), &t[2]);
			rf_tensor_create(d, RF_F32, "p1", RF_DIMS(bs, 6, 12, 12), &t[3]);
			rf_tensor_create(d, RF_F32, "w2", RF_DIMS(16, 6, 5, 5), &t[4]);
			rf_tensor_create(d, RF_F32, "y2", RF_DIMS(bs, 16, 8, 8), &t[5]);
			rf_tensor_create(d, RF_F32, "dw2", RF_DIMS(16, 6, 5, 5), &t[6]);
			rf_tensor_create(d, RF_F32, "dp1", RF_DIMS(bs, 6, 12, 12), &t[7]);
			rf_tensor_create(d, RF_F32, "dw1", RF_DIMS(6, 1, 5, 5), &t[8]);
			break;
		}
		for (int i = 0; i < 12 && t[i]; i++)
			BTRY(rf_rand_uniform(NULL, t[i], g, -0.5f, 0.5f));
	}
	return 0;
}

static void tw_free(struct tw *x)
{
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 12; i++)
			if (x->t[k][i]) {
				rf_tensor_destroy(x->t[k][i]);
				x->t[k][i] = NULL;
			}
}

static int tw_unit(int w, struct rf_stream *s, struct rf_tensor **t)
{
	switch (w) {
	case W_SQUARE:
		return rf_gemm(s, 0, 0, 1.0f, t[0], t[0], 0.0f, t[1]);
	case W_MLP:
	case W_MLP_DP:
		/* forward and backward GEMMs of a 784-256-10 MLP step */
		BTRY(rf_gemm(s, 0, 1, 1.0f, t[0], t[1], 0.0f, t[2]));
		BTRY(rf_relu_fwd(s, t[2], t[2]));
		BTRY(rf_gemm(s, 0, 1, 1.0f, t[2], t[3], 0.0f, t[4]));
		BTRY(rf_gemm(s, 1, 0, 1.0f, t[4], t[2], 0.0f, t[5]));
		BTRY(rf_gemm(s, 0, 0, 1.0f, t[4], t[3], 0.0f, t[6]));
		BTRY(rf_gemm(s, 1, 0, 1.0f, t[6], t[0], 0.0f, t[7]));
		return 0;
	case W_LENET:
		/* conv forward, pool, conv forward, and the conv backwards */
		BTRY(rf_conv2d_fwd(s, t[2], t[0], t[1], NULL, 1, 0));
		BTRY(rf_avgpool2d_fwd(s, t[3], t[2], 2));
		BTRY(rf_conv2d_fwd(s, t[5], t[3], t[4], NULL, 1, 0));
		BTRY(rf_conv2d_bwd_filter(s, t[6], NULL, t[5], t[3], 0, 1, 0));
		BTRY(rf_conv2d_bwd_data(s, t[7], t[5], t[4], 1, 0));
		BTRY(rf_conv2d_bwd_filter(s, t[8], NULL, t[2], t[0], 0, 1, 0));
		return 0;
	}
	return -EINVAL;
}

/* One timed pass of x's units: layout 0 = all on stream 0, 1 = alternating over
 * streams 0 and 1. Returns seconds or < 0. */
static double tw_once(struct benv *b, struct rf_device *d, int w, struct tw *x, int layout,
		      int blas)
{
	double t0;

	rf__k_blas_set_threads(blas);
	t0 = now_s();
	for (int u = 0; u < x->units; u++) {
		int k = layout ? u & 1 : 0;
		if (tw_unit(w, rf_device_stream(d, (unsigned)k), x->t[k]) < 0)
			return -1;
	}
	if (rf_engine_wait_all(b->e) < 0)
		return -1;
	return now_s() - t0;
}

int rf_bench_threads(int argc, char **argv)
{
	struct bopts o = { .reps = 3 };
	struct benv b;
	struct rf_device *d;
	struct rf_prng *g;
	int cores = online_cores(), saved;
	static const char *names[W_N] = { "gemm 2000^2 x8", "mlp step b256 x40", "lenet conv b256 x8",
					  "mlp data-parallel b256" };

	int rc;

	if ((rc = bparse("threads", threads_usage, argc, argv, &o)) >= 0)
		return rc;
	/* the layouts are OpenBLAS's: where the CPU has AVX-512, rf__k_gemm would take
	 * ringflow's GEMM instead, which ignores OpenBLAS's threads (set before any thread
	 * starts; a value the user set is kept) */
	setenv("RF_KERNELS_BLAS_GEMM", "1", 0);
	if ((rc = benv_open(&b, 0)) < 0) {
		fprintf(stderr, "rf-bench threads: setup failed: %s\n", rf_last_error());
		return 1;
	}
	BTRY(rf_cpu_open(b.e, &(struct rf_cpu_opts){ .streams = 2, .blas_threads = -1 }, &d));
	saved = rf__k_blas_get_threads();
	rf_prng_create(b.e, 4, "g", &g);
	if (!o.json)
		printf("threads: %d cores; the same work as 1 stream x %d BLAS threads, 2 streams x 1, "
		       "2 streams x %d (GEMMs through OpenBLAS: RF_KERNELS_BLAS_GEMM=%s)\n"
		       "  %-24s %10s %10s %10s %8s %8s\n", cores, cores, cores,
		       getenv("RF_KERNELS_BLAS_GEMM"),
		       "workload", "1x" "all", "2x1", "2xall", "2x1 su", "2xall su");
	for (int w = 0; w < W_N; w++) {
		struct tw x = { 0 }, half = { 0 };
		double t1, t21, t2a;
		x.units = w == W_SQUARE ? 8 : w == W_LENET ? 8 : 40;
		x.batch = 256;
		if (tw_alloc(d, g, w, &x) < 0)
			return 1;
		if (rf_engine_wait_all(b.e) < 0)
			return 1;
		if (w == W_MLP_DP) {
			/* one stream on batch 256 vs two on batch 128: the same samples */
			half.units = x.units * 2;
			half.batch = 128;
			if (tw_alloc(d, g, w, &half) < 0 || rf_engine_wait_all(b.e) < 0)
				return 1;
		}
		/* the three layouts interleaved in every rep (noise hits them alike); the
		 * first rep warms up */
		t1 = t21 = t2a = 1e30;
		for (long r = 0; r <= o.reps; r++) {
			struct tw *two = w == W_MLP_DP ? &half : &x;
			double a = tw_once(&b, d, w, &x, 0, cores);
			double c = tw_once(&b, d, w, two, 1, 1);
			double e2 = tw_once(&b, d, w, two, 1, cores);
			if (a < 0 || c < 0 || e2 < 0)
				return 1;
			if (r) {
				t1 = a < t1 ? a : t1;
				t21 = c < t21 ? c : t21;
				t2a = e2 < t2a ? e2 : t2a;
			}
		}
		if (o.json)
			printf("{\"bench\":\"threads\",\"workload\":\"%s\",\"cores\":%d,"
			       "\"t_1xall_s\":%.6f,\"t_2x1_s\":%.6f,\"t_2xall_s\":%.6f,"
			       "\"speedup_2x1\":%s,\"speedup_2xall\":%s}\n", names[w], cores, t1,
			       t21, t2a, BJ("%.4f", t1 / t21), BJ("%.4f", t1 / t2a));
		else
			printf("  %-24s %9.4fs %9.4fs %9.4fs %8.3f %8.3f\n", names[w], t1, t21, t2a,
			       t1 / t21, t1 / t2a);
		tw_free(&x);
		tw_free(&half);
		if (rf_engine_wait_all(b.e) < 0)
			return 1;
	}
	rf__k_blas_set_threads(saved);
	rf_prng_destroy(g);
	BTRY(rf_engine_wait_all(b.e));
	rf_device_close(d);
	benv_close(&b);
	return 0;
}
