/* devices/ops-conv.c -- ops.h's convolutions (any stride and padding) and the fused
 * filter gradient through relu and 2x2 pooling: shape checks; the executing backend
 * sizes the workspace (op.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "op-impl.h"

/* Conv: x (n, c, h, w), w (o, c, kh, kw), y (n, o, oh, ow) into cs (their dtypes and
 * ranks checked by the op's signature). y NULL: x and w alone (rf_conv2d_fwd_group). */
static int rf__conv_shape(const char *fn, struct rf__conv2d *cs, const struct rf_tensor *x,
			  const struct rf_tensor *w, const struct rf_tensor *y, int stride,
			  int pad)
{
	char b1[96], b2[96], b3[96];

	if (stride < 1 || pad < 0)
		return rf__bad(fn, "stride %d, pad %d: a stride >= 1 and a pad >= 0 expected",
			       stride, pad);
	cs->n = (int)x->shape[0];
	cs->c = (int)x->shape[1];
	cs->h = (int)x->shape[2];
	cs->w = (int)x->shape[3];
	cs->o = (int)w->shape[0];
	cs->kh = (int)w->shape[2];
	cs->kw = (int)w->shape[3];
	cs->stride = stride;
	cs->pad = pad;
	if (cs->kh < 1 || cs->kw < 1 || pad >= cs->kh || pad >= cs->kw)
		return rf__bad(fn, "pad %d with a %dx%d kernel: the pad must be smaller than the "
			       "kernel", pad, cs->kh, cs->kw);
	if (w->shape[1] != cs->c || cs->kh > cs->h + 2 * pad || cs->kw > cs->w + 2 * pad ||
	    (y && (y->shape[0] != cs->n || y->shape[1] != cs->o ||
		   y->shape[2] != rf__conv2d_oh(cs) || y->shape[3] != rf__conv2d_ow(cs))))
		return rf__bad(fn, "shapes do not make a conv2d with stride %d and pad %d: x %s, "
			       "w %s, y %s", stride, pad, rf_tensor_describe(x, b1, sizeof(b1)),
			       rf_tensor_describe(w, b2, sizeof(b2)),
			       y ? rf_tensor_describe(y, b3, sizeof(b3)) : "(none)");
	return 0;
}

/* b (o) or NULL */
static int rf__conv_bias(const char *fn, const char *what, struct rf_tensor *b, int o)
{
	if (b && b->numel != (size_t)o)
		return rf__bad(fn, "%s must have %d elements", what, o);
	return 0;
}

int rf_conv2d_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x,
		  struct rf_tensor *w, struct rf_tensor *bias, int stride, int pad)
{
	static const char fn[] = "rf_conv2d_fwd";
	struct rf__conv2d cs;
	struct rf__b b;

	RF__TRY(RF__SIG(fn, RF__OP_CONV_FWD, y, x, w, bias));
	RF__TRY(rf__conv_shape(fn, &cs, x, w, y, stride, pad));
	RF__TRY(rf__conv_bias(fn, "bias", bias, cs.o));
	RF__TRY(rf__b_init(&b, fn, RF__OP_CONV_FWD, NULL, 0));
	b.c->p.conv.s = cs;
	rf__b_set(&b, &b.c->o.conv_fwd.x, x);
	rf__b_set(&b, &b.c->o.conv_fwd.w, w);
	rf__b_set(&b, &b.c->o.conv_fwd.b, bias);
	rf__b_set(&b, &b.c->o.conv_fwd.y, y);
	return rf__b_push(&b, s, y->dev);
}

int rf_conv2d_fwd_group(const struct rf_device *d, const struct rf_tensor *x,
			const struct rf_tensor *w, int stride, int pad)
{
	static const char fn[] = "rf_conv2d_fwd_group";
	struct rf__conv2d cs;
	int g;

	if (!d || !x || !w)
		return rf__bad(fn, "NULL %s", !d ? "device" : !x ? "x" : "w");
	if (x->ndim != 4 || w->ndim != 4)
		return rf__bad(fn, "x and w must be 4-D (x %d-D, w %d-D)", x->ndim, w->ndim);
	RF__TRY(rf__conv_shape(fn, &cs, x, w, NULL, stride, pad));
	if (!d->be->conv_group)
		return rf__fail(-ENOTSUP, "%s: %s promises no batch split of a convolution",
				fn, d->name);
	g = d->be->conv_group(&cs);
	return g < 0 ? rf__bad(fn, "the shape was refused by %s", d->name) : g;
}

