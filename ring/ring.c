/* ring/ring.c — the io_uring reactor: setup, request pool, submission, the run
 * loop and completion dispatch. Notifiers and eventfd watches are in notify.c.
 *
 * One io_uring_enter per loop turn: requests are only queued into the SQ by the
 * rf_ring_* calls; rf_ring_run submits them together with its wait. A full SQ is
 * flushed (io_uring_submit, no completion is reaped or dispatched there) and the
 * SQE retried. Callbacks run only inside rf_ring_run / rf_ring_run_until.
 */
#include "ring-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


#ifndef STATX_DIOALIGN
/* glibc/kernel headers older than 6.1: the fields replace __spare2 (offset 152). */
#define STATX_DIOALIGN 0x2000U
#define RF__STATX_NO_DIO_FIELDS 1
#endif

uint64_t rf_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- fault injection ---------------------------------------------------------- */

static uint64_t rf__splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rf__unit(uint64_t *s)
{
	return (double)(rf__splitmix64(s) >> 11) * 0x1.0p-53;
}

#define RF__FAULT_SYNTAX                                                              \
	"expected syntax: key=value[,key=value...] with keys eio, eagain, eintr, short " \
	"(a fraction in [0,1]), seed (an unsigned integer), ops (read, write or "        \
	"read+write), each at most once, e.g. \"eio=0.01,short=0.1,seed=7\""

