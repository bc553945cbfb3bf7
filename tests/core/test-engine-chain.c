/* test-engine-chain: cross-stream chaining through a stream's `chain` hook (what CUDA
 * streams of one GPU do with events). Two facade streams share one in-order executor
 * (a worker stream), the way two CUDA streams share a GPU that can order one after
 * the other; their chain hook accepts each other as producers. A consumer on facade B
 * of a producer on facade A must then be enqueued before the producer finished (the
 * engine counts it chained, and the hook is called once with A and the producer's
 * sequence number), and still see the producer's result -- also when the consumer
 * was queued first and the producer dispatched later, alone or in a graph launch: the
 * hook, as CUDA's, refuses a seq its producer stream has not been given yet. A stream
 * without the hook (a plain worker) must wait for the producer's completion instead. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "stream.h"
#include "../test-util.h"

static struct rf_stream *executor;
static int chain_calls;
static struct rf_stream *chain_from;
static uint64_t chain_seq;

struct facade {
	struct rf_stream s;
	struct rf_stream *peer;
	uint64_t enqueued;      /* the last seq its enqueue was called for */
};

static int refused(void *p) /* an op the facades refuse to enqueue (-EIO) */
{
	(void)p;
	return 0;
}

static int facade_enqueue(struct rf_stream *s, struct rf_op *op)
{
	struct facade *f = s->ctx;
	rf_op_fn fn;
	void *ctx;

	rf_op_fn_ctx(op, &fn, &ctx);
	if (fn == refused)
		return -EIO;
	f->enqueued = s->seq; /* the engine numbers an op (s->seq) before enqueuing it */
	return executor->ops->enqueue(executor, op); /* one in-order executor for both */
}

static int facade_chain(struct rf_stream *s, struct rf_stream *producer, uint64_t seq)
{
	struct facade *f = s->ctx;

	if (producer != f->peer)
		return -ENOTSUP;
	/* as CUDA's hook: it can wait only for what the producer stream has been given
	 * (an event is recorded when the op is enqueued) */
	if (seq > ((struct facade *)producer->ctx)->enqueued)
		return -ENOTSUP;
	chain_calls++;
	chain_from = producer;
	chain_seq = seq;
	return 0; /* the shared executor already runs in enqueue order */
}

static void facade_destroy(struct rf_stream *s)
{
	free(s->ctx);
}

static const struct rf_stream_ops facade_ops = {
	/* .enqueue = */ facade_enqueue,
	/* .chain   = */ facade_chain,
	/* .destroy = */ facade_destroy,
};

static struct facade *facade_new(struct rf_engine *e, const char *name)
{
	struct facade *f = calloc(1, sizeof(*f));

	CHECK(f);
	f->s.ops = &facade_ops;
	f->s.ctx = f;
	f->s.name = name;
	f->s.flags = RF_STREAM_IN_ORDER;
	CHECK_OK(rf_engine_add_stream(e, &f->s));
	return f;
}

static _Atomic int x, y, z;
static int produce(void *p)
{
	(void)p;
	usleep(30000);
	atomic_store(&x, 42);
	return 0;
}
static int consume(void *p)
{
	(void)p;
	atomic_store(&y, atomic_load(&x) + 1);
	return 0;
}
static int slow(void *p)
{
	(void)p;
	usleep(30000);
	return 0;
}
static _Atomic int ran_after_refused;
static int count_run(void *p)
{
	(void)p;
	atomic_fetch_add(&ran_after_refused, 1);
	return 0;
}
static int consume_plain(void *p)
{
	(void)p;
	atomic_store(&z, atomic_load(&x) + 2);
	return 0;
}

