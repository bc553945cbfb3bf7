/* loader-source.c -- where the loader takes records from: label files and in-memory
 * payloads copied at create, or the payload file -- or each shard of a set of
 * WebDataset shards (ds->parts) -- reopened (O_DIRECT) for ring reads. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader-impl.h"

/* size bytes of the file fd (path, for messages) into m. */
static int rf__load_fd(int fd, const char *path, uint8_t *m, uint64_t size)
{
	uint64_t off = 0;

	while (off < size) {
		ssize_t n = pread(fd, m + off, size - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? -errno : -EIO;
			return rf__fail(e, "%s: offset %" PRIu64 ": %s (expected %" PRIu64 " bytes)",
					path, off, n < 0 ? strerror(errno) : "unexpected end of file",
					size);
		}
		off += (uint64_t)n;
	}
	return 0;
}

/* The whole file of src into a new buffer *out; the payload of several shards (parts
 * non-NULL) each at its base, the gaps between them zero. */
static int rf__load_file(const struct rf_dataset_src *src, const struct rf_dataset_part *parts,
			 unsigned nparts, uint8_t **out)
{
	uint64_t sz = src->size ? src->size : 1;
	uint8_t *m = parts ? calloc(sz, 1) : malloc(sz);
	int e = 0;

	if (!m)
		return rf__fail(-ENOMEM, "%s: cannot allocate %" PRIu64 " bytes for it", src->path,
				src->size);
	if (src->remote)
		e = rf__src_pread(src, m, src->size, 0);
	else if (!parts)
		e = rf__load_fd(src->fd, src->path, m, src->size);
	for (unsigned k = 0; parts && k < nparts && !e; k++)
		e = rf__load_fd(parts[k].fd, parts[k].path, m + parts[k].base, parts[k].size);
	if (e < 0) {
		free(m);
		return e;
	}
	*out = m;
	return 0;
}

/* open() the file (path, open as fd0) through /proc/self/fd (else by path) with *fl,
 * dropping O_DIRECT where the filesystem refuses it (tmpfs). */
static int rf__reopen_try(const char *path, int fd0, int *fl, struct stat *got, int *not_reg)
{
	char p[64];
	int fd = -EBADF, i;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd0);
	for (i = 0; i < 2; i++) {
		fd = rf__open_regular(p, *fl, 0, got, not_reg);
		if (fd < 0 && !*not_reg && fd != -EINVAL)
			fd = rf__open_regular(path, *fl, 0, got, not_reg); /* no /proc */
		if (fd == -EINVAL && !*not_reg && (*fl & O_DIRECT)) {
			*fl &= ~O_DIRECT;
			continue;
		}
		break;
	}
	return fd;
}

/* Reopen the very file the dataset validated (path, open as fd0; even if renamed
 * since) with *fl (O_DIRECT dropped from *fl where the filesystem refuses it). Never
 * blocks (a FIFO put at the path since), and refuses anything but that same regular
 * file. Returns the fd or -errno with rf_last_error(). */
static int rf__reopen(const char *path, int fd0, int *fl)
{
	struct stat want, got;
	int fd, not_reg = 0;

	if (fd0 < 0 || fstat(fd0, &want) < 0)
		return rf__fail(-EBADF, "%s: the dataset holds no open file to read", path);
	fd = rf__reopen_try(path, fd0, fl, &got, &not_reg);
	if (fd < 0 && not_reg)
		return rf__fail(fd, "%s: is now %s, not a regular file: expected the file the "
				"dataset was opened from", path, rf__ftype(got.st_mode));
	if (fd < 0)
		return rf__fail(fd, "%s: cannot reopen for reading: %s", path, strerror(-fd));
	if (got.st_dev != want.st_dev || got.st_ino != want.st_ino) {
		close(fd);
		return rf__fail(-ESTALE, "%s: is another file than the one the dataset was opened "
				"from (replaced since?)", path);
	}
	return fd;
}

/* Labels in a separate file are small: keep them in memory. */
static int rf__load_labels(struct rf_loader *l)
{
	const struct rf_dataset *ds = l->ds;
	int ret;

	if (!l->labels || ds->label_src == RF_DS_SRC_PAYLOAD)
		return 0;
	l->lmem = ds->src[ds->label_src].mem;
	if (l->lmem)
		return 0;
	ret = rf__load_file(&ds->src[ds->label_src], NULL, 0, &l->lmem_own);
	if (ret < 0)
		return ret;
	l->lmem = l->lmem_own;
	return 0;
}

/* Records on disk or behind a URL: read one by one (REC) for large records, records
 * of any length and for a uniform shuffle; by chunks shuffled in windows (SPAN) when windowed order is asked,
 * or when there is no shuffle (the file's order: the chunks read in sequence). */
static int rf__disk_mode(const struct rf_loader *l, const struct rf_dataset_src *s0)
{
	if (rf_dataset_variable(l->ds) || s0->stride >= l->o.large_record)
		return RF__REC;
	return l->o.no_shuffle || l->o.order == RF_LOADER_ORDER_WINDOWED ? RF__SPAN : RF__REC;
}

