/* ring/prep.c -- the first stage of every request: its kind's prep fills the SQE of
 * its current piece (rf__queue in submit.c takes the SQE and adds the fixed-file flag,
 * the user_data and the linked deadline). One function per kind or family of kinds,
 * named in kind.c's table; none queues, completes or calls back. The piece of a
 * transfer starts q->done bytes in and is at most RF__MAX_SQE_LEN long. */
#include "ring-impl.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

/* The length of the current piece: what is left, at most RF__MAX_SQE_LEN. */
static inline unsigned rf__piece(const struct rf__req *q)
{
	size_t rem = q->len - q->done;
	return rem > RF__MAX_SQE_LEN ? RF__MAX_SQE_LEN : (unsigned)rem;
}

/* The file offset of the current piece (UINT64_MAX: the file position). */
static inline uint64_t rf__piece_off(const struct rf__req *q)
{
	return q->off == UINT64_MAX ? UINT64_MAX : q->off + q->done;
}

/* ---- transfers --------------------------------------------------------------------------- */

/* The registered buffer holding a fixed-buffer request's piece at p, looked up at each
 * piece: areas registered or unregistered since the request began renumber the table
 * (rf_ring_unregister_memory closes the gap), so an index kept from the submission
 * named another area or none (-EFAULT for the rest of a short read). 1 and *bi, or 0
 * when no registered area holds it any more: the piece then goes as a plain read or
 * write into the same memory, which the caller still owns -- the request finishes as
 * ring.h promises. */
static int rf__fixed_index(struct rf_ring *r, const struct rf__req *q, const char *p,
			   uint16_t *bi)
{
	return (q->flags & RF_IO_FIXED_BUF) && rf__find_buf(r, p, rf__piece(q), bi) == 0;
}

int rf__prep_read(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	char *p = q->buf + q->done;
	uint16_t bi;
	if (rf__fixed_index(r, q, p, &bi))
		io_uring_prep_read_fixed(sqe, q->fd, p, rf__piece(q), rf__piece_off(q), bi);
	else
		io_uring_prep_read(sqe, q->fd, p, rf__piece(q), rf__piece_off(q));
	return 0;
}

int rf__prep_write(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	char *p = q->buf + q->done;
	uint16_t bi;
	if (rf__fixed_index(r, q, p, &bi))
		io_uring_prep_write_fixed(sqe, q->fd, p, rf__piece(q), rf__piece_off(q), bi);
	else
		io_uring_prep_write(sqe, q->fd, p, rf__piece(q), rf__piece_off(q));
	return 0;
}

/* readv, writev: the working iovec array holds what is left after q->done. */
int rf__prep_vec(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	struct rf__ext *x = q->ext;
	const struct iovec *iov = x->io.iov;
	size_t skip = q->done;
	unsigned i = 0, n = 0;
	while (i < x->io.iovcnt && skip >= iov[i].iov_len)
		skip -= iov[i++].iov_len;
	for (; i < x->io.iovcnt; i++, n++) {
		x->wiov[n].iov_base = (char *)iov[i].iov_base + skip;
		x->wiov[n].iov_len = iov[i].iov_len - skip;
		skip = 0;
	}
	if (q->kind == RF_IOP_READV)
		io_uring_prep_readv(sqe, q->fd, x->wiov, n, rf__piece_off(q));
	else
		io_uring_prep_writev(sqe, q->fd, x->wiov, n, rf__piece_off(q));
	return 0;
}

/* send, send_zc, recv. With RF_FAULT_INJECT's send/recv the fault is decided here,
 * before the piece goes out (a socket cannot be re-read): an error becomes a NOP whose
 * result the completion takes from scratch, a short count shrinks the piece. */
