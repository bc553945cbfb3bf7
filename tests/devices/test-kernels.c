/* test-kernels -- every CPU kernel in kernels.h against an obviously-correct
 * reference. Forward ops are compared with naive loops accumulated in double on
 * random shapes (odd sizes included); every backward op is checked by central finite
 * differences of a scalar loss L = sum out*R (R random), accumulated in double, and
 * against the naive reference; the softmax cross-entropy is also compared with a
 * hand computation. GEMM is checked for both the OpenBLAS path and the portable
 * fallback, all transpose combinations, padded leading dimensions, beta = 0 over
 * NaN. The Philox generator is checked against the Random123 known-answer vectors;
 * uniform and normal streams for reproducibility, counter splitting, and moments
 * over 10^6 samples. Exit 0 pass, 1 fail.
 */
#include "kernels.h"
#include "kernels-impl.h" /* the im2col copies and panels, compared bit for bit */
#include "rf-internal.h"
#include "u8norm.h"

#define KERNEL_TEST_SEED 0x1234567887654321ull
#include "kernel-test.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* max over i of |got - ref| / (atol + rtol*|ref|); <= 1 passes */
static int close_enough(const char *what, const float *got, const double *ref, size_t n,
			double atol, double rtol)
{
	double worst = 0.0;
	size_t wi = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - ref[i]) / (atol + rtol * fabs(ref[i]));
		if (!(e <= worst)) { /* catches NaN */
			worst = isnan(e) ? INFINITY : e;
			wi = i;
		}
	}
	if (worst > 1.0) {
		failures++;
		fprintf(stderr, "FAIL %s: element %zu got %.9g want %.9g (n=%zu)\n", what, wi,
			got[wi], ref[wi], n);
		return 0;
	}
	return 1;
}

static int bits_equal(const char *what, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof(float))) {
			failures++;
			fprintf(stderr, "FAIL %s: element %zu: %.9g vs %.9g\n", what, i, a[i],
				b[i]);
			return 0;
		}
	return 1;
}

/* ---- finite differences ------------------------------------------------------------ */

/* d/dp[i] of loss(ctx) by central differences, for every i < n; compared with
 * grad[i] (the analytic gradient). The loss must be accumulated in double. */
typedef double (*loss_fn)(void *ctx);

static void fd_check(const char *what, loss_fn loss, void *ctx, float *p, size_t n,
		     const float *grad, float eps, double atol, double rtol)
{
	double *num = malloc((n ? n : 1) * sizeof(double));
	for (size_t i = 0; i < n; i++) {
		float save = p[i];
		p[i] = save + eps;
		double lp = loss(ctx);
		p[i] = save - eps;
		double lm = loss(ctx);
		p[i] = save;
		/* the actual step in float may differ slightly from 2*eps */
		double h = (double)(save + eps) - (double)(save - eps);
		num[i] = (lp - lm) / h;
	}
	char name[320];
	snprintf(name, sizeof(name), "finite differences: %s", what);
	close_enough(name, grad, num, n, atol, rtol);
	free(num);
}

static double dot_d(const float *a, const float *b, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

/* ---- GEMM ------------------------------------------------------------------------------- */

typedef int (*gemm_fn)(int, int, int, int, int, float, const float *, int, const float *,
		       int, float, float *, int);

/* The reference C in double (padding copied: it must not be touched); a loop of
 * k multiply-adds per element, built without TSan's per-load check (gemm_case declares
 * the buffers whole: rf-internal.h) */
RF__TSAN_WHOLE static void ref_gemm(double *ref, int ta, int tb, int m, int n, int k, float alpha,
				  const float *a, int lda, const float *b, int ldb, float beta,
				  const float *c, int ldc)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < ldc; j++) {
			size_t ci = (size_t)i * ldc + j;
			if (j >= n) {
				ref[ci] = c[ci];
				continue;
			}
			double s = 0.0;
			for (int p = 0; p < k; p++) {
				double av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
				double bv = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
				s += av * bv;
			}
			ref[ci] = alpha * s + (beta == 0.0f ? 0.0 : beta * (double)c[ci]);
		}
}

static void gemm_case(gemm_fn fn, const char *name, int ta, int tb, int m, int n, int k)
{
	int pad_a = rint_in(0, 3), pad_b = rint_in(0, 3), pad_c = rint_in(0, 3);
	int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
	int lda = (ac > 1 ? ac : 1) + pad_a, ldb = (bc > 1 ? bc : 1) + pad_b,
	    ldc = (n > 1 ? n : 1) + pad_c;
	float *a = frand((size_t)ar * lda, -1, 1), *b = frand((size_t)br * ldb, -1, 1);
	float *c = frand((size_t)m * ldc, -1, 1);
	float alpha = runif(-2, 2), beta;
	int which = rint_in(0, 2);
	beta = which == 0 ? 0.0f : which == 1 ? 1.0f : runif(-2, 2);
	if (beta == 0.0f) /* BLAS semantics: C's old contents are ignored, NaN included */
		for (size_t i = 0; i < (size_t)m * ldc; i++)
			c[i] = NAN;
	double *ref = malloc(((size_t)m * ldc + 1) * sizeof(double));
	rf__tsan_read(a, (size_t)ar * lda * sizeof(float));
	rf__tsan_read(b, (size_t)br * ldb * sizeof(float));
	rf__tsan_read(c, (size_t)m * ldc * sizeof(float));
	rf__tsan_write(ref, (size_t)m * ldc * sizeof(double));
	ref_gemm(ref, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	float *c0 = falloc((size_t)m * ldc + 1);
	memcpy(c0, c, (size_t)m * ldc * sizeof(float));
	int rc = fn(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	if (rc == -ENOTSUP && fn == rf__k_gemm_avx512) { /* no AVX-512 here */
		free(a), free(b), free(c), free(c0), free(ref);
		return;
	}
	CHECK(rc == 0, "%s returned %d", name, rc);
	if (fn == rf__k_gemm_avx512) { /* deterministic: the same call gives the same bits */
		CHECK(fn(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc) == 0, "%s again",
		      name);
		for (size_t i = 0; i < (size_t)m * ldc; i++)
			if (memcmp(&c[i], &c0[i], sizeof(float))) {
				CHECK(0, "%s m=%d n=%d k=%d: element %zu differs between two calls",
				      name, m, n, k, i);
				break;
			}
	}
	free(c0);
	char what[160];
	snprintf(what, sizeof(what), "%s ta=%d tb=%d m=%d n=%d k=%d lda=%d ldb=%d ldc=%d beta=%g",
		 name, ta, tb, m, n, k, lda, ldb, ldc, beta);
	/* padding columns hold NaN when beta == 0: compare only the real part then */
	for (int i = 0; i < m; i++) {
		size_t off = (size_t)i * ldc;
		if (!close_enough(what, c + off, ref + off, beta == 0.0f ? (size_t)n : (size_t)ldc,
				  1e-5 * (k + 1), 1e-5))
			break;
	}
	free(a);
	free(b);
	free(c);
	free(ref);
}

static void test_gemm(void)
{
	static const struct {
		gemm_fn fn;
		const char *name;
	} fns[] = { { rf__k_gemm, "rf__k_gemm" },
		    { rf__k_gemm_portable, "rf__k_gemm_portable" },
		    { rf__k_gemm_avx512, "rf__k_gemm_avx512" } };
	for (int f = 0; f < 3; f++) {
		for (int ta = 0; ta < 2; ta++)
			for (int tb = 0; tb < 2; tb++) {
				for (int rep = 0; rep < 12; rep++)
					gemm_case(fns[f].fn, fns[f].name, ta, tb, rint_in(1, 37),
						  rint_in(1, 41), rint_in(1, 43));
				/* crosses the portable blocking (32 x 128 x 128) */
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 67, 261, 300);
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 1, 1, 1);
				/* one row: rf__k_gemm's GEMV path (op(A)'s row strided by
				 * lda when A is transposed) */
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 1, 300, 257);
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 1, 2, 513);
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 5, 7, 0);
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 0, 7, 3);
				/* the AVX-512 gemm's edges: 6-row panels, 64-column panels (masked
				 * tails), 128-deep slices, and LeNet's conv2 shapes */
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 7, 65, 129);
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 13, 127, 257);
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 6, 64, 128);
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 193, 70, 20);
				/* the AVX-512 gemm's packed B: more than 96 rows of A over K
				 * slices of 128, a column edge */
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 200, 130, 300);
				if (f == 1 || tb)
					continue;
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 50, 810, 500);
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 500, 810, 50);
				gemm_case(fns[f].fn, fns[f].name, ta, tb, 50, 500, 810);
			}
		float one = 1;
		CHECK(fns[f].fn(0, 0, -1, 1, 1, 1, &one, 1, &one, 1, 0, &one, 1) == -EINVAL,
		      "%s: negative m accepted", fns[f].name);
		CHECK(fns[f].fn(0, 0, 2, 3, 4, 1, &one, 3, &one, 3, 0, &one, 3) == -EINVAL,
		      "%s: lda < k accepted", fns[f].name);
	}
}

