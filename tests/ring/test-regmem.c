/* test-regmem: several external memory areas registered as fixed buffers, one after
 * another (two loaders on one ring each register their staging arena), and one
 * unregistered again while the other stays usable. Reads with RF_IO_FIXED_BUF land
 * correctly in each area; after the first area is unregistered, the second (whose
 * buffer index shifted) still reads correctly, a fixed read into the first is refused
 * with -EINVAL, and registering it again works. A read queued but not yet submitted
 * when an area is unregistered still completes with the right data; so does a short
 * read whose rest goes after an unregistration renumbered the table, or removed its
 * own area (the rest then a plain read into the same memory). */
#include <sys/mman.h>

#include "ring-test.h"

#define AREA (256 * 1024)

static void fixed_read(struct rf_ring *r, int fd, void *buf, size_t len, uint64_t off)
{
	struct t_res t = { 0 };

	T_OK(rf_ring_read(r, fd, buf, len, off, RF_IO_FIXED_BUF, t_store, &t, NULL));
	while (!t.calls)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(t.res, (long long)len);
	T_EQ(t_verify(buf, len, 7, off), -1);
}

int main(void)
{
	char path[256];
	int fd = t_tmpfile(path, sizeof(path), 0);
	struct rf_ring *r;
	uint8_t *a, *b, *pat = malloc(AREA * 2);
	size_t la = AREA, lb = AREA;
	struct t_res t = { 0 };

	T_CHECK(pat);
	for (size_t i = 0; i < AREA * 2; i++)
		pat[i] = t_pat(7, i);
	T_EQ(pwrite(fd, pat, AREA * 2, 0), AREA * 2);
	a = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	b = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	T_CHECK(a != MAP_FAILED && b != MAP_FAILED);
	T_OK(rf_ring_create(&r, NULL));

	T_OK(rf_ring_register_memory(r, (void *[]){ a }, &la, 1));
	T_OK(rf_ring_register_memory(r, (void *[]){ b }, &lb, 1));
	T_EQ(rf_ring_register_buffers(r, 4, 4096, 4096), -EEXIST); /* not with an arena */
	fixed_read(r, fd, a, AREA, 0);
	fixed_read(r, fd, b, AREA, AREA);

	/* queued, not submitted, then a is unregistered: the read still lands in b */
	memset(b, 0, AREA);
	T_OK(rf_ring_read(r, fd, b, 4096, 8192, RF_IO_FIXED_BUF, t_store, &t, NULL));
	T_OK(rf_ring_unregister_memory(r, a));
	while (!t.calls)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(t.res, 4096);
	T_EQ(t_verify(b, 4096, 7, 8192), -1);

	fixed_read(r, fd, b + 4096, 4096, 4096); /* b's index shifted from 1 to 0 */
	T_EQ(rf_ring_read(r, fd, a, 4096, 0, RF_IO_FIXED_BUF, t_store, &t, NULL), -EINVAL);
	T_EQ(rf_ring_unregister_memory(r, a), -ENOENT);
	T_OK(rf_ring_register_memory(r, (void *[]){ a }, &la, 1));
	memset(a, 0, AREA);
	fixed_read(r, fd, a, AREA, AREA);
	T_OK(rf_ring_unregister_memory(r, b));
	T_OK(rf_ring_unregister_memory(r, a));

	/* in the kernel, short, and its rest submitted after areas were unregistered: the
	 * rest used the index of the submission, which named no area any more (-EFAULT,
	 * the first piece's bytes consumed from the pipe and never reported) */
	for (int own = 0; own < 2; own++) {
		int pp[2];
		char *dst = (char *)b + 100;
		struct t_res u = { 0 };
		T_CHECK(pipe(pp) == 0);
		T_OK(rf_ring_register_memory(r, (void *[]){ a, b }, (size_t[]){ la, lb }, 2));
		T_OK(rf_ring_read(r, pp[0], dst, 20, UINT64_MAX, RF_IO_FIXED_BUF, t_store, &u,
				  NULL));
		T_OK(rf_ring_run(r, RF_RUN_NOWAIT));        /* in the kernel, waiting */
		T_EQ(write(pp[1], "0123456789", 10), 10);   /* a short read of 10 */
		/* a renumbered table (b from index 1 to 0); or b's own area gone, the rest
		 * read into the same memory as a plain read */
		T_OK(rf_ring_unregister_memory(r, own ? b : a));
		for (int i = 0; i < 50 && rf_ring_pending(r) && !u.calls; i++)
			T_OK(rf_ring_run(r, RF_RUN_NOWAIT));
		T_EQ(write(pp[1], "abcdefghij", 10), 10);
		while (!u.calls)
			T_OK(rf_ring_run(r, RF_RUN_ONCE));
		T_EQ(u.res, 20);
		T_CHECK(!memcmp(dst, "0123456789abcdefghij", 20));
		T_OK(rf_ring_unregister_memory(r, own ? a : b));
		close(pp[0]);
		close(pp[1]);
	}

	rf_ring_destroy(r);
	munmap(a, AREA);
	munmap(b, AREA);
	close(fd);
	unlink(path);
	free(pat);
	return 0;
}
