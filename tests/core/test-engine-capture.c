/* test-engine-capture: what a capture records and what a launch counts.
 *   caps      a launch stands for its graph's ops and their bytes under max_inflight
 *             and max_bytes while in flight, as the same ops pushed one by one do (a
 *             launch once counted as one op of 0 bytes: eight launches of an 800-byte
 *             op all ran at once under a 1000-byte cap);
 *             An empty graph's launch counts one. A callback that runs while a push
 *             or a launch waits for room may not destroy a variable it names
 *             (-EBUSY; it was freed under the push), nor the graph free under its
 *             launch (the launch then fails, naming why);
 *   callbacks during a capture, what ops, done callbacks and ring callbacks of the
 *             program pushed before it push, clear or launch is that program's, run as
 *             pushed -- not recorded into the graph (it was, and never ran unless
 *             launched); they may destroy a variable, not one the recording names,
 *             and may not end the capture (-EBUSY);
 *   refused   a push refused while recording (a bad descriptor) voids the capture:
 *             later pushes are refused saying so (a NULL descriptor too), capture_end
 *             gives no graph and the error, and the recorded ops' done callbacks run
 *             once with -ECANCELED;
 *   deferred  rf_var_destroy while recording (it was refused -EBUSY, and the training
 *             step's cleanup after a failure inside a capture said that instead of the
 *             failure): the deletion goes when the capture ends; a variable the
 *             recording names voids it (the graph would launch on a freed one);
 *   wide      an op naming thousands of variables, each read twice and written,
 *             records one entry per variable (a write: found by the variables' marks,
 *             as a push does, not by comparing every entry so far, which took seconds)
 *             and replays before the op that reads after it;
 *   nested    rf_graph_launch from inside an inline op, as rf_engine_push is allowed;
 *   poison    a variable keeps its first error until an RF_OP_OVERWRITE op succeeds
 *             or its error is cleared: a successful RF_OP_ALWAYS writer and a failing
 *             RF_OP_OVERWRITE one leave the first error (core/README.md, Failure). */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "log.h"
#include "../test-util.h"

static struct rf_engine *eng;
static int nran;

static int nop(void *p)
{
	(void)p;
	nran++;
	return 0;
}

static int fail_eio(void *p)
{
	(void)p;
	return -EIO;
}

static int fail_enospc(void *p)
{
	(void)p;
	return -ENOSPC;
}

static void open_engine(struct rf_ring **ring, const struct rf_engine_opts *o)
{
	CHECK_OK(rf_ring_create(ring, NULL));
	CHECK_OK(rf_engine_create(&eng, *ring, o));
	nran = 0;
}

static void close_engine(struct rf_ring *ring)
{
	rf_engine_destroy(eng);
	rf_ring_destroy(ring);
	eng = NULL;
}

/* ---- caps ---- */

static int slow_write(void *p)
{
	(void)p;
	usleep(5000);
	return 0;
}

static _Atomic int running, most_running;

static int slow_fn(void *p)
{
	(void)p;
	int now = atomic_fetch_add(&running, 1) + 1, m = atomic_load(&most_running);
	while (now > m && !atomic_compare_exchange_weak(&most_running, &m, now)) {
	}
	usleep(2000);
	atomic_fetch_sub(&running, 1);
	return 0;
}

/* n single-op graphs of `bytes` on a worker stream, each launched once, under the caps
 * o: the most ops the engine counted in flight and that ran at once. */
