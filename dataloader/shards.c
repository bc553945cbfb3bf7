/* shards.c -- names of several WebDataset shards and where their bytes lie: the brace
 * patterns that name a set of shards (DIR/train-{000..146}.tar, as Python's braceexpand
 * writes them), and the map from the virtual payload of a set opened as one dataset
 * (wds.c) to a shard's file and the offset in it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset-impl.h"

/* ---- brace patterns ---------------------------------------------------------------- */

#define RF__NUM_DIGITS 18   /* a number of a range: below 10^18, no overflow anywhere */

/* A range group's content c[0..n): FIRST..LAST or FIRST..LAST..STEP. */
struct brange {
	uint64_t first, last, step, count;
	int width;          /* digits to pad to, 0: none */
};

static int parse_num(const char *s, size_t n, uint64_t *v)
{
	if (n < 1 || n > RF__NUM_DIGITS)
		return -1;
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		*v = *v * 10 + (uint64_t)(s[i] - '0');
	}
	return 0;
}

/* Written with a leading zero (and more than one digit): the range is padded. */
static int zero_led(const char *s, size_t n)
{
	return n > 1 && s[0] == '0';
}

/* 0, or -EINVAL with why. c holds no brace and no comma at its own level. */
static int parse_range(const char *c, size_t n, struct brange *r, char *why, size_t wl)
{
	const char *d1 = n >= 2 ? memmem(c, n, "..", 2) : NULL, *d2;
	const char *names[3] = { "FIRST", "LAST", "STEP" };
	const char *p[3];
	size_t len[3], k = 2;

	if (!d1) {
		snprintf(why, wl, "neither a range (no '..') nor a list (no ',')");
		return -EINVAL;
	}
	p[0] = c;
	len[0] = (size_t)(d1 - c);
	p[1] = d1 + 2;
	d2 = memmem(p[1], n - len[0] - 2, "..", 2);
	len[1] = d2 ? (size_t)(d2 - p[1]) : n - len[0] - 2;
	if (d2) {
		p[2] = d2 + 2;
		len[2] = n - (size_t)(p[2] - c);
		k = 3;
	}
	uint64_t v[3] = { 0, 0, 1 };
	for (size_t i = 0; i < k; i++)
		if (parse_num(p[i], len[i], &v[i])) {
			snprintf(why, wl, "%s is %s%.*s%s, expected an unsigned decimal number of 1 to "
				 "%d digits", names[i], len[i] ? "'" : "", len[i] > 24 ? 24 : (int)len[i],
				 p[i], len[i] ? "'" : "empty", RF__NUM_DIGITS);
			return -EINVAL;
		}
	if (!v[2]) {
		snprintf(why, wl, "step 0, expected 1 or more");
		return -EINVAL;
	}
	r->first = v[0];
	r->last = v[1];
	r->step = v[2];
	r->count = (v[0] <= v[1] ? v[1] - v[0] : v[0] - v[1]) / v[2] + 1;
	r->width = zero_led(p[0], len[0]) || zero_led(p[1], len[1]) ?
		   (int)(len[0] > len[1] ? len[0] : len[1]) : 0;
	return 0;
}

/* Check every group of pat before anything is expanded, so that a refusal names the
 * offset of the group in the pattern as written. 0 or -EINVAL with why. */
