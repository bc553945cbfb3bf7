/* examples/rf-manifest.c -- embedding the reactor and the engine in an I/O-heavy
 * program: a SHA-256 manifest of every regular file under a directory, in the format
 * of `sha256sum` ("<hex>  <path>"), sorted by path.
 *
 *   rf-manifest [--workers N] [--chunk BYTES] [--buffers N] DIR [OUT]
 *
 * How it is built on ringflow:
 *   - nothing blocks the reactor on the file system: the directory walk stats every
 *     entry through the ring (statx requests, all of a directory in flight at once),
 *     and each file is opened and stat'ed by two ring operations pushed as engine ops
 *     (rf_engine_push_io: the statx takes the fd the open produced) -- only the
 *     readdir itself is a plain call, io_uring having no getdents;
 *   - every file is read in chunks through the ring (async engine ops whose
 *     completion is the read's CQE);
 *   - each chunk is hashed on a worker stream (one per file, round-robin over N
 *     workers), an op that reads the chunk's buffer variable and mutates the file's
 *     hash-state variable, so the chunks of one file are hashed in order while
 *     different files hash in parallel;
 *   - a fixed pool of buffers, each with its own variable, is the program's whole
 *     I/O memory: a read into buffer k is pushed as a mutation of buffer k, so the
 *     engine starts it only after the previous hash op that read buffer k -- memory
 *     recycling by dependency, no explicit bookkeeping;
 *   - a final op per file formats its digest; one rf_engine_wait_all at the end.
 * Errors (unreadable file, read error) name the file and offset and make the exit
 * status 1. OUT is only ever replaced by a whole manifest of a run without errors:
 * it is written to OUT.tmp (created new: O_EXCL, O_NOFOLLOW, so neither a FIFO nor
 * a link there is opened, nor another run's file taken over), synced and renamed;
 * a run with an error leaves OUT as it was. OUT must be a regular file or a new
 * name (a rename would replace a device node). Bad arguments exit 2. Build it
 * outside the tree with `pkg-config --cflags --libs ringflow`. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf */
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringflow/engine.h>
#include <ringflow/log.h>
#include <ringflow/ring-ops.h>

/* ---- SHA-256 (FIPS 180-4) --------------------------------------------------------- */
struct sha256 {
	uint32_t h[8];
	uint64_t len;
	uint8_t buf[64];
	unsigned nbuf;
};

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_init(struct sha256 *s)
{
	static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
					0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	memcpy(s->h, h0, sizeof(h0));
	s->len = 0;
	s->nbuf = 0;
}

