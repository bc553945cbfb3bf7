/* cuda-ctr: the CUDA stream's completion-counter protocol (devices/cuda/cuda-ctr.h)
 * and the ring's pollers that read it, driven without a GPU by a fake stream: a thread
 * that "runs" each signal's work, then (like cuStreamWriteValue64) stores the signal's
 * number into a word and (like the host function after it) signals the ring's
 * notifier, with random gaps in between. The owner thread keeps up to 48 signals out,
 * two quiet ops before every third signalled one, and reports ops the way cuda.c
 * does. Checked in every mode: each op is reported exactly once, in order, never
 * before the fake device finished it, and all are reported; the ring ends with nothing
 * owed.
 *   poll     spin 300 us, host functions 150-400 us behind the counter: completions
 *            arrive by the counter (ring stats: polled > 0, spin hits > 0);
 *   asleep   spin 0: the reactor sleeps, the notifier wakes it, the counter (already
 *            written) is what reports;
 *   nocount  no word (RF_CUDA_COUNTER=off, or no pinned memory): the host functions'
 *            count alone;
 *   refused  as poll, but the counter stops being written a ninth of the way in (a
 *            write refused): the host functions report the rest.
 * Also the header's arithmetic on fixed sequences (a word behind the host functions,
 * ahead of them, and claiming more than was issued: clamped), and the ring's poller
 * API: a poller removed from inside its own callback, spin bounds, RF_RING_SPIN_US. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "ring.h"
#include "../../devices/cuda/cuda-ctr.h"
#include "../test-util.h"

#define N 6000u
#define WINDOW 48u

enum mode { M_POLL, M_ASLEEP, M_NOCOUNT, M_REFUSED };
static const char *mode_name[] = { "poll", "asleep", "nocount", "refused" };

struct fake {
	enum mode mode;
	struct rf_ring *r;
	struct rf_notifier *n;
	struct rf_poller *p;
	struct rf__ctr ctr;
	uint64_t word;
	/* owner -> device: signal numbers issued (index k-1 holds op count up to k) */
	_Atomic uint64_t issued;
	_Atomic uint64_t finished;  /* signals whose work the device finished */
	_Atomic int stop;
	/* owner side: the FIFO of ops, each with the signal that reports it */
	uint64_t op_sig[N];         /* 0: quiet (reported by the next signalled op) */
	uint64_t head, tail;
	uint64_t reported;
	int bad;
};

