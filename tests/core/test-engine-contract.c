/* test-engine-contract: the engine keeps its promises at the edges. No wait leaves a
 * pointer into its caller's stack behind (run under ASan with
 * detect_stack_use_after_return=1, each case below was a stack-use-after-return):
 * a wait_var that returns -EDEADLK while its writer is an async op completed later, a
 * synchronous-mode push from inside an inline op, a wait called from a done callback
 * (refused, the message in rf_last_error()). A push that returned 0 runs its op and done callback
 * exactly once, and one that returned an error never does -- in synchronous mode too,
 * when the wait inside push cannot finish. An async op that reports its completion and
 * then returns an error is completed once (and the error is logged). rf_engine_op_done
 * on an op that is not running, or from another thread than the reactor's (the done
 * callback ran there), logs an error and aborts. Internal waits (destroying a stream) leave the
 * pending error for the user's wait_all. A worker stream's capacity is bounded. An op
 * that runs at once at push (inline, idle variables) and pushes ops from inside itself
 * orders them behind itself, as the queued path does, and its failure poisons. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine.h"
#include "log.h"
#include "../test-util.h"

static struct rf_engine *e;
static struct rf_op *held;
static int ndone, last_status, nran, wait_in_cb = 1;

static int hold_start(void *ctx, struct rf_op *op)
{
	(void)ctx;
	held = op;
	return 0;
}

static int count_fn(void *ctx)
{
	(void)ctx;
	nran++;
	return 0;
}

static void count_done(void *ctx, int st)
{
	(void)ctx;
	ndone++;
	last_status = st;
}

/* Scribbles over the stack where an earlier frame's locals were. */
static __attribute__((noinline)) int scribble(int depth)
{
	volatile char buf[4096];
	int i;

	for (i = 0; i < (int)sizeof(buf); i++)
		buf[i] = (char)(i + depth);
	return depth ? scribble(depth - 1) + buf[7] : buf[5];
}

static __attribute__((noinline)) int wait_var_noinline(struct rf_var *v)
{
	return rf_engine_wait_var(e, v);
}

static void setup(int sync)
{
	struct rf_ring *ring;

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = sync }));
	ndone = nran = 0;
	held = NULL;
}

static void teardown(void)
{
	struct rf_ring *ring = rf_engine_ring(e);

	rf_engine_destroy(e);
	rf_ring_destroy(ring);
}

/* 1. wait_var returns -EDEADLK (nothing can make progress) while its writer is an
 * async op the front end completes later: the completion must not write into the
 * returned wait's frame. */
static void t_wait_deadlk(int sync)
{
	struct rf_var *v;
	struct rf_op_desc d = { 0 };

	setup(sync);
	rf_var_create(e, "v", &v);
	d.afn = hold_start;
	d.writes = &v;
	d.nwrites = 1;
	d.done = count_done;
	d.name = "held";
	CHECK_EQ(rf_engine_push(e, &d), 0); /* sync: its wait cannot finish; still 0 */
	CHECK(held);
	CHECK_EQ(wait_var_noinline(v), -EDEADLK);
	CHECK(scribble(4) != 12345);
	rf_engine_op_done(held, 0);
	CHECK_EQ(ndone, 1);
	CHECK_EQ(last_status, 0);
	CHECK_EQ(rf_engine_wait_var(e, v), 0);
	CHECK_OK(rf_var_destroy(e, v, NULL, NULL, NULL));
	teardown();
}

/* 2. Synchronous mode, a push that returned 0 while its op could not run yet: the
 * op runs once, later, and a rejected push never runs. */
static void t_sync_push(void)
{
	struct rf_var *v;
	struct rf_op_desc d = { 0 };

	setup(1);
	rf_var_create(e, "v", &v);
	d.afn = hold_start;
	d.writes = &v;
	d.nwrites = 1;
	d.name = "held";
	CHECK_EQ(rf_engine_push(e, &d), 0);
	CHECK_EQ(rf_engine_push(e, &(struct rf_op_desc){ .fn = count_fn, .done = count_done,
						  .reads = &v, .nreads = 1, .name = "after" }), 0);
	CHECK_EQ(nran, 0);
	CHECK(scribble(4) != 12345);
	rf_engine_op_done(held, 0);
	CHECK_EQ(nran, 1);
	CHECK_EQ(ndone, 1);
	/* rejected: both fn and afn */
	CHECK_EQ(rf_engine_push(e, &(struct rf_op_desc){ .fn = count_fn, .afn = hold_start,
						  .done = count_done }), -EINVAL);
	CHECK_EQ(ndone, 1);
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_OK(rf_var_destroy(e, v, NULL, NULL, NULL));
	teardown();
}

