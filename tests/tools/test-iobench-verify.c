/* tools-iobench-verify: rf-iobench --verify's block check (tools/iobench-verify.h). The
 * pattern's mix is undone exactly (the generation a word was drawn for is recovered);
 * an intact block passes; an older generation with a valid CRC is a lost write, a block
 * with another offset one written in the wrong place, a zeroed block no verify header.
 * And the class the report used to get wrong: for blocks of 32, 33, 40, 48, 4096 and
 * 4097 bytes, with and without this run's generation known, a damaged byte anywhere --
 * the header's magic, offset, generation, length, CRC, or the data -- is the byte the
 * report names, with the value read and the value expected (a flipped generation used
 * to be blamed on the first data byte, whose expected value was rebuilt from the damaged
 * header). Under 40 bytes a block has no whole pattern word: a flipped generation is
 * named only where the run knows its generation. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/iobench/iobench-verify.h"
#include "../test-util.h"

static int named(const char *msg, uint64_t at)
{
	char want[64];
	snprintf(want, sizeof(want), "first bad byte at offset %llu", (unsigned long long)at);
	const char *p = strstr(msg, want);
	/* followed by " (" or ":" -- not a longer number */
	return p && (p[strlen(want)] == ':' || p[strlen(want)] == ' ');
}

int main(void)
{
	static const size_t lens[] = { 32, 33, 40, 48, 4096, 4097 };
	static const uint8_t masks[] = { 0x01, 0x80, 0xff };
	uint64_t seed = 0x243f6a8885a308d3ull, checks = 0;
	char msg[512];

	rf_crc32c_init();
	/* two blocks written with --bs 4k, read as one of 8k: said as a block of another
	 * size, not as damage at the header's length field */
	{
		static uint8_t two[8192];
		rf_vfy_fill(two, 4096, 8192, 5);
		rf_vfy_fill(two + 4096, 4096, 8192 + 4096, 5);
		CHECK_EQ(rf_vfy_check(two, 8192, 8192, 5, msg, sizeof(msg)), -1);
		CHECK(strstr(msg, "offset 8192: a block of 4096 bytes (written with another --bs)"));
		two[100] ^= 1;   /* damaged too: then it is damage, as any */
		CHECK_EQ(rf_vfy_check(two, 8192, 8192, 5, msg, sizeof(msg)), -1);
		CHECK(!strstr(msg, "another --bs"));
	}
	for (int i = 0; i < 100000; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		CHECK_EQ(rf_vfy_unmix(rf_randmap_mix(seed)), seed);
		uint64_t off = seed >> 7, gen = seed * 3 + 1, k = 4 + (seed & 7);
		CHECK_EQ(rf_vfy_gen_of(rf_vfy_word(off, gen, k), off, k), gen);
	}
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		size_t len = lens[li];
		uint8_t *b = malloc(len), *good = malloc(len);
		uint64_t off = 65536 * (li + 1), gen = 7 + li;
		rf_vfy_fill(good, len, off, gen);
		CHECK_EQ(rf_vfy_check(good, len, off, gen, msg, sizeof(msg)), 0);
		CHECK_EQ(rf_vfy_check(good, len, off, 0, msg, sizeof(msg)), 0);
		/* intact but not this run's, or not this place's: said so */
		CHECK_EQ(rf_vfy_check(good, len, off, gen + 1, msg, sizeof(msg)), -1);
		CHECK(strstr(msg, "was lost"));
		rf_vfy_fill(b, len, off + 4096, gen);
		CHECK_EQ(rf_vfy_check(b, len, off, 0, msg, sizeof(msg)), -1);
		CHECK(strstr(msg, "wrong place"));
		memset(b, 0, len);
		CHECK_EQ(rf_vfy_check(b, len, off, 0, msg, sizeof(msg)), -1);
		CHECK(strstr(msg, "no verify header"));
		/* every byte of the header, and the data (every byte of a short block, a
		 * sample of a long one), flipped three ways */
		for (size_t k = 0; k < len; k += k < 64 || len < 100 ? 1 : 61) {
			for (size_t m = 0; m < sizeof(masks); m++) {
				for (int known = 0; known < 2; known++) {
					memcpy(b, good, len);
					b[k] ^= masks[m];
					int r = rf_vfy_check(b, len, off, known ? gen : 0, msg, sizeof(msg));
					/* a block without a whole pattern word (under 40 bytes)
					 * cannot tell a flipped generation from a flipped CRC
					 * unless the run knows its generation */
					if (len < 40 && !known && k >= 16 && k < 24)
						continue;
					if (r != -1 || !named(msg, off + k)) {
						fprintf(stderr, "FAIL: %zu-byte block, byte %zu ^ 0x%02x, "
							"generation %s: %s\n", len, k, masks[m],
							known ? "known" : "not known", r ? msg : "passed");
						return 1;
					}
					checks++;
				}
			}
		}
		/* the last byte, and a damaged block's message names the right values */
		memcpy(b, good, len);
		b[len - 1] ^= 0x5a;
		CHECK_EQ(rf_vfy_check(b, len, off, 0, msg, sizeof(msg)), -1);
		CHECK(named(msg, off + len - 1));
		free(b);
		free(good);
	}
	printf("ok: %llu damaged blocks, each blamed on the byte that was changed\n",
	       (unsigned long long)checks);
	return 0;
}
