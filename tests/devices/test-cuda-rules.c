/* test-cuda-rules: the rules that decide what runs on a CUDA device
 * (devices/cuda/cuda-rules.h), checked without a GPU, in every build.
 *
 *  - What the backend runs, for every opcode in every float dtype and layout, with
 *    cuDNN loaded and without: the ops a model pushes in bf16 or NHWC (batch norm
 *    with its per-channel operands f32, the fused BN+ReLU, average pooling, the
 *    elementwise ops) are run; what is refused names the operand and the rule; batch
 *    norm's per-channel operands in bf16 are refused by name.
 *  - A GEMM's cuBLAS call: every dtype combination the backend accepts goes in a
 *    combination cublasGemmEx has (FAST_TF32 with f32 operands only), in either math.
 *  - A convolution's path: cuDNN's plan when it has one; im2col + cuBLAS only for
 *    f32 row-major operands; a bf16, f16 or NHWC convolution cuDNN cannot run is
 *    refused with a message naming the op, its shape and the operand -- never
 *    computed by im2col on data it would misread; on a device that takes no
 *    fallback path, refused too, naming RF_CUDA_ALLOW_FALLBACK; an empty shape is no
 *    fallback (im2col there, f32 row-major); a cuDNN refusal in any math goes to this
 *    rule (-ENOTSUP), other failures are errors.
 *  - A convolution's algorithm from cuDNN's heuristic list: in fp32 an FMA entry,
 *    else an algorithm reported only with another math type (run in FMA math), never
 *    one whose FMA entry was passed over; in tf32 a tensor-core entry first; never a
 *    nondeterministic, failed or over-budget one.
 *  - What a CUDA graph may capture: never an op that reads host state when it runs (a
 *    live learning rate, a PRNG's counter, a host op); cuDNN's ops only once their
 *    handle and plan exist; copies only of device or page-locked memory.
 *  - When a captured graph must be captured again: the stream's workspace generation
 *    moved on.
 *  - Batch norm's path: NHWC tensors on our kernels (always capturable, a workspace of
 *    partial sums whose chunks fit a grid at any size), NCHW on cuDNN's.
 * The capability probe (rf_device_kind_supports's op) is what is asked, as a model
 * computing in that format pushes it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "backend-impl.h"
#include "../../devices/cuda/cuda-rules.h"
#include "../../devices/cuda/kernels-cuda-impl.h"
#include "../test-util.h"

static const enum rf_tdtype dts[] = { RF_F32, RF_BF16, RF_F16 };
static const enum rf_layout lays[] = { RF_LAYOUT_ROWMAJOR, RF_LAYOUT_NHWC };

static int supports(int code, enum rf_tdtype dt, enum rf_layout lay, int dnn, char *why,
		    size_t len)
{
	struct rf__op op;
	struct rf__tref in1;

	memset(&in1, 0, sizeof(in1));
	rf__probe_op(&op, &in1, code, NULL, dt, lay);
	why[0] = 0;
	return rf__cuda_rule_supports(&op, dnn, dnn ? NULL : "not loaded here", why, len);
}

static int is(int code, int a, int b, int c, int d)
{
	return code == a || code == b || code == c || code == d;
}

/* The ops a model's convolutional part pushes in its compute format (train/net.c):
 * each must run in every float format when cuDNN is loaded. */
static const int model_ops[] = {
	RF__OP_CONV_FWD, RF__OP_CONV_BWD_DATA, RF__OP_CONV_BWD_FILTER, RF__OP_BN_TRAIN,
	RF__OP_BN_EVAL, RF__OP_BN_BWD, RF__OP_BN_RELU_TRAIN, RF__OP_BN_RELU_EVAL,
	RF__OP_BN_RELU_BWD, RF__OP_RELU_FWD, RF__OP_RELU_BWD, RF__OP_ADD_RELU, RF__OP_SUM,
	RF__OP_AVGPOOL_FWD, RF__OP_AVGPOOL_BWD, RF__OP_MAXPOOL_FWD, RF__OP_MAXPOOL_BWD,
	RF__OP_GAP_FWD, RF__OP_GAP_BWD, RF__OP_AXPY, RF__OP_SCALE, RF__OP_CONVERT, RF__OP_COPY,
};

