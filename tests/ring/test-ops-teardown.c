/* ring-ops-teardown: rf_ring_destroy with every kind of ring-ops request outstanding:
 * a multishot accept, a multishot recv parked because its buffer group ran dry (not in
 * the kernel at all), an armed multishot recv, a one-shot recv and poll with deadlines,
 * a zero-copy send stuck on a full socket, and a connect in progress. Each callback
 * runs exactly once with its final result before rf_ring_destroy returns (-ECANCELED;
 * multishot ones with more == 0), callbacks that try to queue more are refused, and
 * nothing leaks (ASan/LeakSanitizer): buffer groups and descriptor copies are freed. */
#include "ring-test.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "ring-ops.h"

static struct rf_ring *r;
static struct rf_bufgroup *g;
static int finals, events, cancelled, refused;

static void on_multi(void *data, int64_t res, void *buf, int more)
{
	if (more) {
		events++;
		if (buf)
			*(void **)data = buf; /* held: the group runs dry */
		return;
	}
	finals++;
	if (res == -ECANCELED)
		cancelled++;
	char b[4];
	if (rf_ring_recv(r, 0, b, sizeof(b), 0, 0, NULL, NULL, NULL) == -ESHUTDOWN)
		refused++;
}

static void on_one(void *data, int64_t res)
{
	finals++;
	if (res == -ECANCELED)
		cancelled++;
}

int main(void)
{
	T_OK(rf_ring_create(&r, NULL));
	T_OK(rf_bufgroup_create(r, 1, 256, &g));
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	T_CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 4) == 0);
	socklen_t sl = sizeof(sa);
	T_CHECK(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
	T_OK(rf_ring_accept_multishot(r, lfd, 0, on_multi, NULL, NULL));

	/* A: gets data, holds the group's only buffer; B: then parks on -ENOBUFS */
	int a[2], b[2], c[2];
	T_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a) == 0);
	T_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b) == 0);
	T_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c) == 0);
	void *held = NULL;
	T_OK(rf_ring_recv_multishot(r, a[0], g, 0, on_multi, &held, NULL));
	T_CHECK(write(a[1], "x", 1) == 1);
	while (!held)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(rf_bufgroup_available(g), 0);
	void *held2 = NULL;
	T_OK(rf_ring_recv_multishot(r, b[0], g, 0, on_multi, &held2, NULL));
	T_CHECK(write(b[1], "y", 1) == 1);
	for (int i = 0; i < 5; i++)
		T_OK(rf_ring_run(r, RF_RUN_NOWAIT)); /* B: -ENOBUFS, parked */
	T_CHECK(!held2);

	/* one-shot requests with deadlines, a stuck zero-copy send, a connect */
	char in[16];
	struct rf_io rv = { .op = RF_IOP_RECV, .fd = c[0], .buf = in, .len = sizeof(in),
			    .timeout_ns = 60ull * 1000000000ull };
	T_OK(rf_ring_submit(r, &rv, on_one, NULL, NULL));
	struct rf_io pl = { .op = RF_IOP_POLL, .fd = c[0], .mask = POLLPRI,
			    .timeout_ns = 60ull * 1000000000ull };
	T_OK(rf_ring_submit(r, &pl, on_one, NULL, NULL));
	int t1 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_CHECK(connect(t1, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	while (events < 2) /* the accept saw t1 */
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	size_t big = 32u << 20;
	char *src = calloc(1, big);
	T_OK(rf_ring_send(r, t1, src, big, 0, 1, 0, on_one, NULL, NULL));
	int t2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_OK(rf_ring_connect(r, t2, (struct sockaddr *)&sa, sizeof(sa), 0, on_one, NULL, NULL));
	T_OK(rf_ring_run(r, RF_RUN_NOWAIT));

	/* accept, A, B, recv, poll, send, and the connect unless it finished already */
	unsigned pending = rf_ring_pending(r);
	T_CHECK(pending == 7 || (pending == 6 && finals == 1));
	rf_ring_destroy(r);
	T_EQ(finals, 7);
	T_CHECK(cancelled >= 6); /* the connect may have completed: a listener was there */
	T_EQ(refused, 3);
	free(src);
	for (int i = 0; i < 2; i++) {
		close(a[i]);
		close(b[i]);
		close(c[i]);
	}
	close(t1);
	close(t2);
	close(lfd);
	return 0;
}
