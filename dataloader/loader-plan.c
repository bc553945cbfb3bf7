/* loader-plan.c -- the epoch's record order: shuffle (splitmix64 from seed and epoch),
 * the chunk/window geometry of small records, and the per-epoch plan. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "loader-impl.h"

static uint64_t rf__sm64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n): Lemire's multiply-shift (bias <= n / 2^64). */
static uint64_t rf__below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)rf__sm64(s) * n) >> 64);
}

static void rf__shuffle(uint64_t *a, uint64_t n, uint64_t *s)
{
	for (uint64_t i = n; i > 1; i--) {
		uint64_t j = rf__below(s, i), t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
}

/* The generator's state for (seed, epoch). */
static uint64_t rf__epoch_state(const struct rf_loader *l, uint64_t epoch)
{
	uint64_t s = l->o.seed ^ 0x5851f42d4c957f2dull;

	s ^= rf__sm64(&(uint64_t){ epoch + 1 });
	rf__sm64(&s);
	return s;
}

/* SPAN: the records of window g (chunks cperm[gW, gW+W)) in file order at order[p],
 * then shuffled. Returns the position after them. */
static uint64_t rf__plan_window(const struct rf_loader *l, uint64_t g, const uint64_t *cperm,
				uint64_t *order, uint64_t p, uint64_t *s)
{
	uint64_t start = p, w, i;

	for (w = g * l->W; w < (g + 1) * l->W && w < l->C; w++) {
		uint64_t c = cperm[w], r0 = c * l->R, r1 = r0 + l->R;
		if (r1 > l->count)
			r1 = l->count;
		for (i = r0; i < r1; i++)
			order[p++] = i;
	}
	if (!l->o.no_shuffle)
		rf__shuffle(order + start, p - start, s);
	return p;
}

/* The epoch's order into order[count]; SPAN also fills cpos[C]. */
static int rf__plan(const struct rf_loader *l, uint64_t epoch, uint64_t *order, uint32_t *cpos)
{
	uint64_t s = rf__epoch_state(l, epoch), i, p = 0, g;
	uint64_t *cperm;

	if (l->mode != RF__SPAN) {
		for (i = 0; i < l->count; i++)
			order[i] = i;
		if (!l->o.no_shuffle)
			rf__shuffle(order, l->count, &s);
		return 0;
	}
	cperm = malloc(l->C * sizeof(*cperm));
	if (!cperm)
		return rf__fail(-ENOMEM, "loader: no memory for epoch %llu's order of %llu chunks",
				(unsigned long long)epoch, (unsigned long long)l->C);
	for (i = 0; i < l->C; i++)
		cperm[i] = i;
	if (!l->o.no_shuffle)
		rf__shuffle(cperm, l->C, &s);
	for (i = 0; cpos && i < l->C; i++)
		cpos[cperm[i]] = (uint32_t)i;
	for (g = 0; g < l->ngroups; g++)
		p = rf__plan_window(l, g, cperm, order, p, &s);
	free(cperm);
	return 0;
}

int rf__start_epoch(struct rf_loader *l)
{
	int ret = rf__plan(l, l->epoch, l->order, l->cpos);
	uint64_t c;

	if (ret < 0)
		return ret;
	if (l->mode == RF__SPAN) {
		for (c = 0; c < l->C; c++)
			l->order[l->count + l->cpos[c]] = c;
		l->gbase = l->gnext;
	}
	l->planned = 1;
	return 0;
}

uint64_t rf__plan_windows(struct rf_loader *l)
{
	const struct rf_dataset_src *s0 = &l->ds->src[RF_DS_SRC_PAYLOAD];
	uint64_t rl, minint, span;

	l->R = l->o.chunk_bytes / s0->stride;
	if (!l->R)
		l->R = 1;
	if (l->R > l->count)    /* a chunk past the file is the file (same order) */
		l->R = l->count ? l->count : 1;
	l->C = (l->count + l->R - 1) / l->R;
	/* windows of more chunks than there are are one window of all (same order; their
	 * buffers would be sized for chunks that do not exist) */
	l->W = l->o.window_chunks < l->C ? l->o.window_chunks : (l->C ? l->C : 1);
	rl = l->count - (l->C - 1) * l->R;
	for (;;) {
		l->ngroups = (l->C + l->W - 1) / l->W;
		minint = l->W * l->R;
		if (l->W >= 2 && (l->W - 1) * l->R + rl < minint)
			minint = (l->W - 1) * l->R + rl;
		if (l->W == 1 && rl < minint)
			minint = rl;
		/* windows one batch can touch: k - 2 whole interior ones of >= minint */
		span = l->ngroups == 1 ? 1 : 2 + (l->o.batch + minint - 1) / minint;
		if (span <= 8)
			return span;
		l->W *= 2; /* a batch larger than the windows: widen them */
		if (l->W > l->C)
			l->W = l->C;
	}
}

int rf_loader_order(struct rf_loader *l, uint64_t epoch, uint64_t *order, uint64_t n)
{
	uint64_t *tmp;
	int ret;

	if (!l || (n && !order))
		return rf__fail(-EINVAL, "rf_loader_order: %s is NULL", !l ? "l" : "order");
	if (n > l->count)
		return rf__fail(-ERANGE, "rf_loader_order: n = %" PRIu64 ", more than the %" PRIu64
				" records of an epoch", n, l->count);
	tmp = malloc(l->count * sizeof(*tmp));
	if (!tmp)
		return rf__fail(-ENOMEM, "rf_loader_order: out of memory for %" PRIu64 " records",
				l->count);
	ret = rf__plan(l, epoch, tmp, NULL);
	if (!ret)
		memcpy(order, tmp, n * sizeof(*order));
	free(tmp);
	return ret;
}

uint64_t rf_loader_batches_per_epoch(const struct rf_loader *l)
{
	return l->nbatches;
}

void rf__next_epoch(struct rf_loader *l, uint64_t epoch)
{
	l->epoch = epoch;
	l->t = 0;
	l->planned = 0;
}

void rf_loader_seek_epoch(struct rf_loader *l, uint64_t epoch)
{
	l->gen++;       /* what was pushed before is dropped: its skipped images too */
	rf__next_epoch(l, epoch);
}

int rf_loader_seek(struct rf_loader *l, uint64_t epoch, uint64_t batch)
{
	int ret;

	if (!l)
		return rf__fail(-EINVAL, "rf_loader_seek: l is NULL");
	if ((ret = rf_engine_may_wait(l->e, "rf_loader_seek")) < 0)
		return ret;
	if (batch > l->nbatches)
		return rf__fail(-ERANGE, "loader: seek to batch %" PRIu64 " of epoch %" PRIu64
				": an epoch has %" PRIu64 " batches", batch, epoch, l->nbatches);
	rf_loader_seek_epoch(l, epoch);
	l->t = batch;
	return 0;
}