static void caps_run(const struct rf_engine_opts *o, unsigned nops, size_t bytes,
		     unsigned *seen, int *ran_at_once, uint64_t *cap_waits)
{
	enum { G = 8 };
	struct rf_ring *ring;
	struct rf_stream *w;
	struct rf_var *v[G];
	struct rf_graph *g[G];
	struct rf_engine_stats st;

	open_engine(&ring, o);
	atomic_store(&running, 0);
	atomic_store(&most_running, 0);
	CHECK_OK(rf_worker_stream_create(eng, "w", 64, &w));
	for (int i = 0; i < G; i++) {
		struct rf_op_desc d = { .fn = slow_fn, .stream = w, .name = "slow",
					.bytes = bytes };
		CHECK_OK(rf_var_create(eng, "v", &v[i]));
		d.writes = &v[i];
		d.nwrites = 1;
		CHECK_OK(rf_engine_capture_begin(eng, NULL));
		for (unsigned k = 0; k < nops; k++)
			CHECK_OK(rf_engine_push(eng, &d));
		CHECK_OK(rf_engine_capture_end(eng, &g[i]));
		CHECK_EQ(rf_graph_size(g[i]), nops);
	}
	for (int i = 0; i < G; i++)
		CHECK_OK(rf_graph_launch(g[i], NULL, NULL, 0));
	CHECK_OK(rf_engine_wait_all(eng));
	rf_engine_get_stats(eng, &st);
	CHECK_EQ(st.inflight, 0u);
	CHECK_EQ(st.inflight_bytes, 0u);
	*seen = st.max_inflight_seen;
	*ran_at_once = atomic_load(&most_running);
	*cap_waits = st.cap_waits;
	for (int i = 0; i < G; i++) {
		rf_graph_destroy(g[i]);
		CHECK_OK(rf_var_destroy(eng, v[i], NULL, NULL, NULL));
	}
	close_engine(ring);
}

static void test_caps(void)
{
	struct rf_engine_opts bytes_cap = { .max_bytes = 1000 }, ops_cap = { .max_inflight = 3 };
	unsigned seen;
	int at_once;
	uint64_t waits;

	/* 800 bytes a launch, 1000 allowed: one launch at a time */
	caps_run(&bytes_cap, 1, 800, &seen, &at_once, &waits);
	CHECK_EQ(seen, 1u);
	CHECK_EQ(at_once, 1);
	CHECK(waits >= 7);
	/* 2 ops a launch, 3 allowed: one launch at a time (2 + 2 > 3) */
	caps_run(&ops_cap, 2, 0, &seen, &at_once, &waits);
	CHECK_EQ(seen, 2u);
	CHECK(waits >= 7);
	/* 5 ops a launch, 3 allowed: a launch over the cap goes alone */
	caps_run(&ops_cap, 5, 0, &seen, &at_once, &waits);
	CHECK_EQ(seen, 5u);
	fprintf(stderr, "  caps: a launch counts its ops and bytes in flight\n");
}

/* ---- what a callback may do while a push or a launch waits for room ---- */

static struct rf_var *room_v;
static struct rf_graph *room_g;
static int room_rc[3] = { 1, 1, 1 };

static void destroys_named(void *p, int status)
{
	(void)status;
	room_rc[(intptr_t)p] = rf_var_destroy(eng, room_v, NULL, NULL, NULL);
}

static void destroys_graph(void *p, int status)
{
	(void)p, (void)status;
	rf_graph_destroy(room_g);
}

