/* train/net-bwd.c -- the backward pass of a layer table: from the logits' gradient,
 * layer by layer from the last, one gradient tensor per node. Weight gradients go to
 * the replica's second stream (when it has one), data gradients stay on its first, so
 * the two run side by side; the hook follows each layer with parameters. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net-impl.h"
#include "rf-internal.h"

/* How many nodes hold gradient t. */
static int rf__refs(const struct rf_model_acts *a, const struct rf_tensor *t)
{
	int r = 0;

	for (unsigned j = 0; j <= a->nt; j++)
		r += a->dg[j] == t;
	return r;
}

/* Free gradient t unless a node still holds it (the logits' gradient belongs to the
 * forward's nodes). */
static void rf__drop(struct rf_model_acts *a, struct rf_tensor *t)
{
	if (t && t != a->node[a->nt] && rf__refs(a, t) == 0)
		rf__acts_free(a, t);
}

/* Node j's gradient is consumed. */
static void rf__release(struct rf_model_acts *a, unsigned j)
{
	struct rf_tensor *t = a->dg[j];

	a->dg[j] = NULL;
	rf__drop(a, t);
}

/* Add t (owned by the caller until this returns) to node j's gradient. */
static int rf__contrib(struct rf_model *m, struct rf_model_acts *a, unsigned j,
		       struct rf_tensor *t)
{
	struct rf_tensor *in[2], *u;
	int ret;

	if (!a->need[j]) {                    /* nothing upstream learns */
		rf__drop(a, t);
		return 0;
	}
	if (!a->dg[j]) {
		a->dg[j] = t;
		return 0;
	}
	/* a sum: in place into the node's own gradient, or a new tensor if it is shared */
	if (rf__refs(a, a->dg[j]) == 1 && a->dg[j] != a->node[a->nt]) {
		ret = rf_axpy(m->s, a->dg[j], 1.0f, t);
		rf__drop(a, t);
		return ret;
	}
	in[0] = a->dg[j];
	in[1] = t;
	if ((ret = rf_tensor_create_layout(m->dev, t->dtype, t->layout, "dsum", t->ndim, t->shape,
					   &u)) < 0) {
		rf__drop(a, t);
		return ret;
	}
	ret = rf_sum(m->s, u, in, 2);
	rf__release(a, j);
	rf__drop(a, t);
	a->dg[j] = u;
	return ret;
}

/* A new gradient shaped as node j (n rows), not owned by the acts' forward list. */
static int rf__grad_new(struct rf_model *m, struct rf_model_acts *a, unsigned j,
			struct rf_tensor **out)
{
	int64_t sh[4];
	int nd = rf__node_shape(m->spec, j, a->n, sh);

	return rf__net_tensor(m, "dnode", nd, sh, out);
}

/* The CPU's fused backward of conv (on the model's input, single channel) -> ReLU ->
 * 2x2 average pool: one op computes the filter gradient straight from the pooled
 * gradient g. Returns 1 if it applied, 0 if not, or -errno. */
static int rf__conv1_pool_relu(struct rf_model *m, struct rf_model_acts *a, unsigned pool,
			       struct rf_tensor *g, rf_grad_hook hook, void *ctx)
{
	const struct rf_model_spec *sp = m->spec;
	unsigned r = pool - 1, c;
	const struct rf_layer_info *fc;
	const struct rf_layer *lc;
	int ret;

	if (sp->info[r].in < 1)
		return 0;
	c = (unsigned)sp->info[r].in - 1;
	lc = &sp->table[c];
	fc = &sp->info[c];
	if (lc->kind != RF_LAYER_CONV || fc->in != 0 || sp->in.c != 1 || a->need[0] ||
	    sp->info[c].uses != 1 ||
	    lc->k * lc->k > 25 || fc->w > 64 || (lc->stride > 1) || lc->pad || rf__net_formatted(m) ||
	    rf_device_supports(m->dev, "conv2d_bwd_filter_pool_relu", RF_F32, RF_LAYOUT_ROWMAJOR))
		return 0;
	RF__TRY_RET(rf_conv2d_bwd_filter_pool_relu(m->s, m->g[fc->p0], lc->bias ? m->g[fc->p0 + 1] : NULL,
					       g, a->node[r + 1], a->x, 0));
	a->fused[r] = a->fused[c] = 2;      /* both done */
	if (hook)
		RF__TRY_RET(hook(ctx, m, (unsigned)fc->pl));
	return 1;
}

