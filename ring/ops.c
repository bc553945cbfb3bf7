/* ring/ops.c -- the operations of ring-ops.h: one-shot requests from a struct rf_io
 * (metadata, sockets, polls, readv/writev), zero-copy sends, multishot accept / recv /
 * poll (rearmed where the kernel ends them), provided-buffer groups, and cancel.
 * Requests share the pool, retry, deadline and teardown machinery of submit.c and
 * dispatch.c: a request is an rf__req whose op is RF__OP_IO + its rf_iop, or one of
 * RF__OP_*_MS. */
#include "ring-impl.h"

#include "rf-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

/* What a descriptor needs past submission: a copy of it, with its strings, socket
 * address and iovec array, and a working iovec array for the current piece. */
struct rf__ext {
	struct rf_io io;
	struct open_how how;         /* openat with RF_IO_BENEATH: read at submission */
	struct sockaddr_storage addr;
	struct iovec *iov, *wiov;
	char strs[];
};



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

/* For messages: "rf_ring_submit(openat): ..." */
static const char *const rf__iop_name[] = {
	[RF_IOP_READ] = "read",           [RF_IOP_WRITE] = "write",
	[RF_IOP_READV] = "readv",         [RF_IOP_WRITEV] = "writev",
	[RF_IOP_FSYNC] = "fsync",         [RF_IOP_OPENAT] = "openat",
	[RF_IOP_CLOSE] = "close",         [RF_IOP_STATX] = "statx",
	[RF_IOP_FALLOCATE] = "fallocate", [RF_IOP_RENAMEAT] = "renameat",
	[RF_IOP_UNLINKAT] = "unlinkat",   [RF_IOP_SOCKET] = "socket",
	[RF_IOP_CONNECT] = "connect",     [RF_IOP_ACCEPT] = "accept",
	[RF_IOP_SEND] = "send",           [RF_IOP_SEND_ZC] = "send_zc",
	[RF_IOP_RECV] = "recv",           [RF_IOP_SHUTDOWN] = "shutdown",
	[RF_IOP_POLL] = "poll",           [RF_IOP_NOP] = "nop",
	[RF_IOP_SPLICE] = "splice",
};

