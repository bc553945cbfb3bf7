/* train/model.c -- the MLP and LeNet of rf-train: parameters, forward, backward, SGD.
 *
 * Reads top to bottom (llm.c): the specs, the replica (one parameter block and one
 * gradient block carved into views), then each model's forward and backward as a
 * list of ops.h pushes with the shapes as comments. See model.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "kernels.h"

/* ---- specs ---------------------------------------------------------------------------- */

/* Views start at multiples of 16 floats (64 bytes) in the blocks. */
#define RF__ALIGN_F 16

static struct rf_param_spec rf__mlp_p[] = {
	{ "w1", 2, { 256, 784 }, 784, 0, 0, 0 },
	{ "b1", 1, { 256 }, 784, 0, 0, 0 },
	{ "w2", 2, { 10, 256 }, 256, 1, 0, 0 },
	{ "b2", 1, { 10 }, 256, 1, 0, 0 },
};

static struct rf_param_spec rf__lenet_p[] = {
	{ "c1.w", 4, { 20, 1, 3, 3 }, 9, 0, 0, 0 },
	{ "c1.b", 1, { 20 }, 9, 0, 0, 0 },
	{ "c2.w", 4, { 50, 20, 5, 5 }, 500, 1, 0, 0 },
	{ "c2.b", 1, { 50 }, 500, 1, 0, 0 },
	{ "f1.w", 2, { 128, 800 }, 800, 2, 0, 0 },
	{ "f1.b", 1, { 128 }, 800, 2, 0, 0 },
	{ "f2.w", 2, { 10, 128 }, 128, 3, 0, 0 },
	{ "f2.b", 1, { 10 }, 128, 3, 0, 0 },
};

static struct rf_model_spec rf__specs[] = {
	{ "mlp", 4, 2, 0, rf__mlp_p },
	{ "lenet", 8, 4, 0, rf__lenet_p },
};

/* Offsets and sizes, computed once (reactor thread; idempotent). */
static void rf__spec_layout(struct rf_model_spec *s)
{
	struct rf_param_spec *p = (struct rf_param_spec *)s->p;
	size_t off = 0;
	unsigned i;
	int d;

	if (s->numel)
		return;
	for (i = 0; i < s->ntensors; i++) {
		p[i].numel = 1;
		for (d = 0; d < p[i].ndim; d++)
			p[i].numel *= (size_t)p[i].shape[d];
		p[i].offset = off;
		off += (p[i].numel + RF__ALIGN_F - 1) / RF__ALIGN_F * RF__ALIGN_F;
	}
	s->numel = off;
}

const struct rf_model_spec *rf_model_spec(const char *name)
{
	unsigned i;

	for (i = 0; name && i < sizeof(rf__specs) / sizeof(rf__specs[0]); i++) {
		if (strcmp(rf__specs[i].name, name) == 0) {
			rf__spec_layout(&rf__specs[i]);
			return &rf__specs[i];
		}
	}
	return NULL;
}

/* ---- a replica ------------------------------------------------------------------------ */

int rf_model_create(struct rf_model **out, const struct rf_model_spec *spec,
		    struct rf_device *d, struct rf_stream *s, const char *tag)
{
	struct rf_model *m;
	char name[40];
	unsigned i;
	int ret = -ENOMEM;

	*out = NULL;
	if (!spec || !d)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->spec = spec;
	m->dev = d;
	m->s = s ? s : rf_device_stream(d, 0);
	snprintf(name, sizeof(name), "%s%sparams", tag ? tag : "", tag ? "." : "");
	rf_tensor_create(d, RF_F32, name, RF_DIMS((int64_t)spec->numel), &m->params);
	snprintf(name, sizeof(name), "%s%sgrads", tag ? tag : "", tag ? "." : "");
	rf_tensor_create(d, RF_F32, name, RF_DIMS((int64_t)spec->numel), &m->grads);
	if (!m->params || !m->grads)
		goto fail;
	for (i = 0; i < spec->ntensors; i++) {
		const struct rf_param_spec *p = &spec->p[i];
		snprintf(name, sizeof(name), "%s%s%s", tag ? tag : "", tag ? "." : "", p->name);
		rf_tensor_view(m->params, p->offset, RF_F32, name, p->ndim, p->shape, &m->p[i]);
		snprintf(name, sizeof(name), "%s%sd%s", tag ? tag : "", tag ? "." : "", p->name);
		rf_tensor_view(m->grads, p->offset, RF_F32, name, p->ndim, p->shape, &m->g[i]);
		if (!m->p[i] || !m->g[i])
			goto fail;
	}
	/* Zero both blocks (after the views exist, so the fill is ordered before every op
	 * on a view): the alignment padding between views stays 0, and whole blocks
	 * compare and copy deterministically. */
	if ((ret = rf_fill(m->s, m->params, 0.0f)) < 0 || (ret = rf_fill(m->s, m->grads, 0.0f)) < 0)
		goto fail;
	*out = m;
	return 0;
fail:
	rf_model_destroy(m);
	return ret;
}

