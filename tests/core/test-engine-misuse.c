/* test-engine-misuse: what an embedder can get wrong through the public API is refused
 * with -errno and a one-line rf_last_error() naming the call and the argument, and
 * nothing breaks afterwards (found by an outside audit; each case crashed, hung or
 * failed silently before):
 *  - an ordinary op (fn) on the async stream, which runs afn ops only (it jumped to a
 *    NULL afn), also as rf_var_destroy's stream;
 *  - a stream of another engine (ran there; use-after-free at the other's end), and a
 *    stream never registered;
 *  - a variable destroyed twice (the second while the first is queued);
 *  - a stream registered twice (a cycle: destroy looped for ever);
 *  - a push from an op running on a worker stream's thread (raced the reactor on
 *    every queue): refused with -EPERM;
 *  - rf_engine_destroy / rf_stream_destroy from inside an op, a done callback or a ring
 *    callback (freed the engine below its caller): refused, the engine goes on;
 *  - every bad descriptor leaves a message that names it (stale ones did before);
 *  - rf_engine_trace_mark with a name the caller frees right after (kept the pointer);
 *  - RF_TRACE / trace_path at a FIFO (hung at the end of the run), a directory or a
 *    missing directory (said nothing until the end): the engine is not created;
 *    /dev/full: the write error is returned by rf_engine_trace_stop;
 *  - push_io whose fd_from holds a failure: *result receives -EBADF; a malformed
 *    descriptor (readv without iovecs) is refused at the push, not later as a failed
 *    op poisoning its variables;
 *  - one op naming 40,000 variables, each twice (deduplicated in one pass, not n^2);
 *  - variables never destroyed are freed with the engine (LeakSanitizer would say so);
 *  - a push or a wait naming a variable whose rf_var_destroy is queued (used it after
 *    the deletion freed it): refused;
 *  - rf_worker_stream_create(_shared) from another thread (ran), and stream creation
 *    and trace start/stop from inside an op: refused (-EPERM, -EBUSY); rf_engine_may_wait
 *    says the same of a wait;
 *  - a NULL engine or variable (push, waits, rf_var_error, rf_var_name): -EINVAL.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "log.h"
#include "ring-ops.h"
#include "stream.h"
#include "../test-util.h"

static char dir[256];

/* ret must be want, and rf_last_error() must hold each needle (n2 may be NULL). */
static void refused(const char *what, int ret, int want, const char *n1, const char *n2)
{
	const char *m = rf_last_error();

	printf("  %-34s -> %d: %s\n", what, ret, m);
	if (ret != want || !strstr(m, n1) || (n2 && !strstr(m, n2))) {
		fprintf(stderr, "%s: got %d (want %d), message '%s' (want '%s'%s%s)\n", what, ret,
			want, m, n1, n2 ? ", " : "", n2 ? n2 : "");
		exit(1);
	}
}

/* a message no call of the test makes, so a stale one is caught */
static void seed_error(struct rf_engine *e)
{
	(void)rf_engine_trace_stop(e); /* "no trace is on" */
	CHECK(strstr(rf_last_error(), "no trace is on"));
}

static int inc(void *p)
{
	(*(int *)p)++;
	return 0;
}