static void check_supports(void)
{
	char why[256];
	unsigned checked = 0;

	for (unsigned k = 0; k < sizeof(model_ops) / sizeof(model_ops[0]); k++)
		for (unsigned a = 0; a < 3; a++)
			for (unsigned l = 0; l < 2; l++) {
				int ok = supports(model_ops[k], dts[a], lays[l], 1, why, sizeof(why));
				if (!ok)
					fprintf(stderr, "%s %s %s refused: %s\n",
						rf__opsigs[model_ops[k]].name,
						rf_tdtype_name(dts[a]), rf_layout_name(lays[l]), why);
				CHECK(ok);
				checked++;
			}
	/* every refusal names an operand (or the reason) */
	for (int code = 0; code < RF__OP_COUNT; code++)
		for (unsigned a = 0; a < 3; a++)
			for (unsigned l = 0; l < 2; l++)
				for (int dnn = 0; dnn < 2; dnn++)
					if (!supports(code, dts[a], lays[l], dnn, why, sizeof(why)))
						CHECK(why[0]);
	/* without cuDNN: convolutions f32 row-major only; batch norm and max pooling not */
	CHECK(supports(RF__OP_CONV_FWD, RF_F32, RF_LAYOUT_ROWMAJOR, 0, why, sizeof(why)));
	CHECK(!supports(RF__OP_CONV_FWD, RF_BF16, RF_LAYOUT_ROWMAJOR, 0, why, sizeof(why)));
	CHECK(strstr(why, "f32 row-major"));
	CHECK(!supports(RF__OP_BN_TRAIN, RF_F32, RF_LAYOUT_ROWMAJOR, 0, why, sizeof(why)));
	CHECK(strstr(why, "not loaded here"));
	/* the fused ReLU + 2x2 pooling has no CUDA kernel (the model then pushes both) */
	CHECK(!supports(RF__OP_RELU_AVGPOOL2_FWD, RF_F32, RF_LAYOUT_ROWMAJOR, 1, why, sizeof(why)));
	/* the optimizer takes f32 masters only */
	CHECK(!supports(RF__OP_SGD, RF_BF16, RF_LAYOUT_ROWMAJOR, 1, why, sizeof(why)));

	/* batch norm's per-channel operands in bf16: refused, by name */
	{
		struct rf__op op;
		struct rf__tref in1 = { 0 };
		rf__probe_op(&op, &in1, RF__OP_BN_TRAIN, NULL, RF_BF16, RF_LAYOUT_NHWC);
		CHECK(rf__cuda_rule_supports(&op, 1, NULL, why, sizeof(why)));
		op.o.bn_train.gamma.dtype = RF_BF16;
		CHECK(!rf__cuda_rule_supports(&op, 1, NULL, why, sizeof(why)));
		CHECK(strstr(why, "gamma") && strstr(why, "parameters"));
		/* x and y of two dtypes */
		rf__probe_op(&op, &in1, RF__OP_BN_TRAIN, NULL, RF_BF16, RF_LAYOUT_NHWC);
		op.o.bn_train.y.dtype = RF_F32;
		CHECK(!rf__cuda_rule_supports(&op, 1, NULL, why, sizeof(why)));
		/* average pooling: x and y of one layout */
		rf__probe_op(&op, &in1, RF__OP_AVGPOOL_FWD, NULL, RF_BF16, RF_LAYOUT_NHWC);
		CHECK(rf__cuda_rule_supports(&op, 0, NULL, why, sizeof(why)));
		op.o.avgpool_fwd.x.layout = RF_LAYOUT_ROWMAJOR;
		CHECK(!rf__cuda_rule_supports(&op, 0, NULL, why, sizeof(why)));
		CHECK(strstr(why, "x ("));
	}
	fprintf(stderr, "supports: %u op/dtype/layout cases of a model's ops run\n", checked);
}

