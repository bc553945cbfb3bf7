/* devices/device-impl.h -- the device layer's own state: the caching allocator, a
 * device and its streams, the registry of backends. What a backend implements and
 * the ops it is handed are in backend-impl.h, which includes this. Not installed.
 * Reactor-thread state. */
#ifndef RF_DEVICE_IMPL_H
#define RF_DEVICE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "rf-config.h"
#include "rf-internal.h"
#include "engine.h"
#include "device.h"
#include "tensor.h"

/* ---- caching allocator (alloc.c) ----------------------------------------------------
 * Size classes: 256 bytes minimum, then four classes per power of two (at most 25%
 * rounding). Freed blocks go to their class's free list and are handed out again;
 * the backend is called only on a miss (and, on its failure, after giving every
 * cached block back once). */
#define RF__NBINS (64 * 4)

struct rf__blk {
	void *p;
	size_t cls;                      /* its class size */
	struct rf__blk *next;
};

struct rf__cache {
	int (*raw_alloc)(void *ctx, size_t bytes, void **out);
	void (*raw_free)(void *ctx, void *p, size_t bytes);
	void *raw_ctx;
	int host;                        /* memory is host-addressable (ASan poisoning) */
	size_t limit;                    /* bytes it may hold from the backend (0: any) */
	size_t held;                     /* bytes it holds from the backend */
	struct rf__blk *bins[RF__NBINS];
	struct rf__blk *spare;           /* unused list nodes */
	struct rf_mem_stats st;
};

size_t rf__cache_class(size_t bytes, unsigned *bin);
/* From the cache, else the backend (past the limit or on the backend's failure: after
 * giving the cache back once). 0 or -ENOMEM. */
int rf__cache_alloc(struct rf__cache *c, size_t bytes, void **out);
void rf__cache_free(struct rf__cache *c, void *p, size_t bytes);
size_t rf__cache_trim(struct rf__cache *c);
void rf__cache_fini(struct rf__cache *c);

/* Host backing memory: aligned_alloc/free (the process's malloc). */
int rf__host_alloc(void *ctx, size_t bytes, void **out);
void rf__host_free(void *ctx, void *p, size_t bytes);

/* ---- devices ------------------------------------------------------------------------ */
enum { RF__ROLE_COMPUTE, RF__ROLE_COPY, RF__ROLE_H2D, RF__ROLE_D2H };

struct rf__backend;

struct rf__dstream {
	struct rf_stream *s;
	struct rf_device *dev;
	int role;
	void *impl;                      /* the backend's stream state, or NULL */
};

#define RF__MAX_STREAMS 16

struct rf__op;

struct rf_device {
	const struct rf__backend *be;    /* the backend that runs its ops (backend-impl.h) */
	void *ctx;                       /* the backend's */
	struct rf_engine *eng;
	enum rf_device_kind kind;
	int ordinal;
	enum rf_precision precision;     /* set by the backend's open, never DEFAULT */
	char name[24];
	struct rf__cache mem;
	unsigned ncompute;               /* compute streams: ds[0 .. ncompute-1] */
	unsigned nds;
	struct rf__dstream ds[RF__MAX_STREAMS];
	int h2d, d2h;                    /* indices into ds */
	unsigned live;                   /* tensors alive (their deletion not yet run) */
	char last_error[256];
	/* A test seam (NULL in use): every op built for d, and every capability asked of
	 * it, must also pass admit -- so that a CPU device stands in for another kind's
	 * rules in a test without that device. 1: admitted; 0: refused, why says why. */
	int (*admit)(void *ctx, const struct rf__op *op, char *why, size_t len);
	void *admit_ctx;
	/* A test seam (0 in use): the ops pushed to d complete without being computed,
	 * but for copies and host functions -- for tests of what is pushed, where the
	 * values do not matter (a CPU device standing in for another kind: its 11 M
	 * parameters' kernels were ~all of such a test's time under ThreadSanitizer, and
	 * decided nothing it checks). */
	int dry_run;
};

/* device.c */
struct rf_device *rf__device_new(struct rf_engine *e, const struct rf__backend *be, int ordinal);
void rf__device_free(struct rf_device *d);
int rf__device_add_stream(struct rf_device *d, struct rf_stream *s, int role, void *impl);
struct rf__dstream *rf__device_dstream(struct rf_device *d, const struct rf_stream *s);
void rf__device_error(struct rf_device *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* 1 when the device's memory is host memory (its backend's hostmem) */
int rf__hostmem(const struct rf_device *d);
/* Memory from d's caching allocator for a tensor or a workspace, with backpressure:
 * when there is none, the work in flight (whose tensors and workspaces come back as it
 * finishes) is waited for and the allocation tried again, so that what grows with
 * the ops in flight is bounded by the memory there is, not failed. 0 or -ENOMEM. */
int rf__dev_alloc(struct rf_device *d, size_t bytes, void **out);

/* backends.c: the registry. Every backend of this build, NULL-terminated. */
extern const struct rf__backend *const rf__backends[];
/* The backend named kind (klen bytes of it), or NULL. */
const struct rf__backend *rf__backend_find(const char *kind, size_t klen);
/* The device stream of s when a backend made it (not the engine's inline stream, a
 * worker or another foreign stream), else NULL. */
struct rf__dstream *rf__backend_dstream(const struct rf_stream *s);
/* Page-lock host memory for the backends that copy from it faster so: the backend
 * that did (to undo it with), or NULL. */
const struct rf__backend *rf__host_register(void *p, size_t bytes);
void rf__host_unregister(const struct rf__backend *be, void *p);

/* copy.c: push a copy of bytes from src to dst on stream s (NULL: the default for
 * dd <- sd) reading tensor tr and/or variable vr, writing tensor tw and/or vw. */
int rf__copy_push(struct rf_stream *s, struct rf_device *dd, struct rf_device *sd, void *dst,
		  const void *src, size_t bytes, struct rf_tensor *tr, struct rf_var *vr,
		  struct rf_tensor *tw, struct rf_var *vw, const char *name);

#endif
