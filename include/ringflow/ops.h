/* ringflow/ops.h -- the ops training needs, each validated and pushed as ONE engine op
 * on stream s (NULL: the output device's default stream). Returns 0, or -errno with
 * nothing pushed (message in rf_last_error()); a failure when the op runs poisons its
 * outputs. Tensors are borrowed. Reactor thread only. Streams, layouts and failures:
 * devices/README.md.
 *
 * Shapes are logical (tensor.h): (n, c, h, w) whatever a tensor's layout. Where an op
 * below says f32, it takes any float dtype (f32, bf16, f16) and either layout for its
 * 4-D tensors, as far as the executing device runs them (rf_device_supports; the CPU
 * runs every combination, the others in f32 first by a reference path: computed in
 * f32 and rounded to each output's dtype). A combination the device does not run is
 * refused at push with -ENOTSUP, naming the operand, its dtype and layout.
 */
#ifndef RINGFLOW_OPS_H
#define RINGFLOW_OPS_H

#include <stdint.h>
#include "engine.h"
#include "device.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether d runs op (the name of an ops.h function without rf_: "conv2d_fwd",
 * "batchnorm_fwd", "relu_avgpool2d_fwd") with float tensors of dtype dt (f32, bf16,
 * f16) in layout (4-D ones; the others are row-major). 0 if so, -ENOTSUP if not, with
 * the reason in rf_last_error() ("cuda:0 does not run batchnorm_fwd: ..."), -EINVAL
 * for an unknown op or a dtype that is no float one. An op pushed with tensors the device does not take is refused the same way. */
int rf_device_supports(const struct rf_device *d, const char *op, enum rf_tdtype dt,
		       enum rf_layout layout);
/* The same for any device of a kind ("cuda"), without opening one ("a cuda device
 * does not run ..."). */
int rf_device_kind_supports(const char *kind, const char *op, enum rf_tdtype dt,
			    enum rf_layout layout);

/* C (m, n) = alpha * op(A) * op(B) + beta * C, all 2-D f32. op(A) is (m, k): A (m, k),
 * or A (k, m) when ta. op(B) is (k, n): B (k, n), or B (n, k) when tb. Reads A, B
 * (and C when beta != 0); writes C. C must not alias A or B. */
int rf_gemm(struct rf_stream *s, int ta, int tb, float alpha, struct rf_tensor *A,
	    struct rf_tensor *B, float beta, struct rf_tensor *C);

/* y (rows, cols) += b (cols). Reads b, writes y. */
int rf_bias_add(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *b);
/* db (cols) = sum_rows dy (rows, cols), or += when accumulate. Reads dy, writes db. */
int rf_bias_grad(struct rf_stream *s, struct rf_tensor *db, struct rf_tensor *dy,
		 int accumulate);

/* y = max(x, 0), same numel; y == x allowed (in place). */
int rf_relu_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x);
/* dx = dy * (y > 0), y the forward OUTPUT; dx == dy allowed. */
int rf_relu_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy,
		struct rf_tensor *y);

/* Softmax cross-entropy over logits (rows, cols) f32 with labels (rows) i32.
 * dlogits (rows, cols) f32 or NULL (evaluation): (softmax - onehot) / rows; may be
 * logits itself (in place). loss (1 element f32) or NULL: the SUM over rows of the
 * per-row loss (mean = sum / rows). correct (1 element i32) or NULL: rows whose
 * argmax is the label. loss and correct are overwritten, on the logits' device; read
 * them with rf_tensor_read. A label out of range fails the op with -EINVAL on the
 * CPU (on CUDA: that row's loss is NaN). */
int rf_softmax_xent(struct rf_stream *s, struct rf_tensor *dlogits, struct rf_tensor *loss,
		    struct rf_tensor *correct, struct rf_tensor *logits,
		    struct rf_tensor *labels);

