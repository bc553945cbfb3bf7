/* devices/cpu/gemm-avx512.c -- rf__k_gemm_avx512, the AVX-512 sgemm of one stream's
 * thread, spread over idle cores when a CPU device's helpers are free (par.h), with
 * the same bits either way (-ENOTSUP where AVX-512 is absent or disabled). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "kernels-impl.h"
#include "par.h"

/* ---- AVX-512 gemm ----------------------------------------------------------------- */

/* An sgemm for any op(A) and op(B), used by rf__k_gemm wherever the CPU has AVX-512:
 * OpenBLAS 0.3.21 runs its Haswell (AVX2) kernels where OPENBLAS_CORETYPE pins them, at
 * half the FMA width, and where it does not know the CPU (a virtual "Intel Xeon
 * Processor" with AVX-512) its Prescott (SSE3) ones: 73 % of an MLP epoch was
 * sgemm_kernel_PRESCOTT there. One stream's thread runs it; while the other streams
 * leave a core idle, helpers take column panels of a large one (gemm_avx512_par).
 *
 * Blocking: for each KC-deep slice of K, alpha*op(A) is packed in MR-row panels
 * (p-major: the MR values of one k are adjacent), then for each NR-wide panel of op(B)
 -- B read in place (row stride ldb, no copy) where one block of A's rows passes over
 * each panel, else, and B^T always, through KC x NR panels packed once per slice (not
 * once per block of A: B^T was repacked for every 96 rows of A, 85 GF/s against 120-140
 * for B in place) -- whose panel stays in L1 while every A panel of the block passes
 * over it, the micro-kernel computes an MR x NR tile in
 * 24 zmm accumulators: per k, 4 loads of B, 6 broadcasts of A, 24 FMAs. A column edge
 * uses as many zmm columns as it needs, the last with masked loads and stores
 * (masked-off lanes are neither read nor written); row edges store only valid rows.
 * Each C element is sum_p in ascending p, FMA by FMA, one KC slice at a time, added to C:
 * the result is deterministic. */
enum { RF__GM_MR = 6, RF__GM_NR = 64, RF__GM_KC = 128, RF__GM_APACK = 96 * 128 };
_Static_assert(RF__GM_NR == RF__K_PANEL_NR, "a made B panel (rf__k_bgen) is NR wide");

#if RF__X86_DISPATCH
#include <immintrin.h>

/* C[0:mr, 0:nr] = (acc ? C : 0) + ap (kc x MR panel) * B[0:kc, 0:nr], nr <= 16*NV: NV
 * zmm columns per row (a compile-time constant in every instance), the last one
 * masked unless full. */
RF__AVX512 RF__INLINE void gm_ukr_body(int kc, const float *restrict ap,
				       const float *restrict b, size_t ldb, float *restrict c,
				       size_t ldc, int mr, int nr, int acc, const int NV,
				       const int full)
{
	__mmask16 mk[4];
	__m512 r[RF__GM_MR][4], bv[4];

#pragma GCC unroll 4
	for (int v = 0; v < NV; v++) {
		int left = nr - 16 * v;
		mk[v] = full || left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
	}
#pragma GCC unroll 6
	for (int i = 0; i < RF__GM_MR; i++)
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
			r[i][v] = _mm512_setzero_ps();
	for (int p = 0; p < kc; p++, ap += RF__GM_MR, b += ldb) {
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
			bv[v] = full || v < NV - 1 ? _mm512_loadu_ps(b + 16 * v)
						   : _mm512_maskz_loadu_ps(mk[v], b + 16 * v);
#pragma GCC unroll 6
		for (int i = 0; i < RF__GM_MR; i++) {
			const __m512 a = _mm512_set1_ps(ap[i]);
#pragma GCC unroll 4
			for (int v = 0; v < NV; v++)
				r[i][v] = _mm512_fmadd_ps(a, bv[v], r[i][v]);
		}
	}
	for (int i = 0; i < mr; i++) {
		float *cr = c + (size_t)i * ldc;
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++) {
			__m512 x = r[i][v];
			if (full || v < NV - 1) {
				if (acc)
					x = _mm512_add_ps(_mm512_loadu_ps(cr + 16 * v), x);
				_mm512_storeu_ps(cr + 16 * v, x);
			} else {
				if (acc)
					x = _mm512_add_ps(_mm512_maskz_loadu_ps(mk[v], cr + 16 * v), x);
				_mm512_mask_storeu_ps(cr + 16 * v, mk[v], x);
			}
		}
	}
}

