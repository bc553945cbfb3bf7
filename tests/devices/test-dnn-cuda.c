/* test-dnn-cuda: the ops cuDNN runs on a CUDA device -- convolutions of every stride and
 * padding ResNet-18 uses (3x3 stride 1 and 2 with padding 1, 1x1 stride 2), with bias
 * and accumulated filter gradients, and the empty shapes (no image, empty planes) that
 * go to im2col; batch norm in training (running statistics too), evaluation and
 * backward; max pooling (3x3 stride 2, 2x2 stride 2) forward and backward; global
 * average pooling -- each on the GPU and on the CPU device from the same inputs, which
 * must agree within a bound that grows with each reduction's length (see agree; the
 * CPU ops are checked against PyTorch by train-resnet-ref): in fp32, then in tf32
 * (TF32's roundoff in the bound), then in tf32 with the GPU's tensors NHWC. Each GPU
 * op runs twice: the bits must repeat (cuDNN's plans: deterministic algorithms).
 * Exits 77 without a GPU or without cuDNN. */
#include "test-device-suite.h"

static struct rf_device *cpu, *gpu;
/* The precision the GPU computes in (fp32 first, then tf32) and its layout. */
static enum rf_precision prec = RF_PRECISION_FP32;
static enum rf_layout glay = RF_LAYOUT_ROWMAJOR;

/* a pair's GPU values in logical order (whatever its layout) */
#define ts_download(t) download_logical(t)
static float *download_logical(struct rf_tensor *t)
{
	float *v = malloc(t->numel * sizeof(float) + 1);
	CHECK(v);
	CHECK_OK(rf_tensor_read_as(t, RF_F32, v));
	return v;
}


struct pair {
	struct rf_tensor *c, *g;
};

/* The GPU's tensor in the layout under test (4-D ones), written in logical order. */
static struct pair mk(const char *name, int ndim, const int64_t *shape, const float *host)
{
	struct pair p = { ts_upload(cpu, RF_F32, host, name, ndim, shape), NULL };

	CHECK_OK(rf_tensor_create_layout(gpu, RF_F32, ndim == 4 ? glay : RF_LAYOUT_ROWMAJOR, name,
					 ndim, shape, &p.g));
	if (host)
		CHECK_OK(rf_tensor_write_as(p.g, RF_F32, host));
	return p;
}

static struct pair rnd(const char *name, int ndim, const int64_t *shape)
{
	size_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= (size_t)shape[i];
	float *v = ts_randv(n);
	struct pair p = mk(name, ndim, shape, v);
	free(v);
	return p;
}

static void drop(struct pair p)
{
	rf_tensor_destroy(p.c);
	rf_tensor_destroy(p.g);
}

/* GPU vs CPU, each element within a bound that grows with k, the length of the
 * reduction behind it: two float sums of k terms in different orders differ by about
 * eps * sqrt(k) of their magnitude (a random walk of roundings; cuDNN's own tests scale
 * so), with a safety factor of 8: 8 * u * sqrt(k) * max|cpu|, u the unit roundoff of
 * the products' inputs (f32's 2^-24, TF32's 2^-11). k 0: exact. A 12,544-term filter
 * gradient (-35.2439 vs -35.2457 of max 150) failed a fixed 1e-5 of the max. */
static void agree(const char *what, struct pair p, double k)
{
	float *c = ts_download(p.c), *g = ts_download(p.g);
	size_t n = p.c->numel;
	double mx = 0, worst = 0, u = prec == RF_PRECISION_FP32 ? 0x1p-24 : 0x1p-11;
	double bound;

	for (size_t i = 0; i < n; i++)
		mx = fmax(mx, fabs(c[i]));
	bound = k > 0 ? 8 * u * sqrt(k) * mx + 1e-6 : 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)g[i] - c[i]);
		worst = fmax(worst, e);
		if (!(e <= bound)) {
			fprintf(stderr, "FAIL %s: element %zu: gpu %.9g cpu %.9g (max |cpu| %.3g, "
				"bound %.3g over %.0f terms, %s)\n", what, i, g[i], c[i], mx, bound,
				k, rf_precision_name(prec));
			exit(1);
		}
	}
	printf("%-44s %8zu values, worst |gpu - cpu| %.3g of max %.3g (bound %.3g, %s %s)\n",
	       what, n, worst, mx, bound, rf_precision_name(prec), rf_layout_name(glay));
	free(c);
	free(g);
}