/* Copy n bytes of s into dst for a message: printable ASCII only, long runs cut. */
static void rf__printable(char *dst, size_t cap, const char *s, size_t n)
{
	size_t max = cap - 1 < 96 ? cap - 1 : 96, j = 0;
	for (size_t i = 0; i < n && j < max; i++)
		dst[j++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	if (n > max && max >= 3)
		memcpy(dst + max - 3, "...", 3);
	dst[j] = '\0';
}

/* Fill msg with one line naming RF_FAULT_INJECT, the character where the trouble
 * starts (1-based) and the token there. Returns -EBADMSG. */
static int rf__fault_err(char *msg, size_t len, const char *spec, const char *at, size_t tlen,
			 const char *what)
{
	char sp[100], tok[100];
	rf__printable(sp, sizeof(sp), spec, strlen(spec));
	rf__printable(tok, sizeof(tok), at, tlen);
	snprintf(msg, len, "RF_FAULT_INJECT=\"%s\": at character %zu (\"%s\"): %s; " RF__FAULT_SYNTAX,
		 sp, (size_t)(at - spec) + 1, tok, what);
	return -EBADMSG;
}

/* A fraction in [0,1]: decimal digits, optional fraction and exponent; no spaces,
 * hex, inf or nan. Returns NULL or what is wrong. */
static const char *rf__parse_fraction(const char *v, size_t n, double *out)
{
	char buf[64];
	if (n >= sizeof(buf))
		return "value too long";
	if (!((v[0] >= '0' && v[0] <= '9') || v[0] == '.' || v[0] == '-'))
		return "not a number";
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789.eE+-", v[i]) || !v[i])
			return "not a number";
	memcpy(buf, v, n);
	buf[n] = '\0';
	char *end;
	errno = 0;
	double d = strtod(buf, &end);
	if (end != buf + n)
		return "not a number";
	if (errno == ERANGE)
		return "number out of range";
	if (!(d >= 0 && d <= 1))
		return "fraction outside [0,1]";
	*out = d;
	return NULL;
}

/* An unsigned 64-bit integer, decimal or 0x hex. */
static const char *rf__parse_u64(const char *v, size_t n, uint64_t *out)
{
	char buf[64];
	if (n >= sizeof(buf))
		return "value too long";
	if (!(v[0] >= '0' && v[0] <= '9'))
		return "not an unsigned integer";
	memcpy(buf, v, n);
	buf[n] = '\0';
	char *end;
	errno = 0;
	unsigned long long x = strtoull(buf, &end, 0);
	if (end != buf + n)
		return "not an unsigned integer";
	if (errno == ERANGE)
		return "does not fit in 64 bits";
	*out = x;
	return NULL;
}

/* Parse RF_FAULT_INJECT (NULL or "": no faults). 0, or -EBADMSG with msg filled. */
static int rf__parse_faults(struct rf__fault *f, const char *spec, char *msg, size_t msglen)
{
	static const char *const keys[] = { "eio", "eagain", "eintr", "short", "seed", "ops" };
	enum { K_EIO, K_EAGAIN, K_EINTR, K_SHORT, K_SEED, K_OPS, K_N };
	memset(f, 0, sizeof(*f));
	f->state = 1;
	f->ops = RF__FAULT_READ;
	if (!spec || !*spec)
		return 0;
	unsigned seen = 0;
	const char *p = spec;
	for (;;) {
		const char *fe = p + strcspn(p, ",");
		size_t flen = (size_t)(fe - p);
		if (!flen)
			return rf__fault_err(msg, msglen, spec, p, *p ? 1 : 0,
					     "empty field (a comma at the start or end, or two in a row)");
		const char *eq = memchr(p, '=', flen);
		if (!eq)
			return rf__fault_err(msg, msglen, spec, p, flen, "no '=' in this field");
		size_t klen = (size_t)(eq - p);
		int k = 0;
		while (k < K_N && !(strlen(keys[k]) == klen && !memcmp(p, keys[k], klen)))
			k++;
		if (k == K_N)
			return rf__fault_err(msg, msglen, spec, p, klen, "unknown key");
		if (seen & (1u << k))
			return rf__fault_err(msg, msglen, spec, p, flen, "key given twice");
		seen |= 1u << k;
		const char *v = eq + 1;
		size_t vlen = (size_t)(fe - v);
		if (!vlen)
			return rf__fault_err(msg, msglen, spec, p, flen, "missing value");
		const char *bad = NULL;
		switch (k) {
		case K_EIO: bad = rf__parse_fraction(v, vlen, &f->eio); break;
		case K_EAGAIN: bad = rf__parse_fraction(v, vlen, &f->eagain); break;
		case K_EINTR: bad = rf__parse_fraction(v, vlen, &f->eintr); break;
		case K_SHORT: bad = rf__parse_fraction(v, vlen, &f->shrt); break;
		case K_SEED: bad = rf__parse_u64(v, vlen, &f->state); break;
		case K_OPS: {
			f->ops = 0;
			const char *o = v;
			for (;;) {
				size_t olen = strcspn(o, "+,");
				if (o + olen > fe)
					olen = (size_t)(fe - o);
				if (olen == 4 && !memcmp(o, "read", 4))
					f->ops |= RF__FAULT_READ;
				else if (olen == 5 && !memcmp(o, "write", 5))
					f->ops |= RF__FAULT_WRITE;
				else
					return rf__fault_err(msg, msglen, spec, o, olen,
							     olen ? "unknown op (read or write)"
								  : "empty op name");
				if (o + olen == fe)
					break;
				o += olen + 1;
			}
			break;
		}
		}
		if (bad)
			return rf__fault_err(msg, msglen, spec, v, vlen, bad);
		if (!*fe)
			break;
		p = fe + 1;
	}
	f->active = f->eio > 0 || f->eagain > 0 || f->eintr > 0 || f->shrt > 0;
	return 0;
}

/* Print a refused RF_FAULT_INJECT once per distinct value (rings are often created
 * by several threads that all fail the same way). */
static void rf__fault_report(const char *spec, const char *msg)
{
	static uint64_t last;
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *c = spec; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
	h |= 1;
	if (__atomic_exchange_n(&last, h, __ATOMIC_RELAXED) != h)
		fprintf(stderr, "ringflow: %s\n", msg);
}

/* Applied when a faultable read or write completes with res > 0. Each fault draws
 * from the generator only when its fraction is set, so a spec without the newer
 * keys replays the same faults as before. */
static int32_t rf__fault_apply(struct rf_ring *r, struct rf__req *q, int32_t res)
{
	struct rf__fault *f = &r->fault;
	if (f->eio > 0 && rf__unit(&f->state) < f->eio) {
		r->st.faults_injected++;
		return -EIO;
	}
	if (f->eagain > 0 && rf__unit(&f->state) < f->eagain) {
		r->st.faults_injected++;
		return -EAGAIN;
	}
	if (f->eintr > 0 && rf__unit(&f->state) < f->eintr) {
		r->st.faults_injected++;
		return -EINTR;
	}
	if (f->shrt > 0 && rf__unit(&f->state) < f->shrt) {
		uint32_t gran = (q->flags & RF__RQ_DIRECT) ? 4096 : 1;
		uint32_t units = (uint32_t)res / gran;
		if (units >= 2) {
			r->st.faults_injected++;
			return (int32_t)(gran * (1 + rf__splitmix64(&f->state) % (units - 1)));
		}
	}
	return res;
}

/* ---- request pool ------------------------------------------------------------- */

static int rf__grow_pool(struct rf_ring *r)
{
	if (r->nslabs == r->slabs_cap) {
		unsigned cap = r->slabs_cap ? r->slabs_cap * 2 : 8;
		struct rf__req **s = realloc(r->slabs, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		r->slabs = s;
		r->slabs_cap = cap;
	}
	struct rf__req *slab = aligned_alloc(64, RF__SLAB_SIZE * sizeof(struct rf__req));
	if (!slab)
		return -ENOMEM;
	memset(slab, 0, RF__SLAB_SIZE * sizeof(struct rf__req));
	unsigned base = r->nslabs << RF__SLAB_SHIFT;
	r->slabs[r->nslabs++] = slab;
	for (unsigned i = RF__SLAB_SIZE; i-- > 0;) {
		slab[i].idx = base + i;
		slab[i].next_free = r->free_list;
		r->free_list = &slab[i];
	}
	return 0;
}

struct rf__req *rf__req_alloc(struct rf_ring *r, int counts)
{
	if (!r->free_list && rf__grow_pool(r) < 0)
		return NULL;
	struct rf__req *q = r->free_list;
	r->free_list = q->next_free;
	q->gen++;
	if (q->gen == 0)
		q->gen = 1;
	q->live = 1;
	q->flags = counts ? RF__RQ_COUNTS : 0;
	q->done = 0;
	r->nlive++;
	if (counts)
		r->npending++;
	return q;
}

void rf__req_free(struct rf_ring *r, struct rf__req *q)
{
	q->live = 0;
	r->nlive--;
	if (q->flags & RF__RQ_COUNTS)
		r->npending--;
	q->cb = NULL;
	q->data = NULL;
	q->u.owner = NULL;
	q->next_free = r->free_list;
	r->free_list = q;
}

static inline uint64_t rf__req_ud(const struct rf__req *q)
{
	return (uint64_t)(uintptr_t)q | ((uint64_t)(q->gen & 7) << 3) | RF__TAG_REQ;
}

static struct rf__req *rf__req_by_id(struct rf_ring *r, rf_req_id id)
{
	uint32_t slot = (uint32_t)id;
	uint32_t gen = (uint32_t)(id >> 32);
	if (slot == 0 || slot - 1 >= (r->nslabs << RF__SLAB_SHIFT))
		return NULL;
	slot--;
	struct rf__req *q = &r->slabs[slot >> RF__SLAB_SHIFT][slot & (RF__SLAB_SIZE - 1)];
	if (!q->live || q->gen != gen)
		return NULL;
	return q;
}

static inline rf_req_id rf__req_id(const struct rf__req *q)
{
	return ((uint64_t)q->gen << 32) | (uint64_t)(q->idx + 1);
}

/* ---- submission queue --------------------------------------------------------- */

static void rf__count_submitted(struct rf_ring *r, unsigned before)
{
	unsigned after = io_uring_sq_ready(&r->ring);
	if (before > after)
		r->st.submissions += before - after;
}

static int rf__backlog_push(struct rf_ring *r, const struct io_uring_cqe *c)
{
	if (r->nbacklog == r->backlog_cap) {
		if (r->backlog_head) {
			memmove(r->backlog, r->backlog + r->backlog_head,
				(r->nbacklog - r->backlog_head) * sizeof(*r->backlog));
			r->nbacklog -= r->backlog_head;
			r->backlog_head = 0;
		}
		if (r->nbacklog == r->backlog_cap) {
			size_t cap = r->backlog_cap ? r->backlog_cap * 2 : 256;
			struct rf__cqe *b = realloc(r->backlog, cap * sizeof(*b));
			if (!b)
				return -ENOMEM;
			r->backlog = b;
			r->backlog_cap = cap;
		}
	}
	r->backlog[r->nbacklog++] = (struct rf__cqe){ c->user_data, c->res, c->flags };
	return 0;
}

/* The kernel refused a flush (-EBUSY/-EAGAIN: completions it cannot post). Move the
 * CQEs into the backlog — callbacks must not run here — and let the kernel post more. */
static int rf__stash_cqes(struct rf_ring *r)
{
	struct io_uring_cqe *c;
	int ret = io_uring_get_events(&r->ring);
	r->st.enters++;
	if (ret < 0 && ret != -EBUSY && ret != -EAGAIN && ret != -EINTR)
		return ret;
	while (!__io_uring_peek_cqe(&r->ring, &c, NULL) && c) {
		if (rf__backlog_push(r, c) < 0)
			return -ENOMEM;
		io_uring_cq_advance(&r->ring, 1);
	}
	return 0;
}

/* A free SQE, flushing the SQ when full. NULL with *err on failure. */
struct io_uring_sqe *rf__sqe(struct rf_ring *r, int *err)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
	int tries = 0;
	while (!sqe) {
		r->st.sq_full_flushes++;
		unsigned before = io_uring_sq_ready(&r->ring);
		int ret = io_uring_submit(&r->ring);
		r->st.enters++;
		rf__count_submitted(r, before);
		if (ret == -EBUSY || ret == -EAGAIN) {
			ret = rf__stash_cqes(r);
			if (ret < 0 || ++tries > 1000) {
				*err = ret < 0 ? ret : -EBUSY;
				return NULL;
			}
		} else if (ret < 0 && ret != -EINTR) {
			*err = ret;
			return NULL;
		}
		if (r->setup_flags & IORING_SETUP_SQPOLL)
			io_uring_sqring_wait(&r->ring);
		sqe = io_uring_get_sqe(&r->ring);
	}
	return sqe;
}

/* Prepare the SQE for the current piece of a read/write/fsync/timeout request. */
static int rf__queue(struct rf_ring *r, struct rf__req *q)
{
	int err = 0;
	struct io_uring_sqe *sqe = rf__sqe(r, &err);
	if (!sqe)
		return err;
	size_t rem = q->len - q->done;
	unsigned n = rem > RF__MAX_SQE_LEN ? RF__MAX_SQE_LEN : (unsigned)rem;
	uint64_t off = q->off == UINT64_MAX ? UINT64_MAX : q->off + q->done;
	char *p = q->buf + q->done;
	switch (q->op) {
	case RF__OP_READ:
		if (q->flags & RF_IO_FIXED_BUF)
			io_uring_prep_read_fixed(sqe, q->fd, p, n, off, q->buf_index);
		else
			io_uring_prep_read(sqe, q->fd, p, n, off);
		break;
	case RF__OP_WRITE:
		if (q->flags & RF_IO_FIXED_BUF)
			io_uring_prep_write_fixed(sqe, q->fd, p, n, off, q->buf_index);
		else
			io_uring_prep_write(sqe, q->fd, p, n, off);
		break;
	case RF__OP_FSYNC:
		io_uring_prep_fsync(sqe, q->fd, q->len ? IORING_FSYNC_DATASYNC : 0);
		break;
	case RF__OP_TIMEOUT:
		io_uring_prep_timeout(sqe, &q->u.ts, 0, 0);
		break;
	default:
		return -EINVAL;
	}
	if (q->flags & RF_IO_FIXED_FILE)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, rf__req_ud(q));
	return 0;
}

