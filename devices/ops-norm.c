/* devices/ops-norm.c -- ops.h's batch normalisation, max pooling and global average
 * pooling: shape checks, then one op each; the executing backend says whether it runs
 * them (a device may need a library of its own for them). */
#include <errno.h>
#include <string.h>

#include "op-impl.h"

/* The dims of x (n, c, h, w) */
struct rf__nchw {
	int n, c, h, w;
};

/* (x: 4-D, as its op's signature has checked) */
static void rf__nchw(const struct rf_tensor *x, struct rf__nchw *g)
{
	g->n = (int)x->shape[0];
	g->c = (int)x->shape[1];
	g->h = (int)x->shape[2];
	g->w = (int)x->shape[3];
}

/* Batch norm's x: the kernels take no empty channel or plane, and the backward no
 * empty batch; refused here, on every device, before anything is pushed. */
static int rf__bn_shape(const char *fn, const struct rf__nchw *g, int bwd)
{
	if (!g->c || !g->h || !g->w || (bwd && !g->n))
		return rf__bad(fn, "x is %d x %d x %d x %d: %s expected", g->n, g->c, g->h, g->w,
			       bwd ? "no empty dimension" : "channels and planes that are not empty");
	return 0;
}

static void rf__bn_params(struct rf__op *op, const struct rf__nchw *g, float eps, float momentum,
			  int relu)
{
	op->p.bn.s = (struct rf__bn){ g->n, g->c, g->h * g->w, eps, momentum, relu };
	op->p.bn.h = g->h;
	op->p.bn.w = g->w;
}

static int rf__bn_fwd(const char *fn, int relu, struct rf_stream *s, struct rf_tensor *y,
		      struct rf_tensor *mean, struct rf_tensor *invstd, struct rf_tensor *run_mean,
		      struct rf_tensor *run_var, struct rf_tensor *x, struct rf_tensor *gamma,
		      struct rf_tensor *beta, int train, float eps, float momentum)
{
	enum rf__opcode code = train ? (relu ? RF__OP_BN_RELU_TRAIN : RF__OP_BN_TRAIN)
				     : (relu ? RF__OP_BN_RELU_EVAL : RF__OP_BN_EVAL);
	struct rf_tensor *t[8] = { y, mean, invstd, run_mean, run_var, x, gamma, beta };
	struct rf_tensor *te[6] = { y, x, gamma, beta, run_mean, run_var };
	struct rf__nchw g;
	struct rf__b b;
	struct rf__op *op;

	/* which op the arguments ask for; the signature checks the one they make */
	if (!run_mean != !run_var)
		return rf__bad(fn, "run_mean and run_var go together");
	if (!train && !run_mean)
		return rf__bad(fn, "evaluation needs run_mean and run_var");
	RF__TRY(rf__sig_check(fn, code, train ? t : te, train ? 8 : 6, RF__SIG_OWN));
	rf__nchw(x, &g);
	RF__TRY(rf__bn_shape(fn, &g, 0));
	RF__TRY(rf__sig_check(fn, code, train ? t : te, train ? 8 : 6, RF__SIG_REL));
	if (y->data == x->data)
		return rf__bad(fn, "y must not be x (the backward pass needs x)");
	if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
		return rf__bad(fn, "eps %g, momentum %g: eps > 0 and momentum in [0, 1] expected",
			       (double)eps, (double)momentum);
	if (train && (size_t)g.n * g.h * g.w < 2)
		return rf__bad(fn, "training needs more than one value per channel "
			       "(x is %d x %d x %d x %d)", g.n, g.c, g.h, g.w);
	RF__TRY(rf__b_init(&b, fn, code, NULL, 0));
	op = b.c;
	if (train) {
		rf__bn_params(op, &g, eps, momentum, relu);
		rf__b_set(&b, &op->o.bn_train.x, x);
		rf__b_set(&b, &op->o.bn_train.gamma, gamma);
		rf__b_set(&b, &op->o.bn_train.beta, beta);
		rf__b_set(&b, &op->o.bn_train.y, y);
		rf__b_set(&b, &op->o.bn_train.mean, mean);
		rf__b_set(&b, &op->o.bn_train.invstd, invstd);
		rf__b_set(&b, &op->o.bn_train.run_mean, run_mean);
		rf__b_set(&b, &op->o.bn_train.run_var, run_var);
	} else {
		rf__bn_params(op, &g, eps, momentum, relu);
		rf__b_set(&b, &op->o.bn_eval.x, x);
		rf__b_set(&b, &op->o.bn_eval.gamma, gamma);
		rf__b_set(&b, &op->o.bn_eval.beta, beta);
		rf__b_set(&b, &op->o.bn_eval.run_mean, run_mean);
		rf__b_set(&b, &op->o.bn_eval.run_var, run_var);
		rf__b_set(&b, &op->o.bn_eval.y, y);
	}
	return rf__b_push(&b, s, y->dev);
}

