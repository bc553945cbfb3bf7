/* tools/iobench-jobparse.c -- an rf-iobench --job file's text into sections
 * (iobench-jobparse.h). */
#include "iobench-jobparse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

const struct jp_key keymap[] = {
	{ "filename", "--file", 0 },     { "file", "--file", 0 },
	{ "rw", "--rw", 0 },              { "readwrite", "--rw", 0 },
	{ "bs", "--bs", 0 },              { "blocksize", "--bs", 0 },
	{ "bsrange", "--bs", 0 },         { "blocksize_range", "--bs", 0 },
	{ "bssplit", "--bs", 0 },         { "nrfiles", "--nrfiles", 0 },
	{ "hipri", "--hipri", 1 },        { "stonewall", NULL, 1 },
	{ "wait_for_previous", NULL, 1 },
	{ "iodepth", "--qd", 0 },         { "qd", "--qd", 0 },
	{ "size", "--size", 0 },          { "runtime", "--runtime", 0 },
	{ "numjobs", "--numjobs", 0 },    { "rwmixread", "--rwmixread", 0 },
	{ "norandommap", "--norandommap", 1 },
	{ "fsync", "--fsync", 0 },        { "fdatasync", "--fdatasync", 0 },
	{ "end_fsync", "--end-fsync", 1 },
	{ "verify", "--verify", 0 },
	{ "random_distribution", "--random-distribution", 0 },
	{ "rate", "--rate", 0 },          { "rate_iops", "--rate-iops", 0 },
	{ "direct", "--direct", 1 },      { "fixedbufs", "--fixedbufs", 1 },
	{ "batch", "--batch", 0 },        { "force", "--force", 1 },
	{ "log_avg_msec", "--log-interval", 0 }, { "log_interval", "--log-interval", 0 },
	{ "log_prefix", "--log-prefix", 0 },
	{ "offset", "--offset", 0 },      { "ramp_time", "--ramp-time", 0 },
	{ "sqthread_poll", "--sqpoll", 1 }, { "sqpoll", "--sqpoll", 1 },
	{ "invalidate", "--invalidate", 0 },
	{ "time_based", NULL, 1 },        /* implied by runtime: accepted, nothing to pass */
	{ "ioengine", NULL, 0 },          /* io_uring is the only engine: io_uring accepted */
	{ NULL, NULL, 0 },
};

static void norm(char *k)
{
	for (; *k; k++)
		if (*k == '-')
			*k = '_';
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	char *e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = 0;
	return s;
}

/* Whether v holds a number with an IEC suffix (4KiB, 1MiB, 2gib). */
static int iec_suffix(const char *v)
{
	for (const char *c = v; *c; c++)
		if (c > v && c[-1] >= '0' && c[-1] <= '9' && strchr("kKmMgGtTpP", *c) && c[1] &&
		    (c[1] == 'i' || c[1] == 'I') && (c[2] == 'b' || c[2] == 'B'))
			return 1;
	return 0;
}

int lookup(const char *key)
{
	for (unsigned i = 0; keymap[i].key; i++)
		if (!strcmp(keymap[i].key, key))
			return (int)i;
	return -1;
}

#define FAIL(...) do { snprintf(err, elen, __VA_ARGS__); ret = -1; goto out; } while (0)

static int add_kv(const char *path, struct section *s, const char *k, const char *v, int line,
		  char *err, size_t elen)
{
	int ret = 0;
	if (strlen(v) >= sizeof(s->kv[0].val))
		FAIL("--job %s: line %d: the value of %s is longer than %zu characters", path, line,
		     k, sizeof(s->kv[0].val) - 1);
	if (s->n == s->cap) {
		unsigned cap = s->cap ? 2 * s->cap : 16;
		struct kv *kv = realloc(s->kv, cap * sizeof(*s->kv));
		if (!kv)
			FAIL("--job %s: line %d: out of memory", path, line);
		s->kv = kv;
		s->cap = cap;
	}
	struct kv *e = &s->kv[s->n++];
	snprintf(e->key, sizeof(e->key), "%s", k);
	snprintf(e->val, sizeof(e->val), "%s", v);
	e->line = line;
out:
	return ret;
}

