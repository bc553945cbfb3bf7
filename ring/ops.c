/* ring/ops.c -- the operations of ring-ops.h: one-shot requests from a struct rf_io
 * (metadata, sockets, polls, readv/writev), zero-copy sends, multishot accept / recv /
 * poll (rearmed where the kernel ends them), provided-buffer groups, and cancel.
 * Requests share the pool, retry, deadline and teardown machinery of submit.c and
 * dispatch.c: a request is an rf__req whose op is RF__OP_IO + its rf_iop, or one of
 * RF__OP_*_MS. */
#include "ring-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* What a descriptor needs past submission: a copy of it, with its strings, socket
 * address and iovec array, and a working iovec array for the current piece. */
struct rf__ext {
	struct rf_io io;
	struct sockaddr_storage addr;
	struct iovec *iov, *wiov;
	char strs[];
};

struct rf_bufgroup {
	struct rf_ring *r;
	struct io_uring_buf_ring *br;
	size_t br_len;
	char *bufs;
	size_t map_len, bufsz;
	unsigned nbufs, avail;
	uint16_t bgid;
	unsigned users;        /* multishot receives using the group */
	uint8_t *out;          /* out[i]: buffer i is with a caller */
	struct rf__req *parked; /* receives waiting for a buffer (linked by next_free) */
	struct rf_bufgroup *next;
};

#define RF__RQ_ZDONE (1u << 18) /* zero-copy send finished: result in scratch, waits notifs */

static const uint8_t rf__kop[] = {
	[RF_IOP_READ] = IORING_OP_READ,       [RF_IOP_WRITE] = IORING_OP_WRITE,
	[RF_IOP_READV] = IORING_OP_READV,     [RF_IOP_WRITEV] = IORING_OP_WRITEV,
	[RF_IOP_FSYNC] = IORING_OP_FSYNC,     [RF_IOP_OPENAT] = IORING_OP_OPENAT,
	[RF_IOP_CLOSE] = IORING_OP_CLOSE,     [RF_IOP_STATX] = IORING_OP_STATX,
	[RF_IOP_FALLOCATE] = IORING_OP_FALLOCATE, [RF_IOP_RENAMEAT] = IORING_OP_RENAMEAT,
	[RF_IOP_UNLINKAT] = IORING_OP_UNLINKAT, [RF_IOP_SOCKET] = IORING_OP_SOCKET,
	[RF_IOP_CONNECT] = IORING_OP_CONNECT, [RF_IOP_ACCEPT] = IORING_OP_ACCEPT,
	[RF_IOP_SEND] = IORING_OP_SEND,       [RF_IOP_SEND_ZC] = IORING_OP_SEND_ZC,
	[RF_IOP_RECV] = IORING_OP_RECV,       [RF_IOP_SHUTDOWN] = IORING_OP_SHUTDOWN,
	[RF_IOP_POLL] = IORING_OP_POLL_ADD,   [RF_IOP_NOP] = IORING_OP_NOP,
	[RF_IOP_SPLICE] = IORING_OP_SPLICE,
};
#define RF__NIOP ((int)(sizeof(rf__kop) / sizeof(rf__kop[0])))

void rf__ops_probe(struct rf_ring *r)
{
	struct io_uring_probe *p = io_uring_get_probe_ring(&r->ring);
	for (unsigned op = 0; op < sizeof(r->op_ok); op++)
		r->op_ok[op] = p ? (uint8_t)io_uring_opcode_supported(p, (int)op) : 1;
	if (p)
		io_uring_free_probe(p);
}

int rf_ring_op_supported(const struct rf_ring *r, enum rf_iop op)
{
	if ((int)op < RF_IOP_READ || (int)op >= RF__NIOP)
		return 0;
	return r->op_ok[rf__kop[op]];
}

static inline unsigned rf__iop(const struct rf__req *q)
{
	return (unsigned)q->op - RF__OP_IO;
}

/* Build the working iovec array for what is left of a readv/writev after q->done. */
static unsigned rf__iov_rest(struct rf__req *q)
{
	struct rf__ext *x = q->ext;
	size_t skip = q->done;
	unsigned i = 0, n = 0;
	while (i < x->io.iovcnt && skip >= x->iov[i].iov_len)
		skip -= x->iov[i++].iov_len;
	for (; i < x->io.iovcnt; i++, n++) {
		x->wiov[n].iov_base = (char *)x->iov[i].iov_base + skip;
		x->wiov[n].iov_len = x->iov[i].iov_len - skip;
		skip = 0;
	}
	return n;
}

