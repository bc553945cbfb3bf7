/* train/net.c -- the forward of a model's layer table (model.h), pushed as ops.h
 * calls; the backward is net-bwd.c. The forward allocates each node once (ReLU and
 * residual adds work in place where nothing needs the value they overwrite), splits
 * the leading convolutions of a CPU batch over the replica's two streams, and fuses
 * ReLU + 2x2 average pooling on the CPU. (The backward walks the table from the end,
 * keeping one gradient per node -- shared where an ADD hands the same gradient to both
 * inputs -- and calls the hook once per layer with parameters, last first.) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net-impl.h"
#include "rf-internal.h"

struct rf_tensor *rf_model_acts_dlogits(struct rf_model_acts *a)
{
	return a ? a->node[a->nt] : NULL;
}

static struct rf_model_acts *rf__acts_new(const struct rf_model_spec *sp, int n,
					  struct rf_tensor *x, int train)
{
	unsigned nt = sp->ntable;
	struct rf_model_acts *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->n = n;
	a->train = train;
	a->x = x;
	a->x_ndim = x->ndim;
	memcpy(a->x_shape, x->shape, sizeof(a->x_shape));
	a->nt = nt;
	a->node = calloc(nt + 1, sizeof(*a->node));
	a->root = calloc(nt + 1, sizeof(*a->root));
	a->mean = calloc(nt, sizeof(*a->mean));
	a->invstd = calloc(nt, sizeof(*a->invstd));
	a->fused = calloc(nt + 1, 1);
	a->need = calloc(nt + 1, 1);
	a->own = calloc(4 * nt + 2, sizeof(*a->own));
	a->views = calloc(2 * (nt + 1), sizeof(*a->views));
	a->dg = calloc(nt + 1, sizeof(*a->dg));
	a->gapc = calloc(nt + 1, sizeof(*a->gapc));
	if (!a->node || !a->root || !a->mean || !a->invstd || !a->fused || !a->need || !a->own ||
	    !a->views || !a->dg || !a->gapc) {
		rf_model_acts_destroy(a);
		return NULL;
	}
	a->node[0] = x;
	return a;
}

void rf__acts_free(struct rf_model_acts *a, struct rf_tensor *t)
{
	if (!t)
		return;
	if (!a->keep) {
		rf_tensor_destroy(t);
		return;
	}
	if (a->nkept == a->capkept) {
		unsigned cap = a->capkept ? 2 * a->capkept : 32;
		struct rf_tensor **k = realloc(a->kept, cap * sizeof(*k));
		if (!k) { /* cannot keep it, and a deletion now would free memory the
			   * capture's ops use: leave it (a leak), and backward fails */
			a->keep_err = -ENOMEM;
			return;
		}
		a->kept = k;
		a->capkept = cap;
	}
	a->kept[a->nkept++] = t;
}

/* A host op that does nothing: its reads and writes order other ops. */
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
	/* Views of the borrowed input: a later write to x must wait for the ops that read
	 * them, but once they are freed a write to x no longer names their variables. A
	 * fence that reads them and writes x is ordered after those reads. */
	if (a->nxviews && rf_host_op(NULL, rf__fence_fn, NULL, a->views, a->nxviews, &a->x, 1,
				     "x_views_done") < 0)
		rf_engine_wait_idle(rf_device_engine(a->x->dev)); /* no fence: drain */
	if (a->x)
		rf_tensor_reshape(a->x, a->x_ndim, a->x_shape);
	for (i = 0; a->views && i < a->nviews; i++)
		rf_tensor_destroy(a->views[i]);
	for (i = 0; a->dg && i <= a->nt; i++) {
		struct rf_tensor *t = a->dg[i];
		if (!t || t == a->node[a->nt])
			continue;
		for (unsigned j = i; j <= a->nt; j++)
			if (a->dg[j] == t)
				a->dg[j] = NULL;
		rf_tensor_destroy(t);
	}
	for (i = 0; a->own && i < a->nown; i++)
		rf_tensor_destroy(a->own[i]);
	for (i = 0; i < a->nkept; i++)
		rf_tensor_destroy(a->kept[i]);
	free(a->kept);
	free(a->node);
	free(a->root);
	free(a->mean);
	free(a->invstd);
	free(a->fused);
	free(a->need);
	free(a->own);
	free(a->views);
	free(a->dg);
	free(a->gapc);
	free(a);
}


int rf__net_tensor(struct rf_model *m, const char *name, int ndim, const int64_t *shape,
		   struct rf_tensor **out)
{
	if (ndim == 4)
		return rf_tensor_create_layout(m->dev, m->act_dtype, m->act_layout, name, ndim,
					       shape, out);
	return rf_tensor_create(m->dev, RF_F32, name, ndim, shape, out);
}

