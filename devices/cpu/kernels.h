/* devices/cpu/kernels.h -- the CPU backend's compute kernels: plain functions on raw
 * pointers, called by its worker streams from engine ops (cpu-ops.c). Private to the
 * CPU backend (and its tests, which link the backend's internal library). Nothing
 * here allocates or keeps a pointer; scratch memory comes from the caller
 * (*_workspace_size). Layouts, ownership, in-place rules and the random generator:
 * devices/README.md.
 */
#ifndef RF_CPU_KERNELS_H
#define RF_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "../kernel-args.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- matrix multiply ------------------------------------------------------ */

/* C (m, n) = alpha * op(A) * op(B) + beta * C, row-major.
 * op(A) is (m, k): A is (m, k) with row stride lda >= k, or, when trans_a, A is
 * (k, m) with lda >= m. op(B) is (k, n): B is (k, n), ldb >= n, or, when trans_b,
 * (n, k), ldb >= k. C is (m, n), ldc >= n. beta == 0 ignores C's old contents
 * (NaNs included), as BLAS does. Uses rf__k_gemm_avx512 where it applies (see
 * there), else cblas_sgemm when built with OpenBLAS, otherwise rf__k_gemm_portable.
 * Returns 0 or -EINVAL. */
int rf__k_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha,
	      const float *a, int lda, const float *b, int ldb,
	      float beta, float *c, int ldc);
/* Who multiplies a product of more than one row in rf__k_gemm now: "ringflow's
 * AVX-512 GEMM", "OpenBLAS" or "the portable GEMM" (one row, a GEMV, goes to
 * OpenBLAS's sgemv where it is there) -- for the lines that report GEMM figures. */
const char *rf__k_gemm_who(void);
/* The blocked plain-C gemm used when OpenBLAS is absent (same contract); always
 * built, so it can be tested and compared. Needs ~80 KiB of stack. */
int rf__k_gemm_portable(int trans_a, int trans_b, int m, int n, int k, float alpha,
		       const float *a, int lda, const float *b, int ldb,
		       float beta, float *c, int ldc);
/* The AVX-512 gemm rf__k_gemm uses wherever the CPU has it (same contract; ~80 KiB of
 * stack): on the calling thread, joined by the CPU devices' idle helpers for a large
 * product (par.h), with the same bits either way. -ENOTSUP when the CPU lacks AVX-512
 * or when RF_KERNELS_NO_AVX512 is set; deterministic otherwise. */
int rf__k_gemm_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha,
		     const float *a, int lda, const float *b, int ldb,
		     float beta, float *c, int ldc);
/* op(B) of a GEMM made panel by panel where the GEMM needs it, never stored whole (a
 * convolution's im2col matrix): panel() writes B's rows [p0, p0 + kc) x columns
 * [j0, j0 + nr), nr <= 64, to dst, row r at dst + 64 * r. Called from the threads
 * the GEMM runs on, each for its own columns. */
struct rf__k_bgen {
	void (*panel)(const struct rf__k_bgen *g, float *dst, int p0, int kc, int j0, int nr);
	const void *ctx;
};
/* C (m, n) = A (m, k, row-major, lda) * B (k, n: made by bg) + beta * C, where rf__k_gemm
 * would run ringflow's AVX-512 GEMM on this shape -- and then with the bits it gives
 * with B in memory; -ENOTSUP elsewhere (the caller writes B and calls rf__k_gemm). */
int rf__k_gemm_gen(int m, int n, int k, const float *a, int lda, const struct rf__k_bgen *bg,
		   float beta, float *c, int ldc);
int rf__k_gemm_avx512_gen(int m, int n, int k, const float *a, int lda,
			  const struct rf__k_bgen *bg, float beta, float *c, int ldc);
/* OpenBLAS's thread count (process-wide). set: applied when OpenBLAS opens (its first
 * gemm) if it is not open yet; get opens it. -ENOTSUP in a build without OpenBLAS (get:
 * also where it cannot be loaded). */
int rf__k_blas_set_threads(int n);
int rf__k_blas_get_threads(void);
/* OpenBLAS's core name ("?" where it gives none), or NULL where there is no OpenBLAS
 * (built without it, or it could not be opened). */
const char *rf__k_blas_core(void);

/* ---- linear layer pieces ------------------------------------------------- */

/* y (rows, cols) += b (cols), broadcast over rows. */
void rf__k_bias_add(float *y, const float *b, int rows, int cols);
/* db (cols) = sum_r dy[r, :] (accumulate == 0) or db += sum_r dy[r, :] (accumulate != 0).
 * dy is (rows, cols). */