int jp_parse(FILE *f, const char *path, struct jp_file *jf, char *err, size_t elen)
{
	char *buf = NULL;
	size_t cap = 0;
	ssize_t got;
	int line = 0, ret = 0;

	jf->secs = NULL;
	jf->n = 0;
	errno = 0;
	while ((got = getline(&buf, &cap, f)) >= 0) {
		line++;
		/* a NUL would cut the line short unseen: the file is not text (a binary
		 * given by mistake), said as such rather than as a long line */
		const char *nul = memchr(buf, 0, (size_t)got);
		if (nul)
			FAIL("--job %s: line %d: a NUL byte at column %zu: not a text file", path,
			     line, (size_t)(nul - buf) + 1);
		if ((size_t)got - (buf[got - 1] == '\n') > RF_JOB_LINE_MAX)
			FAIL("--job %s: line %d: longer than %d characters", path, line,
			     RF_JOB_LINE_MAX);
		char *l = trim(buf);
		if (!*l || *l == ';' || *l == '#')
			continue;
		if (*l == '[') {
			char *e = strchr(l, ']');
			if (!e || e[1] || e == l + 1)
				FAIL("--job %s: line %d: expected [section-name], got '%s'", path, line, l);
			*e = 0;
			struct section *secs = realloc(jf->secs, (jf->n + 1) * sizeof(*secs));
			if (!secs)
				FAIL("--job %s: line %d: out of memory", path, line);
			jf->secs = secs;
			memset(&secs[jf->n], 0, sizeof(secs[jf->n]));
			snprintf(secs[jf->n].name, sizeof(secs[jf->n].name), "%s", l + 1);
			secs[jf->n].line = line;
			jf->n++;
			continue;
		}
		if (!jf->n)
			FAIL("--job %s: line %d: '%s' before any [section]", path, line, l);
		/* a comment after the value (fio's ';' or '#'): cut off, not read as part of
		 * it (filename=f ; scratch made a file named "f ; scratch") */
		for (char *c = l; *c; c++)
			if ((*c == ';' || *c == '#') && c > l && (c[-1] == ' ' || c[-1] == '\t')) {
				*c = 0;
				l = trim(l);
				break;
			}
		char *eq = strchr(l, '=');
		char key[64];
		const char *val = eq ? trim(eq + 1) : NULL;
		if (eq)
			*eq = 0;
		snprintf(key, sizeof(key), "%s", trim(l));
		norm(key);
		int k = lookup(key);
		if (k < 0)
			FAIL("--job %s: line %d: unknown key '%s' (known: fio's filename, rw, bs, "
			     "iodepth, size, runtime, numjobs, rwmixread, norandommap, fsync, fdatasync, "
			     "end_fsync, verify, random_distribution, rate, rate_iops, direct, fixedbufs, "
			     "log_avg_msec, and rf-iobench's options)", path, line, key);
		if (keymap[k].flag && val && strcmp(val, "1") && strcmp(val, "0"))
			FAIL("--job %s: line %d: %s takes no value (or 0/1), got '%s'", path, line, key,
			     val);
		if (!keymap[k].flag && (!val || !*val))
			FAIL("--job %s: line %d: %s needs a value (%s=...)", path, line, key, key);
		if (!strcmp(key, "ioengine") && strcmp(val, "io_uring"))
			FAIL("--job %s: line %d: ioengine=%s: rf-iobench is io_uring only", path, line,
			     val);
		/* what fio reads otherwise than rf-iobench would: said, not run differently */
		if (val && !keymap[k].flag && keymap[k].opt && strcmp(keymap[k].opt, "--file") &&
		    strcmp(keymap[k].opt, "--log-prefix") && iec_suffix(val))
			FAIL("--job %s: line %d: %s=%s: fio's default (kb_base=1024) reads KiB, MiB "
			     "and GiB as powers of 1000 (bs=4KiB is 4000 bytes), rf-iobench as powers "
			     "of 1024: write k, m or g (1024-based in both) or the bytes", path, line,
			     key, val);
		char secs[48];
		if (!strcmp(key, "runtime") || !strcmp(key, "ramp_time")) {
			/* fio's time: a whole number with a unit (us, ms, s, m, h; seconds by
			 * default) -- 1.5 is 1 s to fio: refused here, not run for 1.5 s */
			char *end;
			unsigned long long n = strtoull(val, &end, 10);
			double mul = !*end || !strcmp(end, "s") ? 1 : !strcmp(end, "ms") ? 1e-3 :
				     !strcmp(end, "us") ? 1e-6 : !strcmp(end, "m") ? 60 :
				     !strcmp(end, "h") ? 3600 : -1;
			if (end == val || *val < '0' || *val > '9' || mul < 0)
				FAIL("--job %s: line %d: %s=%s: expected a whole number with an "
				     "optional unit of fio's (us, ms, s, m, h; 1.5 is 1 s to fio: "
				     "write 1500ms)", path, line, key, val);
			snprintf(secs, sizeof(secs), "%.6f", (double)n * mul);
			val = secs;
		}
		if (add_kv(path, &jf->secs[jf->n - 1], key, val ? val : "1", line, err, elen) < 0) {
			ret = -1;
			goto out;
		}
	}
	if (ferror(f))
		FAIL("--job %s: reading after line %d: %s", path, line, strerror(errno));
out:
	free(buf);
	return ret;
}

void jp_free(struct jp_file *jf)
{
	for (unsigned i = 0; i < jf->n; i++)
		free(jf->secs[i].kv);
	free(jf->secs);
	jf->secs = NULL;
	jf->n = 0;
}
