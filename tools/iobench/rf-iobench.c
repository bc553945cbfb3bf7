/* rf-iobench -- storage throughput and latency through the ringflow reactor, with
 * the knobs fio's io_uring engine has, so the two can be compared on the same file:
 *
 *   rf-iobench --file F [--file F2 ... | --nrfiles N] --rw MODE --bs SPEC --qd N
 *              [--rwmixread PCT] [--direct] [--fixedbufs] [--size SIZE] [--runtime SEC]
 *              [--batch N] [--norandommap] [--fsync N | --fdatasync N] [--end-fsync]
 *              [--hipri] [--json] [--force]  (and more: --help)
 *
 * MODE: read, randread, write, randwrite, rw, randrw, trim, randtrim. SPEC: a size, a
 * range (4k-64k) or a split (4k/50:64k/50), tools/iobench-bs.h. Several files: each
 * I/O goes to the next in turn (fio's file_service_type=roundrobin), each file with its
 * own pass; --size is their total. A trim punches a hole through the ring
 * (IORING_OP_FALLOCATE, PUNCH_HOLE|KEEP_SIZE: the file system discards the blocks; on
 * a block device the kernel zeroes them with an unmap, a device that cannot is
 * refused) -- liburing 2.3 has no discard op. --hipri makes the ring polled
 * (RF_RING_IOPOLL): a device without poll queues is refused naming its io_poll.
 *
 * qd requests stay in flight; each completion queues the next I/O from its callback,
 * so every loop turn submits a batch with one io_uring_enter. Latencies are fio's, but
 * for where slat ends: slat (queued -> handed to the kernel by the loop turn's enter;
 * fio's ends when that enter returns), clat (that enter -> the completion dispatched)
 * and lat (both, the same in both tools), each in a log-linear histogram in
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
#include "../cli.h"
#include "iobench.h"
#include "iobench-verify.h"

static const char *prog = "rf-iobench";

/* The files this run created (O_EXCL), removed if the run fails. */
static const char *volatile created[IOB_MAX_FILES];
static volatile unsigned ncreated;

static void on_signal(int sig)
{
	int saved = errno; /* the interrupted code's (ThreadSanitizer checks it) */
	for (unsigned i = 0; i < ncreated; i++)
		unlink(created[i]);
	signal(sig, SIG_DFL);
	errno = saved;
	raise(sig);
}

/* A job of a --job file runs as this program with the file's keys made options;
 * whatever it refuses, say where that came from (RF_IOBENCH_JOB, set by
 * iobench-jobfile.c: "FILE\n[SECTION]\n" then "OPTION\tKEY\tLINE\n" per key): the file
 * and the section always, and for each option the message names (--qd, or --file and
 * --offset together) the key and its line that set it (the last one: a later key
 * wins). */
static void job_origin(char *msg, size_t cap)
{
	const char *ctx = getenv("RF_IOBENCH_JOB"), *sec, *sec_end;
	size_t len = strlen(msg);
	char orig[2048];
	int said = 0;

	if (!ctx || !(sec = strchr(ctx, '\n')) || !(sec_end = strchr(sec + 1, '\n')))
		return;
	snprintf(orig, sizeof(orig), "%s", msg); /* the options are looked for in this */
	len += (size_t)snprintf(msg + len, cap > len ? cap - len : 0, " (--job %.*s: %.*s",
				(int)(sec - ctx), ctx, (int)(sec_end - sec - 1), sec + 1);
	for (const char *m = orig; len < cap && (m = strstr(m, "--")); ) {
		size_t olen = 2;
		while (m[olen] == '-' || (m[olen] >= 'a' && m[olen] <= 'z') ||
		       (m[olen] >= '0' && m[olen] <= '9'))
			olen++;
		if (olen == 2 || !strncmp(m, "--job", 5)) {
			m += olen;
			continue;
		}
		const char *hit = NULL;
		for (const char *p = sec_end; p && p[1]; p = strchr(p + 1, '\n')) {
			const char *o = p + 1, *k = strchr(o, '\t');
			if (k && (size_t)(k - o) == olen && !strncmp(o, m, olen))
				hit = o;
		}
		m += olen;
		const char *k = hit ? strchr(hit, '\t') + 1 : NULL, *l = k ? strchr(k, '\t') : NULL;
		if (l) {
			len += (size_t)snprintf(msg + len, cap - len, "%s %.*s, line %d",
						said++ ? ";" : ":", (int)(l - k), k, atoi(l + 1));
			if (len >= cap)
				break;
		}
	}
	if (len < cap)
		snprintf(msg + len, cap - len, ")");
}

