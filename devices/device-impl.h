/* devices/device-impl.h -- internals shared by the devices module's files. Not
 * installed. Everything is reactor-thread state except the op context's fields that
 * the executing stream reads (and its err buffer, which it writes). */
#ifndef RF_DEVICE_IMPL_H
#define RF_DEVICE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "rf-config.h"
#include "rf-internal.h"
#include "engine.h"
#include "device.h"
#include "tensor.h"
#include "ops.h"
#include "kernels.h"

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
	struct rf__blk *bins[RF__NBINS];
	struct rf__blk *spare;           /* unused list nodes */
	struct rf_mem_stats st;
};

size_t rf__cache_class(size_t bytes, unsigned *bin);
int rf__cache_alloc(struct rf__cache *c, size_t bytes, void **out);
void rf__cache_free(struct rf__cache *c, void *p, size_t bytes);
size_t rf__cache_trim(struct rf__cache *c);
void rf__cache_fini(struct rf__cache *c);

/* Host backing memory: mallocx/sdallocx (jemalloc) or aligned_alloc/free. */
int rf__host_alloc(void *ctx, size_t bytes, void **out);
void rf__host_free(void *ctx, void *p, size_t bytes);

/* ---- op contexts (op-builder.c builds them, backends run them) ------------------ */
enum rf__opcode {
	RF__GEMM, RF__BIAS_ADD, RF__BIAS_GRAD, RF__RELU_FWD, RF__RELU_BWD, RF__XENT,
	RF__CONV_FWD, RF__CONV_BWD_DATA, RF__CONV_BWD_FILTER, RF__POOL_FWD, RF__POOL_BWD,
	RF__SGD, RF__SGD_MOMENTUM, RF__ADAMW, RF__AXPY, RF__SCALE, RF__SUM, RF__FILL, RF__U8_F32,
	RF__U8_I32, RF__RAND_UNIFORM, RF__RAND_NORMAL, RF__COPY, RF__HOST,
	RF__NORM,       /* CUDA: batch norm or pooling by cuDNN; u.host.arg: the
			 * struct rf__norm_op (norm-op.h) */
};

struct rf__dstream;

struct rf__opctx {
	int code;                        /* enum rf__opcode */
	const char *name;
	struct rf_device *xdev;          /* the executing device (its backend runs the op) */
	struct rf__dstream *ds;          /* the executing stream of xdev; NULL: a CPU op on
					  * a stream the device does not own (inline, ...) */
	void *ws;                        /* workspace from xdev's allocator, freed at done */
	size_t ws_bytes;
	union {
		struct { int ta, tb, m, n, k; float alpha, beta; float *c; const float *a, *b; } gemm;
		struct { float *y; const float *b; int rows, cols, acc; } bias; /* add: y,b; grad: y=db, b=dy */
		struct { float *y; const float *x, *aux; size_t n; } ew;      /* relu fwd: y,x; bwd: y=dx,x=dy,aux=y */
		struct { float *dlogits, *loss; int32_t *correct; const float *logits;
			 const int32_t *labels; int rows, cols; } xent;
		struct { struct rf_k_conv2d s; float *out, *out2; const float *in, *in2, *in3;
			 int acc; } conv; /* fwd: out=y in=x in2=w in3=b; data: out=dx in=dy in2=w;
					   * filter: out=dw out2=db in=dy in2=x */
		struct { float *y; const float *x; int n, c, h, w, k; } pool; /* bwd: y=dx, x=dy */
		struct { float *w, *v; const float *g; size_t n; float lr, mom, wd; int nesterov;
			 const struct rf_live_hyper *live; } sgd;
		struct { float *w, *m, *v; const float *g; size_t n; struct rf_k_adamw p;
			 const struct rf_live_hyper *live; } adamw;
		struct { float *y; const float *x; size_t n; float a; } axpy;  /* scale: y, a */
		struct { float *out; const float **in; int k; size_t n; } sum;
		struct { void *x; size_t n; float v; int dtype; } fill;
		struct { void *out; const uint8_t *in; size_t n; float scale, mean, std; } dec;
		struct { float *x; size_t n; struct rf_prng *g; float a, b; } rand;
		struct { void *dst; const void *src; size_t bytes; } copy;
		struct { int (*fn)(void *); void *arg; } host;
	} u;
	int ran, status;                 /* set by the executing side: compute() returned */
	char err[200];                   /* the executing side's error text */
	/* rf__sum's input pointers follow when code == RF__SUM */
};

/* ---- devices ------------------------------------------------------------------------ */
enum { RF__ROLE_COMPUTE, RF__ROLE_COPY, RF__ROLE_H2D, RF__ROLE_D2H };

