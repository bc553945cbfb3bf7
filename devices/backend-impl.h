/* devices/backend-impl.h -- what a backend is handed and what it implements.
 *
 * An op is one description: an opcode, its tensor operands (data pointer, dtype,
 * layout, logical shape: a snapshot taken when it was pushed) under the names its
 * opcode gives them, and the opcode's typed parameters. The front end (ops-*.c)
 * validates and builds it; the backend of the executing device says whether it runs
 * it (supports_op), sizes its workspace and runs it (compute). Generic code calls
 * the table and never names a backend. Internal to devices/ (and its backends). */
#ifndef RF_BACKEND_IMPL_H
#define RF_BACKEND_IMPL_H

#include "device-impl.h"
#include "kernel-args.h"
#include "ops.h"
#include "u8norm.h"

/* ---- operands ------------------------------------------------------------------------ */

/* A tensor operand as pushed. All zero (dtype 0): an optional operand left out. */
struct rf__tref {
	void *data;
	struct rf_device *dev;           /* where data lives */
	enum rf_tdtype dtype;
	enum rf_layout layout;
	int ndim;
	int64_t shape[RF_TENSOR_MAX_DIMS]; /* logical (NCHW for 4-D); unused dims 1 */
	size_t numel;
};

/* ---- opcodes ------------------------------------------------------------------------- */
enum rf__opcode {
	RF__OP_GEMM, RF__OP_BIAS_ADD, RF__OP_BIAS_GRAD, RF__OP_RELU_FWD, RF__OP_RELU_BWD,
	RF__OP_XENT, RF__OP_CONV_FWD, RF__OP_CONV_BWD_DATA, RF__OP_CONV_BWD_FILTER,
	RF__OP_CONV_BWD_FILTER_POOL_RELU, RF__OP_AVGPOOL_FWD, RF__OP_AVGPOOL_BWD,
	RF__OP_RELU_AVGPOOL2_FWD, RF__OP_AVGPOOL2_RELU_BWD, RF__OP_MAXPOOL_FWD,
	RF__OP_MAXPOOL_BWD, RF__OP_GAP_FWD, RF__OP_GAP_BWD, RF__OP_BN_TRAIN, RF__OP_BN_EVAL,
	RF__OP_BN_BWD, RF__OP_BN_RELU_TRAIN, RF__OP_BN_RELU_EVAL, RF__OP_BN_RELU_BWD, RF__OP_SGD, RF__OP_SGD_MOMENTUM, RF__OP_ADAMW, RF__OP_AXPY,
	RF__OP_SCALE, RF__OP_SUM, RF__OP_ADD_RELU, RF__OP_FILL, RF__OP_U8_F32, RF__OP_U8_I32,
	RF__OP_RAND_UNIFORM, RF__OP_RAND_NORMAL, RF__OP_CONVERT, RF__OP_COPY, RF__OP_HOST,
	RF__OP_COUNT
};

/* What an operand may be: a float tensor (f32, bf16, f16), a per-channel float one
 * (batch norm's parameters and statistics: any float dtype on the CPU, but a model
 * keeps them f32 whatever its compute format, and the capability probe asks with
 * f32 ones), one of a fixed dtype, or anything (bytes). */
enum rf__okind { RF__OK_FLOAT, RF__OK_I32, RF__OK_U8, RF__OK_ANY, RF__OK_CHAN };

#define RF__OP_NT 9                      /* operands of a fixed-arity op, at most */
#define RF__OP_SUM_MAX 63                /* inputs of RF__OP_SUM, at most */

/* How an operand's shape follows another's (the operand `of` of its signature), where
 * both are present. */
enum rf__orel {
	RF__REL_NONE,
	RF__REL_NUMEL,                   /* as many elements */
	RF__REL_SHAPE,                   /* the same shape */
	RF__REL_CHAN,                    /* one element per channel (dimension 1) of `of` */
};

/* An opcode's signature (op-sig.c): its public name (ops.h's function without rf_),
 * and its operands, the nout written ones first (an "io" one is read too). */
