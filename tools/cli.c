/* tools/cli.c -- the command-line helpers of cli.h, shared by the tools. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <fcntl.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringflow/dataset.h>
#include <ringflow/log.h>

#include <ringflow/dataset.h>
#include <ringflow/log.h>

#include "cli.h"

#include <dlfcn.h>
#include <sys/resource.h>

void rf_cli_say(const char *prog, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: ", prog);
	for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
		if (*p == '\n')
			fputs("\\n", stderr);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(stderr, "\\x%02x", *p);
		else
			fputc(*p, stderr);
	}
	fputc('\n', stderr);
}

int rf_cli_check_env(const char *prog)
{
	uint64_t ns;

	if (rf_dataset_http_timeout(&ns) < 0) {
		rf_cli_say(prog, "%s", rf_last_error());
		return 1;
	}
	return 0;
}

void rf_cli_log_stderr(enum rf_log_level level, const char *msg, void *user)
{
	(void)level;
	(void)user;
	fprintf(stderr, "ringflow: %s\n", msg);
}

int rf_cli_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int rf_cli_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (!s || !((*s >= '0' && *s <= '9') || (*s == '.' && s[1] >= '0' && s[1] <= '9')))
		return -1;
	for (const char *p = s; *p; p++)
		if (!strchr("0123456789.eE+-", *p))
			return -1;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(v) || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

const char *rf_cli_ftype(mode_t m)
{
	if (S_ISREG(m))
		return "a regular file";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISLNK(m))
		return "a symbolic link";
	return "not a file";
}

int rf_cli_type_ok(mode_t m, unsigned flags)
{
	return S_ISREG(m) || ((flags & RF_CLI_ALLOW_BLK) && S_ISBLK(m));
}

const char *rf_cli_wanted(unsigned flags)
{
	return flags & RF_CLI_ALLOW_BLK ? "a regular file or a block device" : "a regular file";
}

int rf_cli_check_input(const char *path, unsigned flags, char *why, size_t len)
{
	struct stat st;

	if (!path || !*path) {
		snprintf(why, len, "'': empty path, expected %s", rf_cli_wanted(flags));
		return -1;
	}
	if (stat(path, &st) < 0) {
		snprintf(why, len, "%s: cannot open: %s, expected %s", path, strerror(errno),
			 rf_cli_wanted(flags));
		return -1;
	}
	if (!rf_cli_type_ok(st.st_mode, flags)) {
		snprintf(why, len, "%s: is %s, expected %s", path, rf_cli_ftype(st.st_mode),
			 rf_cli_wanted(flags));
		return -1;
	}
	return 0;
}

size_t rf_cli_dirname(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');
	size_t n;

	if (!slash) {
		snprintf(dir, len, ".");
		return 0;
	}
	n = slash == path ? 1 : (size_t)(slash - path);
	snprintf(dir, len, "%.*s", (int)n, path);
	return (size_t)(slash - path) + 1;
}

int rf_cli_check_output(const char *path, unsigned flags, int *exists, char *why,
				      size_t len)
{
	struct stat st;
	char dir[4096];
	size_t n;

	if (exists)
		*exists = 0;
	if (!path || !*path) {
		snprintf(why, len, "'': empty path, expected a file name");
		return -1;
	}
	n = strlen(path);
	if (n >= sizeof(dir)) {
		snprintf(why, len, "%.64s...: path of %zu bytes, expected at most %zu", path, n,
			 sizeof(dir) - 1);
		return -1;
	}
	if (stat(path, &st) == 0) {
		if (!rf_cli_type_ok(st.st_mode, flags)) {
			snprintf(why, len, "%s: is %s, expected %s (or a new file's name)", path,
				 rf_cli_ftype(st.st_mode), rf_cli_wanted(flags));
			return -1;
		}
		if (access(path, W_OK) < 0) {
			snprintf(why, len, "%s: cannot be written: %s", path, strerror(errno));
			return -1;
		}
		if (exists)
			*exists = 1;
		return 0;
	}
	if (errno != ENOENT) {
		/* ENOTDIR: a component is a file; ELOOP, EACCES, ENAMETOOLONG ... */
		snprintf(why, len, "%s: cannot create: %s, expected a file name in an existing "
			 "directory", path, strerror(errno));
		return -1;
	}
	if (path[n - 1] == '/') {
		snprintf(why, len, "%s: cannot create: ends in '/', expected a file name", path);
		return -1;
	}
	rf_cli_dirname(path, dir, sizeof(dir));
	if (stat(dir, &st) < 0) {
		snprintf(why, len, "%s: cannot create: directory %s: %s", path, dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, len, "%s: cannot create: %s is %s, expected a directory", path, dir,
			 rf_cli_ftype(st.st_mode));
		return -1;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		snprintf(why, len, "%s: cannot create: directory %s: %s", path, dir, strerror(errno));
		return -1;
	}
	return 0;
}