static void test_room(void)
{
	struct rf_ring *ring;
	struct rf_engine_opts one = { .max_inflight = 1 };
	struct rf_stream *w;
	struct rf_var *a, *b;
	struct rf_graph *empty;
	struct rf_engine_stats st;
	struct rf_op_desc slow = { .fn = slow_write, .name = "slow" };

	open_engine(&ring, &one);
	CHECK_OK(rf_worker_stream_create(eng, "w", 16, &w));
	CHECK_OK(rf_var_create(eng, "a", &a));
	CHECK_OK(rf_var_create(eng, "b", &b));
	CHECK_OK(rf_var_create(eng, "v", &room_v));
	slow.stream = w;
	slow.writes = &a;
	slow.nwrites = 1;
	/* a push naming v waits for room; the slow op's done callback tries to destroy v */
	slow.done = destroys_named;
	slow.ctx = (void *)(intptr_t)0;
	CHECK_OK(rf_engine_push(eng, &slow));
	CHECK_OK(rf_engine_push_simple(eng, nop, NULL, &room_v, 1, &b, 1, NULL, "reads v"));
	CHECK_EQ(room_rc[0], -EBUSY);
	CHECK(strstr(rf_last_error(), "'v'") && strstr(rf_last_error(), "waits for room"));
	CHECK_OK(rf_engine_wait_all(eng));
	/* a launch binding v waits; the done callback tries again */
	CHECK_OK(rf_engine_capture_begin(eng, NULL));
	CHECK_OK(rf_engine_push_simple(eng, nop, NULL, &b, 1, NULL, 0, NULL, "reads b"));
	CHECK_OK(rf_engine_capture_end(eng, &room_g));
	slow.ctx = (void *)(intptr_t)1;
	CHECK_OK(rf_engine_push(eng, &slow));
	CHECK_OK(rf_graph_launch(room_g, NULL, &(struct rf_graph_bind){ b, room_v }, 1));
	CHECK_EQ(room_rc[1], -EBUSY);
	CHECK_OK(rf_engine_wait_all(eng));
	/* the graph destroyed by a callback while its launch waits: the launch fails */
	slow.done = destroys_graph;
	CHECK_OK(rf_engine_push(eng, &slow));
	CHECK_EQ(rf_graph_launch(room_g, NULL, NULL, 0), -EINVAL);
	CHECK(strstr(rf_last_error(), "destroyed while the launch waited"));
	CHECK_OK(rf_engine_wait_all(eng));
	/* an empty graph's launch counts one op: it waits behind the slow one */
	CHECK_OK(rf_engine_capture_begin(eng, NULL));
	CHECK_OK(rf_engine_capture_end(eng, &empty));
	slow.done = NULL;
	CHECK_OK(rf_engine_push(eng, &slow));
	rf_engine_get_stats(eng, &st);
	uint64_t waits = st.cap_waits;
	CHECK_OK(rf_graph_launch(empty, NULL, NULL, 0));
	rf_engine_get_stats(eng, &st);
	CHECK_EQ(st.cap_waits, waits + 1);
	CHECK_OK(rf_engine_wait_all(eng));
	rf_graph_destroy(empty);
	CHECK_OK(rf_var_destroy(eng, room_v, NULL, NULL, NULL));
	CHECK_OK(rf_var_destroy(eng, a, NULL, NULL, NULL));
	CHECK_OK(rf_var_destroy(eng, b, NULL, NULL, NULL));
	close_engine(ring);
	fprintf(stderr, "  room: no variable a waiting push names is destroyed under it\n");
}

/* ---- callbacks during a capture ---- */

static struct rf_var *cb_x, *cb_t, *cb_y;
static struct rf_graph *cb_pre;
static int nested_rc = 1, cb_rc = 1, cb_destroy_rc = 1, cb_clear_rc = 1, cb_launch_rc = 1,
	   cb_recorded_rc = 1, cb_end_rc = 1, ring_rc = 1, t_freed;

static void free_t(void *p)
{
	(void)p;
	t_freed++;
}

static int pushes_inside(void *p)
{
	(void)p;
	nested_rc = rf_engine_push_simple(eng, nop, NULL, &cb_x, 1, NULL, 0, NULL, "nested");
	return 0;
}

static void done_pushes(void *p, int status)
{
	struct rf_graph *g = NULL;

	(void)p;
	CHECK_EQ(status, 0);
	cb_rc = rf_engine_push_simple(eng, nop, NULL, &cb_x, 1, NULL, 0, NULL, "from done");
	cb_destroy_rc = rf_var_destroy(eng, cb_t, free_t, NULL, NULL);
	cb_clear_rc = rf_var_clear_error(eng, cb_x);
	cb_launch_rc = rf_graph_launch(cb_pre, NULL, NULL, 0);
	cb_recorded_rc = rf_var_destroy(eng, cb_y, NULL, NULL, NULL); /* the recording's */
	cb_end_rc = rf_engine_capture_end(eng, &g);
	CHECK(g == NULL);
}

/* an async op finished by a ring timer, whose callback pushes first */
static struct rf_op *ring_op;

