/* core/io.c -- ring operations pushed as engine ops (rf_engine_push_io): the op's async
 * fn submits the operation through the ring; its completion callback finishes the op.
 * The descriptor is copied at push time with what the ring would otherwise copy only
 * at submission (paths, the socket address, the iovec array: the ring's rf_io_copy),
 * since submission comes later, when the dependencies allow. */
#include "engine-impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rf-internal.h"
#include "ring-ops.h"

struct rf__ioctx {
	struct rf_engine *e;
	struct rf_io io;
	const int64_t *fd_from;
	int64_t *result;
	struct rf_op *op;
	_Alignas(16) char tail[]; /* what rf_io_copy keeps of the descriptor */
};

static const char *const rf__io_names[] = {
	[RF_IOP_READ] = "io:read",     [RF_IOP_WRITE] = "io:write",   [RF_IOP_READV] = "io:readv",
	[RF_IOP_WRITEV] = "io:writev", [RF_IOP_FSYNC] = "io:fsync",   [RF_IOP_OPENAT] = "io:openat",
	[RF_IOP_CLOSE] = "io:close",   [RF_IOP_STATX] = "io:statx",   [RF_IOP_FALLOCATE] = "io:fallocate",
	[RF_IOP_RENAMEAT] = "io:renameat", [RF_IOP_UNLINKAT] = "io:unlinkat", [RF_IOP_SOCKET] = "io:socket",
	[RF_IOP_CONNECT] = "io:connect", [RF_IOP_ACCEPT] = "io:accept", [RF_IOP_SEND] = "io:send",
	[RF_IOP_SEND_ZC] = "io:send_zc", [RF_IOP_RECV] = "io:recv",   [RF_IOP_SHUTDOWN] = "io:shutdown",
	[RF_IOP_POLL] = "io:poll",     [RF_IOP_NOP] = "io:nop",       [RF_IOP_SPLICE] = "io:splice",
};
#define RF__NIONAMES (sizeof(rf__io_names) / sizeof(rf__io_names[0]))

static void rf__io_cqe(void *data, int64_t res)
{
	struct rf__ioctx *c = data;
	int st = res < 0 ? (int)res : 0;
	if (c->result)
		*c->result = res;
	/* a send that ended short (a reset, its deadline, a cancel after some bytes went:
	 * the ring reports their count) did not do its work: a failure, or the ops after
	 * it would run as if the whole buffer had gone */
	if (res >= 0 && (c->io.op == RF_IOP_SEND || c->io.op == RF_IOP_SEND_ZC) &&
	    (uint64_t)res < c->io.len)
		st = -EIO;
	rf_engine_op_done(c->op, st);
}

static int rf__io_start(void *ctx, struct rf_op *op)
{
	struct rf__ioctx *c = ctx;
	c->op = op;
	if (c->fd_from) {
		if (*c->fd_from < 0 || *c->fd_from > INT32_MAX) {
			/* the op that made it failed (or it is no fd): this one fails too */
			if (c->result)
				*c->result = -EBADF;
			return -EBADF;
		}
		int fd = (int)*c->fd_from;
		switch (c->io.op) {
		case RF_IOP_OPENAT:
		case RF_IOP_STATX:
		case RF_IOP_RENAMEAT:
		case RF_IOP_UNLINKAT:
			c->io.dirfd = fd; /* their fd is a directory's (or statx's AT_EMPTY_PATH) */
			break;
		default:
			c->io.fd = fd;
		}
	}
	int ret = rf_ring_submit(rf_engine_ring(c->e), &c->io, rf__io_cqe, c, NULL);
	if (ret < 0 && c->result)
		*c->result = ret;
	return ret;
}

static void rf__io_free(void *ctx, int status)
{
	free(ctx);
}

int rf_engine_push_io(struct rf_engine *e, const struct rf_io_push *p)
{
	if (!e)
		return rf__fail(-EINVAL, "rf_engine_push_io: e is NULL");
	if (!p || (unsigned)p->io.op >= RF__NIONAMES || !rf__io_names[p->io.op])
		return rf__fail(-EINVAL, "rf_engine_push_io: %s", p ? "unknown io.op" : "p is NULL");
	const struct rf_io *io = &p->io;
	int ret = rf_ring_check_io(e->ring, io);
	if (ret < 0) /* refused now, not later as the op's failure */
		return rf__fail_under(ret, "rf_engine_push_io");
	if (io->addr && io->addrlen > sizeof(struct sockaddr_storage))
		return rf__fail(-EINVAL, "rf_engine_push_io %s: addrlen %u exceeds a sockaddr_storage",
				rf__io_names[io->op], (unsigned)io->addrlen);
	struct rf__ioctx *c = malloc(sizeof(*c) + rf_io_copy_size(io));
	if (!c)
		return rf__fail(-ENOMEM, "rf_engine_push_io: out of memory");
	c->e = e;
	rf_io_copy(&c->io, io, c->tail);
	c->fd_from = p->fd_from;
	c->result = p->result;
	c->op = NULL;
	struct rf_op_desc d = {
		.afn = rf__io_start, .ctx = c, .done = rf__io_free,
		.reads = p->reads, .nreads = p->nreads, .writes = p->writes, .nwrites = p->nwrites,
		.name = p->name ? p->name : rf__io_names[io->op],
	};
	ret = rf_engine_push(e, &d);
	if (ret < 0)
		free(c);
	return ret;
}