static void sha256_block(uint32_t h[8], const uint8_t *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, hh;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = h[0]; b = h[1]; c = h[2]; d = h[3]; e = h[4]; f = h[5]; g = h[6]; hh = h[7];
	for (i = 0; i < 64; i++) {
		uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
		uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
	}
	h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

static void sha256_update(struct sha256 *s, const uint8_t *p, size_t n)
{
	s->len += n;
	if (s->nbuf) {
		size_t take = 64 - s->nbuf < n ? 64 - s->nbuf : n;
		memcpy(s->buf + s->nbuf, p, take);
		s->nbuf += (unsigned)take;
		p += take;
		n -= take;
		if (s->nbuf < 64)
			return;        /* all of p buffered: the block is not full yet */
		sha256_block(s->h, s->buf);
		s->nbuf = 0;
	}
	for (; n >= 64; p += 64, n -= 64)
		sha256_block(s->h, p);
	memcpy(s->buf, p, n);
	s->nbuf = (unsigned)n;
}

static void sha256_final(struct sha256 *s, char hex[65])
{
	uint64_t bits = s->len * 8;
	uint8_t pad[72] = { 0x80 };
	size_t padn = (s->nbuf < 56 ? 56 : 120) - s->nbuf;
	int i;

	for (i = 0; i < 8; i++)
		pad[padn + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
	sha256_update(s, pad, padn + 8);
	for (i = 0; i < 8; i++)
		sprintf(hex + 8 * i, "%08x", s->h[i]);
}

/* ---- the pipeline ------------------------------------------------------------------ */
struct file {
	char *path;
	int fd;
	int64_t fdres;         /* the open op's result */
	struct statx stx;      /* the statx op's, on the open fd */
	uint64_t size;
	struct sha256 sha;
	struct rf_var *var;    /* the hash state */
	char hex[65];
	int err;               /* -errno */
	uint64_t err_off;
};

struct buffer {
	uint8_t *data;
	struct rf_var *var;
	size_t len;            /* bytes valid after the read */
};

struct chunk {                 /* one read + one hash */
	struct file *f;
	struct buffer *b;
	uint64_t off;
	size_t len;
	struct rf_op *op;
};

static struct rf_engine *eng;
static struct rf_ring *ring;

static void read_done(void *data, int64_t res)
{
	struct chunk *c = data;

	if (res >= 0 && (size_t)res != c->len)
		res = -EIO; /* the file shrank under us: short read at EOF */
	if (res < 0 && !c->f->err) {
		c->f->err = (int)res;
		c->f->err_off = c->off;
	}
	c->b->len = res < 0 ? 0 : (size_t)res;
	rf_engine_op_done(c->op, res < 0 ? (int)res : 0);
}

static int read_start(void *ctx, struct rf_op *op)
{
	struct chunk *c = ctx;

	c->op = op;
	return rf_ring_read(ring, c->f->fd, c->b->data, c->len, c->off, 0, read_done, c, NULL);
}

static int hash_chunk(void *ctx)
{
	struct chunk *c = ctx;

	sha256_update(&c->f->sha, c->b->data, c->b->len);
	return 0;
}

static void chunk_free(void *ctx, int status)
{
	(void)status;
	free(ctx);
}

static int hash_final(void *ctx)
{
	struct file *f = ctx;

	sha256_final(&f->sha, f->hex);
	return 0;
}

static int cmp_path(const void *a, const void *b)
{
	const struct file *x = a, *y = b;

	return strcmp(x->path, y->path);
}

/* One directory entry being stat'ed through the ring. */
struct entry {
	char *path;
	struct statx stx;
	int64_t res;
};

static void entry_done(void *data, int64_t res)
{
	((struct entry *)data)->res = res;
}

static int add_file(struct file **files, size_t *n, size_t *cap, char *p)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct file *nf = realloc(*files, nc * sizeof(**files));
		if (!nf)
			return -ENOMEM;
		*files = nf;
		*cap = nc;
	}
	memset(&(*files)[*n], 0, sizeof(**files));
	(*files)[*n].path = p;
	(*files)[*n].fd = -1;
	(*n)++;
	return 0;
}

/* Walk dir: read its entries, stat them all through the ring at once (no symlinks
 * followed), keep the regular files, recurse into directories. */
static int collect(const char *dir, struct file **files, size_t *n, size_t *cap)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct entry *ents = NULL;
	size_t nents = 0, ecap = 0, i;
	int ret = 0;

	if (!d) {
		fprintf(stderr, "rf-manifest: %s: cannot open directory: %s\n", dir, strerror(errno));
		return -errno;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (nents == ecap) {
			size_t nc = ecap ? ecap * 2 : 64;
			struct entry *ne = realloc(ents, nc * sizeof(*ents));
			if (!ne) {
				fprintf(stderr, "rf-manifest: %s: out of memory for its entries\n", dir);
				ret = -ENOMEM;
				break;
			}
			ents = ne;
			ecap = nc;
		}
		if (asprintf(&ents[nents].path, "%s/%s", dir, de->d_name) < 0) {
			fprintf(stderr, "rf-manifest: %s: out of memory for its entries\n", dir);
			ret = -ENOMEM;
			break;
		}
		nents++;
	}
	closedir(d);
	/* the entries array is final now: stat them all, then turn the ring */
	for (i = 0; i < nents; i++) {
		int r = rf_ring_statx(ring, AT_FDCWD, ents[i].path, AT_SYMLINK_NOFOLLOW,
				      STATX_TYPE, &ents[i].stx, entry_done, &ents[i], NULL);
		if (r < 0)
			ents[i].res = r;
	}
	int r = rf_ring_run(ring, RF_RUN_UNTIL_IDLE);
	if (r < 0) {
		fprintf(stderr, "rf-manifest: the ring failed: %s\n", rf_last_error());
		ret = r;
	}
	for (i = 0; i < nents; i++) {
		char *p = ents[i].path;
		if (ents[i].res < 0) {
			fprintf(stderr, "rf-manifest: %s: %s\n", p, strerror((int)-ents[i].res));
			free(p);
			ret = -EIO;
		} else if (S_ISDIR(ents[i].stx.stx_mode)) {
			r = collect(p, files, n, cap);
			free(p);
			if (r < 0)
				ret = r;
		} else if (!S_ISREG(ents[i].stx.stx_mode)) {
			free(p);
		} else if (add_file(files, n, cap, p) < 0) {
			fprintf(stderr, "rf-manifest: %s: out of memory\n", p);
			free(p);
			ret = -ENOMEM;
		}
	}
	free(ents);
	return ret;
}