/* Queue the current piece of an ops.c request. */
static int rf__ops_queue(struct rf_ring *r, struct rf__req *q)
{
	int err = rf__sq_room(r, (q->flags & RF__RQ_DEADLINE) ? 2 : 1);
	if (err < 0)
		return err;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
	struct rf__ext *x = q->ext;
	size_t rem = q->len - q->done;
	unsigned n = rem > RF__MAX_SQE_LEN ? RF__MAX_SQE_LEN : (unsigned)rem;
	char *p = q->buf + q->done;
	unsigned alloc = IORING_FILE_INDEX_ALLOC - 1; /* liburing adds 1 */
	int slot = (q->flags & RF_IO_ALLOC_SLOT) != 0, fixed = (q->flags & RF_IO_FIXED_FILE) != 0;
	switch (q->op) {
	case RF__OP_IO + RF_IOP_SEND:
	case RF__OP_IO + RF_IOP_SEND_ZC:
	case RF__OP_IO + RF_IOP_RECV:
		if (q->flags & RF__RQ_SOCKFAULT) {
			int32_t f = rf__fault_sock(r, &n);
			if (f) {
				io_uring_prep_nop(sqe);
				q->scratch = (uint64_t)(int64_t)f;
				q->flags |= RF__RQ_FAKE;
				fixed = 0;
				break;
			}
		}
		if (q->op == RF__OP_IO + RF_IOP_RECV)
			io_uring_prep_recv(sqe, q->fd, p, n, (int)q->off & ~MSG_WAITALL);
		else if (q->flags & RF__RQ_ZC)
			io_uring_prep_send_zc(sqe, q->fd, p, n, (int)q->off, 0);
		else
			io_uring_prep_send(sqe, q->fd, p, n, (int)q->off);
		break;
	case RF__OP_IO + RF_IOP_READV:
	case RF__OP_IO + RF_IOP_WRITEV: {
		unsigned cnt = rf__iov_rest(q);
		uint64_t off = q->off == UINT64_MAX ? UINT64_MAX : q->off + q->done;
		if (q->op == RF__OP_IO + RF_IOP_READV)
			io_uring_prep_readv(sqe, q->fd, x->wiov, cnt, off);
		else
			io_uring_prep_writev(sqe, q->fd, x->wiov, cnt, off);
		break;
	}
	case RF__OP_IO + RF_IOP_POLL:
		io_uring_prep_poll_add(sqe, q->fd, (unsigned)q->off);
		break;
	case RF__OP_IO + RF_IOP_SPLICE: {
		int64_t in = x->io.off == UINT64_MAX ? -1 : (int64_t)(x->io.off + q->done);
		int64_t out = x->io.off2 == UINT64_MAX ? -1 : (int64_t)(x->io.off2 + q->done);
		io_uring_prep_splice(sqe, q->fd, in, x->io.fd2, out, n, (unsigned)x->io.arg);
		fixed = 0; /* SPLICE_F_FD_IN_FIXED would say it; not offered */
		break;
	}
	case RF__OP_IO + RF_IOP_SHUTDOWN:
		io_uring_prep_shutdown(sqe, q->fd, (int)q->off);
		break;
	case RF__OP_IO + RF_IOP_CLOSE:
		if (fixed)
			io_uring_prep_close_direct(sqe, (unsigned)q->fd);
		else
			io_uring_prep_close(sqe, q->fd);
		fixed = 0; /* the slot is the target, not a file to look up */
		break;
	case RF__OP_IO + RF_IOP_NOP:
		io_uring_prep_nop(sqe);
		break;
	case RF__OP_IO + RF_IOP_OPENAT:
		if (slot)
			io_uring_prep_openat_direct(sqe, x->io.dirfd, x->io.path, x->io.arg,
						    (mode_t)x->io.mode, alloc);
		else
			io_uring_prep_openat(sqe, x->io.dirfd, x->io.path, x->io.arg, (mode_t)x->io.mode);
		break;
	case RF__OP_IO + RF_IOP_STATX:
		io_uring_prep_statx(sqe, x->io.dirfd, x->io.path, x->io.arg, x->io.mask, x->io.stx);
		break;
	case RF__OP_IO + RF_IOP_FALLOCATE:
		io_uring_prep_fallocate(sqe, q->fd, x->io.arg, (off_t)q->off, (off_t)x->io.len);
		break;
	case RF__OP_IO + RF_IOP_RENAMEAT:
		io_uring_prep_renameat(sqe, x->io.dirfd, x->io.path, x->io.dirfd2, x->io.path2,
				       (unsigned)x->io.arg);
		break;
	case RF__OP_IO + RF_IOP_UNLINKAT:
		io_uring_prep_unlinkat(sqe, x->io.dirfd, x->io.path, x->io.arg);
		break;
	case RF__OP_IO + RF_IOP_SOCKET:
		if (slot)
			io_uring_prep_socket_direct_alloc(sqe, x->io.arg, (int)x->io.mode, (int)x->io.mask, 0);
		else
			io_uring_prep_socket(sqe, x->io.arg, (int)x->io.mode, (int)x->io.mask, 0);
		break;
	case RF__OP_IO + RF_IOP_CONNECT:
		io_uring_prep_connect(sqe, q->fd, (struct sockaddr *)&x->addr, x->io.addrlen);
		break;
	case RF__OP_IO + RF_IOP_ACCEPT:
		if (slot)
			io_uring_prep_accept_direct(sqe, q->fd, x->io.peer, x->io.peerlen, x->io.arg, alloc);
		else
			io_uring_prep_accept(sqe, q->fd, x->io.peer, x->io.peerlen, x->io.arg);
		break;
	case RF__OP_ACCEPT_MS:
		if (r->no_multishot)
			io_uring_prep_accept(sqe, q->fd, NULL, NULL, SOCK_CLOEXEC);
		else
			io_uring_prep_multishot_accept(sqe, q->fd, NULL, NULL, SOCK_CLOEXEC);
		if (slot)
			sqe->file_index = IORING_FILE_INDEX_ALLOC;
		break;
	case RF__OP_RECV_MS: {
		struct rf_bufgroup *g = q->u.owner;
		if (r->no_multishot)
			io_uring_prep_recv(sqe, q->fd, NULL, g->bufsz, 0);
		else
			io_uring_prep_recv_multishot(sqe, q->fd, NULL, 0, 0);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = g->bgid;
		break;
	}
	case RF__OP_POLL_MS:
		if (r->no_multishot)
			io_uring_prep_poll_add(sqe, q->fd, (unsigned)q->off);
		else
			io_uring_prep_poll_multishot(sqe, q->fd, (unsigned)q->off);
		break;
	default:
		io_uring_prep_nop(sqe);
		q->scratch = (uint64_t)(int64_t)-EINVAL;
		q->flags |= RF__RQ_FAKE;
		fixed = 0;
	}
	if (fixed)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, rf__req_ud(q));
	if (q->flags & RF__RQ_DEADLINE)
		rf__link_deadline(r, q, sqe);
	return 0;
}

