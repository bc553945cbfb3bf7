/* ringflow/ring.h -- the io_uring reactor: one thread owns a struct rf_ring and
 * everything that schedules arrives on it as a completion (file I/O, fsyncs, timers,
 * eventfd watches, notifier signals from other threads).
 * Owner thread only (the thread that created the ring; requests, runs and destroy
 * from another are refused, -EPERM), except rf_notifier_signal() and rf_ring_parked().
 * Threading, errors and fault injection: ring/README.md.
 */
#ifndef RINGFLOW_RING_H
#define RINGFLOW_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rf_ring;
struct rf_notifier;

/* Identifies a request in flight, for rf_ring_cancel(). 0 is never a valid id. The
 * id carries a generation tag, so cancelling an id whose request already completed
 * (and whose slot was reused) is harmless: it returns -ENOENT. */
typedef uint64_t rf_req_id;

/* Called on the owner thread when a request completes. res: bytes (read/write),
 * 0 (fsync, timeout fired), or -errno (-ECANCELED after rf_ring_cancel, -ETIME is
 * reported as 0 for timeouts). The request is finished when this runs; the callback
 * may submit new requests (they are queued, never submitted recursively). */
typedef void (*rf_io_cb)(void *data, int64_t res);

/* Called on the owner thread with the number of signals received since the last
 * call (>= 1). */
typedef void (*rf_notify_cb)(void *data, uint32_t count);

/* Called on the owner thread for each completion of an eventfd watch with the value
 * read (the eventfd counter), or -errno once if the watch fails. */
typedef void (*rf_watch_cb)(void *data, int64_t value);

enum {
	RF_RING_SQPOLL = 1u << 0,     /* kernel polling thread: costs a core, no DEFER_TASKRUN */
	RF_RING_NO_MSG_RING = 1u << 1, /* force the eventfd fallback for notifiers (tests) */
	RF_RING_NO_MULTISHOT = 1u << 2, /* multishot ops rearm one-shot requests, as on kernels
					 * without multishot support (tests) */
	RF_RING_IOPOLL = 1u << 3      /* polled I/O (IORING_SETUP_IOPOLL): completions are polled
				       * for, not interrupts. Only reads and writes of O_DIRECT
				       * files (fixed or not) are allowed: any other request
				       * completes with -EINVAL, a file without polling support
				       * with -EOPNOTSUPP; waiting spins on the CPU. Notifiers
				       * need MSG_RING here (rf_notifier_create). */
};

/* The kernel's largest SQ (IORING_MAX_ENTRIES); its CQ holds at most twice that. */
#define RF_RING_MAX_ENTRIES 32768u

struct rf_ring_opts {
	unsigned entries;   /* SQ depth, 1..RF_RING_MAX_ENTRIES, rounded up to a power of 2 and
			     * to at least 2 (a request with a deadline takes two SQEs); 0: 256 */
	unsigned flags;     /* RF_RING_* */
	unsigned sqpoll_idle_ms; /* with RF_RING_SQPOLL; 0: 1000 */
};

/* What the ring actually got, for diagnostics and tests. */
struct rf_ring_info {
	unsigned setup_flags;   /* IORING_SETUP_* actually in effect */
	unsigned sq_entries, cq_entries; /* as sized by the kernel */
	int msg_ring;           /* 1: notifiers use ringless MSG_RING; 0: eventfd fallback */
};

struct rf_ring_stats {
	uint64_t submissions;   /* SQEs handed to the kernel */
	uint64_t completions;   /* CQEs reaped */
	uint64_t enters;        /* io_uring_enter calls made by the owner thread */
	uint64_t bytes_read, bytes_written;
	uint64_t short_resubmits; /* remainders of short reads/writes resubmitted */
	uint64_t sq_full_flushes; /* times the SQ was full and flushed before queuing */
	uint64_t notifications;   /* notifier signals delivered */
	uint64_t faults_injected; /* RF_FAULT_INJECT, see rf_ring_create */
	uint64_t retries;         /* reads/writes resubmitted after -EAGAIN or -EINTR */
	uint64_t zerocopy_sends;  /* send pieces sent through SEND_ZC (the kernel may still
				   * copy them: over loopback it does) */
	uint64_t multishot_rearms; /* multishot requests the kernel ended and the ring rearmed */
	uint64_t polled;          /* completions pollers delivered (rf_poller_add) */
	uint64_t spins;           /* turns that polled instead of sleeping at once */
	uint64_t spin_ns;         /* time spent in those polls */
	uint64_t spin_hits;       /* of those turns, the ones that found a completion */
};

