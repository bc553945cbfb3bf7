/* devices/cpu/conv.c -- conv2d: im2col + one GEMM per group of images (the im2col
 * matrix of g images is laid out (c*kh*kw, g*oh*ow), so one GEMM covers the group;
 * where ringflow's AVX-512 GEMM multiplies, the forward's matrix is made panel by
 * panel inside it, rf__k_gemm_gen, never written whole),
 * and direct single-channel convolutions for stride 1 without padding. Strided and
 * padded shapes take the same GEMMs with bounds-checked copies (conv-sp.c). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernel-args.h"
#include "kernels-impl.h"
#include "par.h"

/* ---- convolution ---------------------------------------------------------------- */

/* Aim for about this many columns (g*oh*ow) per GEMM: enough to amortise OpenBLAS's
 * packing on LeNet's small images, small enough that the im2col block stays in L2.
 * Measured on the LeNet batch-256 step (1 thread): 1024 ~ 512 ~ 2048 < 4096 (+10 %)
 * < whole batch (+35 %). */
#ifndef RF__CONV_TARGET_COLS
#define RF__CONV_TARGET_COLS 1024
#endif

/* single-channel convolutions are computed directly, without im2col or GEMM */
static int conv_direct(const struct rf__conv2d *s)
{
	return s->c == 1 && rf__conv_plain(s);
}

size_t rf__k_conv2d_workspace_min(const struct rf__conv2d *s)
{
	return rf__conv_workspace_min(s);
}

/* Images per im2col group of the forward for a batch of any size: enough for
 * RF__CONV_TARGET_COLS GEMM columns, rounded up to a power of two (a split of the batch
 * in two then falls between groups: rf__k_conv2d_group). */
static size_t conv_group_full(const struct rf__conv2d *s)
{
	size_t ohw = (size_t)rf__conv2d_oh(s) * rf__conv2d_ow(s);
	size_t g = (RF__CONV_TARGET_COLS + ohw - 1) / ohw, p = 1;

	while (p < g)
		p <<= 1;
	return p;
}

/* g images, at most the batch and at least one */
static size_t conv_clamp(const struct rf__conv2d *s, size_t g)
{
	if (g > (size_t)s->n)
		g = (size_t)s->n;
	return g < 1 ? 1 : g;
}

static size_t conv_ws(const struct rf__conv2d *s, size_t g)
{
	return conv_clamp(s, g) * rf__conv_per_image(s);
}

/* The backward passes keep the group of RF__CONV_TARGET_COLS columns unrounded: the
 * filter gradient sums its groups' products, so its group decides its bits, which
 * the forward's power of two (2026-11-30) had no reason to change. */
size_t rf__k_conv2d_workspace_size(const struct rf__conv2d *s)
{
	if (rf__conv_check(s))
		return 0;
	size_t ohw = (size_t)rf__conv2d_oh(s) * rf__conv2d_ow(s);
	return conv_ws(s, (RF__CONV_TARGET_COLS + ohw - 1) / ohw);
}

size_t rf__k_conv2d_fwd_workspace_size(const struct rf__conv2d *s)
{
	return rf__conv_check(s) ? 0 : conv_ws(s, conv_group_full(s));
}

int rf__k_conv2d_group(const struct rf__conv2d *s)
{
	if (rf__conv_check(s))
		return -EINVAL;
	return conv_direct(s) ? 1 : (int)conv_clamp(s, conv_group_full(s));
}

/* Geometry passed to the copy bodies; the specialised callers pass constants for
 * kh, kw, w and ow so that the inner loops have fixed trip counts. */
static struct rf__conv_geo conv_geo(const struct rf__conv2d *s)
{
	return (struct rf__conv_geo){ s->c, s->h, s->w, s->kh, s->kw, rf__conv2d_oh(s),
				      rf__conv2d_ow(s), rf__conv2d_stride(s), s->pad };
}

