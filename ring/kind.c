/* ring/kind.c -- the one table of request kinds: for each, its name, how its SQE is
 * prepared (prep.c), how its CQEs complete it (complete.c, multishot.c, notify.c),
 * and what it is. Every request enters the SQ through rf__queue (submit.c), which
 * runs the kind's prep (through r->kinds, the table the ring carries), and every CQE
 * of a request reaches the kind's complete from rf__handle (dispatch.c): the table's
 * only callers, both calling down the files' direction (README.md). An enum rf_iop is
 * its own index. */
#include "ring-impl.h"

/* The RF_IO_* flags each family keeps: rf_ring_submit refuses a flag an op cannot take
 * first, with a message of its own (RF_IO_ALLOC_SLOT for all but openat, socket,
 * accept; ...); every call, the thin ones of ring.h too, refuses a flag its kind does
 * not keep (rf__submit). */
#define RF__KEEP_RW (RF_IO_FIXED_FILE | RF_IO_FIXED_BUF | RF_IO_NO_RETRY_SHORT)
#define RF__KEEP_OPS (RF_IO_FIXED_FILE | RF_IO_NO_RETRY_SHORT | RF_IO_ALLOC_SLOT | RF_IO_BENEATH)

#define RF__KIND(k, nm, p, c, fl, kp, opc) \
	[k] = { .name = nm, .prep = rf__prep_##p, .complete = rf__complete_##c, \
		.flags = (fl), .keep = (kp), .opcode = IORING_OP_##opc }

const struct rf__kind rf__kinds[RF__NKIND] = {
	RF__KIND(RF_IOP_READ, "read", read, xfer, RF__KF_IN, RF__KEEP_RW, READ),
	RF__KIND(RF_IOP_WRITE, "write", write, xfer, RF__KF_OUT, RF__KEEP_RW, WRITE),
	RF__KIND(RF_IOP_READV, "readv", vec, xfer, RF__KF_IN, RF__KEEP_OPS, READV),
	RF__KIND(RF_IOP_WRITEV, "writev", vec, xfer, RF__KF_OUT, RF__KEEP_OPS, WRITEV),
	RF__KIND(RF_IOP_FSYNC, "fsync", fsync, plain, 0, RF_IO_FIXED_FILE, FSYNC),
	RF__KIND(RF_IOP_OPENAT, "openat", openat, plain, 0, RF__KEEP_OPS, OPENAT),
	RF__KIND(RF_IOP_CLOSE, "close", close, plain, 0, RF__KEEP_OPS, CLOSE),
	RF__KIND(RF_IOP_STATX, "statx", statx, plain, 0, RF__KEEP_OPS, STATX),
	RF__KIND(RF_IOP_FALLOCATE, "fallocate", fallocate, plain, 0, RF__KEEP_OPS,
		 FALLOCATE),
	RF__KIND(RF_IOP_RENAMEAT, "renameat", renameat, plain, 0, RF__KEEP_OPS, RENAMEAT),
	RF__KIND(RF_IOP_UNLINKAT, "unlinkat", unlinkat, plain, 0, RF__KEEP_OPS, UNLINKAT),
	RF__KIND(RF_IOP_SOCKET, "socket", socket, plain, 0, RF__KEEP_OPS, SOCKET),
	RF__KIND(RF_IOP_CONNECT, "connect", connect, plain, 0, RF__KEEP_OPS, CONNECT),
	RF__KIND(RF_IOP_ACCEPT, "accept", accept, plain, 0, RF__KEEP_OPS, ACCEPT),
	RF__KIND(RF_IOP_SEND, "send", sock, xfer, RF__KF_OUT | RF__KF_STREAM, RF__KEEP_OPS, SEND),
	RF__KIND(RF_IOP_SEND_ZC, "send_zc", sock, xfer, RF__KF_OUT | RF__KF_STREAM, RF__KEEP_OPS,
		 SEND_ZC),
	RF__KIND(RF_IOP_RECV, "recv", sock, xfer, RF__KF_IN | RF__KF_STREAM, RF__KEEP_OPS, RECV),
	RF__KIND(RF_IOP_SHUTDOWN, "shutdown", shutdown, plain, 0, RF__KEEP_OPS, SHUTDOWN),
	RF__KIND(RF_IOP_POLL, "poll", poll, plain, 0, RF__KEEP_OPS, POLL_ADD),
	RF__KIND(RF_IOP_NOP, "nop", nop, plain, 0, RF__KEEP_OPS, NOP),
	/* splice's bytes are neither read nor written by the ring's caller */
	RF__KIND(RF_IOP_SPLICE, "splice", splice, xfer, RF__KF_STREAM, RF__KEEP_OPS, SPLICE),
	RF__KIND(RF__K_TIMEOUT, "timeout", timeout, timeout, 0, 0, TIMEOUT),
	RF__KIND(RF__K_ACCEPT_MS, "accept_multishot", accept_ms, ms, 0, 0, ACCEPT),
	RF__KIND(RF__K_RECV_MS, "recv_multishot", recv_ms, ms, 0, 0, RECV),
	RF__KIND(RF__K_POLL_MS, "poll_multishot", poll_ms, ms, 0, 0, POLL_ADD),
	RF__KIND(RF__K_WATCH, "watch", efd_read, watch, RF__KF_INTERNAL, 0, READ),
	RF__KIND(RF__K_WATCH_POLL, "watch_poll", efd_poll, watch, RF__KF_INTERNAL, 0, POLL_ADD),
	RF__KIND(RF__K_NOTIFY_READ, "notify_read", efd_read, notify_read, RF__KF_INTERNAL, 0, READ),
};

_Static_assert(RF_IOP_READ == 1 && RF_IOP_SPLICE + 1 == RF__NIOP,
	       "every enum rf_iop is its own kind");
