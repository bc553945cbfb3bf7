/* rf-iobench -- storage throughput and latency through the ringflow reactor, with
 * the knobs fio's io_uring engine has, so the two can be compared on the same file:
 *
 *   rf-iobench --file F --rw read|randread|write|randwrite --bs SIZE --qd N
 *              [--direct] [--fixedbufs] [--size SIZE] [--runtime SEC] [--batch N]
 *              [--json] [--force]
 *
 * qd requests stay in flight; each completion records its submit-to-complete latency
 * in a log-linear histogram and queues the next I/O from its callback, so every loop
 * turn submits a batch with one io_uring_enter. The file is always registered (fixed
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

/* ---- latency histogram: 64 power-of-two groups x 32 linear sub-buckets ---------- */

#define SUB_BITS 5
#define SUB (1u << SUB_BITS)
static uint64_t hist[64 * SUB];
static uint64_t lat_n, lat_sum_ns;

static inline void hist_add(uint64_t ns)
{
	unsigned b;
	if (ns < SUB) {
		b = (unsigned)ns;
	} else {
		unsigned msb = 63 - (unsigned)__builtin_clzll(ns);
		unsigned sub = (unsigned)(ns >> (msb - SUB_BITS)) & (SUB - 1);
		b = (msb - SUB_BITS + 1) * SUB + sub;
	}
	hist[b]++;
	lat_n++;
	lat_sum_ns += ns;
}

static double hist_value(unsigned b)
{
	if (b < SUB)
		return b;
	unsigned g = b / SUB, sub = b % SUB;
	unsigned msb = g + SUB_BITS - 1;
	double lo = ldexp(1.0, (int)msb) + sub * ldexp(1.0, (int)(msb - SUB_BITS));
	return lo + ldexp(1.0, (int)(msb - SUB_BITS)) / 2; /* bucket midpoint */
}

static double hist_pct(double p)
{
	if (!lat_n)
		return 0;
	uint64_t want = (uint64_t)ceil(p * (double)lat_n);
	if (want == 0)
		want = 1;
	uint64_t c = 0;
	for (unsigned b = 0; b < 64 * SUB; b++) {
		c += hist[b];
		if (c >= want)
			return hist_value(b);
	}
	return 0;
}

/* ---- the run ---------------------------------------------------------------------- */

struct slot {
	char *buf;
	uint64_t off;
	uint64_t t0;
};

static struct {
	struct rf_ring *r;
	const char *file;
	int write, random;
	unsigned ioflags;
	uint64_t bs, size, nblocks;
	uint64_t next_off, issued, total_ios; /* total_ios: 0 = time based */
	uint64_t deadline;
	uint64_t rng;
	uint64_t bytes, ios;
	unsigned inflight;
	int stop;
} B;

static inline uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void on_done(void *data, int64_t res);

static void issue(struct slot *s)
{
	if (B.random) {
		s->off = (splitmix64(&B.rng) % B.nblocks) * B.bs;
	} else {
		if (B.next_off + B.bs > B.nblocks * B.bs)
			B.next_off = 0;
		s->off = B.next_off;
		B.next_off += B.bs;
	}
	s->t0 = rf_now_ns();
	int ret = B.write ? rf_ring_write(B.r, 0, s->buf, B.bs, s->off, B.ioflags, on_done, s, NULL)
			  : rf_ring_read(B.r, 0, s->buf, B.bs, s->off, B.ioflags, on_done, s, NULL);
	if (ret < 0)
		die(1, "%s: cannot queue a %s at offset %" PRIu64 ": %s", B.file,
		    B.write ? "write" : "read", s->off, strerror(-ret));
	B.issued++;
	B.inflight++;
}

