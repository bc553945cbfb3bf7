/* ring-multishot: the multishot operations, run twice -- with the kernel's multishot
 * requests ("multishot") and with RF_RING_NO_MULTISHOT ("oneshot"), where the ring
 * rearms one-shot requests after each completion, as it does when the kernel ends a
 * multishot request early; callers must see no difference. One accept armed for 16
 * clients; each client sends 64 KiB that is received into a 4-buffer group of 1 KiB
 * buffers (so the group runs dry, receives park, and resume as buffers are given
 * back); every byte checked per connection, and end of stream seen once each. A
 * multishot poll on a pipe fires once per write; cancelling each request ends it with
 * one last callback (-ECANCELED, more == 0). On a UDP socket an empty datagram is an
 * event of 0 bytes, and the datagram after it comes too. Buffer-group misuse is refused. The id
 * of a destroyed buffer group is given to the next group (white-box: before, ids only
 * grew, and after 65,535 groups creation failed with -ENOSPC). */
#include "ring-test.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "ring-impl.h"
#include "ring-ops.h"

#define NCONN 16
#define PER (64u << 10)

static struct rf_ring *r;
static struct rf_bufgroup *g;

struct conn {
	int fd;
	uint64_t got;
	int eof, final, bad;
	rf_req_id id;
	void *held[8];   /* buffers kept for a while, to run the group dry */
	unsigned nheld;
};
static struct conn conns[NCONN];
static int naccepted, accept_final;
static int64_t accept_final_res;

static void on_recv(void *data, int64_t res, void *buf, int more)
{
	struct conn *c = data;
	if (!more) {
		for (unsigned i = 0; i < c->nheld; i++) /* the group's buffers go back at the end */
			T_OK(rf_bufgroup_put(g, c->held[i]));
		if (c->nheld)
			T_EQ(rf_bufgroup_put(g, c->held[0]), -EALREADY);
		c->nheld = 0;
		c->final++;
		if (res == 0)
			c->eof++;
		else
			c->bad++;
		return;
	}
	T_CHECK(res > 0 && buf);
	T_CHECK((size_t)res <= rf_bufgroup_bufsz(g));
	if (t_verify(buf, (size_t)res, 100 + (uint64_t)(c - conns), c->got) != -1)
		c->bad++;
	c->got += (uint64_t)res;
	/* keep a buffer until the next callback while the group has others (never the
	 * last: holding that would starve every connection), so it runs dry at times */
	for (unsigned i = 0; i < c->nheld; i++)
		T_OK(rf_bufgroup_put(g, c->held[i]));
	c->nheld = 0;
	if (rf_bufgroup_available(g) < 2)
		T_OK(rf_bufgroup_put(g, buf));
	else
		c->held[c->nheld++] = buf;
}

static void on_accept(void *data, int64_t res, void *buf, int more)
{
	if (!more) {
		accept_final++;
		accept_final_res = res;
		return;
	}
	T_CHECK(res >= 0 && !buf);
	T_CHECK(naccepted < NCONN);
	struct conn *c = &conns[naccepted++];
	c->fd = (int)res;
	T_OK(rf_ring_recv_multishot(r, c->fd, g, 0, on_recv, c, &c->id));
}

static int dg_n, dg_final;
static int64_t dg_len[8];
static rf_req_id dg_id;
static void on_dgram(void *data, int64_t res, void *buf, int more)
{
	(void)data;
	if (!more) {
		dg_final++;
		return;
	}
	if (dg_n < 8)
		dg_len[dg_n++] = res;
	if (buf)
		T_OK(rf_bufgroup_put(g, buf));
}

static int npoll, poll_final;
static int64_t poll_final_res;
static void on_poll(void *data, int64_t res, void *buf, int more)
{
	if (!more) {
		poll_final++;
		poll_final_res = res;
		return;
	}
	T_CHECK(res & POLLIN);
	int fd = *(int *)data;
	char b[16];
	T_CHECK(read(fd, b, sizeof(b)) == 1);
	npoll++;
}

static int all_done(void *arg)
{
	for (int i = 0; i < NCONN; i++)
		if (!conns[i].final)
			return 0;
	return naccepted == NCONN;
}

