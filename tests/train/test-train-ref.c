/* test-train-ref: one training step of the MLP or LeNet (model.h) compared with
 * PyTorch. The reference file (tests/train/ref/mlp.ref or lenet.ref, path given as argv[1])
 * holds the loss, the gradients and the loss after one SGD step that PyTorch 1.13
 * computed for a batch and initial weights defined by formula (splitmix64,
 * tests/train/ref/README.md). This program regenerates the same batch and weights
 * (ref_init_snippet.c.txt, checked against the file's x_sum, y_sum and init_sum),
 * writes them into a model replica's parameter views on the CPU device, pushes the
 * forward pass, the backward pass and the plain SGD step through the engine, and
 * compares: the loss to 1e-5 relative, every listed gradient element to
 * 1e-6*grad_absmax + 1e-4*|g|, the correct count exactly, and the loss after the step
 * to 1e-5 relative. It also reports how many parameter elements differ from the
 * single-rounding update torch does (p = fmaf(-lr, g, p)) -- devices' rf_sgd is free to
 * round twice (README: "SGD step"); the loss after the step must still agree. */
#include "train-test.h"
#include "model.h"

/* ---- ref_init_snippet.c.txt (tests/train/ref), verbatim ----------------------------------- */
static uint64_t ref_splitmix64(uint64_t x)
{
	uint64_t z = x + 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}
static uint64_t ref_h(uint64_t stream, uint64_t i) { return ref_splitmix64((stream << 40) + i); }
static float ref_u(uint64_t stream, uint64_t i) { return (float)(ref_h(stream, i) >> 40) * 0x1p-24f; }
static void ref_inputs(float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = floorf(ref_u(1, i) * 256.0f) / 255.0f;
}
static void ref_labels(int *y, size_t B)
{
	for (size_t j = 0; j < B; j++)
		y[j] = (int)((ref_h(2, j) >> 32) % 10u);
}
static void ref_param(float *w, size_t n, int k, int fan_in)
{
	const float s = 1.0f / sqrtf((float)fan_in);
	for (size_t i = 0; i < n; i++)
		w[i] = (2.0f * ref_u(100u + (uint64_t)k, i) - 1.0f) * s;
}
/* ------------------------------------------------------------------------------------- */

struct ref_param {
	char name[32];
	size_t numel;
	int fan_in;
	double init_sum, absmax;
	unsigned ng;
	size_t *gi;
	float *gv;
};

struct ref {
	char model[16];
	int batch;
	float lr, loss, loss_after;
	double x_sum;
	long y_sum;
	int labels[64];
	int correct;
	unsigned np;
	struct ref_param p[8];
};

static void ref_load(const char *path, struct ref *r)
{
	FILE *f = fopen(path, "r");
	char line[256];
	struct ref_param *cur = NULL;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		exit(1);
	}
	memset(r, 0, sizeof(*r));
	while (fgets(line, sizeof(line), f)) {
		char key[32];
		int off = 0;

		if (line[0] == '#' || sscanf(line, "%31s %n", key, &off) < 1)
			continue;
		char *v = line + off;
		if (!strcmp(key, "model"))
			sscanf(v, "%15s", r->model);
		else if (!strcmp(key, "batch"))
			r->batch = atoi(v);
		else if (!strcmp(key, "lr"))
			r->lr = strtof(v, NULL);
		else if (!strcmp(key, "x_sum"))
			r->x_sum = strtod(v, NULL);
		else if (!strcmp(key, "y_sum"))
			r->y_sum = atol(v);
		else if (!strcmp(key, "labels")) {
			char *e = v;
			for (int i = 0; i < r->batch && i < 64; i++)
				r->labels[i] = (int)strtol(e, &e, 10);
		} else if (!strcmp(key, "loss"))
			r->loss = strtof(v, NULL);
		else if (!strcmp(key, "loss_after_step"))
			r->loss_after = strtof(v, NULL);
		else if (!strcmp(key, "correct"))
			r->correct = atoi(v);
		else if (!strcmp(key, "param")) {
			CHECK(r->np < 8);
			cur = &r->p[r->np++];
			char *e = v;
			int n = 0;
			sscanf(v, "%31s %n", cur->name, &n);
			e = v + n;
			cur->numel = 1;
			while (*e && *e != '\n') {
				char *e2;
				long d = strtol(e, &e2, 10);
				if (e2 == e)
					break;
				cur->numel *= (size_t)d;
				e = e2;
			}
		} else if (cur && !strcmp(key, "fan_in"))
			cur->fan_in = atoi(v);
		else if (cur && !strcmp(key, "init_sum"))
			cur->init_sum = strtod(v, NULL);
		else if (cur && !strcmp(key, "grad_l2")) {
			char *p = strstr(v, "grad_absmax");
			CHECK(p);
			cur->absmax = strtod(p + 11, NULL);
		} else if (cur && !strcmp(key, "gcount")) {
			unsigned n = (unsigned)atoi(v);
			cur->gi = calloc(n, sizeof(size_t));
			cur->gv = calloc(n, sizeof(float));
			CHECK(cur->gi && cur->gv);
		} else if (cur && !strcmp(key, "g")) {
			char *e;
			cur->gi[cur->ng] = (size_t)strtoull(v, &e, 10);
			cur->gv[cur->ng] = strtof(e, NULL);
			cur->ng++;
		}
	}
	fclose(f);
	CHECK(r->batch > 0 && r->batch <= 64 && r->np > 0);
}

