/* ring-messages: every failing call of the ring's public API (ring.h, ring-ops.h,
 * ring-io.h) leaves a one-line message in rf_last_error() that names the call. Before
 * each bad call a sentinel message is planted (white-box: rf__fail), so a stale one
 * does not count: the call must return -errno and replace it with a line naming the
 * function. Covered: bad arguments of each call, calls from inside a callback, a
 * request queued during rf_ring_destroy, a run that can never finish or times out,
 * and failures reported by the kernel (a closed fd, end of file). White-box too: a
 * buffer group's buffer that was never handed out. */
#include "ring-test.h"

#include <sys/socket.h>

#include "log.h"
#include "rf-internal.h"
#include "ring-impl.h"
#include "ring-io.h"
#include "ring-ops.h"

#define SENTINEL "sentinel: no message was left"

static int checked;

/* expr must fail and leave one line naming fn. */
#define T_MSG(expr, fn) do { \
	rf__fail(-1, SENTINEL); \
	long long _r = (long long)(expr); \
	const char *_m = rf_last_error(); \
	if (_r >= 0 || !strcmp(_m, SENTINEL) || strncmp(_m, fn, strlen(fn)) || \
	    strchr(_m, '\n')) { \
		fprintf(stderr, "%s:%d: %s returned %lld, message \"%s\": expected -errno and " \
			"a line starting with %s\n", __FILE__, __LINE__, #expr, _r, _m, fn); \
		exit(1); \
	} \
	checked++; \
} while (0)

static struct rf_ring *r;
static int in_cb_done, teardown_done;

static void cb(void *data, int64_t res)
{
}

static void mcb(void *data, int64_t res, void *buf, int more)
{
}

static void ncb(void *data, uint32_t count)
{
}

static void xcb(void *data, const struct rf_xfer_result *res)
{
}

static int never(void *arg)
{
	return 0;
}

/* From inside a callback: the calls that turn the ring are refused. */
static void nested(void *data, int64_t res)
{
	char b[4];
	struct rf_io_seg s = { b, sizeof(b), 0 };
	T_MSG(rf_ring_run(r, RF_RUN_NOWAIT), "rf_ring_run");
	T_MSG(rf_ring_run_until(r, never, NULL, 0), "rf_ring_run_until");
	T_MSG(rf_xfer(r, *(int *)data, RF_XFER_READ, &s, 1, NULL, NULL), "rf_xfer");
	T_MSG(rf_ring_fsync_wait(r, *(int *)data, 0), "rf_ring_fsync_wait");
	in_cb_done = 1;
}

/* During rf_ring_destroy: new requests are refused. */
static void during_teardown(void *data, int64_t res)
{
	struct rf_notifier *n;
	struct rf_watch *w;
	char b[4];
	T_MSG(rf_ring_read(r, 0, b, sizeof(b), 0, 0, cb, NULL, NULL), "rf_ring_read");
	T_MSG(rf_ring_timeout(r, 1, cb, NULL, NULL), "rf_ring_timeout");
	T_MSG(rf_ring_submit(r, &(struct rf_io){ .op = RF_IOP_NOP }, cb, NULL, NULL),
	      "rf_ring_submit");
	T_MSG(rf_notifier_create(r, ncb, NULL, &n), "rf_notifier_create");
	T_MSG(rf_watch_eventfd(r, 0, 0, cb, NULL, &w), "rf_watch_eventfd");
	T_MSG(rf_ring_poll_multishot(r, 0, 1, 0, mcb, NULL, NULL), "rf_ring_poll_multishot");
	teardown_done = 1;
}