void rf_model_destroy(struct rf_model *m)
{
	unsigned i;

	if (!m)
		return;
	for (i = 0; i < RF_MODEL_MAX_TENSORS; i++) {
		rf_tensor_destroy(m->p[i]);
		rf_tensor_destroy(m->g[i]);
		rf_tensor_destroy(m->v[i]);
		rf_tensor_destroy(m->v2[i]);
	}
	rf_tensor_destroy(m->mom2);
	rf_tensor_destroy(m->params);
	rf_tensor_destroy(m->grads);
	rf_tensor_destroy(m->mom);
	free(m);
}

/* The half-width of a uniform init for tensor p (a bias only under RF_INIT_UNIFORM,
 * which uses its layer's fan_in). */
static float rf__init_bound(enum rf_init init, const struct rf_param_spec *p)
{
	float fan_in = (float)p->fan_in;

	if (init == RF_INIT_KAIMING)
		return sqrtf(6.0f / fan_in);
	if (init == RF_INIT_XAVIER) /* a weight is (out, in[, kh, kw]): fan_out = out*kh*kw */
		return sqrtf(6.0f / (fan_in + (float)(p->shape[0] * (p->fan_in / p->shape[1]))));
	return 1.0f / sqrtf(fan_in);
}

int rf_model_init(struct rf_model *m, struct rf_prng *g, enum rf_init init)
{
	unsigned i;
	int ret = 0;

	for (i = 0; i < m->spec->ntensors && ret == 0; i++) {
		const struct rf_param_spec *p = &m->spec->p[i];
		int bias = p->ndim == 1;

		if (bias && init != RF_INIT_UNIFORM) {
			ret = rf_fill(m->s, m->p[i], 0.0f);
		} else if (init == RF_INIT_NORMAL) {
			ret = rf_rand_normal(m->s, m->p[i], g, 0.0f, 0.01f);
		} else {
			float b = rf__init_bound(init, p);
			ret = rf_rand_uniform(m->s, m->p[i], g, -b, b);
		}
	}
	return ret;
}

int rf_model_sgd_layer(struct rf_model *m, unsigned layer, float lr)
{
	struct rf_optim o = { .lr = lr };

	return rf_model_update_layer(m, layer, &o);
}

/* A zeroed block like params named TAG.what, with a view per parameter named
 * TAG.PARAM.suffix. */
static int rf__state_block(struct rf_model *m, const char *what, const char *suffix,
			   struct rf_tensor **blk, struct rf_tensor **views)
{
	const char *pn = m->params->name;
	char name[96];
	size_t tag = strlen(pn) - strlen("params");   /* "TAG.params": keep "TAG." */

	snprintf(name, sizeof(name), "%.*s%s", (int)tag, pn, what);
	if (rf_tensor_create(m->dev, RF_F32, name, RF_DIMS((int64_t)m->spec->numel), blk) < 0)
		return -ENOMEM;
	for (unsigned i = 0; i < m->spec->ntensors; i++) {
		const struct rf_param_spec *p = &m->spec->p[i];
		snprintf(name, sizeof(name), "%.*s%s.%s", (int)tag, pn, p->name, suffix);
		if (rf_tensor_view(*blk, p->offset, RF_F32, name, p->ndim, p->shape, &views[i]) < 0)
			return -ENOMEM;
	}
	return rf_fill(m->s, *blk, 0.0f);
}

int rf_model_momentum(struct rf_model *m)
{
	return m->mom ? 0 : rf__state_block(m, "momentum", "momentum_buffer", &m->mom, m->v);
}

int rf_model_moments(struct rf_model *m)
{
	int ret = m->mom ? 0 : rf__state_block(m, "exp_avg", "exp_avg", &m->mom, m->v);

	return ret < 0 || m->mom2 ? ret : rf__state_block(m, "exp_avg_sq", "exp_avg_sq",
							  &m->mom2, m->v2);
}

