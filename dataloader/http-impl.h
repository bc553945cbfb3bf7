/* http-impl.h -- an HTTP/1.1 client for byte ranges of one URL, on a ring: the
 * loader's reader for `http://` datasets (http.c). Several keep-alive connections
 * with one request in flight each; responses parsed by the C http-parser. Internal.
 *
 * A request is satisfied only by "206 Partial Content" whose Content-Range is
 * exactly the range asked for and whose body is all there. A 5xx status, a dropped
 * connection, a short body or a stall past the deadline is retried on a fresh
 * connection, up to RF__HTTP_TRIES attempts, after a pause that grows (50 ms, 250 ms,
 * 1.25 s; a 503's Retry-After of at most RF__HTTP_RETRY_AFTER_MAX_S seconds, if longer):
 * a server restarting, or a proxy's brief 503, is waited for, not tried four times in
 * a millisecond; anything else (404, 416, a server that ignores Range) fails at once.
 * The failure's message names the URL and the range. */
#ifndef RINGFLOW_HTTP_IMPL_H
#define RINGFLOW_HTTP_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "ring.h"

#define RF__HTTP_TRIES 4
#define RF__HTTP_BACKOFF_NS (50ull * 1000000ull)   /* the first pause; x5 each time */
#define RF__HTTP_RETRY_AFTER_MAX_S 30
/* per connect, send, receive, and for all of a response's headers; the environment's
 * RF_HTTP_TIMEOUT_MS (1 .. 3600000) sets another (slow links; tests) */
#define RF__HTTP_TIMEOUT_NS (10ull * 1000000000ull)
#define RF__HTTP_MSG 320
#define RF__HTTP_ADDRS 8   /* a host's addresses tried, at most, in getaddrinfo's order */

struct rf__http;

/* One range request. The caller owns it until cb runs (once): res is len, or -errno
 * with the reason in err. */
struct rf__hreq {
	uint64_t off;
	size_t len;
	void *dst;
	rf_io_cb cb;
	void *data;
	uint64_t total;            /* the resource's size, from Content-Range */
	char validator[128];       /* its ETag, else Last-Modified ("": neither) */
	char err[RF__HTTP_MSG];
	int skip;                  /* the caller's: no longer wanted (its batch failed): not
				    * sent, ended with -ECANCELED when its turn comes */
	/* the client's */
	unsigned tries;
	struct rf__hreq *next;
};

/* Non-zero if s starts with "http://" (http-url.c). */
int rf__is_http(const char *s);

/* An http:// URL taken apart (http-url.c): the authority as written (the Host header
 * keeps it so), the path without its #fragment, the host to look up (an IPv6 literal
 * without its brackets) and the port. */
struct rf__http_url {
	const char *authority, *path;   /* into the URL */
	size_t authority_len, path_len;
	char host[256];
	char port[16];
	int literal6;                   /* [IPv6 literal]: never a name to look up */
};
/* Refuses (-EINVAL, -ENAMETOOLONG, with a message naming url) what is no
 * http://HOST[:PORT]/PATH: no host or path, spaces or line breaks, more than 700
 * characters, user information, unbalanced brackets, an IPv6 address without them, a
 * port that is not 1..65535. */
int rf__http_url_parse(const char *url, struct rf__http_url *u);
/* u's host resolved (blocking): up to max addresses in getaddrinfo's order into
 * addr[] and len[], *n of them. 0, or -EHOSTUNREACH with a message naming url. */
int rf__http_resolve(const char *url, const struct rf__http_url *u,
		     struct sockaddr_storage *addr, socklen_t *len, unsigned max, unsigned *n);

/* A client for url on ring r with nconns connections (0: 4). The host is resolved
 * here (blocking: call it at open time). 0, or -errno with the message in
 * rf_last_error(); -ENOTSUP where ringflow was built without libhttp-parser. */
int rf__http_create(struct rf__http **out, struct rf_ring *r, const char *url, unsigned nconns);
/* Stop now: queued requests fail with -ECANCELED (their callbacks run here), those in
 * flight end as their connections are shut down, new ones are refused (-ECANCELED).
 * What a teardown calls before it waits for its reads. */
void rf__http_cancel(struct rf__http *h);
/* The per-step timeout (connect, send, receive, response head) from now on. */
void rf__http_set_timeout(struct rf__http *h, uint64_t ns);
/* The resource's size when it was opened: a response whose Content-Range gives another
 * total fails ("the resource changed on the server"), so that bytes of a replaced file
 * are never mixed into records read from the old one. 0: not checked. */
void rf__http_expect_size(struct rf__http *h, uint64_t size);
/* The same for the validator the open saw (its ETag, else Last-Modified; NULL or "":
 * not checked): a response with another is refused the same way -- a file replaced by
 * one of the same size changed nothing else the client could see. */
void rf__http_expect_validator(struct rf__http *h, const char *v);
/* Replace the addresses the host resolved to (n of them, 1..RF__HTTP_ADDRS, tried in
 * this order): for tests, which cannot make a name resolve to a dead address and a
 * live one. Before any request. 0, or -EINVAL. */
int rf__http_set_addrs(struct rf__http *h, const struct sockaddr *const *a,
		       const socklen_t *len, unsigned n);
/* Cancels what is in flight (callbacks run with -ECANCELED) and frees. */
void rf__http_destroy(struct rf__http *h);
/* Queue q (its off, len, dst, cb, data set). 0, or -errno (nothing queued). */
int rf__http_get(struct rf__http *h, struct rf__hreq *q);

/* The per-step timeout of the clients this thread creates from now on, in place of
 * RF_HTTP_TIMEOUT_MS's (0: that one again); the one it replaces is returned, so that
 * an open given a timeout (rf_dataset_open_file_opts) sets it around its reads and
 * puts the old one back. */
uint64_t rf__http_open_timeout(uint64_t ns);
/* The interrupt the requests of this thread's opens ask (rf_dataset_open_opts's),
 * the same way: set around an open, the one it replaces put back after. */
struct rf__http_intr {
	int (*fn)(void *arg);
	void *arg;
};
struct rf__http_intr rf__http_open_interrupt(struct rf__http_intr in);
/* Blocking: fetch [off, off + len) of url into dst with a private ring; the resource's
 * size into *total if not NULL, its validator (rf__http_expect_validator) into
 * got[glen] if not NULL; expect: the validator the response must carry, if not NULL.
 * 0, or -errno with the message (naming the URL and range) in rf_last_error(). */
int rf__http_read(const char *url, uint64_t off, size_t len, void *dst, uint64_t *total,
		  const char *expect, char *got, size_t glen);

#endif
