/* http.c -- byte ranges of one http:// URL over the ring's sockets (http-impl.h).
 *
 * Each connection runs one request at a time: connect (once; kept alive), send the
 * GET with its Range header, receive into a header buffer that http-parser reads
 * (status, Content-Range, Content-Length; the body bytes that came along are copied
 * to the destination), then receive the rest of the body straight into the
 * destination with MSG_WAITALL. Every ring request carries a deadline. A failure
 * closes the connection; retryable ones put the request back at the queue's head. A
 * host that resolves to several addresses is connected to as getaddrinfo orders them:
 * a connect that fails moves on to the next (an IPv6 address first where the server
 * listens on IPv4 only), and later connects start at the one that answered. */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http-impl.h"
#include "rf-config.h"
#include "rf-internal.h"
#include "ring-ops.h"

/* A timeout given to this thread's opens (rf__http_open_timeout); 0: the environment's */
static __thread uint64_t rf__open_tmo;

uint64_t rf__http_open_timeout(uint64_t ns)
{
	uint64_t old = rf__open_tmo;
	rf__open_tmo = ns;
	return old;
}

static __thread struct rf__http_intr rf__open_intr;

struct rf__http_intr rf__http_open_interrupt(struct rf__http_intr in)
{
	struct rf__http_intr old = rf__open_intr;
	rf__open_intr = in;
	return old;
}

int rf_dataset_http_timeout(uint64_t *ns)
{
	uint64_t ms;
	int ret = rf__env_u64("RF_HTTP_TIMEOUT_MS", getenv("RF_HTTP_TIMEOUT_MS"), 1, 3600000,
			      RF__HTTP_TIMEOUT_NS / 1000000ull, "milliseconds", &ms);

	*ns = ms * 1000000ull;  /* the default where refused */
	return ret;
}

#if RF_HAVE_HTTP_PARSER
#include "http-resp.h"

#define RF__HBUF 8192

struct rf__hconn {
	struct rf__http *h;
	int fd;
	int busy;            /* ring requests in flight (0 or 1) */
	struct rf__hreq *q;  /* the request it runs */
	struct rf__hresp resp; /* its response (http-resp.h); resp.got: body bytes in dst */
	char hbuf[RF__HBUF];
	char sbuf[1024];
	uint64_t hdr_deadline; /* the response's headers must all be in by then */
	uint64_t body_deadline; /* the body's receive's */
	size_t slen;         /* the request's bytes (a send that ends short: their count) */
	int backoff;         /* busy with a pause before q's next try (a ring timeout) */
	rf_req_id backoff_id;
	char why[160];       /* a message built for rf__hconn_fail */
	unsigned ai;         /* connecting: the address tried (h->addr[ai]) */
	unsigned left;       /* ... and how many more it may try before it fails */
	int cerr;            /* ... and the last connect's error (0: none yet), of address
			      * cai: what the attempt fails with when no address is left */
	unsigned cai;
};

struct rf__http {
	struct rf_ring *r;
	char *url, *host, *path;
	struct sockaddr_storage addr[RF__HTTP_ADDRS]; /* the host's, getaddrinfo's order */
	socklen_t addrlen[RF__HTTP_ADDRS];
	unsigned naddr;
	unsigned good;       /* the address the last connect reached: connects start there */
	char name[256];      /* the host's name (or address), for messages */
	unsigned nconns;
	struct rf__hconn *c;
	struct rf__hreq *head, *tail; /* waiting for a connection */
	int destroying;
	int kick;            /* a NOP is queued to hand requests to connections */
	uint64_t size;       /* the resource's size when it was opened (0: not known) */
	char validator[128]; /* its ETag (else Last-Modified) then ("": not checked) */
	uint64_t timeout_ns; /* per connect, send, receive, and for a response's headers */
};

static void rf__hconn_run(struct rf__hconn *c);

/* ---- requests ---- */

static void rf__hreq_fail(struct rf__http *h, struct rf__hreq *q, int err, const char *fmt, ...)
	RF__PRINTF(4, 5);
