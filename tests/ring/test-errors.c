/* ring-errors: errors reach the callback as -errno. A read and a write on a closed
 * fd complete with -EBADF, a fixed-file request naming an index that was never
 * registered completes with -EBADF (or -ENXIO where the kernel says so), a write to a
 * file opened read-only completes with -EBADF, an fsync on a bad fd with -EBADF; a
 * read into a fixed buffer with no registered buffers is refused at submission with
 * -EINVAL. The ring stays usable afterwards. NULL where the call needs a pointer
 * (rf_ring_create's out, rf_ring_run_until's ring or predicate, any call's ring, a
 * notifier, a group, a create's out, register_memory's arrays) is -EINVAL with a
 * message; a poller held by INT64_MAX then released by INT64_MIN saturates, never
 * overflows (UBSan), and ends at zero. Flags no RF_IO_* or RF_RING_* flag has, a NULL
 * buffer with a length, a transfer direction or segment end past 2^64: -EINVAL at the
 * call. Another thread's request, run or destroy: -EPERM (destroy logged), the ring
 * still its owner's -- so too its notifiers, groups, watches and pollers, changed or
 * freed from another thread before (use-after-free under the owner); in a forked child the parent's ring is refused too (-EPERM), a ring
 * the child makes works, and the parent's goes on. */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/wait.h>

#include "ring-test.h"
#include "log.h"
#include "ring-io.h"
#include "ring-ops.h"

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

/* a ring is its creating thread's: another thread's calls are refused, the ring left */
static int other_timeout, other_run, other_xfer, other_submit;
static char other_msg[512];
/* the owner's objects, which another thread may neither change nor free */
static struct rf_notifier *o_note;
static struct rf_bufgroup *o_grp;
static struct rf_watch *o_watch;
static struct rf_poller *o_poll;
static int other_put, other_grp_destroy, other_spin;
static char other_void_msg[512];

static void no_note(void *data, uint32_t count) { (void)data; (void)count; }
static void no_watch(void *data, int64_t value) { (void)data; (void)value; }

