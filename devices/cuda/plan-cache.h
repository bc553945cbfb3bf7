/* devices/cuda/plan-cache.h -- the convolution plans' cache: keys, lookup, eviction,
 * and the workspace budget plans are chosen within. Plain C (no CUDA, no cuDNN), so a
 * machine without a GPU tests it (tests/devices/test-plan-cache.c); cudnn.c keeps one
 * cache per device. Reactor thread only. Internal to devices/cuda. */
#ifndef RF_PLAN_CACHE_H
#define RF_PLAN_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* Everything that decides a convolution's descriptors and algorithm. Zero it first:
 * keys compare as bytes (all fields int32, no padding). */
struct rf__plan_key {
	int32_t dir;                 /* 0 forward, 1 data gradient, 2 filter gradient */
	int32_t n, c, h, w;          /* x */
	int32_t o, kh, kw;           /* w */
	int32_t stride, pad;
	int32_t dtype, layout;       /* of x and y (enum rf_tdtype, enum rf_layout) */
	int32_t math;                /* enum rf__math */
};

/* the math an algorithm runs in (reported; cuDNN's cudnnMathType_t mapped) */
enum { RF__PLAN_MATH_DEFAULT, RF__PLAN_MATH_FMA, RF__PLAN_MATH_TENSOR,
       RF__PLAN_MATH_TENSOR_CONV };

struct rf__plan {
	struct rf__plan_key key;
	int algo;                    /* the algorithm chosen; -1: none fits (im2col) */
	int math;                    /* RF__PLAN_MATH_* */
	int fallback;                /* cuDNN does not run it: im2col, or refused (logged
				      * when first set) */
	uint64_t uses;               /* runs through this plan */
	size_t ws;                   /* its workspace, bytes */
	void *descs;                 /* the backend's descriptors (the cache's free_descs) */
	uint64_t used;               /* the cache's clock at the last use */
};

struct rf__plan_cache {
	struct rf__plan *p;          /* cap slots, n in use */
	unsigned cap, n;
	uint64_t clock;
	uint64_t hits, misses, evictions;
	void (*free_descs)(void *descs);
};

/* 0 or -ENOMEM. free_descs (may be NULL) frees an entry's descs when it goes. */
int rf__plan_cache_init(struct rf__plan_cache *pc, unsigned cap, void (*free_descs)(void *));
void rf__plan_cache_fini(struct rf__plan_cache *pc);
/* The plan for k (its use noted), or NULL (a miss counted). */
struct rf__plan *rf__plan_find(struct rf__plan_cache *pc, const struct rf__plan_key *k);
/* A new entry for k (algo -1, ws 0, descs NULL, the rest 0): a free slot, else the least recently
 * used entry's, whose descriptors are freed. Never NULL once initialised. */
struct rf__plan *rf__plan_add(struct rf__plan_cache *pc, const struct rf__plan_key *k);

/* The workspace budget a convolution's algorithm must fit: env, RF_CUDNN_WORKSPACE's
 * value (NULL: unset), in bytes with an optional K, M or G suffix (powers of 1024);
 * unset: a sixteenth of the device's free memory, at least 16 MiB and at most 1 GiB.
 * 0 and *out, or -EINVAL with err naming the value and what was expected. */
int rf__ws_budget(const char *env, size_t free_bytes, size_t *out, char *err, size_t len);

#define RF__WS_MIN ((size_t)16 << 20)
#define RF__WS_MAX ((size_t)1 << 30)

#endif
