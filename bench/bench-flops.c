/* bench/bench-flops.c -- rf-bench flops: the FLOP limit of a model on this CPU,
 * measured with ringflow's own GEMM (rf__k_gemm, one thread) at the model's shapes.
 *
 * For every conv and dense layer of the model's table (model.h) at batch B, the three
 * GEMMs a training step makes -- forward, data gradient (not for a layer on the model's
 * input), weight gradient -- with the m x n x k the CPU kernels use (convs: images in
 * the im2col groups rf__k_conv2d_workspace_size chooses). Each GEMM is timed alone (best
 * of R repetitions, warm caches); their sum is the time one core would need for the
 * step's GEMMs and nothing else. The limit is B / that time x cores: the samples/s a
 * run could reach if everything besides the GEMMs were free and the cores never waited.
 *
 *   rf-bench flops [--model NAME] [--batch B] [--reps R] [--cores C]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench-args.h"
#include "kernels.h"   /* the CPU backend's own (devices/cpu): rf-bench links it */
#include <ringflow/model.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* best seconds of one C (m, n) = op(A) op(B), A (m, k) B (k, n) */
static double time_gemm(int m, int n, int k, int reps)
{
	float *a = malloc((size_t)m * k * 4), *b = malloc((size_t)k * n * 4), *c = malloc((size_t)m * n * 4);
	double best = 1e30;

	if (!a || !b || !c) {
		free(a), free(b), free(c);
		return -1;
	}
	rf__k_rand_uniform(a, (size_t)m * k, 1, 0, -1, 1);
	rf__k_rand_uniform(b, (size_t)k * n, 2, 0, -1, 1);
	for (int r = 0; r < reps + 1; r++) {
		double t0 = now();
		rf__k_gemm(0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
		double t = now() - t0;
		if (r > 0 && t < best)
			best = t;
	}
	free(a), free(b), free(c);
	return best;
}

int rf_bench_flops(int argc, char **argv)
{
	const char *model = "resnet18";
	long batch = 64, reps = 3, cores = sysconf(_SC_NPROCESSORS_ONLN);
	double total = 0, flops = 0;
	int rc;

	for (int i = 1; i < argc; i++) {
		/* atoi took "abc" as 0, "8x" as 8 */
		if (bench_is_help(argv[i])) {
			printf("usage: rf-bench flops [--model %s] [--batch B] [--reps R] "
			       "[--cores C]\n"
			       "  --model NAME  the model whose training GEMMs are timed "
			       "(default resnet18)\n"
			       "  --batch B     images per step, 1..4096 (default 64)\n"
			       "  --reps R      repetitions of each GEMM, the best counted, "
			       "1..1000 (default 3)\n"
			       "  --cores C     cores the limit is computed for, 1..4096 "
			       "(default: online)\n",
			       rf_model_names());
			return 0;
		} else if (!strcmp(argv[i], "--model")) {
			model = i + 1 < argc ? argv[++i] : "";
			if (!rf_model_spec(model)) {
				fprintf(stderr, "rf-bench flops: --model: got '%s', expected %s\n",
					model, rf_model_names());
				return 2;
			}
		} else if (!strcmp(argv[i], "--batch")) {
			if ((rc = bench_long("flops", argc, argv, &i, 1, 4096, &batch)))
				return rc;
		} else if (!strcmp(argv[i], "--reps")) {
			if ((rc = bench_long("flops", argc, argv, &i, 1, 1000, &reps)))
				return rc;
		} else if (!strcmp(argv[i], "--cores")) {
			if ((rc = bench_long("flops", argc, argv, &i, 1, 4096, &cores)))
				return rc;
		} else {
			return bench_unknown("flops", argv[i]);
		}
	}
	const struct rf_model_spec *sp = rf_model_spec(model);
	if (cores < 1)
		cores = 1;
	rf__k_blas_set_threads(1);
	printf("rf-bench flops: %s, batch %ld, rf__k_gemm on one thread, best of %ld\n", model,
	       batch, reps);
	printf("%-4s %-8s %22s %22s %22s\n", "layer", "kind", "forward m x n x k", "data grad", "weight grad");
	for (unsigned i = 0; i < sp->ntable; i++) {
		const struct rf_layer *l = &sp->table[i];
		const struct rf_layer_info *f = &sp->info[i];
		int in = f->in, m, n, k, g = (int)batch, ng;
		int c = in ? sp->info[in - 1].c : 1, h = in ? sp->info[in - 1].h : 28;
		int w = in ? sp->info[in - 1].w : 28;
		if (l->kind == RF_LAYER_DENSE) {
			m = (int)batch, n = l->out, k = c * (h ? h : 1) * (w ? w : 1);
		} else if (l->kind == RF_LAYER_CONV) {
			struct rf__conv2d cs = { (int)batch, c, h, w, l->out, l->k, l->k,
						  l->stride, l->pad };
			size_t per = ((size_t)c * l->k * l->k + (size_t)l->out) * (size_t)f->h * f->w * 4;
			g = (int)(rf__k_conv2d_workspace_size(&cs) / per);
			m = l->out, n = g * f->h * f->w, k = c * l->k * l->k;
		} else {
			continue;
		}
		ng = ((int)batch + g - 1) / g;          /* GEMMs of this shape per step */
		if (l->kind == RF_LAYER_DENSE)
			ng = 1;
		double tf = time_gemm(m, n, k, (int)reps),
		       td = in ? time_gemm(k, n, m, (int)reps) : 0;
		double tw = l->kind == RF_LAYER_DENSE ? time_gemm(n, k, m, (int)reps) :
			    time_gemm(m, k, n, (int)reps);
		if (tf < 0 || td < 0 || tw < 0) {
			fprintf(stderr, "rf-bench flops: out of memory\n");
			return 1;
		}
		/* groups of g images (the last may hold fewer: counted by its share) */
		double scale = l->kind == RF_LAYER_DENSE ? 1.0 : (double)batch / g;
		total += (tf + td + tw) * scale;
		flops += 2.0 * m * n * k * (in ? 3.0 : 2.0) * scale;
		char s1[32], s2[32], s3[32];
		snprintf(s1, sizeof(s1), "%dx%dx%d", m, n, k);
		snprintf(s2, sizeof(s2), in ? "%dx%dx%d" : "-", k, n, m);
		snprintf(s3, sizeof(s3), "%dx%dx%d", l->kind == RF_LAYER_DENSE ? n : m, k,
			 l->kind == RF_LAYER_DENSE ? m : n);
		printf("%-4u %-8s %22s %22s %22s  x%-4d %7.1f GFLOPS\n", i,
		       l->kind == RF_LAYER_DENSE ? "dense" : "conv", s1, s2, s3, ng,
		       2.0 * m * n * k * (in ? 3 : 2) / (tf + td + tw) * 1e-9);
	}
	printf("step GEMMs: %.3f GFLOP, %.3f s on one core (%.1f GFLOPS); limit on %ld cores: "
	       "%.1f samples/s\n", flops * 1e-9, total, flops / total * 1e-9, cores,
	       batch / total * cores);
	return 0;
}
