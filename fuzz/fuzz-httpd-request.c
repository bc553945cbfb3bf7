/* fuzz-httpd-request: rf-httpd's request parsing (examples/httpd-request.c): the bytes
 * fed whole and cut into pieces (the first byte chooses the cut) must give the same
 * requests and verdicts -- a check that holds only when bytes come at once would let a
 * slow sender through; every queued path is relative with no ".." segment; every
 * status is one the server sends; a Range against file sizes gives a range inside the
 * file. */
#include "fuzz.h"

#include "httpd-request.h"

static void feed(struct hr *h, const uint8_t *d, size_t n, size_t step)
{
	hr_init(h);
	for (size_t o = 0; o < n && !h->bad; o += step)
		hr_feed(h, (const char *)d + o, n - o < step ? n - o : step);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static struct hr whole, cut;   /* large: not on the stack */
	if (n < 1)
		return 0;
	size_t step = 1 + d[0] % 23;
	d++, n--;
	feed(&whole, d, n, n ? n : 1);
	feed(&cut, d, n, step);
	FZ_ASSERT(whole.qlen == cut.qlen && whole.bad == cut.bad);
	for (unsigned i = 0; i < whole.qlen; i++) {
		const struct hr_req *a = &whole.q[(whole.qhead + i) % HR_QCAP];
		const struct hr_req *b = &cut.q[(cut.qhead + i) % HR_QCAP];
		FZ_ASSERT(a->status == b->status && a->head == b->head &&
			  a->has_range == b->has_range);
		FZ_ASSERT(a->status == 0 || a->status == 400 || a->status == 405 ||
			  a->status == 414 || a->status == 505);
		if (a->status)
			continue;
		FZ_ASSERT(!strcmp(a->path, b->path));
		FZ_ASSERT(a->path[0] != '/');
		for (const char *s = a->path; s; s = strchr(s, '/')) {
			while (*s == '/')
				s++;
			FZ_ASSERT(!(s[0] == '.' && s[1] == '.' && (s[2] == '/' || !s[2])));
		}
		(void)hr_mime(a->path);
		static const uint64_t sizes[] = { 0, 1, 4096, UINT64_MAX };
		for (int k = 0; a->has_range && k < 4; k++) {
			uint64_t x = 0, y = 0;
			if (hr_range(a->range, sizes[k], &x, &y) > 0)
				FZ_ASSERT(x <= y && y < sizes[k]);
		}
	}
	return 0;
}