static int brace_check(const char *pat, char *why, size_t wl)
{
	size_t n = strlen(pat), depth = 0;
	struct { size_t open; int comma; } *st = malloc((n + 1) * sizeof(*st));
	int ret = 0;

	if (!st) {
		snprintf(why, wl, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && !ret; i++) {
		if (pat[i] == '{') {
			st[depth].open = i;
			st[depth++].comma = 0;
		} else if (pat[i] == ',' && depth) {
			st[depth - 1].comma = 1;
		} else if (pat[i] == '}') {
			char sub[200];
			struct brange r;
			if (!depth) {
				snprintf(why, wl, "offset %zu: '}' without a '{' before it", i);
				ret = -EINVAL;
				break;
			}
			size_t o = st[--depth].open;
			if (st[depth].comma || !parse_range(pat + o + 1, i - o - 1, &r, sub, sizeof(sub)))
				continue;
			snprintf(why, wl, "offset %zu: '%.*s%s': %s; expected {FIRST..LAST} or "
				 "{FIRST..LAST..STEP} of unsigned decimal numbers, or a list {A,B,...}",
				 o, i - o + 1 > 48 ? 48 : (int)(i - o + 1), pat + o,
				 i - o + 1 > 48 ? "..." : "", sub);
			ret = -EINVAL;
		}
	}
	if (!ret && depth) {
		snprintf(why, wl, "offset %zu: '{' without its '}'", st[depth - 1].open);
		ret = -EINVAL;
	}
	free(st);
	return ret;
}

/* A growing array of owned strings. */
struct strv {
	char **v;
	size_t n, cap;
};

static int strv_push(struct strv *s, char *x)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		char **v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = x;
	return 0;
}

static void strv_free(struct strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
}

/* The first group of s (checked by brace_check): '{' at *open, its '}' at *close; 0
 * when s has none. */
static int first_group(const char *s, size_t *open, size_t *close)
{
	const char *o = strchr(s, '{');
	size_t depth = 0;

	if (!o)
		return 0;
	*open = (size_t)(o - s);
	for (size_t i = *open; s[i]; i++) {
		depth += s[i] == '{';
		if (s[i] == '}' && !--depth) {
			*close = i;
			return 1;
		}
	}
	return 0; /* cannot happen after brace_check */
}

/* prefix + alt + suffix, or NULL (*ret set) past the name limit or out of memory. */
static char *splice(const char *s, size_t open, const char *alt, size_t altn, const char *suf,
		    int *ret)
{
	size_t sn = strlen(suf), n = open + altn + sn;
	char *x;

	if (n > RF__NAME_MAX) {
		*ret = -ENAMETOOLONG;
		return NULL;
	}
	if (!(x = malloc(n + 1))) {
		*ret = -ENOMEM;
		return NULL;
	}
	memcpy(x, s, open);
	memcpy(x + open, alt, altn);
	memcpy(x + open + altn, suf, sn + 1);
	return x;
}

/* Push the alternatives of s's group [open, close], last first (so that the first is
 * popped first: names come out in the order of the pattern). */
static int push_alts(struct strv *stack, size_t done, size_t max, const char *s, size_t open,
		     size_t close)
{
	const char *c = s + open + 1, *suf = s + close + 1;
	size_t cn = close - open - 1, depth = 0, ncut = 0, *cut;
	struct brange r = { 0 };
	char num[32], why[160];
	int ret = 0;

	if (!(cut = malloc((cn + 2) * sizeof(*cut))))
		return -ENOMEM;
	cut[ncut++] = 0;                 /* item k is c[cut[k], cut[k + 1] - 1) */
	for (size_t i = 0; i < cn; i++) {
		depth += c[i] == '{';
		depth -= c[i] == '}';
		if (c[i] == ',' && !depth)
			cut[ncut++] = i + 1;
	}
	cut[ncut] = cn + 1;
	if (ncut == 1 && parse_range(c, cn, &r, why, sizeof(why)) < 0)
		ret = -EINVAL;           /* cannot happen after brace_check */
	uint64_t k = ncut > 1 ? ncut : r.count;
	if (!ret && (k > max || stack->n + done > max - k))
		ret = -E2BIG;            /* each string left yields one name at least */
	for (uint64_t i = k; !ret && i-- > 0;) {
		char *x;
		if (ncut > 1) {
			x = splice(s, open, c + cut[i], cut[i + 1] - 1 - cut[i], suf, &ret);
		} else {
			uint64_t v = r.first <= r.last ? r.first + i * r.step : r.first - i * r.step;
			int w = snprintf(num, sizeof(num), "%0*" PRIu64, r.width, v);
			x = splice(s, open, num, (size_t)w, suf, &ret);
		}
		if (x && (ret = strv_push(stack, x)) < 0)
			free(x);
	}
	free(cut);
	return ret;
}

