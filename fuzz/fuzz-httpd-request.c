/* fuzz-httpd-request: rf-httpd's request parsing (examples/httpd-request.c): the bytes
 * fed whole and cut into pieces (the first byte chooses the cut) must give the same
 * requests and verdicts -- a check that holds only when bytes come at once would let a
 * slow sender through; every queued path is relative with no ".." segment; every
 * status is one the server sends; a Range against file sizes gives a range inside the
 * file. Requests are taken as a slow server takes them -- only when the queue is
 * full, which pauses the parser with the rest held -- so more than a queue's worth
 * of pipelined requests go through the pause and hr_resume, cut anywhere. */
#include "fuzz.h"

#include "httpd-request.h"

/* The bytes fed in pieces of step, as the server takes requests: only when the queue is
 * full (the parser paused, holding what followed), then all at the end; the requests
 * taken, at most RMAX, in out[]. */
#define RMAX 64
struct run {
	struct hr h;
	struct hr_req out[RMAX];
	unsigned nout;
};

static void take(struct run *r)
{
	while (r->h.qlen) {
		if (r->nout < RMAX)
			r->out[r->nout++] = r->h.q[r->h.qhead];
		r->h.qhead = (r->h.qhead + 1) % HR_QCAP;
		r->h.qlen--;
	}
}

static void feed(struct run *r, const uint8_t *d, size_t n, size_t step)
{
	hr_free(&r->h);
	hr_init(&r->h);
	r->nout = 0;
	for (size_t o = 0; o < n && !r->h.bad; o += step) {
		hr_feed(&r->h, (const char *)d + o, n - o < step ? n - o : step);
		while (hr_holding(&r->h)) {
			FZ_ASSERT(r->h.qlen == HR_QMAX);
			take(r);
			hr_resume(&r->h);
		}
	}
	take(r);
	FZ_ASSERT(!hr_holding(&r->h) && r->h.held_len == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static struct run W, C;   /* large: not on the stack */
	if (n < 1)
		return 0;
	size_t step = 1 + d[0] % 23;
	d++, n--;
	feed(&W, d, n, n ? n : 1);
	feed(&C, d, n, step);
	FZ_ASSERT(W.nout == C.nout && W.h.bad == C.h.bad);
	for (unsigned i = 0; i < W.nout; i++) {
		const struct hr_req *a = &W.out[i];
		const struct hr_req *b = &C.out[i];
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
