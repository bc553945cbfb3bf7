/* dataloader/http-resp.h -- one HTTP/1.1 response to a Range request, read with
 * http-parser and held to what RFC 9112 asks of it where the lenient parser is not:
 * the status line starts "HTTP/" with major version 1; field names are RFC 9110 token
 * characters (no "Content-Range : ..." read as another field); no line is folded onto
 * the previous field; one Content-Range, at most 127 bytes; no Transfer-Encoding on a
 * 206 (its body is read raw); nothing after the message in the same bytes. The body
 * bytes that come with the head are copied into the caller's buffer (a 206's only,
 * up to its capacity). No I/O: the loader feeds it what it receives, and
 * fuzz/fuzz-http-response.c feeds it bytes. Internal to dataloader/. */
#ifndef RF_HTTP_RESP_H
#define RF_HTTP_RESP_H

#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>

struct rf__hresp {
	http_parser p;
	const char *rx_end;  /* the end of the bytes being fed */
	int head_done;       /* the status line and the fields are all in */
	int msg_done;        /* the whole message (a body of Content-Length) is in */
	int keep;            /* the connection may carry the next request */
	int bad;             /* refused: err says why */
	unsigned vpos;       /* bytes of "HTTP/" matched at the start */
	char field[32];
	size_t fieldlen;
	int in_value, value_cut, in_cr, in_te;
	int ncr, te;
	char cr[128];        /* the Content-Range value */
	size_t crlen;
	int in_etag, in_lm, in_ra;
	unsigned ninterim;   /* 1xx responses taken before this one (at most 8) */
	uint64_t retry_after; /* a Retry-After of delta-seconds (0: none, or a date) */
	char etag[128];      /* the ETag value, and Last-Modified's ("" : none; a value cut
			      * at 127 bytes stays cut, the same way every time) */
	char lastmod[64];
	size_t etaglen, lmlen;
	char err[120];
	void *dst;           /* the body's destination, cap bytes */
	size_t cap, got;     /* body bytes copied so far (a 206's, at most cap) */
	uint64_t body;       /* body bytes parsed, copied or not */
};

void rf__hresp_init(struct rf__hresp *r, void *dst, size_t cap);
/* Parse n more received bytes. 0, or -EPROTO with r->err set (and r->bad). */
int rf__hresp_feed(struct rf__hresp *r, const char *buf, size_t n);
/* A 206's Content-Range ("bytes A-B/T", or with T "*": unknown; digits only) against the
 * range asked for, [off, off + len), and the resource's size when known (0: not).
 * NULL with *total set (0: "*"), or why not, in why (wl bytes) or static text. */
const char *rf__hresp_range(struct rf__hresp *r, uint64_t off, uint64_t len, uint64_t size,
			    uint64_t *total, char *why, size_t wl);
/* The response's validator, as rf__http keeps it: its ETag, else its Last-Modified,
 * without surrounding whitespace ("" if neither). */
const char *rf__hresp_validator(struct rf__hresp *r);

#endif
