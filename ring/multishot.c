/* ring/multishot.c -- multishot accept, recv into a provided-buffer group and poll
 * (one request, many completions; rearmed where the kernel ends them), the buffer
 * groups themselves, rf_ring_cancel (which must find parked receives) and the
 * teardown of what the ring keeps outside the kernel. rf__complete_ms is the multishot
 * kinds' complete (kind.c); it calls submit.c only, and rearms through rf__defer. */
#include "ring-impl.h"

#include "rf-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- multishot ------------------------------------------------------------------------ */

static void rf__bufgroup_give(struct rf_bufgroup *g, char *p);

static void rf__unpark(struct rf_bufgroup *g, struct rf__req *q)
{
	for (struct rf__req **pp = &g->parked; *pp; pp = &(*pp)->next_free)
		if (*pp == q) {
			*pp = q->next_free;
			break;
		}
	q->next_free = NULL;
	q->flags &= ~RF__RQ_PARKED;
}

static void rf__ms_finish(struct rf_ring *r, struct rf__req *q, int64_t res)
{
	rf_multi_cb cb = q->mcb;
	void *data = q->data;
	if (q->kind == RF__K_RECV_MS)
		((struct rf_bufgroup *)q->u.owner)->users--;
	rf__req_free(r, q);
	if (cb) {
		r->cb_depth++;
		cb(data, res, NULL, 0);
		r->cb_depth--;
	}
}

int rf__complete_ms(struct rf_ring *r, struct rf__req *q, int32_t res, uint32_t cflags)
{
	int more = (cflags & IORING_CQE_F_MORE) != 0;
	int cancelled = (q->flags & RF__RQ_CANCELLED) != 0;
	struct rf_bufgroup *g = q->kind == RF__K_RECV_MS ? q->u.owner : NULL;
	void *buf = NULL;
	if (g && (cflags & IORING_CQE_F_BUFFER)) {
		unsigned bid = cflags >> IORING_CQE_BUFFER_SHIFT;
		if (bid < g->nbufs) {
			buf = g->bufs + (size_t)bid * g->bufsz;
			g->out[bid] = 1;
			g->avail--;
		}
	}
	/* an empty datagram: an event of 0 bytes (the kernel ends the request on it, as
	 * on a stream's end: rearmed below); its buffer, if it took one, goes back */
	int dgram0 = g && res == 0 && (q->flags & RF__RQ_DGRAM);
	int event = q->kind == RF__K_ACCEPT_MS ? res >= 0 : res > 0 || dgram0;
	if (dgram0 && buf) {
		rf__bufgroup_give(g, buf);
		buf = NULL;
	}
	if (event) {
		if (g)
			r->st.bytes_read += (uint64_t)res;
		q->retries = 0;
		if (!more && !cancelled) {
			r->st.multishot_rearms++;
			rf__defer(r, q, RF__AG_QUEUE); /* the kernel ended it: rearm */
		}
		r->cb_depth++;
		q->mcb(q->data, res, buf, 1);
		r->cb_depth--;
		if (!more && cancelled) {
			rf__ms_finish(r, q, -ECANCELED);
			return 2;
		}
		return 1;
	}
	if (buf) /* cannot happen: a buffer comes only with data */
		rf__bufgroup_give(g, buf);
	if (more)
		return 0; /* an error that does not end the request: nothing to say */
	if (!cancelled && g && res == -ENOBUFS) {
		if (g->avail)
			return rf__defer(r, q, RF__AG_QUEUE);
		q->flags |= RF__RQ_PARKED;
		q->next_free = g->parked;
		g->parked = q;
		return 0;
	}
	if (!cancelled && (res == -EAGAIN || res == -EINTR) && q->retries < RF__RETRY_MAX) {
		/* at once: u holds the buffer group, not a backoff timeout */
		q->retries++;
		r->st.retries++;
		return rf__defer(r, q, RF__AG_QUEUE);
	}
	if (cancelled)
		res = -ECANCELED;
	rf__ms_finish(r, q, res);
	return 1;
}

