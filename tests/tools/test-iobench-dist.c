/* test-iobench-dist: rf-iobench's random distributions (tools/iobench-dist.h). Zipf
 * ranks drawn by rejection-inversion match P(k) = k^-THETA / H(n, THETA): a chi-square
 * test over 50 ranks and 400,000 draws with a fixed seed, for THETA 0.8, 1.0 (the
 * harmonic case) and 1.2, stays under the 0.1 % critical value (85.35 for 49 degrees of
 * freedom); the rank -> block scatter is a bijection of [0, n); pareto:0.2 puts about
 * 80 % of the draws on the hottest 20 % of the ranks; normal stays in range; and the
 * parser refuses what fio's would; a pareto H so small that its power is infinite still
 * draws in range (UBSan found the float-to-integer overflow by reading). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../tools/iobench/iobench-dist.h"
#include "../test-util.h"

static void zipf_chi2(double theta)
{
	enum { N = 50, DRAWS = 400000 };
	struct rf_dist d;
	char err[128], spec[32];
	snprintf(spec, sizeof(spec), "zipf:%g", theta);
	CHECK(rf_dist_parse(spec, &d, err, sizeof(err)) == 0);
	rf_dist_init(&d, N, 12345);
	uint64_t cnt[N] = { 0 };
	for (int i = 0; i < DRAWS; i++) {
		uint64_t r = rf_dist_zipf_rank(&d);
		CHECK(r < N);
		cnt[r]++;
	}
	double hsum = 0, chi2 = 0;
	for (int k = 1; k <= N; k++)
		hsum += pow(k, -theta);
	for (int k = 1; k <= N; k++) {
		double e = DRAWS * pow(k, -theta) / hsum;
		chi2 += (cnt[k - 1] - e) * (cnt[k - 1] - e) / e;
	}
	printf("zipf:%g: chi-square %.1f over %d ranks (0.1%% critical value 85.35)\n", theta, chi2, N);
	CHECK(chi2 < 85.35);
}

int main(void)
{
	zipf_chi2(0.8);
	zipf_chi2(1.0);
	zipf_chi2(1.2);

	/* scatter: a bijection */
	struct rf_dist d;
	char err[128];
	CHECK(rf_dist_parse("zipf:1.1", &d, err, sizeof(err)) == 0);
	rf_dist_init(&d, 1000, 9);
	uint8_t seen[1000] = { 0 };
	for (uint64_t r = 0; r < 1000; r++) {
		uint64_t b = rf_dist_scatter(&d, r);
		CHECK(b < 1000 && !seen[b]);
		seen[b] = 1;
	}
	/* pareto:0.2: the 80/20 rule on ranks (before the scatter) */
	CHECK(rf_dist_parse("pareto:0.2", &d, err, sizeof(err)) == 0);
	rf_dist_init(&d, 100000, 3);
	uint64_t hot = 0, nd = 200000;
	for (uint64_t i = 0; i < nd; i++) {
		uint64_t r = (uint64_t)((double)(d.n - 1) * pow(rf_dist_unit(&d.rng), d.pow));
		hot += r < d.n / 5;
	}
	printf("pareto:0.2: %.1f%% of draws on the hottest 20%% of ranks\n", 100.0 * hot / nd);
	CHECK(fabs((double)hot / nd - 0.8) < 0.02);
	CHECK(rf_dist_parse("normal:10", &d, err, sizeof(err)) == 0);
	rf_dist_init(&d, 1000, 4);
	uint64_t mid = 0;
	for (int i = 0; i < 100000; i++) {
		uint64_t b = rf_dist_next(&d);
		CHECK(b < 1000);
		mid += b >= 400 && b < 600; /* within one SD (100 blocks) of the middle: ~68 % */
	}
	CHECK(mid > 66000 && mid < 70500);
	static const char *const bad[] = { "zipf", "zipf:", "zipf:0", "zipf:-1", "zipf:x", "pareto:1",
					   "pareto:0", "normal:0", "normal:101", "uniform", "zipf:1.2x",
					   "zipf:inf", "zipf:nan" };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(rf_dist_parse(bad[i], &d, err, sizeof(err)) < 0);
	/* each refusal names its problem: a value out of range is a number, said so, not
	 * "expected a number" ("normal:-1" was) */
	static const char *const why[][2] = {
		{ "normal:-1", "normal's SD must be a percentage in (0, 100], got -1 (negative)" },
		{ "normal:0", "got 0 (zero)" },
		{ "normal:101", "got 101" },
		{ "zipf:-1", "zipf's THETA must be in (0, 100], got -1 (negative)" },
		{ "pareto:-0.5", "pareto's H must be in (0, 1), got -0.5 (negative)" },
		{ "zipf:-inf", "got -inf (not finite)" },
		{ "zipf:x", "expected a number after 'zipf:', got 'x'" },
		{ "normal:", "expected a number after 'normal:', got ''" },
		{ "pareto:0.5x", "expected a number after 'pareto:', got '0.5x'" },
	};
	for (unsigned i = 0; i < sizeof(why) / sizeof(why[0]); i++) {
		err[0] = 0;
		CHECK(rf_dist_parse(why[i][0], &d, err, sizeof(err)) < 0);
		if (!strstr(err, why[i][1])) {
			fprintf(stderr, "'%s': refused with '%s', expected '%s'\n", why[i][0], err,
				why[i][1]);
			return 1;
		}
	}
	/* pareto with an H so small that log(1 - H) is 0: the power is infinite, and the
	 * draw (once an undefined conversion of inf to an integer) stays in range */
	static const char *const tiny[] = { "pareto:1e-17", "pareto:1e-300", "pareto:0.99999999" };
	for (unsigned i = 0; i < sizeof(tiny) / sizeof(tiny[0]); i++)
		for (uint64_t n = 1; n <= 1000; n *= 10) {
			CHECK_EQ(rf_dist_parse(tiny[i], &d, err, sizeof(err)), 0);
			rf_dist_init(&d, n, 7);
			for (int k = 0; k < 1000; k++)
				CHECK(rf_dist_next(&d) < n);
		}
	return 0;
}
