/* dataloader/http-resp.c -- the head of an HTTP/1.1 response, strictly (http-resp.h). */
#include "rf-config.h"

#if RF_HAVE_HTTP_PARSER
#include "http-resp.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 section 5.6.2: tchar */
static int rf__tchar(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int rf__refuse(struct rf__hresp *r, const char *why)
{
	if (!r->bad) {
		r->bad = 1;
		snprintf(r->err, sizeof(r->err), "%s", why);
	}
	return -1; /* a callback error: http-parser stops */
}

static int rf__field(http_parser *p, const char *at, size_t n)
{
	struct rf__hresp *r = p->data;
	for (size_t i = 0; i < n; i++)
		if (!rf__tchar((unsigned char)at[i]))
			return rf__refuse(r, "a field name with a character that is not a token "
					  "character (RFC 9110: \"Name : v\" is not \"Name: v\")");
	if (r->in_value) {
		r->in_value = 0;
		r->fieldlen = 0;
	}
	if (r->fieldlen + n < sizeof(r->field)) {
		memcpy(r->field + r->fieldlen, at, n);
		r->fieldlen += n;
	} else {
		r->fieldlen = sizeof(r->field);
	}
	return 0;
}

static int rf__is(const struct rf__hresp *r, const char *name)
{
	size_t n = strlen(name);
	return r->fieldlen == n && !strncasecmp(r->field, name, n);
}

static int rf__value(http_parser *p, const char *at, size_t n)
{
	struct rf__hresp *r = p->data;
	if (r->in_value && !n)
		return 0; /* the empty rest of a value cut by the end of the last bytes */
	if (r->in_value && !r->value_cut)
		return rf__refuse(r, "a line folded onto a field (obs-fold)");
	r->value_cut = at + n == r->rx_end;
	if (!r->in_value) {
		r->in_value = 1;
		if (!r->fieldlen)
			return rf__refuse(r, "a field with no name");
		r->in_cr = rf__is(r, "content-range");
		r->in_etag = rf__is(r, "etag");
		r->in_lm = rf__is(r, "last-modified");
		r->in_ra = rf__is(r, "retry-after");
		r->in_te = rf__is(r, "transfer-encoding");
		r->te |= r->in_te;
		if (r->in_cr && ++r->ncr > 1)
			return rf__refuse(r, "two Content-Range fields");
	}
	if (r->in_cr) {
		if (r->crlen + n >= sizeof(r->cr))
			return rf__refuse(r, "a Content-Range over 127 bytes");
		memcpy(r->cr + r->crlen, at, n);
		r->crlen += n;
	}
	for (size_t i = 0; r->in_ra && i < n; i++)  /* delta-seconds; a date is left */
		if (at[i] >= '0' && at[i] <= '9' && r->retry_after < 1000000)
			r->retry_after = r->retry_after * 10 + (uint64_t)(at[i] - '0');
	char *v = r->in_etag ? r->etag : r->in_lm ? r->lastmod : NULL;
	size_t *vl = r->in_etag ? &r->etaglen : &r->lmlen;
	size_t vcap = r->in_etag ? sizeof(r->etag) : sizeof(r->lastmod);
	if (v) {
		size_t k = n < vcap - 1 - *vl ? n : vcap - 1 - *vl;
		memcpy(v + *vl, at, k);
		*vl += k;
		v[*vl] = 0;
	}
	return 0;
}

static int rf__headers(http_parser *p)
{
	struct rf__hresp *r = p->data;
	if (p->http_major != 1)
		return rf__refuse(r, "not an HTTP/1 response");
	r->head_done = 1;
	r->keep = http_should_keep_alive(p);
	return 0;
}

static int rf__body(http_parser *p, const char *at, size_t n)
{
	struct rf__hresp *r = p->data;
	/* a 206's bytes, as many as the buffer holds, however the bytes were cut: a body
	 * longer than the range is counted (body) and refused by the caller */
	r->body += n;
	if (p->status_code == 206 && r->got < r->cap) {
		size_t k = n < r->cap - r->got ? n : r->cap - r->got;
		memcpy((char *)r->dst + r->got, at, k);
		r->got += k;
	}
	return 0;
}

static int rf__complete(http_parser *p)
{
	struct rf__hresp *r = p->data;
	r->msg_done = 1;
	http_parser_pause(p, 1); /* what follows is not this message's */
	return 0;
}

/* Written once, read by every client (several may run in threads of their own). */
static const http_parser_settings rf__hresp_settings = {
	.on_header_field = rf__field,
	.on_header_value = rf__value,
	.on_headers_complete = rf__headers,
	.on_body = rf__body,
	.on_message_complete = rf__complete,
};

void rf__hresp_init(struct rf__hresp *r, void *dst, size_t cap)
{
	memset(r, 0, sizeof(*r));
	http_parser_init(&r->p, HTTP_RESPONSE);
	r->p.data = r;
	r->dst = dst;
	r->cap = cap;
}

int rf__hresp_feed(struct rf__hresp *r, const char *buf, size_t n)
{
	static const char want[] = "HTTP/";
	size_t i = 0, used;

	if (r->bad)
		return -EPROTO;
	if (!n)
		return 0;
	if (r->msg_done) {
		rf__refuse(r, "bytes after the response");
		return -EPROTO;
	}
	r->rx_end = buf + n;
	/* the status line's version: the parser itself checks only its first letter */
	for (; r->vpos < 5 && i < n; i++) {
		if (r->vpos == 0 && (buf[i] == '\r' || buf[i] == '\n'))
			continue; /* empty lines before it are allowed (RFC 9112 section 2.2) */
		if (buf[i] != want[r->vpos++]) {
			rf__refuse(r, "the status line does not start with \"HTTP/\"");
			return -EPROTO;
		}
	}
	if (r->in_value && r->value_cut && (buf[0] == '\r' || buf[0] == '\n'))
		r->value_cut = 0;
	used = http_parser_execute(&r->p, &rf__hresp_settings, buf, n);
	if (r->bad)
		return -EPROTO;
	if (HTTP_PARSER_ERRNO(&r->p) == HPE_PAUSED && r->p.status_code >= 100 &&
	    r->p.status_code < 200 && r->p.status_code != 101 && r->ninterim < 8) {
		/* an interim response (100 Continue, 103 Early Hints): RFC 9110 15.2 has the
		 * client take it and read on to the final one, which follows */
		void *dst = r->dst;
		size_t cap = r->cap;
		unsigned ni = r->ninterim + 1;
		rf__hresp_init(r, dst, cap);
		r->ninterim = ni;
		return rf__hresp_feed(r, buf + used, n - used);
	}
	if (HTTP_PARSER_ERRNO(&r->p) == HPE_PAUSED) {
		if (used != n)
			rf__refuse(r, "bytes after the response");
		return r->bad ? -EPROTO : 0;
	}
	if (HTTP_PARSER_ERRNO(&r->p) != HPE_OK || used != n) {
		char why[64];
		snprintf(why, sizeof(why), "malformed response (%s)",
			 http_errno_name(HTTP_PARSER_ERRNO(&r->p)));
		rf__refuse(r, why);
		return -EPROTO;
	}
	return 0;
}

/* Decimal digits at *s (one at least, no sign, no overflow): 0 or -1 */
static int rf__num(const char **s, uint64_t *v)
{
	const char *p = *s;
	*v = 0;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (*v > (UINT64_MAX - 9) / 10)
			return -1;
		*v = *v * 10 + (uint64_t)(*p - '0');
	}
	*s = p;
	return 0;
}

