/* ringflow/tensor.h -- tensors: dtype, layout, shape, device memory and an engine variable.
 * Freeing a tensor is an engine deletion: its memory goes back to the allocator after
 * the last op using it. The struct is public for reading; fields marked private are
 * not for callers. Reactor thread only. Blocks and views: devices/README.md.
 */
#ifndef RINGFLOW_TENSOR_H
#define RINGFLOW_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include "engine.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of tensors. u8, i32 and f32 are the IDX type codes (as the
 * dataloader's file-format enum rf_dtype), so a dataset's dtype converts by a cast.
 * bf16 (bfloat16: f32's upper 16 bits) and f16 (IEEE binary16) are float types too:
 * an op that takes f32 takes them where its device says so (rf_device_supports),
 * and rf_convert changes one float type into another. */
enum rf_tdtype { RF_U8 = 0x08, RF_I32 = 0x0C, RF_F32 = 0x0D, RF_BF16 = 0x20, RF_F16 = 0x21 };

/* How a tensor's elements lie in memory. The shape is always logical: (n, c, h, w) for
 * an image batch or a convolution's weight (o, c, kh, kw), whatever the layout.
 * RF_LAYOUT_ROWMAJOR: the last dimension varies fastest (NCHW for 4-D).
 * RF_LAYOUT_NHWC (4-D only): channels vary fastest, then w, h, n (PyTorch's
 * channels_last; (o, kh, kw, c) for a weight). */
enum rf_layout { RF_LAYOUT_ROWMAJOR = 0, RF_LAYOUT_NHWC = 1 };

#define RF_TENSOR_MAX_DIMS 4

struct rf__storage;

struct rf_tensor {
	enum rf_tdtype dtype;
	enum rf_layout layout;           /* RF_LAYOUT_ROWMAJOR unless set */
	int ndim;                        /* 0 (a scalar, numel 1) .. RF_TENSOR_MAX_DIMS */
	int64_t shape[RF_TENSOR_MAX_DIMS]; /* logical (see rf_layout); unused dims are 1 */
	size_t numel, nbytes;
	struct rf_device *dev;           /* where data lives (borrowed) */
	void *data;                      /* device pointer (host pointer on the CPU); valid
					  * until the tensor's deletion runs. Host code may
					  * touch it only after rf_engine_wait_var(var). */
	struct rf_var *var;              /* the engine variable tagging data */
	struct rf_tensor *base;          /* a view: the block it is carved from; else NULL */
	size_t offset;                   /* a view: byte offset into the block */
	char name[40];
	/* private */
	struct rf__storage *st;
	struct rf_tensor *views;         /* a block: its live views */
	struct rf_tensor *next_view;
	unsigned nviews;
};

/* Dims as the two trailing arguments: rf_tensor_create(d, RF_F32, "w1", RF_DIMS(256, 784), &t). */
#define RF_DIMS(...) (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)), \
	(const int64_t[]){ __VA_ARGS__ }

/* Bytes per element of a tensor element type (0 for an unknown one), and its name
 * ("f32", "bf16", ...: a static string). */
size_t rf_tdtype_size(enum rf_tdtype dt);
/* The name of a tensor element type ("f32", "i32", "u8", "bf16", "f16"; "?" for an
 * unknown one): a static string. */
const char *rf_tdtype_name(enum rf_tdtype dt);
/* A layout's name: "rowmajor" or "nhwc" (static). */
const char *rf_layout_name(enum rf_layout layout);

/* A new tensor in *out on device d with uninitialised memory from d's caching allocator
 * and a new variable named name (copied; may be NULL). ndim <= 4, every dim >= 0.
 * Returns 0, or -EINVAL (a bad shape) or -ENOMEM, *out NULL and the message in
 * rf_last_error(). The caller owns the tensor: rf_tensor_destroy. */
int rf_tensor_create(struct rf_device *d, enum rf_tdtype dt, const char *name, int ndim,
		     const int64_t *shape, struct rf_tensor **out);
/* The same in a given layout (RF_LAYOUT_NHWC needs ndim 4; -EINVAL otherwise). */
int rf_tensor_create_layout(struct rf_device *d, enum rf_tdtype dt, enum rf_layout layout,
			    const char *name, int ndim, const int64_t *shape,
			    struct rf_tensor **out);
/* The same on a CPU device, with memory from a pinned staging arena (p borrowed; it
 * must outlive the tensor's destruction): fast asynchronous host<->device copies. */
int rf_tensor_create_pinned(struct rf_device *cpu, struct rf_pinned *p, enum rf_tdtype dt,
			    const char *name, int ndim, const int64_t *shape, struct rf_tensor **out);
/* A tensor over memory the caller owns (host memory for a CPU device, device memory
 * for CUDA). The memory must outlive the tensor's destruction; it is never freed here. */
int rf_tensor_wrap(struct rf_device *d, void *data, enum rf_tdtype dt, const char *name,
		   int ndim, const int64_t *shape, struct rf_tensor **out);
/* A view of block (not itself a view) at element offset `offset` (in units of dt,
 * byte offset offset*sizeof(dt) must be a multiple of sizeof(dt)'s alignment and lie
 * within the block). The view gets its own variable (devices/README.md). Returns NULL on a
 * bad range or shape (-EINVAL). The caller owns the view: rf_tensor_destroy. */
int rf_tensor_view(struct rf_tensor *block, size_t offset, enum rf_tdtype dt, const char *name,
		   int ndim, const int64_t *shape, struct rf_tensor **out);

/* Destroy: pushes the deletion of t's variable (a block: the views are detached and keep
 * the memory alive). Memory returns to the allocator once every op pushed so far on
 * t has finished. t must not be used after this call. NULL is ignored. */
void rf_tensor_destroy(struct rf_tensor *t);

/* Change the shape (same numel), e.g. flatten (n, c, h, w) to (n, c*h*w) before a
 * linear layer. Metadata only: ops capture shapes when pushed, so this is safe at any
 * time. An NHWC tensor keeps its shape, or takes a row-major shape where the two
 * orders coincide (c == 1, or h == w == 1: then it becomes row-major); anything else
 * needs rf_convert first. Returns 0 or -EINVAL (message in rf_last_error()). */
int rf_tensor_reshape(struct rf_tensor *t, int ndim, const int64_t *shape);
/* Say how t's memory is laid out (for memory wrapped or viewed as NHWC, say).
 * Metadata only, as rf_tensor_reshape: ops already pushed keep the layout they saw;
 * the bytes are not moved (rf_convert moves them). RF_LAYOUT_NHWC needs a 4-D
 * tensor. Returns 0 or -EINVAL. */
int rf_tensor_set_layout(struct rf_tensor *t, enum rf_layout layout);

/* Host read: wait until every write pushed so far on t has finished, then copy
 * t->nbytes into dst (host memory, caller's): the bytes as they lie (t's dtype and
 * layout; rf_tensor_read_as gives logical values). For a device tensor the copy is a
 * device-to-host op.
 * Returns 0, or t's poison error (the failing op is named by rf_var_error), or -errno. */
int rf_tensor_read(struct rf_tensor *t, void *dst);
/* Host write: copy t->nbytes from src (bytes in t's dtype and layout) after every op
 * pushed so far on t (reads included) has finished, and wait for the copy (src may
 * be reused on return). */
int rf_tensor_write(struct rf_tensor *t, const void *src);
/* Host read and write of t's values in logical row-major order (NCHW for 4-D,
 * whatever t's layout) as dtype dt: a float tensor reads as and writes from any float
 * dtype (rounded to nearest even where narrower); an integer tensor only as its own
 * dtype. dst/src hold t->numel elements of dt. Ordered and waited for as
 * rf_tensor_read/write (a device tensor goes through a host copy of its bytes).
 * Returns 0, -EINVAL (dtype), -ENOMEM, or what rf_tensor_read/write returns.
 * rf_tensor_read_as reads into dst, rf_tensor_write_as writes from src. */
int rf_tensor_read_as(struct rf_tensor *t, enum rf_tdtype dt, void *dst);
int rf_tensor_write_as(struct rf_tensor *t, enum rf_tdtype dt, const void *src);
/* Wait for all writes pushed so far (for a block: to the block and its views).
 * Returns 0 or the poison error. */
int rf_tensor_wait(struct rf_tensor *t);

/* "name (2, 3) f32 cpu:0" into buf ("x (8, 3, 32, 32) bf16 nhwc cpu:0" for a tensor
 * that is not row-major). Returns buf. */
const char *rf_tensor_describe(const struct rf_tensor *t, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
