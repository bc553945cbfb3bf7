/* devices/op.c -- the path every op takes: its operands filled from tensors, the
 * executing device and stream picked, its backend asked whether it runs the op
 * (supports_op) and how much workspace it wants, one engine op pushed whose function
 * hands the op to the backend (compute) on the stream's thread and whose done
 * callback (reactor thread) reports an error and frees the workspace and the op.
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

#include "op-impl.h"

/* ---- variable lists ------------------------------------------------------------------ */

void rf__vl_init(struct rf__vl *l)
{
	l->v = l->inl;
	l->n = 0;
	l->cap = 16;
}

int rf__vl_add(struct rf__vl *l, struct rf_var *v)
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

int rf__vl_add_tensor(struct rf__vl *l, struct rf_tensor *t)
{
	struct rf_tensor *v;
	int ret = rf__vl_add(l, t->var);

	for (v = t->views; v && ret == 0; v = v->next_view)
		ret = rf__vl_add(l, v->var);
	return ret;
}

void rf__vl_fini(struct rf__vl *l)
{
	if (l->v != l->inl)
		free(l->v);
}

/* ---- builder ----------------------------------------------------------------------- */

int rf__bad(const char *fn, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rf__fail(-EINVAL, "%s: %s", fn, msg);
}

int rf__b_init(struct rf__b *b, const char *fn, enum rf__opcode code, const char *name,
	       unsigned nsum)
{
	const struct rf__opsig *g = &rf__opsigs[code];

	memset(b, 0, offsetof(struct rf__b, r));
	rf__vl_init(&b->r);
	rf__vl_init(&b->w);
	b->fn = fn;
	b->c = calloc(1, sizeof(*b->c) + nsum * sizeof(struct rf__tref));
	if (!b->c)
		return -ENOMEM;
	b->c->code = code;
	b->c->name = name ? name : g->name;
	b->c->nt = code == RF__OP_SUM ? 1 + nsum : (unsigned)(g->nout + g->nin);
	if (code == RF__OP_SUM) {
		b->c->p.sum.in = (struct rf__tref *)(b->c + 1);
		b->c->p.sum.k = (int)nsum;
	}
	return 0;
}

void rf__tref_of(struct rf__tref *t, const struct rf_tensor *x)
{
	t->data = x->data;
	t->dev = x->dev;
	t->dtype = x->dtype;
	t->layout = x->layout;
	t->ndim = x->ndim;
	memcpy(t->shape, x->shape, sizeof(t->shape));
	t->numel = x->numel;
}

void rf__b_tensor(struct rf__b *b, struct rf_tensor *x, int write)
{
	if (!x || b->err)
		return;
	if (b->nt == RF__MAXT) {
		b->err = -E2BIG;
		return;
	}
	b->ts[b->nt++] = x;
	if (rf__vl_add_tensor(write ? &b->w : &b->r, x) < 0)
		b->err = -ENOMEM;
}

void rf__b_set(struct rf__b *b, struct rf__tref *t, struct rf_tensor *x)
{
	struct rf__op *op = b->c;
	int write = t >= op->o.t && t < op->o.t + RF__OP_NT && rf__op_writes(op, (unsigned)(t - op->o.t));

	if (!x || b->err)
		return;
	rf__tref_of(t, x);
	rf__b_tensor(b, x, write);
}

void rf__b_var(struct rf__b *b, struct rf_var *v, int write)
{
	if (v && !b->err && rf__vl_add(write ? &b->w : &b->r, v) < 0)
		b->err = -ENOMEM;
}

void rf__b_fail(struct rf__b *b)
{
	free(b->c);
	b->c = NULL;
	rf__vl_fini(&b->r);
	rf__vl_fini(&b->w);
}

int rf__op_fn(void *arg)
{
	struct rf__op *c = arg;
	int ret = c->xdev->dry_run && c->code != RF__OP_COPY && c->code != RF__OP_HOST ? 0
		: c->xdev->be->compute(c->xdev, c->ds, c);

	c->status = ret;
	c->ran = 1;
	return ret;
}