void rf__k_bias_grad(float *db, const float *dy, int rows, int cols, int accumulate);

/* y (n) = max(x, 0). In place allowed (y == x). */
void rf__k_relu_fwd(float *y, const float *x, size_t n);
/* y = max(a + b, 0); y may be a or b. The bits of rf__k_reduce_sum of {a, b} then
 * rf__k_relu_fwd. */
void rf__k_add_relu_fwd(float *y, const float *a, const float *b, size_t n);
/* dx (n) = dy * (y > 0), where y is the forward OUTPUT. In place allowed (dx == dy). */
void rf__k_relu_bwd(float *dx, const float *dy, const float *y, size_t n);

/* ---- loss ------------------------------------------------------------------- */

/* Softmax cross-entropy, forward and backward in one pass.
 * logits (rows, cols), labels (rows) int32 in [0, cols).
 * dlogits (rows, cols), may be NULL (forward only) or == logits (in place):
 *   dlogits[r, j] = (softmax(logits[r])[j] - (j == labels[r])) / rows.
 * *loss_sum = sum_r (logsumexp(logits[r]) - logits[r, labels[r]])  (the SUM; the mean
 *   loss torch reports is *loss_sum / rows). May be NULL.
 * *correct = #rows whose argmax (first maximum) equals the label. May be NULL.
 * Returns -EINVAL, writing nothing, if a label is out of range. */
int rf__k_softmax_xent(float *dlogits, float *loss_sum, int32_t *correct,
		      const float *logits, const int32_t *labels, int rows, int cols);
/* Forward only (evaluation): rf__k_softmax_xent with dlogits == NULL. */
int rf__k_softmax_xent_eval(float *loss_sum, int32_t *correct,
			   const float *logits, const int32_t *labels, int rows, int cols);

/* ---- convolution ----------------------------------------------------------- */

/* Workspace in BYTES that lets rf__k_conv2d_bwd_data/_bwd_filter run at full speed
 * (and rf__k_conv2d_fwd nearly so: its own fast size, rf__k_conv2d_fwd_workspace_size,
 * rounds its group up to a power of two). The kernels process images in groups whose im2col
 * matrix (c*kh*kw, g*oh*ow) and output matrix (o, g*oh*ow) fit in the workspace; a
 * smaller workspace still works down to one image:
 * (c*kh*kw + o)*oh*ow*sizeof(float) bytes (rf__k_conv2d_workspace_min). Returns 0 for
 * an invalid shape. The workspace needs float alignment only. */
size_t rf__k_conv2d_workspace_size(const struct rf__conv2d *s);
size_t rf__k_conv2d_workspace_min(const struct rf__conv2d *s);
/* The forward's fast workspace: its groups are rf__k_conv2d_group's. */
size_t rf__k_conv2d_fwd_workspace_size(const struct rf__conv2d *s);
/* The images rf__k_conv2d_fwd computes in one GEMM with the workspace of
 * rf__k_conv2d_fwd_workspace_size: a power of two (the columns ~RF__CONV_TARGET_COLS),
 * at most n; 1 where the forward goes image by image (the direct kernels). A batch
 * split at a multiple of it gives every part the groups of the whole batch, so the
 * same GEMM calls: the same bits with a GEMM whose rounding depends on the width
 * (OpenBLAS's Haswell sgemm does). -EINVAL for a bad shape. */
int rf__k_conv2d_group(const struct rf__conv2d *s);

/* y (n, o, oh, ow) = conv(x (n, c, h, w), w (o, c, kh, kw)) + b (o).
 * b may be NULL (no bias). Returns -EINVAL on a bad shape or small workspace. */
int rf__k_conv2d_fwd(const struct rf__conv2d *s, float *y, const float *x,
		    const float *w, const float *b, void *ws, size_t ws_bytes);
/* dx (n, c, h, w) = dL/dx given dy (n, o, oh, ow) and w (o, c, kh, kw).
 * dx is overwritten. */
int rf__k_conv2d_bwd_data(const struct rf__conv2d *s, float *dx, const float *dy,
			 const float *w, void *ws, size_t ws_bytes);
/* dw (o, c, kh, kw) = dL/dw and db (o) = dL/db given dy (n, o, oh, ow) and the
 * forward input x (n, c, h, w). db may be NULL. accumulate == 0 overwrites dw and
 * db; != 0 adds to them. */