/* The AVX-512 gemm packs op(B) where more than one block of A's rows (96) passes over a
 * 128-deep slice, and reads B in place otherwise: the micro-kernel sees the same values
 * either way, so the first 96 rows of a 200-row product (packed) have the bits of the
 * 96-row product (in place), for every op(A), op(B). */
static void test_gemm_packing_bits(void)
{
	const int m = 200, n = 130, k = 300, mi = 96;

	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			int lda = ta ? m : k, ldb = tb ? k : n;
			float *a = frand((size_t)m * k, -1, 1), *b = frand((size_t)k * n, -1, 1);
			float *c1 = falloc((size_t)m * n), *c2 = falloc((size_t)mi * n);
			/* A's first mi rows alone: op(A) = A (rows) or A^T (columns of lda m) */
			float *a2 = falloc((size_t)mi * k);
			for (int i = 0; i < mi; i++)
				for (int p = 0; p < k; p++)
					a2[ta ? (size_t)p * mi + i : (size_t)i * k + p] =
						ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
			int rc = rf__k_gemm_avx512(ta, tb, m, n, k, 0.75f, a, lda, b, ldb, 0.0f, c1, n);
			if (rc == -ENOTSUP) {
				free(a), free(b), free(c1), free(c2), free(a2);
				return;
			}
			CHECK(rc == 0, "packed gemm: %d", rc);
			CHECK(rf__k_gemm_avx512(ta, tb, mi, n, k, 0.75f, a2, ta ? mi : k, b, ldb, 0.0f,
						c2, n) == 0, "in-place gemm");
			CHECK(memcmp(c1, c2, (size_t)mi * n * sizeof(float)) == 0,
			      "ta=%d tb=%d: the packed B's rows differ from B in place", ta, tb);
			free(a), free(b), free(c1), free(c2), free(a2);
		}
}

/* ---- linear layer: gemm + bias + relu, forward and backward ---------------------------- */

struct lin_ctx {
	int rows, in, out;
	float *x, *w, *b, *y, *r;
	int relu;
};

static void lin_fwd(struct lin_ctx *c)
{
	rf__k_gemm(0, 1, c->rows, c->out, c->in, 1.0f, c->x, c->in, c->w, c->in, 0.0f, c->y,
		  c->out);
	rf__k_bias_add(c->y, c->b, c->rows, c->out);
	if (c->relu)
		rf__k_relu_fwd(c->y, c->y, (size_t)c->rows * c->out);
}

static double lin_loss(void *ctx)
{
	struct lin_ctx *c = ctx;
	lin_fwd(c);
	return dot_d(c->y, c->r, (size_t)c->rows * c->out);
}

static void test_linear(void)
{
	for (int rep = 0; rep < 6; rep++) {
		struct lin_ctx c = { .rows = rint_in(1, 9), .in = rint_in(1, 11),
				     .out = rint_in(1, 7), .relu = rep & 1 };
		size_t nx = (size_t)c.rows * c.in, nw = (size_t)c.out * c.in,
		       ny = (size_t)c.rows * c.out;
		c.x = frand(nx, -1, 1);
		c.w = frand(nw, -1, 1);
		c.b = frand(c.out, -1, 1);
		c.y = falloc(ny);
		c.r = frand(ny, -1, 1);

		/* forward against naive loops */
		lin_fwd(&c);
		double *ref = malloc(ny * sizeof(double));
		for (int i = 0; i < c.rows; i++)
			for (int o = 0; o < c.out; o++) {
				double s = c.b[o];
				for (int p = 0; p < c.in; p++)
					s += (double)c.x[i * c.in + p] * c.w[o * c.in + p];
				ref[i * c.out + o] = c.relu && s < 0 ? 0.0 : s;
			}
		close_enough("linear forward", c.y, ref, ny, 1e-5, 1e-5);
		free(ref);

		/* backward: dy = R masked by relu; dx = dy*W, dW = dy^T*x, db = sum dy */
		float *dy = falloc(ny), *dx = falloc(nx), *dw = falloc(nw), *db = falloc(c.out);
		if (c.relu)
			rf__k_relu_bwd(dy, c.r, c.y, ny);
		else
			memcpy(dy, c.r, ny * sizeof(float));
		rf__k_gemm(0, 0, c.rows, c.in, c.out, 1.0f, dy, c.out, c.w, c.in, 0.0f, dx, c.in);
		rf__k_gemm(1, 0, c.out, c.in, c.rows, 1.0f, dy, c.out, c.x, c.in, 0.0f, dw, c.in);
		rf__k_bias_grad(db, dy, c.rows, c.out, 0);
		/* relu kinks: keep pre-activations away from 0 by the FD step */
		fd_check("linear dx", lin_loss, &c, c.x, nx, dx, 1e-3f, 2e-3, 2e-3);
		fd_check("linear dW", lin_loss, &c, c.w, nw, dw, 1e-3f, 2e-3, 2e-3);
		fd_check("linear db", lin_loss, &c, c.b, c.out, db, 1e-3f, 2e-3, 2e-3);

		/* bias_grad accumulate */
		float *db2 = falloc(c.out);
		for (int o = 0; o < c.out; o++)
			db2[o] = 1.5f;
		rf__k_bias_grad(db2, dy, c.rows, c.out, 1);
		double *want = malloc(c.out * sizeof(double));
		for (int o = 0; o < c.out; o++)
			want[o] = 1.5 + db[o];
		close_enough("bias_grad accumulate", db2, want, c.out, 1e-6, 1e-6);
		free(want);
		free(db2);
		free(dy);
		free(dx);
		free(dw);
		free(db);
		free(c.x);
		free(c.w);
		free(c.b);
		free(c.y);
		free(c.r);
	}
}

