/* ring/ring-impl.h -- internals of the io_uring reactor (not installed): the
 * user_data tags, the request, notifier and watch structures, the ring itself, and
 * the helpers its files share (user_data encoding: README.md). */
#ifndef RINGFLOW_RING_IMPL_H
#define RINGFLOW_RING_IMPL_H

#include <liburing.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ring.h"
#include "ring-ops.h"
#include "rf-internal.h"

#define RF__TAG_MASK 7ull
#define RF__TAG_REQ 0ull    /* pointer to struct rf__req | gen bits */
#define RF__TAG_IGNORE 1ull /* internal SQE whose CQE carries nothing (cancels) */
#define RF__TAG_NOTIFY 2ull /* MSG_RING notifier message: slot << 3 | gen << 32 */
#define RF__TAG_PROBE 3ull  /* MSG_RING support probe at ring creation */
#define RF__TAG_RETRY 4ull  /* backoff timeout of a request retried after -EAGAIN/-EINTR:
                             * pointer to struct rf__req | gen bits, as RF__TAG_REQ */
/* A request's linked deadline (IORING_OP_LINK_TIMEOUT) carries RF__TAG_IGNORE: its own
 * CQE says nothing the request's CQE does not (-ECANCELED there, read as -ETIMEDOUT). */
#define RF__PTR_MASK (~63ull)

#define RF__SLAB_SHIFT 8
#define RF__SLAB_SIZE (1u << RF__SLAB_SHIFT)

/* Largest length put in one SQE; larger transfers proceed as "short" pieces. */
#define RF__MAX_SQE_LEN (1u << 30)

/* Reads and writes that complete with -EAGAIN or -EINTR are resubmitted: the first
 * RF__RETRY_NOW times at once, then each after a timeout of RF__RETRY_BASE_NS
 * doubling up to RF__RETRY_CAP_NS. The error reaches the callback only after
 * RF__RETRY_MAX of them in a row (any progress resets the count). */
#define RF__RETRY_NOW 4
#define RF__RETRY_MAX 64
#define RF__RETRY_BASE_NS 50000ull
#define RF__RETRY_CAP_NS 10000000ull

/* Kernel limits (IORING_MAX_ENTRIES, IORING_MAX_CQ_ENTRIES). */
#define RF__MAX_SQ_ENTRIES RF_RING_MAX_ENTRIES
#define RF__MAX_CQ_ENTRIES (2 * RF_RING_MAX_ENTRIES)

/* Request kinds, each an entry of rf__kinds (kind.c): an enum rf_iop (ring-ops.h) is
 * its own kind, the ring's own kinds follow it. */
#define RF__NIOP (RF_IOP_SPLICE + 1)
enum rf__kid {
	RF__K_TIMEOUT = RF__NIOP, /* rf_ring_timeout */
	RF__K_ACCEPT_MS,          /* multishot accept, recv into a buffer group, poll */
	RF__K_RECV_MS,
	RF__K_POLL_MS,
	RF__K_WATCH,              /* eventfd watch: read 8 bytes, rearmed */
	RF__K_WATCH_POLL,         /* eventfd watch on a non-blocking fd: poll before reading */
	RF__K_NOTIFY_READ,        /* eventfd fallback of a notifier */
	RF__NKIND
};

/* Internal request flags (beyond the RF_IO_* flags kept in the low byte). */
enum {
	RF__RQ_CANCELLED = 1u << 8,  /* rf_ring_cancel() or teardown: result becomes -ECANCELED */
	RF__RQ_COUNTS = 1u << 9,     /* counts in rf_ring_pending() */
	RF__RQ_FAULTABLE = 1u << 10, /* fault injection may touch it (regular file read) */
	RF__RQ_DIRECT = 1u << 11,    /* O_DIRECT file: truncate faults to 4 KiB multiples */
	RF__RQ_BACKOFF = 1u << 12,   /* a RF__TAG_RETRY timeout is armed, not the request */
	RF__RQ_DEADLINE = 1u << 13,  /* each SQE is linked to a timeout at u.ts (absolute) */
	RF__RQ_ZC = 1u << 14,        /* send through IORING_OP_SEND_ZC */
	RF__RQ_FAKE = 1u << 15,      /* fault injection: a NOP whose result is scratch */
	RF__RQ_PARKED = 1u << 16,    /* multishot recv waiting for a buffer: not in the kernel */
	RF__RQ_SOCKFAULT = 1u << 17, /* fault injection at submission (send, recv) */
	RF__RQ_ZDONE = 1u << 18,     /* zero-copy send over: result in scratch, waits notifs */
	RF__RQ_DGRAM = 1u << 19      /* multishot recv on a datagram socket: 0 bytes is an empty
				      * datagram, not the end of a stream */
};

