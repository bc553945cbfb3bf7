/* test-engine-shared: worker streams that share a thread
 * (rf_worker_stream_create_shared; core/README.md, "Worker streams sharing a thread").
 *  - ops of the streams on one thread run on that thread, one at a time: independent
 *    ops pushed to both never overlap (an op that finds another inside fails), and a
 *    thread-local value one stream's op leaves is what the other's op finds;
 *  - each stream keeps its own order, and a chain that crosses them at every edge
 *    gives every op its turn;
 *  - streams come and go on a live thread: 300 rounds add one, run ops on it and its
 *    neighbours, and destroy it, as the thread spins, sleeps or has just run an op of
 *    another stream (a thread that kept a pointer to a removed queue would be caught
 *    by ASan, a race on it by TSan); the stream a thread was made for can go first,
 *    and the others run on, the thread named after one of them ("rf-keep": it kept
 *    "rf-base" before);
 *  - bad arguments are refused with -EINVAL and a message naming them: `with` NULL,
 *    not a worker stream, another engine's; the 33rd live stream on one thread;
 *  - an engine destroyed with shared streams alive frees them and the thread (ASan's
 *    LeakSanitizer would say otherwise). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "engine.h"
#include "log.h"
#include "stream.h"
#include "../test-util.h"

static _Atomic int inside;      /* ops running now */
static _Atomic int overlaps;    /* ops that found another one running */
static __thread int tls_mark;

struct rec {
	pthread_t thread;
	int stream, seq;
	int mark_seen;
};

struct rec_ctx {
	struct rec *r;
	int stream, seq, set_mark;
	_Atomic int *next;   /* where this op records, in completion order */
	struct rec *log;
};

static void spin_us(long us)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static int rec_fn(void *p)
{
	struct rec_ctx *c = p;
	int i;

	if (atomic_fetch_add(&inside, 1) != 0)
		atomic_fetch_add(&overlaps, 1);
	spin_us(50);
	i = atomic_fetch_add(c->next, 1);
	c->log[i].thread = pthread_self();
	c->log[i].stream = c->stream;
	c->log[i].seq = c->seq;
	c->log[i].mark_seen = tls_mark;
	if (c->set_mark)
		tls_mark = 1234;
	atomic_fetch_sub(&inside, 1);
	return 0;
}

/* Independent ops on two streams of one thread: one at a time, on one thread, each
 * stream in its order; the thread-local mark set by stream 0's first op is seen by
 * every later op. */
static void one_at_a_time(struct rf_ring *r)
{
	enum { N = 200 };
	struct rf_engine *e;
	struct rf_stream *s[2];
	static struct rec log[2 * N];
	static struct rec_ctx ctx[2 * N];
	_Atomic int next = 0;
	int last[2] = { -1, -1 };

	CHECK_OK(rf_engine_create(&e, r, NULL));
	CHECK_OK(rf_worker_stream_create(e, "a", 0, &s[0]));
	CHECK_OK(rf_worker_stream_create_shared(e, "b", 0, s[0], &s[1]));
	CHECK(strcmp(rf_stream_name(s[1]), "b") == 0);
	/* the mark first, alone */
	ctx[0] = (struct rec_ctx){ .stream = 0, .seq = -1, .set_mark = 1, .next = &next, .log = log };
	CHECK_OK(rf_engine_push_simple(e, rec_fn, &ctx[0], NULL, 0, NULL, 0, s[0], "mark"));
	CHECK_OK(rf_engine_wait_all(e));
	atomic_store(&next, 0);
	for (int i = 0; i < 2 * N; i++) {
		ctx[i] = (struct rec_ctx){ .stream = i & 1, .seq = i >> 1, .next = &next, .log = log };
		CHECK_OK(rf_engine_push_simple(e, rec_fn, &ctx[i], NULL, 0, NULL, 0, s[i & 1], "op"));
	}
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(atomic_load(&next), 2 * N);
	CHECK_EQ(atomic_load(&overlaps), 0);
	for (int i = 0; i < 2 * N; i++) {
		CHECK(pthread_equal(log[i].thread, log[0].thread));
		CHECK(!pthread_equal(log[i].thread, pthread_self()));
		CHECK_EQ(log[i].mark_seen, 1234);
		CHECK_EQ(log[i].seq, last[log[i].stream] + 1);
		last[log[i].stream] = log[i].seq;
	}
	rf_engine_destroy(e);
	printf("  %d independent ops on two streams of one thread: one at a time, in order\n",
	       2 * N);
}

