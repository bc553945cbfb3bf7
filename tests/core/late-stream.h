/* tests/core/late-stream.h -- a test stream that reports late.
 *
 * An in-order stream with its own thread, like a device stream: it implements the
 * optional chain hook (a consumer on one late stream waits, on the device side, for a
 * producer's op on another), and after running each op it sleeps a random while
 * before reporting it. So a consumer chained behind a producer on another stream is
 * often reported *before* its producer -- the reordering a CUDA stream's host
 * functions can produce, which the engine must not depend on. Test code: a mutex and
 * condition variable are fine here. */
#ifndef RF_TEST_LATE_STREAM_H
#define RF_TEST_LATE_STREAM_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "stream.h"
#include "../test-util.h"

#define LATE_QCAP (1u << 16)

struct late_cmd {
	struct rf_op *op;          /* or a wait: */
	struct late_stream *on;
	uint64_t seq;
};

struct late_done {
	struct rf_op *op;
	int st;
};

struct late_stream {
	struct rf_stream s;
	struct rf_engine *e;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct late_cmd q[LATE_QCAP];
	unsigned qh, qt;               /* under mu */
	struct late_done d[LATE_QCAP];
	unsigned dh, dt;               /* under mu */
	_Atomic uint64_t executed;
	struct rf_notifier *n;
	pthread_t th;
	int stop;                      /* under mu */
	unsigned long long rng;        /* the thread's */
	unsigned max_delay_us;
};

static const struct rf_stream_ops late_ops;

static void late_push(struct late_stream *l, struct late_cmd c)
{
	pthread_mutex_lock(&l->mu);
	CHECK(l->qt - l->qh < LATE_QCAP);
	l->q[l->qt++ % LATE_QCAP] = c;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

static int late_enqueue(struct rf_stream *s, struct rf_op *op)
{
	struct late_stream *l = s->ctx;

	rf_notifier_expect(l->n, 1);
	late_push(l, (struct late_cmd){ .op = op });
	return 0;
}

static int late_chain(struct rf_stream *s, struct rf_stream *producer, uint64_t seq)
{
	if (producer->ops != &late_ops)
		return -ENOTSUP;
	late_push(s->ctx, (struct late_cmd){ .on = producer->ctx, .seq = seq });
	return 0;
}

static void late_notified(void *data, uint32_t count)
{
	struct late_stream *l = data;
	struct late_done batch[256];
	unsigned n, i;

	(void)count;
	do {
		pthread_mutex_lock(&l->mu);
		for (n = 0; n < 256 && l->dh != l->dt; n++)
			batch[n] = l->d[l->dh++ % LATE_QCAP];
		pthread_mutex_unlock(&l->mu);
		for (i = 0; i < n; i++)
			rf_engine_op_done(batch[i].op, batch[i].st);
	} while (n == 256);
}

static void *late_main(void *arg)
{
	struct late_stream *l = arg;

	for (;;) {
		struct late_cmd c;

		pthread_mutex_lock(&l->mu);
		while (l->qh == l->qt && !l->stop)
			pthread_cond_wait(&l->cv, &l->mu);
		if (l->qh == l->qt) {
			pthread_mutex_unlock(&l->mu);
			return NULL;
		}
		c = l->q[l->qh++ % LATE_QCAP];
		pthread_mutex_unlock(&l->mu);
		if (!c.op) {
			while (atomic_load_explicit(&c.on->executed, memory_order_acquire) < c.seq)
				sched_yield();
			continue;
		}
		{
			int st = rf_op_execute(c.op);
			atomic_fetch_add_explicit(&l->executed, 1, memory_order_release);
			if (l->max_delay_us && t_splitmix64(&l->rng) % 3 == 0)
				usleep((useconds_t)(t_splitmix64(&l->rng) % l->max_delay_us));
			pthread_mutex_lock(&l->mu);
			l->d[l->dt++ % LATE_QCAP] = (struct late_done){ c.op, st };
			pthread_mutex_unlock(&l->mu);
			while (rf_notifier_signal(l->n) < 0)
				usleep(10);
		}
	}
}

static void late_destroy(struct rf_stream *s)
{
	struct late_stream *l = s->ctx;

	pthread_mutex_lock(&l->mu);
	l->stop = 1;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->th, NULL);
	while (rf_notifier_owed(l->n))
		if (rf_ring_run(rf_engine_ring(l->e), RF_RUN_ONCE) < 0)
			break;
	rf_notifier_destroy(l->n);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}

static const struct rf_stream_ops late_ops = {
	/* .enqueue = */ late_enqueue,
	/* .chain   = */ late_chain,
	/* .destroy = */ late_destroy,
};

/* A late stream on e; the engine owns it. */
static inline struct rf_stream *late_stream_create(struct rf_engine *e, const char *name,
						   unsigned max_delay_us, unsigned long long seed)
{
	struct late_stream *l = calloc(1, sizeof(*l));

	CHECK(l);
	l->e = e;
	l->rng = seed;
	l->max_delay_us = max_delay_us;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	CHECK_OK(rf_notifier_create(rf_engine_ring(e), late_notified, l, &l->n));
	l->s.ops = &late_ops;
	l->s.ctx = l;
	l->s.name = name;
	l->s.flags = RF_STREAM_IN_ORDER;
	CHECK(pthread_create(&l->th, NULL, late_main, l) == 0);
	CHECK_OK(rf_engine_add_stream(e, &l->s));
	return &l->s;
}

#endif