/* Queue a read (8 bytes into dst) or a POLLIN poll for an internal eventfd request. */
/* Queue a freshly filled request; on failure it is freed. Reports its id. */
static int rf__queue_new(struct rf_ring *r, struct rf__req *q, rf_req_id *id)
{
	int ret = rf__queue(r, q);

	if (ret < 0) {
		rf__req_free(r, q);
		return ret;
	}
	if (id)
		*id = rf__req_id(q);
	return 0;
}

int rf__queue_efd(struct rf_ring *r, struct rf__req *q, int fd, int poll)
{
	int err = 0;
	struct io_uring_sqe *sqe = rf__sqe(r, &err);
	if (!sqe)
		return err;
	if (poll)
		io_uring_prep_poll_add(sqe, fd, POLLIN);
	else
		io_uring_prep_read(sqe, fd, &q->scratch, 8, 0);
	io_uring_sqe_set_data64(sqe, rf__req_ud(q));
	return 0;
}

void rf__cancel_req(struct rf_ring *r, struct rf__req *q)
{
	int err = 0;
	struct io_uring_sqe *sqe = rf__sqe(r, &err);
	if (!sqe)
		return; /* teardown's IORING_ASYNC_CANCEL_ANY still gets it */
	/* A request waiting out a retry backoff has its timeout in the kernel. */
	io_uring_prep_cancel64(sqe, rf__req_ud(q) | ((q->flags & RF__RQ_BACKOFF) ? RF__TAG_RETRY : 0), 0);
	io_uring_sqe_set_data64(sqe, RF__TAG_IGNORE);
}