/* Conv2d (im2col + GEMM; workspace taken from the device's caching allocator per op)
 * with the same stride (>= 1) and zero padding (0 <= pad < kernel) along both axes.
 * x (n, c, h, w), w (o, c, kh, kw), b (o) or NULL, y (n, o, oh, ow) with
 * oh = (h + 2*pad - kh)/stride + 1 (floor), ow likewise. */
int rf_conv2d_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x,
		  struct rf_tensor *w, struct rf_tensor *b, int stride, int pad);
/* How a batch may be split and keep its bits: the images of x that rf_conv2d_fwd on
 * device d computes together (the CPU: one GEMM per group of them, whose rounding may
 * depend on the GEMM's width), >= 1. The batch run as parts that each start at a
 * multiple of it (views of x and y) gives every output the bits of one call on the
 * whole batch, given the workspace's fast size (a device short of memory runs one image
 * at a time, in any split). -ENOTSUP where the device promises no split (CUDA: its
 * algorithm is chosen per shape), -EINVAL for a bad shape; the message in
 * rf_last_error(). */
int rf_conv2d_fwd_group(const struct rf_device *d, const struct rf_tensor *x,
			const struct rf_tensor *w, int stride, int pad);
/* dx (n, c, h, w) = dL/dx from dy (n, o, oh, ow) and w (overwritten; input pixels no
 * output sees, past the last stride, get 0). */
int rf_conv2d_bwd_data(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy,
		       struct rf_tensor *w, int stride, int pad);
/* dw (o, c, kh, kw) and db (o) (NULL: none) from dy and the forward input x;
 * overwritten, or added to when accumulate. */
int rf_conv2d_bwd_filter(struct rf_stream *s, struct rf_tensor *dw, struct rf_tensor *db,
			 struct rf_tensor *dy, struct rf_tensor *x, int accumulate, int stride,
			 int pad);

/* Average pooling kxk, stride k, floor: x (n, c, h, w) -> y (n, c, h/k, w/k). */
int rf_avgpool2d_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x, int k);
/* dx (n, c, h, w) from dy (n, c, h/k, w/k). */
int rf_avgpool2d_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy, int k);

/* Max pooling, rf_maxpool2d_fwd and rf_maxpool2d_bwd: k x k windows at stride `stride`,
 * no padding (floor): x (n, c, h, w) -> y (n, c, (h-k)/stride+1, (w-k)/stride+1); the
 * first maximum of a window takes its gradient (devices/README.md). Backward:
 * dx (n, c, h, w) from dy and the forward input x (dx must not overlap either; the same
 * tensor is refused, -EINVAL).
 * On CUDA through cuDNN (rf_device_supports says whether it is there). */
int rf_maxpool2d_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x, int k,
		     int stride);
int rf_maxpool2d_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy,
		     struct rf_tensor *x, int k, int stride);
/* Global average pooling, rf_gavgpool_fwd and rf_gavgpool_bwd: y (n, c) (or
 * (n, c, 1, 1)) = the mean of each (h, w) plane of x (n, c, h, w); backward
 * dx = dy / (h*w) on every pixel. On CUDA through cuDNN. */
int rf_gavgpool_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *x);
int rf_gavgpool_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy);

/* Batch normalisation as PyTorch's BatchNorm2d, per channel of x (n, c, h, w); y the
 * same shape (not x). train != 0: batch mean and biased variance; mean (c) and invstd
 * (c) are written for rf_batchnorm_bwd; run_mean and run_var (c, or both NULL) move
 * towards the batch statistics by momentum (the unbiased variance, as PyTorch).
 * train == 0: the running statistics normalise (mean, invstd unused, may be NULL).
 * gamma, beta (c). x has channels and planes (c, h, w >= 1). On CUDA through cuDNN. */
int rf_batchnorm_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *mean,
		     struct rf_tensor *invstd, struct rf_tensor *run_mean,
		     struct rf_tensor *run_var, struct rf_tensor *x, struct rf_tensor *gamma,
		     struct rf_tensor *beta, int train, float eps, float momentum);