RF__AVX512 static void gm_ukr_full(int kc, const float *ap, const float *b, size_t ldb,
				   float *c, size_t ldc, int mr, int acc)
{
	gm_ukr_body(kc, ap, b, ldb, c, ldc, mr, RF__GM_NR, acc, 4, 1);
}

/* a column edge of nr < NR: as many zmm columns as it needs */
RF__AVX512 static void gm_ukr_edge(int kc, const float *ap, const float *b, size_t ldb,
				   float *c, size_t ldc, int mr, int nr, int acc)
{
	switch ((nr + 15) / 16) {
	case 1:
		gm_ukr_body(kc, ap, b, ldb, c, ldc, mr, nr, acc, 1, 0);
		break;
	case 2:
		gm_ukr_body(kc, ap, b, ldb, c, ldc, mr, nr, acc, 2, 0);
		break;
	case 3:
		gm_ukr_body(kc, ap, b, ldb, c, ldc, mr, nr, acc, 3, 0);
		break;
	default:
		gm_ukr_body(kc, ap, b, ldb, c, ldc, mr, nr, acc, 4, 0);
		break;
	}
}

/* ap <- alpha * op(A)[i0:i0+mc, p0:p0+kc] in MR-row panels, rows past mc zero */
static void gm_pack_a(float *restrict ap, int ta, const float *restrict a, size_t lda, int i0,
		      int p0, int mc, int kc, float alpha)
{
	for (int q = 0; q < mc; q += RF__GM_MR, ap += (size_t)kc * RF__GM_MR)
		for (int i = 0; i < RF__GM_MR; i++) {
			float *restrict d = ap + i;
			if (q + i >= mc) {
				for (int p = 0; p < kc; p++)
					d[p * RF__GM_MR] = 0.0f;
			} else if (ta) {
				const float *s = a + (size_t)p0 * lda + i0 + q + i;
				for (int p = 0; p < kc; p++)
					d[p * RF__GM_MR] = alpha * s[(size_t)p * lda];
			} else {
				const float *s = a + (size_t)(i0 + q + i) * lda + p0;
				for (int p = 0; p < kc; p++)
					d[p * RF__GM_MR] = alpha * s[p];
			}
		}
}

/* bp <- op(B) = B^T's rows [p0, p0 + kc), columns [j0, j1), as the NR-wide panels of
 * those columns one after another (panel t at t * kc * NR, kc x NR, row stride NR):
 * B (n x k) read row by row, kc contiguous floats each. */
static void gm_pack_bt(float *restrict bp, const float *restrict b, size_t ldb, int p0, int kc,
		       int j0, int j1)
{
	/* a panel's rows written in order (each source row's line stays in L1 for the
	 * next 15 p) */
	for (int j = j0; j < j1; j += RF__GM_NR) {
		const int nr = j1 - j < RF__GM_NR ? j1 - j : RF__GM_NR;
		const float *src = b + (size_t)j * ldb + p0;
		float *restrict d = bp + (size_t)((j - j0) / RF__GM_NR) * kc * RF__GM_NR;
		for (int p = 0; p < kc; p++, d += RF__GM_NR)
			for (int jj = 0; jj < nr; jj++)
				d[jj] = src[(size_t)jj * ldb + p];
	}
}

