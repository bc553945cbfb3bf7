/* ring-deadline: per-request deadlines (rf_io.timeout_ns, a linked timeout). A recv on
 * a socket whose peer never sends ends with -ETIMEDOUT after its deadline, and the
 * socket is still usable; a read that completes before its deadline gets its bytes
 * and no stray timeout completion reaches anyone afterwards; a poll with a deadline
 * fires normally when the fd gets ready; rf_ring_cancel on a request with a deadline
 * gives -ECANCELED, not -ETIMEDOUT; an 8 MiB send in short pieces keeps one absolute
 * deadline over all of them (completes, being fast). Multishot requests refuse none:
 * they have no deadline to refuse. */
#include "ring-test.h"

#include <poll.h>
#include <sys/socket.h>

#include "ring-ops.h"

static struct rf_ring *r;

int main(void)
{
	T_OK(rf_ring_create(&r, NULL));
	int sp[2];
	T_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
	char in[64];

	/* silent peer: -ETIMEDOUT, not before the deadline */
	struct rf_io rv = { .op = RF_IOP_RECV, .fd = sp[0], .buf = in, .len = sizeof(in),
			    .timeout_ns = 50 * 1000000ull };
	struct t_res t = { 0 };
	uint64_t t0 = rf_now_ns();
	T_OK(rf_ring_submit(r, &rv, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), -ETIMEDOUT);
	T_CHECK(rf_now_ns() - t0 >= 50 * 1000000ull);

	/* the socket still works, with a deadline that is not reached */
	T_CHECK(write(sp[1], "abc", 3) == 3);
	rv.timeout_ns = 10ull * 1000000000ull;
	t = (struct t_res){ 0 };
	T_OK(rf_ring_submit(r, &rv, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 3);

	/* a file read with a deadline */
	char path[256];
	int fd = t_tmpfile(path, sizeof(path), 0);
	unlink(path);
	uint8_t data[4096], back[4096];
	t_fill(data, sizeof(data), 3, 0);
	T_EQ(pwrite(fd, data, sizeof(data), 0), (ssize_t)sizeof(data));
	struct rf_io rd = { .op = RF_IOP_READ, .fd = fd, .buf = back, .len = sizeof(back),
			    .timeout_ns = 10ull * 1000000000ull };
	t = (struct t_res){ 0 };
	T_OK(rf_ring_submit(r, &rd, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), sizeof(back));
	T_EQ(memcmp(back, data, sizeof(data)), 0);

	/* a poll with a deadline fires when the fd is ready */
	struct rf_io pl = { .op = RF_IOP_POLL, .fd = sp[0], .mask = POLLIN,
			    .timeout_ns = 10ull * 1000000000ull };
	t = (struct t_res){ 0 };
	T_OK(rf_ring_submit(r, &pl, t_store, &t, NULL));
	T_OK(rf_ring_run(r, RF_RUN_NOWAIT));
	T_EQ(t.calls, 0);
	T_CHECK(write(sp[1], "d", 1) == 1);
	T_CHECK(t_wait1(r, &t) & POLLIN);
	T_EQ(read(sp[0], in, 1), 1);

	/* cancel beats the deadline: -ECANCELED */
	rf_req_id id;
	t = (struct t_res){ 0 };
	T_OK(rf_ring_submit(r, &rv, t_store, &t, &id));
	T_OK(rf_ring_run(r, RF_RUN_NOWAIT));
	T_OK(rf_ring_cancel(r, id));
	T_EQ(t_wait1(r, &t), -ECANCELED);

	/* one deadline over many short pieces */
	int small = 16384;
	setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	size_t big = 8u << 20;
	uint8_t *src = malloc(big), *dst = malloc(big);
	t_fill(src, big, 9, 0);
	struct rf_io sd = { .op = RF_IOP_SEND, .fd = sp[0], .buf = src, .len = big,
			    .timeout_ns = 60ull * 1000000000ull };
	struct rf_io rc = { .op = RF_IOP_RECV, .fd = sp[1], .buf = dst, .len = big,
			    .arg = MSG_WAITALL, .timeout_ns = 60ull * 1000000000ull };
	struct t_res ts = { 0 }, tr = { 0 };
	T_OK(rf_ring_submit(r, &sd, t_store, &ts, NULL));
	T_OK(rf_ring_submit(r, &rc, t_store, &tr, NULL));
	while (!ts.calls || !tr.calls)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(ts.res, big);
	T_EQ(tr.res, big);
	T_EQ(t_verify(dst, big, 9, 0), -1);

	/* nothing left over: the linked timeouts' own completions are swallowed */
	T_EQ(rf_ring_pending(r), 0);
	struct t_res late = { 0 };
	T_OK(rf_ring_timeout(r, 20 * 1000000ull, t_store, &late, NULL));
	T_EQ(t_wait1(r, &late), 0);
	free(src);
	free(dst);
	close(fd);
	close(sp[0]);
	close(sp[1]);
	rf_ring_destroy(r);
	return 0;
}
