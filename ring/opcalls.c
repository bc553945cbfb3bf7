/* ring/opcalls.c -- one function per operation of ring-ops.h, each filling a struct
 * rf_io for rf_ring_submit's path (rf__submit_as: its checks, its messages under the
 * function's own name). (Those of ring.h -- read, write, fsync, timeout -- are in
 * ops.c, next to the path they share.) */
#include "ring-impl.h"

/* ---- one function per operation ---------------------------------------------------------- */

int rf_ring_openat(struct rf_ring *r, int dirfd, const char *path, int oflags, unsigned mode,
		   unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_OPENAT, .flags = flags, .dirfd = dirfd, .path = path,
			    .arg = oflags, .mode = mode };
	return rf__submit_as("rf_ring_openat", r, &io, cb, data, id);
}

int rf_ring_close(struct rf_ring *r, int fd, unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_CLOSE, .flags = flags, .fd = fd };
	return rf__submit_as("rf_ring_close", r, &io, cb, data, id);
}

int rf_ring_statx(struct rf_ring *r, int dirfd, const char *path, int atflags, unsigned mask,
		  struct statx *stx, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_STATX, .dirfd = dirfd, .path = path, .arg = atflags,
			    .mask = mask, .stx = stx };
	return rf__submit_as("rf_ring_statx", r, &io, cb, data, id);
}

int rf_ring_readv(struct rf_ring *r, int fd, const struct iovec *iov, unsigned iovcnt,
		  uint64_t off, unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_READV, .flags = flags, .fd = fd, .iov = iov,
			    .iovcnt = iovcnt, .off = off };
	return rf__submit_as("rf_ring_readv", r, &io, cb, data, id);
}

int rf_ring_writev(struct rf_ring *r, int fd, const struct iovec *iov, unsigned iovcnt,
		   uint64_t off, unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_WRITEV, .flags = flags, .fd = fd, .iov = iov,
			    .iovcnt = iovcnt, .off = off };
	return rf__submit_as("rf_ring_writev", r, &io, cb, data, id);
}

int rf_ring_fallocate(struct rf_ring *r, int fd, int mode, uint64_t off, uint64_t len,
		      unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_FALLOCATE, .flags = flags, .fd = fd, .arg = mode,
			    .off = off, .len = (size_t)len };
	return rf__submit_as("rf_ring_fallocate", r, &io, cb, data, id);
}

int rf_ring_renameat(struct rf_ring *r, int olddirfd, const char *oldpath, int newdirfd,
		     const char *newpath, unsigned rflags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_RENAMEAT, .dirfd = olddirfd, .path = oldpath,
			    .dirfd2 = newdirfd, .path2 = newpath, .arg = (int)rflags };
	return rf__submit_as("rf_ring_renameat", r, &io, cb, data, id);
}

int rf_ring_unlinkat(struct rf_ring *r, int dirfd, const char *path, int atflags,
		     rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_UNLINKAT, .dirfd = dirfd, .path = path, .arg = atflags };
	return rf__submit_as("rf_ring_unlinkat", r, &io, cb, data, id);
}

int rf_ring_socket(struct rf_ring *r, int domain, int type, int protocol, unsigned flags,
		   rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_SOCKET, .flags = flags, .arg = domain,
			    .mode = (unsigned)type, .mask = (unsigned)protocol };
	return rf__submit_as("rf_ring_socket", r, &io, cb, data, id);
}

int rf_ring_connect(struct rf_ring *r, int fd, const struct sockaddr *addr, socklen_t addrlen,
		    unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_CONNECT, .flags = flags, .fd = fd, .addr = addr,
			    .addrlen = addrlen };
	return rf__submit_as("rf_ring_connect", r, &io, cb, data, id);
}

int rf_ring_accept(struct rf_ring *r, int fd, struct sockaddr *peer, socklen_t *peerlen,
		   unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_ACCEPT, .flags = flags, .fd = fd, .peer = peer,
			    .peerlen = peerlen, .arg = SOCK_CLOEXEC };
	return rf__submit_as("rf_ring_accept", r, &io, cb, data, id);
}

int rf_ring_send(struct rf_ring *r, int fd, const void *buf, size_t len, int msg_flags,
		 int zerocopy, unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = zerocopy ? RF_IOP_SEND_ZC : RF_IOP_SEND, .flags = flags, .fd = fd,
			    .buf = (void *)buf, .len = len, .arg = msg_flags };
	return rf__submit_as("rf_ring_send", r, &io, cb, data, id);
}

int rf_ring_recv(struct rf_ring *r, int fd, void *buf, size_t len, int msg_flags,
		 unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_RECV, .flags = flags, .fd = fd, .buf = buf, .len = len,
			    .arg = msg_flags };
	return rf__submit_as("rf_ring_recv", r, &io, cb, data, id);
}

int rf_ring_shutdown(struct rf_ring *r, int fd, int how, unsigned flags, rf_io_cb cb, void *data,
		     rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_SHUTDOWN, .flags = flags, .fd = fd, .arg = how };
	return rf__submit_as("rf_ring_shutdown", r, &io, cb, data, id);
}

int rf_ring_poll(struct rf_ring *r, int fd, unsigned events, unsigned flags, rf_io_cb cb,
		 void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_POLL, .flags = flags, .fd = fd, .mask = events };
	return rf__submit_as("rf_ring_poll", r, &io, cb, data, id);
}
