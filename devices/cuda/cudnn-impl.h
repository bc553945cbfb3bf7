/* devices/cuda/cudnn-impl.h -- the CUDA device's convolutions, batch norm and pooling
 * through cuDNN (cudnn.c), which cuda.c calls from its stream threads. libcudnn is
 * opened with dlopen on first use (devices/README.md, "cuDNN"). Internal to devices/. */
#ifndef RF_CUDNN_IMPL_H
#define RF_CUDNN_IMPL_H

#include <stddef.h>

#include "../backend-impl.h"

struct rf__cuda_stream;
struct rf__cuda_dev;

/* 1 when libcudnn.so.9 is loaded and has every call we use (the first call loads it,
 * once, thread-safe); else 0, and *why (if why) says what is missing. */
int rf__dnn_ok(const char **why);

/* A stream's handle: made on its thread at first use (bound to its CUDA stream `cs`,
 * a cudaStream_t), destroyed with the stream. */
struct rf__dnn;
void rf__dnn_destroy(struct rf__dnn *h);

/* A device's plan cache (cudnn.c's; made at open, freed at close). 0 or -ENOMEM. */
int rf__dnn_dev_init(struct rf__cuda_dev *cd);
void rf__dnn_dev_fini(struct rf__cuda_dev *cd);

/* op (RF__OP_CONV_FWD, _BWD_DATA, _BWD_FILTER) on stream c by its plan (made at the
 * first op of its key: the first deterministic algorithm of cuDNN's heuristics within
 * the workspace budget, in op->math), in the stream's workspace (grown to the plan's;
 * the buffer replaced is retired on the stream: rf__cs_retire). 0; -ENOTSUP (op->err
 * untouched, nothing queued) when no such algorithm exists: the caller convolves by
 * im2col; or -EIO, -EINVAL, -ENOMEM with op->err set. */
int rf__dnn_conv(struct rf__cuda_stream *c, struct rf__op *op);
/* A batch norm (train, eval, backward), max or global average pooling op (forward,
 * backward) on h's stream; max pooling's backward recomputes y into op->ws (y's
 * size). 0 or -EIO with op->err set. */
int rf__dnn_norm(struct rf__cuda_stream *c, struct rf__op *op);
/* 1 when running op on stream c now would only queue GPU work (a CUDA graph may
 * capture it): the stream's handle exists, and a convolution's plan was made by an
 * earlier run and fits the stream's workspace as it is. Else 0. */
int rf__dnn_capturable(const struct rf__cuda_stream *c, const struct rf__op *op);

#endif