static void test_relu(void)
{
	size_t n = 1001;
	float *x = frand(n, -1, 1), *y = falloc(n), *dy = frand(n, -1, 1), *dx = falloc(n);
	x[0] = 0.0f;
	x[1] = -0.0f;
	rf__k_relu_fwd(y, x, n);
	rf__k_relu_bwd(dx, dy, y, n);
	for (size_t i = 0; i < n; i++) {
		CHECK(y[i] == (x[i] > 0 ? x[i] : 0.0f), "relu fwd [%zu]", i);
		CHECK(dx[i] == (x[i] > 0 ? dy[i] : 0.0f), "relu bwd [%zu]", i);
	}
	/* in place */
	float *z = malloc(n * sizeof(float));
	memcpy(z, x, n * sizeof(float));
	rf__k_relu_fwd(z, z, n);
	bits_equal("relu in place", z, y, n);
	memcpy(z, dy, n * sizeof(float));
	rf__k_relu_bwd(z, z, y, n);
	bits_equal("relu bwd in place", z, dx, n);
	free(x);
	free(y);
	free(dy);
	free(dx);
	free(z);
}

/* ---- softmax cross-entropy --------------------------------------------------------------- */

struct xent_ctx {
	float *logits;
	int32_t *labels;
	int rows, cols;
};

static double xent_loss(void *ctx) /* the mean loss, in double, naive */
{
	struct xent_ctx *c = ctx;
	double s = 0.0;
	for (int r = 0; r < c->rows; r++) {
		const float *x = c->logits + (size_t)r * c->cols;
		double mx = x[0], e = 0.0;
		for (int j = 1; j < c->cols; j++)
			mx = x[j] > mx ? x[j] : mx;
		for (int j = 0; j < c->cols; j++)
			e += exp((double)x[j] - mx);
		s += log(e) + mx - x[c->labels[r]];
	}
	return s / c->rows;
}

static void test_softmax_xent(void)
{
	/* by hand: row 0 = (1, 2, 3), label 2: loss = log(e + e^2 + e^3) - 3 = 0.40760596;
	 * row 1 = (1, 1, 1), label 0: loss = log 3 = 1.09861229; argmax of a tie is the
	 * first index, so both rows count as correct. */
	float lg[6] = { 1, 2, 3, 1, 1, 1 }, dl[6], loss = -1;
	int32_t lab[2] = { 2, 0 }, ok = -1;
	int rc = rf__k_softmax_xent(dl, &loss, &ok, lg, lab, 2, 3);
	CHECK(rc == 0, "softmax_xent rc %d", rc);
	CHECK(fabs(loss - 1.50621825) < 1e-6, "softmax_xent hand loss %.9g", loss);
	CHECK(ok == 2, "softmax_xent hand correct %d", ok);
	const double p0[3] = { 0.09003057317, 0.24472847105, 0.66524095577 };
	double want[6] = { p0[0] / 2, p0[1] / 2, (p0[2] - 1) / 2,
			   (1.0 / 3 - 1) / 2, 1.0 / 6, 1.0 / 6 };
	close_enough("softmax_xent hand grad", dl, want, 6, 1e-7, 1e-6);
	float loss2 = -1;
	int32_t ok2 = -1;
	rc = rf__k_softmax_xent_eval(&loss2, &ok2, lg, lab, 2, 3);
	CHECK(rc == 0 && loss2 == loss && ok2 == ok, "softmax_xent_eval differs");
	lab[1] = 3;
	CHECK(rf__k_softmax_xent(dl, &loss, &ok, lg, lab, 2, 3) == -EINVAL, "label 3 of 3 accepted");
	lab[1] = -1;
	CHECK(rf__k_softmax_xent(dl, &loss, &ok, lg, lab, 2, 3) == -EINVAL, "label -1 accepted");

	for (int rep = 0; rep < 8; rep++) {
		struct xent_ctx c = { .rows = rint_in(1, 17), .cols = rint_in(2, 13) };
		size_t n = (size_t)c.rows * c.cols;
		c.logits = frand(n, -4, 4);
		if (rep == 0) /* large logits: needs the max subtraction */
			for (size_t i = 0; i < n; i++)
				c.logits[i] += 80.0f;
		c.labels = malloc(c.rows * sizeof(int32_t));
		int want_ok = 0;
		for (int r = 0; r < c.rows; r++) {
			c.labels[r] = rint_in(0, c.cols - 1);
			int arg = 0;
			for (int j = 1; j < c.cols; j++)
				if (c.logits[r * c.cols + j] > c.logits[r * c.cols + arg])
					arg = j;
			want_ok += arg == c.labels[r];
		}
		float *g = falloc(n), l;
		int32_t k;
		rc = rf__k_softmax_xent(g, &l, &k, c.logits, c.labels, c.rows, c.cols);
		CHECK(rc == 0, "softmax_xent rc %d", rc);
		double lw = xent_loss(&c) * c.rows;
		CHECK(fabs(l - lw) <= 1e-5 * (1 + fabs(lw)), "softmax_xent loss %.9g want %.9g", l,
		      lw);
		CHECK(k == want_ok, "softmax_xent correct %d want %d", k, want_ok);
		fd_check("softmax_xent dlogits", xent_loss, &c, c.logits, n, g, 1e-2f, 1e-4,
			 5e-3);
		/* in place */
		float *ip = malloc(n * sizeof(float));
		memcpy(ip, c.logits, n * sizeof(float));
		rf__k_softmax_xent(ip, NULL, NULL, ip, c.labels, c.rows, c.cols);
		bits_equal("softmax_xent in place", ip, g, n);
		free(ip);
		free(g);
		free(c.logits);
		free(c.labels);
	}
}

/* ---- convolution ----------------------------------------------------------------------------- */

static void conv_ref(const struct rf__conv2d *s, double *y, const float *x, const float *w,
		     const float *b)
{
	int oh = rf__conv2d_oh(s), ow = rf__conv2d_ow(s);
	for (int n = 0; n < s->n; n++)
		for (int o = 0; o < s->o; o++)
			for (int i = 0; i < oh; i++)
				for (int j = 0; j < ow; j++) {
					double acc = b ? b[o] : 0.0;
					for (int c = 0; c < s->c; c++)
						for (int a = 0; a < s->kh; a++)
							for (int bb = 0; bb < s->kw; bb++)
								acc += (double)x[((n * s->c + c) * s->h + i + a) * s->w + j + bb] *
								       w[((o * s->c + c) * s->kh + a) * s->kw + bb];
					y[((n * s->o + o) * oh + i) * ow + j] = acc;
				}
}

/* naive backward: dx and dw, db by direct scatter of dy */
static void conv_bwd_ref(const struct rf__conv2d *s, double *dx, double *dw, double *db,
			 const float *dy, const float *x, const float *w)
{
	int oh = rf__conv2d_oh(s), ow = rf__conv2d_ow(s);
	memset(dx, 0, sizeof(double) * s->n * s->c * s->h * s->w);
	memset(dw, 0, sizeof(double) * s->o * s->c * s->kh * s->kw);
	memset(db, 0, sizeof(double) * s->o);
	for (int n = 0; n < s->n; n++)
		for (int o = 0; o < s->o; o++)
			for (int i = 0; i < oh; i++)
				for (int j = 0; j < ow; j++) {
					double g = dy[((n * s->o + o) * oh + i) * ow + j];
					db[o] += g;
					for (int c = 0; c < s->c; c++)
						for (int a = 0; a < s->kh; a++)
							for (int bb = 0; bb < s->kw; bb++) {
								size_t xi = ((size_t)(n * s->c + c) * s->h + i + a) * s->w + j + bb;
								size_t wi = ((size_t)(o * s->c + c) * s->kh + a) * s->kw + bb;
								dx[xi] += g * w[wi];
								dw[wi] += g * x[xi];
							}
				}
}

