/* test-train-cuda-ops: every model rf-train trains on CUDA, in every compute format it
 * takes there (f32 for --precision fp32 and tf32, bf16 for bf16; row-major and NHWC),
 * pushes only ops the CUDA backend runs -- checked without a GPU.
 *
 * A CPU device stands in for a CUDA one: its test seam (device-impl.h: admit) makes it
 * admit only the ops the CUDA backend's rules (devices/cuda/cuda-rules.h, cuDNN taken
 * as loaded) also admit, both when the model asks what the device runs
 * (rf_model_set_format, the fusions) and for every op pushed. Each model is set to the
 * format, trained one step (forward, backward, SGD) and evaluated (forward without
 * training) on a small batch, its ops pushed and completed but not computed (the
 * device's dry_run seam: the values decide nothing here). Checked:
 *  - rf_model_set_format accepts every format (a model refused at start on a GPU is
 *    the failure this catches: bf16 batch norm and average pooling once were);
 *  - every op pushed is one CUDA runs; none is refused;
 *  - ResNet-18 fuses batch norm with its ReLU in every format (the fusion follows the
 *    same capability answer);
 *  - the graph rules: every op of a training step can be captured once cuDNN's plans
 *    exist (no op reads host state when it runs), so a replayed step is one graph;
 *  - the convolutions a fallback could not compute (bf16, NHWC) are counted: on a GPU
 *    they run by cuDNN or fail by name, never by im2col (test-cuda-rules checks that
 *    rule). */
#include "train-test.h"
#include "model.h"
#include "backend-impl.h"
#include "../../devices/cuda/cuda-rules.h"

struct seen {
	unsigned ops[RF__OP_COUNT];
	unsigned refused, never, no_im2col;
	char first[300];
};

static int admit_cuda(void *ctx, const struct rf__op *op, char *why, size_t len)
{
	struct seen *s = ctx;
	int pushed = op->nt && op->o.t[0].data; /* a probe's operands have no data */

	if (!rf__cuda_rule_supports(op, 1, NULL, why, len)) {
		if (pushed) {
			s->refused++;
			if (!s->first[0])
				snprintf(s->first, sizeof(s->first), "%s: %s", op->name, why);
		}
		return 0;
	}
	if (!pushed)
		return 1;
	s->ops[op->code]++;
	if (rf__cuda_cap_need(op, 1) == RF__CAP_NEVER) {
		s->never++;
		fprintf(stderr, "  %s is never captured\n", op->name);
	}
	if ((op->code == RF__OP_CONV_FWD || op->code == RF__OP_CONV_BWD_DATA ||
	     op->code == RF__OP_CONV_BWD_FILTER) && !rf__cuda_im2col_ok(op))
		s->no_im2col++;
	return 1;
}

