/* ring-notify: cross-thread notifiers deliver every signal exactly once. Run with
 * "msgring" (ringless MSG_RING posts; skipped if the kernel refuses them) or
 * "eventfd" (RF_RING_NO_MSG_RING forces the eventfd fallback). Phase 1: one thread
 * posts 1,000,000 signals while the owner, having declared them with
 * rf_notifier_expect, runs until idle: the counts handed to the callback must sum to
 * exactly 1,000,000 (none lost, none duplicated) and stats.notifications agrees.
 * Phase 2: the same with two posting threads of 500,000 each on two notifiers of the
 * same ring plus a third notifier signalled by both. Then: nothing more arrives on
 * extra turns, a signal nobody declared is still delivered by RF_RUN_ONCE (two sent
 * before an rf_ring_run_until that waits for them, by it; one by RF_RUN_UNTIL_IDLE), owed
 * counts are paid back, rf_notifier_signal_n's counted signals pay as many, and
 * destroying a notifier with a signal still in flight
 * drops that signal without touching freed memory. With the eventfd fallback, a
 * notifier whose read fails for good (its completion handed -EIO, white-box) logs
 * at RF_LOG_ERROR and lets its owed signals go: a wait ends with -EDEADLK instead of
 * waiting for signals that cannot come (before, it timed out here, and without a
 * timeout spun for ever). A NULL callback is refused with -EINVAL and a message
 * (before, it was accepted and the first signal crashed the ring). */
#include "ring-test.h"

#include <pthread.h>

#include "log.h"
#include "ring-impl.h"

#define TOTAL 1000000u

struct cnt {
	uint64_t sum;
	uint64_t calls;
};

static void on_notify(void *data, uint32_t count)
{
	struct cnt *c = data;
	c->sum += count;
	c->calls++;
}

struct poster {
	struct rf_notifier *a, *b; /* b may be NULL; b gets every 10th signal */
	unsigned n;
	int err;
};

static int errors_logged;

static void on_log(enum rf_log_level level, const char *msg, void *user)
{
	if (level == RF_LOG_ERROR && strstr(msg, "notifier"))
		errors_logged++;
}

static int never(void *arg)
{
	return 0;
}

struct sum_at {
	const struct cnt *c;
	uint64_t want;
};

static int sum_reached(void *arg)
{
	const struct sum_at *a = arg;

	return a->c->sum >= a->want;
}

