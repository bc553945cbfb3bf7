/* test-kernels-cuda -- every CUDA kernel in kernels-cuda-impl.h against the CPU kernel of
 * the same name (kernels.h), on the same random inputs and odd shapes: bit-exact
 * where the header promises it (random numbers, decoding, relu, pooling, copy,
 * fill, reduce_sum), within float tolerance elsewhere (cuBLAS, FMA, different
 * summation trees). Also checks that GPU results repeat bit for bit and that the
 * error codes translate to text. Exits 77 (skip) at once when rf__kc_device_count
 * finds no device, which is the case on machines without a driver.
 */
#include "kernels.h"
#include "kernels-cuda-impl.h"

#define KERNEL_TEST_SEED 0xfeedface12345678ull
#include "kernel-test.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cudaStream_t stream;
static cublasHandle_t blas;

#define CK(call)                                                                        \
	do {                                                                            \
		int rc_ = (call);                                                       \
		if (rc_) {                                                              \
			fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,  \
				rf__kc_error_string(rc_));                               \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

#define CUDA(call)                                                                      \
	do {                                                                            \
		cudaError_t e_ = (call);                                                \
		if (e_ != cudaSuccess) {                                                \
			fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,  \
				cudaGetErrorString(e_));                                \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

/* ---- helpers ------------------------------------------------------------------------ */

static void *dalloc(size_t bytes)
{
	void *p = NULL;
	CUDA(cudaMalloc(&p, bytes ? bytes : 1));
	return p;
}

static void *dup_to_dev(const void *h, size_t bytes)
{
	void *d = dalloc(bytes);
	if (bytes)
		CUDA(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
	/* from pageable memory cudaMemcpy may return before the DMA lands, and the
	 * kernels run on a non-blocking stream that does not wait for it */
	CUDA(cudaDeviceSynchronize());
	return d;
}

static void to_host(void *h, const void *d, size_t bytes)
{
	CUDA(cudaStreamSynchronize(stream));
	if (bytes)
		CUDA(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

static float *fdown(const float *d, size_t n)
{
	float *h = xmalloc(n * sizeof(float));
	to_host(h, d, n * sizeof(float));
	return h;
}

/* |gpu - cpu| <= atol + rtol*|cpu| everywhere */
static int close_f(const char *what, const float *gpu, const float *cpu, size_t n,
		   double atol, double rtol)
{
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)gpu[i] - cpu[i]);
		if (!(e <= atol + rtol * fabs(cpu[i]))) {
			failures++;
			fprintf(stderr, "FAIL %s: [%zu] gpu %.9g cpu %.9g (n=%zu)\n", what, i,
				gpu[i], cpu[i], n);
			return 0;
		}
	}
	return 1;
}

static int bits_f(const char *what, const float *gpu, const float *cpu, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&gpu[i], &cpu[i], sizeof(float))) {
			failures++;
			fprintf(stderr, "FAIL %s: [%zu] gpu %.9g cpu %.9g not bit-equal\n", what, i,
				gpu[i], cpu[i]);
			return 0;
		}
	return 1;
}

/* ---- tests -------------------------------------------------------------------------- */