static void rf__hreq_fail(struct rf__http *h, struct rf__hreq *q, int err, const char *fmt, ...)
{
	char why[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	char tmo[48] = "";
	if (err == -ETIMEDOUT)  /* which timeout: the caller's, the environment's or 10 s */
		snprintf(tmo, sizeof(tmo), " (timeout %" PRIu64 " ms)", (uint64_t)(h->timeout_ns / 1000000u));
	snprintf(q->err, sizeof(q->err), "%s: bytes %" PRIu64 "-%" PRIu64 ": %s%s%s", h->url,
		 q->off, q->off + q->len - 1, why, tmo, q->tries > 1 ? " (after retries)" : "");
	q->cb(q->data, err);
}

static void rf__hq_push_front(struct rf__http *h, struct rf__hreq *q)
{
	q->next = h->head;
	h->head = q;
	if (!h->tail)
		h->tail = q;
}

static struct rf__hreq *rf__hq_pop(struct rf__http *h)
{
	struct rf__hreq *q = h->head;
	if (q) {
		h->head = q->next;
		if (!h->head)
			h->tail = NULL;
		q->next = NULL;
	}
	return q;
}

static void rf__hconn_close(struct rf__hconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* The pause before q's next try is over (or cancelled): q back at the queue's head. */
static void rf__on_backoff(void *data, int64_t res)
{
	struct rf__hconn *c = data;
	struct rf__http *h = c->h;
	struct rf__hreq *q = c->q;
	c->q = NULL;
	c->busy = 0;
	c->backoff = 0;
	if (h->destroying) {
		rf__hreq_fail(h, q, -ECANCELED, "cancelled");
		return;
	}
	rf__hq_push_front(h, q);
	rf__hconn_run(c);
}

/* The connection's request failed: retry it (retryable, tries left) after a pause, or
 * report. */
static void rf__hconn_fail(struct rf__hconn *c, int err, int retryable, const char *what)
{
	struct rf__http *h = c->h;
	struct rf__hreq *q = c->q;
	uint64_t ra = c->resp.retry_after;
	c->q = NULL;
	rf__hconn_close(c);
	if (retryable && q->tries < RF__HTTP_TRIES && !h->destroying) {
		uint64_t pause = RF__HTTP_BACKOFF_NS;
		for (unsigned t = 1; t < q->tries; t++)
			pause *= 5;
		if (ra > RF__HTTP_RETRY_AFTER_MAX_S)
			ra = RF__HTTP_RETRY_AFTER_MAX_S;
		if (ra * 1000000000ull > pause)
			pause = ra * 1000000000ull;
		c->q = q;  /* the connection holds it while it waits: quiet waits for that */
		c->busy = 1;
		c->backoff = 1;
		if (rf_ring_timeout(h->r, pause, rf__on_backoff, c, &c->backoff_id) == 0)
			return;
		c->q = NULL;  /* no timer: at once, as before */
		c->busy = 0;
		c->backoff = 0;
		rf__hq_push_front(h, q);
	} else {
		rf__hreq_fail(h, q, err, "%s", what);
	}
	if (!h->destroying)
		rf__hconn_run(c);
}

static void rf__hconn_done(struct rf__hconn *c)
{
	struct rf__hreq *q = c->q;
	c->q = NULL;
	if (!c->resp.keep)
		rf__hconn_close(c);
	q->cb(q->data, (int64_t)q->len);
	if (!c->h->destroying)
		rf__hconn_run(c);
}

static void rf__on_body(void *data, int64_t res)
{
	struct rf__hconn *c = data;
	c->busy = 0;
	if (res == -ECANCELED)
		return rf__hconn_fail(c, -ECANCELED, 0, "cancelled");
	if (res < 0 || c->resp.got + (uint64_t)res != c->q->len) {
		char what[120];
		int err = res < 0 ? (int)res : -EIO;
		if (res < 0)
			snprintf(what, sizeof(what), "receiving the body: %s", strerror((int)-res));
		else if (rf_now_ns() >= c->body_deadline) /* a stall: the count of what came */
			snprintf(what, sizeof(what), "receiving the body: stalled after %zu of %zu "
				 "bytes", c->resp.got + (size_t)res, c->q->len), err = -ETIMEDOUT;
		else
			snprintf(what, sizeof(what), "short body: the connection ended after %zu of "
				 "%zu bytes", c->resp.got + (size_t)res, c->q->len);
		return rf__hconn_fail(c, err, 1, what);
	}
	c->resp.got += (size_t)res;
	rf__hconn_done(c);
}

static int rf__hconn_submit(struct rf__hconn *c, struct rf_io *io, rf_io_cb cb)
{
	/* a stall past 10 s fails; a long body gets 1 s more per 8 MiB (one deadline
	 * covers the whole MSG_WAITALL receive); the caller may have set a shorter one */
	if (!io->timeout_ns)
		io->timeout_ns = c->h->timeout_ns + (uint64_t)(io->len >> 23) * 1000000000ull;
	int ret = rf_ring_submit(c->h->r, io, cb, c, NULL);
	if (ret == 0)
		c->busy = 1;
	return ret;
}

static void rf__on_headers(void *data, int64_t res);

/* Receive (more of) the response's headers into hbuf: http-parser keeps its state
 * across calls, so each piece starts at hbuf's beginning. */
static void rf__recv_headers(struct rf__hconn *c)
{
	struct rf_io io = { .op = RF_IOP_RECV, .fd = c->fd, .buf = c->hbuf, .len = RF__HBUF };
	uint64_t now = rf_now_ns();

	/* One deadline for all of the headers, not one per receive: a server that sends
	 * a byte now and then would otherwise hold the request for hours. */
	if (now >= c->hdr_deadline)
		return rf__hconn_fail(c, -ETIMEDOUT, 1, "response headers not complete "
				      "within the timeout");
	io.timeout_ns = c->hdr_deadline - now;
	if (rf__hconn_submit(c, &io, rf__on_headers) < 0)
		rf__hconn_fail(c, -EIO, 1, "cannot queue a receive");
}

static void rf__on_headers(void *data, int64_t res)
{
	struct rf__hconn *c = data;
	c->busy = 0;
	if (res == -ECANCELED)
		return rf__hconn_fail(c, -ECANCELED, 0, "cancelled");
	if (res <= 0) {
		char what[120];
		snprintf(what, sizeof(what), res == 0 ? "the server closed the connection before "
			 "answering%s" : "receiving the response: %s", res == 0 ? "" : strerror((int)-res));
		return rf__hconn_fail(c, res == 0 ? -EPIPE : (int)res, 1, what);
	}
	struct rf__hresp *r = &c->resp;
	if (rf__hresp_feed(r, c->hbuf, (size_t)res) < 0)
		return rf__hconn_fail(c, -EPROTO, 0, r->err);  /* a malformed head: the server's, again */
	if (!r->head_done) { /* more header bytes to come */
		if (r->p.nread >= RF__HBUF - 1)
			return rf__hconn_fail(c, -EPROTO, 0, "response headers over 8 KiB");
		rf__recv_headers(c);
		return;
	}
	unsigned st = r->p.status_code;
	if (st != 206) {
		char what[120];
		int retry = st >= 500;
		snprintf(what, sizeof(what), "HTTP status %u, expected 206 Partial Content%s", st,
			 st != 200 ? "" : r->p.content_length == 0 ? " (the file is empty: no "
			 "byte to give)" : " (the server ignores Range requests)");
		return rf__hconn_fail(c, st == 404 ? -ENOENT : st == 416 ? -ERANGE : -EIO, retry, what);
	}
	uint64_t total = 0;
	const char *bad = rf__hresp_range(r, c->q->off, c->q->len, c->h->size, &total, c->why,
					  sizeof(c->why));
	if (bad)
		return rf__hconn_fail(c, -EPROTO, 0, bad);
	const char *val = rf__hresp_validator(r);
	if (c->h->validator[0] && val[0] && strcmp(val, c->h->validator)) {
		/* the bytes would be another file's, of the same size: never mixed in */
		snprintf(c->why, sizeof(c->why), "the resource changed on the server: %s %.40s, "
			 "%.40s when it was opened", r->etaglen ? "ETag" : "Last-Modified", val,
			 c->h->validator);
		return rf__hconn_fail(c, -ESTALE, 0, c->why);
	}
	snprintf(c->q->validator, sizeof(c->q->validator), "%s", val);
	c->q->total = total;
	/* the body is received raw after this: a chunked one (no Content-Length) would
	 * land in the batch with its chunk-size lines */
	if (r->te || r->p.content_length == (uint64_t)-1 || (r->p.flags & F_CHUNKED))
		return rf__hconn_fail(c, -EPROTO, 0, "206 without a Content-Length, or with a "
				      "Transfer-Encoding (chunked?)");
	if (r->body != r->got || r->got + r->p.content_length != c->q->len)
		return rf__hconn_fail(c, -EPROTO, 0, "Content-Length disagrees with Content-Range");
	if (r->got == c->q->len)
		return rf__hconn_done(c);
	struct rf_io io = { .op = RF_IOP_RECV, .fd = c->fd, .buf = (char *)c->q->dst + r->got,
			    .len = c->q->len - r->got, .arg = MSG_WAITALL };
	uint64_t now = rf_now_ns();
	if (rf__hconn_submit(c, &io, rf__on_body) < 0)
		return rf__hconn_fail(c, -EIO, 1, "cannot queue a receive");
	c->body_deadline = now + io.timeout_ns; /* rf__hconn_submit set it */
}

static void rf__on_sent(void *data, int64_t res)
{
	struct rf__hconn *c = data;
	c->busy = 0;
	if (res < 0) {
		char what[120];
		snprintf(what, sizeof(what), "sending the request: %s", strerror((int)-res));
		return rf__hconn_fail(c, (int)res, res != -ECANCELED, what);
	}
	if ((size_t)res != c->slen) { /* ended part of the way (a stall, a reset) */
		char what[120];
		snprintf(what, sizeof(what), "sending the request: %zu of its %zu bytes went",
			 (size_t)res, c->slen);
		return rf__hconn_fail(c, -EIO, 1, what);
	}
	c->hdr_deadline = rf_now_ns() + c->h->timeout_ns;
	rf__recv_headers(c);
}

static void rf__send_request(struct rf__hconn *c)
{
	struct rf__hreq *q = c->q;
	int n = snprintf(c->sbuf, sizeof(c->sbuf),
			 "GET %s HTTP/1.1\r\nHost: %s\r\nRange: bytes=%" PRIu64 "-%" PRIu64 "\r\n"
			 "User-Agent: ringflow\r\n\r\n", c->h->path, c->h->host, q->off,
			 q->off + q->len - 1);
	rf__hresp_init(&c->resp, q->dst, q->len);
	struct rf_io io = { .op = RF_IOP_SEND, .fd = c->fd, .buf = c->sbuf, .len = (size_t)n };
	c->slen = (size_t)n;
	if (rf__hconn_submit(c, &io, rf__on_sent) < 0)
		rf__hconn_fail(c, -EIO, 1, "cannot queue a send");
}

/* "ADDR:PORT" ("[ADDR]:PORT" for IPv6) of address i, for messages. */
static void rf__addr_str(const struct rf__http *h, unsigned i, char *out, size_t n)
{
	char a[INET6_ADDRSTRLEN + 1] = "?", p[8] = "?";
	int v6 = h->addr[i].ss_family == AF_INET6;

	(void)getnameinfo((const struct sockaddr *)&h->addr[i], h->addrlen[i], a, sizeof(a), p,
			  sizeof(p), NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(out, n, "%s%s%s:%s", v6 ? "[" : "", a, v6 ? "]" : "", p);
}

static void rf__on_connect(void *data, int64_t res);

/* Every address tried: the attempt fails with the last connect's error (retryable:
 * a server restarting), its address named. */
static void rf__hconn_connect_failed(struct rf__hconn *c)
{
	struct rf__http *h = c->h;
	char a[64], what[200];

	rf__addr_str(h, c->cai, a, sizeof(a));
	if (h->naddr > 1)
		snprintf(what, sizeof(what), "connect to %s: %s (%u addresses of %.60s tried)", a,
			 strerror(-c->cerr), h->naddr, h->name);
	else
		snprintf(what, sizeof(what), "connect to %s: %s", a, strerror(-c->cerr));
	rf__hconn_fail(c, c->cerr, 1, what);
}

/* The next address, if one is left to try: 1, else 0. */
static int rf__hconn_next_addr(struct rf__hconn *c)
{
	if (!c->left)
		return 0;
	c->left--;
	c->ai = (c->ai + 1) % c->h->naddr;
	return 1;
}

/* Connect to the address c->ai; one that cannot be tried, or whose connect fails,
 * hands over to the next while one is left (rf__on_connect). */
static void rf__hconn_connect(struct rf__hconn *c)
{
	struct rf__http *h = c->h;

	while ((c->fd = socket(h->addr[c->ai].ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		int err = -errno;  /* EAFNOSUPPORT: no IPv6 here; EMFILE: no descriptor */
		int no_fds = err == -EMFILE || err == -ENFILE;
		if (!no_fds && rf__hconn_next_addr(c))
			continue;
		if (!no_fds && c->cerr)
			return rf__hconn_connect_failed(c); /* a connect's error says more */
		char a[64], what[120];
		rf__addr_str(h, c->ai, a, sizeof(a));
		snprintf(what, sizeof(what), "socket() for %s failed: %s", a, strerror(-err));
		return rf__hconn_fail(c, err, 0, what);
	}
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct rf_io io = { .op = RF_IOP_CONNECT, .fd = c->fd,
			    .addr = (struct sockaddr *)&h->addr[c->ai], .addrlen = h->addrlen[c->ai] };
	if (rf__hconn_submit(c, &io, rf__on_connect) < 0)
		rf__hconn_fail(c, -EIO, 1, "cannot queue a connect");
}

static void rf__on_connect(void *data, int64_t res)
{
	struct rf__hconn *c = data;
	struct rf__http *h = c->h;
	c->busy = 0;
	if (res == -ECANCELED || (res < 0 && h->destroying)) {
		char what[120];
		snprintf(what, sizeof(what), "connect: %s", strerror((int)-res));
		return rf__hconn_fail(c, (int)res, 0, what);
	}
	if (res < 0) {
		c->cerr = (int)res;
		c->cai = c->ai;
		if (!rf__hconn_next_addr(c))
			return rf__hconn_connect_failed(c);
		rf__hconn_close(c);  /* the next address, on a socket of its family */
		return rf__hconn_connect(c);
	}
	h->good = c->ai;
	rf__send_request(c);
}

/* Give an idle connection the next request waiting. */
static void rf__hconn_run(struct rf__hconn *c)
{
	struct rf__http *h = c->h;
	if (c->q || c->busy || h->destroying)
		return;
	c->q = rf__hq_pop(h);
	while (c->q && c->q->skip) {   /* unwanted since it was queued: ended, not sent */
		struct rf__hreq *q = c->q;
		c->q = NULL;
		snprintf(q->err, sizeof(q->err), "skipped: another read of its batch failed");
		q->cb(q->data, -ECANCELED);
		if (c->q || c->busy || h->destroying)
			return;            /* the callback gave this connection work, or ended it */
		c->q = rf__hq_pop(h);
	}
	if (!c->q)
		return;
	c->q->tries++;
	if (c->fd >= 0) {
		rf__send_request(c);
		return;
	}
	c->ai = h->good;
	c->left = h->naddr - 1;
	c->cerr = 0;
	rf__hconn_connect(c);
}

/* Connections take requests from a ring callback, never inside rf__http_get: its
 * caller must not see a callback before it returns. */
static void rf__on_kick(void *data, int64_t res)
{
	struct rf__http *h = data;
	h->kick = 0;
	for (unsigned i = 0; i < h->nconns && !h->destroying; i++)
		rf__hconn_run(&h->c[i]);
}

int rf__http_get(struct rf__http *h, struct rf__hreq *q)
{
	if (h->destroying)
		return -ECANCELED;
	if (!q->len || !q->cb)
		return -EINVAL;
	q->tries = 0;
	q->skip = 0;
	q->err[0] = 0;
	q->total = 0;
	q->next = NULL;
	if (h->tail)
		h->tail->next = q;
	else
		h->head = q;
	h->tail = q;
	if (!h->kick) {
		struct rf_io nop = { .op = RF_IOP_NOP };
		int ret = rf_ring_submit(h->r, &nop, rf__on_kick, h, NULL);
		if (ret < 0) { /* take q back out: it is the tail */
			struct rf__hreq **pp = &h->head, *prev = NULL;
			while (*pp != q) {
				prev = *pp;
				pp = &(*pp)->next;
			}
			*pp = NULL;
			h->tail = prev;
			return ret;
		}
		h->kick = 1;
	}
	return 0;
}

int rf__http_create(struct rf__http **out, struct rf_ring *r, const char *url, unsigned nconns)
{
	struct rf__http_url u;
	int ret;

	*out = NULL;
	if ((ret = rf__http_url_parse(url, &u)) < 0)
		return ret;
	uint64_t tmo = rf__open_tmo;
	if (!tmo && (ret = rf_dataset_http_timeout(&tmo)) < 0)
		return rf__fail_under(ret, "%s", url);
	struct rf__http *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->r = r;
	h->timeout_ns = tmo;
	h->nconns = nconns ? nconns : 4;
	h->url = strdup(url);
	h->host = strndup(u.authority, u.authority_len);
	h->path = strndup(u.path, u.path_len);
	snprintf(h->name, sizeof(h->name), "%s", u.host);
	h->c = calloc(h->nconns, sizeof(*h->c));
	for (unsigned i = 0; h->c && i < h->nconns; i++) {
		h->c[i].h = h;
		h->c[i].fd = -1; /* before any failure: destroy closes fds >= 0 */
	}
	if (!h->url || !h->host || !h->path || !h->c) {
		rf__http_destroy(h);
		return -ENOMEM;
	}
	if ((ret = rf__http_resolve(url, &u, h->addr, h->addrlen, RF__HTTP_ADDRS, &h->naddr)) < 0) {
		rf__http_destroy(h);
		return ret;
	}
	*out = h;
	return 0;
}

static int rf__http_quiet(void *arg)
{
	struct rf__http *h = arg;
	if (h->kick)
		return 0;
	for (unsigned i = 0; i < h->nconns; i++)
		if (h->c[i].busy)
			return 0;
	return 1;
}

void rf__http_expect_size(struct rf__http *h, uint64_t size)
{
	h->size = size;
}

void rf__http_expect_validator(struct rf__http *h, const char *v)
{
	snprintf(h->validator, sizeof(h->validator), "%s", v ? v : "");
}

int rf__http_set_addrs(struct rf__http *h, const struct sockaddr *const *a, const socklen_t *len,
		       unsigned n)
{
	if (!n || n > RF__HTTP_ADDRS)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++)
		if (len[i] > sizeof(h->addr[0]))
			return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		memcpy(&h->addr[i], a[i], len[i]);
		h->addrlen[i] = len[i];
	}
	h->naddr = n;
	h->good = 0;
	return 0;
}

void rf__http_set_timeout(struct rf__http *h, uint64_t ns)
{
	if (h && ns)
		h->timeout_ns = ns;
}

void rf__http_cancel(struct rf__http *h)
{
	struct rf__hreq *q;

	if (!h || h->destroying)
		return;
	h->destroying = 1;  /* no retry, no new request: -ECANCELED */
	while ((q = rf__hq_pop(h)))
		rf__hreq_fail(h, q, -ECANCELED, "cancelled");
	/* a request in flight ends with its connection, now, not at its timeout; one
	 * pausing before a retry, with its pause */
	for (unsigned i = 0; h->c && i < h->nconns; i++) {
		if (h->c[i].fd >= 0 && h->c[i].busy)
			shutdown(h->c[i].fd, SHUT_RDWR);
		if (h->c[i].backoff)
			(void)rf_ring_cancel(h->r, h->c[i].backoff_id);
	}
}

void rf__http_destroy(struct rf__http *h)
{
	if (!h)
		return;
	rf__http_cancel(h); /* queued requests failed, those in flight ending */
	if (h->c) {
		if (!rf__http_quiet(h) && !rf_ring_in_callback(h->r))
			rf_ring_run_until(h->r, rf__http_quiet, h, 0);
		for (unsigned i = 0; i < h->nconns; i++)
			rf__hconn_close(&h->c[i]);
	}
	free(h->c);
	free(h->url);
	free(h->host);
	free(h->path);
	free(h);
}

/* ---- blocking ---- */

struct rf__hsync {
	int done;
	int64_t res;
};

static void rf__hsync_cb(void *data, int64_t res)
{
	struct rf__hsync *s = data;
	s->done = 1;
	s->res = res;
}

static int rf__hsync_done(void *arg)
{
	return ((struct rf__hsync *)arg)->done;
}

/* Turn r until s is done; with an interrupt given to this thread's opens, in turns of
 * 100 ms that ask it between them. */
static int rf__hsync_wait(struct rf_ring *r, struct rf__hsync *s, const char *url)
{
	if (!rf__open_intr.fn)
		return rf_ring_run_until(r, rf__hsync_done, s, 0);
	for (;;) {
		int ret = rf_ring_run_until(r, rf__hsync_done, s, 100000000ull);
		if (ret != -ETIMEDOUT)
			return ret;
		if (rf__open_intr.fn(rf__open_intr.arg))
			return rf__fail(-EINTR, "%s: interrupted", url);
	}
}

int rf__http_read(const char *url, uint64_t off, size_t len, void *dst, uint64_t *total,
		  const char *expect, char *got, size_t glen)
{
	struct rf_ring *r;
	struct rf__http *h;
	int ret = rf_ring_create(&r, &(struct rf_ring_opts){ .entries = 16 });
	if (ret < 0)
		return rf__fail_under(ret, "%s: cannot create a ring", url);
	ret = rf__http_create(&h, r, url, 1);
	if (ret < 0) {
		rf_ring_destroy(r);
		return ret;
	}
	struct rf__hsync s = { 0 };
	struct rf__hreq *q = calloc(1, sizeof(*q));
	if (!q) {
		rf__http_destroy(h);
		rf_ring_destroy(r);
		return -ENOMEM;
	}
	q->off = off;
	q->len = len;
	q->dst = dst;
	q->cb = rf__hsync_cb;
	q->data = &s;
	rf__http_expect_validator(h, expect);
	ret = rf__http_get(h, q);
	if (ret == 0)
		ret = rf__hsync_wait(r, &s, url);
	if (ret == 0 && s.res < 0)
		ret = rf__fail((int)s.res, "%s", q->err);
	if (ret == 0 && total)
		*total = q->total;
	if (ret == 0 && got && glen)
		snprintf(got, glen, "%s", q->validator);
	rf__http_destroy(h);
	rf_ring_destroy(r);
	free(q);
	return ret;
}

#else /* no http-parser */

int rf__http_create(struct rf__http **out, struct rf_ring *r, const char *url, unsigned nconns)
{
	*out = NULL;
	return rf__fail(-ENOTSUP, "%s: ringflow was built without libhttp-parser: no http:// data", url);
}

void rf__http_expect_size(struct rf__http *h, uint64_t size)
{
	(void)h;
	(void)size;
}

void rf__http_destroy(struct rf__http *h)
{
}

void rf__http_cancel(struct rf__http *h)
{
}

void rf__http_set_timeout(struct rf__http *h, uint64_t ns)
{
}

int rf__http_get(struct rf__http *h, struct rf__hreq *q)
{
	return -ENOTSUP;
}

int rf__http_read(const char *url, uint64_t off, size_t len, void *dst, uint64_t *total,
		  const char *expect, char *got, size_t glen)
{
	struct rf__http *h;
	return rf__http_create(&h, NULL, url, 0);
}

void rf__http_expect_validator(struct rf__http *h, const char *v)
{
}

int rf__http_set_addrs(struct rf__http *h, const struct sockaddr *const *a, const socklen_t *len,
		       unsigned n)
{
	return -ENOTSUP;
}
#endif