int rf_cli_other_scheme(const char *s, char *scheme, size_t len)
{
	size_t n = 0;

	if (!s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
		return 0;
	while (s[n] && (strchr("+-.", s[n]) || (s[n] >= '0' && s[n] <= '9') ||
			(s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z')))
		n++;
	if (strncmp(s + n, "://", 3) || (n == 4 && !strncmp(s, "http", 4)))
		return 0;
	snprintf(scheme, len, "%.*s", (int)n, s);
	return 1;
}

/* An unnamed regular file (O_TMPFILE) made in DIR and closed, so that a probe never
 * leaves a name behind, even killed with SIGKILL: 1 made, 0 where DIR's filesystem
 * cannot make one (EOPNOTSUPP; EISDIR or EINVAL from older kernels), -1 for any other
 * failure, which a named file there would meet too: `why` "WHAT: cannot create:
 * REASON". */
static int rf_cli_try_unnamed(const char *dir, const char *what, char *why, size_t len)
{
	int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);

	if (fd >= 0) {
		close(fd);
		return 1;
	}
	if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)
		return 0;
	snprintf(why, len, "%s: cannot create: %s", what, strerror(errno));
	return -1;
}

int rf_cli_probe_write(const char *path, char *why, size_t len)
{
	char dir[4096];
	int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC), r;

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno != ENOENT) {
		snprintf(why, len, "%s: cannot open for writing: %s", path, strerror(errno));
		return -1;
	}
	rf_cli_dirname(path, dir, sizeof(dir)); /* ENOENT: the path fits PATH_MAX */
	if ((r = rf_cli_try_unnamed(dir, path, why, len)) != 0)
		return r > 0 ? 0 : -1;
	/* no unnamed files there: created by name and removed at once */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd >= 0) {
		close(fd);
		unlink(path);
		return 0;
	}
	if (errno == EEXIST) /* another process's, made meanwhile */
		return 0;
	snprintf(why, len, "%s: cannot create: %s", path, strerror(errno));
	return -1;
}

int rf_cli_probe_mkdir(const char *dir, char *why, size_t len)
{
	char d[4096], parent[4096];
	size_t n;
	struct stat st;
	int r;

	if (stat(dir, &st) == 0)
		return 0; /* there already: what it is, the caller has checked */
	if (errno != ENOENT) { /* what mkdir would meet too (a path too long for d) */
		snprintf(why, len, "%s: cannot create: %s", dir, strerror(errno));
		return -1;
	}
	snprintf(d, sizeof(d), "%s", dir); /* "new/" names "new" */
	for (n = strlen(d); n > 1 && d[n - 1] == '/'; n--)
		d[n - 1] = 0;
	rf_cli_dirname(d, parent, sizeof(parent));
	if ((r = rf_cli_try_unnamed(parent, dir, why, len)) != 0)
		return r > 0 ? 0 : -1;
	if (mkdir(dir, 0700) < 0) {
		if (errno == EEXIST)
			return 0;
		snprintf(why, len, "%s: cannot create: %s", dir, strerror(errno));
		return -1;
	}
	rmdir(dir);
	return 0;
}

