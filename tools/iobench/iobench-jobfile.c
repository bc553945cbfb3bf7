/* tools/iobench/iobench-jobfile.c -- rf-iobench --job FILE: an experiment as a file, in a subset
 * of fio's job-file format:
 *
 *   ; a comment (or #)
 *   [global]
 *   filename=/var/tmp/data
 *   bs=4k
 *   direct=1
 *   [randread-qd64]
 *   rw=randread
 *   iodepth=64
 *
 * Each section other than [global] is one job: the global keys, then its own (which
 * win). Keys are fio's names where fio has the option (filename, rw, bs, iodepth, size,
 * runtime, time_based, numjobs, rwmixread, norandommap, fsync, fdatasync, end_fsync,
 * verify, random_distribution, rate, rate_iops, direct, fixedbufs, log_avg_msec,
 * bsrange, bssplit, nrfiles, hipri, stonewall) or rf-iobench's own option names
 * (batch, force, log_prefix, ...), '-' and '_' alike; filename and file are one.
 * A key this file does not know, a value on a flag that takes none, or a line that is
 * not a section, key=value or comment is an error naming the file and line. Jobs run
 * at the same time, as fio's do, each in its own process of this program, unless a
 * job says stonewall=1 (or wait_for_previous=1): it starts when every job before it
 * has ended. filename=a:b is two files (fio's list); bsrange and bssplit are --bs's
 * forms. Where the file gives no iodepth or bs, fio's defaults apply (1 and 4k; on
 * the command line both are required). Reports come out in the file's order; with
 * --json one object
 * {"jobfile", "jobs": [...]}. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cli.h"
#include "iobench.h"
#include "iobench-jobparse.h"

/* Read the file into sections ([global] first, if any). Every error names the line. */
static struct section *parse(const char *path, unsigned *nsec)
{
	/* a FIFO would block fopen, a directory read as an empty file: a regular file only */
	char why[4200], err[1400];
	int fd = rf_cli_open(path, O_RDONLY, 0, 0, NULL, why, sizeof(why));
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (fd < 0)
		die(1, "--job %s", why);
	if (!f)
		die(1, "--job %s: cannot open: %s", path, strerror(errno));
	struct jp_file jf;
	int ret = jp_parse(f, path, &jf, err, sizeof(err));
	fclose(f);
	if (ret < 0)
		die(1, "%s", err);
	*nsec = jf.n;
	return jf.secs;
}

/* A flag (stonewall, ...) set to 1 in the job's section, or in [global] and not unset
 * by the job. */
/* fio's precedence of the keys that give --bs: bssplit 3, bsrange 2, bs 1; else 0. */
static int bs_rank(const char *key)
{
	if (!strcmp(key, "bssplit"))
		return 3;
	if (!strcmp(key, "bsrange") || !strcmp(key, "blocksize_range"))
		return 2;
	return !strcmp(key, "bs") || !strcmp(key, "blocksize");
}

static int flag_set(const struct section *g, const struct section *s, const char *key)
{
	const char *v = NULL;
	const struct section *both[2] = { g, s };
	for (unsigned b = 0; b < 2; b++)
		for (unsigned i = 0; both[b] && i < both[b]->n; i++)
			if (!strcmp(both[b]->kv[i].key, key))
				v = both[b]->kv[i].val;
	return v && !strcmp(v, "1");
}

/* The value a job passes for option opt (the last key of that option, the job's
 * section after [global]), or NULL; *line is its line. */
static const char *opt_value(const struct section *g, const struct section *s, const char *opt,
			     int *line)
{
	const struct section *both[2] = { g, s };
	const char *v = NULL;
	for (unsigned b = 0; b < 2; b++)
		for (unsigned i = 0; both[b] && i < both[b]->n; i++) {
			int k = lookup(both[b]->kv[i].key);
			if (keymap[k].opt && !strcmp(keymap[k].opt, opt)) {
				v = both[b]->kv[i].val;
				*line = both[b]->kv[i].line;
			}
		}
	return v;
}

/* Jobs that log (log_avg_msec) write PREFIX.job0.csv, ... with their log_prefix, or
 * their section's name: two with the same would write one file, together or one over
 * the other's; one whose log is the job file would overwrite it. Refused before any
 * job starts, naming the sections. */