int rf__requeue(struct rf_ring *r, struct rf__req *q)
{
	return q->op >= RF__OP_IO ? rf__ops_queue(r, q) : rf__queue(r, q);
}

static int rf__ops_queue_new(struct rf_ring *r, struct rf__req *q, rf_req_id *id)
{
	int ret = rf__ops_queue(r, q);
	if (ret < 0) {
		rf__req_free(r, q);
		return ret;
	}
	if (id)
		*id = rf__req_id(q);
	return 0;
}

static size_t rf__slen(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

int rf_ring_submit(struct rf_ring *r, const struct rf_io *io, rf_io_cb cb, void *data,
		   rf_req_id *id)
{
	if (r->destroying)
		return -ESHUTDOWN;
	if (!io || (int)io->op < RF_IOP_READ || (int)io->op >= RF__NIOP)
		return -EINVAL;
	uint64_t deadline = io->timeout_ns ? rf_now_ns() + io->timeout_ns : 0;
	unsigned fl = io->flags & (RF_IO_FIXED_FILE | RF_IO_FIXED_BUF | RF_IO_NO_RETRY_SHORT |
				   RF_IO_ALLOC_SLOT);
	switch (io->op) {
	case RF_IOP_READ:
	case RF_IOP_WRITE:
		if (fl & RF_IO_ALLOC_SLOT)
			return -EINVAL;
		return rf__rw(r, io->op == RF_IOP_READ ? RF__OP_READ : RF__OP_WRITE, io->fd, io->buf,
			      io->len, io->off, fl, deadline, cb, data, id);
	case RF_IOP_FSYNC:
		return rf__rw(r, RF__OP_FSYNC, io->fd, NULL, io->arg ? 1 : 0, 0,
			      fl & RF_IO_FIXED_FILE, deadline, cb, data, id);
	default:
		break;
	}
	if (io->op != RF_IOP_SEND_ZC && !rf_ring_op_supported(r, io->op))
		return -EOPNOTSUPP;
	if ((fl & RF_IO_FIXED_BUF) ||
	    ((fl & RF_IO_ALLOC_SLOT) && io->op != RF_IOP_OPENAT && io->op != RF_IOP_SOCKET &&
	     io->op != RF_IOP_ACCEPT))
		return -EINVAL;
	size_t extra = 0;
	int need_ext = 1;
	switch (io->op) {
	case RF_IOP_SEND:
	case RF_IOP_SEND_ZC:
	case RF_IOP_RECV:
		if (!io->buf && io->len)
			return -EINVAL;
		need_ext = 0;
		break;
	case RF_IOP_POLL:
	case RF_IOP_SHUTDOWN:
	case RF_IOP_CLOSE:
	case RF_IOP_NOP:
		need_ext = 0;
		break;
	case RF_IOP_READV:
	case RF_IOP_WRITEV:
		if (!io->iov || !io->iovcnt || io->iovcnt > IOV_MAX)
			return -EINVAL;
		extra = 2 * (size_t)io->iovcnt * sizeof(struct iovec);
		break;
	case RF_IOP_OPENAT:
	case RF_IOP_UNLINKAT:
		if (!io->path)
			return -EINVAL;
		break;
	case RF_IOP_STATX:
		if (!io->path || !io->stx)
			return -EINVAL;
		break;
	case RF_IOP_RENAMEAT:
		if (!io->path || !io->path2)
			return -EINVAL;
		break;
	case RF_IOP_CONNECT:
		if (!io->addr || !io->addrlen || io->addrlen > sizeof(struct sockaddr_storage))
			return -EINVAL;
		break;
	default:
		break;
	}
	struct rf__ext *x = NULL;
	if (need_ext) {
		size_t l1 = rf__slen(io->path), l2 = rf__slen(io->path2);
		x = malloc(sizeof(*x) + extra + l1 + l2);
		if (!x)
			return -ENOMEM;
		x->io = *io;
		char *s = x->strs;
		x->iov = x->wiov = NULL;
		if (extra) {
			x->iov = (struct iovec *)(void *)s;
			x->wiov = x->iov + io->iovcnt;
			memcpy(x->iov, io->iov, io->iovcnt * sizeof(struct iovec));
			s += extra;
		}
		if (l1) {
			memcpy(s, io->path, l1);
			x->io.path = s;
			s += l1;
		}
		if (l2) {
			memcpy(s, io->path2, l2);
			x->io.path2 = s;
		}
		if (io->op == RF_IOP_CONNECT)
			memcpy(&x->addr, io->addr, io->addrlen);
	}
	struct rf__req *q = rf__req_alloc(r, 1);
	if (!q) {
		free(x);
		return -ENOMEM;
	}
	q->ext = x;
	q->op = (uint8_t)(RF__OP_IO + io->op);
	q->fd = io->fd;
	q->flags |= fl;
	q->cb = cb;
	q->data = data;
	q->buf = NULL;
	q->len = 0;
	q->off = 0;
	switch (io->op) {
	case RF_IOP_SEND:
	case RF_IOP_SEND_ZC:
	case RF_IOP_RECV:
		q->buf = io->buf;
		q->len = io->len;
		q->off = (uint32_t)io->arg | (io->op == RF_IOP_RECV ? 0 : MSG_NOSIGNAL);
		if (io->op == RF_IOP_SEND_ZC && r->op_ok[IORING_OP_SEND_ZC])
			q->flags |= RF__RQ_ZC;
		if (r->fault.active &&
		    (r->fault.ops & (io->op == RF_IOP_RECV ? RF__FAULT_RECV : RF__FAULT_SEND)))
			q->flags |= RF__RQ_SOCKFAULT;
		break;
	case RF_IOP_READV:
	case RF_IOP_WRITEV:
		for (unsigned i = 0; i < io->iovcnt; i++)
			q->len += io->iov[i].iov_len;
		q->off = io->off;
		break;
	case RF_IOP_POLL:
		q->off = io->mask;
		break;
	case RF_IOP_SHUTDOWN:
		q->off = (uint32_t)io->arg;
		break;
	case RF_IOP_FALLOCATE:
		q->off = io->off;
		break;
	case RF_IOP_SPLICE:
		q->len = io->len;
		break;
	default:
		break;
	}
	if (deadline) {
		q->deadline = deadline;
		q->flags |= RF__RQ_DEADLINE;
	}
	return rf__ops_queue_new(r, q, id);
}

/* ---- completion of one-shot operations ------------------------------------------------ */

/* The request is over with res; a zero-copy send first waits for its notifications
 * (the kernel's word that it let go of the buffer) -- except in rf_ring_destroy: a
 * peer that never reads would hold the notification back for ever, and the kernel
 * keeps the pages it pinned alive by itself. */
static int rf__ops_done(struct rf_ring *r, struct rf__req *q, int64_t res)
{
	if (q->nnotif && !r->destroying) {
		q->scratch = (uint64_t)res;
		q->flags |= RF__RQ_ZDONE;
		return 0;
	}
	rf__req_finish(r, q, res);
	return 1;
}

static int rf__ops_again(struct rf_ring *r, struct rf__req *q, int ret)
{
	return ret == 0 ? 0 : rf__ops_done(r, q, ret);
}

static int rf__ms_complete(struct rf_ring *r, struct rf__req *q, int32_t res, uint32_t cflags);

int rf__ops_complete(struct rf_ring *r, struct rf__req *q, int32_t res, uint32_t cflags)
{
	if (q->flags & RF__RQ_FAKE) {
		q->flags &= ~RF__RQ_FAKE;
		res = (int32_t)(int64_t)q->scratch;
	}
	if (q->op >= RF__OP_ACCEPT_MS)
		return rf__ms_complete(r, q, res, cflags);
	if (q->op == RF__OP_IO + RF_IOP_SEND_ZC) {
		if (cflags & IORING_CQE_F_NOTIF) {
			if (q->nnotif && --q->nnotif == 0 && (q->flags & RF__RQ_ZDONE)) {
				rf__req_finish(r, q, (int64_t)q->scratch);
				return 1;
			}
			return 0;
		}
		if (cflags & IORING_CQE_F_MORE)
			q->nnotif++;
		/* A socket that does not do zero copy (AF_UNIX): plain sends from here on. */
		if (res == -EOPNOTSUPP && (q->flags & RF__RQ_ZC) && !(q->flags & RF__RQ_CANCELLED)) {
			q->flags &= ~RF__RQ_ZC;
			return rf__ops_again(r, q, rf__ops_queue(r, q));
		}
	}
	if (q->flags & RF__RQ_CANCELLED)
		return rf__ops_done(r, q, -ECANCELED);
	unsigned iop = rf__iop(q);
	switch (iop) {
	case RF_IOP_SEND:
	case RF_IOP_SEND_ZC:
	case RF_IOP_RECV:
	case RF_IOP_READV:
	case RF_IOP_WRITEV:
	case RF_IOP_SPLICE: {
		if (res == -EAGAIN || res == -EINTR)
			return rf__ops_again(r, q, rf__retry(r, q, res));
		if (res < 0)
			return rf__ops_done(r, q, res);
		if ((q->flags & RF__RQ_ZC) && res > 0)
			r->st.zerocopy_sends++;
		if (iop == RF_IOP_RECV || iop == RF_IOP_READV)
			r->st.bytes_read += (uint64_t)res;
		else if (iop != RF_IOP_SPLICE)
			r->st.bytes_written += (uint64_t)res;
		q->done += (size_t)res;
		if (res > 0)
			q->retries = 0;
		int again = res > 0 && q->done < q->len && !(q->flags & RF_IO_NO_RETRY_SHORT);
		if (iop == RF_IOP_RECV && !(q->off & MSG_WAITALL))
			again = 0;
		if (again) {
			r->st.short_resubmits++;
			return rf__ops_again(r, q, rf__ops_queue(r, q));
		}
		return rf__ops_done(r, q, (int64_t)q->done);
	}
	default:
		return rf__ops_done(r, q, res);
	}
}

/* ---- multishot ------------------------------------------------------------------------ */

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
	if (q->op == RF__OP_RECV_MS)
		((struct rf_bufgroup *)q->u.owner)->users--;
	rf__req_free(r, q);
	if (cb) {
		r->cb_depth++;
		cb(data, res, NULL, 0);
		r->cb_depth--;
	}
}