/* dx (not dy or x), dgamma, dbeta (overwritten) from dy, the forward input x (n, c, h, w
 * >= 1) and the training forward's mean and invstd. On a CUDA device cuDNN's backward
 * is given eps 1e-5, and its contract wants the forward's: use 1e-5 there (as
 * ringflow's models do); the CPU needs no eps (invstd holds it). */
int rf_batchnorm_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dgamma,
		     struct rf_tensor *dbeta, struct rf_tensor *dy, struct rf_tensor *x,
		     struct rf_tensor *mean, struct rf_tensor *invstd, struct rf_tensor *gamma);
/* Batch normalisation and the ReLU on its output, one op: y = max(bn(x), 0) with the
 * bits of rf_batchnorm_fwd then rf_relu_fwd in place (same arguments). Its backward,
 * rf_batchnorm_relu_bwd, takes the fused forward's output y as well and is rf_relu_bwd
 * (dy masked by y > 0) then rf_batchnorm_bwd, the same bits, without a masked copy of
 * dy on the CPU.
 * Where a device lacks them, rf_device_supports("batchnorm_relu_fwd") says. */
int rf_batchnorm_relu_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *mean,
			  struct rf_tensor *invstd, struct rf_tensor *run_mean,
			  struct rf_tensor *run_var, struct rf_tensor *x, struct rf_tensor *gamma,
			  struct rf_tensor *beta, int train, float eps, float momentum);
int rf_batchnorm_relu_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dgamma,
			  struct rf_tensor *dbeta, struct rf_tensor *dy, struct rf_tensor *y,
			  struct rf_tensor *x, struct rf_tensor *mean, struct rf_tensor *invstd,
			  struct rf_tensor *gamma);

/* Fused ReLU + 2x2 average pooling: the same bits as the separate ops, one pass over
 * the big tensor. Where a device has no fused kernel (CUDA: rf_device_supports says)
 * it is refused with -ENOTSUP: use rf_relu_* and rf_avgpool2d_* there.
 * Forward: y (n, c, h, w) = max(y, 0) in place, p (n, c, h/2, w/2) = avgpool2(y).
 * Reads and writes y, writes p. */
int rf_relu_avgpool2d_fwd(struct rf_stream *s, struct rf_tensor *p, struct rf_tensor *y);
/* y = max(a + b, 0) elementwise (a residual sum and its ReLU, one pass): the same bits
 * as rf_sum of {a, b} then rf_relu_fwd. Equal element counts; y may be a or b. */
int rf_add_relu_fwd(struct rf_stream *s, struct rf_tensor *y, struct rf_tensor *a,
		    struct rf_tensor *b);
/* Backward: dx (n, c, h, w) = avgpool2_bwd(dy (n, c, h/2, w/2)) * (y > 0), y the ReLU
 * output. Reads dy and y, writes dx. */
int rf_avgpool2d_relu_bwd(struct rf_stream *s, struct rf_tensor *dx, struct rf_tensor *dy,
			  struct rf_tensor *y);

/* rf_conv2d_bwd_filter whose dy is avgpool2_bwd(dp) * (y > 0), computed on the fly
 * (a fused kernel, as above): dp (n, o, oh/2, ow/2), y (n, o, oh, ow)
 * the ReLU output, x (n, 1, h, w) single-channel. The same bits as rf_avgpool2d_relu_bwd
 * then rf_conv2d_bwd_filter, without the full-size dy. Reads dp, y,
 * x; writes dw and db (NULL: none). */
int rf_conv2d_bwd_filter_pool_relu(struct rf_stream *s, struct rf_tensor *dw,
				   struct rf_tensor *db, struct rf_tensor *dp,
				   struct rf_tensor *y, struct rf_tensor *x, int accumulate);

/* w -= lr * (g + wd * w). Reads g, writes w. */
int rf_sgd(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *g, float lr,
	   float weight_decay);