int rf_model_update(struct rf_model *m, unsigned k, const struct rf_optim *o,
		    struct rf_stream *s)
{
	int ret;

	if (o->adamw) {
		struct rf_k_adamw a = { .lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2,
					.eps = o->eps, .weight_decay = o->weight_decay, .step = o->step };
		if ((!m->mom || !m->mom2) && (ret = rf_model_moments(m)) < 0)
			return ret;
		return rf_adamw(s, m->p[k], m->v[k], m->v2[k], m->g[k], &a);
	}
	if (o->momentum == 0.0f)
		return rf_sgd(s, m->p[k], m->g[k], o->lr, o->weight_decay);
	if (!m->mom && (ret = rf_model_momentum(m)) < 0)
		return ret;
	return rf_sgd_momentum(s, m->p[k], m->v[k], m->g[k], o->lr, o->momentum,
			       o->weight_decay, o->nesterov);
}

int rf_model_update_layer(struct rf_model *m, unsigned layer, const struct rf_optim *o)
{
	struct rf_stream *sw = m->s2 ? m->s2 : m->s;
	int ret = rf_model_update(m, 2 * layer, o, sw);

	return ret < 0 ? ret : rf_model_update(m, 2 * layer + 1, o, sw);
}

/* ---- activations ---------------------------------------------------------------------- */

static struct rf_model_acts *rf__acts_new(int n, struct rf_tensor *x)
{
	struct rf_model_acts *a = calloc(1, sizeof(*a));

	if (a) {
		a->n = n;
		a->x = x;
		a->x_ndim = x->ndim;
		memcpy(a->x_shape, x->shape, sizeof(a->x_shape));
	}
	return a;
}

/* A host op that does nothing: its reads and writes order other ops (see below). */
static int rf__fence_fn(void *arg)
{
	(void)arg;
	return 0;
}

void rf_model_acts_destroy(struct rf_model_acts *a)
{
	unsigned i;

	if (!a)
		return;
	/* Views of the borrowed input (a->v[0], a->v[5]; see rf__lenet_forward): a later
	 * write to x must wait for the ops that read them, but once they are freed, a
	 * write to x no longer names their variables. A fence that writes x while they
	 * are alive is ordered after those reads, and later writes after the fence. */
	if (a->v[0] || a->v[5]) {
		struct rf_tensor *r[2];
		unsigned nr = 0;
		if (a->v[0])
			r[nr++] = a->v[0];
		if (a->v[5])
			r[nr++] = a->v[5];
		if (rf_host_op(NULL, rf__fence_fn, NULL, r, nr, &a->x, 1, "x_views_done") < 0)
			rf_engine_wait_idle(rf_device_engine(a->x->dev)); /* no fence: drain */
	}
	/* the input's shape as the caller gave it (ops captured the views they used) */
	rf_tensor_reshape(a->x, a->x_ndim, a->x_shape);
	for (i = 0; i < RF_MODEL_MAX_ACTS; i++)
		rf_tensor_destroy(a->v[i]);
	for (i = 0; i < RF_MODEL_MAX_ACTS; i++)
		rf_tensor_destroy(a->a[i]);
	rf_tensor_destroy(a->logits);
	free(a);
}

/* A new activation tensor on m's device (the message of a failure from tensor.c). */
#define RF__TRY(x) do { if ((ret = (x)) < 0) goto out; } while (0)
#define RF__NEW(dst, m, name, ...) \
	RF__TRY(rf_tensor_create((m)->dev, RF_F32, name, RF_DIMS(__VA_ARGS__), &(dst)))

/* ---- MLP ------------------------------------------------------------------------------
 * acts: a[0] h (n, 256) = relu(x*w1^T + b1)
 *       logits (n, 10) = h*w2^T + b2 */

static int rf__mlp_forward(struct rf_model *m, struct rf_model_acts *a, struct rf_tensor *x)
{
	struct rf_stream *s = m->s;
	int64_t n = a->n;
	int ret;

	RF__TRY(rf_tensor_reshape(x, RF_DIMS(n, 784)));         /* x (n, 784) */
	RF__NEW(a->a[0], m, "h", n, 256);
	RF__TRY(rf_gemm(s, 0, 1, 1.0f, x, m->p[0], 0.0f, a->a[0])); /* h = x*w1^T */
	RF__TRY(rf_bias_add(s, a->a[0], m->p[1]));
	RF__TRY(rf_relu_fwd(s, a->a[0], a->a[0]));
	RF__NEW(a->logits, m, "logits", n, 10);
	RF__TRY(rf_gemm(s, 0, 1, 1.0f, a->a[0], m->p[2], 0.0f, a->logits));
	RF__TRY(rf_bias_add(s, a->logits, m->p[3]));
out:
	return ret;
}

