/* devices/alloc.c -- the caching allocator, host backing memory, pinned arenas.
 * Reactor thread only: no lock. Size classes, reuse and the backends:
 * devices/README.md, "Memory".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend-impl.h"


#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define RF__POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define RF__UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define RF__POISON(p, n) ((void)(p), (void)(n))
#define RF__UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define RF__HOST_ALIGN 64

/* ---- host memory --------------------------------------------------------------------
 * aligned_alloc and free, whoever provides them: the library links no allocator, so
 * any process can dlopen it (jemalloc's initial-exec TLS made that fail: "cannot
 * allocate memory in static TLS block"). ringflow's executables link jemalloc, which
 * then replaces malloc for the whole process, this library's calls included. */

int rf__host_alloc(void *ctx, size_t bytes, void **out)
{
	void *p;

	(void)ctx;
	/* 2 MiB and up (activations, weights, workspaces): on huge pages where the kernel
	 * gives them, 2 MiB-aligned (rf__alloc_big) -- a tensor's first touch then costs
	 * one fault per 2 MiB, not 512 */
	if (bytes >= RF__HUGE_PAGE)
		p = rf__alloc_big(bytes);
	else
		p = aligned_alloc(RF__HOST_ALIGN, (bytes + RF__HOST_ALIGN - 1) &
				  ~(size_t)(RF__HOST_ALIGN - 1));
	if (!p)
		return -ENOMEM;
	*out = p;
	return 0;
}

void rf__host_free(void *ctx, void *p, size_t bytes)
{
	(void)ctx;
	(void)bytes;
	free(p);
}

/* ---- size classes ------------------------------------------------------------------- */

size_t rf__cache_class(size_t bytes, unsigned *bin)
{
	unsigned e, q;
	size_t step, cls;

	if (bytes <= 256) {
		*bin = 0;
		return 256;
	}
	/* e: bit length of (bytes - 1); the class is the smallest multiple of 2^(e-3)
	 * (a quarter of the half-power 2^(e-1)) that holds bytes. */
	e = 64 - (unsigned)__builtin_clzll((unsigned long long)(bytes - 1));
	step = (size_t)1 << (e - 3);
	cls = (bytes + step - 1) & ~(step - 1);
	q = (unsigned)(cls >> (e - 3)) - 4; /* 4 < cls/step <= 8: q in 1..4 */
	*bin = e * 4 + q - 1;
	if (*bin >= RF__NBINS)
		*bin = RF__NBINS - 1;
	return cls;
}

int rf__cache_alloc(struct rf__cache *c, size_t bytes, void **out)
{
	unsigned bin;
	size_t cls = rf__cache_class(bytes, &bin);
	struct rf__blk *b;
	int ret;

	c->st.allocs++;
	b = c->bins[bin];
	if (b) {
		c->bins[bin] = b->next;
		*out = b->p;
		b->next = c->spare;
		c->spare = b;
		c->st.cached -= cls;
		c->st.reuses++;
		if (c->host)
			RF__UNPOISON(*out, cls);
	} else {
		if (c->limit && c->held + cls > c->limit)
			rf__cache_trim(c);
		if (c->limit && c->held + cls > c->limit)
			return -ENOMEM;
		ret = c->raw_alloc(c->raw_ctx, cls, out);
		if (ret < 0 && rf__cache_trim(c))
			ret = c->raw_alloc(c->raw_ctx, cls, out);
		if (ret < 0)
			return ret;
		c->st.backend_allocs++;
		c->held += cls;
	}
	c->st.in_use += cls;
	if (c->st.in_use > c->st.peak)
		c->st.peak = c->st.in_use;
	return 0;
}

void rf__cache_free(struct rf__cache *c, void *p, size_t bytes)
{
	unsigned bin;
	size_t cls = rf__cache_class(bytes, &bin);
	struct rf__blk *b = c->spare;

	if (!p)
		return;
	c->st.in_use -= cls;
	if (b) {
		c->spare = b->next;
	} else if (!(b = malloc(sizeof(*b)))) {
		/* No node to cache it with: give it straight back. */
		c->raw_free(c->raw_ctx, p, cls);
		c->st.backend_frees++;
		c->held -= cls;
		return;
	}
	b->p = p;
	b->cls = cls;
	b->next = c->bins[bin];
	c->bins[bin] = b;
	c->st.cached += cls;
	if (c->host)
		RF__POISON(p, cls);
}

size_t rf__cache_trim(struct rf__cache *c)
{
	size_t freed = 0;
	unsigned i;

	for (i = 0; i < RF__NBINS; i++) {
		struct rf__blk *b;
		while ((b = c->bins[i])) {
			size_t cls = b->cls;
			c->bins[i] = b->next;
			if (c->host)
				RF__UNPOISON(b->p, cls);
			c->raw_free(c->raw_ctx, b->p, cls);
			c->st.backend_frees++;
			c->st.cached -= cls;
			c->held -= cls;
			freed += cls;
			b->next = c->spare;
			c->spare = b;
		}
	}
	return freed;
}

void rf__cache_fini(struct rf__cache *c)
{
	struct rf__blk *b;

	rf__cache_trim(c);
	while ((b = c->spare)) {
		c->spare = b->next;
		free(b);
	}
}