void rf__op_done(void *arg, int status)
{
	struct rf__op *c = arg;
	struct rf_device *d = c->xdev;

	/* Report the op's own failure; a skipped op was reported by its producer, and a
	 * device stream that died reports that itself. */
	if (status < 0 && c->ran && c->status < 0) {
		const char *txt = c->err[0] ? c->err
			: d->be->strerror ? d->be->strerror(c->status) : strerror(-c->status);
		rf__device_error(d, "op %s on %s failed: %s (%d)", c->name,
				 c->ds ? rf_stream_name(c->ds->s) : d->name, txt, c->status);
	}
	if (c->ws)
		rf__cache_free(&d->mem, c->ws, c->ws_bytes);
	free(c);
}

/* Pick the executing device and stream. home: the device of the op's output. */
int rf__resolve(struct rf__b *b, struct rf_stream *s, struct rf_device *home)
{
	struct rf__op *c = b->c;
	struct rf__dstream *ds;
	unsigned i;

	if (!home)
		return rf__bad(b->fn, "no output tensor");
	if (!s) {
		c->xdev = home;
		c->ds = &home->ds[0];
	} else if ((ds = rf__device_dstream(home, s)) || (ds = rf__backend_dstream(s))) {
		c->xdev = ds->dev;
		c->ds = ds;
	} else if (rf__hostmem(home)) {
		c->xdev = home;  /* a foreign host stream (inline, a worker) */
		c->ds = NULL;
	} else {
		return rf__bad(b->fn, "stream %s cannot run ops on %s", rf_stream_name(s), home->name);
	}
	for (i = 0; i < b->nt; i++) {
		struct rf_device *td = b->ts[i]->dev;
		/* Host ops take any host memory (several host devices share it); a device
		 * reads only its own memory (no peer access is enabled), and rf_sum also
		 * tensors of another device object of the same backend and ordinal (the
		 * kv-store's replicas when there are more replicas than devices). */
		int ok = rf__hostmem(c->xdev) ? rf__hostmem(td)
			: (td == c->xdev || (c->code == RF__OP_SUM && td->be == c->xdev->be &&
					     td->ordinal == c->xdev->ordinal));
		if (!ok) {
			char buf[96];
			return rf__bad(b->fn, "tensor %s is not on %s (the stream's device): copy "
				       "it first", rf_tensor_describe(b->ts[i], buf, sizeof(buf)),
				       c->xdev->name);
		}
	}
	return 0;
}

/* The workspace the backend wants: the fast size, else the least that works. */
static int rf__workspace(struct rf__b *b)
{
	struct rf__op *c = b->c;
	const struct rf__backend *be = c->xdev->be;
	size_t want, min;

	if (!be->workspace || !(want = be->workspace(c->xdev, c, 0)))
		return 0;
	if (rf__cache_alloc(&c->xdev->mem, want, &c->ws) == 0) {
		c->ws_bytes = want;
		return 0;
	}
	min = be->workspace(c->xdev, c, 1);
	if (!min || min > want)
		min = want;
	if (rf__dev_alloc(c->xdev, min, &c->ws) == 0) {
		c->ws_bytes = min;
		return 0;
	}
	c->ws = NULL;
	return rf__fail(-ENOMEM, "%s: no %s memory for the %zu-byte workspace of %s", b->fn,
			c->xdev->name, min ? min : want, c->name);
}

int rf__b_submit(struct rf__b *b, struct rf_stream *s)
{
	struct rf__op *c = b->c;
	const struct rf__backend *be = c->xdev->be;
	struct rf_op_desc d = { 0 };
	char why[200] = "";
	int ret;

	c->math = c->xdev->precision == RF_PRECISION_FP32 ? RF__MATH_FP32 : RF__MATH_TF32;
	if ((be->supports_op && !be->supports_op(c->xdev, c, why, sizeof(why))) ||
	    (c->xdev->admit && !c->xdev->admit(c->xdev->admit_ctx, c, why, sizeof(why)))) {
		ret = rf__fail(-ENOTSUP, "%s: %s does not run %s: %s", b->fn, c->xdev->name,
			       rf__opsigs[c->code].name, why[0] ? why : "not supported");
		goto fail;
	}
	if ((ret = rf__workspace(b)) < 0)
		goto fail;
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

int rf__b_push(struct rf__b *b, struct rf_stream *s, struct rf_device *home)
{
	int ret = b->err;

	if (ret == 0)
		ret = rf__resolve(b, s, home);
	if (ret < 0) {
		rf__b_fail(b);
		return ret;
	}
	return rf__b_submit(b, s);
}

/* ---- checks ---------------------------------------------------------------------------- */

int rf__rows_cols(const struct rf_tensor *t, int *rows, int *cols)
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
