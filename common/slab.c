/* common/slab.c -- chunks for common/slab.h's records: growing, huge-page advice,
 * release. */
#include <stdlib.h>

#include "slab.h"
#include "rf-internal.h"

/* Records start this far into a chunk: the header, rounded to a cache line. */
#define RF__SLAB_HEAD 64

void rf__slab_init(struct rf__slab *s, size_t size, int poison)
{
	size_t min = sizeof(struct rf__slab_free);

	*s = (struct rf__slab){ 0 };
	s->size = ((size < min ? min : size) + 15) & ~(size_t)15;
	s->next_bytes = RF__SLAB_FIRST;
	s->poison = poison;
}

/* One more chunk (a huge one 2 MiB-aligned and advised MADV_HUGEPAGE: rf__alloc_big),
 * its records untouched (poisoned under ASan); with prefault, its pages faulted in
 * first. 0, or -1 when out of memory. */
static int rf__slab_add(struct rf__slab *s, int prefault)
{
	size_t bytes = s->next_bytes;
	struct rf__slab_chunk *c;

	if (bytes < RF__SLAB_HEAD + s->size)
		bytes = RF__SLAB_HEAD + s->size;
	if (!(c = rf__alloc_big(bytes)))
		return -1;
	if (prefault)
		rf__prefault(c, bytes);
	c->bytes = bytes;
	c->next = s->chunks;
	s->chunks = c;
	s->nchunks++;
	s->next_bytes = RF__SLAB_HUGE;
	s->cur = (char *)c + RF__SLAB_HEAD;
	s->end = s->cur + (bytes - RF__SLAB_HEAD) / s->size * s->size;
	RF__SLAB_POISON(s->cur, (size_t)(s->end - s->cur));
	return 0;
}

void *rf__slab_grow(struct rf__slab *s)
{
	return rf__slab_add(s, 0) < 0 ? NULL : rf__slab_get(s);
}

int rf__slab_warm(struct rf__slab *s)
{
	return s->chunks ? 0 : rf__slab_add(s, 1);
}

void rf__slab_release(struct rf__slab *s)
{
	struct rf__slab_chunk *c;

	while ((c = s->chunks)) {
		s->chunks = c->next;
		RF__SLAB_UNPOISON(c, c->bytes);
		free(c);
	}
	s->free = NULL;
	s->cur = s->end = NULL;
	s->live = 0;
	s->nchunks = 0;
	s->next_bytes = RF__SLAB_FIRST;
}