int main(void)
{
	struct rf_ring *r2 = NULL;
	T_MSG(rf_ring_create(&r2, &(struct rf_ring_opts){ .entries = 1u << 20 }),
	      "rf_ring_create");
	T_OK(rf_ring_create(&r, NULL));
	char path[256], buf[64];
	int fd = t_tmpfile(path, sizeof(path), 0);
	unlink(path);
	int sp[2];
	T_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
	int closed = dup(fd); /* opened last: no later descriptor takes its number */
	close(closed);

	/* requests */
	T_MSG(rf_ring_read(r, fd, buf, 8, 0, RF_IO_FIXED_BUF, cb, NULL, NULL), "rf_ring_read");
	T_MSG(rf_ring_write(r, fd, buf, 8, 0, RF_IO_FIXED_BUF, cb, NULL, NULL), "rf_ring_write");
	T_MSG(rf_ring_cancel(r, 12345), "rf_ring_cancel");
	T_MSG(rf_ring_submit(r, NULL, cb, NULL, NULL), "rf_ring_submit");
	T_MSG(rf_ring_submit(r, &(struct rf_io){ .op = 99 }, cb, NULL, NULL), "rf_ring_submit");
	T_MSG(rf_ring_submit(r, &(struct rf_io){ .op = RF_IOP_READV, .fd = fd }, cb, NULL, NULL),
	      "rf_ring_submit(readv)");
	T_MSG(rf_ring_submit(r, &(struct rf_io){ .op = RF_IOP_STATX, .path = "x" }, cb, NULL, NULL),
	      "rf_ring_submit(statx)");
	T_MSG(rf_ring_submit(r, &(struct rf_io){ .op = RF_IOP_CONNECT, .fd = fd }, cb, NULL, NULL),
	      "rf_ring_submit(connect)");
	T_MSG(rf_ring_submit(r, &(struct rf_io){ .op = RF_IOP_READ, .fd = fd, .buf = buf, .len = 8,
						 .flags = RF_IO_ALLOC_SLOT }, cb, NULL, NULL),
	      "rf_ring_submit(read)");
	/* RF_IO_BENEATH on a read was ignored: a server relying on it got no protection */
	T_MSG(rf_ring_submit(r, &(struct rf_io){ .op = RF_IOP_READ, .fd = fd, .buf = buf, .len = 8,
						 .flags = RF_IO_BENEATH }, cb, NULL, NULL),
	      "rf_ring_submit(read)");
	T_MSG(rf_ring_submit(r, &(struct rf_io){ .op = RF_IOP_FSYNC, .fd = fd,
						 .flags = RF_IO_BENEATH }, cb, NULL, NULL),
	      "rf_ring_submit(fsync)");
	T_MSG(rf_ring_submit(r, &(struct rf_io){ .op = RF_IOP_NOP, .flags = RF_IO_FIXED_BUF }, cb,
			     NULL, NULL), "rf_ring_submit(nop)");
	T_MSG(rf_ring_submit(r, &(struct rf_io){ .op = RF_IOP_SEND, .fd = sp[0], .len = 4 }, cb,
			     NULL, NULL), "rf_ring_submit(send)");
	/* the calls of ring-ops.h name themselves (they said "rf_ring_submit(OP)") */
	T_MSG(rf_ring_openat(r, AT_FDCWD, NULL, O_RDONLY, 0, 0, cb, NULL, NULL),
	      "rf_ring_openat");
	T_MSG(rf_ring_renameat(r, AT_FDCWD, "a", AT_FDCWD, NULL, 0, cb, NULL, NULL),
	      "rf_ring_renameat");
	T_MSG(rf_ring_send(NULL, sp[0], buf, 4, 0, 0, 0, cb, NULL, NULL), "rf_ring_send");
	T_MSG(rf_ring_recv(r, sp[0], buf, 4, MSG_PEEK | MSG_WAITALL, 0, cb, NULL, NULL),
	      "rf_ring_recv");
	T_MSG(rf_ring_accept(r, fd, NULL, NULL, RF_IO_FIXED_BUF, cb, NULL, NULL),
	      "rf_ring_accept");

	/* running */
	T_MSG(rf_ring_run(r, (enum rf_run_mode)7), "rf_ring_run");
	T_MSG(rf_ring_run_until(r, never, NULL, 0), "rf_ring_run_until");
	/* a run that times out (1 ms) while a long timer is pending; the timer is then
	 * cancelled, or the RF_RUN_UNTIL_IDLE runs below would wait out its 10 s */
	rf_req_id long_timer;
	T_OK(rf_ring_timeout(r, 10ull * 1000000000ull, cb, NULL, &long_timer));
	T_MSG(rf_ring_run_until(r, never, NULL, 1000000), "rf_ring_run_until");
	T_OK(rf_ring_cancel(r, long_timer));
	T_OK(rf_ring_timeout(r, 0, nested, &fd, NULL));
	while (!in_cb_done)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));

	/* registration */
	T_MSG(rf_dio_align(-1, NULL, &(uint32_t){ 0 }, &(uint32_t){ 0 }), "rf_dio_align");
	T_MSG(rf_dio_align(-1, "/nonexistent/rf-ring", &(uint32_t){ 0 }, &(uint32_t){ 0 }),
	      "rf_dio_align");
	T_MSG(rf_ring_register_buffers(r, 0, 4096, 4096), "rf_ring_register_buffers");
	T_MSG(rf_ring_register_buffers(r, 1, 4096, 100), "rf_ring_register_buffers");
	T_MSG(rf_ring_register_buffers(r, 1, (size_t)-1, 4096), "rf_ring_register_buffers");
	T_MSG(rf_ring_register_memory(r, NULL, NULL, 0), "rf_ring_register_memory");
	T_MSG(rf_ring_unregister_memory(r, buf), "rf_ring_unregister_memory");
	T_OK(rf_ring_register_buffers(r, 1, 4096, 4096));
	T_MSG(rf_ring_register_buffers(r, 1, 4096, 4096), "rf_ring_register_buffers");
	void *bp = buf;
	size_t bl = sizeof(buf);
	T_MSG(rf_ring_register_memory(r, &bp, &bl, 1), "rf_ring_register_memory");
	T_MSG(rf_ring_register_files(r, NULL, 1), "rf_ring_register_files");
	T_MSG(rf_ring_register_files(r, &closed, 1), "rf_ring_register_files");
	T_MSG(rf_ring_register_files_sparse(r, 0), "rf_ring_register_files_sparse");

	/* multishot requests and buffer groups */
	struct rf_bufgroup *g;
	T_MSG(rf_bufgroup_create(r, 3, 4096, &g), "rf_bufgroup_create");
	T_MSG(rf_bufgroup_create(r, 4, 0, &g), "rf_bufgroup_create");
	T_MSG(rf_ring_accept_multishot(r, sp[0], 0, NULL, NULL, NULL), "rf_ring_accept_multishot");
	T_MSG(rf_ring_poll_multishot(r, sp[0], 1, RF_IO_ALLOC_SLOT, mcb, NULL, NULL),
	      "rf_ring_poll_multishot");
	T_MSG(rf_ring_recv_multishot(r, sp[0], NULL, 0, mcb, NULL, NULL), "rf_ring_recv_multishot");
	T_OK(rf_bufgroup_create(r, 1, 64, &g));
	T_MSG(rf_bufgroup_put(g, buf), "rf_bufgroup_put");
	T_MSG(rf_bufgroup_put(g, g->bufs), "rf_bufgroup_put"); /* not handed out */
	rf_req_id rid;
	T_OK(rf_ring_recv_multishot(r, sp[0], g, 0, mcb, NULL, &rid));
	T_MSG(rf_bufgroup_destroy(g), "rf_bufgroup_destroy");
	T_OK(rf_ring_cancel(r, rid));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_OK(rf_bufgroup_destroy(g));

	/* notifiers and watches */
	struct rf_notifier *n;
	struct rf_watch *w;
	T_MSG(rf_notifier_create(r, NULL, NULL, &n), "rf_notifier_create");
	T_OK(rf_notifier_create(r, ncb, NULL, &n));
	T_MSG(rf_notifier_signal_n(n, 0), "rf_notifier_signal_n");
	rf_notifier_destroy(n);
	T_MSG(rf_watch_eventfd(r, 0, 0, NULL, NULL, &w), "rf_watch_eventfd");

	/* the transfer pump */
	struct rf_io_seg seg = { buf, sizeof(buf), 0 };
	struct rf_xfer_opts badflags = { .flags = 1u << 7 }, fixed = { .flags = RF_IO_FIXED_BUF };
	T_MSG(rf_xfer(r, fd, RF_XFER_READ, NULL, 1, NULL, NULL), "rf_xfer");
	T_MSG(rf_xfer(r, fd, RF_XFER_READ, &seg, 1, &badflags, NULL), "rf_xfer");
	T_MSG(rf_xfer(r, fd, RF_XFER_READ, &seg, 1, NULL, NULL), "rf_xfer"); /* empty file */
	T_MSG(rf_xfer(r, closed, RF_XFER_READ, &seg, 1, NULL, NULL), "rf_xfer");
	T_MSG(rf_xfer(r, fd, RF_XFER_READ, &seg, 1, &fixed, NULL), "rf_xfer"); /* buf not fixed */
	T_MSG(rf_xfer_start(r, fd, RF_XFER_READ, NULL, 0, NULL, NULL, NULL), "rf_xfer_start");
	T_MSG(rf_xfer_start(r, fd, RF_XFER_READ, &seg, 1, &fixed, xcb, NULL), "rf_xfer_start");
	T_MSG(rf_ring_fsync_wait(r, closed, 0), "rf_ring_fsync_wait");

	/* requests made while rf_ring_destroy cancels: refused */
	T_OK(rf_ring_timeout(r, 60ull * 1000000000ull, during_teardown, NULL, NULL));
	T_OK(rf_ring_run(r, RF_RUN_NOWAIT));
	rf_ring_destroy(r);
	T_EQ(teardown_done, 1);
	close(fd);
	close(sp[0]);
	close(sp[1]);
	printf("ring-messages: %d failing calls, each with its message: ok\n", checked);
	return 0;
}
