/* ring/register.c -- registered buffers (the ring's arena or external memory
 * areas), registered files, O_DIRECT alignment and the block queue under a file. */
#include "ring-impl.h"

#include "rf-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#ifndef STATX_DIOALIGN
/* glibc/kernel headers older than 6.1: the fields replace __spare2 (offset 152). */
#define STATX_DIOALIGN 0x2000U
#define RF__STATX_NO_DIO_FIELDS 1
#endif

int rf__find_buf(struct rf_ring *r, const void *buf, size_t len, uint16_t *idx)
{
	const char *p = buf;
	if (r->arena) {
		if (p < r->arena || p >= r->arena + r->bufsz * r->nbufs)
			return -EINVAL;
		size_t i = (size_t)(p - r->arena) / r->bufsz;
		if (p + len > r->arena + (i + 1) * r->bufsz)
			return -EINVAL;
		*idx = (uint16_t)i;
		return 0;
	}
	for (unsigned i = 0; i < r->nmems; i++) {
		if (p >= r->mems[i].base && p + len <= r->mems[i].base + r->mems[i].len) {
			*idx = (uint16_t)i;
			return 0;
		}
	}
	return -EINVAL;
}

int rf_dio_align(int fd, const char *path, uint32_t *mem_align, uint32_t *off_align)
{
	struct statx sx;
	int ret;
	memset(&sx, 0, sizeof(sx));
	if (path)
		ret = statx(AT_FDCWD, path, 0, STATX_DIOALIGN, &sx);
	else
		ret = statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx);
	if (ret < 0) {
		ret = -errno;
		if (path)
			return rf__fail(ret, "rf_dio_align: statx of %s: %s", path, strerror(-ret));
		return rf__fail(ret, "rf_dio_align: statx of fd %d: %s", fd, strerror(-ret));
	}
	uint32_t ma = 0, oa = 0;
	if (sx.stx_mask & STATX_DIOALIGN) {
#ifdef RF__STATX_NO_DIO_FIELDS
		memcpy(&ma, (char *)&sx + 152, 4);
		memcpy(&oa, (char *)&sx + 156, 4);
#else
		ma = sx.stx_dio_mem_align;
		oa = sx.stx_dio_offset_align;
#endif
	}
	*mem_align = ma ? ma : 4096;
	*off_align = oa ? oa : 4096;
	return 0;
}

int rf_blk_queue_attr(int fd, const char *name, char *out, size_t len, char *where,
		      size_t wlen)
{
	static const char *const fmt[2] = { "/sys/dev/block/%u:%u/queue/%s",
					    "/sys/dev/block/%u:%u/../queue/%s" };
	char p[160];
	struct stat st;
	dev_t dev;

	if (fstat(fd, &st) < 0)
		return rf__fail(-EBADF, "rf_blk_queue_attr: fd %d: %s", fd, strerror(errno));
	dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
	if (!major(dev) || !name || !out || !len)
		return -ENOENT;     /* an anonymous device: tmpfs, overlay, NFS */
	for (unsigned i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), fmt[i], major(dev), minor(dev), name);
		if (where && wlen)
			snprintf(where, wlen, "%s", p);
		FILE *f = fopen(p, "re");
		if (!f)
			continue;
		int ok = fgets(out, (int)(len > INT_MAX ? INT_MAX : len), f) != NULL;
		fclose(f);
		if (ok) {
			out[strcspn(out, "\n")] = 0;
			return 0;
		}
	}
	return -ENOENT;
}

