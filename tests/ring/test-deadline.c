/* ring-deadline: per-request deadlines (rf_io.timeout_ns, a linked timeout). A recv on
 * a socket whose peer never sends ends with -ETIMEDOUT after its deadline, and the
 * socket is still usable; a read that completes before its deadline gets its bytes
 * and no stray timeout completion reaches anyone afterwards; a poll with a deadline
 * fires normally when the fd gets ready; rf_ring_cancel on a request with a deadline
 * gives -ECANCELED, not -ETIMEDOUT; an 8 MiB send in short pieces keeps one absolute
 * deadline over all of them (completes, being fast); a send into a socket whose peer
 * takes nothing ends at its deadline, blocking or not, unix or TCP (with the count of
 * what went before the socket filled, then -ETIMEDOUT), and a splice into a
 * full non-blocking socket too (a retried -EAGAIN used to go on past it); a splice
 * blocked in a socket on an io_uring worker is ended by shutdown(). Multishot
 * requests refuse none:
 * they have no deadline to refuse. Deadlines too far away to add to the clock
 * (UINT64_MAX - 1 h, UINT64_MAX) mean no practical limit: a recv with one still waits
 * after 100 ms and then gets its bytes (before, the sum wrapped and it timed out at
 * once). */
#include "ring-test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "ring-ops.h"

static struct rf_ring *r;

static int t_called(void *a)
{
	return ((struct t_res *)a)->calls != 0;
}

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

	/* deadlines that do not fit past the clock: no limit, not one in the past */
	const uint64_t far[] = { UINT64_MAX - 3600ull * 1000000000ull, UINT64_MAX };
	for (int i = 0; i < 2; i++) {
		rv.timeout_ns = far[i];
		t = (struct t_res){ 0 };
		T_OK(rf_ring_submit(r, &rv, t_store, &t, NULL));
		T_EQ(rf_ring_run_until(r, t_called, &t, 100 * 1000000ull), -ETIMEDOUT);
		T_EQ(t.calls, 0);
		T_CHECK(write(sp[1], "xy", 2) == 2);
		T_EQ(t_wait1(r, &t), 2);
	}

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

	/* a peer that takes nothing: a send into a full socket ends with -ETIMEDOUT at its
	 * deadline, whether the socket blocks (the kernel's linked timeout ends the wait)
	 * or not (-EAGAIN retries), on a unix socket and on TCP over loopback; so does a
	 * splice (pipe -> socket) into a full non-blocking socket. A splice into a
	 * blocking one waits on an io_uring worker, which the linked timeout does not
	 * interrupt (kernel 6.18): shutting the socket down ends it (what rf-httpd does) */
	for (int kind = 0; kind < 4; kind++) {
		int tcp = kind >= 2, nb = kind & 1, s[2];
		if (!tcp) {
			T_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) == 0);
		} else {
			struct sockaddr_in a = { .sin_family = AF_INET,
						 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
			socklen_t al = sizeof(a);
			int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			T_CHECK(l >= 0 && bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 &&
				listen(l, 1) == 0 && getsockname(l, (struct sockaddr *)&a, &al) == 0);
			s[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			int tiny = 4096;
			setsockopt(s[1], SOL_SOCKET, SO_RCVBUF, &tiny, sizeof(tiny));
			T_CHECK(connect(s[1], (struct sockaddr *)&a, sizeof(a)) == 0);
			s[0] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
			T_CHECK(s[0] >= 0);
			close(l);
		}
		if (nb)
			T_CHECK(fcntl(s[0], F_SETFL, O_NONBLOCK) == 0);
		struct rf_io st = { .op = RF_IOP_SEND, .fd = s[0], .buf = src, .len = big,
				    .timeout_ns = 100 * 1000000ull };
		t = (struct t_res){ 0 };
		T_OK(rf_ring_submit(r, &st, t_store, &t, NULL));
		/* what went before the socket filled is the send's count, as send(2) with
		 * SO_SNDTIMEO gives it (the bytes are the peer's now); once the socket's
		 * buffers are full (TCP grows them a while), a send moves nothing:
		 * -ETIMEDOUT */
		int64_t sent = t_wait1(r, &t);
		for (int k = 0; sent != -ETIMEDOUT; k++) {
			T_CHECK(sent > 0 && sent < (int64_t)big && k < 50);
			t = (struct t_res){ 0 };
			T_OK(rf_ring_submit(r, &st, t_store, &t, NULL));
			sent = t_wait1(r, &t);
		}
		if (!tcp) { /* the unix socket is full now: a splice of 64 KiB from a pipe */
			int pp[2];
			T_CHECK(pipe2(pp, O_CLOEXEC) == 0);
			T_EQ(write(pp[1], src, 65536), 65536);
			st = (struct rf_io){ .op = RF_IOP_SPLICE, .fd = pp[0], .off = UINT64_MAX,
					     .fd2 = s[0], .off2 = UINT64_MAX, .len = 65536,
					     .timeout_ns = 100 * 1000000ull };
			t = (struct t_res){ 0 };
			T_OK(rf_ring_submit(r, &st, t_store, &t, NULL));
			if (nb) {
				T_EQ(t_wait1(r, &t), -ETIMEDOUT);
			} else {
				int ret = rf_ring_run_until(r, t_called, &t, 300 * 1000000ull);
				T_CHECK(ret == 0 || ret == -ETIMEDOUT);
				if (!t.calls) /* still waiting on its worker: shut the socket down */
					T_OK(shutdown(s[0], SHUT_RDWR));
				T_CHECK(t_wait1(r, &t) < 0);
			}
			close(pp[0]);
			close(pp[1]);
		}
		close(s[0]);
		close(s[1]);
	}

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
