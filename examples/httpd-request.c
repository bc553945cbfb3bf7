/* examples/httpd-request.c -- rf-httpd's request parsing (httpd-request.h). */
#include "httpd-request.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 section 5.6.2: tchar */
static int tchar(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int refuse(struct hr *h, int status)
{
	if (!h->err_status)
		h->err_status = status;
	return -1; /* a callback error: http-parser stops with HPE_CB_* */
}

/* The request line's version must read "HTTP/" after exactly one space: the lenient
 * parser checks only its first letter. Matched over the bytes from p to the end of
 * what is being fed; the rest, if any, at the next feed. */
static int version_match(struct hr *h, const char *p)
{
	static const char want[] = " HTTP/";
	while (h->vpos >= 0 && h->vpos < 6 && p < h->rx_end) {
		if (*p++ != want[h->vpos])
			return refuse(h, 400);
		h->vpos++;
	}
	return 0;
}

static int on_begin(http_parser *p)
{
	struct hr *h = p->data;
	h->begun++;
	h->in_request = 1;
	h->urllen = 0;
	h->url_too_long = 0;
	h->has_range = h->ranges = h->hosts = h->te = 0;
	h->rangelen = 0;
	h->in_range = h->in_value = h->value_cut = 0;
	h->fieldlen = 0;
	h->vpos = -1;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	struct hr *h = p->data;
	if (h->urllen + n >= HR_URL_MAX) {
		h->url_too_long = 1;
	} else {
		memcpy(h->url + h->urllen, at, n);
		h->urllen += n;
	}
	/* the target ended inside these bytes: the version follows; at their end it may
	 * go on in the next ones (-2: look there) */
	h->vpos = at + n < h->rx_end ? 0 : -2;
	return version_match(h, at + n);
}

/* http-parser hands a header's name and value in pieces: a name piece after a value
 * starts the next header. */
static int on_field(http_parser *p, const char *at, size_t n)
{
	struct hr *h = p->data;
	for (size_t i = 0; i < n; i++)
		if (!tchar((unsigned char)at[i]))
			return refuse(h, 400);
	if (h->in_value) {
		h->fieldlen = 0;
		h->in_value = 0;
	}
	if (h->fieldlen + n < sizeof(h->field)) {
		memcpy(h->field + h->fieldlen, at, n);
		h->fieldlen += n;
	} else {
		h->fieldlen = sizeof(h->field); /* too long to be a name we look at */
	}
	return 0;
}

static int is_field(const struct hr *h, const char *name)
{
	size_t n = strlen(name);
	return h->fieldlen == n && !strncasecmp(h->field, name, n);
}

static int on_value(http_parser *p, const char *at, size_t n)
{
	struct hr *h = p->data;
	if (h->in_value && !n)
		return 0; /* the empty rest of a value cut by the end of the last bytes */
	if (h->in_value && !h->value_cut)
		return refuse(h, 400); /* a second piece of one value that was not cut by the
					* end of the bytes: a line folded onto it */
	h->value_cut = at + n == h->rx_end;
	if (h->in_value)
		goto append;
	h->in_value = 1;
	if (!h->fieldlen)
		return refuse(h, 400);
	h->in_range = is_field(h, "range");
	h->hosts += is_field(h, "host");
	h->te |= is_field(h, "transfer-encoding");
	if (h->in_range) {
		h->has_range = 1;
		h->rangelen = 0;
		h->ranges++;
	}
append:
	if (h->in_range) {
		if (h->rangelen + n < HR_HDR_MAX) {
			memcpy(h->range + h->rangelen, at, n);
			h->rangelen += n;
		} else {
			h->has_range = 0; /* absurdly long: ignored, as an invalid Range is */
			h->in_range = 0;
		}
	}
	return 0;
}

static int on_headers(http_parser *p)
{
	struct hr *h = p->data;
	if (h->vpos != 6) /* the request line ended before its version was all seen */
		return refuse(h, 400);
	if (p->http_major != 1)
		return refuse(h, 505);
	if (p->http_minor >= 1 ? h->hosts != 1 : h->hosts > 1)
		return refuse(h, 400);
	if (p->http_minor == 0 && h->te)
		return refuse(h, 400);
	return 0;
}

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int hr_resolve(const char *url, size_t n, char *out)
{
	struct http_parser_url u;
	http_parser_url_init(&u);
	if (http_parser_parse_url(url, n, 0, &u) || !(u.field_set & (1 << UF_PATH)))
		return 400;
	const char *s = url + u.field_data[UF_PATH].off;
	size_t len = u.field_data[UF_PATH].len, o = 0;
	if (len >= HR_URL_MAX)
		return 414;
	for (size_t i = 0; i < len; i++) {
		int ch = (unsigned char)s[i];
		if (ch == '%') {
			int hi = i + 2 < len ? hexval(s[i + 1]) : -1, lo = hi >= 0 ? hexval(s[i + 2]) : -1;
			if (hi < 0 || lo < 0)
				return 400;
			ch = hi * 16 + lo;
			i += 2;
		}
		if (ch == 0)
			return 400;
		out[o++] = (char)ch;
	}
	out[o] = 0;
	/* no ".." segment: nothing above the directory */
	for (char *seg = out; seg; seg = strchr(seg, '/')) {
		while (*seg == '/')
			seg++;
		if (seg[0] == '.' && seg[1] == '.' && (seg[2] == '/' || !seg[2]))
			return 400;
		if (!*seg)
			break;
	}
	char *q = out;
	while (*q == '/')
		q++;
	memmove(out, q, strlen(q) + 1);
	if (!*out || out[strlen(out) - 1] == '/') {
		if (strlen(out) + sizeof("index.html") > HR_URL_MAX)
			return 414;
		strcat(out, "index.html");
	}
	return 0;
}

static int on_complete(http_parser *p)
{
	struct hr *h = p->data;
	h->in_request = 0;
	struct hr_req *r = &h->q[(h->qhead + h->qlen++) % HR_QCAP];
	if (h->qlen == HR_QMAX)
		http_parser_pause(p, 1); /* full: the rest waits (hr_resume) */
	r->status = 0;
	r->head = p->method == HTTP_HEAD;
	r->keep_alive = http_should_keep_alive(p);
	r->has_range = h->has_range;
	if (h->has_range) {
		memcpy(r->range, h->range, h->rangelen);
		r->range[h->rangelen] = 0;
	}
	if (h->ranges > 1)
		r->status = 400; /* which one would be meant? (RFC 9110: Range is a singleton) */
	else if (p->method != HTTP_GET && p->method != HTTP_HEAD)
		r->status = 405;
	else if (h->url_too_long)
		r->status = 414;
	else
		r->status = hr_resolve(h->url, h->urllen, r->path);
	return 0;
}

static const http_parser_settings hr_settings = {
	.on_message_begin = on_begin,
	.on_url = on_url,
	.on_header_field = on_field,
	.on_header_value = on_value,
	.on_headers_complete = on_headers,
	.on_message_complete = on_complete,
};

void hr_init(struct hr *h)
{
	memset(h, 0, sizeof(*h));
	http_parser_init(&h->parser, HTTP_REQUEST);
	h->parser.data = h;
	h->vpos = -1;
}

void hr_free(struct hr *h)
{
	free(h->held);
	h->held = NULL;
	h->held_len = h->held_cap = 0;
}

static int hr_fail(struct hr *h);

/* Keep buf[0..n) after what is held. 0, or -1 past HR_HELD_MAX. */
static int hr_hold(struct hr *h, const char *buf, size_t n)
{
	if (h->held_len + n > HR_HELD_MAX)
		return -1;
	if (h->held_len + n > h->held_cap) {
		size_t cap = h->held_cap ? h->held_cap : 4096;
		while (cap < h->held_len + n)
			cap *= 2;
		char *p = realloc(h->held, cap);
		if (!p)
			return -1;
		h->held = p;
		h->held_cap = cap;
	}
	memmove(h->held + h->held_len, buf, n);
	h->held_len += n;
	return 0;
}

/* Parse buf[0..n): 0 (all of it parsed, or the rest held), or an error's status. */
static int hr_parse(struct hr *h, const char *buf, size_t n)
{
	while (n) {
		h->rx_end = buf + n;
		/* what the last bytes left open: the version after a target that ended
		 * with them, a value that ended with them */
		if (h->vpos == -2 && (buf[0] == ' ' || buf[0] == '\r' || buf[0] == '\n'))
			h->vpos = 0;
		if (h->vpos >= 0 && h->vpos < 6 && version_match(h, buf) < 0)
			return hr_fail(h);
		if (h->in_value && h->value_cut && (buf[0] == '\r' || buf[0] == '\n'))
			h->value_cut = 0;
		size_t got = http_parser_execute(&h->parser, &hr_settings, buf, n);
		enum http_errno e = HTTP_PARSER_ERRNO(&h->parser);
		if (e == HPE_PAUSED) {
			/* the queue is full: the rest waits for hr_resume */
			return got < n && hr_hold(h, buf + got, n - got) < 0 ? hr_fail(h) : 0;
		}
		if (e != HPE_OK)
			return hr_fail(h);
		if (got < n && h->parser.upgrade && !h->in_request) {
			/* an Upgrade ignored: what follows is the next request */
			http_parser_init(&h->parser, HTTP_REQUEST);
			h->parser.data = h;
		} else if (got < n) {
			return hr_fail(h);
		}
		buf += got;
		n -= got;
	}
	return 0;
}

int hr_feed(struct hr *h, const char *buf, size_t n)
{
	if (h->bad || !n)
		return 0;
	if (hr_holding(h))   /* paused: after what waits */
		return hr_hold(h, buf, n) < 0 ? hr_fail(h) : 0;
	return hr_parse(h, buf, n);
}

int hr_resume(struct hr *h)
{
	if (!hr_holding(h) || h->qlen >= HR_QMAX)
		return 0;
	http_parser_pause(&h->parser, 0);
	/* parsed from the held bytes themselves: what pauses again is moved to their
	 * start (hr_hold's memmove) */
	size_t n = h->held_len;
	h->held_len = 0;
	return hr_parse(h, h->held, n);
}

static int hr_fail(struct hr *h)
{
	/* the requests before it are answered, then this error, then the close */
	h->bad = 1;
	int status = h->err_status ? h->err_status : 400;
	if (h->qlen < HR_QCAP) {
		struct hr_req *r = &h->q[(h->qhead + h->qlen++) % HR_QCAP];
		memset(r, 0, sizeof(*r));
		r->status = status;
	}
	return status;
}

/* Decimal digits at *d (at least one), saturating at UINT64_MAX: 0 or -1 */
static int digits(const char **d, uint64_t *v)
{
	const char *p = *d;
	*v = 0;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++)
		*v = *v > (UINT64_MAX - 9) / 10 ? UINT64_MAX : *v * 10 + (uint64_t)(*p - '0');
	*d = p;
	return 0;
}

