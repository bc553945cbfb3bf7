/* devices/cuda/cuda-rules.c -- the CUDA backend's rules as plain C (cuda-rules.h): what
 * it runs, a convolution's path, what a graph may capture. No CUDA call here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda-rules.h"
#include "rf-internal.h"
#include "kernels-cuda-impl.h"

/* ---- a GEMM's cuBLAS call ------------------------------------------------------------ */

int rf__cuda_gemm_call(int adt, int bdt, int cdt, int tf32)
{
	if (adt != RF_F32 || bdt != RF_F32 || cdt != RF_F32)
		return RF__KC_GEMM_32F;
	return tf32 ? RF__KC_GEMM_TF32 : RF__KC_SGEMM;
}

/* ---- batch norm's path --------------------------------------------------------------- */

int rf__cuda_bn_ours(const struct rf__op *op)
{
	switch (op->code) {
	case RF__OP_BN_TRAIN: case RF__OP_BN_EVAL: case RF__OP_BN_BWD:
	case RF__OP_BN_RELU_TRAIN: case RF__OP_BN_RELU_EVAL: case RF__OP_BN_RELU_BWD:
		/* the first output (y, or the backward's dx) sets the format (supports: x,
		 * y, dy, dx of one dtype and layout) */
		return op->o.t[0].layout == RF_LAYOUT_NHWC;
	default:
		return 0;
	}
}

size_t rf__cuda_bn_ws(const struct rf__op *op)
{
	if (!rf__cuda_bn_ours(op))
		return 0;
	return rf__kc_bn_nhwc_ws((int64_t)op->p.bn.s.n * op->p.bn.h * op->p.bn.w, op->p.bn.s.c,
				 op->code == RF__OP_BN_EVAL || op->code == RF__OP_BN_RELU_EVAL);
}

int rf__cuda_bias_grad_ours(const struct rf__op *op)
{
	return op->code == RF__OP_CONV_BWD_FILTER && op->o.conv_bwd_filter.db.dtype &&
	       op->o.conv_bwd_filter.dy.layout == RF_LAYOUT_NHWC;
}

size_t rf__cuda_bias_grad_ws(const struct rf__op *op)
{
	const struct rf__conv2d *s = &op->p.conv.s;

	if (!rf__cuda_bias_grad_ours(op))
		return 0;
	return rf__kc_colsum_nhwc_ws((int64_t)s->n * rf__conv2d_oh(s) * rf__conv2d_ow(s), s->o);
}

/* ---- what it runs ------------------------------------------------------------------- */

/* Every present operand not in skip (a mask) is of one float dtype (f32 only:
 * f32_only) and every 4-D one in one layout: -1, or the operand that breaks it. */
static int rf__uniform(const struct rf__op *op, unsigned skip, int f32_only)
{
	int dt = -1, lay = -1;

	for (unsigned i = 0; i < op->nt; i++) {
		const struct rf__tref *t = rf__op_tc(op, i);
		if (!t->dtype || (skip >> i & 1))
			continue;
		if (!rf__is_float(t->dtype) || (f32_only && t->dtype != RF_F32))
			return (int)i;
		if (dt < 0)
			dt = (int)t->dtype;
		else if ((int)t->dtype != dt)
			return (int)i;
		if (t->ndim == 4) {
			if (lay < 0)
				lay = (int)t->layout;
			else if ((int)t->layout != lay)
				return (int)i;
		}
	}
	return -1;
}

/* Elementwise kernels: one float dtype (f32 only for the optimizer's: f32_only), and
 * every operand laid out alike (all row-major, or all 4-D in one layout: then memory
 * order is one order for all). */
static int rf__elementwise(const struct rf__op *op, int f32_only)
{
	int lay = -1, dt = -1;

	for (unsigned i = 0; i < op->nt; i++) {
		const struct rf__tref *t = rf__op_tc(op, i);
		int l;
		if (!t->dtype)
			continue;
		if (!rf__is_float(t->dtype) || (f32_only && t->dtype != RF_F32) ||
		    (dt >= 0 && (int)t->dtype != dt))
			return (int)i;
		dt = (int)t->dtype;
		l = t->ndim == 4 ? (int)t->layout : RF_LAYOUT_ROWMAJOR;
		if (lay < 0)
			lay = l;
		else if (l != lay)
			return (int)i;
	}
	return -1;
}

