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
#include <pthread.h>
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
#include "iobench.h"
#include "iobench-verify.h"

static const char *prog = "rf-iobench";

/* The file this run created (O_EXCL), removed if the run fails; NULL otherwise. */
static const char *volatile created;

static void on_signal(int sig)
{
	int saved = errno; /* the interrupted code's (ThreadSanitizer checks it) */
	if (created)
		unlink(created);
	signal(sig, SIG_DFL);
	errno = saved;
	raise(sig);
}

void die(int code, const char *fmt, ...)
{
	/* jobs run in threads: the first to fail reports and exits; any other waits */
	static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&once);
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

static struct iob_opts O;
static pthread_barrier_t start_line;

static void *job_main(void *arg)
{
	struct iob_job *j = arg;
	iob_job_setup(j);
	pthread_barrier_wait(&start_line); /* every job's ring and buffers ready: go */
	iob_job_run(j);
	iob_job_teardown(j);
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s --file F --rw MODE --bs SIZE --qd N [options]\n"
		"       %s --job FILE [--json]\n"
		"  --job FILE     run the jobs of a job file (fio's format, a subset: [global] and\n"
		"                 named sections of key=value; see tools/iobench-jobfile.c)\n"
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
		"  --numjobs N    N jobs, 1..64: each its own thread, ring and buffers on the same\n"
		"                 file; the report gives their sum and each\n"
		"  --offset SIZE  the region starts there (default 0; --size counts from it)\n"
		"  --ramp-time SEC  run this long before measuring (with --runtime)\n"
		"  --time-based   (fio's time_based; implied by --runtime, which it needs)\n"
		"  --sqpoll       a kernel thread polls the submission queue (IORING_SETUP_SQPOLL)\n"
		"  --rate SIZE    at most SIZE bytes a second (such as 50m), per job\n"
		"  --log-interval MS  a CSV row per job every MS ms (1..3600000): bandwidth, IOPS,\n"
		"                 latency p50/p99/max of the interval; tools/plot-iobench plots them\n"
		"  --log-prefix P the CSVs' names: P.job0.csv, ... (default rf-iobench-log)\n"
		"  --rate-iops N  at most N I/Os a second, 1..10^9, per job\n"
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
		"  --force        write into an existing F\n", prog, prog);
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
		{ "numjobs", required_argument, 0, 'n' },
		{ "log-interval", required_argument, 0, 'L' },
		{ "job", required_argument, 0, 'J' },
		{ "offset", required_argument, 0, 'o' },
		{ "ramp-time", required_argument, 0, 'T' },
		{ "time-based", no_argument, 0, 'b' + 256 },
		{ "sqpoll", no_argument, 0, 'q' + 256 },
		{ "log-prefix", required_argument, 0, 'P' },
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
	const char *jobfile = NULL;
	int time_based = 0;
	O.numjobs = 1;
	O.log_prefix = "rf-iobench-log";
	O.rwmixread = 50;
	rf_log_set(rf_cli_log_stderr, NULL);
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
			O.rwmixread = (unsigned)v;
			mix_given = 1;
			break;
		case 'N': O.norandommap = 1; break;
		case 'S':
		case 'D':
			if (rf_cli_u64(optarg, 1, UINT32_MAX, &v))
				die(2, "--%s: got '%s', expected a number of writes from 1 to 4294967295",
				    c == 'S' ? "fsync" : "fdatasync", optarg);
			if (O.sync_every && O.datasync != (c == 'D'))
				die(2, "--%s: --fsync and --fdatasync exclude each other",
				    c == 'S' ? "fsync" : "fdatasync");
			O.sync_every = v;
			O.datasync = c == 'D';
			break;
		case 'E': end_fsync = 1; break;
		case 'o':
			O.offset = parse_size(optarg);
			if ((!O.offset && strcmp(optarg, "0")) || O.offset > INT64_MAX)
				die(2, "--offset: got '%s', expected a byte offset such as 0, 4k or 1g", optarg);
			break;
		case 'T':
			if (rf_cli_double(optarg, 0.001, 1e6, &O.ramp))
				die(2, "--ramp-time: got '%s', expected seconds from 0.001 to 1e6", optarg);
			break;
		case 'b' + 256: time_based = 1; break;
		case 'q' + 256: O.sqpoll = 1; break;
		case 'J':
			if (!*optarg)
				die(2, "--job: got an empty path, expected a job file");
			jobfile = optarg;
			break;
		case 'L':
			if (rf_cli_u64(optarg, 1, 3600000, &v))
				die(2, "--log-interval: got '%s', expected milliseconds from 1 to 3600000",
				    optarg);
			O.log_ms = v;
			break;
		case 'P':
			if (!*optarg)
				die(2, "--log-prefix: got an empty path, expected a path prefix for the CSVs");
			O.log_prefix = optarg;
			break;
		case 'n':
			if (rf_cli_u64(optarg, 1, 64, &v))
				die(2, "--numjobs: got '%s', expected a number of jobs from 1 to 64", optarg);
			O.numjobs = (unsigned)v;
			break;
		case 'R': {
			char err[160];
			if (rf_dist_parse(optarg, &O.dist, err, sizeof(err)) < 0)
				die(2, "--random-distribution: got '%s': %s", optarg, err);
			dist_given = 1;
			break;
		}
		case 'r':
			O.rate_bps = parse_size(optarg);
			if (!O.rate_bps)
				die(2, "--rate: got '%s', expected bytes a second such as 50m", optarg);
			break;
		case 'I':
			if (rf_cli_u64(optarg, 1, 1000000000, &v))
				die(2, "--rate-iops: got '%s', expected I/Os a second from 1 to 1000000000",
				    optarg);
			O.rate_iops = v;
			break;
		case 'V':
			if (strcmp(optarg, "crc32c"))
				die(2, "--verify: got '%s', expected crc32c", optarg);
			O.verify = 1;
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
			    "--rate-iops --numjobs --log-interval --log-prefix --offset --ramp-time "
			    "--time-based --sqpoll --job --json --force; see --help)",
			    argv[optind - 1]);
		}
	}
	if (optind < argc)
		die(2, "'%s': unexpected argument (all arguments are --options)", argv[optind]);
	if (jobfile) {
		for (int i = 1; i < argc; i++)
			if (strncmp(argv[i], "--job", 5) && strcmp(argv[i], "--json") &&
			    strcmp(argv[i], jobfile))
				die(2, "--job: the options come from the file; only --json may be added (got %s)",
				    argv[i]);
		return iob_jobfile_run(jobfile, json);
	}
	if (!file)
		die(2, "--file: expected a file to read or write (missing)");
	if (!rw)
		die(2, "--rw: expected read, randread, write, randwrite, rw or randrw (missing)");
	if (!strcmp(rw, "read")) {
	} else if (!strcmp(rw, "randread")) {
		O.random = 1;
	} else if (!strcmp(rw, "write")) {
		O.write = 1;
	} else if (!strcmp(rw, "randwrite")) {
		O.write = O.random = 1;
	} else if (!strcmp(rw, "rw") || !strcmp(rw, "readwrite")) {
		O.write = O.mixed = 1;
	} else if (!strcmp(rw, "randrw")) {
		O.write = O.mixed = O.random = 1;
	} else {
		die(2, "--rw: got '%s', expected read, randread, write, randwrite, rw or randrw", rw);
	}
	if (mix_given && !O.mixed)
		die(2, "--rwmixread: applies to --rw rw or randrw, not %s", rw);
	if (O.norandommap && !O.random)
		die(2, "--norandommap: applies to random modes (randread, randwrite, randrw), not %s", rw);
	if ((time_based || O.ramp > 0) && !(runtime > 0))
		die(2, "--%s: needs --runtime (a time-based run)", O.ramp > 0 ? "ramp-time" : "time-based");
	if (dist_given && !O.random)
		die(2, "--random-distribution: applies to random modes (randread, randwrite, randrw), "
		    "not %s", rw);
	if (O.verify && O.mixed)
		die(2, "--verify: not with --rw %s (a read may meet a block not written yet)", rw);
	if (O.verify && O.write && (O.norandommap || O.dist.kind != RF_DIST_RANDOM))
		die(2, "--verify: needs every block written once (the random map), not %s",
		    O.norandommap ? "--norandommap" : "--random-distribution");
	if (O.verify && runtime > 0)
		die(2, "--verify: needs a one-pass run, not --runtime (a block written twice would "
		    "need its latest generation remembered)");
	if (O.verify && bs && bs < RF_VFY_HDR)
		die(2, "--bs: expected at least %u bytes with --verify (its header), got %" PRIu64,
		    RF_VFY_HDR, bs);
	if ((O.sync_every || end_fsync) && !O.write)
		die(2, "--%s: applies to modes that write, not %s",
		    O.sync_every ? (O.datasync ? "fdatasync" : "fsync") : "end-fsync", rw);
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
	if (O.write) {
		struct stat pre;
		if (stat(file, &pre) < 0 && errno == ENOENT) {
			if (!size)
				die(2, "--size: expected a size for the new file %s (missing)", file);
			fd = open(file, (O.mixed || O.verify ? O_RDWR : O_WRONLY) | O_CREAT | O_EXCL | O_CLOEXEC | O_NONBLOCK,
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
			fd = rf_cli_open(file, O.mixed || O.verify ? O_RDWR : O_WRONLY, 0, RF_CLI_ALLOW_BLK, &sb, why,
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
	if (!O.write && O.offset && O.offset >= fsize)
		die(1, "--file %s: has %" PRIu64 " bytes, none at or past --offset %" PRIu64, file, fsize,
		    O.offset);
	if (!size)
		size = fsize - (O.offset < fsize ? O.offset : fsize);
	if (!O.write && size > fsize - O.offset && !O.offset)
		die(1, "--file %s: has %" PRIu64 " bytes, fewer than --size %" PRIu64, file, fsize, size);
	if (!O.write && size > fsize - O.offset)
		die(1, "--file %s: has %" PRIu64 " bytes, fewer than --offset %" PRIu64 " + --size %" PRIu64,
		    file, fsize, O.offset, size);
	if (O.write && S_ISBLK(sb.st_mode) && (O.offset > fsize || size > fsize - O.offset))
		die(1, "--file %s: a device of %" PRIu64 " bytes, fewer than --offset %" PRIu64
		    " + --size %" PRIu64, file, fsize, O.offset, size);
	if (size < bs)
		die(1, "--file %s: %" PRIu64 " bytes to use, less than one block of %" PRIu64 " (--bs)",
		    file, size, bs);
	if (O.write && S_ISREG(sb.st_mode) && fsize < O.offset + size) {
		/* glibc falls back to writing zeros where fallocate is not supported; an
		 * error here is real (ENOSPC, EFBIG) and ends the run before any write. */
		int ret = posix_fallocate(fd, 0, (off_t)(O.offset + size));
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
		if (O.offset % off_align)
			die(2, "--offset: expected a multiple of %u (the file's O_DIRECT alignment), got %"
			    PRIu64, off_align, O.offset);
		if (mem_align < 4096)
			mem_align = 4096;
	}

	/* Buffers: one per request in flight, and no more in flight than blocks in the
	 * region (another would only repeat a block already being transferred). */
	uint64_t nblocks = size / bs;
	long qd_req = qd;
	if ((uint64_t)qd > nblocks)
		qd = (long)nblocks;
	uint64_t buf_bytes = (uint64_t)qd * bs * O.numjobs;
	uint64_t mem = usable_memory();
	if (mem && buf_bytes > mem / 4)
		die(2, "--qd %ld x --bs %s: %ld buffers of %" PRIu64 " bytes (%" PRIu64 " MiB), more than "
		    "the %" PRIu64 " MiB allowed (a quarter of the %" PRIu64 " MiB this process may "
		    "use); lower --qd or --bs", qd_req, bs_arg, qd * (long)O.numjobs, bs, buf_bytes >> 20,
		    (mem / 4) >> 20, mem >> 20);

	/* The jobs: each its own thread, ring and buffers, all on the same file (as fio's
	 * numjobs), started together. */
	O.file = file;
	O.rw = rw;
	O.bs_arg = bs_arg;
	O.fd = fd;
	O.end_fsync = end_fsync;
	O.fixedbufs = fixedbufs;
	O.direct = direct;
	O.qd = qd;
	O.qd_req = qd_req;
	O.batch = batch;
	O.bs = bs;
	O.size = size;
	O.nblocks = nblocks;
	O.runtime = runtime;
	O.vgen = (rf_now_ns() ^ ((uint64_t)getpid() << 40)) | 1; /* never 0: "any" */
	O.mem_align = mem_align;
	struct iob_job *jobs = calloc(O.numjobs, sizeof(*jobs));
	pthread_t *th = calloc(O.numjobs, sizeof(*th));
	if (!jobs || !th)
		die(1, "out of memory for %u jobs", O.numjobs);
	pthread_barrier_init(&start_line, NULL, O.numjobs);
	for (unsigned i = 0; i < O.numjobs; i++) {
		jobs[i].id = (int)i;
		jobs[i].o = &O;
		int e = pthread_create(&th[i], NULL, job_main, &jobs[i]);
		if (e)
			die(1, "--numjobs: cannot start job %u: %s", i, strerror(e));
	}
	for (unsigned i = 0; i < O.numjobs; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start_line);
	iob_report(&O, jobs, O.numjobs, json);
	free(jobs);
	free(th);
	close(fd);
	return 0;
}
