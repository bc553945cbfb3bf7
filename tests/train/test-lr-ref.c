/* test-lr-ref: rf_lr_at against PyTorch 1.13's schedulers (tests/train/ref/lr.ref, path in
 * argv[1], made by make_lr_reference.py): LinearLR warm-up, then constant, StepLR or
 * CosineAnnealingLR, joined by SequentialLR. Every epoch's rate must agree to 1e-12
 * relative, and as a float (what the update uses) exactly. */
#include "train-test.h"
#include "trainer.h"

int main(int argc, char **argv)
{
	char line[4096], kind[16];
	int nset = 0, fails = 0;

	CHECK(argc == 2);
	FILE *f = fopen(argv[1], "r");
	if (!f) {
		fprintf(stderr, "%s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		struct rf_lr_schedule s = { 0 };
		unsigned step, w, e;
		double gamma, worst = 0;
		int off = 0;
		char *p;

		if (line[0] == '#')
			continue;
		CHECK(sscanf(line, "%15s %u %lf %u %u%n", kind, &step, &gamma, &w, &e, &off) == 5);
		s.kind = !strcmp(kind, "step") ? RF_LR_STEP : !strcmp(kind, "cosine") ? RF_LR_COSINE
										     : RF_LR_CONSTANT;
		s.step_epochs = step;
		s.gamma = gamma;
		s.warmup_epochs = w;
		s.epochs = e;
		p = line + off;
		for (unsigned i = 0; i < e; i++) {
			char *end;
			double want = strtod(p, &end), got = rf_lr_at(&s, 0.1, i);
			CHECK(end != p);
			p = end;
			double rel = fabs(got - want) / want;
			worst = rel > worst ? rel : worst;
			if (rel > 1e-12 || (float)got != (float)want) {
				fprintf(stderr, "FAIL: %s step %u gamma %g warmup %u epochs %u: epoch %u: "
					"%.17g, torch %.17g\n", kind, step, gamma, w, e, i, got, want);
				fails++;
			}
		}
		printf("%-8s step %u gamma %-4g warmup %u epochs %2u: worst relative difference "
		       "%.2g\n", kind, step, gamma, w, e, worst);
		nset++;
	}
	fclose(f);
	CHECK(nset == 6);
	return fails ? 1 : 0;
}
