/* test-iobench-map: rf-iobench's random map (tools/iobench-map.h) gives every block of
 * the region exactly once per pass -- for region sizes around powers of two and of
 * four, primes, 1 and 2 -- over three passes each, and the passes' orders differ
 * (and differ from file order) where there is room to. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../tools/iobench/iobench-map.h"
#include "../test-util.h"

int main(void)
{
	static const uint64_t ns[] = { 1, 2, 3, 4, 5, 15, 16, 17, 63, 64, 65, 255, 256, 257,
				       1000, 1021, 4095, 4096, 4097, 65537, 262144, 1000003 };
	for (unsigned t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
		uint64_t n = ns[t];
		uint8_t *seen = calloc(n, 1);
		uint64_t *first = malloc(n * sizeof(*first));
		CHECK(seen && first);
		struct rf_randmap m;
		rf_randmap_init(&m, n, 42 + t);
		for (unsigned pass = 0; pass < 3; pass++) {
			uint64_t same_as_first = 0, in_order = 0;
			for (uint64_t i = 0; i < n; i++) {
				uint64_t b = rf_randmap_next(&m);
				CHECK(b < n);
				if (seen[b] != pass) {
					fprintf(stderr, "n=%llu pass %u: block %llu seen %u times\n",
						(unsigned long long)n, pass, (unsigned long long)b,
						seen[b] - pass + 1);
					return 1;
				}
				seen[b]++;
				if (pass == 0)
					first[i] = b;
				else if (first[i] == b)
					same_as_first++;
				if (b == i)
					in_order++;
			}
			for (uint64_t b = 0; b < n; b++)
				CHECK_EQ(seen[b], pass + 1); /* every block, exactly once a pass */
			if (n >= 64) {
				CHECK(in_order < n / 4);
				if (pass)
					CHECK(same_as_first < n / 4);
			}
		}
		free(seen);
		free(first);
	}
	printf("random map: every block exactly once per pass, %zu region sizes x 3 passes\n",
	       sizeof(ns) / sizeof(ns[0]));
	return 0;
}
