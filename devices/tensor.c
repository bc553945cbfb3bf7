/* devices/tensor.c -- tensors, blocks and views, and their lifetime.
 *
 * Memory is a reference-counted storage: a tensor made by rf_tensor_create holds one
 * reference, each view one more. rf_tensor_destroy pushes rf_var_destroy on the engine's
 * inline stream, so the release runs on the reactor thread (the allocator's thread)
 * after every op pushed before it on that variable; the last release returns the
 * memory to the caching allocator (or the pinned arena). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device-impl.h"

enum { RF__ST_CACHE, RF__ST_PINNED, RF__ST_EXTERN };

struct rf__storage {
	unsigned refs;
	int kind;
	struct rf_device *dev;
	struct rf_pinned *pin;
	void *ptr;
	size_t bytes;
};

size_t rf_tdtype_size(enum rf_tdtype dt)
{
	switch (dt) {
	case RF_F32: return 4;
	case RF_I32: return 4;
	case RF_U8: return 1;
	case RF_BF16: return 2;
	case RF_F16: return 2;
	}
	return 0;
}

const char *rf_tdtype_name(enum rf_tdtype dt)
{
	switch (dt) {
	case RF_F32: return "f32";
	case RF_I32: return "i32";
	case RF_U8: return "u8";
	case RF_BF16: return "bf16";
	case RF_F16: return "f16";
	}
	return "?";
}

const char *rf_layout_name(enum rf_layout layout)
{
	switch (layout) {
	case RF_LAYOUT_ROWMAJOR: return "rowmajor";
	case RF_LAYOUT_NHWC: return "nhwc";
	}
	return "?";
}

static void rf__storage_unref(struct rf__storage *st)
{
	if (--st->refs)
		return;
	switch (st->kind) {
	case RF__ST_CACHE:
		rf__cache_free(&st->dev->mem, st->ptr, st->bytes);
		break;
	case RF__ST_PINNED:
		rf_pinned_free(st->pin, st->ptr, st->bytes);
		break;
	default:
		break;
	}
	free(st);
}

static int rf__shape_set(struct rf_tensor *t, enum rf_tdtype dt, int ndim, const int64_t *shape)
{
	size_t n = 1;
	int i;

	if (ndim < 0 || ndim > RF_TENSOR_MAX_DIMS || (ndim && !shape) || !rf_tdtype_size(dt))
		return -EINVAL;
	for (i = 0; i < RF_TENSOR_MAX_DIMS; i++)
		t->shape[i] = 1;
	for (i = 0; i < ndim; i++) {
		if (shape[i] < 0 || shape[i] > INT32_MAX)
			return -EINVAL;
		if (shape[i] && n > SIZE_MAX / (size_t)shape[i] / 8)
			return -EINVAL;
		t->shape[i] = shape[i];
		n *= (size_t)shape[i];
	}
	t->dtype = dt;
	t->ndim = ndim;
	t->numel = n;
	t->nbytes = n * rf_tdtype_size(dt);
	return 0;
}

static int rf__tensor_alloc(struct rf_device *d, enum rf_tdtype dt, const char *name, int ndim,
			    const int64_t *shape, struct rf_tensor **out)
{
	struct rf_tensor *t;
	int ret;

	*out = NULL;
	if (!d)
		return rf__fail(-EINVAL, "tensor %s: no device", name ? name : "");
	t = calloc(1, sizeof(*t));
	if (!t)
		return rf__fail(-ENOMEM, "tensor %s: out of memory", name ? name : "");
	if (rf__shape_set(t, dt, ndim, shape) < 0) {
		free(t);
		return rf__fail(-EINVAL, "tensor %s: bad shape (ndim %d, at most %d dims, each in "
				"[0, 2^31))", name ? name : "", ndim, RF_TENSOR_MAX_DIMS);
	}
	snprintf(t->name, sizeof(t->name), "%s", name ? name : "");
	t->dev = d;
	ret = rf_var_create(d->eng, name, &t->var);
	if (ret < 0) {
		free(t);
		return ret;
	}
	*out = t;
	return 0;
}

static int rf__tensor_make(struct rf_device *d, struct rf_pinned *pin, void *ext,
			   enum rf_tdtype dt, enum rf_layout lay, const char *name, int ndim,
			   const int64_t *shape, struct rf_tensor **out)
{
	struct rf_tensor *t;
	struct rf__storage *st;
	int ret;

	*out = NULL;
	if (lay != RF_LAYOUT_ROWMAJOR && (lay != RF_LAYOUT_NHWC || ndim != 4))
		return rf__fail(-EINVAL, "tensor %s: layout %s needs 4 dimensions (n, c, h, w), "
				"not %d", name ? name : "", rf_layout_name(lay), ndim);
	ret = rf__tensor_alloc(d, dt, name, ndim, shape, &t);
	if (ret < 0)
		return ret;
	t->layout = lay;
	st = calloc(1, sizeof(*st));
	if (!st) {
		ret = rf__fail(-ENOMEM, "tensor %s: out of memory", t->name);
		goto fail;
	}
	st->refs = 1;
	st->dev = d;
	st->bytes = t->nbytes;
	if (ext) {
		st->kind = RF__ST_EXTERN;
		st->ptr = ext;
	} else if (pin) {
		st->kind = RF__ST_PINNED;
		st->pin = pin;
		ret = rf_pinned_alloc(pin, t->nbytes, 0, &st->ptr);
		if (ret < 0) {
			rf__fail(ret, "tensor %s: pinned arena full (%zu bytes wanted, "
				 "%zu of %zu in use)", t->name, t->nbytes, rf_pinned_in_use(pin),
				 rf_pinned_size(pin));
			goto fail;
		}
	} else {
		st->kind = RF__ST_CACHE;
		ret = rf__dev_alloc(d, t->nbytes, &st->ptr);
		if (ret < 0) {
			rf__fail(ret, "tensor %s: out of %s memory (%zu bytes)", t->name,
				 d->name, t->nbytes);
			goto fail;
		}
	}
	t->st = st;
	t->data = st->ptr;
	d->live++;
	*out = t;
	return 0;
fail:
	free(st);
	rf_var_destroy(d->eng, t->var, NULL, NULL, NULL);
	free(t);
	return ret;
}

int rf_tensor_create(struct rf_device *d, enum rf_tdtype dt, const char *name, int ndim,
		     const int64_t *shape, struct rf_tensor **out)
{
	return rf__tensor_make(d, NULL, NULL, dt, RF_LAYOUT_ROWMAJOR, name, ndim, shape, out);
}

int rf_tensor_create_layout(struct rf_device *d, enum rf_tdtype dt, enum rf_layout layout,
			    const char *name, int ndim, const int64_t *shape,
			    struct rf_tensor **out)
{
	return rf__tensor_make(d, NULL, NULL, dt, layout, name, ndim, shape, out);
}

int rf_tensor_create_pinned(struct rf_device *cpu, struct rf_pinned *p, enum rf_tdtype dt,
			    const char *name, int ndim, const int64_t *shape, struct rf_tensor **out)
{
	*out = NULL;
	if (!cpu || !p || !rf__hostmem(cpu))
		return rf__fail(-EINVAL, "tensor %s: pinned memory needs a host device and an arena",
				name ? name : "");
	return rf__tensor_make(cpu, p, NULL, dt, RF_LAYOUT_ROWMAJOR, name, ndim, shape, out);
}

int rf_tensor_wrap(struct rf_device *d, void *data, enum rf_tdtype dt, const char *name,
		   int ndim, const int64_t *shape, struct rf_tensor **out)
{
	*out = NULL;
	if (!data)
		return rf__fail(-EINVAL, "tensor %s: no memory to wrap", name ? name : "");
	return rf__tensor_make(d, NULL, data, dt, RF_LAYOUT_ROWMAJOR, name, ndim, shape, out);
}

int rf_tensor_view(struct rf_tensor *block, size_t offset, enum rf_tdtype dt, const char *name,
		   int ndim, const int64_t *shape, struct rf_tensor **out)
{
	struct rf_tensor *t;
	size_t esz = rf_tdtype_size(dt), boff;
	int ret;

	*out = NULL;
	if (!block || block->base || !block->st || !esz)
		return rf__fail(-EINVAL, "view %s: needs a block that is no view and a known dtype",
				name ? name : "");
	ret = rf__tensor_alloc(block->dev, dt, name, ndim, shape, &t);
	if (ret < 0)
		return ret;
	boff = offset * esz;
	if (offset > block->nbytes / esz || t->nbytes > block->nbytes - boff) {
		ret = rf__fail(-EINVAL, "view %s: elements [%zu, %zu) of %s are outside its %zu "
			       "bytes", t->name, offset, offset + t->numel, block->name,
			       block->nbytes);
		rf_var_destroy(block->dev->eng, t->var, NULL, NULL, NULL);
		free(t);
		return ret;
	}
	t->st = block->st;
	t->st->refs++;
	t->data = (char *)block->data + boff;
	t->base = block;
	t->offset = boff;
	t->next_view = block->views;
	block->views = t;
	block->nviews++;
	block->dev->live++;
	*out = t;
	return 0;
}

static void rf__tensor_release(void *arg)
{
	struct rf_tensor *t = arg;

	t->dev->live--;
	rf__storage_unref(t->st);
	free(t);
}

void rf_tensor_destroy(struct rf_tensor *t)
{
	struct rf_tensor **pp, *v;

	if (!t)
		return;
	if (t->base) {
		for (pp = &t->base->views; *pp; pp = &(*pp)->next_view) {
			if (*pp == t) {
				*pp = t->next_view;
				t->base->nviews--;
				break;
			}
		}
		t->base = NULL;
	}
	/* A block: detach its views (they keep the storage alive by reference). */
	while ((v = t->views)) {
		t->views = v->next_view;
		v->next_view = NULL;
		v->base = NULL;
	}
	t->nviews = 0;
	if (rf_var_destroy(t->dev->eng, t->var, rf__tensor_release, t, NULL) < 0) {
		/* Cannot push (out of memory): wait for the var's work and release now. */
		rf__log(RF_LOG_WARN, "tensor %s: deletion could not be pushed; waiting", t->name);
		rf_engine_wait_idle(t->dev->eng);
		rf__tensor_release(t);
	}
}