static void usleep_ns(long ns)
{
	struct timespec ts = { 0, ns };
	nanosleep(&ts, NULL);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *device(void *arg)
{
	struct fake *f = arg;
	uint64_t k = 0, seed = 0x9e3779b97f4a7c15ull;

	while (!atomic_load(&f->stop)) {
		if (k == atomic_load_explicit(&f->issued, memory_order_acquire)) {
			usleep_ns(2000);
			continue;
		}
		k++;
		usleep_ns((long)(rnd(&seed) % 30000));  /* the work */
		atomic_store(&f->finished, k);
		int write = f->mode != M_NOCOUNT && !(f->mode == M_REFUSED && k > N / 9);
		if (write) /* cuStreamWriteValue64 */
			__atomic_store_n(&f->word, k, __ATOMIC_RELEASE);
		if (f->mode == M_POLL || f->mode == M_REFUSED) /* the host function, well behind */
			usleep_ns(150000 + (long)(rnd(&seed) % 250000));
		else
			usleep_ns((long)(rnd(&seed) % 20000));
		if (rf_notifier_signal(f->n) < 0)
			abort();
	}
	return NULL;
}

/* cuda.c's rf__cs_report, on the fake FIFO */
static unsigned report(struct fake *f)
{
	uint64_t count = rf__ctr_ready(&f->ctr);
	unsigned ops = 0;

	while (count && f->tail < f->head) {
		uint64_t sig = f->op_sig[f->tail];
		if (sig) {
			count--;
			if (sig > atomic_load(&f->finished)) {
				fprintf(stderr, "signal %llu reported before the device finished it\n",
					(unsigned long long)sig);
				f->bad = 1;
			}
		}
		f->tail++;
		f->reported++;
		ops++;
	}
	return ops;
}

static unsigned on_poll(void *data, int *busy)
{
	struct fake *f = data;
	unsigned n = report(f);
	*busy = rf__ctr_out(&f->ctr) > 0;
	return n;
}

static void on_notify(void *data, uint32_t count)
{
	struct fake *f = data;
	rf__ctr_hf(&f->ctr, count);
	(void)report(f);
}

static int run_mode(enum mode m)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct rf_ring_stats st;
	pthread_t th;

	CHECK(f != NULL);
	f->mode = m;
	CHECK_OK(rf_ring_create(&f->r, NULL));
	CHECK_OK(rf_ring_set_spin(f->r, m == M_POLL || m == M_REFUSED ? 300000 : 0));
	CHECK_OK(rf_notifier_create(f->r, on_notify, f, &f->n));
	if (m != M_NOCOUNT) {
		f->ctr.word = &f->word;
		CHECK_OK(rf_poller_add(f->r, on_poll, f, &f->p));
	}
	CHECK(pthread_create(&th, NULL, device, f) == 0);
	uint64_t pushed = 0;
	while (f->reported < N) {
		while (pushed < N && rf__ctr_out(&f->ctr) < WINDOW) {
			/* two quiet ops, then a signalled one; the last op always signals */
			int quiet = pushed % 3 != 2 && pushed + 1 < N;
			f->op_sig[f->head++] = 0;
			if (!quiet) {
				uint64_t k = rf__ctr_issue(&f->ctr);
				f->op_sig[f->head - 1] = k;
				rf_notifier_expect(f->n, 1);
				atomic_store_explicit(&f->issued, k, memory_order_release);
			}
			pushed++;
		}
		CHECK(rf_ring_run(f->r, RF_RUN_ONCE) >= 0);
	}
	CHECK(rf_ring_run(f->r, RF_RUN_UNTIL_IDLE) >= 0);
	CHECK_EQ(rf_notifier_owed(f->n), 0u);
	atomic_store(&f->stop, 1);
	pthread_join(th, NULL);
	rf_ring_get_stats(f->r, &st);
	CHECK(!f->bad);
	CHECK_EQ(f->reported, (uint64_t)N);
	CHECK_EQ(f->tail, f->head);
	CHECK_EQ(f->ctr.done, f->ctr.issued);
	printf("ok: %-8s %u ops, %llu signals: %llu by pollers, %llu spins (%llu hits, %.1f us "
	       "each), %llu notifications\n", mode_name[m], N,
	       (unsigned long long)f->ctr.issued, (unsigned long long)st.polled,
	       (unsigned long long)st.spins, (unsigned long long)st.spin_hits,
	       st.spins ? (double)st.spin_ns / 1e3 / (double)st.spins : 0.0,
	       (unsigned long long)st.notifications);
	if (m == M_POLL) {
		/* the counter is what reported: most ops came by the pollers, in spins */
		CHECK(st.polled > N / 2);
		CHECK(st.spin_hits > 0);
	}
	if (m == M_REFUSED) /* the counter reported until it stopped */
		CHECK(st.polled > 0);
	if (m == M_NOCOUNT || m == M_ASLEEP)
		CHECK_EQ(st.spins, 0u);
	rf_poller_remove(f->p);
	rf_notifier_destroy(f->n);
	rf_ring_destroy(f->r);
	free(f);
	return 0;
}

