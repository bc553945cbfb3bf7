/* devices/cuda/cuda-impl.h -- the CUDA stream's state, shared by cuda.c (enqueue,
 * completion, watchdog, chaining) and cuda-graph.c (a graph launch run as CUDA
 * graphs). Internal to devices/cuda. */
#ifndef RF_CUDA_IMPL_H
#define RF_CUDA_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include "cublas-dl.h"
#include "cuda-ctr.h"
#include "cuda-rules.h"
#include "cuda-wd.h"
#include "cuda-waker.h"
#include "plan-cache.h"

#include "../backend-impl.h"
#include "stream.h"

#define RF__EVRING 64u

struct rf__cuda_dev {
	int ordinal;
	int cc;                          /* compute capability, major * 10 + minor (0:
					  * unknown); cuda-rules.h: rf__cuda_rule_cc */
	uint64_t period_ns, hang_ns;
	struct rf__plan_cache plans;     /* convolution plans (cudnn.c) */
	size_t ws_budget;                /* their workspace's budget */
	int budget_state;                /* 0 not read yet, 1 read, -1 refused */
	char budget_err[160];
	int no_fallback;                 /* a convolution cuDNN cannot run fails (opts) */
	int hung;                        /* a stream's watchdog found the GPU stuck: what
					  * would synchronise the device (cudaFree, cuDNN's
					  * and cuBLAS's destroy) is left, leaked */
	/* what ran how (reactor thread; rf_device_stats) */
	uint64_t fallbacks;              /* convolutions run by im2col though cuDNN is loaded */
	uint64_t cg_captures, cg_replays, cg_failures, cg_stale;
};

#define RF__RETIRED 8
#define RF__WEV 256u

struct rf__cg;
struct rf__dnn;

struct rf__cuda_stream {
	struct rf_stream s;
	struct rf_device *dev;
	int ordinal;                     /* dev's: the waker reads it, and may outlive dev
					  * after a watchdog timeout */
	struct rf__dstream *ds;
	char name[48];
	cudaStream_t cs;
	cublasHandle_t blas;
	void *blas_ws;                   /* its fixed workspace (compute streams) */
#if RF_HAVE_CUDNN
	struct rf__dnn *dnn;             /* made on the stream's thread at first use */
#endif
	void *dnn_ws;                    /* the convolutions' workspace, from the device's
					  * allocator, the size of the largest plan run */
	size_t dnn_ws_bytes;
	uint64_t dnn_ws_gen;             /* its growths: graphs captured before are stale */
	struct {                         /* buffers replaced, freed once the FIFO passes */
		void *p;
		size_t bytes;
		uint64_t after;          /* free when tail >= after */
	} retired[RF__RETIRED];
	unsigned nretired;
	struct rf_notifier *notifier;
	/* launched, not yet reported (reactor thread only) */
	struct rf_op **fifo;
	int *st;
	uint8_t *nohf;                   /* quiet: no host function of its own (the next
					  * one's reports it) */
	uint64_t hf_owed;                /* host functions launched, not yet signalled */
	/* completion counter (cuda-ctr.h): the stream writes each signal's number into
	 * ctr.word (pinned, mapped; ctr_dev is its device address), the poller reads it */
	struct rf__ctr ctr;
	void *ctr_dev;
	int ctr_mode;                    /* RF__CTR_* */
	struct rf_poller *poller;
	/* the waker (cuda-waker.h): wakes a sleeping reactor from beside the stream, by
	 * an event per signal, instead of a host function that holds the stream */
	int waker_on;
	struct rf__waker waker;
	cudaEvent_t *wev;                /* RF__WEV events, signal k's at k % RF__WEV */
	struct rf_notifier *wnotifier;
	uint64_t wdelivered;             /* its signals delivered (reactor thread) */
	uint64_t *t_launch;              /* when each op was launched (trace times) */
	uint64_t t_last_done;
	unsigned cap;                    /* power of two */
	uint64_t head, tail;             /* pushed, reported */
	int flushing;
	/* chaining events */
	cudaEvent_t ev[RF__EVRING];
	uint64_t ev_seq[RF__EVRING];
	/* watchdog */
	rf_req_id wd_id;
	int wd_armed;
	struct rf__wd wd;                /* cuda-wd.h */
	int dead;                        /* 0, or the error every op now fails with */
	atomic_int orphaned;             /* destroyed while host functions were owed */
	struct rf__cg *cg;               /* graph launches as CUDA graphs (cuda-graph.c) */
};

/* cuda-compute.c: the table's op entries (backend-impl.h) */
int rf__cuda_supports(const struct rf_device *d, const struct rf__op *op, char *why, size_t len);
size_t rf__cuda_workspace(const struct rf_device *d, const struct rf__op *op, int min);
int rf__cuda_compute(struct rf_device *d, struct rf__dstream *ds, struct rf__op *op);
/* An NHWC convolution's bias gradient (rf__cuda_bias_grad_ours) by our column sum, on
 * c, into the op's workspace. 0, or -EINVAL / -EIO with op->err set. */
