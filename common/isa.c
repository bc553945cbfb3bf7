/* common/isa.c -- whether host code may use AVX-512 (rf-internal.h). */
#include <stdlib.h>

#include "rf-internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
int rf__isa_avx512(void)
{
	static int known = -1;
	int v = __atomic_load_n(&known, __ATOMIC_RELAXED);

	if (v >= 0)
		return v;
	__builtin_cpu_init();
	v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("fma");
	if (v) {
		const char *e = getenv("RF_KERNELS_NO_AVX512");
		v = !(e && *e && *e != '0');
	}
	__atomic_store_n(&known, v, __ATOMIC_RELAXED);
	return v;
}
#else
int rf__isa_avx512(void)
{
	return 0;
}
#endif
