/* test-resnet-ref: ResNet-18's new layers alone and one ResNet-18 training step,
 * against PyTorch in float64 (tests/train/ref/resnet.ref, path in argv[1], written by
 * make_resnet_reference.py). Inputs, weights and output gradients come from the
 * splitmix64 hash both sides share, so the file holds only results:
 *  - layer cases (conv 3x3 stride 2 pad 1, 1x1 stride 2 with bias, 3x3 pad 1; batch
 *    norm training forward, backward, running statistics and evaluation; max pooling
 *    with and without ties; global average pooling): every element to 1e-5 of the
 *    tensor's largest magnitude;
 *  - the ResNet-18 step (4 images, the model's layer table on the CPU device; the input
 *    salt the generator chose so that no ReLU input lies within 2e-6 of zero, where
 *    float32 and float64 could disagree on the unit being on): the loss,
 *    and for every gradient and running statistic its sum (to 1e-4 of the sum of
 *    magnitudes), its L2 norm (1e-4 relative) and 32 sampled elements (1e-4 of
 *    max(|x|, the tensor's rms)); the evaluation-mode loss afterwards to 1e-4. */
#include "train-test.h"
#include "model.h"

static float hashv(int salt, uint64_t i, double scale)
{
	uint64_t z = i + (uint64_t)(salt + 1) * 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	double u = (double)(z >> 11) * 0x1p-53;
	return (float)((u - 0.5) * 2.0 * scale);
}

static void hashed(float *v, size_t n, int salt, double scale)
{
	for (size_t i = 0; i < n; i++)
		v[i] = hashv(salt, i, scale);
}

/* ---- the reference file ---------------------------------------------------------- */

struct line {
	char tag[16], name[48];
	size_t n;
	double *v;                  /* "v": n values; "t": sum, sumabs, l2, 32 samples */
};

static struct line lines[512];
static unsigned nlines;

static void load(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[1 << 20];

	CHECK(f);
	while (fgets(buf, sizeof(buf), f)) {
		struct line *l = &lines[nlines];
		char *p = buf, *e;
		int used;
		if (buf[0] == '#')
			continue;
		CHECK(nlines < 512);
		CHECK(sscanf(p, "%15s %n", l->tag, &used) == 1);
		p += used;
		if (strcmp(l->tag, "v") == 0 || strcmp(l->tag, "t") == 0) {
			CHECK(sscanf(p, "%47s %zu %n", l->name, &l->n, &used) == 2);
			p += used;
			size_t k = strcmp(l->tag, "v") == 0 ? l->n : 35;
			l->v = malloc(k * sizeof(double));
			CHECK(l->v);
			for (size_t i = 0; i < k; i++, p = e) {
				l->v[i] = strtod(p, &e);
				CHECK(e != p);
			}
		} else {                  /* case NAME ints..., loss X, eval_loss X */
			CHECK(sscanf(p, "%47s", l->name) == 1);
			l->v = malloc(8 * sizeof(double));
			CHECK(l->v);
			l->n = 0;
			if (strcmp(l->tag, "case") == 0)
				p += strlen(l->name);
			while (l->n < 8 && (l->v[l->n] = strtod(p, &e), e != p)) {
				l->n++;
				p = e;
			}
		}
		nlines++;
	}
	fclose(f);
	CHECK(nlines > 0);
}

static const struct line *find(unsigned from, const char *tag, const char *name)
{
	for (unsigned i = from; i < nlines; i++) {
		if (i > from && strcmp(lines[i].tag, "case") == 0)
			break;
		if (strcmp(lines[i].tag, tag) == 0 && strcmp(lines[i].name, name) == 0)
			return &lines[i];
	}
	fprintf(stderr, "reference: no %s %s after line %u\n", tag, name, from);
	exit(1);
}

static int fails;