int main(int argc, char **argv)
{
	int oneshot = argc > 1 && !strcmp(argv[1], "oneshot");
	struct rf_ring_opts o = { .flags = oneshot ? RF_RING_NO_MULTISHOT : 0 };
	T_OK(rf_ring_create(&r, &o));
	T_OK(rf_bufgroup_create(r, 4, 1024, &g));
	struct rf_bufgroup *bad;
	T_EQ(rf_bufgroup_create(r, 3, 1024, &bad), -EINVAL);
	T_EQ(rf_bufgroup_create(r, 4, 0, &bad), -EINVAL);
	struct rf_bufgroup *g1, *g2;
	T_OK(rf_bufgroup_create(r, 1, 64, &g1));
	T_OK(rf_bufgroup_create(r, 1, 64, &g2));
	T_CHECK(g1->bgid != g->bgid && g2->bgid != g->bgid && g2->bgid != g1->bgid);
	uint16_t id1 = g1->bgid;
	T_OK(rf_bufgroup_destroy(g1));
	T_OK(rf_bufgroup_create(r, 1, 64, &g1));
	T_EQ(g1->bgid, id1);
	T_OK(rf_bufgroup_destroy(g1));
	T_OK(rf_bufgroup_destroy(g2));
	T_EQ(rf_bufgroup_available(g), 4);
	char junk[16];
	T_EQ(rf_bufgroup_put(g, junk), -EINVAL);

	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	T_CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, NCONN) == 0);
	socklen_t sl = sizeof(sa);
	T_CHECK(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
	rf_req_id aid;
	T_OK(rf_ring_accept_multishot(r, lfd, 0, on_accept, NULL, &aid));

	/* clients: plain sockets, each sends PER bytes of its own pattern then closes */
	int cl[NCONN];
	uint8_t *src = malloc(PER);
	struct t_res ts[NCONN];
	for (int i = 0; i < NCONN; i++) {
		cl[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		T_CHECK(connect(cl[i], (struct sockaddr *)&sa, sizeof(sa)) == 0);
	}
	while (naccepted < NCONN)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	/* accepted in connect order: conns[i] is cl[i] */
	uint8_t *srcs[NCONN];
	for (int i = 0; i < NCONN; i++) {
		srcs[i] = malloc(PER);
		t_fill(srcs[i], PER, 100 + (uint64_t)i, 0);
		ts[i] = (struct t_res){ 0 };
		T_OK(rf_ring_send(r, cl[i], srcs[i], PER, 0, 0, 0, t_store, &ts[i], NULL));
	}
	for (int i = 0; i < NCONN; i++) {
		while (!ts[i].calls)
			T_OK(rf_ring_run(r, RF_RUN_ONCE));
		T_EQ(ts[i].res, PER);
		shutdown(cl[i], SHUT_WR);
	}
	if (rf_ring_run_until(r, all_done, NULL, 30000000000ull) < 0) {
		for (int i = 0; i < NCONN; i++)
			fprintf(stderr, "conn %d: got %llu eof %d final %d bad %d held %u\n", i, (unsigned long long)conns[i].got, conns[i].eof, conns[i].final, conns[i].bad, conns[i].nheld);
		fprintf(stderr, "avail %u\n", rf_bufgroup_available(g));
		return 1;
	}
	for (int i = 0; i < NCONN; i++) {
		T_EQ(conns[i].bad, 0);
		T_EQ(conns[i].got, PER);
		T_EQ(conns[i].eof, 1);
		T_EQ(conns[i].final, 1);
		close(conns[i].fd);
		close(cl[i]);
		free(srcs[i]);
	}
	T_EQ(rf_bufgroup_available(g), 4);
	struct rf_ring_stats st;
	rf_ring_get_stats(r, &st);
	if (oneshot)
		T_CHECK(st.multishot_rearms >= NCONN);

	/* the accept is still armed: cancel it */
	T_EQ(accept_final, 0);
	T_OK(rf_ring_cancel(r, aid));
	while (!accept_final)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(accept_final_res, -ECANCELED);
	T_EQ(accept_final, 1);

	/* a receive cancelled while armed (no data) */
	int sp[2];
	T_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
	struct conn c = { 0 };
	T_OK(rf_ring_recv_multishot(r, sp[0], g, 0, on_recv, &c, &c.id));
	T_EQ(rf_bufgroup_destroy(g), -EBUSY);
	T_OK(rf_ring_run(r, RF_RUN_NOWAIT));
	T_OK(rf_ring_cancel(r, c.id));
	while (!c.final)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(c.bad, 1); /* the final call carried -ECANCELED */
	T_EQ(c.eof, 0);

	/* a datagram socket: an empty datagram is an event of 0 bytes, not the end (one
	 * ended the receive, the datagram after it never delivered) */
	{
		int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), v;
		struct sockaddr_in ua = { .sin_family = AF_INET,
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t ul = sizeof(ua);
		T_CHECK(u >= 0 && bind(u, (struct sockaddr *)&ua, sizeof(ua)) == 0 &&
			getsockname(u, (struct sockaddr *)&ua, &ul) == 0);
		v = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		T_CHECK(v >= 0 && connect(v, (struct sockaddr *)&ua, sizeof(ua)) == 0);
		dg_n = 0;
		T_OK(rf_ring_recv_multishot(r, u, g, 0, on_dgram, NULL, &dg_id));
		T_EQ(send(v, "a", 1, 0), 1);
		T_EQ(send(v, "", 0, 0), 0);
		T_EQ(send(v, "bc", 2, 0), 2);
		while (dg_n < 3 && !dg_final)
			T_OK(rf_ring_run(r, RF_RUN_ONCE));
		T_EQ(dg_n, 3);
		T_EQ(dg_len[0], 1);
		T_EQ(dg_len[1], 0);
		T_EQ(dg_len[2], 2);
		T_EQ(dg_final, 0);
		T_OK(rf_ring_cancel(r, dg_id));
		while (!dg_final)
			T_OK(rf_ring_run(r, RF_RUN_ONCE));
		T_EQ(rf_bufgroup_available(g), 4);
		close(u);
		close(v);
	}

	/* multishot poll on a pipe */
	int p[2];
	T_CHECK(pipe(p) == 0);
	rf_req_id pid;
	T_OK(rf_ring_poll_multishot(r, p[0], POLLIN, 0, on_poll, &p[0], &pid));
	for (int i = 0; i < 5; i++) {
		T_CHECK(write(p[1], "x", 1) == 1);
		while (npoll < i + 1)
			T_OK(rf_ring_run(r, RF_RUN_ONCE));
	}
	T_EQ(npoll, 5);
	T_OK(rf_ring_cancel(r, pid));
	while (!poll_final)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(poll_final_res, -ECANCELED);
	T_EQ(rf_ring_cancel(r, pid), -ENOENT);

	T_OK(rf_bufgroup_destroy(g));
	T_EQ(rf_ring_pending(r), 0);
	rf_ring_destroy(r);
	close(lfd);
	close(sp[0]);
	close(sp[1]);
	close(p[0]);
	close(p[1]);
	free(src);
	return 0;
}
