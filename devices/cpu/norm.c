/* devices/cpu/norm.c -- batch normalisation over (n, c, h, w) per channel, training
 * (batch statistics, running statistics updated) and evaluation (running statistics),
 * and its backward pass; global average pooling and max pooling. Plane reductions run
 * in 16 float lanes (vectorised, AVX-512 where the CPU has it) and are combined in
 * double, so a channel of a million values keeps ~1e-7 relative accuracy. */
#include <math.h>
#include <string.h>

#include "kernels-impl.h"
#include "par.h"

#define LANES 16

/* sum of p[0..n) and sum of (p[i] - m)^2 */
RF__INLINE void plane_sums_body(const float *restrict p, size_t n, float m, double *s,
				double *q)
{
	float a[LANES] = { 0 }, b[LANES] = { 0 };
	size_t i = 0;
	for (; i + LANES <= n; i += LANES)
		for (int l = 0; l < LANES; l++) {
			float v = p[i + l];
			a[l] += v;
			b[l] += (v - m) * (v - m);
		}
	double sa = 0.0, sb = 0.0;
	for (int l = 0; l < LANES; l++) {
		sa += a[l];
		sb += b[l];
	}
	for (; i < n; i++) {
		sa += p[i];
		sb += (double)(p[i] - m) * (p[i] - m);
	}
	*s += sa;
	*q += sb;
}
RF__DISPATCH(plane_sums, (const float *p, size_t n, float m, double *s, double *q),
	     (p, n, m, s, q))

/* sum of g[i] and of g[i] * (x[i] - m) */
RF__INLINE void plane_dots_body(const float *restrict g, const float *restrict x, size_t n,
				float m, double *s, double *q)
{
	float a[LANES] = { 0 }, b[LANES] = { 0 };
	size_t i = 0;
	for (; i + LANES <= n; i += LANES)
		for (int l = 0; l < LANES; l++) {
			a[l] += g[i + l];
			b[l] += g[i + l] * (x[i + l] - m);
		}
	double sa = 0.0, sb = 0.0;
	for (int l = 0; l < LANES; l++) {
		sa += a[l];
		sb += b[l];
	}
	for (; i < n; i++) {
		sa += g[i];
		sb += (double)g[i] * (x[i] - m);
	}
	*s += sa;
	*q += sb;
}
RF__DISPATCH(plane_dots, (const float *g, const float *x, size_t n, float m, double *s,
			  double *q),
	     (g, x, n, m, s, q))

/* y = (x - m) * k + b over one plane */
RF__INLINE void plane_affine_body(float *restrict y, const float *restrict x, size_t n, float m,
				  float k, float b)
{
	for (size_t i = 0; i < n; i++)
		y[i] = (x[i] - m) * k + b;
}
RF__DISPATCH(plane_affine, (float *y, const float *x, size_t n, float m, float k, float b),
	     (y, x, n, m, k, b))

/* dx = k * (g - a - (x - m) * c) over one plane */
RF__INLINE void plane_bwd_body(float *restrict dx, const float *restrict g,
			       const float *restrict x, size_t n, float m, float k, float a, float c)
{
	for (size_t i = 0; i < n; i++)
		dx[i] = k * (g[i] - a - (x[i] - m) * c);
}
RF__DISPATCH(plane_bwd, (float *dx, const float *g, const float *x, size_t n, float m, float k,
			 float a, float c),
	     (dx, g, x, n, m, k, a, c))

/* ---- over idle cores (par.h): channels are independent ---------------------------------
 * A pass runs channel by channel; bn_par hands runs of channels to rf__par_for where
 * the tensor is large (each channel computed as the loop computes it: the same bits).
 * The backward's masked-dy scratch is one plane: a chunk other than the first uses one
 * on its stack, so that pass is spread only where a plane fits there. */
enum { BN_PAR_MIN = 1 << 16, BN_STACK_PLANE = 4096 };

struct bn_args {
	const struct rf__bn *s;
	float *y, *mean, *invstd, *run_mean, *run_var, *dgamma, *dbeta, *t;
	const float *x, *gamma, *beta, *dy, *yr, *cmean, *cinvstd, *rvar;
	int per;
	void (*chan)(const struct bn_args *a, int c, float *t);
};

static void bn_chunk(void *arg, unsigned i)
{
	const struct bn_args *a = arg;
	int c0 = (int)i * a->per, c1 = c0 + a->per < a->s->c ? c0 + a->per : a->s->c;
	float stack[BN_STACK_PLANE];
	float *t = i == 0 || !a->t ? a->t : stack;

	for (int c = c0; c < c1; c++)
		a->chan(a, c, t);
}