int rf_ring_register_buffers(struct rf_ring *r, unsigned nbufs, size_t bufsz, size_t align)
{
	RF__OWNER_OR_RETURN(r, "rf_ring_register_buffers");
	if (r->arena || r->nmems)
		return rf__fail(-EEXIST, "rf_ring_register_buffers: the ring has registered %s "
				"already", r->arena ? "buffers" : "memory areas");
	if (!align)
		align = 4096;
	if (align < 512 || (align & (align - 1)))
		return rf__fail(-EINVAL, "rf_ring_register_buffers: align = %zu, expected a power "
				"of two >= 512", align);
	if (!nbufs || nbufs > 16384)
		return rf__fail(-EINVAL, "rf_ring_register_buffers: nbufs = %u, expected 1 to "
				"16384", nbufs);
	if (!bufsz || bufsz > (1ull << 30))
		return rf__fail(-EINVAL, "rf_ring_register_buffers: bufsz = %zu, expected 1 byte "
				"to 1 GiB", bufsz);
	bufsz = (bufsz + align - 1) & ~(align - 1);
	if (bufsz > (1ull << 30))
		return rf__fail(-EINVAL, "rf_ring_register_buffers: bufsz rounded up to align "
				"%zu is %zu, expected at most 1 GiB", align, bufsz);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t total = bufsz * nbufs;
	size_t map_len = total + (align > page ? align : 0);
	void *m = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct iovec *iov = m != MAP_FAILED ? malloc(nbufs * sizeof(*iov)) : NULL;
	if (!iov) {
		if (m != MAP_FAILED)
			munmap(m, map_len);
		return rf__fail(-ENOMEM, "rf_ring_register_buffers: no memory for %u buffers of "
				"%zu bytes", nbufs, bufsz);
	}
	char *base = (char *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
	for (unsigned i = 0; i < nbufs; i++) {
		iov[i].iov_base = base + (size_t)i * bufsz;
		iov[i].iov_len = bufsz;
	}
	int ret = io_uring_register_buffers(&r->ring, iov, nbufs);
	free(iov);
	if (ret < 0) {
		munmap(m, map_len);
		return rf__fail(ret, "rf_ring_register_buffers: the kernel refused %u buffers of "
				"%zu bytes: %s", nbufs, bufsz, strerror(-ret));
	}
	r->arena_map = m;
	r->arena_map_len = map_len;
	r->arena = base;
	r->bufsz = bufsz;
	r->nbufs = nbufs;
	return 0;
}

void *rf_ring_buffer(struct rf_ring *r, unsigned i)
{
	if (!r->arena || i >= r->nbufs)
		return NULL;
	return r->arena + (size_t)i * r->bufsz;
}

size_t rf_ring_buffer_size(const struct rf_ring *r)
{
	return r->bufsz;
}

unsigned rf_ring_buffer_count(const struct rf_ring *r)
{
	return r->nbufs;
}

/* Register r->mems[0..n) as the ring's fixed buffers, replacing any earlier set.
 * Queued SQEs are submitted first: their buffer indices refer to the old table (the
 * kernel resolves them at submission and keeps those buffers alive while in use). */
static int rf__register_mems(struct rf_ring *r, unsigned n, int had)
{
	struct iovec *iov;
	int ret;

	if (had) {
		if (io_uring_sq_ready(&r->ring)) {
			ret = io_uring_submit(&r->ring);
			r->st.enters++;
			if (ret < 0)
				return ret;
			rf__count_submitted(r);
		}
		ret = io_uring_unregister_buffers(&r->ring);
		if (ret < 0 && ret != -ENXIO)
			return ret;
	}
	if (!n)
		return 0;
	iov = malloc(n * sizeof(*iov));
	if (!iov)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		iov[i].iov_base = r->mems[i].base;
		iov[i].iov_len = r->mems[i].len;
	}
	ret = io_uring_register_buffers(&r->ring, iov, n);
	free(iov);
	return ret;
}

int rf_ring_register_memory(struct rf_ring *r, void *const *bufs, const size_t *lens, unsigned n)
{
	RF__OWNER_OR_RETURN(r, "rf_ring_register_memory");
	if (r->arena)
		return rf__fail(-EEXIST, "rf_ring_register_memory: the ring has its own buffers "
				"(rf_ring_register_buffers); expected none");
	if (!n || r->nmems + n > 16384)
		return rf__fail(-EINVAL, "rf_ring_register_memory: n = %u with %u areas "
				"registered, expected 1 to %u more", n, r->nmems, 16384 - r->nmems);
	if (!bufs || !lens)
		return rf__fail(-EINVAL, "rf_ring_register_memory: %s is NULL with n = %u",
				!bufs ? "bufs" : "lens", n);
	struct rf__mem *mems = realloc(r->mems, (r->nmems + n) * sizeof(*mems));
	if (!mems)
		return rf__fail(-ENOMEM, "rf_ring_register_memory: no memory for %u areas", n);
	r->mems = mems;
	for (unsigned i = 0; i < n; i++) {
		mems[r->nmems + i].base = bufs[i];
		mems[r->nmems + i].len = lens[i];
	}
	int ret = rf__register_mems(r, r->nmems + n, r->nmems > 0);
	if (ret < 0) {
		/* put the previous set back; new areas are not registered */
		if (r->nmems)
			rf__register_mems(r, r->nmems, 0);
		return rf__fail(ret, "rf_ring_register_memory: the kernel refused %u areas: %s",
				r->nmems + n, strerror(-ret));
	}
	r->nmems += n;
	return 0;
}

