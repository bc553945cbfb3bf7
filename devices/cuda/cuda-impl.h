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
#include "cuda-wd.h"
#include "plan-cache.h"

#include "../backend-impl.h"
#include "stream.h"

#define RF__EVRING 64u

/* how a stream's completion counter is written (cuda.c) */
enum { RF__CTR_OFF, RF__CTR_STREAM, RF__CTR_KERNEL };

struct rf__cuda_dev {
	int ordinal;
	uint64_t period_ns, hang_ns;
	struct rf__plan_cache plans;     /* convolution plans (cudnn.c) */
	size_t ws_budget;                /* their workspace's budget */
	int budget_state;                /* 0 not read yet, 1 read, -1 refused */
	char budget_err[160];
};

struct rf__cg;
struct rf__dnn;

struct rf__cuda_stream {
	struct rf_stream s;
	struct rf_device *dev;
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
/* The CUDA stream behind s, or NULL for any other stream. */
struct rf__cuda_stream *rf__cs_of(const struct rf_stream *s);
/* Report the ops of every signal now known finished (the counter, or the host
 * functions' count): the number of ops reported. */
unsigned rf__cs_report(struct rf__cuda_stream *c);

/* cuda-counter.c: the completion counter. init: the word, its mode and the ring
 * poller (0 also when the stream goes without: host functions only); write: queue
 * the write of v (0, or -errno with the counter turned off for the stream). */
int rf__cs_ctr_init(struct rf__cuda_stream *c);
int rf__cs_ctr_write(struct rf__cuda_stream *c, uint64_t v);

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
