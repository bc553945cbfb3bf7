/* bench-kernels -- CPU kernel throughput for choosing a threading policy.
 *
 * 1. rf__k_gemm on 2000x2000x2000: GFLOPS with one OpenBLAS thread and with the
 *    default thread count, and their ratio.
 * 2. One LeNet forward+backward step at batch 256 (1x28x28 ->conv3 20 ->relu ->pool2
 *    ->conv5 50 ->relu ->pool2 ->800 ->fc 128 ->relu ->fc 10 ->softmax-xent), time per
 *    layer, with one OpenBLAS thread and with the default, best of several reps.
 *
 * Usage: bench-kernels [gemm_size] [reps]. Prints a table; exits 0.
 */
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *buf(size_t n, uint64_t ctr, float scale)
{
	float *p = malloc(n * sizeof(float));
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	rf__k_rand_uniform(p, n, 99, ctr, -scale, scale);
	return p;
}

static double gemm_gflops(int n, int reps)
{
	float *a = buf((size_t)n * n, 0, 1), *b = buf((size_t)n * n, 1u << 30, 1),
	      *c = buf((size_t)n * n, 2u << 30, 1);
	double best = 1e30;
	rf__k_gemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); /* warm-up */
	for (int r = 0; r < reps; r++) {
		double t = now();
		rf__k_gemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
		t = now() - t;
		best = t < best ? t : best;
	}
	free(a);
	free(b);
	free(c);
	return 2.0 * n * n * (double)n / best * 1e-9;
}

/* 3. LeNet's conv2 GEMMs (13 images per im2col group: 1053 columns), one thread:
 * rf__k_gemm_avx512 against OpenBLAS (or the portable gemm without it). */
static double shape_best(int blas, int ta, int tb, int m, int n, int k, int reps)
{
	int lda = ta ? m : k, ldb = tb ? k : n;
	float *a = buf((size_t)m * k, 3, 1), *b = buf((size_t)k * n, 4, 1),
	      *c = buf((size_t)m * n, 5, 1);
	double best = 1e30;
	for (int r = 0; r <= reps * 4; r++) {
		double t = now();
		if (blas)
			rf__k_gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
		else if (rf__k_gemm_avx512(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n))
			best = 0;
		t = now() - t;
		best = r && t < best ? t : best; /* r == 0 warms up */
	}
	free(a);
	free(b);
	free(c);
	return best;
}

static void gemm_shapes(int reps)
{
	static const struct {
		const char *what;
		int ta, tb, m, n, k;
	} sh[] = {
		{ "conv2 fwd   W*col", 0, 0, 50, 1053, 500 },
		{ "conv2 bwd-d Wt*dy", 1, 0, 500, 1053, 50 },
		{ "conv2 bwd-f dy*row", 0, 0, 50, 500, 1053 },
		{ "conv2 bwd-f dy*colT", 0, 1, 50, 500, 1053 },
	};
	int def = rf__k_blas_get_threads();
	if (def > 0)
		rf__k_blas_set_threads(1);
	setenv("RF_KERNELS_BLAS_GEMM", "1", 1); /* rf__k_gemm: the BLAS path */
	printf("\nconv2 GEMMs, 1 thread, GFLOPS (best of %d)\n", reps * 4);
	printf("  %-20s %6s %10s %10s %7s\n", "shape", "m n k", "blas", "avx512", "ratio");
	for (unsigned i = 0; i < sizeof(sh) / sizeof(sh[0]); i++) {
		double fl = 2.0 * sh[i].m * sh[i].n * (double)sh[i].k * 1e-9;
		double tb = shape_best(1, sh[i].ta, sh[i].tb, sh[i].m, sh[i].n, sh[i].k, reps);
		double tx = shape_best(0, sh[i].ta, sh[i].tb, sh[i].m, sh[i].n, sh[i].k, reps);
		printf("  %-20s %dx%dx%d %8.1f", sh[i].what, sh[i].m, sh[i].n, sh[i].k, fl / tb);
		if (tx > 0)
			printf(" %10.1f %7.2f\n", fl / tx, tb / tx);
		else
			printf(" %10s %7s\n", "-", "-");
	}
	unsetenv("RF_KERNELS_BLAS_GEMM");
	if (def > 0)
		rf__k_blas_set_threads(def);
}