static void check_conv_path(void)
{
	static const int convs[] = { RF__OP_CONV_FWD, RF__OP_CONV_BWD_DATA, RF__OP_CONV_BWD_FILTER };
	char why[300];
	unsigned refused = 0;

	for (unsigned k = 0; k < 3; k++)
		for (unsigned a = 0; a < 3; a++)
			for (unsigned l = 0; l < 2; l++) {
				struct rf__op op;
				struct rf__tref in1 = { 0 };
				int f32rm = dts[a] == RF_F32 && lays[l] == RF_LAYOUT_ROWMAJOR;
				enum rf__conv_path p;

				rf__probe_op(&op, &in1, convs[k], NULL, dts[a], lays[l]);
				op.p.conv.s = (struct rf__conv2d){ 0 };
				op.p.conv.s.n = 96, op.p.conv.s.c = 64, op.p.conv.s.o = 128;
				op.p.conv.s.h = op.p.conv.s.w = 14;
				op.p.conv.s.kh = op.p.conv.s.kw = 3;
				op.p.conv.s.stride = 2, op.p.conv.s.pad = 1;
				/* cuDNN has a plan: its path, whatever the format */
				CHECK_EQ(rf__cuda_conv_path(&op, 1, 0, 0, why, sizeof(why)),
					 RF__CONV_DNN);
				/* cuDNN has none: im2col only for what it computes */
				p = rf__cuda_conv_path(&op, 1, 1, 1, why, sizeof(why));
				CHECK_EQ(p, f32rm ? RF__CONV_IM2COL : RF__CONV_REFUSE);
				CHECK_EQ(rf__cuda_im2col_ok(&op), f32rm);
				if (p == RF__CONV_REFUSE) {
					/* the op, the shape, the operand and its format */
					CHECK(strstr(why, rf__opsigs[convs[k]].name));
					CHECK(strstr(why, "3x3, 64 -> 128 channels, 14x14 input, batch 96"));
					CHECK(strstr(why, rf_tdtype_name(dts[a])));
					CHECK(strstr(why, "f32 row-major"));
					refused++;
				}
				/* without cuDNN (supports_op let only f32 row-major through) im2col
				 * is the path, not a fallback */
				if (f32rm)
					CHECK_EQ(rf__cuda_conv_path(&op, 0, 0, 0, why, sizeof(why)),
						 RF__CONV_IM2COL);
				/* a device that takes no fallback refuses even what im2col computes,
				 * saying how to allow it */
				if (f32rm) {
					CHECK_EQ(rf__cuda_conv_path(&op, 1, 1, 0, why, sizeof(why)),
						 RF__CONV_REFUSE);
					CHECK(strstr(why, "3x3, 64 -> 128 channels, 14x14 input, batch 96"));
					CHECK(strstr(why, "no fallback path") &&
					      strstr(why, "RF_CUDA_ALLOW_FALLBACK=1"));
				}
				/* one operand of another dtype is enough to refuse */
				if (f32rm) {
					op.o.t[1].dtype = RF_BF16;
					CHECK_EQ(rf__cuda_conv_path(&op, 1, 1, 1, why, sizeof(why)),
						 RF__CONV_REFUSE);
				}
			}
	CHECK_EQ(refused, 3 * 5);
	fprintf(stderr, "conv path: im2col for f32 row-major only; %u fallbacks refused\n",
		refused);
	/* an empty shape (cuDNN takes no zero dimension) is no fallback: im2col on a device
	 * that takes none, for f32 row-major; other formats refused as any */
	for (int d = 0; d < 5; d++) {
		struct rf__op op;
		struct rf__tref in1 = { 0 };
		const struct rf__conv2d shape = { .n = 8, .c = 3, .h = 5, .w = 5, .o = 4, .kh = 3,
						  .kw = 3, .pad = 1 };
		rf__probe_op(&op, &in1, RF__OP_CONV_FWD, NULL, RF_F32, RF_LAYOUT_ROWMAJOR);
		op.p.conv.s = shape;
		CHECK(!rf__cuda_conv_empty(&op));
		CHECK_EQ(rf__cuda_conv_path(&op, 1, 1, 0, why, sizeof(why)), RF__CONV_REFUSE);
		int *dim[5] = { &op.p.conv.s.n, &op.p.conv.s.c, &op.p.conv.s.o, &op.p.conv.s.h,
				&op.p.conv.s.w };
		*dim[d] = 0;
		CHECK(rf__cuda_conv_empty(&op));
		CHECK_EQ(rf__cuda_conv_path(&op, 1, 1, 0, why, sizeof(why)), RF__CONV_IM2COL);
		rf__probe_op(&op, &in1, RF__OP_CONV_FWD, NULL, RF_BF16, RF_LAYOUT_NHWC);
		op.p.conv.s = shape;
		op.p.conv.s.n = 0;
		CHECK_EQ(rf__cuda_conv_path(&op, 1, 1, 1, why, sizeof(why)), RF__CONV_REFUSE);
	}
	/* what cuDNN's answer becomes: a refusal (BAD_PARAM, NOT_SUPPORTED) is the path
	 * rule's in any math -- it failed the op in tf32 before -- other failures errors */
	CHECK_EQ(rf__cuda_dnn_outcome(1, 0), 0);
	CHECK_EQ(rf__cuda_dnn_outcome(0, 1), -ENOTSUP);
	CHECK_EQ(rf__cuda_dnn_outcome(0, 0), -EIO);
	/* a stream's teardown after a hang: its own timeout frees only what nothing on the
	 * stuck GPU still uses; a sibling of a hung stream frees nothing (cudnnDestroy and
	 * cudaFree synchronise the device: they blocked for good) */
	CHECK_EQ(rf__cuda_stream_frees(0, 0, 0, 1), 1);
	CHECK_EQ(rf__cuda_stream_frees(1, 1, 0, 1), 1);
	CHECK_EQ(rf__cuda_stream_frees(1, 1, 2, 1), 0);
	CHECK_EQ(rf__cuda_stream_frees(1, 1, 0, 0), 0);
	CHECK_EQ(rf__cuda_stream_frees(0, 1, 0, 1), 0);
	fprintf(stderr, "conv path: empty shapes by im2col, not counted; cuDNN's refusals the "
		"path rule's\n");
}

