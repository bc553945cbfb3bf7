/* ring/pump.c -- the transfer pump of ring-io.h: segments cut into chunks, a fixed
 * number of chunk requests in flight, the first failure (lowest offset) kept.
 *
 * The state lives on the heap and is freed only when no chunk is in flight, so a
 * blocking wait that fails leaks it rather than freeing it under a live request. */
#include "ring-io.h"

#include "rf-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct rf__xfer;

struct rf__chunk {
	struct rf__xfer *x;
	uint64_t off, len;
	int busy;
};

struct rf__xfer {
	struct rf_ring *ring;
	int fd;
	enum rf_xfer_dir dir;
	unsigned flags;       /* RF_IO_* for every chunk */
	uint64_t chunk;
	unsigned depth;
	struct rf_io_seg *segs;
	unsigned nsegs;
	unsigned seg;         /* next chunk: segs[seg] from pos */
	uint64_t pos;
	unsigned inflight;
	int over;             /* the result is final (blocking mode reads it) */
	struct rf_xfer_result res;
	rf_xfer_cb cb;        /* NULL: blocking mode, rf_xfer frees */
	void *data;
	struct rf__chunk slot[];
};

static void rf__xfer_pump(struct rf__xfer *x);

/* The transfer is over: report it, and free it unless rf_xfer waits on it. */
static void rf__xfer_finish(struct rf__xfer *x)
{
	x->over = 1;
	if (!x->cb)
		return;
	x->cb(x->data, &x->res);
	free(x->segs);
	free(x);
}

static void rf__xfer_note_error(struct rf__xfer *x, uint64_t off, int err, int64_t res)
{
	if (x->res.err && off >= x->res.err_off)
		return;
	x->res.err = err;
	x->res.err_off = off;
	x->res.err_res = res;
}

static int rf__xfer_idle(const struct rf__xfer *x)
{
	return x->inflight == 0 && (x->res.err || x->seg >= x->nsegs);
}

static void rf__xfer_chunk_cb(void *data, int64_t res)
{
	struct rf__chunk *c = data;
	struct rf__xfer *x = c->x;

	c->busy = 0;
	x->inflight--;
	if (res >= 0 && (uint64_t)res == c->len)
		x->res.bytes += c->len;
	else /* a short count is final here: end of file, or a write with no progress */
		rf__xfer_note_error(x, c->off, res < 0 ? (int)res
					       : x->dir == RF_XFER_WRITE ? -EIO : -ENODATA, res);
	rf__xfer_pump(x);
	if (rf__xfer_idle(x))
		rf__xfer_finish(x);
}

static void rf__xfer_skip_empty(struct rf__xfer *x)
{
	while (x->seg < x->nsegs && x->pos >= x->segs[x->seg].len) {
		x->seg++;
		x->pos = 0;
	}
}

static struct rf__chunk *rf__xfer_free_slot(struct rf__xfer *x)
{
	for (unsigned i = 0; i < x->depth; i++)
		if (!x->slot[i].busy)
			return &x->slot[i];
	return NULL;
}

/* Submit the next chunk into c. 0 or the submission's -errno. */
static int rf__xfer_submit(struct rf__xfer *x, struct rf__chunk *c)
{
	const struct rf_io_seg *s = &x->segs[x->seg];
	uint64_t len = s->len - x->pos;
	if (len > x->chunk)
		len = x->chunk;
	c->x = x;
	c->off = s->off + x->pos;
	c->len = len;
	char *buf = (char *)s->buf + x->pos;
	int ret = x->dir == RF_XFER_WRITE ?
		rf_ring_write(x->ring, x->fd, buf, len, c->off, x->flags, rf__xfer_chunk_cb, c, NULL) :
		rf_ring_read(x->ring, x->fd, buf, len, c->off, x->flags, rf__xfer_chunk_cb, c, NULL);
	if (ret < 0)
		return ret;
	c->busy = 1;
	x->inflight++;
	x->pos += len;
	rf__xfer_skip_empty(x);
	return 0;
}

/* Keep depth chunks in flight while there is something left and nothing failed. */
static void rf__xfer_pump(struct rf__xfer *x)
{
	rf__xfer_skip_empty(x);
	while (!x->res.err && x->inflight < x->depth && x->seg < x->nsegs) {
		struct rf__chunk *c = rf__xfer_free_slot(x);
		int ret = rf__xfer_submit(x, c);
		if (ret < 0)
			rf__xfer_note_error(x, c->off, ret, ret);
	}
}

/* Nothing to transfer: a zero timeout delivers the callback from the ring. */
static void rf__xfer_empty_cb(void *data, int64_t res)
{
	(void)res;
	rf__xfer_finish(data);
}