int rf_cli_check_trace_env(const char *prog)
{
	const char *p = getenv("RF_TRACE");
	char why[8400];

	if (!p || !*p)
		return 0;
	if (rf_cli_check_output(p, 0, NULL, why, sizeof(why)) < 0 ||
	    rf_cli_probe_write(p, why, sizeof(why)) < 0) {
		rf_cli_say(prog, "RF_TRACE %s", why);
		return 1;
	}
	return 0;
}

int rf_cli_open(const char *path, int oflags, mode_t mode, unsigned flags,
			      struct stat *st, char *why, size_t len)
{
	struct stat sb;
	int fd, e;

	if (!st)
		st = &sb;
	if (!path || !*path) {
		snprintf(why, len, "'': empty path, expected %s", rf_cli_wanted(flags));
		return -EINVAL;
	}
	if (stat(path, st) == 0 && !rf_cli_type_ok(st->st_mode, flags)) {
		snprintf(why, len, "%s: is %s, expected %s", path, rf_cli_ftype(st->st_mode),
			 rf_cli_wanted(flags));
		return S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
	}
	fd = open(path, oflags | O_NONBLOCK | O_CLOEXEC, mode);
	if (fd < 0) {
		e = errno;
		if (e == ENXIO && stat(path, st) == 0 && !rf_cli_type_ok(st->st_mode, flags))
			snprintf(why, len, "%s: is %s, expected %s", path, rf_cli_ftype(st->st_mode),
				 rf_cli_wanted(flags));
		else
			snprintf(why, len, "%s: cannot open for %s: %s", path,
				 (oflags & O_ACCMODE) == O_RDONLY ? "reading" : "writing", strerror(e));
		return -e;
	}
	if (fstat(fd, st) < 0) {
		e = errno;
		close(fd);
		snprintf(why, len, "%s: cannot stat: %s", path, strerror(e));
		return -e;
	}
	if (!rf_cli_type_ok(st->st_mode, flags)) {
		close(fd);
		snprintf(why, len, "%s: is %s, expected %s", path, rf_cli_ftype(st->st_mode),
			 rf_cli_wanted(flags));
		return -EINVAL;
	}
	e = fcntl(fd, F_GETFL);
	if (e < 0 || fcntl(fd, F_SETFL, e & ~O_NONBLOCK) < 0) {
		e = errno;
		close(fd);
		snprintf(why, len, "%s: fcntl: %s", path, strerror(e));
		return -e;
	}
	return fd;
}

void rf_cli_on_signals(void (*handler)(int))
{
	static const int sigs[3] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 3; i++)
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
}

/* path into buf without its trailing slashes ("new/" names "new"; "/" stays). */
static const char *rf__noslash(const char *path, char *buf, size_t len)
{
	size_t n;

	snprintf(buf, len, "%s", path);
	for (n = strlen(buf); n > 1 && buf[n - 1] == '/'; n--)
		buf[n - 1] = 0;
	return buf;
}

