/* test-engine-errors: failure and refusal. An op that returns -errno poisons the
 * variables it mutates with that error and its name; ops that depend on them are
 * skipped (their functions never run) and pass the poison on; deletions still run;
 * rf_engine_wait_var and rf_engine_wait_all both return the error; clearing the
 * error lets the variable be used again. A poisoned chain on one worker stream whose
 * consumers were already enqueued (stream chaining) is reported as failed too. A
 * wait called from inside an op is refused with -EDEADLK instead of hanging. Bad
 * descriptors are rejected with -EINVAL. */
#include <errno.h>
#include <stdint.h>

#include "engine.h"
#include "log.h"
#include "../test-util.h"

static struct rf_engine *e;
static int ran_after, deleted, wait_inside_ret = 1;

static int fail_fn(void *p)
{
	(void)p;
	return -EIO;
}
static int mark_fn(void *p)
{
	(void)p;
	ran_after++;
	return 0;
}
static void del_fn(void *p)
{
	(void)p;
	deleted++;
}
static char wait_msg[512]; /* the refused wait's rf_last_error(), on its thread */
static int waiter_fn(void *p)
{
	wait_inside_ret = rf_engine_wait_all(e);
	snprintf(wait_msg, sizeof(wait_msg), "%s", rf_last_error());
	(void)p;
	return 0;
}
static int waiter_var_fn(void *p)
{
	wait_inside_ret = rf_engine_wait_var(e, p);
	snprintf(wait_msg, sizeof(wait_msg), "%s", rf_last_error());
	return 0;
}