/* PyTorch SGD with momentum (dampening 0), rounded as torch.optim.SGD on the CPU:
 * d = g + wd * w; v = momentum * v + d; w -= lr * v, or with nesterov
 * w -= lr * (d + momentum * v). v starts at 0. Reads g, writes w and v. */
int rf_sgd_momentum(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *v,
		    struct rf_tensor *g, float lr, float momentum, float weight_decay,
		    int nesterov);

/* AdamW's hyperparameters and step, as torch.optim.AdamW (PyTorch 1.13, amsgrad off),
 * rounded op by op as its single-tensor code:
 *   w *= 1 - lr*wd;  m = m*b1 + (1-b1)*g;  v = v*b2 + (1-b2)*g*g;
 *   w -= lr/(1-b1^step) * m / (sqrt(v)/sqrt(1-b2^step) + eps).
 * The scalars are computed in double and rounded to float, as torch's are. */
struct rf_adamw_params {
	double lr, beta1, beta2, eps, weight_decay;   /* doubles, as torch's Python floats:
						 * 1 - 0.999f is not 1 - 0.999 */
	uint64_t step;                                /* 1-based */
};
/* AdamW's step p->step (>= 1): m and v are the moment buffers (start them at 0).
 * Reads g, writes w, m and v. */
int rf_adamw(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *m,
	     struct rf_tensor *v, struct rf_tensor *g, const struct rf_adamw_params *p);

/* Hyperparameters an optimizer op reads when it runs rather than when it is pushed --
 * a captured graph's launch arguments (engine.h, rf_engine_capture_args), changed
 * between replays: lr replaces the op's learning rate (rounded to float for the SGD
 * ops), step AdamW's step. The _live ops read var, the variable that orders every write
 * to *h (a graph's arguments variable); *h must stay valid while they may run. */
struct rf_live_hyper {
	double lr;
	uint64_t step;
};
/* rf_sgd, with the learning rate h->lr read when the op runs (rounded to float): var,
 * which the op reads, orders every write to *h, and *h must stay valid while it may run.
 * -EINVAL if h or var is NULL. */
int rf_sgd_live(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *g,
		const struct rf_live_hyper *h, struct rf_var *var, float weight_decay);
/* rf_sgd_momentum, with the learning rate h->lr read when the op runs (rounded to
 * float): var, which the op reads, orders every write to *h, and *h must stay valid
 * while it may run. -EINVAL if h or var is NULL. */
int rf_sgd_momentum_live(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *v,
			 struct rf_tensor *g, const struct rf_live_hyper *h, struct rf_var *var,
			 float momentum, float weight_decay, int nesterov);
/* p's lr and step are replaced by h's when the op runs. */
int rf_adamw_live(struct rf_stream *s, struct rf_tensor *w, struct rf_tensor *m,
		  struct rf_tensor *v, struct rf_tensor *g, const struct rf_adamw_params *p,
		  const struct rf_live_hyper *h, struct rf_var *var);

/* y += a * x (same numel). */
int rf_axpy(struct rf_stream *s, struct rf_tensor *y, float a, struct rf_tensor *x);
/* x *= a. */
int rf_scale(struct rf_stream *s, struct rf_tensor *x, float a);
/* out = in[0] + ... + in[k-1], left to right (k >= 1, same numel); out may be in[0].
 * On CUDA every input must be on the stream's GPU, through any device object opened on
 * it (rf_copy the others first; ringflow enables no peer access). */
int rf_sum(struct rf_stream *s, struct rf_tensor *out, struct rf_tensor *const *in, int k);
/* x = v (f32), or x = (int32)v for an i32 tensor, or (uint8)v for u8. */
int rf_fill(struct rf_stream *s, struct rf_tensor *x, float v);

/* Decoding: out (f32) = ((float)in * scale - mean) / std; in u8, same numel. */
int rf_u8_to_f32(struct rf_stream *s, struct rf_tensor *out, struct rf_tensor *in,
		 float scale, float mean, float std);