struct rf__osig {
	const char *name;
	unsigned char kind;              /* enum rf__okind */
	unsigned char ndim;              /* 0: any */
	unsigned char opt;               /* may be left out */
	unsigned char io;                /* written and read */
	unsigned char rel;               /* enum rf__orel, to operand `of` */
	unsigned char of;
};
struct rf__opsig {
	const char *name;
	unsigned char nout, nin;         /* RF__OP_SUM: one input named, k of them */
	struct rf__osig o[RF__OP_NT];
};
extern const struct rf__opsig rf__opsigs[RF__OP_COUNT];
/* The opcode named name ("conv2d_fwd"), or -1. */
int rf__opcode_of(const char *name);

struct rf__op;
/* open.c: the op rf_device_supports asks a backend about: opcode code with every operand
 * present (shape 1s), float ones of dtype dt (4-D ones, and those of any rank, in layout
 * lay), per-channel ones f32, on device d (may be NULL); sum_in: RF__OP_SUM's one
 * input. */
void rf__probe_op(struct rf__op *op, struct rf__tref *sum_in, int code, struct rf_device *d,
		  enum rf_tdtype dt, enum rf_layout lay);

/* ---- the op ------------------------------------------------------------------------ */

/* Math a backend may use for float products (convolutions, GEMM). */
enum rf__math {
	RF__MATH_FP32 = 0,               /* full float32 products and sums (no TF32) */
	RF__MATH_TF32,                   /* tensor-core TF32 products allowed */
};

struct rf__op {
	enum rf__opcode code;
	const char *name;                /* for traces and messages: "softmax_xent_eval" */
	struct rf_device *xdev;          /* the executing device (its backend runs the op) */
	struct rf__dstream *ds;          /* the executing stream of xdev; NULL: a host op on
					  * a stream the device does not own (inline, ...) */
	void *ws;                        /* workspace from xdev's allocator, freed at done */
	size_t ws_bytes;
	enum rf__math math;
	unsigned nt;                     /* operands: rf__op_t(op, 0 .. nt-1) */
	/* Operands by name, outputs first as the signature lists them; t[] is the same
	 * storage read generically. */
	union {
		struct rf__tref t[RF__OP_NT];
		struct { struct rf__tref c, a, b; } gemm;
		struct { struct rf__tref y, b; } bias_add;
		struct { struct rf__tref db, dy; } bias_grad;
		struct { struct rf__tref y, x; } relu_fwd;
		struct { struct rf__tref dx, dy, y; } relu_bwd;
		struct { struct rf__tref dlogits, loss, correct, logits, labels; } xent;
		struct { struct rf__tref y, x, w, b; } conv_fwd;
		struct { struct rf__tref dx, dy, w; } conv_bwd_data;
		struct { struct rf__tref dw, db, dy, x; } conv_bwd_filter;
		struct { struct rf__tref dw, db, dp, y, x; } conv_bwd_filter_pr;
		struct { struct rf__tref y, x; } avgpool_fwd;
		struct { struct rf__tref dx, dy; } avgpool_bwd;
		struct { struct rf__tref p, y; } relu_avgpool2_fwd;     /* y: io */
		struct { struct rf__tref dx, dy, y; } avgpool2_relu_bwd;
		struct { struct rf__tref y, x; } maxpool_fwd;
		struct { struct rf__tref dx, dy, x; } maxpool_bwd;
		struct { struct rf__tref y, x; } gap_fwd;
		struct { struct rf__tref dx, dy; } gap_bwd;
		struct { struct rf__tref y, mean, invstd, run_mean, run_var, x, gamma, beta; } bn_train;
		struct { struct rf__tref y, x, gamma, beta, run_mean, run_var; } bn_eval;
		struct { struct rf__tref dx, dgamma, dbeta, dy, x, mean, invstd, gamma; } bn_bwd;
		/* batch norm with its ReLU: bn_train / bn_eval's operands, and bn_bwd's with
		 * the forward's output y after them (dy is masked by y > 0) */
		struct { struct rf__tref dx, dgamma, dbeta, dy, x, mean, invstd, gamma, y; }
			bn_relu_bwd;
		struct { struct rf__tref w, g; } sgd;
		struct { struct rf__tref w, v, g; } sgd_momentum;
		struct { struct rf__tref w, m, v, g; } adamw;
		struct { struct rf__tref y, x; } axpy;
		struct { struct rf__tref x; } scale;                     /* x: io */
		struct { struct rf__tref out; } sum;                     /* inputs: p.sum.in */
		struct { struct rf__tref y, a, b; } add_relu;
		struct { struct rf__tref x; } fill;
		struct { struct rf__tref out, in; } dec;                 /* u8_to_f32, u8_to_i32 */
		struct { struct rf__tref x; } rand;
		struct { struct rf__tref dst, src; } convert;
		struct { struct rf__tref dst, src; } copy;
	} o;
	/* The opcode's parameters */
	union {
		struct { int ta, tb, m, n, k; float alpha, beta; } gemm;
		struct { int rows, cols, acc; } bias;                    /* add, grad */
		struct { size_t n; } ew;                                 /* relu, add_relu */
		struct { int rows, cols; } xent;
		struct { struct rf__conv2d s; int acc; } conv;           /* the four conv ops */
		struct { int n, c, h, w, k, st; } pool;                  /* avg (st = k), max,
									  * global, fused 2x2 */
		struct { struct rf__bn s; int h, w; } bn;
		struct { size_t n; float lr, mom, wd; int nesterov;
			 const struct rf_live_hyper *live; } sgd;        /* sgd, momentum */
		struct { size_t n; struct rf_adamw_params p; const struct rf_live_hyper *live; } adamw;
		struct { size_t n; float a; } axpy;                      /* axpy, scale */
		struct { int k; size_t n; struct rf__tref *in; } sum;    /* in[0 .. k-1] */
		struct { size_t n; float v; } fill;
		struct { size_t n; struct rf__u8norm nm; } dec;
		struct { size_t n; struct rf_prng *g; float a, b; } rand;
		struct { size_t bytes; } copy;
		struct { int (*fn)(void *); void *arg; } host;
	} p;
	int ran, status;                 /* set by the executing side: compute() returned */
	char err[200];                   /* the executing side's error text */
	/* RF__OP_SUM: its k input operands follow */
};