void rf__ops_probe(struct rf_ring *r)
{
	/* multishot recv came with 6.0 (accept 5.19, poll 5.13): older kernels get the
	 * rearmed one-shot requests */
	struct utsname u;
	unsigned maj = 0, min = 0;
	if (uname(&u) == 0 && sscanf(u.release, "%u.%u", &maj, &min) == 2 && maj < 6)
		r->no_multishot = 1;
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
int rf__ops_queue(struct rf_ring *r, struct rf__req *q)
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
		if (q->flags & RF_IO_BENEATH) {
			x->how = (struct open_how){ .flags = (uint64_t)(unsigned)x->io.arg,
						    .resolve = RESOLVE_BENEATH };
			/* openat2 wants no mode but with these (__O_TMPFILE holds O_DIRECTORY's
			 * bit: O_TMPFILE only when all of it is there) */
			if ((x->io.arg & O_CREAT) || (x->io.arg & O_TMPFILE) == O_TMPFILE)
				x->how.mode = x->io.mode;
			if (slot)
				io_uring_prep_openat2_direct(sqe, x->io.dirfd, x->io.path, &x->how, alloc);
			else
				io_uring_prep_openat2(sqe, x->io.dirfd, x->io.path, &x->how);
		} else if (slot)
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
	if (rf__past_deadline(q))
		return -ETIMEDOUT;
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

#define RF__SUBMIT "rf_ring_submit(%s): "

/* What rf_ring_submit refuses before it builds a request: the op, the flags it may
 * carry, the kernel's support, and the pointers and sizes the op needs. */
static int rf__io_check(struct rf_ring *r, const struct rf_io *io)
{
	if (!io)
		return rf__fail(-EINVAL, "rf_ring_submit: io is NULL, expected an operation");
	if ((int)io->op < RF_IOP_READ || (int)io->op >= RF__NIOP)
		return rf__fail(-EINVAL, "rf_ring_submit: io->op = %d, expected an enum rf_iop "
				"(%d to %d)", (int)io->op, RF_IOP_READ, RF__NIOP - 1);
	const char *name = rf__iop_name[io->op];
	unsigned fl = io->flags & (RF_IO_FIXED_FILE | RF_IO_FIXED_BUF | RF_IO_NO_RETRY_SHORT |
				   RF_IO_ALLOC_SLOT | RF_IO_BENEATH);
	switch (io->op) {
	case RF_IOP_READ:
	case RF_IOP_WRITE:
	case RF_IOP_FSYNC:
		if (fl & RF_IO_ALLOC_SLOT)
			return rf__fail(-EINVAL, RF__SUBMIT "RF_IO_ALLOC_SLOT is for openat, "
					"socket and accept only", name);
		if (fl & RF_IO_BENEATH)
			return rf__fail(-EINVAL, RF__SUBMIT "RF_IO_BENEATH is for openat only",
					name);
		return 0; /* the rest: rf__rw's */
	default:
		break;
	}
	if (io->op != RF_IOP_SEND_ZC && !rf_ring_op_supported(r, io->op))
		return rf__fail(-EOPNOTSUPP, RF__SUBMIT "the running kernel lacks this operation",
				name);
	if (fl & RF_IO_FIXED_BUF)
		return rf__fail(-EINVAL, RF__SUBMIT "RF_IO_FIXED_BUF is for read and write only",
				name);
	if ((fl & RF_IO_ALLOC_SLOT) && io->op != RF_IOP_OPENAT && io->op != RF_IOP_SOCKET &&
	    io->op != RF_IOP_ACCEPT)
		return rf__fail(-EINVAL, RF__SUBMIT "RF_IO_ALLOC_SLOT is for openat, socket and "
				"accept only", name);
	if ((fl & RF_IO_BENEATH) && io->op != RF_IOP_OPENAT)
		return rf__fail(-EINVAL, RF__SUBMIT "RF_IO_BENEATH is for openat only", name);
	switch (io->op) {
	case RF_IOP_SEND:
	case RF_IOP_SEND_ZC:
	case RF_IOP_RECV:
		if (!io->buf && io->len)
			return rf__fail(-EINVAL, RF__SUBMIT "io->buf is NULL with io->len = %zu, "
					"expected a buffer", name, io->len);
		break;
	case RF_IOP_READV:
	case RF_IOP_WRITEV:
		if (!io->iov || !io->iovcnt || io->iovcnt > IOV_MAX)
			return rf__fail(-EINVAL, RF__SUBMIT "io->iov = %p with io->iovcnt = %u, "
					"expected an iovec array of 1 to %d", name,
					(const void *)io->iov, io->iovcnt, IOV_MAX);
		break;
	case RF_IOP_OPENAT:
	case RF_IOP_UNLINKAT:
		if (!io->path)
			return rf__fail(-EINVAL, RF__SUBMIT "io->path is NULL, expected a path",
					name);
		break;
	case RF_IOP_STATX:
		if (!io->path || !io->stx)
			return rf__fail(-EINVAL, RF__SUBMIT "io->%s is NULL, expected %s", name,
					!io->path ? "path" : "stx",
					!io->path ? "a path" : "a struct statx to fill");
		break;
	case RF_IOP_RENAMEAT:
		if (!io->path || !io->path2)
			return rf__fail(-EINVAL, RF__SUBMIT "io->%s is NULL, expected a path", name,
					!io->path ? "path" : "path2");
		break;
	case RF_IOP_CONNECT:
		if (!io->addr || !io->addrlen || io->addrlen > sizeof(struct sockaddr_storage))
			return rf__fail(-EINVAL, RF__SUBMIT "io->addr = %p with io->addrlen = %u, "
					"expected an address of 1 to %zu bytes", name,
					(const void *)io->addr, (unsigned)io->addrlen,
					sizeof(struct sockaddr_storage));
		break;
	default:
		break;
	}
	return 0;
}

int rf_ring_check_io(struct rf_ring *r, const struct rf_io *io)
{
	return rf__io_check(r, io);
}

int rf_ring_submit(struct rf_ring *r, const struct rf_io *io, rf_io_cb cb, void *data,
		   rf_req_id *id)
{
	int err;

	if (r->destroying)
		return rf__shutdown("rf_ring_submit");
	if ((err = rf__io_check(r, io)) < 0)
		return err;
	uint64_t deadline = rf__deadline_after(io->timeout_ns);
	unsigned fl = io->flags & (RF_IO_FIXED_FILE | RF_IO_FIXED_BUF | RF_IO_NO_RETRY_SHORT |
				   RF_IO_ALLOC_SLOT | RF_IO_BENEATH);
	switch (io->op) {
	case RF_IOP_READ:
	case RF_IOP_WRITE:
		return rf__rw("rf_ring_submit", r,
			      io->op == RF_IOP_READ ? RF__OP_READ : RF__OP_WRITE, io->fd, io->buf,
			      io->len, io->off, fl, deadline, cb, data, id);
	case RF_IOP_FSYNC:
		return rf__rw("rf_ring_submit", r, RF__OP_FSYNC, io->fd, NULL, io->arg ? 1 : 0, 0,
			      fl & RF_IO_FIXED_FILE, deadline, cb, data, id);
	default:
		break;
	}
	size_t extra = 0;
	int need_ext = 1;
	switch (io->op) {
	case RF_IOP_SEND:
	case RF_IOP_SEND_ZC:
	case RF_IOP_RECV:
	case RF_IOP_POLL:
	case RF_IOP_SHUTDOWN:
	case RF_IOP_CLOSE:
	case RF_IOP_NOP:
		need_ext = 0;
		break;
	case RF_IOP_READV:
	case RF_IOP_WRITEV:
		extra = 2 * (size_t)io->iovcnt * sizeof(struct iovec);
		break;
	default:
		break;
	}
	struct rf__ext *x = NULL;
	if (need_ext) {
		size_t l1 = rf__slen(io->path), l2 = rf__slen(io->path2);
		x = malloc(sizeof(*x) + extra + l1 + l2);
		if (!x)
			return rf__no_req("rf_ring_submit");
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
		return rf__no_req("rf_ring_submit");
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
	int ret = rf__ops_queue_new(r, q, id);
	return ret < 0 ? rf__not_queued("rf_ring_submit", ret) : 0;
}

/* ---- completion of one-shot operations ------------------------------------------------ */

/* The request is over with res; a zero-copy send first waits for its notifications
 * (the kernel's word that it let go of the buffer) -- except in rf_ring_destroy: a
 * peer that never reads would hold the notification back for ever, and the kernel
 * keeps the pages it pinned alive by itself. */
int rf__ops_done(struct rf_ring *r, struct rf__req *q, int64_t res)
{
	if (q->nnotif && !r->destroying) {
		q->scratch = (uint64_t)res;
		q->flags |= RF__RQ_ZDONE;
		return 0;
	}
	rf__req_finish(r, q, res);
	return 1;
}

int rf__ops_again(struct rf_ring *r, struct rf__req *q, int ret)
{
	return ret == 0 ? 0 : rf__ops_done(r, q, ret);
}


int rf__ops_complete(struct rf_ring *r, struct rf__req *q, int32_t res, uint32_t cflags)
{
	/* a zero-copy notification first: it may come while a faked piece is queued */
	if (q->op == RF__OP_IO + RF_IOP_SEND_ZC && (cflags & IORING_CQE_F_NOTIF)) {
		if (q->nnotif && --q->nnotif == 0 && (q->flags & RF__RQ_ZDONE)) {
			rf__req_finish(r, q, (int64_t)q->scratch);
			return 1;
		}
		return 0;
	}
	if (q->flags & RF__RQ_FAKE) {
		q->flags &= ~RF__RQ_FAKE;
		res = (int32_t)(int64_t)q->scratch;
	}
	if (q->op >= RF__OP_ACCEPT_MS)
		return rf__ms_complete(r, q, res, cflags);
	if (q->op == RF__OP_IO + RF_IOP_SEND_ZC) {
		if (cflags & IORING_CQE_F_MORE)
			q->nnotif++;
		/* A socket that does not do zero copy (AF_UNIX): plain sends from here on. */
		if (res == -EOPNOTSUPP && (q->flags & RF__RQ_ZC) && !(q->flags & RF__RQ_CANCELLED)) {
			q->flags &= ~RF__RQ_ZC;
			return rf__ops_again(r, q, rf__ops_queue(r, q));
		}
	}
	unsigned iop = rf__iop(q);
	if ((q->flags & RF__RQ_CANCELLED) && res >= 0 &&
	    (iop == RF_IOP_OPENAT || iop == RF_IOP_SOCKET || iop == RF_IOP_ACCEPT)) {
		/* it made a file before the cancel took: never leak it */
		if (!r->destroying)
			return rf__ops_done(r, q, res);
		if (!(q->flags & RF_IO_ALLOC_SLOT))
			close(res); /* (a slot goes with the ring's table) */
	}
	if ((q->flags & RF__RQ_CANCELLED) && res > 0 && iop == RF_IOP_RECV && !r->destroying)
		return rf__ops_done(r, q, (int64_t)q->done + res); /* bytes taken: report them */
	if (q->flags & RF__RQ_CANCELLED)
		return rf__ops_done(r, q, -ECANCELED);
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
			return rf__ops_again(r, q, rf__requeue(r, q));
		}
		return rf__ops_done(r, q, (int64_t)q->done);
	}
	default:
		return rf__ops_done(r, q, res);
	}
}