int rf__prep_sock(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	unsigned n = rf__piece(q);
	char *p = q->buf + q->done;
	if (q->flags & RF__RQ_SOCKFAULT) {
		int32_t f = rf__fault_sock(r, &n);
		if (f) {
			io_uring_prep_nop(sqe);
			q->scratch = (uint64_t)(int64_t)f;
			q->flags |= RF__RQ_FAKE;
			return 1;
		}
	}
	if (q->kind == RF_IOP_RECV)
		io_uring_prep_recv(sqe, q->fd, p, n, (int)q->off & ~MSG_WAITALL);
	else if (q->flags & RF__RQ_ZC)
		io_uring_prep_send_zc(sqe, q->fd, p, n, (int)q->off, 0);
	else
		io_uring_prep_send(sqe, q->fd, p, n, (int)q->off);
	return 0;
}

int rf__prep_splice(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	struct rf__ext *x = q->ext;
	int64_t in = x->io.off == UINT64_MAX ? -1 : (int64_t)(x->io.off + q->done);
	int64_t out = x->io.off2 == UINT64_MAX ? -1 : (int64_t)(x->io.off2 + q->done);
	io_uring_prep_splice(sqe, q->fd, in, x->io.fd2, out, rf__piece(q), (unsigned)x->io.arg);
	return 1; /* SPLICE_F_FD_IN_FIXED would say it; not offered */
}

/* ---- one result ---------------------------------------------------------------------------- */

int rf__prep_fsync(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	io_uring_prep_fsync(sqe, q->fd, q->len ? IORING_FSYNC_DATASYNC : 0); /* len: datasync */
	return 0;
}

int rf__prep_timeout(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	io_uring_prep_timeout(sqe, &q->u.ts, 0, 0);
	return 0;
}

int rf__prep_openat(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	struct rf__ext *x = q->ext;
	unsigned alloc = IORING_FILE_INDEX_ALLOC - 1; /* liburing adds 1 */
	int slot = (q->flags & RF_IO_ALLOC_SLOT) != 0;
	/* a slot has no close-on-exec: the kernel refuses O_CLOEXEC there (-EINVAL) */
	int oflags = slot ? x->io.arg & ~O_CLOEXEC : x->io.arg;
	if (q->flags & RF_IO_BENEATH) {
		x->how = (struct open_how){ .flags = (uint64_t)(unsigned)oflags,
					    .resolve = RESOLVE_BENEATH };
		/* openat2 wants no mode but with these (__O_TMPFILE holds O_DIRECTORY's bit:
		 * O_TMPFILE only when all of it is there) */
		if ((x->io.arg & O_CREAT) || (x->io.arg & O_TMPFILE) == O_TMPFILE)
			x->how.mode = x->io.mode;
		if (slot)
			io_uring_prep_openat2_direct(sqe, x->io.dirfd, x->io.path, &x->how, alloc);
		else
			io_uring_prep_openat2(sqe, x->io.dirfd, x->io.path, &x->how);
	} else if (slot) {
		io_uring_prep_openat_direct(sqe, x->io.dirfd, x->io.path, oflags,
					    (mode_t)x->io.mode, alloc);
	} else {
		io_uring_prep_openat(sqe, x->io.dirfd, x->io.path, x->io.arg, (mode_t)x->io.mode);
	}
	return 0;
}

int rf__prep_close(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	if (q->flags & RF_IO_FIXED_FILE)
		io_uring_prep_close_direct(sqe, (unsigned)q->fd);
	else
		io_uring_prep_close(sqe, q->fd);
	return 1; /* the slot is the target, not a file to look up */
}

int rf__prep_statx(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	struct rf__ext *x = q->ext;
	io_uring_prep_statx(sqe, x->io.dirfd, x->io.path, x->io.arg, x->io.mask, x->io.stx);
	return 0;
}

int rf__prep_fallocate(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	struct rf__ext *x = q->ext;
	io_uring_prep_fallocate(sqe, q->fd, x->io.arg, (off_t)q->off, (off_t)x->io.len);
	return 0;
}

