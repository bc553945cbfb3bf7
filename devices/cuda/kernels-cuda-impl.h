/* devices/cuda/kernels-cuda-impl.h -- CUDA compute kernels, the same ops as the CPU
 * backend's (cpu/kernels.h).
 *
 * Plain C: no CUDA header is needed to include this. `stream` is a cudaStream_t and
 * `cublas` a cublasHandle_t, passed as void *. These functions exist only in a
 * library built with CUDA (RF_HAVE_CUDA in rf-config.h).
 *
 * Every pointer argument is a DEVICE pointer unless stated otherwise, and is
 * borrowed: it must stay valid until the work queued on `stream` has run. Nothing
 * here allocates or synchronises: kernels are queued on `stream` and the call
 * returns. The shapes, layouts and formulas are exactly those of the CPU function
 * with the same name (rf__kc_X <-> rf__k_X in cpu/kernels.h). Which results match the CPU
 * bit for bit: rand_uniform, u8_to_f32, u8_to_i32, relu, avgpool, copy, fill,
 * reduce_sum (same order of additions); the others agree to float rounding (cuBLAS,
 * fused multiply-add, different summation trees). GPU reductions use fixed trees,
 * so repeated runs give identical bits.
 *
 * Errors: 0 on success, or a negative code:
 *   -EINVAL                              bad shape or argument (nothing queued)
 *   -(RF_KC_ECUDA + e)    cudaError_t e  from the launch (cudaGetLastError)
 *   -(RF_KC_ECUBLAS + s)  cublasStatus_t s
 * rf__kc_error_string() turns any of them into text. Launch errors can belong to
 * earlier asynchronous work, as with cudaGetLastError.
 *
 * The caller binds the cuBLAS handle to `stream` (cublasSetStream) and owns its
 * math mode; the default mode computes in full float32 (no TF32).
 */
#ifndef RINGFLOW_KERNELS_CUDA_H
#define RINGFLOW_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include "../kernel-args.h"
#include "ops.h"
#include "u8norm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_KC_ECUDA   100000
#define RF_KC_ECUBLAS 200000

/* Text for a code returned by an rf__kc_ function (0, -errno, CUDA or cuBLAS).
 * Static storage; never NULL. */
const char *rf__kc_error_string(int code);

/* *n = number of usable CUDA devices. Any cudaGetDeviceCount error (no driver, no
 * device) gives *n = 0 and returns 0; the error is cleared. */
int rf__kc_device_count(int *n);

/* Row-major C (m, n) = alpha * op(A) * op(B) + beta * C: cublasSgemm with the
 * operands swapped (C ^T = op(B)^T * op(A)^T in column-major). Same contract as
 * rf__k_gemm. Queued on the handle's stream. */
int rf__kc_gemm(void *cublas, int trans_a, int trans_b, int m, int n, int k,
	       float alpha, const float *a, int lda, const float *b, int ldb,
	       float beta, float *c, int ldc);

/* How a GEMM goes to cuBLAS (rf__cuda_gemm_call in cuda-rules.c decides):
 * cublasSgemm; cublasGemmEx in CUBLAS_COMPUTE_32F (16-bit inputs on tensor cores as
 * they are); cublasGemmEx in CUBLAS_COMPUTE_32F_FAST_TF32 (every operand f32). */
enum rf__kc_gemm_call { RF__KC_SGEMM = 0, RF__KC_GEMM_32F = 1, RF__KC_GEMM_TF32 = 2 };

/* rf__kc_gemm with each operand of its own dtype (enum rf_tdtype: f32, bf16, f16) and
 * f32 accumulation, by the call given (enum rf__kc_gemm_call): -EINVAL for
 * RF__KC_SGEMM or RF__KC_GEMM_TF32 with an operand not f32 (cuBLAS has no such
 * combination). */
int rf__kc_gemm_ex(void *cublas, int ta, int tb, int m, int n, int k, float alpha,
		   const void *a, int adt, int lda, const void *b, int bdt, int ldb, float beta,
		   void *c, int cdt, int ldc, int call);

