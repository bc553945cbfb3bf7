/* ring/ops.c -- requests from a struct rf_io: what rf_ring_submit refuses, the deep
 * copy of a descriptor (rf_io_copy, which core/io.c uses too), and rf__submit, the one
 * way every one-shot request starts: rf_ring_submit (and through it the calls of
 * opcalls.c) and the calls of ring.h (rf_ring_read, rf_ring_write, rf_ring_fsync,
 * rf_ring_timeout), thin wrappers at the end. It fills an rf__req of the descriptor's
 * kind (kind.c) and queues it (submit.c). */
#include "ring-impl.h"

#include "rf-internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/utsname.h>

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
	return r->op_ok[rf__kinds[op].opcode];
}

#define RF__SUBMIT "%s: "
#define RF__IO_FLAGS (RF_IO_FIXED_FILE | RF_IO_FIXED_BUF | RF_IO_NO_RETRY_SHORT | \
		      RF_IO_ALLOC_SLOT | RF_IO_BENEATH)

/* Whether io holds what no request takes: bits that are no RF_IO_* flag, a read or
 * write of len bytes from NULL. The test is inlined in every submission; the
 * refusal is not. */
static inline int rf__io_malformed(unsigned kind, const struct rf_io *io)
{
	return (io->flags & ~(unsigned)RF__IO_FLAGS) ||
	       ((kind == RF_IOP_READ || kind == RF_IOP_WRITE) && !io->buf && io->len);
}

static int __attribute__((cold, noinline)) rf__io_refuse(const char *fn, const struct rf_io *io)
{
	if (io->flags & ~(unsigned)RF__IO_FLAGS)
		return rf__fail(-EINVAL, "%s: flags 0x%x: bits 0x%x are no RF_IO_* flag", fn,
				io->flags, io->flags & ~(unsigned)RF__IO_FLAGS);
	return rf__fail(-EINVAL, "%s: buf is NULL with len %zu", fn, io->len);
}

/* What rf_ring_submit refuses before it builds a request: the op, the flags it may
 * carry, the kernel's support, and the pointers and sizes the op needs. */