int hr_range(const char *val, uint64_t size, uint64_t *a, uint64_t *b)
{
	uint64_t s, e = UINT64_MAX;
	char one[64];   /* "bytes=" and two 20-digit numbers fit; a longer value is no range */
	size_t n = strlen(val);
	const char *v = one;
	/* RFC 9110: the unit is case-insensitive, whitespace around the value not part
	 * of it */
	while (n && (val[n - 1] == ' ' || val[n - 1] == '\t'))
		n--;
	if (n >= sizeof(one))
		return 0;
	memcpy(one, val, n);
	one[n] = 0;
	if (strncasecmp(v, "bytes=", 6) || strchr(v, ','))
		return 0;
	v += 6;
	/* digits only (strtoull would take signs and spaces); a number past 2^64 - 1 is
	 * as unsatisfiable as one just past the end */
	if (*v == '-') { /* the last N bytes */
		v++;
		if (digits(&v, &s) < 0 || *v)
			return 0;
		if (s == 0 || size == 0)
			return -1;
		*a = s >= size ? 0 : size - s;
		*b = size - 1;
		return 1;
	}
	if (digits(&v, &s) < 0 || *v++ != '-')
		return 0;
	if (*v && (digits(&v, &e) < 0 || *v || e < s))
		return 0;
	if (s >= size)
		return -1;
	*a = s;
	*b = e >= size ? size - 1 : e;
	return 1;
}

const char *hr_mime(const char *path)
{
	static const char *const t[][2] = {
		{ ".html", "text/html" }, { ".htm", "text/html" }, { ".txt", "text/plain" },
		{ ".css", "text/css" }, { ".js", "application/javascript" },
		{ ".json", "application/json" }, { ".png", "image/png" }, { ".jpg", "image/jpeg" },
		{ ".svg", "image/svg+xml" },
	};
	const char *dot = strrchr(path, '.');
	for (unsigned i = 0; dot && i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcasecmp(dot, t[i][0]))
			return t[i][1];
	return "application/octet-stream";
}