static void stream_args(struct rf_ring *r)
{
	struct rf_engine *e, *e2;
	struct rf_stream *w2, *w;
	struct rf_var *v, *v2;
	struct rf_op_desc d = { 0 };
	int n = 0;

	CHECK_OK(rf_engine_create(&e, r, NULL));
	CHECK_OK(rf_engine_create(&e2, r, NULL));
	CHECK_OK(rf_var_create(e, "v", &v));
	CHECK_OK(rf_var_create(e2, "v2", &v2));
	CHECK_OK(rf_worker_stream_create(e2, "other's", 0, &w2));
	CHECK_OK(rf_worker_stream_create(e, "mine", 0, &w));

	seed_error(e);
	refused("fn op on the async stream", rf_engine_push_simple(e, inc, &n, NULL, 0, &v, 1,
		rf_engine_async_stream(e), "fn-on-async"), -EINVAL, "fn-on-async", "async stream");
	seed_error(e);
	refused("var_destroy on the async stream", rf_var_destroy(e, v, NULL, NULL,
		rf_engine_async_stream(e)), -EINVAL, "rf_var_destroy v", "async stream");
	seed_error(e);
	refused("stream of another engine", rf_engine_push_simple(e, inc, &n, NULL, 0, &v, 1, w2,
		"foreign"), -EINVAL, "foreign", "not registered with this engine");
	{
		struct rf_stream loose = { 0 };
		loose.name = "loose";
		seed_error(e);
		refused("stream never registered", rf_engine_push_simple(e, inc, &n, NULL, 0, &v,
			1, &loose, "loose-op"), -EINVAL, "loose-op", "not registered");
	}
	seed_error(e);
	refused("stream added twice", rf_engine_add_stream(e, w), -EEXIST, "already registered",
		"mine");
	seed_error(e);
	refused("stream of another engine added", rf_engine_add_stream(e, w2), -EBUSY,
		"belongs to another engine", NULL);
	seed_error(e);
	refused("the inline stream added", rf_engine_add_stream(e, rf_engine_inline_stream(e)),
		-EEXIST, "one of the engine's own", NULL);
	{
		/* a push naming a destroyed stream is refused without reading it (ASan) */
		struct rf_stream *gone;
		CHECK_OK(rf_worker_stream_create(e, "gone", 0, &gone));
		rf_stream_destroy(gone);
		seed_error(e);
		refused("stream destroyed", rf_engine_push_simple(e, inc, &n, NULL, 0, &v, 1, gone,
			"late"), -EINVAL, "late", "not registered");
	}
	seed_error(e);
	refused("variable of another engine", rf_engine_push_simple(e, inc, &n, &v2, 1, &v, 1,
		NULL, "mixed"), -EINVAL, "reads[0]", "another engine");
	seed_error(e);
	refused("NULL descriptor", rf_engine_push(e, NULL), -EINVAL, "rf_engine_push", "NULL");
	seed_error(e);
	d.name = "nofn";
	refused("no fn", rf_engine_push(e, &d), -EINVAL, "nofn", "neither fn nor afn");
	seed_error(e);
	d.fn = inc;
	d.ctx = &n;
	d.nwrites = 2;
	refused("writes NULL, nwrites 2", rf_engine_push(e, &d), -EINVAL, "writes is NULL",
		"nwrites 2");
	seed_error(e);
	refused("wait_var of another engine", rf_engine_wait_var(e, v2), -EINVAL,
		"rf_engine_wait_var", "another engine");
	seed_error(e);
	refused("var_destroy NULL", rf_var_destroy(e, NULL, NULL, NULL, NULL), -EINVAL,
		"rf_var_destroy", "NULL");
	{
		/* a second destroy while the first waits behind an op: refused, where it
		 * was a double free */
		struct rf_var *dv;
		static int busy; /* outlives the block: the op may run after it */
		CHECK_OK(rf_var_create(e, "dv", &dv));
		CHECK_OK(rf_engine_push_simple(e, inc, &busy, NULL, 0, &dv, 1, w, "busy"));
		CHECK_OK(rf_var_destroy(e, dv, NULL, NULL, NULL));
		seed_error(e);
		refused("var_destroy twice", rf_var_destroy(e, dv, NULL, NULL, NULL), -EINVAL,
			"rf_var_destroy dv", "already being destroyed");
	}
	seed_error(e);
	refused("worker capacity 2^25", rf_worker_stream_create(e, "big", 1u << 25, &w2),
		-EINVAL, "capacity 33554432", "at most");
	/* and everything still works, on both engines */
	int n2 = 0; /* the engines do not order each other's ops */
	CHECK_OK(rf_engine_push_simple(e, inc, &n, NULL, 0, &v, 1, w, "fine"));
	CHECK_OK(rf_engine_push_simple(e2, inc, &n2, NULL, 0, &v2, 1, NULL, "fine2"));
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_OK(rf_engine_wait_all(e2));
	CHECK_EQ(n + n2, 2);
	rf_engine_destroy(e2); /* v2 never destroyed: freed here */
	rf_engine_destroy(e);  /* v likewise */
}