static void *other_thread(void *p)
{
	struct rf_ring *r = p;

	/* calls that return nothing: refused, left as they were (a use-after-free under
	 * the owner before) */
	rf_notifier_expect(o_note, 3);
	snprintf(other_void_msg, sizeof(other_void_msg), "%s", rf_last_error());
	rf_notifier_destroy(o_note);
	rf_watch_stop(o_watch);
	rf_poller_hold(o_poll, 5);
	rf_poller_remove(o_poll);
	rf_ring_set_max_batch(r, 1);
	other_put = rf_bufgroup_put(o_grp, NULL);
	other_grp_destroy = rf_bufgroup_destroy(o_grp);
	other_spin = rf_ring_set_spin(r, 1000);

	other_timeout = rf_ring_timeout(r, 1000, NULL, NULL, NULL);
	snprintf(other_msg, sizeof(other_msg), "%s", rf_last_error());
	other_run = rf_ring_run(r, RF_RUN_UNTIL_IDLE);
	{       /* the waiting pump: -EPERM too, not "inside a callback" */
		char b[8];
		struct rf_io_seg seg = { b, sizeof(b), 0 };
		struct rf_xfer_result res;
		other_xfer = rf_xfer(r, 0, RF_XFER_READ, &seg, 1, NULL, &res);
		other_submit = rf_ring_submit(r, &(struct rf_io){ .op = RF_IOP_NOP }, t_store, NULL,
					      NULL);
	}
	rf_ring_destroy(r);                     /* refused: logged, nothing freed */
	return NULL;
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
	/* a NULL ring, notifier or group anywhere: -EINVAL naming it (each crashed) */
	{
		void *bases[1] = { buf };
		size_t lens[1] = { 64 };
		T_EQ(rf_ring_read(NULL, fd, buf, 5, 0, 0, t_store, &ok, NULL), -EINVAL);
		T_CHECK(strstr(rf_last_error(), "rf_ring_read: the ring is NULL"));
		T_EQ(rf_ring_cancel(NULL, 1), -EINVAL);
		T_EQ(rf_ring_pending(NULL), 0);
		struct rf_notifier *nn;
		struct rf_bufgroup *gg;
		T_EQ(rf_notifier_create(NULL, no_note, NULL, &nn), -EINVAL);
		T_CHECK(!nn && strstr(rf_last_error(), "rf_notifier_create: the ring is NULL"));
		T_EQ(rf_notifier_create(r, no_note, NULL, NULL), -EINVAL);
		T_EQ(rf_notifier_signal(NULL), -EINVAL);
		T_CHECK(strstr(rf_last_error(), "rf_notifier_signal: n is NULL"));
		T_EQ(rf_bufgroup_create(NULL, 4, 4096, &gg), -EINVAL);
		T_CHECK(!gg);
		T_EQ(rf_bufgroup_create(r, 4, 4096, NULL), -EINVAL);
		T_EQ(rf_watch_eventfd(r, 0, 0, no_watch, NULL, NULL), -EINVAL);
		T_EQ(rf_bufgroup_put(NULL, buf), -EINVAL);
		T_EQ(rf_ring_register_memory(r, NULL, lens, 1), -EINVAL);
		T_CHECK(strstr(rf_last_error(), "bufs is NULL"));
		T_EQ(rf_ring_register_memory(r, bases, NULL, 1), -EINVAL);
		T_CHECK(strstr(rf_last_error(), "lens is NULL"));
		rf_ring_set_max_batch(NULL, 4);
		T_CHECK(strstr(rf_last_error(), "r is NULL"));
	}
	/* values no flag or mode has: refused where they are given, nothing queued */
	T_EQ(rf_ring_read(r, fd, buf, 5, 0, 0x80, t_store, &ok, NULL), -EINVAL);
	T_CHECK(strstr(rf_last_error(), "bits 0x80 are no RF_IO_* flag"));
	T_EQ(rf_ring_read(r, fd, NULL, 5, 0, 0, t_store, &ok, NULL), -EINVAL);
	T_CHECK(strstr(rf_last_error(), "rf_ring_read: buf is NULL with len 5"));
	/* a flag the request cannot take: refused, as rf_ring_submit refuses it (the
	 * thin calls dropped it without a word, and read 5 bytes) */
	T_EQ(rf_ring_read(r, fd, buf, 5, 0, RF_IO_BENEATH, t_store, &ok, NULL), -EINVAL);
	T_CHECK(strstr(rf_last_error(), "rf_ring_read: flags 0x10 do not apply to a read"));
	T_EQ(rf_ring_read(r, fd, buf, 5, 0, RF_IO_ALLOC_SLOT, t_store, &ok, NULL), -EINVAL);
	T_EQ(rf_ring_fsync(r, fd, RF_IO_NO_RETRY_SHORT, 0, t_store, &ok, NULL), -EINVAL);
	T_EQ(rf_ring_pending(r), 0);
	{
		struct rf_ring *r2 = NULL;
		T_EQ(rf_ring_create(&r2, &(struct rf_ring_opts){ .flags = 0x100 }), -EINVAL);
		T_CHECK(!r2 && strstr(rf_last_error(), "bits 0x100 are no RF_RING_* flag"));
	}
	{
		struct rf_io_seg seg = { buf, 16, 0 }, wrap = { buf, UINT64_MAX, UINT64_MAX - 10 };
		struct rf_xfer_result res;
		T_EQ(rf_xfer(r, fd, (enum rf_xfer_dir)7, &seg, 1, NULL, &res), -EINVAL);
		T_CHECK(strstr(rf_last_error(), "dir = 7"));
		T_EQ(rf_xfer(r, fd, RF_XFER_READ, &wrap, 1, NULL, &res), -EINVAL);
		T_CHECK(strstr(rf_last_error(), "its end is past 2^64"));
	}
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
	{
		pthread_t t;
		int efd = eventfd(0, EFD_CLOEXEC);
		T_CHECK(efd >= 0);
		T_OK(rf_notifier_create(r, no_note, NULL, &o_note));
		T_OK(rf_bufgroup_create(r, 4, 4096, &o_grp));
		T_OK(rf_watch_eventfd(r, efd, 0, no_watch, NULL, &o_watch));
		T_OK(rf_poller_add(r, no_poll, NULL, &o_poll));
		T_CHECK(pthread_create(&t, NULL, other_thread, r) == 0);
		T_CHECK(pthread_join(t, NULL) == 0);
		T_CHECK(strstr(other_void_msg, "rf_notifier_expect called from a thread other "
					       "than the ring's owner"));
		T_EQ(other_put, -EPERM);
		T_EQ(other_grp_destroy, -EPERM);
		T_EQ(other_spin, -EPERM);
		/* all still the owner's, as they were */
		T_EQ(rf_notifier_owed(o_note), 0);
		T_EQ(rf_ring_pending(r), 0);      /* no hold counted, the poller still there */
		T_EQ(rf_bufgroup_available(o_grp), 4);
		rf_poller_remove(o_poll);
		rf_watch_stop(o_watch);
		T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
		T_OK(rf_bufgroup_destroy(o_grp));
		rf_notifier_destroy(o_note);
		close(efd);
		T_EQ(other_timeout, -EPERM);
		T_CHECK(strstr(other_msg, "rf_ring_timeout called from a thread other than the "
				      "ring's owner"));
		T_EQ(other_run, -EPERM);
		T_EQ(other_xfer, -EPERM);
		T_EQ(other_submit, -EPERM);
		T_OK(rf_ring_read(r, fd, buf, 5, 0, 0, t_store, &ok, NULL)); /* still the owner's */
		T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
		T_EQ(ok.res, 5);
	}
	{
		/* a forked child is another thread: the parent's ring (whose queues it
		 * shares) refused there, a ring of its own its own; the parent's untouched */
		pid_t pid = fork();
		T_CHECK(pid >= 0);
		if (pid == 0) {
			struct rf_ring *mine;
			struct t_res cr = { 0 };
			int bad_ = rf_ring_timeout(r, 1000, NULL, NULL, NULL) != -EPERM ||
				   rf_ring_run(r, RF_RUN_NOWAIT) != -EPERM;
			if (!bad_ && rf_ring_create(&mine, NULL) == 0) {
				bad_ = rf_ring_read(mine, fd, buf, 5, 0, 0, t_store, &cr, NULL) != 0 ||
				       rf_ring_run(mine, RF_RUN_UNTIL_IDLE) < 0 || cr.res != 5;
				rf_ring_destroy(mine);
			} else {
				bad_ = 1;
			}
			_exit(bad_ ? 3 : 0);
		}
		int st;
		T_CHECK(waitpid(pid, &st, 0) == pid);
		T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		ok.calls = 0;
		T_OK(rf_ring_read(r, fd, buf, 5, 0, 0, t_store, &ok, NULL));
		T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
		T_EQ(ok.res, 5);
	}
	rf_ring_destroy(r);
	close(fd);
	close(ro);
	return 0;
}