static int rf__ms_start(const char *fn, struct rf_ring *r, int kind, int fd, unsigned flags,
			struct rf_bufgroup *g, unsigned events, rf_multi_cb cb, void *data,
			rf_req_id *id)
{
	RF__OWNER_OR_RETURN(r, fn);
	if (r->destroying)
		return rf__shutdown(fn);
	if (!cb)
		return rf__fail(-EINVAL, "%s: cb is NULL, expected the callback of each event", fn);
	if ((flags & ~(RF_IO_FIXED_FILE | RF_IO_ALLOC_SLOT)) ||
	    ((flags & RF_IO_ALLOC_SLOT) && kind != RF__K_ACCEPT_MS))
		return rf__fail(-EINVAL, "%s: flags = 0x%x, expected RF_IO_FIXED_FILE%s", fn, flags,
				kind == RF__K_ACCEPT_MS ? " and RF_IO_ALLOC_SLOT only" : " only");
	struct rf__req *q = rf__req_alloc(r, 1);
	if (!q)
		return rf__no_req(fn);
	q->kind = (uint8_t)kind;
	q->fd = fd;
	q->flags |= flags;
	q->mcb = cb;
	q->data = data;
	q->buf = NULL;
	q->len = 0;
	q->off = events;
	q->u.owner = g;
	if (kind == RF__K_RECV_MS && !(flags & RF_IO_FIXED_FILE)) {
		int type = 0;
		socklen_t tl = sizeof(type);
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_DGRAM)
			q->flags |= RF__RQ_DGRAM;
	}
	if (g)
		g->users++;
	int ret = rf__queue(r, q);
	if (ret < 0) {
		if (g)
			g->users--;
		rf__req_free(r, q);
		return rf__not_queued(fn, ret);
	}
	if (id)
		*id = rf__req_id(q);
	return 0;
}

int rf_ring_accept_multishot(struct rf_ring *r, int fd, unsigned flags, rf_multi_cb cb,
			     void *data, rf_req_id *id)
{
	return rf__ms_start("rf_ring_accept_multishot", r, RF__K_ACCEPT_MS, fd, flags, NULL, 0, cb,
			    data, id);
}

int rf_ring_recv_multishot(struct rf_ring *r, int fd, struct rf_bufgroup *g, unsigned flags,
			   rf_multi_cb cb, void *data, rf_req_id *id)
{
	if (!g || g->r != r)
		return rf__fail(-EINVAL, "rf_ring_recv_multishot: g is %s, expected a buffer group "
				"of this ring", g ? "a group of another ring" : "NULL");
	return rf__ms_start("rf_ring_recv_multishot", r, RF__K_RECV_MS, fd, flags, g, 0, cb, data,
			    id);
}

int rf_ring_poll_multishot(struct rf_ring *r, int fd, unsigned events, unsigned flags,
			   rf_multi_cb cb, void *data, rf_req_id *id)
{
	return rf__ms_start("rf_ring_poll_multishot", r, RF__K_POLL_MS, fd, flags, NULL, events,
			    cb, data, id);
}

int rf_ring_cancel(struct rf_ring *r, rf_req_id id)
{
	RF__OWNER_OR_RETURN(r, "rf_ring_cancel");
	struct rf__req *q = rf__req_by_id(r, id);
	if (!q || (r->kinds[q->kind].flags & RF__KF_INTERNAL))
		return rf__fail(-ENOENT, "rf_ring_cancel: id 0x%llx names no request in flight "
				"(finished already, or never issued)", (unsigned long long)id);
	if (q->flags & RF__RQ_CANCELLED)
		return 0;
	q->flags |= RF__RQ_CANCELLED;
	if (q->flags & RF__RQ_PARKED) {
		/* not in the kernel: it ends in the submit stage (rf__resubmit), its complete
		 * seeing -ECANCELED -- no SQE to fail, no result of 0 that a datagram
		 * receive would take for an empty datagram */
		rf__unpark(q->u.owner, q);
		rf__defer(r, q, RF__AG_CANCEL);
		return 0;
	}
	(void)rf__queue_ctl(r, RF__CTL_CANCEL, q, 0); /* else teardown's cancel-all */
	return 0;
}