static int rf__refuse(const struct rf__op *op, int i, const char *rule, char *why, size_t len)
{
	char b[96];

	snprintf(why, len, "%s: %s", rf__tref_describe(op, (unsigned)i, b, sizeof(b)), rule);
	return 0;
}

/* The mask of op's per-channel operands (the signature's RF__OK_CHAN ones). */
static unsigned rf__chan_mask(const struct rf__op *op)
{
	const struct rf__opsig *g = &rf__opsigs[op->code];
	unsigned m = 0;

	for (unsigned i = 0; i < op->nt && i < RF__OP_NT; i++)
		if (g->o[i].kind == RF__OK_CHAN)
			m |= 1u << i;
	return m;
}

int rf__cuda_rule_cc(const struct rf__op *op, int cc, char *why, size_t len)
{
	char rule[96];

	if (!cc || cc >= 80)
		return 1;
	for (unsigned i = 0; i < op->nt; i++)
		if (rf__op_tc(op, i)->dtype == RF_BF16) {
			snprintf(rule, sizeof(rule), "bf16 needs compute capability 8.0 or later; "
				 "this GPU's is %d.%d", cc / 10, cc % 10);
			return rf__refuse(op, (int)i, rule, why, len);
		}
	return 1;
}

int rf__cuda_rule_precision(int precision, int cc, char *why, size_t len)
{
	if (precision != RF_PRECISION_BF16 || !cc || cc >= 80)
		return 1;
	snprintf(why, len, "precision bf16 needs compute capability 8.0 or later; this GPU's "
		 "is %d.%d (fp32 or tf32 run everywhere)", cc / 10, cc % 10);
	return 0;
}

int rf__cuda_env_counter(const char *v)
{
	if (!v || !*v)
		return -1;
	return !strcmp(v, "stream") ? RF__CTR_STREAM : !strcmp(v, "kernel") ? RF__CTR_KERNEL
		: !strcmp(v, "off") ? RF__CTR_OFF : -2;
}

int rf__cuda_counter_mode(int want, int have_wv, int trial_ok)
{
	if (want == RF__CTR_OFF || want == RF__CTR_KERNEL)
		return want;
	if (have_wv && trial_ok)
		return RF__CTR_STREAM;
	return want == RF__CTR_STREAM ? -ENOTSUP : RF__CTR_KERNEL;
}

int rf__cuda_env_wake(const char *v)
{
	if (!v || !*v || !strcmp(v, "waker"))
		return 1;
	return !strcmp(v, "hostfn") ? 0 : -1;
}

int rf__cuda_env_counter_get(int *want)
{
	const char *v = getenv("RF_CUDA_COUNTER");

	if ((*want = rf__cuda_env_counter(v)) == -2)
		return rf__fail(-EINVAL, "RF_CUDA_COUNTER=%s in the environment: expected stream, "
				"kernel or off (or unset)", v);
	return 0;
}

int rf__cuda_env_wake_get(int *wake)
{
	const char *v = getenv("RF_CUDA_WAKE");

	if ((*wake = rf__cuda_env_wake(v)) < 0)
		return rf__fail(-EINVAL, "RF_CUDA_WAKE=%s in the environment: expected waker or "
				"hostfn (or unset)", v);
	return 0;
}

int rf__cuda_env_spin_get(uint64_t *us)
{
	return rf__env_u64("RF_CUDA_WAKER_SPIN_US", getenv("RF_CUDA_WAKER_SPIN_US"), 0, 1000000,
			   0, "microseconds the waker queries a signal before it blocks", us);
}

int rf__cuda_env_check(void)
{
	int want, wake;
	uint64_t us;

	if (rf__cuda_env_counter_get(&want) < 0 || rf__cuda_env_wake_get(&wake) < 0)
		return -EINVAL;
	return rf__cuda_env_spin_get(&us);
}

int rf__cuda_im2col_ok(const struct rf__op *op)
{
	return rf__op_first_not(op, RF_F32, RF_LAYOUT_ROWMAJOR) < 0;
}

