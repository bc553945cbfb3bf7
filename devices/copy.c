/* devices/copy.c -- moving bytes and converting them: rf_copy between devices,
 * rf_convert on one device, the host reads and writes of a tensor (rf_tensor_read,
 * _write, _read_as, _write_as), and rf_host_op, a host function ordered like an op. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "op-impl.h"

/* The copy's executing device and default stream. The side whose memory is not host
 * memory decides: it has the copy engines (its h2d or d2h stream). */
static int rf__copy_resolve(struct rf__b *b, struct rf_stream *s, struct rf_device *dd,
			    struct rf_device *sd)
{
	struct rf__op *c = b->c;
	struct rf__dstream *ds = NULL;
	int dh = rf__hostmem(dd), sh = rf__hostmem(sd);

	if (s) {
		ds = rf__device_dstream(dd, s);
		if (!ds)
			ds = rf__device_dstream(sd, s);
		if (!ds)
			ds = rf__backend_dstream(s);
		if (!ds && dh && sh) {
			c->xdev = dd;   /* a foreign host stream: memcpy there */
			c->ds = NULL;
			return 0;
		}
		if (!ds)
			return rf__bad(b->fn, "stream %s cannot copy %s -> %s", rf_stream_name(s),
				       sd->name, dd->name);
	} else if (!dh && sh) {
		ds = &dd->ds[dd->h2d];
	} else if (!sh && dh) {
		ds = &sd->ds[sd->d2h];
	} else if (!dh) {
		ds = dd == sd ? &dd->ds[0] : &dd->ds[dd->h2d];
	} else {
		ds = &dd->ds[dd->h2d]; /* host to host: the copy stream */
	}
	c->ds = ds;
	c->xdev = ds->dev;
	if (rf__hostmem(c->xdev)) {
		if (!dh || !sh)
			return rf__bad(b->fn, "a host stream cannot copy %s -> %s", sd->name, dd->name);
		c->xdev = dd;
	} else if (c->xdev != dd && c->xdev != sd) {
		return rf__bad(b->fn, "stream %s is on neither %s nor %s", rf_stream_name(ds->s),
			       sd->name, dd->name);
	}
	return 0;
}

/* A raw byte range as a copy operand. */
static void rf__bytes(struct rf__tref *t, void *p, struct rf_device *d, size_t bytes)
{
	t->data = p;
	t->dev = d;
	t->dtype = RF_U8;
	t->layout = RF_LAYOUT_ROWMAJOR;
	t->ndim = 1;
	t->shape[0] = (int64_t)bytes;
	t->shape[1] = t->shape[2] = t->shape[3] = 1;
	t->numel = bytes;
}

/* Push a copy of bytes from src to dst; reads tr and vr, writes tw and vw. Used by
 * rf_copy and by the host reads/writes below. */
int rf__copy_push(struct rf_stream *s, struct rf_device *dd, struct rf_device *sd, void *dst,
		  const void *src, size_t bytes, struct rf_tensor *tr, struct rf_var *vr,
		  struct rf_tensor *tw, struct rf_var *vw, const char *name)
{
	struct rf__b b;
	int ret;

	RF__TRY(rf__b_init(&b, "rf_copy", RF__OP_COPY, name, 0));
	b.c->p.copy.bytes = bytes;
	rf__bytes(&b.c->o.copy.dst, dst, dd, bytes);
	rf__bytes(&b.c->o.copy.src, (void *)src, sd, bytes);
	if (tr && rf__vl_add_tensor(&b.r, tr) < 0)
		b.err = -ENOMEM;
	if (tw && rf__vl_add_tensor(&b.w, tw) < 0)
		b.err = -ENOMEM;
	rf__b_var(&b, vr, 0);
	rf__b_var(&b, vw, 1);
	ret = b.err ? b.err : rf__copy_resolve(&b, s, dd, sd);
	if (ret < 0) {
		rf__b_fail(&b);
		return ret;
	}
	return rf__b_submit(&b, s);
}

int rf_copy(struct rf_stream *s, struct rf_tensor *dst, struct rf_tensor *src)
{
	char b1[96], b2[96];

	if (!dst || !src)
		return rf__bad("rf_copy", "NULL tensor");
	if (dst->nbytes != src->nbytes)
		return rf__bad("rf_copy", "%s and %s differ in bytes%s",
			       rf_tensor_describe(dst, b1, sizeof(b1)),
			       rf_tensor_describe(src, b2, sizeof(b2)),
			       rf__is_float(dst->dtype) && rf__is_float(src->dtype) &&
			       dst->numel == src->numel ? " (rf_convert converts dtypes)" : "");
	if (dst->dtype != src->dtype && rf__is_float(dst->dtype) && rf__is_float(src->dtype))
		return rf__bad("rf_copy", "%s and %s are different float types: rf_convert "
			       "converts", rf_tensor_describe(dst, b1, sizeof(b1)),
			       rf_tensor_describe(src, b2, sizeof(b2)));
	if (dst->layout != src->layout && dst->ndim == 4 && src->ndim == 4)
		return rf__bad("rf_copy", "%s and %s lie in different layouts: rf_convert moves "
			       "the elements", rf_tensor_describe(dst, b1, sizeof(b1)),
			       rf_tensor_describe(src, b2, sizeof(b2)));
	if (dst->st == src->st && dst->data == src->data)
		return rf__bad("rf_copy", "source and destination are the same memory");
	return rf__copy_push(s, dst->dev, src->dev, dst->data, src->data, dst->nbytes, src, NULL,
			     dst, NULL, "copy");
}