/* Queue a NOP carrying the request's user_data: it completes the request (cancelled)
 * from the ring, as every callback must. */
static int rf__queue_nop(struct rf_ring *r, struct rf__req *q)
{
	int err = 0;
	struct io_uring_sqe *sqe = rf__sqe(r, &err);
	if (!sqe)
		return err;
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data64(sqe, rf__req_ud(q));
	return 0;
}

static int rf__ms_complete(struct rf_ring *r, struct rf__req *q, int32_t res, uint32_t cflags)
{
	int more = (cflags & IORING_CQE_F_MORE) != 0;
	int cancelled = (q->flags & RF__RQ_CANCELLED) != 0;
	struct rf_bufgroup *g = q->op == RF__OP_RECV_MS ? q->u.owner : NULL;
	void *buf = NULL;
	if (g && (cflags & IORING_CQE_F_BUFFER)) {
		unsigned bid = cflags >> IORING_CQE_BUFFER_SHIFT;
		if (bid < g->nbufs) {
			buf = g->bufs + (size_t)bid * g->bufsz;
			g->out[bid] = 1;
			g->avail--;
		}
	}
	int event = q->op == RF__OP_ACCEPT_MS ? res >= 0 : res > 0;
	if (event) {
		if (g)
			r->st.bytes_read += (uint64_t)res;
		q->retries = 0;
		int err = 0;
		if (!more && !cancelled) {
			r->st.multishot_rearms++;
			err = rf__ops_queue(r, q); /* the kernel ended it: rearm */
		}
		r->cb_depth++;
		q->mcb(q->data, res, buf, 1);
		r->cb_depth--;
		if (!more && (cancelled || err)) {
			rf__ms_finish(r, q, cancelled ? -ECANCELED : err);
			return 2;
		}
		return 1;
	}
	if (buf) /* cannot happen: a buffer comes only with data */
		rf_bufgroup_put(g, buf);
	if (more)
		return 0; /* an error that does not end the request: nothing to say */
	if (!cancelled && g && res == -ENOBUFS) {
		if (g->avail)
			return rf__ops_again(r, q, rf__ops_queue(r, q));
		q->flags |= RF__RQ_PARKED;
		q->next_free = g->parked;
		g->parked = q;
		return 0;
	}
	if (!cancelled && (res == -EAGAIN || res == -EINTR) && q->retries < RF__RETRY_MAX) {
		/* at once: u holds the buffer group, not a backoff timeout */
		q->retries++;
		r->st.retries++;
		int ret = rf__ops_queue(r, q);
		if (ret == 0)
			return 0;
		res = ret;
	}
	if (!cancelled && res == -EINVAL && !r->no_multishot) {
		/* A kernel without this multishot flavour: one-shot requests rearmed. */
		r->no_multishot = 1;
		int ret = rf__ops_queue(r, q);
		if (ret == 0)
			return 0;
		res = ret;
	}
	if (cancelled)
		res = -ECANCELED;
	rf__ms_finish(r, q, res);
	return 1;
}

