/* fuzz-braces: brace patterns of WebDataset shard names (dataloader/shards.c,
 * rf__brace_expand: {FIRST..LAST[..STEP]} ranges, {A,B,...} lists, nested, several per
 * name). The input is the pattern (at most 512 bytes, no selector byte). Oracles: a
 * refusal says why and returns nothing; an expansion returns 1 to max names, none longer
 * than the pattern, none with a brace left, their number what a counter written apart
 * from the expander (below: sums over lists, products over a name's groups) finds, and a
 * name with no brace expands to itself; a pattern refused for its count holds more names
 * than the limit by that counter. */
#include "fuzz.h"

#include <errno.h>

#include "dataset-impl.h"

#define FZ_MAX 2000
#define FZ_SAT (1ull << 40)

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return a && b > FZ_SAT / a ? FZ_SAT : a * b;
}

static uint64_t count_seq(const char *s, size_t n);

/* The names group content c[0..n) stands for: a list's items' sum, a range's length. */
static uint64_t count_group(const char *c, size_t n)
{
	size_t depth = 0, start = 0, items = 0;
	uint64_t sum = 0;

	for (size_t i = 0; i <= n; i++) {
		if (i < n && c[i] == '{')
			depth++;
		else if (i < n && c[i] == '}')
			depth--;
		else if (i == n || (c[i] == ',' && !depth)) {
			if (i == n && !items)
				break;
			sum += count_seq(c + start, i - start);
			if (sum > FZ_SAT)
				sum = FZ_SAT;
			start = i + 1;
			items++;
		}
	}
	if (items)
		return sum;
	unsigned long long v[3] = { 0, 0, 0 };
	int k = 0;
	for (size_t i = 0; i < n; i++) {
		if (c[i] == '.') {
			i++;          /* ".." */
			k++;
			continue;
		}
		v[k] = v[k] * 10 + (unsigned long long)(c[i] - '0');
	}
	return (v[0] > v[1] ? v[0] - v[1] : v[1] - v[0]) / (k == 2 ? v[2] : 1) + 1;
}

/* The names s[0..n) stands for: the product of its top-level groups'. */
static uint64_t count_seq(const char *s, size_t n)
{
	uint64_t prod = 1;

	for (size_t i = 0; i < n; i++) {
		if (s[i] != '{')
			continue;
		size_t depth = 0, j = i;
		for (; j < n; j++) {
			depth += s[j] == '{';
			if (s[j] == '}' && !--depth)
				break;
		}
		prod = sat_mul(prod, count_group(s + i + 1, j - i - 1));
		i = j;
	}
	return prod;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	char **out, why[400];
	size_t k;

	if (n > 512)
		return 0;
	char *pat = fz_str(d, n);
	why[0] = 0;
	int ret = rf__brace_expand(pat, FZ_MAX, &out, &k, why, sizeof(why));
	if (ret < 0) {
		FZ_ASSERT(out == NULL && k == 0 && why[0]);
		FZ_ASSERT(ret == -EINVAL || ret == -E2BIG || ret == -ENAMETOOLONG || ret == -ENOMEM);
		if (ret == -E2BIG)
			FZ_ASSERT(count_seq(pat, strlen(pat)) > FZ_MAX);
		free(pat);
		return 0;
	}
	FZ_ASSERT(out && k >= 1 && k <= FZ_MAX);
	FZ_ASSERT(count_seq(pat, strlen(pat)) == k);
	if (!strchr(pat, '{'))
		FZ_ASSERT(k == 1 && !strcmp(out[0], pat));
	for (size_t i = 0; i < k; i++) {
		char **again;
		size_t m;
		FZ_ASSERT(strlen(out[i]) <= strlen(pat));
		FZ_ASSERT(!strchr(out[i], '{') && !strchr(out[i], '}'));
		if (i < 4) {
			FZ_ASSERT(rf__brace_expand(out[i], 1, &again, &m, why, sizeof(why)) == 0);
			FZ_ASSERT(m == 1 && !strcmp(again[0], out[i]));
			free(again);
		}
	}
	free(out);
	free(pat);
	return 0;
}