void rf__ops_teardown(struct rf_ring *r)
{
	/* zero-copy sends that only wait for notifications: over now (rf__req_done) */
	for (unsigned s = 0; s < r->nslabs; s++)
		for (unsigned i = 0; i < RF__SLAB_SIZE; i++) {
			struct rf__req *q = &r->slabs[s][i];
			if (q->live && (q->flags & RF__RQ_ZDONE))
				rf__req_finish(r, q, -ECANCELED);
		}
	/* parked receives are not in the kernel: each ends in the teardown's turns
	 * (rf__resubmit, -ECANCELED) */
	for (struct rf_bufgroup *g = r->groups; g; g = g->next)
		while (g->parked) {
			struct rf__req *q = g->parked;
			rf__unpark(g, q);
			rf__defer(r, q, RF__AG_CANCEL);
		}
}

/* ---- buffer groups --------------------------------------------------------------------- */

/* The lowest buffer-group id that no live group holds, or -ENOSPC: ids of destroyed
 * groups are taken again. */
static int rf__bgid_free(const struct rf_ring *r)
{
	for (unsigned i = 0; i < sizeof(r->bgid_used) / sizeof(r->bgid_used[0]); i++)
		if (~r->bgid_used[i])
			return (int)(i * 64 + (unsigned)__builtin_ctzll(~r->bgid_used[i]));
	return -ENOSPC;
}

int rf_bufgroup_create(struct rf_ring *r, unsigned nbufs, size_t bufsz, struct rf_bufgroup **out)
{
	if (!out)
		return rf__fail(-EINVAL, "rf_bufgroup_create: out is NULL");
	*out = NULL;
	RF__OWNER_OR_RETURN(r, "rf_bufgroup_create");
	if (!nbufs || nbufs > 32768 || (nbufs & (nbufs - 1)))
		return rf__fail(-EINVAL, "rf_bufgroup_create: nbufs = %u, expected a power of two "
				"from 1 to 32768", nbufs);
	if (!bufsz || bufsz > UINT32_MAX)
		return rf__fail(-EINVAL, "rf_bufgroup_create: bufsz = %zu, expected 1 to %u bytes",
				bufsz, UINT32_MAX);
	int bgid = rf__bgid_free(r);
	if (bgid < 0)
		return rf__fail(bgid, "rf_bufgroup_create: all 65536 buffer-group ids are held by "
				"live groups; expected one destroyed first");
	struct rf_bufgroup *g = calloc(1, sizeof(*g));
	if (!g)
		return rf__fail(-ENOMEM, "rf_bufgroup_create: no memory for the group");
	g->out = calloc(nbufs, 1);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	g->br_len = ((size_t)nbufs * sizeof(struct io_uring_buf) + page - 1) / page * page;
	g->map_len = ((size_t)nbufs * bufsz + page - 1) / page * page;
	void *br = mmap(NULL, g->br_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *bufs = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int ret = 0;
	if (!g->out || br == MAP_FAILED || bufs == MAP_FAILED) {
		ret = rf__fail(-ENOMEM, "rf_bufgroup_create: no memory for %u buffers of %zu bytes",
			       nbufs, bufsz);
		goto fail;
	}
	g->br = br;
	g->bufs = bufs;
	g->r = r;
	g->bufsz = bufsz;
	g->nbufs = nbufs;
	g->bgid = (uint16_t)bgid;
	io_uring_buf_ring_init(g->br);
	struct io_uring_buf_reg reg = { .ring_addr = (uintptr_t)br, .ring_entries = nbufs,
					.bgid = g->bgid };
	ret = io_uring_register_buf_ring(&r->ring, &reg, 0);
	if (ret < 0) {
		rf__fail(ret, "rf_bufgroup_create: the kernel refused the buffer ring "
			 "(io_uring_register_buf_ring): %s", strerror(-ret));
		goto fail;
	}
	r->bgid_used[bgid / 64] |= 1ull << (bgid % 64);
	for (unsigned i = 0; i < nbufs; i++)
		io_uring_buf_ring_add(g->br, g->bufs + (size_t)i * bufsz, (unsigned)bufsz, (unsigned short)i,
				      io_uring_buf_ring_mask(nbufs), (int)i);
	io_uring_buf_ring_advance(g->br, (int)nbufs);
	g->avail = nbufs;
	g->next = r->groups;
	r->groups = g;
	*out = g;
	return 0;
fail:
	if (br != MAP_FAILED)
		munmap(br, g->br_len);
	if (bufs != MAP_FAILED)
		munmap(bufs, g->map_len);
	free(g->out);
	free(g);
	return ret;
}

int rf_bufgroup_put(struct rf_bufgroup *g, void *buf)
{
	char *p = buf;
	if (!g)
		return rf__fail(-EINVAL, "rf_bufgroup_put: g is NULL");
	RF__OWNER_OR_RETURN(g->r, "rf_bufgroup_put");
	if (p < g->bufs || p >= g->bufs + (size_t)g->nbufs * g->bufsz ||
	    (size_t)(p - g->bufs) % g->bufsz)
		return rf__fail(-EINVAL, "rf_bufgroup_put: buf %p is not a buffer of the group",
				buf);
	unsigned bid = (unsigned)((size_t)(p - g->bufs) / g->bufsz);
	if (!g->out[bid])
		return rf__fail(-EALREADY, "rf_bufgroup_put: buffer %u (%p) is not handed out: "
				"given back twice?", bid, buf);
	rf__bufgroup_give(g, p);
	return 0;
}

/* Buffer p (of g, handed out) back into its ring, and the receives that waited for one
 * rearmed: rf_bufgroup_put past its checks, and the ring's own put. */
static void rf__bufgroup_give(struct rf_bufgroup *g, char *p)
{
	unsigned bid = (unsigned)((size_t)(p - g->bufs) / g->bufsz);

	g->out[bid] = 0;
	io_uring_buf_ring_add(g->br, p, (unsigned)g->bufsz, (unsigned short)bid,
			      io_uring_buf_ring_mask(g->nbufs), 0);
	io_uring_buf_ring_advance(g->br, 1);
	g->avail++;
	while (g->parked) { /* rearmed by the run loop's submit stage (rf__resubmit) */
		struct rf__req *q = g->parked;
		rf__unpark(g, q);
		rf__defer(g->r, q, RF__AG_QUEUE);
	}
}

size_t rf_bufgroup_bufsz(const struct rf_bufgroup *g)
{
	return g->bufsz;
}

unsigned rf_bufgroup_available(const struct rf_bufgroup *g)
{
	return g->avail;
}

static void rf__group_free(struct rf_ring *r, struct rf_bufgroup *g)
{
	io_uring_unregister_buf_ring(&r->ring, g->bgid);
	r->bgid_used[g->bgid / 64] &= ~(1ull << (g->bgid % 64));
	munmap(g->br, g->br_len);
	munmap(g->bufs, g->map_len);
	free(g->out);
	free(g);
}

int rf_bufgroup_destroy(struct rf_bufgroup *g)
{
	if (!g)
		return 0;
	RF__OWNER_OR_RETURN(g->r, "rf_bufgroup_destroy");
	if (g->users)
		return rf__fail(-EBUSY, "rf_bufgroup_destroy: %u receives still use the group; "
				"expected them cancelled and finished first", g->users);
	struct rf_ring *r = g->r;
	for (struct rf_bufgroup **pp = &r->groups; *pp; pp = &(*pp)->next)
		if (*pp == g) {
			*pp = g->next;
			break;
		}
	rf__group_free(r, g);
	return 0;
}

void rf__groups_free(struct rf_ring *r)
{
	while (r->groups) {
		struct rf_bufgroup *g = r->groups;
		r->groups = g->next;
		rf__group_free(r, g);
	}
}