struct conv_ctx {
	struct rf__conv2d s;
	float *x, *w, *b, *y, *r;
	void *ws;
	size_t ws_bytes;
};

static double conv_loss(void *ctx)
{
	struct conv_ctx *c = ctx;
	int rc = rf__k_conv2d_fwd(&c->s, c->y, c->x, c->w, c->b, c->ws, c->ws_bytes);
	if (rc)
		return NAN;
	size_t ny = (size_t)c->s.n * c->s.o * rf__conv2d_oh(&c->s) * rf__conv2d_ow(&c->s);
	return dot_d(c->y, c->r, ny);
}

static void conv_case(struct rf__conv2d s, int ws_mode, int fd)
{
	size_t nx = (size_t)s.n * s.c * s.h * s.w, nw = (size_t)s.o * s.c * s.kh * s.kw;
	size_t ny = (size_t)s.n * s.o * rf__conv2d_oh(&s) * rf__conv2d_ow(&s);
	size_t full = rf__k_conv2d_workspace_size(&s), min = rf__k_conv2d_workspace_min(&s);
	CHECK(full >= min && min > 0, "conv workspace sizes %zu %zu", full, min);
	/* 0: full; 1: one image at a time; 2: two images (+ a few bytes) */
	size_t wsb = ws_mode == 0 ? full : ws_mode == 1 ? min : 2 * min + 7;
	char what[200];
	snprintf(what, sizeof(what), "n=%d c=%d h=%d w=%d o=%d k=%dx%d ws=%d", s.n, s.c, s.h, s.w,
		 s.o, s.kh, s.kw, ws_mode);

	struct conv_ctx c = { .s = s, .ws_bytes = wsb };
	c.x = frand(nx, -1, 1);
	c.w = frand(nw, -1, 1);
	c.b = (rint_in(0, 3) == 0) ? NULL : frand(s.o, -1, 1);
	c.y = falloc(ny);
	c.r = frand(ny, -1, 1);
	c.ws = malloc(wsb);

	double *ref = malloc(ny * sizeof(double));
	conv_ref(&s, ref, c.x, c.w, c.b);
	int rc = rf__k_conv2d_fwd(&s, c.y, c.x, c.w, c.b, c.ws, c.ws_bytes);
	CHECK(rc == 0, "conv fwd rc %d (%s)", rc, what);
	char name[260];
	snprintf(name, sizeof(name), "conv fwd %s", what);
	close_enough(name, c.y, ref, ny, 1e-5 * (s.c * s.kh * s.kw + 1), 1e-5);

	float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(s.o);
	double *rdx = malloc(nx * sizeof(double)), *rdw = malloc(nw * sizeof(double)),
	       *rdb = malloc(s.o * sizeof(double));
	for (size_t i = 0; i < nx; i++)
		dx[i] = NAN; /* must be overwritten */
	rc = rf__k_conv2d_bwd_data(&s, dx, c.r, c.w, c.ws, c.ws_bytes);
	CHECK(rc == 0, "conv bwd_data rc %d (%s)", rc, what);
	rc = rf__k_conv2d_bwd_filter(&s, dw, db, c.r, c.x, 0, c.ws, c.ws_bytes);
	CHECK(rc == 0, "conv bwd_filter rc %d (%s)", rc, what);
	conv_bwd_ref(&s, rdx, rdw, rdb, c.r, c.x, c.w);
	double tol = 1e-5 * (s.o * s.kh * s.kw + 1);
	snprintf(name, sizeof(name), "conv bwd_data %s", what);
	close_enough(name, dx, rdx, nx, tol, 1e-5);
	tol = 1e-5 * (ny / s.o + 1);
	snprintf(name, sizeof(name), "conv bwd_filter dw %s", what);
	close_enough(name, dw, rdw, nw, tol, 1e-5);
	snprintf(name, sizeof(name), "conv bwd_filter db %s", what);
	close_enough(name, db, rdb, s.o, tol, 1e-5);

	/* accumulate: dw, db += the same gradient again */
	float *dw2 = malloc(nw * sizeof(float)), *db2 = malloc(s.o * sizeof(float));
	memcpy(dw2, dw, nw * sizeof(float));
	memcpy(db2, db, s.o * sizeof(float));
	rc = rf__k_conv2d_bwd_filter(&s, dw2, db2, c.r, c.x, 1, c.ws, c.ws_bytes);
	CHECK(rc == 0, "conv bwd_filter accumulate rc %d", rc);
	for (size_t i = 0; i < nw; i++)
		rdw[i] *= 2;
	for (int i = 0; i < s.o; i++)
		rdb[i] *= 2;
	snprintf(name, sizeof(name), "conv bwd_filter accumulate dw %s", what);
	close_enough(name, dw2, rdw, nw, 2 * tol, 1e-5);
	snprintf(name, sizeof(name), "conv bwd_filter accumulate db %s", what);
	close_enough(name, db2, rdb, s.o, 2 * tol, 1e-5);

	if (fd) {
		/* L is linear in x, w and b: a large step keeps rounding small */
		snprintf(name, sizeof(name), "conv dx %s", what);
		fd_check(name, conv_loss, &c, c.x, nx, dx, 0.25f, 1e-3, 1e-3);
		snprintf(name, sizeof(name), "conv dw %s", what);
		fd_check(name, conv_loss, &c, c.w, nw, dw, 0.25f, 1e-3, 1e-3);
		if (c.b) {
			snprintf(name, sizeof(name), "conv db %s", what);
			fd_check(name, conv_loss, &c, c.b, s.o, db, 0.25f, 1e-3, 1e-3);
		}
	}
	free(dw2);
	free(db2);
	free(dx);
	free(dw);
	free(db);
	free(rdx);
	free(rdw);
	free(rdb);
	free(ref);
	free(c.x);
	free(c.w);
	free(c.b);
	free(c.y);
	free(c.r);
	free(c.ws);
}

/* 40 random panels of fn's against mat (rows x cols, written whole), bit for bit */
static void check_panels(const char *name, unsigned geo,
			 void (*fn)(float *, const float *, const struct rf__conv_geo *, int, int,
				    int, int),
			 const float *mat, int rows, int cols, const float *x,
			 const struct rf__conv_geo *q)
{
	float panel[128 * RF__K_PANEL_NR];

	for (int rep = 0; rep < 40; rep++) {
		int p0 = rint_in(0, rows - 1), kc = rint_in(1, rows - p0 < 128 ? rows - p0 : 128);
		int j0 = RF__K_PANEL_NR * rint_in(0, (cols - 1) / RF__K_PANEL_NR);
		int nr = cols - j0 < RF__K_PANEL_NR ? cols - j0 : RF__K_PANEL_NR;
		fn(panel, x, q, p0, kc, j0, nr);
		for (int r = 0; r < kc; r++)
			if (memcmp(panel + r * RF__K_PANEL_NR, mat + (size_t)(p0 + r) * cols + j0,
				   (size_t)nr * sizeof(float))) {
				CHECK(0, "%s panel geo %u p0=%d kc=%d j0=%d nr=%d: row %d differs",
				      name, geo, p0, kc, j0, nr, r);
				return;
			}
	}
}

/* The forward's im2col panels (rf__im2col_panel, made inside the GEMM) against the
 * matrix rf__im2col_sp writes, and the filter gradient's im2row panels against
 * rf__im2row_sp's, bit for bit, on random panels of several geometries (padded,
 * strided, 1x1 stride 2, a kernel wider than the 16-lane path takes) */