struct rf__req {
	union {
		rf_io_cb cb;
		rf_multi_cb mcb;     /* multishot ops */
	};
	void *data;
	char *buf;
	uint64_t off;        /* UINT64_MAX: file position (pipes, sockets) */
	size_t len, done;
	uint32_t gen;
	uint32_t idx;        /* slot index */
	int fd;
	unsigned flags;      /* RF_IO_* | RF__RQ_* */
	uint8_t kind;        /* enum rf__kid: its entry in rf__kinds */
	uint8_t live;
	uint8_t retries;     /* -EAGAIN/-EINTR results in a row (reads, writes) */
	uint8_t again;       /* enum rf__again: on the again list, what the submit stage
			      * does with it; 0: not on it */

	uint64_t scratch;    /* eventfd reads land here: lives as long as the request */
	uint64_t deadline;   /* RF__RQ_DEADLINE: CLOCK_MONOTONIC ns */
	uint32_t nnotif;     /* zero-copy send: notification CQEs still to come */
	void *ext;           /* struct rf__ext (rf_ring_submit's copy of the descriptor);
			      * freed with the request */
	union {
		struct __kernel_timespec ts; /* timeouts, retry backoff of reads/writes;
					      * read by the kernel at submission */
		void *owner;                 /* watch or notifier for internal reads, the
					      * buffer group of a multishot recv */
	} u;
	struct rf__req *next_free; /* the pool's free list; live: the again list, or a
				    * buffer group's parked receives */
} __attribute__((aligned(64)));

struct rf__cqe {
	uint64_t ud;
	int32_t res;
	uint32_t flags;
};

struct rf__nslot {
	struct rf_notifier *n; /* NULL when free */
	uint32_t gen;
	uint32_t next_free;
};

struct rf_notifier {
	struct rf_ring *r;
	rf_notify_cb cb;
	void *data;
	int ring_fd;         /* target ring (MSG_RING mode), read by any thread */
	int efd;             /* eventfd fallback, or -1 */
	uint64_t ud;         /* user_data delivered by MSG_RING */
	uint32_t slot;
	uint32_t owed;       /* rf_notifier_expect() balance */
	uint64_t accum;      /* signals received this turn, not yet delivered */
	uint64_t efd_val;    /* eventfd read target */
	struct rf__req *rq;  /* armed eventfd read (fallback) */
	struct rf_notifier *next_dirty;
	int on_dirty;
	int lost;            /* the eventfd read failed: owed signals no longer count */
};

struct rf_watch {
	struct rf_ring *r;
	rf_watch_cb cb;
	void *data;
	int efd;
	int counts;
	int stopping, busy, failed;
	uint64_t value;
	struct rf__req *rq;  /* armed read/poll, NULL after failure */
	struct rf_watch *prev, *next;
};

/* RF_FAULT_INJECT (see rf_ring_create in ring.h). */
enum { RF__FAULT_READ = 1u << 0, RF__FAULT_WRITE = 1u << 1, RF__FAULT_SEND = 1u << 2,
       RF__FAULT_RECV = 1u << 3 };

struct rf__fault {
	double eio, eagain, eintr, shrt; /* fractions in [0,1] */
	uint64_t state;      /* splitmix64 state, from seed= */
	unsigned ops;        /* RF__FAULT_READ | RF__FAULT_WRITE */
	int active;          /* some fraction > 0 */
};

struct rf__mem {
	char *base;
	size_t len;
};

struct rf_ring;
/* From a thread other than r's owner: -EPERM and a message naming fn (cold). */
int rf__owner_refused(const struct rf_ring *r, const char *fn) __attribute__((cold));
static inline int rf__owner_check(const struct rf_ring *r, const char *fn);

struct rf_ring {
	struct io_uring ring;
	/* rf__kinds, set at creation: the files below kind.c (submit.c runs a kind's prep
	 * through it) reach the table without naming the file that names them. */
	const struct rf__kind *kinds;
	unsigned setup_flags;
	int msg_ring;
	int in_run;          /* inside rf_ring_run / rf_ring_run_until */
	int cb_depth;        /* inside a callback */
	int destroying;
	unsigned max_batch;  /* rf_ring_set_max_batch; 0: no cap */
	uint64_t owner_tid;  /* the creating thread: the owner (rf__owner_refused) */

