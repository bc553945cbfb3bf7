/* devices/ops-conv.c -- ops.h's convolutions (any stride and padding): shape checks,
 * the workspace from the executing device's allocator, and the CPU-only fused
 * filter gradient through relu and 2x2 pooling. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "op-impl.h"

/* Conv: fill the shape, allocate the workspace on the executing device. */
static int rf__conv_shape(const char *fn, struct rf_k_conv2d *cs, struct rf_tensor *x,
			  struct rf_tensor *w, struct rf_tensor *y, int stride, int pad)
{
	char b1[96], b2[96], b3[96];

	if (stride < 1 || pad < 0)
		return rf__bad(fn, "stride %d, pad %d: a stride >= 1 and a pad >= 0 expected",
			       stride, pad);

	RF__TRY(rf__need(fn, "x", x, RF_F32, 4));
	RF__TRY(rf__need(fn, "w", w, RF_F32, 4));
	RF__TRY(rf__need(fn, "y", y, RF_F32, 4));
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
	    y->shape[0] != cs->n || y->shape[1] != cs->o || y->shape[2] != rf_k_conv2d_oh(cs) ||
	    y->shape[3] != rf_k_conv2d_ow(cs))
		return rf__bad(fn, "shapes do not make a conv2d with stride %d and pad %d: x %s, "
			       "w %s, y %s", stride, pad, rf_tensor_describe(x, b1, sizeof(b1)),
			       rf_tensor_describe(w, b2, sizeof(b2)), rf_tensor_describe(y, b3, sizeof(b3)));
	return 0;
}

static int rf__conv_push(struct rf__b *b, struct rf_stream *s, struct rf_device *home)
{
	struct rf__opctx *c = b->c;
	int ret = b->err;

	if (ret == 0)
		ret = rf__resolve(b, s, home);
	if (ret < 0) {
		rf__b_fail(b);
		return ret;
	}
	if (c->xdev->iface->conv_ws) {
		size_t want = c->xdev->iface->conv_ws(&c->u.conv.s, 0);
		size_t min = c->xdev->iface->conv_ws(&c->u.conv.s, 1);
		if (want && rf__cache_alloc(&c->xdev->mem, want, &c->ws) == 0) {
			c->ws_bytes = want;
		} else if (min && rf__cache_alloc(&c->xdev->mem, min, &c->ws) == 0) {
			c->ws_bytes = min;
		} else if (want) {
			rf__b_fail(b);
			return -ENOMEM;
		}
	}
	return rf__b_push(b, s, home);
}

int rf_conv2d_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x,
		  struct rf_tensor *w, struct rf_tensor *bias, int stride, int pad)
{
	static const char fn[] = "rf_conv2d_fwd";
	struct rf_k_conv2d cs;
	struct rf__b b;

	RF__TRY(rf__conv_shape(fn, &cs, x, w, y, stride, pad));
	if (bias) {
		RF__TRY(rf__need(fn, "b", bias, RF_F32, -1));
		if (bias->numel != (size_t)cs.o)
			return rf__bad(fn, "bias must have %d elements", cs.o);
	}
	RF__TRY(rf__b_init(&b, fn, RF__CONV_FWD, "conv2d_fwd", 0));
	b.c->u.conv.s = cs;
	b.c->u.conv.out = y->data;
	b.c->u.conv.in = x->data;
	b.c->u.conv.in2 = w->data;
	b.c->u.conv.in3 = bias ? bias->data : NULL;
	rf__b_tensor(&b, x, 0);
	rf__b_tensor(&b, w, 0);
	rf__b_tensor(&b, bias, 0);
	rf__b_tensor(&b, y, 1);
	return rf__conv_push(&b, s, y->dev);
}

int rf_conv2d_bwd_data(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy,
		       struct rf_tensor *w, int stride, int pad)
{
	static const char fn[] = "rf_conv2d_bwd_data";
	struct rf_k_conv2d cs;
	struct rf__b b;

	RF__TRY(rf__conv_shape(fn, &cs, dx, w, dy, stride, pad));
	RF__TRY(rf__b_init(&b, fn, RF__CONV_BWD_DATA, "conv2d_bwd_data", 0));
	b.c->u.conv.s = cs;
	b.c->u.conv.out = dx->data;
	b.c->u.conv.in = dy->data;
	b.c->u.conv.in2 = w->data;
	rf__b_tensor(&b, dy, 0);
	rf__b_tensor(&b, w, 0);
	rf__b_tensor(&b, dx, 1);
	return rf__conv_push(&b, s, dx->dev);
}