#define RF_U8_NORM_MAX_CH 4   /* channels rf_u8_normalize takes */
/* Decoding with a mean and std per channel (torchvision's Normalize after ToTensor):
 * out = ((float)in * scale - mean[c]) / std[c], where element i of in, counted in
 * logical row-major order, is of channel c = (i / plane) % nch -- for a batch of
 * (n, C, H, W) images, nch = C and plane = H * W. nch 1..RF_U8_NORM_MAX_CH, plane >= 1,
 * numel a multiple of nch * plane, every mean finite and every std finite and nonzero
 * (-EINVAL otherwise, with the argument named). The same bits as rf_u8_to_f32 run on
 * each channel's planes with that channel's mean and std, on every backend; out may
 * be any float dtype and layout the backend decodes into. */
int rf_u8_normalize(struct rf_stream *s, struct rf_tensor *out, struct rf_tensor *in,
		    float scale, unsigned nch, size_t plane, const float *mean,
		    const float *std);
/* out (i32) = in (u8). */
int rf_u8_to_i32(struct rf_stream *s, struct rf_tensor *out, struct rf_tensor *in);

/* ---- random numbers: the generator is a variable ----------------------------------
 * Philox4x32-10 (devices/README.md) keyed by seed with a 64-bit counter. An op that draws n
 * numbers WRITES the generator's variable and advances its counter by n when it runs,
 * so draws are serial and reproducible whatever the streams and devices: the same
 * pushes give the same numbers on the CPU and on CUDA. */
struct rf_prng {
	struct rf_var *var;
	uint64_t seed;
	uint64_t counter;   /* mutated by the ops that draw; read after a wait */
	struct rf_engine *eng;
};
/* A generator in *out. Returns 0 or -ENOMEM. The caller owns it: rf_prng_destroy. */
int rf_prng_create(struct rf_engine *e, uint64_t seed, const char *name, struct rf_prng **out);
/* Pushes the deletion of g's variable (after its last draw). */
void rf_prng_destroy(struct rf_prng *g);
/* x (f32) = uniform in [lo, hi). */
int rf_rand_uniform(struct rf_stream *s, struct rf_tensor *x, struct rf_prng *g, float lo,
		    float hi);
/* x (f32) = normal(mean, std). */
int rf_rand_normal(struct rf_stream *s, struct rf_tensor *x, struct rf_prng *g, float mean,
		   float std);

/* dst = src, the bytes as they lie, between any two devices: host to host (memcpy on
 * a CPU copy stream), host <-> CUDA (cudaMemcpyAsync; from pinned memory this is
 * asynchronous DMA), CUDA <-> CUDA (same or peer device). Same nbytes and the same
 * layout; dtypes of equal size are taken as they are (the bytes are not converted),
 * except two different float dtypes, which are refused (rf_convert converts). Reads
 * src, writes dst. */
int rf_copy(struct rf_stream *s, struct rf_tensor *dst, struct rf_tensor *src);
/* dst = src converted, on one device: the same logical shape, any float dtype to any
 * (rounded to nearest even where narrower) and any layout to any (NHWC <-> row-major
 * moves the elements); an integer tensor only to its own dtype (a layout change).
 * Reads src, writes dst; dst must not be src's memory. */
int rf_convert(struct rf_stream *s, struct rf_tensor *dst, struct rf_tensor *src);

/* A host function as an op on stream s (a CPU-capable stream; NULL: the engine's
 * inline stream): fn(arg) runs after the reads and writes it names, returns 0 or
 * -errno. For glue (checkpoint writes, printing). */
int rf_host_op(struct rf_stream *s, int (*fn)(void *arg), void *arg,
	       struct rf_tensor *const *reads, unsigned nreads,
	       struct rf_tensor *const *writes, unsigned nwrites, const char *name);

#ifdef __cplusplus
}
#endif
#endif