static void on_done(void *data, int64_t res)
{
	struct slot *s = data;
	uint64_t now = rf_now_ns();
	B.inflight--;
	if (res < 0)
		die(1, "%s: %s of %" PRIu64 " bytes at offset %" PRIu64 " failed: %s", B.file,
		    B.write ? "write" : "read", B.bs, s->off, strerror((int)-res));
	if ((uint64_t)res != B.bs)
		die(1, "%s: %s at offset %" PRIu64 " transferred %" PRId64 " bytes, expected %" PRIu64
		    " (end of file?)", B.file, B.write ? "write" : "read", s->off, res, B.bs);
	hist_add(now - s->t0);
	B.bytes += (uint64_t)res;
	B.ios++;
	if (B.stop)
		return;
	if (B.total_ios ? B.issued >= B.total_ios : now >= B.deadline) {
		B.stop = 1;
		return;
	}
	issue(s);
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
		"usage: %s --file F --rw read|randread|write|randwrite --bs SIZE --qd N [options]\n"
		"  --file F       a regular file or a block device (write modes create F)\n"
		"  --rw MODE      read, randread, write or randwrite\n"
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
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 }
	};
	const char *file = NULL, *rw = NULL, *bs_arg = NULL;
	uint64_t bs = 0, size = 0, v;
	long qd = 0, batch = 4;
	double runtime = 0;
	int direct = 0, fixedbufs = 0, json = 0, force = 0;
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
			    "--direct --fixedbufs --size --runtime --batch --json --force; see --help)",
			    argv[optind - 1]);
		}
	}
	if (optind < argc)
		die(2, "'%s': unexpected argument (all arguments are --options)", argv[optind]);
	if (!file)
		die(2, "--file: expected a file to read or write (missing)");
	if (!rw)
		die(2, "--rw: expected read, randread, write or randwrite (missing)");
	if (!strcmp(rw, "read")) {
	} else if (!strcmp(rw, "randread")) {
		B.random = 1;
	} else if (!strcmp(rw, "write")) {
		B.write = 1;
	} else if (!strcmp(rw, "randwrite")) {
		B.write = B.random = 1;
	} else {
		die(2, "--rw: got '%s', expected read, randread, write or randwrite", rw);
	}
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
			fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NONBLOCK, 0644);
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
			fd = rf_cli_open(file, O_WRONLY, 0, RF_CLI_ALLOW_BLK, &sb, why, sizeof(why));
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

	struct rusage ru0, ru1;
	struct rf_ring_stats st0, st1;
	rf_ring_get_stats(B.r, &st0);
	getrusage(RUSAGE_SELF, &ru0);
	uint64_t t0 = rf_now_ns();
	B.deadline = t0 + (uint64_t)(runtime * 1e9);
	for (long i = 0; i < qd && (!B.total_ios || B.issued < B.total_ios); i++)
		issue(&slots[i]);
	ret = rf_ring_run(B.r, RF_RUN_UNTIL_IDLE);
	if (ret < 0)
		die(1, "%s: ring failed: %s", file, strerror(-ret));
	uint64_t t1 = rf_now_ns();
	getrusage(RUSAGE_SELF, &ru1);
	rf_ring_get_stats(B.r, &st1);

	double secs = (double)(t1 - t0) / 1e9;
	double usr = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime);
	double sys = tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
	double mbps = (double)B.bytes / 1e6 / secs;
	double iops = (double)B.ios / secs;
	double p50 = hist_pct(0.50) / 1e3, p99 = hist_pct(0.99) / 1e3;
	double mean = lat_n ? (double)lat_sum_ns / (double)lat_n / 1e3 : 0;
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
		       "\"buffer_bytes\": %" PRIu64 ", \"peak_rss_kib\": %ld}\n",
		       file, rw, bs, qd_req, batch, direct ? "true" : "false", fixedbufs ? "true" : "false",
		       B.bytes, B.ios, secs, mbps, iops, mean, p50, p99, usr, sys, enters, subs, comps,
		       qd, qd, buf_bytes, peak_kib);
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
	}
	rf_ring_destroy(B.r);
	if (!fixedbufs)
		for (long i = 0; i < qd; i++)
			free(slots[i].buf);
	free(slots);
	close(fd);
	return 0;
}