/* The same GPU op twice: the same bits. */
static void repeat(const char *what, struct rf_tensor *t, const float *before)
{
	float *now = ts_download(t);
	CHECK(memcmp(now, before, t->nbytes) == 0 || (fprintf(stderr, "FAIL %s: not repeatable\n",
							     what), 0));
	free(now);
}

static void conv_case(int n, int c, int h, int w, int o, int k, int stride, int pad)
{
	int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
	struct pair x = rnd("x", RF_DIMS(n, c, h, w)), wt = rnd("w", RF_DIMS(o, c, k, k));
	struct pair b = rnd("b", RF_DIMS(o)), dy = rnd("dy", RF_DIMS(n, o, oh, ow));
	struct pair y = rnd("y", RF_DIMS(n, o, oh, ow)), dx = rnd("dx", RF_DIMS(n, c, h, w));
	struct pair dw = rnd("dw", RF_DIMS(o, c, k, k)), db = rnd("db", RF_DIMS(o));
	char what[96];

	for (int rep = 0; rep < 2; rep++) {
		float *y0 = rep ? ts_download(y.g) : NULL, *dx0 = rep ? ts_download(dx.g) : NULL;
		if (rep) {  /* accumulate onto the first pass's gradients, on both */
			CHECK_OK(rf_conv2d_fwd(NULL, y.g, x.g, wt.g, b.g, stride, pad));
			CHECK_OK(rf_conv2d_bwd_data(NULL, dx.g, dy.g, wt.g, stride, pad));
			repeat("conv fwd", y.g, y0);
			repeat("conv bwd_data", dx.g, dx0);
		}
		for (int g = 0; g < 2; g++) {
			struct rf_tensor *X = g ? x.g : x.c, *Wt = g ? wt.g : wt.c, *B = g ? b.g : b.c;
			CHECK_OK(rf_conv2d_fwd(NULL, g ? y.g : y.c, X, Wt, B, stride, pad));
			CHECK_OK(rf_conv2d_bwd_data(NULL, g ? dx.g : dx.c, g ? dy.g : dy.c, Wt, stride, pad));
			CHECK_OK(rf_conv2d_bwd_filter(NULL, g ? dw.g : dw.c, g ? db.g : db.c,
						      g ? dy.g : dy.c, X, rep, stride, pad));
		}
		snprintf(what, sizeof(what), "conv %dx%d s%d p%d %dx%dx%dx%d -> %d: fwd", k, k, stride,
			 pad, n, c, h, w, o);
		agree(what, y, (double)c * k * k + 1);
		snprintf(what, sizeof(what), "conv %dx%d s%d p%d: bwd data", k, k, stride, pad);
		agree(what, dx, (double)o * k * k);
		snprintf(what, sizeof(what), "conv %dx%d s%d p%d: bwd filter acc=%d", k, k, stride, pad, rep);
		agree(what, dw, (double)n * oh * ow + rep);
		snprintf(what, sizeof(what), "conv %dx%d s%d p%d: bwd bias acc=%d", k, k, stride, pad, rep);
		agree(what, db, (double)n * oh * ow + rep);
		free(y0);
		free(dx0);
	}
	drop(x), drop(wt), drop(b), drop(dy), drop(y), drop(dx), drop(dw), drop(db);
}

