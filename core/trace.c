/* core/trace.c -- Chrome-trace JSON (the "Trace Event Format"; opens in Perfetto and
 * chrome://tracing): one track per stream, each op a complete event, each dependency
 * edge a flow. Edges are computed at push time from the variables' histories
 * (README.md). Recording costs nothing when no trace is on. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine-impl.h"
#include "rf-internal.h"

#define RF__MAX_READERS 256

/* The trace file, opened now so that a path that cannot take it fails the start (not
 * the end of a long run): a regular file or a character device (/dev/null); never a
 * FIFO, which would block, nor a directory. A regular file is written under a name of
 * its own beside it (*tmp) and renamed over path when the trace is whole: a run that
 * fails to write it (a full disk) leaves the file that was there, its mode kept. A
 * path that is a symbolic link or one of several hard links, or one whose directory
 * takes no new file (or no longer name), is written in place, as before. */
static int rf__trace_file(const char *path, char **tmp)
{
	static _Atomic unsigned seq;
	struct stat st, lst;
	int fd, have = stat(path, &st) == 0;
	int linked = have && lstat(path, &lst) == 0 && (S_ISLNK(lst.st_mode) || st.st_nlink > 1);

	*tmp = NULL;
	if (have && !S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
		return rf__fail(S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
				"trace %s: is %s, expected a regular file (or /dev/null)", path,
				rf__ftype(st.st_mode));
	if (!linked && (!have || S_ISREG(st.st_mode))) {
		size_t n = strlen(path) + 48;
		if (!(*tmp = malloc(n)))
			return rf__fail(-ENOMEM, "trace %s: out of memory", path);
		snprintf(*tmp, n, "%s.tmp.%d.%u", path, (int)getpid(), seq++);
		fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
			  0644);
		if (fd >= 0) {
			if (have)  /* the file it replaces keeps its mode */
				(void)fchmod(fd, st.st_mode & 07777);
			return fd;
		}
		int e = errno;
		free(*tmp);
		*tmp = NULL;
		if (e != EACCES && e != EPERM && e != EROFS && e != ENAMETOOLONG)
			return rf__fail(-e, "trace %s: cannot create: %s", path, strerror(e));
	}
	fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
	if (fd < 0)
		return rf__fail(-errno, "trace %s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))) {
		close(fd);
		return rf__fail(-EINVAL, "trace %s: expected a regular file (or /dev/null)", path);
	}
	return fd;
}

int rf__trace_open(struct rf_engine *e, const char *path)
{
	struct rf__trace *t;
	struct rf_stream *s;
	char *tmp;
	int fd = rf__trace_file(path, &tmp);

	if (fd < 0)
		return fd;
	t = calloc(1, sizeof(*t));
	if (!t || !(t->path = strdup(path))) {
		free(t);
		close(fd);
		if (tmp)
			unlink(tmp);
		free(tmp);
		return rf__fail(-ENOMEM, "trace %s: out of memory", path);
	}
	t->tmp = tmp;
	t->fd = fd;
	t->t_origin = rf_now_ns();
	e->trace = t;
	for (s = e->streams; s; s = s->next_registered)
		rf__trace_track(e, s);
	return 0;
}

void rf__trace_track(struct rf_engine *e, struct rf_stream *s)
{
	struct rf__trace *t = e->trace;
	size_t i;

	if (!t)
		return;
	for (i = 0; i < t->ntracks; i++)
		if (t->tracks[i].tid == s->id)
			return;
	if (t->ntracks == t->cap_tracks) {
		size_t nc = t->cap_tracks ? t->cap_tracks * 2 : 16;
		struct rf__trace_track *n = realloc(t->tracks, nc * sizeof(*n));
		if (!n)
			return;
		t->tracks = n;
		t->cap_tracks = nc;
	}
	t->tracks[t->ntracks].tid = s->id;
	t->tracks[t->ntracks].name = strdup(s->name ? s->name : "stream");
	if (t->tracks[t->ntracks].name)
		t->ntracks++;
}