/* col (c*kh*kw, ld) columns [gi*ohw, (gi+1)*ohw) for each of the g images at x. */
RF__INLINE void im2col_b(float *restrict col, size_t ld, const float *restrict x, int C,
			 int H, int W, int KH, int KW, int OH, int OW, int g)
{
	const size_t ohw = (size_t)OH * OW, img = (size_t)C * H * W;
	for (int c = 0; c < C; c++)
		for (int kh = 0; kh < KH; kh++)
			for (int kw = 0; kw < KW; kw++) {
				size_t r = ((size_t)c * KH + kh) * KW + kw;
				float *restrict cp = col + r * ld;
				const float *xp = x + (size_t)c * H * W + (size_t)kh * W + kw;
				for (int gi = 0; gi < g; gi++, cp += ohw, xp += img)
					for (int i = 0; i < OH; i++)
						for (int j = 0; j < OW; j++)
							cp[i * OW + j] = xp[i * W + j];
			}
}

RF__INLINE void im2col_body(float *col, size_t ld, const float *x, struct rf__conv_geo q, int g)
{
	if (q.s != 1 || q.p != 0)
		rf__im2col_sp(col, ld, x, q, g);
	else if (q.kh == 5 && q.kw == 5 && q.w == 13)
		im2col_b(col, ld, x, q.c, q.h, 13, 5, 5, q.oh, 9, g);
	else if (q.kh == 3 && q.kw == 3 && q.w == 28)
		im2col_b(col, ld, x, q.c, q.h, 28, 3, 3, q.oh, 26, g);
	else
		im2col_b(col, ld, x, q.c, q.h, q.w, q.kh, q.kw, q.oh, q.ow, g);
}
RF__DISPATCH(im2col, (float *col, size_t ld, const float *x, struct rf__conv_geo q, int g),
	     (col, ld, x, q, g))

/* row (g*oh*ow, c*kh*kw): one row per output pixel of the g images at x, holding the
 * patch it sees (the transpose of im2col's matrix, so that the filter gradient is
 * dy * row, a gemm with op(B) = B). */
RF__INLINE void im2row_b(float *restrict row, const float *restrict x, int C, int H, int W,
			 int KH, int KW, int OH, int OW, int g)
{
	const size_t img = (size_t)C * H * W, ckk = (size_t)C * KH * KW;
	for (int gi = 0; gi < g; gi++)
		for (int i = 0; i < OH; i++)
			for (int j = 0; j < OW; j++, row += ckk) {
				const float *xp = x + gi * img + (size_t)i * W + j;
				for (int c = 0; c < C; c++)
					for (int kh = 0; kh < KH; kh++)
						for (int kw = 0; kw < KW; kw++)
							row[((size_t)c * KH + kh) * KW + kw] =
								xp[(size_t)c * H * W + kh * W + kw];
			}
}

RF__INLINE void im2row_body(float *row, const float *x, struct rf__conv_geo q, int g)
{
	if (q.s != 1 || q.p != 0)
		rf__im2row_sp(row, x, q, g);
	else if (q.kh == 5 && q.kw == 5 && q.w == 13)
		im2row_b(row, x, q.c, q.h, 13, 5, 5, q.oh, 9, g);
	else
		im2row_b(row, x, q.c, q.h, q.w, q.kh, q.kw, q.oh, q.ow, g);
}
RF__DISPATCH(im2row, (float *row, const float *x, struct rf__conv_geo q, int g), (row, x, q, g))

/* dx (g images) = col2im(dcol (c*kh*kw, ld)), image by image so that each image's dx
 * is zeroed and accumulated while it sits in L1. */
RF__INLINE void col2im_b(float *restrict dx, const float *restrict dcol, size_t ld, int C,
			 int H, int W, int KH, int KW, int OH, int OW, int g)
{
	const size_t ohw = (size_t)OH * OW, img = (size_t)C * H * W;
	for (int gi = 0; gi < g; gi++) {
		float *dxi = dx + gi * img;
		for (size_t p = 0; p < img; p++)
			dxi[p] = 0.0f;
		for (int c = 0; c < C; c++)
			for (int kh = 0; kh < KH; kh++)
				for (int kw = 0; kw < KW; kw++) {
					size_t r = ((size_t)c * KH + kh) * KW + kw;
					float *restrict xp = dxi + (size_t)c * H * W +
							     (size_t)kh * W + kw;
					const float *restrict cp = dcol + r * ld + gi * ohw;
					for (int i = 0; i < OH; i++)
						for (int j = 0; j < OW; j++)
							xp[i * W + j] += cp[i * OW + j];
				}
	}
}