static void on_timer(void *data, int64_t res)
{
	(void)data;
	CHECK_EQ(res, 0);
	ring_rc = rf_engine_push_simple(eng, nop, NULL, &cb_x, 1, NULL, 0, NULL, "from ring");
	rf_engine_op_done(ring_op, 0);
}

static int arms_timer(void *p, struct rf_op *op)
{
	(void)p;
	ring_op = op;
	return rf_ring_timeout(rf_engine_ring(eng), 2000000, on_timer, NULL, NULL);
}

static void test_callbacks(void)
{
	struct rf_ring *ring;
	struct rf_stream *w;
	struct rf_graph *g;
	struct rf_var *z;
	struct rf_op_desc a = { .fn = pushes_inside, .done = done_pushes, .name = "A" };
	struct rf_op_desc t = { .afn = arms_timer, .name = "timer" };

	open_engine(&ring, NULL);
	CHECK_OK(rf_worker_stream_create(eng, "w", 16, &w));
	CHECK_OK(rf_var_create(eng, "x", &cb_x));
	CHECK_OK(rf_var_create(eng, "t", &cb_t));
	CHECK_OK(rf_var_create(eng, "y", &cb_y));
	CHECK_OK(rf_var_create(eng, "z", &z));
	CHECK_OK(rf_engine_capture_begin(eng, NULL));
	CHECK_OK(rf_engine_push_simple(eng, nop, NULL, NULL, 0, &z, 1, NULL, "pre"));
	CHECK_OK(rf_engine_capture_end(eng, &cb_pre));
	/* W on a worker writes x; A (inline) reads it; an async op that a ring timer ends:
	 * all pending at capture_begin */
	CHECK_OK(rf_engine_push_simple(eng, slow_write, NULL, NULL, 0, &cb_x, 1, w, "W"));
	a.reads = &cb_x;
	a.nreads = 1;
	CHECK_OK(rf_engine_push(eng, &a));
	t.writes = &z;
	t.nwrites = 1;
	CHECK_OK(rf_engine_push(eng, &t));
	CHECK_OK(rf_engine_capture_begin(eng, NULL));
	CHECK_OK(rf_engine_push_simple(eng, nop, NULL, NULL, 0, &cb_y, 1, NULL, "recorded"));
	CHECK_OK(rf_engine_wait_idle(eng)); /* W, A, the timer and what they push run now */
	CHECK_EQ(nested_rc, 0);
	CHECK_EQ(cb_rc, 0);
	CHECK_EQ(cb_destroy_rc, 0);
	CHECK_EQ(cb_clear_rc, 0);
	CHECK_EQ(cb_launch_rc, 0);
	CHECK_EQ(cb_recorded_rc, -EBUSY);
	CHECK_EQ(cb_end_rc, -EBUSY);
	CHECK_EQ(ring_rc, 0);
	CHECK_OK(rf_engine_capture_end(eng, &g));
	CHECK_EQ(rf_graph_size(g), 1u);   /* "recorded" only */
	CHECK_EQ(nran, 4);                /* "nested", "from done", "pre", "from ring" ran */
	CHECK_EQ(t_freed, 1);
	CHECK_OK(rf_graph_launch(g, NULL, NULL, 0));
	CHECK_OK(rf_engine_wait_all(eng));
	CHECK_EQ(nran, 5);
	rf_graph_destroy(g);
	rf_graph_destroy(cb_pre);
	CHECK_OK(rf_var_destroy(eng, cb_x, NULL, NULL, NULL));
	CHECK_OK(rf_var_destroy(eng, cb_y, NULL, NULL, NULL));
	CHECK_OK(rf_var_destroy(eng, z, NULL, NULL, NULL));
	close_engine(ring);
	fprintf(stderr, "  callbacks: what the program before a capture pushes runs, not "
		"recorded\n");
}

/* ---- a refused push voids the capture ---- */

static int done_calls;

static int done_status;

static void count_done(void *p, int status)
{
	(void)p;
	done_status = status;
	done_calls++;
}

