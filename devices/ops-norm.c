/* devices/ops-norm.c -- ops.h's batch normalisation, max pooling and global average
 * pooling: shape checks, then one op: on a CPU device a host op running the CPU kernel
 * (kernels.h), on a CUDA device an RF__NORM op that cuDNN runs (cuda/cudnn.c), where
 * cuDNN could be loaded; without it a CUDA tensor is refused with a message. */
#include <errno.h>
#include <string.h>

#include "op-impl.h"
#include "norm-op.h"

static int rf__norm_fn(void *arg)
{
	struct rf__norm_op *f = arg;
	size_t planes = (size_t)f->n * f->c;

	switch (f->kind) {
	case RF__N_BN_TRAIN:
		return rf_k_bn_fwd_train(&f->bn, f->out, f->out2, f->out3, f->out4, f->out5, f->in,
					 f->in2, f->in3);
	case RF__N_BN_EVAL:
		return rf_k_bn_fwd_eval(&f->bn, f->out, f->in, f->in2, f->in3, f->in4, f->in5);
	case RF__N_BN_BWD:
		return rf_k_bn_bwd(&f->bn, f->out, f->out2, f->out3, f->in, f->in2, f->in3, f->in4,
				   f->in5);
	case RF__N_MAX_FWD:
		rf_k_maxpool2d_fwd(f->out, f->in, f->n, f->c, f->h, f->w, f->k, f->st);
		return 0;
	case RF__N_MAX_BWD:
		rf_k_maxpool2d_bwd(f->out, f->in, f->in2, f->n, f->c, f->h, f->w, f->k, f->st);
		return 0;
	case RF__N_GAP_FWD:
		rf_k_gavgpool_fwd(f->out, f->in, planes, f->h * f->w);
		return 0;
	default:
		rf_k_gavgpool_bwd(f->out, f->in, planes, f->h * f->w);
		return 0;
	}
}

static float *rf__d(struct rf_tensor *t)
{
	return t ? t->data : NULL;
}

/* x (n, c, h, w): its dims */
static int rf__nchw(const char *fn, const char *what, struct rf_tensor *x, struct rf__norm_op *f)
{
	RF__TRY(rf__need(fn, what, x, RF_F32, 4));
	f->n = (int)x->shape[0];
	f->c = (int)x->shape[1];
	f->h = (int)x->shape[2];
	f->w = (int)x->shape[3];
	return 0;
}

/* Batch norm's x: the CPU kernels take no empty channel or plane, and the backward no
 * empty batch; refused here, on every device, before anything is pushed. */
static int rf__bn_shape(const char *fn, const struct rf__norm_op *g, int bwd)
{
	if (!g->c || !g->h || !g->w || (bwd && !g->n))
		return rf__bad(fn, "x is %d x %d x %d x %d: %s expected", g->n, g->c, g->h, g->w,
			       bwd ? "no empty dimension" : "channels and planes that are not empty");
	return 0;
}

/* t holds exactly `want` f32 values */
static int rf__vec(const char *fn, const char *what, struct rf_tensor *t, size_t want)
{
	RF__TRY(rf__need(fn, what, t, RF_F32, -1));
	if (t->numel != want)
		return rf__bad(fn, "%s has %zu elements, %zu expected (one per channel)", what,
			       t->numel, want);
	return 0;
}

static int rf__same_shape(const char *fn, struct rf_tensor *a, struct rf_tensor *b)
{
	char b1[96], b2[96];

	if (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim))
		return rf__bad(fn, "%s and %s differ in shape", rf_tensor_describe(a, b1, sizeof(b1)),
			       rf_tensor_describe(b, b2, sizeof(b2)));
	return 0;
}

/* Start the op: a host op on a CPU device, RF__NORM (cuDNN) on a CUDA one. */
static int rf__norm_begin(struct rf__b *b, const char *fn, const char *name, struct rf_tensor *out,
			  struct rf__norm_op **f)
{
	int cuda = out->dev->kind != RF_DEVICE_CPU;
	const char *why = NULL;

