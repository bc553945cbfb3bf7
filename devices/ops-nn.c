/* devices/ops-nn.c -- ops.h's layer ops: gemm, bias, relu, softmax cross-entropy,
 * average pooling and the fused relu/pool ops (run where a backend has them). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "op-impl.h"

int rf_gemm(struct rf_stream *s, int ta, int tb, float alpha, struct rf_tensor *A,
	    struct rf_tensor *B, float beta, struct rf_tensor *C)
{
	static const char fn[] = "rf_gemm";
	struct rf__b b;
	struct rf__op *op;
	int m, n, k, kb, nb;
	char b1[96], b2[96], b3[96];

	RF__TRY(RF__SIG(fn, RF__OP_GEMM, C, A, B));
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
	RF__TRY(rf__b_init(&b, fn, RF__OP_GEMM, NULL, 0));
	op = b.c;
	op->p.gemm.ta = !!ta;
	op->p.gemm.tb = !!tb;
	op->p.gemm.m = m;
	op->p.gemm.n = n;
	op->p.gemm.k = k;
	op->p.gemm.alpha = alpha;
	op->p.gemm.beta = beta;
	rf__b_set(&b, &op->o.gemm.a, A);
	rf__b_set(&b, &op->o.gemm.b, B);
	rf__b_set(&b, &op->o.gemm.c, C);
	return rf__b_push(&b, s, C->dev);
}

/* add: out = y (rows, cols), in = b (cols). grad: out = db (cols), in = dy. */
static int rf__bias(struct rf_stream *s, const char *fn, enum rf__opcode code,
		    struct rf_tensor *out, struct rf_tensor *in, int accumulate)
{
	struct rf_tensor *y = code == RF__OP_BIAS_ADD ? out : in;
	struct rf_tensor *bias = code == RF__OP_BIAS_ADD ? in : out;
	struct rf__b b;
	int rows, cols;
	char b1[96], b2[96];

	RF__TRY(RF__SIG(fn, code, out, in));
	if (rf__rows_cols(y, &rows, &cols) < 0 || bias->numel != (size_t)cols)
		return rf__bad(fn, "%s is not (rows, cols) with %s of cols elements",
			       rf_tensor_describe(y, b1, sizeof(b1)),
			       rf_tensor_describe(bias, b2, sizeof(b2)));
	RF__TRY(rf__b_init(&b, fn, code, NULL, 0));
	b.c->p.bias.rows = rows;
	b.c->p.bias.cols = cols;
	b.c->p.bias.acc = !!accumulate;
	/* both ops name their (out, in) operands in that order */
	rf__b_set(&b, &b.c->o.t[1], in);
	rf__b_set(&b, &b.c->o.t[0], out);
	return rf__b_push(&b, s, out->dev);
}

int rf_bias_add(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *bias)
{
	return rf__bias(s, "rf_bias_add", RF__OP_BIAS_ADD, y, bias, 0);
}

int rf_bias_grad(struct rf_stream *s, struct rf_tensor *db, struct rf_tensor *dy, int accumulate)
{
	return rf__bias(s, "rf_bias_grad", RF__OP_BIAS_GRAD, db, dy, accumulate);
}

int rf_relu_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x)
{
	static const char fn[] = "rf_relu_fwd";
	struct rf__b b;

	RF__TRY(RF__SIG(fn, RF__OP_RELU_FWD, y, x));
	RF__TRY(rf__b_init(&b, fn, RF__OP_RELU_FWD, NULL, 0));
	b.c->p.ew.n = y->numel;
	rf__b_set(&b, &b.c->o.relu_fwd.x, x);
	rf__b_set(&b, &b.c->o.relu_fwd.y, y);
	return rf__b_push(&b, s, y->dev);
}

int rf_add_relu_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *a,
		    struct rf_tensor *b)
{
	static const char fn[] = "rf_add_relu_fwd";
	struct rf__b bl;

	RF__TRY(RF__SIG(fn, RF__OP_ADD_RELU, y, a, b));
	RF__TRY(rf__b_init(&bl, fn, RF__OP_ADD_RELU, NULL, 0));
	bl.c->p.ew.n = y->numel;
	rf__b_set(&bl, &bl.c->o.add_relu.a, a);
	rf__b_set(&bl, &bl.c->o.add_relu.b, b);
	rf__b_set(&bl, &bl.c->o.add_relu.y, y);
	return rf__b_push(&bl, s, y->dev);
}

int rf_relu_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy,
		struct rf_tensor *y)
{
	static const char fn[] = "rf_relu_bwd";
	struct rf__b b;

	RF__TRY(RF__SIG(fn, RF__OP_RELU_BWD, dx, dy, y));
	RF__TRY(rf__b_init(&b, fn, RF__OP_RELU_BWD, NULL, 0));
	b.c->p.ew.n = dx->numel;
	rf__b_set(&b, &b.c->o.relu_bwd.dy, dy);
	rf__b_set(&b, &b.c->o.relu_bwd.y, y);
	rf__b_set(&b, &b.c->o.relu_bwd.dx, dx);
	return rf__b_push(&b, s, dx->dev);
}

int rf_softmax_xent(struct rf_stream *s, struct rf_tensor *dlogits, struct rf_tensor *loss,
		    struct rf_tensor *correct, struct rf_tensor *logits, struct rf_tensor *labels)
{
	static const char fn[] = "rf_softmax_xent";
	struct rf__b b;
	struct rf__op *op;
	struct rf_device *home;
	char b1[96], b2[96];