enum { B = 256 };
enum { L_CONV1, L_RELU1, L_POOL1, L_CONV2, L_RELU2, L_POOL2, L_FC1, L_RELU3, L_FC2, L_LOSS,
       L_SGD, NL };
static const char *lname[NL] = { "conv1 1->20 3x3", "relu1", "avgpool1", "conv2 20->50 5x5",
				 "relu2", "avgpool2", "fc1 800->128", "relu3", "fc2 128->10",
				 "softmax-xent", "sgd (all params)" };

struct lenet {
	struct rf__conv2d c1, c2;
	float *x, *w1, *b1, *a1, *p1, *w2, *b2, *a2, *p2, *w3, *b3, *a3, *w4, *b4, *lg;
	float *dw1, *db1, *dw2, *db2, *dw3, *db3, *dw4, *db4;
	float *g_lg, *g_a3, *g_p2, *g_a2, *g_p1, *g_a1;
	int32_t *lab;
	void *ws;
	size_t ws_bytes;
};

static void lenet_init(struct lenet *m)
{
	m->c1 = (struct rf__conv2d){ .n = B, .c = 1, .h = 28, .w = 28, .o = 20, .kh = 3, .kw = 3 };
	m->c2 = (struct rf__conv2d){ .n = B, .c = 20, .h = 13, .w = 13, .o = 50, .kh = 5, .kw = 5 };
	uint64_t ctr = 0;
#define A(p, n, s) (m->p = buf((n), ctr, (s)), ctr += (n))
	A(x, B * 784, 1);
	A(w1, 20 * 9, 0.3f);
	A(b1, 20, 0.1f);
	A(a1, B * 20 * 26 * 26, 0);
	A(p1, B * 20 * 13 * 13, 0);
	A(w2, 50 * 500, 0.05f);
	A(b2, 50, 0.1f);
	A(a2, B * 50 * 81, 0);
	A(p2, B * 800, 0);
	A(w3, 128 * 800, 0.035f);
	A(b3, 128, 0.1f);
	A(a3, B * 128, 0);
	A(w4, 10 * 128, 0.09f);
	A(b4, 10, 0.1f);
	A(lg, B * 10, 0);
	A(dw1, 20 * 9, 0);
	A(db1, 20, 0);
	A(dw2, 50 * 500, 0);
	A(db2, 50, 0);
	A(dw3, 128 * 800, 0);
	A(db3, 128, 0);
	A(dw4, 10 * 128, 0);
	A(db4, 10, 0);
	A(g_lg, B * 10, 0);
	A(g_a3, B * 128, 0);
	A(g_p2, B * 800, 0);
	A(g_a2, B * 50 * 81, 0);
	A(g_p1, B * 20 * 169, 0);
	A(g_a1, B * 20 * 676, 0);
#undef A
	m->lab = malloc(B * sizeof(int32_t));
	for (int i = 0; i < B; i++)
		m->lab[i] = i % 10;
	size_t s1 = rf__k_conv2d_workspace_size(&m->c1), s2 = rf__k_conv2d_workspace_size(&m->c2);
	m->ws_bytes = s1 > s2 ? s1 : s2;
	m->ws = malloc(m->ws_bytes);
}