static void check_capture(void)
{
	unsigned never = 0;

	for (int code = 0; code < RF__OP_COUNT; code++)
		for (int dnn = 0; dnn < 2; dnn++) {
			struct rf__op op;
			struct rf__tref in1 = { 0 };
			enum rf__cap_need n;

			rf__probe_op(&op, &in1, code, NULL, RF_F32, RF_LAYOUT_ROWMAJOR);
			n = rf__cuda_cap_need(&op, dnn);
			if (code == RF__OP_HOST || code == RF__OP_RAND_UNIFORM ||
			    code == RF__OP_RAND_NORMAL) {
				CHECK_EQ(n, RF__CAP_NEVER); /* host code, a PRNG's counter */
				never++;
			}
			if (is(code, RF__OP_CONV_FWD, RF__OP_CONV_BWD_DATA, RF__OP_CONV_BWD_FILTER, -1))
				CHECK_EQ(n, dnn ? RF__CAP_DNN_READY : RF__CAP_ALWAYS);
			if (is(code, RF__OP_BN_TRAIN, RF__OP_BN_BWD, RF__OP_MAXPOOL_FWD, RF__OP_GAP_BWD) ||
			    is(code, RF__OP_BN_RELU_TRAIN, RF__OP_BN_RELU_BWD, RF__OP_BN_EVAL, -1))
				CHECK_EQ(n, dnn ? RF__CAP_DNN_READY : RF__CAP_NEVER);
			if (is(code, RF__OP_GEMM, RF__OP_RELU_FWD, RF__OP_AVGPOOL_FWD, RF__OP_CONVERT) ||
			    is(code, RF__OP_XENT, RF__OP_U8_F32, RF__OP_FILL, RF__OP_ADD_RELU))
				CHECK_EQ(n, RF__CAP_ALWAYS);
			if (code == RF__OP_SGD || code == RF__OP_SGD_MOMENTUM) {
				CHECK_EQ(n, RF__CAP_ALWAYS);
				op.p.sgd.live = (void *)&op;    /* a live lr: read when it runs */
				CHECK_EQ(rf__cuda_cap_need(&op, dnn), RF__CAP_NEVER);
			}
			if (code == RF__OP_ADAMW) {
				CHECK_EQ(n, RF__CAP_ALWAYS);
				op.p.adamw.live = (void *)&op;
				CHECK_EQ(rf__cuda_cap_need(&op, dnn), RF__CAP_NEVER);
			}
			if (code == RF__OP_COPY) {
				CHECK_EQ(n, RF__CAP_ALWAYS);      /* 0 bytes: nothing to copy */
				op.p.copy.bytes = 64;
				CHECK_EQ(rf__cuda_cap_need(&op, dnn), RF__CAP_PINNED);
			}
		}
	/* re-capture: a graph recorded at one workspace generation replays only at it */
	CHECK(rf__cg_replayable(3, 3));
	CHECK(!rf__cg_replayable(3, 4));
	CHECK(!rf__cg_replayable(0, 1));
	fprintf(stderr, "capture: %u never-captured op kinds checked; stale graphs re-recorded\n",
		never);
}

/* batch norm's path: NHWC on our kernels (capturable always, a workspace of partial
 * sums), NCHW on cuDNN's; the workspace's chunks fit a grid's y extent at any size */