/* Operand i of op (0 .. op->nt-1), outputs first. */
static inline struct rf__tref *rf__op_t(struct rf__op *op, unsigned i)
{
	return op->code == RF__OP_SUM && i ? &op->p.sum.in[i - 1] : &op->o.t[i];
}
static inline const struct rf__tref *rf__op_tc(const struct rf__op *op, unsigned i)
{
	return op->code == RF__OP_SUM && i ? &op->p.sum.in[i - 1] : &op->o.t[i];
}
/* The name of operand i ("gamma"). */
const char *rf__op_tname(const struct rf__op *op, unsigned i);
/* "gamma (64) bf16 nhwc" into buf; returns buf. */
const char *rf__tref_describe(const struct rf__op *op, unsigned i, char *buf, size_t len);
/* 1 when operand i is written by op. */
int rf__op_writes(const struct rf__op *op, unsigned i);
/* The first float operand (present) that is not of dtype dt or not in layout lay
 * (4-D operands; others are row-major by nature), or -1: for supports_op. */
int rf__op_first_not(const struct rf__op *op, enum rf_tdtype dt, enum rf_layout lay);

/* An optimizer op's lr and AdamW parameters when it runs: the live ones (ops.h,
 * rf_live_hyper) where it has them. */
static inline float rf__sgd_lr(const struct rf__op *op)
{
	return op->p.sgd.live ? (float)op->p.sgd.live->lr : op->p.sgd.lr;
}

static inline struct rf_adamw_params rf__adamw_p(const struct rf__op *op)
{
	struct rf_adamw_params p = op->p.adamw.p;
	if (op->p.adamw.live) {
		p.lr = op->p.adamw.live->lr;
		if (op->p.adamw.live->step) /* 0 (arguments never written): the pushed one */
			p.step = op->p.adamw.live->step;
	}
	return p;
}

/* ---- the backend table --------------------------------------------------------------
 * One per kind of device, registered in backends.c. Every function is called on the
 * reactor thread except compute, which runs on the executing stream's thread (a CPU
 * worker) or the reactor's (a stream that launches asynchronous work). */
