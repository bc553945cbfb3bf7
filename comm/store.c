/* comm/store.c -- the launch without a host transport: RANK / WORLD_SIZE / LOCAL_RANK
 * from the environment, and rank 0's blob (a device transport's id) to every rank
 * through a directory.
 *
 * The files, each one text line (id: one more per rank), written whole under a
 * temporary name and renamed into place, so a reader sees all of a file or none:
 *   join.R   ringflow-store 1 join rank=R size=P nonce=N pid=PID host=HOST
 *   id       ringflow-store 1 id size=P gen=G blob=HEX, then P lines nonce=N
 *   ack.R    ringflow-store 1 ack rank=R nonce=N gen=G
 * N is a random 64-bit nonce per process, G rank 0's. A rank takes only an id that
 * names its own nonce, and rank 0 only acks that name its gen: a previous run's files
 * (a crash leaves them) are never mistaken for this run's, and rank 0 rewrites id
 * whenever a join file changes under it. Polling, from 1 ms up to 50 ms: a rendezvous
 * happens once per run. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"
#include "rf-internal.h"
#include "store.h"

#define RF__STORE_MAGIC "ringflow-store 1"
#define RF__STORE_MAXBLOB 4096
#define RF__STORE_MAXSIZE 65536

/* ---- the environment contract ---- */

/* A decimal integer in [lo, hi] from the variable name; def where unset (def < 0:
 * required). */
static int rf__env_int(const char *name, long lo, long hi, long def, long *out)
{
	const char *v = getenv(name);
	char *end;

	if (!v) {
		if (def < 0)
			return rf__fail(-EINVAL, "environment launch: %s is not set (expected RANK "
					"and WORLD_SIZE, as torchrun and most launchers set them)", name);
		*out = def;
		return 0;
	}
	errno = 0;
	long x = strtol(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || x < lo || x > hi)
		return rf__fail(-EINVAL, "environment launch: %s=%s: expected an integer from %ld "
				"to %ld", name, v, lo, hi);
	*out = x;
	return 0;
}

int rf__launch_from_env(struct rf__launch *l)
{
	long size = 0, rank = 0, lrank = 0, lsize = 0;
	int ret;

	if ((ret = rf__env_int("WORLD_SIZE", 1, RF__STORE_MAXSIZE, -1, &size)) < 0 ||
	    (ret = rf__env_int("RANK", 0, size - 1, -1, &rank)) < 0 ||
	    (ret = rf__env_int("LOCAL_RANK", 0, size - 1, 0, &lrank)) < 0 ||
	    (ret = rf__env_int("LOCAL_WORLD_SIZE", lrank + 1, size, lrank + 1, &lsize)) < 0)
		return ret;
	l->rank = (int)rank;
	l->size = (int)size;
	l->local_rank = (int)lrank;
	l->local_size = (int)lsize;
	return 0;
}

/* ---- files ---- */

struct rf__st {
	const char *dir;
	int rank, size;
	uint64_t nonce;
	char *err;
	size_t errlen;
};

static int rf__st_fail(struct rf__st *s, int code, const char *fmt, ...) RF__PRINTF(3, 4);
static int rf__st_fail(struct rf__st *s, int code, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(s->err, s->errlen, "store %s, rank %d of %d: ", s->dir, s->rank, s->size);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < s->errlen)
		vsnprintf(s->err + n, s->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return code;
}

/* The whole of dir/name (NUL-terminated, in a malloc'd buffer), or NULL where it is
 * missing or unreadable (*eno: the errno). */
static char *rf__st_read(const struct rf__st *s, const char *name, int *eno)
{
	char path[4096];
	struct stat sb;
	char *buf = NULL;
	size_t got = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", s->dir, name);
	*eno = 0;
	/* never blocking: a FIFO planted at the name would block open() past every
	 * deadline; anything but a regular file is as good as missing */
	int not_reg;
	if ((fd = rf__open_regular(path, O_RDONLY | O_NOFOLLOW, 0, &sb, &not_reg)) < 0) {
		*eno = -fd;
		return NULL;
	}
	if (sb.st_size > (off_t)(64 << 20))
		*eno = EFBIG;
	else if (!(buf = malloc((size_t)sb.st_size + 1)))
		*eno = ENOMEM;
	if (!buf) {
		close(fd);
		return NULL;
	}
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	buf[got] = 0;
	return buf;
}