int rf__net_new(struct rf_model *m, struct rf_model_acts *a, const char *what, unsigned i,
		   int ndim, const int64_t *shape, struct rf_tensor **out)
{
	char name[40];
	int ret;

	snprintf(name, sizeof(name), "L%u.%s", i, what);
	if ((ret = rf__net_tensor(m, name, ndim, shape, out)) < 0)
		return ret;
	a->own[a->nown++] = *out;
	return 0;
}

int rf__node_shape(const struct rf_model_spec *sp, unsigned j, int64_t n, int64_t *sh)
{
	if (j == 0) {
		sh[0] = n, sh[1] = sp->in.c, sh[2] = sp->in.h, sh[3] = sp->in.w;
		return 4;
	}
	const struct rf_layer_info *f = &sp->info[j - 1];
	sh[0] = n;
	sh[1] = f->c;
	if (!f->h)
		return 2;
	sh[2] = f->h;
	sh[3] = f->w;
	return 4;
}

/* May layer i overwrite its input node? Not the model's input, nothing else reads it,
 * and its producer's backward does not need the value (a ReLU's does). */
static int rf__may_overwrite(const struct rf_model_spec *sp, unsigned in)
{
	enum rf_layer_kind k;

	if (in == 0 || sp->info[in - 1].uses != 1)
		return 0;
	k = sp->table[in - 1].kind;
	return k == RF_LAYER_CONV || k == RF_LAYER_BN || k == RF_LAYER_DENSE || k == RF_LAYER_ADD;
}

unsigned rf__layer_ops(enum rf_layer_kind k, const char *ops[4])
{
	static const char *const tab[][4] = {
		[RF_LAYER_DENSE] = { "gemm", "bias_add", "bias_grad" },
		[RF_LAYER_CONV] = { "conv2d_fwd", "conv2d_bwd_data", "conv2d_bwd_filter" },
		[RF_LAYER_BN] = { "batchnorm_fwd", "batchnorm_eval", "batchnorm_bwd" },
		[RF_LAYER_RELU] = { "relu_fwd", "relu_bwd" },
		[RF_LAYER_AVGPOOL] = { "avgpool2d_fwd", "avgpool2d_bwd" },
		[RF_LAYER_MAXPOOL] = { "maxpool2d_fwd", "maxpool2d_bwd" },
		[RF_LAYER_GAP] = { "gavgpool_fwd", "gavgpool_bwd" },
		[RF_LAYER_ADD] = { "sum", "axpy" },
		[RF_LAYER_FLATTEN] = { "sum" },
	};
	unsigned n = 0;

	if ((unsigned)k >= sizeof(tab) / sizeof(tab[0]))
		return 0;
	for (; n < 4 && tab[k][n]; n++)
		ops[n] = tab[k][n];
	return n;
}

/* 1 when the model's device runs the fused op named (in the model's format): the
 * fusions below are taken where it does. */
static int rf__fuses(const struct rf_model *m, const char *op)
{
	return rf_device_supports(m->dev, op, m->act_dtype, m->act_layout) == 0;
}

