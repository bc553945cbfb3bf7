/* ring/submit.c -- the request pool, SQE acquisition and the request API (read,
 * write, fsync, timeout, cancel). Requests are only queued into the SQ here; the
 * run loop (dispatch.c) submits them with its wait. A full SQ is flushed without
 * reaping (its CQEs go to the backlog when the kernel refuses) and the SQE retried. */
#include "ring-impl.h"

#include "rf-internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

static int rf__grow_pool(struct rf_ring *r)
{
	if (r->nslabs == r->slabs_cap) {
		unsigned cap = r->slabs_cap ? r->slabs_cap * 2 : 8;
		struct rf__req **s = realloc(r->slabs, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		r->slabs = s;
		r->slabs_cap = cap;
	}
	struct rf__req *slab = aligned_alloc(64, RF__SLAB_SIZE * sizeof(struct rf__req));
	if (!slab)
		return -ENOMEM;
	memset(slab, 0, RF__SLAB_SIZE * sizeof(struct rf__req));
	unsigned base = r->nslabs << RF__SLAB_SHIFT;
	r->slabs[r->nslabs++] = slab;
	for (unsigned i = RF__SLAB_SIZE; i-- > 0;) {
		slab[i].idx = base + i;
		slab[i].next_free = r->free_list;
		r->free_list = &slab[i];
	}
	return 0;
}

struct rf__req *rf__req_alloc(struct rf_ring *r, int counts)
{
	if (!r->free_list && rf__grow_pool(r) < 0)
		return NULL;
	struct rf__req *q = r->free_list;
	r->free_list = q->next_free;
	q->gen++;
	if (q->gen == 0)
		q->gen = 1;
	q->live = 1;
	q->flags = counts ? RF__RQ_COUNTS : 0;
	q->done = 0;
	q->nnotif = 0;
	q->retries = 0;
	q->deadline = 0;
	q->ext = NULL;
	r->nlive++;
	if (counts)
		r->npending++;
	return q;
}

void rf__req_free(struct rf_ring *r, struct rf__req *q)
{
	q->live = 0;
	r->nlive--;
	if (q->flags & RF__RQ_COUNTS)
		r->npending--;
	q->cb = NULL;
	q->data = NULL;
	q->u.owner = NULL;
	free(q->ext);
	q->ext = NULL;
	q->next_free = r->free_list;
	r->free_list = q;
}

struct rf__req *rf__req_by_id(struct rf_ring *r, rf_req_id id)
{
	uint32_t slot = (uint32_t)id;
	uint32_t gen = (uint32_t)(id >> 32);
	if (slot == 0 || slot - 1 >= (r->nslabs << RF__SLAB_SHIFT))
		return NULL;
	slot--;
	struct rf__req *q = &r->slabs[slot >> RF__SLAB_SHIFT][slot & (RF__SLAB_SIZE - 1)];
	if (!q->live || q->gen != gen)
		return NULL;
	return q;
}

rf_req_id rf__req_id(const struct rf__req *q)
{
	return ((uint64_t)q->gen << 32) | (uint64_t)(q->idx + 1);
}

static int rf__backlog_push(struct rf_ring *r, const struct io_uring_cqe *c)
{
	if (r->nbacklog == r->backlog_cap) {
		if (r->backlog_head) {
			memmove(r->backlog, r->backlog + r->backlog_head,
				(r->nbacklog - r->backlog_head) * sizeof(*r->backlog));
			r->nbacklog -= r->backlog_head;
			r->backlog_head = 0;
		}
		if (r->nbacklog == r->backlog_cap) {
			size_t cap = r->backlog_cap ? r->backlog_cap * 2 : 256;
			struct rf__cqe *b = realloc(r->backlog, cap * sizeof(*b));
			if (!b)
				return -ENOMEM;
			r->backlog = b;
			r->backlog_cap = cap;
		}
	}
	r->backlog[r->nbacklog++] = (struct rf__cqe){ c->user_data, c->res, c->flags };
	return 0;
}

/* The kernel refused a flush (-EBUSY/-EAGAIN: completions it cannot post). Move the
 * CQEs into the backlog -- callbacks must not run here -- and let the kernel post more. */
static int rf__stash_cqes(struct rf_ring *r)
{
	struct io_uring_cqe *c;
	int ret = io_uring_get_events(&r->ring);
	r->st.enters++;
	if (ret < 0 && ret != -EBUSY && ret != -EAGAIN && ret != -EINTR)
		return ret;
	while (!__io_uring_peek_cqe(&r->ring, &c, NULL) && c) {
		if (rf__backlog_push(r, c) < 0)
			return -ENOMEM;
		io_uring_cq_advance(&r->ring, 1);
	}
	return 0;
}

/* A free SQE, flushing the SQ when full. NULL with *err on failure. */
struct io_uring_sqe *rf__sqe(struct rf_ring *r, int *err)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
	int tries = 0;
	while (!sqe) {
		r->st.sq_full_flushes++;
		int ret = io_uring_submit(&r->ring);
		r->st.enters++;
		rf__count_submitted(r);
		if (ret == -EBUSY || ret == -EAGAIN) {
			ret = rf__stash_cqes(r);
			if (ret < 0 || ++tries > 1000) {
				*err = ret < 0 ? ret : -EBUSY;
				return NULL;
			}
		} else if (ret < 0 && ret != -EINTR) {
			*err = ret;
			return NULL;
		}
		if (r->setup_flags & IORING_SETUP_SQPOLL)
			io_uring_sqring_wait(&r->ring);
		sqe = io_uring_get_sqe(&r->ring);
	}
	return sqe;
}