	/* request pool */
	struct rf__req **slabs;
	unsigned nslabs, slabs_cap;
	struct rf__req *free_list;
	unsigned nlive;      /* requests allocated (in the kernel, on the again list, or
			      * parked for a buffer) */
	unsigned npending;   /* of which count for rf_ring_pending() */
	/* requests a completion sent on (rf__defer), oldest first: the submit stage
	 * (dispatch.c: rf__resubmit) queues them */
	struct rf__req *again_head, *again_tail;
	uint64_t owed;       /* sum of notifiers' owed signals */

	/* notifiers */
	struct rf__nslot *nslots;
	uint32_t nslots_cap, nslot_free;  /* free list head, UINT32_MAX: none */
	unsigned nnotifiers;
	struct rf_notifier *dirty;

	struct rf_watch *watches;

	/* pollers (poll.c) */
	struct rf_poller *pollers;
	int polling;         /* inside rf__poll: removals are deferred */
	int poll_dead;       /* some poller was removed while polling */
	uint64_t spin_ns;    /* rf_ring_set_spin */
	uint64_t poll_held;  /* sum of pollers' held completions (rf_poller_hold) */
	/* 1 from just before the owner's last poll ahead of a blocking wait until it is
	 * back (rf_ring_parked; the protocol: README.md, "Pollers and parking"). Read by
	 * other threads: a line of its own. */
	_Alignas(64) _Atomic int parked;
	char parked_pad[60];

	/* ops.c */
	uint8_t op_ok[64];   /* IORING_OP_* the kernel supports (probe at creation) */
	int no_multishot;    /* RF_RING_NO_MULTISHOT */
	struct rf_bufgroup *groups;
	uint64_t bgid_used[65536 / 64]; /* buffer-group ids held by live groups, a bit each */

	/* CQEs reaped outside rf_ring_run (kernel refused a flush with -EBUSY) */
	struct rf__cqe *backlog;
	size_t nbacklog, backlog_cap, backlog_head;

	/* registered buffers */
	char *arena;
	size_t arena_map_len, bufsz;
	void *arena_map;
	unsigned nbufs;
	struct rf__mem *mems;
	unsigned nmems;

	/* registered files (copy of the fds, for fault injection's file type check) */
	int *files;
	unsigned nfiles;

	struct rf__fault fault;
	struct rf_ring_stats st;
	unsigned sq_head_seen;   /* the kernel's SQ head when submissions were last counted */
};

/* Internal helpers shared by the ring's files (hidden from the library's ABI). Who
 * calls whom: README.md, "Where things happen". */
#define RF__HIDDEN __attribute__((visibility("hidden")))

static inline uint64_t rf__req_ud(const struct rf__req *q)
{
	return (uint64_t)(uintptr_t)q | ((uint64_t)(q->gen & 7) << 3) | RF__TAG_REQ;
}

/* What rf_ring_submit keeps of a descriptor past submission (ext of the request): a
 * copy of it (rf_io_copy: strings, socket address and iovec array in mem) and, for
 * readv/writev, the working iovec array of the current piece (wiov). */
struct rf__ext {
	struct rf_io io;
	struct open_how how;         /* openat with RF_IO_BENEATH: read at submission */
	struct iovec *wiov;
	_Alignas(16) char mem[];     /* wiov's iovcnt entries, then rf_io_copy's */
};

/* ---- request kinds (kind.c) ----------------------------------------------------------- */

/* One entry per kind of request. prep fills the SQE of the request's current piece
 * (rf__queue takes the SQE, then adds the fixed-file flag, the user_data and the
 * linked deadline); it returns 0, or 1 where the SQE's fd is no file of the fixed
 * table (a close of a slot, a splice, a faked NOP). complete takes each CQE of the
 * request and returns the number of callbacks it ran. */
struct rf__kind {
	const char *name;        /* "rf_ring_submit(read): ..." */
	int (*prep)(struct rf_ring *r, struct rf__req *q, struct io_uring_sqe *sqe);
	int (*complete)(struct rf_ring *r, struct rf__req *q, int32_t res, uint32_t cflags);
	unsigned flags;          /* RF__KF_* */
	unsigned keep;           /* the RF_IO_* flags of the call that the request keeps */
	uint8_t opcode;          /* IORING_OP_* (rf_ring_op_supported) */
};

