/* dataloader/http-url.c -- an http:// URL taken apart, and its host's addresses
 * (http-impl.h): what the range client (http.c) connects to and asks for. Needs no
 * http-parser: the URL's rules are RFC 3986's, checked here. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http-impl.h"
#include "rf-internal.h"

int rf__is_http(const char *s)
{
	return s && !strncmp(s, "http://", 7);
}

int rf__http_url_parse(const char *url, struct rf__http_url *u)
{
	memset(u, 0, sizeof(*u));
	if (!rf__is_http(url))
		return rf__fail(-EINVAL, "%s: expected an http://HOST[:PORT]/PATH URL", url ? url : "(null)");
	const char *hp = url + 7, *slash = strchr(hp, '/');
	/* no host: http:///x, http://, http://:80/x */
	if (slash == hp || !*hp || (hp[0] == ':' && hp[1] >= '0' && hp[1] <= '9'))
		return rf__fail(-EINVAL, "%s: expected http://HOST[:PORT]/PATH (no host)", url);
	if (!slash)
		return rf__fail(-EINVAL, "%s: expected http://HOST[:PORT]/PATH (no path)", url);
	if (strchr(url, ' ') || strchr(url, '\r') || strchr(url, '\n'))
		return rf__fail(-EINVAL, "%s: a URL has no spaces or line breaks", url);
	if (strlen(url) > 700) /* the request line and Host header fit the send buffer */
		return rf__fail(-ENAMETOOLONG, "%.80s...: URL of %zu characters, expected at most 700",
				url, strlen(url));
	u->authority = hp;
	u->authority_len = (size_t)(slash - hp);
	u->path = slash;
	/* a #fragment is the client's, never sent (RFC 9110 4.2.5: a strict server 404s) */
	u->path_len = strcspn(slash, "#");
	/* HOST[:PORT], or [IPv6 literal][:PORT] (RFC 3986; the Host header keeps it so) */
	const char *hs = hp, *end = slash, *colon;
	size_t hl;
	if (memchr(hs, '@', (size_t)(end - hs)))  /* userinfo: no credentials are sent */
		return rf__fail(-EINVAL, "%s: user information (USER[:PASSWORD]@) in an http:// "
				"URL is not supported: expected http://HOST[:PORT]/PATH", url);
	if (*hs == '[') {
		const char *rb = memchr(hs, ']', (size_t)(end - hs));
		colon = rb && rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
		hl = rb ? (size_t)(rb - hs - 1) : 0;
		if (!rb || (rb + 1 < end && rb[1] != ':'))
			return rf__fail(-EINVAL, "%s: expected [IPv6 address] or [IPv6 address]:PORT "
					"after http://", url);
		hs++;
		u->literal6 = 1;  /* never a name to look up */
	} else {
		colon = memchr(hs, ':', (size_t)(end - hs));
		hl = colon ? (size_t)(colon - hs) : (size_t)(end - hs);
		if (colon && memchr(colon + 1, ':', (size_t)(end - colon - 1)))
			return rf__fail(-EINVAL, "%s: expected an IPv6 address in brackets "
					"([::1]:PORT) after http://", url);
	}
	size_t pl = colon ? (size_t)(end - colon - 1) : 0;
	if (hl == 0 || hl >= sizeof(u->host) ||
	    (colon && (pl == 0 || pl >= sizeof(u->port) ||
		       strspn(colon + 1, "0123456789") < pl)))
		return rf__fail(-EINVAL, "%s: expected HOST or HOST:PORT after http://", url);
	memcpy(u->host, hs, hl);
	u->host[hl] = 0;
	snprintf(u->port, sizeof(u->port), "80");
	if (colon) {
		memcpy(u->port, colon + 1, pl);
		u->port[pl] = 0;
		unsigned long pn = strtoul(u->port, NULL, 10);
		if (pn < 1 || pn > 65535)  /* getaddrinfo would take 65536 + P as P */
			return rf__fail(-EINVAL, "%s: port %s: expected 1 to 65535", url, u->port);
	}
	return 0;
}

int rf__http_resolve(const char *url, const struct rf__http_url *u,
		     struct sockaddr_storage *addr, socklen_t *len, unsigned max, unsigned *n)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;

	*n = 0;
	if (u->literal6) {
		hints.ai_family = AF_INET6;
		hints.ai_flags = AI_NUMERICHOST;
	}
	int g = getaddrinfo(u->host, u->port, &hints, &ai);
	if (g || !ai)
		return rf__fail(-EHOSTUNREACH, "%s: cannot resolve %s: %s", url, u->host,
				gai_strerror(g));
	for (struct addrinfo *a = ai; a && *n < max; a = a->ai_next) {
		if (a->ai_addrlen > sizeof(addr[0]))
			continue;
		memcpy(&addr[*n], a->ai_addr, a->ai_addrlen);
		len[(*n)++] = a->ai_addrlen;
	}
	freeaddrinfo(ai);
	if (!*n)
		return rf__fail(-EHOSTUNREACH, "%s: cannot resolve %s: no usable address", url,
				u->host);
	return 0;
}