RF__INLINE void col2im_body(float *dx, const float *dcol, size_t ld, struct rf__conv_geo q, int g)
{
	if (q.s != 1 || q.p != 0)
		rf__col2im_sp(dx, dcol, ld, q, g);
	else if (q.kh == 5 && q.kw == 5 && q.w == 13)
		col2im_b(dx, dcol, ld, q.c, q.h, 13, 5, 5, q.oh, 9, g);
	else if (q.kh == 3 && q.kw == 3 && q.w == 28)
		col2im_b(dx, dcol, ld, q.c, q.h, 28, 3, 3, q.oh, 26, g);
	else
		col2im_b(dx, dcol, ld, q.c, q.h, q.w, q.kh, q.kw, q.oh, q.ow, g);
}
RF__DISPATCH(col2im, (float *dx, const float *dcol, size_t ld, struct rf__conv_geo q, int g),
	     (dx, dcol, ld, q, g))

/* ---- a group's copies, image by image over idle cores (par.h) -------------------------
 * Image gi of a group of g is one call of the copy with g = 1 at its offsets: the same
 * copies (and the same adds, in col2im and the bias) as the group's loop makes. */
enum { CP_IM2COL, CP_COL2IM, CP_IM2ROW, CP_GATHER, CP_SCATTER };

struct conv_cp {
	int kind, o;
	float *dst;
	const float *src, *b;
	size_t ld, ohw, img, ckk;
	struct rf__conv_geo q;
};

static void conv_cp_one(void *arg, unsigned gi)
{
	const struct conv_cp *a = arg;

	switch (a->kind) {
	case CP_IM2COL:
		im2col(a->dst + gi * a->ohw, a->ld, a->src + gi * a->img, a->q, 1);
		break;
	case CP_COL2IM:
		col2im(a->dst + gi * a->img, a->src + gi * a->ohw, a->ld, a->q, 1);
		break;
	case CP_IM2ROW:
		im2row(a->dst + gi * a->ohw * a->ckk, a->src + gi * a->img, a->q, 1);
		break;
	case CP_GATHER: /* t (o, ld) <- dy (g, o, ohw) */
		for (int oc = 0; oc < a->o; oc++)
			memcpy(a->dst + (size_t)oc * a->ld + gi * a->ohw,
			       a->src + ((size_t)gi * a->o + oc) * a->ohw, a->ohw * sizeof(float));
		break;
	default: /* CP_SCATTER: y (g, o, ohw) <- out (o, ld) + bias */
		for (int oc = 0; oc < a->o; oc++) {
			const float bias = a->b ? a->b[oc] : 0.0f;
			const float *restrict src = a->src + (size_t)oc * a->ld + gi * a->ohw;
			float *restrict dst = a->dst + ((size_t)gi * a->o + oc) * a->ohw;
			for (size_t p = 0; p < a->ohw; p++)
				dst[p] = src[p] + bias;
		}
		break;
	}
}

static void conv_cp(int kind, int g, float *dst, const float *src, const struct rf__conv2d *s,
		    size_t ld, const float *b)
{
	struct conv_cp a = { kind, s->o, dst, src, b, ld,
			     (size_t)rf__conv2d_oh(s) * rf__conv2d_ow(s),
			     (size_t)s->c * s->h * s->w, (size_t)s->c * s->kh * s->kw, conv_geo(s) };
	rf__par_for((unsigned)g, conv_cp_one, &a);
}

/* Direct single-channel forward: y[n][o][i][j] = sum_{kh,kw} w[o][kh][kw]*x[n][i+kh][j+kw]
 * (kh-major, kw-minor order) + b[o]. */