static int rf__mlp_backward(struct rf_model *m, struct rf_model_acts *a, rf_grad_hook hook,
			    void *ctx)
{
	struct rf_stream *s = m->s, *sw = m->s2 ? m->s2 : m->s;
	struct rf_tensor *dl = a->logits, *h = a->a[0], *dh = NULL;
	int ret;

	/* layer 1: dw2 (10, 256) = dl^T*h; db2 = sum dl; dh (n, 256) = dl*w2 */
	RF__TRY(rf_gemm(sw, 1, 0, 1.0f, dl, h, 0.0f, m->g[2]));
	RF__TRY(rf_bias_grad(sw, m->g[3], dl, 0));
	RF__NEW(dh, m, "dh", a->n, 256);
	RF__TRY(rf_gemm(s, 0, 0, 1.0f, dl, m->p[2], 0.0f, dh));
	if (hook)
		RF__TRY(hook(ctx, m, 1));
	RF__TRY(rf_relu_bwd(s, dh, dh, h));
	/* layer 0: dw1 (256, 784) = dh^T*x; db1 = sum dh (no dx: x is the input) */
	RF__TRY(rf_gemm(sw, 1, 0, 1.0f, dh, a->x, 0.0f, m->g[0]));
	RF__TRY(rf_bias_grad(sw, m->g[1], dh, 0));
	if (hook)
		RF__TRY(hook(ctx, m, 0));
out:
	rf_tensor_destroy(dh);
	return ret;
}

/* ---- LeNet ----------------------------------------------------------------------------
 * acts: a[0] c1 (n, 20, 26, 26) = relu(conv(x, c1.w) + c1.b)
 *       a[1] p1 (n, 20, 13, 13) = avgpool2(c1)
 *       a[2] c2 (n, 50, 9, 9)   = relu(conv(p1, c2.w) + c2.b)
 *       a[3] p2 (n, 50, 4, 4)   = avgpool2(c2) (floor: row and column 8 unused),
 *                                 seen as (n, 800) by f1
 *       a[4] h3 (n, 128)        = relu(p2*f1.w^T + f1.b)
 *       logits (n, 10)          = h3*f2.w^T + f2.b */

/* relu then avgpool2 (forward), avgpool2 then relu (backward): fused on the CPU (one
 * pass over the big tensor, the same bits), two ops elsewhere. */
static int rf__relu_pool_fwd(struct rf_model *m, struct rf_stream *s, struct rf_tensor *p,
			     struct rf_tensor *y)
{
	int ret;

	if (rf_device_kind(m->dev) == RF_DEVICE_CPU)
		return rf_relu_avgpool2d_fwd(s, p, y);
	ret = rf_relu_fwd(s, y, y);
	return ret < 0 ? ret : rf_avgpool2d_fwd(s, p, y, 2);
}

static int rf__pool_relu_bwd(struct rf_model *m, struct rf_stream *s, struct rf_tensor *dx,
			     struct rf_tensor *dy, struct rf_tensor *y)
{
	int ret;

	if (rf_device_kind(m->dev) == RF_DEVICE_CPU)
		return rf_avgpool2d_relu_bwd(s, dx, dy, y);
	ret = rf_avgpool2d_bwd(s, dx, dy, 2);
	return ret < 0 ? ret : rf_relu_bwd(s, dx, dx, y);
}

/* The convolutional part of the forward (conv1 ... pool2) on images [i0, i0 + k) of x,
 * c1, p1, c2 and p2: whole tensors when k == n, otherwise views of them, kept in
 * a->v[vi ...] (freed with the acts: see model.h). */
static int rf__lenet_conv_part(struct rf_model *m, struct rf_model_acts *a, struct rf_tensor *x,
			       struct rf_stream *s, int64_t i0, int64_t k, int vi)
{
	struct rf_tensor *v[5], *t[5] = { x, a->a[0], a->a[1], a->a[2], a->a[3] };
	static const int64_t per[5][3] = { { 1, 28, 28 }, { 20, 26, 26 }, { 20, 13, 13 },
					   { 50, 9, 9 }, { 50, 4, 4 } };
	int ret = 0, i;