int rf__sq_room(struct rf_ring *r, unsigned n)
{
	int tries = 0;
	while (io_uring_sq_space_left(&r->ring) < n) {
		int err = 0;
		r->st.sq_full_flushes++;
		int ret = io_uring_submit(&r->ring);
		r->st.enters++;
		rf__count_submitted(r);
		if (ret == -EBUSY || ret == -EAGAIN) {
			err = rf__stash_cqes(r);
			if (err < 0)
				return err;
			if (++tries > 1000)
				return -EBUSY;
		} else if (ret < 0 && ret != -EINTR) {
			return ret;
		}
		if (r->setup_flags & IORING_SETUP_SQPOLL)
			io_uring_sqring_wait(&r->ring);
	}
	return 0;
}

void rf__link_deadline(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	sqe->flags |= IOSQE_IO_LINK;
	struct io_uring_sqe *t = io_uring_get_sqe(&r->ring); /* room: rf__sq_room */
	q->u.ts.tv_sec = (long long)(q->deadline / 1000000000ull);
	q->u.ts.tv_nsec = (long long)(q->deadline % 1000000000ull);
	io_uring_prep_link_timeout(t, &q->u.ts, IORING_TIMEOUT_ABS);
	io_uring_sqe_set_data64(t, RF__TAG_IGNORE);
}

/* Prepare the SQE for the current piece of a read/write/fsync/timeout request. */
int rf__queue(struct rf_ring *r, struct rf__req *q)
{
	int err = 0;
	if ((q->flags & RF__RQ_DEADLINE) && (err = rf__sq_room(r, 2)) < 0)
		return err;
	struct io_uring_sqe *sqe = rf__sqe(r, &err);
	if (!sqe)
		return err;
	size_t rem = q->len - q->done;
	unsigned n = rem > RF__MAX_SQE_LEN ? RF__MAX_SQE_LEN : (unsigned)rem;
	uint64_t off = q->off == UINT64_MAX ? UINT64_MAX : q->off + q->done;
	char *p = q->buf + q->done;
	switch (q->op) {
	case RF__OP_READ:
		if (q->flags & RF_IO_FIXED_BUF)
			io_uring_prep_read_fixed(sqe, q->fd, p, n, off, q->buf_index);
		else
			io_uring_prep_read(sqe, q->fd, p, n, off);
		break;
	case RF__OP_WRITE:
		if (q->flags & RF_IO_FIXED_BUF)
			io_uring_prep_write_fixed(sqe, q->fd, p, n, off, q->buf_index);
		else
			io_uring_prep_write(sqe, q->fd, p, n, off);
		break;
	case RF__OP_FSYNC:
		io_uring_prep_fsync(sqe, q->fd, q->len ? IORING_FSYNC_DATASYNC : 0);
		break;
	case RF__OP_TIMEOUT:
		io_uring_prep_timeout(sqe, &q->u.ts, 0, 0);
		break;
	default:
		return -EINVAL;
	}
	if (q->flags & RF_IO_FIXED_FILE)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, rf__req_ud(q));
	if (q->flags & RF__RQ_DEADLINE)
		rf__link_deadline(r, q, sqe);
	return 0;
}

/* Queue a freshly filled request; on failure it is freed. Reports its id. */
int rf__queue_new(struct rf_ring *r, struct rf__req *q, rf_req_id *id)
{
	int ret = rf__queue(r, q);

	if (ret < 0) {
		rf__req_free(r, q);
		return ret;
	}
	if (id)
		*id = rf__req_id(q);
	return 0;
}

/* Queue a read (8 bytes into q->scratch) or a POLLIN poll for an internal eventfd
 * request. */