int rf_convert(struct rf_stream *s, struct rf_tensor *dst, struct rf_tensor *src)
{
	static const char fn[] = "rf_convert";
	char b1[96], b2[96];
	struct rf__b b;

	if (!dst || !src)
		return rf__bad(fn, "NULL tensor");
	if (dst->ndim != src->ndim ||
	    memcmp(dst->shape, src->shape, sizeof(dst->shape[0]) * (size_t)dst->ndim))
		return rf__bad(fn, "%s and %s differ in shape", rf_tensor_describe(dst, b1, sizeof(b1)),
			       rf_tensor_describe(src, b2, sizeof(b2)));
	if (dst->dtype != src->dtype && !(rf__is_float(dst->dtype) && rf__is_float(src->dtype)))
		return rf__bad(fn, "%s from %s: integer tensors convert only to their own dtype",
			       rf_tensor_describe(dst, b1, sizeof(b1)),
			       rf_tensor_describe(src, b2, sizeof(b2)));
	if (dst->data == src->data)
		return rf__bad(fn, "dst must not be src's memory");
	RF__TRY(rf__b_init(&b, fn, RF__OP_CONVERT, NULL, 0));
	rf__b_set(&b, &b.c->o.convert.src, src);
	rf__b_set(&b, &b.c->o.convert.dst, dst);
	return rf__b_push(&b, s, dst->dev);
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
		if (rf__hostmem(writes[i]->dev))
			home = writes[i]->dev;
	for (i = 0; i < nreads && !home; i++)
		if (rf__hostmem(reads[i]->dev))
			home = reads[i]->dev;
	if (!home)
		return rf__bad(fnn, "a host op needs at least one host tensor");
	RF__TRY(rf__b_init(&b, fnn, RF__OP_HOST, name ? name : "host_op", 0));
	b.c->p.host.fn = fn;
	b.c->p.host.arg = arg;
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
	if (!t->nbytes || (rf__hostmem(t->dev) && to_host)) {
		ret = rf_tensor_wait(t);
		if (ret == 0 && t->nbytes)
			memcpy(host, t->data, t->nbytes);
		return ret;
	}
	if (rf__hostmem(t->dev))
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

/* t's values as dt in logical row-major order: dt t's own and t row-major are the
 * bytes themselves; otherwise through a host copy of the bytes, converted. */
static int rf__xfer_as(struct rf_tensor *t, enum rf_tdtype dt, void *buf, int to_host)
{
	char b1[96];
	void *tmp;
	int ret;

	if (!t || !rf_tdtype_size(dt) || (dt != t->dtype && !(rf__is_float(dt) && rf__is_float(t->dtype))))
		return rf__fail(-EINVAL, "%s %s as %s: %s", to_host ? "rf_tensor_read_as" :
				"rf_tensor_write_as", t ? rf_tensor_describe(t, b1, sizeof(b1)) : "(null)",
				rf_tdtype_name(dt), "float tensors read and write as any float dtype, "
				"integer ones as their own");
	if (dt == t->dtype && t->layout == RF_LAYOUT_ROWMAJOR)
		return to_host ? rf_tensor_read(t, buf) : rf_tensor_write(t, buf);
	if (!(tmp = malloc(t->nbytes ? t->nbytes : 1)))
		return rf__fail(-ENOMEM, "%s: no host memory for a %zu-byte copy", t->name, t->nbytes);
	if (to_host) {
		ret = rf_tensor_read(t, tmp);
		if (ret == 0)
			ret = rf__convert_host(buf, dt, RF_LAYOUT_ROWMAJOR, tmp, t->dtype, t->layout,
					       t->ndim, t->shape);
	} else {
		ret = rf__convert_host(tmp, t->dtype, t->layout, buf, dt, RF_LAYOUT_ROWMAJOR,
				       t->ndim, t->shape);
		if (ret == 0)
			ret = rf_tensor_write(t, tmp);
	}
	free(tmp);
	return ret;
}

int rf_tensor_read_as(struct rf_tensor *t, enum rf_tdtype dt, void *dst)
{
	return rf__xfer_as(t, dt, dst, 1);
}

int rf_tensor_write_as(struct rf_tensor *t, enum rf_tdtype dt, const void *src)
{
	return rf__xfer_as(t, dt, (void *)src, 0);
}