static int rf__ms_start(struct rf_ring *r, int op, int fd, unsigned flags, struct rf_bufgroup *g,
			unsigned events, rf_multi_cb cb, void *data, rf_req_id *id)
{
	if (r->destroying)
		return -ESHUTDOWN;
	if (!cb || (flags & ~(RF_IO_FIXED_FILE | RF_IO_ALLOC_SLOT)) ||
	    ((flags & RF_IO_ALLOC_SLOT) && op != RF__OP_ACCEPT_MS))
		return -EINVAL;
	struct rf__req *q = rf__req_alloc(r, 1);
	if (!q)
		return -ENOMEM;
	q->op = (uint8_t)op;
	q->fd = fd;
	q->flags |= flags;
	q->mcb = cb;
	q->data = data;
	q->buf = NULL;
	q->len = 0;
	q->off = events;
	q->u.owner = g;
	if (g)
		g->users++;
	int ret = rf__ops_queue(r, q);
	if (ret < 0) {
		if (g)
			g->users--;
		rf__req_free(r, q);
		return ret;
	}
	if (id)
		*id = rf__req_id(q);
	return 0;
}

int rf_ring_accept_multishot(struct rf_ring *r, int fd, unsigned flags, rf_multi_cb cb,
			     void *data, rf_req_id *id)
{
	return rf__ms_start(r, RF__OP_ACCEPT_MS, fd, flags, NULL, 0, cb, data, id);
}