/* ---- setup and teardown ------------------------------------------------------- */

/* io_uring_setup with these flags and sizes, into ring. */
static int rf__setup_try(struct io_uring *ring, unsigned flags, unsigned sq, unsigned cq,
			 const struct rf_ring_opts *o)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	p.flags = flags | IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
	p.cq_entries = cq;
	if (flags & IORING_SETUP_SQPOLL)
		p.sq_thread_idle = o->sqpoll_idle_ms ? o->sqpoll_idle_ms : 1000;
	return io_uring_queue_init_params(sq, ring, &p);
}

/* entries: a power of 2 in [1, RF__MAX_SQ_ENTRIES]. */
static int rf__setup(struct rf_ring *r, unsigned entries, const struct rf_ring_opts *o)
{
	unsigned want = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
			IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL;
	/* Dropped in this order while the kernel refuses them: newest kernels' first. */
	static const unsigned drop[] = { IORING_SETUP_DEFER_TASKRUN, IORING_SETUP_SINGLE_ISSUER,
					 IORING_SETUP_COOP_TASKRUN, IORING_SETUP_SUBMIT_ALL };
	if (o && (o->flags & RF_RING_SQPOLL))
		want = (want & ~(IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN)) |
		       IORING_SETUP_SQPOLL;
	/* 4x the SQ, within the kernel's CQ limit (CLAMP too, in case it is lower). */
	unsigned cq = entries > RF__MAX_CQ_ENTRIES / 4 ? RF__MAX_CQ_ENTRIES : entries * 4;
	size_t i = 0;
	for (;;) {
		int ret = rf__setup_try(&r->ring, want, entries, cq, o);
		if (ret == 0) {
			r->setup_flags = r->ring.flags;
			return 0;
		}
		/* The kernel says -EINVAL both for flags it does not know and for sizes it
		 * refuses. Drop a flag only if a one-entry ring with the same flags fails
		 * too: a size problem must not cost the fast flags. */
		if (ret != -EINVAL)
			return ret;
		if (entries > 1) {
			struct io_uring probe;
			if (rf__setup_try(&probe, want, 1, 4, o) == 0) {
				io_uring_queue_exit(&probe);
				return ret;
			}
		}
		while (i < sizeof(drop) / sizeof(drop[0]) && !(want & drop[i]))
			i++;
		if (i == sizeof(drop) / sizeof(drop[0]))
			return ret;
		want &= ~drop[i++];
	}
}

/* Post a message to ourselves with the ringless register call and reap it. */
static int rf__probe_msg_ring(struct rf_ring *r)
{
	int ret = rf__send_msg(r->ring.ring_fd, RF__TAG_PROBE, 0, 0);
	if (ret < 0)
		return 0;
	for (int tries = 0; tries < 100; tries++) {
		struct io_uring_cqe *c;
		ret = io_uring_wait_cqe(&r->ring, &c);
		r->st.enters++;
		if (ret == -EINTR)
			continue;
		if (ret < 0)
			return 0;
		uint64_t ud = c->user_data;
		io_uring_cq_advance(&r->ring, 1);
		if (ud == RF__TAG_PROBE)
			return 1;
	}
	return 0;
}

int rf_ring_create(struct rf_ring **out, const struct rf_ring_opts *opts)
{
	*out = NULL;
	unsigned entries = opts && opts->entries ? opts->entries : 256;
	if (entries > RF__MAX_SQ_ENTRIES)
		return -EINVAL;
	struct rf_ring *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	const char *spec = getenv("RF_FAULT_INJECT");
	char msg[512];
	int ret = rf__parse_faults(&r->fault, spec, msg, sizeof(msg));
	if (ret < 0) {
		rf__fault_report(spec, msg);
		free(r);
		return ret;
	}
	unsigned e = 1;
	while (e < entries)
		e <<= 1;
	ret = rf__setup(r, e, opts);
	if (ret < 0) {
		free(r);
		return ret;
	}
	/* Saves an fd lookup per enter; harmless where unsupported. ring_fd stays valid
	 * for the MSG_RING target. */
	io_uring_register_ring_fd(&r->ring);
	r->nslot_free = UINT32_MAX;
	if (!(opts && (opts->flags & RF_RING_NO_MSG_RING)))
		r->msg_ring = rf__probe_msg_ring(r);
	*out = r;
	return 0;
}

void rf_ring_get_info(const struct rf_ring *r, struct rf_ring_info *info)
{
	info->setup_flags = r->setup_flags;
	info->sq_entries = r->ring.sq.ring_entries;
	info->cq_entries = r->ring.cq.ring_entries;
	info->msg_ring = r->msg_ring;
}