enum {
	RF__KF_INTERNAL = 1u << 0, /* the ring's own: not cancellable by id */
	RF__KF_IN = 1u << 1,       /* its bytes count as read (stats) */
	RF__KF_OUT = 1u << 2,      /* ... as written */
	RF__KF_STREAM = 1u << 3,   /* what it moved is gone from a socket's or pipe's queue:
				    * once bytes moved, it ends with their count, never an
				    * error (recv(2), send(2)); the error comes again next */
};

RF__HIDDEN extern const struct rf__kind rf__kinds[RF__NKIND];

/* poll.c: call every poller once; the completions they delivered, *busy set when
 * one has work outstanding. rf__spin_default: the spin time a new ring starts with. */
RF__HIDDEN unsigned rf__poll(struct rf_ring *r, int *busy);
RF__HIDDEN int rf__spin_parse(const char *s, uint64_t *ns);
RF__HIDDEN void rf__pollers_free(struct rf_ring *r);

/* Count the SQEs the kernel took since the last count: its SQ head's progress. Not the
 * queue's length before and after a submit: an SQPOLL ring's kernel thread takes them
 * after the submit returns, and those were never counted (test-ring-rw saw 94 of 102
 * under load). */
static inline void rf__count_submitted(struct rf_ring *r)
{
	unsigned head = io_uring_smp_load_acquire(r->ring.sq.khead);

	r->st.submissions += head - r->sq_head_seen;   /* modulo 2^32, as the ring's */
	r->sq_head_seen = head;
}

/* The absolute deadline timeout_ns from now (0: none), saturated: a timeout too long
 * to add to the clock is no practical limit, never a deadline already past. */
static inline uint64_t rf__deadline_after(uint64_t timeout_ns)
{
	if (!timeout_ns)
		return 0;
	uint64_t now = rf_now_ns();
	return timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}
/* ---- submit.c: the request pool, SQEs, the one way into the SQ ------------------------- */
RF__HIDDEN struct rf__req *rf__req_alloc(struct rf_ring *r, int counts);
RF__HIDDEN void rf__req_free(struct rf_ring *r, struct rf__req *q);
/* Free the request, then run its callback with res. */
RF__HIDDEN void rf__req_finish(struct rf_ring *r, struct rf__req *q, int64_t res);
/* The request is over with res (a zero-copy send waits for its notifications); 1 if
 * its callback ran. */
RF__HIDDEN int rf__req_done(struct rf_ring *r, struct rf__req *q, int64_t res);
/* Whether what q moved is gone from a queue (RF__KF_STREAM): a socket's transfer, a
 * splice, or a read or write at the file position (off UINT64_MAX: a pipe, a socket,
 * a terminal). */
static inline int rf__req_stream(const struct rf_ring *r, const struct rf__req *q)
{
	unsigned kf = r->kinds[q->kind].flags;
	return (kf & RF__KF_STREAM) || ((kf & (RF__KF_IN | RF__KF_OUT)) && q->off == UINT64_MAX);
}
/* ret == 0: the request went on; else it is over with ret. */
static inline int rf__req_again(struct rf_ring *r, struct rf__req *q, int ret)
{
	if (ret == 0)
		return 0;
	/* a stream's bytes already moved: their count, not the error (RF__KF_STREAM) */
	if (ret < 0 && q->done && rf__req_stream(r, q) && !r->destroying)
		return rf__req_done(r, q, (int64_t)q->done);
	return rf__req_done(r, q, ret);
}
/* What the submit stage does with a request a completion sent on. A completion takes
 * no SQE: it puts the request on the again list (rf__defer), and the run loop's submit
 * stage (dispatch.c: rf__resubmit, before each wait and after each reap) queues it --
 * or, cancelled meanwhile, past its deadline, or with an SQ that cannot be flushed,
 * hands that outcome to its kind's complete as its own CQE would. */
enum rf__again {
	RF__AG_QUEUE = 1, /* its piece again: a rearm, a notification's read, a fallback */
	RF__AG_REQUEUE,   /* its next piece: -ETIMEDOUT past its deadline */
	RF__AG_RETRY,     /* the same piece after -EAGAIN/-EINTR: at once or after a
			   * backoff (rf__retry_wait_ns); -ETIMEDOUT past its deadline */
	RF__AG_CANCEL,    /* cancelled on the list (rf__queue_ctl), or a parked receive
			   * cancelled (rf_ring_cancel, teardown): complete sees -ECANCELED */
};
/* Put q on the again list with what comes next (a cancel already asked for stays).
 * Returns 0 (for rf__req_again: the request went on). */