/* An NHWC tensor whose elements lie as a row-major one's would: one channel, or
 * planes of one pixel. */
static int rf__nhwc_is_rowmajor(const struct rf_tensor *t)
{
	return t->shape[1] == 1 || (t->shape[2] == 1 && t->shape[3] == 1);
}

int rf_tensor_reshape(struct rf_tensor *t, int ndim, const int64_t *shape)
{
	struct rf_tensor tmp;
	char b1[96];

	if (!t)
		return -EINVAL;
	tmp = *t;
	if (rf__shape_set(&tmp, t->dtype, ndim, shape) < 0 || tmp.numel != t->numel)
		return rf__fail(-EINVAL, "rf_tensor_reshape: %s: another shape of %zu elements "
				"expected", rf_tensor_describe(t, b1, sizeof(b1)), t->numel);
	if (t->layout == RF_LAYOUT_NHWC) {
		int same = ndim == 4 && !memcmp(t->shape, tmp.shape, sizeof(t->shape));
		if (!same && !rf__nhwc_is_rowmajor(t))
			return rf__fail(-EINVAL, "rf_tensor_reshape: %s is NHWC: its elements are "
					"not in the new shape's row-major order (rf_convert it first)",
					rf_tensor_describe(t, b1, sizeof(b1)));
		if (!same)
			t->layout = RF_LAYOUT_ROWMAJOR;
	}
	memcpy(t->shape, tmp.shape, sizeof(t->shape));
	t->ndim = ndim;
	return 0;
}

