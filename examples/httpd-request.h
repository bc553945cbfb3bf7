/* examples/httpd-request.h -- rf-httpd's request side, without I/O: the bytes a
 * connection receives go through http-parser (Debian's libhttp-parser, built lenient)
 * and the checks RFC 9112 asks for that the lenient parser leaves out; each request
 * that comes out is queued with its path resolved below the served directory and its
 * Range header kept. The server feeds it what it receives; fuzz/fuzz-httpd-request.c
 * feeds it bytes.
 *
 * Refused with 400 (and the connection closed after the requests before it are
 * answered): a field name with a character that is not an RFC 9110 token character
 * (so "Content-Length : 5", "Host : x", "Bad Name: v" -- whitespace before the colon
 * is the request-smuggling pattern of RFC 9112 section 5.1), an empty field name, a
 * request line whose version is not "HTTP/" (exactly one space after the target), a
 * line folded onto the previous field (obs-fold, section 5.2), an HTTP/1.1 request
 * with no Host or several (section 3.2), Transfer-Encoding in an HTTP/1.0 request
 * (section 6.1), and whatever http-parser itself refuses (duplicate or conflicting
 * Content-Length, Transfer-Encoding with Content-Length, bad chunking, ...); 505 for
 * an HTTP major version other than 1. */
#ifndef RF_HTTPD_REQUEST_H
#define RF_HTTPD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>

#define HR_URL_MAX 2048
#define HR_HDR_MAX 512    /* a Range value kept */
#define HR_QMAX 8         /* pipelined requests queued per connection; past them the
			   * parser pauses and holds the bytes received after them */
#define HR_QCAP (HR_QMAX + 1) /* and one slot more: the error that ends the pipeline */
#define HR_HELD_MAX (1u << 20) /* bytes held while paused: what arrives before the
				* server has stopped reading (more: 400) */

struct hr_req {
	char path[HR_URL_MAX];
	int head, keep_alive, status; /* status != 0: answer with that error */
	int has_range;
	char range[HR_HDR_MAX];
};

struct hr {
	http_parser parser;
	struct hr_req q[HR_QCAP];
	unsigned qhead, qlen;
	unsigned begun;         /* requests whose first byte has arrived */
	int in_request;         /* one has begun and is not complete */
	int bad;                /* the stream is unusable: nothing more is parsed */
	int err_status;         /* set by a check: the status the bad request gets */
	/* the request being parsed */
	char url[HR_URL_MAX];
	size_t urllen;
	int url_too_long;
	char field[32];
	size_t fieldlen;
	int in_value;           /* the last piece was a header value */
	int value_cut;          /* that piece ended where the received bytes did */
	int in_range;
	char range[HR_HDR_MAX];
	size_t rangelen;
	int has_range, ranges, hosts, te;
	int vpos;               /* version check: bytes of " HTTP/" matched, -1: not started */
	const char *rx_end;     /* the end of the bytes being fed */
	/* the queue full (the parser paused): bytes received after its last request,
	 * parsed by hr_resume */
	char *held;
	size_t held_len, held_cap;
};

void hr_init(struct hr *h);
/* What hr_init allocated while it ran (the held bytes). */
void hr_free(struct hr *h);
/* Parse n received bytes. 0, or the status (400, 505) of an error that ends the
 * stream: the request is queued with it (where there is room) and nothing more is
 * parsed (h->bad). When the queue fills (HR_QMAX requests), parsing pauses and the
 * bytes after the last request are held (hr_holding): the server stops reading, and
 * resumes with hr_resume once it has answered a request. A request with an Upgrade
 * header is served as a plain one (RFC 9110 lets a server ignore Upgrade), and what
 * follows it parsed as the next request. */
int hr_feed(struct hr *h, const char *buf, size_t n);
/* Parsing is paused: the queue is full (bytes received since are held). */
static inline int hr_holding(const struct hr *h)
{
	return !h->bad && HTTP_PARSER_ERRNO(&h->parser) == HPE_PAUSED;
}
/* After the server took a request off the queue: parse what is held, as hr_feed
 * does (it may fill the queue and hold again). 0 or an error's status. */
int hr_resume(struct hr *h);
/* The URL's path, percent-decoded, as a path relative to the served directory (no
 * ".." segment, no NUL, "index.html" after a '/'), into out (HR_URL_MAX bytes). 0, or
 * an HTTP status (400, 414). */
int hr_resolve(const char *url, size_t n, char *out);
/* A single "bytes=" range against size: 0 (no usable Range: the whole file), 1 (the
 * range [*a, *b]), or -1 (unsatisfiable: 416). Several ranges or a malformed value are
 * ignored, as RFC 9110 allows. */
int hr_range(const char *v, uint64_t size, uint64_t *a, uint64_t *b);
/* A Content-Type from the path's extension. */
const char *hr_mime(const char *path);

#endif