struct rf__backend {
	const char *kind;                /* "cpu": its name in device specs */
	enum rf_device_kind id;          /* what rf_device_kind says */
	int hostmem;                     /* 1: its memory is host memory (any host device's
					  * ops take it; copies to it need no staging) */
	/* devices */
	int (*count)(void);              /* devices present, never negative */
	int (*open)(struct rf_engine *e, int ordinal, const struct rf_device_opts *opts,
		    struct rf_device **out);
	void (*close)(struct rf_device *d); /* after its streams are gone: the context */
	/* ops */
	/* 1 if the backend runs op (its dtypes, layouts, shapes and parameters); else 0
	 * and why (a phrase naming the operand, dtype and layout refused). d may be NULL:
	 * "would a device of this kind". */
	int (*supports_op)(const struct rf_device *d, const struct rf__op *op, char *why,
			   size_t len);
	/* Run (host) or launch (asynchronous device) one op on ds. 0 or a negative code;
	 * on failure it may write text into op->err. Copies are ops too (RF__OP_COPY). */
	int (*compute)(struct rf_device *d, struct rf__dstream *ds, struct rf__op *op);
	/* Workspace in bytes: the fast size (min == 0) or the least that works (min != 0);
	 * 0: none. optional */
	size_t (*workspace)(const struct rf_device *d, const struct rf__op *op, int min);
	/* Text for a negative code returned by compute. optional: strerror */
	const char *(*strerror)(int code);
	/* memory: backing memory for the caching allocator (ctx: the device) */
	int (*mem_alloc)(void *ctx, size_t bytes, void **out);
	void (*mem_free)(void *ctx, void *p, size_t bytes);
	/* page-lock host memory for this backend's copies: 1 if done. optional */
	int (*host_register)(void *p, size_t bytes);
	void (*host_unregister)(void *p);
	/* streams: the device stream of s if this backend made it, else NULL. optional
	 * (a backend whose streams are all core's worker streams) */
	struct rf__dstream *(*dstream)(const struct rf_stream *s);
	/* the native handle of one of its streams, or NULL. optional */
	void *(*stream_handle)(const struct rf_stream *s);
	/* what ran how (rf_device_get_stats; out zeroed first). optional */
	void (*stats)(const struct rf_device *d, struct rf_device_stats *out);
	/* plan i as JSON (rf_device_plan_json). optional: no plans */
	int (*plan_json)(const struct rf_device *d, unsigned i, char *buf, size_t len);
	/* The images a conv2d forward of shape s computes together (rf_conv2d_fwd_group):
	 * >= 1, or -EINVAL for a bad shape. optional: the backend promises no batch split
	 * (rf_conv2d_fwd_group says -ENOTSUP) */
	int (*conv_group)(const struct rf__conv2d *s);
};

/* convert.c: host-side element conversions and layout permutes, shared by the CPU
 * backend's reference path and the host reads of a tensor. */
float rf__bf16_to_f32(uint16_t h);
uint16_t rf__f32_to_bf16(float f);       /* round to nearest even; NaN stays NaN */
float rf__f16_to_f32(uint16_t h);
uint16_t rf__f32_to_f16(float f);        /* round to nearest even; overflow to inf */
/* The bit pattern of one element of dtype dt holding v, into *bits (low bytes): its
 * size in bytes (4: f32, i32; 2: bf16, f16, rounded to nearest even; 1: u8), 0 for an
 * unknown dtype. Integers truncate toward zero and saturate, NaN gives 0 -- defined for
 * every float, so every backend fills with the same bits. */
unsigned rf__fill_bits(enum rf_tdtype dt, float v, uint32_t *bits);
/* 1 for f32, bf16 and f16 */
int rf__is_float(enum rf_tdtype dt);
/* The elements of a tensor of logical shape (ndim, shape) from src (sdt, slay) into
 * dst (ddt, dlay): any float dtype to any other, any layout to any (NHWC: 4-D only);
 * an integer dtype only to itself. dst and src must not overlap. 0 or -EINVAL. */
int rf__convert_host(void *dst, enum rf_tdtype ddt, enum rf_layout dlay, const void *src,
		     enum rf_tdtype sdt, enum rf_layout slay, int ndim, const int64_t *shape);

#endif
