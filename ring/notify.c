/* ring/notify.c -- notifiers (cross-thread wake-ups: MSG_RING, or an eventfd where
 * the kernel refuses it) and eventfd watches. Signals are accumulated while a turn's
 * CQEs are reaped and delivered once per notifier per turn (rf__notify_flush). The
 * design is in README.md. */
#include "ring-impl.h"

#include "rf-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef IORING_REGISTER_SEND_MSG_RING
#define IORING_REGISTER_SEND_MSG_RING 31
#endif

int rf__send_msg(int ring_fd, uint64_t ud, uint32_t res, int retry)
{
	struct io_uring_sqe sqe;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = IORING_OP_MSG_RING;
	sqe.fd = ring_fd;
	sqe.addr = IORING_MSG_DATA;
	sqe.off = ud;
	sqe.len = res;
	long backoff = 1000, waited = 0;
	for (;;) {
		long ret = syscall(__NR_io_uring_register, -1, IORING_REGISTER_SEND_MSG_RING, &sqe, 1);
		if (ret >= 0)
			return 0;
		int e = errno;
		if (e == EINTR)
			continue;
		if (!retry || !(e == EAGAIN || e == EBUSY || e == ENOMEM || e == EOVERFLOW))
			return -e;
		if (waited > 10L * 1000 * 1000 * 1000)
			return -e;
		struct timespec ts = { 0, backoff };
		nanosleep(&ts, NULL);
		waited += backoff;
		if (backoff < 1000 * 1000)
			backoff *= 2;
	}
}

/* ---- notifiers ----------------------------------------------------------------- */

static void rf__mark_dirty(struct rf_ring *r, struct rf_notifier *n)
{
	if (!n->on_dirty) {
		n->on_dirty = 1;
		n->next_dirty = r->dirty;
		r->dirty = n;
	}
}

void rf__notify_msg(struct rf_ring *r, uint64_t ud, int32_t res)
{
	uint32_t slot = (uint32_t)(ud >> 3) & 0x1fffffff;
	uint32_t gen = (uint32_t)(ud >> 32);
	if (slot >= r->nslots_cap || !r->nslots[slot].n || r->nslots[slot].gen != gen || res <= 0)
		return; /* notifier destroyed since: dropped */
	struct rf_notifier *n = r->nslots[slot].n;
	n->accum += (uint32_t)res;
	rf__mark_dirty(r, n);
}

int rf__notify_flush(struct rf_ring *r)
{
	int calls = 0;
	struct rf_notifier *n;
	while ((n = r->dirty)) {
		uint32_t c = n->accum > UINT32_MAX ? UINT32_MAX : (uint32_t)n->accum;
		n->accum -= c;
		if (!n->accum) {
			r->dirty = n->next_dirty;
			n->on_dirty = 0;
		}
		uint32_t pay = c < n->owed ? c : n->owed;
		n->owed -= pay;
		r->owed -= pay;
		r->st.notifications += c;
		calls++;
		r->cb_depth++;
		n->cb(n->data, c); /* may destroy n */
		r->cb_depth--;
	}
	return calls;
}

/* The notifier's eventfd read failed, or cannot be queued again: nothing more can
 * arrive on it. Its owed signals stop counting as pending (and later ones are not
 * counted), so that no wait spins on signals that cannot come. */
static void rf__notify_lost(struct rf_ring *r, struct rf_notifier *n, struct rf__req *q, int err)
{
	rf__log(RF_LOG_ERROR, "notifier: its eventfd read failed (%s): %u owed signals and any "
		"later ones will not be delivered", strerror(-err), n->owed);
	r->owed -= n->owed;
	n->owed = 0;
	n->lost = 1;
	n->rq = NULL;
	rf__req_free(r, q);
}