/* bp <- op(B) = B's rows [p0, p0 + kc), columns [j0, j1), as gm_pack_bt lays them out */
static void gm_pack_bn(float *restrict bp, const float *restrict b, size_t ldb, int p0, int kc,
		       int j0, int j1)
{
	for (int j = j0; j < j1; j += RF__GM_NR) {
		const int nr = j1 - j < RF__GM_NR ? j1 - j : RF__GM_NR;
		float *restrict d = bp + (size_t)((j - j0) / RF__GM_NR) * kc * RF__GM_NR;
		for (int p = 0; p < kc; p++, d += RF__GM_NR) {
			const float *src = b + (size_t)(p0 + p) * ldb + j;
			for (int jj = 0; jj < nr; jj++)
				d[jj] = src[jj];
		}
	}
}

/* C = alpha * op(A) * op(B) + beta * C over C's columns [j0, j1) (j0 a multiple of NR),
 * for alpha != 0, k > 0 (rf__k_gemm's contract): beta applied to those columns, then
 * for each K slice and each block of A's rows, the block's tiles. alpha * op(A) comes
 * packed whole in apk (slice p0 at p0 * mpad floats, its rows' MR panels in order: the
 * block of rows i0 at i0 * kc), or, apk NULL, is packed block by block into ap. Every
 * C element is the same sequence of FMAs and adds whichever columns a call covers and
 * wherever A was packed: a GEMM split by columns over threads has the bits of one
 * call. */
struct gm_args {
	int ta, tb, m, n, k, lda, ldb, ldc, mpad;
	float alpha, beta;
	const float *a, *b, *apk;
	float *c;
	int per; /* gemm_avx512_par: columns a chunk */
	const struct rf__k_bgen *bg; /* B made panel by panel (b unused), or NULL */
};

/* dst <- op(B)'s rows [p0, p0 + kc), columns [j0, j1), as NR-wide panels (gm_pack_bt's
 * layout): B^T's, B's from memory, or made by bg */
static void gm_pack_b(const struct gm_args *g, float *dst, int p0, int kc, int j0, int j1)
{
	if (!g->bg)
		(g->tb ? gm_pack_bt : gm_pack_bn)(dst, g->b, (size_t)g->ldb, p0, kc, j0, j1);
	else
		for (int j = j0; j < j1; j += RF__GM_NR)
			g->bg->panel(g->bg, dst + (size_t)((j - j0) / RF__GM_NR) * kc * RF__GM_NR,
				     p0, kc, j, j1 - j < RF__GM_NR ? j1 - j : RF__GM_NR);
}

/* C's columns [j0, j1) (j0 a multiple of NR) for the K slice at p0 and the A block of
 * rows [i0, i0 + mc), packed at ap: each MR x NR tile of them, C += (or =) the slice's
 * products. op(B) comes from bt, the slice's packed panels of these columns
 * (gm_pack_b), or, bt NULL, from B in place -- or, where B cannot be read in place
 * (B^T, a made B), from each panel packed here as it comes. The micro-kernel gets the
 * same values every way, so the same bits. */
static void gm_block(const struct gm_args *g, const float *ap, int i0, int mc, int p0, int kc,
		     int acc, const float *bt, int j0, int j1)
{
	const int one_by_one = !bt && (g->tb || g->bg);
	float one[one_by_one ? RF__GM_KC * RF__GM_NR : 1] __attribute__((aligned(64)));

	for (int j = j0; j < j1; j += RF__GM_NR) {
		const int nr = j1 - j < RF__GM_NR ? j1 - j : RF__GM_NR;
		const float *bp = one;
		size_t lb = RF__GM_NR;
		if (bt)
			bp = bt + (size_t)((j - j0) / RF__GM_NR) * kc * RF__GM_NR;
		else if (one_by_one)
			gm_pack_b(g, one, p0, kc, j, j + nr);
		else /* B in place */
			bp = g->b + (size_t)p0 * g->ldb + j, lb = (size_t)g->ldb;
		for (int q = 0; q < mc; q += RF__GM_MR) {
			const int mr = mc - q < RF__GM_MR ? mc - q : RF__GM_MR;
			float *cp = g->c + (size_t)(i0 + q) * g->ldc + j;
			if (nr == RF__GM_NR)
				gm_ukr_full(kc, ap + (size_t)q * kc, bp, lb, cp, (size_t)g->ldc, mr,
					    acc);
			else
				gm_ukr_edge(kc, ap + (size_t)q * kc, bp, lb, cp, (size_t)g->ldc, mr,
					    nr, acc);
		}
	}
}

