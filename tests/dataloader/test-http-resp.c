/* dl-http-resp: the loader's HTTP response head (dataloader/http-resp.h) against a table
 * of RFC 9112's refusals, each fed whole and cut into pieces of every size from 1 to
 * 13 bytes (a check that only works when the bytes come at once would let a server
 * that sends slowly through): the verdict and its reason must not depend on the cut.
 * Accepted: a 206 with its Content-Range and Content-Length, empty lines before the
 * status line, a Content-Range with trailing whitespace, a value cut across pieces.
 * Refused: a status line that is not "HTTP/" (HTTX/1.1, Http/1.1), HTTP/2.0, a field
 * name with a space before the colon or a non-token byte, an empty name, a folded
 * line, two Content-Range fields, one over 127 bytes, bytes after the message; and
 * Content-Range values with signs, spaces, junk, a range other than asked, a total
 * of another size (the resource changed), "bytes *\/T". Exit 77 without http-parser. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rf-config.h"
#include "../test-util.h"

#if RF_HAVE_HTTP_PARSER
#include "http-resp.h"

#define BODY "0123456789"

struct tcase {
	const char *name;
	const char *msg;
	const char *why;   /* NULL: accepted by the feed */
};

static const struct tcase feeds[] = {
	{ "206", "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\n"
		 "Content-Length: 10\r\n\r\n" BODY, NULL },
	{ "crlf first", "\r\nHTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\n"
			"Content-Length: 10\r\n\r\n" BODY, NULL },
	{ "head only", "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/*\r\n"
		       "Content-Length: 10\r\n\r\n", NULL },
	/* interim responses before the final one are taken (RFC 9110 15.2): they were
	 * "bytes after the response" */
	{ "100 first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 206 Partial Content\r\n"
		       "Content-Range: bytes 0-9/100\r\nContent-Length: 10\r\n\r\n" BODY, NULL },
	{ "103 + 100", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue"
		       "\r\n\r\nHTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\n"
		       "Content-Length: 10\r\n\r\n" BODY, NULL },
	{ "HTTX", "HTTX/1.1 206 Partial Content\r\nContent-Length: 10\r\n\r\n" BODY,
	  "does not start with" },
	{ "Http", "Http/1.1 206 Partial Content\r\nContent-Length: 10\r\n\r\n" BODY,
	  "does not start with" },
	{ "HTTP/2", "HTTP/2.0 206 Partial Content\r\nContent-Length: 10\r\n\r\n" BODY,
	  "not an HTTP/1" },
	{ "space before colon", "HTTP/1.1 206 Partial Content\r\nContent-Range : bytes 0-9/100\r\n"
				"Content-Length: 10\r\n\r\n" BODY, "token character" },
	{ "space in name", "HTTP/1.1 206 OK\r\nBad Name: v\r\nContent-Length: 10\r\n\r\n" BODY,
	  "token character" },
	{ "control in name", "HTTP/1.1 206 OK\r\nNa\x01me: v\r\nContent-Length: 10\r\n\r\n" BODY,
	  NULL },
	{ "empty name", "HTTP/1.1 206 OK\r\n: v\r\nContent-Length: 10\r\n\r\n" BODY, NULL },
	{ "obs-fold", "HTTP/1.1 206 OK\r\nX: a\r\n b\r\nContent-Length: 10\r\n\r\n" BODY,
	  "obs-fold" },
	{ "two ranges", "HTTP/1.1 206 OK\r\nContent-Range: bytes 0-9/100\r\n"
			"Content-Range: bytes 0-9/100\r\nContent-Length: 10\r\n\r\n" BODY,
	  "two Content-Range" },
	{ "long range", "HTTP/1.1 206 OK\r\nContent-Range: bytes 0-9/100"
			"                                                              "
			"                                                              "
			"\r\nContent-Length: 10\r\n\r\n" BODY, "over 127 bytes" },
	{ "after", "HTTP/1.1 206 OK\r\nContent-Range: bytes 0-9/100\r\nContent-Length: 10\r\n\r\n"
		   BODY "HTTP/1.1 206 OK\r\n", "bytes after the response" },
	{ "after 2", "HTTP/1.1 206 OK\r\nContent-Range: bytes 0-9/100\r\nContent-Length: 10\r\n\r\n"
		     BODY "X", "bytes after the response" },
};

/* an empty name, a control byte in one: http-parser's own verdict (a malformed
 * response) or ours, either is a refusal; the table's NULL there means "any reason" */
