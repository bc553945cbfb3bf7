/* devices/cuda/plan-cache.c -- the convolution plans' cache and the workspace budget
 * (plan-cache.h). A linear table: a model has a few dozen convolution shapes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan-cache.h"

int rf__plan_cache_init(struct rf__plan_cache *pc, unsigned cap, void (*free_descs)(void *))
{
	memset(pc, 0, sizeof(*pc));
	pc->p = calloc(cap ? cap : 1, sizeof(*pc->p));
	if (!pc->p)
		return -ENOMEM;
	pc->cap = cap ? cap : 1;
	pc->free_descs = free_descs;
	return 0;
}

void rf__plan_cache_fini(struct rf__plan_cache *pc)
{
	for (unsigned i = 0; pc->p && i < pc->n; i++)
		if (pc->p[i].descs && pc->free_descs)
			pc->free_descs(pc->p[i].descs);
	free(pc->p);
	memset(pc, 0, sizeof(*pc));
}

struct rf__plan *rf__plan_find(struct rf__plan_cache *pc, const struct rf__plan_key *k)
{
	for (unsigned i = 0; i < pc->n; i++)
		if (!memcmp(&pc->p[i].key, k, sizeof(*k))) {
			pc->p[i].used = ++pc->clock;
			pc->hits++;
			return &pc->p[i];
		}
	pc->misses++;
	return NULL;
}

struct rf__plan *rf__plan_add(struct rf__plan_cache *pc, const struct rf__plan_key *k)
{
	struct rf__plan *p;

	if (pc->n < pc->cap) {
		p = &pc->p[pc->n++];
	} else {
		p = &pc->p[0];
		for (unsigned i = 1; i < pc->n; i++)
			if (pc->p[i].used < p->used)
				p = &pc->p[i];
		if (p->descs && pc->free_descs)
			pc->free_descs(p->descs);
		pc->evictions++;
	}
	memset(p, 0, sizeof(*p));
	p->key = *k;
	p->algo = -1;
	p->used = ++pc->clock;
	return p;
}

int rf__ws_budget(const char *env, size_t free_bytes, size_t *out, char *err, size_t len)
{
	if (env) {
		const char *q = env;
		unsigned long long v = 0, mul = 1;
		int digits = 0;
		for (; *q >= '0' && *q <= '9'; q++, digits++) {
			if (v > (~0ull - 9) / 10)
				goto bad;
			v = v * 10 + (unsigned long long)(*q - '0');
		}
		if (*q == 'K' || *q == 'k')
			mul = 1ull << 10, q++;
		else if (*q == 'M' || *q == 'm')
			mul = 1ull << 20, q++;
		else if (*q == 'G' || *q == 'g')
			mul = 1ull << 30, q++;
		if (!digits || *q || v > (~0ull) / mul || v * mul > (size_t)-1)
			goto bad;
		*out = (size_t)(v * mul);
		return 0;
bad:
		snprintf(err, len, "RF_CUDNN_WORKSPACE=%s: expected bytes, with an optional K, M or "
			 "G suffix (256M, 1G), or the variable unset", env);
		return -EINVAL;
	}
	*out = free_bytes / 16;
	if (*out < RF__WS_MIN)
		*out = RF__WS_MIN;
	if (*out > RF__WS_MAX)
		*out = RF__WS_MAX;
	return 0;
}
