/* devices/copy.c -- moving bytes: rf_copy between devices, the host reads and
 * writes of a tensor (rf_tensor_read/write), and rf_host_op, a host function
 * ordered like an op. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "op-impl.h"

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
 * and by the host reads/writes below. */
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

/* Host reads and writes are copies between t and the caller's buffer, pushed as
 * ordinary copy ops (so they are ordered like everything else), then waited for. A
 * read of a host tensor only needs the writers done, and copies right here. */
static int rf__host_xfer(struct rf_tensor *t, void *host, int to_host)
{
	struct rf_engine *e;
	struct rf_stream *s;
	struct rf_var *tmp;
	int ret;

	if (!t || (!host && t->nbytes))
		return -EINVAL;
	e = t->dev->eng;
	if (!t->nbytes || (t->dev->kind == RF_DEVICE_CPU && to_host)) {
		ret = rf_tensor_wait(t);
		if (ret == 0 && t->nbytes)
			memcpy(host, t->data, t->nbytes);
		return ret;
	}
	if (t->dev->kind == RF_DEVICE_CPU)
		s = rf_engine_inline_stream(e);
	else
		s = to_host ? rf_device_d2h_stream(t->dev) : rf_device_h2d_stream(t->dev);
	if (!to_host) {
		ret = rf__copy_push(s, t->dev, t->dev, t->data, host, t->nbytes, NULL, NULL, t,
				    NULL, "host_write");
		return ret < 0 ? ret : rf_tensor_wait(t);
	}
	ret = rf_var_create(e, "host_read", &tmp);
	if (ret < 0)
		return ret;
	ret = rf__copy_push(s, t->dev, t->dev, host, t->data, t->nbytes, t, NULL, NULL, tmp,
			    "host_read");
	if (ret == 0)
		ret = rf_engine_wait_var(e, tmp);
	rf_var_destroy(e, tmp, NULL, NULL, NULL);
	return ret;
}

int rf_tensor_read(struct rf_tensor *t, void *dst)
{
	return rf__host_xfer(t, dst, 1);
}

int rf_tensor_write(struct rf_tensor *t, const void *src)
{
	return rf__host_xfer(t, (void *)src, 0);
}