static void check_bn_path(void)
{
	static const int bns[] = { RF__OP_BN_TRAIN, RF__OP_BN_EVAL, RF__OP_BN_BWD,
				   RF__OP_BN_RELU_TRAIN, RF__OP_BN_RELU_EVAL, RF__OP_BN_RELU_BWD };
	static const int64_t Ms[] = { 1, 7, 8, 512, 513, 200704, 2097152, 2097153, 40000000,
				      (int64_t)1 << 31, (int64_t)1 << 40 };
	unsigned ours = 0;

	for (unsigned i = 0; i < sizeof(bns) / sizeof(bns[0]); i++)
		for (unsigned a = 0; a < 3; a++)
			for (int nhwc = 0; nhwc < 2; nhwc++) {
				struct rf__op op;
				struct rf__tref in1 = { 0 };
				rf__probe_op(&op, &in1, bns[i], NULL, dts[a],
					     nhwc ? RF_LAYOUT_NHWC : RF_LAYOUT_ROWMAJOR);
				op.p.bn.s.n = 256, op.p.bn.s.c = 64, op.p.bn.h = 28, op.p.bn.w = 28;
				int eval = bns[i] == RF__OP_BN_EVAL || bns[i] == RF__OP_BN_RELU_EVAL;
				CHECK_EQ(rf__cuda_bn_ours(&op), nhwc);
				/* 200,704 rows in 392 chunks of 512: 2 x 392 partials + 3 factors
				 * per channel; the evaluation's the factors only */
				CHECK_EQ(rf__cuda_bn_ws(&op), !nhwc ? 0 : eval ? (size_t)3 * 64 * 4
								 : (size_t)(2 * 392 + 3) * 64 * 4);
				/* ours need no cuDNN; cuDNN's (NCHW) do */
				CHECK_EQ(rf__cuda_rule_supports(&op, 0, NULL, (char[200]){ 0 }, 200),
					 nhwc);
				CHECK(rf__cuda_rule_supports(&op, 1, NULL, (char[200]){ 0 }, 200));
				for (int dnn = 0; dnn < 2; dnn++)
					CHECK_EQ(rf__cuda_cap_need(&op, dnn),
						 nhwc ? RF__CAP_ALWAYS
						      : dnn ? RF__CAP_DNN_READY : RF__CAP_NEVER);
				/* an empty batch: no workspace (nothing runs) */
				op.p.bn.s.n = 0;
				CHECK_EQ(rf__cuda_bn_ws(&op), 0);
				ours += nhwc;
			}
	/* other ops in NHWC are no batch norm */
	{
		struct rf__op op;
		struct rf__tref in1 = { 0 };
		rf__probe_op(&op, &in1, RF__OP_AVGPOOL_FWD, NULL, RF_F32, RF_LAYOUT_NHWC);
		CHECK(!rf__cuda_bn_ours(&op) && rf__cuda_bn_ws(&op) == 0);
		rf__probe_op(&op, &in1, RF__OP_MAXPOOL_FWD, NULL, RF_F32, RF_LAYOUT_NHWC);
		CHECK(!rf__cuda_bn_ours(&op) && rf__cuda_bn_ws(&op) == 0);
	}
	/* a convolution's bias gradient: ours where dy is NHWC (its partials), else not */
	for (int nhwc = 0; nhwc < 2; nhwc++)
		for (unsigned a = 0; a < 3; a++) {
			struct rf__op op;
			struct rf__tref in1 = { 0 };
			rf__probe_op(&op, &in1, RF__OP_CONV_BWD_FILTER, NULL, dts[a],
				     nhwc ? RF_LAYOUT_NHWC : RF_LAYOUT_ROWMAJOR);
			op.p.conv.s = (struct rf__conv2d){ .n = 256, .c = 64, .h = 28, .w = 28,
							   .o = 128, .kh = 3, .kw = 3, .stride = 2,
							   .pad = 1 };
			CHECK(op.o.conv_bwd_filter.db.dtype);       /* the probe has a db */
			CHECK_EQ(rf__cuda_bias_grad_ours(&op), nhwc);
			/* 256 x 14 x 14 = 50,176 rows in 98 chunks of 512, 128 channels */
			CHECK_EQ(rf__cuda_bias_grad_ws(&op), nhwc ? (size_t)98 * 128 * 4 : 0);
			op.o.conv_bwd_filter.db.dtype = 0;          /* no bias */
			CHECK(!rf__cuda_bias_grad_ours(&op) && !rf__cuda_bias_grad_ws(&op));
			rf__probe_op(&op, &in1, RF__OP_CONV_FWD, NULL, dts[a], RF_LAYOUT_NHWC);
			CHECK(!rf__cuda_bias_grad_ours(&op));
		}
	for (unsigned i = 0; i < sizeof(Ms) / sizeof(Ms[0]); i++) {
		int64_t M = Ms[i], ch = rf__kc_bn_nhwc_chunk(M), R = (M + ch - 1) / ch;
		CHECK(ch >= 512 && ch % 8 == 0);
		CHECK(R >= 1 && R <= 4096);            /* partials per channel, a grid's y */
		CHECK(R * ch >= M && (R - 1) * ch < M); /* every row in one chunk */
		CHECK_EQ(rf__kc_bn_nhwc_ws(M, 3, 0), (size_t)(2 * R + 3) * 3 * sizeof(float));
		CHECK_EQ(rf__kc_bn_nhwc_ws(M, 3, 1), (size_t)3 * 3 * sizeof(float));
		CHECK_EQ(rf__kc_colsum_nhwc_ws(M, 3), (size_t)R * 3 * sizeof(float));
	}
	CHECK_EQ(rf__kc_bn_nhwc_chunk(2097152), 512);  /* 4096 chunks of 512 */
	CHECK_EQ(rf__kc_bn_nhwc_chunk(2097153), 520);
	CHECK_EQ(rf__kc_bn_nhwc_ws(0, 64, 0), 0);
	CHECK_EQ(rf__kc_bn_nhwc_ws(100, 0, 0), 0);
	fprintf(stderr, "batch norm: %u NHWC op/dtype cases on our kernels, the rest on cuDNN\n",
		ours);
}

