/* devices/cuda/cuda-report.c -- what ran how on a CUDA device (rf_device_get_stats:
 * CUDA graphs captured, replayed, failed and gone stale, convolutions run by a
 * fallback; rf_device_plan_json: each convolution's plan) and whether the device
 * takes a fallback path at all. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda-impl.h"

void rf__cuda_stats(const struct rf_device *d, struct rf_device_stats *out)
{
	const struct rf__cuda_dev *cd = d->ctx;

	if (!cd)
		return;
	out->graph_captures = cd->cg_captures;
	out->graph_replays = cd->cg_replays;
	out->graph_failures = cd->cg_failures;
	out->graph_stale = cd->cg_stale;
	out->fallbacks = cd->fallbacks;
	out->plans = cd->plans.n;
}

int rf__cuda_plan_json(const struct rf_device *d, unsigned i, char *buf, size_t len)
{
	const struct rf__cuda_dev *cd = d->ctx;
	const struct rf__plan *p;
	static const char *const dirs[] = { "conv2d_fwd", "conv2d_bwd_data", "conv2d_bwd_filter" };
	static const char *const maths[] = { "default", "fma", "tensor_op", "tensor_op_conv" };
	int n;

	if (!cd || i >= cd->plans.n)
		return -ENOENT;
	p = &cd->plans.p[i];
	if (p->key.dir < 0 || p->key.dir > 2)
		n = snprintf(buf, len, "{\"op\": null}");  /* a plan that failed to be made */
	else
		n = snprintf(buf, len, "{\"op\": \"%s\", \"shape\": \"%dx%dx%dx%d k %dx%d s %d p %d "
			     "-> %d\", \"dtype\": \"%s\", \"layout\": \"%s\", \"algo\": %d, "
			     "\"math\": \"%s\", \"workspace\": %zu, \"uses\": %llu, "
			     "\"fallback\": %s}", dirs[p->key.dir], p->key.n, p->key.c, p->key.h,
			     p->key.w, p->key.kh, p->key.kw, p->key.stride, p->key.pad, p->key.o,
			     rf_tdtype_name((enum rf_tdtype)p->key.dtype),
			     rf_layout_name((enum rf_layout)p->key.layout), p->algo,
			     maths[p->math >= 0 && p->math < 4 ? p->math : 0], p->ws,
			     (unsigned long long)p->uses, p->fallback ? "true" : "false");
	return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}

int rf__cuda_fallback_allowed(const struct rf_device *d)
{
	const struct rf__cuda_dev *cd = d->ctx;
	const char *e = getenv("RF_CUDA_ALLOW_FALLBACK");

	return !cd || !cd->no_fallback || (e && !strcmp(e, "1"));
}