static void test_refused(void)
{
	struct rf_ring *ring;
	struct rf_graph *g = (struct rf_graph *)&g;
	struct rf_var *a;
	struct rf_op_desc ok = { .fn = nop, .done = count_done, .name = "ok" };

	open_engine(&ring, NULL);
	CHECK_OK(rf_var_create(eng, "a", &a));
	ok.writes = &a;
	ok.nwrites = 1;
	CHECK_OK(rf_engine_capture_begin(eng, &(struct rf_capture_opts){ .name = "step" }));
	CHECK_OK(rf_engine_push(eng, &ok));
	/* no function: refused, and the graph would not be the program */
	CHECK_EQ(rf_engine_push_simple(eng, NULL, NULL, NULL, 0, &a, 1, NULL, "bad"), -EINVAL);
	CHECK_EQ(rf_engine_push(eng, &ok), -EINVAL);
	CHECK(strstr(rf_last_error(), "'ok'") && strstr(rf_last_error(), "void"));
	CHECK_EQ(rf_engine_push(eng, NULL), -EINVAL);
	CHECK_EQ(done_calls, 0);
	CHECK_EQ(rf_engine_capture_end(eng, &g), -EINVAL);
	CHECK(g == NULL);
	CHECK(strstr(rf_last_error(), "step") && strstr(rf_last_error(), "no graph"));
	CHECK_EQ(done_calls, 1);          /* the recorded op's, once: it never runs */
	CHECK_EQ(done_status, -ECANCELED);
	CHECK_EQ(nran, 0);
	/* the next capture is whole */
	CHECK_OK(rf_engine_capture_begin(eng, NULL));
	CHECK_OK(rf_engine_push(eng, &ok));
	CHECK_OK(rf_engine_capture_end(eng, &g));
	CHECK_OK(rf_graph_launch(g, NULL, NULL, 0));
	CHECK_OK(rf_engine_wait_all(eng));
	CHECK_EQ(nran, 1);
	rf_graph_destroy(g);
	CHECK_EQ(done_calls, 2);
	CHECK_EQ(done_status, 0);
	CHECK_OK(rf_var_destroy(eng, a, NULL, NULL, NULL));
	close_engine(ring);
	fprintf(stderr, "  refused: a push refused while recording voids the capture\n");
}

/* ---- rf_var_destroy while recording: deferred to the capture's end ---- */

static int deferred_freed;

static void count_free(void *p)
{
	(void)p;
	deferred_freed++;
}