/* 3. Synchronous mode, a push from inside an inline op: allowed, runs right after. */
static struct rf_var *inner_v;
static int order[4], norder;

static int inner_fn(void *ctx)
{
	(void)ctx;
	order[norder++] = 2;
	return 0;
}

static int outer_fn(void *ctx)
{
	(void)ctx;
	order[norder++] = 1;
	CHECK_EQ(rf_engine_push_simple(e, inner_fn, NULL, NULL, 0, &inner_v, 1, NULL, "inner"), 0);
	CHECK(scribble(2) != 12345);
	return 0;
}

static void t_sync_nested(void)
{
	setup(1);
	rf_var_create(e, "inner", &inner_v);
	norder = 0;
	CHECK_EQ(rf_engine_push_simple(e, outer_fn, NULL, NULL, 0, &inner_v, 1, NULL, "outer"), 0);
	CHECK(scribble(4) != 12345);
	CHECK_OK(rf_engine_wait_var(e, inner_v));
	CHECK_EQ(norder, 2);
	CHECK_EQ(order[0], 1);
	CHECK_EQ(order[1], 2);
	CHECK_OK(rf_var_destroy(e, inner_v, NULL, NULL, NULL));
	teardown();
}

/* 4. A wait from a done callback (during the dispatch loop) is refused. */
static struct rf_var *cb_v;

static char cb_msg[512];

static void wait_done(void *ctx, int st)
{
	(void)ctx;
	(void)st;
	wait_in_cb = rf_engine_wait_var(e, cb_v);
	snprintf(cb_msg, sizeof(cb_msg), "%s", rf_last_error());
}

static void t_wait_in_done(int sync)
{
	struct rf_var *v;

	setup(sync);
	rf_var_create(e, "v", &v);
	rf_var_create(e, "cb", &cb_v);
	CHECK_OK(rf_engine_push(e, &(struct rf_op_desc){ .afn = hold_start, .writes = &cb_v,
							 .nwrites = 1, .name = "held" }));
	wait_in_cb = 1;
	CHECK_OK(rf_engine_push(e, &(struct rf_op_desc){ .fn = count_fn, .done = wait_done,
							 .writes = &v, .nwrites = 1, .name = "w" }));
	CHECK_EQ(wait_in_cb, -EDEADLK);
	CHECK(strstr(cb_msg, "rf_engine_wait_var called from inside an engine op, done callback"));
	CHECK(scribble(4) != 12345);
	rf_engine_op_done(held, 0);
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_OK(rf_var_destroy(e, v, NULL, NULL, NULL));
	CHECK_OK(rf_var_destroy(e, cb_v, NULL, NULL, NULL));
	teardown();
}

/* 5. An async op that calls rf_engine_op_done and then returns an error: once. */
static int done_then_fail(void *ctx, struct rf_op *op)
{
	(void)ctx;
	rf_engine_op_done(op, 0);
	return -EIO;
}

/* The last error logged (the engine's log callback). */
static char log_msg[512];
static int log_level = -1;

static void capture_log(enum rf_log_level level, const char *msg, void *user)
{
	(void)user;
	log_level = (int)level;
	snprintf(log_msg, sizeof(log_msg), "%s", msg);
}

static void t_done_then_fail(void)
{
	struct rf_var *v;

	rf_log_set(capture_log, NULL);
	log_msg[0] = 0;
	setup(0);
	rf_var_create(e, "v", &v);
	CHECK_OK(rf_engine_push(e, &(struct rf_op_desc){ .afn = done_then_fail, .done = count_done,
							 .writes = &v, .nwrites = 1, .name = "dtf" }));
	CHECK_OK(rf_engine_push(e, &(struct rf_op_desc){ .afn = done_then_fail, .done = count_done,
							 .writes = &v, .nwrites = 1, .name = "dtf2" }));
	CHECK_EQ(rf_engine_wait_all(e), 0);
	CHECK_EQ(ndone, 2);
	CHECK_EQ(last_status, 0);
	CHECK_EQ(rf_var_error(v, NULL), 0);
	CHECK_EQ(log_level, RF_LOG_ERROR);
	CHECK(strstr(log_msg, "op 'dtf2' on stream async (ring) reported its completion and then "
		     "returned -5; the return value is ignored"));
	CHECK_OK(rf_var_destroy(e, v, NULL, NULL, NULL));
	teardown();
	rf_log_set(NULL, NULL);
}

/* 6. rf_engine_op_done on a finished op, or from another thread, logs an error and aborts (in a child process,
 * whose log callback writes the message to a pipe). */