static void test_im2col_panel(void)
{
	static const struct rf__conv_geo geos[] = {
		{ 5, 7, 6, 3, 3, 7, 6, 1, 1 },       /* 3x3 pad 1 */
		{ 4, 9, 8, 3, 3, 5, 4, 2, 1 },       /* 3x3 stride 2 pad 1 */
		{ 6, 8, 8, 1, 1, 4, 4, 2, 0 },       /* 1x1 stride 2 */
		{ 3, 13, 13, 5, 5, 9, 9, 1, 0 },     /* LeNet's 5x5 */
		{ 2, 4, 20, 1, 17, 4, 4, 1, 0 },     /* 17 wide: the plain path */
		{ 64, 28, 28, 3, 3, 28, 28, 1, 1 },  /* ResNet-18's first stage */
	};
	for (unsigned gi = 0; gi < sizeof(geos) / sizeof(geos[0]); gi++) {
		const struct rf__conv_geo q = geos[gi];
		const int g = 3, ckk = q.c * q.kh * q.kw, ld = g * q.oh * q.ow;
		float *x = frand((size_t)g * q.c * q.h * q.w, -1, 1);
		float *col = falloc((size_t)ckk * ld), *row = falloc((size_t)ckk * ld);
		rf__im2col_sp(col, (size_t)ld, x, q, g);
		rf__im2row_sp(row, x, q, g);
		check_panels("im2col", gi, rf__im2col_panel, col, ckk, ld, x, &q);
		check_panels("im2row", gi, rf__im2row_panel, row, ld, ckk, x, &q);
		free(x);
		free(col);
		free(row);
	}
}

/* A convolution's forward and filter gradient with their matrices made inside the GEMM
 * have the bits of the matrices written whole (RF_KERNELS_IM2COL) -- ResNet-like
 * shapes, more than one block of A's rows among them, and a stride */
static void test_conv_gen_bits(void)
{
	static const struct rf__conv2d shapes[] = {
		{ .n = 3, .c = 16, .h = 14, .w = 14, .o = 128, .kh = 3, .kw = 3, .stride = 1, .pad = 1 },
		{ .n = 2, .c = 8, .h = 9, .w = 9, .o = 40, .kh = 3, .kw = 3, .stride = 2, .pad = 1 },
		{ .n = 4, .c = 24, .h = 7, .w = 7, .o = 100, .kh = 1, .kw = 1, .stride = 2 },
		{ .n = 2, .c = 20, .h = 13, .w = 13, .o = 50, .kh = 5, .kw = 5 },
	};
	for (unsigned i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		const struct rf__conv2d *s = &shapes[i];
		size_t nx = (size_t)s->n * s->c * s->h * s->w, nw = (size_t)s->o * s->c * s->kh * s->kw;
		size_t ny = (size_t)s->n * s->o * rf__conv2d_oh(s) * rf__conv2d_ow(s);
		size_t wsb = rf__k_conv2d_fwd_workspace_size(s);
		float *x = frand(nx, -1, 1), *w = frand(nw, -1, 1), *b = frand((size_t)s->o, -1, 1);
		float *y1 = falloc(ny), *y2 = falloc(ny);
		void *ws = malloc(wsb);
		CHECK(rf__k_conv2d_fwd(s, y1, x, w, b, ws, wsb) == 0, "conv fwd (panels)");
		setenv("RF_KERNELS_IM2COL", "1", 1);
		CHECK(rf__k_conv2d_fwd(s, y2, x, w, b, ws, wsb) == 0, "conv fwd (im2col)");
		unsetenv("RF_KERNELS_IM2COL");
		CHECK(memcmp(y1, y2, ny * sizeof(float)) == 0,
		      "conv shape %u: panels inside the GEMM change the bits", i);
		/* the filter gradient, accumulated onto the same start (dy: y1) */
		size_t wsf = rf__k_conv2d_workspace_size(s);
		void *wf = malloc(wsf);
		float *dw1 = frand(nw, -1, 1), *dw2 = falloc(nw), *db1 = frand((size_t)s->o, -1, 1);
		float *db2 = falloc((size_t)s->o);
		memcpy(dw2, dw1, nw * sizeof(float));
		memcpy(db2, db1, (size_t)s->o * sizeof(float));
		CHECK(rf__k_conv2d_bwd_filter(s, dw1, db1, y1, x, 1, wf, wsf) == 0, "bwd filter");
		setenv("RF_KERNELS_IM2COL", "1", 1);
		CHECK(rf__k_conv2d_bwd_filter(s, dw2, db2, y1, x, 1, wf, wsf) == 0, "bwd filter");
		unsetenv("RF_KERNELS_IM2COL");
		CHECK(memcmp(dw1, dw2, nw * sizeof(float)) == 0 &&
		      memcmp(db1, db2, (size_t)s->o * sizeof(float)) == 0,
		      "conv shape %u: the filter gradient's panels change the bits", i);
		free(wf), free(dw1), free(dw2), free(db1), free(db2);
		free(x), free(w), free(b), free(y1), free(y2), free(ws);
	}
}

static void test_conv(void)
{
	for (int rep = 0; rep < 24; rep++) {
		struct rf__conv2d s = { .n = rint_in(1, 5), .c = rint_in(1, 4), .kh = rint_in(1, 5),
					 .kw = rint_in(1, 5), .o = rint_in(1, 5) };
		s.h = s.kh + rint_in(0, 8);
		s.w = s.kw + rint_in(0, 8);
		conv_case(s, rep % 3, rep < 8);
	}
	/* LeNet's two layers on a few images */
	conv_case((struct rf__conv2d){ .n = 3, .c = 1, .h = 28, .w = 28, .o = 20, .kh = 3, .kw = 3 },
		  0, 0);
	conv_case((struct rf__conv2d){ .n = 3, .c = 20, .h = 13, .w = 13, .o = 50, .kh = 5, .kw = 5 },
		  0, 0);
	conv_case((struct rf__conv2d){ .n = 5, .c = 20, .h = 13, .w = 13, .o = 50, .kh = 5, .kw = 5 },
		  2, 0);
	/* a kernel as large as the image: 1x1 output */
	conv_case((struct rf__conv2d){ .n = 2, .c = 3, .h = 4, .w = 5, .o = 2, .kh = 4, .kw = 5 },
		  1, 1);

	/* argument errors */
	struct rf__conv2d s = { .n = 2, .c = 1, .h = 5, .w = 5, .o = 1, .kh = 3, .kw = 3 };
	float buf[64] = { 0 };
	size_t min = rf__k_conv2d_workspace_min(&s);
	CHECK(rf__k_conv2d_fwd(&s, buf, buf, buf, NULL, buf, min - 1) == -EINVAL,
	      "conv: small workspace accepted");
	CHECK(rf__k_conv2d_fwd(&s, buf, buf, buf, NULL, NULL, 0) == -EINVAL,
	      "conv: NULL workspace accepted");
	s.kh = 6;
	CHECK(rf__k_conv2d_workspace_size(&s) == 0, "conv: kernel > image has a workspace size");
	CHECK(rf__k_conv2d_fwd(&s, buf, buf, buf, NULL, buf, sizeof(buf)) == -EINVAL,
	      "conv: kernel > image accepted");
}

/* ---- average pooling ---------------------------------------------------------------------------- */

struct pool_ctx {
	float *x, *y, *r;
	int n, c, h, w, k;
};