static void check_log_prefixes(const char *path, const struct section *g,
			       const struct section **jobs, unsigned njobs)
{
	for (unsigned a = 0; a < njobs; a++) {
		int la = jobs[a]->line, lb;
		if (!opt_value(g, jobs[a], "--log-interval", &lb))
			continue;
		const char *pa = opt_value(g, jobs[a], "--log-prefix", &la);
		char own[700];
		snprintf(own, sizeof(own), "%s.job0.csv", pa ? pa : jobs[a]->name);
		if (rf_cli_same_file(own, path)) /* it was overwritten with the log */
			die(1, "--job %s: line %d: [%s] logs to %s, the job file itself: expected "
			    "another log_prefix", path, la, jobs[a]->name, own);
		for (unsigned b = 0; b < a; b++) {
			lb = jobs[b]->line;
			int unused;
			if (!opt_value(g, jobs[b], "--log-interval", &unused))
				continue;
			const char *pb = opt_value(g, jobs[b], "--log-prefix", &lb);
			char ca[700], cb[700];
			snprintf(ca, sizeof(ca), "%s.job0.csv", pa ? pa : jobs[a]->name);
			snprintf(cb, sizeof(cb), "%s.job0.csv", pb ? pb : jobs[b]->name);
			if (rf_cli_same_file(ca, cb))
				die(1,
				    "--job %s: line %d: [%s] logs to %s, as [%s] does (line %d): "
				    "expected a log_prefix of its own",
				    path, la, jobs[a]->name, ca, jobs[b]->name, lb);
		}
	}
}

/* The command line of one job: global keys, then the section's (a later key wins:
 * each is passed once, its last value). */
static char **job_argv(const char *self, const struct section *g, const struct section *s,
		       int json)
{
	size_t extra = 0; /* filename=a:b:c -> one --file each (fio's list) */
	const struct section *both[2] = { g, s };
	for (unsigned b = 0; b < 2; b++)
		for (unsigned i = 0; both[b] && i < both[b]->n; i++)
			for (const char *c = both[b]->kv[i].val; *c; c++)
				extra += *c == ':';
	/* the arguments, NULL, then the lists split here (freed by free_argv), NULL */
	char **av = calloc(2 * (g ? g->n : 0) + 2 * s->n + 3 * extra + 14, sizeof(*av));
	char *owned[4];
	unsigned nowned = 0;
	if (!av)
		die(1, "out of memory");
	unsigned n = 0;
	int has_qd = 0, has_bs = 0, has_prefix = 0; /* given anywhere, overridden or not */
	av[n++] = (char *)self;
	for (unsigned b = 0; b < 2; b++)
		for (unsigned i = 0; both[b] && i < both[b]->n; i++) {
			const struct kv *e = &both[b]->kv[i];
			int k = lookup(e->key);
			const char *o = keymap[k].opt;
			has_qd |= o && !strcmp(o, "--qd");
			has_bs |= o && !strcmp(o, "--bs");
			has_prefix |= o && !strcmp(o, "--log-prefix");
			int later = 0; /* overridden later (in this section or the job's), by the
					* key or another name of its option (filename, file)? */
			for (unsigned b2 = b; b2 < 2 && !later; b2++)
				for (unsigned i2 = b2 == b ? i + 1 : 0; both[b2] && i2 < both[b2]->n; i2++) {
					int k2 = lookup(both[b2]->kv[i2].key);
					if (k2 == k || (keymap[k].opt && keymap[k2].opt &&
							!strcmp(keymap[k].opt, keymap[k2].opt) &&
							bs_rank(keymap[k2].key) >= bs_rank(keymap[k].key)))
						later = 1;
				}
			/* fio: bssplit over bsrange over bs, wherever each is given */
			for (unsigned b2 = 0; b2 < 2 && !later && bs_rank(keymap[k].key); b2++)
				for (unsigned i2 = 0; both[b2] && i2 < both[b2]->n; i2++)
					if (bs_rank(both[b2]->kv[i2].key) > bs_rank(keymap[k].key))
						later = 1;
			if (later || !keymap[k].opt)
				continue;
			if (keymap[k].flag) {
				if (!strcmp(e->val, "1"))
					av[n++] = (char *)keymap[k].opt;
				continue;
			}
			if (!strcmp(keymap[k].opt, "--file") && strchr(e->val, ':')) {
				char *list = strdup(e->val), *save = NULL;
				if (!list)
					die(1, "out of memory");
				owned[nowned++] = list; /* at most filename and file, global and job's */
				for (char *t = strtok_r(list, ":", &save); t; t = strtok_r(NULL, ":", &save)) {
					av[n++] = "--file";
					av[n++] = t;
				}
				continue;
			}
			av[n++] = (char *)keymap[k].opt;
			av[n++] = (char *)e->val;
		}
	/* fio's defaults where the file gives none: iodepth 1, bs 4k (the command line
	 * asks for both; a job file written for fio often leaves them out) */
	if (!has_qd) {
		av[n++] = "--qd";
		av[n++] = "1";
	}
	if (!has_bs) {
		av[n++] = "--bs";
		av[n++] = "4k";
	}
	/* each section's logs under its own name unless the file names a prefix */
	if (!has_prefix) {
		av[n++] = "--log-prefix";
		av[n++] = (char *)s->name;
	}
	if (json)
		av[n++] = "--json";
	av[n++] = NULL;
	for (unsigned i = 0; i < nowned; i++)
		av[n++] = owned[i];
	av[n] = NULL;
	return av;
}