int rf_ring_recv_multishot(struct rf_ring *r, int fd, struct rf_bufgroup *g, unsigned flags,
			   rf_multi_cb cb, void *data, rf_req_id *id)
{
	if (!g || g->r != r)
		return -EINVAL;
	return rf__ms_start(r, RF__OP_RECV_MS, fd, flags, g, 0, cb, data, id);
}

int rf_ring_poll_multishot(struct rf_ring *r, int fd, unsigned events, unsigned flags,
			   rf_multi_cb cb, void *data, rf_req_id *id)
{
	return rf__ms_start(r, RF__OP_POLL_MS, fd, flags, NULL, events, cb, data, id);
}

int rf_ring_cancel(struct rf_ring *r, rf_req_id id)
{
	struct rf__req *q = rf__req_by_id(r, id);
	if (!q || q->op >= RF__OP_INTERNAL)
		return -ENOENT;
	if (q->flags & RF__RQ_CANCELLED)
		return 0;
	q->flags |= RF__RQ_CANCELLED;
	if (q->flags & RF__RQ_PARKED) {
		rf__unpark(q->u.owner, q);
		return rf__queue_nop(r, q);
	}
	rf__cancel_req(r, q);
	return 0;
}

void rf__ops_teardown(struct rf_ring *r)
{
	/* zero-copy sends that only wait for notifications: over now (rf__ops_done) */
	for (unsigned s = 0; s < r->nslabs; s++)
		for (unsigned i = 0; i < RF__SLAB_SIZE; i++) {
			struct rf__req *q = &r->slabs[s][i];
			if (q->live && (q->flags & RF__RQ_ZDONE))
				rf__req_finish(r, q, -ECANCELED);
		}
	for (struct rf_bufgroup *g = r->groups; g; g = g->next)
		while (g->parked) {
			struct rf__req *q = g->parked;
			rf__unpark(g, q);
			if (rf__queue_nop(r, q) < 0)
				rf__ms_finish(r, q, -ECANCELED);
		}
}

