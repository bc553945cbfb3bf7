/* devices/ops-nn.c -- ops.h's layer ops: gemm, bias, relu, softmax cross-entropy,
 * average pooling and the CPU-only fused relu/pool ops. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "op-impl.h"

int rf_gemm(struct rf_stream *s, int ta, int tb, float alpha, struct rf_tensor *A,
	    struct rf_tensor *B, float beta, struct rf_tensor *C)
{
	static const char fn[] = "rf_gemm";
	struct rf__b b;
	int m, n, k, kb, nb;
	char b1[96], b2[96], b3[96];

	RF__TRY(rf__need(fn, "A", A, RF_F32, 2));
	RF__TRY(rf__need(fn, "B", B, RF_F32, 2));
	RF__TRY(rf__need(fn, "C", C, RF_F32, 2));
	m = (int)C->shape[0];
	n = (int)C->shape[1];
	k = (int)(ta ? A->shape[0] : A->shape[1]);
	kb = (int)(tb ? B->shape[1] : B->shape[0]);
	nb = (int)(tb ? B->shape[0] : B->shape[1]);
	if ((ta ? A->shape[1] : A->shape[0]) != m || kb != k || nb != n)
		return rf__bad(fn, "op(A)*op(B) = C needs (m, k)*(k, n) = (m, n): A%s = %s, B%s = %s, C = %s",
			       ta ? "^T" : "", rf_tensor_describe(A, b1, sizeof(b1)),
			       tb ? "^T" : "", rf_tensor_describe(B, b2, sizeof(b2)),
			       rf_tensor_describe(C, b3, sizeof(b3)));
	if (C->var == A->var || C->var == B->var)
		return rf__bad(fn, "C must not alias A or B");
	RF__TRY(rf__b_init(&b, fn, RF__GEMM, "gemm", 0));
	b.c->u.gemm.ta = !!ta;
	b.c->u.gemm.tb = !!tb;
	b.c->u.gemm.m = m;
	b.c->u.gemm.n = n;
	b.c->u.gemm.k = k;
	b.c->u.gemm.alpha = alpha;
	b.c->u.gemm.beta = beta;
	b.c->u.gemm.a = A->data;
	b.c->u.gemm.b = B->data;
	b.c->u.gemm.c = C->data;
	rf__b_tensor(&b, A, 0);
	rf__b_tensor(&b, B, 0);
	rf__b_tensor(&b, C, 1);
	return rf__b_push(&b, s, C->dev);
}

static int rf__bias(struct rf_stream *s, const char *fn, int code, const char *name,
		    struct rf_tensor *out, struct rf_tensor *in, int accumulate)
{
	/* add: out = y (rows, cols), in = b (cols). grad: out = db (cols), in = dy. */
	struct rf_tensor *y = code == RF__BIAS_ADD ? out : in;
	struct rf_tensor *bias = code == RF__BIAS_ADD ? in : out;
	struct rf__b b;
	int rows, cols;
	char b1[96], b2[96];

	RF__TRY(rf__need(fn, code == RF__BIAS_ADD ? "y" : "dy", y, RF_F32, -1));
	RF__TRY(rf__need(fn, code == RF__BIAS_ADD ? "b" : "db", bias, RF_F32, -1));
	if (rf__rows_cols(y, &rows, &cols) < 0 || bias->numel != (size_t)cols)
		return rf__bad(fn, "%s is not (rows, cols) with %s of cols elements",
			       rf_tensor_describe(y, b1, sizeof(b1)),
			       rf_tensor_describe(bias, b2, sizeof(b2)));
	RF__TRY(rf__b_init(&b, fn, code, name, 0));
	b.c->u.bias.y = out->data;
	b.c->u.bias.b = in->data;
	b.c->u.bias.rows = rows;
	b.c->u.bias.cols = cols;
	b.c->u.bias.acc = !!accumulate;
	rf__b_tensor(&b, in, 0);
	rf__b_tensor(&b, out, 1);
	return rf__b_push(&b, s, out->dev);
}

int rf_bias_add(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *bias)
{
	if (!y || !bias)
		return rf__bad("rf_bias_add", "NULL tensor");
	return rf__bias(s, "rf_bias_add", RF__BIAS_ADD, "bias_add", y, bias, 0);
}

int rf_bias_grad(struct rf_stream *s, struct rf_tensor *db, struct rf_tensor *dy, int accumulate)
{
	if (!db || !dy)
		return rf__bad("rf_bias_grad", "NULL tensor");
	return rf__bias(s, "rf_bias_grad", RF__BIAS_GRAD, "bias_grad", db, dy, accumulate);
}