static void free_argv(char **av)
{
	char **p = av;
	while (*p)
		p++;
	for (p++; *p; p++)
		free(*p);
	free(av);
}

/* A job's process: its stdout, gathered while it runs. */
struct child {
	pid_t pid;
	int fd, status;
	char *out;
	size_t len, cap;
};

/* What the job's process says an option came from when it refuses one (die() in
 * rf-iobench.c reads it): "FILE\n[SECTION]\n" then one "OPTION\tKEY\tLINE\n" per key
 * passed, the last value of each (a later one wins, as in job_argv). */
static char *job_context(const char *path, const struct section *g, const struct section *s)
{
	const struct section *both[2] = { g, s };
	size_t cap = strlen(path) + strlen(s->name) + 8, len = 0;
	for (unsigned b = 0; b < 2; b++)
		for (unsigned i = 0; both[b] && i < both[b]->n; i++)
			cap += 64 + 64 + 16;
	char *ctx = malloc(cap);
	if (!ctx)
		die(1, "out of memory");
	len += (size_t)snprintf(ctx + len, cap - len, "%s\n[%s]\n", path, s->name);
	for (unsigned b = 0; b < 2; b++)
		for (unsigned i = 0; both[b] && i < both[b]->n; i++) {
			const struct kv *e = &both[b]->kv[i];
			int k = lookup(e->key);
			if (keymap[k].opt)
				len += (size_t)snprintf(ctx + len, cap - len, "%s\t%s\t%d\n",
							keymap[k].opt, e->key, e->line);
		}
	return ctx;
}

static void start(struct child *c, char **av, const char *path, const char *ctx)
{
	int pfd[2];
	pid_t parent = getpid();
	if (pipe2(pfd, O_CLOEXEC) < 0)
		die(1, "--job %s: cannot make a pipe: %s", path, strerror(errno));
	c->pid = fork();
	if (c->pid < 0)
		die(1, "--job %s: cannot fork: %s", path, strerror(errno));
	if (c->pid == 0) {
		/* the job ends with the file's process, however that ends (a die() of the
		 * parent, a kill): SIGTERM runs its handler, which removes what it made. Its
		 * default action first: a SIGTERM the caller had ignored would leave the job
		 * running orphaned (a job is this process's own worker, not the caller's) */
		signal(SIGTERM, SIG_DFL);
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
			_exit(1);
		dup2(pfd[1], STDOUT_FILENO);
		setenv("RF_IOBENCH_JOB", ctx, 1);
		execv("/proc/self/exe", av);
		_exit(127);
	}
	close(pfd[1]);
	c->fd = pfd[0];
}

