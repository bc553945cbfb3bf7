/* devices/cpu/isa.c -- which instruction set the CPU kernels run: AVX-512 when the
 * CPU and OS support it, unless the environment sets RF_KERNELS_NO_AVX512 -- the
 * library's one rule (common/isa.c), which the loader's host decode follows too. */
#include "kernels-impl.h"
#include "rf-internal.h"

#if RF__X86_DISPATCH
int rf__k_use_avx512(void)
{
	return rf__isa_avx512();
}
#endif