/* the math asked, the pick from lists of { algo, usable, math, memory }, the math run */
static void check_pick(void)
{
	enum { D = RF__PLAN_MATH_DEFAULT, F = RF__PLAN_MATH_FMA, T = RF__PLAN_MATH_TENSOR,
	       TC = RF__PLAN_MATH_TENSOR_CONV };
	const struct rf__algo_perf a[] = { { 1, 1, D, 0 }, { 2, 1, F, 10 } };
	const struct rf__algo_perf b[] = { { 1, 0, F, 0 }, { 3, 1, D, 0 }, { 4, 1, T, 0 } };
	const struct rf__algo_perf c[] = { { 1, 1, D, 10 }, { 1, 1, F, 1000 } };
	const struct rf__algo_perf d[] = { { 1, 1, F, 0 }, { 2, 1, D, 0 } };
	/* bf16 and f16: tensor-op entries first, then any but FMA, then any */
	const struct rf__algo_perf e[] = { { 1, 1, F, 0 }, { 2, 1, D, 0 }, { 0, 1, TC, 0 },
					   { 6, 1, T, 50 } };
	int other = -1;

	/* the math asked: as PyTorch asks it */
	CHECK_EQ(rf__cuda_conv_math(RF_F32, 0), F);
	CHECK_EQ(rf__cuda_conv_math(RF_F32, 1), D);
	CHECK_EQ(rf__cuda_conv_math(RF_BF16, 0), T);       /* whatever the precision says */
	CHECK_EQ(rf__cuda_conv_math(RF_BF16, 1), T);
	CHECK_EQ(rf__cuda_conv_math(RF_F16, 1), T);

	CHECK_EQ(rf__cuda_pick_algo(a, 2, 100, F, &other), 1);      /* fp32: the FMA entry */
	CHECK_EQ(other, 0);
	CHECK_EQ(rf__cuda_pick_algo(a, 2, 5, F, &other), 0);        /* it is over budget: */
	CHECK_EQ(other, 1);                                         /* algo 1 in FMA math */
	CHECK_EQ(rf__cuda_pick_algo(b, 3, 100, F, &other), 1);      /* no usable FMA entry */
	CHECK_EQ(other, 1);                                         /* run in FMA math */
	CHECK_EQ(rf__cuda_pick_algo(c, 2, 100, F, &other), -1);     /* its FMA entry too big */
	CHECK_EQ(rf__cuda_pick_algo(d, 2, 100, D, &other), 1);      /* tf32: tensor cores */
	CHECK_EQ(other, 0);
	CHECK_EQ(rf__cuda_pick_algo(d, 1, 100, D, &other), 0);      /* then any */
	CHECK_EQ(other, 0);
	CHECK_EQ(rf__cuda_pick_algo(b, 1, 100, D, &other), -1);     /* failed or nondeterministic */
	CHECK_EQ(rf__cuda_pick_algo(e, 4, 100, T, &other), 2);      /* bf16: tensor-op first */
	CHECK_EQ(other, 0);
	CHECK_EQ(rf__cuda_pick_algo(e, 4, 100, D, &other), 1);      /* tf32 would take algo 2 */
	CHECK_EQ(rf__cuda_pick_algo(e, 2, 100, T, &other), 1);      /* then not FMA */
	CHECK_EQ(rf__cuda_pick_algo(e, 1, 100, T, &other), 0);      /* then any */
	CHECK_EQ(other, 0);
	CHECK_EQ(rf__cuda_pick_algo(b, 1, 100, T, &other), -1);
	/* the math run */
	CHECK_EQ(rf__cuda_run_math(F, D), F);
	CHECK_EQ(rf__cuda_run_math(F, T), F);
	CHECK_EQ(rf__cuda_run_math(D, T), T);
	CHECK_EQ(rf__cuda_run_math(D, D), D);
	CHECK_EQ(rf__cuda_run_math(T, D), T);                       /* never default for bf16 */
	CHECK_EQ(rf__cuda_run_math(T, TC), TC);
	CHECK_EQ(rf__cuda_run_math(T, F), F);
	fprintf(stderr, "algorithm pick: fp32 FMA first, tf32 tensor cores first, bf16 and "
		"f16 in tensor-op math: ok\n");
}