void rf_ring_get_stats(const struct rf_ring *r, struct rf_ring_stats *st)
{
	*st = r->st;
}

void rf_ring_set_max_batch(struct rf_ring *r, unsigned max_completions)
{
	r->max_batch = max_completions;
}

unsigned rf_ring_pending(const struct rf_ring *r)
{
	uint64_t n = r->npending + r->owed;
	return n > UINT_MAX ? UINT_MAX : (unsigned)n;
}

int rf_ring_in_callback(const struct rf_ring *r)
{
	return r->cb_depth > 0;
}

static int rf__turn(struct rf_ring *r, int wait, struct __kernel_timespec *ts);

void rf_ring_destroy(struct rf_ring *r)
{
	if (!r)
		return;
	r->destroying = 1;
	rf__notifiers_teardown(r);
	rf__watches_teardown(r);
	if (r->nlive) {
		/* Every request still allocated reports -ECANCELED, whatever the kernel says. */
		for (unsigned s = 0; s < r->nslabs; s++)
			for (unsigned i = 0; i < RF__SLAB_SIZE; i++)
				if (r->slabs[s][i].live)
					r->slabs[s][i].flags |= RF__RQ_CANCELLED;
		int err = 0;
		struct io_uring_sqe *sqe = rf__sqe(r, &err);
		if (sqe) {
			io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
			io_uring_sqe_set_data64(sqe, RF__TAG_IGNORE | 8);
		}
	}
	int spins = 0;
	while (r->nlive || r->nbacklog > r->backlog_head) {
		r->in_run = 1;
		int ret = rf__turn(r, r->nlive > 0, NULL);
		r->in_run = 0;
		if (ret < 0 && ret != -EINTR && ++spins > 100)
			break; /* the ring is closed below, which cancels the rest */
	}
	io_uring_queue_exit(&r->ring);
	for (unsigned s = 0; s < r->nslabs; s++)
		free(r->slabs[s]);
	free(r->slabs);
	free(r->nslots);
	free(r->backlog);
	if (r->arena_map)
		munmap(r->arena_map, r->arena_map_len);
	free(r->mems);
	free(r->files);
	free(r);
}

/* ---- requests ----------------------------------------------------------------- */