const char *rf__hresp_validator(struct rf__hresp *r)
{
	char *v = r->etaglen ? r->etag : r->lastmod;
	size_t n = r->etaglen ? r->etaglen : r->lmlen;

	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		v[--n] = 0;
	while (*v == ' ' || *v == '\t')
		v++;
	return v;
}

const char *rf__hresp_range(struct rf__hresp *r, uint64_t off, uint64_t len, uint64_t size,
			    uint64_t *total, char *why, size_t wl)
{
	const char *s = r->cr;
	uint64_t a, b, t = 0;
	size_t n = r->crlen;

	/* the field's value without its trailing whitespace (RFC 9110: OWS) */
	while (n && (r->cr[n - 1] == ' ' || r->cr[n - 1] == '\t'))
		n--;
	r->cr[n] = 0;
	if (!r->ncr || strncmp(s, "bytes ", 6))
		return "206 without a usable Content-Range";
	s += 6;
	if (s[0] == '*') { /* "bytes *\/T": the 416 form */
		s++;
		if (*s++ == '/' && rf__num(&s, &t) == 0 && !*s)
			return "Content-Range says the range is past the end";
		return "206 without a usable Content-Range";
	}
	if (rf__num(&s, &a) < 0 || *s++ != '-' || rf__num(&s, &b) < 0 || *s++ != '/' || b < a)
		return "206 without a usable Content-Range";
	if (s[0] == '*' && !s[1])
		t = 0; /* total unknown: fine for a range */
	else if (rf__num(&s, &t) < 0 || *s || t == 0 || b >= t)
		return "206 without a usable Content-Range";
	if (len == 0 || a != off || b != off + len - 1) {
		snprintf(why, wl, "Content-Range is not the range asked for: \"%.60s\"", r->cr);
		return why;
	}
	if (t && size && t != size) {
		/* the bytes would be another file's: never mix them into the records */
		snprintf(why, wl, "the resource changed on the server: its size is %llu bytes, "
			 "%llu when it was opened", (unsigned long long)t, (unsigned long long)size);
		return why;
	}
	*total = t;
	return NULL;
}

#endif
