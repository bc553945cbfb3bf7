/* tools/iobench-bs.h -- rf-iobench's sizes: "4096", "4k", "1m" (powers of 1024), and
 * --bs as fio has it: one size ("4k"), a range ("4k-64k", fio's bsrange: each I/O a
 * multiple of the smaller size, drawn uniformly up to the larger) or a split
 * ("4k/50:64k/50", fio's bssplit: each size with its share of the I/Os in percent; sizes
 * without a share divide what is left equally). The smallest size is the grain: offsets
 * are multiples of it (fio's default blockalign), the random map counts grains, and a
 * split's sizes must be multiples of it. tests/tools/test-iobench-bs.c checks the
 * parser's refusals and that draws follow the shares. */
#ifndef RF_IOBENCH_BS_H
#define RF_IOBENCH_BS_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RF_BS_MAX 64          /* entries of a split */
#define RF_BS_LIMIT (1ull << 30)

struct rf_bs {
	uint64_t grain, max;  /* the smallest and the largest size */
	unsigned n;           /* 0: a range [grain, max]; else the split's entries (1: one size) */
	uint64_t size[RF_BS_MAX];
	uint32_t cum[RF_BS_MAX]; /* cumulative shares in hundredths of a percent (to 10000) */
};

/* A size: digits first (no space or sign), then an optional k/m/g/t, 'i' and 'b'.
 * 0 on error (and for "0"). */
static inline uint64_t rf_parse_size(const char *s)
{
	char *end;
	errno = 0;
	if (!s || *s < '0' || *s > '9')
		return 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	uint64_t mul = 1;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	case 't': case 'T': mul = 1ull << 40; end++; break;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end || v > UINT64_MAX / mul)
		return 0;
	return v * mul;
}

/* One size of a --bs spec, [p, e): 0 with why in err if it is not 1..1g. */
static inline uint64_t rf_bs_one(const char *p, size_t len, char *err, size_t elen)
{
	char tmp[64];
	if (!len) {
		snprintf(err, elen, "an empty size, expected one from 1 to 1g");
		return 0;
	}
	if (len >= sizeof(tmp)) {
		snprintf(err, elen, "'%.20s...': %zu characters, too long for a size from 1 to 1g",
			 p, len);
		return 0;
	}
	memcpy(tmp, p, len);
	tmp[len] = 0;
	if (tmp[0] == '-' || tmp[0] == '+') {
		snprintf(err, elen, "'%s' has a sign: a size is a positive number from 1 to 1g",
			 tmp);
		return 0;
	}
	uint64_t v = rf_parse_size(tmp);
	if (!v || v > RF_BS_LIMIT) {
		snprintf(err, elen, "'%s' is not a size from 1 to 1g", tmp);
		return 0;
	}
	return v;
}

/* Parse a --bs spec: 0, or -1 with why in err. */
static inline int rf_bs_parse(const char *s, struct rf_bs *b, char *err, size_t elen)
{
	memset(b, 0, sizeof(*b));
	if (!s || !*s) {
		snprintf(err, elen, "an empty value");
		return -1;
	}
	if (*s == '-') { /* not a range with an empty start: "-4k" is a negative size */
		snprintf(err, elen, "'%s' is negative, expected a size from 1 to 1g (or a range "
			 "MIN-MAX)", s);
		return -1;
	}
	const char *dash = strchr(s, '-');
	if (dash && !strchr(s, '/') && !strchr(s, ':')) { /* a range */
		b->grain = rf_bs_one(s, (size_t)(dash - s), err, elen);
		if (!b->grain)
			return -1;
		b->max = rf_bs_one(dash + 1, strlen(dash + 1), err, elen);
		if (!b->max)
			return -1;
		if (b->max < b->grain) {
			snprintf(err, elen, "a range from a larger to a smaller size");
			return -1;
		}
		b->n = 0;
		if (b->max == b->grain) { /* "4k-4k": one size */
			b->n = 1;
			b->size[0] = b->grain;
			b->cum[0] = 10000;
		}
		return 0;
	}
	/* one size, or a split of SIZE[/PCT] entries separated by ':' */
	int share[RF_BS_MAX];
	unsigned given = 0, without = 0;
	const char *p = s;
	for (;;) {
		const char *e = strchr(p, ':');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (b->n == RF_BS_MAX) {
			snprintf(err, elen, "more than %d sizes in the split", RF_BS_MAX);
			return -1;
		}
		const char *slash = memchr(p, '/', len);
		uint64_t v = rf_bs_one(p, slash ? (size_t)(slash - p) : len, err, elen);
		if (!v)
			return -1;
		share[b->n] = -1;
		if (slash) {
			char tmp[16], *end;
			size_t pl = len - (size_t)(slash + 1 - p);
			if (!pl || pl >= sizeof(tmp)) {
				snprintf(err, elen, "expected a share from 0 to 100 after '/'");
				return -1;
			}
			memcpy(tmp, slash + 1, pl);
			tmp[pl] = 0;
			long pct = tmp[0] >= '0' && tmp[0] <= '9' ? strtol(tmp, &end, 10) : -1;
			if (pct < 0 || pct > 100 || *end) {
				snprintf(err, elen, "share '%s' is not a percentage from 0 to 100", tmp);
				return -1;
			}
			share[b->n] = (int)pct;
			given += (unsigned)pct;
		} else {
			without++;
		}
		b->size[b->n++] = v;
		if (!e)
			break;
		p = e + 1;
	}
	if (given > 100) {
		snprintf(err, elen, "the shares add up to %u %%, more than 100", given);
		return -1;
	}
	if (!without && given != 100) {
		snprintf(err, elen, "the shares add up to %u %%, expected 100", given);
		return -1;
	}
	b->grain = b->max = b->size[0];
	for (unsigned i = 1; i < b->n; i++) {
		if (b->size[i] < b->grain)
			b->grain = b->size[i];
		if (b->size[i] > b->max)
			b->max = b->size[i];
	}
	for (unsigned i = 0; i < b->n; i++)
		if (b->size[i] % b->grain) {
			snprintf(err, elen, "%" PRIu64 " is not a multiple of the smallest size %" PRIu64
				 " (offsets are multiples of it)", b->size[i], b->grain);
			return -1;
		}
	/* the shares in hundredths of a percent; the rest divided among the unshared */
	uint32_t rest = 10000 - 100 * given, acc = 0;
	unsigned k = 0;
	for (unsigned i = 0; i < b->n; i++) {
		if (share[i] >= 0)
			acc += 100 * (uint32_t)share[i];
		else
			acc += ++k == without ? rest - (without - 1) * (rest / without) : rest / without;
		b->cum[i] = acc;
	}
	return 0;
}

/* One I/O's size, from 64 random bits. */
static inline uint64_t rf_bs_draw(const struct rf_bs *b, uint64_t r)
{
	if (!b->n)
		return b->grain * (1 + r % (b->max / b->grain));
	if (b->n == 1)
		return b->size[0];
	uint32_t x = (uint32_t)(r % 10000);
	for (unsigned i = 0; i < b->n; i++)
		if (x < b->cum[i])
			return b->size[i];
	return b->size[b->n - 1];
}

#endif
