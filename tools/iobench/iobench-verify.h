/* tools/iobench-verify.h -- rf-iobench --verify crc32c, as fio's verify: each written
 * block starts with a header -- magic "RFIOVRFY", the block's offset, a generation,
 * its length, and the CRC-32C (Castagnoli) of the whole block with the CRC field
 * zero -- followed by a pattern drawn from (offset, generation). Reading a block back
 * checks the magic, the offset (a block written at the wrong place), the length and
 * the CRC, and for a mismatch finds the first byte that differs from the pattern the
 * header says was written: the report names the offset and the expected and actual
 * values. */
#ifndef RF_IOBENCH_VERIFY_H
#define RF_IOBENCH_VERIFY_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "iobench-map.h" /* rf_randmap_mix */

#define RF_VFY_MAGIC "RFIOVRFY"
#define RF_VFY_HDR 32 /* magic 8, offset 8, generation 8, length 4, crc32c 4 */

static uint32_t rf_crc32c_table[8][256];

static inline void rf_crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		rf_crc32c_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			rf_crc32c_table[t][i] = (rf_crc32c_table[t - 1][i] >> 8) ^
						rf_crc32c_table[0][rf_crc32c_table[t - 1][i] & 0xff];
}

/* CRC-32C of p[0..n), continuing from crc (0 to start); slicing by 8. */
static inline uint32_t rf_crc32c(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	crc = ~crc;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, b, 8);
		w ^= crc;
		crc = rf_crc32c_table[7][w & 0xff] ^ rf_crc32c_table[6][(w >> 8) & 0xff] ^
		      rf_crc32c_table[5][(w >> 16) & 0xff] ^ rf_crc32c_table[4][(w >> 24) & 0xff] ^
		      rf_crc32c_table[3][(w >> 32) & 0xff] ^ rf_crc32c_table[2][(w >> 40) & 0xff] ^
		      rf_crc32c_table[1][(w >> 48) & 0xff] ^ rf_crc32c_table[0][w >> 56];
		b += 8;
		n -= 8;
	}
	while (n--)
		crc = (crc >> 8) ^ rf_crc32c_table[0][(crc ^ *b++) & 0xff];
	return ~crc;
}

static inline uint64_t rf_vfy_word(uint64_t off, uint64_t gen, uint64_t i)
{
	return rf_randmap_mix(off * 0x9e3779b97f4a7c15ull ^ gen * 0xbf58476d1ce4e5b9ull ^ (i + 1));
}

/* Byte k (k >= RF_VFY_HDR) of the pattern of a block. */
static inline uint8_t rf_vfy_byte(uint64_t off, uint64_t gen, size_t k)
{
	return (uint8_t)(rf_vfy_word(off, gen, k / 8) >> (8 * (k % 8)));
}

/* Fill a block of len bytes (>= RF_VFY_HDR) for offset off, generation gen. */
static inline void rf_vfy_fill(uint8_t *b, size_t len, uint64_t off, uint64_t gen)
{
	uint32_t l32 = (uint32_t)len, zero = 0;
	memcpy(b, RF_VFY_MAGIC, 8);
	memcpy(b + 8, &off, 8);
	memcpy(b + 16, &gen, 8);
	memcpy(b + 24, &l32, 4);
	memcpy(b + 28, &zero, 4);
	for (size_t k = RF_VFY_HDR; k < len; k++)
		b[k] = rf_vfy_byte(off, gen, k);
	uint32_t crc = rf_crc32c(0, b, len);
	memcpy(b + 28, &crc, 4);
}

/* rf_randmap_mix undone: it is a bijection (xor-shifts and odd multipliers), so a
 * pattern word tells the generation that wrote it. */
static inline uint64_t rf_vfy_inv64(uint64_t a) /* a odd: a * x == 1 mod 2^64 */
{
	uint64_t x = a;
	for (int i = 0; i < 5; i++)
		x *= 2 - a * x;
	return x;
}

