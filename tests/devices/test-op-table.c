/* test-op-table -- the backend table's conformance, for every registered backend.
 *
 * Each op of ops.h (bar copies and host ops, tested elsewhere) is run on every device
 * present, in each float dtype (f32, bf16, f16) and layout (row-major, NHWC for its
 * 4-D tensors) that its backend claims (rf_device_supports), on small random
 * tensors, and compared with the CPU backend in f32 row-major run on the same values
 * (the inputs rounded to the dtype first): on the CPU the reference path must give the
 * reference's bits rounded to the dtype, on another backend the float rounding of its
 * kernels. What a backend does not claim must be refused, by rf_device_kind_supports
 * and for a device at push, with -ENOTSUP and a message that names the op, the dtype
 * and the layout. A backend without a device here (CUDA on a machine without a GPU)
 * still has its claims and refusals checked through its table. A case that fails is
 * named and the run goes on to the next, so one run (one call on a lent GPU) names
 * every failing op, dtype and layout. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "engine.h"
#include "device.h"
#include "tensor.h"
#include "log.h"
#include "ops.h"
#include "backend-impl.h"
#include "../test-util.h"

/* a tensor's kind and its values; K_F_FIXED, K_FP_POS: f32 row-major whatever is tested
 * (batch norm's per-channel operands, which a model keeps f32: the probe asks so) */
enum { K_F, K_F_POS, K_I32, K_U8, K_F_FIXED, K_FP_POS };

#define MAXT 9

struct tspec {
	int kind;                /* K_*: its kind and values */
	int out;                 /* written (compared) */
	int ndim;
	int64_t shape[4];
	int hi;                  /* K_I32: values in [0, hi) */
};

struct ocase {
	const char *op;          /* its name in rf_device_supports */
	int nt;
	struct tspec t[MAXT];
	int (*push)(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g);
	double rtol;             /* another backend's float rounding against the CPU's */
};

#define T4(k, o, a, b, c, d) { k, o, 4, { a, b, c, d }, 0 }
#define T2(k, o, a, b) { k, o, 2, { a, b, 1, 1 }, 0 }
#define T1(k, o, a) { k, o, 1, { a, 1, 1, 1 }, 0 }

static int p_gemm(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_gemm(s, 0, 1, 1.0f, t[1], t[2], 0.5f, t[0]);
}
static int p_bias_add(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_bias_add(s, t[0], t[1]);
}
static int p_bias_grad(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_bias_grad(s, t[0], t[1], 1);
}
static int p_relu_fwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_relu_fwd(s, t[0], t[1]);
}
static int p_add_relu(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_add_relu_fwd(s, t[0], t[1], t[2]);
}
static int p_relu_bwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_relu_bwd(s, t[0], t[1], t[2]);
}
static int p_xent(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_softmax_xent(s, t[0], t[1], t[2], t[3], t[4]);
}
static int p_conv_fwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_conv2d_fwd(s, t[0], t[1], t[2], t[3], 1, 1);
}
static int p_conv_bwd_data(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_conv2d_bwd_data(s, t[0], t[1], t[2], 2, 1);
}
static int p_conv_bwd_filter(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_conv2d_bwd_filter(s, t[0], t[1], t[2], t[3], 1, 1, 1);
}
static int p_conv_bwdf_pr(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_conv2d_bwd_filter_pool_relu(s, t[0], t[1], t[2], t[3], t[4], 0);
}
static int p_avg_fwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_avgpool2d_fwd(s, t[0], t[1], 2);
}
static int p_avg_bwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_avgpool2d_bwd(s, t[0], t[1], 2);
}
static int p_relu_avg_fwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_relu_avgpool2d_fwd(s, t[0], t[1]);
}
static int p_avg_relu_bwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_avgpool2d_relu_bwd(s, t[0], t[1], t[2]);
}
static int p_max_fwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_maxpool2d_fwd(s, t[0], t[1], 3, 2);
}
static int p_max_bwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_maxpool2d_bwd(s, t[0], t[1], t[2], 3, 2);
}
static int p_gap_fwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_gavgpool_fwd(s, t[0], t[1]);
}
static int p_gap_bwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_gavgpool_bwd(s, t[0], t[1]);
}
static int p_bn_train(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_batchnorm_fwd(s, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], 1, 1e-5f, 0.1f);
}
static int p_bn_eval(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_batchnorm_fwd(s, t[0], NULL, NULL, t[4], t[5], t[1], t[2], t[3], 0, 1e-5f, 0.1f);
}
static int p_bn_bwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_batchnorm_bwd(s, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]);
}
static int p_bnr_train(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_batchnorm_relu_fwd(s, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], 1, 1e-5f,
				     0.1f);
}
static int p_bnr_eval(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_batchnorm_relu_fwd(s, t[0], NULL, NULL, t[4], t[5], t[1], t[2], t[3], 0, 1e-5f,
				     0.1f);
}
static int p_bnr_bwd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_batchnorm_relu_bwd(s, t[0], t[1], t[2], t[3], t[8], t[4], t[5], t[6], t[7]);
}
static int p_sgd(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_sgd(s, t[0], t[1], 0.1f, 0.01f);
}
static int p_sgd_mom(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_sgd_momentum(s, t[0], t[1], t[2], 0.1f, 0.9f, 0.01f, 1);
}
static int p_adamw(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	struct rf_adamw_params p = { .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
				     .weight_decay = 0.01, .step = 3 };
	(void)g;
	return rf_adamw(s, t[0], t[1], t[2], t[3], &p);
}
static int p_axpy(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_axpy(s, t[0], -0.75f, t[1]);
}
static int p_scale(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_scale(s, t[0], 1.5f);
}
static int p_sum(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_sum(s, t[0], t + 1, 3);
}
static int p_fill(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_fill(s, t[0], 0.3f);
}
static int p_u8_f32(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_u8_to_f32(s, t[0], t[1], 1.0f / 255, 0.2860f, 0.3530f);
}
static int p_u8_i32(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_u8_to_i32(s, t[0], t[1]);
}
static int p_uniform(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	return rf_rand_uniform(s, t[0], g, -2.0f, 3.0f);
}
static int p_normal(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	return rf_rand_normal(s, t[0], g, 0.5f, 2.0f);
}
static int p_convert(struct rf_stream *s, struct rf_tensor **t, struct rf_prng *g)
{
	(void)g;
	return rf_convert(s, t[0], t[1]);
}