int rf_ring_unregister_memory(struct rf_ring *r, const void *base)
{
	RF__OWNER_OR_RETURN(r, "rf_ring_unregister_memory");
	unsigned i;

	for (i = 0; i < r->nmems; i++)
		if (r->mems[i].base == base)
			break;
	if (i == r->nmems)
		return rf__fail(-ENOENT, "rf_ring_unregister_memory: base %p is the start of no "
				"registered area", base);
	memmove(&r->mems[i], &r->mems[i + 1], (r->nmems - i - 1) * sizeof(r->mems[0]));
	r->nmems--;
	int ret = rf__register_mems(r, r->nmems, 1);
	return ret < 0 ? rf__fail(ret, "rf_ring_unregister_memory: registering the %u areas "
				  "left failed: %s", r->nmems, strerror(-ret)) : 0;
}

/* What the kernel would refuse in a table of n files (fds, or empty slots if NULL),
 * checked while the registered table is still in place: the kernel takes a new one
 * only after the old one is unregistered, so a refusal found then would lose both.
 * A closed fd gets a message naming it; the rest (an io_uring fd, too many files,
 * memory) shows when a table replaces another: it is tried on a scratch ring first. */
static int rf__files_check(struct rf_ring *r, const char *fn, const int *fds, unsigned n)
{
	struct io_uring scratch;
	int ret;

	if (!n)
		return rf__fail(-EINVAL, "%s: n is 0, expected at least one slot", fn);
	for (unsigned i = 0; fds && i < n; i++)
		if (fds[i] != -1 && fcntl(fds[i], F_GETFD) < 0)
			return rf__fail(-EBADF, "%s: fds[%u] = %d is not an open file "
					"descriptor; expected one, or -1 for an empty slot",
					fn, i, fds[i]);
	if (!r->nfiles || io_uring_queue_init(1, &scratch, 0) < 0)
		return 0;
	ret = fds ? io_uring_register_files(&scratch, fds, n)
		  : io_uring_register_files_sparse(&scratch, n);
	io_uring_queue_exit(&scratch);
	if (ret < 0)
		return rf__fail(ret, "%s: the kernel refuses this table of %u files: %s (an "
				"io_uring fd among fds?); the registered table is unchanged",
				fn, n, strerror(-ret));
	return 0;
}

/* Replace the registered file table by n files: fds, or n empty slots for the kernel
 * to fill (fds NULL). The copy (-1 for an empty slot: never faultable) is kept for
 * fault injection's file type check. A refused table leaves the old one registered. */
static int rf__files_install(struct rf_ring *r, const char *fn, const int *fds, unsigned n)
{
	int ret = rf__files_check(r, fn, fds, n);
	if (ret < 0)
		return ret;
	int *copy = malloc(n * sizeof(*copy));
	if (!copy)
		return rf__fail(-ENOMEM, "%s: no memory for a table of %u files", fn, n);
	for (unsigned i = 0; i < n; i++)
		copy[i] = fds ? fds[i] : -1;
	int had = r->nfiles > 0;
	if (had) {
		io_uring_unregister_files(&r->ring);
		free(r->files);
		r->files = NULL;
		r->nfiles = 0;
	}
	ret = fds ? io_uring_register_files(&r->ring, fds, n)
		  : io_uring_register_files_sparse(&r->ring, n);
	if (ret < 0) {
		free(copy);
		return rf__fail(ret, "%s: the kernel refused a table of %u files: %s%s", fn, n,
				strerror(-ret), had ? " (the previous table is unregistered)" : "");
	}
	r->files = copy;
	r->nfiles = n;
	return 0;
}

int rf_ring_register_files(struct rf_ring *r, const int *fds, unsigned n)
{
	RF__OWNER_OR_RETURN(r, "rf_ring_register_files");
	if (!fds)
		return rf__fail(-EINVAL, "rf_ring_register_files: fds is NULL, expected an array "
				"of %u descriptors (rf_ring_register_files_sparse for empty "
				"slots)", n);
	return rf__files_install(r, "rf_ring_register_files", fds, n);
}

int rf_ring_register_files_sparse(struct rf_ring *r, unsigned n)
{
	RF__OWNER_OR_RETURN(r, "rf_ring_register_files_sparse");
	return rf__files_install(r, "rf_ring_register_files_sparse", NULL, n);
}