RF__INLINE void conv1_fwd_b(float *restrict y, const float *restrict x, const float *restrict w,
			    const float *restrict b, int n, int o, int H, int W, int KH, int KW,
			    int OH, int OW)
{
	float wk[KH * KW];
	for (int im = 0; im < n; im++) {
		const float *xp = x + (size_t)im * H * W;
		for (int oc = 0; oc < o; oc++) {
			for (int t = 0; t < KH * KW; t++)
				wk[t] = w[(size_t)oc * KH * KW + t];
			const float bias = b ? b[oc] : 0.0f;
			float *yp = y + ((size_t)im * o + oc) * OH * OW;
			for (int i = 0; i < OH; i++)
				for (int j = 0; j < OW; j++) {
					float acc = 0.0f;
					for (int kh = 0; kh < KH; kh++)
						for (int kw = 0; kw < KW; kw++)
							acc += wk[kh * KW + kw] *
							       xp[(i + kh) * W + j + kw];
					yp[i * OW + j] = acc + bias;
				}
		}
	}
}

/* Row i (OW floats) of dy = avgpool2_bwd(pp) * (py > 0) for one (image, channel) plane:
 * pp the pooled gradient plane (OH/2, OW/2), py the ReLU output plane (OH, OW). The same
 * bits as rf__k_avgpool2_relu_bwd. */
RF__INLINE void pool_relu_row(float *restrict d, const float *restrict pp,
			      const float *restrict py, int i, int OH, int OW)
{
	const int PH = OH / 2, PW = OW / 2;
	if (i / 2 >= PH) {
		for (int j = 0; j < OW; j++)
			d[j] = 0.0f;
		return;
	}
	const float *restrict g = pp + (size_t)(i / 2) * PW;
	const float *restrict y = py + (size_t)i * OW;
	for (int j = 0; j < PW; j++) {
		float v = g[j] * (1.0f / 4.0f);
		d[2 * j] = y[2 * j] > 0.0f ? v : 0.0f;
		d[2 * j + 1] = y[2 * j + 1] > 0.0f ? v : 0.0f;
	}
	for (int j = 2 * PW; j < OW; j++)
		d[j] = 0.0f;
}

RF__INLINE void conv1_fwd_body(float *y, const float *x, const float *w, const float *b,
			       int n, int o, struct rf__conv_geo q)
{
	if (q.kh == 3 && q.kw == 3 && q.w == 28 && q.h == 28)
		conv1_fwd_b(y, x, w, b, n, o, 28, 28, 3, 3, 26, 26);
	else
		conv1_fwd_b(y, x, w, b, n, o, q.h, q.w, q.kh, q.kw, q.oh, q.ow);
}
RF__DISPATCH(conv1_fwd, (float *y, const float *x, const float *w, const float *b, int n, int o,
			 struct rf__conv_geo q),
	     (y, x, w, b, n, o, q))

/* Direct single-channel filter gradient, one output channel at a time:
 * acc[kh][kw][j] = sum_n sum_i dy[n][o][i][j]*x[n][i+kh][j+kw] (n, i ascending), then
 * dw[o][kh][kw] (+)= sum_j acc[kh][kw][j] (j ascending); db likewise. */