/* every element of got to 1e-5 of the reference tensor's largest magnitude */
static void cmp_all(const char *cs, const struct line *l, const float *got, size_t n)
{
	double mx = 0, worst = 0;

	if (l->n != n) {
		fprintf(stderr, "FAIL: %s %s: %zu elements, reference %zu\n", cs, l->name, n, l->n);
		fails++;
		return;
	}
	for (size_t i = 0; i < n; i++)
		mx = fmax(mx, fabs(l->v[i]));
	for (size_t i = 0; i < n; i++) {
		double err = fabs(got[i] - l->v[i]) / (1e-5 * mx + 1e-30);
		worst = fmax(worst, err);
		if (err > 1.0) {
			fprintf(stderr, "FAIL: %s %s[%zu] = %.9g, torch %.9g\n", cs, l->name, i, got[i],
				l->v[i]);
			fails++;
			return;
		}
	}
	printf("  %-12s %-9s %5zu elements, worst %.3f of tolerance\n", cs, l->name, n, worst);
}

static struct rf_device *cpu;

static struct rf_tensor *tnew(int ndim, const int64_t *shape, const float *init)
{
	struct rf_tensor *t;

	CHECK_OK(rf_tensor_create(cpu, RF_F32, "t", ndim, shape, &t));
	if (init)
		CHECK_OK(rf_tensor_write(t, init));
	return t;
}

static float *tread(struct rf_tensor *t)
{
	float *v = malloc(t->numel * sizeof(float));

	CHECK(v);
	CHECK_OK(rf_tensor_read(t, v));
	return v;
}

#define SHAPE(...) (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)), (int64_t[]){ __VA_ARGS__ }

static void conv_case(unsigned at)
{
	const struct line *c = &lines[at];
	int n = (int)c->v[0], ch = (int)c->v[1], h = (int)c->v[2], o = (int)c->v[3], k = (int)c->v[4];
	int st = (int)c->v[5], pad = (int)c->v[6], bias = (int)c->v[7];
	int oh = (h + 2 * pad - k) / st + 1;
	size_t nx = (size_t)n * ch * h * h, nw = (size_t)o * ch * k * k, ny = (size_t)n * o * oh * oh;
	float *hx = malloc(nx * 4), *hw = malloc(nw * 4), hb[16], *hdy = malloc(ny * 4);

	hashed(hx, nx, 1, 1.0);
	hashed(hw, nw, 2, 0.5);
	hashed(hb, (size_t)o, 3, 0.5);
	hashed(hdy, ny, 4, 1.0);
	struct rf_tensor *x = tnew(SHAPE(n, ch, h, h), hx), *w = tnew(SHAPE(o, ch, k, k), hw);
	struct rf_tensor *b = bias ? tnew(SHAPE(o), hb) : NULL, *y = tnew(SHAPE(n, o, oh, oh), NULL);
	struct rf_tensor *dy = tnew(SHAPE(n, o, oh, oh), hdy), *dx = tnew(SHAPE(n, ch, h, h), NULL);
	struct rf_tensor *dw = tnew(SHAPE(o, ch, k, k), NULL), *db = tnew(SHAPE(o), NULL);
	CHECK_OK(rf_conv2d_fwd(NULL, y, x, w, b, st, pad));
	CHECK_OK(rf_conv2d_bwd_data(NULL, dx, dy, w, st, pad));
	CHECK_OK(rf_conv2d_bwd_filter(NULL, dw, bias ? db : NULL, dy, x, 0, st, pad));
	float *r;
	cmp_all(c->name, find(at, "v", "y"), r = tread(y), ny), free(r);
	cmp_all(c->name, find(at, "v", "dx"), r = tread(dx), nx), free(r);
	cmp_all(c->name, find(at, "v", "dw"), r = tread(dw), nw), free(r);
	if (bias)
		cmp_all(c->name, find(at, "v", "db"), r = tread(db), (size_t)o), free(r);
	struct rf_tensor *all[] = { x, w, b, y, dy, dx, dw, db };
	for (unsigned i = 0; i < 8; i++)
		rf_tensor_destroy(all[i]);
	free(hx), free(hw), free(hdy);
}