static double pool_loss(void *ctx)
{
	struct pool_ctx *p = ctx;
	rf__k_avgpool2d_fwd(p->y, p->x, p->n, p->c, p->h, p->w, p->k);
	return dot_d(p->y, p->r, (size_t)p->n * p->c * (p->h / p->k) * (p->w / p->k));
}

static void test_avgpool(void)
{
	for (int rep = 0; rep < 10; rep++) {
		struct pool_ctx p = { .n = rint_in(1, 3), .c = rint_in(1, 3), .k = rint_in(1, 3) };
		p.h = p.k * rint_in(1, 5) + rint_in(0, p.k - 1); /* floor: leftovers */
		p.w = p.k * rint_in(1, 5) + rint_in(0, p.k - 1);
		if (rep == 0) {
			p.k = 2;
			p.h = p.w = 13; /* LeNet's 26->13 and 9->4 cases */
		}
		int oh = p.h / p.k, ow = p.w / p.k;
		size_t nx = (size_t)p.n * p.c * p.h * p.w, ny = (size_t)p.n * p.c * oh * ow;
		p.x = frand(nx, -1, 1);
		p.y = falloc(ny);
		p.r = frand(ny, -1, 1);
		rf__k_avgpool2d_fwd(p.y, p.x, p.n, p.c, p.h, p.w, p.k);
		double *ref = malloc(ny * sizeof(double));
		for (int pl = 0; pl < p.n * p.c; pl++)
			for (int i = 0; i < oh; i++)
				for (int j = 0; j < ow; j++) {
					double s = 0;
					for (int a = 0; a < p.k; a++)
						for (int b = 0; b < p.k; b++)
							s += p.x[((size_t)pl * p.h + i * p.k + a) * p.w + j * p.k + b];
					ref[((size_t)pl * oh + i) * ow + j] = s / (p.k * p.k);
				}
		close_enough("avgpool fwd", p.y, ref, ny, 1e-6, 1e-6);
		float *dx = falloc(nx);
		for (size_t i = 0; i < nx; i++)
			dx[i] = NAN;
		rf__k_avgpool2d_bwd(dx, p.r, p.n, p.c, p.h, p.w, p.k);
		fd_check("avgpool dx", pool_loss, &p, p.x, nx, dx, 0.25f, 1e-5, 1e-4);
		free(ref);
		free(dx);
		free(p.x);
		free(p.y);
		free(p.r);
	}
}

/* ---- optimiser, vector helpers, decoding --------------------------------------------------------- */

static void test_vector_ops(void)
{
	size_t n = 1037;
	float *w = frand(n, -1, 1), *g = frand(n, -1, 1), *v = frand(n, -1, 1);
	float *w0 = malloc(n * sizeof(float)), *v0 = malloc(n * sizeof(float));
	double *ref = malloc(n * sizeof(double)), *ref2 = malloc(n * sizeof(double));
	memcpy(w0, w, n * sizeof(float));
	memcpy(v0, v, n * sizeof(float));

	rf__k_sgd(w, g, n, 0.1f, 0.0f);
	for (size_t i = 0; i < n; i++)
		ref[i] = w0[i] - 0.1 * g[i];
	close_enough("sgd", w, ref, n, 1e-7, 1e-6);
	memcpy(w, w0, n * sizeof(float));
	rf__k_sgd(w, g, n, 0.1f, 0.01f);
	for (size_t i = 0; i < n; i++)
		ref[i] = w0[i] - 0.1 * (g[i] + 0.01 * w0[i]);
	close_enough("sgd weight decay", w, ref, n, 1e-7, 1e-6);
	memcpy(w, w0, n * sizeof(float));
	rf__k_sgd_momentum(w, v, g, n, 0.1f, 0.9f, 0.01f, 0);
	for (size_t i = 0; i < n; i++) {
		double vv = 0.9 * v0[i] + g[i] + 0.01 * w0[i];
		ref2[i] = vv;
		ref[i] = w0[i] - 0.1 * vv;
	}
	close_enough("sgd_momentum w", w, ref, n, 1e-6, 1e-6);
	close_enough("sgd_momentum v", v, ref2, n, 1e-6, 1e-6);
	/* Nesterov, from this v: w -= lr * (d + momentum * v_new) */
	memcpy(w0, w, n * sizeof(float));
	memcpy(v0, v, n * sizeof(float));
	rf__k_sgd_momentum(w, v, g, n, 0.1f, 0.9f, 0.01f, 1);
	for (size_t i = 0; i < n; i++) {
		double d = g[i] + 0.01 * w0[i], vv = 0.9 * v0[i] + d;
		ref2[i] = vv;
		ref[i] = w0[i] - 0.1 * (d + 0.9 * vv);
	}
	close_enough("sgd_momentum nesterov w", w, ref, n, 1e-6, 1e-6);
	close_enough("sgd_momentum nesterov v", v, ref2, n, 1e-6, 1e-6);

	memcpy(w, w0, n * sizeof(float));
	rf__k_axpy(w, -0.5f, g, n);
	for (size_t i = 0; i < n; i++)
		ref[i] = w0[i] - 0.5 * g[i];
	close_enough("axpy", w, ref, n, 1e-7, 1e-6);
	memcpy(w, w0, n * sizeof(float));
	rf__k_scale(w, 3.0f, n);
	for (size_t i = 0; i < n; i++)
		ref[i] = 3.0 * w0[i];
	close_enough("scale", w, ref, n, 0, 1e-7);
	rf__k_fill(w, 2.5f, n);
	for (size_t i = 0; i < n; i++)
		CHECK(w[i] == 2.5f, "fill [%zu]", i);
	rf__k_copy(w, g, n);
	bits_equal("copy", w, g, n);

	/* reduce_sum: k = 0, 1 (in place and not), 3, 11 (more than one block of 4096) */
	size_t big = 9001;
	const float *in[11];
	float *bufs[11];
	for (int j = 0; j < 11; j++)
		in[j] = bufs[j] = frand(big, -1, 1);
	float *out = falloc(big), *rs = falloc(big);
	rf__k_reduce_sum(out, in, 0, big);
	for (size_t i = 0; i < big; i++)
		CHECK(out[i] == 0.0f, "reduce_sum k=0");
	rf__k_reduce_sum(out, in, 1, big);
	bits_equal("reduce_sum k=1", out, bufs[0], big);
	for (int k = 3; k <= 11; k += 8) {
		rf__k_reduce_sum(out, in, k, big);
		for (size_t i = 0; i < big; i++) {
			float s = bufs[0][i];
			for (int j = 1; j < k; j++)
				s += bufs[j][i];
			rs[i] = s; /* same order: bit-exact */
		}
		bits_equal("reduce_sum", out, rs, big);
		/* in place on in[0] */
		float *save = malloc(big * sizeof(float));
		memcpy(save, bufs[0], big * sizeof(float));
		rf__k_reduce_sum(bufs[0], in, k, big);
		bits_equal("reduce_sum in place", bufs[0], out, big);
		memcpy(bufs[0], save, big * sizeof(float));
		free(save);
	}
	for (int j = 0; j < 11; j++)
		free(bufs[j]);
	free(out);
	free(rs);

	/* decoding: all 256 byte values */
	uint8_t bytes[256];
	for (int i = 0; i < 256; i++)
		bytes[i] = (uint8_t)i;
	float f[256];
	int32_t lab[256];
	rf__k_u8_to_i32(lab, bytes, 256);
	for (int i = 0; i < 256; i++)
		CHECK(lab[i] == i, "u8_to_i32 [%d]", i);
	/* u8 -> f32: every path (mean 0 and std 1: the multiply alone; n >= 1024: a table;
	 * short: the formula) gives the formula's bits, each step rounded as written. At
	 * odd lengths and offsets, so the vector loops' heads and tails run too. */
	{
		static const float prm[][3] = {
			{ 1.0f / 255.0f, 0.2860f, 0.3530f }, { 1.0f / 255.0f, 0.0f, 1.0f },
			{ 1.0f, 0.0f, 1.0f }, { 0.0039215f, -0.0f, 1.0f }, { 1.0f / 255.0f, 0.0f, 0.5f },
			{ 2.5f, 100.0f, 1.0f }, { 1.0f / 255.0f, 0.5f, 0.25f },
		};
		static const size_t lens[] = { 0, 1, 15, 255, 1023, 1024, 4097, (1u << 20) + 17 };
		size_t cap = (1u << 20) + 17 + 3;
		uint8_t *in = malloc(cap);
		float *out = malloc(cap * sizeof(float));
		for (size_t i = 0; i < cap; i++)
			in[i] = (uint8_t)(i * 2654435761u >> 13);
		for (size_t p = 0; p < sizeof(prm) / sizeof(prm[0]); p++)
			for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
				size_t n = lens[k], o = k % 3;
				rf__k_u8_to_f32(out + o, in + o, n, prm[p][0], prm[p][1], prm[p][2]);
				for (size_t i = 0; i < n; i++) {
					volatile float t = (float)in[o + i] * prm[p][0];
					volatile float u = t - prm[p][1];
					float want = u / prm[p][2];
					if (out[o + i] != want) {
						CHECK(0, "u8_to_f32 params %zu n %zu [%zu] %.9g want %.9g", p,
						      n, i, out[o + i], want);
						break;
					}
				}
			}
		/* per channel: every path (short: the formula; long: a table per channel; all
		 * channels alike: the one-channel paths) with planes that end mid-run */
		static const struct { unsigned nch; uint64_t plane; float m[4], s[4]; } pc[] = {
			{ 3, 7, { 0.485f, 0.456f, 0.406f }, { 0.229f, 0.224f, 0.225f } },
			{ 3, 50176, { 0.485f, 0.456f, 0.406f }, { 0.229f, 0.224f, 0.225f } },
			{ 2, 1, { 0.0f, 1.0f }, { 1.0f, -2.0f } },
			{ 4, 300, { 0.5f, 0.5f, 0.5f, 0.5f }, { 0.5f, 0.5f, 0.5f, 0.5f } },
			{ 3, 4, { 0.0f, 0.0f, 0.0f }, { 1.0f, 1.0f, 1.0f } },
		};
		for (size_t p = 0; p < sizeof(pc) / sizeof(pc[0]); p++)
			for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
				size_t n = lens[k], o = k % 3;
				struct rf__u8norm m = { 1.0f / 255.0f, pc[p].nch, pc[p].plane, { 0 }, { 0 } };
				memcpy(m.mean, pc[p].m, sizeof(m.mean));
				memcpy(m.std, pc[p].s, sizeof(m.std));
				rf__k_u8_norm(out + o, in + o, n, &m);
				for (size_t i = 0; i < n; i++) {
					unsigned c = (unsigned)((i / m.plane) % m.nch);
					volatile float t = (float)in[o + i] * m.scale;
					volatile float u = t - m.mean[c];
					float want = u / m.std[c];
					if (out[o + i] != want) {
						CHECK(0, "u8_norm set %zu n %zu [%zu] %.9g want %.9g", p, n,
						      i, out[o + i], want);
						break;
					}
				}
			}
		free(in);
		free(out);
	}
	(void)f;
	free(w);
	free(g);
	free(v);
	free(w0);
	free(v0);
	free(ref);
	free(ref2);
}