static int log_fd = -1;

static void pipe_log(enum rf_log_level level, const char *msg, void *user)
{
	(void)user;
	if (level == RF_LOG_ERROR && write(log_fd, msg, strlen(msg)) < 0)
		_exit(3);
}

static void *done_elsewhere(void *arg)
{
	rf_engine_op_done(arg, 0); /* must abort: not the reactor thread */
	return NULL;
}

/* mode 0: reported twice; 1: reported from another thread */
static void t_bad_done(int mode)
{
	char got[512] = "";
	ssize_t n, len = 0;
	int ws, fds[2];
	pid_t pid;

	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct rf_var *v;
		struct rf_op *op;
		close(fds[0]);
		log_fd = fds[1];
		rf_log_set(pipe_log, NULL);
		setup(0);
		rf_var_create(e, "v", &v);
		rf_engine_push(e, &(struct rf_op_desc){ .afn = hold_start, .writes = &v,
							.nwrites = 1, .name = "twice" });
		op = held;
		if (mode == 1) {
			pthread_t th;
			if (pthread_create(&th, NULL, done_elsewhere, op) == 0)
				pthread_join(th, NULL);
			_exit(0);
		}
		rf_engine_op_done(op, 0);
		rf_engine_op_done(op, 0); /* must abort */
		_exit(0);
	}
	close(fds[1]);
	while (len < (ssize_t)sizeof(got) - 1 && (n = read(fds[0], got + len, sizeof(got) - 1 - len)) > 0)
		len += n;
	got[len] = 0;
	close(fds[0]);
	CHECK(waitpid(pid, &ws, 0) == pid);
	CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGABRT);
	CHECK(strstr(got, mode ? "rf_engine_op_done on op 'twice' from a thread other than "
			  "the engine's reactor thread"
			: "rf_engine_op_done on op '(finished)', which is not running"));
}

/* 7. Destroying a stream waits for all work but leaves the error for wait_all. */
static int fail_fn(void *ctx)
{
	(void)ctx;
	return -EIO;
}

static void t_internal_wait_keeps_error(void)
{
	struct rf_var *v;
	struct rf_stream *w1, *w2;

	setup(0);
	rf_var_create(e, "v", &v);
	CHECK_OK(rf_worker_stream_create(e, "w1", 0, &w1));
	CHECK_OK(rf_worker_stream_create(e, "w2", 0, &w2));
	CHECK_OK(rf_engine_push_simple(e, fail_fn, NULL, NULL, 0, &v, 1, w1, "failing"));
	rf_stream_destroy(w2);
	CHECK_EQ(rf_engine_wait_idle(e), 0);
	CHECK_EQ(rf_engine_wait_all(e), -EIO);
	CHECK_EQ(rf_engine_wait_all(e), 0);
	CHECK_OK(rf_var_destroy(e, v, NULL, NULL, NULL));
	teardown();
}

/* 8. A worker stream's capacity is bounded: no endless loop, a clear -EINVAL. */
static void t_worker_capacity(void)
{
	struct rf_stream *w;

	setup(0);
	CHECK_EQ(rf_worker_stream_create(e, "big", (1u << 31) + 1, &w), -EINVAL);
	CHECK_EQ(rf_worker_stream_create(e, "big", 0xffffffffu, &w), -EINVAL);
	CHECK_EQ(rf_worker_stream_create(e, "big", (1u << 24) + 1, &w), -EINVAL);
	CHECK_OK(rf_worker_stream_create(e, "ok", 3, &w));
	rf_stream_destroy(w);
	teardown();
}

/* 9. The immediate path: an op run at push that pushes a reader of its own output,
 * a writer of its input and a deletion of its output from inside itself. */
static struct rf_var *nx, *ny;
static int a_done, b_saw_a_done, c_saw_a_done, seqn, b_seq, c_seq;

static int b_fn(void *ctx)
{
	(void)ctx;
	b_saw_a_done = a_done;
	b_seq = ++seqn;
	return 0;
}

static int c_fn(void *ctx)
{
	(void)ctx;
	c_saw_a_done = a_done;
	c_seq = ++seqn;
	return 0;
}

static int a_fn(void *ctx)
{
	(void)ctx;
	CHECK_OK(rf_engine_push_simple(e, b_fn, NULL, &nx, 1, NULL, 0, NULL, "b")); /* reads x */
	CHECK_OK(rf_engine_push_simple(e, c_fn, NULL, NULL, 0, &ny, 1, NULL, "c")); /* writes y */
	CHECK_EQ(b_seq, 0); /* behind a */
	return 0;
}