/* one step; t_fwd/t_bwd accumulate seconds per layer */
static void lenet_step(struct lenet *m, double *tf, double *tb)
{
	double t;
#define T(arr, l, stmt) (t = now(), (stmt), arr[l] += now() - t)
	T(tf, L_CONV1, rf__k_conv2d_fwd(&m->c1, m->a1, m->x, m->w1, m->b1, m->ws, m->ws_bytes));
	T(tf, L_RELU1, rf__k_relu_fwd(m->a1, m->a1, (size_t)B * 20 * 676));
	T(tf, L_POOL1, rf__k_avgpool2d_fwd(m->p1, m->a1, B, 20, 26, 26, 2));
	T(tf, L_CONV2, rf__k_conv2d_fwd(&m->c2, m->a2, m->p1, m->w2, m->b2, m->ws, m->ws_bytes));
	T(tf, L_RELU2, rf__k_relu_fwd(m->a2, m->a2, (size_t)B * 50 * 81));
	T(tf, L_POOL2, rf__k_avgpool2d_fwd(m->p2, m->a2, B, 50, 9, 9, 2));
	T(tf, L_FC1, (rf__k_gemm(0, 1, B, 128, 800, 1, m->p2, 800, m->w3, 800, 0, m->a3, 128),
		      rf__k_bias_add(m->a3, m->b3, B, 128)));
	T(tf, L_RELU3, rf__k_relu_fwd(m->a3, m->a3, (size_t)B * 128));
	T(tf, L_FC2, (rf__k_gemm(0, 1, B, 10, 128, 1, m->a3, 128, m->w4, 128, 0, m->lg, 10),
		      rf__k_bias_add(m->lg, m->b4, B, 10)));
	float loss;
	int32_t ok;
	T(tf, L_LOSS, rf__k_softmax_xent(m->g_lg, &loss, &ok, m->lg, m->lab, B, 10));

	T(tb, L_FC2, (rf__k_gemm(1, 0, 10, 128, B, 1, m->g_lg, 10, m->a3, 128, 0, m->dw4, 128),
		      rf__k_bias_grad(m->db4, m->g_lg, B, 10, 0),
		      rf__k_gemm(0, 0, B, 128, 10, 1, m->g_lg, 10, m->w4, 128, 0, m->g_a3, 128)));
	T(tb, L_RELU3, rf__k_relu_bwd(m->g_a3, m->g_a3, m->a3, (size_t)B * 128));
	T(tb, L_FC1, (rf__k_gemm(1, 0, 128, 800, B, 1, m->g_a3, 128, m->p2, 800, 0, m->dw3, 800),
		      rf__k_bias_grad(m->db3, m->g_a3, B, 128, 0),
		      rf__k_gemm(0, 0, B, 800, 128, 1, m->g_a3, 128, m->w3, 800, 0, m->g_p2, 800)));
	T(tb, L_POOL2, rf__k_avgpool2d_bwd(m->g_a2, m->g_p2, B, 50, 9, 9, 2));
	T(tb, L_RELU2, rf__k_relu_bwd(m->g_a2, m->g_a2, m->a2, (size_t)B * 50 * 81));
	T(tb, L_CONV2, (rf__k_conv2d_bwd_filter(&m->c2, m->dw2, m->db2, m->g_a2, m->p1, 0, m->ws,
					       m->ws_bytes),
			rf__k_conv2d_bwd_data(&m->c2, m->g_p1, m->g_a2, m->w2, m->ws, m->ws_bytes)));
	T(tb, L_POOL1, rf__k_avgpool2d_bwd(m->g_a1, m->g_p1, B, 20, 26, 26, 2));
	T(tb, L_RELU1, rf__k_relu_bwd(m->g_a1, m->g_a1, m->a1, (size_t)B * 20 * 676));
	/* first layer: no dx needed */
	T(tb, L_CONV1, rf__k_conv2d_bwd_filter(&m->c1, m->dw1, m->db1, m->g_a1, m->x, 0, m->ws,
					      m->ws_bytes));
	T(tb, L_SGD, (rf__k_sgd(m->w1, m->dw1, 180, 1e-3f, 0), rf__k_sgd(m->b1, m->db1, 20, 1e-3f, 0),
		      rf__k_sgd(m->w2, m->dw2, 25000, 1e-3f, 0), rf__k_sgd(m->b2, m->db2, 50, 1e-3f, 0),
		      rf__k_sgd(m->w3, m->dw3, 102400, 1e-3f, 0),
		      rf__k_sgd(m->b3, m->db3, 128, 1e-3f, 0), rf__k_sgd(m->w4, m->dw4, 1280, 1e-3f, 0),
		      rf__k_sgd(m->b4, m->db4, 10, 1e-3f, 0)));
#undef T
}