/* y (rows, cols) += b (cols). */
int rf__kc_bias_add(void *stream, float *y, const float *b, int rows, int cols);
/* db (cols) (+)= sum_r dy[r, :]. */
int rf__kc_bias_grad(void *stream, float *db, const float *dy, int rows, int cols,
		    int accumulate);
/* *p = v (p: a device address, pinned host memory mapped), written by one thread
 * after the stream's earlier work, with a system-wide fence first. */
int rf__kc_write_u64(void *stream, uint64_t *p, uint64_t v);
/* y (n) = max(x, 0); in place allowed. */
int rf__kc_relu_fwd(void *stream, float *y, const float *x, size_t n);
/* y (n) = max(a + b, 0); y may be a or b. The bits of the CPU's rf__k_add_relu_fwd. */
int rf__kc_add_relu(void *stream, float *y, const float *a, const float *b, size_t n);
/* dx (n) = dy * (y > 0), y the forward output; in place allowed (dx == dy). */
int rf__kc_relu_bwd(void *stream, float *dx, const float *dy, const float *y, size_t n);

/* Softmax cross-entropy as rf__k_softmax_xent. loss_sum (one float) and correct (one
 * int32) are DEVICE pointers, each may be NULL; they are overwritten, not added to.
 * A label out of range is not detected up front: that row's loss is NaN and its
 * gradient row is zero. Runs as one thread block (fine for the usual <= 10^4 rows and
 * few classes). */
int rf__kc_softmax_xent(void *stream, float *dlogits, float *loss_sum, int32_t *correct,
		       const float *logits, const int32_t *labels, int rows, int cols);
int rf__kc_softmax_xent_eval(void *stream, float *loss_sum, int32_t *correct,
			    const float *logits, const int32_t *labels, int rows, int cols);

/* Convolution: same shapes as rf__k_conv2d_*; needs the cuBLAS handle (bound to
 * stream) too. The workspace is a DEVICE buffer of ws_bytes; any size from
 * rf__kc_conv2d_workspace_min (one image at a time) works, rf__kc_conv2d_workspace_size
 * (all n images in one GEMM, capped at 256 MiB) is the fast one. */
size_t rf__kc_conv2d_workspace_size(const struct rf__conv2d *s);
size_t rf__kc_conv2d_workspace_min(const struct rf__conv2d *s);
int rf__kc_conv2d_fwd(void *stream, void *cublas, const struct rf__conv2d *s, float *y,
		     const float *x, const float *w, const float *b, void *ws,
		     size_t ws_bytes);
int rf__kc_conv2d_bwd_data(void *stream, void *cublas, const struct rf__conv2d *s,
			  float *dx, const float *dy, const float *w, void *ws,
			  size_t ws_bytes);
int rf__kc_conv2d_bwd_filter(void *stream, void *cublas, const struct rf__conv2d *s,
			    float *dw, float *db, const float *dy, const float *x,
			    int accumulate, void *ws, size_t ws_bytes);

/* Average pooling, kernel k stride k, floor. */
int rf__kc_avgpool2d_fwd(void *stream, float *y, const float *x, int n, int c, int h,
			int w, int k);
int rf__kc_avgpool2d_bwd(void *stream, float *dx, const float *dy, int n, int c, int h,
			int w, int k);

/* Optimiser and vector helpers. */
int rf__kc_sgd(void *stream, float *w, const float *g, size_t n, float lr,
	      float weight_decay);
int rf__kc_sgd_momentum(void *stream, float *w, float *v, const float *g, size_t n,
		       float lr, float momentum, float weight_decay, int nesterov);
int rf__kc_adamw(void *stream, float *w, float *m, float *v, const float *g, size_t n,
		 const struct rf_adamw_params *p);
int rf__kc_axpy(void *stream, float *y, float a, const float *x, size_t n);
int rf__kc_scale(void *stream, float *x, float a, size_t n);
/* out (n) = in[0] + ... + in[k-1], left to right. `in` is a HOST array of k device
 * pointers, all on the stream's device; out may be in[0]. */
int rf__kc_reduce_sum(void *stream, float *out, const float *const *in, int k, size_t n);
int rf__kc_copy(void *stream, float *dst, const float *src, size_t n);
/* n elements of width bytes (1, 2 or 4) of x set to the low bytes of bits
 * (rf__fill_bits); -EINVAL for another width */