void die(int code, const char *fmt, ...)
{
	/* jobs run in threads: the first to fail reports and exits; any other waits */
	static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&once);
	char msg[2048];
	va_list ap;
	unsigned removed = 0;
	const char *gone = NULL;
	for (unsigned i = 0; i < ncreated; i++)
		if (unlink(created[i]) == 0) {
			removed++;
			gone = created[i];
		}
	if (!fmt) /* the reason was already printed: remove what this run made, quietly */
		exit(code);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	job_origin(msg, sizeof(msg));
	if (removed == 1)
		rf_cli_say(prog, "%s (removed %s, which this run created)", msg, gone);
	else if (removed)
		rf_cli_say(prog, "%s (removed the %u files this run created)", msg, removed);
	else
		rf_cli_say(prog, "%s", msg);
	exit(code);
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

/* Open (or create) one file of the run into f (fd, size, grains): want is its region's
 * size (0: the file's own, past --offset). Every refusal names the file. */
static void open_file(struct iob_file *f, uint64_t want, int force, int direct,
		      uint32_t *mem_align)
{
	const char *file = f->path;
	struct stat sb;
	char why[4200];
	int fd = -1, acc = O.trim ? O_WRONLY : O.mixed || O.verify ? O_RDWR : O_WRONLY;
	if (O.write) {
		struct stat pre;
		if (stat(file, &pre) < 0 && errno == ENOENT) {
			if (!want)
				die(2, "--size: expected a size for the new file %s (missing)", file);
			fd = open(file, acc | O_CREAT | O_EXCL | O_CLOEXEC | O_NONBLOCK, 0644);
			if (fd >= 0) {
				created[ncreated] = file; /* the name before the count: the */
				__atomic_signal_fence(__ATOMIC_SEQ_CST); /* handler reads both */
				ncreated++;
				if (fstat(fd, &sb) < 0)
					die(1, "--file %s: cannot stat: %s", file, strerror(errno));
				int fl = fcntl(fd, F_GETFL);
				if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
					die(1, "--file %s: fcntl: %s", file, strerror(errno));
			} else if (errno != EEXIST) {
				die(1, "--file %s: cannot create: %s", file, strerror(errno));
			}
		}
	}
	if (fd < 0 && (O.write || O.trim)) {
		if (rf_cli_check_input(file, RF_CLI_ALLOW_BLK, why, sizeof(why)) < 0)
			die(1, "--file %s", why);
		if (!force && O.trim)
			die(1, "--file %s: exists; --rw %s would discard its blocks (pass --force)", file,
			    O.rw);
		if (!force)
			die(1, "--file %s: exists; a write test would overwrite it (pass --force)", file);
		fd = rf_cli_open(file, acc, 0, RF_CLI_ALLOW_BLK, &sb, why, sizeof(why));
	} else if (fd < 0) {
		fd = rf_cli_open(file, O_RDONLY, 0, RF_CLI_ALLOW_BLK, &sb, why, sizeof(why));
	}
	if (fd < 0)
		die(1, "--file %s", why);
	if (direct) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl | O_DIRECT) < 0)
			die(1, "--file %s: --direct: cannot use O_DIRECT on it: %s", file, strerror(errno));
	}
	char val[64], where[128];
	if (O.hipri && rf_blk_queue_attr(fd, "io_poll", val, sizeof(val), where, sizeof(where)) == 0 &&
	    !strcmp(val, "0"))
		die(1, "--hipri: %s: its device does not poll (%s is 0; an NVMe device needs the nvme "
		    "module's poll_queues)", file, where);
	if (O.trim && S_ISBLK(sb.st_mode) &&
	    rf_blk_queue_attr(fd, "discard_max_bytes", val, sizeof(val), where, sizeof(where)) == 0 &&
	    !strcmp(val, "0"))
		die(1, "--rw %s: %s: the device does not discard (%s is 0)", O.rw, file, where);
	uint64_t fsize = (uint64_t)sb.st_size, size = want;
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
	if (size < O.bs.grain)
		die(1, "--file %s: %" PRIu64 " bytes to use, less than one block of %" PRIu64 " (--bs)",
		    file, size, O.bs.grain);
	if (O.write && S_ISREG(sb.st_mode) && fsize < O.offset + size) {
		/* glibc falls back to writing zeros where fallocate is not supported; an
		 * error here is real (ENOSPC, EFBIG) and ends the run before any write. */
		int ret = posix_fallocate(fd, 0, (off_t)(O.offset + size));
		if (ret)
			die(1, "--file %s: cannot extend to %" PRIu64 " bytes (--size): %s", file, size,
			    strerror(ret));
	}
	if (direct) {
		uint32_t ma = 4096, off_align = 4096;
		rf_dio_align(fd, NULL, &ma, &off_align);
		if (O.bs.grain % off_align)
			die(2, "--bs: expected a multiple of %u (the O_DIRECT alignment of %s), got %" PRIu64,
			    off_align, file, O.bs.grain);
		if (O.offset % off_align)
			die(2, "--offset: expected a multiple of %u (the O_DIRECT alignment of %s), got %"
			    PRIu64, off_align, file, O.offset);
		if (ma > *mem_align)
			*mem_align = ma;
	}
	/* as fio's invalidate=1: a buffered read of pages left in the cache measured memory
	 * (646,910 IOPS on a cached file where fio, dropping them, measured 12,450) */
	if (!direct && O.invalidate && (S_ISREG(sb.st_mode) || S_ISBLK(sb.st_mode))) {
		(void)fdatasync(fd);  /* dirty pages are not dropped */
		(void)posix_fadvise(fd, (off_t)O.offset, (off_t)size, POSIX_FADV_DONTNEED);
	}
	f->fd = fd;
	f->size = size;
	f->ngrains = size / O.bs.grain;
}

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
		"                 named sections of key=value; see tools/iobench/iobench-jobfile.c)\n"
		"  --file F       a regular file or a block device (write modes create F); several\n"
		"                 --file: each I/O goes to the next file in turn, as fio's roundrobin\n"
		"  --nrfiles N    N files, 1..256: with one --file P, the files P.0 .. P.N-1; --size\n"
		"                 is their total (each gets its share)\n"
		"  --rw MODE      read, randread, write, randwrite, rw or randrw (mixed), trim or\n"
		"                 randtrim (discard: a hole punched in a file; needs --force)\n"
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
		"  --invalidate 0|1  1 (default, as fio): the region's cached pages are dropped\n"
		"                 before the run, so buffered reads measure the device; 0: kept\n"
		"  --hipri        polled completions (IORING_SETUP_IOPOLL; needs --direct and a device\n"
		"                 with poll queues; not with --rate, --log-interval, syncs or trims)\n"
		"  --rate SIZE    at most SIZE bytes a second (such as 50m), per job\n"
		"  --log-interval MS  a CSV row per job every MS ms (1..3600000): bandwidth, IOPS,\n"
		"                 latency p50/p99/max of the interval; tools/dev/plot-iobench plots them\n"
		"  --log-prefix P the CSVs' names: P.job0.csv, ... (default rf-iobench-log)\n"
		"  --rate-iops N  at most N I/Os a second, 1..10^9, per job\n"
		"  --verify crc32c  write blocks with a header and CRC-32C and read them back\n"
		"                 after the run (write modes), or check every block read\n"
		"  --bs SIZE      block size, 1..1g, such as 4k or 1m; a range (4k-64k: multiples of\n"
		"                 the smaller, drawn uniformly) or a split (4k/50:64k/50: sizes with\n"
		"                 their share of the I/Os in percent; offsets: multiples of the smallest)\n"
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
		{ "invalidate", required_argument, 0, 'i' + 256 },
		{ "log-prefix", required_argument, 0, 'P' },
		{ "rate", required_argument, 0, 'r' },
		{ "rate-iops", required_argument, 0, 'I' },
		{ "nrfiles", required_argument, 0, 'K' },
		{ "hipri", no_argument, 0, 'H' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 }
	};
	const char *rw = NULL, *bs_arg = NULL;
	const char *paths[IOB_MAX_FILES];
	unsigned npaths = 0, nrfiles = 0;
	uint64_t size = 0, v;
	long qd = 0, batch = 4;
	double runtime = 0;
	int direct = 0, fixedbufs = 0, json = 0, force = 0, end_fsync = 0, mix_given = 0;
	int dist_given = 0;
	const char *jobfile = NULL;
	int time_based = 0;
	O.numjobs = 1;
	O.log_prefix = "rf-iobench-log";
	O.rwmixread = 50;
	O.invalidate = 1;
	rf_log_set(rf_cli_log_stderr, NULL);
	rf_cli_limits(argv);
	rf_cli_check_stdout(prog);
	opterr = 0;
	for (;;) {
		int before = optind;
		int c = getopt_long(argc, argv, ":", opts, NULL);
		if (c < 0)
			break;
		switch (c) {
		case 'f':
			if (npaths == IOB_MAX_FILES)
				die(2, "--file: more than %d files", IOB_MAX_FILES);
			if (!*optarg)
				die(2, "--file: got an empty path, expected a regular file or a block device");
			paths[npaths++] = optarg;
			break;
		case 'K':
			if (rf_cli_u64(optarg, 1, IOB_MAX_FILES, &v))
				die(2, "--nrfiles: got '%s', expected a number of files from 1 to %d", optarg,
				    IOB_MAX_FILES);
			nrfiles = (unsigned)v;
			break;
		case 'H': O.hipri = 1; break;
		case 'w': rw = optarg; break;
		case 'b': {
			char err[160];
			bs_arg = optarg;
			if (rf_bs_parse(optarg, &O.bs, err, sizeof(err)) < 0)
				die(2, "--bs: got '%s' (%s), expected a block size from 1 to 1g such as 4k or "
				    "1m, a range such as 4k-64k or a split such as 4k/50:64k/50", optarg, err);
			break;
		}
		case 'q':
			if (rf_cli_u64(optarg, 1, 16384, &v))
				die(2, "--qd: got '%s', expected a queue depth from 1 to 16384", optarg);
			qd = (long)v;
			break;
		case 'd': direct = 1; break;
		case 'x': fixedbufs = 1; break;
		case 's':
			size = rf_parse_size(optarg);
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
			O.offset = rf_parse_size(optarg);
			if ((!O.offset && strcmp(optarg, "0")) || O.offset > INT64_MAX)
				die(2, "--offset: got '%s', expected a byte offset such as 0, 4k or 1g", optarg);
			break;
		case 'T':
			if (rf_cli_double(optarg, 0.001, 1e6, &O.ramp))
				die(2, "--ramp-time: got '%s', expected seconds from 0.001 to 1e6", optarg);
			break;
		case 'b' + 256: time_based = 1; break;
		case 'q' + 256: O.sqpoll = 1; break;
		case 'i' + 256:
			if (rf_cli_u64(optarg, 0, 1, &v))
				die(2, "--invalidate: got '%s', expected 1 (drop the cached pages "
				    "first, the default) or 0", optarg);
			O.invalidate = (int)v;
			break;
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
			O.rate_bps = rf_parse_size(optarg);
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
		default: { /* '?' or ':' */
			char nm[64];
			int k = rf_cli_bad_opt(c, before, argc, argv, ":", opts, nm, sizeof(nm));
			if (k == RF_CLI_OPT_NEEDS_VALUE)
				die(2, "%s: expected a value after it", nm);
			if (k == RF_CLI_OPT_NO_VALUE)
				die(2, "%s: takes no value", nm);
			die(2, "%s: unknown %soption (expected one of --file --rw --bs --qd "
			    "--direct --fixedbufs --size --runtime --batch --rwmixread --norandommap "
			    "--fsync --fdatasync --end-fsync --verify --random-distribution --rate "
			    "--rate-iops --numjobs --log-interval --log-prefix --offset --ramp-time "
			    "--time-based --sqpoll --hipri --nrfiles --job --json --force; see --help)",
			    nm, nm[1] == '-' ? "or ambiguous " : "");
		}
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
	if (!npaths)
		die(2, "--file: expected a file to read or write (missing)");
	if (!rw)
		die(2, "--rw: expected read, randread, write, randwrite, rw, randrw, trim or randtrim "
		    "(missing)");
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
	} else if (!strcmp(rw, "trim")) {
		O.trim = 1;
	} else if (!strcmp(rw, "randtrim")) {
		O.trim = O.random = 1;
	} else {
		die(2, "--rw: got '%s', expected read, randread, write, randwrite, rw, randrw, trim or "
		    "randtrim", rw);
	}
	if (mix_given && !O.mixed)
		die(2, "--rwmixread: applies to --rw rw or randrw, not %s", rw);
	if (O.norandommap && !O.random)
		die(2, "--norandommap: applies to random modes (randread, randwrite, randrw, randtrim), "
		    "not %s", rw);
	if ((time_based || O.ramp > 0) && !(runtime > 0))
		die(2, "--%s: needs --runtime (a time-based run)", O.ramp > 0 ? "ramp-time" : "time-based");
	if (dist_given && !O.random)
		die(2, "--random-distribution: applies to random modes (randread, randwrite, randrw, "
		    "randtrim), not %s", rw);
	if (O.verify && (O.mixed || O.trim))
		die(2, "--verify: not with --rw %s (%s)", rw, O.trim ? "a trim leaves nothing to check"
		    : "a read may meet a block not written yet");
	if (O.verify && O.write && (O.norandommap || O.dist.kind != RF_DIST_RANDOM))
		die(2, "--verify: needs every block written once (the random map), not %s",
		    O.norandommap ? "--norandommap" : "--random-distribution");
	if (O.verify && runtime > 0)
		die(2, "--verify: needs a one-pass run, not --runtime (a block written twice would "
		    "need its latest generation remembered)");
	if (O.verify && bs_arg && O.bs.grain < RF_VFY_HDR)
		die(2, "--bs: expected at least %u bytes with --verify (its header), got %" PRIu64,
		    RF_VFY_HDR, O.bs.grain);
	if ((O.sync_every || end_fsync) && !O.write)
		die(2, "--%s: applies to modes that write, not %s",
		    O.sync_every ? (O.datasync ? "fdatasync" : "fsync") : "end-fsync", rw);
	if (!bs_arg)
		die(2, "--bs: expected a block size such as 4k or 1m (missing)");
	if (!qd)
		die(2, "--qd: expected a queue depth from 1 to 16384 (missing)");
	if (direct && O.bs.grain % 512)
		die(2, "--bs: expected a multiple of 512 with --direct, got %" PRIu64, O.bs.grain);
	if (O.hipri) {
		/* a polled ring runs reads and writes only: no timers, syncs or trims */
		const char *no = O.rate_bps ? "--rate" : O.rate_iops ? "--rate-iops" :
				 O.log_ms ? "--log-interval" : O.sync_every ? "--fsync/--fdatasync" :
				 end_fsync ? "--end-fsync" : O.trim ? "--rw trim/randtrim" : NULL;
		if (!direct)
			die(2, "--hipri: needs --direct (polled I/O is O_DIRECT only)");
		if (no)
			die(2, "--hipri: not with %s (a polled ring runs only reads and writes: no timers, "
			    "syncs or trims)", no);
	}
	/* --nrfiles N with one --file P: P.0 .. P.N-1 (fio names them after the job) */
	if (nrfiles > 1 && npaths == 1) {
		const char *prefix = paths[0];
		for (unsigned i = 0; i < nrfiles; i++) {
			char *n = malloc(strlen(prefix) + 16);
			if (!n)
				die(1, "out of memory");
			sprintf(n, "%s.%u", prefix, i);
			paths[i] = n;
		}
		npaths = nrfiles;
	} else if (nrfiles && nrfiles != npaths) {
		die(2, "--nrfiles: got %u, but %u --file given (give one --file as the names' prefix, "
		    "or as many as --nrfiles)", nrfiles, npaths);
	}
	/* the same file by another name ("vf" and "./vf", a link) is the same file: each
	 * of its blocks would be visited twice a pass */
	for (unsigned a = 0; a < npaths; a++)
		for (unsigned b = a + 1; b < npaths; b++) {
			if (!strcmp(paths[a], paths[b]))
				die(2, "--file: %s given twice", paths[a]);
			if (rf_cli_same_file(paths[a], paths[b]))
				die(2, "--file: %s and %s are the same file (given twice)",
				    paths[a], paths[b]);
		}
	/* --log-interval's CSVs, PREFIX.jobN.csv: regular files or new names, and none of
	 * them a file under test (it would be truncated and overwritten with the log) */
	for (unsigned i = 0; O.log_ms && i < O.numjobs; i++) {
		char csv[4200], why[8600];
		if (snprintf(csv, sizeof(csv), "%s.job%u.csv", O.log_prefix, i) >= (int)sizeof(csv))
			die(2, "--log-prefix: got a path of %zu bytes, expected a shorter one",
			    strlen(O.log_prefix));
		if (rf_cli_check_output(csv, 0, NULL, why, sizeof(why)) < 0)
			die(1, "--log-prefix %s", why);
		for (unsigned f = 0; f < npaths; f++)
			if (rf_cli_same_file(csv, paths[f]))
				die(1,
				    "--log-prefix %s: %s is the same file as --file %s, expected "
				    "another file",
				    O.log_prefix, csv, paths[f]);
	}

	/* Open (or create) the files, never blocking: a FIFO, a directory or a character
	 * device is refused before any I/O. Files this run creates are removed if it fails
	 * (die, or a signal). --size is the files' total (fio's): each gets its share. */
	O.rw = rw;
	rf_cli_on_signals(on_signal);
	signal(SIGXFSZ, SIG_IGN); /* past RLIMIT_FSIZE: EFBIG, reported, not a silent kill */
	struct iob_file files[IOB_MAX_FILES];
	uint32_t mem_align = 4096;
	if (npaths > 1 && size && size / npaths < O.bs.grain)
		die(2, "--size: got %" PRIu64 " bytes for %u files, less than one block of %" PRIu64
		    " (--bs) each", size, npaths, O.bs.grain);
	O.size = O.ngrains = 0;
	for (unsigned i = 0; i < npaths; i++) {
		files[i].path = paths[i];
		open_file(&files[i], size / npaths, force, direct, &mem_align);
		O.size += files[i].size;
		O.ngrains += files[i].ngrains;
	}

	/* Buffers: one per request in flight (of the largest size), and no more in flight
	 * than the region's smallest blocks (another would only repeat a block already
	 * being transferred). */
	long qd_req = qd;
	if ((uint64_t)qd > O.ngrains)
		qd = (long)O.ngrains;
	uint64_t buf_bytes = (uint64_t)qd * O.bs.max * O.numjobs;
	uint64_t mem = usable_memory();
	if (mem && buf_bytes > mem / 4)
		die(2, "--qd %ld x --bs %s: %ld buffers of %" PRIu64 " bytes (%" PRIu64 " MiB), more than "
		    "the %" PRIu64 " MiB allowed (a quarter of the %" PRIu64 " MiB this process may "
		    "use); lower --qd or --bs", qd_req, bs_arg, qd * (long)O.numjobs, O.bs.max,
		    buf_bytes >> 20, (mem / 4) >> 20, mem >> 20);

	/* The jobs: each its own thread, ring and buffers, all on the same files (as fio's
	 * numjobs), started together. */
	O.files = files;
	O.nfiles = npaths;
	O.file = paths[0];
	O.bs_arg = bs_arg;
	O.end_fsync = end_fsync;
	O.fixedbufs = fixedbufs;
	O.direct = direct;
	O.qd = qd;
	O.qd_req = qd_req;
	O.batch = batch;
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
	for (unsigned i = 0; i < O.numjobs; i++)
		free(jobs[i].dir);
	free(jobs);
	free(th);
	for (unsigned i = 0; i < npaths; i++)
		close(files[i].fd);
	return 0;
}