RF__INLINE void conv1_bwdf_b(float *restrict dw, float *restrict db, const float *restrict dy,
			     const float *restrict x, int accumulate, int n, int o, int H, int W,
			     int KH, int KW, int OH, int OW, const float *pp, const float *py)
{
	float drow[RF__C1_MAXJ];
	float acc[RF__C1_MAXT][RF__C1_MAXJ], accb[RF__C1_MAXJ];
	for (int oc = 0; oc < o; oc++) {
		for (int t = 0; t < KH * KW; t++)
			for (int j = 0; j < OW; j++)
				acc[t][j] = 0.0f;
		for (int j = 0; j < OW; j++)
			accb[j] = 0.0f;
		for (int im = 0; im < n; im++) {
			const float *xp = x + (size_t)im * H * W;
			const float *dp = pp ? NULL : dy + ((size_t)im * o + oc) * OH * OW;
			const float *gp = pp ? pp + ((size_t)im * o + oc) * (OH / 2) * (OW / 2) : NULL;
			const float *yp = pp ? py + ((size_t)im * o + oc) * OH * OW : NULL;
			for (int i = 0; i < OH; i++) {
				if (!dp)
					pool_relu_row(drow, gp, yp, i, OH, OW);
				const float *restrict d = dp ? dp + i * OW : drow;
				for (int kh = 0; kh < KH; kh++)
					for (int kw = 0; kw < KW; kw++) {
						const float *restrict xr = xp + (i + kh) * W + kw;
						float *restrict a = acc[kh * KW + kw];
						for (int j = 0; j < OW; j++)
							a[j] += d[j] * xr[j];
					}
				for (int j = 0; j < OW; j++)
					accb[j] += d[j];
			}
		}
		for (int t = 0; t < KH * KW; t++) {
			float s = 0.0f;
			for (int j = 0; j < OW; j++)
				s += acc[t][j];
			float *d = dw + (size_t)oc * KH * KW + t;
			*d = accumulate ? *d + s : s;
		}
		if (db) {
			float s = 0.0f;
			for (int j = 0; j < OW; j++)
				s += accb[j];
			db[oc] = accumulate ? db[oc] + s : s;
		}
	}
}

RF__INLINE void conv1_bwdf_body(float *dw, float *db, const float *dy, const float *x,
				int accumulate, int n, int o, struct rf__conv_geo q, const float *pp,
				const float *py)
{
	if (q.kh == 3 && q.kw == 3 && q.w == 28 && q.h == 28)
		conv1_bwdf_b(dw, db, dy, x, accumulate, n, o, 28, 28, 3, 3, 26, 26, pp, py);
	else
		conv1_bwdf_b(dw, db, dy, x, accumulate, n, o, q.h, q.w, q.kh, q.kw, q.oh, q.ow,
			     pp, py);
}
RF__DISPATCH(conv1_bwdf, (float *dw, float *db, const float *dy, const float *x, int accumulate,
			  int n, int o, struct rf__conv_geo q, const float *pp, const float *py),
	     (dw, db, dy, x, accumulate, n, o, q, pp, py))

/* Whether the forward may make the im2col matrix panel by panel inside ringflow's GEMM
 * (RF_KERNELS_IM2COL set and not 0: written whole first, as before -- the same bits;
 * for measuring and for test-kernels' comparison) */
static int conv_gen_ok(void)
{
	const char *e = getenv("RF_KERNELS_IM2COL");
	return !(e && *e && *e != '0');
}

/* The im2col matrix of a group of images, made panel by panel inside the GEMM */
struct conv_gen {
	struct rf__k_bgen bg;
	const float *x;
	struct rf__conv_geo q;
};

static void conv_gen_panel(const struct rf__k_bgen *bg, float *dst, int p0, int kc, int j0,
			   int nr)
{
	const struct conv_gen *cg = bg->ctx;

	rf__im2col_panel(dst, cg->x, &cg->q, p0, kc, j0, nr);
}

/* ... and im2row's, for the filter gradient */
static void conv_gen_row_panel(const struct rf__k_bgen *bg, float *dst, int p0, int kc, int j0,
			       int nr)
{
	const struct conv_gen *cg = bg->ctx;

	rf__im2row_panel(dst, cg->x, &cg->q, p0, kc, j0, nr);
}