/* best-of-reps per layer (min over reps of each layer's time) */
static double lenet_bench(struct lenet *m, int reps, double *bf, double *bb)
{
	double tf[NL], tb[NL], best_total = 1e30;
	for (int l = 0; l < NL; l++)
		bf[l] = bb[l] = 1e30;
	memset(tf, 0, sizeof(tf));
	memset(tb, 0, sizeof(tb));
	lenet_step(m, tf, tb); /* warm-up */
	for (int r = 0; r < reps; r++) {
		memset(tf, 0, sizeof(tf));
		memset(tb, 0, sizeof(tb));
		double t = now();
		lenet_step(m, tf, tb);
		t = now() - t;
		best_total = t < best_total ? t : best_total;
		for (int l = 0; l < NL; l++) {
			bf[l] = tf[l] < bf[l] ? tf[l] : bf[l];
			bb[l] = tb[l] < bb[l] ? tb[l] : bb[l];
		}
	}
	return best_total;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2000;
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	int def = rf__k_blas_get_threads();
	if (def < 1) {
		printf("built without OpenBLAS: portable gemm only\n");
		def = 1;
	}
	printf("gemm %dx%dx%d (best of %d)\n", n, n, n, reps);
	double g1 = 0, gd;
	if (def > 1) {
		rf__k_blas_set_threads(1);
		g1 = gemm_gflops(n, reps);
		rf__k_blas_set_threads(def);
		printf("  1 thread : %8.1f GFLOPS\n", g1);
	}
	gd = gemm_gflops(n, reps);
	printf("  %d threads: %8.1f GFLOPS", def, gd);
	if (g1 > 0)
		printf("   (x%.2f vs 1 thread)", gd / g1);
	printf("\n");
	if (n <= 1000) {
		double gp;
		float *a = buf((size_t)n * n, 0, 1), *b = buf((size_t)n * n, 7, 1),
		      *c = buf((size_t)n * n, 9, 1);
		double t = now();
		rf__k_gemm_portable(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
		gp = 2.0 * n * n * (double)n / (now() - t) * 1e-9;
		printf("  portable : %8.1f GFLOPS\n", gp);
		free(a);
		free(b);
		free(c);
	}

	gemm_shapes(reps);

	struct lenet m;
	lenet_init(&m);
	double f1[NL], b1[NL], fd[NL], bd[NL], t1 = 0, td;
	if (def > 1) {
		rf__k_blas_set_threads(1);
		t1 = lenet_bench(&m, reps * 2, f1, b1);
		rf__k_blas_set_threads(def);
	}
	td = lenet_bench(&m, reps * 2, fd, bd);
	printf("\nLeNet step, batch %d, ms (best of %d)\n", B, reps * 2);
	printf("  %-18s %9s %9s", "layer", "fwd", "bwd");
	if (def > 1)
		printf(" %9s %9s", "fwd(1t)", "bwd(1t)");
	printf("\n");
	double sf = 0, sb = 0, sf1 = 0, sb1 = 0;
	for (int l = 0; l < NL; l++) {
		printf("  %-18s %9.3f %9.3f", lname[l], fd[l] * 1e3, bd[l] * 1e3);
		sf += fd[l];
		sb += bd[l];
		if (def > 1) {
			printf(" %9.3f %9.3f", f1[l] * 1e3, b1[l] * 1e3);
			sf1 += f1[l];
			sb1 += b1[l];
		}
		printf("\n");
	}
	printf("  %-18s %9.3f %9.3f", "sum of layers", sf * 1e3, sb * 1e3);
	if (def > 1)
		printf(" %9.3f %9.3f", sf1 * 1e3, sb1 * 1e3);
	printf("\n  whole step: %.3f ms with %d threads", td * 1e3, def);
	if (def > 1)
		printf(", %.3f ms with 1 thread (x%.2f)", t1 * 1e3, t1 / td);
	printf("\n");
	return 0;
}