	if (cuda && !rf__cuda_dnn_ok(&why))
		return rf__bad(fn, "%s is on a CUDA device, where this op needs cuDNN: %s",
			       out->name, why ? why : "not built with it");
	RF__TRY(rf__b_init(b, fn, cuda ? RF__NORM : RF__HOST, name, sizeof(**f)));
	*f = (struct rf__norm_op *)(b->c + 1);
	b->c->u.host.fn = cuda ? NULL : rf__norm_fn;
	b->c->u.host.arg = *f;
	return 0;
}

int rf_batchnorm_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *mean,
		     struct rf_tensor *invstd, struct rf_tensor *run_mean,
		     struct rf_tensor *run_var, struct rf_tensor *x, struct rf_tensor *gamma,
		     struct rf_tensor *beta, int train, float eps, float momentum)
{
	static const char fn[] = "rf_batchnorm_fwd";
	struct rf__norm_op g = { 0 }, *f = NULL;
	struct rf__b b;

	RF__TRY(rf__nchw(fn, "x", x, &g));
	RF__TRY(rf__bn_shape(fn, &g, 0));
	RF__TRY(rf__need(fn, "y", y, RF_F32, 4));
	RF__TRY(rf__same_shape(fn, x, y));
	if (y->data == x->data)
		return rf__bad(fn, "y must not be x (the backward pass needs x)");
	RF__TRY(rf__vec(fn, "gamma", gamma, (size_t)g.c));
	RF__TRY(rf__vec(fn, "beta", beta, (size_t)g.c));
	if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
		return rf__bad(fn, "eps %g, momentum %g: eps > 0 and momentum in [0, 1] expected",
			       (double)eps, (double)momentum);
	if (!run_mean != !run_var)
		return rf__bad(fn, "run_mean and run_var go together");
	if (run_mean) {
		RF__TRY(rf__vec(fn, "run_mean", run_mean, (size_t)g.c));
		RF__TRY(rf__vec(fn, "run_var", run_var, (size_t)g.c));
	}
	if (train) {
		if (!mean || !invstd)
			return rf__bad(fn, "training needs mean and invstd to keep");
		RF__TRY(rf__vec(fn, "mean", mean, (size_t)g.c));
		RF__TRY(rf__vec(fn, "invstd", invstd, (size_t)g.c));
		if ((size_t)g.n * g.h * g.w < 2)
			return rf__bad(fn, "training needs more than one value per channel "
				       "(x is %d x %d x %d x %d)", g.n, g.c, g.h, g.w);
	} else if (!run_mean) {
		return rf__bad(fn, "evaluation needs run_mean and run_var");
	}
	RF__TRY(rf__norm_begin(&b, fn, train ? "batchnorm_fwd" : "batchnorm_eval", y, &f));
	*f = g;
	f->kind = train ? RF__N_BN_TRAIN : RF__N_BN_EVAL;
	f->bn = (struct rf_k_bn){ g.n, g.c, g.h * g.w, eps, momentum };
	f->out = y->data;
	f->in = x->data;
	f->in2 = gamma->data;
	f->in3 = beta->data;
	rf__b_tensor(&b, x, 0);
	rf__b_tensor(&b, gamma, 0);
	rf__b_tensor(&b, beta, 0);
	rf__b_tensor(&b, y, 1);
	if (train) {
		f->out2 = mean->data;
		f->out3 = invstd->data;
		f->out4 = rf__d(run_mean);
		f->out5 = rf__d(run_var);
		rf__b_tensor(&b, mean, 1);
		rf__b_tensor(&b, invstd, 1);
		rf__b_tensor(&b, run_mean, 1);
		rf__b_tensor(&b, run_var, 1);
	} else {
		f->in4 = run_mean->data;
		f->in5 = run_var->data;
		rf__b_tensor(&b, run_mean, 0);
		rf__b_tensor(&b, run_var, 0);
	}
	return rf__b_push(&b, s, y->dev);
}