static inline uint64_t rf_vfy_unmix(uint64_t z)
{
	z ^= z >> 31;
	z ^= z >> 62;
	z *= rf_vfy_inv64(0x94d049bb133111ebull);
	z ^= z >> 27;
	z ^= z >> 54;
	z *= rf_vfy_inv64(0xbf58476d1ce4e5b9ull);
	z ^= z >> 30;
	z ^= z >> 60;
	return z;
}

/* The generation whose pattern word i (bytes 8i..8i+7 of the block, i >= 4) is w. */
static inline uint64_t rf_vfy_gen_of(uint64_t w, uint64_t off, uint64_t i)
{
	return (rf_vfy_unmix(w) ^ off * 0x9e3779b97f4a7c15ull ^ (i + 1)) *
	       rf_vfy_inv64(0xbf58476d1ce4e5b9ull);
}

static inline const char *rf_vfy_field(size_t k)
{
	return k < 8 ? " (the header's magic)" : k < 16 ? " (the header's offset)"
	     : k < 24 ? " (the header's generation)" : k < 28 ? " (the header's length)"
	     : k < 32 ? " (the header's crc32c)" : "";
}

/* Bytes of b that differ from the block written at off with generation gen, and the
 * first of them in *first (len if none). */
static inline size_t rf_vfy_diff(const uint8_t *b, size_t len, uint64_t off, uint64_t gen,
				 size_t *first)
{
	uint8_t h[RF_VFY_HDR];
	uint32_t l32 = (uint32_t)len, zero = 0, crc;
	size_t n = 0;

	memcpy(h, RF_VFY_MAGIC, 8);
	memcpy(h + 8, &off, 8);
	memcpy(h + 16, &gen, 8);
	memcpy(h + 24, &l32, 4);
	memcpy(h + 28, &zero, 4);
	crc = rf_crc32c(0, h, RF_VFY_HDR);
	for (size_t k = RF_VFY_HDR; k < len; k++) {
		uint8_t e = rf_vfy_byte(off, gen, k);
		crc = rf_crc32c(crc, &e, 1);
	}
	memcpy(h + 28, &crc, 4);
	*first = len;
	for (size_t k = 0; k < len; k++) {
		uint8_t e = k < RF_VFY_HDR ? h[k] : rf_vfy_byte(off, gen, k);
		if (b[k] != e) {
			if (*first == len)
				*first = k;
			n++;
		}
	}
	return n;
}

/* Check a block read at off: 0, or -1 with what is wrong in msg ("offset X: ...").
 * want_gen: the generation this run wrote (a block from an earlier run is a lost
 * write), or 0 to accept any. A block whose CRC holds is judged by its header (no
 * verify header, written in the wrong place, an older generation, another length). A
 * damaged one is compared byte by byte with the block that should be there -- its
 * header included -- for the generation that best explains it (this run's; else the
 * header's, or the one its pattern words were drawn for: the header's own bytes may be
 * the damaged ones), and the first byte that differs is named, with the header field
 * it belongs to. */
