/* devices/ops-vec.c -- ops.h's vector ops: optimiser updates (sgd, momentum, adamw),
 * axpy, scale, sum, fill and the u8 input decoders. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op-impl.h"

static int rf__sgd(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *g, float lr,
		   float weight_decay, const struct rf_live_hyper *live, struct rf_var *live_var)
{
	static const char fn[] = "rf_sgd";
	struct rf__b b;

	RF__TRY(RF__SIG(fn, RF__OP_SGD, w, g));
	RF__TRY(rf__b_init(&b, fn, RF__OP_SGD, NULL, 0));
	b.c->p.sgd.n = w->numel;
	b.c->p.sgd.lr = lr;
	b.c->p.sgd.wd = weight_decay;
	b.c->p.sgd.live = live;
	rf__b_set(&b, &b.c->o.sgd.g, g);
	rf__b_set(&b, &b.c->o.sgd.w, w);
	rf__b_var(&b, live_var, 0);
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
		     struct rf_tensor *v, struct rf_tensor *g, const struct rf_adamw_params *p,
		     const struct rf_live_hyper *live, struct rf_var *live_var)
{
	static const char fn[] = "rf_adamw";
	struct rf__b b;

	RF__TRY(RF__SIG(fn, RF__OP_ADAMW, w, m, v, g));
	if (!p || p->step < 1)
		return rf__fail(-EINVAL, "%s: expected parameters with step >= 1", fn);
	RF__TRY(rf__b_init(&b, fn, RF__OP_ADAMW, NULL, 0));
	b.c->p.adamw.n = w->numel;
	b.c->p.adamw.p = *p;
	b.c->p.adamw.live = live;
	rf__b_set(&b, &b.c->o.adamw.g, g);
	rf__b_set(&b, &b.c->o.adamw.w, w);
	rf__b_set(&b, &b.c->o.adamw.m, m);
	rf__b_set(&b, &b.c->o.adamw.v, v);
	rf__b_var(&b, live_var, 0);
	return rf__b_push(&b, s, w->dev);
}

int rf_adamw(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *m,
	     struct rf_tensor *v, struct rf_tensor *g, const struct rf_adamw_params *p)
{
	return rf__adamw(s, w, m, v, g, p, NULL, NULL);
}

int rf_adamw_live(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *m,
		  struct rf_tensor *v, struct rf_tensor *g, const struct rf_adamw_params *p,
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

	RF__TRY(RF__SIG(fn, RF__OP_SGD_MOMENTUM, w, v, g));
	RF__TRY(rf__b_init(&b, fn, RF__OP_SGD_MOMENTUM, NULL, 0));
	b.c->p.sgd.n = w->numel;
	b.c->p.sgd.lr = lr;
	b.c->p.sgd.mom = momentum;
	b.c->p.sgd.wd = weight_decay;
	b.c->p.sgd.nesterov = nesterov != 0;
	b.c->p.sgd.live = live;
	rf__b_set(&b, &b.c->o.sgd_momentum.g, g);
	rf__b_set(&b, &b.c->o.sgd_momentum.w, w);
	rf__b_set(&b, &b.c->o.sgd_momentum.v, v);
	rf__b_var(&b, live_var, 0);
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

	RF__TRY(RF__SIG(fn, RF__OP_AXPY, y, x));
	RF__TRY(rf__b_init(&b, fn, RF__OP_AXPY, NULL, 0));
	b.c->p.axpy.n = y->numel;
	b.c->p.axpy.a = a;
	rf__b_set(&b, &b.c->o.axpy.x, x);
	rf__b_set(&b, &b.c->o.axpy.y, y);
	return rf__b_push(&b, s, y->dev);
}

int rf_scale(struct rf_stream *s, struct rf_tensor *x, float a)
{
	static const char fn[] = "rf_scale";
	struct rf__b b;

	RF__TRY(RF__SIG(fn, RF__OP_SCALE, x));
	RF__TRY(rf__b_init(&b, fn, RF__OP_SCALE, NULL, 0));
	b.c->p.axpy.n = x->numel;
	b.c->p.axpy.a = a;
	rf__b_set(&b, &b.c->o.scale.x, x);
	return rf__b_push(&b, s, x->dev);
}

int rf_sum(struct rf_stream *s, struct rf_tensor *out, struct rf_tensor *const *in, int k)
{
	static const char fn[] = "rf_sum";
	struct rf_tensor *t[1 + RF__OP_SUM_MAX];
	struct rf__b b;
	int i;

	if (k < 1 || !in || k > RF__OP_SUM_MAX)
		return rf__bad(fn, "need 1..%d inputs, got %d", RF__OP_SUM_MAX, k);
	t[0] = out;
	memcpy(t + 1, in, (size_t)k * sizeof(*in));
	RF__TRY(rf__sig_check(fn, RF__OP_SUM, t, 1 + (unsigned)k, RF__SIG_ALL));
	for (i = 1; i < k; i++)
		if (in[i]->data == out->data)
			return rf__bad(fn, "out may be in[0] only");
	RF__TRY(rf__b_init(&b, fn, RF__OP_SUM, NULL, (unsigned)k));
	for (i = 0; i < k; i++)
		rf__b_set(&b, &b.c->p.sum.in[i], in[i]);
	b.c->p.sum.n = out->numel;
	rf__b_set(&b, &b.c->o.sum.out, out);
	return rf__b_push(&b, s, out->dev);
}

int rf_fill(struct rf_stream *s, struct rf_tensor *x, float v)
{
	static const char fn[] = "rf_fill";
	struct rf__b b;

	RF__TRY(RF__SIG(fn, RF__OP_FILL, x));
	RF__TRY(rf__b_init(&b, fn, RF__OP_FILL, NULL, 0));
	b.c->p.fill.n = x->numel;
	b.c->p.fill.v = v;
	rf__b_set(&b, &b.c->o.fill.x, x);
	return rf__b_push(&b, s, x->dev);
}

static int rf__decode(struct rf_stream *s, const char *fn, enum rf__opcode code,
		      struct rf_tensor *out, struct rf_tensor *in, const struct rf__u8norm *nm)
{
	struct rf__b b;

	RF__TRY(RF__SIG(fn, code, out, in));
	RF__TRY(rf__b_init(&b, fn, code, NULL, 0));
	b.c->p.dec.n = out->numel;
	b.c->p.dec.nm = *nm;
	rf__b_set(&b, &b.c->o.dec.in, in);
	rf__b_set(&b, &b.c->o.dec.out, out);
	return rf__b_push(&b, s, out->dev);
}

int rf_u8_to_f32(struct rf_stream *s, struct rf_tensor *out, struct rf_tensor *in, float scale,
		 float mean, float std)
{
	struct rf__u8norm nm = rf__u8norm_one(scale, mean, std);

	return rf__decode(s, "rf_u8_to_f32", RF__OP_U8_F32, out, in, &nm);
}

int rf_u8_normalize(struct rf_stream *s, struct rf_tensor *out, struct rf_tensor *in,
		    float scale, unsigned nch, size_t plane, const float *mean, const float *std)
{
	static const char fn[] = "rf_u8_normalize";
	struct rf__u8norm nm = { .scale = scale, .nch = nch, .plane = plane };

	if (nch < 1 || nch > RF_U8_NORM_MAX_CH)
		return rf__bad(fn, "nch %u: expected 1 to %d channels", nch, RF_U8_NORM_MAX_CH);
	if (!plane)
		return rf__bad(fn, "plane 0: expected the elements of one channel's plane (>= 1)");
	if (!mean || !std)
		return rf__bad(fn, "%s is NULL: expected %u values", mean ? "std" : "mean", nch);
	if (!isfinite(scale))
		return rf__bad(fn, "scale %g: expected a finite number", (double)scale);
	for (unsigned c = 0; c < nch; c++) {
		if (!isfinite(mean[c]))
			return rf__bad(fn, "mean[%u] %g: expected a finite number", c, (double)mean[c]);
		if (!isfinite(std[c]) || std[c] == 0.0f)
			return rf__bad(fn, "std[%u] %g: expected a finite nonzero number", c,
				       (double)std[c]);
		nm.mean[c] = mean[c];
		nm.std[c] = std[c];
	}
	if (in && in->numel % (plane * nch))
		return rf__bad(fn, "in has %zu elements: expected a multiple of nch * plane = "
			       "%u * %zu", in->numel, nch, plane);
	return rf__decode(s, fn, RF__OP_U8_F32, out, in, &nm);
}

int rf_u8_to_i32(struct rf_stream *s, struct rf_tensor *out, struct rf_tensor *in)
{
	struct rf__u8norm nm = rf__u8norm_one(0, 0, 1);

	return rf__decode(s, "rf_u8_to_i32", RF__OP_U8_I32, out, in, &nm);
}