static inline int rf__defer(struct rf_ring *r, struct rf__req *q, enum rf__again a)
{
	if (!q->again) {
		q->next_free = NULL;
		if (r->again_tail)
			r->again_tail->next_free = q;
		else
			r->again_head = q;
		r->again_tail = q;
	}
	if (q->again != RF__AG_CANCEL)
		q->again = (uint8_t)a;
	return 0;
}
/* Ensure n free SQEs (flushing the SQ if fewer): so that linked SQEs go in together. */
RF__HIDDEN int rf__sq_room(struct rf_ring *r, unsigned n);
/* Queue the current piece of any request: its kind's prep fills the SQE. */
RF__HIDDEN int rf__queue(struct rf_ring *r, struct rf__req *q);
/* Queue a freshly filled request; on failure it is freed. Reports its id. */
RF__HIDDEN int rf__queue_new(struct rf_ring *r, struct rf__req *q, rf_req_id *id);
/* ops.c: rf_ring_submit's checks and submission, its messages under fn (rf_ring_send,
 * ...; NULL: "rf_ring_submit(OP)"): the calls of ring-ops.h name themselves. */
RF__HIDDEN int rf__submit_as(const char *fn, struct rf_ring *r, const struct rf_io *io,
			     rf_io_cb cb, void *data, rf_req_id *id);
/* The SQEs that are no request of their own, and what they do: */
enum rf__ctl {
	RF__CTL_CANCEL,     /* cancel q in the kernel (its backoff timeout, if armed); q on
			     * the again list takes no SQE: it completes -ECANCELED there */
	RF__CTL_CANCEL_ALL, /* cancel everything (teardown; q unused) */
	RF__CTL_BACKOFF,    /* q's retry waits ns: a timeout tagged RF__TAG_RETRY */
};
/* Queue control SQE c (on q; ns for RF__CTL_BACKOFF). 0, or -errno when the SQ could
 * not be flushed. */
RF__HIDDEN int rf__queue_ctl(struct rf_ring *r, enum rf__ctl c, struct rf__req *q, uint64_t ns);
RF__HIDDEN struct rf__req *rf__req_by_id(struct rf_ring *r, rf_req_id id);
RF__HIDDEN rf_req_id rf__req_id(const struct rf__req *q);
/* The failures every request call shares, recorded for the public call fn (rf__fail):
 * -ESHUTDOWN (the ring is being destroyed), -ENOMEM for the request, and ret from
 * queueing it (a full SQ that could not be flushed). They return the code. */
RF__HIDDEN int rf__shutdown(const char *fn);
RF__HIDDEN int rf__no_req(const char *fn);
RF__HIDDEN int rf__not_queued(const char *fn, int ret);

/* ---- prep.c: every kind's prep (named in kind.c's table) ------------------------------- */
#define RF__PREP(name) RF__HIDDEN int rf__prep_##name(struct rf_ring *r, struct rf__req *q, \
						     struct io_uring_sqe *sqe)
RF__PREP(read); RF__PREP(write); RF__PREP(vec); RF__PREP(fsync); RF__PREP(timeout);
RF__PREP(openat); RF__PREP(close); RF__PREP(statx); RF__PREP(fallocate);
RF__PREP(renameat); RF__PREP(unlinkat); RF__PREP(socket); RF__PREP(connect);
RF__PREP(accept); RF__PREP(sock); RF__PREP(shutdown); RF__PREP(poll); RF__PREP(nop);
RF__PREP(splice); RF__PREP(accept_ms); RF__PREP(recv_ms); RF__PREP(poll_ms);
RF__PREP(efd_read); RF__PREP(efd_poll);
#undef RF__PREP

/* ---- the completes (named in kind.c's table); each returns the callbacks it ran ----- */
#define RF__COMPLETE(name) RF__HIDDEN int rf__complete_##name(struct rf_ring *r, \
	struct rf__req *q, int32_t res, uint32_t cflags)
/* complete.c: transfers (short ones resubmitted, -EAGAIN/-EINTR retried), timeouts,
 * and the one-result operations */