/* Allocate every node of the forward (whole batch), decide aliasing and fusion. */
static int rf__plan(struct rf_model *m, struct rf_model_acts *a)
{
	const struct rf_model_spec *sp = m->spec;
	int fuse = rf__fuses(m, "relu_avgpool2d_fwd") && rf__fuses(m, "avgpool2d_relu_bwd"), ret;
	int fuse_add = rf__fuses(m, "add_relu_fwd");
	int fuse_bn = rf__fuses(m, a->train ? "batchnorm_relu_fwd" : "batchnorm_relu_eval") &&
		      (!a->train || rf__fuses(m, "batchnorm_relu_bwd"));
	int64_t sh[4];

	for (unsigned i = 0; i < a->nt; i++) {
		const struct rf_layer *l = &sp->table[i];
		const struct rf_layer_info *f = &sp->info[i];
		int nd = rf__node_shape(sp, i + 1, a->n, sh);
		struct rf_tensor **out = &a->node[i + 1];

		a->need[i + 1] = f->np > 0 || a->need[f->in] || (f->in2 > 0 && a->need[f->in2]);
		/* a flatten of a formatted 4-D node converts it: a node of its own */
		int flat_view = l->kind == RF_LAYER_FLATTEN &&
				!(rf__net_formatted(m) && a->node[f->in]->ndim == 4);
		if (flat_view || ((l->kind == RF_LAYER_RELU || l->kind == RF_LAYER_ADD) &&
				  rf__may_overwrite(sp, (unsigned)f->in))) {
			*out = a->node[f->in];
			a->root[i + 1] = a->root[f->in];
		} else {
			RF__TRY_RET(rf__net_new(m, a, "y", i, nd, sh, out));
			a->root[i + 1] = (int)i + 1;
		}
		if (l->kind == RF_LAYER_BN && a->train) {
			int64_t c = f->c;
			RF__TRY_RET(rf__net_new(m, a, "mean", i, 1, &c, &a->mean[i]));
			RF__TRY_RET(rf__net_new(m, a, "invstd", i, 1, &c, &a->invstd[i]));
		}
		/* a global pooling computes in the compute dtype, then converts to f32 */
		if (l->kind == RF_LAYER_GAP && m->act_dtype != RF_F32) {
			char name[40];
			snprintf(name, sizeof(name), "L%u.gapc", i);
			RF__TRY_RET(rf_tensor_create(m->dev, m->act_dtype, name, nd, sh, &a->gapc[i]));
			a->own[a->nown++] = a->gapc[i];
		}
		/* an in-place ReLU read only by a 2x2 average pool is one op with it, where
		 * the device has the fused kernels */
		if (fuse && l->kind == RF_LAYER_AVGPOOL && l->k == 2 && f->in == (int)i && i > 0 &&
		    sp->table[i - 1].kind == RF_LAYER_RELU && sp->info[i - 1].uses == 1 &&
		    a->root[i] != (int)i && !a->fused[i - 1])
			a->fused[i] = 1;
		/* a ReLU on a residual sum read by nothing else is one op with it (one pass
		 * over the activations instead of two; the same bits) */
		if (fuse_add && l->kind == RF_LAYER_RELU && i > 0 && f->in == (int)i &&
		    sp->table[i - 1].kind == RF_LAYER_ADD && sp->info[i - 1].uses == 1)
			a->fused[i] = 1;
		/* so is a ReLU on a batch norm read by nothing else (ResNet-18's seventeen):
		 * its backward then masks dy inside the batch norm's */
		if (fuse_bn && l->kind == RF_LAYER_RELU && i > 0 && f->in == (int)i &&
		    sp->table[i - 1].kind == RF_LAYER_BN && sp->info[i - 1].uses == 1)
			a->fused[i] = 1;
	}
	return 0;
}

/* Push layer i's forward with node tensors T (whole tensors or views of one part). */
static int rf__layer_fwd(struct rf_model *m, struct rf_model_acts *a, unsigned i,
			 struct rf_stream *s, struct rf_tensor **T)
{
	const struct rf_layer *l = &m->spec->table[i];
	const struct rf_layer_info *f = &m->spec->info[i];
	struct rf_tensor *x = T[f->in], *y = T[i + 1], **p = &m->p[f->p0], *in2[2];
	struct rf_tensor *cp[2] = { NULL, NULL };  /* a convolution's, in the compute format */
	int ret = 0, st = l->stride > 0 ? l->stride : 1;

	for (int k = 0; l->kind == RF_LAYER_CONV && k < f->np && k < 2; k++)
		cp[k] = m->q[f->p0 + k] ? m->q[f->p0 + k] : m->p[f->p0 + k];