/* dir/name, whole: written under a temporary name, then renamed into place (not
 * synced: the files live as long as one rendezvous). */
static int rf__st_write(struct rf__st *s, const char *name, const char *text, size_t len)
{
	char tmp[4096], path[4096];
	const char *step;
	int ret;

	snprintf(path, sizeof(path), "%s/%s", s->dir, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", s->dir, name, (int)getpid());
	if ((ret = rf__write_whole(path, tmp, text, len, 0, &step)) < 0)
		return rf__st_fail(s, -EIO, "cannot %s %s: %s", !strcmp(step, "rename") ?
				   "put in place" : step, !strcmp(step, "rename") ? path : tmp,
				   strerror(-ret));
	return 0;
}

/* join.R's nonce (0 where the file is missing, unreadable or of another size);
 * *other_size: the size it names where that differs. */
static uint64_t rf__st_join_nonce(const struct rf__st *s, int r, int *other_size,
				  char *who, size_t wholen)
{
	char name[32], host[256] = "";
	int eno, rr = -1, sz = -1, pid = 0;
	unsigned long long n = 0;
	char *t;

	snprintf(name, sizeof(name), "join.%d", r);
	if (!(t = rf__st_read(s, name, &eno)))
		return 0;
	if (sscanf(t, RF__STORE_MAGIC " join rank=%d size=%d nonce=%llx pid=%d host=%255s", &rr,
		   &sz, &n, &pid, host) < 3 || rr != r)
		n = 0;
	else if (sz != s->size) {
		if (other_size)
			*other_size = sz;
		n = 0;
	}
	if (who)
		snprintf(who, wholen, "pid %d on %s", pid, host[0] ? host : "?");
	free(t);
	return (uint64_t)n;
}

/* Still ours: a join file with another nonce is another live process with this rank
 * (a previous run's file is overwritten by ours before we look). */
static int rf__st_check_mine(struct rf__st *s)
{
	char who[300] = "", name[32];
	uint64_t n = rf__st_join_nonce(s, s->rank, NULL, who, sizeof(who));

	snprintf(name, sizeof(name), "join.%d", s->rank);
	if (n == s->nonce)
		return 0;
	if (!who[0])
		return rf__st_fail(s, -EEXIST, "%s/%s disappeared while this rank waited: another "
				   "job using the same directory? (give each job its own)", s->dir,
				   name);
	return rf__st_fail(s, -EEXIST, "%s/%s was replaced by another process (%s): two "
			   "processes have RANK=%d", s->dir, name, who, s->rank);
}

static int rf__st_join(struct rf__st *s)
{
	char text[512], host[256] = "?", name[32];

	gethostname(host, sizeof(host) - 1);
	host[strcspn(host, " \t\n")] = 0;
	snprintf(name, sizeof(name), "join.%d", s->rank);
	int n = snprintf(text, sizeof(text), RF__STORE_MAGIC " join rank=%d size=%d nonce=%016"
			 PRIx64 " pid=%d host=%s\n", s->rank, s->size, s->nonce, (int)getpid(), host);
	return rf__st_write(s, name, text, (size_t)n);
}

static int64_t rf__st_now_ms(void)
{
	return (int64_t)(rf_now_ns() / 1000000);
}

static void rf__st_sleep(int *ms)
{
	struct timespec ts = { 0, (long)*ms * 1000000 };

	nanosleep(&ts, NULL);
	*ms = *ms * 2 < 50 ? *ms * 2 : 50;
}

/* "1, 3, 4" (at most 8, then "..."): the ranks with bad[r] set */
static void rf__st_list(const unsigned char *bad, int size, char *out, size_t len)
{
	size_t o = 0;
	int k = 0;

	out[0] = 0;
	for (int r = 0; r < size && o < len; r++) {
		if (!bad[r])
			continue;
		if (k++ == 8) {
			snprintf(out + o, len - o, ", ...");
			return;
		}
		int n = snprintf(out + o, len - o, "%s%d", o ? ", " : "", r);
		o += n > 0 ? (size_t)n : 0;
	}
}

/* Rank r's join file names a process of this host that no longer runs (*pid, host
 * filled): it failed or stopped after it joined. Only after the grace: before it, the
 * file may be a stale one of an earlier run, about to be replaced by this run's. */
static int rf__st_gone(struct rf__st *s, int r, int64_t since_ms, int64_t grace_ms, int *pid,
		       char *host)
{
	char name[32], me[256] = "?";
	unsigned long long n;
	int eno, rr = -1, sz = -1, ok;
	char *t;

	snprintf(name, sizeof(name), "join.%d", r);
	if (rf__st_now_ms() - since_ms < grace_ms || !(t = rf__st_read(s, name, &eno)))
		return 0;
	ok = sscanf(t, RF__STORE_MAGIC " join rank=%d size=%d nonce=%llx pid=%d host=%255s",
		    &rr, &sz, &n, pid, host) == 5 && rr == r && sz == s->size && *pid > 0;
	free(t);
	gethostname(me, sizeof(me) - 1);
	me[strcspn(me, " \t\n")] = 0;
	return ok && strcmp(host, me) == 0 && kill(*pid, 0) < 0 && errno == ESRCH;
}

static int64_t rf__st_grace(double timeout_s)
{
	int64_t g = (int64_t)(timeout_s * 250);

	return g < 1000 ? 1000 : g > 10000 ? 10000 : g;
}

/* ---- rank 0 ---- */

static int rf__st_write_id(struct rf__st *s, const uint64_t *nonces, const unsigned char *blob,
			   size_t len)
{
	size_t cap = 128 + 2 * len + (size_t)s->size * 24, o;
	char *text = malloc(cap);
	int ret;

	if (!text)
		return rf__st_fail(s, -ENOMEM, "out of memory");
	o = (size_t)snprintf(text, cap, RF__STORE_MAGIC " id size=%d gen=%016" PRIx64 " blob=",
			     s->size, s->nonce);
	for (size_t i = 0; i < len; i++)
		o += (size_t)snprintf(text + o, cap - o, "%02x", blob[i]);
	text[o++] = '\n';
	for (int r = 0; r < s->size; r++)
		o += (size_t)snprintf(text + o, cap - o, "nonce=%016" PRIx64 "\n", nonces[r]);
	ret = rf__st_write(s, "id", text, o);
	free(text);
	return ret;
}

static int rf__st_acked(const struct rf__st *s, int r, uint64_t nonce)
{
	char name[32];
	unsigned long long n = 0, g = 0;
	int eno, rr = -1, ok;
	char *t;

	snprintf(name, sizeof(name), "ack.%d", r);
	if (!(t = rf__st_read(s, name, &eno)))
		return 0;
	ok = sscanf(t, RF__STORE_MAGIC " ack rank=%d nonce=%llx gen=%llx", &rr, &n, &g) == 3 &&
	     rr == r && n == nonce && g == s->nonce;
	free(t);
	return ok;
}

static void rf__st_cleanup(struct rf__st *s)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/id", s->dir);
	unlink(path);
	for (int r = 0; r < s->size; r++) {
		snprintf(path, sizeof(path), "%s/ack.%d", s->dir, r);
		unlink(path);
		snprintf(path, sizeof(path), "%s/join.%d", s->dir, r);
		unlink(path);
	}
}

static int rf__st_rank0(struct rf__st *s, const unsigned char *blob, size_t len,
			int64_t deadline, double timeout_s)
{
	uint64_t *now = calloc((size_t)s->size, 8), *written = calloc((size_t)s->size, 8);
	unsigned char *missing = calloc((size_t)s->size, 1), *acked = calloc((size_t)s->size, 1);
	int have_id = 0, ms = 1, ret = 0, other = -1, other_rank = -1, pid = 0;
	int64_t t0 = rf__st_now_ms(), grace = rf__st_grace(timeout_s), last = 0;
	char host[256] = "";

	if (!now || !written || !missing || !acked) {
		ret = rf__st_fail(s, -ENOMEM, "out of memory");
		goto out;
	}
	now[0] = s->nonce;
	for (;;) {
		int all = 1;
		if ((ret = rf__st_check_mine(s)) < 0)
			goto out;
		for (int r = 1; r < s->size; r++) {
			int sz = -1;
			now[r] = rf__st_join_nonce(s, r, &sz, NULL, 0);
			missing[r] = !now[r];
			all &= !missing[r];
			if (sz >= 0) {
				other = sz;
				other_rank = r;
			}
		}
		/* a join file that changed after its rank took the id (its ack names the old
		 * nonce and our gen), whether or not we had seen that ack yet */
		for (int r = 1; have_id && r < s->size; r++)
			if (now[r] != written[r] && !acked[r] && rf__st_acked(s, r, written[r]))
				acked[r] = 1;
		for (int r = 1; r < s->size; r++)
			if (acked[r] && now[r] != written[r]) {
				char who[300] = "";
				rf__st_join_nonce(s, r, NULL, who, sizeof(who));
				ret = rf__st_fail(s, -EEXIST, "%s/join.%d changed after rank %d took the "
						  "id (now %s): two processes have RANK=%d", s->dir,
						  r, r, who[0] ? who : "removed", r);
				goto out;
			}
		if (all && (!have_id || memcmp(now, written, (size_t)s->size * 8))) {
			if ((ret = rf__st_write_id(s, now, blob, len)) < 0)
				goto out;
			memcpy(written, now, (size_t)s->size * 8);
			have_id = 1;
		}
		if (have_id) {
			int all_acked = 1;
			for (int r = 1; r < s->size; r++) {
				acked[r] = acked[r] || rf__st_acked(s, r, written[r]);
				missing[r] = !acked[r];
				all_acked &= acked[r];
			}
			if (all_acked) {
				rf__st_cleanup(s);
				goto out;
			}
		}
		for (int r = 1; rf__st_now_ms() - last >= 250 && r < s->size; r++) {
			if (r == s->size - 1)
				last = rf__st_now_ms();
			if (!acked[r] && now[r] && rf__st_gone(s, r, t0, grace, &pid, host)) {
				ret = rf__st_fail(s, -EPIPE, "rank %d (pid %d on %s, its %s/join.%d) "
						  "has exited before taking the id: it failed or was "
						  "stopped after it joined (a file left by an earlier "
						  "run is taken for that after %.0f s)", r, pid, host,
						  s->dir, r, (double)grace / 1000);
				goto out;
			}
		}
		if (rf__st_now_ms() >= deadline) {
			char list[96], extra[160] = "";
			rf__st_list(missing, s->size, list, sizeof(list));
			if (other >= 0)
				snprintf(extra, sizeof(extra), " (%s/join.%d names WORLD_SIZE=%d, this "
					 "run has %d)", s->dir, other_rank, other, s->size);
			ret = rf__st_fail(s, -ETIMEDOUT, "%s within %g s: %s%s", have_id ?
					  "every rank joined, but some never took the id" :
					  "some ranks never joined (no join.RANK of this run)",
					  timeout_s, list, extra);
			goto out;
		}
		rf__st_sleep(&ms);
	}
out:
	free(now);
	free(written);
	free(missing);
	free(acked);
	return ret;
}

/* ---- ranks 1.. ---- */

static int rf__unhex(const char *h, unsigned char *out, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (unsigned char)v;
	}
	return h[2 * len] == '\n' ? 0 : -1;
}

/* 1: id is this run's and names our nonce (blob filled); 0: not (yet); <0: error. */
static int rf__st_take_id(struct rf__st *s, unsigned char *blob, size_t len, int *other_size)
{
	unsigned long long g = 0, n = 0;
	int eno, sz = -1, off = 0, ret = 0;
	char *t = rf__st_read(s, "id", &eno), *p;

	if (!t)
		return 0;
	if (sscanf(t, RF__STORE_MAGIC " id size=%d gen=%llx blob=%n", &sz, &g, &off) < 2 || !off)
		goto out;
	if (sz != s->size) {
		*other_size = sz;
		goto out;
	}
	p = t + off;
	if (strlen(p) < 2 * len + 1 || rf__unhex(p, blob, len) < 0)
		goto out;       /* not ours (another blob size): this run's id has ours */
	p += 2 * len + 1;
	for (int r = 0; r < s->rank; r++)
		if (!(p = strchr(p, '\n')) || !*++p)
			goto out;
	if (sscanf(p, "nonce=%llx", &n) != 1 || n != s->nonce)
		goto out;
	/* and from the rank 0 of now (a rank 0 left over from another run could have
	 * written our nonce too): its gen is join.0's nonce */
	if (rf__st_join_nonce(s, 0, NULL, NULL, 0) != (uint64_t)g)
		goto out;
	char text[160], name[32];
	snprintf(name, sizeof(name), "ack.%d", s->rank);
	int k = snprintf(text, sizeof(text), RF__STORE_MAGIC " ack rank=%d nonce=%016" PRIx64
			 " gen=%016llx\n", s->rank, s->nonce, g);
	ret = rf__st_write(s, name, text, (size_t)k);
	ret = ret < 0 ? ret : 1;
out:
	free(t);
	return ret;
}

/* What a rank past 0 can tell at its timeout: which ranks have not joined (rank 0
 * waits for them), or that all have and rank 0 wrote nothing. */
static int rf__st_rankn_timeout(struct rf__st *s, double timeout_s, int other)
{
	unsigned char *missing = calloc((size_t)s->size, 1);
	char list[96] = "", extra[128] = "";
	int n = 0;

	int zero = 0; /* rank 0 itself is missing: nothing waits for the others */

	for (int r = 0; missing && r < s->size; r++)
		n += missing[r] = r != s->rank && !rf__st_join_nonce(s, r, NULL, NULL, 0);
	if (missing)
		rf__st_list(missing, s->size, list, sizeof(list));
	zero = missing && missing[0];
	free(missing);
	if (other >= 0)
		snprintf(extra, sizeof(extra), " (the id there names WORLD_SIZE=%d, this rank has "
			 "%d)", other, s->size);
	if (zero)
		return rf__st_fail(s, -ETIMEDOUT, "no id for this run within %g s: rank 0 has not "
				   "joined (no join.0 of WORLD_SIZE=%d it could read; ranks missing: "
				   "%s)%s", timeout_s, s->size, list, extra);
	if (n)
		return rf__st_fail(s, -ETIMEDOUT, "no id for this run within %g s: ranks %s have not "
				   "joined (no join.RANK of WORLD_SIZE=%d), and rank 0 waits for "
				   "them%s", timeout_s, list, s->size, extra);
	return rf__st_fail(s, -ETIMEDOUT, "no id for this run within %g s, though every rank "
			   "has joined: has rank 0 failed or stopped?%s", timeout_s, extra);
}

static int rf__st_rankn(struct rf__st *s, unsigned char *blob, size_t len, int64_t deadline,
			double timeout_s)
{
	int64_t t0 = rf__st_now_ms(), grace = rf__st_grace(timeout_s), last = 0;
	int ms = 1, ret, other = -1, pid = 0;
	char host[256] = "";

	for (;;) {
		if ((ret = rf__st_check_mine(s)) < 0)
			return ret;
		if ((ret = rf__st_take_id(s, blob, len, &other)) != 0)
			return ret < 0 ? ret : 0;
		if (rf__st_now_ms() >= deadline)
			return rf__st_rankn_timeout(s, timeout_s, other);
		if (rf__st_now_ms() - last >= 250) { /* a few times a second is enough */
			last = rf__st_now_ms();
			if (rf__st_gone(s, 0, t0, grace, &pid, host))
				return rf__st_fail(s, -EPIPE, "rank 0 (pid %d on %s, its %s/join.0) "
						   "has exited without an id for this rank: it "
						   "failed or was stopped after it joined (a file "
						   "left by an earlier run is taken for that after "
						   "%.0f s: start the ranks together, or give each "
						   "job a fresh directory)", pid, host, s->dir,
						   (double)grace / 1000);
		}
		rf__st_sleep(&ms);
	}
}

int rf__store_exchange(const char *dir, int rank, int size, void *blob, size_t len,
		       double timeout_s, char *err, size_t errlen)
{
	struct rf__st s = { .dir = dir, .rank = rank, .size = size, .err = err, .errlen = errlen };
	int64_t deadline;
	int ret;

	if (!dir || !*dir || rank < 0 || size < 1 || size > RF__STORE_MAXSIZE || rank >= size ||
	    len > RF__STORE_MAXBLOB || !(timeout_s > 0))
		return rf__st_fail(&s, -EINVAL, "bad arguments (blob of %zu bytes, at most %d; "
				   "timeout %g s)", len, RF__STORE_MAXBLOB, timeout_s);
	if (size == 1)
		return 0;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return rf__st_fail(&s, -EIO, "cannot create the directory: %s", strerror(errno));
	while (!s.nonce)
		if (getrandom(&s.nonce, sizeof(s.nonce), 0) != (ssize_t)sizeof(s.nonce))
			s.nonce = (uint64_t)rf__st_now_ms() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	if (timeout_s > 1e9) /* ~31 years: the ms below must fit an int64_t (inf too) */
		timeout_s = 1e9;
	deadline = rf__st_now_ms() + (int64_t)(timeout_s * 1000);
	if ((ret = rf__st_join(&s)) < 0)
		return ret;
	return rank == 0 ? rf__st_rank0(&s, blob, len, deadline, timeout_s)
			 : rf__st_rankn(&s, blob, len, deadline, timeout_s);
}