RF__COMPLETE(xfer); RF__COMPLETE(timeout); RF__COMPLETE(plain);
/* multishot.c */
RF__COMPLETE(ms);
/* notify.c: a watch's and a notifier's eventfd reads */
RF__COMPLETE(watch); RF__COMPLETE(notify_read);
#undef RF__COMPLETE
/* complete.c: a transfer came back with -EAGAIN or -EINTR: 0 when it is on its way
 * again (on the again list, RF__AG_RETRY), else the error its callback gets. */
RF__HIDDEN int rf__retry(struct rf_ring *r, struct rf__req *q, int32_t res);
/* complete.c: how long a retried piece waits before it goes again (0: at once), the
 * clock at now (read where the request has a deadline, which the wait never passes). */
RF__HIDDEN uint64_t rf__retry_wait_ns(const struct rf__req *q, uint64_t now);

/* ops.c: the kernel's operations (probed at ring creation). */
RF__HIDDEN void rf__ops_probe(struct rf_ring *r);

/* multishot.c: teardown: parked receives (not in the kernel) sent on as cancelled;
 * after every request is reaped: unregister and free the buffer groups. */
RF__HIDDEN void rf__ops_teardown(struct rf_ring *r);
RF__HIDDEN void rf__groups_free(struct rf_ring *r);

/* A provided-buffer group (ring-ops.h), kept by multishot.c. */
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

/* register.c: the fixed buffer index holding [buf, buf+len), or -EINVAL. */
RF__HIDDEN int rf__find_buf(struct rf_ring *r, const void *buf, size_t len, uint16_t *idx);

/* fault.c */
/* Parse RF_FAULT_INJECT (NULL or "": no faults): 0, or -EBADMSG with the message in
 * rf_last_error(). */
RF__HIDDEN int rf__fault_parse(struct rf__fault *f, const char *spec);
RF__HIDDEN void rf__mark_faultable(struct rf_ring *r, struct rf__req *q);
/* A faultable read or write completed with res > 0: the result to act on. */
RF__HIDDEN int32_t rf__fault_apply(struct rf_ring *r, struct rf__req *q, int32_t res);
/* A send or recv piece of n bytes about to be queued: 0 (go ahead, with *n maybe
 * shortened) or the error to fake instead (-EIO, -EAGAIN, -EINTR). */
RF__HIDDEN int32_t rf__fault_sock(struct rf_ring *r, unsigned *n);

/* dispatch.c: one loop turn; the number of callbacks run, or -errno. */
RF__HIDDEN int rf__turn(struct rf_ring *r, int wait, struct __kernel_timespec *ts);

/* notify.c */
/* Ringless MSG_RING post (IORING_REGISTER_SEND_MSG_RING); retry: back off on
 * -EAGAIN/-EBUSY/-ENOMEM/-EOVERFLOW instead of failing. */
RF__HIDDEN int rf__send_msg(int ring_fd, uint64_t ud, uint32_t res, int retry);
RF__HIDDEN void rf__notify_msg(struct rf_ring *r, uint64_t ud, int32_t res);
RF__HIDDEN int rf__notify_flush(struct rf_ring *r);
RF__HIDDEN void rf__notifiers_teardown(struct rf_ring *r);
RF__HIDDEN void rf__watches_teardown(struct rf_ring *r);

/* 0 on r's owner thread (a TLS load and a compare), else rf__owner_refused: -EPERM, or
 * -EINVAL for a NULL ring. */
static inline int rf__owner_check(const struct rf_ring *r, const char *fn)
{
	return __builtin_expect(r && rf__gettid() == r->owner_tid, 1) ? 0
								      : rf__owner_refused(r, fn);
}

/* A public call's first line: return rf__owner_check's refusal. */
#define RF__OWNER_OR_RETURN(r, fn)                       \
	do {                                             \
		int rf__oc_ = rf__owner_check((r), (fn)); \
		if (rf__oc_ < 0)                         \
			return rf__oc_;                  \
	} while (0)

/* rf__owner_check for calls that return nothing (a destroy, a count): a refusal is
 * also logged, since no caller sees a code -- the object is left as it was, not freed
 * or changed under its owner. 0, or rf__owner_check's refusal. */
static inline int rf__owner_check_void(const struct rf_ring *r, const char *fn)
{
	int ret = rf__owner_check(r, fn);

	if (__builtin_expect(ret < 0, 0))
		rf__log(RF_LOG_ERROR, "%s (left as it was)", rf_last_error());
	return ret;
}

#endif