static void test_deferred(void)
{
	struct rf_ring *ring;
	struct rf_graph *g = (struct rf_graph *)&g;
	struct rf_var *a, *tmp, *used;

	open_engine(&ring, NULL);
	CHECK_OK(rf_var_create(eng, "a", &a));
	CHECK_OK(rf_var_create(eng, "tmp", &tmp));
	CHECK_OK(rf_var_create(eng, "used", &used));
	/* a variable the recording does not name: freed once the capture ends */
	CHECK_OK(rf_engine_capture_begin(eng, NULL));
	CHECK_OK(rf_engine_push_simple(eng, nop, NULL, NULL, 0, &a, 1, NULL, "a"));
	CHECK_OK(rf_var_destroy(eng, tmp, count_free, NULL, NULL));
	CHECK_EQ(rf_var_destroy(eng, tmp, count_free, NULL, NULL), -EINVAL); /* twice */
	/* a push naming it after: refused, and the capture void */
	CHECK_EQ(deferred_freed, 0);
	CHECK_OK(rf_engine_capture_end(eng, &g));
	CHECK_EQ(rf_graph_size(g), 1u);
	CHECK_OK(rf_engine_wait_all(eng));
	CHECK_EQ(deferred_freed, 1);
	rf_graph_destroy(g);
	/* one it names: the graph would launch on a freed variable -- no graph */
	CHECK_OK(rf_engine_capture_begin(eng, &(struct rf_capture_opts){ .name = "uses" }));
	CHECK_OK(rf_engine_push_simple(eng, nop, NULL, &used, 1, &a, 1, NULL, "reads used"));
	CHECK_OK(rf_var_destroy(eng, used, count_free, NULL, NULL));
	CHECK_EQ(rf_engine_capture_end(eng, &g), -EBUSY);
	CHECK(g == NULL && strstr(rf_last_error(), "'used'") && strstr(rf_last_error(), "uses"));
	CHECK_OK(rf_engine_wait_all(eng));
	CHECK_EQ(deferred_freed, 2);      /* destroyed all the same, as asked */
	/* destroyed, then named by a push: refused (it is being destroyed), the capture void */
	CHECK_OK(rf_var_create(eng, "late", &used));
	CHECK_OK(rf_engine_capture_begin(eng, NULL));
	CHECK_OK(rf_var_destroy(eng, used, count_free, NULL, NULL));
	CHECK_EQ(rf_engine_push_simple(eng, nop, NULL, &used, 1, NULL, 0, NULL, "late"), -EINVAL);
	CHECK_EQ(rf_engine_capture_end(eng, &g), -EINVAL);
	CHECK_OK(rf_engine_wait_all(eng));
	CHECK_EQ(deferred_freed, 3);
	/* the engine destroyed mid-capture: the deferred deletion runs */
	CHECK_OK(rf_var_create(eng, "last", &used));
	CHECK_OK(rf_engine_capture_begin(eng, NULL));
	CHECK_OK(rf_var_destroy(eng, used, count_free, NULL, NULL));
	CHECK_OK(rf_var_destroy(eng, a, NULL, NULL, NULL));
	close_engine(ring);
	CHECK_EQ(deferred_freed, 4);
	fprintf(stderr, "  deferred: a variable destroyed while recording goes at the end\n");
}

/* ---- wide ops ---- */

#define WIDE 5000
static uint32_t wide_val[WIDE];
static int wide_seen;

static int wide_write(void *p)
{
	for (int i = 0; i < WIDE; i++)
		wide_val[i]++;
	(void)p;
	return 0;
}

static int wide_read(void *p)
{
	(void)p;
	wide_seen = (int)wide_val[WIDE - 1];
	return 0;
}

static void test_wide(void)
{
	struct rf_ring *ring;
	struct rf_stream *w;
	struct rf_graph *g;
	static struct rf_var *v[WIDE], *rw[2 * WIDE];
	struct rf_op_desc d = { .fn = wide_write, .name = "wide" };

	open_engine(&ring, NULL);
	CHECK_OK(rf_worker_stream_create(eng, "w", 16, &w));
	for (int i = 0; i < WIDE; i++)
		CHECK_OK(rf_var_create(eng, "v", &v[i]));
	for (int i = 0; i < WIDE; i++) /* every variable read twice, written once */
		rw[2 * i] = rw[2 * i + 1] = v[WIDE - 1 - i];
	d.reads = rw;
	d.nreads = 2 * WIDE;
	d.writes = v;
	d.nwrites = WIDE;
	d.stream = w;
	CHECK_OK(rf_engine_capture_begin(eng, NULL));
	CHECK_OK(rf_engine_push(eng, &d));
	/* reads the last variable: after "wide", on another stream */
	CHECK_OK(rf_engine_push_simple(eng, wide_read, NULL, &v[WIDE - 1], 1, NULL, 0, NULL,
				       "reader"));
	CHECK_OK(rf_engine_capture_end(eng, &g));
	for (int k = 1; k <= 3; k++) {
		CHECK_OK(rf_graph_launch(g, NULL, NULL, 0));
		CHECK_OK(rf_engine_wait_all(eng));
		CHECK_EQ(wide_seen, k);
	}
	rf_graph_destroy(g);
	for (int i = 0; i < WIDE; i++)
		CHECK_OK(rf_var_destroy(eng, v[i], NULL, NULL, NULL));
	close_engine(ring);
	fprintf(stderr, "  wide: %d variables read twice and written, recorded once each\n",
		WIDE);
}