int rf__k_conv2d_fwd(const struct rf__conv2d *s, float *y, const float *x,
		    const float *w, const float *b, void *ws, size_t ws_bytes)
{
	int G = rf__conv_begin(s, ws, ws_bytes);
	if (G <= 0)
		return G;
	const struct rf__conv_geo q = conv_geo(s);
	if (conv_direct(s)) {
#if RF__X86_DISPATCH
		if (q.kh == 3 && q.kw == 3 && q.ow > 16 && q.ow <= 32 && rf__k_use_avx512()) {
			rf__k_conv1_fwd_3x3_avx512(y, x, w, b, s->n, s->o, q.h, q.w, q.oh, q.ow);
			return 0;
		}
#endif
		conv1_fwd(y, x, w, b, s->n, s->o, q);
		return 0;
	}
	const int o = s->o, ckk = s->c * s->kh * s->kw;
	const size_t ohw = (size_t)rf__conv2d_oh(s) * rf__conv2d_ow(s);
	const size_t img = (size_t)s->c * s->h * s->w;
	for (int n0 = 0; n0 < s->n; n0 += G) {
		int g = s->n - n0 < G ? s->n - n0 : G;
		size_t ld = g * ohw;
		float *col = ws, *out = col + (size_t)ckk * ld;
		float *yn = y + (size_t)n0 * o * ohw;
		/* (o, ld) = w (o, ckk) * col (ckk, ld); one image lands directly in y. Where
		 * ringflow's GEMM multiplies, col is made panel by panel inside it, never
		 * written whole: the same values, so the same bits */
		if (g == 1)
			out = yn;
		struct conv_gen cg = { { conv_gen_panel, &cg }, x + n0 * img, q };
		int rc = conv_gen_ok() ? rf__k_gemm_gen(o, (int)ld, ckk, w, ckk, &cg.bg, 0.0f, out,
							(int)ld)
				       : -ENOTSUP;
		if (rc == -ENOTSUP) {
			conv_cp(CP_IM2COL, g, col, x + n0 * img, s, ld, NULL);
			rc = rf__k_gemm(0, 0, o, (int)ld, ckk, 1.0f, w, ckk, col, (int)ld, 0.0f,
					out, (int)ld);
		}
		if (rc)
			return rc;
		if (g > 1)
			conv_cp(CP_SCATTER, g, yn, out, s, ld, b);
		else if (b)
			for (int oc = 0; oc < o; oc++)
				for (size_t p = 0; p < ohw; p++)
					yn[(size_t)oc * ohw + p] += b[oc];
	}
	return 0;
}

int rf__k_conv2d_bwd_data(const struct rf__conv2d *s, float *dx, const float *dy,
			 const float *w, void *ws, size_t ws_bytes)
{
	int G = rf__conv_begin(s, ws, ws_bytes);
	if (G <= 0)
		return G;
	const int o = s->o, ckk = s->c * s->kh * s->kw;
	const size_t ohw = (size_t)rf__conv2d_oh(s) * rf__conv2d_ow(s);
	const size_t img = (size_t)s->c * s->h * s->w;
	for (int n0 = 0; n0 < s->n; n0 += G) {
		int g = s->n - n0 < G ? s->n - n0 : G;
		size_t ld = g * ohw;
		float *dcol = ws, *t = dcol + (size_t)ckk * ld;
		const float *dyn = dy + (size_t)n0 * o * ohw, *dyt = dyn;
		if (g > 1) {
			conv_cp(CP_GATHER, g, t, dyn, s, ld, NULL);
			dyt = t;
		}
		/* dcol (ckk, ld) = w^T (ckk, o) * dy (o, ld) */
		int rc = rf__k_gemm(1, 0, ckk, (int)ld, o, 1.0f, w, ckk, dyt, (int)ld, 0.0f,
				   dcol, (int)ld);
		if (rc)
			return rc;
		conv_cp(CP_COL2IM, g, dx + n0 * img, dcol, s, ld, NULL);
	}
	return 0;
}