static void test_gemm(void)
{
	for (int rep = 0; rep < 24; rep++) {
		int ta = rep & 1, tb = (rep >> 1) & 1;
		int m = rint_in(1, 70), n = rint_in(1, 70), k = rint_in(0, 90);
		if (rep == 23)
			m = 300, n = 257, k = 513;
		int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
		int lda = (ac > 1 ? ac : 1) + rint_in(0, 2), ldb = (bc > 1 ? bc : 1) + rint_in(0, 2);
		int ldc = n + rint_in(0, 2);
		size_t na = (size_t)ar * lda, nb = (size_t)br * ldb, nc = (size_t)m * ldc;
		float *a = frand(na, -1, 1), *b = frand(nb, -1, 1), *c = frand(nc, -1, 1);
		float alpha = runif(-2, 2), beta = rep % 3 ? runif(-1, 1) : 0.0f;
		float *da = dup_to_dev(a, na * 4), *db = dup_to_dev(b, nb * 4),
		      *dc = dup_to_dev(c, nc * 4);
		CK(rf__kc_gemm(blas, ta, tb, m, n, k, alpha, da, lda, db, ldb, beta, dc, ldc));
		CK(rf__k_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
		float *g = fdown(dc, nc);
		char what[96];
		snprintf(what, sizeof(what), "gemm ta=%d tb=%d %dx%dx%d", ta, tb, m, n, k);
		close_f(what, g, c, nc, 1e-5 * (k + 1), 1e-5);
		free(g);
		free(a);
		free(b);
		free(c);
		cudaFree(da);
		cudaFree(db);
		cudaFree(dc);
	}
	CHECK(rf__kc_gemm(blas, 0, 0, 2, 3, 4, 1, NULL, 3, NULL, 3, 0, NULL, 3) == -EINVAL,
	      "gemm: lda < k accepted");
}

static void test_linear_pieces(void)
{
	int rows = 37, cols = 13;
	size_t n = (size_t)rows * cols;
	float *y = frand(n, -1, 1), *b = frand(cols, -1, 1), *db = frand(cols, -1, 1);
	float *dy_ = dup_to_dev(y, n * 4), *db_ = dup_to_dev(b, cols * 4),
	      *dg_ = dup_to_dev(db, cols * 4);
	CK(rf__kc_bias_add(stream, dy_, db_, rows, cols));
	rf__k_bias_add(y, b, rows, cols);
	float *g = fdown(dy_, n);
	close_f("bias_add", g, y, n, 1e-6, 1e-6);
	free(g);
	for (int acc = 0; acc < 2; acc++) {
		CK(rf__kc_bias_grad(stream, dg_, dy_, rows, cols, acc));
		rf__k_bias_grad(db, y, rows, cols, acc);
		g = fdown(dg_, cols);
		close_f(acc ? "bias_grad accumulate" : "bias_grad", g, db, cols, 1e-5, 1e-5);
		free(g);
	}

	/* relu: bit-exact, in place too */
	float *x = frand(n, -1, 1), *r = xmalloc(n * 4), *dx = xmalloc(n * 4);
	float *dx_ = dup_to_dev(x, n * 4), *dr_ = dalloc(n * 4), *dd_ = dalloc(n * 4);
	CK(rf__kc_relu_fwd(stream, dr_, dx_, n));
	rf__k_relu_fwd(r, x, n);
	g = fdown(dr_, n);
	bits_f("relu_fwd", g, r, n);
	free(g);
	CK(rf__kc_relu_bwd(stream, dd_, dy_, dr_, n));
	rf__k_relu_bwd(dx, y, r, n);
	g = fdown(dd_, n);
	bits_f("relu_bwd", g, dx, n);
	free(g);
	CK(rf__kc_relu_fwd(stream, dx_, dx_, n));
	g = fdown(dx_, n);
	bits_f("relu_fwd in place", g, r, n);
	free(g);

	free(y);
	free(b);
	free(db);
	free(x);
	free(r);
	free(dx);
	cudaFree(dy_);
	cudaFree(db_);
	cudaFree(dg_);
	cudaFree(dx_);
	cudaFree(dr_);
	cudaFree(dd_);
}

static void test_softmax_xent(void)
{
	const int shapes[][2] = { { 1, 2 }, { 7, 10 }, { 256, 10 }, { 1000, 10 }, { 33, 129 } };
	for (int t = 0; t < 5; t++) {
		int rows = shapes[t][0], cols = shapes[t][1];
		size_t n = (size_t)rows * cols;
		float *lg = frand(n, -6, 6), *dl = xmalloc(n * 4), loss, gloss;
		int32_t *lab = xmalloc(rows * 4), ok, gok;
		for (int r = 0; r < rows; r++)
			lab[r] = rint_in(0, cols - 1);
		float *dlg = dup_to_dev(lg, n * 4), *ddl = dalloc(n * 4), *dloss = dalloc(4);
		int32_t *dlab = dup_to_dev(lab, rows * 4), *dok = dalloc(4);
		CK(rf__kc_softmax_xent(stream, ddl, dloss, dok, dlg, dlab, rows, cols));
		CK(rf__k_softmax_xent(dl, &loss, &ok, lg, lab, rows, cols));
		float *g = fdown(ddl, n);
		to_host(&gloss, dloss, 4);
		to_host(&gok, dok, 4);
		close_f("softmax_xent dlogits", g, dl, n, 1e-7, 1e-5);
		CHECK(fabs(gloss - loss) <= 1e-5 * (1 + fabs(loss)), "softmax_xent loss gpu %.9g cpu %.9g",
		      gloss, loss);
		CHECK(gok == ok, "softmax_xent correct gpu %d cpu %d", gok, ok);
		/* eval variant and run-to-run reproducibility */
		float gloss2;
		int32_t gok2;
		CK(rf__kc_softmax_xent_eval(stream, dloss, dok, dlg, dlab, rows, cols));
		to_host(&gloss2, dloss, 4);
		to_host(&gok2, dok, 4);
		CHECK(!memcmp(&gloss2, &gloss, 4) && gok2 == gok, "softmax_xent_eval differs");
		free(g);
		free(lg);
		free(dl);
		free(lab);
		cudaFree(dlg);
		cudaFree(ddl);
		cudaFree(dloss);
		cudaFree(dlab);
		cudaFree(dok);
	}
}

static void conv_case(struct rf__conv2d s, int ws_mode)
{
	size_t nx = (size_t)s.n * s.c * s.h * s.w, nw = (size_t)s.o * s.c * s.kh * s.kw;
	size_t ny = (size_t)s.n * s.o * rf__conv2d_oh(&s) * rf__conv2d_ow(&s);
	size_t cws = rf__k_conv2d_workspace_size(&s);
	size_t gws = ws_mode == 0 ? rf__kc_conv2d_workspace_size(&s)
		     : ws_mode == 1 ? rf__kc_conv2d_workspace_min(&s)
				    : 2 * rf__kc_conv2d_workspace_min(&s) + 4;
	float *x = frand(nx, -1, 1), *w = frand(nw, -1, 1), *b = frand(s.o, -1, 1);
	float *dy = frand(ny, -1, 1);
	float *y = xmalloc(ny * 4), *dx = xmalloc(nx * 4), *dw = xmalloc(nw * 4),
	      *db = xmalloc(s.o * 4);
	void *ws = xmalloc(cws);
	float *x_ = dup_to_dev(x, nx * 4), *w_ = dup_to_dev(w, nw * 4), *b_ = dup_to_dev(b, s.o * 4),
	      *dy_ = dup_to_dev(dy, ny * 4);
	float *y_ = dalloc(ny * 4), *dx_ = dalloc(nx * 4), *dw_ = dalloc(nw * 4),
	      *db_ = dalloc(s.o * 4);
	void *ws_ = dalloc(gws);
	char what[160];
	snprintf(what, sizeof(what), "n=%d c=%d %dx%d o=%d k=%dx%d ws=%d", s.n, s.c, s.h, s.w, s.o,
		 s.kh, s.kw, ws_mode);
	int ckk = s.c * s.kh * s.kw;

	CK(rf__kc_conv2d_fwd(stream, blas, &s, y_, x_, w_, b_, ws_, gws));
	CK(rf__k_conv2d_fwd(&s, y, x, w, b, ws, cws));
	float *g = fdown(y_, ny);
	char name[200];
	snprintf(name, sizeof(name), "conv fwd %s", what);
	close_f(name, g, y, ny, 1e-5 * (ckk + 1), 1e-5);
	free(g);

	CK(rf__kc_conv2d_bwd_data(stream, blas, &s, dx_, dy_, w_, ws_, gws));
	CK(rf__k_conv2d_bwd_data(&s, dx, dy, w, ws, cws));
	g = fdown(dx_, nx);
	snprintf(name, sizeof(name), "conv bwd_data %s", what);
	close_f(name, g, dx, nx, 1e-5 * (s.o * s.kh * s.kw + 1), 1e-5);
	free(g);

	double tol = 1e-5 * (ny / s.o + 1);
	for (int acc = 0; acc < 2; acc++) {
		CK(rf__kc_conv2d_bwd_filter(stream, blas, &s, dw_, db_, dy_, x_, acc, ws_, gws));
		CK(rf__k_conv2d_bwd_filter(&s, dw, db, dy, x, acc, ws, cws));
		g = fdown(dw_, nw);
		snprintf(name, sizeof(name), "conv bwd_filter dw acc=%d %s", acc, what);
		close_f(name, g, dw, nw, tol * (1 + acc), 1e-5);
		free(g);
		g = fdown(db_, s.o);
		snprintf(name, sizeof(name), "conv bwd_filter db acc=%d %s", acc, what);
		close_f(name, g, db, s.o, tol * (1 + acc), 1e-5);
		free(g);
	}
	free(x);
	free(w);
	free(b);
	free(dy);
	free(y);
	free(dx);
	free(dw);
	free(db);
	free(ws);
	cudaFree(x_);
	cudaFree(w_);
	cudaFree(b_);
	cudaFree(dy_);
	cudaFree(y_);
	cudaFree(dx_);
	cudaFree(dw_);
	cudaFree(db_);
	cudaFree(ws_);
}

static void test_conv(void)
{
	for (int rep = 0; rep < 12; rep++) {
		struct rf__conv2d s = { .n = rint_in(1, 6), .c = rint_in(1, 4), .kh = rint_in(1, 5),
					 .kw = rint_in(1, 5), .o = rint_in(1, 6) };
		s.h = s.kh + rint_in(0, 9);
		s.w = s.kw + rint_in(0, 9);
		conv_case(s, rep % 3);
	}
	conv_case((struct rf__conv2d){ .n = 64, .c = 1, .h = 28, .w = 28, .o = 20, .kh = 3, .kw = 3 }, 0);
	conv_case((struct rf__conv2d){ .n = 64, .c = 20, .h = 13, .w = 13, .o = 50, .kh = 5, .kw = 5 }, 0);
	conv_case((struct rf__conv2d){ .n = 7, .c = 20, .h = 13, .w = 13, .o = 50, .kh = 5, .kw = 5 }, 2);
}

static void test_avgpool(void)
{
	const int shapes[][5] = { { 4, 20, 26, 26, 2 }, { 3, 50, 9, 9, 2 }, { 2, 3, 7, 8, 3 },
				  { 1, 1, 5, 5, 1 } };
	for (int t = 0; t < 4; t++) {
		int n = shapes[t][0], c = shapes[t][1], h = shapes[t][2], w = shapes[t][3],
		    k = shapes[t][4];
		size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * (h / k) * (w / k);
		float *x = frand(nx, -1, 1), *dy = frand(ny, -1, 1), *y = xmalloc(ny * 4),
		      *dx = xmalloc(nx * 4);
		float *x_ = dup_to_dev(x, nx * 4), *dy_ = dup_to_dev(dy, ny * 4), *y_ = dalloc(ny * 4),
		      *dx_ = dalloc(nx * 4);
		CK(rf__kc_avgpool2d_fwd(stream, y_, x_, n, c, h, w, k));
		CK(rf__kc_avgpool2d_bwd(stream, dx_, dy_, n, c, h, w, k));
		rf__k_avgpool2d_fwd(y, x, n, c, h, w, k);
		rf__k_avgpool2d_bwd(dx, dy, n, c, h, w, k);
		float *g = fdown(y_, ny);
		bits_f("avgpool fwd", g, y, ny);
		free(g);
		g = fdown(dx_, nx);
		bits_f("avgpool bwd", g, dx, nx);
		free(g);
		free(x);
		free(dy);
		free(y);
		free(dx);
		cudaFree(x_);
		cudaFree(dy_);
		cudaFree(y_);
		cudaFree(dx_);
	}
}

static void test_vector_ops(void)
{
	size_t n = 100003;
	float *w = frand(n, -1, 1), *g = frand(n, -1, 1), *v = frand(n, -1, 1);
	float *w_ = dup_to_dev(w, n * 4), *g_ = dup_to_dev(g, n * 4), *v_ = dup_to_dev(v, n * 4);
	float *r;

	CK(rf__kc_sgd(stream, w_, g_, n, 0.05f, 0.0f));
	rf__k_sgd(w, g, n, 0.05f, 0.0f);
	r = fdown(w_, n);
	close_f("sgd", r, w, n, 1e-7, 1e-6);
	free(r);
	CK(rf__kc_sgd(stream, w_, g_, n, 0.05f, 1e-3f));
	rf__k_sgd(w, g, n, 0.05f, 1e-3f);
	r = fdown(w_, n);
	close_f("sgd weight decay", r, w, n, 1e-7, 1e-6);
	free(r);
	for (int nesterov = 0; nesterov < 2; nesterov++) {   /* the second on the first's v */
		CK(rf__kc_sgd_momentum(stream, w_, v_, g_, n, 0.05f, 0.9f, 1e-3f, nesterov));
		rf__k_sgd_momentum(w, v, g, n, 0.05f, 0.9f, 1e-3f, nesterov);
		r = fdown(w_, n);
		close_f(nesterov ? "sgd_momentum nesterov w" : "sgd_momentum w", r, w, n, 1e-6, 1e-6);
		free(r);
		r = fdown(v_, n);
		close_f(nesterov ? "sgd_momentum nesterov v" : "sgd_momentum v", r, v, n, 1e-6, 1e-6);
		free(r);
	}
	{       /* AdamW, two steps: the same roundings op by op on both sides */
		float *m = calloc(n, sizeof(float)), *v2 = calloc(n, sizeof(float));
		float *m_ = dup_to_dev(m, n * 4), *v2_ = dup_to_dev(v2, n * 4);
		for (uint64_t st = 1; st <= 2; st++) {
			struct rf_adamw_params p = { .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
						.weight_decay = 0.01, .step = st };
			CK(rf__kc_adamw(stream, w_, m_, v2_, g_, n, &p));
			rf__k_adamw(w, m, v2, g, n, &p);
		}
		r = fdown(w_, n);
		close_f("adamw w", r, w, n, 1e-6, 1e-6);
		free(r);
		r = fdown(v2_, n);
		close_f("adamw v", r, v2, n, 1e-6, 1e-6);
		free(r);
		free(m);
		free(v2);
		cudaFree(m_);
		cudaFree(v2_);
	}
	CK(rf__kc_axpy(stream, w_, 0.3f, g_, n));
	rf__k_axpy(w, 0.3f, g, n);
	r = fdown(w_, n);
	close_f("axpy", r, w, n, 1e-7, 1e-6);
	free(r);
	CK(rf__kc_copy(stream, w_, g_, n));
	memcpy(w, g, n * 4);
	r = fdown(w_, n);
	bits_f("copy", r, g, n);
	free(r);
	CK(rf__kc_scale(stream, w_, -1.7f, n));
	rf__k_scale(w, -1.7f, n);
	r = fdown(w_, n);
	bits_f("scale", r, w, n);
	free(r);
	CK(rf__kc_fill(stream, w_, 4, 0x3e000000u /* 0.125f */, n));
	rf__k_fill(w, 0.125f, n);
	r = fdown(w_, n);
	bits_f("fill", r, w, n);
	free(r);

	/* reduce_sum over 11 inputs (two kernel chunks), and k = 1, in place */
	const float *in[11], *in_[11];
	float *bufs[11];
	for (int j = 0; j < 11; j++) {
		bufs[j] = frand(n, -1, 1);
		in[j] = bufs[j];
		in_[j] = dup_to_dev(bufs[j], n * 4);
	}
	for (int k = 1; k <= 11; k += 5) {
		float *o_ = dalloc(n * 4), *o = xmalloc(n * 4);
		CK(rf__kc_reduce_sum(stream, o_, in_, k, n));
		rf__k_reduce_sum(o, in, k, n);
		r = fdown(o_, n);
		bits_f("reduce_sum", r, o, n);
		free(r);
		free(o);
		cudaFree(o_);
	}
	for (int j = 0; j < 11; j++) {
		free(bufs[j]);
		cudaFree((void *)in_[j]);
	}

	/* decoding */
	uint8_t *u8 = xmalloc(n);
	for (size_t i = 0; i < n; i++)
		u8[i] = (uint8_t)(rnext() & 0xff);
	uint8_t *u8_ = dup_to_dev(u8, n);
	int32_t *lab = xmalloc(n * 4), *glab = xmalloc(n * 4), *lab_ = dalloc(n * 4);
	struct rf__u8norm nm1 = rf__u8norm_one(1.0f / 255.0f, 0.2860f, 0.3530f);
	CK(rf__kc_u8_to_f32(stream, w_, u8_, n, &nm1));
	rf__k_u8_to_f32(w, u8, n, 1.0f / 255.0f, 0.2860f, 0.3530f);
	r = fdown(w_, n);
	bits_f("u8_to_f32", r, w, n);
	free(r);
	/* per channel (ImageNet's), planes of 7 elements: the host decoder's bits */
	struct rf__u8norm nm3 = { 1.0f / 255.0f, 3, 7, { 0.485f, 0.456f, 0.406f, 0 },
				  { 0.229f, 0.224f, 0.225f, 1 } };
	CK(rf__kc_u8_to_f32(stream, w_, u8_, n, &nm3));
	rf__k_u8_norm(w, u8, n, &nm3);
	r = fdown(w_, n);
	bits_f("u8_to_f32 per channel", r, w, n);
	free(r);
	CK(rf__kc_u8_to_i32(stream, lab_, u8_, n));
	rf__k_u8_to_i32(lab, u8, n);
	to_host(glab, lab_, n * 4);
	CHECK(!memcmp(glab, lab, n * 4), "u8_to_i32 differs");
	free(u8);
	free(lab);
	free(glab);
	cudaFree(u8_);
	cudaFree(lab_);
	free(w);
	free(g);
	free(v);
	cudaFree(w_);
	cudaFree(g_);
	cudaFree(v_);
}

static void test_rand(void)
{
	size_t n = 1000003;
	float *a = xmalloc(n * 4), *b;
	float *a_ = dalloc(n * 4);
	const uint64_t seeds[3] = { 0, 42, 0xdeadbeefcafef00dull };
	const uint64_t ctrs[3] = { 0, 0xfffffff0ull, UINT64_MAX - 500 };
	for (int t = 0; t < 3; t++) {
		CK(rf__kc_rand_uniform(stream, a_, n, seeds[t], ctrs[t], -0.5f, 2.0f));
		rf__k_rand_uniform(a, n, seeds[t], ctrs[t], -0.5f, 2.0f);
		b = fdown(a_, n);
		bits_f("rand_uniform", b, a, n);
		free(b);
		CK(rf__kc_rand_normal(stream, a_, n, seeds[t], ctrs[t], 0.1f, 1.5f));
		rf__k_rand_normal(a, n, seeds[t], ctrs[t], 0.1f, 1.5f);
		b = fdown(a_, n);
		close_f("rand_normal", b, a, n, 1e-6, 1e-6);
		size_t diff = 0;
		for (size_t i = 0; i < n; i++)
			diff += memcmp(&a[i], &b[i], 4) != 0;
		printf("rand_normal: %zu of %zu values differ in bits from the CPU\n", diff, n);
		free(b);
	}
	free(a);
	cudaFree(a_);
}

int main(void)
{
	int ndev = 0;
	rf__kc_device_count(&ndev);
	if (ndev <= 0) {
		printf("no CUDA device: skipping\n");
		return 77;
	}
	CUDA(cudaSetDevice(0));
	CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas, stream) !=
							       CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "FAIL: cublasCreate\n");
		return 1;
	}
	CHECK(strstr(rf__kc_error_string(-(RF_KC_ECUDA + 2)), "memory") != NULL,
	      "rf__kc_error_string(cudaErrorMemoryAllocation) = %s",
	      rf__kc_error_string(-(RF_KC_ECUDA + 2)));
	CHECK(rf__kc_error_string(-EINVAL) != NULL, "error string");

	test_gemm();
	test_linear_pieces();
	test_softmax_xent();
	test_conv();
	test_avgpool();
	test_vector_ops();
	test_rand();

	CUDA(cudaStreamSynchronize(stream));
	cublasDestroy(blas);
	cudaStreamDestroy(stream);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("all CUDA kernel checks passed\n");
	return 0;
}