	if (a->fused[i])
		return 0;
	switch (l->kind) {
	case RF_LAYER_FLATTEN:
		if (y == x)
			return rf_tensor_reshape(x, RF_DIMS(x->shape[0], f->c));
		/* from the compute format to f32 row-major, then (n, c*h*w) */
		RF__TRY_RET(rf_tensor_reshape(y, x->ndim, x->shape));
		RF__TRY_RET(rf_convert(s, y, x));
		return rf_tensor_reshape(y, RF_DIMS(x->shape[0], f->c));
	case RF_LAYER_DENSE:
		RF__TRY_RET(rf_gemm(s, 0, 1, 1.0f, x, p[0], 0.0f, y));
		return l->bias ? rf_bias_add(s, y, p[1]) : 0;
	case RF_LAYER_CONV:
		return rf_conv2d_fwd(s, y, x, cp[0], l->bias ? cp[1] : NULL, st, l->pad);
	case RF_LAYER_BN:
		if (i + 1 < a->nt && a->fused[i + 1])
			return rf_batchnorm_relu_fwd(s, T[i + 2], a->mean[i], a->invstd[i],
						     m->b[f->b0], m->b[f->b0 + 1], x, p[0], p[1],
						     a->train, 1e-5f, 0.1f);
		return rf_batchnorm_fwd(s, y, a->mean[i], a->invstd[i], m->b[f->b0], m->b[f->b0 + 1],
					x, p[0], p[1], a->train, 1e-5f, 0.1f);
	case RF_LAYER_RELU:
		if (i + 1 < a->nt && a->fused[i + 1])
			return rf_relu_avgpool2d_fwd(s, T[i + 2], y);
		return rf_relu_fwd(s, y, x);
	case RF_LAYER_AVGPOOL:
		return rf_avgpool2d_fwd(s, y, x, l->k);
	case RF_LAYER_MAXPOOL:
		return rf_maxpool2d_fwd(s, y, x, l->k, l->stride > 0 ? l->stride : l->k);
	case RF_LAYER_GAP:
		if (!a->gapc[i])
			return rf_gavgpool_fwd(s, y, x);
		RF__TRY_RET(rf_gavgpool_fwd(s, a->gapc[i], x));
		return rf_convert(s, y, a->gapc[i]);
	case RF_LAYER_ADD:
		if (i + 1 < a->nt && a->fused[i + 1] && m->spec->table[i + 1].kind == RF_LAYER_RELU)
			return rf_add_relu_fwd(s, T[i + 2], x, T[f->in2]);
		in2[0] = x;
		in2[1] = T[f->in2];
		return rf_sum(s, y, in2, 2);
	}
	return -EINVAL;
}

/* The multiple of g nearest n/2 (the lower one on a tie) strictly inside (0, n), or 0 */
static int64_t rf__split_at(int64_t n, int64_t g)
{
	int64_t lo = n / 2 / g * g, hi = lo + g;

	if (lo > 0 && (hi >= n || n / 2 - lo <= hi - n / 2))
		return lo;
	return hi < n ? hi : 0;
}