int rf_relu_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x)
{
	static const char fn[] = "rf_relu_fwd";
	struct rf__b b;

	RF__TRY(rf__need(fn, "y", y, RF_F32, -1));
	RF__TRY(rf__need(fn, "x", x, RF_F32, -1));
	RF__TRY(rf__same_numel(fn, y, x));
	RF__TRY(rf__b_init(&b, fn, RF__RELU_FWD, "relu_fwd", 0));
	b.c->u.ew.y = y->data;
	b.c->u.ew.x = x->data;
	b.c->u.ew.n = y->numel;
	rf__b_tensor(&b, x, 0);
	rf__b_tensor(&b, y, 1);
	return rf__b_push(&b, s, y->dev);
}

int rf_relu_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy,
		struct rf_tensor *y)
{
	static const char fn[] = "rf_relu_bwd";
	struct rf__b b;

	RF__TRY(rf__need(fn, "dx", dx, RF_F32, -1));
	RF__TRY(rf__need(fn, "dy", dy, RF_F32, -1));
	RF__TRY(rf__need(fn, "y", y, RF_F32, -1));
	RF__TRY(rf__same_numel(fn, dx, dy));
	RF__TRY(rf__same_numel(fn, dx, y));
	RF__TRY(rf__b_init(&b, fn, RF__RELU_BWD, "relu_bwd", 0));
	b.c->u.ew.y = dx->data;
	b.c->u.ew.x = dy->data;
	b.c->u.ew.aux = y->data;
	b.c->u.ew.n = dx->numel;
	rf__b_tensor(&b, dy, 0);
	rf__b_tensor(&b, y, 0);
	rf__b_tensor(&b, dx, 1);
	return rf__b_push(&b, s, dx->dev);
}

int rf_softmax_xent(struct rf_stream *s, struct rf_tensor *dlogits, struct rf_tensor *loss,
		    struct rf_tensor *correct, struct rf_tensor *logits, struct rf_tensor *labels)
{
	static const char fn[] = "rf_softmax_xent";
	struct rf__b b;
	struct rf_device *home;
	char b1[96], b2[96];

	RF__TRY(rf__need(fn, "logits", logits, RF_F32, 2));
	RF__TRY(rf__need(fn, "labels", labels, RF_I32, -1));
	if (labels->numel != (size_t)logits->shape[0])
		return rf__bad(fn, "labels %s: expected %lld labels for logits %s",
			       rf_tensor_describe(labels, b1, sizeof(b1)),
			       (long long)logits->shape[0], rf_tensor_describe(logits, b2, sizeof(b2)));
	if (dlogits) {
		RF__TRY(rf__need(fn, "dlogits", dlogits, RF_F32, -1));
		RF__TRY(rf__same_numel(fn, dlogits, logits));
	}
	if (loss) {
		RF__TRY(rf__need(fn, "loss", loss, RF_F32, -1));
		if (loss->numel != 1)
			return rf__bad(fn, "loss must have one element");
	}
	if (correct) {
		RF__TRY(rf__need(fn, "correct", correct, RF_I32, -1));
		if (correct->numel != 1)
			return rf__bad(fn, "correct must have one element");
	}
	if (!dlogits && !loss && !correct)
		return rf__bad(fn, "no output");
	RF__TRY(rf__b_init(&b, fn, RF__XENT, dlogits ? "softmax_xent" : "softmax_xent_eval", 0));
	b.c->u.xent.dlogits = dlogits ? dlogits->data : NULL;
	b.c->u.xent.loss = loss ? loss->data : NULL;
	b.c->u.xent.correct = correct ? correct->data : NULL;
	b.c->u.xent.logits = logits->data;
	b.c->u.xent.labels = labels->data;
	b.c->u.xent.rows = (int)logits->shape[0];
	b.c->u.xent.cols = (int)logits->shape[1];
	rf__b_tensor(&b, logits, 0);
	rf__b_tensor(&b, labels, 0);
	rf__b_tensor(&b, dlogits, 1);
	rf__b_tensor(&b, loss, 1);
	rf__b_tensor(&b, correct, 1);
	home = dlogits ? dlogits->dev : loss ? loss->dev : correct->dev;
	return rf__b_push(&b, s, home);
}

static int rf__pool(struct rf_stream *s, const char *fn, int code, const char *name,
		    struct rf_tensor *out, struct rf_tensor *in, struct rf_tensor *big,
		    struct rf_tensor *small, int k)
{
	struct rf__b b;
	char b1[96], b2[96];

