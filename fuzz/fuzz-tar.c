/* fuzz-tar: tar archives and WebDataset shards (dataloader/tar.c), and the index files
 * kept beside them (dataloader/tar-index.c). The first byte chooses:
 *   bit 0  reseal the checksum of every header the walk meets (else almost every
 *          mutation stops at the first checksum);
 *   bit 1  also open the bytes as a file (pread) and expect the verdict and members
 *          of the buffer;
 *   bit 2  the rest is an index file instead: its CRCs resealed (bit 3: its body
 *          length set to what follows the header), decoded for the shard its header
 *          names; one that decodes encodes back to the same bytes.
 * A tar that opens: every member is inside the buffer with a valid name, its samples
 * are made (their images inside the buffer, labels -1 or above). */
#include "fuzz.h"

#include <zlib.h>

#include "tar-impl.h"

static void le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The checksum of the header at h, as a tar writer sets it. */
static void fz_sum(uint8_t *h)
{
	unsigned s = 0;
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		s += h[i];
	snprintf((char *)h + 148, 8, "%06o", s & 0777777);
	h[155] = ' ';
}

/* Walk the headers as the parser would (octal or base-256 sizes, no pax overrides),
 * resealing each. */
static void fz_reseal(uint8_t *b, size_t n)
{
	size_t pos = 0;
	for (int k = 0; k < 2048 && n >= 512 && pos <= n - 512; k++) {
		uint8_t *h = b + pos;
		uint64_t size = 0;
		int zero = 1;
		for (int i = 0; i < 512 && zero; i++)
			zero = !h[i];
		pos += 512;
		if (zero)
			continue;
		fz_sum(h);
		if (h[124] & 0x80) {
			for (int i = 125; i < 136 && size < n; i++)
				size = size << 8 | h[i];
		} else {
			for (int i = 124; i < 136 && h[i] >= '0' && h[i] <= '7' && size < n; i++)
				size = size << 3 | (uint64_t)(h[i] - '0');
		}
		if (h[156] >= '1' && h[156] <= '6')
			size = 0;
		if (size > n - pos)
			break;
		pos += (size_t)(size + 511) / 512 * 512;
	}
}

static void fz_tar(const uint8_t *d, size_t n, int sel)
{
	struct rf__tar t, f;
	int r = rf__tar_open_mem(&t, d, n, "fuzz");

	if (sel & 2) {
		int rf = rf__tar_open(&f, fz_file(0, d, n));
		FZ_ASSERT(rf == r);
		if (rf == 0) {
			FZ_ASSERT(f.n == t.n);
			for (size_t i = 0; i < t.n; i++)
				FZ_ASSERT(!strcmp(f.m[i].name, t.m[i].name) &&
					  f.m[i].offset == t.m[i].offset && f.m[i].size == t.m[i].size &&
					  !f.m[i].small == !t.m[i].small && (!t.m[i].small ||
					  !memcmp(f.m[i].small, t.m[i].small, (size_t)t.m[i].size)));
			rf__tar_close(&f);
		}
	}
	if (r)
		return;
	for (size_t i = 0; i < t.n; i++) {
		size_t l = strlen(t.m[i].name);
		FZ_ASSERT(l > 0 && l <= RF__TAR_NAME_MAX);
		FZ_ASSERT(t.m[i].offset % 512 == 0 && t.m[i].offset <= n &&
			  t.m[i].size <= n - t.m[i].offset);
		/* data kept by the scan: the member's own bytes */
		FZ_ASSERT(!t.m[i].small || (t.m[i].size <= RF__TAR_SMALL_MAX &&
			  !memcmp(t.m[i].small, d + t.m[i].offset, (size_t)t.m[i].size)));
	}
	struct rf__wds_sample *s;
	size_t ns, noimg;
	if (rf__wds_samples(&t, rf__tar_read_at, &t, &s, &ns, &noimg, NULL) == 0) {
		FZ_ASSERT(ns + noimg <= t.n);
		for (size_t i = 0; i < ns; i++)
			FZ_ASSERT(s[i].img_off <= n && s[i].img_size <= n - s[i].img_off &&
				  s[i].label >= -1);
		free(s);
	}
	rf__tar_close(&t);
}

static void fz_index(uint8_t *b, size_t m, int sel)
{
	struct rf__tar t = { 0 };
	char why[200];
	uint8_t *enc;
	size_t en;

	if (m >= RF__TAR_IDX_HDR) {
		if (sel & 8)
			for (int i = 0; i < 8; i++)
				b[48 + i] = (uint8_t)((uint64_t)(m - RF__TAR_IDX_HDR) >> (8 * i));
		le32(b + 56, (uint32_t)crc32(0, b + RF__TAR_IDX_HDR, (uInt)(m - RF__TAR_IDX_HDR)));
		le32(b + 60, (uint32_t)crc32(0, b, 60));
	}
	uint8_t *copy = malloc(m + 1);
	FZ_ASSERT(copy);
	memcpy(copy, b, m);
	uint64_t size = m >= 64 ? le64(b + 16) : 0, ino = m >= 64 ? le64(b + 32) : 0;
	int64_t mt = m >= 64 ? (int64_t)le64(b + 24) : 0;
	if (rf__tar_index_decode(&t, b, m, size, mt, ino, why, sizeof(why)) == 0) {
		FZ_ASSERT(rf__tar_index_encode(&t, size, mt, ino, &enc, &en) == 0);
		FZ_ASSERT(en == m && !memcmp(enc, copy, m));
		free(enc);
		rf__tar_close(&t);
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	if (n < 1 || n > (1u << 20))
		return 0;
	uint8_t *b = malloc(n);
	FZ_ASSERT(b);
	memcpy(b, d + 1, n - 1);
	if (d[0] & 4) {
		fz_index(b, n - 1, d[0]);   /* takes b */
		return 0;
	}
	if (d[0] & 1)
		fz_reseal(b, n - 1);
	fz_tar(b, n - 1, d[0]);
	free(b);
	return 0;
}