int rf_conv2d_bwd_data(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy,
		       struct rf_tensor *w, int stride, int pad)
{
	static const char fn[] = "rf_conv2d_bwd_data";
	struct rf__conv2d cs;
	struct rf__b b;

	RF__TRY(RF__SIG(fn, RF__OP_CONV_BWD_DATA, dx, dy, w));
	RF__TRY(rf__conv_shape(fn, &cs, dx, w, dy, stride, pad));
	RF__TRY(rf__b_init(&b, fn, RF__OP_CONV_BWD_DATA, NULL, 0));
	b.c->p.conv.s = cs;
	rf__b_set(&b, &b.c->o.conv_bwd_data.dy, dy);
	rf__b_set(&b, &b.c->o.conv_bwd_data.w, w);
	rf__b_set(&b, &b.c->o.conv_bwd_data.dx, dx);
	return rf__b_push(&b, s, dx->dev);
}

int rf_conv2d_bwd_filter(struct rf_stream *s, struct rf_tensor *dw, struct rf_tensor *db,
			 struct rf_tensor *dy, struct rf_tensor *x, int accumulate, int stride,
			 int pad)
{
	static const char fn[] = "rf_conv2d_bwd_filter";
	struct rf__conv2d cs;
	struct rf__b b;

	RF__TRY(RF__SIG(fn, RF__OP_CONV_BWD_FILTER, dw, db, dy, x));
	RF__TRY(rf__conv_shape(fn, &cs, x, dw, dy, stride, pad));
	RF__TRY(rf__conv_bias(fn, "db", db, cs.o));
	RF__TRY(rf__b_init(&b, fn, RF__OP_CONV_BWD_FILTER, NULL, 0));
	b.c->p.conv.s = cs;
	b.c->p.conv.acc = !!accumulate;
	rf__b_set(&b, &b.c->o.conv_bwd_filter.dy, dy);
	rf__b_set(&b, &b.c->o.conv_bwd_filter.x, x);
	rf__b_set(&b, &b.c->o.conv_bwd_filter.dw, dw);
	rf__b_set(&b, &b.c->o.conv_bwd_filter.db, db);
	return rf__b_push(&b, s, dw->dev);
}

int rf_conv2d_bwd_filter_pool_relu(struct rf_stream *s, struct rf_tensor *dw,
				   struct rf_tensor *db, struct rf_tensor *dp,
				   struct rf_tensor *y, struct rf_tensor *x, int accumulate)
{
	static const char fn[] = "rf_conv2d_bwd_filter_pool_relu";
	struct rf__conv2d cs;
	struct rf__b b;
	char b1[96], b2[96];

	RF__TRY(RF__SIG(fn, RF__OP_CONV_BWD_FILTER_POOL_RELU, dw, db, dp, y, x));
	RF__TRY(rf__conv_shape(fn, &cs, x, dw, y, 1, 0));
	if (dp->shape[0] != y->shape[0] || dp->shape[1] != y->shape[1] ||
	    dp->shape[2] != y->shape[2] / 2 || dp->shape[3] != y->shape[3] / 2)
		return rf__bad(fn, "%s is not %s pooled 2x2", rf_tensor_describe(dp, b1, sizeof(b1)),
			       rf_tensor_describe(y, b2, sizeof(b2)));
	if (cs.c != 1 || cs.kh * cs.kw > 25 || rf__conv2d_ow(&cs) > 64)
		return rf__bad(fn, "single-channel inputs, kernels up to 25 taps and outputs up "
			       "to 64 wide only");
	RF__TRY(rf__conv_bias(fn, "db", db, cs.o));
	RF__TRY(rf__b_init(&b, fn, RF__OP_CONV_BWD_FILTER_POOL_RELU, NULL, 0));
	b.c->p.conv.s = cs;
	b.c->p.conv.acc = !!accumulate;
	rf__b_set(&b, &b.c->o.conv_bwd_filter_pr.dp, dp);
	rf__b_set(&b, &b.c->o.conv_bwd_filter_pr.y, y);
	rf__b_set(&b, &b.c->o.conv_bwd_filter_pr.x, x);
	rf__b_set(&b, &b.c->o.conv_bwd_filter_pr.dw, dw);
	rf__b_set(&b, &b.c->o.conv_bwd_filter_pr.db, db);
	return rf__b_push(&b, s, dw->dev);
}