static void a_done_cb(void *ctx, int st)
{
	(void)ctx;
	CHECK_EQ(st, 0);
	a_done = 1;
}

static void t_now_nested(void)
{
	int sync;

	for (sync = 0; sync <= 1; sync++) {
		struct rf_engine_stats es;

		setup(sync);
		rf_var_create(e, "x", &nx);
		rf_var_create(e, "y", &ny);
		a_done = b_saw_a_done = c_saw_a_done = seqn = b_seq = c_seq = 0;
		CHECK_OK(rf_engine_push(e, &(struct rf_op_desc){ .fn = a_fn, .done = a_done_cb,
				.reads = &ny, .nreads = 1, .writes = &nx, .nwrites = 1, .name = "a" }));
		CHECK_OK(rf_engine_wait_all(e));
		CHECK(b_saw_a_done && c_saw_a_done);
		CHECK(b_seq && c_seq);
		/* a failing op at push poisons its output; a reader pushed next is skipped */
		CHECK_OK(rf_engine_push_simple(e, fail_fn, NULL, NULL, 0, &nx, 1, NULL, "f"));
		ndone = 0;
		CHECK_OK(rf_engine_push(e, &(struct rf_op_desc){ .fn = count_fn, .done = count_done,
				.reads = &nx, .nreads = 1, .writes = &ny, .nwrites = 1, .name = "r" }));
		CHECK_EQ(ndone, 1);
		CHECK_EQ(last_status, -EIO);
		CHECK_EQ(rf_var_error(ny, NULL), -EIO);
		CHECK_EQ(rf_engine_wait_all(e), -EIO);
		rf_engine_get_stats(e, &es);
		CHECK_EQ(es.failed, 1);
		CHECK_EQ(es.skipped, 1);
		CHECK_EQ(es.inflight, 0);
		CHECK_OK(rf_var_destroy(e, nx, NULL, NULL, NULL));
		CHECK_OK(rf_var_destroy(e, ny, NULL, NULL, NULL));
		teardown();
	}
}

/* 10. The minimal case of an early-granted skip: Z is poisoned; then on one worker stream A0 writes W
 * slowly, A reads W and X and writes Y, D reads Z and writes X. Serially A reads a
 * clean X: Y ends clean and only X is poisoned (by D's skip). D, granted early by
 * stream order, must not poison X under A. */
static int slow_fn(void *ctx)
{
	(void)ctx;
	usleep(50 * 1000);
	return 0;
}

static void t_early_skip_minimal(int sync)
{
	struct rf_var *z, *w, *x, *y;
	struct rf_stream *ws;

	setup(sync);
	rf_var_create(e, "Z", &z);
	rf_var_create(e, "W", &w);
	rf_var_create(e, "X", &x);
	rf_var_create(e, "Y", &y);
	CHECK_OK(rf_worker_stream_create(e, "w", 0, &ws));
	CHECK_OK(rf_engine_push_simple(e, fail_fn, NULL, NULL, 0, &z, 1, ws, "z_writer"));
	CHECK_EQ(rf_engine_wait_var(e, z), -EIO);
	CHECK_OK(rf_engine_push_simple(e, slow_fn, NULL, NULL, 0, &w, 1, ws, "A0"));
	CHECK_OK(rf_engine_push_simple(e, count_fn, NULL, (struct rf_var *[]){ w, x }, 2, &y, 1, ws, "A"));
	CHECK_OK(rf_engine_push_simple(e, count_fn, NULL, &z, 1, &x, 1, ws, "D"));
	CHECK_EQ(rf_engine_wait_var(e, y), 0);
	CHECK_EQ(rf_engine_wait_var(e, x), -EIO);
	CHECK_EQ(rf_engine_wait_all(e), -EIO);
	CHECK_OK(rf_var_destroy(e, z, NULL, NULL, NULL));
	CHECK_OK(rf_var_destroy(e, w, NULL, NULL, NULL));
	CHECK_OK(rf_var_destroy(e, x, NULL, NULL, NULL));
	CHECK_OK(rf_var_destroy(e, y, NULL, NULL, NULL));
	teardown();
}

int main(void)
{
	int sync;

	for (sync = 0; sync <= 1; sync++) {
		t_wait_deadlk(sync);
		t_wait_in_done(sync);
	}
	t_sync_push();
	t_sync_nested();
	t_done_then_fail();
	t_bad_done(0);
	t_bad_done(1);
	t_internal_wait_keeps_error();
	t_worker_capacity();
	t_now_nested();
	t_early_skip_minimal(0);
	t_early_skip_minimal(1);
	printf("engine contract: waits, sync pushes, double completion, internal waits\n");
	return 0;
}