int rf_batchnorm_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *mean,
		     struct rf_tensor *invstd, struct rf_tensor *run_mean,
		     struct rf_tensor *run_var, struct rf_tensor *x, struct rf_tensor *gamma,
		     struct rf_tensor *beta, int train, float eps, float momentum)
{
	return rf__bn_fwd("rf_batchnorm_fwd", 0, s, y, mean, invstd, run_mean, run_var, x, gamma,
			  beta, train, eps, momentum);
}

int rf_batchnorm_relu_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *mean,
			  struct rf_tensor *invstd, struct rf_tensor *run_mean,
			  struct rf_tensor *run_var, struct rf_tensor *x, struct rf_tensor *gamma,
			  struct rf_tensor *beta, int train, float eps, float momentum)
{
	return rf__bn_fwd("rf_batchnorm_relu_fwd", 1, s, y, mean, invstd, run_mean, run_var, x,
			  gamma, beta, train, eps, momentum);
}

static int rf__bn_bwd(const char *fn, struct rf_stream *s, struct rf_tensor *dx,
		      struct rf_tensor *dgamma, struct rf_tensor *dbeta, struct rf_tensor *dy,
		      struct rf_tensor *x, struct rf_tensor *mean, struct rf_tensor *invstd,
		      struct rf_tensor *gamma, struct rf_tensor *y)
{
	enum rf__opcode code = y ? RF__OP_BN_RELU_BWD : RF__OP_BN_BWD;
	struct rf_tensor *t[9] = { dx, dgamma, dbeta, dy, x, mean, invstd, gamma, y };
	struct rf__nchw g;
	struct rf__b b;
	struct rf__op *op;

	RF__TRY(rf__sig_check(fn, code, t, y ? 9 : 8, RF__SIG_OWN));
	rf__nchw(x, &g);
	RF__TRY(rf__bn_shape(fn, &g, 1));
	RF__TRY(rf__sig_check(fn, code, t, y ? 9 : 8, RF__SIG_REL));
	if (dx->data == dy->data || dx->data == x->data)
		return rf__bad(fn, "dx must not alias dy or x");
	if (y && dx->data == y->data)
		return rf__bad(fn, "dx must not alias y");
	RF__TRY(rf__b_init(&b, fn, code, NULL, 0));
	op = b.c;
	/* eps for the backends whose backward wants the forward's: 1e-5 (ops.h) */
	rf__bn_params(op, &g, 1e-5f, 0.0f, y != NULL);
	if (y)
		rf__b_set(&b, &op->o.bn_relu_bwd.y, y);
	rf__b_set(&b, &op->o.bn_bwd.dy, dy);
	rf__b_set(&b, &op->o.bn_bwd.x, x);
	rf__b_set(&b, &op->o.bn_bwd.mean, mean);
	rf__b_set(&b, &op->o.bn_bwd.invstd, invstd);
	rf__b_set(&b, &op->o.bn_bwd.gamma, gamma);
	rf__b_set(&b, &op->o.bn_bwd.dx, dx);
	rf__b_set(&b, &op->o.bn_bwd.dgamma, dgamma);
	rf__b_set(&b, &op->o.bn_bwd.dbeta, dbeta);
	return rf__b_push(&b, s, dx->dev);
}

int rf_batchnorm_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dgamma,
		     struct rf_tensor *dbeta, struct rf_tensor *dy, struct rf_tensor *x,
		     struct rf_tensor *mean, struct rf_tensor *invstd, struct rf_tensor *gamma)
{
	return rf__bn_bwd("rf_batchnorm_bwd", s, dx, dgamma, dbeta, dy, x, mean, invstd, gamma,
			  NULL);
}

int rf_batchnorm_relu_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dgamma,
			  struct rf_tensor *dbeta, struct rf_tensor *dy, struct rf_tensor *y,
			  struct rf_tensor *x, struct rf_tensor *mean, struct rf_tensor *invstd,
			  struct rf_tensor *gamma)
{
	if (!y)
		return rf__fail(-EINVAL, "rf_batchnorm_relu_bwd: y (the forward's output) is NULL");
	return rf__bn_bwd("rf_batchnorm_relu_bwd", s, dx, dgamma, dbeta, dy, x, mean, invstd,
			  gamma, y);
}

/* y is x pooled k x k at stride st (both 4-D: the op's signature checked them) */
static int rf__pool_shape(const char *fn, struct rf_tensor *x, struct rf_tensor *y, int k, int st,
			  struct rf__nchw *g)
{
	char b1[96], b2[96];

