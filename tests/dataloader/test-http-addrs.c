/* dl-http-addrs: a host that resolves to several addresses (dataloader/http.c). Where
 * one address refuses -- an IPv6 address ahead of a server that listens on IPv4 only,
 * a stale one ahead of the live one -- the client connects to the next, in order, and
 * the bytes are those the server sent; with every address refusing, the request fails
 * after its retries, naming the last address, how many were tried and the host; an
 * address no socket can be made for (a family the host lacks) after a refused one
 * keeps the refusal, retried, not the socket's error. A
 * server of the test's own answers on 127.0.0.1 and closes every connection after one
 * response, so that each request connects again. The addresses are set with
 * rf__http_set_addrs: a test cannot make a name resolve to a dead and a live address.
 * Exit 77 without http-parser. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rf-config.h"
#include "../test-util.h"
#include "ringflow/ring.h"

#if RF_HAVE_HTTP_PARSER
#include "http-impl.h"

#define SIZE 100000u

static int lfd;
static _Atomic int served;

static unsigned char byte_at(uint64_t i)
{
	return (unsigned char)(i * 131 + (i >> 8));
}

/* One request per connection: GET with "Range: bytes=A-B", a 206 with those bytes,
 * then close. */
static void *server(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			return NULL;
		char req[2048];
		size_t n = 0;
		while (n < sizeof(req) - 1) {
			ssize_t k = recv(c, req + n, sizeof(req) - 1 - n, 0);
			if (k <= 0)
				break;
			n += (size_t)k;
			req[n] = 0;
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		req[n] = 0;
		unsigned long a = 0, b = 0;
		const char *r = strstr(req, "Range: bytes=");
		if (r && sscanf(r, "Range: bytes=%lu-%lu", &a, &b) == 2 && a <= b && b < SIZE) {
			char head[256];
			int hl = snprintf(head, sizeof(head), "HTTP/1.1 206 Partial Content\r\n"
					  "Content-Range: bytes %lu-%lu/%u\r\nContent-Length: %lu\r\n"
					  "Connection: close\r\n\r\n", a, b, SIZE, b - a + 1);
			unsigned char *body = malloc(b - a + 1);
			for (unsigned long i = a; i <= b; i++)
				body[i - a] = byte_at(i);
			/* counted before the reply goes: the client, once it has the bytes,
			 * reads the count (after the send, it could read it first) */
			atomic_fetch_add(&served, 1);
			if (send(c, head, (size_t)hl, MSG_NOSIGNAL) == hl)
				(void)send(c, body, b - a + 1, MSG_NOSIGNAL);
			free(body);
		}
		close(c);
	}
}

struct got {
	int done;
	int64_t res;
};

static void on_get(void *data, int64_t res)
{
	struct got *g = data;
	g->done = 1;
	g->res = res;
}

static int got_done(void *arg)
{
	return ((struct got *)arg)->done;
}

/* GET [off, off + len) through addresses a[0..n) in that order: its result, the bytes
 * checked, the failure's message in err. */
static int64_t get(struct rf_ring *r, int port, const struct sockaddr *const *a,
		   const socklen_t *len, unsigned n, uint64_t off, size_t nbytes, char *err,
		   size_t elen)
{
	char url[64];
	struct rf__http *h;
	unsigned char *dst = calloc(1, nbytes);

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/data", port);
	CHECK_OK(rf__http_create(&h, r, url, 1));
	rf__http_set_timeout(h, 5000000000ull);
	CHECK_OK(rf__http_set_addrs(h, a, len, n));
	struct rf__hreq q = { .off = off, .len = nbytes, .dst = dst };
	struct got g = { 0, 0 };
	q.cb = on_get;
	q.data = &g;
	CHECK_OK(rf__http_get(h, &q));
	CHECK_OK(rf_ring_run_until(r, got_done, &g, 0));
	if (g.res == (int64_t)nbytes)
		for (size_t i = 0; i < nbytes; i++)
			CHECK_EQ(dst[i], byte_at(off + i));
	snprintf(err, elen, "%s", q.err);
	rf__http_destroy(h);
	free(dst);
	return g.res;
}