int rf__cuda_rule_supports(const struct rf__op *op, int dnn, const char *dnn_why, char *why,
			   size_t len)
{
	int i;

	if (op->code >= RF__OP_COUNT) {
		snprintf(why, len, "unknown opcode %d", (int)op->code);
		return 0;
	}
	switch (op->code) {
	case RF__OP_HOST:
		snprintf(why, len, "a host op needs a CPU-capable stream");
		return 0;
	case RF__OP_CONV_BWD_FILTER_POOL_RELU:
	case RF__OP_RELU_AVGPOOL2_FWD:
	case RF__OP_AVGPOOL2_RELU_BWD:
		snprintf(why, len, "no fused kernel here: push the separate relu, average "
			 "pooling and convolution ops");
		return 0;
	case RF__OP_CONVERT:
	case RF__OP_COPY:
		/* f32, bf16 and f16 into one another in either layout; bytes */
		return 1;
	case RF__OP_FILL:
		/* any dtype, any value: the bits of rf__fill_bits */
		return 1;
	case RF__OP_GEMM: {
		/* cublasGemmEx: A and B of one float dtype, C that dtype or f32 */
		const struct rf__tref *a = &op->o.gemm.a, *b = &op->o.gemm.b, *c = &op->o.gemm.c;
		if (b->dtype != a->dtype)
			return rf__refuse(op, 2, "A and B of one dtype on CUDA", why, len);
		if (c->dtype != a->dtype && c->dtype != RF_F32)
			return rf__refuse(op, 0, "C of A's dtype or f32 on CUDA", why, len);
		return 1;
	}
	case RF__OP_CONV_FWD:
	case RF__OP_CONV_BWD_DATA:
	case RF__OP_CONV_BWD_FILTER:
		if (!dnn) {
			/* im2col + cuBLAS: f32 row-major */
			if ((i = rf__op_first_not(op, RF_F32, RF_LAYOUT_ROWMAJOR)) >= 0)
				return rf__refuse(op, i, "without cuDNN CUDA convolves f32 row-major "
						  "tensors only", why, len);
			return 1;
		}
		if ((i = rf__uniform(op, 0, 0)) >= 0)
			return rf__refuse(op, i, "a CUDA convolution takes x, w, y (and the bias) "
					  "of one float dtype, the 4-D ones in one layout", why, len);
		return 1;
	case RF__OP_AVGPOOL_FWD:
	case RF__OP_AVGPOOL_BWD:
		/* our kernels: any float dtype, row-major or NHWC, f32 sums */
		if ((i = rf__uniform(op, 0, 0)) >= 0)
			return rf__refuse(op, i, "average pooling takes x and y of one float dtype "
					  "and one layout on CUDA", why, len);
		return 1;
	case RF__OP_BN_TRAIN: case RF__OP_BN_EVAL: case RF__OP_BN_BWD:
	case RF__OP_BN_RELU_TRAIN: case RF__OP_BN_RELU_EVAL: case RF__OP_BN_RELU_BWD:
	case RF__OP_MAXPOOL_FWD: case RF__OP_MAXPOOL_BWD:
	case RF__OP_GAP_FWD: case RF__OP_GAP_BWD: {
		/* batch norm's per-channel operands (the signature's) are f32: cuDNN's
		 * derived parameter type for f32, bf16 and f16 data */
		unsigned params = rf__chan_mask(op);
		if (!dnn && !rf__cuda_bn_ours(op)) {
			snprintf(why, len, "batch norm (NCHW), max and global pooling run through "
				 "cuDNN on CUDA devices, and here %s", dnn_why ? dnn_why : "it is missing");
			return 0;
		}
		for (unsigned k = 0; k < op->nt; k++) {
			const struct rf__tref *t = rf__op_tc(op, k);
			if ((params >> k & 1) && t->dtype && t->dtype != RF_F32)
				return rf__refuse(op, (int)k, "batch norm's parameters and statistics "
						  "are f32 on CUDA", why, len);
		}
		if ((i = rf__uniform(op, params, 0)) >= 0)
			return rf__refuse(op, i, "x and y of one float dtype and one layout on "
					  "CUDA", why, len);
		return 1;
	}
	case RF__OP_RELU_FWD: case RF__OP_RELU_BWD: case RF__OP_AXPY: case RF__OP_SCALE:
	case RF__OP_SUM: case RF__OP_ADD_RELU:
		if ((i = rf__elementwise(op, 0)) >= 0)
			return rf__refuse(op, i, "CUDA's elementwise kernels take tensors of one "
					  "float dtype all laid out alike (rf_convert first)", why, len);
		return 1;
	case RF__OP_U8_F32:
		/* the decode writes any float dtype, row-major or NHWC (the u8 input is read
		 * in logical order) */
		if (op->o.dec.in.layout != RF_LAYOUT_ROWMAJOR)
			return rf__refuse(op, 1, "CUDA decodes u8 read in row-major order", why, len);
		return 1;
	case RF__OP_SGD: case RF__OP_SGD_MOMENTUM: case RF__OP_ADAMW:
		if ((i = rf__elementwise(op, 1)) >= 0)
			return rf__refuse(op, i, "CUDA's optimizer updates take f32 tensors (the "
					  "masters) all laid out alike", why, len);
		return 1;
	default:
		break;
	}
	if ((i = rf__op_first_not(op, RF_F32, RF_LAYOUT_ROWMAJOR)) >= 0)
		return rf__refuse(op, i, "CUDA devices run this op on f32 row-major tensors "
				  "(rf_convert to them first)", why, len);
	return 1;
}