static int64_t rf__gcd(int64_t a, int64_t b)
{
	while (b) {
		int64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* The leading layers that work image by image (convolutions, ReLU, pooling, each on
 * the previous output): with a second CPU stream each stream runs them on a part of
 * the batch, images [0, *h) and [*h, n). Images are independent, but a convolution
 * computes groups of them in one GEMM whose rounding may depend on its width: *h is a
 * multiple of every split convolution's group (rf_conv2d_fwd_group), nearest n/2, so
 * each part runs the whole batch's GEMM calls and the bits are those of no split (and
 * of the NHWC path, which does not split). A convolution whose group leaves no such
 * *h ends the prefix. */
static unsigned rf__split_prefix(const struct rf_model *m, const struct rf_model_acts *a,
				 int64_t *h)
{
	const struct rf_model_spec *sp = m->spec;
	const struct rf_tensor *x = a->x;
	int64_t g = 1;
	unsigned i;

	*h = 0;
	if (!m->s2 || m->s2 == m->s || a->n < 2 || x->base || x->views || rf__net_formatted(m) ||
	    !rf_device_host_memory(m->dev) || !rf_device_host_memory(x->dev))
		return 0;
	for (i = 0; i < a->nt; i++) {
		const struct rf_layer *l = &sp->table[i];
		const struct rf_layer_info *f = &sp->info[i];
		enum rf_layer_kind k = l->kind;
		if (f->in != (int)i || (k != RF_LAYER_CONV && k != RF_LAYER_RELU &&
					k != RF_LAYER_AVGPOOL && k != RF_LAYER_MAXPOOL))
			break;
		if (k == RF_LAYER_CONV) {
			const struct rf_tensor *w = m->q[f->p0] ? m->q[f->p0] : m->p[f->p0];
			int cg = rf_conv2d_fwd_group(m->dev, a->node[f->in], w,
						     l->stride > 0 ? l->stride : 1, l->pad);
			int64_t lcm = cg > 0 ? g / rf__gcd(g, cg) * cg : 0;
			if (cg <= 0 || !rf__split_at(a->n, lcm))
				break;
			g = lcm;
		}
	}
	/* a fused ReLU + pool stays together */
	if (i > 0 && i < a->nt && a->fused[i])
		i--;
	if (i)
		*h = rf__split_at(a->n, g);
	return *h ? i : 0;
}

/* Layers [0, np) on images [i0, i0 + k) on stream s, through views of their nodes. */
static int rf__fwd_part(struct rf_model *m, struct rf_model_acts *a, unsigned np,
			struct rf_stream *s, int64_t i0, int64_t k)
{
	struct rf_tensor *T[RF_MODEL_MAX_TABLE + 1] = { 0 };
	int ret;

	for (unsigned j = 0; j <= np; j++) {
		struct rf_tensor *t = a->node[j];
		size_t per = t->numel / (size_t)t->shape[0];
		if (a->root[j] != (int)j) {
			T[j] = T[a->root[j]];
			continue;
		}
		int64_t shp[4];
		memcpy(shp, t->shape, sizeof(shp));
		shp[0] = k;
		RF__TRY_RET(rf_tensor_view(t, (size_t)i0 * per, RF_F32, t->name, t->ndim, shp, &T[j]));
		/* x's views first in the list: destroy fences them (see there) */
		if (j == 0) {
			memmove(a->views + 1, a->views, a->nviews * sizeof(*a->views));
			a->views[0] = T[j];
			a->nxviews++;
		} else {
			a->views[a->nviews] = T[j];
		}
		a->nviews++;
	}
	/* x was written before its view existed, and an op on the view names only the
	 * view's variable: a fence that reads x and writes the view orders them. */
	RF__TRY_RET(rf_host_op(s, rf__fence_fn, NULL, &a->x, 1, &T[0], 1, "x_view_ready"));
	for (unsigned i = 0; i < np; i++)
		RF__TRY_RET(rf__layer_fwd(m, a, i, s, T));
	return 0;
}

static int rf__forward(struct rf_model *m, struct rf_model_acts *a)
{
	unsigned np, i = 0;
	int ret;

	RF__TRY_RET(rf_tensor_reshape(a->x, RF_DIMS(a->n, m->spec->in.c, m->spec->in.h,
						 m->spec->in.w)));
	/* the edges: the convolutions' weights from their f32 masters, and the input into
	 * the compute format -- unless it comes in it (a loader asked for the model's
	 * format, rf_loader_opts.x_dtype/x_layout: the decode was its only conversion) */
	for (unsigned k = 0; rf__net_formatted(m) && k < m->spec->ntensors; k++)
		if (m->q[k])
			RF__TRY_RET(rf_convert(m->s, m->q[k], m->p[k]));
	if (a->x->dtype != m->act_dtype || a->x->layout != m->act_layout) {
		RF__TRY_RET(rf__net_new(m, a, "x", 0, 4, a->x->shape, &a->node[0]));
		RF__TRY_RET(rf_convert(m->s, a->node[0], a->x));
	}
	RF__TRY_RET(rf__plan(m, a));
	int64_t h;
	np = rf__split_prefix(m, a, &h);
	if (np) {
		RF__TRY_RET(rf__fwd_part(m, a, np, m->s, 0, h));
		RF__TRY_RET(rf__fwd_part(m, a, np, m->s2, h, a->n - h));
		i = np;
	}
	for (; i < a->nt; i++)
		RF__TRY_RET(rf__layer_fwd(m, a, i, m->s, a->node));
	return 0;
}

int rf_model_forward(struct rf_model *m, struct rf_tensor *x, struct rf_tensor *y,
		     struct rf_tensor *loss, struct rf_tensor *correct, int train,
		     struct rf_model_acts **acts)
{
	struct rf_model_acts *a;
	struct rf_tensor *logits;
	int ret;

	if (acts)
		*acts = NULL;
	if (!m || !x || !y || x->ndim < 1 ||
	    x->numel != (size_t)x->shape[0] * m->spec->in.c * m->spec->in.h * m->spec->in.w ||
	    y->numel != (size_t)x->shape[0] || (train && !acts)) {
		if (!m || !x || !y || (train && !acts))
			return rf__fail(-EINVAL, "rf_model_forward: %s", !m || !x || !y ?
					"NULL model, x or y" : "training needs acts");
		return rf__fail(-EINVAL, "rf_model_forward: x must be (n, %d, %d, %d) (or n rows "
				"of %d) and y (n)", m->spec->in.c, m->spec->in.h, m->spec->in.w,
				m->spec->in.c * m->spec->in.h * m->spec->in.w);
	}
	a = rf__acts_new(m->spec, (int)x->shape[0], x, train);
	if (!a)
		return rf__fail(-ENOMEM, "rf_model_forward: no memory for the activations");
	a->keep = train && m->keep_acts;
	ret = rf__forward(m, a);
	logits = a->node[a->nt];
	if (ret == 0)
		ret = rf_softmax_xent(m->s, train ? logits : NULL, loss, correct, logits, y);
	if (ret < 0 && a->keep) {
		*acts = a;              /* freed by the caller, once the capture has ended */
		return ret;
	}
	if (ret < 0 || !train) {
		rf_model_acts_destroy(a);
		return ret;
	}
	*acts = a;
	return 0;
}
