/* ringflow/ring-ops.h -- the ring's operations beyond file reads and writes: file
 * metadata (openat, statx, close, readv/writev, fallocate, rename, unlink), sockets
 * (socket, connect, accept, send, recv, shutdown; zero-copy send), polls on any fd,
 * provided-buffer groups for receives, and per-request deadlines. One descriptor
 * (struct rf_io) describes any one-shot operation; rf_ring_submit queues it and the
 * named functions below fill one in. Multishot operations (accept, recv into a buffer
 * group, poll) keep one request alive across many completions.
 * The ring's owner thread only, like ring.h. Semantics per operation: ring/README.md,
 * "Operations".
 */
#ifndef RINGFLOW_RING_OPS_H
#define RINGFLOW_RING_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "ring.h"

#ifdef __cplusplus
extern "C" {
#endif

struct statx;

enum rf_iop {
	RF_IOP_READ = 1,  /* fd, buf, len, off (UINT64_MAX: file position) -> bytes */
	RF_IOP_WRITE,     /* fd, buf, len, off -> bytes */
	RF_IOP_READV,     /* fd, iov, iovcnt, off -> bytes (short transfers resubmitted) */
	RF_IOP_WRITEV,    /* fd, iov, iovcnt, off -> bytes */
	RF_IOP_FSYNC,     /* fd, arg (1: fdatasync) -> 0 */
	RF_IOP_OPENAT,    /* dirfd, path, arg (O_* flags), mode -> fd (or fixed slot) */
	RF_IOP_CLOSE,     /* fd (or fixed slot with RF_IO_FIXED_FILE) -> 0 */
	RF_IOP_STATX,     /* dirfd, path, arg (AT_* flags), mask, stx -> 0 */
	RF_IOP_FALLOCATE, /* fd, arg (FALLOC_FL_* mode), off, len -> 0 */
	RF_IOP_RENAMEAT,  /* dirfd, path, dirfd2, path2, arg (RENAME_* flags) -> 0 */
	RF_IOP_UNLINKAT,  /* dirfd, path, arg (AT_REMOVEDIR or 0) -> 0 */
	RF_IOP_SOCKET,    /* arg (domain), mode (type), mask (protocol) -> fd (or slot) */
	RF_IOP_CONNECT,   /* fd, addr, addrlen -> 0 */
	RF_IOP_ACCEPT,    /* fd, peer, peerlen (may be NULL), arg (SOCK_* flags) -> fd */
	RF_IOP_SEND,      /* fd, buf, len, arg (MSG_* flags) -> bytes (short sends resubmitted) */
	RF_IOP_SEND_ZC,   /* as SEND, zero-copy where the kernel and socket allow it */
	RF_IOP_RECV,      /* fd, buf, len, arg (MSG_* flags; MSG_WAITALL: until len or EOF) -> bytes */
	RF_IOP_SHUTDOWN,  /* fd, arg (SHUT_RD/WR/RDWR) -> 0 */
	RF_IOP_POLL,      /* fd, mask (POLLIN, ...) -> the events that fired */
	RF_IOP_NOP,       /* nothing -> 0 (a completion on the next turn) */
	RF_IOP_SPLICE,    /* fd, off (UINT64_MAX: none, a pipe) -> fd2, off2, len, arg
			   * (SPLICE_F_* flags) -> bytes moved without a copy through user
			   * memory; one side must be a pipe. Short moves are resubmitted
			   * unless RF_IO_NO_RETRY_SHORT (filling a pipe: the caller drains it) */
};

/* One operation. Zero what you do not use. Pointers that the kernel fills in (buf of
 * a read, stx, peer, peerlen) or reads during the transfer (buf of a write/send,
 * iov[].iov_base) must stay valid until the callback runs; path, path2, addr and the
 * iov array itself are copied at submission and may go when rf_ring_submit returns. */
struct rf_io {
	enum rf_iop op;
	unsigned flags;              /* RF_IO_* of ring.h and below */
	int fd;
	int dirfd, dirfd2;           /* AT_FDCWD for paths relative to the cwd */
	int fd2;                     /* splice: the output */
	uint64_t off2;               /* splice: the output offset (UINT64_MAX: none) */
	void *buf;
	size_t len;
	uint64_t off;
	const struct iovec *iov;
	unsigned iovcnt;
	const char *path, *path2;
	int arg;                     /* per op, above */
	unsigned mode;               /* openat: mode; socket: type */
	unsigned mask;               /* statx: STATX_* mask; poll: events; socket: protocol */
	struct statx *stx;
	const struct sockaddr *addr;
	socklen_t addrlen;
	struct sockaddr *peer;
	socklen_t *peerlen;
	uint64_t timeout_ns;         /* deadline, relative to the submission call: past it
				      * the request is cancelled and its callback sees
				      * -ETIMEDOUT (a socket's transfer that moved bytes:
				      * their count, below). 0: none; one too long to add
				      * to the clock (up to UINT64_MAX) is no practical
				      * limit. A zero-copy send's callback still waits for
				      * the kernel to let go of buf: a peer that stops
				      * reading holds it until it reads or the connection
				      * ends -- the peer closes it, or TCP_USER_TIMEOUT set
				      * on the socket aborts it; neither shutdown nor close
				      * on this side releases it */
};

/* More request flags (with RF_IO_FIXED_FILE, RF_IO_FIXED_BUF, RF_IO_NO_RETRY_SHORT). */
enum {
	/* openat, socket, accept: install the new file into a free slot of the fixed-file
	 * table (rf_ring_register_files_sparse) instead of the process's fd table; the
	 * result is the slot index, to be used with RF_IO_FIXED_FILE. */
	RF_IO_ALLOC_SLOT = 1u << 3,
	/* openat: resolve the path beneath dirfd only (openat2's RESOLVE_BENEATH): an
	 * absolute path, "..", or a symbolic link that leads outside fails with -EXDEV --
	 * for a server that must never open a file outside its root */
	RF_IO_BENEATH = 1u << 4,
};

/* Queue the operation described by io; cb runs once with its result (bytes, an fd or
 * slot, 0, poll events) or -errno: -ECANCELED after rf_ring_cancel, -ETIMEDOUT past
 * io->timeout_ns. Reads, writes, readv/writev and sends that transfer less than asked
 * are resubmitted for the rest (unless RF_IO_NO_RETRY_SHORT); -EAGAIN and -EINTR
 * results are retried as for rf_ring_read (not a send's or receive's -EAGAIN under
 * MSG_DONTWAIT: that is its answer). A send, send_zc, recv or splice, or a read or
 * write at the file position (off UINT64_MAX) -- whose bytes, once moved, are gone
 * from a socket's or pipe's queue -- that ends after some bytes moved, by a cancel, its deadline or an error, reports their count, as recv(2) and
 * send(2) do (a short count; the error comes with the next call), never the error
 * (except during rf_ring_destroy: -ECANCELED). Returns 0, or -errno with nothing queued
 * (-EINVAL for a malformed descriptor, -EOPNOTSUPP for an op the kernel lacks,
 * -ESHUTDOWN during rf_ring_destroy). */
int rf_ring_submit(struct rf_ring *r, const struct rf_io *io, rf_io_cb cb, void *data,
		   rf_req_id *id);
/* The checks rf_ring_submit makes of io before it queues anything (the op, its flags,
 * the kernel's support, the pointers and sizes it needs; a read's or write's buffer
 * is checked at submission): 0, or -errno with the message rf_ring_submit would
 * leave. For callers that queue io later (rf_engine_push_io). */
int rf_ring_check_io(struct rf_ring *r, const struct rf_io *io);

/* The bytes rf_io_copy needs for what io points to and a copy must keep: the socket
 * address (addrlen bytes, at most a sockaddr_storage), the iovec array and the two
 * paths (with their NULs), laid out with the alignment of a struct iovec kept. */
size_t rf_io_copy_size(const struct rf_io *io);
/* A deep copy of src into *dst that needs nothing src points to once it returns: the
 * address, iovec array and paths go into mem (rf_io_copy_size(src) bytes, aligned
 * as malloc's memory is) and dst's pointers to them; the buffers (buf, stx, peer,
 * peerlen and the iovecs' bases) stay the caller's. The one copy of a descriptor that
 * is queued later: rf_ring_submit's and rf_engine_push_io's. */
void rf_io_copy(struct rf_io *dst, const struct rf_io *src, void *mem);

/* Non-zero if the running kernel supports op (probed once at ring creation). */
int rf_ring_op_supported(const struct rf_ring *r, enum rf_iop op);

/* ---- the same, one function each (no deadline; use rf_ring_submit for one) ------ */
/* Open path, relative to dirfd (AT_FDCWD: the working directory), with oflags (O_*)
 * and mode, as openat(2): cb gets the new fd (with RF_IO_ALLOC_SLOT a fixed-file slot;
 * RF_IO_BENEATH keeps the path beneath dirfd) or -errno. */
int rf_ring_openat(struct rf_ring *r, int dirfd, const char *path, int oflags, unsigned mode,
		   unsigned flags, rf_io_cb cb, void *data, rf_req_id *id);
/* Close fd, or with RF_IO_FIXED_FILE empty the fixed-file slot fd: cb gets 0 or -errno. */
int rf_ring_close(struct rf_ring *r, int fd, unsigned flags, rf_io_cb cb, void *data, rf_req_id *id);
/* statx(2) of path relative to dirfd, with atflags (AT_*) and mask (STATX_*), into stx
 * (which must stay valid until cb runs): cb gets 0 or -errno. */
int rf_ring_statx(struct rf_ring *r, int dirfd, const char *path, int atflags, unsigned mask,
		  struct statx *stx, rf_io_cb cb, void *data, rf_req_id *id);
/* Read into the iovcnt (1..IOV_MAX) buffers of iov, at off (UINT64_MAX: the file
 * position) of fd: cb gets the byte count (short reads resubmitted for the rest unless
 * RF_IO_NO_RETRY_SHORT) or -errno. The iov array is copied; its buffers must stay valid
 * until cb runs. */
int rf_ring_readv(struct rf_ring *r, int fd, const struct iovec *iov, unsigned iovcnt,
		  uint64_t off, unsigned flags, rf_io_cb cb, void *data, rf_req_id *id);
/* Write the iovcnt (1..IOV_MAX) buffers of iov at off (UINT64_MAX: the file position)
 * of fd: cb gets the byte count (short writes resubmitted for the rest unless
 * RF_IO_NO_RETRY_SHORT) or -errno. The iov array is copied; its buffers must stay valid
 * until cb runs. */
int rf_ring_writev(struct rf_ring *r, int fd, const struct iovec *iov, unsigned iovcnt,
		   uint64_t off, unsigned flags, rf_io_cb cb, void *data, rf_req_id *id);
/* fallocate(2) of len bytes at off of fd, with mode (FALLOC_FL_*; 0: allocate): cb
 * gets 0 or -errno. */
int rf_ring_fallocate(struct rf_ring *r, int fd, int mode, uint64_t off, uint64_t len,
		      unsigned flags, rf_io_cb cb, void *data, rf_req_id *id);
/* Rename oldpath (relative to olddirfd) to newpath (relative to newdirfd), with rflags
 * (RENAME_*) as renameat2(2): cb gets 0 or -errno. */
int rf_ring_renameat(struct rf_ring *r, int olddirfd, const char *oldpath, int newdirfd,
		     const char *newpath, unsigned rflags, rf_io_cb cb, void *data, rf_req_id *id);
/* Remove path relative to dirfd, as unlinkat(2) (atflags AT_REMOVEDIR: a directory):
 * cb gets 0 or -errno. */
int rf_ring_unlinkat(struct rf_ring *r, int dirfd, const char *path, int atflags,
		     rf_io_cb cb, void *data, rf_req_id *id);
/* A new socket of domain, type (SOCK_*) and protocol, as socket(2): cb gets its fd
 * (with RF_IO_ALLOC_SLOT a fixed-file slot) or -errno. */
int rf_ring_socket(struct rf_ring *r, int domain, int type, int protocol, unsigned flags,
		   rf_io_cb cb, void *data, rf_req_id *id);
/* Connect socket fd to addr (addrlen bytes, at most a sockaddr_storage; copied): cb
 * gets 0 or -errno. */
int rf_ring_connect(struct rf_ring *r, int fd, const struct sockaddr *addr, socklen_t addrlen,
		    unsigned flags, rf_io_cb cb, void *data, rf_req_id *id);
/* Accept a connection on the listening socket fd: cb gets the new fd (close-on-exec;
 * with RF_IO_ALLOC_SLOT a fixed-file slot) or -errno. peer and peerlen (both may be
 * NULL) receive the peer's address and must stay valid until cb runs. */
int rf_ring_accept(struct rf_ring *r, int fd, struct sockaddr *peer, socklen_t *peerlen,
		   unsigned flags, rf_io_cb cb, void *data, rf_req_id *id);
/* msg_flags: MSG_*; MSG_NOSIGNAL is always added (a closed peer is -EPIPE, never a
 * signal). zerocopy: use IORING_OP_SEND_ZC where supported (the callback then runs
 * after the kernel released buf), a plain send otherwise or where the socket refuses
 * it (AF_UNIX). */
int rf_ring_send(struct rf_ring *r, int fd, const void *buf, size_t len, int msg_flags,
		 int zerocopy, unsigned flags, rf_io_cb cb, void *data, rf_req_id *id);
/* MSG_WAITALL in msg_flags: receive until len bytes or end of stream; otherwise the
 * callback sees what one receive got (0: the peer closed its side). MSG_PEEK with
 * MSG_WAITALL: -EINVAL (a peek's rest cannot be resumed where it stopped). */
int rf_ring_recv(struct rf_ring *r, int fd, void *buf, size_t len, int msg_flags,
		 unsigned flags, rf_io_cb cb, void *data, rf_req_id *id);
/* Shut down part of the connection of socket fd, how SHUT_RD, SHUT_WR or SHUT_RDWR, as
 * shutdown(2): cb gets 0 or -errno. */
int rf_ring_shutdown(struct rf_ring *r, int fd, int how, unsigned flags, rf_io_cb cb, void *data,
		     rf_req_id *id);
/* One-shot poll: cb gets the events that fired (POLLIN, POLLOUT, POLLERR, ...). */
int rf_ring_poll(struct rf_ring *r, int fd, unsigned events, unsigned flags, rf_io_cb cb,
		 void *data, rf_req_id *id);

/* ---- fixed-file slots ------------------------------------------------------------
 * A table of n empty slots (replacing any registered table; refused, it leaves that
 * one) that RF_IO_ALLOC_SLOT fills; rf_ring_close with RF_IO_FIXED_FILE empties one. */
int rf_ring_register_files_sparse(struct rf_ring *r, unsigned n);

/* ---- provided-buffer groups --------------------------------------------------------
 * A group of nbufs (a power of two, <= 32768) buffers of bufsz bytes registered with
 * the kernel as a buffer ring: a multishot receive takes a buffer only when data
 * arrives, so idle connections hold none. The ring owns the group (freed by
 * rf_bufgroup_destroy or rf_ring_destroy). */
struct rf_bufgroup;
/* Create a group of nbufs buffers of bufsz bytes on r, registered as a buffer ring, in
 * *out (owned by the ring). Returns 0, -EINVAL (nbufs not a power of two up to 32768,
 * bufsz 0 or over 4 GiB - 1, out NULL), -ENOSPC (every group id is taken), -ENOMEM, or
 * the kernel's refusal of the buffer ring. Owner thread. */
int rf_bufgroup_create(struct rf_ring *r, unsigned nbufs, size_t bufsz, struct rf_bufgroup **out);
/* Give a buffer handed to a receive callback back to the group. Receives that
 * stopped because the group ran dry (-ENOBUFS) are rearmed. -EINVAL: not a buffer of
 * g; -EALREADY: not handed out (given back twice). */
int rf_bufgroup_put(struct rf_bufgroup *g, void *buf);
/* The size of each of g's buffers, in bytes (bufsz as created). */
size_t rf_bufgroup_bufsz(const struct rf_bufgroup *g);
/* Buffers currently with the kernel (not held by callers). */
unsigned rf_bufgroup_available(const struct rf_bufgroup *g);
/* No receive may still use the group (-EBUSY otherwise; nothing is freed then). */
int rf_bufgroup_destroy(struct rf_bufgroup *g);

/* ---- multishot operations ---------------------------------------------------------
 * One request, many completions. cb runs once per event; more is non-zero while the
 * request stays armed, and 0 on its last call (res < 0 then says why: -ECANCELED
 * after rf_ring_cancel, or the error; for a receive, res == 0 with more == 0 is the
 * end of stream). Where the kernel ends a multishot request early (CQ overflow, or a
 * kernel without multishot support) the ring rearms it: callers see no difference. */
typedef void (*rf_multi_cb)(void *data, int64_t res, void *buf, int more);

/* res: a new connected fd (or slot index with RF_IO_ALLOC_SLOT); buf NULL. */
int rf_ring_accept_multishot(struct rf_ring *r, int fd, unsigned flags, rf_multi_cb cb,
			     void *data, rf_req_id *id);
/* res: bytes received into buf, a buffer of g that the callee owns until it gives it
 * back with rf_bufgroup_put (buf is NULL when res <= 0). A group that runs dry parks
 * the receive until a buffer comes back. On a datagram socket (SOCK_DGRAM, given as
 * an fd: a fixed-file slot cannot be asked) an empty datagram is an event of 0 bytes
 * with more != 0, not the end of the request. */
int rf_ring_recv_multishot(struct rf_ring *r, int fd, struct rf_bufgroup *g, unsigned flags,
			   rf_multi_cb cb, void *data, rf_req_id *id);
/* res: the events that fired, each time they fire; buf NULL. */
int rf_ring_poll_multishot(struct rf_ring *r, int fd, unsigned events, unsigned flags,
			   rf_multi_cb cb, void *data, rf_req_id *id);

#ifdef __cplusplus
}
#endif
#endif