int rf_tensor_set_layout(struct rf_tensor *t, enum rf_layout layout)
{
	char b1[96];

	if (!t)
		return -EINVAL;
	if (layout != RF_LAYOUT_ROWMAJOR && (layout != RF_LAYOUT_NHWC || t->ndim != 4))
		return rf__fail(-EINVAL, "rf_tensor_set_layout: %s: layout %s needs 4 dimensions "
				"(n, c, h, w)", rf_tensor_describe(t, b1, sizeof(b1)),
				rf_layout_name(layout));
	t->layout = layout;
	return 0;
}

int rf_tensor_wait(struct rf_tensor *t)
{
	struct rf_tensor *v;
	int ret, err = 0;

	if (!t)
		return -EINVAL;
	ret = rf_engine_wait_var(t->dev->eng, t->var);
	if (ret < 0)
		err = ret;
	for (v = t->views; v; v = v->next_view) {
		ret = rf_engine_wait_var(t->dev->eng, v->var);
		if (ret < 0 && !err)
			err = ret;
	}
	return err;
}

const char *rf_tensor_describe(const struct rf_tensor *t, char *buf, size_t len)
{
	int i, o;

	if (!t) {
		snprintf(buf, len, "(null)");
		return buf;
	}
	o = snprintf(buf, len, "%s (", t->name[0] ? t->name : "tensor");
	for (i = 0; i < t->ndim && o >= 0 && (size_t)o < len; i++)
		o += snprintf(buf + o, len - (size_t)o, "%s%lld", i ? ", " : "",
			      (long long)t->shape[i]);
	if (o >= 0 && (size_t)o < len)
		snprintf(buf + o, len - (size_t)o, ") %s%s%s %s", rf_tdtype_name(t->dtype),
			 t->layout != RF_LAYOUT_ROWMAJOR ? " " : "",
			 t->layout != RF_LAYOUT_ROWMAJOR ? rf_layout_name(t->layout) : "",
			 t->dev ? t->dev->name : "host");
	return buf;
}