int rf__k_conv2d_bwd_filter(const struct rf__conv2d *s, float *dw, float *db,
			   const float *dy, const float *x, int accumulate,
			   void *ws, size_t ws_bytes)
{
	if (rf__conv_check(s))
		return -EINVAL;
	const int o = s->o, ckk = s->c * s->kh * s->kw;
	if (s->n == 0) {
		if (!accumulate) {
			memset(dw, 0, (size_t)o * ckk * sizeof(float));
			if (db)
				memset(db, 0, (size_t)o * sizeof(float));
		}
		return 0;
	}
	int G = rf__conv_group(s, ws, ws_bytes);
	if (!G)
		return -EINVAL;
	const struct rf__conv_geo q = conv_geo(s);
	if (conv_direct(s) && s->kh * s->kw <= RF__C1_MAXT && q.ow <= RF__C1_MAXJ) {
#if RF__X86_DISPATCH
		if (q.kh == 3 && q.kw == 3 && q.ow > 16 && q.ow <= 32 && rf__k_use_avx512()) {
			rf__k_conv1_bwdf_3x3_avx512(dw, db, dy, x, accumulate, s->n, o, q.h, q.w, q.oh,
					      q.ow, NULL, NULL);
			return 0;
		}
#endif
		conv1_bwdf(dw, db, dy, x, accumulate, s->n, o, q, NULL, NULL);
		return 0;
	}
	const size_t ohw = (size_t)rf__conv2d_oh(s) * rf__conv2d_ow(s);
	const size_t img = (size_t)s->c * s->h * s->w;
	if (db && !accumulate)
		memset(db, 0, (size_t)o * sizeof(float));
	for (int n0 = 0; n0 < s->n; n0 += G) {
		int g = s->n - n0 < G ? s->n - n0 : G;
		size_t ld = g * ohw;
		float *row = ws, *t = row + (size_t)ckk * ld;
		const float *dyn = dy + (size_t)n0 * o * ohw, *dyt = dyn;
		if (g > 1) {
			conv_cp(CP_GATHER, g, t, dyn, s, ld, NULL);
			dyt = t;
		}
		/* dw (o, ckk) (+)= dy (o, ld) * row (ld, ckk); row made inside ringflow's GEMM
		 * where it multiplies (the same bits), else written whole */
		float beta = (n0 == 0 && !accumulate) ? 0.0f : 1.0f;
		struct conv_gen rg = { { conv_gen_row_panel, &rg }, x + n0 * img, q };
		int rc = conv_gen_ok() ? rf__k_gemm_gen(o, ckk, (int)ld, dyt, (int)ld, &rg.bg, beta,
							dw, ckk)
				       : -ENOTSUP;
		if (rc == -ENOTSUP) {
			conv_cp(CP_IM2ROW, g, row, x + n0 * img, s, ld, NULL);
			rc = rf__k_gemm(0, 0, o, ckk, (int)ld, 1.0f, dyt, (int)ld, row, ckk, beta,
					dw, ckk);
		}
		if (rc)
			return rc;
		if (db)
			for (int oc = 0; oc < o; oc++) {
				const float *restrict src = dyt + (size_t)oc * ld;
				float acc = 0.0f;
				for (size_t p = 0; p < ld; p++)
					acc += src[p];
				db[oc] += acc;
			}
	}
	return 0;
}

int rf__k_conv2d_bwd_filter_pool_relu(const struct rf__conv2d *s, float *dw, float *db,
				     const float *dp, const float *y, const float *x,
				     int accumulate)
{
	if (rf__conv_check(s) || !conv_direct(s) || s->kh * s->kw > RF__C1_MAXT ||
	    rf__conv2d_ow(s) > RF__C1_MAXJ)
		return -EINVAL;
	const int o = s->o;
	if (s->n == 0) {
		if (!accumulate) {
			memset(dw, 0, (size_t)o * s->kh * s->kw * sizeof(float));
			if (db)
				memset(db, 0, (size_t)o * sizeof(float));
		}
		return 0;
	}
	const struct rf__conv_geo q = conv_geo(s);
#if RF__X86_DISPATCH
	if (q.kh == 3 && q.kw == 3 && q.ow > 16 && q.ow <= 32 && rf__k_use_avx512()) {
		rf__k_conv1_bwdf_3x3_avx512(dw, db, NULL, x, accumulate, s->n, o, q.h, q.w, q.oh, q.ow,
				      dp, y);
		return 0;
	}
#endif
	conv1_bwdf(dw, db, NULL, x, accumulate, s->n, o, q, dp, y);
	return 0;
}
