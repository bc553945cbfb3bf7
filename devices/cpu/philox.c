/* devices/cpu/philox.c -- counter-based random numbers: Philox4x32-10, uniform and
 * normal fills. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels-impl.h"

/* ---- random numbers -------------------------------------------------------------------- */

static inline void philox10(uint32_t x[4], uint32_t k0, uint32_t k1)
{
	for (int r = 0; r < 10; r++) {
		if (r) {
			k0 += 0x9E3779B9u;
			k1 += 0xBB67AE85u;
		}
		uint64_t p0 = (uint64_t)0xD2511F53u * x[0];
		uint64_t p1 = (uint64_t)0xCD9E8D57u * x[2];
		uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
		uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
		uint32_t y0 = hi1 ^ x[1] ^ k0, y2 = hi0 ^ x[3] ^ k1;
		x[0] = y0;
		x[1] = lo1;
		x[2] = y2;
		x[3] = lo0;
	}
}

void rf__k_philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2])
{
	uint32_t x[4] = { ctr[0], ctr[1], ctr[2], ctr[3] };
	philox10(x, key[0], key[1]);
	memcpy(out, x, sizeof(x));
}

RF__NO_CONTRACT
void rf__k_rand_uniform(float *out, size_t n, uint64_t seed, uint64_t counter,
		       float lo, float hi)
{
	const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
	const float d = hi - lo;
	for (size_t i = 0; i < n; i++) {
		uint64_t idx = counter + i;
		uint32_t x[4] = { (uint32_t)idx, (uint32_t)(idx >> 32), 0, 0 };
		philox10(x, k0, k1);
		float u = (float)(x[0] >> 8) * 0x1p-24f;
		float t = d * u;
		out[i] = lo + t;
	}
}

void rf__k_rand_normal(float *out, size_t n, uint64_t seed, uint64_t counter,
		      float mean, float std)
{
	const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
	const double two_pi = 6.283185307179586476925286766559;
	for (size_t i = 0; i < n; i++) {
		uint64_t idx = counter + i;
		uint32_t x[4] = { (uint32_t)idx, (uint32_t)(idx >> 32), 0, 0 };
		philox10(x, k0, k1);
		double u1 = ((double)x[0] + 1.0) * 0x1p-32;
		double u2 = (double)x[1] * 0x1p-32;
		double z = sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
		out[i] = (float)((double)mean + (double)std * z);
	}
}
