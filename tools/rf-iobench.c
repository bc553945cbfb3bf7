/* rf-iobench -- storage throughput and latency through the ringflow reactor, with
 * the knobs fio's io_uring engine has, so the two can be compared on the same file:
 *
 *   rf-iobench --file F --rw read|randread|write|randwrite|rw|randrw --bs SIZE --qd N
 *              [--rwmixread PCT] [--direct] [--fixedbufs] [--size SIZE] [--runtime SEC]
 *              [--batch N] [--norandommap] [--fsync N | --fdatasync N] [--end-fsync]
 *              [--json] [--force]
 *
 * qd requests stay in flight; each completion queues the next I/O from its callback,
 * so every loop turn submits a batch with one io_uring_enter. Latencies are fio's:
 * slat (queued -> handed to the kernel by the loop turn's enter), clat (that enter ->
 * the completion dispatched) and lat (both), each in a log-linear histogram in
 * HdrHistogram's scheme (tools/iobench-hist.h: 0.1 % relative error, fixed memory),
 * reported at fio's percentiles. Random modes visit every block exactly once per pass
 * (a random map, as fio's default; tools/iobench-map.h) unless --norandommap draws
 * with replacement. --fsync N / --fdatasync N queue an fsync after every N writes
 * (their latency reported apart), --end-fsync one at the end, inside the timed run,
 * so buffered writes are measured to the device, not to the page cache. The file is always registered (fixed
 * file, as fio's registerfiles); --fixedbufs uses the ring's registered buffer arena.
 * --batch N (default 4) caps the completions one loop turn dispatches (and so the
 * SQEs the next enter submits): on a virtual disk where submitting costs several
 * microseconds per request, resubmitting completed slots in small batches keeps the
 * device queue fuller; 0 = no cap (largest batches, least CPU per request).
 * Without --runtime one pass over --size (default: the file's size) is made; with it
 * the run is time based and wraps around. Write modes create the file (needs --size)
 * and refuse to write into an existing one without --force; a run that created the
 * file and then fails (ENOSPC, an I/O error, SIGINT/SIGTERM/SIGHUP) removes it.
 *
 * --file must be a regular file or a block device: it is looked at with stat and
 * opened with O_NONBLOCK (a FIFO would block open() forever), then fstat'd.
 *
 * Memory: one buffer per request in flight, and no more requests in flight than the
 * region has blocks (--qd 256 --bs 4m on an 8 MiB file: 2 buffers, not 256); the
 * buffers together may take at most a quarter of the memory the process may use
 * (physical memory, RLIMIT_AS, the memory cgroup's limit), else the run is refused
 * naming --qd and --bs. The report gives the buffers and the peak RSS.
 *
 * Exit: 0 ok, 1 I/O or file error, 2 bad arguments (one line on stderr each).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringflow/ring.h>
#include "cli-impl.h"
#include "iobench-dist.h"
#include "iobench-hist.h"
#include "iobench-map.h"
#include "iobench-verify.h"

static const char *prog = "rf-iobench";

/* The file this run created (O_EXCL), removed if the run fails; NULL otherwise. */
static const char *volatile created;

static void on_signal(int sig)
{
	if (created)
		unlink(created);
	signal(sig, SIG_DFL);
	raise(sig);
}