int rf_conv2d_bwd_filter(struct rf_stream *s, struct rf_tensor *dw, struct rf_tensor *db,
			 struct rf_tensor *dy, struct rf_tensor *x, int accumulate, int stride,
			 int pad)
{
	static const char fn[] = "rf_conv2d_bwd_filter";
	struct rf_k_conv2d cs;
	struct rf__b b;

	RF__TRY(rf__conv_shape(fn, &cs, x, dw, dy, stride, pad));
	if (db) {
		RF__TRY(rf__need(fn, "db", db, RF_F32, -1));
		if (db->numel != (size_t)cs.o)
			return rf__bad(fn, "db must have %d elements", cs.o);
	}
	RF__TRY(rf__b_init(&b, fn, RF__CONV_BWD_FILTER, "conv2d_bwd_filter", 0));
	b.c->u.conv.s = cs;
	b.c->u.conv.out = dw->data;
	b.c->u.conv.out2 = db ? db->data : NULL;
	b.c->u.conv.in = dy->data;
	b.c->u.conv.in2 = x->data;
	b.c->u.conv.acc = !!accumulate;
	rf__b_tensor(&b, dy, 0);
	rf__b_tensor(&b, x, 0);
	rf__b_tensor(&b, dw, 1);
	rf__b_tensor(&b, db, 1);
	return rf__conv_push(&b, s, dw->dev);
}

struct rf__bwdf_pr {
	struct rf_k_conv2d s;
	float *dw, *db;
	const float *dp, *y, *x;
	int acc;
};

static int rf__bwdf_pr_fn(void *arg)
{
	struct rf__bwdf_pr *f = arg;

	return rf_k_conv2d_bwd_filter_pool_relu(&f->s, f->dw, f->db, f->dp, f->y, f->x, f->acc);
}

int rf_conv2d_bwd_filter_pool_relu(struct rf_stream *s, struct rf_tensor *dw,
				   struct rf_tensor *db, struct rf_tensor *dp,
				   struct rf_tensor *y, struct rf_tensor *x, int accumulate)
{
	static const char fn[] = "rf_conv2d_bwd_filter_pool_relu";
	struct rf_k_conv2d cs;
	struct rf__bwdf_pr *f;
	struct rf__b b;
	char b1[96], b2[96];

	RF__TRY(rf__conv_shape(fn, &cs, x, dw, y, 1, 0));
	RF__TRY(rf__need(fn, "dp", dp, RF_F32, 4));
	if (dp->shape[0] != y->shape[0] || dp->shape[1] != y->shape[1] ||
	    dp->shape[2] != y->shape[2] / 2 || dp->shape[3] != y->shape[3] / 2)
		return rf__bad(fn, "%s is not %s pooled 2x2", rf_tensor_describe(dp, b1, sizeof(b1)),
			       rf_tensor_describe(y, b2, sizeof(b2)));
	if (cs.c != 1 || cs.kh * cs.kw > 25 || rf_k_conv2d_ow(&cs) > 64)
		return rf__bad(fn, "single-channel inputs, kernels up to 25 taps and outputs up "
			       "to 64 wide only");
	if (db) {
		RF__TRY(rf__need(fn, "db", db, RF_F32, -1));
		if (db->numel != (size_t)cs.o)
			return rf__bad(fn, "db must have %d elements", cs.o);
	}
	if (dw->dev->kind != RF_DEVICE_CPU)
		return rf__bad(fn, "CPU devices only");
	RF__TRY(rf__b_init(&b, fn, RF__HOST, "conv2d_bwd_filter_pool_relu", sizeof(*f)));
	f = (struct rf__bwdf_pr *)(b.c + 1);
	f->s = cs;
	f->dw = dw->data;
	f->db = db ? db->data : NULL;
	f->dp = dp->data;
	f->y = y->data;
	f->x = x->data;
	f->acc = !!accumulate;
	b.c->u.host.fn = rf__bwdf_pr_fn;
	b.c->u.host.arg = f;
	rf__b_tensor(&b, dp, 0);
	rf__b_tensor(&b, y, 0);
	rf__b_tensor(&b, x, 0);
	rf__b_tensor(&b, dw, 1);
	rf__b_tensor(&b, db, 1);
	return rf__b_push(&b, s, dw->dev);
}