int main(void)
{
	struct sockaddr_in live = { .sin_family = AF_INET }, dead = live, dead2 = live;
	struct sockaddr_in6 dead6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	socklen_t sl = sizeof(live);
	struct rf_ring *r;
	pthread_t th;
	char err[RF__HTTP_MSG];

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(lfd >= 0);
	inet_pton(AF_INET, "127.0.0.1", &live.sin_addr);
	CHECK_EQ(bind(lfd, (struct sockaddr *)&live, sizeof(live)), 0);
	CHECK_EQ(listen(lfd, 16), 0);
	CHECK_EQ(getsockname(lfd, (struct sockaddr *)&live, &sl), 0);
	int port = ntohs(live.sin_port);
	/* nothing listens on 127.0.0.3 or .4 (the server is bound to 127.0.0.1), nor on
	 * ::1: each connect there is refused */
	dead.sin_port = dead2.sin_port = live.sin_port;
	dead6.sin6_port = live.sin_port;
	inet_pton(AF_INET, "127.0.0.3", &dead.sin_addr);
	inet_pton(AF_INET, "127.0.0.4", &dead2.sin_addr);
	CHECK_EQ(pthread_create(&th, NULL, server, NULL), 0);
	CHECK_OK(rf_ring_create(&r, NULL));

	const struct sockaddr *sa_dead_live[] = { (void *)&dead, (void *)&live };
	const struct sockaddr *sa_v6_live[] = { (void *)&dead6, (void *)&dead, (void *)&live };
	const struct sockaddr *sa_live_dead[] = { (void *)&live, (void *)&dead };
	const struct sockaddr *sa_dead_dead[] = { (void *)&dead, (void *)&dead2 };
	const socklen_t l2[] = { sizeof(dead), sizeof(live) };
	const socklen_t l3[] = { sizeof(dead6), sizeof(dead), sizeof(live) };

	/* a stale address ahead of the live one: the bytes, from the live one */
	CHECK_EQ(get(r, port, sa_dead_live, l2, 2, 0, 4096, err, sizeof(err)), 4096);
	CHECK_EQ(get(r, port, sa_dead_live, l2, 2, 77777, 22223, err, sizeof(err)), 22223);
	/* IPv6 first (refused, or no IPv6 at all), then another dead one, then the live */
	CHECK_EQ(get(r, port, sa_v6_live, l3, 3, 12345, 1000, err, sizeof(err)), 1000);
	/* the live one first: the dead one is never needed */
	CHECK_EQ(get(r, port, sa_live_dead, l2, 2, 99999, 1, err, sizeof(err)), 1);
	CHECK_EQ(atomic_load(&served), 4);

	/* every address refuses: the request fails after its retries, naming the last
	 * address tried, how many there were and the host */
	int64_t res = get(r, port, sa_dead_dead, l2, 2, 0, 10, err, sizeof(err));
	CHECK_EQ(res, -ECONNREFUSED);
	char want[96];
	snprintf(want, sizeof(want), "connect to 127.0.0.4:%d: ", port);
	if (!strstr(err, want) || !strstr(err, "2 addresses of 127.0.0.1 tried") ||
	    !strstr(err, "bytes 0-9")) {
		fprintf(stderr, "FAIL: message: %s\n", err);
		return 1;
	}
	/* a dead address, then one of a family this host has no sockets for (255 here;
	 * IPv6 on a host without it): the connect's error, retried as any refusal -- it
	 * failed at once with the socket's EAFNOSUPPORT, the refusal lost */
	struct sockaddr_storage odd = { .ss_family = 255 };
	const struct sockaddr *sa_dead_odd[] = { (void *)&dead, (void *)&odd };
	const socklen_t l2o[] = { sizeof(dead), sizeof(odd) };
	res = get(r, port, sa_dead_odd, l2o, 2, 0, 10, err, sizeof(err));
	CHECK_EQ(res, -ECONNREFUSED);
	snprintf(want, sizeof(want), "connect to 127.0.0.3:%d: ", port);
	if (!strstr(err, want) || !strstr(err, "(after retries)")) {
		fprintf(stderr, "FAIL: message: %s\n", err);
		return 1;
	}
	CHECK_EQ(atomic_load(&served), 4);
	/* the setter's refusals */
	struct rf__http *h;
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/data", port);
	CHECK_OK(rf__http_create(&h, r, url, 1));
	CHECK_EQ(rf__http_set_addrs(h, sa_dead_live, l2, 0), -EINVAL);
	CHECK_EQ(rf__http_set_addrs(h, sa_dead_live, l2, RF__HTTP_ADDRS + 1), -EINVAL);
	const socklen_t big[] = { 4096, 4096 };
	CHECK_EQ(rf__http_set_addrs(h, sa_dead_live, big, 2), -EINVAL);
	rf__http_destroy(h);

	rf_ring_destroy(r);
	shutdown(lfd, SHUT_RDWR);
	close(lfd);
	pthread_join(th, NULL);
	printf("dl-http-addrs: a dead address ahead of the live one (IPv4, IPv6) connects "
	       "to the next; all dead fails naming the last\n");
	return 0;
}
#else
int main(void)
{
	printf("ringflow built without libhttp-parser\n");
	return T_SKIP;
}
#endif