/* ---- a convolution's path ------------------------------------------------------------ */

int rf__cuda_conv_math(enum rf_tdtype dt, int tf32)
{
	if (dt == RF_BF16 || dt == RF_F16)
		return RF__PLAN_MATH_TENSOR;
	return tf32 ? RF__PLAN_MATH_DEFAULT : RF__PLAN_MATH_FMA;
}

static int rf__is_tensor_math(int m)
{
	return m == RF__PLAN_MATH_TENSOR || m == RF__PLAN_MATH_TENSOR_CONV;
}

int rf__cuda_pick_algo(const struct rf__algo_perf *perf, int n, size_t budget, int want,
		       int *other)
{
	*other = 0;
	for (int pass = 0; pass < 3; pass++)
		for (int i = 0; i < n; i++) {
			int fma = 0, ok, m = perf[i].math;
			for (int j = 0; want == RF__PLAN_MATH_FMA && pass && j < n; j++)
				fma |= perf[j].algo == perf[i].algo &&
				       perf[j].math == RF__PLAN_MATH_FMA;
			if (want == RF__PLAN_MATH_FMA)
				ok = pass == 0 ? m == RF__PLAN_MATH_FMA : pass == 1 && !fma;
			else if (want == RF__PLAN_MATH_TENSOR)
				ok = pass == 0 ? rf__is_tensor_math(m)
				   : pass == 1 ? m != RF__PLAN_MATH_FMA : 1;
			else
				ok = pass == 0 ? m != RF__PLAN_MATH_FMA : pass == 1;
			if (perf[i].usable && ok && perf[i].memory <= budget) {
				*other = want == RF__PLAN_MATH_FMA && pass;
				return i;
			}
		}
	return -1;
}

int rf__cuda_run_math(int want, int entry_math)
{
	if (want == RF__PLAN_MATH_FMA)
		return RF__PLAN_MATH_FMA;
	if (want == RF__PLAN_MATH_TENSOR && entry_math == RF__PLAN_MATH_DEFAULT)
		return RF__PLAN_MATH_TENSOR;
	return entry_math;
}

int rf__cuda_conv_empty(const struct rf__op *op)
{
	const struct rf__conv2d *s = &op->p.conv.s;

	return !s->n || !s->c || !s->o || !s->h || !s->w;
}

int rf__cuda_stream_frees(int own_timeout, int device_hung, unsigned owed, int waker_joined)
{
	if (own_timeout)
		return !owed && waker_joined;
	return !device_hung;
}

int rf__cuda_dnn_outcome(int ran, int refused)
{
	return ran ? 0 : refused ? -ENOTSUP : -EIO;
}

