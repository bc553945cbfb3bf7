/* tests/devices/test-device-suite.h -- every op of ops.h, pushed through the engine on
 * a device's streams, checked against a plain reference computed here in double.
 * Shared by test-device-ops (the CPU device) and test-device-cuda (each GPU). */
#ifndef RF_TEST_DEVICE_SUITE_H
#define RF_TEST_DEVICE_SUITE_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "engine.h"
#include "device.h"
#include "tensor.h"
#include "log.h"
#include "ops.h"
#include "kernels.h"
#include "../test-util.h"

static unsigned long long ts_seed = 12345;

static float ts_rand(void)
{
	return (float)((t_splitmix64(&ts_seed) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float *ts_randv(size_t n)
{
	float *v = malloc((n ? n : 1) * sizeof(float));
	CHECK(v);
	for (size_t i = 0; i < n; i++)
		v[i] = ts_rand();
	return v;
}

/* A tensor on d filled from host data (waits). */
/* a tensor of layout lay (its bytes as they lie: host is written as it is) */
static struct rf_tensor *ts_upload_lay(struct rf_device *d, enum rf_tdtype dt, enum rf_layout lay,
				       const void *host, const char *name, int ndim,
				       const int64_t *shape)
{
	struct rf_tensor *t;
	rf_tensor_create_layout(d, dt, lay, name, ndim, shape, &t);
	CHECK(t);
	if (host)
		CHECK_OK(rf_tensor_write(t, host));
	return t;
}

static struct rf_tensor *ts_upload(struct rf_device *d, enum rf_tdtype dt, const void *host,
				   const char *name, int ndim, const int64_t *shape)
{
	return ts_upload_lay(d, dt, RF_LAYOUT_ROWMAJOR, host, name, ndim, shape);
}

static float *ts_download(struct rf_tensor *t)
{
	float *v = malloc(t->nbytes ? t->nbytes : 1);
	CHECK(v);
	CHECK_OK(rf_tensor_read(t, v));
	return v;
}

static void ts_close(const char *what, const float *got, const double *want, size_t n,
		     double atol, double rtol)
{
	for (size_t i = 0; i < n; i++) {
		double err = fabs((double)got[i] - want[i]);
		if (!(err <= atol + rtol * fabs(want[i]))) {
			fprintf(stderr, "%s: element %zu: got %.7g, want %.7g\n", what, i,
				(double)got[i], want[i]);
			exit(1);
		}
	}
}

/* ---- gemm ------------------------------------------------------------------------ */
static void ts_gemm(struct rf_device *d, struct rf_stream *s, int m, int n, int k, int ta,
		    int tb, float beta)
{
	float *a = ts_randv((size_t)m * k), *b = ts_randv((size_t)k * n), *c0 = ts_randv((size_t)m * n);
	double *want = calloc((size_t)m * n + 1, sizeof(double));
	struct rf_tensor *A = ts_upload(d, RF_F32, a, "A", RF_DIMS(ta ? k : m, ta ? m : k));
	struct rf_tensor *B = ts_upload(d, RF_F32, b, "B", RF_DIMS(tb ? n : k, tb ? k : n));
	struct rf_tensor *C = ts_upload(d, RF_F32, c0, "C", RF_DIMS(m, n));
	float alpha = 0.75f, *got;
	char what[64];

	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			double acc = 0;
			for (int p = 0; p < k; p++) {
				double av = ta ? a[(size_t)p * m + i] : a[(size_t)i * k + p];
				double bv = tb ? b[(size_t)j * k + p] : b[(size_t)p * n + j];
				acc += av * bv;
			}
			want[(size_t)i * n + j] = alpha * acc + (beta != 0 ? beta * c0[(size_t)i * n + j] : 0);
		}
	CHECK_OK(rf_gemm(s, ta, tb, alpha, A, B, beta, C));
	got = ts_download(C);
	snprintf(what, sizeof(what), "gemm %dx%dx%d ta=%d tb=%d beta=%g", m, n, k, ta, tb, beta);
	ts_close(what, got, want, (size_t)m * n, 1e-4 * k, 1e-4);
	rf_tensor_destroy(A);
	rf_tensor_destroy(B);
	rf_tensor_destroy(C);
	free(a); free(b); free(c0); free(want); free(got);
}

/* ---- linear pieces, relu ---------------------------------------------------------- */
/* rf_add_relu_fwd: the bits of rf_sum {a, b} then rf_relu_fwd, into a third tensor and
 * in place over a and over b (the residual block's case). */
static void ts_add_relu(struct rf_device *d, struct rf_stream *s)
{
	enum { N = 2 * 3 * 5 * 5 };
	float *a = ts_randv(N), *b = ts_randv(N);
	struct rf_tensor *A = ts_upload(d, RF_F32, a, "a", RF_DIMS(2, 3, 5, 5));
	struct rf_tensor *B = ts_upload(d, RF_F32, b, "b", RF_DIMS(2, 3, 5, 5));
	struct rf_tensor *W, *Y, *A2 = ts_upload(d, RF_F32, a, "a2", RF_DIMS(2, 3, 5, 5));
	struct rf_tensor *B2 = ts_upload(d, RF_F32, b, "b2", RF_DIMS(2, 3, 5, 5));
	struct rf_tensor *in[2] = { A, B };
	float *want, *got;

	CHECK_OK(rf_tensor_create(d, RF_F32, "want", RF_DIMS(2, 3, 5, 5), &W));
	CHECK_OK(rf_tensor_create(d, RF_F32, "y", RF_DIMS(2, 3, 5, 5), &Y));
	CHECK_OK(rf_sum(s, W, in, 2));
	CHECK_OK(rf_relu_fwd(s, W, W));
	CHECK_OK(rf_add_relu_fwd(s, Y, A, B));
	CHECK_OK(rf_add_relu_fwd(s, A2, A2, B));   /* y = a */
	CHECK_OK(rf_add_relu_fwd(s, B2, A, B2));   /* y = b */
	want = ts_download(W);
	got = ts_download(Y);
	CHECK(memcmp(got, want, N * sizeof(float)) == 0);
	free(got);
	got = ts_download(A2);
	CHECK(memcmp(got, want, N * sizeof(float)) == 0);
	free(got);
	got = ts_download(B2);
	CHECK(memcmp(got, want, N * sizeof(float)) == 0);
	free(got);
	free(want);
	CHECK_EQ(rf_add_relu_fwd(s, Y, A, NULL), -EINVAL);
	rf_tensor_destroy(A);
	rf_tensor_destroy(B);
	rf_tensor_destroy(A2);
	rf_tensor_destroy(B2);
	rf_tensor_destroy(W);
	rf_tensor_destroy(Y);
	free(a);
	free(b);
	fprintf(stderr, "add_relu_fwd = sum then relu, bitwise (also in place): ok\n");
}

static void ts_same(struct rf_tensor *a, struct rf_tensor *b, const char *what)
{
	float *x = ts_download(a), *y = ts_download(b);
	if (memcmp(x, y, a->nbytes) != 0)
		fprintf(stderr, "%s: fused and separate differ\n", what);
	CHECK(a->nbytes == b->nbytes && memcmp(x, y, a->nbytes) == 0);
	free(x);
	free(y);
}

/* batch norm with its ReLU = batch norm then ReLU (forward, training and evaluation;
 * backward = relu_bwd then batchnorm_bwd), bit for bit, statistics included; dy is
 * left as it was. Planes of 783 (vector lanes and a tail). */
static void ts_bn_relu_lay(struct rf_device *d, struct rf_stream *s, enum rf_layout lay);

static void ts_bn_relu(struct rf_device *d, struct rf_stream *s)
{
	ts_bn_relu_lay(d, s, RF_LAYOUT_ROWMAJOR);
	ts_bn_relu_lay(d, s, RF_LAYOUT_NHWC); /* CUDA: our kernels, not cuDNN's */
}

static void ts_bn_relu_lay(struct rf_device *d, struct rf_stream *s, enum rf_layout lay)
{
	enum { N = 8, C = 3, H = 27, W = 29, X = N * C * H * W };
	const int64_t sh[4] = { N, C, H, W };
	float *x = ts_randv(X), *dy = ts_randv(X), *g = ts_randv(C), *b = ts_randv(C);
	float var[C] = { 0.5f, 1.0f, 2.0f }, *got;
	struct rf_tensor *Xt, *DY, *G, *B, *R[2][2], *M[2], *I[2], *Y[2], *E[2], *DX[2], *DG[2];
	struct rf_tensor *DB[2], *DM;

	if (rf_device_supports(d, "batchnorm_relu_fwd", RF_F32, lay) ||
	    rf_device_supports(d, "batchnorm_relu_bwd", RF_F32, lay)) {
		fprintf(stderr, "%s: no batch norm in %s (%s): bn+relu not checked\n",
			rf_device_name(d), rf_layout_name(lay), rf_last_error());
		free(x), free(dy), free(g), free(b);
		return;
	}
	Xt = ts_upload_lay(d, RF_F32, lay, x, "x", 4, sh);
	DY = ts_upload_lay(d, RF_F32, lay, dy, "dy", 4, sh);
	G = ts_upload(d, RF_F32, g, "gamma", RF_DIMS(C));
	B = ts_upload(d, RF_F32, b, "beta", RF_DIMS(C));
	DM = ts_upload_lay(d, RF_F32, lay, NULL, "dmask", 4, sh);
	for (int k = 0; k < 2; k++) {
		R[k][0] = ts_upload(d, RF_F32, b, "run_mean", RF_DIMS(C));
		R[k][1] = ts_upload(d, RF_F32, var, "run_var", RF_DIMS(C));
		M[k] = ts_upload(d, RF_F32, NULL, "mean", RF_DIMS(C));
		I[k] = ts_upload(d, RF_F32, NULL, "invstd", RF_DIMS(C));
		DG[k] = ts_upload(d, RF_F32, NULL, "dgamma", RF_DIMS(C));
		DB[k] = ts_upload(d, RF_F32, NULL, "dbeta", RF_DIMS(C));
		Y[k] = ts_upload_lay(d, RF_F32, lay, NULL, "y", 4, sh);
		E[k] = ts_upload_lay(d, RF_F32, lay, NULL, "yeval", 4, sh);
		DX[k] = ts_upload_lay(d, RF_F32, lay, NULL, "dx", 4, sh);
	}
	/* [0]: the separate ops, [1]: the fused ones */
	CHECK_OK(rf_batchnorm_fwd(s, Y[0], M[0], I[0], R[0][0], R[0][1], Xt, G, B, 1, 1e-5f, 0.1f));
	CHECK_OK(rf_relu_fwd(s, Y[0], Y[0]));
	CHECK_OK(rf_batchnorm_relu_fwd(s, Y[1], M[1], I[1], R[1][0], R[1][1], Xt, G, B, 1, 1e-5f,
				       0.1f));
	for (int k = 0; k < 2; k++)
		CHECK_OK((k ? rf_batchnorm_relu_fwd : rf_batchnorm_fwd)(s, E[k], NULL, NULL, R[k][0],
									R[k][1], Xt, G, B, 0, 1e-5f,
									0.1f));
	CHECK_OK(rf_relu_fwd(s, E[0], E[0]));
	CHECK_OK(rf_relu_bwd(s, DM, DY, Y[0]));
	CHECK_OK(rf_batchnorm_bwd(s, DX[0], DG[0], DB[0], DM, Xt, M[0], I[0], G));
	CHECK_OK(rf_batchnorm_relu_bwd(s, DX[1], DG[1], DB[1], DY, Y[1], Xt, M[1], I[1], G));
	ts_same(Y[0], Y[1], "bn+relu y");
	ts_same(M[0], M[1], "bn+relu mean");
	ts_same(I[0], I[1], "bn+relu invstd");
	ts_same(R[0][0], R[1][0], "bn+relu run_mean");
	ts_same(R[0][1], R[1][1], "bn+relu run_var");
	ts_same(E[0], E[1], "bn+relu eval y");
	ts_same(DX[0], DX[1], "bn+relu dx");
	ts_same(DG[0], DG[1], "bn+relu dgamma");
	ts_same(DB[0], DB[1], "bn+relu dbeta");
	got = ts_download(DY);
	CHECK(memcmp(got, dy, X * sizeof(float)) == 0);
	free(got);
	got = ts_download(Y[1]);
	for (int i = 0; i < X; i++)
		CHECK(got[i] >= 0.0f);
	free(got);
	/* a fused backward without y, or writing over it, is refused before a push */
	CHECK_EQ(rf_batchnorm_relu_bwd(s, DX[1], DG[1], DB[1], DY, NULL, Xt, M[1], I[1], G), -EINVAL);
	CHECK_EQ(rf_batchnorm_relu_bwd(s, Y[1], DG[1], DB[1], DY, Y[1], Xt, M[1], I[1], G), -EINVAL);
	CHECK(strstr(rf_last_error(), "rf_batchnorm_relu_bwd"));
	rf_tensor_destroy(Xt), rf_tensor_destroy(DY), rf_tensor_destroy(G), rf_tensor_destroy(B);
	rf_tensor_destroy(DM);
	for (int k = 0; k < 2; k++) {
		rf_tensor_destroy(R[k][0]), rf_tensor_destroy(R[k][1]), rf_tensor_destroy(M[k]);
		rf_tensor_destroy(I[k]), rf_tensor_destroy(DG[k]), rf_tensor_destroy(DB[k]);
		rf_tensor_destroy(Y[k]), rf_tensor_destroy(E[k]), rf_tensor_destroy(DX[k]);
	}
	free(x), free(dy), free(g), free(b);
	fprintf(stderr, "%s: batchnorm_relu = batchnorm then relu, bitwise (%s): ok\n",
		rf_device_name(d), rf_layout_name(lay));
}

static void ts_bias_relu(struct rf_device *d, struct rf_stream *s)
{
	enum { R = 5, C = 7 };
	float *y = ts_randv(R * C), *b = ts_randv(C), *dy = ts_randv(R * C), *db0 = ts_randv(C);
	double want[R * C], wdb[C];
	struct rf_tensor *Y = ts_upload(d, RF_F32, y, "y", RF_DIMS(R, C));
	struct rf_tensor *Bt = ts_upload(d, RF_F32, b, "b", RF_DIMS(C));
	struct rf_tensor *DY = ts_upload(d, RF_F32, dy, "dy", RF_DIMS(R, C));
	struct rf_tensor *DB = ts_upload(d, RF_F32, db0, "db", RF_DIMS(C));
	struct rf_tensor *Z;
	rf_tensor_create(d, RF_F32, "z", RF_DIMS(R, C), &Z);
	struct rf_tensor *DX;
	rf_tensor_create(d, RF_F32, "dx", RF_DIMS(R, C), &DX);
	float *got;

	/* y += b ; z = relu(y) ; dx = dy * (z > 0) ; db += colsum(dy) */
	CHECK_OK(rf_bias_add(s, Y, Bt));
	CHECK_OK(rf_relu_fwd(s, Z, Y));
	CHECK_OK(rf_relu_bwd(s, DX, DY, Z));
	CHECK_OK(rf_bias_grad(s, DB, DY, 1));
	for (int i = 0; i < R * C; i++)
		want[i] = (double)y[i] + b[i % C];
	got = ts_download(Y);
	ts_close("bias_add", got, want, R * C, 1e-6, 1e-6);
	free(got);
	for (int i = 0; i < R * C; i++)
		want[i] = want[i] > 0 ? want[i] : 0;
	got = ts_download(Z);
	ts_close("relu_fwd", got, want, R * C, 1e-6, 1e-6);
	free(got);
	for (int i = 0; i < R * C; i++)
		want[i] = want[i] > 0 ? dy[i] : 0;
	got = ts_download(DX);
	ts_close("relu_bwd", got, want, R * C, 0, 0);
	free(got);
	for (int j = 0; j < C; j++) {
		wdb[j] = db0[j];
		for (int i = 0; i < R; i++)
			wdb[j] += dy[i * C + j];
	}
	got = ts_download(DB);
	ts_close("bias_grad accumulate", got, wdb, C, 1e-5, 1e-5);
	free(got);
	CHECK_OK(rf_bias_grad(s, DB, DY, 0));
	for (int j = 0; j < C; j++)
		wdb[j] -= db0[j];
	got = ts_download(DB);
	ts_close("bias_grad", got, wdb, C, 1e-5, 1e-5);
	free(got);
	/* in place relu */
	CHECK_OK(rf_relu_fwd(s, Y, Y));
	got = ts_download(Y);
	for (int i = 0; i < R * C; i++)
		want[i] = (double)y[i] + b[i % C] > 0 ? (double)y[i] + b[i % C] : 0;
	ts_close("relu_fwd in place", got, want, R * C, 1e-6, 1e-6);
	free(got);
	rf_tensor_destroy(Y); rf_tensor_destroy(Bt); rf_tensor_destroy(DY); rf_tensor_destroy(DB);
	rf_tensor_destroy(Z); rf_tensor_destroy(DX);
	free(y); free(b); free(dy); free(db0);
}

/* ---- loss ------------------------------------------------------------------------------ */
static void ts_xent(struct rf_device *d, struct rf_stream *s)
{
	enum { R = 9, C = 10 };
	float *lg = ts_randv(R * C), loss = 0, *got;
	int32_t lab[R], correct = -1;
	double want[R * C], wloss = 0;
	int wcorrect = 0;

	for (int i = 0; i < R; i++) {
		lab[i] = (int32_t)(t_splitmix64(&ts_seed) % C);
		lg[i * C + lab[i]] += (i % 2) ? 3.0f : 0.0f; /* some rows right */
	}
	for (int i = 0; i < R; i++) {
		double mx = -1e30, se = 0;
		int am = 0;
		for (int j = 0; j < C; j++)
			if (lg[i * C + j] > mx) {
				mx = lg[i * C + j];
				am = j;
			}
		for (int j = 0; j < C; j++)
			se += exp(lg[i * C + j] - mx);
		wloss += log(se) + mx - lg[i * C + lab[i]];
		wcorrect += am == lab[i];
		for (int j = 0; j < C; j++)
			want[i * C + j] = (exp(lg[i * C + j] - mx) / se - (j == lab[i])) / R;
	}
	struct rf_tensor *L = ts_upload(d, RF_F32, lg, "logits", RF_DIMS(R, C));
	struct rf_tensor *Lab = ts_upload(d, RF_I32, lab, "labels", RF_DIMS(R));
	struct rf_tensor *DL;
	rf_tensor_create(d, RF_F32, "dlogits", RF_DIMS(R, C), &DL);
	struct rf_tensor *Ls;
	rf_tensor_create(d, RF_F32, "loss", RF_DIMS(1), &Ls);
	struct rf_tensor *Co;
	rf_tensor_create(d, RF_I32, "correct", RF_DIMS(1), &Co);
	CHECK_OK(rf_softmax_xent(s, DL, Ls, Co, L, Lab));
	CHECK_OK(rf_tensor_read(Ls, &loss));
	CHECK_OK(rf_tensor_read(Co, &correct));
	CHECK(fabs(loss - wloss) < 1e-4 * (1 + fabs(wloss)));
	CHECK_EQ(correct, wcorrect);
	got = ts_download(DL);
	ts_close("softmax_xent dlogits", got, want, R * C, 1e-6, 1e-5);
	free(got);
	/* eval only, then in place */
	CHECK_OK(rf_fill(s, Ls, 0));
	CHECK_OK(rf_softmax_xent(s, NULL, Ls, Co, L, Lab));
	CHECK_OK(rf_tensor_read(Ls, &loss));
	CHECK(fabs(loss - wloss) < 1e-4 * (1 + fabs(wloss)));
	CHECK_OK(rf_softmax_xent(s, L, NULL, NULL, L, Lab));
	got = ts_download(L);
	ts_close("softmax_xent in place", got, want, R * C, 1e-6, 1e-5);
	free(got);
	rf_tensor_destroy(L); rf_tensor_destroy(Lab); rf_tensor_destroy(DL); rf_tensor_destroy(Ls);
	rf_tensor_destroy(Co);
	free(lg);
}

/* ---- conv, pool ------------------------------------------------------------------------- */
static void ts_conv_pool(struct rf_device *d, struct rf_stream *s)
{
	enum { N = 3, Ci = 2, H = 9, W = 8, O = 4, KH = 3, KW = 2, OH = H - KH + 1, OW = W - KW + 1 };
	float *x = ts_randv(N * Ci * H * W), *w = ts_randv(O * Ci * KH * KW), *b = ts_randv(O);
	float *dy = ts_randv(N * O * OH * OW), *got;
	double *wy = calloc(N * O * OH * OW, sizeof(double)), *wdx = calloc(N * Ci * H * W, sizeof(double));
	double *wdw = calloc(O * Ci * KH * KW, sizeof(double)), wdb[O] = { 0 };
#define X_(n, c, i, j) x[(((n) * Ci + (c)) * H + (i)) * W + (j)]
#define W_(o, c, i, j) w[(((o) * Ci + (c)) * KH + (i)) * KW + (j)]
#define Y_(n, o, i, j) (((n) * O + (o)) * OH + (i)) * OW + (j)
	for (int n = 0; n < N; n++)
		for (int o = 0; o < O; o++)
			for (int i = 0; i < OH; i++)
				for (int j = 0; j < OW; j++) {
					double acc = b[o];
					for (int c = 0; c < Ci; c++)
						for (int p = 0; p < KH; p++)
							for (int q = 0; q < KW; q++) {
								acc += (double)X_(n, c, i + p, j + q) * W_(o, c, p, q);
								wdx[(((n * Ci + c) * H + i + p) * W) + j + q] +=
									(double)dy[Y_(n, o, i, j)] * W_(o, c, p, q);
								wdw[(((o * Ci + c) * KH + p) * KW) + q] +=
									(double)dy[Y_(n, o, i, j)] * X_(n, c, i + p, j + q);
							}
					wy[Y_(n, o, i, j)] = acc;
					wdb[o] += dy[Y_(n, o, i, j)];
				}
	struct rf_tensor *Xt = ts_upload(d, RF_F32, x, "x", RF_DIMS(N, Ci, H, W));
	struct rf_tensor *Wt = ts_upload(d, RF_F32, w, "w", RF_DIMS(O, Ci, KH, KW));
	struct rf_tensor *Bt = ts_upload(d, RF_F32, b, "b", RF_DIMS(O));
	struct rf_tensor *DYt = ts_upload(d, RF_F32, dy, "dy", RF_DIMS(N, O, OH, OW));
	struct rf_tensor *Yt;
	rf_tensor_create(d, RF_F32, "y", RF_DIMS(N, O, OH, OW), &Yt);
	struct rf_tensor *DXt;
	rf_tensor_create(d, RF_F32, "dx", RF_DIMS(N, Ci, H, W), &DXt);
	struct rf_tensor *DWt;
	rf_tensor_create(d, RF_F32, "dw", RF_DIMS(O, Ci, KH, KW), &DWt);
	struct rf_tensor *DBt;
	rf_tensor_create(d, RF_F32, "db", RF_DIMS(O), &DBt);
	CHECK_OK(rf_conv2d_fwd(s, Yt, Xt, Wt, Bt, 1, 0));
	CHECK_OK(rf_conv2d_bwd_data(s, DXt, DYt, Wt, 1, 0));
	CHECK_OK(rf_conv2d_bwd_filter(s, DWt, DBt, DYt, Xt, 0, 1, 0));
	got = ts_download(Yt);
	ts_close("conv2d_fwd", got, wy, N * O * OH * OW, 1e-5, 1e-4);
	free(got);
	got = ts_download(DXt);
	ts_close("conv2d_bwd_data", got, wdx, N * Ci * H * W, 1e-5, 1e-4);
	free(got);
	got = ts_download(DWt);
	ts_close("conv2d_bwd_filter dw", got, wdw, O * Ci * KH * KW, 1e-4, 1e-4);
	free(got);
	got = ts_download(DBt);
	ts_close("conv2d_bwd_filter db", got, wdb, O, 1e-4, 1e-4);
	free(got);
	/* accumulate: twice the gradient */
	CHECK_OK(rf_conv2d_bwd_filter(s, DWt, DBt, DYt, Xt, 1, 1, 0));
	for (int i = 0; i < O * Ci * KH * KW; i++)
		wdw[i] *= 2;
	got = ts_download(DWt);
	ts_close("conv2d_bwd_filter accumulate", got, wdw, O * Ci * KH * KW, 1e-4, 1e-4);
	free(got);

	/* avg pool 2x2 on x (H odd: the last row is dropped) */
	{
		enum { PH = H / 2, PW = W / 2 };
		double wp[N * Ci * PH * PW], wpd[N * Ci * H * W];
		float *pdy = ts_randv(N * Ci * PH * PW);
		struct rf_tensor *P;
		rf_tensor_create(d, RF_F32, "pool", RF_DIMS(N, Ci, PH, PW), &P);
		struct rf_tensor *PD = ts_upload(d, RF_F32, pdy, "pdy", RF_DIMS(N, Ci, PH, PW));
		memset(wpd, 0, sizeof(wpd));
		for (int n = 0; n < N * Ci; n++)
			for (int i = 0; i < PH; i++)
				for (int j = 0; j < PW; j++) {
					double a = 0;
					for (int p = 0; p < 2; p++)
						for (int q = 0; q < 2; q++) {
							a += x[(n * H + 2 * i + p) * W + 2 * j + q];
							wpd[(n * H + 2 * i + p) * W + 2 * j + q] = pdy[(n * PH + i) * PW + j] / 4.0;
						}
					wp[(n * PH + i) * PW + j] = a / 4;
				}
		CHECK_OK(rf_avgpool2d_fwd(s, P, Xt, 2));
		CHECK_OK(rf_avgpool2d_bwd(s, DXt, PD, 2));
		got = ts_download(P);
		ts_close("avgpool2d_fwd", got, wp, N * Ci * PH * PW, 1e-6, 1e-5);
		free(got);
		got = ts_download(DXt);
		ts_close("avgpool2d_bwd", got, wpd, N * Ci * H * W, 1e-7, 1e-6);
		free(got);
		rf_tensor_destroy(P);
		rf_tensor_destroy(PD);
		free(pdy);
	}
	rf_tensor_destroy(Xt); rf_tensor_destroy(Wt); rf_tensor_destroy(Bt); rf_tensor_destroy(DYt);
	rf_tensor_destroy(Yt); rf_tensor_destroy(DXt); rf_tensor_destroy(DWt); rf_tensor_destroy(DBt);
	free(x); free(w); free(b); free(dy); free(wy); free(wdx); free(wdw);
#undef X_
#undef W_
#undef Y_
}

/* ---- optimiser and vector helpers ---------------------------------------------------- */
static void ts_vector(struct rf_device *d, struct rf_stream *s)
{
	enum { N = 1000 };
	float *w = ts_randv(N), *g = ts_randv(N), *v = ts_randv(N), *got;
	double *want = calloc(N, sizeof(double)), *wv = calloc(N, sizeof(double));
	struct rf_tensor *Wt = ts_upload(d, RF_F32, w, "w", RF_DIMS(N));
	struct rf_tensor *Gt = ts_upload(d, RF_F32, g, "g", RF_DIMS(N));
	struct rf_tensor *Vt = ts_upload(d, RF_F32, v, "v", RF_DIMS(10, 100));
	struct rf_tensor *St;
	rf_tensor_create(d, RF_F32, "sum", RF_DIMS(N), &St);

	CHECK_OK(rf_sgd(s, Wt, Gt, 0.1f, 0.01f));
	for (int i = 0; i < N; i++)
		want[i] = w[i] - 0.1 * (g[i] + 0.01 * w[i]);
	got = ts_download(Wt);
	ts_close("sgd", got, want, N, 1e-6, 1e-6);
	free(got);
	CHECK_OK(rf_sgd_momentum(s, Wt, Vt, Gt, 0.1f, 0.9f, 0.0f, 0));
	for (int i = 0; i < N; i++) {
		wv[i] = 0.9 * v[i] + g[i];
		want[i] = want[i] - 0.1 * wv[i];
	}
	got = ts_download(Vt);
	ts_close("sgd_momentum v", got, wv, N, 1e-6, 1e-6);
	free(got);
	got = ts_download(Wt);
	ts_close("sgd_momentum w", got, want, N, 1e-6, 1e-5);
	free(got);
	CHECK_OK(rf_axpy(s, Wt, -2.0f, Gt));
	CHECK_OK(rf_scale(s, Wt, 0.5f));
	for (int i = 0; i < N; i++)
		want[i] = (want[i] - 2.0 * g[i]) * 0.5;
	got = ts_download(Wt);
	ts_close("axpy+scale", got, want, N, 1e-5, 1e-5);
	free(got);
	{
		struct rf_tensor *in[3] = { Gt, Wt, Gt };
		CHECK_OK(rf_sum(s, St, in, 3));
		for (int i = 0; i < N; i++)
			wv[i] = (double)g[i] + want[i] + g[i];
		got = ts_download(St);
		ts_close("sum", got, wv, N, 1e-5, 1e-5);
		free(got);
		/* out == in[0] */
		in[0] = St;
		in[1] = Gt;
		CHECK_OK(rf_sum(s, St, in, 2));
		for (int i = 0; i < N; i++)
			wv[i] += g[i];
		got = ts_download(St);
		ts_close("sum in place", got, wv, N, 1e-5, 1e-5);
		free(got);
	}
	CHECK_OK(rf_fill(s, St, 2.5f));
	for (int i = 0; i < N; i++)
		want[i] = 2.5;
	got = ts_download(St);
	ts_close("fill", got, want, N, 0, 0);
	free(got);
	{
		struct rf_tensor *I;
		rf_tensor_create(d, RF_I32, "i", RF_DIMS(N), &I);
		struct rf_tensor *U;
		rf_tensor_create(d, RF_U8, "u", RF_DIMS(N), &U);
		int32_t *ib = malloc(N * sizeof(int32_t));
		uint8_t *ub = malloc(N);
		CHECK_OK(rf_fill(s, I, 0));
		CHECK_OK(rf_fill(s, U, 7));
		CHECK_OK(rf_tensor_read(I, ib));
		CHECK_OK(rf_tensor_read(U, ub));
		for (int i = 0; i < N; i++) {
			CHECK_EQ(ib[i], 0);
			CHECK_EQ(ub[i], 7);
		}
		/* decode */
		for (int i = 0; i < N; i++)
			ub[i] = (uint8_t)(i * 37);
		CHECK_OK(rf_tensor_write(U, ub));
		CHECK_OK(rf_u8_to_f32(s, St, U, 1 / 255.f, 0.2860f, 0.3530f));
		CHECK_OK(rf_u8_to_i32(s, I, U));
		got = ts_download(St);
		CHECK_OK(rf_tensor_read(I, ib));
		for (int i = 0; i < N; i++) {
			float e = ((float)ub[i] * (1 / 255.f) - 0.2860f) / 0.3530f;
			if (got[i] != e) {
				fprintf(stderr, "u8_to_f32 %d: %.9g vs %.9g\n", i, got[i], e);
				exit(1);
			}
			CHECK_EQ(ib[i], ub[i]);
		}
		free(got);
		/* per channel: 1000 = 4 images of 2 channels of 125, then ImageNet's 3 of 50
		 * (a partial cycle of channels: 1000 = 6 * 150 + 100 is refused) */
		static const float m2[2] = { 0.25f, -0.5f }, s2[2] = { 0.5f, 3.0f };
		static const float m3[3] = { 0.485f, 0.456f, 0.406f }, s3[3] = { 0.229f, 0.224f, 0.225f };
		CHECK_OK(rf_u8_normalize(s, St, U, 1 / 255.f, 2, 125, m2, s2));
		got = ts_download(St);
		for (int i = 0; i < N; i++) {
			int c = (i / 125) % 2;
			float e = ((float)ub[i] * (1 / 255.f) - m2[c]) / s2[c];
			if (got[i] != e) {
				fprintf(stderr, "u8_normalize 2ch %d: %.9g vs %.9g\n", i, got[i], e);
				exit(1);
			}
		}
		free(got);
		CHECK_EQ(rf_u8_normalize(s, St, U, 1 / 255.f, 3, 50, m3, s3), -EINVAL);
		CHECK(strstr(rf_last_error(), "multiple of nch * plane"));
		CHECK_OK(rf_tensor_reshape(U, RF_DIMS(10, 100)));
		CHECK_OK(rf_tensor_reshape(St, RF_DIMS(10, 100)));
		CHECK_OK(rf_u8_normalize(s, St, U, 1 / 255.f, 1, 8, m3 + 1, s3 + 1));
		got = ts_download(St);
		for (int i = 0; i < N; i++) {
			float e = ((float)ub[i] * (1 / 255.f) - m3[1]) / s3[1];
			if (got[i] != e) {
				fprintf(stderr, "u8_normalize 1ch %d: %.9g vs %.9g\n", i, got[i], e);
				exit(1);
			}
		}
		CHECK_OK(rf_tensor_reshape(U, RF_DIMS(N)));
		CHECK_OK(rf_tensor_reshape(St, RF_DIMS(N)));
		free(got);
		free(ib);
		free(ub);
		rf_tensor_destroy(I);
		rf_tensor_destroy(U);
	}
	rf_tensor_destroy(Wt); rf_tensor_destroy(Gt); rf_tensor_destroy(Vt); rf_tensor_destroy(St);
	free(w); free(g); free(v); free(want); free(wv);
}

/* ---- random numbers: the generator is a variable ---------------------------------- */
static void ts_rand_ops(struct rf_device *d, struct rf_stream *s0, struct rf_stream *s1)
{
	enum { N = 4099 };
	struct rf_engine *e = rf_device_engine(d);
	struct rf_prng *g;
	rf_prng_create(e, 42, "g", &g);
	struct rf_tensor *A;
	rf_tensor_create(d, RF_F32, "a", RF_DIMS(N), &A);
	struct rf_tensor *B;
	rf_tensor_create(d, RF_F32, "b", RF_DIMS(N), &B);
	float *ref = malloc(N * sizeof(float)), *got;

	/* Two draws on two streams: serial through g, whatever the streams. */
	CHECK_OK(rf_rand_uniform(s0, A, g, -1.0f, 3.0f));
	CHECK_OK(rf_rand_normal(s1, B, g, 0.5f, 2.0f));
	got = ts_download(A);
	rf__k_rand_uniform(ref, N, 42, 0, -1.0f, 3.0f);
	CHECK(memcmp(got, ref, N * sizeof(float)) == 0);
	free(got);
	got = ts_download(B);
	rf__k_rand_normal(ref, N, 42, N, 0.5f, 2.0f);
	for (int i = 0; i < N; i++)
		CHECK(fabsf(got[i] - ref[i]) <= 1e-5f * (1 + fabsf(ref[i])));
	free(got);
	CHECK_OK(rf_engine_wait_var(e, g->var));
	CHECK_EQ(g->counter, 2 * N);
	rf_tensor_destroy(A);
	rf_tensor_destroy(B);
	rf_prng_destroy(g);
	free(ref);
}

/* ---- a dependent chain across two streams ------------------------------------------ */
static void ts_chain(struct rf_device *d, struct rf_stream *s0, struct rf_stream *s1)
{
	enum { B = 16, I = 20, Hd = 12 };
	float *x = ts_randv(B * I), *w = ts_randv(Hd * I), *got;
	double h[B * Hd], want[B * Hd];
	struct rf_tensor *X = ts_upload(d, RF_F32, x, "x", RF_DIMS(B, I));
	struct rf_tensor *Wt = ts_upload(d, RF_F32, w, "w", RF_DIMS(Hd, I));
	struct rf_tensor *Hh;
	rf_tensor_create(d, RF_F32, "h", RF_DIMS(B, Hd), &Hh);
	struct rf_tensor *Out;
	rf_tensor_create(d, RF_F32, "out", RF_DIMS(B, Hd), &Out);

	for (int r = 0; r < 3; r++) {
		/* h = x*w^T on s0; relu on s1; out = 2*h (copy on s0 then scale on s1) */
		CHECK_OK(rf_gemm(s0, 0, 1, 1.0f, X, Wt, 0.0f, Hh));
		CHECK_OK(rf_relu_fwd(s1, Hh, Hh));
		CHECK_OK(rf_copy(s0, Out, Hh));
		CHECK_OK(rf_scale(s1, Out, 2.0f));
	}
	rf_tensor_destroy(X); /* freed while ops are pending: ordered after them */
	for (int i = 0; i < B; i++)
		for (int j = 0; j < Hd; j++) {
			double a = 0;
			for (int p = 0; p < I; p++)
				a += (double)x[i * I + p] * w[j * I + p];
			h[i * Hd + j] = a > 0 ? a : 0;
			want[i * Hd + j] = 2 * h[i * Hd + j];
		}
	got = ts_download(Out);
	ts_close("chain across streams", got, want, B * Hd, 1e-4, 1e-4);
	free(got);
	rf_tensor_destroy(Wt); rf_tensor_destroy(Hh); rf_tensor_destroy(Out);
	free(x); free(w);
}

/* ---- blocks and views ---------------------------------------------------------------- */
static void ts_views(struct rf_device *d, struct rf_stream *s0, struct rf_stream *s1)
{
	struct rf_tensor *bad = NULL;
	struct rf_tensor *blk;
	rf_tensor_create(d, RF_F32, "params", RF_DIMS(100), &blk);
	struct rf_tensor *w;
	rf_tensor_view(blk, 0, RF_F32, "w", RF_DIMS(8, 10), &w);
	struct rf_tensor *b;
	rf_tensor_view(blk, 80, RF_F32, "b", RF_DIMS(20), &b);
	float *got;

	CHECK(blk && w && b);
	CHECK(rf_tensor_view(blk, 90, RF_F32, "bad", RF_DIMS(20), &bad) == -EINVAL && !bad);
	CHECK(rf_tensor_view(w, 0, RF_F32, "nested", RF_DIMS(2), &bad) == -EINVAL && !bad);
	CHECK_OK(rf_fill(s0, blk, 1.0f));    /* the block: before both views */
	CHECK_OK(rf_scale(s0, w, 3.0f));     /* views on two streams, independent */
	CHECK_OK(rf_scale(s1, b, 5.0f));
	CHECK_OK(rf_scale(s1, blk, 2.0f));   /* the block again: after both */
	got = ts_download(blk);
	for (int i = 0; i < 100; i++)
		CHECK(got[i] == (i < 80 ? 6.0f : 10.0f));
	free(got);
	rf_tensor_destroy(blk); /* views keep the memory */
	CHECK_OK(rf_fill(s1, b, -1.0f));
	got = ts_download(b);
	for (int i = 0; i < 20; i++)
		CHECK(got[i] == -1.0f);
	free(got);
	rf_tensor_destroy(w);
	rf_tensor_destroy(b);
}

/* All of the above on device d, using its streams. */
static __attribute__((unused)) void ts_all(struct rf_device *d)
{
	struct rf_stream *s0 = rf_device_stream(d, 0);
	struct rf_stream *s1 = rf_device_nstreams(d) > 1 ? rf_device_stream(d, 1) : s0;

	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			ts_gemm(d, s0, 7, 5, 3, ta, tb, 0.0f);
			ts_gemm(d, s1, 13, 9, 17, ta, tb, 0.5f);
		}
	ts_gemm(d, NULL, 64, 32, 784, 0, 1, 0.0f);
	fprintf(stderr, "%s: gemm ok\n", rf_device_name(d));
	ts_bias_relu(d, s1);
	ts_add_relu(d, s0);
	ts_bn_relu(d, s1);
	fprintf(stderr, "%s: bias, relu ok\n", rf_device_name(d));
	ts_xent(d, s0);
	fprintf(stderr, "%s: softmax_xent ok\n", rf_device_name(d));
	ts_conv_pool(d, s1);
	fprintf(stderr, "%s: conv2d, avgpool2d ok\n", rf_device_name(d));
	ts_vector(d, s0);
	fprintf(stderr, "%s: sgd, axpy, scale, sum, fill, decode ok\n", rf_device_name(d));
	ts_rand_ops(d, s0, s1);
	fprintf(stderr, "%s: prng ok\n", rf_device_name(d));
	ts_chain(d, s0, s1);
	fprintf(stderr, "%s: cross-stream chain ok\n", rf_device_name(d));
	ts_views(d, s0, s1);
	fprintf(stderr, "%s: blocks and views ok\n", rf_device_name(d));
}

#endif
