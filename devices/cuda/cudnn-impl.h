/* devices/cuda/cudnn-impl.h -- the CUDA device's convolutions, batch norm and pooling
 * through cuDNN (cudnn.c), which cuda.c calls from its stream threads. libcudnn is
 * opened with dlopen on first use (devices/README.md, "cuDNN"). Internal to devices/. */
#ifndef RF_CUDNN_IMPL_H
#define RF_CUDNN_IMPL_H

#include <stddef.h>

#include "../backend-impl.h"

/* 1 when libcudnn.so.9 is loaded and has every call we use (the first call loads it,
 * once, thread-safe); else 0, and *why (if why) says what is missing. */
int rf__dnn_ok(const char **why);

/* A stream's handle: made on its thread at first use (bound to its CUDA stream `cs`,
 * a cudaStream_t), destroyed with the stream. */
struct rf__dnn;
void rf__dnn_destroy(struct rf__dnn *h);

/* op (RF__OP_CONV_FWD, _BWD_DATA, _BWD_FILTER) on h's stream, the fastest deterministic
 * algorithm whose workspace fits op->ws_bytes, in full float32 (FMA math, no TF32).
 * 0; -ENOTSUP (op->err untouched, nothing queued) when no such algorithm exists: the
 * caller convolves by im2col; or -EIO with op->err set. */
int rf__dnn_conv(struct rf__dnn **h, void *cs, struct rf__op *op);
/* A batch norm (train, eval, backward), max or global average pooling op (forward,
 * backward) on h's stream; max pooling's backward recomputes y into op->ws (y's
 * size). 0 or -EIO with op->err set. */
int rf__dnn_norm(struct rf__dnn **h, void *cs, struct rf__op *op);

#endif
