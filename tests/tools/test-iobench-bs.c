/* test-iobench-bs: rf-iobench's --bs specs (tools/iobench-bs.h). A size, a range and a
 * split parse to their grain and largest size; a split's draws follow its shares (sizes
 * without a share divide the rest equally) within 1 % over 200,000 draws, a range's are
 * multiples of its smaller size spread evenly up to the larger, "4k-4k" is one size; and
 * the parser refuses what it must (each refusal's wording reaching the user is
 * tests/tools/test-cli-errors.sh's). */
#include <stdio.h>
#include <stdlib.h>

#include "../../tools/iobench/iobench-bs.h"
#include "../../tools/iobench/iobench-map.h"
#include "../test-util.h"

enum { DRAWS = 200000 };

static struct rf_bs parse(const char *s)
{
	struct rf_bs b;
	char err[160];
	if (rf_bs_parse(s, &b, err, sizeof(err)) < 0) {
		fprintf(stderr, "'%s' refused: %s\n", s, err);
		exit(1);
	}
	return b;
}

/* The share (percent) of draws of each size. */
static void shares(const struct rf_bs *b, const uint64_t *sizes, const double *want, unsigned n)
{
	uint64_t cnt[8] = { 0 }, seed = 99;
	for (int i = 0; i < DRAWS; i++) {
		uint64_t v = rf_bs_draw(b, rf_randmap_mix(seed += 0x9e3779b97f4a7c15ull));
		unsigned k = 0;
		while (k < n && sizes[k] != v)
			k++;
		CHECK(k < n); /* only the split's sizes */
		cnt[k]++;
	}
	for (unsigned k = 0; k < n; k++) {
		double got = 100.0 * (double)cnt[k] / DRAWS;
		if (got < want[k] - 1 || got > want[k] + 1) {
			fprintf(stderr, "size %llu: %.2f %% of draws, want %.2f\n",
				(unsigned long long)sizes[k], got, want[k]);
			exit(1);
		}
	}
}

int main(void)
{
	struct rf_bs b = parse("4k");
	CHECK(b.grain == 4096 && b.max == 4096 && b.n == 1 && rf_bs_draw(&b, 12345) == 4096);
	b = parse("4k-4k");
	CHECK(b.grain == 4096 && b.max == 4096 && b.n == 1);
	b = parse("1m/100");
	CHECK(b.n == 1 && b.grain == 1u << 20);

	b = parse("4k/50:64k/50");
	CHECK(b.grain == 4096 && b.max == 65536 && b.n == 2);
	shares(&b, (uint64_t[]){ 4096, 65536 }, (double[]){ 50, 50 }, 2);
	b = parse("64k/10:4k:8k/30:16k"); /* 4k and 16k share the 60 % left: 30 each */
	CHECK(b.grain == 4096 && b.max == 65536 && b.n == 4);
	shares(&b, (uint64_t[]){ 65536, 4096, 8192, 16384 }, (double[]){ 10, 30, 30, 30 }, 4);
	b = parse("4k/0:8k"); /* a zero share: never drawn, still the grain */
	CHECK(b.grain == 4096);
	shares(&b, (uint64_t[]){ 4096, 8192 }, (double[]){ 0, 100 }, 2);
	b = parse("4k:8k:12k"); /* thirds: 3333, 3333, 3334 hundredths */
	shares(&b, (uint64_t[]){ 4096, 8192, 12288 }, (double[]){ 33.33, 33.33, 33.34 }, 3);

	/* a range: multiples of the smaller, evenly, up to the larger (10k: 4k and 8k) */
	b = parse("4k-10k");
	CHECK(b.n == 0 && b.grain == 4096 && b.max == 10240);
	shares(&b, (uint64_t[]){ 4096, 8192 }, (double[]){ 50, 50 }, 2);
	b = parse("512-2k");
	shares(&b, (uint64_t[]){ 512, 1024, 1536, 2048 }, (double[]){ 25, 25, 25, 25 }, 4);

	static const char *const bad[] = { "", "0", "4k-", "-4k", "8k-4k", "4k-2g", "2g",
					   "4k/50:8k/40", "4k/60:8k/60:16k", "6k/50:4k/50",
					   "4k/", "4k/x", "4k/101", "4k/-1", "4k/50:", ":4k",
					   "4k/5x", "4k//50" };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[160] = "";
		if (rf_bs_parse(bad[i], &b, err, sizeof(err)) == 0 || !err[0]) {
			fprintf(stderr, "'%s' accepted (or refused without a reason)\n", bad[i]);
			return 1;
		}
	}
	/* each names its problem: a sign is not an empty size ("-4k" was "an empty or
	 * overlong size") */
	static const char *const why[][2] = {
		{ "-4k", "'-4k' is negative" },
		{ "-4k-8k", "is negative" },
		{ "4k--8k", "'-8k' has a sign" },
		{ "4k/50:-8k/50", "'-8k' has a sign" },
		{ "+4k", "'+4k' has a sign" },
		{ "4k-", "an empty size" },
		{ ":4k", "an empty size" },
		{ "4k-1234567890123456789012345678901234567890123456789012345678901234567890",
		  "too long for a size" },
	};
	for (unsigned i = 0; i < sizeof(why) / sizeof(why[0]); i++) {
		char e[160] = "";
		if (rf_bs_parse(why[i][0], &b, e, sizeof(e)) == 0 || !strstr(e, why[i][1])) {
			fprintf(stderr, "'%s': refused with '%s', expected '%s'\n", why[i][0], e,
				why[i][1]);
			return 1;
		}
	}
	char many[4 * (RF_BS_MAX + 1)] = "4k"; /* one entry more than a split may have */
	for (int i = 0; i < RF_BS_MAX; i++)
		strcat(many, ":4k");
	char err[160] = "";
	CHECK(rf_bs_parse(many, &b, err, sizeof(err)) < 0 && strstr(err, "more than 64 sizes"));
	printf("iobench bs: sizes, ranges and splits parse; draws follow the shares: ok\n");
	return 0;
}