/* cublasGemmEx's table of (Atype, Btype, Ctype) per compute type (the cuBLAS
 * documentation), for the float types the backend has: CUBLAS_COMPUTE_32F takes 16-bit
 * inputs with a 16-bit C of theirs or an f32 one, and f32 throughout;
 * CUBLAS_COMPUTE_32F_FAST_TF32 f32 throughout only; cublasSgemm is f32 throughout. */
static int cublas_takes(int call, int a, int b, int c)
{
	if (call == RF__KC_GEMM_32F)
		return a == b && (c == a || c == RF_F32);
	return a == RF_F32 && b == RF_F32 && c == RF_F32;
}

/* Every GEMM the backend accepts goes to cuBLAS in a combination cuBLAS has, in
 * either math: all f32 in fp32 by cublasSgemm (the bits it always gave), in tf32 on
 * TF32 tensor cores; 16-bit inputs in CUBLAS_COMPUTE_32F whatever the math (a bf16
 * GEMM at the default precision asked for FAST_TF32, which cuBLAS refuses). */
static void check_gemm_call(void)
{
	struct rf__op op;
	struct rf__tref in1 = { 0 };
	char why[200];
	unsigned ran = 0;

	for (unsigned ia = 0; ia < 3; ia++)
		for (unsigned ib = 0; ib < 3; ib++)
			for (unsigned ic = 0; ic < 3; ic++)
				for (int tf32 = 0; tf32 < 2; tf32++) {
					rf__probe_op(&op, &in1, RF__OP_GEMM, NULL, RF_F32,
						     RF_LAYOUT_ROWMAJOR);
					op.o.gemm.a.dtype = dts[ia];
					op.o.gemm.b.dtype = dts[ib];
					op.o.gemm.c.dtype = dts[ic];
					if (!rf__cuda_rule_supports(&op, 1, NULL, why, sizeof(why)))
						continue;
					int call = rf__cuda_gemm_call(dts[ia], dts[ib], dts[ic], tf32);
					CHECK(cublas_takes(call, dts[ia], dts[ib], dts[ic]));
					ran++;
				}
	CHECK_EQ(ran, 5 * 2);  /* f32; bf16 and f16 into themselves or f32 */
	CHECK_EQ(rf__cuda_gemm_call(RF_F32, RF_F32, RF_F32, 0), RF__KC_SGEMM);
	CHECK_EQ(rf__cuda_gemm_call(RF_F32, RF_F32, RF_F32, 1), RF__KC_GEMM_TF32);
	CHECK_EQ(rf__cuda_gemm_call(RF_BF16, RF_BF16, RF_BF16, 1), RF__KC_GEMM_32F);
	CHECK_EQ(rf__cuda_gemm_call(RF_F16, RF_F16, RF_F32, 0), RF__KC_GEMM_32F);
	fprintf(stderr, "gemm: %u accepted dtype/math cases, each a call cuBLAS has: ok\n", ran);
}

/* The compute capability's rule: bf16 operands and bf16 precision need 8.0; 0
 * (unknown) refuses nothing; f32 and f16 run on 7.5. */
static void check_cc(void)
{
	char why[256];
	struct rf__op op;
	struct rf__tref in1 = { 0 };
	static const int ccs[] = { 0, 75, 80, 86, 90, 100 };
	unsigned refused = 0;

	for (unsigned k = 0; k < sizeof(model_ops) / sizeof(model_ops[0]); k++)
		for (unsigned a = 0; a < 3; a++)
			for (unsigned c = 0; c < sizeof(ccs) / sizeof(ccs[0]); c++) {
				rf__probe_op(&op, &in1, model_ops[k], NULL, dts[a],
					     RF_LAYOUT_NHWC);
				why[0] = 0;
				int ok = rf__cuda_rule_cc(&op, ccs[c], why, sizeof(why));
				int want = !(dts[a] == RF_BF16 && ccs[c] && ccs[c] < 80);
				if (ok != want)
					fprintf(stderr, "%s %s cc %d: %d, expected %d (%s)\n",
						rf__opsigs[model_ops[k]].name,
						rf_tdtype_name(dts[a]), ccs[c], ok, want, why);
				CHECK(ok == want);
				if (!ok) {
					refused++;
					CHECK(strstr(why, "8.0") && strstr(why, "7.5") &&
					      strstr(why, "bf16"));
				}
			}
	CHECK(refused == sizeof(model_ops) / sizeof(model_ops[0]));
	/* one bf16 operand among f32 ones: named */
	rf__probe_op(&op, &in1, RF__OP_GEMM, NULL, RF_F32, RF_LAYOUT_ROWMAJOR);
	CHECK(rf__cuda_rule_cc(&op, 75, why, sizeof(why)));
	op.o.gemm.c.dtype = RF_BF16;
	CHECK(!rf__cuda_rule_cc(&op, 75, why, sizeof(why)));
	CHECK(!strncmp(why, "C (", 3) && strstr(why, "bf16") && strstr(why, "8.0"));
	/* precision */
	CHECK(!rf__cuda_rule_precision(RF_PRECISION_BF16, 75, why, sizeof(why)));
	CHECK(strstr(why, "precision bf16") && strstr(why, "7.5"));
	CHECK(rf__cuda_rule_precision(RF_PRECISION_BF16, 80, why, sizeof(why)));
	CHECK(rf__cuda_rule_precision(RF_PRECISION_BF16, 0, why, sizeof(why)));
	CHECK(rf__cuda_rule_precision(RF_PRECISION_TF32, 75, why, sizeof(why)));
	CHECK(rf__cuda_rule_precision(RF_PRECISION_DEFAULT, 75, why, sizeof(why)));
	fprintf(stderr, "cc: %u bf16 cases refused below 8.0, by name\n", refused);
}