static void *post(void *arg)
{
	struct poster *p = arg;
	for (unsigned i = 0; i < p->n; i++) {
		struct rf_notifier *n = p->b && i % 10 == 9 ? p->b : p->a;
		int ret = rf_notifier_signal(n);
		if (ret < 0) {
			p->err = ret;
			return NULL;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int fallback = argc > 1 && !strcmp(argv[1], "eventfd");
	struct rf_ring_opts o = { .flags = fallback ? RF_RING_NO_MSG_RING : 0 };
	struct rf_ring *r;
	T_OK(rf_ring_create(&r, &o));
	struct rf_ring_info info;
	rf_ring_get_info(r, &info);
	printf("setup flags 0x%x, msg_ring %d\n", info.setup_flags, info.msg_ring);
	if (fallback) {
		T_EQ(info.msg_ring, 0);
	} else if (!info.msg_ring) {
		printf("kernel refuses the ringless MSG_RING register call: skipped\n");
		rf_ring_destroy(r);
		return 77;
	}

	/* No callback: refused. */
	struct rf_notifier *none = (struct rf_notifier *)&info;
	T_EQ(rf_notifier_create(r, NULL, NULL, &none), -EINVAL);
	T_CHECK(none == NULL);
	T_CHECK(strstr(rf_last_error(), "rf_notifier_create: cb is NULL") != NULL);

	/* Phase 1: one poster. */
	struct cnt c1 = { 0 };
	struct rf_notifier *n1;
	T_OK(rf_notifier_create(r, on_notify, &c1, &n1));
	rf_notifier_expect(n1, TOTAL);
	T_EQ(rf_notifier_owed(n1), TOTAL);
	T_EQ(rf_ring_pending(r), TOTAL);
	struct poster p1 = { n1, NULL, TOTAL, 0 };
	pthread_t th1, th2;
	T_CHECK(pthread_create(&th1, NULL, post, &p1) == 0);
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	pthread_join(th1, NULL);
	T_OK(p1.err);
	T_EQ(c1.sum, TOTAL);
	T_EQ(rf_notifier_owed(n1), 0);
	printf("phase 1: %llu signals in %llu callbacks\n", (unsigned long long)c1.sum,
	       (unsigned long long)c1.calls);

	/* Phase 2: two posters, three notifiers. */
	struct cnt c2 = { 0 }, c3 = { 0 };
	struct rf_notifier *n2, *n3;
	T_OK(rf_notifier_create(r, on_notify, &c2, &n2));
	T_OK(rf_notifier_create(r, on_notify, &c3, &n3));
	rf_notifier_expect(n1, TOTAL / 2 - TOTAL / 20);
	rf_notifier_expect(n2, TOTAL / 2 - TOTAL / 20);
	rf_notifier_expect(n3, TOTAL / 10);
	struct poster pa = { n1, n3, TOTAL / 2, 0 }, pb = { n2, n3, TOTAL / 2, 0 };
	T_CHECK(pthread_create(&th1, NULL, post, &pa) == 0);
	T_CHECK(pthread_create(&th2, NULL, post, &pb) == 0);
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	pthread_join(th1, NULL);
	pthread_join(th2, NULL);
	T_OK(pa.err);
	T_OK(pb.err);
	T_EQ(c1.sum - TOTAL, TOTAL / 2 - TOTAL / 20);
	T_EQ(c2.sum, TOTAL / 2 - TOTAL / 20);
	T_EQ(c3.sum, TOTAL / 10);
	printf("phase 2: %llu + %llu + %llu signals\n", (unsigned long long)(c1.sum - TOTAL),
	       (unsigned long long)c2.sum, (unsigned long long)c3.sum);

	/* Nothing extra arrives. */
	for (int i = 0; i < 3; i++)
		T_OK(rf_ring_run(r, RF_RUN_NOWAIT));
	T_EQ(c1.sum + c2.sum + c3.sum, 2ull * TOTAL);
	struct rf_ring_stats st;
	rf_ring_get_stats(r, &st);
	T_EQ(st.notifications, 2ull * TOTAL);
	T_EQ(rf_ring_pending(r), 0);

	/* An undeclared signal: RF_RUN_ONCE waits for it. Then one declared and paid. */
	T_OK(rf_notifier_signal(n2));
	uint64_t before = c2.sum;
	while (c2.sum == before)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(c2.sum, before + 1);
	rf_notifier_expect(n2, 2);
	T_OK(rf_notifier_signal(n2));
	T_OK(rf_notifier_signal(n2));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(c2.sum, before + 3);
	T_EQ(rf_notifier_owed(n2), 0);

	/* Counted signals: one syscall pays several owed signals, none lost or doubled;
	 * a count of 0 or past INT32_MAX is refused and delivers nothing. */
	rf_notifier_expect(n2, 1000);
	for (int i = 0; i < 10; i++)
		T_OK(rf_notifier_signal_n(n2, 100));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(c2.sum, before + 1003);
	T_EQ(rf_notifier_owed(n2), 0);
	T_EQ(rf_notifier_signal_n(n2, 0), -EINVAL);
	T_EQ(rf_notifier_signal_n(n2, (uint32_t)INT32_MAX + 1u), -EINVAL);
	for (int i = 0; i < 3; i++)
		T_OK(rf_ring_run(r, RF_RUN_NOWAIT));
	T_EQ(c2.sum, before + 1003);

	/* Undeclared signals already sent, then a wait for them: delivered, in both modes
	 * (with MSG_RING they sat in the kernel as deferred work, and the wait said the
	 * predicate "cannot become true", -EDEADLK, delivering nothing) */
	{
		uint64_t want = c2.sum + 2;
		T_OK(rf_notifier_signal(n2));
		T_OK(rf_notifier_signal(n2));
		T_OK(rf_ring_run_until(r, sum_reached, &(struct sum_at){ &c2, want },
				       1000 * 1000000ull));
		T_EQ(c2.sum, want);
		T_OK(rf_notifier_signal(n2));     /* and RF_RUN_UNTIL_IDLE takes one too */
		T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
		T_EQ(c2.sum, want + 1);
		before += 3;
	}

	/* Destroy with a signal still on its way: dropped, never delivered to freed memory. */
	T_OK(rf_notifier_signal(n3));
	rf_notifier_destroy(n3);
	struct cnt c4 = { 0 };
	struct rf_notifier *n4;
	T_OK(rf_notifier_create(r, on_notify, &c4, &n4)); /* may reuse n3's slot */
	for (int i = 0; i < 3; i++)
		T_OK(rf_ring_run(r, RF_RUN_NOWAIT));
	T_EQ(c4.sum, 0);

	if (fallback) {
		/* The read's failure is simulated: the kernel's read stays armed, and the
		 * ring's teardown cancels it; its completion matches no live request. */
		struct cnt c5 = { 0 };
		struct rf_notifier *n5;
		T_OK(rf_notifier_create(r, on_notify, &c5, &n5));
		rf_notifier_expect(n5, 3);
		T_EQ(rf_ring_pending(r), 3);
		rf_log_set(on_log, NULL);
		rf__complete_notify_read(r, n5->rq, -EIO, 0);
		rf_log_set(NULL, NULL);
		T_EQ(errors_logged, 1);
		T_EQ(rf_notifier_owed(n5), 0);
		rf_notifier_expect(n5, 1);
		T_EQ(rf_ring_pending(r), 0);
		T_EQ(rf_ring_run_until(r, never, NULL, 200 * 1000000ull), -EDEADLK);
		rf_notifier_destroy(n5);
	}

	rf_notifier_destroy(n1);
	rf_notifier_destroy(n2);
	rf_notifier_destroy(n4);
	rf_ring_destroy(r);
	return 0;
}