#define MAX_WORKERS 64
#define MAX_CHUNK (64ull << 20)   /* bytes */
#define MAX_BUFFERS 4096
#define MAX_POOL (1ull << 30)     /* --chunk x --buffers: the I/O memory */

static const char usage[] =
	"usage: rf-manifest [--workers N] [--chunk BYTES] [--buffers N] DIR [OUT]\n"
	"  DIR           the directory whose regular files are hashed (symbolic links are\n"
	"                not followed)\n"
	"  OUT           where the manifest goes (default stdout): a regular file or a new\n"
	"                name, replaced only by a complete manifest of a run without errors\n"
	"  --workers N   hashing threads, 1..64 (default 2)\n"
	"  --chunk BYTES bytes per read, 1..67108864 (64 MiB; default 1048576)\n"
	"  --buffers N   read buffers, 1..4096 (default 8); --chunk x --buffers is the\n"
	"                program's I/O memory, at most 1 GiB\n";

/* An integer option in [min, max], digits only: no sign, space, suffix, or overflow. */
static unsigned long long arg_num(const char *name, const char *v, unsigned long long min,
				  unsigned long long max)
{
	unsigned long long x = 0;
	const char *p = v;

	if (!v) {
		fprintf(stderr, "rf-manifest: %s needs a value (see --help)\n", name);
		exit(2);
	}
	for (; *p >= '0' && *p <= '9' && x <= max; p++)
		x = x * 10 + (unsigned long long)(*p - '0');
	if (!*v || *p || x < min || x > max) {
		fprintf(stderr,
			"rf-manifest: %s: got '%s', expected an integer from %llu to %llu\n", name,
			v, min, max);
		exit(2);
	}
	return x;
}

/* OUT.tmp while this run has it (created by it, O_EXCL), for the signal handler. */
static char *tmp_path;
static volatile sig_atomic_t tmp_armed;

static void on_signal(int sig)
{
	int saved = errno;

	if (tmp_armed)
		unlink(tmp_path);
	signal(sig, SIG_DFL);
	errno = saved;
	raise(sig);
}

/* OUT before anything is read: a regular file or a new name in a directory that
 * exists (a rename over a FIFO or a device node would replace it), and no OUT.tmp
 * (another run's, or one that was killed). 0, or -1 with the message printed. */