static int bump(void *p)
{
	atomic_fetch_add((_Atomic long *)p, 1);
	return 0;
}

/* check that x, a counter that each op of a chain increments, reads i when op i runs */
struct link {
	_Atomic long *x;
	long want;
	_Atomic int *bad;
};

static int link_fn(void *p)
{
	struct link *l = p;

	if (atomic_load(l->x) != l->want)
		atomic_fetch_add(l->bad, 1);
	atomic_fetch_add(l->x, 1);
	return 0;
}

/* A chain whose every edge crosses between three streams of one thread. */
static void crossing_chain(struct rf_ring *r)
{
	enum { N = 3000 };
	struct rf_engine *e;
	struct rf_stream *s[3];
	static struct rf_var *v[N];
	static struct link l[N];
	_Atomic long x = 0;
	_Atomic int bad = 0;

	CHECK_OK(rf_engine_create(&e, r, NULL));
	CHECK_OK(rf_worker_stream_create(e, "c0", 8, &s[0]));
	CHECK_OK(rf_worker_stream_create_shared(e, "c1", 8, s[0], &s[1]));
	CHECK_OK(rf_worker_stream_create_shared(e, "c2", 8, s[1], &s[2]));
	for (int i = 0; i < N; i++) {
		l[i] = (struct link){ &x, i, &bad };
		CHECK_OK(rf_var_create(e, NULL, &v[i]));
		CHECK_OK(rf_engine_push_simple(e, link_fn, &l[i], i ? &v[i - 1] : NULL, i ? 1 : 0,
					       &v[i], 1, s[i % 3], "link"));
	}
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(atomic_load(&x), N);
	CHECK_EQ(atomic_load(&bad), 0);
	for (int i = 0; i < N; i++)
		rf_var_destroy(e, v[i], NULL, NULL, NULL);
	rf_engine_destroy(e);
	printf("  a chain of %d ops across three streams of one thread (capacity 8 each)\n", N);
}

/* Streams come and go while the thread lives; then the first stream goes first. */
static void come_and_go(struct rf_ring *r)
{
	enum { ROUNDS = 300 };
	struct rf_engine *e;
	struct rf_stream *base, *keep, *tmp;
	_Atomic long n = 0;
	long want = 0;

	CHECK_OK(rf_engine_create(&e, r, NULL));
	CHECK_OK(rf_worker_stream_create(e, "base", 0, &base));
	CHECK_OK(rf_worker_stream_create_shared(e, "keep", 0, base, &keep));
	for (int i = 0; i < ROUNDS; i++) {
		char nm[16];

		snprintf(nm, sizeof(nm), "tmp%d", i);
		CHECK_OK(rf_worker_stream_create_shared(e, nm, 4, i & 1 ? keep : base, &tmp));
		for (int k = 0; k < 1 + i % 7; k++) {
			CHECK_OK(rf_engine_push_simple(e, bump, &n, NULL, 0, NULL, 0, tmp, "t"));
			CHECK_OK(rf_engine_push_simple(e, bump, &n, NULL, 0, NULL, 0,
						       k & 1 ? base : keep, "b"));
			want += 2;
		}
		switch (i % 3) {
		case 0: /* at once: the thread has just run the last op, or spins */
			break;
		case 1: /* the engine idle, the thread spinning or going to sleep */
			CHECK_OK(rf_engine_wait_all(e));
			break;
		default: /* the thread asleep: its spin is at most a few ms */
			CHECK_OK(rf_engine_wait_all(e));
			spin_us(i % 2 ? 3000 : 200);
			break;
		}
		rf_stream_destroy(tmp); /* waits for the engine's work first */
		CHECK_EQ(atomic_load(&n), want);
	}
	/* the stream the thread was made for goes first; the other still runs, on a
	 * thread that now carries its name */
	CHECK_EQ(t_threads_named("rf-base", 0), 1);
	CHECK_EQ(t_threads_named("rf-keep", 0), 0);
	rf_stream_destroy(base);
	CHECK_EQ(t_threads_named("rf-base", 0), 0);
	CHECK_EQ(t_threads_named("rf-keep", 0), 1);
	for (int k = 0; k < 100; k++)
		CHECK_OK(rf_engine_push_simple(e, bump, &n, NULL, 0, NULL, 0, keep, "after"));
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(atomic_load(&n), want + 100);
	rf_stream_destroy(keep);
	rf_engine_destroy(e);
	printf("  %d streams added to and removed from a live thread; its first stream "
	       "destroyed first\n", ROUNDS);
}

/* the call's result is read after it returns: `out` as an argument beside the call
 * could be read before it */
#define REFUSED(what, call, n1, n2) do { \
		out = (struct rf_stream *)&out; \
		int ret_ = (call); \
		refused(what, ret_, out, n1, n2); \
	} while (0)

static void refused(const char *what, int ret, struct rf_stream *out, const char *n1,
		    const char *n2)
{
	const char *m = rf_last_error();

	printf("  %-30s -> %d: %s\n", what, ret, m);
	CHECK_EQ(ret, -EINVAL);
	CHECK(out == NULL);
	CHECK(strstr(m, n1) && (!n2 || strstr(m, n2)));
}

static void bad_args(struct rf_ring *r)
{
	struct rf_engine *e, *e2;
	struct rf_stream *w, *w2, *out, *s[32];

	CHECK_OK(rf_engine_create(&e, r, NULL));
	CHECK_OK(rf_engine_create(&e2, r, NULL));
	CHECK_OK(rf_worker_stream_create(e, "w", 0, &w));
	CHECK_OK(rf_worker_stream_create(e2, "other's", 0, &w2));
	REFUSED("with NULL", rf_worker_stream_create_shared(e, "x", 0, NULL, &out),
		"rf_worker_stream_create_shared x", "`with` is NULL");
	REFUSED("with the inline stream", rf_worker_stream_create_shared(
			e, "x", 0, rf_engine_inline_stream(e), &out), "is not a worker stream", NULL);
	REFUSED("with another engine's", rf_worker_stream_create_shared(e, "x", 0, w2, &out),
		"other's", "another engine");
	REFUSED("capacity 2^25", rf_worker_stream_create_shared(e, "x", 1u << 25, w, &out),
		"capacity 33554432", NULL);
	CHECK_EQ(rf_worker_stream_create_shared(NULL, "x", 0, w, &out), -EINVAL);
	CHECK_EQ(rf_worker_stream_create_shared(e, "x", 0, w, NULL), -EINVAL);
	/* 31 more on w's thread make 32; the 33rd is refused; one gone, one fits */
	for (int i = 0; i < 31; i++) {
		char nm[16];
		snprintf(nm, sizeof(nm), "s%d", i);
		CHECK_OK(rf_worker_stream_create_shared(e, nm, 0, i ? s[i - 1] : w, &s[i]));
	}
	REFUSED("the 33rd on a thread", rf_worker_stream_create_shared(e, "x", 0, s[30], &out),
		"32 streams", NULL);
	rf_stream_destroy(s[7]);
	CHECK_OK(rf_worker_stream_create_shared(e, "again", 0, w, &s[7]));
	{
		_Atomic long n = 0;
		for (int i = 0; i < 31; i++)
			CHECK_OK(rf_engine_push_simple(e, bump, &n, NULL, 0, NULL, 0, s[i], "op"));
		CHECK_OK(rf_engine_wait_all(e));
		CHECK_EQ(atomic_load(&n), 31);
	}
	/* the engines go with their streams (the thread too) */
	rf_engine_destroy(e2);
	rf_engine_destroy(e);
}

int main(void)
{
	struct rf_ring *r;

	setvbuf(stdout, NULL, _IONBF, 0);
	CHECK_OK(rf_ring_create(&r, NULL));
	one_at_a_time(r);
	crossing_chain(r);
	come_and_go(r);
	bad_args(r);
	rf_ring_destroy(r);
	printf("test-engine-shared: OK\n");
	return 0;
}
