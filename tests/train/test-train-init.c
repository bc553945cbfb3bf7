/* test-train-init: each weight initialisation draws what its comment in model.h says.
 *
 * For every tensor of both models and every init kind: all values lie within the
 * kind's bound, biases are zero where the kind says so, and the sample mean and
 * variance of each weight tensor agree with the distribution's (within 6 standard
 * errors, so a correct init fails with negligible probability and a wrong scale --
 * even one off by sqrt2 -- fails on the larger tensors). The same seed gives the same
 * bits twice; the kinds give different bits. */
#include "train-test.h"
#include "model.h"


struct kind {
	enum rf_init init;
	const char *name;
};

/* The half-width of the uniform kinds for weight p (0 for the normal kind). */
static double bound(enum rf_init k, const struct rf_param_spec *p)
{
	double fan_in = p->fan_in, fan_out = 0;

	if (p->ndim > 1)
		fan_out = (double)p->shape[0] * (double)(p->fan_in / p->shape[1]);
	switch (k) {
	case RF_INIT_UNIFORM:
		return 1.0 / sqrt(fan_in);
	case RF_INIT_KAIMING:
		return sqrt(6.0 / fan_in);
	case RF_INIT_XAVIER:
		return sqrt(6.0 / (fan_in + fan_out));
	default:
		return 0;
	}
}

static void check_model(struct tt_env *t, const char *name, enum rf_init k, const char *kname,
			float **out)
{
	const struct rf_model_spec *sp = rf_model_spec(name);
	struct rf_device *d;
	struct rf_model *m;
	struct rf_cpu_opts co = { .streams = 1 };
	struct rf_prng *g;
	rf_prng_create(t->eng, 5, "init", &g);
	float *h = malloc(sp->numel * sizeof(float));

	CHECK(sp && g && h);
	CHECK_OK(rf_cpu_open(t->eng, &co, &d));
	CHECK_OK(rf_model_create(&m, sp, d, NULL, "m"));
	CHECK_OK(rf_model_init(m, g, k));
	CHECK_OK(rf_tensor_read(m->params, h));
	if (k == RF_INIT_DEFAULT) /* checked as the kind it stands for */
		k = (enum rf_init)sp->default_init;
	for (unsigned i = 0; i < sp->ntensors; i++) {
		const struct rf_param_spec *p = &sp->p[i];
		const float *v = h + p->offset;
		int bias = p->ndim == 1;
		double b = bound(k, bias ? &sp->p[i - 1] : p);
		double s = 0, s2 = 0;

		if (bias && k != RF_INIT_UNIFORM) {
			for (size_t j = 0; j < p->numel; j++)
				if (v[j] != 0.0f) {
					fprintf(stderr, "%s %s %s[%zu] = %g, expected 0\n", name, kname,
						p->name, j, (double)v[j]);
					CHECK(0);
				}
			continue;
		}
		if (bias) /* uniform: PyTorch's bias bound is its weight's fan_in */
			b = 1.0 / sqrt((double)p->fan_in);
		for (size_t j = 0; j < p->numel; j++) {
			if (b > 0 && fabs(v[j]) > b) {
				fprintf(stderr, "%s %s %s[%zu] = %g outside +-%g\n", name, kname, p->name,
					j, (double)v[j], b);
				CHECK(0);
			}
			s += v[j];
			s2 += (double)v[j] * v[j];
		}
		double n = (double)p->numel, mean = s / n, var = s2 / n - mean * mean;
		/* uniform on +-b: variance b^2/3, fourth moment b^4/5; normal: 0.01^2, 3*0.01^4 */
		double ev = b > 0 ? b * b / 3 : 1e-4;
		double m4 = b > 0 ? b * b * b * b / 5 : 3e-8;
		double se_mean = sqrt(ev / n), se_var = sqrt((m4 - ev * ev) / n);
		if (fabs(mean) > 6 * se_mean || fabs(var - ev) > 6 * se_var) {
			fprintf(stderr, "%s %s %s: mean %g var %g, expected 0 +- %g and %g +- %g\n",
				name, kname, p->name, mean, var, 6 * se_mean, ev, 6 * se_var);
			CHECK(0);
		}
	}
	rf_model_destroy(m);
	rf_device_close(d);
	rf_prng_destroy(g);
	*out = h;
}

int main(void)
{
	static const struct kind kinds[] = {
		{ RF_INIT_UNIFORM, "uniform" },
		{ RF_INIT_NORMAL, "normal" },
		{ RF_INIT_KAIMING, "kaiming" },
		{ RF_INIT_XAVIER, "xavier" },
	};
	static const char *models[] = { "mlp", "lenet" };
	struct tt_env t;
	float *b2;

	tt_open(&t);
	for (unsigned mi = 0; mi < 2; mi++) {
		float *prev = NULL;
		size_t numel = rf_model_spec(models[mi])->numel;
		for (unsigned ki = 0; ki < 4; ki++) {
			float *a, *b;
			check_model(&t, models[mi], kinds[ki].init, kinds[ki].name, &a);
			check_model(&t, models[mi], kinds[ki].init, kinds[ki].name, &b);
			CHECK(memcmp(a, b, numel * sizeof(float)) == 0); /* same seed, same bits */
			if (prev)
				CHECK(memcmp(a, prev, numel * sizeof(float)) != 0);
			/* RF_INIT_DEFAULT (0) is the model's kind, bit for bit: kaiming here */
			if (kinds[ki].init == RF_INIT_KAIMING) {
				check_model(&t, models[mi], RF_INIT_DEFAULT, "default", &b2);
				CHECK(memcmp(a, b2, numel * sizeof(float)) == 0);
				free(b2);
			}
			free(prev);
			free(b);
			prev = a;
		}
		free(prev);
	}
	/* ResNet-18's default is PyTorch's uniform (kaiming diverges there, model.h) */
	CHECK_EQ(rf_model_spec("resnet18")->default_init, RF_INIT_UNIFORM);
	CHECK_EQ(rf_model_spec("mlp")->default_init, RF_INIT_KAIMING);
	CHECK_EQ(rf_model_spec("lenet")->default_init, RF_INIT_KAIMING);
	tt_close(&t);
	printf("init: 4 kinds x 2 models: bounds, zero biases, moments and determinism hold; "
	       "the default is each model's kind\n");
	return 0;
}