static int any_reason(const struct tcase *c)
{
	return !strcmp(c->name, "empty name") || !strcmp(c->name, "control in name");
}

static const struct {
	const char *cr;
	const char *why;   /* NULL: usable */
} ranges[] = {
	{ "bytes 0-9/100", NULL },
	{ "bytes 0-9/*", NULL },
	{ "bytes 0-9/100  \t", NULL },
	{ "bytes +0-9/100", "usable" },
	{ "bytes 0-+9/100", "usable" },
	{ "bytes  0-9/100", "usable" },
	{ "bytes 0 -9/100", "usable" },
	{ "bytes 0-9/100x", "usable" },
	{ "bytes 0-9/-100", "usable" },
	{ "bytes 0-9", "usable" },
	{ "bytes=0-9/100", "usable" },
	{ "items 0-9/100", "usable" },
	{ "bytes 9-0/100", "usable" },
	{ "bytes 0-9/5", "usable" },
	{ "bytes 0-18446744073709551616/100", "usable" },
	{ "bytes 1-10/100", "not the range asked for" },
	{ "bytes 0-8/100", "not the range asked for" },
	{ "bytes 0-9/101", "changed on the server" },
	{ "bytes */100", "past the end" },
	{ "bytes */x", "usable" },
};

static int feed(struct rf__hresp *r, const char *m, size_t n, size_t step)
{
	for (size_t o = 0; o < n; o += step) {
		size_t k = n - o < step ? n - o : step;
		if (rf__hresp_feed(r, m + o, k) < 0)
			return -1;
	}
	return 0;
}

int main(void)
{
	char dst[16], why[160];
	unsigned runs = 0;

	for (unsigned i = 0; i < sizeof(feeds) / sizeof(feeds[0]); i++) {
		const struct tcase *c = &feeds[i];
		size_t n = strlen(c->msg);
		for (size_t step = 0; step <= 13; step++) {
			struct rf__hresp r;
			rf__hresp_init(&r, dst, 10);
			int ret = feed(&r, c->msg, n, step ? step : n);
			if (c->why || any_reason(c)) {
				if (ret == 0 || !r.bad || (c->why && !strstr(r.err, c->why))) {
					fprintf(stderr, "FAIL: %s (pieces of %zu): %s, \"%s\", expected "
						"\"%s\"\n", c->name, step, ret ? "refused" : "accepted",
						r.err, c->why ? c->why : "any");
					return 1;
				}
			} else {
				CHECK_EQ(ret, 0);
				CHECK(r.head_done);
				CHECK_EQ(r.p.status_code, 206u);
				if (strstr(c->msg, BODY)) {
					CHECK(r.msg_done);
					CHECK_EQ(r.got, 10u);
					CHECK(!memcmp(dst, BODY, 10));
				}
			}
			runs++;
		}
	}
	for (unsigned i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		char msg[256];
		struct rf__hresp r;
		uint64_t total = 1;
		snprintf(msg, sizeof(msg), "HTTP/1.1 206 OK\r\nContent-Range: %s\r\n"
			 "Content-Length: 10\r\n\r\n", ranges[i].cr);
		rf__hresp_init(&r, dst, 10);
		CHECK_EQ(rf__hresp_feed(&r, msg, strlen(msg)), 0);
		const char *w = rf__hresp_range(&r, 0, 10, 100, &total, why, sizeof(why));
		if (ranges[i].why ? !w || !strstr(w, ranges[i].why) : w != NULL) {
			fprintf(stderr, "FAIL: Content-Range \"%s\": %s, expected %s\n", ranges[i].cr,
				w ? w : "usable", ranges[i].why ? ranges[i].why : "usable");
			return 1;
		}
		if (!w)
			CHECK_EQ(total, strstr(ranges[i].cr, "/*") ? 0u : 100u);
		runs++;
	}
	/* no Content-Range at all */
	{
		static const char m[] = "HTTP/1.1 206 OK\r\nContent-Length: 10\r\n\r\n";
		struct rf__hresp r;
		uint64_t total;
		rf__hresp_init(&r, dst, 10);
		CHECK_EQ(rf__hresp_feed(&r, m, sizeof(m) - 1), 0);
		CHECK(strstr(rf__hresp_range(&r, 0, 10, 0, &total, why, sizeof(why)), "usable"));
	}
	printf("ok: %u response heads and Content-Range values, whole and in pieces\n", runs);
	return 0;
}

#else
int main(void)
{
	printf("built without libhttp-parser: skipped\n");
	return 77;
}
#endif
