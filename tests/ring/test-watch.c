/* ring-watch: an eventfd watch keeps a read armed and hands each counter value to its
 * callback. A thread writes 1..200 into a blocking eventfd (sum 20100); the values the
 * callback receives must sum to 20100. With counts_as_pending the watch keeps
 * RF_RUN_UNTIL_IDLE turning (here until the callback stops it from inside itself);
 * without it an idle run returns at once. A watch on a non-blocking eventfd works
 * too (the ring polls before reading). rf_watch_stop on an armed watch cancels the
 * read and frees the watch once that is reaped. A NULL callback is refused with
 * -EINVAL and a message, and nothing is armed (before, it was accepted and the first
 * value crashed the ring). */
#include "ring-test.h"

#include <pthread.h>
#include <sys/eventfd.h>

#include "log.h"

struct wstate {
	uint64_t sum;
	int calls;
	uint64_t stop_at;
	struct rf_watch *w;
	int64_t err;
};

static void on_value(void *data, int64_t v)
{
	struct wstate *s = data;
	if (v < 0) {
		s->err = v;
		return;
	}
	s->sum += (uint64_t)v;
	s->calls++;
	if (s->stop_at && s->sum >= s->stop_at)
		rf_watch_stop(s->w);
}

static void *writer(void *arg)
{
	int fd = *(int *)arg;
	for (uint64_t i = 1; i <= 200; i++) {
		if (write(fd, &i, 8) != 8) {
			perror("eventfd write");
			exit(1);
		}
		if (i % 16 == 0)
			usleep(100);
	}
	return NULL;
}

static void run_one(struct rf_ring *r, int flags)
{
	int efd = eventfd(0, EFD_CLOEXEC | flags);
	T_CHECK(efd >= 0);
	struct wstate s = { .stop_at = 20100 };
	T_OK(rf_watch_eventfd(r, efd, 1, on_value, &s, &s.w));
	T_EQ(rf_ring_pending(r), 1);
	pthread_t th;
	T_CHECK(pthread_create(&th, NULL, writer, &efd) == 0);
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE)); /* returns once the watch stopped itself */
	pthread_join(th, NULL);
	T_EQ(s.err, 0);
	T_EQ(s.sum, 20100);
	T_CHECK(s.calls >= 1 && s.calls <= 200);
	T_EQ(rf_ring_pending(r), 0);
	close(efd);
}

int main(void)
{
	struct rf_ring *r;
	T_OK(rf_ring_create(&r, NULL));
	run_one(r, 0);
	run_one(r, EFD_NONBLOCK);

	/* Not pending: an idle run returns at once; the value arrives on a later turn. */
	int efd = eventfd(0, EFD_CLOEXEC);
	struct wstate s = { 0 };
	T_OK(rf_watch_eventfd(r, efd, 0, on_value, &s, &s.w));
	T_EQ(rf_ring_pending(r), 0);
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	uint64_t v = 5;
	T_EQ(write(efd, &v, 8), 8);
	while (s.calls == 0)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(s.sum, 5);
	/* Stop while armed: cancelled, then freed when reaped (ASan checks the free). */
	rf_watch_stop(s.w);
	for (int i = 0; i < 3; i++)
		T_OK(rf_ring_run(r, RF_RUN_NOWAIT));
	T_EQ(s.calls, 1);
	T_EQ(write(efd, &v, 8), 8);
	for (int i = 0; i < 3; i++)
		T_OK(rf_ring_run(r, RF_RUN_NOWAIT));
	T_EQ(s.calls, 1);

	/* No callback: refused, nothing armed. */
	struct rf_watch *none = (struct rf_watch *)&s;
	T_EQ(rf_watch_eventfd(r, efd, 1, NULL, NULL, &none), -EINVAL);
	T_CHECK(none == NULL);
	T_CHECK(strstr(rf_last_error(), "rf_watch_eventfd: cb is NULL") != NULL);
	T_EQ(rf_ring_pending(r), 0);

	/* A watch left armed is freed by rf_ring_destroy. */
	struct wstate s2 = { 0 };
	T_OK(rf_watch_eventfd(r, efd, 1, on_value, &s2, &s2.w));
	rf_ring_destroy(r);
	close(efd);
	return 0;
}