int rf__k_conv2d_bwd_filter(const struct rf__conv2d *s, float *dw, float *db,
			   const float *dy, const float *x, int accumulate,
			   void *ws, size_t ws_bytes);

/* rf__k_conv2d_bwd_filter with dy = avgpool2_bwd(dp) * (y > 0) computed on the fly (a
 * conv -> relu -> avgpool2 block: dp (n, o, oh/2, ow/2) the pooled gradient, y (n, o, oh,
 * ow) the ReLU output), without materialising dy: the same bits as
 * rf__k_avgpool2_relu_bwd then rf__k_conv2d_bwd_filter. Single-channel inputs only
 * (c == 1, kh*kw <= 25, ow <= 64; -EINVAL otherwise); needs no workspace. */
int rf__k_conv2d_bwd_filter_pool_relu(const struct rf__conv2d *s, float *dw, float *db,
				     const float *dp, const float *y, const float *x,
				     int accumulate);

/* ---- pooling ------------------------------------------------------------------ */

/* y (n, c, h/k, w/k) = mean over each kxk window of x (n, c, h, w) (floor).
 * Sums the window row by row, then multiplies by 1/(k*k). */
void rf__k_avgpool2d_fwd(float *y, const float *x, int n, int c, int h, int w, int k);
/* dx (n, c, h, w) = dy (n, c, h/k, w/k)[window] / (k*k); uncovered cells get 0.
 * dx is overwritten. */
void rf__k_avgpool2d_bwd(float *dx, const float *dy, int n, int c, int h, int w, int k);

/* Fused ReLU and 2x2 average pooling (LeNet's conv -> relu -> avgpool2 block), CPU only.
 * Forward: y (n, c, h, w) = max(y, 0) in place (every element, trailing rows/columns
 * included) and p (n, c, h/2, w/2) = avgpool2(y): the same bits as rf__k_relu_fwd then
 * rf__k_avgpool2d_fwd with k = 2, in one pass over y. */
void rf__k_relu_avgpool2_fwd(float *p, float *y, int n, int c, int h, int w);
/* Backward: dx (n, c, h, w) = avgpool2_bwd(dy (n, c, h/2, w/2)) * (y > 0), y the ReLU
 * output: the same bits as rf__k_avgpool2d_bwd with k = 2 then rf__k_relu_bwd (dx in
 * place), in one pass. dx is overwritten. */
void rf__k_avgpool2_relu_bwd(float *dx, const float *dy, const float *y, int n, int c, int h,
			    int w);

/* Max pooling, k x k windows at stride st (no padding, floor): y (n, c, oh, ow) with
 * oh = (h - k)/st + 1; each output is its window's first maximum (row-major order; a
 * NaN wins, as PyTorch's). Backward: dx (n, c, h, w) = 0, then dy added at each
 * window's maximum (found again from the forward input x). */
void rf__k_maxpool2d_fwd(float *y, const float *x, int n, int c, int h, int w, int k, int st);
void rf__k_maxpool2d_bwd(float *dx, const float *dy, const float *x, int n, int c, int h, int w,
			int k, int st);
/* Global average pooling over planes of hw values: y (planes) = mean of each plane;
 * backward dx (planes, hw) = dy / hw broadcast. */
void rf__k_gavgpool_fwd(float *y, const float *x, size_t planes, int hw);
void rf__k_gavgpool_bwd(float *dx, const float *dy, size_t planes, int hw);

/* ---- batch normalisation ------------------------------------------------------ */

/* Training: mean and biased variance over the n*hw values of each channel (needs
 * n*hw >= 2); y = (x - mean) * invstd * gamma + beta; mean (c) and invstd (c) =
 * 1/sqrt(var + eps) are kept for the backward pass; run_mean and run_var (c, both
 * NULL: not kept) move by momentum towards the batch mean and the UNBIASED variance. */
int rf__k_bn_fwd_train(const struct rf__bn *s, float *y, float *mean, float *invstd,
		      float *run_mean, float *run_var, const float *x, const float *gamma,
		      const float *beta);
/* Evaluation: y = (x - run_mean) / sqrt(run_var + eps) * gamma + beta. */
int rf__k_bn_fwd_eval(const struct rf__bn *s, float *y, const float *x, const float *gamma,
		     const float *beta, const float *run_mean, const float *run_var);
/* Backward of the training forward: dgamma (c), dbeta (c) overwritten; dx (n, c, hw)
 * from dy, the forward input x and the kept mean and invstd (dx aliases neither).
 * y (the fused forward's output, s->relu) or NULL: dy is taken as dy * (y > 0), masked a
 * plane at a time into t (hw floats). */
