/* ring/submit.c -- the request pool, SQE acquisition and the one way into the SQ:
 * rf__queue for a request (its kind prepares the SQE), rf__queue_ctl for the SQEs that
 * act on one (a cancel, a retry's backoff) -- no other file takes an SQE, and no
 * completion calls them (they send a request on with rf__defer; dispatch.c's submit
 * stage queues it). Requests are only queued into the SQ here; the run loop
 * (dispatch.c) submits them with its wait. A full SQ is flushed without reaping (its
 * CQEs go to the backlog when the kernel refuses) and the SQE retried. It calls no
 * other file of the ring by name: only the kinds' preps, through the table. */
#include "ring-impl.h"

#include "rf-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The clock of deadlines, backoffs and spins. */
uint64_t rf_now_ns(void)
{
	return rf__mono_ns();
}

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
	q->again = 0;
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

void rf__req_finish(struct rf_ring *r, struct rf__req *q, int64_t res)
{
	rf_io_cb cb = q->cb;
	void *data = q->data;
	rf__req_free(r, q);
	if (cb) {
		r->cb_depth++;
		cb(data, res);
		r->cb_depth--;
	}
}

/* The request is over with res; a zero-copy send first waits for its notifications
 * (the kernel's word that it let go of the buffer) -- except in rf_ring_destroy: a
 * peer that never reads would hold the notification back for ever, and the kernel
 * keeps the pages it pinned alive by itself. */
int rf__req_done(struct rf_ring *r, struct rf__req *q, int64_t res)
{
	if (q->nnotif && !r->destroying) {
		q->scratch = (uint64_t)res;
		q->flags |= RF__RQ_ZDONE;
		return 0;
	}
	rf__req_finish(r, q, res);
	return 1;
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
static struct io_uring_sqe *rf__sqe(struct rf_ring *r, int *err)
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
	if (n > r->ring.sq.ring_entries) /* never room, however often it is flushed */
		return -EINVAL;
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

/* Link sqe to a timeout at the request's deadline (the SQ has room: rf__sq_room). */
static void rf__link_deadline(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	sqe->flags |= IOSQE_IO_LINK;
	struct io_uring_sqe *t = io_uring_get_sqe(&r->ring); /* room: rf__sq_room */
	q->u.ts.tv_sec = (long long)(q->deadline / 1000000000ull);
	q->u.ts.tv_nsec = (long long)(q->deadline % 1000000000ull);
	io_uring_prep_link_timeout(t, &q->u.ts, IORING_TIMEOUT_ABS);
	io_uring_sqe_set_data64(t, RF__TAG_IGNORE);
}

int rf__queue(struct rf_ring *r, struct rf__req *q)
{
	int err = 0;
	if ((q->flags & RF__RQ_DEADLINE) && (err = rf__sq_room(r, 2)) < 0)
		return err;
	struct io_uring_sqe *sqe = rf__sqe(r, &err);
	if (!sqe)
		return err;
	if (r->kinds[q->kind].prep(r, q, sqe) == 0 && (q->flags & RF_IO_FIXED_FILE))
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, rf__req_ud(q));
	if (q->flags & RF__RQ_DEADLINE)
		rf__link_deadline(r, q, sqe);
	return 0;
}

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

int rf__queue_ctl(struct rf_ring *r, enum rf__ctl c, struct rf__req *q, uint64_t ns)
{
	int err = 0;
	if (c == RF__CTL_CANCEL && q->again) { /* not in the kernel: rf__resubmit ends it */
		q->again = RF__AG_CANCEL;
		return 0;
	}
	struct io_uring_sqe *sqe = rf__sqe(r, &err);

	if (!sqe)
		return err;
	switch (c) {
	case RF__CTL_CANCEL:
		/* a request waiting out a retry backoff has its timeout in the kernel */
		io_uring_prep_cancel64(sqe, rf__req_ud(q) |
				       ((q->flags & RF__RQ_BACKOFF) ? RF__TAG_RETRY : 0), 0);
		io_uring_sqe_set_data64(sqe, RF__TAG_IGNORE);
		break;
	case RF__CTL_CANCEL_ALL:
		io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
		io_uring_sqe_set_data64(sqe, RF__TAG_IGNORE | 8);
		break;
	case RF__CTL_BACKOFF:
		q->u.ts.tv_sec = (long long)(ns / 1000000000ull);
		q->u.ts.tv_nsec = (long long)(ns % 1000000000ull);
		io_uring_prep_timeout(sqe, &q->u.ts, 0, 0);
		io_uring_sqe_set_data64(sqe, rf__req_ud(q) | RF__TAG_RETRY);
		q->flags |= RF__RQ_BACKOFF;
		break;
	}
	return 0;
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