/* Read every running job's output until each closes it, then reap them. */
static void gather(struct child *c, unsigned n)
{
	struct pollfd *p = calloc(n, sizeof(*p));
	if (!p)
		die(1, "out of memory");
	unsigned open_ = n;
	for (unsigned i = 0; i < n; i++)
		p[i] = (struct pollfd){ .fd = c[i].fd, .events = POLLIN };
	while (open_) {
		if (poll(p, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			die(1, "--job: poll: %s", strerror(errno));
		}
		for (unsigned i = 0; i < n; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			if (c[i].len + 4096 > c[i].cap) {
				c[i].cap = c[i].cap ? 2 * c[i].cap : 65536;
				if (!(c[i].out = realloc(c[i].out, c[i].cap)))
					die(1, "out of memory");
			}
			ssize_t got = read(p[i].fd, c[i].out + c[i].len, c[i].cap - c[i].len);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				close(p[i].fd);
				p[i].fd = -1;
				open_--;
				continue;
			}
			c[i].len += (size_t)got;
		}
	}
	free(p);
	for (unsigned i = 0; i < n; i++) {
		int st = 0;
		pid_t got;
		while ((got = waitpid(c[i].pid, &st, 0)) < 0 && errno == EINTR)
			;
		/* the job said why, in one line */
		c[i].status = got < 0 ? 1 : WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
}

int iob_jobfile_run(const char *path, int json)
{
	unsigned nsec;
	struct section *secs = parse(path, &nsec);
	const struct section *g = NULL;
	unsigned njobs = 0;
	for (unsigned i = 0; i < nsec; i++) {
		if (!strcmp(secs[i].name, "global")) {
			if (i)
				die(1, "--job %s: line %d: [global] must come first", path, secs[i].line);
			g = &secs[i];
		} else {
			njobs++;
		}
	}
	if (!njobs)
		die(1, "--job %s: no job section (only [global]?)", path);
	const struct section **jobs = calloc(njobs, sizeof(*jobs));
	struct child *kids = calloc(njobs, sizeof(*kids));
	char ***avs = calloc(njobs, sizeof(*avs));
	if (!jobs || !kids || !avs)
		die(1, "out of memory");
	for (unsigned i = 0, k = 0; i < nsec; i++)
		if (&secs[i] != g)
			jobs[k++] = &secs[i];
	check_log_prefixes(path, g, jobs, njobs);
	if (json) {
		printf("{\"jobfile\": ");
		iob_json_str(path);
		printf(", \"jobs\": [");
	}
	fflush(stdout);
	/* Jobs run together, as fio's do; a job with stonewall=1 (wait_for_previous) starts
	 * once every job before it has ended, and the ones after it wait with it. Each
	 * job's report comes out in the file's order. A failed group ends the file. */
	int status = 0;
	for (unsigned first = 0; first < njobs && !status;) {
		unsigned end = first + 1;
		while (end < njobs && !flag_set(g, jobs[end], "stonewall") &&
		       !flag_set(g, jobs[end], "wait_for_previous"))
			end++;
		for (unsigned i = first; i < end; i++) {
			int ln;
			/* fio's runtime without time_based caps one pass; rf-iobench's is a
			 * time-based run that wraps around: the same file must not mean 25
			 * passes here and one there */
			if (opt_value(g, jobs[i], "--runtime", &ln) && !flag_set(g, jobs[i], "time_based"))
				die(1, "--job %s: line %d: [%s]: runtime without time_based: fio runs "
				    "one pass, stopped at runtime if sooner; rf-iobench's runtime is "
				    "time-based only: add time_based=1, or drop runtime", path, ln,
				    jobs[i]->name);
			char *ctx = job_context(path, g, jobs[i]);
			avs[i] = job_argv("/proc/self/exe", g, jobs[i], json);
			start(&kids[i], avs[i], path, ctx);
			free(ctx);
		}
		gather(kids + first, end - first);
		for (unsigned i = first; i < end; i++) {
			if (!json)
				printf("[%s]\n", jobs[i]->name);
			else if (i)
				printf(", ");
			if (kids[i].status && json) { /* keep the object whole: its place says it failed */
				printf("{\"job\": ");
				iob_json_str(jobs[i]->name);
				printf(", \"failed\": true, \"exit\": %d}", kids[i].status);
			}
			else
				fwrite(kids[i].out, 1, kids[i].len, stdout);
			if (kids[i].status && !status)
				status = kids[i].status;
			free(kids[i].out);
			free_argv(avs[i]);
		}
		fflush(stdout);
		first = end;
	}
	if (json)
		printf("]}\n");
	for (unsigned i = 0; i < nsec; i++)
		free(secs[i].kv);
	free(secs);
	free(jobs);
	free(kids);
	free(avs);
	return status;
}