	for (i = 0; i < 5; i++) {
		if (k == a->n) {
			v[i] = t[i];
			continue;
		}
		ret = rf_tensor_view(t[i], (size_t)(i0 * per[i][0] * per[i][1] * per[i][2]), RF_F32,
				     t[i]->name, RF_DIMS(k, per[i][0], per[i][1], per[i][2]), &v[i]);
		if (ret < 0)
			return ret;
		a->v[vi + i] = v[i];
	}
	/* x was written before its view existed, and an op on the view names only the
	 * view's variable: a fence that reads x and writes the view orders them. (The
	 * activations are new, so their views have no earlier writers.) */
	if (k != a->n)
		RF__TRY(rf_host_op(s, rf__fence_fn, NULL, &x, 1, &v[0], 1, "x_view_ready"));
	RF__TRY(rf_conv2d_fwd(s, v[1], v[0], m->p[0], m->p[1]));
	RF__TRY(rf__relu_pool_fwd(m, s, v[2], v[1]));
	RF__TRY(rf_conv2d_fwd(s, v[3], v[2], m->p[2], m->p[3]));
	RF__TRY(rf__relu_pool_fwd(m, s, v[4], v[3]));
out:
	return ret;
}

static int rf__lenet_forward(struct rf_model *m, struct rf_model_acts *a, struct rf_tensor *x)
{
	struct rf_stream *s = m->s;
	int64_t n = a->n, h = n / 2;
	int ret;

	RF__TRY(rf_tensor_reshape(x, RF_DIMS(n, 1, 28, 28)));
	RF__NEW(a->a[0], m, "c1", n, 20, 26, 26);
	RF__NEW(a->a[1], m, "p1", n, 20, 13, 13);
	RF__NEW(a->a[2], m, "c2", n, 50, 9, 9);
	RF__NEW(a->a[3], m, "p2", n, 50, 4, 4);
	/* With a second stream (CPU), each stream runs the convolutions on half of the
	 * batch: images are independent and the split is fixed, so results stay
	 * deterministic. x must be a block (a view cannot be viewed) without views. */
	if (m->s2 && m->s2 != s && h > 0 && !x->base && !x->views &&
	    rf_device_kind(m->dev) == RF_DEVICE_CPU && rf_device_kind(x->dev) == RF_DEVICE_CPU) {
		RF__TRY(rf__lenet_conv_part(m, a, x, s, 0, h, 0));
		RF__TRY(rf__lenet_conv_part(m, a, x, m->s2, h, n - h, 5));
	} else {
		RF__TRY(rf__lenet_conv_part(m, a, x, s, 0, n, 0));
	}
	RF__TRY(rf_tensor_reshape(a->a[3], RF_DIMS(n, 800)));
	RF__NEW(a->a[4], m, "h3", n, 128);
	RF__TRY(rf_gemm(s, 0, 1, 1.0f, a->a[3], m->p[4], 0.0f, a->a[4]));
	RF__TRY(rf_bias_add(s, a->a[4], m->p[5]));
	RF__TRY(rf_relu_fwd(s, a->a[4], a->a[4]));
	RF__NEW(a->logits, m, "logits", n, 10);
	RF__TRY(rf_gemm(s, 0, 1, 1.0f, a->a[4], m->p[6], 0.0f, a->logits));
	RF__TRY(rf_bias_add(s, a->logits, m->p[7]));
out:
	return ret;
}

