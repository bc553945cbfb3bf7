/* ring-stream-count: what a socket's transfer moved is never lost to its caller. Bytes
 * taken from a socket's queue (recv, splice) or handed to it (send) cannot be taken or
 * sent again, so a transfer that ends after some moved -- cancelled, reset by the peer,
 * past its deadline -- reports their count, as recv(2) and send(2) do (the error, if
 * any, comes with the next call). Before: a cancelled MSG_WAITALL receive said
 * -ECANCELED after 5 of its 10 bytes were consumed, a send that completed before its
 * cancel took said -ECANCELED though the peer had every byte, a reset after "abc"
 * said -ECONNRESET with "abc" consumed, and the same for a splice, a deadline and a
 * pipe read at the file position.
 * Also: MSG_PEEK with MSG_WAITALL is refused (a short peek's rest was peeked again
 * from the head: "abcdeabcde" for "abcde" + "FGHIJ"), and MSG_DONTWAIT's -EAGAIN is
 * the answer, not retried for half a second. */
#include "ring-test.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "ring-ops.h"
#include "log.h"

static struct rf_ring *r;

/* A connected TCP pair over loopback: s[0] the ring's, s[1] the peer's. */
static void tcp_pair(int s[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	T_CHECK(l >= 0 && bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 1) == 0 &&
		getsockname(l, (struct sockaddr *)&a, &al) == 0);
	s[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_CHECK(connect(s[1], (struct sockaddr *)&a, sizeof(a)) == 0);
	s[0] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	T_CHECK(s[0] >= 0);
	close(l);
}

/* The peer resets the connection (SO_LINGER 0, then close). */
static void reset(int fd)
{
	struct linger lg = { 1, 0 };

	T_CHECK(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	close(fd);
}

static int t_called(void *a)
{
	return ((struct t_res *)a)->calls != 0;
}

/* Turn the ring until the transfer in flight has taken every byte queued at fd (its
 * first piece done: FIONREAD says 0), however slowly the threads run. */
static void drain(int fd)
{
	struct t_res never = { 0 };
	int n = 1;

	for (int i = 0; i < 10000 && n > 0; i++) {
		int ret = rf_ring_run_until(r, t_called, &never, 1000000ull);
		T_CHECK(ret == -ETIMEDOUT);
		T_CHECK(ioctl(fd, FIONREAD, &n) == 0);
	}
	T_EQ(n, 0);
}

/* Request id, not yet done, cancelled once it has taken every byte queued at fd: its
 * result. */
static int64_t cancel_drained(rf_req_id id, int fd, struct t_res *t)
{
	drain(fd);
	T_EQ(t->calls, 0);
	T_OK(rf_ring_cancel(r, id));
	return t_wait1(r, t);
}

int main(void)
{
	int s[2];
	char buf[64];
	struct t_res t;

	T_OK(rf_ring_create(&r, NULL));

	/* MSG_PEEK | MSG_WAITALL: refused, naming both; a plain peek still works */
	tcp_pair(s);
	T_EQ(rf_ring_recv(r, s[0], buf, 10, MSG_PEEK | MSG_WAITALL, 0, t_store, &t, NULL), -EINVAL);
	T_CHECK(strstr(rf_last_error(), "MSG_PEEK with MSG_WAITALL"));
	T_EQ(write(s[1], "abcde", 5), 5);
	t = (struct t_res){ 0 };
	T_OK(rf_ring_recv(r, s[0], buf, 10, MSG_PEEK, 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 5);
	T_CHECK(!memcmp(buf, "abcde", 5));

	/* a MSG_WAITALL receive cancelled after 5 of 10 bytes: 5, the bytes in buf (the
	 * peeked 5 are still queued: the receive takes them first) */
	memset(buf, 0, sizeof(buf));
	rf_req_id id;
	t = (struct t_res){ 0 };
	T_OK(rf_ring_recv(r, s[0], buf, 10, MSG_WAITALL, 0, t_store, &t, &id));
	T_EQ(cancel_drained(id, s[0], &t), 5);
	T_CHECK(!memcmp(buf, "abcde", 5));

	/* a send cancelled at once: either it took effect first (the peer has every byte:
	 * their count) or the cancel did (the peer has none: -ECANCELED) -- never
	 * -ECANCELED for bytes the peer got */
	t = (struct t_res){ 0 };
	T_OK(rf_ring_send(r, s[0], "0123456789", 10, 0, 0, 0, t_store, &t, &id));
	T_OK(rf_ring_cancel(r, id));
	int64_t res = t_wait1(r, &t);
	T_CHECK(fcntl(s[1], F_SETFL, O_NONBLOCK) == 0);
	ssize_t got = recv(s[1], buf, sizeof(buf), 0);
	printf("a send cancelled at once: %lld (the peer got %zd bytes)\n", (long long)res, got);
	T_CHECK((res == 10 && got == 10) || (res == -ECANCELED && got < 0 && errno == EAGAIN));

	/* MSG_DONTWAIT on an idle socket: -EAGAIN at once, no retry */
	struct rf_ring_stats st0, st1;
	rf_ring_get_stats(r, &st0);
	t = (struct t_res){ 0 };
	T_OK(rf_ring_recv(r, s[0], buf, 10, MSG_DONTWAIT, 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), -EAGAIN);
	rf_ring_get_stats(r, &st1);
	T_EQ(st1.retries, st0.retries);

	/* a deadline after 3 of 10 bytes: 3 */
	T_EQ(write(s[1], "xyz", 3), 3);
	memset(buf, 0, sizeof(buf));
	struct rf_io io = { .op = RF_IOP_RECV, .fd = s[0], .buf = buf, .len = 10,
			    .arg = MSG_WAITALL, .timeout_ns = 100 * 1000000ull };
	t = (struct t_res){ 0 };
	T_OK(rf_ring_submit(r, &io, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 3);
	T_CHECK(!memcmp(buf, "xyz", 3));
	/* ... and with nothing moved, the deadline's error */
	t = (struct t_res){ 0 };
	T_OK(rf_ring_submit(r, &io, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), -ETIMEDOUT);

	/* a reset after "abc": 3, the bytes in buf; the next receive says why */
	memset(buf, 0, sizeof(buf));
	t = (struct t_res){ 0 };
	T_OK(rf_ring_recv(r, s[0], buf, 10, MSG_WAITALL, 0, t_store, &t, NULL));
	T_EQ(write(s[1], "abc", 3), 3);
	drain(s[0]);
	reset(s[1]);
	T_EQ(t_wait1(r, &t), 3);
	T_CHECK(!memcmp(buf, "abc", 3));
	t = (struct t_res){ 0 };
	T_OK(rf_ring_recv(r, s[0], buf, 10, MSG_WAITALL, 0, t_store, &t, NULL));
	res = t_wait1(r, &t);
	T_CHECK(res == -ECONNRESET || res == 0);
	close(s[0]);

	/* a splice from a socket into a pipe, reset after 3 bytes: 3 (they are in the
	 * pipe) */
	int pp[2];
	tcp_pair(s);
	T_CHECK(pipe2(pp, O_CLOEXEC) == 0);
	io = (struct rf_io){ .op = RF_IOP_SPLICE, .fd = s[0], .off = UINT64_MAX, .fd2 = pp[1],
			     .off2 = UINT64_MAX, .len = 100 };
	t = (struct t_res){ 0 };
	T_OK(rf_ring_submit(r, &io, t_store, &t, NULL));
	T_EQ(write(s[1], "abc", 3), 3);
	drain(s[0]);
	reset(s[1]);
	res = t_wait1(r, &t);
	T_CHECK(fcntl(pp[0], F_SETFL, O_NONBLOCK) == 0);
	got = read(pp[0], buf, sizeof(buf));
	printf("a splice reset after 3 bytes: %lld (the pipe holds %zd)\n", (long long)res, got);
	T_EQ(got, 3);
	T_EQ(res, 3);
	close(pp[0]);
	close(pp[1]);
	close(s[0]);

	/* a read at the file position of a pipe (off UINT64_MAX), cancelled after 5 of
	 * its 10 bytes: 5 */
	T_CHECK(pipe2(pp, O_CLOEXEC) == 0);
	T_EQ(write(pp[1], "12345", 5), 5);
	memset(buf, 0, sizeof(buf));
	t = (struct t_res){ 0 };
	T_OK(rf_ring_read(r, pp[0], buf, 10, UINT64_MAX, 0, t_store, &t, &id));
	T_EQ(cancel_drained(id, pp[0], &t), 5);
	T_CHECK(!memcmp(buf, "12345", 5));
	close(pp[0]);
	close(pp[1]);

	rf_ring_destroy(r);
	printf("ring-stream-count: counts of what moved, never lost to an error or a cancel\n");
	return 0;
}