int rf__kc_fill(void *stream, void *x, unsigned width, uint32_t bits, size_t n);

/* Input decoding; in is a device buffer of bytes; element i is of channel
 * (i / m->plane) % m->nch (common/u8norm.h). */
int rf__kc_u8_to_f32(void *stream, float *out, const uint8_t *in, size_t n,
		     const struct rf__u8norm *m);
int rf__kc_u8_to_i32(void *stream, int32_t *out, const uint8_t *in, size_t n);

/* Counter-based random numbers: exactly the algorithm of devices/README.md. */
int rf__kc_rand_uniform(void *stream, float *out, size_t n, uint64_t seed,
		       uint64_t counter, float lo, float hi);
int rf__kc_rand_normal(void *stream, float *out, size_t n, uint64_t seed,
		      uint64_t counter, float mean, float std);

/* The elementwise kernels in bf16 or f16 (dt: RF_BF16 or RF_F16; kernels_cuda_half.cu):
 * values read into f32, computed there without fused multiply-add, rounded to nearest
 * even. -EINVAL for another dt. sum: k (1..63) inputs, a HOST array of device
 * pointers; out may be in[0]. */
int rf__kc_relu_fwd_h(void *stream, int dt, void *y, const void *x, size_t n);
int rf__kc_add_relu_h(void *stream, int dt, void *y, const void *a, const void *b, size_t n);
int rf__kc_relu_bwd_h(void *stream, int dt, void *dx, const void *dy, const void *y, size_t n);
int rf__kc_axpy_h(void *stream, int dt, void *y, float a, const void *x, size_t n);
int rf__kc_scale_h(void *stream, int dt, void *x, float a, size_t n);
int rf__kc_sum_h(void *stream, int dt, void *out, const void *const *in, int k, size_t n);
/* Average pooling (window and stride k, rf__kc_avgpool2d_*'s sums) in any float dtype dt,
 * NCHW or (nhwc) NHWC: out = y from in = x, or (bwd) out = dx from in = dy; x is
 * (n, c, h, w). */
int rf__kc_avgpool2d_h(void *stream, int bwd, int dt, int nhwc, void *out, const void *in, int n,
		       int c, int h, int w, int k);
/* A convolution's bias in any float dtype dt, NCHW or NHWC, of (n, c, hw) tensors:
 * y[., c, .] = (accumulate ? y[., c, .] : 0) + b[c] (grad 0; NHWC by rf__kc_bias_nhwc;
 * 0 fills y for a convolution to add its sums to), or (grad 1, NCHW only: the NHWC
 * gradient is rf__kc_colsum_nhwc, with its workspace; -EINVAL) y[c] = (accumulate ?
 * y[c] : 0) + the sum of b[., c, .] -- y is then db and b is dy -- in f32 by a fixed
 * tree, one rounding. */
int rf__kc_bias4_h(void *stream, int grad, int dt, int nhwc, void *y, const void *b, int n,
		   int c, size_t hw, int accumulate);

/* Batch norm of an NHWC tensor (kernels_cuda_norm.cu): x, y, dy, dx are M = n*h*w rows
 * of C channels in dtype dt (RF_F32, RF_BF16 or RF_F16); gamma, beta, mean, invstd and
 * the running statistics are C f32 values. The formulas of rf__k_bn_fwd_train,
 * rf__k_bn_fwd_eval and rf__k_bn_bwd (cpu/norm.c), relu as theirs (the backward's y:
 * the forward's output, dy masked by y > 0; NULL without ReLU); run_mean and run_var
 * may be NULL. The sums are fixed trees: the same bits every run. ws: a device
 * workspace of at least rf__kc_bn_nhwc_ws(M, C, eval) bytes, used by the queued kernels.
 * -EINVAL (nothing queued) for a bad shape, dtype, eps or a short workspace. */
int rf__kc_bn_nhwc_train(void *stream, int dt, void *y, const void *x, const float *gamma,
			 const float *beta, float *mean, float *invstd, float *run_mean,
			 float *run_var, int64_t M, int C, float eps, float momentum, int relu,
			 void *ws, size_t ws_bytes);
