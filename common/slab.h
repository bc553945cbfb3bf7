/* common/slab.h -- fixed-size records (an engine's variables and op records, a
 * loader's gather jobs and fetches) from chunks that are kept and reused, not one
 * malloc each.
 *
 * A freed record goes on the slab's free list and is the next one handed out, so a
 * steady stream of create/destroy touches the same few cache lines and pages. The
 * first chunk is 16 KiB (a small engine stays small; rf__slab_warm faults it in at
 * creation), every later one RF__SLAB_HUGE (2 MiB), 2 MiB-aligned and advised
 * MADV_HUGEPAGE, so a million live variables fault ~60 times, not ~30000. Measured on a
 * 2-vCPU virtual machine: a 4 KiB page's first touch costs ~15 us, a 2 MiB huge page's
 * ~155 us, so doubling from 16 KiB up to 2 MiB in small pages (512 faults, ~7.7 ms a
 * slab) cost more than one huge chunk.
 * Chunks come from the allocator (not mmap), so LeakSanitizer still scans what the
 * records point to; under AddressSanitizer a free record is poisoned, so a use after
 * rf__slab_put is reported as one. Owner thread only: no locks. */
#ifndef RF_COMMON_SLAB_H
#define RF_COMMON_SLAB_H

#include <stddef.h>
#include <stdint.h>

#include "rf-internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define RF__SLAB_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define RF__SLAB_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define RF__SLAB_POISON(p, n) ((void)(p), (void)(n))
#define RF__SLAB_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define RF__SLAB_FIRST ((size_t)16 << 10)
#define RF__SLAB_HUGE RF__HUGE_PAGE

struct rf__slab_chunk {
	struct rf__slab_chunk *next;
	size_t bytes;
};

struct rf__slab_free {
	struct rf__slab_free *next;
};

struct rf__slab {
	size_t size;                   /* a record's bytes, a multiple of 16 */
	struct rf__slab_free *free;    /* records given back, newest first */
	char *cur, *end;               /* the newest chunk's untouched part */
	struct rf__slab_chunk *chunks;
	size_t next_bytes;             /* the next chunk's size */
	size_t nchunks, live;          /* chunks taken, records handed out now */
	int poison;                    /* AddressSanitizer: poison free records */
};

/* An empty slab of records of `size` bytes; nothing is allocated yet. `poison`: under
 * AddressSanitizer a free record may not be read (0 where a freed record is read on
 * purpose: rf_engine_op_done checks a finished op's state to name a broken contract). */
void rf__slab_init(struct rf__slab *s, size_t size, int poison);

/* A new chunk, then one record from it; NULL when out of memory. */
void *rf__slab_grow(struct rf__slab *s);

/* The first chunk now, its pages faulted in, where none is yet: so that the first
 * records handed out do not pay the faults. 0, or -1 when out of memory. */
int rf__slab_warm(struct rf__slab *s);

/* Every chunk back to the allocator: records still handed out are gone with them. */
void rf__slab_release(struct rf__slab *s);

/* A record (uninitialised), or NULL when out of memory. */
static inline void *rf__slab_get(struct rf__slab *s)
{
	struct rf__slab_free *f = s->free;

	if (f) {
		if (s->poison)
			RF__SLAB_UNPOISON(f, s->size);
		s->free = f->next;
		s->live++;
		return f;
	}
	if (s->cur != s->end) {
		void *p = s->cur;

		s->cur += s->size;
		RF__SLAB_UNPOISON(p, s->size);
		s->live++;
		return p;
	}
	return rf__slab_grow(s);
}

/* Give back a record from rf__slab_get (NULL is ignored). */
static inline void rf__slab_put(struct rf__slab *s, void *p)
{
	struct rf__slab_free *f = p;

	if (!f)
		return;
	f->next = s->free;
	s->free = f;
	s->live--;
	if (s->poison)
		RF__SLAB_POISON(f, s->size);
}

#endif
