/* train/model.c -- a replica of a model (model.h): one parameter block and one
 * gradient block carved into views, the running statistics' block, initialisation
 * and the optimiser's update. The tables are in layers.c; forward and backward in
 * net.c and net-bwd.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "net-impl.h"
#include "ops.h"
#include "rf-internal.h"

/* ---- a replica ------------------------------------------------------------------------ */

/* The running statistics: one block, a view each; means 0, variances 1 (PyTorch's). */
static int rf__buffers(struct rf_model *m, const char *tag)
{
	const struct rf_model_spec *sp = m->spec;
	char name[40];
	int ret;

	snprintf(name, sizeof(name), "%s%sbuffers", tag ? tag : "", tag ? "." : "");
	if ((ret = rf_tensor_create(m->dev, RF_F32, name, RF_DIMS((int64_t)sp->buf_numel),
				    &m->bufs)) < 0)
		return ret;
	for (unsigned i = 0; i < sp->nbufs; i++) {
		const struct rf_param_spec *p = &sp->b[i];
		snprintf(name, sizeof(name), "%s%s%s", tag ? tag : "", tag ? "." : "", p->name);
		if ((ret = rf_tensor_view(m->bufs, p->offset, RF_F32, name, p->ndim, p->shape,
					  &m->b[i])) < 0)
			return ret;
	}
	if ((ret = rf_fill(m->s, m->bufs, 0.0f)) < 0)
		return ret;
	for (unsigned i = 0; i < sp->nbufs && ret == 0; i++)
		if (sp->b[i].role == RF_PARAM_RUN_VAR)
			ret = rf_fill(m->s, m->b[i], 1.0f);
	return ret;
}

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
	m->act_dtype = RF_F32;
	m->act_layout = RF_LAYOUT_ROWMAJOR;
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
	if (spec->nbufs && (ret = rf__buffers(m, tag)) < 0)
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
		rf_tensor_destroy(m->q[i]);
		rf_tensor_destroy(m->gq[i]);
		rf_tensor_destroy(m->p[i]);
		rf_tensor_destroy(m->g[i]);
		rf_tensor_destroy(m->v[i]);
		rf_tensor_destroy(m->v2[i]);
	}
	for (i = 0; i < RF_MODEL_MAX_BUFFERS; i++)
		rf_tensor_destroy(m->b[i]);
	rf_tensor_destroy(m->bufs);
	rf_tensor_destroy(m->mom2);
	rf_tensor_destroy(m->params);
	rf_tensor_destroy(m->grads);
	rf_tensor_destroy(m->mom);
	free(m);
}