/* ---- a push from a worker thread --------------------------------------------- */

struct pusher {
	struct rf_engine *e;
	struct rf_var *v;
	int ret, n;
	char msg[512];
};

static int push_from_worker(void *p)
{
	struct pusher *q = p;

	q->ret = rf_engine_push_simple(q->e, inc, &q->n, NULL, 0, &q->v, 1, NULL, "inner");
	snprintf(q->msg, sizeof(q->msg), "%s", rf_last_error());
	return 0;
}

static void push_off_thread(struct rf_ring *r)
{
	struct pusher q = { 0 };
	struct rf_var *outer;
	struct rf_stream *w;

	CHECK_OK(rf_engine_create(&q.e, r, NULL));
	CHECK_OK(rf_var_create(q.e, "v", &q.v));
	CHECK_OK(rf_var_create(q.e, "outer", &outer));
	CHECK_OK(rf_worker_stream_create(q.e, "w", 0, &w));
	CHECK_OK(rf_engine_push_simple(q.e, push_from_worker, &q, NULL, 0, &outer, 1, w, "outer"));
	CHECK_OK(rf_engine_wait_all(q.e));
	printf("  %-34s -> %d: %s\n", "push from a worker-stream op", q.ret, q.msg);
	CHECK_EQ(q.ret, -EPERM);
	CHECK(strstr(q.msg, "rf_engine_push from a thread other than the engine's reactor"));
	CHECK_EQ(q.n, 0);
	rf_engine_destroy(q.e);
}

/* ---- a variable being destroyed; engine calls off the reactor or inside an op ---- */

static int slow(void *p)
{
	(void)p;
	usleep(20000);
	return 0;
}

struct offthread {
	struct rf_engine *e;
	int create, shared, may_wait;
	char msg[512];
};

static void *off_thread(void *p)
{
	struct offthread *o = p;
	struct rf_stream *s = NULL;

	o->create = rf_worker_stream_create(o->e, "t", 0, &s);
	snprintf(o->msg, sizeof(o->msg), "%s", rf_last_error());
	o->shared = rf_worker_stream_create_shared(o->e, "t2", 0, NULL, &s);
	o->may_wait = rf_engine_may_wait(o->e, "a wait");
	return NULL;
}

static int fail_op(void *p)
{
	(void)p;
	return -EIO;
}

static int in_op_ret[3];

static int admin_in_op(void *p)
{
	struct rf_engine *e = p;
	struct rf_stream *s = NULL;

	in_op_ret[0] = rf_worker_stream_create(e, "inner", 0, &s);
	in_op_ret[1] = rf_engine_trace_start(e, "/nonexistent/t.json");
	in_op_ret[2] = rf_engine_may_wait(e, "a wait");
	return 0;
}

