/* tools/iobench-hist.h -- rf-iobench's latency histogram, in HdrHistogram's scheme:
 * values below 2048 ns are counted exactly; above, each power-of-two range [2^m,
 * 2^(m+1)) is cut into 1024 equal sub-buckets, so a value is known to within 1/1024
 * of itself (0.1 %) at any magnitude, in a fixed 440 KiB whatever the run's length.
 * Percentiles are nearest-rank (the smallest value with at least p % of the samples
 * at or below it, as fio reports them), taken at the middle of their sub-bucket: the
 * reported value is within 1/2048 of the exact one (tests/tools/test-iobench-hist.c
 * checks it against sorted samples). Debian ships no HdrHistogram C library. */
#ifndef RF_IOBENCH_HIST_H
#define RF_IOBENCH_HIST_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RF_HIST_SUB 1024u                     /* sub-buckets per power of two */
#define RF_HIST_EXACT (2 * RF_HIST_SUB)       /* values below are counted one by one */
#define RF_HIST_N (RF_HIST_EXACT + 53 * RF_HIST_SUB)

struct rf_hist {
	uint64_t n, sum, min, max;
	uint64_t c[RF_HIST_N];
};

static inline unsigned rf_hist_index(uint64_t v)
{
	if (v < RF_HIST_EXACT)
		return (unsigned)v;
	unsigned msb = 63 - (unsigned)__builtin_clzll(v); /* >= 11 */
	unsigned shift = msb - 10;                       /* >= 1 */
	unsigned sub = (unsigned)(v >> shift);           /* [1024, 2048) */
	return RF_HIST_EXACT + (shift - 1) * RF_HIST_SUB + (sub - RF_HIST_SUB);
}

/* The lowest value of bucket i and the bucket's width. */
static inline void rf_hist_range(unsigned i, uint64_t *lo, uint64_t *width)
{
	if (i < RF_HIST_EXACT) {
		*lo = i;
		*width = 1;
		return;
	}
	unsigned shift = (i - RF_HIST_EXACT) / RF_HIST_SUB + 1;
	uint64_t sub = (i - RF_HIST_EXACT) % RF_HIST_SUB + RF_HIST_SUB;
	*lo = sub << shift;
	*width = 1ull << shift;
}

static inline void rf_hist_init(struct rf_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

static inline void rf_hist_add(struct rf_hist *h, uint64_t v)
{
	h->c[rf_hist_index(v)]++;
	h->n++;
	h->sum += v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

static inline void rf_hist_merge(struct rf_hist *dst, const struct rf_hist *src)
{
	for (unsigned i = 0; i < RF_HIST_N; i++)
		dst->c[i] += src->c[i];
	dst->n += src->n;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

/* The p-th percentile (0 < p <= 100), nearest rank; 0 when empty. Exact below 2048;
 * above, the middle of the sub-bucket (clamped to [min, max]). */
static inline double rf_hist_pct(const struct rf_hist *h, double p)
{
	if (!h->n)
		return 0;
	uint64_t want = (uint64_t)ceil(p / 100.0 * (double)h->n), seen = 0;
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < RF_HIST_N; i++) {
		seen += h->c[i];
		if (seen >= want) {
			uint64_t lo, w;
			rf_hist_range(i, &lo, &w);
			double v = (double)lo + (double)(w - 1) / 2.0;
			if (v < (double)h->min)
				v = (double)h->min;
			if (v > (double)h->max)
				v = (double)h->max;
			return v;
		}
	}
	return (double)h->max;
}

static inline double rf_hist_mean(const struct rf_hist *h)
{
	return h->n ? (double)h->sum / (double)h->n : 0;
}

/* The percentiles rf-iobench reports, as fio's default list. */
static const double rf_hist_pcts[] = { 1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99,
					99.5, 99.9, 99.95, 99.99 };
#define RF_HIST_NPCTS (sizeof(rf_hist_pcts) / sizeof(rf_hist_pcts[0]))

#endif