struct rf__dstream {
	struct rf_stream *s;
	struct rf_device *dev;
	int role;
	void *impl;                      /* CUDA: struct rf__cuda_stream */
};

struct rf__device_iface {
	const char *kind;
	/* Backing memory for the caching allocator (reactor thread). */
	int (*mem_alloc)(void *ctx, size_t bytes, void **out);
	void (*mem_free)(void *ctx, void *p, size_t bytes);
	/* Run (CPU) or launch (CUDA) one op on ds (NULL: a CPU op on a foreign stream).
	 * Called on the executing stream's thread. 0 or a negative code; on failure it
	 * may write text into op->err. */
	int (*compute)(struct rf_device *d, struct rf__dstream *ds, struct rf__opctx *op);
	/* Text for a negative code returned by compute (optional: NULL uses strerror). */
	const char *(*strerror)(int code);
	/* Convolution workspace in bytes: the fast size (min == 0) or the least that works
	 * (min != 0). optional: NULL means none needed. */
	size_t (*conv_ws)(const struct rf_k_conv2d *s, int min);
	/* After the streams are gone: free the backend context. */
	void (*close)(struct rf_device *d);
};

#define RF__MAX_STREAMS 16

struct rf_device {
	const struct rf__device_iface *iface;
	void *ctx;                       /* the backend's */
	struct rf_engine *eng;
	enum rf_device_kind kind;
	int ordinal;
	char name[24];
	struct rf__cache mem;
	unsigned ncompute;               /* compute streams: ds[0 .. ncompute-1] */
	unsigned nds;
	struct rf__dstream ds[RF__MAX_STREAMS];
	int h2d, d2h;                    /* indices into ds */
	unsigned live;                   /* tensors alive (their deletion not yet run) */
	char last_error[256];
};

/* cpu/cpu.c */
extern const struct rf__device_iface rf__cpu_iface;
int rf__cpu_compute(struct rf__opctx *op);  /* the CPU kernels, usable from any thread */

/* cuda/cuda.c (cuda/cuda-none.c without CUDA) */
int rf__cuda_count(void);
int rf__cuda_open(struct rf_engine *e, int ordinal, const struct rf_cuda_opts *opts,
		  struct rf_device **out);
/* Non-NULL for a stream made by the CUDA backend: its device stream. */
struct rf__dstream *rf__cuda_dstream(const struct rf_stream *s);
void *rf__cuda_stream_handle(const struct rf_stream *s);
int rf__cuda_host_register(void *p, size_t bytes);  /* 1 registered, 0 not */
void rf__cuda_host_unregister(void *p);
/* 1 when the CUDA device's convolutions, batch norm and pooling go through cuDNN (built
 * with it, and libcudnn loads); else 0 and *why (if why) says why. */
int rf__cuda_dnn_ok(const char **why);

/* copy.c: push a copy of bytes from src to dst on stream s (NULL: the default for
 * dd <- sd) reading tensor tr and/or variable vr, writing tensor tw and/or vw. */
int rf__copy_push(struct rf_stream *s, struct rf_device *dd, struct rf_device *sd, void *dst,
		  const void *src, size_t bytes, struct rf_tensor *tr, struct rf_var *vr,
		  struct rf_tensor *tw, struct rf_var *vw, const char *name);

/* device.c */
struct rf_device *rf__device_new(struct rf_engine *e, const struct rf__device_iface *iface,
				 enum rf_device_kind kind, int ordinal);
void rf__device_free(struct rf_device *d);
int rf__device_add_stream(struct rf_device *d, struct rf_stream *s, int role, void *impl);
struct rf__dstream *rf__device_dstream(struct rf_device *d, const struct rf_stream *s);
void rf__device_error(struct rf_device *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The number of CPU compute streams over all open CPU devices (threading policy). */
void rf__cpu_policy_update(int delta_streams, int forced_threads);

/* An optimizer op's lr and AdamW parameters when it runs: the live ones (ops.h,
 * rf_live_hyper) where it has them. */
static inline float rf__sgd_lr(const struct rf__opctx *op)
{
	return op->u.sgd.live ? (float)op->u.sgd.live->lr : op->u.sgd.lr;
}

static inline struct rf_k_adamw rf__adamw_p(const struct rf__opctx *op)
{
	struct rf_k_adamw p = op->u.adamw.p;
	if (op->u.adamw.live) {
		p.lr = op->u.adamw.live->lr;
		if (op->u.adamw.live->step) /* 0 (arguments never written): the pushed one */
			p.step = op->u.adamw.live->step;
	}
	return p;
}

#endif