	RF__TRY(RF__SIG(fn, RF__OP_XENT, dlogits, loss, correct, logits, labels));
	if (labels->numel != (size_t)logits->shape[0])
		return rf__bad(fn, "labels %s: expected %lld labels for logits %s",
			       rf_tensor_describe(labels, b1, sizeof(b1)),
			       (long long)logits->shape[0], rf_tensor_describe(logits, b2, sizeof(b2)));
	if (loss && loss->numel != 1)
		return rf__bad(fn, "loss must have one element");
	if (correct && correct->numel != 1)
		return rf__bad(fn, "correct must have one element");
	if (!dlogits && !loss && !correct)
		return rf__bad(fn, "no output");
	RF__TRY(rf__b_init(&b, fn, RF__OP_XENT, dlogits ? "softmax_xent" : "softmax_xent_eval", 0));
	op = b.c;
	op->p.xent.rows = (int)logits->shape[0];
	op->p.xent.cols = (int)logits->shape[1];
	rf__b_set(&b, &op->o.xent.logits, logits);
	rf__b_set(&b, &op->o.xent.labels, labels);
	rf__b_set(&b, &op->o.xent.dlogits, dlogits);
	rf__b_set(&b, &op->o.xent.loss, loss);
	rf__b_set(&b, &op->o.xent.correct, correct);
	home = dlogits ? dlogits->dev : loss ? loss->dev : correct->dev;
	return rf__b_push(&b, s, home);
}

/* big (n, c, h, w), small its k x k average pooling (floor) */
static int rf__pool_dims(const char *fn, struct rf_tensor *big, struct rf_tensor *small, int k,
			 struct rf__op *op)
{
	char b1[96], b2[96];

	if (k < 1 || small->shape[0] != big->shape[0] || small->shape[1] != big->shape[1] ||
	    small->shape[2] != big->shape[2] / k || small->shape[3] != big->shape[3] / k)
		return rf__bad(fn, "%s is not %s pooled %dx%d", rf_tensor_describe(small, b1, sizeof(b1)),
			       rf_tensor_describe(big, b2, sizeof(b2)), k, k);
	op->p.pool.n = (int)big->shape[0];
	op->p.pool.c = (int)big->shape[1];
	op->p.pool.h = (int)big->shape[2];
	op->p.pool.w = (int)big->shape[3];
	op->p.pool.k = op->p.pool.st = k;
	return 0;
}

static int rf__pool(struct rf_stream *s, const char *fn, enum rf__opcode code,
		    struct rf_tensor *out, struct rf_tensor *in, struct rf_tensor *big,
		    struct rf_tensor *small, int k)
{
	struct rf__b b;
	int ret;

	RF__TRY(RF__SIG(fn, code, out, in));
	RF__TRY(rf__b_init(&b, fn, code, NULL, 0));
	if ((ret = rf__pool_dims(fn, big, small, k, b.c)) < 0) {
		rf__b_fail(&b);
		return ret;
	}
	rf__b_set(&b, &b.c->o.t[1], in);   /* (out, in): avgpool2d_fwd (y, x), _bwd (dx, dy) */
	rf__b_set(&b, &b.c->o.t[0], out);
	return rf__b_push(&b, s, out->dev);
}

int rf_avgpool2d_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x, int k)
{
	return rf__pool(s, "rf_avgpool2d_fwd", RF__OP_AVGPOOL_FWD, y, x, x, y, k);
}

int rf_avgpool2d_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy, int k)
{
	return rf__pool(s, "rf_avgpool2d_bwd", RF__OP_AVGPOOL_BWD, dx, dy, dx, dy, k);
}

/* The fused ReLU and 2x2 pooling: big (y or dx) and y (n, c, h, w), small their
 * pooling. */
static int rf__fused_pool(struct rf_stream *s, const char *fn, int bwd, struct rf_tensor *big_out,
			  struct rf_tensor *small, struct rf_tensor *y)
{
	struct rf__b b;
	struct rf__op *op;
	int ret;

	if (bwd)
		RF__TRY(RF__SIG(fn, RF__OP_AVGPOOL2_RELU_BWD, big_out, small, y));
	else
		RF__TRY(RF__SIG(fn, RF__OP_RELU_AVGPOOL2_FWD, small, y));
	RF__TRY(rf__b_init(&b, fn, bwd ? RF__OP_AVGPOOL2_RELU_BWD : RF__OP_RELU_AVGPOOL2_FWD, NULL, 0));
	op = b.c;
	if ((ret = rf__pool_dims(fn, y, small, 2, op)) < 0) {
		rf__b_fail(&b);
		return ret;
	}
	if (bwd) {
		rf__b_set(&b, &op->o.avgpool2_relu_bwd.dy, small);
		rf__b_set(&b, &op->o.avgpool2_relu_bwd.y, y);
		rf__b_set(&b, &op->o.avgpool2_relu_bwd.dx, big_out);
	} else {
		rf__b_set(&b, &op->o.relu_avgpool2_fwd.y, y);
		rf__b_set(&b, &op->o.relu_avgpool2_fwd.p, small);
	}
	return rf__b_push(&b, s, y->dev);
}

int rf_relu_avgpool2d_fwd(struct rf_stream *s, struct rf_tensor *p, struct rf_tensor *y)
{
	return rf__fused_pool(s, "rf_relu_avgpool2d_fwd", 0, y, p, y);
}

int rf_avgpool2d_relu_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy,
			  struct rf_tensor *y)
{
	return rf__fused_pool(s, "rf_avgpool2d_relu_bwd", 1, dx, dy, y);
}