static void bn_par(struct bn_args *a, int spread)
{
	const int C = a->s->c;
	unsigned want = 4 * (rf__par_helpers() + 1);

	if (!spread || (size_t)a->s->n * C * a->s->hw < BN_PAR_MIN || C < 2 || !rf__par_open()) {
		for (int c = 0; c < C; c++)
			a->chan(a, c, a->t);
		return;
	}
	a->per = (C + (int)want - 1) / (int)want;
	rf__par_for((unsigned)((C + a->per - 1) / a->per), bn_chunk, a);
}

static void bn_fwd_train_chan(const struct bn_args *a, int c, float *unused)
{
	const struct rf__bn *s = a->s;
	const size_t hw = (size_t)s->hw, M = (size_t)s->n * hw;
	const float *x = a->x;
	double sum = 0.0, ssq = 0.0, dummy = 0.0;

	(void)unused;
	for (int i = 0; i < s->n; i++)
		plane_sums(x + ((size_t)i * s->c + c) * hw, hw, 0.0f, &sum, &dummy);
	const double mu = sum / (double)M;
	/* second pass about the mean (no cancellation); the residue of rounding mu
	 * to float is removed exactly: sum (v-m)^2 = ssq' - M*(mu-m)^2 */
	const float mf = (float)mu;
	double s1 = 0.0;
	for (int i = 0; i < s->n; i++)
		plane_sums(x + ((size_t)i * s->c + c) * hw, hw, mf, &s1, &ssq);
	double d = mu - (double)mf, var = ssq / (double)M - d * d;
	if (var < 0.0)
		var = 0.0;
	const double is = 1.0 / sqrt(var + (double)s->eps);
	const float k = (float)((double)a->gamma[c] * is);
	for (int i = 0; i < s->n; i++) {
		size_t o = ((size_t)i * s->c + c) * hw;
		plane_affine(a->y + o, x + o, hw, mf, k, a->beta[c]);
		if (s->relu)    /* the plane just written, in cache */
			rf__k_relu_fwd(a->y + o, a->y + o, hw);
	}
	a->mean[c] = mf;
	a->invstd[c] = (float)is;
	if (a->run_mean)
		a->run_mean[c] = (float)((1.0 - s->momentum) * a->run_mean[c] + s->momentum * mu);
	if (a->run_var)
		a->run_var[c] = (float)((1.0 - s->momentum) * a->run_var[c] +
					s->momentum * var * (double)M / (double)(M - 1));
}

int rf__k_bn_fwd_train(const struct rf__bn *s, float *y, float *mean, float *invstd,
		      float *run_mean, float *run_var, const float *x, const float *gamma,
		      const float *beta)
{
	const size_t hw = (size_t)s->hw, M = (size_t)s->n * hw;
	if (s->n < 0 || s->c < 1 || s->hw < 1 || M < 2 || !(s->eps > 0.0f))
		return -EINVAL;
	struct bn_args a = { .s = s, .y = y, .mean = mean, .invstd = invstd,
			     .run_mean = run_mean, .run_var = run_var, .x = x, .gamma = gamma,
			     .beta = beta, .chan = bn_fwd_train_chan };
	bn_par(&a, 1);
	return 0;
}

static void bn_fwd_eval_chan(const struct bn_args *a, int c, float *unused)
{
	const struct rf__bn *s = a->s;
	const size_t hw = (size_t)s->hw;
	const float k = (float)((double)a->gamma[c] / sqrt((double)a->rvar[c] + s->eps));

	(void)unused;
	for (int i = 0; i < s->n; i++) {
		size_t o = ((size_t)i * s->c + c) * hw;
		plane_affine(a->y + o, a->x + o, hw, a->cmean[c], k, a->beta[c]);
		if (s->relu)    /* the plane just written, in cache */
			rf__k_relu_fwd(a->y + o, a->y + o, hw);
	}
}

int rf__k_bn_fwd_eval(const struct rf__bn *s, float *y, const float *x, const float *gamma,
		     const float *beta, const float *run_mean, const float *run_var)
{
	if (s->n < 0 || s->c < 1 || s->hw < 1 || !(s->eps > 0.0f))
		return -EINVAL;
	struct bn_args a = { .s = s, .y = y, .x = x, .gamma = gamma, .beta = beta,
			     .cmean = run_mean, .rvar = run_var, .chan = bn_fwd_eval_chan };
	bn_par(&a, 1);
	return 0;
}