/* The queue depth of the block device fd's file is on (its request queue's
 * nr_requests: rf_blk_queue_attr), or 0 where there is none to read (a tmpfs, an
 * overlay, NFS). Reads past it gain nothing: they
 * wait in the kernel for a tag inside the io_uring_enter that submits them -- the
 * reactor's -- and go to the device one by one as tags free, a doorbell each. Measured
 * on a virtio disk of 256 (rf-bench loader, 784-byte records in the uniform order, 8
 * MiB = 1280 reads in flight against ~280): the same 106-113 K records/s, 2.2-4.4 CPU
 * s/GB against 1.95-2.02. */
static unsigned rf__dev_depth(int fd)
{
	char v[32], *end;
	unsigned long d;

	if (rf_blk_queue_attr(fd, "nr_requests", v, sizeof(v), NULL, 0) < 0)
		return 0;
	d = strtoul(v, &end, 10);
	return end != v && d >= 1 && d <= (1ul << 20) ? (unsigned)d : 0;
}

/* Reopen one payload file (path, open as fd0) into *fd for ring reads; its O_DIRECT
 * alignment widens l->align, l->direct stays 1 only while every file has it, and the
 * reads in flight stay within the shallowest device queue of the files (rq_nmax). */
static int rf__open_one(struct rf_loader *l, const char *path, int fd0, int *fd)
{
	uint32_t ma = 0, oa = 0;
	int fl = O_RDONLY | (l->o.buffered ? 0 : O_DIRECT);
	int ret = rf__reopen(path, fd0, &fl);
	unsigned depth;

	if (ret < 0)
		return ret;
	*fd = ret;
	if ((depth = rf__dev_depth(*fd)) && (!l->rq_nmax || depth < l->rq_nmax))
		l->rq_nmax = depth;
	l->direct &= !!(fl & O_DIRECT);
	if ((fl & O_DIRECT) && rf_dio_align(*fd, path, &ma, &oa) == 0) {
		if (oa > l->align)
			l->align = oa;
		if (ma > l->align)
			l->align = ma;
	}
	return 0;
}

/* Reopen the payload file (or each shard) for ring reads, find the O_DIRECT alignment,
 * pick the mode. A read of a shard is aligned in that shard's file (loader-read.c), so
 * shards on devices of different alignments take the widest. */
static int rf__open_payload_file(struct rf_loader *l)
{
	const struct rf_dataset *ds = l->ds;
	const struct rf_dataset_src *s0 = &ds->src[RF_DS_SRC_PAYLOAD];
	int ret;

	l->direct = 1;
	l->align = 4096;
	if (!ds->nparts) {
		ret = rf__open_one(l, s0->path, s0->fd, &l->fd);
	} else if (!rf_dataset_variable(ds)) {
		ret = rf__fail(-EINVAL, "%s: shards of fixed-size records: expected records of "
			       "any length (a set of WebDataset shards)", s0->path);
	} else if (!(l->pfd = malloc(ds->nparts * sizeof(*l->pfd)))) {
		ret = rf__fail(-ENOMEM, "%s: out of memory for %u shards", s0->path, ds->nparts);
	} else {
		ret = 0;
		for (l->npfd = 0; l->npfd < ds->nparts && !ret; l->npfd++) {
			const struct rf_dataset_part *p = &ds->parts[l->npfd];
			l->pfd[l->npfd] = -1;
			ret = rf__open_one(l, p->path, p->fd, &l->pfd[l->npfd]);
		}
	}
	if (ret < 0)
		return ret;
	l->mode = rf__disk_mode(l, s0);
	return 0;
}

void rf__close_sources(struct rf_loader *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	for (unsigned k = 0; l->pfd && k < l->npfd; k++)
		if (l->pfd[k] >= 0)
			close(l->pfd[k]);
	free(l->pfd);
	l->pfd = NULL;
	l->npfd = 0;
}

int rf__open_sources(struct rf_loader *l)
{
	const struct rf_dataset *ds = l->ds;
	const struct rf_dataset_src *s0 = &ds->src[RF_DS_SRC_PAYLOAD];
	int ret = rf__load_labels(l);

	if (ret < 0)
		return ret;
	l->pmem = s0->mem;
	if (!l->pmem && l->o.in_memory) {
		ret = rf__load_file(s0, ds->parts, ds->nparts, &l->pmem_own);
		if (ret < 0)
			return ret;
		l->pmem = l->pmem_own;
	}
	if (l->labels && ds->label_src == RF_DS_SRC_PAYLOAD)
		l->lmem = l->pmem;
	if (!l->pmem && s0->remote) {
		/* record spans by Range requests: no O_DIRECT alignment to honour, but the
		 * plan's 4 KiB units keep the requests few and the .rfrec's padding keeps
		 * them inside the file */
		ret = rf__http_create(&l->http, l->ring, s0->path, l->o.http_conns);
		if (ret < 0)
			return ret;
		rf__http_expect_size(l->http, s0->size);
		rf__http_expect_validator(l->http, s0->validator);
		rf__http_set_timeout(l->http, (uint64_t)l->o.http_timeout_ms * 1000000ull);
		l->align = 4096;
		l->o.no_register = 1; /* nothing reads into the units through fixed buffers */
		l->mode = rf__disk_mode(l, s0);
		return 0;
	}
	if (!l->pmem)
		return rf__open_payload_file(l);
	l->mode = RF__MEM;
	return 0;
}