static const struct ocase cases[] = {
	{ "gemm", 3, { T2(K_F, 1, 4, 3), T2(K_F, 0, 4, 5), T2(K_F, 0, 3, 5) }, p_gemm, 1e-4 },
	{ "bias_add", 2, { T4(K_F, 1, 2, 3, 2, 2), T1(K_F, 0, 12) }, p_bias_add, 1e-5 },
	{ "bias_grad", 2, { T1(K_F, 1, 12), T4(K_F, 0, 2, 3, 2, 2) }, p_bias_grad, 1e-4 },
	{ "relu_fwd", 2, { T4(K_F, 1, 2, 3, 4, 4), T4(K_F, 0, 2, 3, 4, 4) }, p_relu_fwd, 0 },
	{ "add_relu_fwd", 3, { T4(K_F, 1, 2, 3, 4, 4), T4(K_F, 0, 2, 3, 4, 4), T4(K_F, 0, 2, 3, 4, 4) },
	  p_add_relu, 0 },
	{ "relu_bwd", 3, { T4(K_F, 1, 2, 3, 4, 4), T4(K_F, 0, 2, 3, 4, 4), T4(K_F, 0, 2, 3, 4, 4) },
	  p_relu_bwd, 0 },
	{ "softmax_xent", 5, { T2(K_F, 1, 4, 5), T1(K_F, 1, 1), { K_I32, 1, 1, { 1, 1, 1, 1 }, 0 },
			       T2(K_F, 0, 4, 5), { K_I32, 0, 1, { 4, 1, 1, 1 }, 5 } }, p_xent, 1e-4 },
	{ "conv2d_fwd", 4, { T4(K_F, 1, 2, 4, 6, 6), T4(K_F, 0, 2, 3, 6, 6), T4(K_F, 0, 4, 3, 3, 3),
			     T1(K_F, 0, 4) }, p_conv_fwd, 1e-4 },
	{ "conv2d_bwd_data", 3, { T4(K_F, 1, 2, 3, 6, 6), T4(K_F, 0, 2, 4, 3, 3),
				  T4(K_F, 0, 4, 3, 3, 3) }, p_conv_bwd_data, 1e-4 },
	{ "conv2d_bwd_filter", 4, { T4(K_F, 1, 4, 3, 3, 3), T1(K_F, 1, 4), T4(K_F, 0, 2, 4, 6, 6),
				    T4(K_F, 0, 2, 3, 6, 6) }, p_conv_bwd_filter, 1e-4 },
	{ "conv2d_bwd_filter_pool_relu", 5, { T4(K_F, 1, 4, 1, 3, 3), T1(K_F, 1, 4),
					      T4(K_F, 0, 2, 4, 2, 2), T4(K_F, 0, 2, 4, 4, 4),
					      T4(K_F, 0, 2, 1, 6, 6) }, p_conv_bwdf_pr, 1e-4 },
	{ "avgpool2d_fwd", 2, { T4(K_F, 1, 2, 3, 3, 3), T4(K_F, 0, 2, 3, 6, 7) }, p_avg_fwd, 1e-6 },
	{ "avgpool2d_bwd", 2, { T4(K_F, 1, 2, 3, 6, 7), T4(K_F, 0, 2, 3, 3, 3) }, p_avg_bwd, 1e-6 },
	{ "relu_avgpool2d_fwd", 2, { T4(K_F, 1, 2, 3, 3, 3), T4(K_F, 1, 2, 3, 6, 6) },
	  p_relu_avg_fwd, 1e-6 },
	{ "avgpool2d_relu_bwd", 3, { T4(K_F, 1, 2, 3, 6, 6), T4(K_F, 0, 2, 3, 3, 3),
				     T4(K_F, 0, 2, 3, 6, 6) }, p_avg_relu_bwd, 1e-6 },
	{ "maxpool2d_fwd", 2, { T4(K_F, 1, 2, 3, 2, 2), T4(K_F, 0, 2, 3, 6, 6) }, p_max_fwd, 0 },
	{ "maxpool2d_bwd", 3, { T4(K_F, 1, 2, 3, 6, 6), T4(K_F, 0, 2, 3, 2, 2),
				T4(K_F, 0, 2, 3, 6, 6) }, p_max_bwd, 0 },
	{ "gavgpool_fwd", 2, { T2(K_F, 1, 2, 3), T4(K_F, 0, 2, 3, 4, 4) }, p_gap_fwd, 1e-5 },
	{ "gavgpool_bwd", 2, { T4(K_F, 1, 2, 3, 4, 4), T2(K_F, 0, 2, 3) }, p_gap_bwd, 1e-5 },
	{ "batchnorm_fwd", 8, { T4(K_F, 1, 2, 3, 4, 4), T1(K_F_FIXED, 1, 3), T1(K_F_FIXED, 1, 3),
				T1(K_F_FIXED, 1, 3), T1(K_FP_POS, 1, 3), T4(K_F, 0, 2, 3, 4, 4),
				T1(K_F_FIXED, 0, 3), T1(K_F_FIXED, 0, 3) }, p_bn_train, 1e-4 },
	{ "batchnorm_eval", 6, { T4(K_F, 1, 2, 3, 4, 4), T4(K_F, 0, 2, 3, 4, 4), T1(K_F_FIXED, 0, 3),
				 T1(K_F_FIXED, 0, 3), T1(K_F_FIXED, 0, 3), T1(K_FP_POS, 0, 3) }, p_bn_eval, 1e-4 },
	{ "batchnorm_bwd", 8, { T4(K_F, 1, 2, 3, 4, 4), T1(K_F_FIXED, 1, 3), T1(K_F_FIXED, 1, 3),
				T4(K_F, 0, 2, 3, 4, 4), T4(K_F, 0, 2, 3, 4, 4), T1(K_F_FIXED, 0, 3),
				T1(K_FP_POS, 0, 3), T1(K_F_FIXED, 0, 3) }, p_bn_bwd, 1e-4 },
	{ "batchnorm_relu_fwd", 8, { T4(K_F, 1, 2, 3, 4, 4), T1(K_F_FIXED, 1, 3), T1(K_F_FIXED, 1, 3),
				     T1(K_F_FIXED, 1, 3), T1(K_FP_POS, 1, 3), T4(K_F, 0, 2, 3, 4, 4),
				     T1(K_F_FIXED, 0, 3), T1(K_F_FIXED, 0, 3) }, p_bnr_train, 1e-4 },
	{ "batchnorm_relu_eval", 6, { T4(K_F, 1, 2, 3, 4, 4), T4(K_F, 0, 2, 3, 4, 4),
				      T1(K_F_FIXED, 0, 3), T1(K_F_FIXED, 0, 3), T1(K_F_FIXED, 0, 3),
				      T1(K_FP_POS, 0, 3) }, p_bnr_eval, 1e-4 },
	{ "batchnorm_relu_bwd", 9, { T4(K_F, 1, 2, 3, 4, 4), T1(K_F_FIXED, 1, 3), T1(K_F_FIXED, 1, 3),
				     T4(K_F, 0, 2, 3, 4, 4), T4(K_F, 0, 2, 3, 4, 4), T1(K_F_FIXED, 0, 3),
				     T1(K_FP_POS, 0, 3), T1(K_F_FIXED, 0, 3), T4(K_F, 0, 2, 3, 4, 4) },
	  p_bnr_bwd, 1e-4 },
	{ "sgd", 2, { T1(K_F, 1, 10), T1(K_F, 0, 10) }, p_sgd, 1e-6 },
	{ "sgd_momentum", 3, { T1(K_F, 1, 10), T1(K_F, 1, 10), T1(K_F, 0, 10) }, p_sgd_mom, 1e-6 },
	{ "adamw", 4, { T1(K_F, 1, 10), T1(K_F, 1, 10), T1(K_F_POS, 1, 10), T1(K_F, 0, 10) },
	  p_adamw, 1e-5 },
	{ "axpy", 2, { T1(K_F, 1, 10), T1(K_F, 0, 10) }, p_axpy, 1e-6 },
	{ "scale", 1, { T1(K_F, 1, 10) }, p_scale, 1e-6 },
	{ "sum", 4, { T1(K_F, 1, 10), T1(K_F, 0, 10), T1(K_F, 0, 10), T1(K_F, 0, 10) }, p_sum, 0 },
	{ "fill", 1, { T4(K_F, 1, 2, 3, 2, 2) }, p_fill, 0 },
	{ "u8_to_f32", 2, { T4(K_F, 1, 2, 3, 2, 2), T1(K_U8, 0, 24) }, p_u8_f32, 0 },
	{ "u8_to_i32", 2, { T1(K_I32, 1, 10), T1(K_U8, 0, 10) }, p_u8_i32, 0 },
	{ "rand_uniform", 1, { T1(K_F, 1, 10) }, p_uniform, 0 },
	{ "rand_normal", 1, { T1(K_F, 1, 10) }, p_normal, 1e-6 },
	{ "convert", 2, { T4(K_F, 1, 2, 3, 4, 5), T4(K_F_FIXED, 0, 2, 3, 4, 5) }, p_convert, 0 },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static const enum rf_tdtype dtypes[] = { RF_F32, RF_BF16, RF_F16 };
static const enum rf_layout layouts[] = { RF_LAYOUT_ROWMAJOR, RF_LAYOUT_NHWC };

static int is_float(int kind)
{
	return kind == K_F || kind == K_F_POS || kind == K_F_FIXED || kind == K_FP_POS;
}

/* Does dtype dt / layout lay change anything for case c (a float tensor to take dt;
 * a 4-D one to take lay)? */
static int varies(const struct ocase *c, enum rf_tdtype dt, enum rf_layout lay)
{
	int fl = 0, four = 0;

	for (int i = 0; i < c->nt; i++) {
		fl |= c->t[i].kind == K_F || c->t[i].kind == K_F_POS;
		four |= (c->t[i].kind == K_F || c->t[i].kind == K_F_POS) && c->t[i].ndim == 4;
	}
	return (dt == RF_F32 || fl) && (lay == RF_LAYOUT_ROWMAJOR || four);
}

static unsigned long long seed = 2026;

static float frand(void)
{
	return (float)((t_splitmix64(&seed) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* v rounded to dt, as the backends round (nearest even) */
static float round_to(float v, enum rf_tdtype dt)
{
	return dt == RF_BF16 ? rf__bf16_to_f32(rf__f32_to_bf16(v)) :
	       dt == RF_F16 ? rf__f16_to_f32(rf__f32_to_f16(v)) : v;
}

struct rig {
	struct rf_ring *ring;
	struct rf_engine *e;
};

static size_t numel(const struct tspec *t)
{
	size_t n = 1;

	for (int d = 0; d < t->ndim; d++)
		n *= (size_t)t->shape[d];
	return n;
}

/* The dtype and layout of a tensor of spec s in a case run in dtype dt, layout lay:
 * the tested float ones take both (the layout where 4-D), the fixed ones f32
 * row-major. */
static void spec_format(const struct tspec *s, enum rf_tdtype dt, enum rf_layout lay,
			enum rf_tdtype *tdt, enum rf_layout *tl)
{
	int fl = is_float(s->kind) && s->kind != K_F_FIXED && s->kind != K_FP_POS;

	*tdt = is_float(s->kind) ? (fl ? dt : RF_F32) : s->kind == K_I32 ? RF_I32 : RF_U8;
	*tl = fl && s->ndim == 4 ? lay : RF_LAYOUT_ROWMAJOR;
}

/* Case c's tensors on d in dtype dt and layout lay (values not written) into t. */
static void make_tensors(const struct ocase *c, struct rf_device *d, enum rf_tdtype dt,
			 enum rf_layout lay, struct rf_tensor **t)
{
	for (int i = 0; i < c->nt; i++) {
		const struct tspec *s = &c->t[i];
		enum rf_tdtype tdt;
		enum rf_layout tl;
		spec_format(s, dt, lay, &tdt, &tl);
		CHECK_OK(rf_tensor_create_layout(d, tdt, tl, "t", s->ndim, s->shape, &t[i]));
	}
}

/* After a case: its ops waited for; bad, or 1 if the wait failed (a failed op). */
static int settle(struct rig *r, int bad)
{
	if (rf_engine_wait_all(r->e) < 0) {
		fprintf(stderr, "  (the engine's wait after it: %s)\n", rf_last_error());
		return 1;
	}
	return bad;
}

/* After a failed case on d: whether d still runs ops (a fill read back). A device whose
 * stream died (a sticky CUDA fault) would fail every later case for that reason. */
static int device_alive(struct rig *r, struct rf_device *d)
{
	struct rf_tensor *t = NULL;
	float v[8] = { 0 };
	int ok;

	if (rf_tensor_create(d, RF_F32, "alive", RF_DIMS(8), &t) < 0)
		return 0;
	ok = rf_fill(NULL, t, 2.0f) == 0 && rf_tensor_read(t, v) == 0 && v[0] == 2.0f &&
	     v[7] == 2.0f;
	rf_tensor_destroy(t);
	if (rf_engine_wait_all(r->e) < 0)
		ok = 0;
	return ok;
}

/* What d does not run is refused at push too: -ENOTSUP, the same message, nothing
 * pushed. 1 (said on stderr) if not. */
static int check_push_refused(struct rig *r, const struct ocase *c, struct rf_device *d,
			       enum rf_tdtype dt, enum rf_layout lay)
{
	struct rf_tensor *t[MAXT] = { 0 };
	struct rf_engine_stats st0, st1;
	struct rf_prng *g = NULL;
	char want[96];
	int ret, bad = 0;

	CHECK_OK(rf_prng_create(r->e, 1, "g", &g));
	make_tensors(c, d, dt, lay, t);
	CHECK_OK(rf_engine_wait_all(r->e));
	rf_engine_get_stats(r->e, &st0);
	ret = c->push(NULL, t, g);
	rf_engine_get_stats(r->e, &st1);
	snprintf(want, sizeof(want), "does not run %s: ", c->op);
	if (ret != -ENOTSUP || !strstr(rf_last_error(), want) || st1.pushed != st0.pushed) {
		fprintf(stderr, "%s on %s in %s %s: push returned %d, pushed %llu ops: '%s'\n",
			c->op, rf_device_name(d), rf_tdtype_name(dt), rf_layout_name(lay), ret,
			(unsigned long long)(st1.pushed - st0.pushed), rf_last_error());
		bad = 1;
	}
	for (int i = 0; i < c->nt; i++)
		rf_tensor_destroy(t[i]);
	rf_prng_destroy(g);
	return settle(r, bad);
}

/* Case c on device d in dtype dt and layout lay against the CPU device ref in f32
 * row-major. exact: the backend is the CPU (its reference path is exact). 1 (said on
 * stderr, the first wrong element of each output) if the outputs differ or an op
 * fails: the caller goes on to the next case, so one run names every failing one. */
static int run_case(struct rig *r, const struct ocase *c, struct rf_device *d,
		     struct rf_device *ref, enum rf_tdtype dt, enum rf_layout lay, int exact)
{
	struct rf_tensor *td[MAXT] = { 0 }, *tr[MAXT] = { 0 };
	float *vals[MAXT] = { 0 };
	struct rf_prng *gd = NULL, *gr = NULL;
	char what[160];
	int bad = 0, refused = 0;

	CHECK_OK(rf_prng_create(r->e, 99, "g_test", &gd));
	CHECK_OK(rf_prng_create(r->e, 99, "g_ref", &gr));
	make_tensors(c, d, dt, lay, td);
	for (int i = 0; i < c->nt; i++) {
		const struct tspec *s = &c->t[i];
		size_t n = numel(s);
		CHECK_OK(rf_tensor_create(ref, is_float(s->kind) ? RF_F32 : td[i]->dtype, "r",
					  s->ndim, s->shape, &tr[i]));
		vals[i] = malloc(n * sizeof(float) + 1);
		CHECK(vals[i]);
		if (is_float(s->kind)) {
			for (size_t k = 0; k < n; k++)
				vals[i][k] = s->kind == K_F_POS || s->kind == K_FP_POS
						     ? 1.0f + 0.5f * frand() : frand();
			/* both sides see the same values: rounded to the tested dtype */
			CHECK_OK(rf_tensor_write_as(td[i], RF_F32, vals[i]));
			CHECK_OK(rf_tensor_read_as(td[i], RF_F32, vals[i]));
			CHECK_OK(rf_tensor_write(tr[i], vals[i]));
		} else if (s->kind == K_I32) {
			int32_t *iv = (int32_t *)vals[i];
			for (size_t k = 0; k < n; k++)
				iv[k] = s->hi ? (int32_t)(t_splitmix64(&seed) % (unsigned)s->hi)
					      : (int32_t)(t_splitmix64(&seed) % 1000);
			CHECK_OK(rf_tensor_write(td[i], iv));
			CHECK_OK(rf_tensor_write(tr[i], iv));
		} else {
			uint8_t *uv = (uint8_t *)vals[i];
			for (size_t k = 0; k < n; k++)
				uv[k] = (uint8_t)t_splitmix64(&seed);
			CHECK_OK(rf_tensor_write(td[i], uv));
			CHECK_OK(rf_tensor_write(tr[i], uv));
		}
	}
	snprintf(what, sizeof(what), "%s on %s in %s %s", c->op, rf_device_name(d),
		 rf_tdtype_name(dt), rf_layout_name(lay));
	if (c->push(NULL, td, gd) < 0 || c->push(NULL, tr, gr) < 0) {
		fprintf(stderr, "%s: push refused: %s\n", what, rf_last_error());
		bad = refused = 1;
	}
	for (int i = 0; i < c->nt && !refused; i++) {
		const struct tspec *s = &c->t[i];
		size_t n = numel(s);
		float *got, *want;
		if (!s->out)
			continue;
		got = malloc(n * sizeof(float) + 1);
		want = malloc(n * sizeof(float) + 1);
		CHECK(got && want);
		if (is_float(s->kind)) {
			if (rf_tensor_read_as(td[i], RF_F32, got) < 0 ||
			    rf_tensor_read_as(tr[i], RF_F32, want) < 0) {
				fprintf(stderr, "%s: an op failed: %s / %s\n", what,
					rf_device_last_error(d), rf_device_last_error(ref));
				bad = 1;
				n = 0;
			}
		} else {
			CHECK_OK(rf_tensor_read(td[i], got));
			CHECK_OK(rf_tensor_read(tr[i], want));
		}
		for (size_t k = 0; k < n; k++) {
			double g, w, tol;
			if (!is_float(s->kind)) {
				if (((int32_t *)got)[k] != ((int32_t *)want)[k]) {
					fprintf(stderr, "%s: tensor %d element %zu: %d, want %d\n", what,
						i, k, ((int32_t *)got)[k], ((int32_t *)want)[k]);
					bad = 1;
					break;
				}
				continue;
			}
			g = got[k];
			w = round_to(want[k], s->kind == K_F_FIXED || s->kind == K_FP_POS ? RF_F32 : dt);
			/* the CPU's reference path: the reference's bits, rounded; another
			 * backend: its float rounding, and one rounding of the dtype more */
			tol = exact ? 0 : 1e-6 + (c->rtol + (dt == RF_BF16 ? 1.0 / 128 : dt == RF_F16 ?
							     1.0 / 1024 : 0)) * fabs(w);
			if (!(fabs(g - w) <= tol) && !(isnan(g) && isnan(w))) {
				fprintf(stderr, "%s: tensor %d (%s) element %zu: got %.9g, want %.9g\n",
					what, i, rf_tensor_describe(td[i], (char[96]){ 0 }, 96), k, g, w);
				bad = 1;
				break;
			}
		}
		free(got);
		free(want);
	}
	for (int i = 0; i < c->nt; i++) {
		rf_tensor_destroy(td[i]);
		rf_tensor_destroy(tr[i]);
		free(vals[i]);
	}
	rf_prng_destroy(gd);
	rf_prng_destroy(gr);
	return settle(r, bad);
}

/* A refusal names the op, and the dtype and layout where those are what is refused. */
static void check_refusal(const char *who, const char *op, enum rf_tdtype dt, enum rf_layout lay,
			  int f32_ok)
{
	const char *m = rf_last_error();
	char want[96];

	snprintf(want, sizeof(want), "does not run %s: ", op);
	if (!strstr(m, who) || !strstr(m, want) || strlen(strstr(m, want)) <= strlen(want)) {
		fprintf(stderr, "refusal of %s (%s %s) by %s says too little: '%s'\n", op,
			rf_tdtype_name(dt), rf_layout_name(lay), who, m);
		exit(1);
	}
	if (f32_ok && ((dt != RF_F32 && !strstr(m, rf_tdtype_name(dt))) ||
		       (dt == RF_F32 && lay == RF_LAYOUT_NHWC && !strstr(m, "nhwc")))) {
		fprintf(stderr, "refusal of %s in %s %s by %s names neither: '%s'\n", op,
			rf_tdtype_name(dt), rf_layout_name(lay), who, m);
		exit(1);
	}
}

/* A claim is what the push decides: for every backend (one without a device here too),
 * each case's op as the push builds it -- its tensors' ranks, shapes, dtypes and
 * layouts as make_tensors makes them -- goes to the backend's rule, which must agree
 * with rf_device_kind_supports in every dtype and layout the case varies in. (A claim
 * made on a probe of other ranks than a push uses was how a CUDA device came to claim
 * bias_add on 4-D NHWC tensors and refuse it at push: found on an H200.) Returns the
 * number of disagreements, each printed. */
static unsigned check_claims_match_push(const struct rf__backend *be, unsigned *checked)
{
	unsigned bad = 0;

	for (unsigned i = 0; i < NCASES; i++) {
		const struct ocase *c = &cases[i];
		int code = rf__opcode_of(c->op);
		CHECK(code >= 0);
		for (unsigned a = 0; a < 3; a++)
			for (unsigned l = 0; l < 2; l++) {
				enum rf_tdtype dt = dtypes[a];
				enum rf_layout lay = layouts[l];
				struct rf__tref in[MAXT];
				struct rf__op op;
				char why[200] = "";
				int claim, rule;
				if (!varies(c, dt, lay))
					continue;
				memset(in, 0, sizeof(in));
				rf__probe_op(&op, in, code, NULL, dt, lay);
				if (code == RF__OP_SUM) {
					/* the case's k inputs */
					for (int k = 1; k < c->nt; k++)
						in[k - 1] = in[0];
					op.p.sum.k = c->nt - 1;
					op.nt = (unsigned)c->nt;
				}
				CHECK_EQ(op.nt, (unsigned)c->nt);
				/* a rule may read an op's parameters too: fill's value (a CUDA
				 * device once refused non-zero bf16 fills it claimed) */
				if (code == RF__OP_FILL)
					op.p.fill.v = 0.3f;   /* p_fill's */
				for (int k = 0; k < c->nt; k++) {
					const struct tspec *s = &c->t[k];
					struct rf__tref *t = rf__op_t(&op, (unsigned)k);
					spec_format(s, dt, lay, &t->dtype, &t->layout);
					t->ndim = s->ndim;
					t->numel = 1;
					for (int d = 0; d < RF_TENSOR_MAX_DIMS; d++) {
						t->shape[d] = d < s->ndim ? s->shape[d] : 1;
						t->numel *= (size_t)t->shape[d];
					}
				}
				claim = rf_device_kind_supports(be->kind, c->op, dt, lay) == 0;
				rule = !be->supports_op || be->supports_op(NULL, &op, why, sizeof(why));
				(*checked)++;
				if (claim != rule) {
					fprintf(stderr, "%s: %s in %s %s: claimed %s, but the push %s%s\n",
						be->kind, c->op, rf_tdtype_name(dt), rf_layout_name(lay),
						claim ? "yes" : "no", rule ? "runs it" : "refuses: ",
						rule ? "" : why);
					bad++;
				}
			}
	}
	return bad;
}

/* ---- the conversions and the layout, against independent definitions ---------------- */

static float f_of(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint32_t u_of(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

/* bf16 of f by the definition: the nearer of the two bf16 values around f, ties to
 * the even one; past the largest bf16, infinity. */
static uint16_t bf16_ref(float f)
{
	uint32_t u = u_of(f), lo = u & 0xffff0000u, hi = lo + 0x10000u;
	double dl, dh;

	if (isnan(f))
		return 0x7fc0;
	if ((u & 0xffffu) == 0)
		return (uint16_t)(u >> 16);
	if ((hi & 0x7f800000u) == 0x7f800000u && (hi & 0x007fffffu) == 0) {
		/* hi is infinity: past the largest finite bf16's halfway point? */
		dl = fabs((double)f - (double)f_of(lo));
		dh = fabs((double)f_of(lo)) * 0x1p-8;   /* half an ulp of the largest bf16 */
		return (uint16_t)((dl < dh || (dl == dh && !((lo >> 16) & 1))) ? lo >> 16 : hi >> 16);
	}
	dl = fabs((double)f - (double)f_of(lo));
	dh = fabs((double)f_of(hi) - (double)f);
	if (dl < dh || (dl == dh && !((lo >> 16) & 1)))
		return (uint16_t)(lo >> 16);
	return (uint16_t)(hi >> 16);
}

/* A fill's bits, defined for every value (every backend fills with them) */
static void check_fill_bits(void)
{
	uint32_t b;

	CHECK_EQ(rf__fill_bits(RF_F32, 0.3f, &b), 4u);
	CHECK_EQ(b, u_of(0.3f));
	CHECK_EQ(rf__fill_bits(RF_BF16, 0.3f, &b), 2u);
	CHECK_EQ(b, (uint32_t)bf16_ref(0.3f));
	CHECK_EQ(rf__fill_bits(RF_F16, 1.0f, &b), 2u);
	CHECK_EQ(b, 0x3c00u);
	CHECK_EQ(rf__fill_bits(RF_I32, -2.75f, &b), 4u);
	CHECK_EQ((int32_t)b, -2);                             /* toward zero */
	rf__fill_bits(RF_I32, 3e9f, &b);
	CHECK_EQ((int32_t)b, INT32_MAX);                      /* saturated */
	rf__fill_bits(RF_I32, -3e9f, &b);
	CHECK_EQ((int32_t)b, INT32_MIN);
	rf__fill_bits(RF_I32, NAN, &b);
	CHECK_EQ(b, 0u);
	CHECK_EQ(rf__fill_bits(RF_U8, 200.9f, &b), 1u);
	CHECK_EQ(b, 200u);
	rf__fill_bits(RF_U8, 300.0f, &b);
	CHECK_EQ(b, 255u);
	rf__fill_bits(RF_U8, -1.0f, &b);
	CHECK_EQ(b, 0u);
	CHECK_EQ(rf__fill_bits((enum rf_tdtype)77, 1.0f, &b), 0u);
}

static void check_conversions(void)
{
	static const float special[] = { 0.0f, -0.0f, 1.0f, -1.0f, 1.00390625f, 1.01171875f,
					 3.4028235e38f, -3.4028235e38f, 1e-40f, -1e-45f, 65504.0f,
					 65519.99f, 65520.0f, 6.1e-5f, 5.9604645e-8f, 2.98e-8f,
					 2.9802322e-8f, 1e-8f, 0.1f, 1.0f / 3 };
	unsigned long long s = 7;
	unsigned bad = 0;

	for (unsigned i = 0; i < 200000 + sizeof(special) / sizeof(special[0]); i++) {
		float f = i < sizeof(special) / sizeof(special[0]) ? special[i]
			  : f_of((uint32_t)t_splitmix64(&s));
		uint16_t got = rf__f32_to_bf16(f), want = bf16_ref(f);
		if (isnan(f) ? !isnan(rf__bf16_to_f32(got)) : got != want) {
			if (bad++ < 5)
				fprintf(stderr, "bf16 of %a: 0x%04x, want 0x%04x\n", (double)f, got, want);
		}
		if (!isnan(f) && u_of(rf__bf16_to_f32(want)) != (uint32_t)want << 16)
			bad++;
#ifdef __FLT16_MAX__
		{
			/* a narrower range too, where f16 has its values */
			float g = i & 1 ? f : f * 0x1p-100f;
			volatile _Float16 h = (_Float16)g;
			uint16_t hw, hg = rf__f32_to_f16(g);
			memcpy(&hw, (const void *)&h, 2);
			if (isnan(g) ? !isnan(rf__f16_to_f32(hg)) : hg != hw) {
				if (bad++ < 5)
					fprintf(stderr, "f16 of %a: 0x%04x, want 0x%04x\n", (double)g,
						hg, hw);
			}
		}
#endif
	}
#ifdef __FLT16_MAX__
	for (uint32_t h = 0; h < 65536; h++) {
		_Float16 x;
		uint16_t hh = (uint16_t)h;
		memcpy(&x, &hh, 2);
		float want = (float)x, got = rf__f16_to_f32(hh);
		if (isnan(want) ? !isnan(got) : u_of(got) != u_of(want)) {
			if (bad++ < 5)
				fprintf(stderr, "f32 of f16 0x%04x: %a, want %a\n", h, (double)got,
					(double)want);
		}
	}
#endif
	if (bad) {
		fprintf(stderr, "conversions: %u wrong\n", bad);
		exit(1);
	}
}

/* An NHWC tensor's bytes lie channels fastest: written as logical values, read raw;
 * and rf_convert row-major -> NHWC moves them there. */
static void check_layout(struct rig *r, struct rf_device *d)
{
	const int64_t N = 2, C = 3, H = 4, W = 5;
	size_t n = (size_t)(N * C * H * W);
	float *logical = malloc(n * sizeof(float)), *raw = malloc(n * sizeof(float));
	struct rf_tensor *a = NULL, *b = NULL;

	CHECK(logical && raw);
	for (size_t i = 0; i < n; i++)
		logical[i] = (float)i;
	CHECK_OK(rf_tensor_create_layout(d, RF_F32, RF_LAYOUT_NHWC, "nhwc", RF_DIMS(N, C, H, W), &a));
	CHECK_OK(rf_tensor_create(d, RF_F32, "rm", RF_DIMS(N, C, H, W), &b));
	CHECK_OK(rf_tensor_write_as(a, RF_F32, logical));
	CHECK_OK(rf_tensor_read(a, raw));
	for (int64_t i = 0; i < N; i++)
		for (int64_t c = 0; c < C; c++)
			for (int64_t y = 0; y < H; y++)
				for (int64_t x = 0; x < W; x++)
					CHECK(raw[((i * H + y) * W + x) * C + c] ==
					      logical[((i * C + c) * H + y) * W + x]);
	memset(raw, 0, n * sizeof(float));
	CHECK_OK(rf_tensor_write(b, logical));
	CHECK_OK(rf_convert(NULL, a, b));
	CHECK_OK(rf_tensor_read(a, raw));
	for (int64_t i = 0; i < N; i++)
		for (int64_t c = 0; c < C; c++)
			for (int64_t y = 0; y < H; y++)
				for (int64_t x = 0; x < W; x++)
					CHECK(raw[((i * H + y) * W + x) * C + c] ==
					      logical[((i * C + c) * H + y) * W + x]);
	rf_tensor_destroy(a);
	rf_tensor_destroy(b);
	free(logical);
	free(raw);
	CHECK_OK(rf_engine_wait_all(r->e));
}

int main(void)
{
	struct rig r;
	struct rf_device *ref = NULL;
	unsigned ran = 0, refused = 0, backends = 0, failed = 0;

	CHECK_OK(rf_ring_create(&r.ring, NULL));
	CHECK_OK(rf_engine_create(&r.e, r.ring, NULL));
	CHECK_OK(rf_cpu_open(r.e, NULL, &ref));

	check_conversions();
	check_fill_bits();
	/* unknown names and kinds */
	CHECK_EQ(rf_device_supports(ref, "no_such_op", RF_F32, RF_LAYOUT_ROWMAJOR), -EINVAL);
	CHECK(strstr(rf_last_error(), "no_such_op"));
	CHECK_EQ(rf_device_kind_supports("tpu", "gemm", RF_F32, RF_LAYOUT_ROWMAJOR), -EINVAL);
	CHECK(strstr(rf_last_error(), "tpu"));
	CHECK_EQ(rf_device_supports(ref, "gemm", (enum rf_tdtype)77, RF_LAYOUT_ROWMAJOR), -EINVAL);
	CHECK_EQ(rf_device_supports(ref, "gemm", RF_U8, RF_LAYOUT_ROWMAJOR), -EINVAL);  /* no float */
	CHECK(strstr(rf_last_error(), "u8"));

	/* every opcode has a case here (copies and host ops are tested elsewhere): a new
	 * op cannot skip the conformance run */
	for (int k = 0; k < RF__OP_COUNT; k++) {
		const char *name = rf__opsigs[k].name;
		unsigned i = 0;
		if (!strcmp(name, "copy") || !strcmp(name, "host_op"))
			continue;
		while (i < NCASES && strcmp(cases[i].op, name))
			i++;
		if (i == NCASES)
			fprintf(stderr, "opcode %s has no case in test-op-table\n", name);
		CHECK(i < NCASES);
	}

	for (unsigned b = 0; rf__backends[b]; b++) {
		const struct rf__backend *be = rf__backends[b];
		int n = rf_device_count(be->kind);
		struct rf_device *d = NULL;
		char who[48];

		CHECK(n >= 0);
		backends++;
		snprintf(who, sizeof(who), "a %s device", be->kind);
		/* claims and refusals from the table alone */
		for (unsigned i = 0; i < NCASES; i++) {
			const struct ocase *c = &cases[i];
			int f32 = rf_device_kind_supports(be->kind, c->op, RF_F32, RF_LAYOUT_ROWMAJOR);
			CHECK(f32 == 0 || f32 == -ENOTSUP);
			if (f32 == -ENOTSUP)
				check_refusal(who, c->op, RF_F32, RF_LAYOUT_ROWMAJOR, 0);
			for (unsigned a = 0; a < 3; a++)
				for (unsigned l = 0; l < 2; l++) {
					int s = rf_device_kind_supports(be->kind, c->op, dtypes[a],
									layouts[l]);
					CHECK(s == 0 || s == -ENOTSUP);
					if (s == -ENOTSUP) {
						check_refusal(who, c->op, dtypes[a], layouts[l], f32 == 0);
						refused++;
					}
				}
		}
		{
			unsigned checked = 0;
			CHECK_EQ(check_claims_match_push(be, &checked), 0u);
			CHECK(checked > NCASES);
		}
		/* the CPU backend runs every op in every float dtype and layout */
		if (be->hostmem)
			for (unsigned i = 0; i < NCASES; i++)
				for (unsigned a = 0; a < 3; a++)
					for (unsigned l = 0; l < 2; l++)
						CHECK_OK(rf_device_kind_supports(be->kind, cases[i].op,
										 dtypes[a], layouts[l]));
		if (n == 0) {
			fprintf(stderr, "%s: no device here: its table's claims checked, nothing run\n",
				be->kind);
			continue;
		}
		snprintf(who, sizeof(who), "%s:0", be->kind);
		/* in fp32: the references are the CPU's f32 (a CUDA device's default, tf32,
		 * rounds gemm's inputs to 10-bit mantissas: 1e-4 off on an H200) */
		if (rf_device_open_opts(r.e, who, &(struct rf_device_opts){
						.precision = RF_PRECISION_FP32 }, &d) < 0) {
			fprintf(stderr, "%s: cannot open: %s\n", who, rf_last_error());
			return 1;
		}
		check_layout(&r, d);
		for (unsigned i = 0; i < NCASES; i++)
			for (unsigned a = 0; a < 3; a++)
				for (unsigned l = 0; l < 2; l++) {
					const struct ocase *c = &cases[i];
					int s;
					if (!varies(c, dtypes[a], layouts[l]))
						continue;
					s = rf_device_supports(d, c->op, dtypes[a], layouts[l]);
					if (s == 0) {
						int f = run_case(&r, c, d, ref, dtypes[a], layouts[l],
								 be->hostmem);
						failed += f;
						ran++;
						if (f && !device_alive(&r, d)) {
							fprintf(stderr, "%s: no longer runs ops after "
								"%s in %s %s: its later cases not "
								"run\n", rf_device_name(d), c->op,
								rf_tdtype_name(dtypes[a]),
								rf_layout_name(layouts[l]));
							goto dead;
						}
						continue;
					}
					CHECK_EQ(s, -ENOTSUP);
					check_refusal(rf_device_name(d), c->op, dtypes[a], layouts[l],
						      rf_device_supports(d, c->op, RF_F32,
									 RF_LAYOUT_ROWMAJOR) == 0);
					failed += check_push_refused(&r, c, d, dtypes[a], layouts[l]);
					refused++;
				}
dead:
		rf_device_close(d);
	}
	fprintf(stderr, "op table: %u backends, %u op/dtype/layout runs against the CPU's f32 "
		"row-major, %u refusals checked, %u failed\n", backends, ran, refused, failed);
	rf_device_close(ref);
	rf_engine_destroy(r.e);
	rf_ring_destroy(r.ring);
	return failed ? 1 : 0;
}