static void run(struct tt_env *t, const char *model, enum rf_tdtype dt, enum rf_layout lay)
{
	const struct rf_model_spec *sp = rf_model_spec(model);
	struct rf_device *d = NULL;
	struct rf_model *m = NULL;
	struct rf_prng *g = NULL;
	struct rf_tensor *x, *y, *loss;
	struct rf_model_acts *acts = NULL;
	struct seen s;
	const int n = 3;
	float xv[3 * 784];
	int32_t yv[3] = { 0, 7, 2 };

	memset(&s, 0, sizeof(s));
	for (int i = 0; i < n * 784; i++)
		xv[i] = (float)((i * 37) % 101) / 101.0f;
	CHECK(sp);
	CHECK_OK(rf_device_open(t->eng, "cpu", &d));
	CHECK_OK(rf_model_create(&m, sp, d, NULL, NULL));
	CHECK_OK(rf_prng_create(t->eng, 5, "init", &g));
	CHECK_OK(rf_model_init(m, g, RF_INIT_DEFAULT)); /* on the host before a step */
	CHECK_OK(rf_engine_wait_all(t->eng));
	d->admit = admit_cuda;
	d->admit_ctx = &s;
	d->dry_run = 1; /* what is pushed is checked, not what it computes */
	if (rf_model_set_format(m, dt, lay) < 0) {
		fprintf(stderr, "%s %s %s: refused at start: %s\n", model, rf_tdtype_name(dt),
			rf_layout_name(lay), rf_last_error());
		exit(1);
	}
	CHECK_OK(rf_tensor_create(d, RF_F32, "x", RF_DIMS(n, 1, 28, 28), &x));
	CHECK_OK(rf_tensor_create(d, RF_I32, "y", RF_DIMS(n), &y));
	CHECK_OK(rf_tensor_create(d, RF_F32, "loss", RF_DIMS(1), &loss));
	CHECK_OK(rf_tensor_write(x, xv));
	CHECK_OK(rf_tensor_write(y, yv));
	/* a training step, then an evaluation */
	if (rf_model_forward(m, x, y, loss, NULL, 1, &acts) < 0 ||
	    rf_model_backward(m, acts, NULL, NULL) < 0) {
		fprintf(stderr, "%s %s %s: a training step pushed an op CUDA refuses: %s\n",
			model, rf_tdtype_name(dt), rf_layout_name(lay),
			s.first[0] ? s.first : rf_last_error());
		exit(1);
	}
	for (unsigned k = 0; k < sp->ntensors; k++)
		CHECK_OK(rf_sgd(m->s, m->p[k], m->g[k], 0.01f, 0.0f));
	CHECK_OK(rf_engine_wait_all(t->eng));
	if (rf_model_forward(m, x, y, loss, NULL, 0, NULL) < 0) {
		fprintf(stderr, "%s %s %s: the evaluation pushed an op CUDA refuses: %s\n", model,
			rf_tdtype_name(dt), rf_layout_name(lay), s.first[0] ? s.first : rf_last_error());
		exit(1);
	}
	CHECK_OK(rf_engine_wait_all(t->eng));
	CHECK_EQ(s.refused, 0);
	CHECK_EQ(s.never, 0);
	if (!strcmp(model, "resnet18")) {
		/* batch norm fused with its ReLU, in training and in evaluation */
		CHECK(s.ops[RF__OP_BN_RELU_TRAIN] > 0 && s.ops[RF__OP_BN_RELU_BWD] > 0);
		CHECK(s.ops[RF__OP_BN_RELU_EVAL] > 0);
	}
	if (!strcmp(model, "lenet"))
		CHECK(s.ops[RF__OP_AVGPOOL_FWD] > 0 && s.ops[RF__OP_AVGPOOL_BWD] > 0);
	if (strcmp(model, "mlp"))
		CHECK((s.no_im2col > 0) == (dt != RF_F32 || lay != RF_LAYOUT_ROWMAJOR));
	{
		unsigned total = 0;
		for (int k = 0; k < RF__OP_COUNT; k++)
			total += s.ops[k];
		fprintf(stderr, "%-8s %-4s %-8s: %4u ops, all run by CUDA's rules; %u convolutions "
			"only cuDNN may run\n", model, rf_tdtype_name(dt), rf_layout_name(lay), total,
			s.no_im2col);
	}
	rf_tensor_destroy(x);
	rf_tensor_destroy(y);
	rf_tensor_destroy(loss);
	rf_prng_destroy(g);
	rf_model_destroy(m);
	CHECK_OK(rf_engine_wait_all(t->eng));
	rf_device_close(d);
}

int main(void)
{
	static const char *const models[] = { "mlp", "lenet", "resnet18" };
	static const enum rf_tdtype dts[] = { RF_F32, RF_BF16 };
	static const enum rf_layout lays[] = { RF_LAYOUT_ROWMAJOR, RF_LAYOUT_NHWC };
	struct tt_env t;

	tt_open(&t);
	for (unsigned i = 0; i < 3; i++)
		for (unsigned a = 0; a < 2; a++)
			for (unsigned l = 0; l < 2; l++)
				run(&t, models[i], dts[a], lays[l]);
	tt_close(&t);
	return 0;
}