/* ---- random numbers -------------------------------------------------------------------------------- */

static void test_rand(void)
{
	/* Random123 kat_vectors, philox4x32 10 */
	static const uint32_t kat[3][10] = {
		{ 0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 },
		{ 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
		  0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd },
		{ 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
		  0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 },
	};
	for (int t = 0; t < 3; t++) {
		uint32_t out[4];
		rf__k_philox4x32_10(out, kat[t], kat[t] + 4);
		CHECK(!memcmp(out, kat[t] + 6, sizeof(out)),
		      "philox KAT %d: %08x %08x %08x %08x", t, out[0], out[1], out[2], out[3]);
	}

	/* uniform element i = (philox(ctr = counter + i, key = seed)[0] >> 8) * 2^-24 */
	const size_t N = 1000000;
	float *a = falloc(N), *b = falloc(N);
	const uint64_t seed = 0x0123456789abcdefull, ctr = 1000;
	rf__k_rand_uniform(a, N, seed, ctr, 0.0f, 1.0f);
	for (size_t i = 0; i < 64; i++) {
		uint64_t idx = ctr + i;
		uint32_t c4[4] = { (uint32_t)idx, (uint32_t)(idx >> 32), 0, 0 },
			 k2[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) }, o[4];
		rf__k_philox4x32_10(o, c4, k2);
		CHECK(a[i] == (float)(o[0] >> 8) * 0x1p-24f, "uniform [%zu] off the documented formula", i);
	}
	rf__k_rand_uniform(b, N, seed, ctr, 0.0f, 1.0f);
	bits_equal("uniform reproducible", a, b, N);
	double s = 0, s2 = 0;
	float mn = 1, mx = 0;
	for (size_t i = 0; i < N; i++) {
		s += a[i];
		s2 += (double)a[i] * a[i];
		mn = a[i] < mn ? a[i] : mn;
		mx = a[i] > mx ? a[i] : mx;
	}
	double mean = s / N, var = s2 / N - mean * mean;
	CHECK(mn >= 0.0f && mx < 1.0f, "uniform range [%g, %g]", mn, mx);
	CHECK(fabs(mean - 0.5) < 3e-3 && fabs(var - 1.0 / 12) < 3e-3,
	      "uniform moments mean %g var %g", mean, var);
	/* different counter, different seed -> different values */
	rf__k_rand_uniform(b, N, seed, ctr + 1, 0.0f, 1.0f);
	size_t same = 0;
	for (size_t i = 0; i < N - 1; i++)
		same += a[i] == b[i];
	CHECK(same < 100, "uniform: counter+1 gives %zu equal values", same);
	for (size_t i = 0; i < N - 1; i++) /* shifted by one: the same stream */
		if (a[i + 1] != b[i]) {
			CHECK(0, "uniform: counter shift is not a stream shift at %zu", i);
			break;
		}
	rf__k_rand_uniform(b, N, seed + 1, ctr, 0.0f, 1.0f);
	same = 0;
	for (size_t i = 0; i < N; i++)
		same += a[i] == b[i];
	CHECK(same < 100, "uniform: seed+1 gives %zu equal values", same);
	/* counter splitting, even and odd, and across the 2^32 carry and 2^64 wrap */
	const uint64_t ctrs[3] = { 7, 0xfffffff0ull, UINT64_MAX - 20 };
	for (int t = 0; t < 3; t++) {
		size_t n = 1001, h = t == 0 ? n / 2 : 37;
		rf__k_rand_uniform(a, n, seed, ctrs[t], -3.0f, 5.0f);
		rf__k_rand_uniform(b, h, seed, ctrs[t], -3.0f, 5.0f);
		rf__k_rand_uniform(b + h, n - h, seed, ctrs[t] + h, -3.0f, 5.0f);
		bits_equal("uniform counter split", a, b, n);
		for (size_t i = 0; i < n; i++)
			CHECK(a[i] >= -3.0f && a[i] < 5.0f, "uniform [-3,5) range: %g", a[i]);
		rf__k_rand_normal(a, n, seed, ctrs[t], 1.0f, 2.0f);
		rf__k_rand_normal(b, h, seed, ctrs[t], 1.0f, 2.0f);
		rf__k_rand_normal(b + h, n - h, seed, ctrs[t] + h, 1.0f, 2.0f);
		bits_equal("normal counter split", a, b, n);
	}

	/* normal moments */
	rf__k_rand_normal(a, N, seed, 0, 0.0f, 1.0f);
	rf__k_rand_normal(b, N, seed, 0, 0.0f, 1.0f);
	bits_equal("normal reproducible", a, b, N);
	s = s2 = 0;
	double s4 = 0;
	size_t within1 = 0;
	for (size_t i = 0; i < N; i++) {
		double x = a[i];
		CHECK(isfinite(x), "normal non-finite at %zu", i);
		s += x;
		s2 += x * x;
		s4 += x * x * x * x;
		within1 += fabs(x) < 1.0;
	}
	mean = s / N;
	double sd = sqrt(s2 / N - mean * mean), kurt = s4 / N;
	CHECK(fabs(mean) < 5e-3, "normal mean %g", mean);
	CHECK(fabs(sd - 1.0) < 5e-3, "normal std %g", sd);
	CHECK(fabs(kurt - 3.0) < 0.05, "normal 4th moment %g", kurt);
	CHECK(fabs((double)within1 / N - 0.682689) < 3e-3, "normal P(|x|<1) = %g",
	      (double)within1 / N);
	rf__k_rand_normal(b, N, seed, 0, 3.0f, 0.5f);
	for (size_t i = 0; i < 1000; i++)
		CHECK(fabs(b[i] - (3.0 + 0.5 * a[i])) < 1e-5, "normal mean/std scaling at %zu", i);
	free(a);
	free(b);
}