int rf__kc_bn_nhwc_eval(void *stream, int dt, void *y, const void *x, const float *gamma,
			const float *beta, const float *run_mean, const float *run_var, int64_t M,
			int C, float eps, int relu, void *ws, size_t ws_bytes);
int rf__kc_bn_nhwc_bwd(void *stream, int dt, void *dx, float *dgamma, float *dbeta,
		       const void *dy, const void *y, const void *x, const float *mean,
		       const float *invstd, const float *gamma, int64_t M, int C, void *ws,
		       size_t ws_bytes);
/* out[c] = (acc ? out[c] : 0) + the sum over the M rows of x[., c] -- an NHWC
 * convolution's bias gradient, db from dy -- with x and out of dtype dt (f32, bf16 or
 * f16), summed as the batch norm's are (f32 partials of coalesced rows, then double in
 * a fixed order; out[c] added in double too), rounded to f32 and then to dt. ws: rf__kc_colsum_nhwc_ws(M, C) bytes.
 * -EINVAL (nothing queued) for a bad shape or dtype or a short workspace. */
int rf__kc_colsum_nhwc(void *stream, int dt, void *out, const void *x, int64_t M, int C, int acc,
		       void *ws, size_t ws_bytes);
/* y[r, c] = (acc ? y[r, c] : 0) + b[c] over the M rows of C channels of an NHWC tensor
 * of dtype dt (a convolution's bias: rf__kc_bias4_h's NHWC path; its one rounding, a
 * 2-D grid instead of a division per element). -EINVAL for a bad shape or dtype. */
int rf__kc_bias_nhwc(void *stream, int dt, void *y, const void *b, int64_t M, int C, int acc);
/* Rows per partial sum: 512, or more so that there are at most 4096 partials per channel
 * (what the per-channel sums then add); a multiple of 8 (a block's row lanes). */
static inline int64_t rf__kc_bn_nhwc_chunk(int64_t M)
{
	int64_t c = M > 0 ? (M + 4095) / 4096 : 1;

	c = c < 512 ? 512 : c;
	return (c + 7) / 8 * 8;
}
/* The workspace: two partial sums per chunk and channel, and 3 factors per channel
 * (f32); the evaluation (eval) only the factors. 0 for an empty shape. */
static inline size_t rf__kc_bn_nhwc_ws(int64_t M, int C, int eval)
{
	int64_t ch = rf__kc_bn_nhwc_chunk(M), R = M > 0 && !eval ? (M + ch - 1) / ch : 0;

	return M > 0 && C > 0 ? (size_t)(2 * R + 3) * (size_t)C * sizeof(float) : 0;
}

/* The column sum's workspace: a partial sum per chunk (rf__kc_bn_nhwc_chunk) and
 * channel (f32); 0 for an empty shape. */
static inline size_t rf__kc_colsum_nhwc_ws(int64_t M, int C)
{
	int64_t ch = rf__kc_bn_nhwc_chunk(M);

	return M > 0 && C > 0 ? (size_t)((M + ch - 1) / ch) * (size_t)C * sizeof(float) : 0;
}

/* dst = src converted (kernels_cuda_convert.cu): the elements of a tensor of logical
 * shape (ndim, shape) from dtype sdt into ddt (enum rf_tdtype values: f32, bf16 and
 * f16 into one another, rounded to nearest even; an integer dtype only to itself),
 * each side row-major or, with *_nhwc (4-D only), NHWC. -EINVAL for anything else. */
int rf__kc_convert(void *stream, void *dst, int ddt, int dst_nhwc, const void *src, int sdt,
		   int src_nhwc, int ndim, const int64_t *shape);
/* rf__kc_u8_to_f32's values (src: u8, logical row-major order of shape) stored into dst
 * of float dtype ddt (rounded to nearest even), row-major or (dst_nhwc, 4-D) NHWC: a
 * batch decoded straight into the format a model's first layer reads. */
int rf__kc_u8_decode(void *stream, void *dst, int ddt, int dst_nhwc, const uint8_t *src,
		     int ndim, const int64_t *shape, const struct rf__u8norm *m);

#ifdef __cplusplus
}
#endif

#endif /* RINGFLOW_KERNELS_CUDA_H */