static int rf__lenet_backward(struct rf_model *m, struct rf_model_acts *a, rf_grad_hook hook,
			      void *ctx)
{
	struct rf_stream *s = m->s, *sw = m->s2 ? m->s2 : m->s;
	struct rf_tensor *dl = a->logits, *c1 = a->a[0], *p1 = a->a[1], *c2 = a->a[2];
	struct rf_tensor *p2 = a->a[3], *h3 = a->a[4];
	struct rf_tensor *dh3 = NULL, *dp2 = NULL, *dc2 = NULL, *dp1 = NULL, *dc1 = NULL;
	int64_t n = a->n;
	int ret;

	/* layer 3 (f2): df2.w (10, 128) = dl^T*h3; df2.b; dh3 (n, 128) = dl*f2.w */
	RF__TRY(rf_gemm(sw, 1, 0, 1.0f, dl, h3, 0.0f, m->g[6]));
	RF__TRY(rf_bias_grad(sw, m->g[7], dl, 0));
	RF__NEW(dh3, m, "dh3", n, 128);
	RF__TRY(rf_gemm(s, 0, 0, 1.0f, dl, m->p[6], 0.0f, dh3));
	if (hook)
		RF__TRY(hook(ctx, m, 3));
	RF__TRY(rf_relu_bwd(s, dh3, dh3, h3));
	/* layer 2 (f1): df1.w (128, 800) = dh3^T*p2; df1.b; dp2 (n, 800) = dh3*f1.w */
	RF__TRY(rf_gemm(sw, 1, 0, 1.0f, dh3, p2, 0.0f, m->g[4]));
	RF__TRY(rf_bias_grad(sw, m->g[5], dh3, 0));
	RF__NEW(dp2, m, "dp2", n, 800);
	RF__TRY(rf_gemm(s, 0, 0, 1.0f, dh3, m->p[4], 0.0f, dp2));
	if (hook)
		RF__TRY(hook(ctx, m, 2));
	/* pool2 and relu: dc2 (n, 50, 9, 9) */
	RF__TRY(rf_tensor_reshape(dp2, RF_DIMS(n, 50, 4, 4)));
	RF__NEW(dc2, m, "dc2", n, 50, 9, 9);
	RF__TRY(rf__pool_relu_bwd(m, s, dc2, dp2, c2));
	/* layer 1 (c2): dc2.w (50, 20, 5, 5), dc2.b; dp1 (n, 20, 13, 13) */
	RF__TRY(rf_conv2d_bwd_filter(sw, m->g[2], m->g[3], dc2, p1, 0));
	RF__NEW(dp1, m, "dp1", n, 20, 13, 13);
	RF__TRY(rf_conv2d_bwd_data(s, dp1, dc2, m->p[2]));
	if (hook)
		RF__TRY(hook(ctx, m, 1));
	/* pool1 and relu: dc1 (n, 20, 26, 26); layer 0 (c1): dc1.w (20, 1, 3, 3), dc1.b (no
	 * dx). On s, right after dp1: sw is still busy with conv2's filter gradient (the
	 * larger half of the backward). On the CPU one op computes dc1 row by row as the
	 * filter gradient consumes it (the same bits, without the 13.8 MB dc1). */
	if (rf_device_kind(m->dev) == RF_DEVICE_CPU) {
		RF__TRY(rf_conv2d_bwd_filter_pool_relu(s, m->g[0], m->g[1], dp1, c1, a->x, 0));
	} else {
		RF__NEW(dc1, m, "dc1", n, 20, 26, 26);
		RF__TRY(rf__pool_relu_bwd(m, s, dc1, dp1, c1));
		RF__TRY(rf_conv2d_bwd_filter(s, m->g[0], m->g[1], dc1, a->x, 0));
	}
	if (hook)
		RF__TRY(hook(ctx, m, 0));
out:
	rf_tensor_destroy(dh3);
	rf_tensor_destroy(dp2);
	rf_tensor_destroy(dc2);
	rf_tensor_destroy(dp1);
	rf_tensor_destroy(dc1);
	return ret;
}

/* ---- entry points --------------------------------------------------------------------- */

int rf_model_forward(struct rf_model *m, struct rf_tensor *x, struct rf_tensor *y,
		     struct rf_tensor *loss, struct rf_tensor *correct, int train,
		     struct rf_model_acts **acts)
{
	struct rf_model_acts *a;
	int ret;

	if (acts)
		*acts = NULL;
	if (!x || !y || x->ndim < 1 || x->numel != (size_t)x->shape[0] * 784 ||
	    y->numel != (size_t)x->shape[0] || (train && !acts))
		return -EINVAL;
	a = rf__acts_new((int)x->shape[0], x);
	if (!a)
		return -ENOMEM;
	ret = strcmp(m->spec->name, "mlp") == 0 ? rf__mlp_forward(m, a, x)
						 : rf__lenet_forward(m, a, x);
	if (ret == 0)
		ret = rf_softmax_xent(m->s, train ? a->logits : NULL, loss, correct, a->logits, y);
	if (ret < 0 || !train) {
		rf_model_acts_destroy(a);
		return ret;
	}
	*acts = a;
	return 0;
}

int rf_model_backward(struct rf_model *m, struct rf_model_acts *a, rf_grad_hook hook,
		      void *ctx)
{
	int ret;

	if (!a)
		return -EINVAL;
	ret = strcmp(m->spec->name, "mlp") == 0 ? rf__mlp_backward(m, a, hook, ctx)
						 : rf__lenet_backward(m, a, hook, ctx);
	rf_model_acts_destroy(a);
	return ret;
}
