/* test-iobench-hist: rf-iobench's latency histogram (tools/iobench-hist.h) against
 * exact nearest-rank percentiles of the same samples (sorted): for a million
 * latencies drawn log-normally around 80 us with a heavy tail to seconds, and for
 * small exact values, every reported percentile (1 .. 99.99) is within 1/2048 of the
 * exact one (exact below 2048 ns), min/max/mean are exact, memory is fixed, and two
 * halves merged give the histogram of the whole. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../tools/iobench/iobench-hist.h"
#include "../test-util.h"

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double exact_pct(const uint64_t *s, uint64_t n, double p)
{
	uint64_t k = (uint64_t)ceil(p / 100.0 * (double)n);
	return (double)s[(k ? k : 1) - 1];
}

static void check(const char *what, uint64_t *v, uint64_t n)
{
	static struct rf_hist h, a, b;
	rf_hist_init(&h);
	rf_hist_init(&a);
	rf_hist_init(&b);
	double sum = 0;
	for (uint64_t i = 0; i < n; i++) {
		rf_hist_add(&h, v[i]);
		rf_hist_add(i % 2 ? &a : &b, v[i]);
		sum += (double)v[i];
	}
	rf_hist_merge(&a, &b);
	qsort(v, n, sizeof(*v), cmp);
	CHECK_EQ(h.min, v[0]);
	CHECK_EQ(h.max, v[n - 1]);
	CHECK(fabs(rf_hist_mean(&h) - sum / (double)n) <= 1e-6 * sum / (double)n);
	for (unsigned i = 0; i < RF_HIST_NPCTS; i++) {
		double p = rf_hist_pcts[i], got = rf_hist_pct(&h, p), want = exact_pct(v, n, p);
		double tol = want < RF_HIST_EXACT ? 0 : want / 2048.0;
		if (fabs(got - want) > tol) {
			fprintf(stderr, "%s: p%g: histogram %.1f, exact %.1f (tolerance %.2f)\n", what, p,
				got, want, tol);
			exit(1);
		}
		CHECK(rf_hist_pct(&a, p) == got); /* merged halves: the same histogram */
	}
	printf("%s: %llu samples, p50 %.0f, p99.99 %.0f ns, all percentiles within 1/2048\n", what,
	       (unsigned long long)n, rf_hist_pct(&h, 50), rf_hist_pct(&h, 99.99));
}

int main(void)
{
	uint64_t n = 1000000;
	unsigned long long s = 7;
	uint64_t *v = malloc(n * sizeof(*v));
	CHECK(v);
	for (uint64_t i = 0; i < n; i++) {
		double u1 = ((double)(t_splitmix64(&s) >> 11) + 0.5) * 0x1.0p-53;
		double u2 = ((double)(t_splitmix64(&s) >> 11) + 0.5) * 0x1.0p-53;
		double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
		double x = 80000.0 * exp(0.6 * z);
		if (i % 1000 == 0)
			x *= 1000; /* stalls: a tail to tens of ms and beyond */
		v[i] = (uint64_t)x;
	}
	check("log-normal with stalls", v, n);
	for (uint64_t i = 0; i < n; i++)
		v[i] = t_splitmix64(&s) % 3000; /* around the exact/log boundary */
	check("uniform 0..3000", v, n);
	v[0] = UINT64_MAX >> 1; /* a huge value still lands in the table */
	check("one huge", v, 1);
	free(v);
	CHECK(sizeof(struct rf_hist) < 512 * 1024);
	return 0;
}