static float *gm_buffer(int which, size_t floats);

static void gm_cols(const struct gm_args *g, int j0, int j1, float *ap)
{
	float *bt = NULL;

	/* The slice's panels of these columns packed once, in this thread's second buffer
	 * (without one, gm_block packs B^T's panels as they come and reads B in place):
	 * B^T always; B too when K is at least a slice deep and more than one block of
	 * A's rows passes over each panel -- those blocks re-read it, and its rows at B's
	 * stride (a multiple of 1 KiB for 1024, 2304, 4608 columns) fall in a few of L1's
	 * sets: packed, 112 -> 128 GF/s at 512 x 1024 x 4608, 97 -> 120 at 4608 x 1024 x
	 * 512 (A^T); where one block reads each panel once, copying only costs (132 ->
	 * 118 at 64 x 1568 x 576). */
	const int packb = g->tb || g->bg ||
			  (g->k >= RF__GM_KC && g->m > RF__GM_APACK / RF__GM_KC);
	if (packb)
		bt = gm_buffer(1, (size_t)(j1 - j0 + RF__GM_NR - 1) / RF__GM_NR * RF__GM_KC *
				  RF__GM_NR);
	if (g->beta != 0.0f) /* beta == 0: the first K slice overwrites C instead */
		rf__k_gemm_beta(g->m, j1 - j0, g->beta, g->c + j0, g->ldc);
	for (int p0 = 0; p0 < g->k; p0 += RF__GM_KC) {
		const int kc = g->k - p0 < RF__GM_KC ? g->k - p0 : RF__GM_KC;
		if (bt)
			gm_pack_b(g, bt, p0, kc, j0, j1);
		/* rows of A per block: as many MR panels as RF__GM_APACK floats hold (the
		 * block stays in L1/L2 while B's panels pass over it) */
		const int mcb = RF__GM_APACK / kc / RF__GM_MR * RF__GM_MR;
		const int acc = p0 > 0 || g->beta != 0.0f;
		for (int i0 = 0; i0 < g->m; i0 += mcb) {
			const int mc = g->m - i0 < mcb ? g->m - i0 : mcb;
			const float *blk = g->apk ? g->apk + (size_t)p0 * g->mpad + (size_t)i0 * kc
						  : ap;
			if (!g->apk)
				gm_pack_a(ap, g->ta, g->a, (size_t)g->lda, i0, p0, mc, kc, g->alpha);
			gm_block(g, blk, i0, mc, p0, kc, acc, bt, j0, j1);
		}
	}
}

/* ---- the same GEMM over idle cores (par.h) ------------------------------------------
 * alpha * op(A) is packed whole first into a buffer the calling thread keeps; then
 * chunks of NR-wide column panels go to rf__par_for, each a gm_cols call. */
static void gm_par_chunk(void *arg, unsigned i)
{
	const struct gm_args *g = arg;
	const int j0 = (int)i * g->per, j1 = g->n - j0 < g->per ? g->n : j0 + g->per;

	gm_cols(g, j0, j1, NULL);
}

static pthread_key_t gm_key[2];
static pthread_once_t gm_once = PTHREAD_ONCE_INIT;
static int gm_key_ok;

static void gm_key_make(void)
{
	gm_key_ok = pthread_key_create(&gm_key[0], free) == 0 &&
		    pthread_key_create(&gm_key[1], free) == 0;
}

/* This thread's packing buffer `which` (0: the whole of A, gemm_avx512_par; 1: a slice
 * of B^T, gm_cols), at least `floats` long (kept for its next GEMM), or NULL. */
