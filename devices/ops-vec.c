/* devices/ops-vec.c -- ops.h's vector ops: optimiser updates (sgd, momentum),
 * axpy, scale, sum, fill and the u8 input decoders. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "op-impl.h"

static int rf__sgd(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *g, float lr,
		   float weight_decay, const struct rf_live_hyper *live, struct rf_var *live_var)
{
	static const char fn[] = "rf_sgd";
	struct rf__b b;

	RF__TRY(rf__need(fn, "w", w, RF_F32, -1));
	RF__TRY(rf__need(fn, "g", g, RF_F32, -1));
	RF__TRY(rf__same_numel(fn, w, g));
	RF__TRY(rf__b_init(&b, fn, RF__SGD, "sgd", 0));
	b.c->u.sgd.w = w->data;
	b.c->u.sgd.g = g->data;
	b.c->u.sgd.n = w->numel;
	b.c->u.sgd.lr = lr;
	b.c->u.sgd.wd = weight_decay;
	b.c->u.sgd.live = live;
	rf__b_tensor(&b, g, 0);
	rf__b_tensor(&b, w, 1);
	rf__b_live(&b, live_var);
	return rf__b_push(&b, s, w->dev);
}

int rf_sgd(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *g, float lr,
	   float weight_decay)
{
	return rf__sgd(s, w, g, lr, weight_decay, NULL, NULL);
}

int rf_sgd_live(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *g,
		const struct rf_live_hyper *h, struct rf_var *var, float weight_decay)
{
	if (!h || !var)
		return rf__fail(-EINVAL, "rf_sgd_live: NULL %s", h ? "var" : "hyperparameters");
	return rf__sgd(s, w, g, (float)h->lr, weight_decay, h, var);
}

static int rf__adamw(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *m,
		     struct rf_tensor *v, struct rf_tensor *g, const struct rf_k_adamw *p,
		     const struct rf_live_hyper *live, struct rf_var *live_var)
{
	static const char fn[] = "rf_adamw";
	struct rf__b b;

	RF__TRY(rf__need(fn, "w", w, RF_F32, -1));
	RF__TRY(rf__need(fn, "m", m, RF_F32, -1));
	RF__TRY(rf__need(fn, "v", v, RF_F32, -1));
	RF__TRY(rf__need(fn, "g", g, RF_F32, -1));
	RF__TRY(rf__same_numel(fn, w, g));
	RF__TRY(rf__same_numel(fn, w, m));
	RF__TRY(rf__same_numel(fn, w, v));
	if (!p || p->step < 1)
		return rf__fail(-EINVAL, "%s: expected parameters with step >= 1", fn);
	RF__TRY(rf__b_init(&b, fn, RF__ADAMW, "adamw", 0));
	b.c->u.adamw.w = w->data;
	b.c->u.adamw.m = m->data;
	b.c->u.adamw.v = v->data;
	b.c->u.adamw.g = g->data;
	b.c->u.adamw.n = w->numel;
	b.c->u.adamw.p = *p;
	b.c->u.adamw.live = live;
	rf__b_tensor(&b, g, 0);
	rf__b_tensor(&b, w, 1);
	rf__b_tensor(&b, m, 1);
	rf__b_tensor(&b, v, 1);
	rf__b_live(&b, live_var);
	return rf__b_push(&b, s, w->dev);
}

int rf_adamw(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *m,
	     struct rf_tensor *v, struct rf_tensor *g, const struct rf_k_adamw *p)
{
	return rf__adamw(s, w, m, v, g, p, NULL, NULL);
}

int rf_adamw_live(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *m,
		  struct rf_tensor *v, struct rf_tensor *g, const struct rf_k_adamw *p,
		  const struct rf_live_hyper *h, struct rf_var *var)
{
	if (!h || !var)
		return rf__fail(-EINVAL, "rf_adamw_live: NULL %s", h ? "var" : "hyperparameters");
	return rf__adamw(s, w, m, v, g, p, h, var);
}



static int rf__sgd_momentum(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *v,
			    struct rf_tensor *g, float lr, float momentum, float weight_decay,
			    int nesterov, const struct rf_live_hyper *live, struct rf_var *live_var)
{
	static const char fn[] = "rf_sgd_momentum";
	struct rf__b b;

	RF__TRY(rf__need(fn, "w", w, RF_F32, -1));
	RF__TRY(rf__need(fn, "v", v, RF_F32, -1));
	RF__TRY(rf__need(fn, "g", g, RF_F32, -1));
	RF__TRY(rf__same_numel(fn, w, g));
	RF__TRY(rf__same_numel(fn, w, v));
	RF__TRY(rf__b_init(&b, fn, RF__SGD_MOMENTUM, "sgd_momentum", 0));
	b.c->u.sgd.w = w->data;
	b.c->u.sgd.v = v->data;
	b.c->u.sgd.g = g->data;
	b.c->u.sgd.n = w->numel;
	b.c->u.sgd.lr = lr;
	b.c->u.sgd.mom = momentum;
	b.c->u.sgd.wd = weight_decay;
	b.c->u.sgd.nesterov = nesterov != 0;
	b.c->u.sgd.live = live;
	rf__b_tensor(&b, g, 0);
	rf__b_tensor(&b, w, 1);
	rf__b_tensor(&b, v, 1);
	rf__b_live(&b, live_var);
	return rf__b_push(&b, s, w->dev);
}

int rf_sgd_momentum(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *v,
		    struct rf_tensor *g, float lr, float momentum, float weight_decay,
		    int nesterov)
{
	return rf__sgd_momentum(s, w, v, g, lr, momentum, weight_decay, nesterov, NULL, NULL);
}

int rf_sgd_momentum_live(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *v,
			 struct rf_tensor *g, const struct rf_live_hyper *h, struct rf_var *var,
			 float momentum, float weight_decay, int nesterov)
{
	if (!h || !var)
		return rf__fail(-EINVAL, "rf_sgd_momentum_live: NULL %s", h ? "var" : "hyperparameters");
	return rf__sgd_momentum(s, w, v, g, (float)h->lr, momentum, weight_decay, nesterov, h, var);
}



int rf_axpy(struct rf_stream *s, struct rf_tensor *y, float a, struct rf_tensor *x)
{
	static const char fn[] = "rf_axpy";
	struct rf__b b;

	RF__TRY(rf__need(fn, "y", y, RF_F32, -1));
	RF__TRY(rf__need(fn, "x", x, RF_F32, -1));
	RF__TRY(rf__same_numel(fn, y, x));
	RF__TRY(rf__b_init(&b, fn, RF__AXPY, "axpy", 0));
	b.c->u.axpy.y = y->data;
	b.c->u.axpy.x = x->data;
	b.c->u.axpy.n = y->numel;
	b.c->u.axpy.a = a;
	rf__b_tensor(&b, x, 0);
	rf__b_tensor(&b, y, 1);
	return rf__b_push(&b, s, y->dev);
}

int rf_scale(struct rf_stream *s, struct rf_tensor *x, float a)
{
	static const char fn[] = "rf_scale";
	struct rf__b b;

	RF__TRY(rf__need(fn, "x", x, RF_F32, -1));
	RF__TRY(rf__b_init(&b, fn, RF__SCALE, "scale", 0));
	b.c->u.axpy.y = x->data;
	b.c->u.axpy.n = x->numel;
	b.c->u.axpy.a = a;
	rf__b_tensor(&b, x, 1);
	return rf__b_push(&b, s, x->dev);
}

int rf_sum(struct rf_stream *s, struct rf_tensor *out, struct rf_tensor *const *in, int k)
{
	static const char fn[] = "rf_sum";
	struct rf__b b;
	const float **ptrs;
	int i;

	RF__TRY(rf__need(fn, "out", out, RF_F32, -1));
	if (k < 1 || !in || k > RF__MAXT - 1)
		return rf__bad(fn, "need 1..%d inputs, got %d", RF__MAXT - 1, k);
	for (i = 0; i < k; i++) {
		RF__TRY(rf__need(fn, "in[i]", in[i], RF_F32, -1));
		RF__TRY(rf__same_numel(fn, out, in[i]));
		if (i > 0 && in[i]->data == out->data)
			return rf__bad(fn, "out may be in[0] only");
	}
	RF__TRY(rf__b_init(&b, fn, RF__SUM, "sum", (size_t)k * sizeof(float *)));
	ptrs = (const float **)(b.c + 1);
	for (i = 0; i < k; i++) {
		ptrs[i] = in[i]->data;
		rf__b_tensor(&b, in[i], 0);
	}
	b.c->u.sum.out = out->data;
	b.c->u.sum.in = ptrs;
	b.c->u.sum.k = k;
	b.c->u.sum.n = out->numel;
	rf__b_tensor(&b, out, 1);
	return rf__b_push(&b, s, out->dev);
}

int rf_fill(struct rf_stream *s, struct rf_tensor *x, float v)
{
	static const char fn[] = "rf_fill";
	struct rf__b b;

	if (!x)
		return rf__bad(fn, "NULL tensor");
	RF__TRY(rf__b_init(&b, fn, RF__FILL, "fill", 0));
	b.c->u.fill.x = x->data;
	b.c->u.fill.n = x->numel;
	b.c->u.fill.v = v;
	b.c->u.fill.dtype = x->dtype;
	rf__b_tensor(&b, x, 1);
	return rf__b_push(&b, s, x->dev);
}

static int rf__decode(struct rf_stream *s, const char *fn, int code, const char *name,
		      struct rf_tensor *out, enum rf_tdtype odt, struct rf_tensor *in, float scale,
		      float mean, float std)
{
	struct rf__b b;

	RF__TRY(rf__need(fn, "out", out, odt, -1));
	RF__TRY(rf__need(fn, "in", in, RF_U8, -1));
	RF__TRY(rf__same_numel(fn, out, in));
	RF__TRY(rf__b_init(&b, fn, code, name, 0));
	b.c->u.dec.out = out->data;
	b.c->u.dec.in = in->data;
	b.c->u.dec.n = out->numel;
	b.c->u.dec.scale = scale;
	b.c->u.dec.mean = mean;
	b.c->u.dec.std = std;
	rf__b_tensor(&b, in, 0);
	rf__b_tensor(&b, out, 1);
	return rf__b_push(&b, s, out->dev);
}

int rf_u8_to_f32(struct rf_stream *s, struct rf_tensor *out, struct rf_tensor *in, float scale,
		 float mean, float std)
{
	return rf__decode(s, "rf_u8_to_f32", RF__U8_F32, "u8_to_f32", out, RF_F32, in, scale,
			  mean, std);
}

int rf_u8_to_i32(struct rf_stream *s, struct rf_tensor *out, struct rf_tensor *in)
{
	return rf__decode(s, "rf_u8_to_i32", RF__U8_I32, "u8_to_i32", out, RF_I32, in, 0, 0, 0);
}
