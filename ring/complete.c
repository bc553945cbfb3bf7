/* ring/complete.c -- the last stage of one-shot requests: a CQE of a transfer (read,
 * write, readv, writev, send, send_zc, recv, splice), of a timeout, or of an operation
 * with one result ends the request, or sends it on (rf__defer: the submit stage queues
 * its next piece): short transfers go on, -EAGAIN/-EINTR are retried (with a backoff
 * after the first RF__RETRY_NOW in a row), zero-copy sends wait for their
 * notifications. Named in kind.c's table; calls submit.c and fault.c only, and takes
 * no SQE. */
#include "ring-impl.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

/* Nothing was transferred (the kernel reports a partial transfer as a short count),
 * so the same piece goes again (RF__AG_RETRY: rf__resubmit queues it, at once or
 * after rf__retry_wait_ns); res itself after RF__RETRY_MAX in a row. */
int rf__retry(struct rf_ring *r, struct rf__req *q, int32_t res)
{
	if (q->retries >= RF__RETRY_MAX)
		return res;
	q->retries++;
	r->st.retries++;
	return rf__defer(r, q, RF__AG_RETRY);
}

/* At once for the first RF__RETRY_NOW results in a row, then after a timeout (tagged
 * RF__TAG_RETRY) that doubles up to RF__RETRY_CAP_NS, so that a device that keeps
 * saying -EAGAIN cannot spin the reactor; never past the request's deadline (the
 * caller checked now < deadline). */
uint64_t rf__retry_wait_ns(const struct rf__req *q, uint64_t now)
{
	if (q->retries <= RF__RETRY_NOW)
		return 0;
	unsigned shift = q->retries - RF__RETRY_NOW - 1;
	uint64_t ns = shift >= 16 ? RF__RETRY_CAP_NS : RF__RETRY_BASE_NS << shift;
	if (ns > RF__RETRY_CAP_NS)
		ns = RF__RETRY_CAP_NS;
	if ((q->flags & RF__RQ_DEADLINE) && ns > q->deadline - now)
		ns = q->deadline - now;
	return ns;
}

/* A zero-copy send's notification: the kernel let go of (one piece of) the buffer. */
static int rf__zc_notif(struct rf_ring *r, struct rf__req *q)
{
	if (q->nnotif && --q->nnotif == 0 && (q->flags & RF__RQ_ZDONE)) {
		rf__req_finish(r, q, (int64_t)q->scratch);
		return 1;
	}
	return 0;
}

/* What a piece moved, in the ring's read or written bytes by its kind's flags. */
static void rf__count_bytes(struct rf_ring *r, unsigned kf, int32_t res)
{
	if (res > 0 && (kf & RF__KF_IN))
		r->st.bytes_read += (uint64_t)res;
	else if (res > 0 && (kf & RF__KF_OUT))
		r->st.bytes_written += (uint64_t)res;
}

int rf__complete_xfer(struct rf_ring *r, struct rf__req *q, int32_t res, uint32_t cflags)
{
	unsigned kind = q->kind;
	/* a zero-copy notification first: it may come while a faked piece is queued */
	if (kind == RF_IOP_SEND_ZC && (cflags & IORING_CQE_F_NOTIF))
		return rf__zc_notif(r, q);
	if (q->flags & RF__RQ_FAKE) {
		q->flags &= ~RF__RQ_FAKE;
		res = (int32_t)(int64_t)q->scratch;
	}
	if (kind == RF_IOP_SEND_ZC) {
		if (cflags & IORING_CQE_F_MORE)
			q->nnotif++; /* a notification will follow */
		/* A socket that does not do zero copy (AF_UNIX): plain sends from here on. */
		if (res == -EOPNOTSUPP && (q->flags & RF__RQ_ZC) && !(q->flags & RF__RQ_CANCELLED)) {
			q->flags &= ~RF__RQ_ZC;
			return rf__defer(r, q, RF__AG_QUEUE);
		}
	}
	unsigned kf = r->kinds[kind].flags;
	if (q->flags & RF__RQ_CANCELLED) {
		/* a stream's bytes taken or sent before the cancel took are gone from its
		 * queue: rf__req_again reports their count, not -ECANCELED (a sender could
		 * not tell whether to send them again); in the teardown every callback says
		 * -ECANCELED */
		if (res > 0 && rf__req_stream(r, q) && !r->destroying) {
			rf__count_bytes(r, kf, res);
			q->done += (size_t)res;
		}
		return rf__req_again(r, q, -ECANCELED);
	}
	if (res > 0 && (q->flags & RF__RQ_FAULTABLE))
		res = rf__fault_apply(r, q, res);
	/* MSG_DONTWAIT asks for no wait: its -EAGAIN is the answer, not retried */
	if ((res == -EAGAIN && !((kf & RF__KF_STREAM) && kind != RF_IOP_SPLICE &&
				 (q->off & MSG_DONTWAIT))) || res == -EINTR)
		return rf__req_again(r, q, rf__retry(r, q, res));
	if (res < 0)  /* a stream's bytes already moved: their count (rf__req_again) */
		return rf__req_again(r, q, res);
	if ((q->flags & RF__RQ_ZC) && res > 0)
		r->st.zerocopy_sends++;
	rf__count_bytes(r, kf, res);
	q->done += (size_t)res;
	if (res > 0)
		q->retries = 0;
	int again = res > 0 && q->done < q->len && !(q->flags & RF_IO_NO_RETRY_SHORT);
	if (kind == RF_IOP_RECV && !(q->off & MSG_WAITALL))
		again = 0;
	if (again) {
		r->st.short_resubmits++;
		return rf__defer(r, q, RF__AG_REQUEUE);
	}
	return rf__req_done(r, q, (int64_t)q->done);
}

int rf__complete_timeout(struct rf_ring *r, struct rf__req *q, int32_t res, uint32_t cflags)
{
	if (q->flags & RF__RQ_CANCELLED)
		res = -ECANCELED;
	rf__req_finish(r, q, res == -ETIME ? 0 : res);
	return 1;
}

int rf__complete_plain(struct rf_ring *r, struct rf__req *q, int32_t res, uint32_t cflags)
{
	unsigned kind = q->kind;
	if ((q->flags & RF__RQ_CANCELLED) && res >= 0 &&
	    (kind == RF_IOP_OPENAT || kind == RF_IOP_SOCKET || kind == RF_IOP_ACCEPT)) {
		/* it made a file before the cancel took: never leak it */
		if (!r->destroying)
			return rf__req_done(r, q, res);
		if (!(q->flags & RF_IO_ALLOC_SLOT))
			close(res); /* (a slot goes with the ring's table) */
	}
	return rf__req_done(r, q, (q->flags & RF__RQ_CANCELLED) ? -ECANCELED : res);
}