static int rf__find_buf(struct rf_ring *r, const void *buf, size_t len, uint16_t *idx)
{
	const char *p = buf;
	if (r->arena) {
		if (p < r->arena || p >= r->arena + r->bufsz * r->nbufs)
			return -EINVAL;
		size_t i = (size_t)(p - r->arena) / r->bufsz;
		if (p + len > r->arena + (i + 1) * r->bufsz)
			return -EINVAL;
		*idx = (uint16_t)i;
		return 0;
	}
	for (unsigned i = 0; i < r->nmems; i++) {
		if (p >= r->mems[i].base && p + len <= r->mems[i].base + r->mems[i].len) {
			*idx = (uint16_t)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* Faults are injected only where they cannot change what the caller gets: regular
 * files at an explicit offset (the ring re-reads or rewrites the same bytes). */
static void rf__mark_faultable(struct rf_ring *r, struct rf__req *q)
{
	int fd = q->fd;
	if (q->off == UINT64_MAX)
		return;
	if (q->flags & RF_IO_FIXED_FILE) {
		if ((unsigned)fd >= r->nfiles)
			return;
		fd = r->files[fd];
	}
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
		return;
	q->flags |= RF__RQ_FAULTABLE;
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && (fl & O_DIRECT))
		q->flags |= RF__RQ_DIRECT;
}

static int rf__rw(struct rf_ring *r, int op, int fd, void *buf, size_t len, uint64_t off,
		  unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	if (r->destroying)
		return -ESHUTDOWN;
	uint16_t bi = 0;
	if (flags & RF_IO_FIXED_BUF) {
		int ret = rf__find_buf(r, buf, len, &bi);
		if (ret < 0)
			return ret;
	}
	struct rf__req *q = rf__req_alloc(r, 1);
	if (!q)
		return -ENOMEM;
	q->op = (uint8_t)op;
	q->fd = fd;
	q->buf = buf;
	q->len = len;
	q->off = off;
	q->buf_index = bi;
	q->flags |= flags & (RF_IO_FIXED_FILE | RF_IO_FIXED_BUF | RF_IO_NO_RETRY_SHORT);
	q->retries = 0;
	q->cb = cb;
	q->data = data;
	if (r->fault.active && ((op == RF__OP_READ && (r->fault.ops & RF__FAULT_READ)) ||
				(op == RF__OP_WRITE && (r->fault.ops & RF__FAULT_WRITE))))
		rf__mark_faultable(r, q);
	return rf__queue_new(r, q, id);
}

int rf_ring_read(struct rf_ring *r, int fd, void *buf, size_t len, uint64_t off,
		 unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	return rf__rw(r, RF__OP_READ, fd, buf, len, off, flags, cb, data, id);
}

int rf_ring_write(struct rf_ring *r, int fd, const void *buf, size_t len, uint64_t off,
		  unsigned flags, rf_io_cb cb, void *data, rf_req_id *id)
{
	return rf__rw(r, RF__OP_WRITE, fd, (void *)buf, len, off, flags, cb, data, id);
}

int rf_ring_fsync(struct rf_ring *r, int fd, unsigned flags, int datasync,
		  rf_io_cb cb, void *data, rf_req_id *id)
{
	/* len carries datasync; buf NULL */
	return rf__rw(r, RF__OP_FSYNC, fd, NULL, datasync ? 1 : 0, 0,
		      flags & RF_IO_FIXED_FILE, cb, data, id);
}

int rf_ring_timeout(struct rf_ring *r, uint64_t ns, rf_io_cb cb, void *data, rf_req_id *id)
{
	if (r->destroying)
		return -ESHUTDOWN;
	struct rf__req *q = rf__req_alloc(r, 1);
	if (!q)
		return -ENOMEM;
	q->op = RF__OP_TIMEOUT;
	q->fd = -1;
	q->buf = NULL;
	q->len = 0;
	q->off = 0;
	q->cb = cb;
	q->data = data;
	q->u.ts.tv_sec = (long long)(ns / 1000000000ull);
	q->u.ts.tv_nsec = (long long)(ns % 1000000000ull);
	return rf__queue_new(r, q, id);
}

int rf_ring_cancel(struct rf_ring *r, rf_req_id id)
{
	struct rf__req *q = rf__req_by_id(r, id);
	if (!q || q->op > RF__OP_TIMEOUT)
		return -ENOENT;
	if (q->flags & RF__RQ_CANCELLED)
		return 0;
	q->flags |= RF__RQ_CANCELLED;
	rf__cancel_req(r, q);
	return 0;
}

/* ---- completion dispatch ------------------------------------------------------ */

static void rf__finish(struct rf_ring *r, struct rf__req *q, int64_t res)
{
	rf_io_cb cb = q->cb;
	void *data = q->data;
	rf__req_free(r, q);
	if (cb) {
		r->cb_depth++;
		cb(data, res);
		r->cb_depth--;
	}
}

/* A read or write completed with -EAGAIN or -EINTR: nothing was transferred (the
 * kernel reports a partial transfer as a short count), so the same piece is
 * submitted again, at once for the first RF__RETRY_NOW results in a row, then after a
 * timeout tagged RF__TAG_RETRY that doubles up to RF__RETRY_CAP_NS: a device that
 * keeps saying -EAGAIN cannot spin the reactor. Returns 0 when the request is on its
 * way again, else the error its callback gets (res itself after RF__RETRY_MAX). */
static int rf__retry(struct rf_ring *r, struct rf__req *q, int32_t res)
{
	if (q->retries >= RF__RETRY_MAX)
		return res;
	q->retries++;
	r->st.retries++;
	if (q->retries <= RF__RETRY_NOW)
		return rf__queue(r, q);
	unsigned shift = q->retries - RF__RETRY_NOW - 1;
	uint64_t ns = shift >= 16 ? RF__RETRY_CAP_NS : RF__RETRY_BASE_NS << shift;
	if (ns > RF__RETRY_CAP_NS)
		ns = RF__RETRY_CAP_NS;
	int err = 0;
	struct io_uring_sqe *sqe = rf__sqe(r, &err);
	if (!sqe)
		return err;
	q->u.ts.tv_sec = (long long)(ns / 1000000000ull);
	q->u.ts.tv_nsec = (long long)(ns % 1000000000ull);
	io_uring_prep_timeout(sqe, &q->u.ts, 0, 0);
	io_uring_sqe_set_data64(sqe, rf__req_ud(q) | RF__TAG_RETRY);
	q->flags |= RF__RQ_BACKOFF;
	return 0;
}

/* The backoff timeout of a retried request ended (fired, or cancelled). */
static int rf__retry_fire(struct rf_ring *r, struct rf__req *q)
{
	q->flags &= ~RF__RQ_BACKOFF;
	int ret = (q->flags & RF__RQ_CANCELLED) ? -ECANCELED : rf__queue(r, q);
	if (ret == 0)
		return 0;
	rf__finish(r, q, ret);
	return 1;
}

/* Returns the number of callbacks run. */
static int rf__complete_req(struct rf_ring *r, struct rf__req *q, int32_t res)
{
	if (q->flags & RF__RQ_CANCELLED) {
		rf__finish(r, q, -ECANCELED);
		return 1;
	}
	switch (q->op) {
	case RF__OP_READ:
	case RF__OP_WRITE:
		if (res > 0 && (q->flags & RF__RQ_FAULTABLE))
			res = rf__fault_apply(r, q, res);
		if (res == -EAGAIN || res == -EINTR) {
			int ret = rf__retry(r, q, res);
			if (ret == 0)
				return 0;
			rf__finish(r, q, ret);
			return 1;
		}
		if (res < 0) {
			rf__finish(r, q, res);
			return 1;
		}
		if (q->op == RF__OP_READ)
			r->st.bytes_read += (uint64_t)res;
		else
			r->st.bytes_written += (uint64_t)res;
		q->done += (size_t)res;
		if (res > 0)
			q->retries = 0;
		if (res > 0 && q->done < q->len && !(q->flags & RF_IO_NO_RETRY_SHORT)) {
			r->st.short_resubmits++;
			int ret = rf__queue(r, q);
			if (ret == 0)
				return 0;
			rf__finish(r, q, ret);
			return 1;
		}
		rf__finish(r, q, (int64_t)q->done);
		return 1;
	case RF__OP_TIMEOUT:
		rf__finish(r, q, res == -ETIME ? 0 : res);
		return 1;
	case RF__OP_FSYNC:
		rf__finish(r, q, res);
		return 1;
	case RF__OP_WATCH:
	case RF__OP_WATCH_POLL:
		return rf__watch_complete(r, q, res);
	case RF__OP_NOTIFY_READ:
		return rf__notify_read_complete(r, q, res);
	}
	return 0;
}

static int rf__handle(struct rf_ring *r, uint64_t ud, int32_t res)
{
	switch (ud & RF__TAG_MASK) {
	case RF__TAG_REQ: {
		struct rf__req *q = (struct rf__req *)(uintptr_t)(ud & RF__PTR_MASK);
		if (!q || !q->live || (q->gen & 7) != ((ud >> 3) & 7))
			return 0; /* cannot happen: every request SQE has one CQE */
		return rf__complete_req(r, q, res);
	}
	case RF__TAG_RETRY: {
		struct rf__req *q = (struct rf__req *)(uintptr_t)(ud & RF__PTR_MASK);
		if (!q || !q->live || (q->gen & 7) != ((ud >> 3) & 7) || !(q->flags & RF__RQ_BACKOFF))
			return 0; /* cannot happen: one CQE per armed backoff */
		return rf__retry_fire(r, q);
	}
	case RF__TAG_NOTIFY:
		rf__notify_msg(r, ud, res);
		return 0;
	default:
		return 0;
	}
}

static int rf__reap(struct rf_ring *r)
{
	int n = 0;
	while (r->backlog_head < r->nbacklog) {
		struct rf__cqe c = r->backlog[r->backlog_head++];
		r->st.completions++;
		n += rf__handle(r, c.ud, c.res);
	}
	r->nbacklog = r->backlog_head = 0;
	/* Bounded so that one turn ends even if callbacks keep completing inline, and by
	 * rf_ring_set_max_batch where set. */
	unsigned budget = r->ring.cq.ring_entries * 4;
	if (r->max_batch && r->max_batch < budget)
		budget = r->max_batch;
	struct io_uring_cqe *c;
	while (budget-- && !__io_uring_peek_cqe(&r->ring, &c, NULL) && c) {
		uint64_t ud = c->user_data;
		int32_t res = c->res;
		io_uring_cq_advance(&r->ring, 1);
		r->st.completions++;
		n += rf__handle(r, ud, res);
	}
	n += rf__notify_flush(r);
	return n;
}

/* One loop turn: one io_uring_enter (submit what is queued and, if asked, wait for
 * one completion), then dispatch everything in the CQ. */
static int rf__turn(struct rf_ring *r, int wait, struct __kernel_timespec *ts)
{
	struct io_uring_cqe *cqe;
	unsigned queued = io_uring_sq_ready(&r->ring);
	int have = io_uring_cq_ready(&r->ring) > 0 || r->nbacklog > r->backlog_head;
	int overflow = (IO_URING_READ_ONCE(*r->ring.sq.kflags) & IORING_SQ_CQ_OVERFLOW) != 0;
	int ret = 0;
	if (wait && !have) {
		if (ts)
			ret = io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1, ts, NULL);
		else
			ret = io_uring_submit_and_wait(&r->ring, 1);
		r->st.enters++;
	} else if (queued || overflow || (!have && (r->nlive || r->nnotifiers))) {
		/* GETEVENTS without waiting: runs deferred task work, posts its CQEs */
		ret = io_uring_submit_and_get_events(&r->ring);
		r->st.enters++;
	}
	rf__count_submitted(r, queued);
	if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EBUSY && ret != -EAGAIN)
		return ret;
	return rf__reap(r);
}