static int check_out(const char *out, const char *tmp, const char *walk)
{
	struct stat st;
	const char *slash = strrchr(out, '/');
	char *dir;

	if (!*out || out[strlen(out) - 1] == '/') {
		fprintf(stderr, "rf-manifest: OUT '%s': expected a file name\n", out);
		return -1;
	}
	if (stat(out, &st) == 0 && !S_ISREG(st.st_mode)) {
		fprintf(stderr, "rf-manifest: %s: is not a regular file (%s), expected a regular "
			"file or a new file's name\n", out, S_ISDIR(st.st_mode) ? "a directory" :
			S_ISCHR(st.st_mode) ? "a character device" : S_ISBLK(st.st_mode) ?
			"a block device" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a special file");
		return -1;
	}
	/* an existing OUT under DIR is one of the files hashed: replacing it would lose
	 * it and list its old hash */
	/* (a link at OUT is replaced, not what it leads to) */
	char *ro = lstat(out, &st) == 0 && !S_ISLNK(st.st_mode) ? realpath(out, NULL) : NULL;
	char *rd = realpath(walk, NULL);
	size_t ld = rd ? strlen(rd) : 0;
	int inside = ro && rd && !strncmp(ro, rd, ld) && (ro[ld] == '/' || rd[ld - 1] == '/');
	free(ro);
	free(rd);
	if (inside) {
		fprintf(stderr, "rf-manifest: %s: a file inside DIR %s, which the manifest "
			"hashes: expected a file outside it (remove an old manifest there "
			"first)\n", out, walk);
		return -1;
	}
	if (lstat(tmp, &st) == 0) {
		fprintf(stderr, "rf-manifest: %s: exists (another rf-manifest writing %s, or one "
			"that was killed): expected no file there; remove it if it is stale\n",
			tmp, out);
		return -1;
	}
	if (!(dir = slash ? strndup(out, slash == out ? 1 : (size_t)(slash - out)) : strdup("."))) {
		fprintf(stderr, "rf-manifest: out of memory\n");
		return -1;
	}
	int ok = stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && access(dir, W_OK | X_OK) == 0;
	if (!ok)
		fprintf(stderr, "rf-manifest: %s: cannot create it: %s is not a writable "
			"directory\n", out, dir);
	free(dir);
	return ok ? 0 : -1;
}

/* stdout: flushed and checked (a full disk, /dev/full): 0, or 1 with the message. */
static int stdout_done(void)
{
	int e0 = errno, e = fflush(stdout) ? errno : 0;

	if (!e && !ferror(stdout))
		return 0;
	if (!e && (e0 == ENOSPC || e0 == EIO || e0 == EFBIG || e0 == EPIPE))
		e = e0; /* an earlier write's, most likely still there */
	fprintf(stderr, "rf-manifest: stdout: %s\n", e ? strerror(e) : "a write failed");
	return 1;
}

/* The manifest into OUT: OUT.tmp created new (O_EXCL: never another's file; O_NOFOLLOW:
 * never through a link; a FIFO there exists, so it is refused, not opened), written,
 * synced, renamed over OUT. 0, or -1 with the message printed and OUT.tmp removed. */
static int publish(const char *out, const struct file *files, size_t nfiles)
{
	sigset_t sigs, old;
	FILE *fo = NULL;
	int fd, e = 0;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, &old); /* no signal between the file and the flag */
	fd = open(tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	tmp_armed = fd >= 0;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (fd < 0) {
		fprintf(stderr, "rf-manifest: %s: cannot create: %s%s\n", tmp_path, strerror(errno),
			errno == EEXIST ? " (another rf-manifest writing it?)" : "");
		return -1;
	}
	if (!(fo = fdopen(fd, "w"))) {
		e = errno;
		close(fd);
	}
	for (size_t i = 0; fo && i < nfiles && !e; i++)
		if (fprintf(fo, "%s  %s\n", files[i].hex, files[i].path) < 0)
			e = errno;
	if (fo && !e && (fflush(fo) != 0 || fsync(fileno(fo)) != 0))
		e = errno;
	if (fo && fclose(fo) != 0 && !e)
		e = errno;
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	if (!e && rename(tmp_path, out) != 0)
		e = errno;
	if (e)
		unlink(tmp_path);
	tmp_armed = 0;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (e) {
		fprintf(stderr, "rf-manifest: %s: cannot write: %s (%s left as it was)\n", out,
			strerror(e), out);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long long nworkers = 2, chunk = 1 << 20, nbufs = 8;
	const char *dir = NULL, *out = NULL;
	struct file *files = NULL;
	size_t nfiles = 0, cap = 0, i, next_buf = 0;
	struct rf_stream **workers;
	struct buffer *bufs;
	int i_arg, ret, status = 0, opts_done = 0;

	for (i_arg = 1; i_arg < argc; i_arg++) {
		const char *a = argv[i_arg];
		if (!opts_done && !strcmp(a, "--workers"))
			nworkers = arg_num("--workers", argv[++i_arg], 1, MAX_WORKERS);
		else if (!opts_done && !strcmp(a, "--chunk"))
			chunk = arg_num("--chunk", argv[++i_arg], 1, MAX_CHUNK);
		else if (!opts_done && !strcmp(a, "--buffers"))
			nbufs = arg_num("--buffers", argv[++i_arg], 1, MAX_BUFFERS);
		else if (!opts_done && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
			fputs(usage, stdout);
			return stdout_done();
		} else if (!opts_done && !strcmp(a, "--"))
			opts_done = 1;
		else if (!opts_done && a[0] == '-' && a[1]) {
			fprintf(stderr, "rf-manifest: %s: unknown option (see --help)\n", a);
			return 2;
		} else if (!dir)
			dir = a;
		else if (!out)
			out = a;
		else {
			fprintf(stderr, "rf-manifest: '%s': unexpected argument (see --help)\n", a);
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "rf-manifest: missing DIR (see --help)\n");
		return 2;
	}
	if (chunk * nbufs > MAX_POOL) {
		fprintf(stderr, "rf-manifest: --chunk %llu x --buffers %llu: %llu MiB of buffers, "
			"expected at most %llu MiB\n", chunk, nbufs, (chunk * nbufs) >> 20,
			MAX_POOL >> 20);
		return 2;
	}
	if (out) {
		if (asprintf(&tmp_path, "%s.tmp", out) < 0) {
			fprintf(stderr, "rf-manifest: out of memory\n");
			return 1;
		}
		if (check_out(out, tmp_path, dir) < 0)
			return 1;
		struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART }, was;
		sigemptyset(&sa.sa_mask);
		for (int k = 0; k < 3; k++) { /* an ignored signal (nohup) stays ignored */
			int sg = k == 0 ? SIGINT : k == 1 ? SIGTERM : SIGHUP;
			if (sigaction(sg, NULL, &was) == 0 && was.sa_handler != SIG_IGN)
				sigaction(sg, &sa, NULL);
		}
	}
	if ((ret = rf_ring_create(&ring, &(struct rf_ring_opts){ .entries = 64 })) < 0 ||
	    (ret = rf_engine_create(&eng, ring, NULL)) < 0) {
		/* the library prints nothing: its reason (a malformed RF_FAULT_INJECT,
		 * RF_TRACE's file, ...) is rf_last_error()'s, said here */
		fprintf(stderr, "rf-manifest: cannot set up the ring or the engine: %s\n",
			rf_last_error());
		return 1;
	}
	if (collect(dir, &files, &nfiles, &cap) < 0)
		status = 1;
	if (nfiles)
		qsort(files, nfiles, sizeof(*files), cmp_path);

	/* open and stat every file through the ring: two engine ops per file, the statx
	 * on the fd the open produced (so the size is that of the file being read) */
	for (i = 0; i < nfiles; i++) {
		struct file *f = &files[i];
		struct rf_io_push op = {
			.io = { .op = RF_IOP_OPENAT, .dirfd = AT_FDCWD, .path = f->path,
				.arg = O_RDONLY | O_CLOEXEC },
			.result = &f->fdres, .writes = &f->var, .nwrites = 1, .name = "open" };
		struct rf_io_push st = {
			.io = { .op = RF_IOP_STATX, .dirfd = AT_FDCWD, .path = "", .arg = AT_EMPTY_PATH,
				.mask = STATX_SIZE, .stx = &f->stx },
			.fd_from = &f->fdres, .writes = &f->var, .nwrites = 1, .name = "statx" };
		f->fdres = -1;
		if ((ret = rf_var_create(eng, f->path, &f->var)) < 0 ||
		    (ret = rf_engine_push_io(eng, &op)) < 0 ||
		    (ret = rf_engine_push_io(eng, &st)) < 0) {
			fprintf(stderr, "rf-manifest: %s: cannot push its open: %s\n", f->path,
				rf_last_error());
			return 1;
		}
	}
	rf_engine_wait_all(eng); /* errors are per file: in each file's variable */
	for (i = 0; i < nfiles; i++) {
		struct file *f = &files[i];
		f->fd = f->fdres >= 0 ? (int)f->fdres : -1;
		f->err = rf_var_error(f->var, NULL);
		f->size = f->stx.stx_size;
	}
	workers = calloc((size_t)nworkers, sizeof(*workers));
	bufs = calloc((size_t)nbufs, sizeof(*bufs));
	if (!workers || !bufs) {
		fprintf(stderr, "rf-manifest: out of memory for %llu workers and %llu buffers\n",
			nworkers, nbufs);
		return 1;
	}
	for (i = 0; i < (size_t)nworkers; i++) {
		char name[32];
		snprintf(name, sizeof(name), "sha256-%zu", i);
		if ((ret = rf_worker_stream_create(eng, name, 0, &workers[i])) < 0) {
			fprintf(stderr, "rf-manifest: cannot start a worker: %s\n", rf_last_error());
			return 1;
		}
	}
	for (i = 0; i < (size_t)nbufs; i++) {
		bufs[i].data = malloc((size_t)chunk);
		if (!bufs[i].data || (ret = rf_var_create(eng, "buffer", &bufs[i].var)) < 0) {
			fprintf(stderr, "rf-manifest: buffer %zu of %llu bytes (--chunk, --buffers): "
				"%s\n", i, chunk, !bufs[i].data ? "out of memory" : rf_last_error());
			return 1;
		}
	}

	for (i = 0; i < nfiles; i++) {
		struct file *f = &files[i];
		struct rf_stream *w = workers[i % (size_t)nworkers];
		uint64_t off = 0;

		if (f->err)
			continue;
		sha256_init(&f->sha);
		do {
			struct chunk *c = calloc(1, sizeof(*c)), *h = calloc(1, sizeof(*h));
			struct buffer *b = &bufs[next_buf++ % (size_t)nbufs];
			struct rf_var *rv[1] = { b->var }, *wv[1] = { f->var };
			struct rf_op_desc rd = { .afn = read_start, .ctx = c, .done = chunk_free,
						 .writes = rv, .nwrites = 1, .name = "read" };
			struct rf_op_desc hd = { .fn = hash_chunk, .ctx = h, .done = chunk_free,
						 .reads = rv, .nreads = 1, .writes = wv, .nwrites = 1,
						 .stream = w, .name = "sha256" };

			if (!c || !h) {
				fprintf(stderr, "rf-manifest: out of memory\n");
				return 1;
			}
			c->f = f;
			c->b = b;
			c->off = off;
			c->len = f->size - off < (uint64_t)chunk ? (size_t)(f->size - off) : (size_t)chunk;
			*h = *c;
			/* a failed read poisons the buffer; the hash op is then skipped and
			 * passes the poison to the file's variable */
			if ((ret = rf_engine_push(eng, &rd)) < 0 ||
			    (ret = rf_engine_push(eng, &hd)) < 0) {
				fprintf(stderr, "rf-manifest: %s: cannot push a read: %s\n",
					f->path, rf_last_error());
				return 1;
			}
			off += c->len;
		} while (off < f->size);
		if ((ret = rf_engine_push_simple(eng, hash_final, f, NULL, 0, &f->var, 1, w,
						 "sha256-final")) < 0) {
			fprintf(stderr, "rf-manifest: %s: cannot push its digest: %s\n", f->path,
				rf_last_error());
			return 1;
		}
	}
	rf_engine_wait_all(eng); /* errors are per file, below */

	for (i = 0; i < nfiles; i++) {
		struct file *f = &files[i];
		if (f->var && !f->err) {
			const char *who;
			int e = rf_var_error(f->var, &who);
			if (e)
				f->err = e;
		}
		if (f->err) {
			fprintf(stderr, "rf-manifest: %s: offset %llu: %s\n", f->path,
				(unsigned long long)f->err_off, strerror(-f->err));
			status = 1;
		} else if (!out) {
			printf("%s  %s\n", f->hex, f->path);
		}
	}
	/* OUT only from a run without errors: a partial manifest would look complete */
	if (out && status)
		fprintf(stderr, "rf-manifest: %s: not written (errors above; it is left as it "
			"was)\n", out);
	else if (out && publish(out, files, nfiles) < 0)
		status = 1;
	if (!out && stdout_done())
		status = 1;
	for (i = 0; i < nfiles; i++) { /* closed through the ring too */
		struct rf_io_push cl = { .io = { .op = RF_IOP_CLOSE, .fd = files[i].fd },
					 .writes = &files[i].var, .nwrites = 1, .name = "close" };
		if (files[i].fd >= 0 && rf_engine_push_io(eng, &cl) < 0)
			close(files[i].fd);
	}
	rf_engine_wait_idle(eng);
	for (i = 0; i < nfiles; i++) {
		if (files[i].var)
			rf_var_destroy(eng, files[i].var, NULL, NULL, NULL);
		free(files[i].path);
	}
	for (i = 0; i < (size_t)nbufs; i++)
		rf_var_destroy(eng, bufs[i].var, free, bufs[i].data, NULL);
	rf_engine_wait_idle(eng);
	/* RF_TRACE's file: a write error (a full disk) fails the run -- after OUT was
	 * published (the trace ends with the closes), so the message says so */
	if ((ret = rf_engine_trace_stop(eng)) < 0 && ret != -ENOENT) {
		fprintf(stderr, "rf-manifest: RF_TRACE: %s%s%s%s\n", rf_last_error(),
			out && !status ? " (the manifest " : "", out && !status ? out : "",
			out && !status ? " itself was written)" : "");
		status = 1;
	}
	rf_engine_destroy(eng);
	rf_ring_destroy(ring);
	free(workers);
	free(bufs);
	free(files);
	free(tmp_path);
	return status;
}
