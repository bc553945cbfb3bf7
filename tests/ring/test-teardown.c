/* ring-teardown: rf_ring_destroy with requests in flight. Reads on four pipes that
 * never get data, five long timeouts, reads of a regular file, and an armed eventfd
 * watch are outstanding when the ring is destroyed: every request's callback must run
 * exactly once, with -ECANCELED, before rf_ring_destroy returns; a callback that tries
 * to queue a new request during teardown is refused; and everything is freed (run
 * under ASan/LeakSanitizer, this test fails on any leak). A second ring is destroyed
 * with requests still queued in the SQ, never submitted. A callback (and a
 * rf_ring_run_until predicate) that calls rf_ring_destroy on its own ring is refused:
 * the ring stays usable, rf_last_error() names rf_ring_destroy and one line is logged
 * at RF_LOG_ERROR (before, the ring was freed under the run loop: use after free). */
#include "ring-test.h"

#include <sys/eventfd.h>

#include "log.h"

static int cancelled, other, resubmit_refused;
static struct rf_ring *cur;

static void cb(void *data, int64_t res)
{
	if (res == -ECANCELED)
		cancelled++;
	else
		other++;
	char b[8];
	if (rf_ring_read(cur, 0, b, sizeof(b), 0, 0, cb, NULL, NULL) == -ESHUTDOWN)
		resubmit_refused++;
}

static void on_watch(void *data, int64_t v)
{
}

static int destroy_calls, errors_logged;

static void destroy_own_ring(void *data, int64_t res)
{
	destroy_calls++;
	rf_ring_destroy(cur);
}

static int destroy_in_pred(void *arg)
{
	destroy_calls++;
	rf_ring_destroy(cur);
	return 1;
}

static void on_log(enum rf_log_level level, const char *msg, void *user)
{
	if (level == RF_LOG_ERROR && strstr(msg, "rf_ring_destroy"))
		errors_logged++;
}

int main(void)
{
	char path[256];
	int fd = t_tmpfile(path, sizeof(path), 0);
	unlink(path);
	static uint8_t filebuf[4][65536];
	T_EQ(pwrite(fd, filebuf[0], sizeof(filebuf[0]), 0), (ssize_t)sizeof(filebuf[0]));

	struct rf_ring *r;
	T_OK(rf_ring_create(&r, NULL));
	cur = r;
	int p[4][2];
	char buf[4][64];
	for (int i = 0; i < 4; i++) {
		T_CHECK(pipe(p[i]) == 0);
		T_OK(rf_ring_read(r, p[i][0], buf[i], sizeof(buf[i]), UINT64_MAX, 0, cb, NULL, NULL));
	}
	for (int i = 0; i < 5; i++)
		T_OK(rf_ring_timeout(r, 60ull * 1000000000ull, cb, NULL, NULL));
	int efd = eventfd(0, EFD_CLOEXEC);
	struct rf_watch *w;
	T_OK(rf_watch_eventfd(r, efd, 1, on_watch, NULL, &w));
	T_OK(rf_ring_run(r, RF_RUN_NOWAIT)); /* submit them */
	for (int i = 0; i < 4; i++)
		T_OK(rf_ring_read(r, fd, filebuf[i], sizeof(filebuf[i]), 0, 0, cb, NULL, NULL));
	T_EQ(rf_ring_pending(r), 14);
	rf_ring_destroy(r);
	T_EQ(cancelled + other, 13);
	T_EQ(cancelled, 13); /* teardown reports -ECANCELED even for reads that finished */
	T_EQ(resubmit_refused, 13);

	/* Requests only queued, never submitted. */
	cancelled = other = resubmit_refused = 0;
	T_OK(rf_ring_create(&r, NULL));
	cur = r;
	for (int i = 0; i < 4; i++)
		T_OK(rf_ring_read(r, p[i][0], buf[i], sizeof(buf[i]), UINT64_MAX, 0, cb, NULL, NULL));
	T_OK(rf_ring_timeout(r, 60ull * 1000000000ull, cb, NULL, NULL));
	rf_ring_destroy(r);
	T_EQ(cancelled, 5);
	T_EQ(other, 0);

	/* rf_ring_destroy from inside a callback and a predicate: refused, ring intact. */
	T_OK(rf_ring_create(&r, NULL));
	cur = r;
	rf_log_set(on_log, NULL);
	struct t_res later = { 0 };
	T_OK(rf_ring_timeout(r, 0, destroy_own_ring, NULL, NULL));
	T_OK(rf_ring_timeout(r, 1000000, destroy_own_ring, NULL, NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(destroy_calls, 2);
	T_EQ(rf_ring_run_until(r, destroy_in_pred, NULL, 0), 0);
	T_EQ(destroy_calls, 3);
	T_EQ(errors_logged, 3);
	T_CHECK(strstr(rf_last_error(), "rf_ring_destroy") != NULL);
	T_OK(rf_ring_timeout(r, 0, t_store, &later, NULL));
	T_EQ(t_wait1(r, &later), 0);
	rf_log_set(NULL, NULL);
	rf_ring_destroy(r);

	for (int i = 0; i < 4; i++) {
		close(p[i][0]);
		close(p[i][1]);
	}
	close(efd);
	close(fd);
	return 0;
}
