/* devices/cpu/norm.c -- batch normalisation over (n, c, h, w) per channel, training
 * (batch statistics, running statistics updated) and evaluation (running statistics),
 * and its backward pass; global average pooling and max pooling. Plane reductions run
 * in 16 float lanes (vectorised, AVX-512 where the CPU has it) and are combined in
 * double, so a channel of a million values keeps ~1e-7 relative accuracy. */
#include <math.h>
#include <string.h>

#include "kernels-impl.h"

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

int rf__k_bn_fwd_train(const struct rf__bn *s, float *y, float *mean, float *invstd,
		      float *run_mean, float *run_var, const float *x, const float *gamma,
		      const float *beta)
{
	const size_t hw = (size_t)s->hw, M = (size_t)s->n * hw;
	if (s->n < 0 || s->c < 1 || s->hw < 1 || M < 2 || !(s->eps > 0.0f))
		return -EINVAL;
	for (int c = 0; c < s->c; c++) {
		double sum = 0.0, ssq = 0.0, dummy = 0.0;
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
		const float k = (float)((double)gamma[c] * is);
		for (int i = 0; i < s->n; i++) {
			size_t o = ((size_t)i * s->c + c) * hw;
			plane_affine(y + o, x + o, hw, mf, k, beta[c]);
			if (s->relu)    /* the plane just written, in cache */
				rf__k_relu_fwd(y + o, y + o, hw);
		}
		mean[c] = mf;
		invstd[c] = (float)is;
		if (run_mean)
			run_mean[c] = (float)((1.0 - s->momentum) * run_mean[c] + s->momentum * mu);
		if (run_var)
			run_var[c] = (float)((1.0 - s->momentum) * run_var[c] +
					     s->momentum * var * (double)M / (double)(M - 1));
	}
	return 0;
}

int rf__k_bn_fwd_eval(const struct rf__bn *s, float *y, const float *x, const float *gamma,
		     const float *beta, const float *run_mean, const float *run_var)
{
	const size_t hw = (size_t)s->hw;
	if (s->n < 0 || s->c < 1 || s->hw < 1 || !(s->eps > 0.0f))
		return -EINVAL;
	for (int c = 0; c < s->c; c++) {
		const float k = (float)((double)gamma[c] / sqrt((double)run_var[c] + s->eps));
		for (int i = 0; i < s->n; i++) {
			size_t o = ((size_t)i * s->c + c) * hw;
			plane_affine(y + o, x + o, hw, run_mean[c], k, beta[c]);
			if (s->relu)    /* the plane just written, in cache */
				rf__k_relu_fwd(y + o, y + o, hw);
		}
	}
	return 0;
}

int rf__k_bn_bwd(const struct rf__bn *s, float *dx, float *dgamma, float *dbeta,
		const float *dy, const float *x, const float *mean, const float *invstd,
		const float *gamma, const float *y, float *t)
{
	const size_t hw = (size_t)s->hw, M = (size_t)s->n * hw;
	if (s->n < 0 || s->c < 1 || s->hw < 1 || M < 1 || (y && !t))
		return -EINVAL;
	for (int c = 0; c < s->c; c++) {
		double sg = 0.0, sgx = 0.0;
		for (int i = 0; i < s->n; i++) {
			size_t o = ((size_t)i * s->c + c) * hw;
			if (y)  /* dy masked by y > 0 a plane at a time: rf_relu_bwd's bits */
				rf__k_relu_bwd(t, dy + o, y + o, hw);
			plane_dots(y ? t : dy + o, x + o, hw, mean[c], &sg, &sgx);
		}
		const double is = invstd[c];
		dbeta[c] = (float)sg;
		dgamma[c] = (float)(sgx * is);
		/* dx = gamma*is * (dy - sg/M - (x - mean) * is^2 * sgx/M) */
		const float k = (float)((double)gamma[c] * is);
		const float a = (float)(sg / (double)M);
		const float cc = (float)(is * is * sgx / (double)M);
		for (int i = 0; i < s->n; i++) {
			size_t o = ((size_t)i * s->c + c) * hw;
			if (y)
				rf__k_relu_bwd(t, dy + o, y + o, hw);
			plane_bwd(dx + o, y ? t : dy + o, x + o, hw, mean[c], k, a, cc);
		}
	}
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
