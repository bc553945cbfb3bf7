/* devices/cpu/kernels-impl.h -- what the CPU kernel files share: the contraction
 * guard, the AVX-512 target attribute and the baseline/AVX-512 dispatch, and the
 * helpers one file defines for another. Not installed. */
#ifndef RF_KERNELS_IMPL_H
#define RF_KERNELS_IMPL_H

#include <errno.h>
#include <stddef.h>

#include "rf-config.h"
#include "kernels.h"

/* GCC contracts a*b+c into an FMA under -ffp-contract=fast (its default in GNU C
 * mode) when the target has one; the functions promising bit-identical results with
 * CUDA must not let it. */
#if defined(__GNUC__) && !defined(__clang__)
#define RF__NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define RF__NO_CONTRACT
#endif

/* The copy loops (im2col, col2im) and the direct single-channel convolutions are
 * compiled twice: for the build's baseline ISA and, on x86-64 with GCC or clang, for
 * AVX-512 (chosen at run time when the CPU and OS support it, or never if the
 * environment sets RF_KERNELS_NO_AVX512). Each choice is deterministic: the same
 * inputs give the same bits run to run on one machine. The bodies are always_inline
 * and are instantiated with compile-time kernel and row sizes for LeNet's shapes so
 * that the short inner loops (9 or 26 floats) unroll into straight vector code. */
#define RF__INLINE static inline __attribute__((always_inline))
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RF__X86_DISPATCH 1
#if defined(__clang__)
#define RF__AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#else
#define RF__AVX512 \
	__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=512")))
#endif
int rf__k_use_avx512(void); /* isa.c */
#else
#define RF__X86_DISPATCH 0
#endif

/* Defines name_def (baseline) and name_avx512, and name() that picks one. The body is
 * the always_inline function name_body taking the same arguments. */
#if RF__X86_DISPATCH
#define RF__DISPATCH(name, params, args)                                   \
	static void name##_def params { name##_body args; }                    \
	RF__AVX512 static void name##_avx512 params { name##_body args; }      \
	static void name params                                                \
	{                                                                      \
		if (rf__k_use_avx512())                                              \
			name##_avx512 args;                                    \
		else                                                           \
			name##_def args;                                       \
	}
#else
#define RF__DISPATCH(name, params, args) \
	static void name params { name##_body args; }
#endif


/* A conv2d's geometry as the copy loops take it: input (c, h, w), kernel (kh, kw),
 * output (oh, ow), stride s >= 1, zero padding p (conv.c, conv-sp.c). */
struct rf__conv_geo {
	int c, h, w, kh, kw, oh, ow, s, p;
};
/* The strided or padded copies (conv-sp.c): im2col's (c*kh*kw, ld) matrix of g images,
 * its transpose (g*oh*ow, c*kh*kw), and col2im (dx overwritten); a tap that falls in
 * the padding reads 0 and is dropped on the way back. */
void rf__im2col_sp(float *col, size_t ld, const float *x, struct rf__conv_geo q, int g);
void rf__im2row_sp(float *row, const float *x, struct rf__conv_geo q, int g);
void rf__col2im_sp(float *dx, const float *dcol, size_t ld, struct rf__conv_geo q, int g);
/* Rows [p0, p0 + kc) x columns [j0, j0 + nr) of the im2col matrix of the images at x
 * (the values rf__im2col_sp and conv.c's im2col write there), row r to dst +
 * RF__K_PANEL_NR * r: a panel for rf__k_gemm_gen, the matrix never written whole. */
#define RF__K_PANEL_NR 64
void rf__im2col_panel(float *dst, const float *x, const struct rf__conv_geo *q, int p0, int kc,
		      int j0, int nr);
/* The same for im2row's matrix (g*oh*ow rows, c*kh*kw columns; rf__im2row_sp's
 * values): the filter gradient's op(B). */
void rf__im2row_panel(float *dst, const float *x, const struct rf__conv_geo *q, int p0, int kc,
		      int j0, int nr);

/* gemm arguments as BLAS checks them */
static inline int rf__k_gemm_check(int ta, int tb, int m, int n, int k, const float *a, int lda,
				   const float *b, int ldb, float *c, int ldc)
{
	if (m < 0 || n < 0 || k < 0)
		return -EINVAL;
	if (lda < (ta ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) ||
	    ldb < (tb ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) || ldc < (n > 1 ? n : 1))
		return -EINVAL;
	if ((m && n && !c) || (m && n && k && (!a || !b)))
		return -EINVAL;
	return 0;
}

/* C (m, n) = beta * C, as BLAS does it: beta == 0 writes zeros (NaNs in C ignored),
 * beta == 1 leaves C alone. */
static inline void rf__k_gemm_beta(int m, int n, float beta, float *c, int ldc)
{
	if (beta == 1.0f)
		return;
	for (int i = 0; i < m; i++) {
		float *restrict cr = c + (size_t)i * ldc;
		if (beta == 0.0f)
			for (int j = 0; j < n; j++)
				cr[j] = 0.0f;
		else
			for (int j = 0; j < n; j++)
				cr[j] *= beta;
	}
}

/* conv.c's direct single-channel convolutions hold these many taps and columns */
enum { RF__C1_MAXT = 25, RF__C1_MAXJ = 64 };

#if RF__X86_DISPATCH
/* conv-avx512.c: single-channel 3x3 kernels for 16 < OW <= 32 */
void rf__k_conv1_fwd_3x3_avx512(float *restrict y, const float *restrict x,
				const float *restrict w, const float *restrict b, int n, int o,
				int H, int W, int OH, int OW);
void rf__k_conv1_bwdf_3x3_avx512(float *restrict dw, float *restrict db,
				 const float *restrict dy, const float *restrict x,
				 int accumulate, int n, int o, int H, int W, int OH, int OW,
				 const float *pp, const float *py);
#endif

#endif