/* ---- buffer groups --------------------------------------------------------------------- */

int rf_bufgroup_create(struct rf_ring *r, unsigned nbufs, size_t bufsz, struct rf_bufgroup **out)
{
	*out = NULL;
	if (!nbufs || nbufs > 32768 || (nbufs & (nbufs - 1)) || !bufsz || bufsz > UINT32_MAX)
		return -EINVAL;
	if (r->next_bgid == UINT16_MAX)
		return -ENOSPC;
	struct rf_bufgroup *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->out = calloc(nbufs, 1);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	g->br_len = ((size_t)nbufs * sizeof(struct io_uring_buf) + page - 1) / page * page;
	g->map_len = ((size_t)nbufs * bufsz + page - 1) / page * page;
	void *br = mmap(NULL, g->br_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *bufs = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int ret = 0;
	if (!g->out || br == MAP_FAILED || bufs == MAP_FAILED) {
		ret = -ENOMEM;
		goto fail;
	}
	g->br = br;
	g->bufs = bufs;
	g->r = r;
	g->bufsz = bufsz;
	g->nbufs = nbufs;
	g->bgid = r->next_bgid;
	io_uring_buf_ring_init(g->br);
	struct io_uring_buf_reg reg = { .ring_addr = (uintptr_t)br, .ring_entries = nbufs,
					.bgid = g->bgid };
	ret = io_uring_register_buf_ring(&r->ring, &reg, 0);
	if (ret < 0)
		goto fail;
	r->next_bgid++;
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
	if (p < g->bufs || p >= g->bufs + (size_t)g->nbufs * g->bufsz ||
	    (size_t)(p - g->bufs) % g->bufsz)
		return -EINVAL;
	unsigned bid = (unsigned)((size_t)(p - g->bufs) / g->bufsz);
	if (!g->out[bid])
		return -EALREADY;
	g->out[bid] = 0;
	io_uring_buf_ring_add(g->br, p, (unsigned)g->bufsz, (unsigned short)bid,
			      io_uring_buf_ring_mask(g->nbufs), 0);
	io_uring_buf_ring_advance(g->br, 1);
	g->avail++;
	while (g->parked) {
		struct rf__req *q = g->parked;
		rf__unpark(g, q);
		if (rf__ops_queue(g->r, q) < 0) { /* the SQ cannot be flushed: try later */
			q->flags |= RF__RQ_PARKED;
			q->next_free = g->parked;
			g->parked = q;
			break;
		}
	}
	return 0;
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
	munmap(g->br, g->br_len);
	munmap(g->bufs, g->map_len);
	free(g->out);
	free(g);
}

int rf_bufgroup_destroy(struct rf_bufgroup *g)
{
	if (!g)
		return 0;
	if (g->users)
		return -EBUSY;
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

/* ---- one function per operation ---------------------------------------------------------- */

int rf_ring_openat(struct rf_ring *r, int dirfd, const char *path, int oflags, unsigned mode,
		   unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_OPENAT, .flags = flags, .dirfd = dirfd, .path = path,
			    .arg = oflags, .mode = mode };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_close(struct rf_ring *r, int fd, unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_CLOSE, .flags = flags, .fd = fd };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_statx(struct rf_ring *r, int dirfd, const char *path, int atflags, unsigned mask,
		  struct statx *stx, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_STATX, .dirfd = dirfd, .path = path, .arg = atflags,
			    .mask = mask, .stx = stx };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_readv(struct rf_ring *r, int fd, const struct iovec *iov, unsigned iovcnt,
		  uint64_t off, unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_READV, .flags = flags, .fd = fd, .iov = iov,
			    .iovcnt = iovcnt, .off = off };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_writev(struct rf_ring *r, int fd, const struct iovec *iov, unsigned iovcnt,
		   uint64_t off, unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_WRITEV, .flags = flags, .fd = fd, .iov = iov,
			    .iovcnt = iovcnt, .off = off };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_fallocate(struct rf_ring *r, int fd, int mode, uint64_t off, uint64_t len,
		      unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_FALLOCATE, .flags = flags, .fd = fd, .arg = mode,
			    .off = off, .len = (size_t)len };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_renameat(struct rf_ring *r, int olddirfd, const char *oldpath, int newdirfd,
		     const char *newpath, unsigned rflags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_RENAMEAT, .dirfd = olddirfd, .path = oldpath,
			    .dirfd2 = newdirfd, .path2 = newpath, .arg = (int)rflags };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_unlinkat(struct rf_ring *r, int dirfd, const char *path, int atflags,
		     rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_UNLINKAT, .dirfd = dirfd, .path = path, .arg = atflags };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_socket(struct rf_ring *r, int domain, int type, int protocol, unsigned flags,
		   rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_SOCKET, .flags = flags, .arg = domain,
			    .mode = (unsigned)type, .mask = (unsigned)protocol };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_connect(struct rf_ring *r, int fd, const struct sockaddr *addr, socklen_t addrlen,
		    unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_CONNECT, .flags = flags, .fd = fd, .addr = addr,
			    .addrlen = addrlen };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_accept(struct rf_ring *r, int fd, struct sockaddr *peer, socklen_t *peerlen,
		   unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_ACCEPT, .flags = flags, .fd = fd, .peer = peer,
			    .peerlen = peerlen, .arg = SOCK_CLOEXEC };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_send(struct rf_ring *r, int fd, const void *buf, size_t len, int msg_flags,
		 int zerocopy, unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = zerocopy ? RF_IOP_SEND_ZC : RF_IOP_SEND, .flags = flags, .fd = fd,
			    .buf = (void *)buf, .len = len, .arg = msg_flags };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_recv(struct rf_ring *r, int fd, void *buf, size_t len, int msg_flags,
		 unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_RECV, .flags = flags, .fd = fd, .buf = buf, .len = len,
			    .arg = msg_flags };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_shutdown(struct rf_ring *r, int fd, int how, unsigned flags, rf_io_cb cb, void *data,
		     rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_SHUTDOWN, .flags = flags, .fd = fd, .arg = how };
	return rf_ring_submit(r, &io, cb, data, id);
}

int rf_ring_poll(struct rf_ring *r, int fd, unsigned events, unsigned flags, rf_io_cb cb,
		 void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_POLL, .flags = flags, .fd = fd, .mask = events };
	return rf_ring_submit(r, &io, cb, data, id);
}
