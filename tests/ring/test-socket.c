/* ring-socket: the socket operations through the ring. socket + connect to a TCP
 * listener on loopback and accept (one-shot, with the peer's address); 8 MiB sent in
 * one request over a socketpair whose buffers are small, so the kernel takes it in
 * short pieces the ring resubmits, and received with MSG_WAITALL into one buffer
 * (checked byte for byte); a plain recv seeing what one receive got; zero-copy send
 * on TCP (IORING_OP_SEND_ZC, the callback after the kernel's notification) and on an
 * AF_UNIX socket (refused by the kernel: the ring falls back to a plain send); shutdown
 * giving the peer end of stream (recv 0); a send to a closed peer giving -EPIPE, not
 * SIGPIPE; and a connect to a closed port giving -ECONNREFUSED. */
#include "ring-test.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

#include "ring-ops.h"

static struct rf_ring *r;

#define BIG (8u << 20)

/* Stream BIG bytes a -> b with send(zerocopy) and a MSG_WAITALL recv, both in flight
 * at once. */
static void stream(int a, int b, int zerocopy)
{
	uint8_t *src = malloc(BIG), *dst = malloc(BIG);
	T_CHECK(src && dst);
	t_fill(src, BIG, 11 + zerocopy, 0);
	memset(dst, 0, BIG);
	struct t_res ts = { 0 }, tr = { 0 };
	T_OK(rf_ring_send(r, a, src, BIG, 0, zerocopy, 0, t_store, &ts, NULL));
	T_OK(rf_ring_recv(r, b, dst, BIG, MSG_WAITALL, 0, t_store, &tr, NULL));
	while (!ts.calls || !tr.calls)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(ts.res, BIG);
	T_EQ(tr.res, BIG);
	T_EQ(t_verify(dst, BIG, 11 + zerocopy, 0), -1);
	free(src);
	free(dst);
}

int main(void)
{
	signal(SIGPIPE, SIG_DFL); /* a SIGPIPE would kill the test: MSG_NOSIGNAL must hold */
	T_OK(rf_ring_create(&r, NULL));
	if (!rf_ring_op_supported(r, RF_IOP_SOCKET)) {
		fprintf(stderr, "kernel lacks IORING_OP_SOCKET\n");
		return T_SKIP;
	}
	/* a listener on an ephemeral loopback port */
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	T_CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 16) == 0);
	socklen_t sl = sizeof(sa);
	T_CHECK(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);

	struct t_res t = { 0 };
	T_OK(rf_ring_socket(r, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0, 0, t_store, &t, NULL));
	int c = (int)t_wait1(r, &t);
	T_CHECK(c >= 0);
	struct t_res tc = { 0 }, ta = { 0 };
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	T_OK(rf_ring_connect(r, c, (struct sockaddr *)&sa, sizeof(sa), 0, t_store, &tc, NULL));
	T_OK(rf_ring_accept(r, lfd, (struct sockaddr *)&peer, &plen, 0, t_store, &ta, NULL));
	while (!tc.calls || !ta.calls)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(tc.res, 0);
	int s = (int)ta.res;
	T_CHECK(s >= 0);
	T_EQ(plen, sizeof(peer));
	T_EQ(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	T_CHECK(fcntl(s, F_GETFD) & FD_CLOEXEC);

	/* small socket buffers: the 8 MiB send goes in many short pieces */
	int small = 32768;
	setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	struct rf_ring_stats st0, st1;
	rf_ring_get_stats(r, &st0);
	stream(c, s, 0);
	rf_ring_get_stats(r, &st1);
	T_CHECK(st1.short_resubmits > st0.short_resubmits);
	stream(c, s, 1); /* zero copy over TCP where the kernel has it */
	rf_ring_get_stats(r, &st0);
	if (rf_ring_op_supported(r, RF_IOP_SEND_ZC))
		T_CHECK(st0.zerocopy_sends > 0);

	/* a plain recv: what one receive got */
	char msg[] = "hello", in[64];
	t = (struct t_res){ 0 };
	T_OK(rf_ring_send(r, s, msg, 5, 0, 0, 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 5);
	t = (struct t_res){ 0 };
	T_OK(rf_ring_recv(r, c, in, sizeof(in), 0, 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 5);
	T_EQ(memcmp(in, "hello", 5), 0);

	/* shutdown: the peer reads end of stream */
	t = (struct t_res){ 0 };
	T_OK(rf_ring_shutdown(r, c, SHUT_WR, 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);
	t = (struct t_res){ 0 };
	T_OK(rf_ring_recv(r, s, in, sizeof(in), MSG_WAITALL, 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);

	/* closed peer: -EPIPE (or -ECONNRESET), never a signal */
	close(c);
	int64_t res = 0;
	for (int i = 0; i < 4 && res >= 0; i++) {
		t = (struct t_res){ 0 };
		T_OK(rf_ring_send(r, s, msg, 5, 0, 0, 0, t_store, &t, NULL));
		res = t_wait1(r, &t);
	}
	T_CHECK(res == -EPIPE || res == -ECONNRESET);
	close(s);

	/* AF_UNIX: zero copy refused by the kernel, the ring sends plainly */
	int sp[2];
	T_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
	setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	stream(sp[0], sp[1], 1);
	stream(sp[1], sp[0], 0);
	rf_ring_get_stats(r, &st1);
	T_EQ(st1.zerocopy_sends, st0.zerocopy_sends); /* none over AF_UNIX */
	close(sp[0]);
	close(sp[1]);

	/* connect to a port nobody listens on */
	close(lfd);
	int c2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	t = (struct t_res){ 0 };
	T_OK(rf_ring_connect(r, c2, (struct sockaddr *)&sa, sizeof(sa), 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), -ECONNREFUSED);
	close(c2);
	rf_ring_destroy(r);
	return 0;
}