/* Create a ring owned by the calling thread. opts may be NULL. The SQ has
 * opts->entries rounded up to a power of 2, the CQ 4x that (rf_ring_get_info says
 * what the kernel gave); more than RF_RING_MAX_ENTRIES: -EINVAL. Setup flags the
 * kernel refuses are dropped one by one. A malformed RF_FAULT_INJECT gives -EBADMSG.
 * The setup flags and the RF_FAULT_INJECT syntax: ring/README.md. */
int rf_ring_create(struct rf_ring **out, const struct rf_ring_opts *opts);

/* Cancel every request in flight, reap all completions (callbacks of cancelled
 * requests run with -ECANCELED), then free. Notifiers must be destroyed first.
 * Called from inside one of the ring's callbacks (or a rf_ring_run_until predicate)
 * it does nothing: the run loop there still uses the ring. It then leaves a message
 * in rf_last_error() and logs it at RF_LOG_ERROR; destroy the ring once rf_ring_run
 * has returned. */
void rf_ring_destroy(struct rf_ring *r);

/* What the kernel gave the ring (rf_ring_get_info: setup flags, sizes, notifier mode),
 * and a snapshot of its counters (rf_ring_get_stats). */
void rf_ring_get_info(const struct rf_ring *r, struct rf_ring_info *info);
void rf_ring_get_stats(const struct rf_ring *r, struct rf_ring_stats *st);

/* ---- requests --------------------------------------------------------------
 * All take an optional rf_req_id *id (may be NULL) that receives the request id.
 * The buffer must stay valid until the callback runs. A short read or write is
 * resubmitted for the remainder; the callback sees the total, or a smaller count
 * only at end of file (a read returning 0). A read or write that completes with
 * -EAGAIN or -EINTR is resubmitted too (at once the first few times, then after a
 * delay growing to 10 ms); only after 64 such results in a row (about half a
 * second) does the callback see the error. */
enum {
	RF_IO_FIXED_FILE = 1u << 0, /* fd is an index into rf_ring_register_files() */
	RF_IO_FIXED_BUF = 1u << 1,  /* buf lies in a buffer from rf_ring_register_buffers() */
	RF_IO_NO_RETRY_SHORT = 1u << 2 /* report short transfers as they come */
};

/* Read len bytes at off (UINT64_MAX: the file position) of fd into buf (rf_ring_read),
 * or write them (rf_ring_write): cb gets the byte count (see above) or -errno. */
int rf_ring_read(struct rf_ring *r, int fd, void *buf, size_t len, uint64_t off,
		 unsigned flags, rf_io_cb cb, void *data, rf_req_id *id);
int rf_ring_write(struct rf_ring *r, int fd, const void *buf, size_t len, uint64_t off,
		  unsigned flags, rf_io_cb cb, void *data, rf_req_id *id);
/* datasync: 1 for fdatasync semantics. */
int rf_ring_fsync(struct rf_ring *r, int fd, unsigned flags, int datasync,
		  rf_io_cb cb, void *data, rf_req_id *id);
/* Fires after ns nanoseconds with res 0, or -ECANCELED. */
int rf_ring_timeout(struct rf_ring *r, uint64_t ns, rf_io_cb cb, void *data, rf_req_id *id);
/* Ask the kernel to cancel a request. The request's own callback runs with
 * -ECANCELED (or with its result, if it completed first: a read already at the
 * device may finish; its data is then dropped: the callback still sees -ECANCELED).
 * Returns 0 if the request was in flight, -ENOENT if the id is unknown/finished. */
int rf_ring_cancel(struct rf_ring *r, rf_req_id id);

/* ---- eventfd watch (long-lived) ----------------------------------------------
 * Keeps a read armed on efd; each completion calls cb with the counter value. The
 * watch holds the ring "busy" for rf_ring_run(RF_RUN_UNTIL_IDLE) only if
 * counts_as_pending is set. cb is required (-EINVAL if NULL). */
struct rf_watch;
/* Start a watch of efd in *out: a read kept armed on it, cb getting each counter value
 * (the watch is the ring's until rf_watch_stop or rf_ring_destroy). Returns 0 or -errno
 * (-EINVAL: r, cb or out NULL; -ESHUTDOWN during rf_ring_destroy). */
int rf_watch_eventfd(struct rf_ring *r, int efd, int counts_as_pending,
		     rf_watch_cb cb, void *data, struct rf_watch **out);
/* Cancels the armed read; the watch is freed once its cancellation is reaped. */
void rf_watch_stop(struct rf_watch *w);

