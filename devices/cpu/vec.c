/* devices/cpu/vec.c -- vector kernels: optimiser updates, axpy, scale, sum, copy,
 * fill and the u8 input decoders. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "kernels-impl.h"

/* ---- optimiser and vector helpers ------------------------------------------------- */

/* a + b * c with one rounding, as torch's add(alpha) (a fused multiply-add): the
 * product of two floats is exact in a double, so only the sum rounds (to double, then
 * to float: a fused multiply-add's result except in rare double-rounding ties), and it
 * stays vectorised where fmaf without -mfma would be a call. */
static inline float rf__madd(float a, float b, float c)
{
	return (float)((double)a + (double)b * (double)c);
}

void rf__k_sgd(float *restrict w, const float *restrict g, size_t n, float lr,
	      float weight_decay)
{
	/* As PyTorch does it, w - lr*g with the product kept exact: a float times a float
	 * fits a double's mantissa, so only the difference is rounded (to double, then to
	 * float: on these operands that matches a fused multiply-add except in rare ties,
	 * and unlike fmaf without -mfma it stays vectorised). */
	if (weight_decay == 0.0f)
		for (size_t i = 0; i < n; i++)
			w[i] = (float)((double)w[i] - (double)lr * (double)g[i]);
	else    /* d = g + wd*w, then w - lr*d: one rounding each, as torch.optim.SGD */
		for (size_t i = 0; i < n; i++)
			w[i] = rf__madd(w[i], -lr, rf__madd(g[i], weight_decay, w[i]));
}

void rf__k_sgd_momentum(float *restrict w, float *restrict v, const float *restrict g,
		       size_t n, float lr, float momentum, float weight_decay, int nesterov)
{
	for (size_t i = 0; i < n; i++) {
		float d = weight_decay != 0.0f ? rf__madd(g[i], weight_decay, w[i]) : g[i];
		volatile float mv = momentum * v[i];   /* buf.mul_(momentum): its own rounding */
		float vi = mv + d;                     /* .add_(d): one rounding */
		v[i] = vi;
		w[i] = rf__madd(w[i], -lr, nesterov ? rf__madd(d, momentum, vi) : vi);
	}
}

void rf__k_adamw(float *restrict w, float *restrict m, float *restrict v,
		const float *restrict g, size_t n, const struct rf_adamw_params *p)
{
	/* torch's scalars: Python doubles, rounded to float where a tensor op takes them */
	double lr = p->lr, b1 = p->beta1, b2 = p->beta2, st = (double)p->step;
	float decay = (float)(1.0 - lr * p->weight_decay), c1 = (float)(1.0 - b1),
	      c2 = (float)(1.0 - b2), b1f = (float)b1, b2f = (float)b2, eps = (float)p->eps;
	float step_size = (float)(lr / (1.0 - pow(b1, st)));
	float bc2 = (float)sqrt(1.0 - pow(b2, st));

	for (size_t i = 0; i < n; i++) {
		volatile float wd = w[i] * decay;             /* param.mul_(1 - lr*wd) */
		volatile float mb = m[i] * b1f;               /* exp_avg.mul_(b1) */
		float mi = rf__madd(mb, c1, g[i]);            /* .add_(g, alpha=1-b1) */
		volatile float vb = v[i] * b2f;               /* exp_avg_sq.mul_(b2) */
		volatile float cg = c2 * g[i];                /* .addcmul_(g, g, value=1-b2): */
		float vi = rf__madd(vb, cg, g[i]);            /* fma(value*g, g, v) */
		volatile float sq = sqrtf(vi);
		volatile float den0 = sq / bc2;               /* sqrt(v) / sqrt(bc2) */
		float den = den0 + eps;                       /* .add_(eps) */
		volatile float num = -step_size * mi;         /* addcdiv_: value*m / den + w */
		volatile float q = num / den;
		m[i] = mi;
		v[i] = vi;
		w[i] = wd + q;
	}
}

void rf__k_axpy(float *restrict y, float a, const float *restrict x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

void rf__k_scale(float *restrict x, float a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] *= a;
}

void rf__k_reduce_sum(float *out, const float *const *in, int k, size_t n)
{
	if (k <= 0) {
		memset(out, 0, n * sizeof(float));
		return;
	}
	/* Left to right, blocked so that out stays in cache across inputs. */
	enum { BLK = 4096 };
	for (size_t i0 = 0; i0 < n; i0 += BLK) {
		size_t m = n - i0 < BLK ? n - i0 : BLK;
		float *o = out + i0;
		if (k == 1) {
			if (in[0] != out)
				memcpy(o, in[0] + i0, m * sizeof(float));
			continue;
		}
		{
			const float *restrict a = in[0] + i0, *restrict b = in[1] + i0;
			for (size_t i = 0; i < m; i++)
				o[i] = a[i] + b[i];
		}
		for (int j = 2; j < k; j++) {
			const float *restrict a = in[j] + i0;
			float *restrict oo = o;
			for (size_t i = 0; i < m; i++)
				oo[i] += a[i];
		}
	}
}

void rf__k_copy(float *dst, const float *src, size_t n)
{
	if (n && dst != src)
		memmove(dst, src, n * sizeof(float));
}

void rf__k_fill(float *restrict x, float v, size_t n)
{
	if (v == 0.0f && !signbit(v)) { /* +0.0f is all zero bits: the C library's fill */
		memset(x, 0, n * sizeof(*x));
		return;
	}
	for (size_t i = 0; i < n; i++)
		x[i] = v;
}

/* ---- input decoding ------------------------------------------------------------------ */

/* The host decode shared with the loader's gather (common/decode.c); outputs of 4 MiB
 * and more are streamed past the caches. */
void rf__k_u8_to_f32(float *restrict out, const uint8_t *restrict in, size_t n,
		    float scale, float mean, float std)
{
	rf__decode_u8_f32(out, in, n, scale, mean, std, n >= (1u << 20));
}

void rf__k_u8_norm(float *restrict out, const uint8_t *restrict in, size_t n,
		   const struct rf__u8norm *m)
{
	rf__decode_u8_norm(out, in, n, m, n >= (1u << 20));
}

void rf__k_u8_to_i32(int32_t *restrict out, const uint8_t *restrict in, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = in[i];
}