static void deleting_and_threads(struct rf_ring *r)
{
	struct rf_engine *e;
	struct rf_var *a, *b;
	struct rf_stream *w;
	struct offthread o = { 0 };
	pthread_t t;
	int n = 0;

	CHECK_OK(rf_engine_create(&e, r, NULL));
	CHECK_OK(rf_var_create(e, "a", &a));
	CHECK_OK(rf_var_create(e, "b", &b));
	CHECK_OK(rf_worker_stream_create(e, "w", 0, &w));
	CHECK_OK(rf_engine_push_simple(e, slow, NULL, NULL, 0, &a, 1, w, "slow"));
	CHECK_OK(rf_var_destroy(e, a, NULL, NULL, NULL));       /* queued behind slow */
	refused("wait on a variable being destroyed", rf_engine_wait_var(e, a), -EINVAL,
		"rf_engine_wait_var a: being destroyed", NULL);
	refused("push reading it", rf_engine_push_simple(e, inc, &n, &a, 1, &b, 1, NULL, "after"),
		-EINVAL, "reads[0] (a) is being destroyed", NULL);
	refused("push writing it", rf_engine_push_simple(e, inc, &n, &b, 1, &a, 1, NULL, "after"),
		-EINVAL, "writes[0] (a) is being destroyed", NULL);
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(n, 0);
	/* off the reactor thread */
	o.e = e;
	CHECK(pthread_create(&t, NULL, off_thread, &o) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	printf("  %-34s -> %d: %s\n", "worker stream from another thread", o.create, o.msg);
	CHECK_EQ(o.create, -EPERM);
	CHECK(strstr(o.msg, "rf_worker_stream_create called from a thread other than"));
	CHECK_EQ(o.shared, -EPERM);
	CHECK_EQ(o.may_wait, -EDEADLK);
	/* inside an inline op */
	CHECK_OK(rf_engine_push_simple(e, admin_in_op, e, NULL, 0, &b, 1, NULL, "admin"));
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(in_op_ret[0], -EBUSY);
	CHECK_EQ(in_op_ret[1], -EBUSY);
	CHECK_EQ(in_op_ret[2], -EDEADLK);
	CHECK_OK(rf_engine_may_wait(e, "a wait"));
	/* a graph launch over a captured variable (or a bound one) being destroyed */
	{
		struct rf_var *g1, *g2;
		struct rf_graph *g;
		CHECK_OK(rf_var_create(e, "g1", &g1));
		CHECK_OK(rf_var_create(e, "g2", &g2));
		CHECK_OK(rf_engine_capture_begin(e, NULL));
		CHECK_OK(rf_engine_push_simple(e, inc, &n, NULL, 0, &g1, 1, NULL, "cap"));
		CHECK_OK(rf_engine_capture_end(e, &g));
		CHECK_OK(rf_engine_push_simple(e, slow, NULL, NULL, 0, &g2, 1, w, "slow2"));
		CHECK_OK(rf_var_destroy(e, g2, NULL, NULL, NULL));
		refused("launch binding a variable being destroyed",
			rf_graph_launch(g, NULL, &(struct rf_graph_bind){ g1, g2 }, 1), -EINVAL,
			"rf_graph_launch", "'g2' is being destroyed");
		CHECK_OK(rf_engine_push_simple(e, slow, NULL, NULL, 0, &g1, 1, w, "slow1"));
		CHECK_OK(rf_var_destroy(e, g1, NULL, NULL, NULL));
		refused("launch over a captured one", rf_graph_launch(g, NULL, NULL, 0), -EINVAL,
			"rf_graph_launch", "'g1' is being destroyed");
		rf_graph_destroy(g);    /* before its variables go: they must outlive it */
		CHECK_OK(rf_engine_wait_all(e));
		CHECK_EQ(n, 0);
	}
	/* values no flag or mode has */
	refused("op flags 0x40", rf_engine_push(e, &(struct rf_op_desc){ .fn = inc, .ctx = &n,
							  .flags = 0x40, .name = "f" }),
		-EINVAL, "bits 0x40 are no RF_OP_* flag", NULL);
	{
		struct rf_engine *e2 = NULL;
		refused("engine opts sync 5", rf_engine_create(&e2, r, &(struct rf_engine_opts){
								 .sync = 5 }),
			-EINVAL, "opts->sync = 5", NULL);
		CHECK(!e2);
	}
	/* a wait that returns the status of an op that failed during it (on a worker,
	 * whose message is that thread's) says which op, not what an earlier call left in
	 * rf_last_error; a failure from before the wait keeps what was said then */
	CHECK_OK(rf_engine_push_simple(e, fail_op, NULL, NULL, 0, &b, 1, w, "failing"));
	seed_error(e);
	refused("wait_var on a poisoned variable", rf_engine_wait_var(e, b), -EIO,
		"rf_engine_wait_var b: poisoned: op 'failing' failed", NULL);
	seed_error(e);
	refused("wait_var again (before it)", rf_engine_wait_var(e, b), -EIO, "no trace is on",
		NULL);
	CHECK_EQ(rf_engine_wait_all(e), -EIO);          /* clears the first error */
	{
		struct rf_var *c;
		CHECK_OK(rf_var_create(e, "c", &c));
		CHECK_OK(rf_engine_push_simple(e, fail_op, NULL, NULL, 0, &c, 1, w, "failing2"));
		seed_error(e);
		refused("wait_all on a failure", rf_engine_wait_all(e), -EIO,
			"rf_engine_wait_all: the first error since the last wait_all: op "
			"'failing2' failed", NULL);
	}
	rf_engine_destroy(e);
}

/* ---- destroy from inside ------------------------------------------------------ */

static struct rf_engine *g_e;
static struct rf_stream *g_w;
static int g_done_calls;
static char g_msg[512];

static int destroy_in_fn(void *p)
{
	(void)p;
	rf_engine_destroy(g_e);
	snprintf(g_msg, sizeof(g_msg), "%s", rf_last_error());
	return 0;
}

static void engine_destroy_in_done(void *ctx, int status)
{
	(void)ctx;
	(void)status;
	g_done_calls++;
	rf_engine_destroy(g_e);
	snprintf(g_msg, sizeof(g_msg), "%s", rf_last_error());
}

static void stream_destroy_in_done(void *ctx, int status)
{
	(void)ctx;
	(void)status;
	g_done_calls++;
	rf_stream_destroy(g_w);
	snprintf(g_msg, sizeof(g_msg), "%s", rf_last_error());
}

static void destroy_in_ring_cb(void *data, int64_t res)
{
	(void)data;
	(void)res;
	rf_engine_destroy(g_e);
	snprintf(g_msg, sizeof(g_msg), "%s", rf_last_error());
}

static void destroy_inside(struct rf_ring *r)
{
	struct rf_var *v;
	struct rf_op_desc d = { 0 };
	struct rf_io nop = { .op = RF_IOP_NOP };
	int n = 0;

	CHECK_OK(rf_engine_create(&g_e, r, NULL));
	CHECK_OK(rf_var_create(g_e, "v", &v));
	CHECK_OK(rf_worker_stream_create(g_e, "w", 0, &g_w));

	CHECK_OK(rf_engine_push_simple(g_e, destroy_in_fn, NULL, NULL, 0, &v, 1, NULL, "d-fn"));
	CHECK_OK(rf_engine_wait_all(g_e));
	printf("  engine destroy inside an op       -> %s\n", g_msg);
	CHECK(strstr(g_msg, "rf_engine_destroy called from inside"));

	d.fn = inc;
	d.ctx = &n;
	d.done = engine_destroy_in_done;
	d.writes = &v;
	d.nwrites = 1;
	d.name = "d-done";
	CHECK_OK(rf_engine_push(g_e, &d));
	CHECK_OK(rf_engine_wait_all(g_e));
	CHECK_EQ(g_done_calls, 1);
	printf("  engine destroy in a done callback -> %s\n", g_msg);
	CHECK(strstr(g_msg, "rf_engine_destroy called from inside"));

	/* a done callback destroying the stream its op ran on */
	d.stream = g_w;
	d.done = stream_destroy_in_done;
	d.name = "s-done";
	CHECK_OK(rf_engine_push(g_e, &d));
	CHECK_OK(rf_engine_wait_all(g_e));
	CHECK_EQ(g_done_calls, 2);
	printf("  stream destroy in a done callback -> %s\n", g_msg);
	CHECK(strstr(g_msg, "rf_stream_destroy called from inside"));

	CHECK_OK(rf_ring_submit(r, &nop, destroy_in_ring_cb, NULL, NULL));
	CHECK_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	printf("  engine destroy in a ring callback -> %s\n", g_msg);
	CHECK(strstr(g_msg, "rf_engine_destroy called from inside"));

	/* all refused: the engine and its stream still work, and go normally */
	CHECK_OK(rf_engine_push_simple(g_e, inc, &n, NULL, 0, &v, 1, g_w, "after"));
	CHECK_OK(rf_engine_wait_all(g_e));
	CHECK_EQ(n, 3);
	rf_stream_destroy(g_w);
	rf_engine_destroy(g_e);
}

/* ---- trace -------------------------------------------------------------------- */

static void trace_paths(struct rf_ring *r)
{
	struct rf_engine *e;
	struct rf_engine_opts o = { 0 };
	char p[300], buf[1 << 16];
	int fd;
	ssize_t got;

	snprintf(p, sizeof(p), "%s/fifo.json", dir);
	CHECK(mkfifo(p, 0644) == 0);
	CHECK(setenv("RF_TRACE", p, 1) == 0);
	refused("RF_TRACE at a FIFO", rf_engine_create(&e, r, NULL), -EINVAL, "RF_TRACE",
		"a FIFO");
	CHECK(setenv("RF_TRACE", dir, 1) == 0);
	refused("RF_TRACE at a directory", rf_engine_create(&e, r, NULL), -EISDIR, "RF_TRACE",
		"a directory");
	snprintf(p, sizeof(p), "%s/missing/t.json", dir);
	CHECK(setenv("RF_TRACE", p, 1) == 0);
	refused("RF_TRACE in a missing directory", rf_engine_create(&e, r, NULL), -ENOENT,
		"missing/t.json", "cannot create");
	CHECK(unsetenv("RF_TRACE") == 0);

	/* a full disk: the error comes back from trace_stop */
	if (access("/dev/full", W_OK) == 0) {
		o.trace_path = "/dev/full";
		CHECK_OK(rf_engine_create(&e, r, &o));
		struct rf_var *v;
		int n = 0;
		CHECK_OK(rf_var_create(e, "v", &v));
		for (int i = 0; i < 2000; i++)
			CHECK_OK(rf_engine_push_simple(e, inc, &n, NULL, 0, &v, 1, NULL, "op"));
		CHECK_OK(rf_engine_wait_all(e));
		refused("trace to /dev/full", rf_engine_trace_stop(e), -ENOSPC, "/dev/full",
			"cannot write trace");
		rf_engine_destroy(e);
	}

	/* two engines tracing one path: the last to stop writes the whole file (both
	 * wrote from offset 0 of one descriptor each: the tail of the longer stayed) */
	{
		struct rf_engine *a, *b;
		struct rf_var *va, *vb;
		int n = 0;
		snprintf(p, sizeof(p), "%s/shared.json", dir);
		o.trace_path = p;
		CHECK_OK(rf_engine_create(&a, r, &o));
		CHECK_OK(rf_engine_create(&b, r, &o));
		CHECK_OK(rf_var_create(a, "va", &va));
		CHECK_OK(rf_var_create(b, "vb", &vb));
		for (int i = 0; i < 500; i++)
			CHECK_OK(rf_engine_push_simple(a, inc, &n, NULL, 0, &va, 1, NULL, "a-op"));
		CHECK_OK(rf_engine_push_simple(b, inc, &n, NULL, 0, &vb, 1, NULL, "b-op"));
		CHECK_OK(rf_engine_wait_all(a));
		CHECK_OK(rf_engine_wait_all(b));
		CHECK_OK(rf_engine_trace_stop(a)); /* the long one first */
		CHECK_OK(rf_engine_trace_stop(b));
		rf_engine_destroy(a);
		rf_engine_destroy(b);
		CHECK((fd = open(p, O_RDONLY)) >= 0);
		got = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		CHECK(got > 0);
		buf[got] = 0;
		CHECK(strstr(buf, "b-op") && !strstr(buf, "a-op"));
		CHECK(strstr(buf, "traceEvents") &&
		      !strstr(strstr(buf, "traceEvents") + 1, "traceEvents"));
		CHECK(got >= 4 && strcmp(buf + got - 3, "]}\n") == 0);
		printf("  two engines tracing one path: the last one's file, whole\n");
	}

	/* a mark's name may be freed at once: the trace keeps a copy */
	snprintf(p, sizeof(p), "%s/mark.json", dir);
	o.trace_path = p;
	CHECK_OK(rf_engine_create(&e, r, &o));
	{
		char *name = strdup("mark-from-the-heap");
		rf_engine_trace_mark(e, NULL, name, 1, 2);
		memset(name, 'x', strlen(name));
		free(name);
		char stack[32];
		for (int i = 0; i < 3; i++) {
			snprintf(stack, sizeof(stack), "stack-mark-%d", i);
			rf_engine_trace_mark(e, NULL, stack, 3, 4);
		}
	}
	refused("trace already on", rf_engine_trace_start(e, "/tmp/x.json"), -EBUSY,
		"already tracing to", "mark.json");
	CHECK_OK(rf_engine_trace_stop(e));
	rf_engine_destroy(e);
	CHECK((fd = open(p, O_RDONLY)) >= 0);
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	CHECK(got > 0);
	buf[got] = 0;
	CHECK(strstr(buf, "\"mark-from-the-heap\""));
	CHECK(strstr(buf, "\"stack-mark-0\"") && strstr(buf, "\"stack-mark-2\""));
	printf("  trace marks keep their names\n");
}

/* ---- push_io, wide ops -------------------------------------------------------- */

static void push_io_result(struct rf_ring *r)
{
	struct rf_engine *e;
	struct rf_var *f;
	int64_t fd_from = -5, result = 777;
	char buf[8];

	CHECK_OK(rf_engine_create(&e, r, NULL));
	CHECK_OK(rf_var_create(e, "f", &f));
	CHECK_OK(rf_engine_push_io(e, &(struct rf_io_push){
		.io = { .op = RF_IOP_READ, .buf = buf, .len = sizeof(buf) },
		.fd_from = &fd_from, .result = &result, .writes = &f, .nwrites = 1 }));
	CHECK_EQ(rf_engine_wait_var(e, f), -EBADF);
	CHECK_EQ(result, -EBADF);
	printf("  push_io with a failed fd_from: *result = %lld\n", (long long)result);
	/* a malformed descriptor is refused at the push, not later as the op's failure
	 * (which poisoned what it writes) */
	CHECK_EQ(rf_engine_wait_all(e), -EBADF); /* reports it once, then clears */
	CHECK_OK(rf_var_clear_error(e, f));
	CHECK_OK(rf_engine_wait_all(e));
	refused("push_io readv without iovecs", rf_engine_push_io(e, &(struct rf_io_push){
		.io = { .op = RF_IOP_READV }, .writes = &f, .nwrites = 1 }), -EINVAL,
		"rf_engine_push_io: rf_ring_submit(readv)", "expected an iovec array");
	refused("push_io statx without stx", rf_engine_push_io(e, &(struct rf_io_push){
		.io = { .op = RF_IOP_STATX, .path = "." }, .writes = &f, .nwrites = 1 }),
		-EINVAL, "rf_engine_push_io", "struct statx");
	{       /* bits that are no RF_IO_* flag, a read into NULL: refused at the push too */
		char b4[4];
		refused("push_io read with flags 0x80", rf_engine_push_io(e, &(struct rf_io_push){
			.io = { .op = RF_IOP_READ, .fd = 0, .buf = b4, .len = 4, .flags = 0x80 },
			.writes = &f, .nwrites = 1 }), -EINVAL, "bits 0x80 are no RF_IO_* flag",
			NULL);
		refused("push_io read into NULL", rf_engine_push_io(e, &(struct rf_io_push){
			.io = { .op = RF_IOP_READ, .fd = 0, .len = 4 }, .writes = &f, .nwrites = 1 }),
			-EINVAL, "buf is NULL with len 4", NULL);
		/* a flag the kind does not keep: at the push, as rf_ring_submit refuses it
		 * (it passed the push and failed the op at dispatch, poisoning f) */
		refused("push_io fsync with RF_IO_NO_RETRY_SHORT", rf_engine_push_io(e,
			&(struct rf_io_push){ .io = { .op = RF_IOP_FSYNC, .fd = 0,
						      .flags = RF_IO_NO_RETRY_SHORT },
					      .writes = &f, .nwrites = 1 }), -EINVAL,
			"flags 0x4 do not apply to a fsync request", NULL);
		refused("push_io(NULL)", rf_engine_push_io(NULL, &(struct rf_io_push){
			.io = { .op = RF_IOP_NOP } }), -EINVAL, "e is NULL", NULL);
	}
	CHECK_EQ(rf_engine_wait_var(e, f), 0); /* nothing was pushed, nothing poisoned */
	rf_engine_destroy(e);
}

static void wide_op(struct rf_ring *r)
{
	enum { N = 40000 };
	struct rf_engine *e;
	struct rf_var **v = malloc(2 * N * sizeof(*v));
	int n = 0;

	CHECK(v);
	CHECK_OK(rf_engine_create(&e, r, NULL));
	for (int i = 0; i < N; i++)
		CHECK_OK(rf_var_create(e, NULL, &v[i]));
	for (int i = 0; i < N; i++)
		v[N + i] = v[N - 1 - i]; /* each twice */
	/* reads and writes name the same 40,000: one entry each, a write */
	if (rf_engine_push_simple(e, inc, &n, v, 2 * N, v, 2 * N, NULL, "wide") < 0) {
		fprintf(stderr, "wide: %s\n", rf_last_error());
		exit(1);
	}
	CHECK_OK(rf_engine_push_simple(e, inc, &n, &v[7], 1, NULL, 0, NULL, "after"));
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(n, 2);
	printf("  one op over %d variables (each named 4 times)\n", N);
	rf_engine_destroy(e); /* the variables go with it */
	free(v);
}

/* NULL where an engine or a variable is expected: -EINVAL naming it, no crash (each
 * was a NULL dereference) */
static void null_args(void)
{
	const char *opn = "x";
	struct rf_op_desc d = { .fn = inc, .name = "n" };

	refused("rf_engine_push(NULL)", rf_engine_push(NULL, &d), -EINVAL,
		"rf_engine_push: e is NULL", NULL);
	refused("rf_engine_wait_all(NULL)", rf_engine_wait_all(NULL), -EINVAL,
		"rf_engine_wait_all: e is NULL", NULL);
	refused("rf_engine_wait_idle(NULL)", rf_engine_wait_idle(NULL), -EINVAL,
		"rf_engine_wait_idle: e is NULL", NULL);
	refused("rf_var_error(NULL)", rf_var_error(NULL, &opn), -EINVAL, "v is NULL", NULL);
	CHECK(opn == NULL);
	CHECK(!strcmp(rf_var_name(NULL), "(null)"));
}

int main(void)
{
	struct rf_ring *r;
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/rf-misuse-XXXXXX", tmp ? tmp : "/tmp");
	CHECK(mkdtemp(dir));
	CHECK_OK(rf_ring_create(&r, NULL));
	stream_args(r);
	push_off_thread(r);
	deleting_and_threads(r);
	destroy_inside(r);
	trace_paths(r);
	push_io_result(r);
	wide_op(r);
	null_args();
	rf_ring_destroy(r);
	{
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		CHECK(system(cmd) == 0);
	}
	printf("engine-misuse: ok\n");
	return 0;
}
