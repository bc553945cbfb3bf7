/* tools/iobench-map.h -- rf-iobench's random map: every block of the region exactly
 * once per pass, in an order that looks random, in O(1) memory whatever the region's
 * size (fio keeps a bitmap of the blocks instead). The order is a permutation of
 * [0, n): a 4-round Feistel network over the smallest even number of bits 2k with
 * 2^(2k) >= n (a bijection of [0, 4^k) whatever its round function), walked by a
 * counter, skipping outputs >= n (cycle walking: at most 4 draws per block, 1.x on
 * average). Each pass gets its own key, so passes differ.
 * tests/tools/test-iobench-map.c checks that every block comes exactly once. */
#ifndef RF_IOBENCH_MAP_H
#define RF_IOBENCH_MAP_H

#include <stdint.h>

struct rf_randmap {
	uint64_t n;          /* blocks */
	unsigned half;       /* bits per Feistel half */
	uint64_t mask;       /* (1 << half) - 1 */
	uint64_t key[4];
	uint64_t ctr, pass;  /* next counter value; passes started */
	uint64_t seed;
};

static inline uint64_t rf_randmap_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline void rf_randmap_rekey(struct rf_randmap *m)
{
	for (unsigned r = 0; r < 4; r++)
		m->key[r] = rf_randmap_mix(m->seed + 0x9e3779b97f4a7c15ull * (4 * m->pass + r + 1));
	m->ctr = 0;
}

/* n >= 1 blocks. */
static inline void rf_randmap_init(struct rf_randmap *m, uint64_t n, uint64_t seed)
{
	unsigned bits = 2;
	while (bits < 64 && (1ull << bits) < n)
		bits += 2;
	m->n = n;
	m->half = bits / 2;
	m->mask = (1ull << m->half) - 1;
	m->seed = seed;
	m->pass = 0;
	rf_randmap_rekey(m);
}

static inline uint64_t rf_randmap_feistel(const struct rf_randmap *m, uint64_t x)
{
	uint64_t l = x >> m->half, r = x & m->mask;
	for (unsigned i = 0; i < 4; i++) {
		uint64_t t = l ^ (rf_randmap_mix(r ^ m->key[i]) & m->mask);
		l = r;
		r = t;
	}
	return (l << m->half) | r;
}

/* The next block; after n of them a new pass (a new order) begins. */
static inline uint64_t rf_randmap_next(struct rf_randmap *m)
{
	for (;;) {
		if (m->ctr > (m->mask << m->half | m->mask)) {
			m->pass++;
			rf_randmap_rekey(m);
		}
		uint64_t v = rf_randmap_feistel(m, m->ctr++);
		if (v < m->n)
			return v;
	}
}

#endif
