/* loader-source.c -- where the loader takes records from: label files and in-memory
 * payloads copied at create, or the payload file reopened (O_DIRECT) for ring reads. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader-impl.h"

/* The whole file of src into a new buffer *out. */
static int rf__load_file(const struct rf_dataset_src *src, uint8_t **out)
{
	uint8_t *m = malloc(src->size ? src->size : 1);
	uint64_t off = 0;

	if (!m)
		return rf__fail(-ENOMEM, "%s: cannot allocate %" PRIu64 " bytes for it", src->path,
				src->size);
	if (src->remote) {
		int e = rf__src_pread(src, m, src->size, 0);
		if (e < 0) {
			free(m);
			return e;
		}
		*out = m;
		return 0;
	}
	while (off < src->size) {
		ssize_t n = pread(src->fd, m + off, src->size - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? -errno : -EIO;
			rf__fail(e, "%s: offset %" PRIu64 ": %s (expected %" PRIu64 " bytes)",
				 src->path, off, n < 0 ? strerror(errno) : "unexpected end of file",
				 src->size);
			free(m);
			return e;
		}
		off += (uint64_t)n;
	}
	*out = m;
	return 0;
}

/* open() the file through /proc/self/fd (else by path) with *fl, dropping O_DIRECT
 * where the filesystem refuses it (tmpfs). */
static int rf__reopen_try(const struct rf_dataset_src *s0, int *fl, struct stat *got,
			  int *not_reg)
{
	char p[64];
	int fd = -EBADF, i;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", s0->fd);
	for (i = 0; i < 2; i++) {
		fd = rf__open_regular(p, *fl, 0, got, not_reg);
		if (fd < 0 && !*not_reg && fd != -EINVAL)
			fd = rf__open_regular(s0->path, *fl, 0, got, not_reg); /* no /proc */
		if (fd == -EINVAL && !*not_reg && (*fl & O_DIRECT)) {
			*fl &= ~O_DIRECT;
			continue;
		}
		break;
	}
	return fd;
}

/* Reopen the very file the dataset validated (even if renamed since) with *fl (O_DIRECT
 * dropped from *fl where the filesystem refuses it). Never blocks (a FIFO put at the
 * path since), and refuses anything but that same regular file. Returns the fd or
 * -errno with rf_last_error(). */
static int rf__reopen(const struct rf_dataset_src *s0, int *fl)
{
	struct stat want, got;
	int fd, not_reg = 0;

	if (s0->fd < 0 || fstat(s0->fd, &want) < 0)
		return rf__fail(-EBADF, "%s: the dataset holds no open file to read", s0->path);
	fd = rf__reopen_try(s0, fl, &got, &not_reg);
	if (fd < 0 && not_reg)
		return rf__fail(fd, "%s: is now %s, not a regular file: expected the file the "
				"dataset was opened from", s0->path, rf__ftype(got.st_mode));
	if (fd < 0)
		return rf__fail(fd, "%s: cannot reopen for reading: %s", s0->path, strerror(-fd));
	if (got.st_dev != want.st_dev || got.st_ino != want.st_ino) {
		close(fd);
		return rf__fail(-ESTALE, "%s: is another file than the one the dataset was opened "
				"from (replaced since?)", s0->path);
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
	ret = rf__load_file(&ds->src[ds->label_src], &l->lmem_own);
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

/* Reopen the payload file for ring reads, find its O_DIRECT alignment, pick the mode. */
static int rf__open_payload_file(struct rf_loader *l)
{
	const struct rf_dataset_src *s0 = &l->ds->src[RF_DS_SRC_PAYLOAD];
	uint32_t ma = 0, oa = 0;
	int fl = O_RDONLY | (l->o.buffered ? 0 : O_DIRECT);
	int ret = rf__reopen(s0, &fl);

	if (ret < 0)
		return ret;
	l->fd = ret;
	l->direct = !!(fl & O_DIRECT);
	l->align = 4096;
	if (l->direct && rf_dio_align(l->fd, s0->path, &ma, &oa) == 0) {
		if (oa > l->align)
			l->align = oa;
		if (ma > l->align)
			l->align = ma;
	}
	l->mode = rf__disk_mode(l, s0);
	return 0;
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
		ret = rf__load_file(s0, &l->pmem_own);
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