int rf__complete_notify_read(struct rf_ring *r, struct rf__req *q, int32_t res, uint32_t cflags)
{
	struct rf_notifier *n = q->u.owner;
	if (q->flags & RF__RQ_CANCELLED) { /* rf_ring_destroy: the read is over */
		rf__req_finish(r, q, -ECANCELED);
		return 1;
	}
	if (!n) { /* notifier destroyed: this was its cancelled read */
		rf__req_free(r, q);
		return 0;
	}
	if (res == 8) {
		n->accum += q->scratch;
		rf__mark_dirty(r, n);
	} else if (res != -EINTR && res != -EAGAIN) {
		rf__notify_lost(r, n, q, res < 0 ? res : -EIO);
		return 0;
	}
	if (r->destroying) {
		n->rq = NULL;
		rf__req_free(r, q);
		return 0;
	}
	return rf__defer(r, q, RF__AG_QUEUE);
}

static int rf__nslot_alloc(struct rf_ring *r, uint32_t *out)
{
	if (r->nslot_free == UINT32_MAX) {
		uint32_t cap = r->nslots_cap ? r->nslots_cap * 2 : 16;
		if (cap > (1u << 29))
			return -ENOSPC;
		struct rf__nslot *s = realloc(r->nslots, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		for (uint32_t i = cap; i-- > r->nslots_cap;) {
			s[i].n = NULL;
			s[i].gen = 0;
			s[i].next_free = r->nslot_free;
			r->nslot_free = i;
		}
		r->nslots = s;
		r->nslots_cap = cap;
	}
	*out = r->nslot_free;
	r->nslot_free = r->nslots[*out].next_free;
	return 0;
}

int rf_notifier_create(struct rf_ring *r, rf_notify_cb cb, void *data, struct rf_notifier **out)
{
	if (!out)
		return rf__fail(-EINVAL, "rf_notifier_create: out is NULL");
	*out = NULL;
	RF__OWNER_OR_RETURN(r, "rf_notifier_create");
	if (!cb)
		return rf__fail(-EINVAL, "rf_notifier_create: cb is NULL, expected the callback "
				"that receives the signals");
	if (r->destroying)
		return rf__shutdown("rf_notifier_create");
	/* The eventfd fallback's read is not a polled O_DIRECT read: the kernel refuses it. */
	if (!r->msg_ring && (r->setup_flags & IORING_SETUP_IOPOLL))
		return rf__fail(-EOPNOTSUPP, "rf_notifier_create: the ring is RF_RING_IOPOLL and "
				"its notifiers would use the eventfd fallback (no ringless "
				"MSG_RING: kernel before 6.13, or RF_RING_NO_MSG_RING), whose read "
				"a polled ring refuses; expected a ring without RF_RING_IOPOLL");
	struct rf_notifier *n = calloc(1, sizeof(*n));
	if (!n)
		return rf__fail(-ENOMEM, "rf_notifier_create: no memory for the notifier");
	n->r = r;
	n->cb = cb;
	n->data = data;
	n->ring_fd = r->ring.ring_fd;
	n->efd = -1;
	int ret = rf__nslot_alloc(r, &n->slot);
	if (ret < 0) {
		free(n);
		return rf__fail(ret, "rf_notifier_create: %s", ret == -ENOSPC ?
				"the ring has 2^29 notifiers already" : "no memory for its slot");
	}
	struct rf__nslot *s = &r->nslots[n->slot];
	s->gen++;
	n->ud = RF__TAG_NOTIFY | ((uint64_t)n->slot << 3) | ((uint64_t)s->gen << 32);
	if (!r->msg_ring) {
		n->efd = eventfd(0, EFD_CLOEXEC);
		int e = errno;
		struct rf__req *q = n->efd >= 0 ? rf__req_alloc(r, 0) : NULL;
		if (n->efd < 0)
			ret = rf__fail(-e, "rf_notifier_create: cannot create the eventfd of the "
				       "fallback: %s", strerror(e));
		else if (!q)
			ret = rf__no_req("rf_notifier_create");
		if (q) {
			q->kind = RF__K_NOTIFY_READ;
			q->fd = n->efd;
			q->u.owner = n;
			ret = rf__queue(r, q);
			if (ret < 0) {
				rf__not_queued("rf_notifier_create", ret);
				rf__req_free(r, q);
			} else {
				n->rq = q;
			}
		}
		if (ret < 0) {
			if (n->efd >= 0)
				close(n->efd);
			s->next_free = r->nslot_free;
			r->nslot_free = n->slot;
			free(n);
			return ret;
		}
	}
	s->n = n;
	r->nnotifiers++;
	*out = n;
	return 0;
}

int rf_notifier_signal(struct rf_notifier *n)
{
	if (!n)
		return rf__fail(-EINVAL, "rf_notifier_signal: n is NULL");
	return rf_notifier_signal_n(n, 1);
}

int rf_notifier_signal_n(struct rf_notifier *n, uint32_t count)
{
	if (!n)
		return rf__fail(-EINVAL, "rf_notifier_signal_n: n is NULL");
	if (count == 0 || count > INT32_MAX) /* a CQE's res is signed: res <= 0 is dropped */
		return rf__fail(-EINVAL, "rf_notifier_signal_n: count = %u, expected 1 to "
				"2^31 - 1", count);
	if (n->efd < 0) {
		int ret = rf__send_msg(n->ring_fd, n->ud, count, 1);
		return ret < 0 ? rf__fail(ret, "rf_notifier_signal: the MSG_RING post to the "
					  "ring failed: %s", strerror(-ret)) : 0;
	}
	uint64_t v = count;
	for (;;) {
		ssize_t w = write(n->efd, &v, sizeof(v));
		if (w == (ssize_t)sizeof(v))
			return 0;
		if (w < 0 && errno == EINTR)
			continue;
		int ret = w < 0 ? -errno : -EIO;
		return rf__fail(ret, "rf_notifier_signal: writing the eventfd: %s", strerror(-ret));
	}
}

void rf_notifier_expect(struct rf_notifier *n, uint32_t count)
{
	if (!n) {
		rf__fail(-EINVAL, "rf_notifier_expect: n is NULL");
		return;
	}
	if (rf__owner_check_void(n->r, "rf_notifier_expect") < 0)
		return;
	if (n->lost)
		return; /* nothing can arrive: waiting for it would never end */
	n->owed += count;
	n->r->owed += count;
}

uint32_t rf_notifier_owed(const struct rf_notifier *n)
{
	return n ? n->owed : 0;
}

void rf_notifier_destroy(struct rf_notifier *n)
{
	if (!n)
		return;
	struct rf_ring *r = n->r;
	if (rf__owner_check_void(r, "rf_notifier_destroy") < 0)
		return;
	if (n->on_dirty) {
		struct rf_notifier **pp = &r->dirty;
		while (*pp != n)
			pp = &(*pp)->next_dirty;
		*pp = n->next_dirty;
	}
	if (n->rq) {
		n->rq->u.owner = NULL; /* its read target lives in the request */
		(void)rf__queue_ctl(r, RF__CTL_CANCEL, n->rq, 0);
	}
	if (n->efd >= 0)
		close(n->efd);
	struct rf__nslot *s = &r->nslots[n->slot];
	s->n = NULL;
	s->gen++; /* messages still in flight no longer match */
	s->next_free = r->nslot_free;
	r->nslot_free = n->slot;
	r->owed -= n->owed;
	r->nnotifiers--;
	free(n);
}

void rf__notifiers_teardown(struct rf_ring *r)
{
	for (uint32_t i = 0; i < r->nslots_cap; i++)
		if (r->nslots[i].n)
			rf_notifier_destroy(r->nslots[i].n);
}

/* ---- eventfd watches ------------------------------------------------------------ */

static void rf__watch_unlink_free(struct rf_ring *r, struct rf_watch *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		r->watches = w->next;
	if (w->next)
		w->next->prev = w->prev;
	free(w);
}

static int rf__watch_fail(struct rf_ring *r, struct rf_watch *w, struct rf__req *q, int err)
{
	w->rq = NULL;
	w->failed = 1;
	rf__req_free(r, q);
	w->busy = 1;
	r->cb_depth++;
	w->cb(w->data, err);
	r->cb_depth--;
	w->busy = 0;
	if (w->stopping)
		rf__watch_unlink_free(r, w);
	return 1;
}

int rf__complete_watch(struct rf_ring *r, struct rf__req *q, int32_t res, uint32_t cflags)
{
	struct rf_watch *w = q->u.owner;
	if (q->flags & RF__RQ_CANCELLED) { /* rf_ring_destroy: the read is over */
		rf__req_finish(r, q, -ECANCELED);
		return 1;
	}
	if (!w) { /* teardown orphaned it */
		rf__req_free(r, q);
		return 0;
	}
	if (w->stopping) {
		rf__req_free(r, q);
		rf__watch_unlink_free(r, w);
		return 0;
	}
	if (q->kind == RF__K_WATCH_POLL) {
		if (res < 0)
			return rf__watch_fail(r, w, q, res);
		q->kind = RF__K_WATCH;
		return rf__defer(r, q, RF__AG_QUEUE);
	}
	if (res == -EAGAIN || res == -EINTR) { /* non-blocking eventfd: poll, then read */
		q->kind = res == -EAGAIN ? RF__K_WATCH_POLL : RF__K_WATCH;
		return rf__defer(r, q, RF__AG_QUEUE);
	}
	if (res != 8)
		return rf__watch_fail(r, w, q, res < 0 ? res : -EIO);
	w->busy = 1;
	r->cb_depth++;
	w->cb(w->data, (int64_t)q->scratch);
	r->cb_depth--;
	w->busy = 0;
	if (w->stopping || r->destroying) {
		w->rq = NULL;
		rf__req_free(r, q);
		if (w->stopping)
			rf__watch_unlink_free(r, w);
		return 1;
	}
	rf__defer(r, q, RF__AG_QUEUE);
	return 1;
}

int rf_watch_eventfd(struct rf_ring *r, int efd, int counts_as_pending,
		     rf_watch_cb cb, void *data, struct rf_watch **out)
{
	if (!out)
		return rf__fail(-EINVAL, "rf_watch_eventfd: out is NULL");
	*out = NULL;
	RF__OWNER_OR_RETURN(r, "rf_watch_eventfd");
	if (!cb)
		return rf__fail(-EINVAL, "rf_watch_eventfd: cb is NULL, expected the callback "
				"that receives the counter values");
	if (r->destroying)
		return rf__shutdown("rf_watch_eventfd");
	struct rf_watch *w = calloc(1, sizeof(*w));
	struct rf__req *q = w ? rf__req_alloc(r, counts_as_pending) : NULL;
	if (!q) {
		free(w);
		return rf__fail(-ENOMEM, "rf_watch_eventfd: no memory for the watch");
	}
	w->r = r;
	w->cb = cb;
	w->data = data;
	w->efd = efd;
	w->counts = counts_as_pending;
	q->kind = RF__K_WATCH;
	q->fd = efd;
	q->u.owner = w;
	int ret = rf__queue(r, q);
	if (ret < 0) {
		rf__req_free(r, q);
		free(w);
		return rf__not_queued("rf_watch_eventfd", ret);
	}
	w->rq = q;
	w->next = r->watches;
	if (w->next)
		w->next->prev = w;
	r->watches = w;
	*out = w;
	return 0;
}

void rf_watch_stop(struct rf_watch *w)
{
	if (!w)
		return;
	struct rf_ring *r = w->r;
	if (rf__owner_check_void(r, "rf_watch_stop") < 0)
		return;
	if (w->busy) { /* inside its own callback: freed when the callback returns */
		w->stopping = 1;
		return;
	}
	if (!w->rq) {
		rf__watch_unlink_free(r, w);
		return;
	}
	w->stopping = 1;
	(void)rf__queue_ctl(r, RF__CTL_CANCEL, w->rq, 0);
}

void rf__watches_teardown(struct rf_ring *r)
{
	struct rf_watch *w = r->watches;
	while (w) {
		struct rf_watch *next = w->next;
		if (w->rq)
			w->rq->u.owner = NULL;
		free(w);
		w = next;
	}
	r->watches = NULL;
}