static void bn_case(int n, int c, int h, int w)
{
	struct pair x = rnd("x", RF_DIMS(n, c, h, w)), y = rnd("y", RF_DIMS(n, c, h, w));
	struct pair dy = rnd("dy", RF_DIMS(n, c, h, w)), dx = rnd("dx", RF_DIMS(n, c, h, w));
	struct pair gm = rnd("gamma", RF_DIMS(c)), bt = rnd("beta", RF_DIMS(c));
	struct pair mean = rnd("mean", RF_DIMS(c)), inv = rnd("invstd", RF_DIMS(c));
	struct pair dg = rnd("dgamma", RF_DIMS(c)), dbt = rnd("dbeta", RF_DIMS(c));
	float *zeros = calloc((size_t)c, sizeof(float)), *ones = malloc((size_t)c * sizeof(float));
	CHECK(zeros && ones);
	for (int i = 0; i < c; i++)
		ones[i] = 1.0f;
	struct pair rm = mk("running_mean", RF_DIMS(c), zeros), rv = mk("running_var", RF_DIMS(c), ones);

	for (int g = 0; g < 2; g++) {
		struct rf_tensor *X = g ? x.g : x.c;
		/* two training steps move the running statistics twice */
		for (int step = 0; step < 2; step++)
			CHECK_OK(rf_batchnorm_fwd(NULL, g ? y.g : y.c, g ? mean.g : mean.c,
						  g ? inv.g : inv.c, g ? rm.g : rm.c, g ? rv.g : rv.c, X,
						  g ? gm.g : gm.c, g ? bt.g : bt.c, 1, 1e-5f, 0.1f));
		CHECK_OK(rf_batchnorm_bwd(NULL, g ? dx.g : dx.c, g ? dg.g : dg.c, g ? dbt.g : dbt.c,
					  g ? dy.g : dy.c, X, g ? mean.g : mean.c, g ? inv.g : inv.c,
					  g ? gm.g : gm.c));
	}
	char what[96];
	snprintf(what, sizeof(what), "batchnorm %dx%dx%dx%d: train y", n, c, h, w);
	/* batch norm's sums run over n*h*w values per channel (twice: mean, variance),
	 * in f32 on both sides whatever the precision */
	double K = (double)n * h * w;
	enum rf_precision was = prec;
	prec = RF_PRECISION_FP32;
	agree(what, y, 4 * K);
	agree("batchnorm: saved mean", mean, K);
	agree("batchnorm: saved invstd", inv, 4 * K);
	agree("batchnorm: running mean", rm, K);
	agree("batchnorm: running var (unbiased)", rv, 4 * K);
	agree("batchnorm: dx", dx, 16 * K);
	agree("batchnorm: dgamma", dg, 4 * K);
	agree("batchnorm: dbeta", dbt, K);
	for (int g = 0; g < 2; g++)
		CHECK_OK(rf_batchnorm_fwd(NULL, g ? y.g : y.c, NULL, NULL, g ? rm.g : rm.c,
					  g ? rv.g : rv.c, g ? x.g : x.c, g ? gm.g : gm.c,
					  g ? bt.g : bt.c, 0, 1e-5f, 0.1f));
	agree("batchnorm: eval y", y, 16);
	prec = was;
	/* the GPU's again: the same bits (fixed trees), without running statistics too */
	{
		float *y0, *dx0, *dg0, *db0, *m0, *i0;
		CHECK_OK(rf_batchnorm_fwd(NULL, y.g, mean.g, inv.g, rm.g, rv.g, x.g, gm.g, bt.g, 1,
					  1e-5f, 0.1f));
		CHECK_OK(rf_batchnorm_bwd(NULL, dx.g, dg.g, dbt.g, dy.g, x.g, mean.g, inv.g, gm.g));
		y0 = ts_download(y.g), m0 = ts_download(mean.g), i0 = ts_download(inv.g);
		dx0 = ts_download(dx.g), dg0 = ts_download(dg.g), db0 = ts_download(dbt.g);
		CHECK_OK(rf_batchnorm_fwd(NULL, y.g, mean.g, inv.g, NULL, NULL, x.g, gm.g, bt.g, 1,
					  1e-5f, 0.1f));
		CHECK_OK(rf_batchnorm_bwd(NULL, dx.g, dg.g, dbt.g, dy.g, x.g, mean.g, inv.g, gm.g));
		repeat("batchnorm: train y", y.g, y0);
		repeat("batchnorm: saved mean", mean.g, m0);
		repeat("batchnorm: saved invstd", inv.g, i0);
		repeat("batchnorm: dx", dx.g, dx0);
		repeat("batchnorm: dgamma", dg.g, dg0);
		repeat("batchnorm: dbeta", dbt.g, db0);
		free(y0), free(m0), free(i0), free(dx0), free(dg0), free(db0);
	}
	drop(x), drop(y), drop(dy), drop(dx), drop(gm), drop(bt), drop(mean), drop(inv);
	drop(dg), drop(dbt), drop(rm), drop(rv);
	free(zeros);
	free(ones);
}