static int rf__has_work(struct rf_ring *r)
{
	return io_uring_sq_ready(&r->ring) || io_uring_cq_ready(&r->ring) ||
	       r->nbacklog > r->backlog_head;
}

int rf_ring_run(struct rf_ring *r, enum rf_run_mode mode)
{
	if (r->in_run || r->cb_depth)
		return -EDEADLK;
	r->in_run = 1;
	int total = 0, ret = 0;
	switch (mode) {
	case RF_RUN_UNTIL_IDLE:
		for (;;) {
			int busy = rf_ring_pending(r) > 0;
			if (!busy && !rf__has_work(r))
				break;
			ret = rf__turn(r, busy, NULL);
			if (ret < 0)
				break;
			total += ret;
			if (!busy)
				break;
		}
		break;
	case RF_RUN_ONCE:
		ret = rf__turn(r, r->nlive > 0 || r->nnotifiers > 0, NULL);
		if (ret > 0)
			total += ret;
		break;
	case RF_RUN_NOWAIT:
		ret = rf__turn(r, 0, NULL);
		if (ret > 0)
			total += ret;
		break;
	default:
		ret = -EINVAL;
	}
	r->in_run = 0;
	return ret < 0 ? ret : total;
}

int rf_ring_run_until(struct rf_ring *r, int (*pred)(void *arg), void *arg, uint64_t timeout_ns)
{
	if (r->in_run || r->cb_depth)
		return -EDEADLK;
	r->in_run = 1;
	uint64_t deadline = timeout_ns ? rf_now_ns() + timeout_ns : 0;
	int ret;
	for (;;) {
		if (pred(arg)) {
			ret = 0;
			break;
		}
		int busy = rf_ring_pending(r) > 0;
		if (!busy && !rf__has_work(r)) {
			ret = -EDEADLK;
			break;
		}
		struct __kernel_timespec ts, *tsp = NULL;
		if (deadline) {
			uint64_t now = rf_now_ns();
			if (now >= deadline) {
				ret = -ETIMEDOUT;
				break;
			}
			ts.tv_sec = (long long)((deadline - now) / 1000000000ull);
			ts.tv_nsec = (long long)((deadline - now) % 1000000000ull);
			tsp = &ts;
		}
		ret = rf__turn(r, busy, tsp);
		if (ret < 0)
			break;
	}
	r->in_run = 0;
	return ret;
}

/* ---- registered buffers and files --------------------------------------------- */

