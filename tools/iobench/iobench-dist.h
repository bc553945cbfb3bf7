/* tools/iobench-dist.h -- rf-iobench --random-distribution: which block a random I/O
 * goes to, as fio's random_distribution:
 *   random       uniform (with the random map: each block once a pass)
 *   zipf:THETA   P(rank k) proportional to 1/k^THETA (THETA > 0), drawn exactly by
 *                rejection-inversion (Hoermann & Derflinger 1996) in O(1) memory
 *   pareto:H     rank = (n-1) * u^(log(H)/log(1-H)), 0 < H < 1, as fio's pareto
 *   normal:SD    centred on the middle of the region, SD percent of it, 0 < SD <= 100
 * Zipf and pareto draw ranks (0 hottest); a fixed bijection of [0, n) (a Feistel
 * permutation, as the random map's) scatters them over the region, so the hot blocks
 * are not all at the start. tests/tools/test-iobench-dist.c checks zipf with a
 * chi-square test. */
#ifndef RF_IOBENCH_DIST_H
#define RF_IOBENCH_DIST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iobench-map.h"

enum { RF_DIST_RANDOM = 0, RF_DIST_ZIPF, RF_DIST_PARETO, RF_DIST_NORMAL };

struct rf_dist {
	int kind;
	double p;                 /* THETA, H or SD */
	uint64_t n;
	uint64_t rng;
	struct rf_randmap scatter;
	/* zipf */
	double hx1, hxn, s;
	/* pareto */
	double pow;
};

/* Parse "random", "zipf:THETA", "pareto:H", "normal:SD": 0, or -1 with why in err. */
static inline int rf_dist_parse(const char *v, struct rf_dist *d, char *err, size_t elen)
{
	memset(d, 0, sizeof(*d));
	if (!strcmp(v, "random"))
		return 0;
	static const char *const names[] = { "zipf:", "pareto:", "normal:" };
	for (int k = 0; k < 3; k++) {
		size_t l = strlen(names[k]);
		if (strncmp(v, names[k], l))
			continue;
		const char *num = v + l;
		char *end;
		double x = 0;
		if (*num && strchr("+-0123456789.", *num))
			x = strtod(num, &end);
		if (!*num || !strchr("+-0123456789.", *num) || end == num || *end) {
			snprintf(err, elen, "expected a number after '%s', got '%s'", names[k], num);
			return -1;
		}
		if ((k == 0 && !(x > 0 && x <= 100)) || (k == 1 && !(x > 0 && x < 1)) ||
		    (k == 2 && !(x > 0 && x <= 100))) {
			snprintf(err, elen, "%s, got %s%s", k == 0 ? "zipf's THETA must be in (0, 100]" :
				 k == 1 ? "pareto's H must be in (0, 1)" :
				 "normal's SD must be a percentage in (0, 100]", num,
				 !isfinite(x) ? " (not finite)" : x < 0 ? " (negative)" :
				 x == 0 ? " (zero)" : "");
			return -1;
		}
		d->kind = RF_DIST_ZIPF + k;
		d->p = x;
		return 0;
	}
	snprintf(err, elen, "expected random, zipf:THETA, pareto:H or normal:SD");
	return -1;
}

static inline double rf_dist_helper1(double x) /* log1p(x)/x */
{
	return fabs(x) > 1e-8 ? log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - x * 0.25));
}

static inline double rf_dist_helper2(double x) /* expm1(x)/x */
{
	return fabs(x) > 1e-8 ? expm1(x) / x : 1 + x * 0.5 * (1 + x * (1.0 / 3) * (1 + x * 0.25));
}

static inline double rf_zipf_h(double s, double x)
{
	return exp(-s * log(x));
}

static inline double rf_zipf_hint(double s, double x)
{
	double lx = log(x);
	return rf_dist_helper2((1 - s) * lx) * lx;
}

static inline double rf_zipf_hinv(double s, double x)
{
	double t = x * (1 - s);
	if (t < -1)
		t = -1;
	return exp(rf_dist_helper1(t) * x);
}

static inline double rf_dist_unit(uint64_t *s)
{
	return (double)(rf_randmap_mix(*s += 0x9e3779b97f4a7c15ull) >> 11) * 0x1.0p-53;
}

static inline void rf_dist_init(struct rf_dist *d, uint64_t n, uint64_t seed)
{
	d->n = n;
	d->rng = seed;
	rf_randmap_init(&d->scatter, n, seed ^ 0x5ca77e5ull);
	if (d->kind == RF_DIST_ZIPF) {
		double s = d->p;
		d->hx1 = rf_zipf_hint(s, 1.5) - 1;
		d->hxn = rf_zipf_hint(s, (double)n + 0.5);
		d->s = 2 - rf_zipf_hinv(s, rf_zipf_hint(s, 2.5) - rf_zipf_h(s, 2));
	} else if (d->kind == RF_DIST_PARETO) {
		d->pow = log(d->p) / log(1 - d->p);
	}
}

/* Zipf: a rank in [0, n), 0 the most likely (rejection-inversion). */
static inline uint64_t rf_dist_zipf_rank(struct rf_dist *d)
{
	double s = d->p;
	for (;;) {
		double u = d->hxn + rf_dist_unit(&d->rng) * (d->hx1 - d->hxn);
		double x = rf_zipf_hinv(s, u);
		double kd = floor(x + 0.5);
		if (kd < 1)
			kd = 1;
		else if (kd > (double)d->n)
			kd = (double)d->n;
		if (kd - x <= d->s || u >= rf_zipf_hint(s, kd + 0.5) - rf_zipf_h(s, kd))
			return (uint64_t)kd - 1;
	}
}

/* The rank's block: a fixed bijection of [0, n) (cycle walking in the Feistel
 * domain, as the random map). */
static inline uint64_t rf_dist_scatter(const struct rf_dist *d, uint64_t rank)
{
	uint64_t v = rank;
	do
		v = rf_randmap_feistel(&d->scatter, v);
	while (v >= d->n);
	return v;
}

/* The next block in [0, n). */
static inline uint64_t rf_dist_next(struct rf_dist *d)
{
	switch (d->kind) {
	case RF_DIST_ZIPF:
		return rf_dist_scatter(d, rf_dist_zipf_rank(d));
	case RF_DIST_PARETO: {
		/* clamped as a double: an H so small that log(1 - H) is 0 makes the power
		 * infinite, and converting inf or NaN to an integer is undefined */
		double x = (double)(d->n - 1) * pow(rf_dist_unit(&d->rng), d->pow);
		uint64_t r = x >= 0 && x < (double)(d->n - 1) ? (uint64_t)x : d->n - 1;
		return rf_dist_scatter(d, r);
	}
	case RF_DIST_NORMAL:
		for (;;) {
			double u1 = rf_dist_unit(&d->rng), u2 = rf_dist_unit(&d->rng);
			if (u1 <= 0)
				continue;
			double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
			double x = (double)d->n / 2 + z * d->p / 100.0 * (double)d->n;
			if (x >= 0 && x < (double)d->n)
				return (uint64_t)x;
		}
	default:
		return rf_randmap_mix(d->rng += 0x9e3779b97f4a7c15ull) % d->n;
	}
}

#endif