/* ---- a launch from inside an inline op ---- */

static struct rf_graph *inner;
static int launch_rc = 1;

static int launches(void *p)
{
	(void)p;
	launch_rc = rf_graph_launch(inner, NULL, NULL, 0);
	return 0;
}

static void test_nested(void)
{
	struct rf_ring *ring;
	struct rf_var *a;

	open_engine(&ring, NULL);
	CHECK_OK(rf_var_create(eng, "a", &a));
	CHECK_OK(rf_engine_capture_begin(eng, NULL));
	CHECK_OK(rf_engine_push_simple(eng, nop, NULL, NULL, 0, &a, 1, NULL, "inner"));
	CHECK_OK(rf_engine_capture_end(eng, &inner));
	CHECK_OK(rf_engine_push_simple(eng, launches, NULL, &a, 1, NULL, 0, NULL, "launcher"));
	CHECK_OK(rf_engine_wait_all(eng));
	CHECK_EQ(launch_rc, 0);
	CHECK_EQ(nran, 1);
	rf_graph_destroy(inner);
	CHECK_OK(rf_var_destroy(eng, a, NULL, NULL, NULL));
	close_engine(ring);
	fprintf(stderr, "  nested: a launch from inside an inline op\n");
}

/* ---- the poison rule ---- */

static void test_poison(void)
{
	struct rf_ring *ring;
	struct rf_var *x, *y;
	const char *who;
	struct rf_op_desc always = { .fn = nop, .flags = RF_OP_ALWAYS, .name = "always" };
	struct rf_op_desc over = { .fn = fail_enospc, .flags = RF_OP_OVERWRITE, .name = "over" };
	struct rf_op_desc clear = { .fn = nop, .flags = RF_OP_OVERWRITE, .name = "clear" };

	for (int sync = 0; sync < 2; sync++) {
		struct rf_engine_opts o = { .sync = sync };
		open_engine(&ring, &o);
		CHECK_OK(rf_var_create(eng, "x", &x));
		CHECK_OK(rf_var_create(eng, "y", &y));
		CHECK_OK(rf_engine_push_simple(eng, fail_eio, NULL, NULL, 0, &x, 1, NULL, "first"));
		always.writes = &x;
		always.nwrites = 1;
		CHECK_OK(rf_engine_push(eng, &always));
		CHECK_EQ(rf_engine_wait_var(eng, x), -EIO);
		CHECK_EQ(rf_var_error(x, &who), -EIO);
		CHECK(strcmp(who, "first") == 0);
		CHECK_OK(rf_engine_push_simple(eng, fail_eio, NULL, NULL, 0, &y, 1, NULL, "a"));
		over.writes = &y;
		over.nwrites = 1;
		CHECK_OK(rf_engine_push(eng, &over));
		CHECK_EQ(rf_engine_wait_var(eng, y), -EIO);
		CHECK(rf_var_error(y, &who) == -EIO && strcmp(who, "a") == 0);
		clear.writes = &y;
		clear.nwrites = 1;
		CHECK_OK(rf_engine_push(eng, &clear));
		CHECK_OK(rf_engine_wait_var(eng, y));
		CHECK_EQ(rf_engine_wait_all(eng), -EIO);
		CHECK_OK(rf_var_destroy(eng, x, NULL, NULL, NULL));
		CHECK_OK(rf_var_destroy(eng, y, NULL, NULL, NULL));
		close_engine(ring);
	}
	fprintf(stderr, "  poison: the first error stays until an overwrite succeeds\n");
}

int main(int argc, char **argv)
{
	static const struct { const char *name; void (*fn)(void); } t[] = {
		{ "caps", test_caps }, { "room", test_room }, { "callbacks", test_callbacks },
		{ "refused", test_refused }, { "deferred", test_deferred }, { "wide", test_wide },
		{ "nested", test_nested },
		{ "poison", test_poison },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) /* argv[1]: that one alone */
		if (argc < 2 || strcmp(argv[1], t[i].name) == 0)
			t[i].fn();
	return 0;
}
