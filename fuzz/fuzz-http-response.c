/* fuzz-http-response: the loader's HTTP response head (dataloader/http-resp.c), fed whole
 * and cut into pieces (the first byte chooses the cut; the next eight the range asked
 * for and the file's size): the same verdict either way, never more body bytes than
 * the buffer holds, and a Content-Range accepted only for the range asked for -- by
 * value: RFC 9110's positions are 1*DIGIT, so "bytes 000-9/10" is the range 0-9 (a
 * text comparison here was the harness's own defect, found by the 10-minute run). */
#include "fuzz.h"

#include <strings.h>

#include "http-resp.h"

static int feed(struct rf__hresp *r, void *dst, size_t cap, const uint8_t *d, size_t n,
		size_t step)
{
	rf__hresp_init(r, dst, cap);
	for (size_t o = 0; o < n; o += step)
		if (rf__hresp_feed(r, (const char *)d + o, n - o < step ? n - o : step) < 0)
			return -1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct rf__hresp a, b;
	uint8_t da[64], db[64];
	char why[160];
	if (n < 9)
		return 0;
	size_t step = 1 + d[0] % 29;
	uint64_t off = d[1] | (uint64_t)d[2] << 8 | (uint64_t)d[3] << 16;
	uint64_t len = 1 + (d[4] | (uint64_t)d[5] << 8);
	uint64_t size = d[6] & 1 ? off + len + (d[7] | (uint64_t)d[8] << 8) : 0;
	size_t cap = len < sizeof(da) ? (size_t)len : sizeof(da);
	d += 9;
	n -= 9;
	int ra = feed(&a, da, cap, d, n, n ? n : 1), rb = feed(&b, db, cap, d, n, step);
	FZ_ASSERT(ra == rb && a.head_done == b.head_done && a.msg_done == b.msg_done);
	FZ_ASSERT(a.got <= cap && b.got <= cap && a.body == b.body);
	if (ra == 0 && a.head_done) {
		FZ_ASSERT(a.p.status_code == b.p.status_code && a.got == b.got &&
			  !memcmp(da, db, a.got));
		uint64_t ta = 7, tb = 7;
		const char *wa = rf__hresp_range(&a, off, len, size, &ta, why, sizeof(why));
		const char *wb = rf__hresp_range(&b, off, len, size, &tb, why, sizeof(why));
		FZ_ASSERT(!wa == !wb);
		/* the validator (ETag, else Last-Modified) the same however the bytes came */
		const char *va = rf__hresp_validator(&a), *vb = rf__hresp_validator(&b);
		FZ_ASSERT(!strcmp(va, vb) && strlen(va) < sizeof(a.etag));
		if (!wa) {
			FZ_ASSERT(ta == tb && (!size || !ta || ta == size));
			/* the range written is the one asked for, by value */
			unsigned long long x, y;
			const char *c = a.cr;
			while (*c == ' ' || *c == '\t')
				c++;
			FZ_ASSERT(!strncasecmp(c, "bytes", 5));
			c += 5;
			while (*c == ' ')
				c++;
			FZ_ASSERT(sscanf(c, "%llu-%llu/", &x, &y) == 2);
			FZ_ASSERT(x == off && y == off + len - 1);
		}
	}
	return 0;
}