int main(void)
{
	struct rf_ring *ring;
	struct rf_stream *w;
	struct rf_engine_stats es;
	const char *who = NULL;

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = 0 }));
	CHECK_OK(rf_worker_stream_create(e, "w", 0, &w));

	{
		struct rf_var *a, *b, *c;
		CHECK_EQ(rf_var_create(e, "a", &a), 0);
		CHECK_EQ(rf_var_create(e, "b", &b), 0);
		CHECK_EQ(rf_var_create(e, "c", &c), 0);
		CHECK_OK(rf_engine_push_simple(e, fail_fn, NULL, NULL, 0, &a, 1, w, "loader_read"));
		CHECK_OK(rf_engine_push_simple(e, mark_fn, NULL, &a, 1, &b, 1, NULL, "decode"));
		CHECK_OK(rf_engine_push_simple(e, mark_fn, NULL, &b, 1, &c, 1, w, "forward"));
		CHECK_OK(rf_var_destroy(e, b, del_fn, NULL, NULL));
		CHECK_EQ(rf_engine_wait_var(e, c), -EIO);
		CHECK_EQ(rf_var_error(c, &who), -EIO);
		CHECK(who && strcmp(who, "loader_read") == 0);
		CHECK_EQ(rf_engine_wait_all(e), -EIO);
		CHECK_EQ(rf_engine_wait_all(e), 0); /* reported once */
		CHECK_EQ(ran_after, 0);
		CHECK_EQ(deleted, 1);
		rf_engine_get_stats(e, &es);
		CHECK_EQ(es.failed, 1);
		CHECK(es.skipped >= 2);
		/* clearing lets a var be written and read again */
		CHECK_OK(rf_var_clear_error(e, c));
		CHECK_OK(rf_engine_push_simple(e, mark_fn, NULL, NULL, 0, &c, 1, w, "rewrite"));
		CHECK_EQ(rf_engine_wait_var(e, c), 0);
		CHECK_EQ(ran_after, 1);
		rf_var_destroy(e, a, NULL, NULL, NULL);
		rf_var_destroy(e, c, NULL, NULL, NULL);
		fprintf(stderr, "error propagation, skipping, deletion: ok\n");
	}
	{ /* an overwrite runs on a poisoned variable and, succeeding, heals it; a read of
	   * a poisoned variable still skips it */
		struct rf_var *a, *bad;
		CHECK_EQ(rf_var_create(e, "slot", &a), 0);
		CHECK_EQ(rf_var_create(e, "bad", &bad), 0);
		struct rf_op_desc d = { .fn = mark_fn, .writes = &a, .nwrites = 1, .stream = w,
					.name = "refill", .flags = RF_OP_OVERWRITE };
		ran_after = 0;
		CHECK_OK(rf_engine_push_simple(e, fail_fn, NULL, NULL, 0, &a, 1, w, "read"));
		CHECK_OK(rf_engine_push_simple(e, fail_fn, NULL, NULL, 0, &bad, 1, w, "other"));
		CHECK_EQ(rf_engine_wait_var(e, a), -EIO);
		CHECK_OK(rf_engine_push(e, &d));
		CHECK_EQ(rf_engine_wait_var(e, a), 0);
		CHECK_EQ(ran_after, 1);
		d.reads = &bad;
		d.nreads = 1;
		CHECK_OK(rf_engine_push(e, &d));
		CHECK_EQ(rf_engine_wait_var(e, a), -EIO); /* skipped, poisoned by 'other' */
		CHECK_EQ(ran_after, 1);
		CHECK(rf_engine_wait_all(e) == -EIO);
		rf_var_destroy(e, a, NULL, NULL, NULL);
		rf_var_destroy(e, bad, NULL, NULL, NULL);
		fprintf(stderr, "overwrite heals poison: ok\n");
	}
	{ /* chained consumers on the failing op's own stream */
		struct rf_var *a, *b;
		CHECK_EQ(rf_var_create(e, "a", &a), 0);
		CHECK_EQ(rf_var_create(e, "b", &b), 0);
		ran_after = 0;
		CHECK_OK(rf_engine_push_simple(e, fail_fn, NULL, NULL, 0, &a, 1, w, "gemm"));
		CHECK_OK(rf_engine_push_simple(e, mark_fn, NULL, &a, 1, &b, 1, w, "relu"));
		CHECK_EQ(rf_engine_wait_var(e, b), -EIO);
		CHECK_EQ(rf_var_error(b, &who), -EIO);
		CHECK(strcmp(who, "gemm") == 0);
		CHECK_EQ(rf_engine_wait_all(e), -EIO);
		rf_var_destroy(e, a, NULL, NULL, NULL);
		rf_var_destroy(e, b, NULL, NULL, NULL);
		fprintf(stderr, "poison through a chained stream: ok\n");
	}
	{ /* waits from inside ops are refused */
		struct rf_var *a;
		rf_var_create(e, "a", &a);
		CHECK_OK(rf_engine_push_simple(e, waiter_fn, NULL, NULL, 0, &a, 1, NULL, "waits-inline"));
		CHECK_EQ(rf_engine_wait_all(e), 0);
		CHECK_EQ(wait_inside_ret, -EDEADLK);
		CHECK(strstr(wait_msg, "rf_engine_wait_all called from inside an engine op"));
		wait_inside_ret = 1;
		CHECK_OK(rf_engine_push_simple(e, waiter_var_fn, a, NULL, 0, NULL, 0, w, "waits-worker"));
		CHECK_EQ(rf_engine_wait_all(e), 0);
		CHECK_EQ(wait_inside_ret, -EDEADLK);
		CHECK(strstr(wait_msg, "rf_engine_wait_var called from a thread other than"));
		rf_var_destroy(e, a, NULL, NULL, NULL);
		fprintf(stderr, "wait inside op refused: ok\n");
	}
	{ /* bad descriptors */
		struct rf_var *a;
		rf_var_create(e, "a", &a);
		struct rf_op_desc d = { 0 };
		CHECK_EQ(rf_engine_push(e, &d), -EINVAL);             /* no function */
		d.fn = mark_fn;
		d.nreads = 1;                                         /* reads == NULL */
		CHECK_EQ(rf_engine_push(e, &d), -EINVAL);
		d.nreads = 0;
		d.writes = (struct rf_var *[]){ NULL };
		d.nwrites = 1;
		CHECK_EQ(rf_engine_push(e, &d), -EINVAL);
		CHECK_EQ(rf_engine_push(NULL == e ? e : e, NULL), -EINVAL);
		rf_var_destroy(e, a, NULL, NULL, NULL);
	}
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
