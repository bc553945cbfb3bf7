/* devices/cpu/isa.c -- which instruction set the CPU kernels run: AVX-512 when the
 * CPU and OS support it, unless the environment sets RF_KERNELS_NO_AVX512. */
#include <stdlib.h>

#include "kernels-impl.h"

#if RF__X86_DISPATCH
int rf__k_use_avx512(void)
{
	__builtin_cpu_init();
	if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
	      __builtin_cpu_supports("fma")))
		return 0;
	const char *e = getenv("RF_KERNELS_NO_AVX512");
	return !(e && *e && *e != '0');
}
#endif