static int rf__xfer_check(const char *fn, struct rf_ring *r, int fd, enum rf_xfer_dir dir,
			  const struct rf_io_seg *segs, unsigned nsegs,
			  const struct rf_xfer_opts *o)
{
	struct stat st;

	if (!r)
		return rf__fail(-EINVAL, "%s: r is NULL, expected a ring", fn);
	if (dir != RF_XFER_READ && dir != RF_XFER_WRITE)
		return rf__fail(-EINVAL, "%s: dir = %d, expected RF_XFER_READ or RF_XFER_WRITE", fn,
				(int)dir);
	if (nsegs && !segs)
		return rf__fail(-EINVAL, "%s: segs is NULL with nsegs = %u, expected an array of "
				"%u segments", fn, nsegs, nsegs);
	if (o && o->depth > RF_XFER_DEPTH_MAX)
		return rf__fail(-EINVAL, "%s: opts->depth = %u, expected at most RF_XFER_DEPTH_MAX "
				"(%u)", fn, o->depth, RF_XFER_DEPTH_MAX);
	if (o && (o->flags & ~(unsigned)(RF_IO_FIXED_FILE | RF_IO_FIXED_BUF)))
		return rf__fail(-EINVAL, "%s: opts->flags = 0x%x, expected RF_IO_FIXED_FILE and "
				"RF_IO_FIXED_BUF only", fn, o->flags);
	/* chunks go at offsets: a socket or a pipe would take the first and refuse the
	 * next (-ESPIPE), its bytes already consumed */
	if (!(o && (o->flags & RF_IO_FIXED_FILE)) && fstat(fd, &st) == 0 &&
	    (S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode)))
		return rf__fail(-ESPIPE, "%s: fd %d is %s: the pump moves a file's segments at "
				"their offsets (rf_ring_send/rf_ring_recv move a stream's)", fn,
				fd, rf__ftype(st.st_mode));
	for (unsigned i = 0; i < nsegs; i++) {
		if (segs[i].len && !segs[i].buf)
			return rf__fail(-EINVAL, "%s: segs[%u].buf is NULL with len %llu, expected "
					"a buffer", fn, i, (unsigned long long)segs[i].len);
		/* a segment's end past 2^64 in the file or in memory: its chunks' offsets
		 * would wrap round to the start */
		if (segs[i].off + segs[i].len < segs[i].off ||
		    (uintptr_t)segs[i].buf + segs[i].len < (uintptr_t)segs[i].buf)
			return rf__fail(-EINVAL, "%s: segs[%u]: %llu bytes at offset %llu (buffer "
					"%p): its end is past 2^64", fn, i,
					(unsigned long long)segs[i].len,
					(unsigned long long)segs[i].off, segs[i].buf);
	}
	return 0;
}

/* ret for fn, with the message of the ring call that failed under it. */
static int rf__xfer_fail_in(const char *fn, int ret)
{
	return rf__fail_under(ret, "%s", fn);
}

static struct rf__xfer *rf__xfer_new(struct rf_ring *r, int fd, enum rf_xfer_dir dir,
				     const struct rf_io_seg *segs, unsigned nsegs,
				     const struct rf_xfer_opts *o)
{
	unsigned depth = o && o->depth ? o->depth : RF_XFER_DEPTH;
	struct rf__xfer *x = calloc(1, sizeof(*x) + depth * sizeof(x->slot[0]));
	if (!x)
		return NULL;
	x->segs = malloc((nsegs ? nsegs : 1) * sizeof(*segs));
	if (!x->segs) {
		free(x);
		return NULL;
	}
	if (nsegs)
		memcpy(x->segs, segs, nsegs * sizeof(*segs));
	x->ring = r;
	x->fd = fd;
	x->dir = dir;
	x->flags = o ? o->flags : 0;
	x->chunk = o && o->chunk ? o->chunk : RF_XFER_CHUNK;
	x->depth = depth;
	x->nsegs = nsegs;
	return x;
}

static void rf__xfer_free(struct rf__xfer *x)
{
	free(x->segs);
	free(x);
}

/* Start x: 0 with the transfer under way (or its empty completion queued), or -errno
 * with nothing in flight (x is then the caller's to free). */
static int rf__xfer_begin(struct rf__xfer *x)
{
	rf__xfer_pump(x);
	if (x->inflight)
		return 0;
	if (x->res.err)
		return x->res.err;
	return rf_ring_timeout(x->ring, 0, rf__xfer_empty_cb, x, NULL);
}

int rf_xfer_start(struct rf_ring *r, int fd, enum rf_xfer_dir dir, const struct rf_io_seg *segs,
		  unsigned nsegs, const struct rf_xfer_opts *opts, rf_xfer_cb cb, void *data)
{
	int ret = rf__xfer_check("rf_xfer_start", r, fd, dir, segs, nsegs, opts);
	if (ret < 0)
		return ret;
	if (!cb)
		return rf__fail(-EINVAL, "rf_xfer_start: cb is NULL, expected the callback that "
				"gets the result");
	struct rf__xfer *x = rf__xfer_new(r, fd, dir, segs, nsegs, opts);
	if (!x)
		return rf__fail(-ENOMEM, "rf_xfer_start: no memory for the transfer");
	x->cb = cb;
	x->data = data;
	ret = rf__xfer_begin(x);
	if (ret < 0) {
		rf__xfer_free(x);
		return rf__xfer_fail_in("rf_xfer_start", ret);
	}
	return 0;
}

