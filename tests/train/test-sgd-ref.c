/* test-sgd-ref: SGD with weight decay, momentum and Nesterov against torch.optim.SGD.
 * The reference (tests/train/ref/sgd.ref, path in argv[1], made by make_sgd_reference.py)
 * holds w and the momentum buffer after three steps that PyTorch 1.13 took on the CPU
 * from weights and gradients defined by formula; this program regenerates them, takes
 * the same three steps with rf_sgd_momentum on a CPU device through the engine, and
 * compares the bits. Every element must agree to 1 ulp, and the count that is not
 * bitwise equal is printed (the CPU kernel rounds a + b*c through a double, which
 * differs from a fused multiply-add only in rare ties). */
#include "train-test.h"
#include "kernels.h"

#define N 512
#define STEPS 3

static uint64_t splitmix64(uint64_t x)
{
	uint64_t z = x + 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static float u(uint64_t stream, uint64_t i)
{
	return (float)(splitmix64((stream << 40) + i) >> 40) * 0x1p-24f;
}

static void vec(float *x, uint64_t stream, float scale)
{
	for (size_t i = 0; i < N; i++)
		x[i] = (2.0f * u(stream, i) - 1.0f) * scale;
}

/* "w 3f... 3f...": N float bits after the tag */
static int read_bits(FILE *f, const char *tag, float *out)
{
	char t[8];

	if (fscanf(f, "%7s", t) != 1 || strcmp(t, tag))
		return -1;
	for (size_t i = 0; i < N; i++) {
		unsigned b;
		if (fscanf(f, "%x", &b) != 1)
			return -1;
		memcpy(&out[i], &b, 4);
	}
	return 0;
}

static long ulps(float a, float b)
{
	int32_t x, y;

	memcpy(&x, &a, 4);
	memcpy(&y, &b, 4);
	return labs((long)x - (long)y);
}

/* AdamW: three steps from w0, compared with torch's w, exp_avg and exp_avg_sq to 1 ulp
 * (the division and square root are IEEE on both sides; what may differ is where
 * torch's vector code rounds). Returns the failures. */
static int run_adamw(FILE *f, struct rf_device *cpu, struct rf_tensor *W, struct rf_tensor *G,
		     const float *w0, float g[][N], double lr, double wd)
{
	static float tw[N], tm[N], tv[N], w[N], m[N], v[N];
	struct rf_tensor *M, *V;
	char rest[16];
	long worst = 0, ndiff = 0;

	CHECK_OK(read_bits(f, "w", tw));
	CHECK_OK(read_bits(f, "m", tm));
	CHECK_OK(read_bits(f, "v", tv));
	CHECK(fgets(rest, sizeof(rest), f));
	CHECK_OK(rf_tensor_create(cpu, RF_F32, "m", RF_DIMS(N), &M));
	CHECK_OK(rf_tensor_create(cpu, RF_F32, "v2", RF_DIMS(N), &V));
	memset(m, 0, sizeof(m));
	CHECK_OK(rf_tensor_write(W, w0));
	CHECK_OK(rf_tensor_write(M, m));
	CHECK_OK(rf_tensor_write(V, m));
	for (int t = 0; t < STEPS; t++) {
		struct rf_adamw_params p = { .lr = lr, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
					.weight_decay = wd, .step = (uint64_t)t + 1 };
		CHECK_OK(rf_tensor_write(G, g[t]));
		CHECK_OK(rf_adamw(rf_device_stream(cpu, 0), W, M, V, G, &p));
	}
	CHECK_OK(rf_tensor_read(W, w));
	CHECK_OK(rf_tensor_read(M, m));
	CHECK_OK(rf_tensor_read(V, v));
	for (size_t i = 0; i < N; i++) {
		long a = ulps(w[i], tw[i]), b = ulps(m[i], tm[i]), c = ulps(v[i], tv[i]);
		worst = a > worst ? a : worst;
		worst = b > worst ? b : worst;
		worst = c > worst ? c : worst;
		ndiff += (a != 0) + (b != 0) + (c != 0);
	}
	printf("adamw lr %g, weight decay %g: %ld of %d values not bitwise torch's, worst %ld "
	       "ulp\n", lr, wd, ndiff, 3 * N, worst);
	rf_tensor_destroy(M);
	rf_tensor_destroy(V);
	if (worst > 1) {
		fprintf(stderr, "FAIL: AdamW more than 1 ulp from torch.optim.AdamW\n");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static float w0[N], g[STEPS][N], w[N], v[N], tw[N], tv[N];
	struct tt_env env;
	struct rf_device *cpu;
	struct rf_tensor *W, *V, *G;
	char line[256];
	int nconf = 0, nadam = 0, fails = 0;

	CHECK(argc == 2);
	FILE *f = fopen(argv[1], "r");
	if (!f) {
		fprintf(stderr, "%s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	vec(w0, 300, 1.0f);
	for (int t = 0; t < STEPS; t++)
		vec(g[t], 301 + (uint64_t)t, 0.5f);
	tt_open(&env);
	CHECK_OK(rf_cpu_open(env.eng, NULL, &cpu));
	CHECK_OK(rf_tensor_create(cpu, RF_F32, "w", RF_DIMS(N), &W));
	CHECK_OK(rf_tensor_create(cpu, RF_F32, "v", RF_DIMS(N), &V));
	CHECK_OK(rf_tensor_create(cpu, RF_F32, "g", RF_DIMS(N), &G));
	while (fgets(line, sizeof(line), f)) {
		double mom, wd, alr;
		int nest;
		if (line[0] == '#')
			continue;
		if (sscanf(line, "adamw lr %lf weight_decay %lf", &alr, &wd) == 2) {
			fails += run_adamw(f, cpu, W, G, w0, g, alr, wd);
			nadam++;
			continue;
		}
		CHECK(sscanf(line, "config momentum %lf weight_decay %lf nesterov %d", &mom, &wd,
			     &nest) == 3);
		CHECK_OK(read_bits(f, "w", tw));
		CHECK_OK(read_bits(f, "v", tv));
		CHECK(fgets(line, sizeof(line), f));   /* the rest of the v line */
		memset(v, 0, sizeof(v));
		CHECK_OK(rf_tensor_write(W, w0));
		CHECK_OK(rf_tensor_write(V, v));
		for (int t = 0; t < STEPS; t++) {
			CHECK_OK(rf_tensor_write(G, g[t]));
			if (mom == 0.0)     /* plain SGD (with weight decay): rf_sgd */
				CHECK_OK(rf_sgd(rf_device_stream(cpu, 0), W, G, 0.1f, (float)wd));
			else
				CHECK_OK(rf_sgd_momentum(rf_device_stream(cpu, 0), W, V, G, 0.1f,
							 (float)mom, (float)wd, nest));
		}
		CHECK_OK(rf_tensor_read(W, w));
		CHECK_OK(rf_tensor_read(V, v));
		long worst = 0, ndiff = 0;
		for (size_t i = 0; i < N; i++) {
			long a = ulps(w[i], tw[i]), b = ulps(v[i], tv[i]);
			worst = a > worst ? a : worst;
			worst = b > worst ? b : worst;
			ndiff += (a != 0) + (b != 0);
		}
		printf("momentum %g, weight decay %g, nesterov %d: %ld of %d values not bitwise "
		       "torch's, worst %ld ulp\n", mom, wd, nest, ndiff, 2 * N, worst);
		if (worst > 1) {
			fprintf(stderr, "FAIL: more than 1 ulp from torch.optim.SGD\n");
			fails++;
		}
		nconf++;
	}
	fclose(f);
	CHECK(nconf == 5 && nadam == 3);
	rf_tensor_destroy(W);
	rf_tensor_destroy(V);
	rf_tensor_destroy(G);
	rf_device_close(cpu);
	tt_close(&env);
	return fails ? 1 : 0;
}