int main(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_stream *plain;
	struct facade *a, *b;
	struct rf_var *xv, *yv, *zv;
	struct rf_engine_stats st0, st1;
	uint64_t producer_seq;

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = 0 }));
	CHECK_OK(rf_worker_stream_create(e, "executor", 0, &executor));
	CHECK_OK(rf_worker_stream_create(e, "plain", 0, &plain));
	a = facade_new(e, "A");
	b = facade_new(e, "B");
	a->peer = &b->s;
	b->peer = &a->s;
	rf_var_create(e, "x", &xv);
	rf_var_create(e, "y", &yv);
	rf_var_create(e, "z", &zv);

	rf_engine_get_stats(e, &st0);
	CHECK_OK(rf_engine_push_simple(e, produce, NULL, NULL, 0, &xv, 1, &a->s, "produce"));
	producer_seq = a->s.seq;
	CHECK_OK(rf_engine_push_simple(e, consume, NULL, &xv, 1, &yv, 1, &b->s, "consume"));
	rf_engine_get_stats(e, &st1);
	CHECK_EQ(st1.chained - st0.chained, 1);      /* enqueued before the producer ended */
	CHECK_EQ(chain_calls, 1);
	CHECK(chain_from == &a->s);
	CHECK_EQ(chain_seq, producer_seq);
	CHECK_OK(rf_engine_push_simple(e, consume_plain, NULL, &xv, 1, &zv, 1, plain, "plain"));
	rf_engine_get_stats(e, &st0);
	CHECK_EQ(st0.chained, st1.chained);          /* no hook: waits for completion */
	CHECK_EQ(rf_engine_wait_all(e), 0);
	CHECK_EQ(atomic_load(&y), 43);
	CHECK_EQ(atomic_load(&z), 44);

	/* the pushed-back-to-back case again, with the consumer's var already queued
	 * behind other work on B: chaining still keeps the order */
	atomic_store(&x, 0);
	CHECK_OK(rf_engine_push_simple(e, consume, NULL, &xv, 1, &yv, 1, &b->s, "consume0"));
	CHECK_OK(rf_engine_push_simple(e, produce, NULL, NULL, 0, &xv, 1, &a->s, "produce"));
	CHECK_OK(rf_engine_push_simple(e, consume, NULL, &xv, 1, &yv, 1, &b->s, "consume"));
	CHECK_EQ(rf_engine_wait_var(e, yv), 0);
	CHECK_EQ(atomic_load(&y), 43);

	/* The consumer queued before its producer is dispatched: it is chained when the
	 * producer goes to its stream, and the hook must then see the producer enqueued
	 * (it was called before the enqueue once, and CUDA's hook refused every such
	 * chain). Here the producer waits for a slow op on the plain stream. */
	atomic_store(&x, 0);
	atomic_store(&y, 0);
	chain_calls = 0;
	rf_engine_get_stats(e, &st0);
	CHECK_OK(rf_engine_push_simple(e, slow, NULL, NULL, 0, &zv, 1, plain, "slow"));
	CHECK_OK(rf_engine_push_simple(e, produce, NULL, &zv, 1, &xv, 1, &a->s, "produce"));
	CHECK_OK(rf_engine_push_simple(e, consume, NULL, &xv, 1, &yv, 1, &b->s, "consume"));
	CHECK_EQ(rf_engine_wait_var(e, yv), 0);
	rf_engine_get_stats(e, &st1);
	CHECK_EQ(atomic_load(&y), 43);
	CHECK_EQ(chain_calls, 1);
	CHECK_EQ(st1.chained - st0.chained, 1);

	/* An op its stream refuses (enqueue -> -EIO) is not chained behind: its
	 * consumer on the same stream waits for the failure and is skipped, never run
	 * (it used to be granted before the enqueue, and ran behind nothing). */
	{
		struct rf_var *w;

		rf_var_create(e, "w", &w);
		rf_engine_get_stats(e, &st0);
		CHECK_OK(rf_engine_push_simple(e, slow, NULL, NULL, 0, &zv, 1, plain, "slow"));
		CHECK_OK(rf_engine_push_simple(e, refused, NULL, &zv, 1, &w, 1, &a->s, "refused"));
		CHECK_OK(rf_engine_push_simple(e, count_run, NULL, &w, 1, &yv, 1, &a->s, "after"));
		CHECK_EQ(rf_engine_wait_var(e, yv), -EIO);
		rf_engine_get_stats(e, &st1);
		CHECK_EQ(atomic_load(&ran_after_refused), 0);
		CHECK_EQ(st1.chained, st0.chained);
		rf_var_clear_error(e, yv);
		rf_var_destroy(e, w, NULL, NULL, NULL);
	}

	/* The same inside a graph: a captured producer on A and its consumer on B. At
	 * each launch the consumer chains behind the producer once that is enqueued. */
	{
		struct rf_graph *g;
		int i;

		CHECK_OK(rf_engine_capture_begin(e, NULL));
		CHECK_OK(rf_engine_push_simple(e, produce, NULL, NULL, 0, &xv, 1, &a->s, "gproduce"));
		CHECK_OK(rf_engine_push_simple(e, consume, NULL, &xv, 1, &yv, 1, &b->s, "gconsume"));
		CHECK_OK(rf_engine_capture_end(e, &g));
		for (i = 0; i < 3; i++) {
			atomic_store(&x, 0);
			atomic_store(&y, 0);
			chain_calls = 0;
			rf_engine_get_stats(e, &st0);
			CHECK_OK(rf_graph_launch(g, NULL, NULL, 0));
			CHECK_EQ(rf_engine_wait_var(e, yv), 0);
			rf_engine_get_stats(e, &st1);
			CHECK_EQ(atomic_load(&y), 43);
			CHECK_EQ(chain_calls, 1);
			CHECK(chain_from == &a->s);
			CHECK_EQ(chain_seq, a->s.seq); /* the launch's producer, A's latest */
			CHECK(st1.chained - st0.chained >= 1);
		}
		rf_graph_destroy(g);
	}

	rf_var_destroy(e, xv, NULL, NULL, NULL);
	rf_var_destroy(e, yv, NULL, NULL, NULL);
	rf_var_destroy(e, zv, NULL, NULL, NULL);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