	rf__nchw(x, g);
	if (k < 1 || st < 1 || k > g->h || k > g->w)
		return rf__bad(fn, "window %d, stride %d: a window >= 1 that fits %dx%d and a "
			       "stride >= 1 expected", k, st, g->h, g->w);
	if (y->shape[0] != g->n || y->shape[1] != g->c || y->shape[2] != (g->h - k) / st + 1 ||
	    y->shape[3] != (g->w - k) / st + 1)
		return rf__bad(fn, "%s is not %s max-pooled %dx%d at stride %d",
			       rf_tensor_describe(y, b1, sizeof(b1)),
			       rf_tensor_describe(x, b2, sizeof(b2)), k, k, st);
	return 0;
}

static void rf__pool_params(struct rf__op *op, const struct rf__nchw *g, int k, int st)
{
	op->p.pool.n = g->n;
	op->p.pool.c = g->c;
	op->p.pool.h = g->h;
	op->p.pool.w = g->w;
	op->p.pool.k = k;
	op->p.pool.st = st;
}

int rf_maxpool2d_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x, int k,
		     int stride)
{
	static const char fn[] = "rf_maxpool2d_fwd";
	struct rf__nchw g;
	struct rf__b b;

	RF__TRY(RF__SIG(fn, RF__OP_MAXPOOL_FWD, y, x));
	RF__TRY(rf__pool_shape(fn, x, y, k, stride, &g));
	RF__TRY(rf__b_init(&b, fn, RF__OP_MAXPOOL_FWD, NULL, 0));
	rf__pool_params(b.c, &g, k, stride);
	rf__b_set(&b, &b.c->o.maxpool_fwd.x, x);
	rf__b_set(&b, &b.c->o.maxpool_fwd.y, y);
	return rf__b_push(&b, s, y->dev);
}

int rf_maxpool2d_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy,
		     struct rf_tensor *x, int k, int stride)
{
	static const char fn[] = "rf_maxpool2d_bwd";
	struct rf_tensor *t[3] = { dx, dy, x };
	struct rf__nchw g;
	struct rf__b b;

	RF__TRY(rf__sig_check(fn, RF__OP_MAXPOOL_BWD, t, 3, RF__SIG_OWN));
	RF__TRY(rf__pool_shape(fn, x, dy, k, stride, &g));
	RF__TRY(rf__sig_check(fn, RF__OP_MAXPOOL_BWD, t, 3, RF__SIG_REL));
	if (dx->data == x->data || dx->data == dy->data)
		return rf__bad(fn, "dx must not alias x or dy");
	RF__TRY(rf__b_init(&b, fn, RF__OP_MAXPOOL_BWD, NULL, 0));
	rf__pool_params(b.c, &g, k, stride);
	rf__b_set(&b, &b.c->o.maxpool_bwd.dy, dy);
	rf__b_set(&b, &b.c->o.maxpool_bwd.x, x);
	rf__b_set(&b, &b.c->o.maxpool_bwd.dx, dx);
	return rf__b_push(&b, s, dx->dev);
}

/* x (n, c, h, w) and y (n, c) or (n, c, 1, 1) (their dtypes and x's rank: the op's
 * signature) */
static int rf__gap_shape(const char *fn, struct rf_tensor *x, struct rf_tensor *y,
			 struct rf__nchw *g)
{
	char b1[96], b2[96];

	rf__nchw(x, g);
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
	struct rf__nchw g;
	struct rf__b b;

	RF__TRY(RF__SIG(fn, RF__OP_GAP_FWD, y, x));
	RF__TRY(rf__gap_shape(fn, x, y, &g));
	RF__TRY(rf__b_init(&b, fn, RF__OP_GAP_FWD, NULL, 0));
	rf__pool_params(b.c, &g, g.h, g.h);
	rf__b_set(&b, &b.c->o.gap_fwd.x, x);
	rf__b_set(&b, &b.c->o.gap_fwd.y, y);
	return rf__b_push(&b, s, y->dev);
}

int rf_gavgpool_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy)
{
	static const char fn[] = "rf_gavgpool_bwd";
	struct rf__nchw g;
	struct rf__b b;

	RF__TRY(RF__SIG(fn, RF__OP_GAP_BWD, dx, dy));
	RF__TRY(rf__gap_shape(fn, dx, dy, &g));
	RF__TRY(rf__b_init(&b, fn, RF__OP_GAP_BWD, NULL, 0));
	rf__pool_params(b.c, &g, g.h, g.h);
	rf__b_set(&b, &b.c->o.gap_bwd.dy, dy);
	rf__b_set(&b, &b.c->o.gap_bwd.dx, dx);
	return rf__b_push(&b, s, dx->dev);
}