static inline int rf_vfy_check(const uint8_t *b, size_t len, uint64_t off, uint64_t want_gen,
			       char *msg, size_t mlen)
{
	uint64_t hoff, gen;
	uint32_t l32, crc, zero = 0;
	memcpy(&hoff, b + 8, 8);
	memcpy(&gen, b + 16, 8);
	memcpy(&l32, b + 24, 4);
	memcpy(&crc, b + 28, 4);
	uint32_t c = rf_crc32c(0, b, 28);
	c = rf_crc32c(c, &zero, 4);
	c = rf_crc32c(c, b + RF_VFY_HDR, len - RF_VFY_HDR);
	int intact = c == crc, mdiff = 0;
	for (int k = 0; k < 8; k++)
		mdiff += b[k] != (uint8_t)RF_VFY_MAGIC[k];
	/* a magic off by a byte or two in a damaged block is damage, named below */
	if (mdiff && (intact || mdiff > 2)) {
		snprintf(msg, mlen, "offset %" PRIu64 ": no verify header: magic %02x%02x%02x%02x%02x%02x%02x%02x, "
			 "expected \"" RF_VFY_MAGIC "\" (not written by rf-iobench --verify?)", off, b[0], b[1],
			 b[2], b[3], b[4], b[5], b[6], b[7]);
		return -1;
	}
	if (intact) {
		if (hoff != off) {
			snprintf(msg, mlen, "offset %" PRIu64 ": the header says offset %" PRIu64
				 " (a block written in the wrong place)", off, hoff);
			return -1;
		}
		if (want_gen && gen != want_gen) {
			snprintf(msg, mlen, "offset %" PRIu64 ": generation %" PRIu64 ", expected %"
				 PRIu64 " (this run's write of the block was lost: an older one is "
				 "there)", off, gen, want_gen);
			return -1;
		}
		if (l32 != len) {
			snprintf(msg, mlen, "offset %" PRIu64 ": the header says %" PRIu32 " bytes, "
				 "the block has %zu", off, l32, len);
			return -1;
		}
		return 0;
	}
	/* a whole block of another size (written with another --bs, read with this one):
	 * its header, the magic and offset right, a length that is not len, and a CRC
	 * right over that length -- said as such, not as damage at the length field */
	if (!mdiff && hoff == off && l32 && l32 < len && l32 >= RF_VFY_HDR) {
		uint32_t c2 = rf_crc32c(0, b, 28);
		c2 = rf_crc32c(c2, &zero, 4);
		c2 = rf_crc32c(c2, b + RF_VFY_HDR, l32 - RF_VFY_HDR);
		if (c2 == crc) {
			snprintf(msg, mlen, "offset %" PRIu64 ": a block of %" PRIu32 " bytes (written "
				 "with another --bs), read as one of %zu: verify with the --bs it "
				 "was written with", off, l32, len);
			return -1;
		}
	}
	/* damaged: which generation's block should this be? */
	uint64_t cand[4];
	unsigned nc = 0;
	if (want_gen)
		cand[nc++] = want_gen;
	cand[nc++] = gen;
	for (uint64_t i = 4; i < 6 && len >= 8 * (i + 1); i++) {
		uint64_t w;
		memcpy(&w, b + 8 * i, 8);
		cand[nc++] = rf_vfy_gen_of(w, off, i);
	}
	size_t best = (size_t)-1, first = len, f;
	uint64_t bgen = gen;
	for (unsigned i = 0; i < nc; i++) {
		size_t n = rf_vfy_diff(b, len, off, cand[i], &f);
		if (n < best) {
			best = n;
			first = f;
			bgen = cand[i];
		}
	}
	if (first < len) {
		size_t k = first;
		uint8_t e;
		if (k < RF_VFY_HDR) { /* the header as it should read */
			uint8_t h[RF_VFY_HDR];
			memcpy(h, RF_VFY_MAGIC, 8);
			memcpy(h + 8, &off, 8);
			memcpy(h + 16, &bgen, 8);
			uint32_t l = (uint32_t)len;
			memcpy(h + 24, &l, 4);
			if (k >= 28) { /* the CRC the right block has */
				uint32_t z = 0, cc;
				memcpy(h + 28, &z, 4);
				cc = rf_crc32c(0, h, RF_VFY_HDR);
				for (size_t j = RF_VFY_HDR; j < len; j++) {
					uint8_t x = rf_vfy_byte(off, bgen, j);
					cc = rf_crc32c(cc, &x, 1);
				}
				memcpy(h + 28, &cc, 4);
			}
			e = h[k];
		} else {
			e = rf_vfy_byte(off, bgen, k);
		}
		snprintf(msg, mlen, "offset %" PRIu64 ": crc32c 0x%08" PRIx32 ", expected 0x%08" PRIx32
			 "; first bad byte at offset %" PRIu64 "%s: 0x%02x, expected 0x%02x", off, c, crc,
			 off + k, rf_vfy_field(k), b[k], e);
		return -1;
	}
	snprintf(msg, mlen, "offset %" PRIu64 ": crc32c 0x%08" PRIx32 ", expected 0x%08" PRIx32
		 " (no byte differs from the expected block: the check itself is wrong)", off, c, crc);
	return -1;
}

#endif
