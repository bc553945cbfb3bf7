/* devices/device.c -- what every device shares: creation, streams, errors, close,
 * accessors and allocation through its caching allocator. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-impl.h"

struct rf_device *rf__device_new(struct rf_engine *e, const struct rf__backend *be, int ordinal)
{
	struct rf_device *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->be = be;
	d->eng = e;
	d->kind = be->id;
	d->ordinal = ordinal;
	d->precision = RF_PRECISION_FP32;
	d->h2d = d->d2h = -1;
	snprintf(d->name, sizeof(d->name), "%s:%d", be->kind, ordinal);
	d->mem.raw_alloc = be->mem_alloc;
	d->mem.raw_free = be->mem_free;
	d->mem.raw_ctx = d;
	d->mem.host = be->hostmem;
	return d;
}

int rf__hostmem(const struct rf_device *d)
{
	return d->be->hostmem;
}

void rf__device_free(struct rf_device *d)
{
	rf__cache_fini(&d->mem);
	free(d);
}

int rf__device_add_stream(struct rf_device *d, struct rf_stream *s, int role, void *impl)
{
	struct rf__dstream *ds;

	if (d->nds >= RF__MAX_STREAMS)
		return -ENOSPC;
	ds = &d->ds[d->nds];
	ds->s = s;
	ds->dev = d;
	ds->role = role;
	ds->impl = impl;
	if (role == RF__ROLE_COMPUTE)
		d->ncompute++;
	if (role == RF__ROLE_COPY || role == RF__ROLE_H2D)
		d->h2d = (int)d->nds;
	if (role == RF__ROLE_COPY || role == RF__ROLE_D2H)
		d->d2h = (int)d->nds;
	d->nds++;
	return 0;
}

struct rf__dstream *rf__device_dstream(struct rf_device *d, const struct rf_stream *s)
{
	unsigned i;

	for (i = 0; i < d->nds; i++)
		if (d->ds[i].s == s)
			return &d->ds[i];
	return NULL;
}

void rf__device_error(struct rf_device *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->last_error, sizeof(d->last_error), fmt, ap);
	va_end(ap);
	rf__log(RF_LOG_ERROR, "%s", d->last_error);
}

void rf_device_close(struct rf_device *d)
{
	unsigned i;

	if (!d)
		return;
	rf_engine_wait_idle(d->eng);
	for (i = d->nds; i-- > 0;)
		rf_stream_destroy(d->ds[i].s);
	if (d->mem.st.in_use || d->live)
		rf__log(RF_LOG_WARN, "closing %s with %u tensors (%zu bytes) not freed",
			d->name, d->live, d->mem.st.in_use);
	rf__cache_fini(&d->mem);
	if (d->be->close)
		d->be->close(d);
	free(d);
}

enum rf_device_kind rf_device_kind(const struct rf_device *d) { return d->kind; }
int rf_device_host_memory(const struct rf_device *d) { return d->be->hostmem; }
enum rf_precision rf_device_precision(const struct rf_device *d) { return d->precision; }

const char *rf_precision_name(enum rf_precision p)
{
	switch (p) {
	case RF_PRECISION_DEFAULT: return "default";
	case RF_PRECISION_FP32: return "fp32";
	case RF_PRECISION_TF32: return "tf32";
	case RF_PRECISION_BF16: return "bf16";
	}
	return "?";
}
const char *rf_device_name(const struct rf_device *d) { return d->name; }
struct rf_engine *rf_device_engine(const struct rf_device *d) { return d->eng; }
int rf_device_ordinal(const struct rf_device *d) { return d->ordinal; }
unsigned rf_device_nstreams(const struct rf_device *d) { return d->ncompute; }
const char *rf_device_last_error(const struct rf_device *d) { return d->last_error; }

struct rf_stream *rf_device_stream(struct rf_device *d, unsigned i)
{
	return i < d->ncompute ? d->ds[i].s : NULL;
}

struct rf_stream *rf_device_h2d_stream(struct rf_device *d)
{
	return d->h2d >= 0 ? d->ds[d->h2d].s : NULL;
}

struct rf_stream *rf_device_d2h_stream(struct rf_device *d)
{
	return d->d2h >= 0 ? d->ds[d->d2h].s : NULL;
}

void rf_device_mem_stats(const struct rf_device *d, struct rf_mem_stats *st)
{
	if (!st)
		return;
	if (!d) {
		memset(st, 0, sizeof(*st));
		rf__fail(-EINVAL, "rf_device_mem_stats: d is NULL");
		return;
	}
	*st = d->mem.st;
	st->limit = d->mem.limit;
}

size_t rf_device_mem_trim(struct rf_device *d)
{
	return rf__cache_trim(&d->mem);
}

int rf__dev_alloc(struct rf_device *d, size_t bytes, void **out)
{
	struct rf_engine_stats st;
	int ret = rf__cache_alloc(&d->mem, bytes, out);

	if (ret != -ENOMEM)
		return ret;
	rf_engine_get_stats(d->eng, &st);
	if (!st.inflight)
		return ret;
	d->mem.st.mem_waits++;
	/* from inside an op or a callback the engine cannot be waited for: then no */
	if (rf_engine_wait_idle(d->eng) < 0 && (rf_engine_get_stats(d->eng, &st), st.inflight))
		return ret;
	return rf__cache_alloc(&d->mem, bytes, out);
}

int rf_device_alloc(struct rf_device *d, size_t bytes, void **out)
{
	if (!d || !out)
		return -EINVAL;
	return rf__dev_alloc(d, bytes, out);
}

void rf_device_free(struct rf_device *d, void *p, size_t bytes)
{
	if (d && p)
		rf__cache_free(&d->mem, p, bytes);
}

int rf_device_get_stats(const struct rf_device *d, struct rf_device_stats *out)
{
	if (!d || !out)
		return rf__fail(-EINVAL, "rf_device_get_stats: a device and an out pointer are "
				"required");
	memset(out, 0, sizeof(*out));
	if (d->be->stats)
		d->be->stats(d, out);
	return 0;
}

int rf_device_plan_json(const struct rf_device *d, unsigned i, char *buf, size_t len)
{
	if (!d || !buf || !len)
		return rf__fail(-EINVAL, "rf_device_plan_json: a device and a buffer are required");
	if (!d->be->plan_json)
		return -ENOENT;
	return d->be->plan_json(d, i, buf, len);
}