int rf__k_bn_bwd(const struct rf__bn *s, float *dx, float *dgamma, float *dbeta,
		const float *dy, const float *x, const float *mean, const float *invstd,
		const float *gamma, const float *y, float *t);

/* ---- optimiser and vector helpers ------------------------------------------ */

/* w (n) -= lr * (g + weight_decay * w). Without weight decay the product is exact and
 * only the difference rounds, as in PyTorch's fused update; with it, d = g + wd*w and
 * w - lr*d round once each, as torch.optim.SGD's two add(alpha) calls. */
void rf__k_sgd(float *w, const float *g, size_t n, float lr, float weight_decay);
/* PyTorch SGD with momentum (dampening 0), rounded as torch.optim.SGD rounds on the
 * CPU (each `add` with alpha one rounding, `mul_` one):
 *   d = g + weight_decay * w;  v = round(momentum * v) + d;
 *   w -= lr * v, or with nesterov w -= lr * (d + momentum * v).
 * v (n) is the momentum buffer (start it at 0: the first step's v is then d, as
 * PyTorch's clone of d). */
void rf__k_sgd_momentum(float *w, float *v, const float *g, size_t n, float lr,
		       float momentum, float weight_decay, int nesterov);
/* AdamW's step `step` (1-based) as torch.optim.AdamW (PyTorch 1.13, CPU, amsgrad off),
 * rounded op by op as its single-tensor code (to 1 ulp: train-sgd-ref):
 *   w *= 1 - lr*wd;  m = m*b1 + (1-b1)*g;  v = v*b2 + (1-b2)*g*g;
 *   w -= lr/(1-b1^step) * m / (sqrt(v)/sqrt(1-b2^step) + eps).
 * The scalars are computed in double and rounded to float, as torch's are
 * (struct rf_adamw_params: ops.h). */
void rf__k_adamw(float *w, float *m, float *v, const float *g, size_t n,
		const struct rf_adamw_params *p);

/* y (n) += a * x (n). */
void rf__k_axpy(float *y, float a, const float *x, size_t n);
/* x (n) *= a. */
void rf__k_scale(float *x, float a, size_t n);
/* out (n) = in[0] + in[1] + ... + in[k-1], added left to right (k >= 1; k == 0 zeroes
 * out). out may be in[0] (in place); it must not be any other in[j]. */
void rf__k_reduce_sum(float *out, const float *const *in, int k, size_t n);
/* dst (n) = src (n). */
void rf__k_copy(float *dst, const float *src, size_t n);
/* x (n) = v. */
void rf__k_fill(float *x, float v, size_t n);

/* ---- input decoding ------------------------------------------------------------ */

/* out (n) = ((float)in * scale - mean) / std, evaluated in float in exactly that
 * order without fused multiply-add (CPU and CUDA give identical bits).
 * Typically scale = 1/255.f, mean = 0.2860, std = 0.3530 for Fashion-MNIST. */
void rf__k_u8_to_f32(float *out, const uint8_t *in, size_t n, float scale, float mean,
		    float std);
/* rf__k_u8_to_f32 with a mean and std per channel: element i of channel
 * (i / m->plane) % m->nch (common/u8norm.h). */
struct rf__u8norm;
void rf__k_u8_norm(float *out, const uint8_t *in, size_t n, const struct rf__u8norm *m);
/* out (n) = (int32_t)in. */
void rf__k_u8_to_i32(int32_t *out, const uint8_t *in, size_t n);

/* ---- counter-based random numbers ------------------------------------------- */

/* Philox4x32-10, one block per output element: element i depends only on
 * (seed, counter + i), so n values at counter c equal n1 at c and n - n1 at c + n1.
 * The caller owns the counter and advances it by n after each call. Uniform values
 * are bit-identical on CPU and CUDA, normal ones agree to about 1 float ulp.
 * The exact algorithm: devices/README.md, "Random numbers". */
void rf__k_rand_uniform(float *out, size_t n, uint64_t seed, uint64_t counter,
		       float lo, float hi);
void rf__k_rand_normal(float *out, size_t n, uint64_t seed, uint64_t counter,
		      float mean, float std);
/* One Philox4x32-10 block: out[4] = philox(ctr[4], key[2]). (For tests and for
 * callers that need raw bits.) */
void rf__k_philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]);

#ifdef __cplusplus
}
#endif

#endif /* RF_CPU_KERNELS_H */