static float *gm_buffer(int which, size_t floats)
{
	struct { size_t cap; float f[]; } *h;

	pthread_once(&gm_once, gm_key_make);
	if (!gm_key_ok)
		return NULL;
	h = pthread_getspecific(gm_key[which]);
	if (h && h->cap >= floats)
		return h->f;
	size_t cap = floats + floats / 4;
	void *p = NULL;
	if (posix_memalign(&p, 64, sizeof(*h) + cap * sizeof(float)))
		return NULL;
	if (pthread_setspecific(gm_key[which], p)) {
		free(p);
		return NULL;
	}
	free(h);
	h = p;
	h->cap = cap;
	return h->f;
}

/* Where the GEMM pays for helpers: 2mnk at least this many flops (~50 us on one core),
 * and two NR panels of columns or more. */
#define RF__GM_PAR_FLOPS (8.0 * 1024 * 1024)

/* 1 where g's GEMM ran over idle cores, 0 where it is left to one thread */
static int gemm_avx512_par(struct gm_args *g)
{
	const int panels = (g->n + RF__GM_NR - 1) / RF__GM_NR;
	float *apk;

	if (2.0 * g->m * g->n * g->k < RF__GM_PAR_FLOPS || panels < 2 || !rf__par_open())
		return 0;
	g->mpad = (g->m + RF__GM_MR - 1) / RF__GM_MR * RF__GM_MR;
	if (!(apk = gm_buffer(0, (size_t)g->mpad * g->k)))
		return 0;
	for (int p0 = 0; p0 < g->k; p0 += RF__GM_KC)
		gm_pack_a(apk + (size_t)p0 * g->mpad, g->ta, g->a, (size_t)g->lda, 0, p0, g->m,
			  g->k - p0 < RF__GM_KC ? g->k - p0 : RF__GM_KC, g->alpha);
	g->apk = apk;
	/* chunks: about four a thread that may take part, whole panels each */
	unsigned want = 4 * (rf__par_helpers() + 1);
	int per_panels = (panels + (int)want - 1) / (int)want;
	g->per = per_panels * RF__GM_NR;
	rf__par_for((unsigned)((panels + per_panels - 1) / per_panels), gm_par_chunk, g);
	return 1;
}

/* The GEMM g describes (its arguments checked): -ENOTSUP without AVX-512, else 0 */
static int gm_run(struct gm_args *g)
{
	if (!rf__k_use_avx512())
		return -ENOTSUP;
	if (g->m == 0 || g->n == 0)
		return 0;
	if (g->alpha == 0.0f || g->k == 0) {
		rf__k_gemm_beta(g->m, g->n, g->beta, g->c, g->ldc);
		return 0;
	}
	if (!gemm_avx512_par(g)) {
		float ap[RF__GM_APACK] __attribute__((aligned(64)));
		gm_cols(g, 0, g->n, ap);
	}
	return 0;
}
#endif

int rf__k_gemm_avx512(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
		     const float *b, int ldb, float beta, float *c, int ldc)
{
	int rc = rf__k_gemm_check(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
	if (rc)
		return rc;
#if RF__X86_DISPATCH
	struct gm_args g = { ta, tb, m, n, k, lda, ldb, ldc, 0, alpha, beta, a, b, NULL, c, 0,
			     NULL };
	return gm_run(&g);
#else
	return -ENOTSUP;
#endif
}

int rf__k_gemm_avx512_gen(int m, int n, int k, const float *a, int lda,
			  const struct rf__k_bgen *bg, float beta, float *c, int ldc)
{
	if (m < 0 || n < 0 || k < 0 || lda < (k > 1 ? k : 1) || ldc < (n > 1 ? n : 1) ||
	    (m && n && !c) || (m && n && k && (!a || !bg || !bg->panel)))
		return -EINVAL;
	/* B made by bg is always packed (gm_cols): the micro-kernel sees what it would
	 * read from memory, so the bits of rf__k_gemm_avx512 on the written-out B */
#if RF__X86_DISPATCH
	struct gm_args g = { 0, 0, m, n, k, lda, n, ldc, 0, 1.0f, beta, a, NULL, NULL, c, 0, bg };
	return gm_run(&g);
#else
	return -ENOTSUP;
#endif
}