/* ---- notifiers: cross-thread wake-ups without locks ---------------------------
 * A notifier belongs to a ring. Any thread may call rf_notifier_signal(); the owner
 * thread's cb later receives the number of signals, exactly once each: none is lost
 * or duplicated. Delivery uses the ringless IORING_REGISTER_SEND_MSG_RING register
 * call (kernel 6.13+) and falls back to an eventfd write with a read armed on the
 * ring where the kernel refuses it. A live notifier counts as pending for
 * RF_RUN_UNTIL_IDLE only while rf_notifier_expect() says signals are owed.
 * cb is required (-EINVAL if NULL). -EOPNOTSUPP on an RF_RING_IOPOLL ring that
 * would need the eventfd fallback: a polled ring cannot read an eventfd. Should the
 * eventfd read ever fail, the notifier's owed signals stop counting as pending
 * (logged at RF_LOG_ERROR): waits end rather than spin. */
int rf_notifier_create(struct rf_ring *r, rf_notify_cb cb, void *data, struct rf_notifier **out);
/* Any thread. One syscall. Returns 0 or -errno. */
int rf_notifier_signal(struct rf_notifier *n);
/* Any thread: count signals (1 .. 2^31 - 1) in one syscall, delivered as count
 * separate ones would be. Returns 0 or -errno (-EINVAL: count out of range). */
int rf_notifier_signal_n(struct rf_notifier *n, uint32_t count);
/* Owner thread: declare that n more signals are owed (so run-until-idle waits for
 * them). Each delivered signal pays one back. */
void rf_notifier_expect(struct rf_notifier *n, uint32_t count);
/* Owner thread: signals declared owed by rf_notifier_expect and not yet delivered. */
uint32_t rf_notifier_owed(const struct rf_notifier *n);
/* Owner thread. Signals still in flight must have been delivered (owed == 0). */
void rf_notifier_destroy(struct rf_notifier *n);

/* ---- pollers: completions read from memory ---------------------------------------
 * A poller is a function the owner thread calls at every loop turn: it reads a word
 * that another agent advances without a syscall (a GPU stream writing a completion
 * counter into pinned host memory, a device's queue) and delivers what it finds, as
 * any callback would. It returns the completions it delivered and sets *busy while
 * work it can see finishing is outstanding. When a turn would sleep, some poller is
 * busy and nothing else is ready, the turn first polls for up to the ring's spin time
 * (rf_ring_set_spin) -- a completion then costs a memory read, not a wake-up -- and
 * only then sleeps in io_uring_enter. A poller's agent must still wake a sleeping ring
 * another way (a notifier), but only when it is parked: after publishing a
 * completion (a release store) the agent asks rf_ring_parked() and signals only on 1
 * -- a completion costs no system call while the owner is awake. A poller counts in
 * rf_ring_pending() what it holds (rf_poller_hold). Owner thread only; cb required. */
typedef unsigned (*rf_poll_cb)(void *data, int *busy);
struct rf_poller;
/* Add a poller that calls cb at every turn of r, in *out (freed by rf_poller_remove
 * or rf_ring_destroy). Returns 0 or -errno (-EINVAL: r, cb or out NULL; -ESHUTDOWN
 * during rf_ring_destroy; -ENOMEM). */
int rf_poller_add(struct rf_ring *r, rf_poll_cb cb, void *data, struct rf_poller **out);
/* Owner thread; also from inside a callback (a poller's own included). NULL: no-op.
 * What it held stops counting as pending. */
void rf_poller_remove(struct rf_poller *p);
/* Owner thread: n more completions (n < 0: fewer, as they are delivered) p will
 * deliver; they count in rf_ring_pending() -- run-until-idle waits for them -- as a
 * notifier's expected signals do. Never below zero. NULL: no-op. */
void rf_poller_hold(struct rf_poller *p, int64_t n);
/* Any thread: 1 while the owner thread is parked -- set just before its last poll
 * ahead of a blocking wait, cleared when the wait returns. An agent publishes a
 * completion (a release store), then calls this (it fences), and wakes the ring
 * (rf_notifier_signal) only on 1: the owner sets the flag, fences, then polls once
 * more, so every completion is either seen by that poll or followed by a signal.
 * Spurious 1s only cost a wake-up. NULL: 0. */
int rf_ring_parked(const struct rf_ring *r);
/* How long a turn polls before it sleeps while a poller is busy, in nanoseconds (0:
 * never; at most 10 ms). Default: RF_RING_SPIN_US microseconds from the environment
 * where set (0..10000), else 50 us. */
int rf_ring_set_spin(struct rf_ring *r, uint64_t spin_ns);

/* ---- registered buffers and files --------------------------------------------- */

/* O_DIRECT alignment for a file: memory and offset alignment from
 * statx(STATX_DIOALIGN) where the kernel and filesystem report it, else 4096. */