static void bn_case(unsigned at)
{
	const struct line *c = &lines[at];
	int n = (int)c->v[0], ch = (int)c->v[1], h = (int)c->v[2];
	size_t nx = (size_t)n * ch * h * h;
	float *hx = malloc(nx * 4), *hdy = malloc(nx * 4), g[8], b[8], rm[8], rv[8];

	hashed(hx, nx, 1, 2.0);
	hashed(hdy, nx, 4, 1.0);
	hashed(g, (size_t)ch, 2, 0.5);
	hashed(b, (size_t)ch, 3, 0.5);
	hashed(rm, (size_t)ch, 5, 0.2);
	hashed(rv, (size_t)ch, 6, 0.5);
	for (int i = 0; i < ch; i++) {
		g[i] = (float)(1.0 + g[i]);
		rv[i] = (float)(1.0 + rv[i]);
	}
	struct rf_tensor *x = tnew(SHAPE(n, ch, h, h), hx), *y = tnew(SHAPE(n, ch, h, h), NULL);
	struct rf_tensor *dy = tnew(SHAPE(n, ch, h, h), hdy), *dx = tnew(SHAPE(n, ch, h, h), NULL);
	struct rf_tensor *tg = tnew(SHAPE(ch), g), *tb = tnew(SHAPE(ch), b), *trm = tnew(SHAPE(ch), rm);
	struct rf_tensor *trv = tnew(SHAPE(ch), rv), *mean = tnew(SHAPE(ch), NULL);
	struct rf_tensor *inv = tnew(SHAPE(ch), NULL), *dg = tnew(SHAPE(ch), NULL);
	struct rf_tensor *dbt = tnew(SHAPE(ch), NULL), *ye = tnew(SHAPE(n, ch, h, h), NULL);
	CHECK_OK(rf_batchnorm_fwd(NULL, y, mean, inv, trm, trv, x, tg, tb, 1, 1e-5f, 0.1f));
	CHECK_OK(rf_batchnorm_bwd(NULL, dx, dg, dbt, dy, x, mean, inv, tg));
	CHECK_OK(rf_batchnorm_fwd(NULL, ye, NULL, NULL, trm, trv, x, tg, tb, 0, 1e-5f, 0.1f));
	float *r;
	cmp_all("bn", find(at, "v", "y"), r = tread(y), nx), free(r);
	cmp_all("bn", find(at, "v", "dx"), r = tread(dx), nx), free(r);
	cmp_all("bn", find(at, "v", "dgamma"), r = tread(dg), (size_t)ch), free(r);
	cmp_all("bn", find(at, "v", "dbeta"), r = tread(dbt), (size_t)ch), free(r);
	cmp_all("bn", find(at, "v", "run_mean"), r = tread(trm), (size_t)ch), free(r);
	cmp_all("bn", find(at, "v", "run_var"), r = tread(trv), (size_t)ch), free(r);
	cmp_all("bn", find(at, "v", "y_eval"), r = tread(ye), nx), free(r);
	struct rf_tensor *all[] = { x, y, dy, dx, tg, tb, trm, trv, mean, inv, dg, dbt, ye };
	for (unsigned i = 0; i < 13; i++)
		rf_tensor_destroy(all[i]);
	free(hx), free(hdy);
}

static void pool_case(unsigned at)
{
	const struct line *c = &lines[at];
	int gap = strcmp(c->name, "gap") == 0;
	int n = (int)c->v[0], ch = (int)c->v[1], h = (int)c->v[2];
	int k = gap ? h : (int)c->v[3], st = gap ? 1 : (int)c->v[4], ties = gap ? 0 : (int)c->v[5];
	int oh = (h - k) / st + 1;
	size_t nx = (size_t)n * ch * h * h, ny = (size_t)n * ch * oh * oh;
	float *hx = malloc(nx * 4), *hdy = malloc(ny * 4), *r;

	hashed(hx, nx, 1, 1.0);
	hashed(hdy, ny, 4, 1.0);
	for (size_t i = 0; ties && i < nx; i++)
		hx[i] = (float)(rint(hx[i] * 4.0) / 4.0);
	struct rf_tensor *x = tnew(SHAPE(n, ch, h, h), hx), *dx = tnew(SHAPE(n, ch, h, h), NULL);
	struct rf_tensor *y = gap ? tnew(SHAPE(n, ch), NULL) : tnew(SHAPE(n, ch, oh, oh), NULL);
	struct rf_tensor *dy = gap ? tnew(SHAPE(n, ch), hdy) : tnew(SHAPE(n, ch, oh, oh), hdy);
	if (gap) {
		CHECK_OK(rf_gavgpool_fwd(NULL, y, x));
		CHECK_OK(rf_gavgpool_bwd(NULL, dx, dy));
	} else {
		CHECK_OK(rf_maxpool2d_fwd(NULL, y, x, k, st));
		CHECK_OK(rf_maxpool2d_bwd(NULL, dx, dy, x, k, st));
	}
	cmp_all(c->name, find(at, "v", "y"), r = tread(y), ny), free(r);
	cmp_all(c->name, find(at, "v", "dx"), r = tread(dx), nx), free(r);
	rf_tensor_destroy(x), rf_tensor_destroy(dx), rf_tensor_destroy(y), rf_tensor_destroy(dy);
	free(hx), free(hdy);
}

/* a gradient or running statistic against its summary line */
static void cmp_summary(const struct line *l, const float *v, size_t n, double *worst)
{
	double s = 0, sa = 0, l2 = 0;

	if (l->n != n) {
		fprintf(stderr, "FAIL: %s: %zu elements, reference %zu\n", l->name, n, l->n);
		fails++;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		s += v[i];
		sa += fabs(v[i]);
		l2 += (double)v[i] * v[i];
	}
	l2 = sqrt(l2);
	double e[3];
	e[0] = fabs(s - l->v[0]) / (1e-4 * l->v[1] + 1e-30);
	e[1] = fabs(sa - l->v[1]) / (1e-4 * l->v[1] + 1e-30);
	e[2] = fabs(l2 - l->v[2]) / (1e-4 * l->v[2] + 1e-30);
	for (int j = 0; j < 3; j++)
		*worst = fmax(*worst, e[j]);
	if (e[0] > 1 || e[1] > 1 || e[2] > 1) {
		fprintf(stderr, "FAIL: %s: sum %.9g |sum| %.9g l2 %.9g, torch %.9g %.9g %.9g\n",
			l->name, s, sa, l2, l->v[0], l->v[1], l->v[2]);
		fails++;
	}
}

static void samples(const struct line *l, unsigned k, const float *v, size_t n, double *worst)
{
	double rms = l->v[2] / sqrt((double)n);

	for (unsigned j = 0; j < 32; j++) {
		size_t i = ((uint64_t)j * 2654435761ull + k) % n;
		double want = l->v[3 + j], err = fabs(v[i] - want) / (1e-4 * fmax(fabs(want), rms) + 1e-30);
		*worst = fmax(*worst, err);
		if (err > 1.0) {
			fprintf(stderr, "FAIL: %s[%zu] = %.9g, torch %.9g\n", l->name, i, v[i], want);
			fails++;
			return;
		}
	}
}

static __attribute__((unused)) void resnet_case(unsigned at)
{
	const struct rf_model_spec *sp = rf_model_spec("resnet18");
	struct rf_model *m;
	struct rf_model_acts *acts;
	struct rf_tensor *x, *y, *loss;
	float hx[4 * 784], hl;
	int32_t hy[4] = { 3, 1, 4, 9 };
	double worst = 0;

	CHECK(sp);
	CHECK_OK(rf_model_create(&m, sp, cpu, NULL, NULL));
	for (unsigned k = 0; k < sp->ntensors; k++) {
		const struct rf_param_spec *p = &sp->p[k];
		float *w = malloc(p->numel * sizeof(float));
		CHECK(w);
		if (p->role == RF_PARAM_GAMMA) {
			hashed(w, p->numel, 100 + (int)k, 0.1);
			for (size_t i = 0; i < p->numel; i++)
				w[i] = (float)(1.0 + w[i]);
		} else if (p->ndim == 1) {
			hashed(w, p->numel, 100 + (int)k, 0.1);
		} else {
			hashed(w, p->numel, 100 + (int)k,
			       sqrt(6.0 / (double)(p->numel / (size_t)p->shape[0])));
		}
		CHECK_OK(rf_tensor_write(m->p[k], w));
		free(w);
	}
	CHECK(lines[at].n >= 2);
	hashed(hx, 4 * 784, (int)lines[at].v[1], 1.0);
	x = tnew(SHAPE(4, 1, 28, 28), hx);
	CHECK_OK(rf_tensor_create(cpu, RF_I32, "y", RF_DIMS(4), &y));
	CHECK_OK(rf_tensor_write(y, hy));
	loss = tnew(SHAPE(1), NULL);
	CHECK_OK(rf_model_forward(m, x, y, loss, NULL, 1, &acts));
	CHECK_OK(rf_model_backward(m, acts, NULL, NULL));
	CHECK_OK(rf_tensor_read(loss, &hl));
	const struct line *ll = NULL;
	for (unsigned i = at; i < nlines; i++)
		if (strcmp(lines[i].tag, "loss") == 0)
			ll = &lines[i];
	CHECK(ll);
	printf("  resnet18 loss %.9g, torch %.9g\n", hl / 4, ll->v[0]);
	if (!(fabs(hl / 4 - ll->v[0]) <= 1e-4 * fabs(ll->v[0]))) {
		fprintf(stderr, "FAIL: loss %.9g, torch %.9g\n", hl / 4, ll->v[0]);
		fails++;
	}
	for (unsigned k = 0; k < sp->ntensors; k++) {
		float *g = tread(m->g[k]);
		const struct line *l = find(at, "t", sp->p[k].name);
		cmp_summary(l, g, sp->p[k].numel, &worst);
		samples(l, k, g, sp->p[k].numel, &worst);
		free(g);
	}
	for (unsigned k = 0; k < sp->nbufs; k++) {
		float *b = tread(m->b[k]);
		const struct line *l = find(at, "t", sp->b[k].name);
		cmp_summary(l, b, sp->b[k].numel, &worst);
		samples(l, k, b, sp->b[k].numel, &worst);
		free(b);
	}
	printf("  resnet18 %u gradients, %u running statistics: worst %.3f of tolerance\n",
	       sp->ntensors, sp->nbufs, worst);
	CHECK_OK(rf_model_forward(m, x, y, loss, NULL, 0, NULL));
	CHECK_OK(rf_tensor_read(loss, &hl));
	for (unsigned i = at; i < nlines; i++)
		if (strcmp(lines[i].tag, "eval_loss") == 0)
			ll = &lines[i];
	printf("  resnet18 eval loss %.9g, torch %.9g\n", hl / 4, ll->v[0]);
	if (!(fabs(hl / 4 - ll->v[0]) <= 1e-4 * fabs(ll->v[0]))) {
		fprintf(stderr, "FAIL: eval loss %.9g, torch %.9g\n", hl / 4, ll->v[0]);
		fails++;
	}
	rf_tensor_destroy(x), rf_tensor_destroy(y), rf_tensor_destroy(loss);
	rf_model_destroy(m);
}

int main(int argc, char **argv)
{
	struct tt_env t;

	if (argc < 2) {
		fprintf(stderr, "usage: %s tests/train/ref/resnet.ref\n", argv[0]);
		return 1;
	}
	load(argv[1]);
	tt_open(&t);
	CHECK_OK(rf_cpu_open(t.eng, NULL, &cpu));
	for (unsigned i = 0; i < nlines; i++) {
		if (strcmp(lines[i].tag, "case") != 0)
			continue;
		if (strncmp(lines[i].name, "conv", 4) == 0)
			conv_case(i);
		else if (strcmp(lines[i].name, "bn") == 0)
			bn_case(i);
		else if (strncmp(lines[i].name, "maxpool", 7) == 0 || strcmp(lines[i].name, "gap") == 0)
			pool_case(i);
		else if (strcmp(lines[i].name, "resnet18") == 0)
			resnet_case(i);
	}
	CHECK_OK(rf_engine_wait_all(t.eng));
	rf_device_close(cpu);
	tt_close(&t);
	printf("%s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