int rf__brace_expand(const char *pat, size_t max, char ***out, size_t *nout, char *why,
		     size_t wl)
{
	struct strv stack = { 0 }, done = { 0 };
	size_t bytes = 0;
	char **res, *p;
	int ret;

	*out = NULL;
	*nout = 0;
	if (strlen(pat) > RF__NAME_MAX) {
		snprintf(why, wl, "a pattern of %zu bytes, expected %d at most", strlen(pat),
			 RF__NAME_MAX);
		return -ENAMETOOLONG;
	}
	if ((ret = brace_check(pat, why, wl)) < 0)
		return ret;
	if (!max) {
		snprintf(why, wl, "no name may be made (limit 0)");
		return -E2BIG;
	}
	if (!(p = strdup(pat)) || (ret = strv_push(&stack, p)) < 0) {
		free(p);
		ret = -ENOMEM;
	}
	while (!ret && stack.n) {
		size_t open, close;
		char *s = stack.v[--stack.n];
		if (!first_group(s, &open, &close)) {
			if ((ret = strv_push(&done, s)) < 0)
				free(s);
			else
				bytes += strlen(s) + 1;
			continue;
		}
		ret = push_alts(&stack, done.n, max, s, open, close);
		free(s);
	}
	if (ret == -E2BIG)
		snprintf(why, wl, "expands to more than %zu names", max);
	else if (ret == -ENAMETOOLONG)
		snprintf(why, wl, "expands to a name of more than %d bytes", RF__NAME_MAX);
	else if (ret < 0)
		snprintf(why, wl, "out of memory");
	if (!ret && !(res = malloc(done.n * sizeof(char *) + bytes))) {
		snprintf(why, wl, "out of memory for %zu names", done.n);
		ret = -ENOMEM;
	}
	if (!ret) {
		char *q = (char *)(res + done.n);
		for (size_t i = 0; i < done.n; i++) {
			size_t l = strlen(done.v[i]) + 1;
			res[i] = memcpy(q, done.v[i], l);
			q += l;
		}
		*out = res;
		*nout = done.n;
	}
	strv_free(&stack);
	strv_free(&done);
	return ret;
}

int rf_dataset_is_shard_pattern(const char *path)
{
	size_t n = path ? strlen(path) : 0;
	struct stat st;

	if (n < 5 || strcasecmp(path + n - 4, ".tar") || !strchr(path, '{'))
		return 0;
	return !strncmp(path, "http://", 7) || stat(path, &st) < 0;
}

/* ---- the parts of a set of shards ------------------------------------------------ */

int rf_dataset_part_of(const struct rf_dataset *ds, uint64_t offset, uint64_t length,
		       unsigned *part, uint64_t *real)
{
	const struct rf_dataset_part *p = ds->parts;
	unsigned lo = 0, hi = ds->nparts;

	*part = 0;
	*real = offset;
	if (offset > ds->src[RF_DS_SRC_PAYLOAD].size ||
	    length > ds->src[RF_DS_SRC_PAYLOAD].size - offset)
		return -ERANGE;
	if (!p || !hi)
		return 0;
	while (hi - lo > 1) {            /* the last part whose base is <= offset */
		unsigned mid = lo + (hi - lo) / 2;
		if (p[mid].base <= offset)
			lo = mid;
		else
			hi = mid;
	}
	if (offset < p[lo].base || offset - p[lo].base > p[lo].size ||
	    length > p[lo].size - (offset - p[lo].base))
		return -ERANGE;
	*part = lo;
	*real = offset - p[lo].base;
	return 0;
}

void rf__ds_parts_free(struct rf_dataset *ds)
{
	for (unsigned k = 0; ds->parts && k < ds->nparts; k++) {
		if (ds->parts[k].fd >= 0)
			close(ds->parts[k].fd);
		free(ds->parts[k].path);
	}
	free(ds->parts);
	ds->parts = NULL;
	ds->nparts = 0;
}