/* How completions reach the reactor: the counter's mode from RF_CUDA_COUNTER, the
 * driver's cuStreamWriteValue64 and its trial write; RF_CUDA_WAKE; the open's check of
 * all three variables (a typo refused by name on any machine). */
static void check_completion_env(void)
{
	static const char *const bad[] = { "strem", "STREAM", " stream", "1", "kernel ", "no" };
	int want, have, ok;

	CHECK(rf__cuda_env_counter(NULL) == -1 && rf__cuda_env_counter("") == -1);
	CHECK(rf__cuda_env_counter("stream") == RF__CTR_STREAM);
	CHECK(rf__cuda_env_counter("kernel") == RF__CTR_KERNEL);
	CHECK(rf__cuda_env_counter("off") == RF__CTR_OFF);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(rf__cuda_env_counter(bad[i]) == -2);
	/* the mode, over every combination */
	for (want = -1; want <= RF__CTR_KERNEL; want++)
		for (have = 0; have < 2; have++)
			for (ok = 0; ok < 2; ok++) {
				int m = rf__cuda_counter_mode(want, have, have && ok);
				if (want == RF__CTR_OFF || want == RF__CTR_KERNEL)
					CHECK(m == want);
				else if (have && ok)
					CHECK(m == RF__CTR_STREAM);
				else
					CHECK(m == (want == RF__CTR_STREAM ? -ENOTSUP : RF__CTR_KERNEL));
			}
	CHECK(rf__cuda_env_wake(NULL) == 1 && rf__cuda_env_wake("") == 1);
	CHECK(rf__cuda_env_wake("waker") == 1 && rf__cuda_env_wake("hostfn") == 0);
	CHECK(rf__cuda_env_wake("host") == -1 && rf__cuda_env_wake("Waker") == -1);
	/* the open's check */
	setenv("RF_CUDA_COUNTER", "strem", 1);
	CHECK(rf__cuda_env_check() == -EINVAL);
	CHECK(strstr(rf_last_error(), "RF_CUDA_COUNTER=strem in the environment: expected"));
	setenv("RF_CUDA_COUNTER", "kernel", 1);
	setenv("RF_CUDA_WAKE", "sometimes", 1);
	CHECK(rf__cuda_env_check() == -EINVAL);
	CHECK(strstr(rf_last_error(), "RF_CUDA_WAKE=sometimes in the environment: expected"));
	setenv("RF_CUDA_WAKE", "hostfn", 1);
	setenv("RF_CUDA_WAKER_SPIN_US", "10x", 1);
	CHECK(rf__cuda_env_check() == -EINVAL);
	CHECK(strstr(rf_last_error(), "RF_CUDA_WAKER_SPIN_US"));
	setenv("RF_CUDA_WAKER_SPIN_US", "50", 1);
	CHECK(rf__cuda_env_check() == 0);
	unsetenv("RF_CUDA_COUNTER");
	unsetenv("RF_CUDA_WAKE");
	unsetenv("RF_CUDA_WAKER_SPIN_US");
	CHECK(rf__cuda_env_check() == 0);
	fprintf(stderr, "completion: the counter's mode, RF_CUDA_WAKE and the open's check: ok\n");
}

int main(void)
{
	check_supports();
	check_cc();
	check_completion_env();
	check_gemm_call();
	check_conv_path();
	check_pick();
	check_capture();
	check_bn_path();
	return 0;
}
