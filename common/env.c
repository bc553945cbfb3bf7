/* common/env.c -- a whole number from the environment, read one way everywhere: digits
 * only (atoi took "5x" as 5 and "abc" as 0, strtoul a sign and leading spaces), checked
 * against its range before it can overflow, and refused by name. */
#include <errno.h>
#include <stdint.h>

#include "rf-internal.h"

int rf__env_u64(const char *name, const char *value, uint64_t lo, uint64_t hi, uint64_t dflt,
		const char *what, uint64_t *out)
{
	const char *p = value;
	uint64_t v = 0;

	*out = dflt;
	if (!value)
		return 0;
	for (; *p >= '0' && *p <= '9' && v <= hi; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	if (!*value || *p || v < lo || v > hi)
		return rf__fail(-EINVAL, "%s=%s in the environment: expected %s, a whole number "
				"from %llu to %llu (or the variable unset)", name, value, what,
				(unsigned long long)lo, (unsigned long long)hi);
	*out = v;
	return 0;
}