static void arithmetic(void)
{
	uint64_t w = 0;
	struct rf__ctr k = { .word = &w };

	CHECK_EQ(rf__ctr_ready(&k), 0u);
	CHECK_EQ(rf__ctr_issue(&k), 1u);
	CHECK_EQ(rf__ctr_issue(&k), 2u);
	CHECK_EQ(rf__ctr_issue(&k), 3u);
	CHECK_EQ(rf__ctr_out(&k), 3u);
	w = 1; /* the word ahead of the host functions */
	CHECK_EQ(rf__ctr_ready(&k), 1u);
	CHECK_EQ(rf__ctr_ready(&k), 0u);    /* once */
	rf__ctr_hf(&k, 1);                 /* its host function comes later: nothing new */
	CHECK_EQ(rf__ctr_ready(&k), 0u);
	rf__ctr_hf(&k, 1);                 /* host functions ahead of the word (refused) */
	CHECK_EQ(rf__ctr_ready(&k), 1u);
	w = 3;
	CHECK_EQ(rf__ctr_ready(&k), 1u);
	CHECK_EQ(rf__ctr_out(&k), 0u);
	w = 1000; /* a word claiming more than was issued: clamped */
	CHECK_EQ(rf__ctr_ready(&k), 0u);
	rf__ctr_issue(&k);
	CHECK_EQ(rf__ctr_ready(&k), 1u);
	CHECK_EQ(k.done, 4u);
	struct rf__ctr none = { 0 }; /* no word: host functions only */
	rf__ctr_issue(&none);
	rf__ctr_issue(&none);
	CHECK_EQ(rf__ctr_ready(&none), 0u);
	rf__ctr_hf(&none, 2);
	CHECK_EQ(rf__ctr_ready(&none), 2u);
	printf("ok: the counter's arithmetic\n");
}

static struct rf_poller *self_p;
static unsigned self_calls;

static unsigned self_remove(void *data, int *busy)
{
	(void)data;
	self_calls++;
	rf_poller_remove(self_p); /* from inside its own callback: deferred */
	*busy = 1;
	return 0;
}

static unsigned count_calls(void *data, int *busy)
{
	(*(unsigned *)data)++;
	*busy = 0;
	return 0;
}

static void poller_api(void)
{
	struct rf_ring *r;
	struct rf_poller *other;
	unsigned calls = 0;

	CHECK_OK(rf_ring_create(&r, NULL));
	CHECK_EQ(rf_poller_add(r, NULL, NULL, &other), -EINVAL);
	CHECK_EQ(rf_ring_set_spin(r, 10000001ull), -EINVAL);
	CHECK_OK(rf_ring_set_spin(r, 0));
	CHECK_OK(rf_poller_add(r, self_remove, NULL, &self_p));
	CHECK_OK(rf_poller_add(r, count_calls, &calls, &other));
	CHECK(rf_ring_run(r, RF_RUN_NOWAIT) >= 0);
	CHECK(rf_ring_run(r, RF_RUN_NOWAIT) >= 0);
	CHECK_EQ(self_calls, 1u); /* removed during the first turn, not called again */
	CHECK_EQ(calls, 2u);
	rf_poller_remove(other);
	rf_poller_remove(NULL);
	CHECK(rf_ring_run(r, RF_RUN_NOWAIT) >= 0);
	CHECK_EQ(calls, 2u);
	CHECK_OK(rf_poller_add(r, count_calls, &calls, &other)); /* freed with the ring */
	rf_ring_destroy(r);

	setenv("RF_RING_SPIN_US", "12x", 1);
	CHECK_EQ(rf_ring_create(&r, NULL), -EINVAL);
	CHECK(strstr(rf_last_error(), "RF_RING_SPIN_US") != NULL);
	/* over the limit, wrapping past 2^64 when multiplied by 1000, signed, spaced */
	static const char *const bad[] = { "10001", "18446744073709552", "+5", " 5", "-0", "5 " };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("RF_RING_SPIN_US", bad[i], 1);
		CHECK_EQ(rf_ring_create(&r, NULL), -EINVAL);
	}
	setenv("RF_RING_SPIN_US", "20", 1);
	CHECK_OK(rf_ring_create(&r, NULL));
	rf_ring_destroy(r);
	unsetenv("RF_RING_SPIN_US");
	printf("ok: the poller API, spin bounds, RF_RING_SPIN_US\n");
}

int main(void)
{
	arithmetic();
	poller_api();
	for (int m = M_POLL; m <= M_REFUSED; m++)
		run_mode((enum mode)m);
	return 0;
}