int rf__prep_renameat(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	struct rf__ext *x = q->ext;
	io_uring_prep_renameat(sqe, x->io.dirfd, x->io.path, x->io.dirfd2, x->io.path2,
			       (unsigned)x->io.arg);
	return 0;
}

int rf__prep_unlinkat(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	struct rf__ext *x = q->ext;
	io_uring_prep_unlinkat(sqe, x->io.dirfd, x->io.path, x->io.arg);
	return 0;
}

int rf__prep_socket(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	struct rf__ext *x = q->ext;
	if (q->flags & RF_IO_ALLOC_SLOT) /* no SOCK_CLOEXEC for a slot (-EINVAL otherwise) */
		io_uring_prep_socket_direct_alloc(sqe, x->io.arg, (int)x->io.mode & ~SOCK_CLOEXEC,
						  (int)x->io.mask, 0);
	else
		io_uring_prep_socket(sqe, x->io.arg, (int)x->io.mode, (int)x->io.mask, 0);
	return 0;
}

int rf__prep_connect(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	struct rf__ext *x = q->ext;
	io_uring_prep_connect(sqe, q->fd, x->io.addr, x->io.addrlen);
	return 0;
}

int rf__prep_accept(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	struct rf__ext *x = q->ext;
	if (q->flags & RF_IO_ALLOC_SLOT) /* a slot has no close-on-exec: the kernel refuses
					  * SOCK_CLOEXEC there (-EINVAL) */
		io_uring_prep_accept_direct(sqe, q->fd, x->io.peer, x->io.peerlen,
					    x->io.arg & ~SOCK_CLOEXEC,
					    IORING_FILE_INDEX_ALLOC - 1); /* liburing adds 1 */
	else
		io_uring_prep_accept(sqe, q->fd, x->io.peer, x->io.peerlen, x->io.arg);
	return 0;
}

int rf__prep_shutdown(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	io_uring_prep_shutdown(sqe, q->fd, (int)q->off);
	return 0;
}

int rf__prep_poll(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	io_uring_prep_poll_add(sqe, q->fd, (unsigned)q->off);
	return 0;
}

int rf__prep_nop(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	io_uring_prep_nop(sqe);
	return 0;
}

/* ---- multishot (one-shot where the ring runs without: rearmed by the completion) -------- */

int rf__prep_accept_ms(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	int fl = q->flags & RF_IO_ALLOC_SLOT ? 0 : SOCK_CLOEXEC; /* none for a slot */
	if (r->no_multishot)
		io_uring_prep_accept(sqe, q->fd, NULL, NULL, fl);
	else
		io_uring_prep_multishot_accept(sqe, q->fd, NULL, NULL, fl);
	if (q->flags & RF_IO_ALLOC_SLOT)
		sqe->file_index = IORING_FILE_INDEX_ALLOC;
	return 0;
}

int rf__prep_recv_ms(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	struct rf_bufgroup *g = q->u.owner;
	if (r->no_multishot)
		io_uring_prep_recv(sqe, q->fd, NULL, g->bufsz, 0);
	else
		io_uring_prep_recv_multishot(sqe, q->fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = g->bgid;
	return 0;
}

int rf__prep_poll_ms(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	if (r->no_multishot)
		io_uring_prep_poll_add(sqe, q->fd, (unsigned)q->off);
	else
		io_uring_prep_poll_multishot(sqe, q->fd, (unsigned)q->off);
	return 0;
}

/* ---- the ring's own eventfd reads (watches, a notifier's fallback) ------------------------ */

/* 8 bytes into q->scratch, which lives as long as the request. */
int rf__prep_efd_read(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	io_uring_prep_read(sqe, q->fd, &q->scratch, 8, 0);
	return 0;
}

/* A non-blocking eventfd that said -EAGAIN: wait for it to become readable. */
int rf__prep_efd_poll(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe)
{
	io_uring_prep_poll_add(sqe, q->fd, POLLIN);
	return 0;
}
