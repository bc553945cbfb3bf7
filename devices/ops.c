/* devices/ops.c — ops.h: validate, build an op context, push one engine op.
 *
 * Each push allocates one struct rf__opctx (plus a workspace from the executing
 * device's caching allocator for convolutions); the engine op's function hands it to
 * the executing device's backend (iface->compute) on the stream's thread, and the done
 * callback (reactor thread) reports an error, frees the workspace and the context.
 *
 * Variables: an op reads the variables of its inputs and writes those of its
 * outputs; a tensor that is a block contributes its own variable and those of all its
 * live views (tensor.h). The engine deduplicates (a tensor both read and written is
 * written). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device-impl.h"

/* ---- variable lists ------------------------------------------------------------------ */

struct rf__vl {
	struct rf_var **v;
	unsigned n, cap;
	struct rf_var *inl[16];
};

static void rf__vl_init(struct rf__vl *l)
{
	l->v = l->inl;
	l->n = 0;
	l->cap = 16;
}

static int rf__vl_add(struct rf__vl *l, struct rf_var *v)
{
	if (l->n == l->cap) {
		unsigned cap = l->cap * 2;
		struct rf_var **nv = malloc(cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		memcpy(nv, l->v, l->n * sizeof(*nv));
		if (l->v != l->inl)
			free(l->v);
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
	return 0;
}

static int rf__vl_add_tensor(struct rf__vl *l, struct rf_tensor *t)
{
	struct rf_tensor *v;
	int ret = rf__vl_add(l, t->var);

	for (v = t->views; v && ret == 0; v = v->next_view)
		ret = rf__vl_add(l, v->var);
	return ret;
}

static void rf__vl_fini(struct rf__vl *l)
{
	if (l->v != l->inl)
		free(l->v);
}

/* ---- builder ----------------------------------------------------------------------- */

#define RF__MAXT 64

struct rf__b {
	struct rf__opctx *c;
	const char *fn;                  /* public function name, for messages */
	struct rf_tensor *ts[RF__MAXT];  /* every tensor, for the device check */
	unsigned nt;
	int err;
	struct rf__vl r, w;              /* (rf__b_init clears everything before r) */
};

static int rf__bad(const char *fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rf__bad(const char *fn, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rf__fail(-EINVAL, "%s: %s", fn, msg);
}

static int rf__b_init(struct rf__b *b, const char *fn, int code, const char *name, size_t extra)
{
	memset(b, 0, offsetof(struct rf__b, r));
	rf__vl_init(&b->r);
	rf__vl_init(&b->w);
	b->fn = fn;
	b->c = calloc(1, sizeof(*b->c) + extra);
	if (!b->c)
		return -ENOMEM;
	b->c->code = code;
	b->c->name = name;
	return 0;
}

static void rf__b_tensor(struct rf__b *b, struct rf_tensor *t, int write)
{
	if (!t || b->err)
		return;
	if (b->nt == RF__MAXT) {
		b->err = -E2BIG;
		return;
	}
	b->ts[b->nt++] = t;
	if (rf__vl_add_tensor(write ? &b->w : &b->r, t) < 0)
		b->err = -ENOMEM;
}

static void rf__b_fail(struct rf__b *b)
{
	free(b->c);
	b->c = NULL;
	rf__vl_fini(&b->r);
	rf__vl_fini(&b->w);
}

static int rf__op_fn(void *arg)
{
	struct rf__opctx *c = arg;
	int ret = c->xdev->iface->compute(c->xdev, c->ds, c);

	c->status = ret;
	c->ran = 1;
	return ret;
}

static void rf__op_done(void *arg, int status)
{
	struct rf__opctx *c = arg;
	struct rf_device *d = c->xdev;

	/* Report the op's own failure; a skipped op was reported by its producer, and a
	 * CUDA stream that died reports that itself. */
	if (status < 0 && c->ran && c->status < 0) {
		const char *txt = c->err[0] ? c->err
			: d->iface->strerror ? d->iface->strerror(c->status) : strerror(-c->status);
		rf__device_error(d, "op %s on %s failed: %s (%d)", c->name,
				 c->ds ? rf_stream_name(c->ds->s) : d->name, txt, c->status);
	}
	if (c->ws)
		rf__cache_free(&d->mem, c->ws, c->ws_bytes);
	free(c);
}

/* Pick the executing device and stream. home: the device of the op's output. */
static int rf__resolve(struct rf__b *b, struct rf_stream *s, struct rf_device *home)
{
	struct rf__opctx *c = b->c;
	struct rf__dstream *ds;
	unsigned i;

	if (!home)
		return rf__bad(b->fn, "no output tensor");
	if (!s) {
		c->xdev = home;
		c->ds = &home->ds[0];
	} else if ((ds = rf__device_dstream(home, s)) || (ds = rf__cuda_dstream(s))) {
		c->xdev = ds->dev;
		c->ds = ds;
	} else if (home->kind == RF_DEVICE_CPU) {
		c->xdev = home;  /* a foreign CPU-capable stream (inline, a worker) */
		c->ds = NULL;
	} else {
		return rf__bad(b->fn, "stream %s cannot run ops on %s", rf_stream_name(s), home->name);
	}
	for (i = 0; i < b->nt; i++) {
		struct rf_device *td = b->ts[i]->dev;
		/* A CUDA op reads only its own GPU's memory (no peer access is enabled);
		 * rf_sum also takes tensors of another device object on the same GPU (the
		 * kv-store's replicas when there are more replicas than GPUs). */
		int ok = c->xdev->kind == RF_DEVICE_CPU ? td->kind == RF_DEVICE_CPU
			: (td == c->xdev ||
			   (c->code == RF__SUM && td->kind == RF_DEVICE_CUDA &&
			    rf_device_ordinal(td) == rf_device_ordinal(c->xdev)));
		if (!ok) {
			char buf[96];
			return rf__bad(b->fn, "tensor %s is not on %s (the stream's device): copy "
				       "it first", rf_tensor_describe(b->ts[i], buf, sizeof(buf)),
				       c->xdev->name);
		}
	}
	return 0;
}

static int rf__b_push(struct rf__b *b, struct rf_stream *s, struct rf_device *home)
{
	struct rf__opctx *c = b->c;
	struct rf_op_desc d = { 0 };
	int ret = b->err;

	if (ret == 0)
		ret = rf__resolve(b, s, home);
	if (ret < 0)
		goto fail;
	if (c->code == RF__HOST && c->xdev->kind != RF_DEVICE_CPU) {
		ret = rf__bad(b->fn, "a host op needs a CPU-capable stream");
		goto fail;
	}
	d.fn = rf__op_fn;
	d.ctx = c;
	d.done = rf__op_done;
	d.reads = b->r.v;
	d.nreads = b->r.n;
	d.writes = b->w.v;
	d.nwrites = b->w.n;
	d.stream = c->ds ? c->ds->s : s;
	d.name = c->name;
	ret = rf_engine_push(c->xdev->eng, &d);
	if (ret < 0)
		goto fail;
	rf__vl_fini(&b->r);
	rf__vl_fini(&b->w);
	return 0;
fail:
	if (c->ws)
		rf__cache_free(&c->xdev->mem, c->ws, c->ws_bytes);
	rf__b_fail(b);
	return ret;
}

/* ---- checks ---------------------------------------------------------------------------- */

static int rf__need(const char *fn, const char *what, const struct rf_tensor *t,
		    enum rf_tdtype dt, int ndim)
{
	char buf[96];

	if (!t)
		return rf__bad(fn, "%s is NULL", what);
	if (t->dtype != dt)
		return rf__bad(fn, "%s %s: expected %s", what, rf_tensor_describe(t, buf, sizeof(buf)),
			       rf_tdtype_name(dt));
	if (ndim >= 0 && t->ndim != ndim)
		return rf__bad(fn, "%s %s: expected %d dimensions", what,
			       rf_tensor_describe(t, buf, sizeof(buf)), ndim);
	return 0;
}

static int rf__same_numel(const char *fn, const struct rf_tensor *a, const struct rf_tensor *b)
{
	char b1[96], b2[96];

	if (a->numel != b->numel)
		return rf__bad(fn, "%s and %s differ in size", rf_tensor_describe(a, b1, sizeof(b1)),
			       rf_tensor_describe(b, b2, sizeof(b2)));
	if (a->numel > (size_t)INT32_MAX * 64)
		return rf__bad(fn, "tensor too large");
	return 0;
}

static int rf__rows_cols(const struct rf_tensor *t, int *rows, int *cols)
{
	if (t->ndim < 1 || t->shape[0] <= 0) {
		*rows = *cols = 0;
		return t->numel == 0 ? 0 : -EINVAL;
	}
	*rows = (int)t->shape[0];
	if (t->numel / (size_t)t->shape[0] > INT32_MAX)
		return -EINVAL;
	*cols = (int)(t->numel / (size_t)t->shape[0]);
	return 0;
}

#define RF__TRY(x) do { int _r = (x); if (_r < 0) return _r; } while (0)

/* ---- the ops ---------------------------------------------------------------------------- */

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
		return rf__bad(fn, "op(A)·op(B) = C needs (m, k)·(k, n) = (m, n): A%s = %s, B%s = %s, C = %s",
			       ta ? "ᵀ" : "", rf_tensor_describe(A, b1, sizeof(b1)),
			       tb ? "ᵀ" : "", rf_tensor_describe(B, b2, sizeof(b2)),
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

/* Conv: fill the shape, allocate the workspace on the executing device. */
static int rf__conv_shape(const char *fn, struct rf_k_conv2d *cs, struct rf_tensor *x,
			  struct rf_tensor *w, struct rf_tensor *y)
{
	char b1[96], b2[96], b3[96];

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
	if (w->shape[1] != cs->c || cs->kh > cs->h || cs->kw > cs->w || cs->kh < 1 || cs->kw < 1 ||
	    y->shape[0] != cs->n || y->shape[1] != cs->o || y->shape[2] != rf_k_conv2d_oh(cs) ||
	    y->shape[3] != rf_k_conv2d_ow(cs))
		return rf__bad(fn, "shapes do not make a stride-1 unpadded conv2d: x %s, w %s, y %s",
			       rf_tensor_describe(x, b1, sizeof(b1)), rf_tensor_describe(w, b2, sizeof(b2)),
			       rf_tensor_describe(y, b3, sizeof(b3)));
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
		  struct rf_tensor *w, struct rf_tensor *bias)
{
	static const char fn[] = "rf_conv2d_fwd";
	struct rf_k_conv2d cs;
	struct rf__b b;

	RF__TRY(rf__conv_shape(fn, &cs, x, w, y));
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
		       struct rf_tensor *w)
{
	static const char fn[] = "rf_conv2d_bwd_data";
	struct rf_k_conv2d cs;
	struct rf__b b;

	RF__TRY(rf__conv_shape(fn, &cs, dx, w, dy));
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
			 struct rf_tensor *dy, struct rf_tensor *x, int accumulate)
{
	static const char fn[] = "rf_conv2d_bwd_filter";
	struct rf_k_conv2d cs;
	struct rf__b b;

	RF__TRY(rf__conv_shape(fn, &cs, x, dw, dy));
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

	RF__TRY(rf__conv_shape(fn, &cs, x, dw, y));
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

int rf_sgd(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *g, float lr,
	   float weight_decay)
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
	rf__b_tensor(&b, g, 0);
	rf__b_tensor(&b, w, 1);
	return rf__b_push(&b, s, w->dev);
}

int rf_sgd_momentum(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *v,
		    struct rf_tensor *g, float lr, float momentum, float weight_decay)
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
	rf__b_tensor(&b, g, 0);
	rf__b_tensor(&b, w, 1);
	rf__b_tensor(&b, v, 1);
	return rf__b_push(&b, s, w->dev);
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

/* ---- random numbers ---------------------------------------------------------------- */

struct rf_prng *rf_prng_new(struct rf_engine *e, uint64_t seed, const char *name)
{
	struct rf_prng *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->var = rf_var_new(e, name ? name : "prng");
	if (!g->var) {
		free(g);
		return NULL;
	}
	g->seed = seed;
	g->eng = e;
	return g;
}

void rf_prng_free(struct rf_prng *g)
{
	if (g && rf_var_delete(g->eng, g->var, free, g, NULL) < 0) {
		rf_engine_wait_idle(g->eng);
		free(g);
	}
}

static int rf__rand(struct rf_stream *s, const char *fn, int code, const char *name,
		    struct rf_tensor *x, struct rf_prng *g, float a, float b2)
{
	struct rf__b b;

	RF__TRY(rf__need(fn, "x", x, RF_F32, -1));
	if (!g || g->eng != x->dev->eng)
		return rf__bad(fn, "no generator, or one of another engine");
	RF__TRY(rf__b_init(&b, fn, code, name, 0));
	b.c->u.rand.x = x->data;
	b.c->u.rand.n = x->numel;
	b.c->u.rand.g = g;
	b.c->u.rand.a = a;
	b.c->u.rand.b = b2;
	rf__b_tensor(&b, x, 1);
	if (!b.err && rf__vl_add(&b.w, g->var) < 0)
		b.err = -ENOMEM;
	return rf__b_push(&b, s, x->dev);
}

int rf_rand_uniform(struct rf_stream *s, struct rf_tensor *x, struct rf_prng *g, float lo,
		    float hi)
{
	return rf__rand(s, "rf_rand_uniform", RF__RAND_UNIFORM, "rand_uniform", x, g, lo, hi);
}

int rf_rand_normal(struct rf_stream *s, struct rf_tensor *x, struct rf_prng *g, float mean,
		   float std)
{
	return rf__rand(s, "rf_rand_normal", RF__RAND_NORMAL, "rand_normal", x, g, mean, std);
}

/* ---- copies ---------------------------------------------------------------------------- */

/* The copy's executing device and default stream. A CUDA side decides. */
static int rf__copy_resolve(struct rf__b *b, struct rf_stream *s, struct rf_device *dd,
			    struct rf_device *sd)
{
	struct rf__opctx *c = b->c;
	struct rf__dstream *ds = NULL;

	if (s) {
		ds = rf__device_dstream(dd, s);
		if (!ds)
			ds = rf__device_dstream(sd, s);
		if (!ds)
			ds = rf__cuda_dstream(s);
		if (!ds && dd->kind == RF_DEVICE_CPU && sd->kind == RF_DEVICE_CPU) {
			c->xdev = dd;
			c->ds = NULL;
			return 0;
		}
		if (!ds)
			return rf__bad(b->fn, "stream %s cannot copy %s -> %s", rf_stream_name(s),
				       sd->name, dd->name);
	} else if (dd->kind == RF_DEVICE_CUDA && sd->kind == RF_DEVICE_CPU) {
		ds = &dd->ds[dd->h2d];
	} else if (sd->kind == RF_DEVICE_CUDA && dd->kind == RF_DEVICE_CPU) {
		ds = &sd->ds[sd->d2h];
	} else if (dd->kind == RF_DEVICE_CUDA) {
		ds = dd == sd ? &dd->ds[0] : &dd->ds[dd->h2d];
	} else {
		ds = &dd->ds[dd->h2d]; /* host to host: the copy stream */
	}
	c->ds = ds;
	c->xdev = ds->dev;
	if (c->xdev->kind == RF_DEVICE_CPU) {
		if (dd->kind != RF_DEVICE_CPU || sd->kind != RF_DEVICE_CPU)
			return rf__bad(b->fn, "a CPU stream cannot copy %s -> %s", sd->name, dd->name);
		c->xdev = dd;
	} else if (c->xdev != dd && c->xdev != sd) {
		return rf__bad(b->fn, "stream %s is on neither %s nor %s", rf_stream_name(ds->s),
			       sd->name, dd->name);
	}
	return 0;
}

/* Push a copy of bytes from src to dst; reads rv (n_r), writes wv. Used by rf_copy
 * and by the host reads/writes of tensor.c. */
int rf__copy_push(struct rf_stream *s, struct rf_device *dd, struct rf_device *sd, void *dst,
		  const void *src, size_t bytes, struct rf_tensor *tr, struct rf_var *vr,
		  struct rf_tensor *tw, struct rf_var *vw, const char *name)
{
	struct rf__b b;
	struct rf_op_desc d = { 0 };
	int ret;

	RF__TRY(rf__b_init(&b, "rf_copy", RF__COPY, name, 0));
	b.c->u.copy.dst = dst;
	b.c->u.copy.src = src;
	b.c->u.copy.bytes = bytes;
	if (tr)
		rf__vl_add_tensor(&b.r, tr);
	if (vr)
		rf__vl_add(&b.r, vr);
	if (tw)
		rf__vl_add_tensor(&b.w, tw);
	if (vw)
		rf__vl_add(&b.w, vw);
	ret = rf__copy_resolve(&b, s, dd, sd);
	if (ret < 0) {
		rf__b_fail(&b);
		return ret;
	}
	d.fn = rf__op_fn;
	d.ctx = b.c;
	d.done = rf__op_done;
	d.reads = b.r.v;
	d.nreads = b.r.n;
	d.writes = b.w.v;
	d.nwrites = b.w.n;
	d.stream = b.c->ds ? b.c->ds->s : s;
	d.name = name;
	d.bytes = 0;
	ret = rf_engine_push(b.c->xdev->eng, &d);
	if (ret < 0) {
		rf__b_fail(&b);
		return ret;
	}
	rf__vl_fini(&b.r);
	rf__vl_fini(&b.w);
	return 0;
}

int rf_copy(struct rf_stream *s, struct rf_tensor *dst, struct rf_tensor *src)
{
	char b1[96], b2[96];

	if (!dst || !src)
		return rf__bad("rf_copy", "NULL tensor");
	if (dst->nbytes != src->nbytes)
		return rf__bad("rf_copy", "%s and %s differ in bytes",
			       rf_tensor_describe(dst, b1, sizeof(b1)),
			       rf_tensor_describe(src, b2, sizeof(b2)));
	if (dst->st == src->st && dst->data == src->data)
		return rf__bad("rf_copy", "source and destination are the same memory");
	return rf__copy_push(s, dst->dev, src->dev, dst->data, src->data, dst->nbytes, src, NULL,
			     dst, NULL, "copy");
}

int rf_host_op(struct rf_stream *s, int (*fn)(void *arg), void *arg,
	       struct rf_tensor *const *reads, unsigned nreads,
	       struct rf_tensor *const *writes, unsigned nwrites, const char *name)
{
	static const char fnn[] = "rf_host_op";
	struct rf__b b;
	struct rf_device *home = NULL;
	unsigned i;

	if (!fn || (nreads && !reads) || (nwrites && !writes))
		return rf__bad(fnn, "bad arguments");
	for (i = 0; i < nwrites && !home; i++)
		if (writes[i]->dev->kind == RF_DEVICE_CPU)
			home = writes[i]->dev;
	for (i = 0; i < nreads && !home; i++)
		if (reads[i]->dev->kind == RF_DEVICE_CPU)
			home = reads[i]->dev;
	if (!home)
		return rf__bad(fnn, "a host op needs at least one host tensor");
	RF__TRY(rf__b_init(&b, fnn, RF__HOST, name ? name : "host_op", 0));
	b.c->u.host.fn = fn;
	b.c->u.host.arg = arg;
	for (i = 0; i < nreads; i++)
		rf__b_tensor(&b, reads[i], 0);
	for (i = 0; i < nwrites; i++)
		rf__b_tensor(&b, writes[i], 1);
	if (!s)
		s = rf_engine_inline_stream(home->eng);
	return rf__b_push(&b, s, home);
}