enum rf__conv_path rf__cuda_conv_path(const struct rf__op *op, int dnn, int dnn_no,
				      int fallback_ok, char *why, size_t len)
{
	const struct rf__conv2d *s = &op->p.conv.s;
	int im2col = rf__cuda_im2col_ok(op), n;
	char b[96];

	if (dnn && !dnn_no)
		return RF__CONV_DNN;
	/* an empty shape is no fallback: cuDNN takes no zero dimension, and im2col
	 * computes what is there to compute (the bias, zeroed gradients) */
	if (im2col && (!dnn || fallback_ok || rf__cuda_conv_empty(op)))
		return RF__CONV_IM2COL;
	/* refused: the op and its shape, then why */
	n = snprintf(why, len, "%s %dx%d, %d -> %d channels, %dx%d input, batch %d: %s",
		     op->name ? op->name : rf__opsigs[op->code].name, s->kh, s->kw, s->c, s->o,
		     s->h, s->w, s->n,
		     dnn ? "cuDNN has no deterministic algorithm that runs it" : "cuDNN is not loaded");
	if (n < 0 || (size_t)n >= len)
		return RF__CONV_REFUSE;
	if (!im2col) {
		int i = rf__op_first_not(op, RF_F32, RF_LAYOUT_ROWMAJOR);
		snprintf(why + n, len - (size_t)n, ", and im2col + cuBLAS computes f32 row-major "
			 "tensors only (%s); a larger RF_CUDNN_WORKSPACE, or --precision fp32 "
			 "--layout rowmajor, may help",
			 rf__tref_describe(op, (unsigned)(i < 0 ? 0 : i), b, sizeof(b)));
	} else {
		snprintf(why + n, len - (size_t)n, ", and this device takes no fallback path "
			 "(RF_CUDA_ALLOW_FALLBACK=1 runs it by im2col + cuBLAS, slower)");
	}
	return RF__CONV_REFUSE;
}

/* ---- CUDA graphs --------------------------------------------------------------------- */

enum rf__cap_need rf__cuda_cap_need(const struct rf__op *o, int dnn)
{
	switch (o->code) {
	case RF__OP_GEMM: case RF__OP_BIAS_ADD: case RF__OP_BIAS_GRAD: case RF__OP_RELU_FWD:
	case RF__OP_RELU_BWD: case RF__OP_XENT: case RF__OP_AVGPOOL_FWD: case RF__OP_AVGPOOL_BWD:
	case RF__OP_AXPY: case RF__OP_SCALE: case RF__OP_SUM: case RF__OP_U8_F32:
	case RF__OP_U8_I32: case RF__OP_FILL: case RF__OP_CONVERT: case RF__OP_ADD_RELU:
		return RF__CAP_ALWAYS;
	case RF__OP_SGD: case RF__OP_SGD_MOMENTUM:
		/* a live lr is read from the host when it runs */
		return o->p.sgd.live ? RF__CAP_NEVER : RF__CAP_ALWAYS;
	case RF__OP_ADAMW:
		return o->p.adamw.live ? RF__CAP_NEVER : RF__CAP_ALWAYS;
	case RF__OP_CONV_FWD: case RF__OP_CONV_BWD_DATA: case RF__OP_CONV_BWD_FILTER:
		/* without cuDNN our im2col (its workspace the op's own); with it, once the
		 * handle and the plan exist (made when the first launch ran op by op) */
		return dnn ? RF__CAP_DNN_READY : RF__CAP_ALWAYS;
	case RF__OP_BN_TRAIN: case RF__OP_BN_EVAL: case RF__OP_BN_BWD:
	case RF__OP_BN_RELU_TRAIN: case RF__OP_BN_RELU_EVAL: case RF__OP_BN_RELU_BWD:
	case RF__OP_MAXPOOL_FWD: case RF__OP_MAXPOOL_BWD: case RF__OP_GAP_FWD: case RF__OP_GAP_BWD:
		/* NHWC batch norm: our kernels, on the op's workspace; the rest through
		 * cuDNN, whose handle is made at first use, which must not be inside a
		 * capture */
		if (rf__cuda_bn_ours(o))
			return RF__CAP_ALWAYS;
		return dnn ? RF__CAP_DNN_READY : RF__CAP_NEVER;
	case RF__OP_COPY:
		/* pageable memory is staged by the driver, which a graph cannot hold */
		return o->p.copy.bytes ? RF__CAP_PINNED : RF__CAP_ALWAYS;
	default:                        /* PRNG (its counter), HOST */
		return RF__CAP_NEVER;
	}
}