int rf_batchnorm_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dgamma,
		     struct rf_tensor *dbeta, struct rf_tensor *dy, struct rf_tensor *x,
		     struct rf_tensor *mean, struct rf_tensor *invstd, struct rf_tensor *gamma)
{
	static const char fn[] = "rf_batchnorm_bwd";
	struct rf__norm_op g = { 0 }, *f = NULL;
	struct rf__b b;

	RF__TRY(rf__nchw(fn, "x", x, &g));
	RF__TRY(rf__bn_shape(fn, &g, 1));
	RF__TRY(rf__need(fn, "dy", dy, RF_F32, 4));
	RF__TRY(rf__need(fn, "dx", dx, RF_F32, 4));
	RF__TRY(rf__same_shape(fn, x, dy));
	RF__TRY(rf__same_shape(fn, x, dx));
	if (dx->data == dy->data || dx->data == x->data)
		return rf__bad(fn, "dx must not alias dy or x");
	RF__TRY(rf__vec(fn, "dgamma", dgamma, (size_t)g.c));
	RF__TRY(rf__vec(fn, "dbeta", dbeta, (size_t)g.c));
	RF__TRY(rf__vec(fn, "mean", mean, (size_t)g.c));
	RF__TRY(rf__vec(fn, "invstd", invstd, (size_t)g.c));
	RF__TRY(rf__vec(fn, "gamma", gamma, (size_t)g.c));
	RF__TRY(rf__norm_begin(&b, fn, "batchnorm_bwd", dx, &f));
	*f = g;
	f->kind = RF__N_BN_BWD;
	/* eps for cuDNN, which wants the forward's: 1e-5 (ops.h) */
	f->bn = (struct rf_k_bn){ g.n, g.c, g.h * g.w, 1e-5f, 0.0f };
	f->out = dx->data;
	f->out2 = dgamma->data;
	f->out3 = dbeta->data;
	f->in = dy->data;
	f->in2 = x->data;
	f->in3 = mean->data;
	f->in4 = invstd->data;
	f->in5 = gamma->data;
	rf__b_tensor(&b, dy, 0);
	rf__b_tensor(&b, x, 0);
	rf__b_tensor(&b, mean, 0);
	rf__b_tensor(&b, invstd, 0);
	rf__b_tensor(&b, gamma, 0);
	rf__b_tensor(&b, dx, 1);
	rf__b_tensor(&b, dgamma, 1);
	rf__b_tensor(&b, dbeta, 1);
	return rf__b_push(&b, s, dx->dev);
}

/* y is x pooled k x k at stride st */
static int rf__pool_shape(const char *fn, struct rf_tensor *x, struct rf_tensor *y, int k, int st,
			  struct rf__norm_op *g)
{
	char b1[96], b2[96];

	RF__TRY(rf__nchw(fn, "x", x, g));
	RF__TRY(rf__need(fn, "y", y, RF_F32, 4));
	if (k < 1 || st < 1 || k > g->h || k > g->w)
		return rf__bad(fn, "window %d, stride %d: a window >= 1 that fits %dx%d and a "
			       "stride >= 1 expected", k, st, g->h, g->w);
	if (y->shape[0] != g->n || y->shape[1] != g->c || y->shape[2] != (g->h - k) / st + 1 ||
	    y->shape[3] != (g->w - k) / st + 1)
		return rf__bad(fn, "%s is not %s max-pooled %dx%d at stride %d",
			       rf_tensor_describe(y, b1, sizeof(b1)),
			       rf_tensor_describe(x, b2, sizeof(b2)), k, k, st);
	g->k = k;
	g->st = st;
	return 0;
}

int rf_maxpool2d_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x, int k,
		     int stride)
{
	static const char fn[] = "rf_maxpool2d_fwd";
	struct rf__norm_op g = { 0 }, *f = NULL;
	struct rf__b b;

	RF__TRY(rf__pool_shape(fn, x, y, k, stride, &g));
	RF__TRY(rf__norm_begin(&b, fn, "maxpool2d_fwd", y, &f));
	*f = g;
	f->kind = RF__N_MAX_FWD;
	f->out = y->data;
	f->in = x->data;
	rf__b_tensor(&b, x, 0);
	rf__b_tensor(&b, y, 1);
	return rf__b_push(&b, s, y->dev);
}