/* The fused LeNet-block kernels give the same bits as the separate ones. */
static void test_fused(void)
{
	static const int shapes[][4] = { { 3, 20, 26, 26 }, { 2, 5, 9, 9 }, { 1, 3, 7, 10 } };

	for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
		int n = shapes[t][0], c = shapes[t][1], h = shapes[t][2], w = shapes[t][3];
		size_t ny = (size_t)n * c * h * w, np = (size_t)n * c * (h / 2) * (w / 2);
		float *y0 = frand(ny, -1, 1), *y1 = falloc(ny), *y2 = falloc(ny);
		float *p1 = falloc(np), *p2 = falloc(np), *dp = frand(np, -1, 1);
		float *dx1 = falloc(ny), *dx2 = falloc(ny);

		memcpy(y1, y0, ny * sizeof(float));
		rf__k_relu_fwd(y2, y0, ny);
		rf__k_avgpool2d_fwd(p2, y2, n, c, h, w, 2);
		rf__k_relu_avgpool2_fwd(p1, y1, n, c, h, w);
		CHECK(!memcmp(y1, y2, ny * sizeof(float)) && !memcmp(p1, p2, np * sizeof(float)),
		      "relu+avgpool2 fused forward differs (%dx%dx%dx%d)", n, c, h, w);
		rf__k_avgpool2d_bwd(dx2, dp, n, c, h, w, 2);
		rf__k_relu_bwd(dx2, dx2, y2, ny);
		rf__k_avgpool2_relu_bwd(dx1, dp, y2, n, c, h, w);
		CHECK(!memcmp(dx1, dx2, ny * sizeof(float)),
		      "avgpool2+relu fused backward differs (%dx%dx%dx%d)", n, c, h, w);
		free(y0); free(y1); free(y2); free(p1); free(p2); free(dp); free(dx1); free(dx2);
	}
	/* conv1's filter gradient with the pooled gradient turned into dy on the fly: the
	 * AVX-512 3x3 kernel (16 < ow <= 32) with even, odd and full-width rows, odd row
	 * counts (the last row has no pooled gradient), the general kernel otherwise */
	static const int shp[][3] = { { 28, 28, 20 }, { 21, 21, 4 }, { 20, 34, 9 },
				      { 19, 19, 3 }, { 12, 12, 5 } };
	for (unsigned si = 0; si < sizeof(shp) / sizeof(shp[0]); si++) {
		const int h = shp[si][0], w = shp[si][1], o = shp[si][2], n = 3;
		struct rf__conv2d s = { .n = n, .c = 1, .h = h, .w = w, .o = o, .kh = 3, .kw = 3 };
		int oh = h - 2, ow = w - 2;
		size_t nx = (size_t)n * h * w, ny = (size_t)n * o * oh * ow,
		       np = (size_t)n * o * (oh / 2) * (ow / 2), nw = (size_t)o * 9;
		size_t wsb = rf__k_conv2d_workspace_size(&s);
		float *x = frand(nx, -1, 1), *y = frand(ny, -1, 1), *dp = frand(np, -1, 1);
		float *dy = falloc(ny), *dw1 = frand(nw, -1, 1), *dw2 = falloc(nw);
		float *db1 = frand((size_t)o, -1, 1), *db2 = falloc((size_t)o);
		void *ws = malloc(wsb ? wsb : 1);

		for (size_t i = 0; i < ny; i++)
			y[i] = y[i] > 0 ? y[i] : 0; /* a ReLU output */
		memcpy(dw2, dw1, nw * sizeof(float));
		memcpy(db2, db1, (size_t)o * sizeof(float));
		rf__k_avgpool2_relu_bwd(dy, dp, y, n, o, oh, ow);
		CHECK(rf__k_conv2d_bwd_filter(&s, dw2, db2, dy, x, 1, ws, wsb) == 0, "bwd_filter");
		CHECK(rf__k_conv2d_bwd_filter_pool_relu(&s, dw1, db1, dp, y, x, 1) == 0,
		      "bwd_filter_pool_relu");
		CHECK(!memcmp(dw1, dw2, nw * sizeof(float)) &&
			      !memcmp(db1, db2, (size_t)o * sizeof(float)),
		      "fused conv1 filter gradient differs from pool+relu backward then bwd_filter "
		      "(%dx%d, %d filters)", h, w, o);
		s.c = 2; /* single-channel only */
		CHECK(rf__k_conv2d_bwd_filter_pool_relu(&s, dw1, db1, dp, y, x, 1) == -EINVAL,
		      "fused filter gradient must refuse c > 1");
		free(x); free(y); free(dp); free(dy); free(dw1); free(dw2); free(db1); free(db2); free(ws);
	}
}

int main(void)
{
	test_gemm();
	test_gemm_packing_bits();
	test_linear();
	test_relu();
	test_softmax_xent();
	test_conv();
	test_im2col_panel();
	test_conv_gen_bits();
	/* rf__k_gemm takes the AVX-512 gemm where the CPU has it, OpenBLAS (else the
	 * portable gemm) otherwise: the layers built on it once more the other way, with
	 * RF_KERNELS_BLAS_GEMM (OpenBLAS's threads as the run allowed: under TSan, one) */
	setenv("RF_KERNELS_BLAS_GEMM", "1", 1);
	test_gemm();
	test_linear();
	test_conv();
	unsetenv("RF_KERNELS_BLAS_GEMM");
	test_avgpool();
	test_fused();
	test_vector_ops();
	test_rand();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("all kernel checks passed (BLAS threads: %d)\n", rf__k_blas_get_threads());
	return 0;
}