int rf__queue_efd(struct rf_ring *r, struct rf__req *q, int fd, int poll)
{
	int err = 0;
	struct io_uring_sqe *sqe = rf__sqe(r, &err);
	if (!sqe)
		return err;
	if (poll)
		io_uring_prep_poll_add(sqe, fd, POLLIN);
	else
		io_uring_prep_read(sqe, fd, &q->scratch, 8, 0);
	io_uring_sqe_set_data64(sqe, rf__req_ud(q));
	return 0;
}

void rf__cancel_req(struct rf_ring *r, struct rf__req *q)
{
	int err = 0;
	struct io_uring_sqe *sqe = rf__sqe(r, &err);
	if (!sqe)
		return; /* teardown's IORING_ASYNC_CANCEL_ANY still gets it */
	/* A request waiting out a retry backoff has its timeout in the kernel. */
	io_uring_prep_cancel64(sqe, rf__req_ud(q) | ((q->flags & RF__RQ_BACKOFF) ? RF__TAG_RETRY : 0), 0);
	io_uring_sqe_set_data64(sqe, RF__TAG_IGNORE);
}

int rf__shutdown(const char *fn)
{
	return rf__fail(-ESHUTDOWN, "%s: the ring is being destroyed: no new requests", fn);
}

int rf__no_req(const char *fn)
{
	return rf__fail(-ENOMEM, "%s: no memory for a request", fn);
}

int rf__not_queued(const char *fn, int ret)
{
	return rf__fail(ret, "%s: cannot queue the request (the SQ could not be flushed): %s", fn,
			strerror(-ret));
}

int rf__rw(const char *fn, struct rf_ring *r, int op, int fd, void *buf, size_t len,
	   uint64_t off, unsigned flags, uint64_t deadline, rf_io_cb cb, void *data, rf_req_id *id)
{
	if (r->destroying)
		return rf__shutdown(fn);
	uint16_t bi = 0;
	if (flags & RF_IO_FIXED_BUF) {
		int ret = rf__find_buf(r, buf, len, &bi);
		if (ret < 0)
			return rf__fail(ret, "%s: RF_IO_FIXED_BUF: buf %p + %zu bytes lies in no "
					"single registered buffer", fn, buf, len);
	}
	struct rf__req *q = rf__req_alloc(r, 1);
	if (!q)
		return rf__no_req(fn);
	q->op = (uint8_t)op;
	q->fd = fd;
	q->buf = buf;
	q->len = len;
	q->off = off;
	q->buf_index = bi;
	q->flags |= flags & (RF_IO_FIXED_FILE | RF_IO_FIXED_BUF | RF_IO_NO_RETRY_SHORT);
	q->cb = cb;
	q->data = data;
	if (deadline) {
		q->deadline = deadline;
		q->flags |= RF__RQ_DEADLINE;
	}
	if (r->fault.active && ((op == RF__OP_READ && (r->fault.ops & RF__FAULT_READ)) ||
				(op == RF__OP_WRITE && (r->fault.ops & RF__FAULT_WRITE))))
		rf__mark_faultable(r, q);
	int ret = rf__queue_new(r, q, id);
	return ret < 0 ? rf__not_queued(fn, ret) : 0;
}

int rf_ring_read(struct rf_ring *r, int fd, void *buf, size_t len, uint64_t off,
		 unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	return rf__rw("rf_ring_read", r, RF__OP_READ, fd, buf, len, off, flags, 0, cb, data, id);
}

int rf_ring_write(struct rf_ring *r, int fd, const void *buf, size_t len, uint64_t off,
		  unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	return rf__rw("rf_ring_write", r, RF__OP_WRITE, fd, (void *)buf, len, off, flags, 0, cb,
		      data, id);
}

int rf_ring_fsync(struct rf_ring *r, int fd, unsigned flags, int datasync,
		  rf_io_cb cb, void *data, rf_req_id *id)
{
	/* len carries datasync; buf NULL */
	return rf__rw("rf_ring_fsync", r, RF__OP_FSYNC, fd, NULL, datasync ? 1 : 0, 0,
		      flags & RF_IO_FIXED_FILE, 0, cb, data, id);
}

int rf_ring_timeout(struct rf_ring *r, uint64_t ns, rf_io_cb cb, void *data, rf_req_id *id)
{
	if (r->destroying)
		return rf__shutdown("rf_ring_timeout");
	struct rf__req *q = rf__req_alloc(r, 1);
	if (!q)
		return rf__no_req("rf_ring_timeout");
	q->op = RF__OP_TIMEOUT;
	q->fd = -1;
	q->buf = NULL;
	q->len = 0;
	q->off = 0;
	q->cb = cb;
	q->data = data;
	q->u.ts.tv_sec = (long long)(ns / 1000000000ull);
	q->u.ts.tv_nsec = (long long)(ns % 1000000000ull);
	int ret = rf__queue_new(r, q, id);
	return ret < 0 ? rf__not_queued("rf_ring_timeout", ret) : 0;
}
