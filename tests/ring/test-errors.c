/* ring-errors: errors reach the callback as -errno. A read and a write on a closed
 * fd complete with -EBADF, a fixed-file request naming an index that was never
 * registered completes with -EBADF (or -ENXIO where the kernel says so), a write to a
 * file opened read-only completes with -EBADF, an fsync on a bad fd with -EBADF; a
 * read into a fixed buffer with no registered buffers is refused at submission with
 * -EINVAL. The ring stays usable afterwards. NULL where the call needs a pointer
 * (rf_ring_create's out, rf_ring_run_until's ring or predicate) is -EINVAL with a
 * message; a poller held by INT64_MAX then released by INT64_MIN saturates, never
 * overflows (UBSan), and ends at zero. */
#include <limits.h>
#include <stdint.h>

#include "ring-test.h"
#include "log.h"

static unsigned no_poll(void *d, int *busy)
{
	(void)d;
	(void)busy;
	return 0;
}

static int never(void *a)
{
	(void)a;
	return 0;
}

int main(void)
{
	struct rf_ring *r;
	T_OK(rf_ring_create(&r, NULL));
	char path[256];
	int fd = t_tmpfile(path, sizeof(path), 0);
	T_EQ(pwrite(fd, "hello", 5, 0), 5);
	int ro = open(path, O_RDONLY | O_CLOEXEC);
	T_CHECK(ro >= 0);
	unlink(path);
	int bad = dup(fd);
	close(bad);

	char buf[64];
	struct t_res a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 }, e = { 0 }, ok = { 0 };
	T_OK(rf_ring_read(r, bad, buf, sizeof(buf), 0, 0, t_store, &a, NULL));
	T_OK(rf_ring_write(r, bad, buf, sizeof(buf), 0, 0, t_store, &b, NULL));
	T_OK(rf_ring_read(r, 5, buf, sizeof(buf), 0, RF_IO_FIXED_FILE, t_store, &c, NULL));
	T_OK(rf_ring_write(r, ro, buf, sizeof(buf), 0, 0, t_store, &d, NULL));
	T_OK(rf_ring_fsync(r, bad, 0, 0, t_store, &e, NULL));
	T_OK(rf_ring_read(r, fd, buf, 5, 0, 0, t_store, &ok, NULL));
	T_EQ(rf_ring_read(r, fd, buf, 5, 0, RF_IO_FIXED_BUF, t_store, &ok, NULL), -EINVAL);
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(a.calls, 1);
	T_EQ(a.res, -EBADF);
	T_EQ(b.res, -EBADF);
	T_CHECK(c.res == -EBADF || c.res == -ENXIO);
	T_EQ(d.res, -EBADF);
	T_EQ(e.res, -EBADF);
	T_EQ(ok.calls, 1);
	T_EQ(ok.res, 5);
	T_CHECK(memcmp(buf, "hello", 5) == 0);
	T_EQ(rf_ring_pending(r), 0);
	T_EQ(rf_ring_create(NULL, NULL), -EINVAL);
	T_CHECK(strstr(rf_last_error(), "out is NULL"));
	T_EQ(rf_ring_run_until(r, NULL, NULL, 0), -EINVAL);
	T_CHECK(strstr(rf_last_error(), "pred is NULL"));
	T_EQ(rf_ring_run_until(NULL, never, NULL, 0), -EINVAL);
	{
		struct rf_poller *p;
		T_OK(rf_poller_add(r, no_poll, NULL, &p));
		rf_poller_hold(p, INT64_MAX);
		rf_poller_hold(p, INT64_MAX);         /* saturates */
		T_EQ(rf_ring_pending(r), UINT_MAX);
		rf_poller_hold(p, INT64_MIN);
		rf_poller_hold(p, INT64_MIN);
		rf_poller_hold(p, INT64_MIN);         /* never below zero */
		T_EQ(rf_ring_pending(r), 0);
		rf_poller_remove(p);
	}
	rf_ring_destroy(r);
	close(fd);
	close(ro);
	return 0;
}