int rf_cli_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	char da[4096], db[4096], na[4096], nb[4096];
	size_t ba, bb;
	int ea, eb;

	if (!a || !b || !*a || !*b)
		return 0;
	a = rf__noslash(a, na, sizeof(na));
	b = rf__noslash(b, nb, sizeof(nb));
	if (!strcmp(a, b))
		return 1;
	ea = stat(a, &sa) == 0;
	eb = stat(b, &sb) == 0;
	if (ea && eb)
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	if (ea || eb)
		return 0;
	ba = rf_cli_dirname(a, da, sizeof(da));
	bb = rf_cli_dirname(b, db, sizeof(db));
	return strcmp(a + ba, b + bb) == 0 && stat(da, &sa) == 0 && stat(db, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Whether resolved path rp lies in resolved directory rd (or is it). */
static int rf__under(const char *rp, const char *rd)
{
	size_t n = strlen(rd);

	return n == 1 || (strncmp(rp, rd, n) == 0 && (rp[n] == 0 || rp[n] == '/'));
}

int rf_cli_inside(const char *path, const char *dir)
{
	char rd[PATH_MAX], rp[PATH_MAX], pd[PATH_MAX], p[PATH_MAX];
	struct stat st;
	size_t base;

	if (!path || !dir || !*path || !*dir || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    !realpath(dir, rd) || strlen(path) >= sizeof(p))
		return 0;
	rf__noslash(path, p, sizeof(p));
	/* where it is written: its directory resolved, and its own name as it stands
	 * (a link there is replaced, or written through: both count) */
	base = rf_cli_dirname(p, pd, sizeof(pd));
	if (p[base] && realpath(pd, rp) && strlen(rp) + 1 + strlen(p + base) < sizeof(rp)) {
		if (strcmp(rp, "/"))
			strcat(rp, "/");
		strcat(rp, p + base);
		if (rf__under(rp, rd))
			return 1;
	}
	/* and where it leads, if it is there (a link out of the folder to an image in it) */
	return realpath(p, rp) && rf__under(rp, rd);
}

int rf_cli_bad_opt(int ret, int before, int argc, char **argv,
				 const char *shortopts, const struct option *lo, char *name,
				 size_t len)
{
	const char *el = optind > before && optind - 1 < argc ? argv[optind - 1] :
			 optind < argc ? argv[optind] : "?";

	if (el[0] == '-' && el[1] == '-' && el[2]) {
		size_t n = strcspn(el + 2, "=");
		for (const struct option *o = lo; optopt && o->name; o++)
			if (o->val == optopt && !o->flag && !strncmp(o->name, el + 2, n)) {
				snprintf(name, len, "--%s", o->name);
				return ret == ':' || o->has_arg == required_argument ?
				       RF_CLI_OPT_NEEDS_VALUE : RF_CLI_OPT_NO_VALUE;
			}
		snprintf(name, len, "%.*s", (int)(n + 2), el);
		return RF_CLI_OPT_UNKNOWN;
	}
	snprintf(name, len, "-%c", optopt > 32 && optopt < 127 ? optopt : '?');
	return ret == ':' || (optopt && strchr(shortopts, optopt)) ? RF_CLI_OPT_NEEDS_VALUE :
	       RF_CLI_OPT_UNKNOWN;
}

void rf_cli_json_num(FILE *f, const char *fmt, double v)
{
	if (isfinite(v))
		fprintf(f, fmt, v);
	else
		fputs("null", f);
}

/* The program's name for rf_cli_check_stdout's message. */
static const char **rf_cli__stdout_prog(void)
{
	static const char *prog = "ringflow";
	return &prog;
}

static void rf_cli__stdout_at_exit(void)
{
	/* a write that failed earlier left its reason in errno, most likely still there */
	int e0 = errno, e = 0, bad = ferror(stdout);

	if (fflush(stdout) != 0) {
		bad = 1;
		e = errno;
	}
	if (fclose(stdout) != 0 && !e) {
		bad = 1;
		e = errno;
	}
	if (!bad)
		return;
	if (!e && (e0 == ENOSPC || e0 == EDQUOT || e0 == EIO || e0 == EFBIG || e0 == EPIPE))
		e = e0;
	/* stderr may be the same full disk: nothing more can be done then */
	if (e)
		rf_cli_say(*rf_cli__stdout_prog(), "stdout: %s", strerror(e));
	else
		rf_cli_say(*rf_cli__stdout_prog(), "stdout: a write failed, the output is "
			   "incomplete");
	_exit(1);
}

void rf_cli_check_stdout(const char *prog)
{
	*rf_cli__stdout_prog() = prog;
	atexit(rf_cli__stdout_at_exit);
}

void rf_cli_limits(char **argv)
{
	struct rlimit as, data;

	signal(SIGXFSZ, SIG_IGN);
	if (getenv("MALLOC_CONF") || !dlsym(RTLD_DEFAULT, "mallctl"))
		return;   /* set by the user, or not jemalloc */
	if ((getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) ||
	    (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY)) {
		if (setenv("MALLOC_CONF", "narenas:1", 1) == 0)
			execv("/proc/self/exe", argv);
		/* could not: on as it is (jemalloc may still crash at the limit) */
	}
}