	RF__TRY(rf__need(fn, "input", in, RF_F32, 4));
	RF__TRY(rf__need(fn, "output", out, RF_F32, 4));
	if (k < 1 || small->shape[0] != big->shape[0] || small->shape[1] != big->shape[1] ||
	    small->shape[2] != big->shape[2] / k || small->shape[3] != big->shape[3] / k)
		return rf__bad(fn, "%s is not %s pooled %dx%d", rf_tensor_describe(small, b1, sizeof(b1)),
			       rf_tensor_describe(big, b2, sizeof(b2)), k, k);
	RF__TRY(rf__b_init(&b, fn, code, name, 0));
	b.c->u.pool.y = out->data;
	b.c->u.pool.x = in->data;
	b.c->u.pool.n = (int)big->shape[0];
	b.c->u.pool.c = (int)big->shape[1];
	b.c->u.pool.h = (int)big->shape[2];
	b.c->u.pool.w = (int)big->shape[3];
	b.c->u.pool.k = k;
	rf__b_tensor(&b, in, 0);
	rf__b_tensor(&b, out, 1);
	return rf__b_push(&b, s, out->dev);
}

int rf_avgpool2d_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x, int k)
{
	if (!y || !x)
		return rf__bad("rf_avgpool2d_fwd", "NULL tensor");
	return rf__pool(s, "rf_avgpool2d_fwd", RF__POOL_FWD, "avgpool2d_fwd", y, x, x, y, k);
}

int rf_avgpool2d_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy, int k)
{
	if (!dx || !dy)
		return rf__bad("rf_avgpool2d_bwd", "NULL tensor");
	return rf__pool(s, "rf_avgpool2d_bwd", RF__POOL_BWD, "avgpool2d_bwd", dx, dy, dx, dy, k);
}

/* CPU-only fused ops run as host ops (the backends' op codes are not ours to extend):
 * the arguments follow the context, and the function gets them. */
struct rf__fused {
	float *out, *io;
	const float *in, *in2;
	int n, c, h, w;
};

static int rf__relu_pool_fwd_fn(void *arg)
{
	struct rf__fused *f = arg;

	rf_k_relu_avgpool2_fwd(f->out, f->io, f->n, f->c, f->h, f->w);
	return 0;
}

static int rf__pool_relu_bwd_fn(void *arg)
{
	struct rf__fused *f = arg;

	rf_k_avgpool2_relu_bwd(f->out, f->in, f->in2, f->n, f->c, f->h, f->w);
	return 0;
}

static int rf__fused_pool(struct rf_stream *s, const char *fn, const char *name, int bwd,
			  struct rf_tensor *big_out, struct rf_tensor *small, struct rf_tensor *y)
{
	struct rf__b b;
	struct rf__fused *f;
	char b1[96], b2[96];

	RF__TRY(rf__need(fn, "big tensor", big_out, RF_F32, 4));
	RF__TRY(rf__need(fn, "pooled tensor", small, RF_F32, 4));
	RF__TRY(rf__need(fn, "y", y, RF_F32, 4));
	if (small->shape[0] != y->shape[0] || small->shape[1] != y->shape[1] ||
	    small->shape[2] != y->shape[2] / 2 || small->shape[3] != y->shape[3] / 2 ||
	    memcmp(big_out->shape, y->shape, 4 * sizeof(y->shape[0])) != 0)
		return rf__bad(fn, "%s is not %s pooled 2x2", rf_tensor_describe(small, b1, sizeof(b1)),
			       rf_tensor_describe(y, b2, sizeof(b2)));
	if (y->dev->kind != RF_DEVICE_CPU)
		return rf__bad(fn, "CPU devices only");
	RF__TRY(rf__b_init(&b, fn, RF__HOST, name, sizeof(*f)));
	f = (struct rf__fused *)(b.c + 1);
	f->n = (int)y->shape[0];
	f->c = (int)y->shape[1];
	f->h = (int)y->shape[2];
	f->w = (int)y->shape[3];
	if (bwd) {
		f->out = big_out->data;
		f->in = small->data;
		f->in2 = y->data;
		b.c->u.host.fn = rf__pool_relu_bwd_fn;
		rf__b_tensor(&b, small, 0);
		rf__b_tensor(&b, y, 0);
		rf__b_tensor(&b, big_out, 1);
	} else {
		f->out = small->data;
		f->io = y->data;
		b.c->u.host.fn = rf__relu_pool_fwd_fn;
		rf__b_tensor(&b, y, 1);
		rf__b_tensor(&b, small, 1);
	}
	b.c->u.host.arg = f;
	return rf__b_push(&b, s, y->dev);
}

int rf_relu_avgpool2d_fwd(struct rf_stream *s, struct rf_tensor *p, struct rf_tensor *y)
{
	if (!p || !y)
		return rf__bad("rf_relu_avgpool2d_fwd", "NULL tensor");
	return rf__fused_pool(s, "rf_relu_avgpool2d_fwd", "relu_avgpool2d_fwd", 0, y, p, y);
}

int rf_avgpool2d_relu_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy,
			  struct rf_tensor *y)
{
	if (!dx || !dy || !y)
		return rf__bad("rf_avgpool2d_relu_bwd", "NULL tensor");
	return rf__fused_pool(s, "rf_avgpool2d_relu_bwd", "avgpool2d_relu_bwd", 1, dx, dy, y);
}
