/* common/mem.c -- large arrays on transparent huge pages. Here a 4 KiB page's first
 * touch costs ~15 us and a 2 MiB huge page's ~155 us (a 2-vCPU virtual machine), so
 * an array of tens of MiB filled in 4 KiB pages pays tens of ms for its faults. */
#include <stdlib.h>
#include <sys/mman.h>

#include "rf-internal.h"

void *rf__alloc_big(size_t bytes)
{
	void *p = NULL;

	if (bytes < RF__HUGE_PAGE)   /* cache-line aligned: a slab's records start on lines */
		return posix_memalign(&p, 64, bytes ? bytes : 1) == 0 ? p : NULL;
	if (posix_memalign(&p, RF__HUGE_PAGE, bytes) != 0)
		return NULL;
#ifdef MADV_HUGEPAGE
	(void)madvise(p, bytes, MADV_HUGEPAGE);  /* a hint: refused, nothing changes */
#endif
	return p;
}