static void bn_bwd_chan(const struct bn_args *a, int c, float *t)
{
	const struct rf__bn *s = a->s;
	const size_t hw = (size_t)s->hw, M = (size_t)s->n * hw;
	const float *dy = a->dy, *y = a->yr, *x = a->x;
	double sg = 0.0, sgx = 0.0;

	for (int i = 0; i < s->n; i++) {
		size_t o = ((size_t)i * s->c + c) * hw;
		if (y)  /* dy masked by y > 0 a plane at a time: rf_relu_bwd's bits */
			rf__k_relu_bwd(t, dy + o, y + o, hw);
		plane_dots(y ? t : dy + o, x + o, hw, a->cmean[c], &sg, &sgx);
	}
	const double is = a->cinvstd[c];
	a->dbeta[c] = (float)sg;
	a->dgamma[c] = (float)(sgx * is);
	/* dx = gamma*is * (dy - sg/M - (x - mean) * is^2 * sgx/M) */
	const float k = (float)((double)a->gamma[c] * is);
	const float av = (float)(sg / (double)M);
	const float cc = (float)(is * is * sgx / (double)M);
	for (int i = 0; i < s->n; i++) {
		size_t o = ((size_t)i * s->c + c) * hw;
		if (y)
			rf__k_relu_bwd(t, dy + o, y + o, hw);
		plane_bwd(a->y + o, y ? t : dy + o, x + o, hw, a->cmean[c], k, av, cc);
	}
}

int rf__k_bn_bwd(const struct rf__bn *s, float *dx, float *dgamma, float *dbeta,
		const float *dy, const float *x, const float *mean, const float *invstd,
		const float *gamma, const float *y, float *t)
{
	const size_t hw = (size_t)s->hw, M = (size_t)s->n * hw;
	if (s->n < 0 || s->c < 1 || s->hw < 1 || M < 1 || (y && !t))
		return -EINVAL;
	struct bn_args a = { .s = s, .y = dx, .dgamma = dgamma, .dbeta = dbeta, .t = y ? t : NULL,
			     .x = x, .gamma = gamma, .dy = dy, .yr = y, .cmean = mean,
			     .cinvstd = invstd, .chan = bn_bwd_chan };
	bn_par(&a, !y || hw <= BN_STACK_PLANE);
	return 0;
}

/* ---- global average pooling and max pooling ------------------------------------ */

void rf__k_gavgpool_fwd(float *y, const float *x, size_t planes, int hw)
{
	for (size_t p = 0; p < planes; p++) {
		double s = 0.0, dummy = 0.0;
		plane_sums(x + p * (size_t)hw, (size_t)hw, 0.0f, &s, &dummy);
		y[p] = (float)(s / hw);
	}
}

void rf__k_gavgpool_bwd(float *dx, const float *dy, size_t planes, int hw)
{
	const float inv = 1.0f / (float)hw;
	for (size_t p = 0; p < planes; p++) {
		float v = dy[p] * inv;
		float *d = dx + p * (size_t)hw;
		for (int i = 0; i < hw; i++)
			d[i] = v;
	}
}

/* the window (k x k at stride st) of output (i, j): its first maximum (row-major; a NaN
 * wins, as in PyTorch), as an offset into the plane */
static size_t max_at(const float *x, int w, int k, int st, int i, int j)
{
	size_t best = (size_t)i * st * w + (size_t)j * st;
	float bv = x[best];
	for (int a = 0; a < k; a++)
		for (int b = 0; b < k; b++) {
			size_t o = (size_t)(i * st + a) * w + (size_t)(j * st + b);
			float v = x[o];
			if (v > bv || (isnan(v) && !isnan(bv))) {
				bv = v;
				best = o;
			}
		}
	return best;
}

void rf__k_maxpool2d_fwd(float *y, const float *x, int n, int c, int h, int w, int k, int st)
{
	const int oh = (h - k) / st + 1, ow = (w - k) / st + 1;
	for (size_t p = 0; p < (size_t)n * c; p++) {
		const float *xp = x + p * h * w;
		float *yp = y + p * oh * ow;
		for (int i = 0; i < oh; i++)
			for (int j = 0; j < ow; j++)
				yp[i * ow + j] = xp[max_at(xp, w, k, st, i, j)];
	}
}

void rf__k_maxpool2d_bwd(float *dx, const float *dy, const float *x, int n, int c, int h, int w,
			int k, int st)
{
	const int oh = (h - k) / st + 1, ow = (w - k) / st + 1;
	memset(dx, 0, (size_t)n * c * h * w * sizeof(float));
	for (size_t p = 0; p < (size_t)n * c; p++) {
		const float *xp = x + p * h * w;
		float *dp = dx + p * h * w;
		const float *g = dy + p * oh * ow;
		for (int i = 0; i < oh; i++)
			for (int j = 0; j < ow; j++)
				dp[max_at(xp, w, k, st, i, j)] += g[i * ow + j];
	}
}