__attribute__((noreturn, format(printf, 2, 3)))
static void die(int code, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	if (!fmt) { /* the reason was already printed: remove what this run made, quietly */
		if (created)
			unlink(created);
		exit(code);
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (created && unlink(created) == 0)
		rf_cli_say(prog, "%s (removed %s, which this run created)", msg, created);
	else
		rf_cli_say(prog, "%s", msg);
	exit(code);
}

/* "4096", "4k", "1m", "2g" (powers of 1024). 0 on error: digits first (no space or
 * sign), then an optional k/m/g/t, 'i' and 'b'. */
static uint64_t parse_size(const char *s)
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

/* ---- the run ---------------------------------------------------------------------- */

struct slot {
	char *buf;
	uint64_t off;
	uint64_t tq, ts;      /* queued; submitted (the loop turn's enter) */
	int write;
	struct slot *next;    /* queued, not yet submitted */
};

static struct {
	struct rf_ring *r;
	const char *file;
	int write, random, mixed, norandommap;
	int verify;           /* --verify crc32c */
	struct rf_dist dist;  /* --random-distribution */
	uint64_t rate_bps, rate_iops; /* limits, 0: none */
	uint64_t t0;          /* the run's start, for the rate limits */
	uint64_t verified;    /* blocks checked */
	unsigned rwmixread;   /* mixed: percent of reads */
	unsigned ioflags;
	uint64_t bs, size, nblocks;
	uint64_t next_off, issued, total_ios; /* total_ios: 0 = time based */
	uint64_t deadline;
	uint64_t rng;
	struct rf_randmap map;
	uint64_t bytes, ios, rbytes, wbytes;
	uint64_t sync_every, since_sync, syncs;
	int datasync, sync_inflight;
	unsigned inflight;
	int stop;
	struct slot *unsubmitted;
	struct rf_hist slat, clat, lat, sync;
} B;

static inline uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void on_done(void *data, int64_t res);

static void issue_now(struct slot *s);

static void on_delay(void *data, int64_t res)
{
	struct slot *s = data;
	B.inflight--;
	if (B.stop || res < 0 || (!B.total_ios && rf_now_ns() >= B.deadline)) {
		B.stop = 1;
		return;
	}
	issue_now(s);
}

/* With --rate / --rate-iops: the I/O numbered B.issued may start no earlier than its
 * share of the run, t0 + issued / rate; before that a ring timeout holds the slot. */
static void issue(struct slot *s)
{
	uint64_t due = 0;
	if (B.rate_iops)
		due = B.t0 + (uint64_t)((double)B.issued * 1e9 / (double)B.rate_iops);
	if (B.rate_bps) {
		uint64_t d2 = B.t0 + (uint64_t)((double)B.issued * (double)B.bs * 1e9 / (double)B.rate_bps);
		if (d2 > due)
			due = d2;
	}
	uint64_t now = due ? rf_now_ns() : 0;
	if (due > now) {
		B.issued++; /* this slot's turn is taken */
		B.inflight++;
		int ret = rf_ring_timeout(B.r, due - now, on_delay, s, NULL);
		if (ret < 0)
			die(1, "cannot queue a timeout for --rate: %s", strerror(-ret));
		return;
	}
	B.issued++;
	issue_now(s);
}

static void issue_now(struct slot *s)
{
	if (B.random && B.dist.kind != RF_DIST_RANDOM) {
		s->off = rf_dist_next(&B.dist) * B.bs;
	} else if (B.random && !B.norandommap) {
		s->off = rf_randmap_next(&B.map) * B.bs;
	} else if (B.random) {
		s->off = (splitmix64(&B.rng) % B.nblocks) * B.bs;
	} else {
		if (B.next_off + B.bs > B.nblocks * B.bs)
			B.next_off = 0;
		s->off = B.next_off;
		B.next_off += B.bs;
	}
	s->write = B.mixed ? splitmix64(&B.rng) % 100 >= B.rwmixread : B.write;
	if (s->write && B.verify)
		rf_vfy_fill((uint8_t *)s->buf, B.bs, s->off, 1); /* fio fills in the timed path too */
	s->tq = rf_now_ns();
	s->next = B.unsubmitted;
	B.unsubmitted = s;
	int ret = s->write ? rf_ring_write(B.r, 0, s->buf, B.bs, s->off, B.ioflags, on_done, s, NULL)
			   : rf_ring_read(B.r, 0, s->buf, B.bs, s->off, B.ioflags, on_done, s, NULL);
	if (ret < 0)
		die(1, "%s: cannot queue a %s at offset %" PRIu64 ": %s", B.file,
		    s->write ? "write" : "read", s->off, strerror(-ret));
	B.inflight++;
}

static void on_sync(void *data, int64_t res)
{
	uint64_t *tq = data, now = rf_now_ns();
	B.sync_inflight--;
	if (res < 0)
		die(1, "%s: %s failed: %s", B.file, B.datasync ? "fdatasync" : "fsync",
		    strerror((int)-res));
	rf_hist_add(&B.sync, now - *tq);
	B.syncs++;
	free(tq);
}

/* An fsync (or fdatasync) through the ring, timed from queueing to completion. */
static void issue_sync(void)
{
	uint64_t *tq = malloc(sizeof(*tq));
	if (!tq)
		die(1, "out of memory");
	*tq = rf_now_ns();
	int ret = rf_ring_fsync(B.r, 0, RF_IO_FIXED_FILE, B.datasync, on_sync, tq, NULL);
	if (ret < 0)
		die(1, "%s: cannot queue an fsync: %s", B.file, strerror(-ret));
	B.sync_inflight++;
}

static void on_done(void *data, int64_t res)
{
	struct slot *s = data;
	uint64_t now = rf_now_ns();
	B.inflight--;
	if (res < 0)
		die(1, "%s: %s of %" PRIu64 " bytes at offset %" PRIu64 " failed: %s", B.file,
		    s->write ? "write" : "read", B.bs, s->off, strerror((int)-res));
	if ((uint64_t)res != B.bs)
		die(1, "%s: %s at offset %" PRIu64 " transferred %" PRId64 " bytes, expected %" PRIu64
		    " (end of file?)", B.file, s->write ? "write" : "read", s->off, res, B.bs);
	if (!s->write && B.verify) {
		char msg[400];
		if (rf_vfy_check((const uint8_t *)s->buf, B.bs, s->off, msg, sizeof(msg)) < 0)
			die(1, "--verify: %s: %s", B.file, msg);
		B.verified++;
	}
	rf_hist_add(&B.slat, s->ts - s->tq);
	rf_hist_add(&B.clat, now - s->ts);
	rf_hist_add(&B.lat, now - s->tq);
	B.bytes += (uint64_t)res;
	if (s->write)
		B.wbytes += (uint64_t)res;
	else
		B.rbytes += (uint64_t)res;
	B.ios++;
	/* every N writes an fsync, as fio's fsync=N (several may be in flight) */
	if (s->write && B.sync_every && ++B.since_sync >= B.sync_every) {
		B.since_sync = 0;
		issue_sync();
	}
	if (B.stop)
		return;
	if (B.total_ios ? B.issued >= B.total_ios : now >= B.deadline) {
		B.stop = 1;
		return;
	}
	issue(s);
}

/* "NAME": {"n": .., "mean_us": .., "min_us": .., "max_us": .., "percentiles_us":
 * {"1": .., ..., "99.99": ..}} */
static void json_lat(const char *name, const struct rf_hist *h)
{
	printf("\"%s\": {\"n\": %" PRIu64 ", \"mean_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f, "
	       "\"percentiles_us\": {", name, h->n, rf_hist_mean(h) / 1e3,
	       h->n ? (double)h->min / 1e3 : 0, (double)h->max / 1e3);
	for (unsigned i = 0; i < RF_HIST_NPCTS; i++)
		printf("%s\"%g\": %.3f", i ? ", " : "", rf_hist_pcts[i], rf_hist_pct(h, rf_hist_pcts[i]) / 1e3);
	printf("}}");
}

/* The histogram itself: [[lowest ns of the bucket, count], ...] for non-empty buckets,
 * with the scheme that says what a bucket spans. */
static void json_hist(const struct rf_hist *h)
{
	printf("\"lat_histogram\": {\"scheme\": \"HdrHistogram: exact below %u ns, then %u "
	       "sub-buckets per power of two\", \"buckets\": [", RF_HIST_EXACT, RF_HIST_SUB);
	int first = 1;
	for (unsigned i = 0; i < RF_HIST_N; i++)
		if (h->c[i]) {
			uint64_t lo, w;
			rf_hist_range(i, &lo, &w);
			printf("%s[%" PRIu64 ", %" PRIu64 "]", first ? "" : ", ", lo, h->c[i]);
			first = 0;
		}
	printf("]}");
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* The memory this process may use: physical memory, or less where RLIMIT_AS or the
 * memory cgroup (v2 memory.max, v1 memory.limit_in_bytes) says so. 0: unknown. */
static uint64_t usable_memory(void)
{
	static const char *const limits[] = { "/sys/fs/cgroup/memory.max",
					      "/sys/fs/cgroup/memory/memory.limit_in_bytes" };
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t mem = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (!mem || (uint64_t)rl.rlim_cur < mem))
		mem = (uint64_t)rl.rlim_cur;
	for (unsigned i = 0; i < 2; i++) {
		unsigned long long v;
		FILE *f = fopen(limits[i], "re");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &v) == 1 && v > 0 && (!mem || v < mem))
			mem = v;
		fclose(f);
	}
	return mem;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s --file F --rw MODE --bs SIZE --qd N [options]\n"
		"  --file F       a regular file or a block device (write modes create F)\n"
		"  --rw MODE      read, randread, write, randwrite, rw or randrw (mixed)\n"
		"  --rwmixread P  rw/randrw: percent of reads, 0..100 (default 50)\n"
		"  --norandommap  random offsets drawn with replacement (default: every block once\n"
		"                 a pass, as fio's random map)\n"
		"  --fsync N      an fsync after every N writes, 1..2^32 (fio's fsync=N)\n"
		"  --fdatasync N  the same with fdatasync\n"
		"  --end-fsync    an fsync at the end, inside the timed run\n"
		"  --random-distribution D  random, zipf:THETA, pareto:H or normal:SD (percent of\n"
		"                 the region) for random modes; all but random draw with replacement\n"
		"  --rate SIZE    at most SIZE bytes a second (such as 50m)\n"
		"  --rate-iops N  at most N I/Os a second, 1..10^9\n"
		"  --verify crc32c  write blocks with a header and CRC-32C and read them back\n"
		"                 after the run (write modes), or check every block read\n"
		"  --bs SIZE      block size, 1..1g, such as 4k or 1m\n"
		"  --qd N         requests in flight, 1..16384 (at most the region's blocks)\n"
		"  --direct       O_DIRECT\n"
		"  --fixedbufs    registered buffers\n"
		"  --size SIZE    bytes of F to use (default: its size; needed to create F)\n"
		"  --runtime SEC  time based run, 0.001..1e6 s, wrapping around\n"
		"  --batch N      completions dispatched per loop turn, 0..65536 (0: no cap; default 4)\n"
		"  --json         one JSON object on stdout\n"
		"  --force        write into an existing F\n", prog);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "file", required_argument, 0, 'f' },
		{ "rw", required_argument, 0, 'w' },
		{ "bs", required_argument, 0, 'b' },
		{ "qd", required_argument, 0, 'q' },
		{ "direct", no_argument, 0, 'd' },
		{ "fixedbufs", no_argument, 0, 'x' },
		{ "size", required_argument, 0, 's' },
		{ "runtime", required_argument, 0, 't' },
		{ "json", no_argument, 0, 'j' },
		{ "force", no_argument, 0, 'F' },
		{ "batch", required_argument, 0, 'B' },
		{ "rwmixread", required_argument, 0, 'M' },
		{ "norandommap", no_argument, 0, 'N' },
		{ "fsync", required_argument, 0, 'S' },
		{ "fdatasync", required_argument, 0, 'D' },
		{ "end-fsync", no_argument, 0, 'E' },
		{ "verify", required_argument, 0, 'V' },
		{ "random-distribution", required_argument, 0, 'R' },
		{ "rate", required_argument, 0, 'r' },
		{ "rate-iops", required_argument, 0, 'I' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 }
	};
	const char *file = NULL, *rw = NULL, *bs_arg = NULL;
	uint64_t bs = 0, size = 0, v;
	long qd = 0, batch = 4;
	double runtime = 0;
	int direct = 0, fixedbufs = 0, json = 0, force = 0, end_fsync = 0, mix_given = 0;
	int dist_given = 0;
	B.rwmixread = 50;
	rf_log_set(rf_cli_log_stderr, NULL);
	rf_crc32c_init();
	opterr = 0;
	for (;;) {
		int c = getopt_long(argc, argv, ":", opts, NULL);
		if (c < 0)
			break;
		switch (c) {
		case 'f': file = optarg; break;
		case 'w': rw = optarg; break;
		case 'b':
			bs = parse_size(optarg);
			bs_arg = optarg;
			if (!bs || bs > (1u << 30))
				die(2, "--bs: got '%s', expected a block size from 1 to 1g such as 4k or 1m",
				    optarg);
			break;
		case 'q':
			if (rf_cli_u64(optarg, 1, 16384, &v))
				die(2, "--qd: got '%s', expected a queue depth from 1 to 16384", optarg);
			qd = (long)v;
			break;
		case 'd': direct = 1; break;
		case 'x': fixedbufs = 1; break;
		case 's':
			size = parse_size(optarg);
			if (!size || size > INT64_MAX)
				die(2, "--size: got '%s', expected a size from 1 to 2^63-1 bytes such as 512m "
				    "or 4g", optarg);
			break;
		case 't':
			if (rf_cli_double(optarg, 0.001, 1e6, &runtime))
				die(2, "--runtime: got '%s', expected seconds from 0.001 to 1e6", optarg);
			break;
		case 'B':
			if (rf_cli_u64(optarg, 0, 65536, &v))
				die(2, "--batch: got '%s', expected completions per loop turn from 0 (no "
				    "cap) to 65536", optarg);
			batch = (long)v;
			break;
		case 'j': json = 1; break;
		case 'F': force = 1; break;
		case 'M':
			if (rf_cli_u64(optarg, 0, 100, &v))
				die(2, "--rwmixread: got '%s', expected a percentage of reads from 0 to 100",
				    optarg);
			B.rwmixread = (unsigned)v;
			mix_given = 1;
			break;
		case 'N': B.norandommap = 1; break;
		case 'S':
		case 'D':
			if (rf_cli_u64(optarg, 1, UINT32_MAX, &v))
				die(2, "--%s: got '%s', expected a number of writes from 1 to 4294967295",
				    c == 'S' ? "fsync" : "fdatasync", optarg);
			if (B.sync_every && B.datasync != (c == 'D'))
				die(2, "--%s: --fsync and --fdatasync exclude each other",
				    c == 'S' ? "fsync" : "fdatasync");
			B.sync_every = v;
			B.datasync = c == 'D';
			break;
		case 'E': end_fsync = 1; break;
		case 'R': {
			char err[160];
			if (rf_dist_parse(optarg, &B.dist, err, sizeof(err)) < 0)
				die(2, "--random-distribution: got '%s': %s", optarg, err);
			dist_given = 1;
			break;
		}
		case 'r':
			B.rate_bps = parse_size(optarg);
			if (!B.rate_bps)
				die(2, "--rate: got '%s', expected bytes a second such as 50m", optarg);
			break;
		case 'I':
			if (rf_cli_u64(optarg, 1, 1000000000, &v))
				die(2, "--rate-iops: got '%s', expected I/Os a second from 1 to 1000000000",
				    optarg);
			B.rate_iops = v;
			break;
		case 'V':
			if (strcmp(optarg, "crc32c"))
				die(2, "--verify: got '%s', expected crc32c", optarg);
			B.verify = 1;
			break;
		case 'h': usage(stdout); return 0;
		case ':':
			for (const struct option *o = opts; o->name; o++)
				if (o->val == optopt)
					die(2, "--%s: expected a value after it", o->name);
			die(2, "%s: expected a value after it", argv[optind - 1]);
		default:
			for (const struct option *o = opts; optopt && o->name; o++)
				if (o->val == optopt && !strncmp(argv[optind - 1], "--", 2))
					die(2, "--%s: takes no value", o->name);
			die(2, "%s: unknown or ambiguous option (expected one of --file --rw --bs --qd "
			    "--direct --fixedbufs --size --runtime --batch --rwmixread --norandommap "
			    "--fsync --fdatasync --end-fsync --verify --random-distribution --rate "
			    "--rate-iops --json --force; see --help)",
			    argv[optind - 1]);
		}
	}
	if (optind < argc)
		die(2, "'%s': unexpected argument (all arguments are --options)", argv[optind]);
	if (!file)
		die(2, "--file: expected a file to read or write (missing)");
	if (!rw)
		die(2, "--rw: expected read, randread, write, randwrite, rw or randrw (missing)");
	if (!strcmp(rw, "read")) {
	} else if (!strcmp(rw, "randread")) {
		B.random = 1;
	} else if (!strcmp(rw, "write")) {
		B.write = 1;
	} else if (!strcmp(rw, "randwrite")) {
		B.write = B.random = 1;
	} else if (!strcmp(rw, "rw") || !strcmp(rw, "readwrite")) {
		B.write = B.mixed = 1;
	} else if (!strcmp(rw, "randrw")) {
		B.write = B.mixed = B.random = 1;
	} else {
		die(2, "--rw: got '%s', expected read, randread, write, randwrite, rw or randrw", rw);
	}
	if (mix_given && !B.mixed)
		die(2, "--rwmixread: applies to --rw rw or randrw, not %s", rw);
	if (B.norandommap && !B.random)
		die(2, "--norandommap: applies to random modes (randread, randwrite, randrw), not %s", rw);
	if (dist_given && !B.random)
		die(2, "--random-distribution: applies to random modes (randread, randwrite, randrw), "
		    "not %s", rw);
	if (B.verify && B.mixed)
		die(2, "--verify: not with --rw %s (a read may meet a block not written yet)", rw);
	if (B.verify && runtime > 0)
		die(2, "--verify: needs a one-pass run, not --runtime (a block written twice would "
		    "need its latest generation remembered)");
	if (B.verify && bs && bs < RF_VFY_HDR)
		die(2, "--bs: expected at least %u bytes with --verify (its header), got %" PRIu64,
		    RF_VFY_HDR, bs);
	if ((B.sync_every || end_fsync) && !B.write)
		die(2, "--%s: applies to modes that write, not %s",
		    B.sync_every ? (B.datasync ? "fdatasync" : "fsync") : "end-fsync", rw);
	if (!bs)
		die(2, "--bs: expected a block size such as 4k or 1m (missing)");
	if (!qd)
		die(2, "--qd: expected a queue depth from 1 to 16384 (missing)");
	if (direct && bs % 512)
		die(2, "--bs: expected a multiple of 512 with --direct, got %" PRIu64, bs);
	if (!*file)
		die(2, "--file: got an empty path, expected a regular file or a block device");

	/* Open (or create) the file, never blocking: a FIFO, a directory or a character
	 * device is refused before any I/O. A file this run creates is removed if it
	 * fails (die, or a signal). */
	rf_cli_on_signals(on_signal);
	signal(SIGXFSZ, SIG_IGN); /* past RLIMIT_FSIZE: EFBIG, reported, not a silent kill */
	struct stat sb;
	char why[4200];
	int fd = -1;
	if (B.write) {
		struct stat pre;
		if (stat(file, &pre) < 0 && errno == ENOENT) {
			if (!size)
				die(2, "--size: expected a size for the new file %s (missing)", file);
			fd = open(file, (B.mixed || B.verify ? O_RDWR : O_WRONLY) | O_CREAT | O_EXCL | O_CLOEXEC | O_NONBLOCK,
				  0644);
			if (fd >= 0) {
				created = file;
				if (fstat(fd, &sb) < 0)
					die(1, "--file %s: cannot stat: %s", file, strerror(errno));
				int fl = fcntl(fd, F_GETFL);
				if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
					die(1, "--file %s: fcntl: %s", file, strerror(errno));
			} else if (errno != EEXIST) {
				die(1, "--file %s: cannot create: %s", file, strerror(errno));
			}
		}
		if (fd < 0) {
			if (rf_cli_check_input(file, RF_CLI_ALLOW_BLK, why, sizeof(why)) < 0)
				die(1, "--file %s", why);
			if (!force)
				die(1, "--file %s: exists; a write test would overwrite it (pass --force)",
				    file);
			fd = rf_cli_open(file, B.mixed || B.verify ? O_RDWR : O_WRONLY, 0, RF_CLI_ALLOW_BLK, &sb, why,
					 sizeof(why));
		}
	} else {
		fd = rf_cli_open(file, O_RDONLY, 0, RF_CLI_ALLOW_BLK, &sb, why, sizeof(why));
	}
	if (fd < 0)
		die(1, "--file %s", why);
	if (direct) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl | O_DIRECT) < 0)
			die(1, "--file %s: --direct: cannot use O_DIRECT on it: %s", file, strerror(errno));
	}
	uint64_t fsize = (uint64_t)sb.st_size;
	if (S_ISBLK(sb.st_mode) && ioctl(fd, BLKGETSIZE64, &fsize) < 0)
		die(1, "--file %s: cannot get the device size: %s", file, strerror(errno));
	if (!size)
		size = fsize;
	if (!B.write && size > fsize)
		die(1, "--file %s: has %" PRIu64 " bytes, fewer than --size %" PRIu64, file, fsize, size);
	if (B.write && S_ISBLK(sb.st_mode) && size > fsize)
		die(1, "--file %s: a device of %" PRIu64 " bytes, fewer than --size %" PRIu64, file,
		    fsize, size);
	if (size < bs)
		die(1, "--file %s: %" PRIu64 " bytes to use, less than one block of %" PRIu64 " (--bs)",
		    file, size, bs);
	if (B.write && S_ISREG(sb.st_mode) && fsize < size) {
		/* glibc falls back to writing zeros where fallocate is not supported; an
		 * error here is real (ENOSPC, EFBIG) and ends the run before any write. */
		int ret = posix_fallocate(fd, 0, (off_t)size);
		if (ret)
			die(1, "--file %s: cannot extend to %" PRIu64 " bytes (--size): %s", file, size,
			    strerror(ret));
	}
	uint32_t mem_align = 4096, off_align = 4096;
	if (direct) {
		rf_dio_align(fd, NULL, &mem_align, &off_align);
		if (bs % off_align)
			die(2, "--bs: expected a multiple of %u (the file's O_DIRECT alignment), got %" PRIu64,
			    off_align, bs);
		if (mem_align < 4096)
			mem_align = 4096;
	}

	/* Buffers: one per request in flight, and no more in flight than blocks in the
	 * region (another would only repeat a block already being transferred). */
	uint64_t nblocks = size / bs;
	long qd_req = qd;
	if ((uint64_t)qd > nblocks)
		qd = (long)nblocks;
	uint64_t buf_bytes = (uint64_t)qd * bs;
	uint64_t mem = usable_memory();
	if (mem && buf_bytes > mem / 4)
		die(2, "--qd %ld x --bs %s: %ld buffers of %" PRIu64 " bytes (%" PRIu64 " MiB), more than "
		    "the %" PRIu64 " MiB allowed (a quarter of the %" PRIu64 " MiB this process may "
		    "use); lower --qd or --bs", qd_req, bs_arg, qd, bs, buf_bytes >> 20, (mem / 4) >> 20,
		    mem >> 20);

	/* The ring, the registered file and the buffers. */
	struct rf_ring_opts ro = { .entries = (unsigned)(qd < 8 ? 8 : qd) };
	int ret = rf_ring_create(&B.r, &ro);
	if (ret == -EBADMSG) { /* RF_FAULT_INJECT malformed: the ring's one line says why */
		rf_cli_log_stderr(RF_LOG_ERROR, rf_last_error(), NULL);
		die(1, NULL);
	}
	if (ret < 0)
		die(1, "cannot create the io_uring ring: %s", strerror(-ret));
	rf_ring_set_max_batch(B.r, (unsigned)batch);
	ret = rf_ring_register_files(B.r, &fd, 1);
	if (ret < 0)
		die(1, "--file %s: cannot register the file with the ring: %s", file, strerror(-ret));
	struct slot *slots = calloc((size_t)qd, sizeof(*slots));
	if (!slots)
		die(1, "out of memory for %ld request slots (--qd)", qd);
	B.ioflags = RF_IO_FIXED_FILE;
	if (fixedbufs) {
		ret = rf_ring_register_buffers(B.r, (unsigned)qd, bs, mem_align);
		if (ret < 0)
			die(1, "--fixedbufs: cannot register %ld buffers of %" PRIu64 " bytes (--qd x --bs):"
			    " %s", qd, bs, strerror(-ret));
		B.ioflags |= RF_IO_FIXED_BUF;
		for (long i = 0; i < qd; i++)
			slots[i].buf = rf_ring_buffer(B.r, (unsigned)i);
	} else {
		for (long i = 0; i < qd; i++) {
			slots[i].buf = aligned_alloc(mem_align, bs);
			if (!slots[i].buf)
				die(1, "out of memory for %ld buffers of %" PRIu64 " bytes (--qd x --bs)", qd,
				    bs);
		}
	}
	uint64_t seed = 0x5eed;
	for (long i = 0; i < qd; i++) {
		if (B.write) {
			for (uint64_t k = 0; k + 8 <= bs; k += 8) {
				uint64_t w = splitmix64(&seed);
				memcpy(slots[i].buf + k, &w, 8);
			}
		} else {
			memset(slots[i].buf, 0, bs); /* fault the pages in before timing */
		}
	}

	B.file = file;
	B.bs = bs;
	B.size = size;
	B.nblocks = nblocks;
	B.rng = 0x243f6a8885a308d3ull;
	B.total_ios = runtime > 0 ? 0 : B.nblocks;
	rf_randmap_init(&B.map, B.nblocks, B.rng);
	rf_dist_init(&B.dist, B.nblocks, B.rng ^ 0xd157ull);
	rf_hist_init(&B.slat);
	rf_hist_init(&B.clat);
	rf_hist_init(&B.lat);
	rf_hist_init(&B.sync);

	struct rusage ru0, ru1;
	struct rf_ring_stats st0, st1;
	rf_ring_get_stats(B.r, &st0);
	getrusage(RUSAGE_SELF, &ru0);
	uint64_t t0 = rf_now_ns();
	B.t0 = t0;
	B.deadline = t0 + (uint64_t)(runtime * 1e9);
	for (long i = 0; i < qd && (!B.total_ios || B.issued < B.total_ios); i++)
		issue(&slots[i]);
	/* One loop turn: stamp what was queued since the last (the turn's enter submits
	 * it: the end of its slat), then one enter that submits and waits. */
	while (rf_ring_pending(B.r)) {
		uint64_t now = rf_now_ns();
		for (struct slot *s = B.unsubmitted; s; s = s->next)
			s->ts = now;
		B.unsubmitted = NULL;
		ret = rf_ring_run(B.r, RF_RUN_ONCE);
		if (ret < 0)
			die(1, "%s: ring failed: %s", file, strerror(-ret));
		if (end_fsync && !rf_ring_pending(B.r) && !B.sync_inflight && end_fsync++ == 1)
			issue_sync(); /* the data must reach the device inside the timed run */
	}
	uint64_t t1 = rf_now_ns();
	if (B.verify && B.write) {
		/* read every block back (sequentially, the same queue depth), outside the
		 * timed run, checking each against its header and CRC */
		B.write = B.random = 0;
		B.rate_bps = B.rate_iops = 0;
		B.next_off = 0;
		B.issued = 0;
		B.stop = 0;
		B.total_ios = B.nblocks;
		static struct rf_hist keep[3]; /* the write's figures: the reads must not count */
		keep[0] = B.slat;
		keep[1] = B.clat;
		keep[2] = B.lat;
		for (long i = 0; i < qd && B.issued < B.total_ios; i++)
			issue(&slots[i]);
		while (rf_ring_pending(B.r)) {
			uint64_t now = rf_now_ns();
			for (struct slot *s = B.unsubmitted; s; s = s->next)
				s->ts = now;
			B.unsubmitted = NULL;
			ret = rf_ring_run(B.r, RF_RUN_ONCE);
			if (ret < 0)
				die(1, "%s: ring failed: %s", file, strerror(-ret));
		}
		B.slat = keep[0];
		B.clat = keep[1];
		B.lat = keep[2];
		B.write = 1;
		B.ios -= B.verified;
		B.bytes -= B.verified * B.bs;
		B.rbytes -= B.verified * B.bs;
	}
	getrusage(RUSAGE_SELF, &ru1);
	rf_ring_get_stats(B.r, &st1);

	double secs = (double)(t1 - t0) / 1e9;
	double usr = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime);
	double sys = tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
	double mbps = (double)B.bytes / 1e6 / secs;
	double iops = (double)B.ios / secs;
	double p50 = rf_hist_pct(&B.lat, 50) / 1e3, p99 = rf_hist_pct(&B.lat, 99) / 1e3;
	double mean = rf_hist_mean(&B.lat) / 1e3;
	unsigned long long enters = st1.enters - st0.enters;
	unsigned long long subs = st1.submissions - st0.submissions;
	unsigned long long comps = st1.completions - st0.completions;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	long peak_kib = ru.ru_maxrss; /* KiB on Linux */
	if (json) {
		printf("{\"file\": \"%s\", \"rw\": \"%s\", \"bs\": %" PRIu64 ", \"qd\": %ld, \"batch\": %ld, "
		       "\"direct\": %s, \"fixedbufs\": %s, \"bytes\": %" PRIu64 ", \"ios\": %" PRIu64 ", "
		       "\"seconds\": %.6f, \"bw_MBps\": %.3f, \"iops\": %.1f, \"lat_mean_us\": %.2f, "
		       "\"lat_p50_us\": %.2f, \"lat_p99_us\": %.2f, \"cpu_user_s\": %.6f, "
		       "\"cpu_sys_s\": %.6f, \"enters\": %llu, \"submissions\": %llu, "
		       "\"completions\": %llu, \"qd_used\": %ld, \"buffers\": %ld, "
		       "\"buffer_bytes\": %" PRIu64 ", \"peak_rss_kib\": %ld, ",
		       file, rw, bs, qd_req, batch, direct ? "true" : "false", fixedbufs ? "true" : "false",
		       B.bytes, B.ios, secs, mbps, iops, mean, p50, p99, usr, sys, enters, subs, comps,
		       qd, qd, buf_bytes, peak_kib);
		printf("\"read_bytes\": %" PRIu64 ", \"write_bytes\": %" PRIu64 ", \"random_map\": %s, "
		       "\"rwmixread\": %u, \"syncs\": %" PRIu64 ", \"end_fsync\": %s, ", B.rbytes, B.wbytes,
		       B.random && !B.norandommap && B.dist.kind == RF_DIST_RANDOM ? "true" : "false", B.mixed ? B.rwmixread : (B.write ? 0 : 100),
		       B.syncs, end_fsync ? "true" : "false");
		json_lat("slat", &B.slat);
		printf(", ");
		json_lat("clat", &B.clat);
		printf(", ");
		json_lat("lat", &B.lat);
		printf(", ");
		json_lat("sync", &B.sync);
		printf(", ");
		json_hist(&B.lat);
		printf("}\n");
	} else {
		char qds[64] = "";
		if (qd != qd_req)
			snprintf(qds, sizeof(qds), " (%ld in flight: the region's blocks)", qd);
		printf("%s bs=%" PRIu64 " qd=%ld%s%s%s: %.1f MB/s, %.0f IOPS, lat p50 %.1f us p99 %.1f us, "
		       "cpu %.2f s usr + %.2f s sys, %" PRIu64 " bytes in %.2f s, %llu enters for %llu "
		       "submissions, %ld buffers (%" PRIu64 " KiB), peak RSS %ld KiB\n",
		       rw, bs, qd_req, qds, direct ? " direct" : "", fixedbufs ? " fixedbufs" : "", mbps,
		       iops, p50, p99, usr, sys, B.bytes, secs, enters, subs, qd, buf_bytes >> 10,
		       peak_kib);
		static const char *const names[3] = { "slat", "clat", " lat" };
		const struct rf_hist *hs[3] = { &B.slat, &B.clat, &B.lat };
		for (unsigned k = 0; k < 3; k++) {
			printf("  %s (us): mean %.2f, min %.2f, max %.2f |", names[k], rf_hist_mean(hs[k]) / 1e3,
			       hs[k]->n ? (double)hs[k]->min / 1e3 : 0, (double)hs[k]->max / 1e3);
			for (unsigned i = 0; i < RF_HIST_NPCTS; i++)
				printf(" p%g %.1f", rf_hist_pcts[i], rf_hist_pct(hs[k], rf_hist_pcts[i]) / 1e3);
			printf("\n");
		}
		if (B.syncs)
			printf("  sync (us): %" PRIu64 " %s, mean %.1f, p50 %.1f, p99 %.1f\n", B.syncs,
			       B.datasync ? "fdatasyncs" : "fsyncs", rf_hist_mean(&B.sync) / 1e3,
			       rf_hist_pct(&B.sync, 50) / 1e3, rf_hist_pct(&B.sync, 99) / 1e3);
	}
	rf_ring_destroy(B.r);
	if (!fixedbufs)
		for (long i = 0; i < qd; i++)
			free(slots[i].buf);
	free(slots);
	close(fd);
	return 0;
}