int rf_model_set_format(struct rf_model *m, enum rf_tdtype dt, enum rf_layout layout)
{
	const struct rf_model_spec *sp;
	const char *ops[4];
	int ret;

	if (!m)
		return rf__fail(-EINVAL, "rf_model_set_format: no model");
	sp = m->spec;
	if ((dt != RF_F32 && dt != RF_BF16 && dt != RF_F16) ||
	    (layout != RF_LAYOUT_ROWMAJOR && layout != RF_LAYOUT_NHWC))
		return rf__fail(-EINVAL, "rf_model_set_format: %s %s: a float dtype (f32, bf16, "
				"f16) and row-major or NHWC expected", rf_tdtype_name(dt),
				rf_layout_name(layout));
	/* every op of the convolutional part, on this device, in this format */
	for (unsigned i = 0; i < sp->ntable; i++) {
		enum rf_layer_kind k = sp->table[i].kind;
		/* 2-D layers are f32 row-major; a flatten converts (every device can) */
		if ((sp->info[i].h == 0 && k != RF_LAYER_GAP) || k == RF_LAYER_FLATTEN)
			continue;
		unsigned n = rf__layer_ops(k, ops);
		for (unsigned j = 0; j < n; j++)
			if ((ret = rf_device_supports(m->dev, ops[j], dt, layout)) < 0)
				return rf__fail(ret, "rf_model_set_format: %s", rf_last_error());
	}
	for (unsigned k = 0; k < RF_MODEL_MAX_TENSORS; k++) {
		rf_tensor_destroy(m->q[k]);
		rf_tensor_destroy(m->gq[k]);
		m->q[k] = m->gq[k] = NULL;
	}
	m->act_dtype = dt;
	m->act_layout = layout;
	if (dt == RF_F32 && layout == RF_LAYOUT_ROWMAJOR)
		return 0;
	/* the convolutions' weights and biases in the compute format */
	for (unsigned i = 0; i < sp->ntable; i++) {
		const struct rf_layer_info *f = &sp->info[i];
		if (sp->table[i].kind != RF_LAYER_CONV)
			continue;
		for (int k = f->p0; k < f->p0 + f->np; k++) {
			const struct rf_param_spec *p = &sp->p[k];
			enum rf_layout lay = p->ndim == 4 ? layout : RF_LAYOUT_ROWMAJOR;
			char name[48];
			snprintf(name, sizeof(name), "%s.c", p->name);
			if ((ret = rf_tensor_create_layout(m->dev, dt, lay, name, p->ndim, p->shape,
							   &m->q[k])) < 0)
				return ret;
			snprintf(name, sizeof(name), "d%s.c", p->name);
			if ((ret = rf_tensor_create_layout(m->dev, dt, lay, name, p->ndim, p->shape,
							   &m->gq[k])) < 0)
				return ret;
		}
	}
	return 0;
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

	if (init == RF_INIT_DEFAULT)
		init = (enum rf_init)m->spec->default_init;
	for (i = 0; i < m->spec->ntensors && ret == 0; i++) {
		const struct rf_param_spec *p = &m->spec->p[i];
		int bias = p->role == RF_PARAM_BIAS;

		if (p->role == RF_PARAM_GAMMA || p->role == RF_PARAM_BETA) {
			ret = rf_fill(m->s, m->p[i], p->role == RF_PARAM_GAMMA ? 1.0f : 0.0f);
		} else if (bias && init != RF_INIT_UNIFORM) {
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

int rf_model_optim_state(struct rf_model *m, const struct rf_optim *o)
{
	if (o->adamw)
		return m->mom && m->mom2 ? 0 : rf_model_moments(m);
	return o->momentum == 0.0f || m->mom ? 0 : rf_model_momentum(m);
}

/* o's update of w from g (v, v2: its state, NULL where o has none) on stream s */
static int rf__update(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *v,
		      struct rf_tensor *v2, struct rf_tensor *g, const struct rf_optim *o)
{
	if (o->adamw) {
		struct rf_adamw_params a = { .lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2,
					.eps = o->eps, .weight_decay = o->weight_decay, .step = o->step };
		return o->live ? rf_adamw_live(s, w, v, v2, g, &a, o->live, o->live_var)
			       : rf_adamw(s, w, v, v2, g, &a);
	}
	if (o->momentum == 0.0f)
		return o->live ? rf_sgd_live(s, w, g, o->live, o->live_var, o->weight_decay)
			       : rf_sgd(s, w, g, o->lr, o->weight_decay);
	return o->live ? rf_sgd_momentum_live(s, w, v, g, o->live, o->live_var, o->momentum,
					      o->weight_decay, o->nesterov)
		       : rf_sgd_momentum(s, w, v, g, o->lr, o->momentum, o->weight_decay,
					 o->nesterov);
}

int rf_model_update(struct rf_model *m, unsigned k, const struct rf_optim *o,
		    struct rf_stream *s)
{
	int ret;

	if (!m || !o || k >= m->spec->ntensors)
		return rf__fail(-EINVAL, "rf_model_update: %s", !m ? "m is NULL" : !o ? "o is NULL" :
				"parameter tensor index past the model's");
	ret = rf_model_optim_state(m, o);
	return ret < 0 ? ret : rf__update(s, m->p[k], m->v[k], m->v2[k], m->g[k], o);
}

int rf_model_update_all(struct rf_model *m, const struct rf_optim *o)
{
	int ret = rf_model_optim_state(m, o);

	/* the blocks: one op over every parameter, ordered against each view's ops */
	return ret < 0 ? ret : rf__update(m->s2 ? m->s2 : m->s, m->params, m->mom, m->mom2,
					  m->grads, o);
}

int rf_model_update_layer(struct rf_model *m, unsigned layer, const struct rf_optim *o)
{
	struct rf_stream *sw = m->s2 ? m->s2 : m->s;
	int ret = layer < m->spec->nlayers ? 0 : -EINVAL;

	for (unsigned k = m->spec->lfirst[layer]; ret == 0 && k < m->spec->lfirst[layer + 1]; k++)
		ret = rf_model_update(m, k, o, sw);
	return ret;
}

