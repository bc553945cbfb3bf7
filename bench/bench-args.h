/* bench/bench-args.h -- rf-bench's argument parsing, one helper for every subcommand
 * (tools/cli.h's strict number parser underneath): an integer option is digits
 * only -- a k or m suffix where it is a size in bytes -- in the range the subcommand's
 * usage states; anything else is one line naming the subcommand, the option, the
 * value and the range, exit status 2. "--help" (or -h) prints the subcommand's usage
 * on stdout, exit 0. Memory the options ask for is checked against the machine's
 * before it is allocated. Header-only. */
#ifndef RF_BENCH_ARGS_H
#define RF_BENCH_ARGS_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* argv[*i] is an option that takes a value: its value, an integer in [min, max] (with
 * a k or m suffix, times 2^10 or 2^20, where sizes is 1), into *out, and *i moved past
 * it. 0, or 2 with the message printed. */
static inline int bench_u64(const char *cmd, int argc, char **argv, int *i, uint64_t min,
			    uint64_t max, int sizes, uint64_t *out)
{
	const char *opt = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
	char num[32];
	uint64_t mul = 1, x;
	size_t n;

	if (!v) {
		fprintf(stderr, "rf-bench %s: %s needs a value (see rf-bench %s --help)\n", cmd, opt,
			cmd);
		return 2;
	}
	n = strlen(v);
	if (sizes && n > 1 && strchr("kKmM", v[n - 1])) {
		mul = v[n - 1] == 'k' || v[n - 1] == 'K' ? 1024 : 1048576;
		n--;
	}
	if (n >= sizeof(num) || (memcpy(num, v, n), num[n] = 0,
				 rf_cli_u64(num, 0, UINT64_MAX / mul, &x) < 0) ||
	    x * mul < min || x * mul > max) {
		fprintf(stderr, "rf-bench %s: %s: got '%s', expected an integer from %" PRIu64
			" to %" PRIu64 "%s\n", cmd, opt, v, min, max, sizes ? " (k, m: KiB, MiB)" : "");
		return 2;
	}
	*out = x * mul;
	*i += 1;
	return 0;
}

/* The same into a long (max at most LONG_MAX). */
static inline int bench_long(const char *cmd, int argc, char **argv, int *i, long min, long max,
			     long *out)
{
	uint64_t v;
	int rc = bench_u64(cmd, argc, argv, i, (uint64_t)min, (uint64_t)max, 0, &v);

	if (!rc)
		*out = (long)v;
	return rc;
}

/* "--help" or "-h". */
static inline int bench_is_help(const char *a)
{
	return !strcmp(a, "--help") || !strcmp(a, "-h");
}

/* An argument the subcommand does not take: one line, exit status 2. */
static inline int bench_unknown(const char *cmd, const char *arg)
{
	fprintf(stderr, "rf-bench %s: '%s': unknown argument (see rf-bench %s --help)\n", cmd, arg,
		cmd);
	return 2;
}

/* bytes of memory asked for by the options named in what: 0, or 2 with the message
 * where it is more than half of this machine's memory (the buffers would not be
 * allocated, or the system would start swapping or killing). */
static inline int bench_mem(const char *cmd, const char *what, double bytes)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	double mem = pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;

	if (mem > 0 && bytes > mem / 2) {
		fprintf(stderr, "rf-bench %s: %s: %.0f MiB of buffers, more than half of this "
			"machine's %.0f MiB\n", cmd, what, bytes / 1048576.0, mem / 1048576.0);
		return 2;
	}
	return 0;
}

/* A JSON number as text, for a printf's %s: v as fmt prints it, or null where it is
 * NaN or infinite (a ratio over a time too short to measure). BJ gives each use a
 * buffer of its own. */
static inline const char *bench_num(char *buf, size_t len, const char *fmt, double v)
{
	if (!isfinite(v))
		return "null";
	snprintf(buf, len, fmt, v);
	return buf;
}
#define BJ(fmt, v) bench_num((char[40]){ 0 }, 40, (fmt), (v))

#endif