/* ---- pinned arena ------------------------------------------------------------------- */

struct rf__ext {
	size_t off, len;
	struct rf__ext *next;
};

struct rf_pinned {
	void *base;
	size_t size;
	const struct rf__backend *reg;   /* the backend that page-locked it, or NULL */
	size_t in_use;
	struct rf__ext *free_list;       /* sorted by offset, coalesced */
};

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Fault in every page of [m, m + bytes) for writing: one call where the kernel has
 * MADV_POPULATE_WRITE, else a write per page (the memory is zero already). */
static void rf__populate(void *m, size_t bytes)
{
	if (madvise(m, bytes, MADV_POPULATE_WRITE) == 0)
		return;
	for (size_t off = 0; off < bytes; off += 4096)
		((volatile char *)m)[off] = 0;
}

int rf_pinned_create(size_t bytes, struct rf_pinned **out)
{
	const size_t huge = RF__HUGE_PAGE;
	struct rf_pinned *p;
	void *m;

	if (!out || !bytes)
		return -EINVAL;
	bytes = (bytes + huge - 1) & ~(huge - 1);
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		int err = -errno;
		free(p);
		return err;
	}
	/* Transparent huge pages where the kernel gives them (the arena is 2 MiB aligned in
	 * size; the loader's are hundreds of MiB): 512 times fewer faults to populate it and
	 * fewer pages for the ring to pin when it is registered. Then populate it now, so
	 * the first batches do not pay the faults. Both are hints: refusals change nothing. */
	(void)madvise(m, bytes, MADV_HUGEPAGE);
	rf__populate(m, bytes);
	p->base = m;
	p->size = bytes;
	p->free_list = malloc(sizeof(*p->free_list));
	if (!p->free_list) {
		munmap(m, bytes);
		free(p);
		return -ENOMEM;
	}
	p->free_list->off = 0;
	p->free_list->len = bytes;
	p->free_list->next = NULL;
	p->reg = rf__host_register(m, bytes);
	*out = p;
	return 0;
}

void rf_pinned_destroy(struct rf_pinned *p)
{
	struct rf__ext *x;

	if (!p)
		return;
	if (p->in_use)
		rf__log(RF_LOG_WARN, "rf_pinned_destroy: %zu bytes still allocated from the arena",
			p->in_use);
	rf__host_unregister(p->reg, p->base);
	munmap(p->base, p->size);
	while ((x = p->free_list)) {
		p->free_list = x->next;
		free(x);
	}
	free(p);
}

void *rf_pinned_base(const struct rf_pinned *p) { return p->base; }
size_t rf_pinned_size(const struct rf_pinned *p) { return p->size; }
int rf_pinned_is_registered(const struct rf_pinned *p) { return p->reg != NULL; }
size_t rf_pinned_in_use(const struct rf_pinned *p) { return p->in_use; }

int rf_pinned_alloc(struct rf_pinned *p, size_t bytes, size_t align, void **out)
{
	struct rf__ext **pp, *x;

	if (!align)
		align = 4096;
	if (!p || align & (align - 1) || !out)
		return -EINVAL;
	if (!bytes)
		bytes = 1;
	bytes = (bytes + 63) & ~(size_t)63;
	for (pp = &p->free_list; (x = *pp); pp = &x->next) {
		size_t start = (x->off + align - 1) & ~(align - 1);
		size_t pad = start - x->off;
		if (pad + bytes > x->len)
			continue;
		if (pad) {
			/* keep the padding as a free extent before the allocation */
			struct rf__ext *tail = NULL;
			if (x->len > pad + bytes) {
				tail = malloc(sizeof(*tail));
				if (!tail)
					return -ENOMEM;
				tail->off = start + bytes;
				tail->len = x->len - pad - bytes;
				tail->next = x->next;
				x->next = tail;
			}
			x->len = pad;
		} else if (x->len == bytes) {
			*pp = x->next;
			free(x);
		} else {
			x->off += bytes;
			x->len -= bytes;
		}
		p->in_use += bytes;
		*out = (char *)p->base + start;
		return 0;
	}
	return -ENOMEM;
}

void rf_pinned_free(struct rf_pinned *p, void *ptr, size_t bytes)
{
	struct rf__ext **pp, *x, *prev = NULL, *n;
	size_t off;

	if (!ptr)
		return;
	if (!bytes)
		bytes = 1;
	bytes = (bytes + 63) & ~(size_t)63;
	off = (size_t)((char *)ptr - (char *)p->base);
	p->in_use -= bytes;
	for (pp = &p->free_list; (x = *pp) && x->off < off; pp = &x->next)
		prev = x;
	/* merge with the previous extent, the next one, or both */
	if (prev && prev->off + prev->len == off) {
		prev->len += bytes;
		if (x && prev->off + prev->len == x->off) {
			prev->len += x->len;
			prev->next = x->next;
			free(x);
		}
		return;
	}
	if (x && off + bytes == x->off) {
		x->off = off;
		x->len += bytes;
		return;
	}
	n = malloc(sizeof(*n));
	if (!n) /* lose the extent rather than corrupt the list */
		return;
	n->off = off;
	n->len = bytes;
	n->next = x;
	*pp = n;
}