static int rel_ok(double got, double want, double rtol)
{
	return fabs(got - want) <= rtol * fabs(want);
}

int main(int argc, char **argv)
{
	struct ref r;
	struct tt_env t;
	struct rf_device *cpu;
	const struct rf_model_spec *spec;
	struct rf_model *m;
	struct rf_model_acts *acts;
	struct rf_tensor *x, *y, *loss, *correct;
	int fails = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s tests/train/ref/MODEL.ref\n", argv[0]);
		return 1;
	}
	ref_load(argv[1], &r);
	spec = rf_model_spec(r.model);
	CHECK(spec);
	CHECK_EQ(spec->ntensors, r.np);

	/* the batch, checked against the file */
	size_t nx = (size_t)r.batch * 784;
	float *hx = malloc(nx * sizeof(float));
	int hy[64];
	double xs = 0;
	long ys = 0;
	CHECK(hx);
	ref_inputs(hx, nx);
	ref_labels(hy, (size_t)r.batch);
	for (size_t i = 0; i < nx; i++)
		xs += hx[i];
	for (int i = 0; i < r.batch; i++) {
		ys += hy[i];
		CHECK_EQ(hy[i], r.labels[i]);
	}
	CHECK(fabs(xs - r.x_sum) <= 1e-12 * fabs(r.x_sum));
	CHECK_EQ(ys, r.y_sum);

	tt_open(&t);
	CHECK_OK(rf_cpu_open(t.eng, NULL, &cpu));
	CHECK_OK(rf_model_create(&m, spec, cpu, NULL, NULL));

	/* the initial weights, checked against init_sum, written into the views */
	float *w0[8];
	for (unsigned k = 0; k < r.np; k++) {
		const struct rf_param_spec *ps = &spec->p[k];
		double s = 0;
		CHECK(strcmp(ps->name, "") != 0);
		CHECK_EQ(ps->numel, r.p[k].numel);
		CHECK_EQ(ps->fan_in, r.p[k].fan_in);
		w0[k] = malloc(ps->numel * sizeof(float));
		CHECK(w0[k]);
		ref_param(w0[k], ps->numel, (int)k, ps->fan_in);
		for (size_t i = 0; i < ps->numel; i++)
			s += w0[k][i];
		CHECK(fabs(s - r.p[k].init_sum) <= 1e-12 * fabs(r.p[k].init_sum) + 1e-12);
		CHECK_OK(rf_tensor_write(m->p[k], w0[k]));
	}
	rf_tensor_create(cpu, RF_F32, "x", RF_DIMS(r.batch, 1, 28, 28), &x);
	rf_tensor_create(cpu, RF_I32, "y", RF_DIMS(r.batch), &y);
	rf_tensor_create(cpu, RF_F32, "loss", RF_DIMS(1), &loss);
	rf_tensor_create(cpu, RF_I32, "correct", RF_DIMS(1), &correct);
	CHECK(x && y && loss && correct);
	CHECK_OK(rf_tensor_write(x, hx));
	CHECK_OK(rf_tensor_write(y, hy));

	/* the API's refusals: an index past the parameters; a NULL model (the acts are
	 * consumed all the same: ASan's leak check sees them otherwise) */
	struct rf_optim sgd = { .lr = 0.1f };
	CHECK_EQ(rf_model_update(m, spec->ntensors, &sgd, NULL), -EINVAL);
	CHECK_OK(rf_model_forward(m, x, y, loss, correct, 1, &acts));
	CHECK_EQ(rf_model_backward(NULL, acts, NULL, NULL), -EINVAL);
	/* one step: forward, backward, SGD -- pushed, then read back */
	CHECK_OK(rf_model_forward(m, x, y, loss, correct, 1, &acts));
	CHECK_OK(rf_model_backward(m, acts, NULL, NULL));
	float hl;
	int32_t hc;
	CHECK_OK(rf_tensor_read(loss, &hl));
	CHECK_OK(rf_tensor_read(correct, &hc));
	hl /= (float)r.batch;
	printf("%s: loss %.9g (torch %.9g), correct %d (torch %d)\n", r.model, hl, r.loss, hc,
	       r.correct);
	if (!rel_ok(hl, r.loss, 1e-5)) {
		fprintf(stderr, "FAIL: loss %.9g, torch %.9g\n", hl, r.loss);
		fails++;
	}
	if (hc != r.correct) {
		fprintf(stderr, "FAIL: correct %d, torch %d\n", hc, r.correct);
		fails++;
	}
	float *g[8];
	for (unsigned k = 0; k < r.np; k++) {
		struct ref_param *rp = &r.p[k];
		double worst = 0;
		g[k] = malloc(rp->numel * sizeof(float));
		CHECK(g[k]);
		CHECK_OK(rf_tensor_read(m->g[k], g[k]));
		for (unsigned j = 0; j < rp->ng; j++) {
			double got = g[k][rp->gi[j]], want = rp->gv[j];
			double tol = 1e-6 * rp->absmax + 1e-4 * fabs(want);
			double err = fabs(got - want);
			if (err / tol > worst)
				worst = err / tol;
			if (!(err <= tol)) {
				fprintf(stderr, "FAIL: grad %s[%zu] = %.9g, torch %.9g (tol %.3g)\n",
					rp->name, rp->gi[j], got, want, tol);
				fails++;
				break;
			}
		}
		printf("  grad %-5s %6u elements checked, worst error %.3f of tolerance\n",
		       rp->name, rp->ng, worst);
	}

	/* SGD, then the loss on the same batch */
	for (unsigned l = 0; l < spec->nlayers; l++)
		CHECK_OK(rf_model_sgd_layer(m, l, r.lr));
	CHECK_OK(rf_model_forward(m, x, y, loss, NULL, 0, NULL));
	CHECK_OK(rf_tensor_read(loss, &hl));
	hl /= (float)r.batch;
	printf("  loss after step %.9g (torch %.9g)\n", hl, r.loss_after);
	if (!rel_ok(hl, r.loss_after, 1e-5)) {
		fprintf(stderr, "FAIL: loss after step %.9g, torch %.9g\n", hl, r.loss_after);
		fails++;
	}
	/* rounding of the update: rf_sgd vs torch's p = fmaf(-lr, g, p) on OUR gradients */
	size_t ndiff = 0, ntot = 0;
	for (unsigned k = 0; k < r.np; k++) {
		size_t n = spec->p[k].numel;
		float *p1 = malloc(n * sizeof(float));
		CHECK(p1);
		CHECK_OK(rf_tensor_read(m->p[k], p1));
		for (size_t i = 0; i < n; i++) {
			float fused = fmaf(-r.lr, g[k][i], w0[k][i]);
			float unfused = w0[k][i] - r.lr * g[k][i];
			if (memcmp(&p1[i], &fused, 4) != 0) {
				ndiff++;
				if (memcmp(&p1[i], &unfused, 4) != 0) {
					fprintf(stderr, "FAIL: %s[%zu] after SGD %.9g is neither the "
						"fused %.9g nor the unfused %.9g update\n",
						spec->p[k].name, i, p1[i], fused, unfused);
					fails++;
					break;
				}
			}
		}
		ntot += n;
		free(p1);
	}
	printf("  SGD: %zu of %zu elements differ from torch's single-rounding update "
	       "(fmaf)\n", ndiff, ntot);
	if (ndiff) {
		fprintf(stderr, "FAIL: the SGD update is not torch's fused update bit for bit\n");
		fails++;
	}

	rf_tensor_destroy(x);
	rf_tensor_destroy(y);
	rf_tensor_destroy(loss);
	rf_tensor_destroy(correct);
	rf_model_destroy(m);
	for (unsigned k = 0; k < r.np; k++) {
		free(w0[k]);
		free(g[k]);
		free(r.p[k].gi);
		free(r.p[k].gv);
	}
	free(hx);
	rf_device_close(cpu);
	tt_close(&t);
	if (fails) {
		fprintf(stderr, "%s: %d failure(s)\n", r.model, fails);
		return 1;
	}
	printf("%s: one step matches PyTorch\n", r.model);
	return 0;
}
