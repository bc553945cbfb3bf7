/* devices/cpu/layers.c -- layer kernels other than gemm and conv: bias, relu,
 * softmax cross-entropy, average pooling and the fused relu/pool pair. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels-impl.h"

/* ---- linear pieces ---------------------------------------------------------- */

void rf__k_bias_add(float *y, const float *b, int rows, int cols)
{
	for (int r = 0; r < rows; r++) {
		float *restrict yr = y + (size_t)r * cols;
		const float *restrict bb = b;
		for (int j = 0; j < cols; j++)
			yr[j] += bb[j];
	}
}

void rf__k_bias_grad(float *db, const float *dy, int rows, int cols, int accumulate)
{
	float *restrict d = db;
	if (!accumulate)
		for (int j = 0; j < cols; j++)
			d[j] = 0.0f;
	for (int r = 0; r < rows; r++) {
		const float *restrict g = dy + (size_t)r * cols;
		for (int j = 0; j < cols; j++)
			d[j] += g[j];
	}
}

void rf__k_relu_fwd(float *y, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void rf__k_add_relu_fwd(float *y, const float *a, const float *b, size_t n)
{
	/* one rounding (the sum), then rf__k_relu_fwd's select: its bits exactly */
	for (size_t i = 0; i < n; i++) {
		float s = a[i] + b[i];
		y[i] = s > 0.0f ? s : 0.0f;
	}
}

void rf__k_relu_bwd(float *dx, const float *dy, const float *y, size_t n)
{
	/* load dy unconditionally: a select vectorises, a conditional load branches */
	for (size_t i = 0; i < n; i++) {
		float g = dy[i];
		dx[i] = y[i] > 0.0f ? g : 0.0f;
	}
}

/* ---- loss ---------------------------------------------------------------------- */

int rf__k_softmax_xent(float *dlogits, float *loss_sum, int32_t *correct,
		      const float *logits, const int32_t *labels, int rows, int cols)
{
	if (rows < 0 || cols < 1)
		return -EINVAL;
	for (int r = 0; r < rows; r++)
		if (labels[r] < 0 || labels[r] >= cols)
			return -EINVAL;
	double loss = 0.0;
	int32_t ok = 0;
	const float inv_rows = rows ? 1.0f / (float)rows : 0.0f;
	for (int r = 0; r < rows; r++) {
		const float *x = logits + (size_t)r * cols;
		int lab = labels[r], arg = 0;
		float mx = x[0];
		for (int j = 1; j < cols; j++)
			if (x[j] > mx) {
				mx = x[j];
				arg = j;
			}
		float sum = 0.0f;
		for (int j = 0; j < cols; j++)
			sum += expf(x[j] - mx);
		loss += (double)(logf(sum) - (x[lab] - mx));
		ok += arg == lab;
		if (dlogits) {
			/* x may alias dlogits: x[j] is read before dl[j] is written */
			float *dl = dlogits + (size_t)r * cols;
			const float inv_sum = 1.0f / sum;
			for (int j = 0; j < cols; j++)
				dl[j] = (expf(x[j] - mx) * inv_sum - (j == lab ? 1.0f : 0.0f)) *
					inv_rows;
		}
	}
	if (loss_sum)
		*loss_sum = (float)loss;
	if (correct)
		*correct = ok;
	return 0;
}

int rf__k_softmax_xent_eval(float *loss_sum, int32_t *correct, const float *logits,
			   const int32_t *labels, int rows, int cols)
{
	return rf__k_softmax_xent(NULL, loss_sum, correct, logits, labels, rows, cols);
}

/* ---- pooling ------------------------------------------------------------------------ */

void rf__k_avgpool2d_fwd(float *y, const float *x, int n, int c, int h, int w, int k)
{
	if (k < 1)
		return;
	const int oh = h / k, ow = w / k;
	const float inv = 1.0f / (float)(k * k);
	const size_t planes = (size_t)n * c;
	if (k == 2) { /* LeNet's case, same order of additions as the general loop */
		for (size_t pl = 0; pl < planes; pl++)
			for (int i = 0; i < oh; i++) {
				const float *restrict x0 = x + (pl * h + 2 * i) * w, *restrict x1 = x0 + w;
				float *restrict yr = y + (pl * oh + i) * ow;
				for (int j = 0; j < ow; j++)
					yr[j] = ((((0.0f + x0[2 * j]) + x0[2 * j + 1]) + x1[2 * j]) +
						 x1[2 * j + 1]) * inv;
			}
		return;
	}
	for (size_t pl = 0; pl < planes; pl++) {
		const float *xp = x + pl * h * w;
		float *yp = y + pl * oh * ow;
		for (int i = 0; i < oh; i++) {
			float *restrict yr = yp + (size_t)i * ow;
			for (int j = 0; j < ow; j++)
				yr[j] = 0.0f;
			for (int a = 0; a < k; a++) {
				const float *restrict xr = xp + (size_t)(i * k + a) * w;
				for (int j = 0; j < ow; j++)
					for (int bb = 0; bb < k; bb++)
						yr[j] += xr[j * k + bb];
			}
			for (int j = 0; j < ow; j++)
				yr[j] *= inv;
		}
	}
}

void rf__k_avgpool2d_bwd(float *dx, const float *dy, int n, int c, int h, int w, int k)
{
	if (k < 1)
		return;
	const int oh = h / k, ow = w / k;
	const float inv = 1.0f / (float)(k * k);
	const size_t planes = (size_t)n * c;
	for (size_t pl = 0; pl < planes; pl++) {
		float *xp = dx + pl * h * w;
		const float *yp = dy + pl * oh * ow;
		for (int r = 0; r < h; r++) {
			float *restrict xr = xp + (size_t)r * w;
			int i = r / k;
			if (i >= oh) {
				for (int col = 0; col < w; col++)
					xr[col] = 0.0f;
				continue;
			}
			const float *restrict yr = yp + (size_t)i * ow;
			if (k == 2)
				for (int j = 0; j < ow; j++) {
					float v = yr[j] * inv;
					xr[2 * j] = v;
					xr[2 * j + 1] = v;
				}
			else
				for (int j = 0; j < ow; j++)
					for (int bb = 0; bb < k; bb++)
						xr[j * k + bb] = yr[j] * inv;
			for (int col = ow * k; col < w; col++)
				xr[col] = 0.0f;
		}
	}
}

void rf__k_relu_avgpool2_fwd(float *p, float *y, int n, int c, int h, int w)
{
	const int oh = h / 2, ow = w / 2;
	const float inv = 1.0f / 4.0f;
	const size_t planes = (size_t)n * c;
	for (size_t pl = 0; pl < planes; pl++) {
		float *yp = y + pl * h * w;
		for (int i = 0; i < oh; i++) {
			float *restrict x0 = yp + (size_t)(2 * i) * w, *restrict x1 = x0 + w;
			float *restrict pr = p + (pl * oh + i) * ow;
			for (int col = 0; col < w; col++) {
				x0[col] = x0[col] > 0.0f ? x0[col] : 0.0f;
				x1[col] = x1[col] > 0.0f ? x1[col] : 0.0f;
			}
			for (int j = 0; j < ow; j++)
				pr[j] = ((((0.0f + x0[2 * j]) + x0[2 * j + 1]) + x1[2 * j]) +
					 x1[2 * j + 1]) * inv;
		}
		for (int r = 2 * oh; r < h; r++) {
			float *restrict xr = yp + (size_t)r * w;
			for (int col = 0; col < w; col++)
				xr[col] = xr[col] > 0.0f ? xr[col] : 0.0f;
		}
	}
}

void rf__k_avgpool2_relu_bwd(float *dx, const float *dy, const float *y, int n, int c, int h,
			    int w)
{
	const int oh = h / 2, ow = w / 2;
	const float inv = 1.0f / 4.0f;
	const size_t planes = (size_t)n * c;
	for (size_t pl = 0; pl < planes; pl++) {
		float *xp = dx + pl * h * w;
		const float *yp = y + pl * h * w;
		const float *gp = dy + pl * oh * ow;
		for (int r = 0; r < h; r++) {
			float *restrict xr = xp + (size_t)r * w;
			const float *restrict yr = yp + (size_t)r * w;
			int i = r / 2;
			if (i >= oh) {
				for (int col = 0; col < w; col++)
					xr[col] = 0.0f;
				continue;
			}
			const float *restrict gr = gp + (size_t)i * ow;
			for (int j = 0; j < ow; j++) {
				float v = gr[j] * inv;
				xr[2 * j] = yr[2 * j] > 0.0f ? v : 0.0f;
				xr[2 * j + 1] = yr[2 * j + 1] > 0.0f ? v : 0.0f;
			}
			for (int col = ow * 2; col < w; col++)
				xr[col] = 0.0f;
		}
	}
}