int rf__cuda_bias_grad(struct rf__cuda_stream *c, struct rf__op *op);
/* A bf16 or f16 convolution's bias (grad 0: y += b) or its gradient (grad 1: y = db
 * (+)= the sum of b = dy) by our kernel, on c: cuDNN's bias calls need not take 16-bit
 * tensors. 0 or -EIO with op->err set. */
int rf__cuda_bias4(struct rf__cuda_stream *c, struct rf__op *op, int grad, void *y, const void *b,
		   int acc);
/* cuda-report.c: the device's rf_device_stats and plans */
void rf__cuda_stats(const struct rf_device *d, struct rf_device_stats *out);
int rf__cuda_plan_json(const struct rf_device *d, unsigned i, char *buf, size_t len);

/* cuda.c */
int rf__cuda_count(void);
/* 1 when convolutions, batch norm and pooling go through cuDNN (built with it, and
 * libcudnn loads, and RF_CUDNN is not 0); else 0 and *why (if why) says why. */
int rf__cuda_dnn_ok(const char **why);
int rf__cuda_set(int ordinal);
int rf__cuerr(cudaError_t e);
/* Put op in the FIFO (a slot is free: the enqueue made sure) with the status its
 * launch returned, reported by the next host function (none of its own yet). */
void rf__cs_put(struct rf__cuda_stream *c, struct rf_op *op, int st, uint64_t t0);
/* After the FIFO's newest op (stream sequence number seq): an event for chaining, the
 * completion counter's write (cuda-ctr.h) and the host function behind it; the first
 * of the two the reactor sees reports the op and every op before it not yet reported. */
void rf__cs_signal(struct rf__cuda_stream *c, uint64_t seq);
/* cuda-mem.c: the allocator's backing memory; retired buffers (reap: free those whose
 * users are reported done, or all) */
int rf__cuda_mem_alloc(void *ctx, size_t bytes, void **out);
void rf__cuda_mem_free(void *ctx, void *p, size_t bytes);
void rf__cs_reap(struct rf__cuda_stream *c, int all);
/* Retire buffer p of the device's allocator that work queued on c so far may still use:
 * freed once every op put in c's FIFO until now (and the one being run) is reported. */
void rf__cs_retire(struct rf__cuda_stream *c, void *p, size_t bytes);
/* 0 when d takes no fallback path (its opts asked so, and RF_CUDA_ALLOW_FALLBACK is
 * not 1), else 1. */
int rf__cuda_fallback_allowed(const struct rf_device *d);
/* The CUDA stream behind s, or NULL for any other stream. */
struct rf__cuda_stream *rf__cs_of(const struct rf_stream *s);
/* Report the ops of every signal now known finished (the counter, or the host
 * functions' count): the number of ops reported. */
unsigned rf__cs_report(struct rf__cuda_stream *c);

/* cuda-counter.c: the completion counter. init: the word, its mode and the ring
 * poller (0 also when the stream goes without: host functions only), then the waker
 * where the counter is written (RF_CUDA_WAKE=hostfn keeps host functions); write:
 * queue the write of v (0, or -errno with the counter turned off for the stream). */
int rf__cs_ctr_init(struct rf__cuda_stream *c);
int rf__cs_ctr_write(struct rf__cuda_stream *c, uint64_t v);
/* Signal k's wake-up by the waker: its event recorded, the waker told. 0, or -errno:
 * the caller launches a host function for it instead. */
int rf__cs_waker_signal(struct rf__cuda_stream *c, uint64_t k);
/* Stop the waker (join: 1 when it could be joined; 0 after a watchdog timeout, when
 * its thread may be blocked on the stuck GPU for good: then it is left running and
 * the stream must not be freed) and free its events and notifier. */
int rf__cs_waker_fini(struct rf__cuda_stream *c);

/* cuda-graph.c (devices/README.md, "CUDA graphs") */
/* Reactor thread, device current, a FIFO slot free: 1 if op was taken (gathered,
 * recorded or run as part of its launch; in the FIFO), 0 if the caller enqueues it as
 * usual -- after everything gathered before it has been started. */
int rf__cg_enqueue(struct rf__cuda_stream *c, struct rf_op *op);
/* The engine's dispatch round is over: start whatever is held. */
void rf__cg_flush(struct rf__cuda_stream *c);
void rf__cg_free(struct rf__cuda_stream *c);
/* The stream dies: an open capture ends, the launch in progress is forgotten (its
 * ops, in the FIFO, fail with the rest). */
void rf__cg_drop(struct rf__cuda_stream *c);
/* 1 while a capture is open on c (a chain hook must not make c wait then). */
int rf__cg_capturing(const struct rf__cuda_stream *c);

#endif