static int rf__xfer_over(void *arg)
{
	return ((struct rf__xfer *)arg)->over;
}

static int rf__ready(void *arg)
{
	(void)arg;
	return 1;
}

/* The ring can be turned from here: not inside a callback or another rf_ring_run*.
 * rf_ring_run_until refuses those before looking at its predicate, so a predicate
 * that is already true makes a free probe. */
static int rf__can_wait(struct rf_ring *r, const char *fn)
{
	int ret = rf_ring_in_callback(r) ? -EDEADLK : rf_ring_run_until(r, rf__ready, NULL, 0);

	if (ret == -EPERM)      /* another thread's ring: said by the ring */
		return rf__fail_under(ret, "%s", fn);
	if (ret < 0)
		return rf__fail(-EDEADLK, "%s: called from inside a ring callback or rf_ring_run*: "
				"the ring cannot be turned from there", fn);
	return 0;
}

/* Turn the ring until x is over. 0, or the ring's error with x left in flight. */
static int rf__xfer_wait(struct rf__xfer *x)
{
	int ret = 0;
	for (int tries = 0; tries < 100; tries++) {
		ret = rf_ring_run_until(x->ring, rf__xfer_over, x, 0);
		if (ret == 0 || x->over)
			return 0;
	}
	return ret;
}

int rf_xfer(struct rf_ring *r, int fd, enum rf_xfer_dir dir, const struct rf_io_seg *segs,
	    unsigned nsegs, const struct rf_xfer_opts *opts, struct rf_xfer_result *res)
{
	struct rf_xfer_result none = { 0 };
	if (!res)
		res = &none;
	memset(res, 0, sizeof(*res));
	int ret = rf__xfer_check("rf_xfer", r, fd, dir, segs, nsegs, opts);
	if (ret < 0)
		return res->err = ret;
	if ((ret = rf__can_wait(r, "rf_xfer")) < 0)
		return res->err = ret;
	struct rf__xfer *x = rf__xfer_new(r, fd, dir, segs, nsegs, opts);
	if (!x)
		return res->err = rf__fail(-ENOMEM, "rf_xfer: no memory for the transfer");
	rf__xfer_pump(x);
	if (!x->inflight) { /* nothing to transfer, or the first chunk was refused */
		*res = x->res;
		rf__xfer_free(x);
		return res->err ? rf__xfer_fail_in("rf_xfer", res->err) : 0;
	}
	ret = rf__xfer_wait(x);
	if (ret < 0) /* x leaked: chunks still in flight */
		return res->err = rf__xfer_fail_in("rf_xfer", ret);
	*res = x->res;
	rf__xfer_free(x);
	if (res->err == -ENODATA)
		return rf__fail(res->err, "rf_xfer: fd %d ends early: the chunk at offset %llu "
				"got %lld bytes", fd, (unsigned long long)res->err_off,
				(long long)res->err_res);
	if (res->err == -EIO && res->err_res >= 0)
		return rf__fail(res->err, "rf_xfer: a write to fd %d at offset %llu made no "
				"progress (%lld bytes)", fd, (unsigned long long)res->err_off,
				(long long)res->err_res);
	if (res->err)
		return rf__fail(res->err, "rf_xfer: %s fd %d at offset %llu: %s",
				dir == RF_XFER_WRITE ? "writing" : "reading", fd,
				(unsigned long long)res->err_off, strerror(-res->err));
	return 0;
}

/* ---- fsync ------------------------------------------------------------------------ */

struct rf__fsync {
	int over;
	int res;
};

static void rf__fsync_cb(void *data, int64_t res)
{
	struct rf__fsync *f = data;
	f->res = (int)res;
	f->over = 1;
}

static int rf__fsync_over(void *arg)
{
	return ((struct rf__fsync *)arg)->over;
}

int rf_ring_fsync_wait(struct rf_ring *r, int fd, int datasync)
{
	int ok = rf__can_wait(r, "rf_ring_fsync_wait");
	if (ok < 0)
		return ok;
	struct rf__fsync *f = calloc(1, sizeof(*f));
	if (!f)
		return rf__fail(-ENOMEM, "rf_ring_fsync_wait: no memory");
	int ret = rf_ring_fsync(r, fd, 0, datasync, rf__fsync_cb, f, NULL);
	if (ret < 0) {
		free(f);
		return rf__xfer_fail_in("rf_ring_fsync_wait", ret);
	}
	for (int tries = 0; tries < 100; tries++) {
		ret = rf_ring_run_until(r, rf__fsync_over, f, 0);
		if (ret == 0 || f->over)
			break;
	}
	if (!f->over) /* f leaked: the fsync is still in flight */
		return rf__xfer_fail_in("rf_ring_fsync_wait", ret);
	ret = f->res;
	free(f);
	return ret < 0 ? rf__fail(ret, "rf_ring_fsync_wait: fsync of fd %d: %s", fd,
				  strerror(-ret)) : ret;
}