int rf_dio_align(int fd, const char *path, uint32_t *mem_align, uint32_t *off_align);

/* The block-queue attribute name (sysfs queue/NAME: nr_requests, io_poll,
 * discard_max_bytes, ...) of the disk fd is (a block device) or holds (a file) -- the
 * whole disk's for a partition -- into out (len bytes, the newline dropped); where
 * (wlen bytes; NULL: not wanted) gets the sysfs path read. 0, -ENOENT where there is
 * none (no block device under a tmpfs, an overlay or NFS; no /sys: no message, having
 * none is an answer), -EBADF where fd cannot be stat'ed (rf_last_error() names it). */
int rf_blk_queue_attr(int fd, const char *name, char *out, size_t len, char *where,
		      size_t wlen);

/* Allocate an arena of nbufs buffers of bufsz bytes, each aligned to align (a power
 * of two >= 512; bufsz rounded up to it), mmap'd, and register them with the ring as
 * fixed buffers (index i is buffer i). Only one arena per ring. The ring owns the
 * arena; it is freed by rf_ring_destroy. */
int rf_ring_register_buffers(struct rf_ring *r, unsigned nbufs, size_t bufsz, size_t align);
/* Buffer i of the ring's arena (fixed-buffer index i); NULL without an arena or for
 * i >= rf_ring_buffer_count(r). */
void *rf_ring_buffer(struct rf_ring *r, unsigned i);
/* The size of each buffer of the arena in bytes (bufsz rounded up to align); 0 without
 * an arena. */
size_t rf_ring_buffer_size(const struct rf_ring *r);
/* The number of buffers in the arena (nbufs); 0 without an arena. */
unsigned rf_ring_buffer_count(const struct rf_ring *r);
/* Register external memory areas as fixed buffers (one index each), after any
 * registered before: the ring's arena must not exist (-EEXIST). Used for pinned
 * staging memory (loaders, devices). The caller keeps the memory mapped until it
 * unregisters it or destroys the ring, and until the requests into it have completed. */
int rf_ring_register_memory(struct rf_ring *r, void *const *bufs, const size_t *lens, unsigned n);
/* Unregister the area registered with this base address (-ENOENT if none); requests
 * already submitted that use it finish normally (a later piece of one -- the rest of a
 * short read, a retry -- goes as a plain read or write into the same memory, which
 * must stay mapped until it completes). Indices of later areas shift; requests find
 * theirs at each piece. */
int rf_ring_unregister_memory(struct rf_ring *r, const void *base);

/* Register files; RF_IO_FIXED_FILE requests then name them by index (-1: an empty
 * slot). Replaces any table registered before; a refused table (-EBADF: an fd that
 * is not open, or an io_uring fd; -EINVAL: n is 0) leaves that one registered. */
int rf_ring_register_files(struct rf_ring *r, const int *fds, unsigned n);

/* ---- running ------------------------------------------------------------------ */
enum rf_run_mode {
	RF_RUN_UNTIL_IDLE,  /* until no request and no owed signal is pending */
	RF_RUN_ONCE,        /* one loop turn: submit, wait for >= 1 completion, dispatch */
	RF_RUN_NOWAIT       /* one loop turn without blocking */
};
/* Returns the number of completions dispatched (>= 0) or -errno. Callbacks never run
 * inside a submission call: only here. Calling rf_ring_run from inside a callback
 * returns -EDEADLK. */
int rf_ring_run(struct rf_ring *r, enum rf_run_mode mode);

/* Turn the loop until pred(arg) returns non-zero (checked before each turn), or the
 * ring is idle with the predicate still false (-EDEADLK: it could never become
 * true), or timeout_ns passes (-ETIMEDOUT; 0 = no timeout; one too long to add to
 * the clock, up to UINT64_MAX, ends at the clock's end: no practical limit). */
int rf_ring_run_until(struct rf_ring *r, int (*pred)(void *arg), void *arg, uint64_t timeout_ns);

/* Cap the completions one loop turn dispatches (0, the default: no cap beyond 4x the
 * CQ size). A turn is still one io_uring_enter; completions past the cap wait in the
 * CQ for the next turn, which then does not block. A small cap resubmits completed
 * slots sooner (lower latency, more enters and CPU per request): rf-iobench's
 * --batch. */
void rf_ring_set_max_batch(struct rf_ring *r, unsigned max_completions);

/* Requests in flight (submitted or queued), owed notifier signals included. */
unsigned rf_ring_pending(const struct rf_ring *r);
/* Non-zero while a callback is being dispatched on this ring. */
int rf_ring_in_callback(const struct rf_ring *r);

/* Monotonic clock in nanoseconds, as used by traces and benchmarks. */
uint64_t rf_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif
