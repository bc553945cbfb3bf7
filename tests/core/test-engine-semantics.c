/* test-engine-semantics: the seed's rules, one at a time. (1) Consecutive reads of a
 * variable run concurrently: two readers on two worker streams meet at a rendezvous
 * that only completes if both run at once; a writer after them waits for both.
 * (2) Deletion is pushed as a mutation and runs only after every earlier reader and
 * writer. (3) A PRNG held as a variable serialises draws: several runs with ops on
 * different streams give the same sequence. (4) Deduplication: a variable named as
 * read and write is a write. (5) Same-stream chaining: a consumer on the producer's
 * in-order stream is enqueued before the producer finishes, and still sees its
 * result; a consumer on another stream waits for completion. (6) wait_var returns
 * once the writes before it are done, while later ones may still run. */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "engine.h"
#include "../test-util.h"

static struct rf_ring *ring;
static struct rf_engine *e;

/* ---- (1) concurrent reads ---- */
static _Atomic int arrived, writer_saw;
static int reader_fn(void *p)
{
	long spins = 0;
	(void)p;
	atomic_fetch_add(&arrived, 1);
	while (atomic_load(&arrived) < 2) {
		if (++spins > 2000000000L)
			return -ETIMEDOUT; /* never both at once: reads were serialised */
		sched_yield();
	}
	return 0;
}
static int writer_fn(void *p)
{
	(void)p;
	atomic_store(&writer_saw, atomic_load(&arrived));
	return 0;
}

/* ---- (2) deletion ---- */
static _Atomic int readers_done;
static int deleted_after;
static int slow_reader(void *p)
{
	(void)p;
	usleep(20000);
	atomic_fetch_add(&readers_done, 1);
	return 0;
}
static void free_fn(void *arg)
{
	deleted_after = atomic_load(&readers_done);
	free(arg);
}

/* ---- (3) PRNG ---- */
struct prng { uint64_t s; };
struct draw { struct prng *g; uint64_t *out; };
static int draw_fn(void *p)
{
	struct draw *d = p;
	unsigned long long s = d->g->s;
	*d->out = t_splitmix64(&s);
	d->g->s = s;
	return 0;
}

/* ---- (5) chaining ---- */
static _Atomic int producer_running, producer_done;
static int chain_x, chain_y, cross_y;
static _Atomic uint64_t consumer_enqueued_before_done;
static int producer_fn(void *p)
{
	(void)p;
	atomic_store(&producer_running, 1);
	usleep(30000);
	chain_x = 42;
	atomic_store(&producer_done, 1);
	return 0;
}
static int consumer_fn(void *p)
{
	(void)p;
	chain_y = chain_x + 1;
	return 0;
}
static int cross_fn(void *p)
{
	(void)p;
	cross_y = atomic_load(&producer_done) ? chain_x + 2 : -1;
	return 0;
}

static int counter;
static int incr_fn(void *p)
{
	(void)p;
	counter++;
	return 0;
}

int main(void)
{
	struct rf_stream *s1, *s2;
	struct rf_engine_stats es;
	int run;

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = 0 }));
	CHECK_OK(rf_worker_stream_create(e, "s1", 0, &s1));
	CHECK_OK(rf_worker_stream_create(e, "s2", 0, &s2));

	{ /* (1) */
		struct rf_var *a;
		rf_var_create(e, "A", &a);
		CHECK_OK(rf_engine_push_simple(e, reader_fn, NULL, &a, 1, NULL, 0, s1, "read1"));
		CHECK_OK(rf_engine_push_simple(e, reader_fn, NULL, &a, 1, NULL, 0, s2, "read2"));
		CHECK_OK(rf_engine_push_simple(e, writer_fn, NULL, NULL, 0, &a, 1, s1, "write"));
		CHECK_EQ(rf_engine_wait_var(e, a), 0);
		CHECK_EQ(atomic_load(&writer_saw), 2);
		CHECK_OK(rf_var_destroy(e, a, NULL, NULL, NULL));
		fprintf(stderr, "(1) concurrent reads: ok\n");
	}
	{ /* (2) */
		struct rf_var *a;
		rf_var_create(e, "A", &a);
		CHECK_OK(rf_engine_push_simple(e, slow_reader, NULL, &a, 1, NULL, 0, s1, "r1"));
		CHECK_OK(rf_engine_push_simple(e, slow_reader, NULL, &a, 1, NULL, 0, s2, "r2"));
		CHECK_OK(rf_engine_push_simple(e, slow_reader, NULL, &a, 1, NULL, 0, NULL, "r3"));
		CHECK_OK(rf_var_destroy(e, a, free_fn, malloc(64), s2));
		CHECK_EQ(rf_engine_wait_all(e), 0);
		CHECK_EQ(deleted_after, 3);
		fprintf(stderr, "(2) deletion after readers: ok\n");
	}
	{ /* (3) */
		uint64_t ref[64], got[64];
		for (run = 0; run < 4; run++) {
			struct prng g = { 7 };
			struct rf_var *gv;
			rf_var_create(e, "prng", &gv);
			struct rf_var *outv[64];
			struct draw d[64];
			int i;
			for (i = 0; i < 64; i++) {
				struct rf_stream *st = (i + run) % 3 == 0 ? s1 : (i + run) % 3 == 1 ? s2 : NULL;
				rf_var_create(e, NULL, &outv[i]);
				d[i].g = &g;
				d[i].out = &got[i];
				CHECK_OK(rf_engine_push_simple(e, draw_fn, &d[i], NULL, 0,
					(struct rf_var *[]){ gv, outv[i] }, 2, st, "draw"));
			}
			CHECK_EQ(rf_engine_wait_all(e), 0);
			if (run == 0)
				memcpy(ref, got, sizeof(ref));
			CHECK(memcmp(ref, got, sizeof(ref)) == 0);
			for (i = 0; i < 64; i++)
				rf_var_destroy(e, outv[i], NULL, NULL, NULL);
			rf_var_destroy(e, gv, NULL, NULL, NULL);
		}
		/* and they are the serial draws */
		{
			unsigned long long s = 7;
			int i;
			for (i = 0; i < 64; i++)
				CHECK(ref[i] == t_splitmix64(&s));
		}
		fprintf(stderr, "(3) PRNG draws serial and reproducible: ok\n");
	}
	{ /* (4) read+write of one var is a write: two such ops never overlap */
		struct rf_var *a;
		rf_var_create(e, "A", &a);
		int i;
		counter = 0;
		for (i = 0; i < 1000; i++)
			CHECK_OK(rf_engine_push_simple(e, incr_fn, NULL, (struct rf_var *[]){ a, a }, 2,
				&a, 1, i % 2 ? s1 : s2, "incr"));
		CHECK_EQ(rf_engine_wait_var(e, a), 0);
		CHECK_EQ(counter, 1000);
		rf_var_destroy(e, a, NULL, NULL, NULL);
		fprintf(stderr, "(4) dedup read+write = write: ok\n");
	}
	{ /* (5) */
		struct rf_var *x, *y, *z;
		CHECK_EQ(rf_var_create(e, "x", &x), 0);
		CHECK_EQ(rf_var_create(e, "y", &y), 0);
		CHECK_EQ(rf_var_create(e, "z", &z), 0);
		uint64_t chained0;
		rf_engine_get_stats(e, &es);
		chained0 = es.chained;
		CHECK_OK(rf_engine_push_simple(e, producer_fn, NULL, NULL, 0, &x, 1, s1, "producer"));
		CHECK_OK(rf_engine_push_simple(e, consumer_fn, NULL, &x, 1, &y, 1, s1, "consumer"));
		CHECK_OK(rf_engine_push_simple(e, cross_fn, NULL, &x, 1, &z, 1, s2, "cross"));
		/* the consumer went to s1 at once: the chained counter says so before the
		 * producer could finish (it sleeps 30 ms) */
		rf_engine_get_stats(e, &es);
		consumer_enqueued_before_done = es.chained - chained0;
		CHECK_EQ(consumer_enqueued_before_done, 1);
		CHECK_EQ(rf_engine_wait_all(e), 0);
		CHECK_EQ(chain_y, 43);
		CHECK_EQ(cross_y, 44);
		rf_var_destroy(e, x, NULL, NULL, NULL);
		rf_var_destroy(e, y, NULL, NULL, NULL);
		rf_var_destroy(e, z, NULL, NULL, NULL);
		fprintf(stderr, "(5) same-stream chaining keeps order: ok\n");
	}
	{ /* (6) wait_var waits for earlier writes only */
		struct rf_var *a, *b;
		CHECK_EQ(rf_var_create(e, "A", &a), 0);
		CHECK_EQ(rf_var_create(e, "B", &b), 0);
		counter = 0;
		CHECK_OK(rf_engine_push_simple(e, incr_fn, NULL, NULL, 0, &a, 1, s1, "a1"));
		CHECK_OK(rf_engine_push_simple(e, slow_reader, NULL, NULL, 0, &b, 1, s2, "b-slow"));
		CHECK_EQ(rf_engine_wait_var(e, a), 0);
		CHECK_EQ(counter, 1);
		CHECK_EQ(rf_engine_wait_all(e), 0);
		rf_var_destroy(e, a, NULL, NULL, NULL);
		rf_var_destroy(e, b, NULL, NULL, NULL);
		fprintf(stderr, "(6) wait_var: ok\n");
	}
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