static int rf__layer_bwd(struct rf_model *m, struct rf_model_acts *a, unsigned i,
			 rf_grad_hook hook, void *ctx)
{
	const struct rf_model_spec *sp = m->spec;
	const struct rf_layer *l = &sp->table[i];
	const struct rf_layer_info *f = &sp->info[i];
	struct rf_stream *s = m->s, *sw = m->s2 ? m->s2 : m->s;
	struct rf_tensor *g = a->dg[i + 1], *x = a->node[f->in], *y = a->node[i + 1];
	struct rf_tensor **p = &m->p[f->p0], **gp = &m->g[f->p0], *dx = NULL;
	unsigned in = (unsigned)f->in;
	int ret = 0, st = l->stride > 0 ? l->stride : 1;
	int64_t sh[4];

	if (!g || a->fused[i] == 2)
		return 0;
	switch (l->kind) {
	case RF_LAYER_FLATTEN:
		if (!a->need[in])
			return 0;
		if (a->node[i + 1] != a->node[in]) {
			/* the forward converted a formatted 4-D node: the gradient back into
			 * that format (g keeps its shape for whoever else holds it) */
			int nd = rf__node_shape(sp, in, a->n, sh);
			int gnd = g->ndim;
			int64_t gsh[4];
			memcpy(gsh, g->shape, sizeof(gsh));
			RF__TRY_RET(rf__grad_new(m, a, in, &dx));
			if ((ret = rf_tensor_reshape(g, nd, sh)) == 0) {
				ret = rf_convert(s, dx, g);
				rf_tensor_reshape(g, gnd, gsh);
			}
			if (ret < 0) {
				rf__acts_free(a, dx);
				return ret;
			}
			return rf__contrib(m, a, in, dx);
		}
		if (rf__refs(a, g) > 1 || g == a->node[a->nt]) {   /* others hold g as it is */
			RF__TRY_RET(rf_tensor_create(m->dev, RF_F32, "dflat", g->ndim, g->shape, &dx));
			if ((ret = rf_sum(s, dx, &g, 1)) < 0) {
				rf__acts_free(a, dx);
				return ret;
			}
			g = dx;
		} else {
			a->dg[i + 1] = NULL;          /* handed on, not freed */
		}
		RF__TRY_RET(rf_tensor_reshape(g, rf__node_shape(sp, in, a->n, sh), sh));
		return rf__contrib(m, a, in, g);
	case RF_LAYER_DENSE:
		RF__TRY_RET(rf_gemm(sw, 1, 0, 1.0f, g, x, 0.0f, gp[0]));
		if (l->bias)
			RF__TRY_RET(rf_bias_grad(sw, gp[1], g, 0));
		if (a->need[in]) {
			RF__TRY_RET(rf_tensor_create(m->dev, RF_F32, "dx", RF_DIMS(a->n, x->shape[1]), &dx));
			ret = rf_gemm(s, 0, 0, 1.0f, g, p[0], 0.0f, dx);
		}
		break;
	case RF_LAYER_CONV: {
		/* in the compute format (m->q, m->gq) the gradients are converted into the
		 * f32 masters' before the hook sees them */
		struct rf_tensor *gw = m->gq[f->p0] ? m->gq[f->p0] : gp[0];
		struct rf_tensor *gb = !l->bias ? NULL : m->gq[f->p0 + 1] ? m->gq[f->p0 + 1] : gp[1];
		struct rf_tensor *w = m->q[f->p0] ? m->q[f->p0] : p[0];
		RF__TRY_RET(rf_conv2d_bwd_filter(sw, gw, gb, g, x, 0, st, l->pad));
		if (gw != gp[0])
			RF__TRY_RET(rf_convert(sw, gp[0], gw));
		if (gb && gb != gp[1])
			RF__TRY_RET(rf_convert(sw, gp[1], gb));
		if (a->need[in]) {
			RF__TRY_RET(rf__grad_new(m, a, in, &dx));
			ret = rf_conv2d_bwd_data(s, dx, g, w, st, l->pad);
		}
		break;
	}
	case RF_LAYER_BN:
		RF__TRY_RET(rf__grad_new(m, a, in, &dx));
		if (i + 1 < a->nt && a->fused[i + 1])   /* with its ReLU (net.c): g unmasked */
			ret = rf_batchnorm_relu_bwd(s, dx, gp[0], gp[1], g, a->node[i + 2], x,
						    a->mean[i], a->invstd[i], p[0]);
		else
			ret = rf_batchnorm_bwd(s, dx, gp[0], gp[1], g, x, a->mean[i], a->invstd[i],
					       p[0]);
		break;
	case RF_LAYER_RELU:
		if (!a->need[in])
			return 0;
		if (a->fused[i] && sp->table[i - 1].kind == RF_LAYER_BN) {
			/* the batch norm's fused backward masks g: handed on as it is */
			a->dg[i + 1] = NULL;
			return rf__contrib(m, a, in, g);
		}
		if (rf__refs(a, g) == 1 && g != a->node[a->nt]) {
			RF__TRY_RET(rf_relu_bwd(s, g, g, y));
			a->dg[i + 1] = NULL;          /* handed on, not freed */
			return rf__contrib(m, a, in, g);
		}
		RF__TRY_RET(rf__grad_new(m, a, in, &dx));
		ret = rf_relu_bwd(s, dx, g, y);
		break;
	case RF_LAYER_AVGPOOL:
		if (a->fused[i]) {            /* with the ReLU before it */
			unsigned r = i - 1, rin = (unsigned)sp->info[r].in;
			/* (fused forward: the device has the fused kernels, net.c) */
			if ((ret = rf__conv1_pool_relu(m, a, i, g, hook, ctx)) != 0)
				return ret < 0 ? ret : 0;
			RF__TRY_RET(rf__grad_new(m, a, rin, &dx));
			ret = rf_avgpool2d_relu_bwd(s, dx, g, a->node[r + 1]);
			a->fused[r] = 2;
			if (ret < 0) {
				rf__acts_free(a, dx);
				return ret;
			}
			return rf__contrib(m, a, rin, dx);
		}
		RF__TRY_RET(rf__grad_new(m, a, in, &dx));
		ret = rf_avgpool2d_bwd(s, dx, g, l->k);
		break;
	case RF_LAYER_MAXPOOL:
		RF__TRY_RET(rf__grad_new(m, a, in, &dx));
		ret = rf_maxpool2d_bwd(s, dx, g, x, l->k, l->stride > 0 ? l->stride : l->k);
		break;
	case RF_LAYER_GAP:
		RF__TRY_RET(rf__grad_new(m, a, in, &dx));
		if (a->gapc[i]) {              /* the f32 gradient into the compute dtype */
			struct rf_tensor *gc = NULL;
			const struct rf_tensor *t = a->gapc[i];
			if ((ret = rf_tensor_create(m->dev, t->dtype, "dgapc", t->ndim, t->shape,
						    &gc)) == 0 &&
			    (ret = rf_convert(s, gc, g)) == 0)
				ret = rf_gavgpool_bwd(s, dx, gc);
			rf__acts_free(a, gc);
			break;
		}
		ret = rf_gavgpool_bwd(s, dx, g);
		break;
	case RF_LAYER_ADD:
		RF__TRY_RET(rf__contrib(m, a, in, g));
		return rf__contrib(m, a, (unsigned)f->in2, g);
	}
	if (ret == 0 && f->pl >= 0 && hook)
		ret = hook(ctx, m, (unsigned)f->pl);
	if (ret < 0) {
		rf__acts_free(a, dx);
		return ret;
	}
	return dx ? rf__contrib(m, a, in, dx) : 0;
}

int rf_model_backward(struct rf_model *m, struct rf_model_acts *a, rf_grad_hook hook,
		      void *ctx)
{
	int ret = 0;

	if (!m || !a) {  /* acts consumed all the same, as on every error */
		if (a && !a->keep)
			rf_model_acts_destroy(a);
		return rf__fail(-EINVAL, "rf_model_backward: NULL %s", m ? "acts" : "model");
	}
	a->dg[a->nt] = a->node[a->nt];           /* the logits hold dlogits */
	for (unsigned i = a->nt; i-- > 0 && ret == 0;) {
		ret = rf__layer_bwd(m, a, i, hook, ctx);
		rf__release(a, i + 1);
	}
	if (ret == 0)
		ret = a->keep_err;
	if (!a->keep)
		rf_model_acts_destroy(a);
	return ret;
}