static int rf__io_check(struct rf_ring *r, const struct rf_io *io, const char *fn)
{
	if (!io)
		return rf__fail(-EINVAL, "rf_ring_submit: io is NULL, expected an operation");
	if ((int)io->op < RF_IOP_READ || (int)io->op >= RF__NIOP)
		return rf__fail(-EINVAL, "rf_ring_submit: io->op = %d, expected an enum rf_iop "
				"(%d to %d)", (int)io->op, RF_IOP_READ, RF__NIOP - 1);
	/* who is refusing: the call the caller made (rf_ring_send, ...), or
	 * "rf_ring_submit(send)" */
	char name[48];
	if (fn)
		snprintf(name, sizeof(name), "%s", fn);
	else
		snprintf(name, sizeof(name), "rf_ring_submit(%s)", rf__kinds[io->op].name);
	unsigned fl = io->flags & RF__IO_FLAGS; /* the rest: rf__io_malformed's */
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
		return 0; /* the rest: rf__submit's */
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
		/* a short peek's rest would be peeked again from the queue's head: the
		 * bytes of its first part twice */
		if (io->op == RF_IOP_RECV && (io->arg & MSG_PEEK) && (io->arg & MSG_WAITALL))
			return rf__fail(-EINVAL, RF__SUBMIT "MSG_PEEK with MSG_WAITALL: a peek is "
					"not resumed where it stopped; expected one of them", name);
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

/* A flag the request's kind does not keep (RF_IO_BENEATH on a read): refused, by every
 * call, not dropped without a word. */
static int rf__flags_refuse(const char *fn, const struct rf__kind *k, unsigned flags)
{
	return rf__fail(-EINVAL, "%s: flags 0x%x do not apply to a %s request (it takes 0x%x "
			"of the RF_IO_* flags)", fn, flags & RF__IO_FLAGS & ~k->keep, k->name,
			k->keep);
}

/* rf__io_check and what rf__submit refuses of every request (rf_engine_push_io asks
 * at the push, where rf_ring_submit later submits it). */
int rf_ring_check_io(struct rf_ring *r, const struct rf_io *io)
{
	int ret;

	if (!r)
		return rf__fail(-EINVAL, "rf_ring_check_io: the ring is NULL");
	if ((ret = rf__io_check(r, io, NULL)) == 0 && rf__io_malformed(io->op, io))
		ret = rf__io_refuse("rf_ring_submit", io);
	if (ret == 0 && (io->flags & RF__IO_FLAGS & ~rf__kinds[io->op].keep))
		ret = rf__flags_refuse("rf_ring_submit", &rf__kinds[io->op], io->flags);
	return ret;
}

/* Where each part of rf_io_copy's block goes: the address first (rounded up to keep
 * what follows aligned), then the iovec array, then the two paths. */
/* How many bytes of the socket address are copied: addrlen, at most a
 * sockaddr_storage (a longer one is refused by whoever uses it). */
static size_t rf__addr_len(const struct rf_io *io)
{
	if (!io->addr || !io->addrlen)
		return 0;
	return io->addrlen < sizeof(struct sockaddr_storage) ? io->addrlen :
	       sizeof(struct sockaddr_storage);
}

/* The address goes first in the block, rounded up to 16 so that the iovec array
 * after it stays aligned; then the iovec array; then the two paths. */
static size_t rf__addr_room(const struct rf_io *io)
{
	return (rf__addr_len(io) + 15) & ~(size_t)15;
}

size_t rf_io_copy_size(const struct rf_io *io)
{
	size_t n = rf__addr_room(io);
	if (io->iov && io->iovcnt)
		n += (size_t)io->iovcnt * sizeof(struct iovec);
	if (io->path)
		n += strlen(io->path) + 1;
	if (io->path2)
		n += strlen(io->path2) + 1;
	return n;
}

void rf_io_copy(struct rf_io *dst, const struct rf_io *src, void *mem)
{
	char *t = mem;
	*dst = *src;
	if (src->addr) { /* (pointing into mem even with addrlen 0: never at the caller's) */
		memcpy(t, src->addr, rf__addr_len(src));
		dst->addr = (const struct sockaddr *)(void *)t;
		t += rf__addr_room(src);
	}
	if (src->iov && src->iovcnt) {
		memcpy(t, src->iov, (size_t)src->iovcnt * sizeof(struct iovec));
		dst->iov = (const struct iovec *)(void *)t;
		t += (size_t)src->iovcnt * sizeof(struct iovec);
	}
	if (src->path) {
		size_t l = strlen(src->path) + 1;
		memcpy(t, src->path, l);
		dst->path = t;
		t += l;
	}
	if (src->path2) {
		memcpy(t, src->path2, strlen(src->path2) + 1);
		dst->path2 = t;
	}
}

/* Whether a kind keeps a copy of the descriptor past submission: those whose prep
 * reads more than the request holds (paths, an address, an iovec array, a second fd).
 * A switch, not a flag of the table, so that the calls of ring.h, which inline
 * rf__submit with their kind, fold it away and build no descriptor in memory. */
static inline int rf__needs_copy(unsigned kind)
{
	switch (kind) {
	case RF_IOP_READV: case RF_IOP_WRITEV: case RF_IOP_OPENAT: case RF_IOP_STATX:
	case RF_IOP_FALLOCATE: case RF_IOP_RENAMEAT: case RF_IOP_UNLINKAT: case RF_IOP_SOCKET:
	case RF_IOP_CONNECT: case RF_IOP_ACCEPT: case RF_IOP_SPLICE:
		return 1;
	default:
		return 0;
	}
}

/* The descriptor's copy, with the working iovec array of a readv/writev in front. */
static struct rf__ext *rf__ext_new(unsigned kind, const struct rf_io *io)
{
	size_t wiov = kind == RF_IOP_READV || kind == RF_IOP_WRITEV ?
		      (size_t)io->iovcnt * sizeof(struct iovec) : 0;
	struct rf__ext *x = malloc(sizeof(*x) + wiov + rf_io_copy_size(io));
	if (!x)
		return NULL;
	x->wiov = (struct iovec *)(void *)x->mem;
	rf_io_copy(&x->io, io, x->mem + wiov);
	return x;
}

/* The one way every one-shot request starts: rf_ring_submit, and the calls of ring.h
 * below (kind: io->op, or RF__K_TIMEOUT with io->off the nanoseconds). It fills a
 * request of the kind from the descriptor and queues it; a failure leaves its
 * message under fn, the public call's name. */
static inline __attribute__((always_inline))
int rf__submit(const char *fn, struct rf_ring *r, unsigned kind, const struct rf_io *io,
	       rf_io_cb cb, void *data, rf_req_id *id)
{
	const struct rf__kind *k = &rf__kinds[kind];
	RF__OWNER_OR_RETURN(r, fn);
	if (r->destroying)
		return rf__shutdown(fn);
	if (__builtin_expect(rf__io_malformed(kind, io), 0))
		return rf__io_refuse(fn, io);
	if (__builtin_expect(io->flags & RF__IO_FLAGS & ~k->keep, 0))
		return rf__flags_refuse(fn, k, io->flags);
	uint64_t deadline = rf__deadline_after(io->timeout_ns);
	unsigned fl = io->flags & k->keep;
	uint16_t bi = 0;
	if (fl & RF_IO_FIXED_BUF) {
		int ret = rf__find_buf(r, io->buf, io->len, &bi);
		if (ret < 0)
			return rf__fail(ret, "%s: RF_IO_FIXED_BUF: buf %p + %zu bytes lies in no "
					"single registered buffer", fn, io->buf, io->len);
	}
	struct rf__ext *x = NULL;
	if (rf__needs_copy(kind) && !(x = rf__ext_new(kind, io)))
		return rf__no_req(fn);
	struct rf__req *q = rf__req_alloc(r, 1);
	if (!q) {
		free(x);
		return rf__no_req(fn);
	}
	q->ext = x;
	q->kind = (uint8_t)kind;
	q->fd = io->fd;
	q->flags |= fl;
	q->cb = cb;
	q->data = data;
	q->buf = NULL;
	q->len = 0;
	q->off = 0;
	switch (kind) {
	case RF_IOP_READ:
	case RF_IOP_WRITE:
		q->buf = io->buf;
		q->len = io->len;
		q->off = io->off;
		if (r->fault.active &&
		    (r->fault.ops & (kind == RF_IOP_READ ? RF__FAULT_READ : RF__FAULT_WRITE)))
			rf__mark_faultable(r, q);
		break;
	case RF_IOP_FSYNC:
		q->len = io->arg ? 1 : 0; /* datasync */
		break;
	case RF__K_TIMEOUT:
		q->fd = -1;
		q->u.ts.tv_sec = (long long)(io->off / 1000000000ull);
		q->u.ts.tv_nsec = (long long)(io->off % 1000000000ull);
		break;
	case RF_IOP_SEND:
	case RF_IOP_SEND_ZC:
	case RF_IOP_RECV:
		q->buf = io->buf;
		q->len = io->len;
		q->off = (uint32_t)io->arg | (kind == RF_IOP_RECV ? 0 : MSG_NOSIGNAL);
		if (kind == RF_IOP_SEND_ZC && r->op_ok[IORING_OP_SEND_ZC])
			q->flags |= RF__RQ_ZC;
		if (r->fault.active &&
		    (r->fault.ops & (kind == RF_IOP_RECV ? RF__FAULT_RECV : RF__FAULT_SEND)))
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
	int ret = rf__queue_new(r, q, id);
	return ret < 0 ? rf__not_queued(fn, ret) : 0;
}

int rf__submit_as(const char *fn, struct rf_ring *r, const struct rf_io *io, rf_io_cb cb,
		  void *data, rf_req_id *id)
{
	int err;

	if (!r)
		return rf__fail(-EINVAL, "%s: r is NULL", fn ? fn : "rf_ring_submit");
	/* the descriptor, reading only the ring's probe (set at creation); then
	 * rf__submit's owner, shutdown and malformed-flag checks, once */
	if ((err = rf__io_check(r, io, fn)) < 0)
		return err;
	return rf__submit(fn ? fn : "rf_ring_submit", r, io->op, io, cb, data, id);
}

int rf_ring_submit(struct rf_ring *r, const struct rf_io *io, rf_io_cb cb, void *data,
		   rf_req_id *id)
{
	return rf__submit_as(NULL, r, io, cb, data, id);
}

/* ---- the calls of ring.h ------------------------------------------------------------------ */

/* Thin wrappers over rf__submit: each keeps its own name in messages, takes no
 * deadline, keeps the flags it always took (its kind's keep) and skips rf_ring_submit's
 * checks, which it never made. */

int rf_ring_read(struct rf_ring *r, int fd, void *buf, size_t len, uint64_t off,
		 unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_READ, .flags = flags, .fd = fd, .buf = buf, .len = len,
			    .off = off };
	return rf__submit("rf_ring_read", r, RF_IOP_READ, &io, cb, data, id);
}

int rf_ring_write(struct rf_ring *r, int fd, const void *buf, size_t len, uint64_t off,
		  unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_WRITE, .flags = flags, .fd = fd, .buf = (void *)buf,
			    .len = len, .off = off };
	return rf__submit("rf_ring_write", r, RF_IOP_WRITE, &io, cb, data, id);
}

int rf_ring_fsync(struct rf_ring *r, int fd, unsigned flags, int datasync,
		  rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .op = RF_IOP_FSYNC, .flags = flags, .fd = fd, .arg = datasync != 0 };
	return rf__submit("rf_ring_fsync", r, RF_IOP_FSYNC, &io, cb, data, id);
}

/* io.off carries the nanoseconds (no rf_io field says them) */
int rf_ring_timeout(struct rf_ring *r, uint64_t ns, rf_io_cb cb, void *data, rf_req_id *id)
{
	struct rf_io io = { .fd = -1, .off = ns };
	return rf__submit("rf_ring_timeout", r, RF__K_TIMEOUT, &io, cb, data, id);
}