static void pool_case(int n, int c, int h, int w, int k, int st)
{
	int oh = (h - k) / st + 1, ow = (w - k) / st + 1;
	struct pair x = rnd("x", RF_DIMS(n, c, h, w)), y = rnd("y", RF_DIMS(n, c, oh, ow));
	struct pair dy = rnd("dy", RF_DIMS(n, c, oh, ow)), dx = rnd("dx", RF_DIMS(n, c, h, w));
	struct pair gy = rnd("gy", RF_DIMS(n, c)), gdx = rnd("gdx", RF_DIMS(n, c, h, w));
	struct pair gdy = rnd("gdy", RF_DIMS(n, c));
	char what[96];

	for (int g = 0; g < 2; g++) {
		struct rf_tensor *X = g ? x.g : x.c;
		CHECK_OK(rf_maxpool2d_fwd(NULL, g ? y.g : y.c, X, k, st));
		CHECK_OK(rf_maxpool2d_bwd(NULL, g ? dx.g : dx.c, g ? dy.g : dy.c, X, k, st));
		CHECK_OK(rf_gavgpool_fwd(NULL, g ? gy.g : gy.c, X));
		CHECK_OK(rf_gavgpool_bwd(NULL, g ? gdx.g : gdx.c, g ? gdy.g : gdy.c));
	}
	snprintf(what, sizeof(what), "maxpool %dx%d s%d %dx%dx%dx%d: fwd", k, k, st, n, c, h, w);
	agree(what, y, 0);
	/* random inputs have no ties: the gradient goes to the same element; where windows
	 * overlap (stride < k) an element gets the sum of up to ceil(k/st)^2 windows' dy,
	 * added in another order on the GPU (-1.460495 vs -1.46049488 on an H200) */
	snprintf(what, sizeof(what), "maxpool %dx%d s%d: bwd", k, k, st);
	agree(what, dx, st < k ? (double)((k + st - 1) / st) * ((k + st - 1) / st) : 0);
	agree("global average pool: fwd", gy, (double)h * w);
	agree("global average pool: bwd", gdx, 1);
	drop(x), drop(y), drop(dy), drop(dx), drop(gy), drop(gdx), drop(gdy);
}

int main(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	const char *why = NULL;

	if (rf_cuda_count() <= 0) {
		fprintf(stderr, "no CUDA device: skip\n");
		return T_SKIP;
	}
	if (!rf_cuda_dnn_available(&why)) {
		fprintf(stderr, "no cuDNN (%s): skip\n", why);
		return T_SKIP;
	}
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	CHECK_OK(rf_cpu_open(e, NULL, &cpu));
	/* fp32 row-major (FMA math: the CPU's to float rounding), then tf32 and NHWC */
	for (int pass = 0; pass < 3; pass++) {
		struct rf_cuda_opts co = { 0 };
		prec = co.precision = pass == 0 ? RF_PRECISION_FP32 : RF_PRECISION_TF32;
		glay = pass == 2 ? RF_LAYOUT_NHWC : RF_LAYOUT_ROWMAJOR;
		CHECK_OK(rf_cuda_open(e, 0, &co, &gpu));
		conv_case(4, 3, 11, 9, 8, 3, 1, 1);
		conv_case(4, 8, 11, 9, 16, 3, 2, 1);
		conv_case(4, 8, 11, 9, 16, 1, 2, 0);
		conv_case(16, 64, 28, 28, 64, 3, 1, 1);      /* ResNet-18's first stage */
		if (glay == RF_LAYOUT_ROWMAJOR) {            /* im2col's: f32 row-major */
			conv_case(0, 3, 5, 5, 4, 3, 1, 1);   /* no image: dw and db zeroed, then kept */
			conv_case(2, 3, 0, 4, 4, 2, 1, 1);   /* empty planes: outputs of padding alone */
		}
		bn_case(8, 16, 7, 5);
		bn_case(64, 64, 14, 14);
		pool_case(4, 6, 11, 9, 3, 2);
		pool_case(4, 6, 12, 12, 2, 2);
		CHECK_OK(rf_engine_wait_all(e));
		rf_device_close(gpu);
	}
	rf_device_close(cpu);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