int rf_maxpool2d_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy,
		     struct rf_tensor *x, int k, int stride)
{
	static const char fn[] = "rf_maxpool2d_bwd";
	struct rf__norm_op g = { 0 }, *f = NULL;
	struct rf__b b;

	RF__TRY(rf__pool_shape(fn, x, dy, k, stride, &g));
	RF__TRY(rf__need(fn, "dx", dx, RF_F32, 4));
	RF__TRY(rf__same_shape(fn, x, dx));
	if (dx->data == x->data || dx->data == dy->data)
		return rf__bad(fn, "dx must not alias x or dy");
	RF__TRY(rf__norm_begin(&b, fn, "maxpool2d_bwd", dx, &f));
	*f = g;
	f->kind = RF__N_MAX_BWD;
	f->out = dx->data;
	f->in = dy->data;
	f->in2 = x->data;
	rf__b_tensor(&b, dy, 0);
	rf__b_tensor(&b, x, 0);
	rf__b_tensor(&b, dx, 1);
	if (b.c->code == RF__NORM) {
		/* cuDNN's backward wants the forward's y: recomputed into a workspace */
		int ret = rf__resolve(&b, s, dx->dev);
		if (ret == 0 && rf__cache_alloc(&b.c->xdev->mem, dy->numel * sizeof(float),
						&b.c->ws) < 0) {
			rf__bad(fn, "no device memory for the %zu-byte workspace",
				dy->numel * sizeof(float));
			ret = -ENOMEM;
		}
		if (ret < 0) {
			rf__b_fail(&b);
			return ret;
		}
		b.c->ws_bytes = dy->numel * sizeof(float);
	}
	return rf__b_push(&b, s, dx->dev);
}

/* x (n, c, h, w) and y (n, c) or (n, c, 1, 1) */
static int rf__gap_shape(const char *fn, struct rf_tensor *x, struct rf_tensor *y,
			 struct rf__norm_op *g)
{
	char b1[96], b2[96];

	RF__TRY(rf__nchw(fn, "x", x, g));
	RF__TRY(rf__need(fn, "y", y, RF_F32, -1));
	if (!g->h || !g->w)
		return rf__bad(fn, "%s has empty planes: no mean to take",
			       rf_tensor_describe(x, b2, sizeof(b2)));
	if (y->ndim < 2 || y->shape[0] != g->n || y->shape[1] != g->c || y->numel != (size_t)g->n * g->c)
		return rf__bad(fn, "%s is not %s averaged over each plane",
			       rf_tensor_describe(y, b1, sizeof(b1)), rf_tensor_describe(x, b2, sizeof(b2)));
	return 0;
}

int rf_gavgpool_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x)
{
	static const char fn[] = "rf_gavgpool_fwd";
	struct rf__norm_op g = { 0 }, *f = NULL;
	struct rf__b b;

	RF__TRY(rf__gap_shape(fn, x, y, &g));
	RF__TRY(rf__norm_begin(&b, fn, "gavgpool_fwd", y, &f));
	*f = g;
	f->kind = RF__N_GAP_FWD;
	f->out = y->data;
	f->in = x->data;
	rf__b_tensor(&b, x, 0);
	rf__b_tensor(&b, y, 1);
	return rf__b_push(&b, s, y->dev);
}

int rf_gavgpool_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy)
{
	static const char fn[] = "rf_gavgpool_bwd";
	struct rf__norm_op g = { 0 }, *f = NULL;
	struct rf__b b;

	RF__TRY(rf__gap_shape(fn, dx, dy, &g));
	RF__TRY(rf__norm_begin(&b, fn, "gavgpool_bwd", dx, &f));
	*f = g;
	f->kind = RF__N_GAP_BWD;
	f->out = dx->data;
	f->in = dy->data;
	rf__b_tensor(&b, dy, 0);
	rf__b_tensor(&b, dx, 1);
	return rf__b_push(&b, s, dx->dev);
}