int rf_dio_align(int fd, const char *path, uint32_t *mem_align, uint32_t *off_align)
{
	struct statx sx;
	int ret;
	memset(&sx, 0, sizeof(sx));
	if (path)
		ret = statx(AT_FDCWD, path, 0, STATX_DIOALIGN, &sx);
	else
		ret = statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx);
	if (ret < 0)
		return -errno;
	uint32_t ma = 0, oa = 0;
	if (sx.stx_mask & STATX_DIOALIGN) {
#ifdef RF__STATX_NO_DIO_FIELDS
		memcpy(&ma, (char *)&sx + 152, 4);
		memcpy(&oa, (char *)&sx + 156, 4);
#else
		ma = sx.stx_dio_mem_align;
		oa = sx.stx_dio_offset_align;
#endif
	}
	*mem_align = ma ? ma : 4096;
	*off_align = oa ? oa : 4096;
	return 0;
}

int rf_ring_register_buffers(struct rf_ring *r, unsigned nbufs, size_t bufsz, size_t align)
{
	if (r->arena || r->nmems)
		return -EEXIST;
	if (!align)
		align = 4096;
	if (align < 512 || (align & (align - 1)) || !nbufs || !bufsz || nbufs > 16384)
		return -EINVAL;
	bufsz = (bufsz + align - 1) & ~(align - 1);
	if (bufsz > (1ull << 30))
		return -EINVAL;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t total = bufsz * nbufs;
	size_t map_len = total + (align > page ? align : 0);
	void *m = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -ENOMEM;
	char *base = (char *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
	struct iovec *iov = malloc(nbufs * sizeof(*iov));
	if (!iov) {
		munmap(m, map_len);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < nbufs; i++) {
		iov[i].iov_base = base + (size_t)i * bufsz;
		iov[i].iov_len = bufsz;
	}
	int ret = io_uring_register_buffers(&r->ring, iov, nbufs);
	free(iov);
	if (ret < 0) {
		munmap(m, map_len);
		return ret;
	}
	r->arena_map = m;
	r->arena_map_len = map_len;
	r->arena = base;
	r->bufsz = bufsz;
	r->nbufs = nbufs;
	return 0;
}

void *rf_ring_buffer(struct rf_ring *r, unsigned i)
{
	if (!r->arena || i >= r->nbufs)
		return NULL;
	return r->arena + (size_t)i * r->bufsz;
}

size_t rf_ring_buffer_size(const struct rf_ring *r)
{
	return r->bufsz;
}

unsigned rf_ring_buffer_count(const struct rf_ring *r)
{
	return r->nbufs;
}

/* Register r->mems[0..n) as the ring's fixed buffers, replacing any earlier set.
 * Queued SQEs are submitted first: their buffer indices refer to the old table (the
 * kernel resolves them at submission and keeps those buffers alive while in use). */
static int rf__register_mems(struct rf_ring *r, unsigned n, int had)
{
	struct iovec *iov;
	int ret;

	if (had) {
		unsigned before = io_uring_sq_ready(&r->ring);
		if (before) {
			ret = io_uring_submit(&r->ring);
			r->st.enters++;
			if (ret < 0)
				return ret;
			rf__count_submitted(r, before);
		}
		ret = io_uring_unregister_buffers(&r->ring);
		if (ret < 0 && ret != -ENXIO)
			return ret;
	}
	if (!n)
		return 0;
	iov = malloc(n * sizeof(*iov));
	if (!iov)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		iov[i].iov_base = r->mems[i].base;
		iov[i].iov_len = r->mems[i].len;
	}
	ret = io_uring_register_buffers(&r->ring, iov, n);
	free(iov);
	return ret;
}

int rf_ring_register_memory(struct rf_ring *r, void *const *bufs, const size_t *lens, unsigned n)
{
	if (r->arena)
		return -EEXIST;
	if (!n || r->nmems + n > 16384)
		return -EINVAL;
	struct rf__mem *mems = realloc(r->mems, (r->nmems + n) * sizeof(*mems));
	if (!mems)
		return -ENOMEM;
	r->mems = mems;
	for (unsigned i = 0; i < n; i++) {
		mems[r->nmems + i].base = bufs[i];
		mems[r->nmems + i].len = lens[i];
	}
	int ret = rf__register_mems(r, r->nmems + n, r->nmems > 0);
	if (ret < 0) {
		/* put the previous set back; new areas are not registered */
		if (r->nmems)
			rf__register_mems(r, r->nmems, 0);
		return ret;
	}
	r->nmems += n;
	return 0;
}

int rf_ring_unregister_memory(struct rf_ring *r, const void *base)
{
	unsigned i;

	for (i = 0; i < r->nmems; i++)
		if (r->mems[i].base == base)
			break;
	if (i == r->nmems)
		return -ENOENT;
	memmove(&r->mems[i], &r->mems[i + 1], (r->nmems - i - 1) * sizeof(r->mems[0]));
	r->nmems--;
	return rf__register_mems(r, r->nmems, 1);
}

int rf_ring_register_files(struct rf_ring *r, const int *fds, unsigned n)
{
	if (!n)
		return -EINVAL;
	int *copy = malloc(n * sizeof(*copy));
	if (!copy)
		return -ENOMEM;
	memcpy(copy, fds, n * sizeof(*copy));
	if (r->nfiles) {
		io_uring_unregister_files(&r->ring);
		free(r->files);
		r->files = NULL;
		r->nfiles = 0;
	}
	int ret = io_uring_register_files(&r->ring, fds, n);
	if (ret < 0) {
		free(copy);
		return ret;
	}
	r->files = copy;
	r->nfiles = n;
	return 0;
}