static int rf__deps_add(struct rf_op *op, uint64_t uid, uint32_t *cap)
{
	uint32_t i;

	if (!uid)
		return 0;
	for (i = 0; i < op->ndeps; i++)
		if (op->deps[i] == uid)
			return 0;
	if (op->ndeps == *cap) {
		uint32_t nc = *cap ? *cap * 2 : 8;
		uint64_t *n = realloc(op->deps, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		op->deps = n;
		*cap = nc;
	}
	op->deps[op->ndeps++] = uid;
	return 0;
}

void rf__trace_deps_at_push(struct rf_engine *e, struct rf_op *op)
{
	uint32_t i, j, cap = 0;

	(void)e;
	for (i = 0; i < op->nent; i++) {
		struct rf_var *v = op->ent[i].var;

		rf__deps_add(op, v->last_writer, &cap);
		if (op->ent[i].write) {
			for (j = 0; j < v->nreaders; j++)
				rf__deps_add(op, v->readers[j], &cap);
			v->nreaders = 0;
			v->last_writer = op->uid;
		} else if (op->kind->traced) {
			if (v->nreaders == v->cap_readers && v->cap_readers < RF__MAX_READERS) {
				uint32_t nc = v->cap_readers ? v->cap_readers * 2 : 8;
				uint64_t *n = realloc(v->readers, nc * sizeof(*n));
				if (n) {
					v->readers = n;
					v->cap_readers = nc;
				}
			}
			if (v->nreaders < v->cap_readers)
				v->readers[v->nreaders++] = op->uid;
		}
	}
}

void rf__trace_var_free(struct rf_var *v)
{
	free(v->readers);
	v->readers = NULL;
}

/* A new event slot, or NULL when memory runs out (the trace is then truncated
 * rather than failing the op). */
static struct rf__trace_ev *rf__trace_ev_new(struct rf__trace *t)
{
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 4096;
		struct rf__trace_ev *n = realloc(t->ev, nc * sizeof(*n));
		if (!n)
			return NULL;
		t->ev = n;
		t->cap = nc;
	}
	memset(&t->ev[t->n], 0, sizeof(t->ev[t->n]));
	return &t->ev[t->n++];
}

void rf__trace_record(struct rf_engine *e, struct rf_op *op)
{
	struct rf__trace *t = e->trace;
	struct rf__trace_ev *ev;

	if (!op->kind->traced)
		return;
	ev = rf__trace_ev_new(t);
	if (!ev)
		return;
	ev->name = op->name;
	ev->tid = op->stream->id;
	ev->t0 = op->t0 ? op->t0 : rf_now_ns();
	ev->t1 = op->t1 >= ev->t0 ? op->t1 : ev->t0;
	ev->uid = op->uid;
	ev->ndeps = op->ndeps;
	ev->deps = op->deps; /* ownership moves to the trace */
	op->deps = NULL;
	op->ndeps = 0;
}

void rf_engine_trace_mark(struct rf_engine *e, struct rf_stream *s, const char *name,
			  uint64_t t0_ns, uint64_t t1_ns)
{
	struct rf__trace *t;
	struct rf__trace_ev *ev;

	if (!e || rf__gettid() != e->owner_tid || !(t = e->trace)) /* the reactor thread's */
		return;
	ev = rf__trace_ev_new(t);
	if (!ev)
		return;
	ev->own_name = strdup(name ? name : "mark"); /* the caller's may not outlive the call */
	ev->name = ev->own_name ? ev->own_name : "mark";
	ev->tid = s ? s->id : 0;
	ev->t0 = t0_ns;
	ev->t1 = t1_ns < t0_ns ? t0_ns : t1_ns;
}

static void rf__json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static int rf__cmp_uid(const void *a, const void *b)
{
	const struct rf__trace_ev *x = a, *y = b;

	return x->uid < y->uid ? -1 : x->uid > y->uid;
}

/* Find the event of op uid (events sorted by uid; marks have uid 0). */
static const struct rf__trace_ev *rf__find(const struct rf__trace *t, uint64_t uid)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (t->ev[mid].uid < uid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->n && t->ev[lo].uid == uid ? &t->ev[lo] : NULL;
}

/* The JSON writer: events separated by ",\n". */
struct rf__jw {
	FILE *f;
	int first;
};

static void rf__jw_sep(struct rf__jw *w)
{
	if (!w->first)
		fputs(",\n", w->f);
	w->first = 0;
}

/* Process and track names, tracks sorted by id. */
static void rf__trace_write_meta(struct rf__jw *w, const struct rf__trace *t)
{
	FILE *f = w->f;
	size_t i;

	rf__jw_sep(w);
	fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"ringflow\"}}");
	rf__jw_sep(w);
	fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"thread_name\",\"args\":{\"name\":\"inline (reactor)\"}}");
	rf__jw_sep(w);
	fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":1,\"name\":\"thread_name\",\"args\":{\"name\":\"async (ring I/O)\"}}");
	rf__jw_sep(w);
	fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":2,\"name\":\"thread_name\",\"args\":{\"name\":\"graph launches\"}}");
	for (i = 0; i < t->ntracks; i++) {
		int tid = t->tracks[i].tid;
		rf__jw_sep(w);
		fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":", tid);
		rf__json_str(f, t->tracks[i].name);
		fputs("}}", f);
		rf__jw_sep(w);
		fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}}",
			tid, tid);
	}
}

/* An edge from producer p (at its end) to ev (at its start, ts): a flow pair. */
static void rf__trace_write_flow(struct rf__jw *w, const struct rf__trace *t,
				 const struct rf__trace_ev *p, const struct rf__trace_ev *ev,
				 double ts, uint64_t flow)
{
	double pts = p->t1 >= t->t_origin ? (double)(p->t1 - t->t_origin) / 1e3 : 0;

	if (pts > ts)
		pts = ts; /* chained on a stream: started before the producer ended */
	rf__jw_sep(w);
	fprintf(w->f, "{\"ph\":\"s\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"id\":%llu,\"cat\":\"dep\",\"name\":\"dep\"}",
		p->tid, pts, (unsigned long long)flow);
	rf__jw_sep(w);
	fprintf(w->f, "{\"ph\":\"f\",\"bp\":\"e\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"id\":%llu,\"cat\":\"dep\",\"name\":\"dep\"}",
		ev->tid, ts, (unsigned long long)flow);
}

/* Each op a complete event, followed by the flows of its edges. */
static void rf__trace_write_events(struct rf__jw *w, const struct rf__trace *t)
{
	uint64_t flow = 0;
	size_t i;

	for (i = 0; i < t->n; i++) {
		const struct rf__trace_ev *ev = &t->ev[i];
		double ts = (double)(ev->t0 - t->t_origin) / 1e3;
		double dur = (double)(ev->t1 - ev->t0) / 1e3;
		uint32_t j;

		if (ev->t0 < t->t_origin)
			ts = 0;
		rf__jw_sep(w);
		fputs("{\"ph\":\"X\",\"pid\":1,\"name\":", w->f);
		rf__json_str(w->f, ev->name);
		fprintf(w->f, ",\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"op\":%llu}}", ev->tid, ts,
			dur, (unsigned long long)ev->uid);
		for (j = 0; j < ev->ndeps; j++) {
			const struct rf__trace_ev *p = rf__find(t, ev->deps[j]);
			if (p)
				rf__trace_write_flow(w, t, p, ev, ts, ++flow);
		}
	}
}

static int rf__trace_write(struct rf__trace *t)
{
	struct rf__jw w = { NULL, 1 };
	int ret;

	int fl = fcntl(t->fd, F_GETFL);

	if (fl >= 0)
		(void)fcntl(t->fd, F_SETFL, fl & ~O_NONBLOCK);
	/* written in place: the whole file is this trace (another writer of the same
	 * path may have written it since; the last to stop wins, whole) */
	if (!t->tmp && ftruncate(t->fd, 0) == 0)
		(void)lseek(t->fd, 0, SEEK_SET);
	w.f = fdopen(t->fd, "w");
	if (!w.f) {
		ret = rf__fail(-errno, "cannot write trace %s: %s", t->path, strerror(errno));
		close(t->fd);
		if (t->tmp)
			unlink(t->tmp);
		return ret;
	}
	if (t->n) /* none: t->ev may be NULL, which qsort may not be given */
		qsort(t->ev, t->n, sizeof(*t->ev), rf__cmp_uid);
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", w.f);
	rf__trace_write_meta(&w, t);
	rf__trace_write_events(&w, t);
	fputs("\n]}\n", w.f);
	ret = fflush(w.f) != 0 ? -errno : ferror(w.f) ? -EIO : 0;
	if (fclose(w.f) != 0 && !ret)
		ret = -errno;
	if (ret == 0 && t->tmp && rename(t->tmp, t->path) < 0)
		ret = -errno;
	if (ret < 0 && t->tmp) {   /* a full disk: the file there is left as it was */
		unlink(t->tmp);
		return rf__fail(ret, "cannot write trace %s: %s (%s)", t->path, strerror(-ret),
				access(t->path, F_OK) == 0 ? "the file there left as it was" :
				"nothing written there");
	}
	if (ret < 0)  /* written in place: it is cut short */
		ret = rf__fail(ret, "cannot write trace %s: %s", t->path, strerror(-ret));
	return ret;
}

static void rf__trace_free(struct rf__trace *t)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		free(t->ev[i].deps);
		free(t->ev[i].own_name);
	}
	for (i = 0; i < t->ntracks; i++)
		free(t->tracks[i].name);
	free(t->tracks);
	free(t->ev);
	free(t->path);
	free(t->tmp);
	free(t);
}

/* Write the file and stop recording. */
int rf__trace_close(struct rf_engine *e)
{
	struct rf__trace *t = e->trace;
	int ret;

	e->trace = NULL;
	ret = rf__trace_write(t);
	rf__trace_free(t);
	return ret;
}
