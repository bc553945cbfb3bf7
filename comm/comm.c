/* comm/comm.c -- collectives as engine ops on a comm stream (one worker thread that
 * owns the host transport, transports.c); their completions reach the reactor as
 * every worker completion does. An environment launch (opts.store_dir) has no host
 * transport: its rank and size come from RANK / WORLD_SIZE, and its collectives go by
 * the device transport (rf_comm_use_gpu). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "comm-impl.h"
#include "rf-internal.h"
#include "store.h"

/* One collective (or init/finalize) in flight; freed by its done callback. */
struct rf__coll {
	struct rf_comm *c;
	struct rf_tensor *t;    /* a tensor collective: its first tensor, or NULL */
	void *data;             /* a tensor collective: numel elements of t's dtype from
				 * data (one tensor, or adjacent views of one block) */
	size_t numel;
	void *buf;              /* a host collective: n values of dt, reduced with rop */
	size_t n;
	enum rf_comm_dtype dt;
	enum rf_comm_reduce rop;
	size_t bytes;           /* what moves (order check, messages, watchdog) */
	const char *what;       /* "allreduce" */
	struct rf__hostres *res; /* a host collective's values, shared with its caller */
	uint64_t seq;
	uint32_t key;
	char msg[512];          /* written on the comm thread, read in done */
};

enum { RF__FAULT_NONE, RF__FAULT_KILL, RF__FAULT_STALL, RF__FAULT_FAIL };

void rf__hostres_put(struct rf__hostres *h)
{
	if (h && --h->refs == 0)
		free(h);
}

static int rf__init_fn(void *arg)
{
	struct rf__coll *x = arg;
	struct rf_comm *c = x->c;
	int ret = c->host->init(c, x->msg, sizeof(x->msg));

	if (ret == 0 && !(c->peers = calloc((size_t)c->size * 3, sizeof(uint64_t)))) {
		snprintf(x->msg, sizeof(x->msg), "out of memory");
		ret = -ENOMEM;
	}
	return ret;
}

static int rf__fini_fn(void *arg)
{
	struct rf__coll *x = arg;

	x->c->host->finalize();
	return 0;
}

int rf__order_compare(const struct rf_comm *c, const uint64_t me[3], const uint64_t *all,
		      const char *what, char *msg, size_t len)
{
	for (int r = 0; r < c->size; r++) {
		const uint64_t *p = all + 3 * r;
		if (p[0] == me[0] && p[1] == me[1] && p[2] == me[2])
			continue;
		snprintf(msg, len, "%s #%" PRIu64 ": collectives out of order: rank %d has key %"
			 PRIu64 " (%" PRIu64 " bytes, #%" PRIu64 "), rank %d has key %" PRIu64 " (%"
			 PRIu64 " bytes, #%" PRIu64 ")", what, me[0], c->rank, me[1], me[2], me[0], r,
			 p[1], p[2], p[0]);
		return -EPROTO;
	}
	return 0;
}

/* Every rank gathers every rank's (seq, key, bytes) and compares: a mismatch fails the
 * collective on every rank, naming both sides, before any data moves. */
static int rf__order_check(struct rf__coll *x)
{
	uint64_t me[3] = { x->seq, x->key, x->bytes };
	int ret = x->c->host->allgather3(me, x->c->peers, x->msg, sizeof(x->msg));

	return ret < 0 ? ret : rf__order_compare(x->c, me, x->c->peers, x->what, x->msg,
						 sizeof(x->msg));
}

void rf__comm_publish(struct rf_comm *c, uint64_t seq, uint32_t key, size_t bytes)
{
	atomic_store(&c->run_key, key);
	atomic_store(&c->run_bytes, bytes);
	atomic_store(&c->run_start_ns, (int64_t)rf_now_ns());
	atomic_store(&c->run_seq1, seq + 1);
}

void rf__comm_unpublish(struct rf_comm *c, uint64_t seq)
{
	uint64_t mine = seq + 1;

	atomic_compare_exchange_strong(&c->run_seq1, &mine, 0);
}

/* The comm thread enters collective x: published for the watchdog; a fault injected
 * for this (rank, seq) happens here. */
static int rf__enter(struct rf__coll *x)
{
	struct rf_comm *c = x->c;

	rf__comm_publish(c, x->seq, x->key, x->bytes);
	if (c->fault_kind == RF__FAULT_NONE || c->fault_rank != c->rank || c->fault_seq != x->seq)
		return 0;
	/* RF_DIST_FAULT_ONCE=FILE: only the run that creates FILE faults (a rerun resumes) */
	const char *once = getenv("RF_DIST_FAULT_ONCE");
	int fd = once && *once ? open(once, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) : 0;
	if (fd < 0)
		return 0;
	if (fd > 0)
		close(fd);
	if (c->fault_kind == RF__FAULT_KILL)
		raise(SIGKILL);
	while (c->fault_kind == RF__FAULT_STALL)
		pause();
	snprintf(x->msg, sizeof(x->msg), "%s #%" PRIu64 " (key %u, %zu bytes, rank %d of %d): "
		 "failed by RF_DIST_FAULT", x->what, x->seq, x->key, x->bytes, c->rank, c->size);
	return -EIO;
}

static void rf__leave(struct rf__coll *x)
{
	atomic_store(&x->c->run_seq1, 0);
}

/* "allreduce #SEQ (key K, B bytes, rank R of P)": how a collective names itself */
static void rf__coll_name(const struct rf__coll *x, char *buf, size_t len)
{
	snprintf(buf, len, "%s #%" PRIu64 " (key %u, %zu bytes, rank %d of %d)", x->what, x->seq,
		 x->key, x->bytes, x->c->rank, x->c->size);
}

static int rf__allreduce_fn(void *arg)
{
	struct rf__coll *x = arg;
	char what[160];
	int ret;

	if ((ret = rf__enter(x)) == 0 && (!x->c->check || (ret = rf__order_check(x)) == 0)) {
		rf__coll_name(x, what, sizeof(what));
		ret = x->c->host->allreduce(x->data, x->numel, x->t->dtype == RF_F32 ? RF__CT_F32 :
					    RF__CT_I32, RF_COMM_SUM, what, x->msg, sizeof(x->msg));
	}
	rf__leave(x);
	return ret;
}

static int rf__host_allreduce_fn(void *arg)
{
	struct rf__coll *x = arg;
	char what[160];
	int ret;

	if ((ret = rf__enter(x)) == 0 && (!x->c->check || (ret = rf__order_check(x)) == 0)) {
		rf__coll_name(x, what, sizeof(what));
		ret = x->c->host->allreduce(x->buf, x->n, x->dt == RF_COMM_F64 ? RF__CT_F64 :
					    RF__CT_U64, x->rop, what, x->msg, sizeof(x->msg));
	}
	rf__leave(x);
	return ret;
}

void rf__comm_keep_error(struct rf_comm *c, int status, const char *msg)
{
	/* the first failure is the cause; the skipped ones after it carry no message */
	if (status < 0 && msg[0] && !c->last_error[0])
		rf__fail_into(c->last_error, sizeof(c->last_error), status, "%s", msg);
}

static void rf__coll_done(void *arg, int status)
{
	struct rf__coll *x = arg;

	rf__comm_keep_error(x->c, status, x->msg);
	rf__hostres_put(x->res);
	free(x);
}

#define RF__COLL_MAXT RF__COMM_MAXT

static int rf__push_coll(struct rf_comm *c, rf_op_fn fn, struct rf__coll *tmpl,
			 struct rf_tensor *const *ts, unsigned nt, unsigned flags, const char *name)
{
	struct rf__coll *x = calloc(1, sizeof(*x));
	struct rf_var *w[1 + RF__COLL_MAXT] = { c->order };
	/* reading the ordering variable too: after a failed collective every later one is
	 * skipped (poisoned), never issued with some ranks missing */
	struct rf_op_desc d = { .fn = fn, .ctx = x, .done = rf__coll_done, .reads = w,
				.nreads = 1, .writes = w, .nwrites = 1 + nt,
				.stream = c->stream, .name = name, .flags = flags };
	int ret;

	if (!x)
		return rf__fail(-ENOMEM, "%s: out of memory", name);
	for (unsigned i = 0; i < nt; i++)
		w[1 + i] = ts[i]->var;
	if (tmpl)
		*x = *tmpl;
	x->c = c;
	x->what = name;
	x->seq = c->seq;
	ret = rf_engine_push(c->eng, &d);
	if (ret < 0) {
		free(x);
		return rf__fail(ret, "%s: push failed: %s", name, strerror(-ret));
	}
	return 0;
}

/* ---- the watchdog: a ring timer on the reactor thread ---- */

static void rf__watchdog_cb(void *data, int64_t res);

static int rf__watchdog_arm(struct rf_comm *c)
{
	double period = c->timeout_s / 4 < 1.0 ? c->timeout_s / 4 : 1.0;

	if (period < 1e-3)        /* a tiny timeout must not spin the reactor */
		period = 1e-3;
	int ret = rf_ring_timeout(rf_engine_ring(c->eng), (uint64_t)(period * 1e9),
				  rf__watchdog_cb, c, &c->timer_id);

	c->timer_live = ret == 0;
	return ret;
}

static void rf__watchdog_cb(void *data, int64_t res)
{
	struct rf_comm *c = data;
	uint64_t seq1 = atomic_load(&c->run_seq1);
	double secs;

	c->timer_live = 0;
	c->timer_id = 0;
	if (res < 0)      /* cancelled by rf_comm_destroy */
		return;
	secs = (double)((int64_t)rf_now_ns() - atomic_load(&c->run_start_ns)) * 1e-9;
	if (seq1 && secs >= c->timeout_s && seq1 == atomic_load(&c->run_seq1)) {
		struct rf_comm_stall st = { .seq = seq1 - 1, .key = (uint32_t)atomic_load(&c->run_key),
					    .bytes = (size_t)atomic_load(&c->run_bytes),
					    .seconds = secs, .what = "collective" };
		char msg[256];
		snprintf(msg, sizeof(msg), "rank %d of %d: collective #%" PRIu64 " (key %u, %zu "
			 "bytes) has been outstanding for %.1f s (timeout %.1f s): a peer has "
			 "stalled or died", c->rank, c->size, st.seq, st.key, st.bytes, secs,
			 c->timeout_s);
		if (c->dtr)          /* device collectives must not outlive the process */
			c->dtr->abort(c);
		if (c->on_stall)
			c->on_stall(c->stall_ctx, &st, msg);
		rf__log(RF_LOG_ERROR, "%s", msg);
		_exit(124);
	}
	rf__watchdog_arm(c);
}

/* RF_DIST_FAULT=kill|stall|fail:RANK:SEQ (tests only; RF_DIST_FAULT_ONCE: rf__enter). */
static int rf__parse_fault(struct rf_comm *c)
{
	const char *v = getenv("RF_DIST_FAULT"), *p;
	char *end;
	unsigned long r;

	if (!v || !*v)
		return 0;
	if (!strncmp(v, "kill:", 5))
		c->fault_kind = RF__FAULT_KILL;
	else if (!strncmp(v, "stall:", 6))
		c->fault_kind = RF__FAULT_STALL;
	else if (!strncmp(v, "fail:", 5))
		c->fault_kind = RF__FAULT_FAIL;
	else
		goto bad;
	p = strchr(v, ':') + 1;
	if (*p < '0' || *p > '9')
		goto bad;
	r = strtoul(p, &end, 10);
	if (*end != ':' || r > INT32_MAX || end[1] < '0' || end[1] > '9')
		goto bad;
	c->fault_rank = (int)r;
	errno = 0;
	c->fault_seq = strtoull(end + 1, &end, 10);
	if (*end || errno)
		goto bad;
	return 0;
bad:
	c->fault_kind = RF__FAULT_NONE;
	return rf__fail(-EINVAL, "RF_DIST_FAULT=%s: expected kill|stall|fail:RANK:SEQ", v);
}

/* opts.store_dir: rank and size from the environment; the store is used later, by
 * rf_comm_use_gpu (a device transport's rendezvous goes through it). */
static int rf__env_launch(struct rf_comm *c, const struct rf_comm_opts *opts)
{
	struct rf__launch l;
	int ret;

	if (!opts->store_dir[0])
		return rf__fail(-EINVAL, "comm: the store directory is empty");
	if (!(opts->store_timeout_s >= 0) || opts->store_timeout_s > 1e6)
		return rf__fail(-EINVAL, "comm: store timeout %g s: expected 0 (300 s) .. 1e6",
				opts->store_timeout_s);
	if ((ret = rf__launch_from_env(&l)) < 0)
		return ret;
	c->rank = l.rank;
	c->size = l.size;
	c->local_rank = l.local_rank;
	c->local_size = l.local_size;
	c->store_timeout_s = opts->store_timeout_s > 0 ? opts->store_timeout_s : 300;
	if (!(c->store_dir = strdup(opts->store_dir)) ||
	    !(c->peers = calloc((size_t)c->size * 3, sizeof(uint64_t))))
		return rf__fail(-ENOMEM, "comm: out of memory");
	return 0;
}

int rf_comm_create(struct rf_engine *e, const struct rf_comm_opts *opts, struct rf_comm **out)
{
	struct rf_comm *c;
	const char *env;
	int ret;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return rf__fail(-ENOMEM, "comm: out of memory");
	c->eng = e;
	c->check = opts ? opts->check : -1;
	c->timeout_s = opts ? opts->timeout_s : 0;
	c->on_stall = opts ? opts->on_stall : NULL;
	c->stall_ctx = opts ? opts->stall_ctx : NULL;
	if (!(c->timeout_s >= 0) || c->timeout_s > 1e9) {
		free(c);
		return rf__fail(-EINVAL, "comm: timeout %g s: expected 0 (none) .. 1e9", opts->timeout_s);
	}
	if ((ret = rf__parse_fault(c)) < 0) {
		free(c);
		return ret;
	}
	if (c->check < 0)
		c->check = (env = getenv("RF_DIST_CHECK")) && *env && strcmp(env, "0");
	c->host = opts && opts->store_dir ? NULL : rf__host_transport;
	if (!c->host && (ret = rf__env_launch(c, opts)) < 0) {
		free(c->store_dir);
		free(c);
		return ret;
	}
	ret = rf_var_create(e, "comm_order", &c->order);
	if (ret == 0)
		ret = rf_worker_stream_create(e, "comm", 0, &c->stream);
	if (ret < 0) {
		if (c->order)
			rf_var_destroy(e, c->order, NULL, NULL, NULL);
		free(c->store_dir);
		free(c->peers);
		free(c);
		return rf__fail(ret, "comm: cannot start the comm stream: %s", strerror(-ret));
	}
	if (c->host) {
		ret = rf__push_coll(c, rf__init_fn, NULL, NULL, 0, 0, "comm_init");
		if (ret == 0)
			ret = rf_engine_wait_var(e, c->order);
	}
	if (ret < 0) {
		char msg[sizeof(c->last_error)];
		snprintf(msg, sizeof(msg), "%s", c->last_error[0] ? c->last_error : rf_last_error());
		rf_comm_destroy(c);
		return rf__fail(ret, "comm: %s", msg);
	}
	if (c->timeout_s > 0 && (ret = rf__watchdog_arm(c)) < 0) {
		rf_comm_destroy(c);
		return rf__fail(ret, "comm: cannot arm the watchdog timer: %s", strerror(-ret));
	}
	*out = c;
	return 0;
}

static int rf__timer_gone(void *arg)
{
	return !((struct rf_comm *)arg)->timer_live;
}

void rf_comm_destroy(struct rf_comm *c)
{
	if (!c)
		return;
	if (c->timer_live) {
		rf_ring_cancel(rf_engine_ring(c->eng), c->timer_id);
		rf_ring_run_until(rf_engine_ring(c->eng), rf__timer_gone, c, 0);
	}
	if (c->dtr)
		c->dtr->destroy(c);
	if (c->host && rf__push_coll(c, rf__fini_fn, NULL, NULL, 0, RF_OP_ALWAYS,
				     "comm_finalize") == 0)
		rf_engine_wait_var(c->eng, c->order);
	rf_stream_destroy(c->stream);   /* waits for what else runs on it */
	rf_var_destroy(c->eng, c->order, NULL, NULL, NULL);
	rf_engine_wait_idle(c->eng);
	free(c->peers);
	free(c->store_dir);
	free(c);
}

int rf_comm_allreduce(struct rf_comm *c, struct rf_tensor *t, uint32_t key)
{
	return rf_comm_allreduce_span(c, &t, 1, key);
}

/* ts[0..n-1] as one range: one tensor, or adjacent views of one block in ascending
 * order (gaps of alignment padding between them are reduced too: no view covers
 * them). Returns the range's element count, or -EINVAL with the message set. */
static ssize_t rf__span(struct rf_tensor *const *ts, unsigned n, uint32_t key)
{
	const struct rf_tensor *t0 = ts[0], *last = ts[n - 1];
	size_t es = rf_tdtype_size(t0->dtype);

	if (t0->dtype != RF_F32 && t0->dtype != RF_I32)
		return rf__fail(-EINVAL, "allreduce of %s (key %u): expected an f32 or i32 tensor",
				t0->name, key);
	for (unsigned i = 1; i < n; i++) {
		const struct rf_tensor *a = ts[i - 1], *b = ts[i];
		if (!b || b->dtype != t0->dtype || !a->base || b->base != a->base ||
		    b->offset < a->offset + a->nbytes || b->offset - (a->offset + a->nbytes) > 256)
			return rf__fail(-EINVAL, "allreduce of %s..%s (key %u): expected adjacent "
					"views of one block, in order (%s is not right after %s)",
					t0->name, last->name, key, b ? b->name : "(null)", a->name);
	}
	size_t bytes = (size_t)((const char *)last->data - (const char *)t0->data) + last->nbytes;
	if (bytes / es > (size_t)INT32_MAX)
		return rf__fail(-EINVAL, "allreduce of %s (key %u): %zu elements, at most 2^31-1",
				t0->name, key, bytes / es);
	return (ssize_t)(bytes / es);
}

int rf_comm_allreduce_span(struct rf_comm *c, struct rf_tensor *const *ts, unsigned n,
			   uint32_t key)
{
	ssize_t numel;
	int ret;

	if (!c || !ts || n < 1 || n > RF__COLL_MAXT)
		return rf__fail(-EINVAL, "allreduce: no comm, or not 1..%d tensors", RF__COLL_MAXT);
	for (unsigned i = 0; i < n; i++)
		if (!ts[i])
			return rf__fail(-EINVAL, "allreduce (key %u): tensor %u is NULL", key, i);
	if ((numel = rf__span(ts, n, key)) < 0)
		return (int)numel;
	if (!rf_device_host_memory(ts[0]->dev)) {
		if (!c->dtr)
			return rf__fail(-EINVAL, "allreduce of %s (key %u): a tensor in %s's own "
					"memory, and this comm has no device (rf_comm_use_gpu)",
					ts[0]->name, key, rf_device_name(ts[0]->dev));
		return c->dtr->allreduce(c, ts, n, (size_t)numel, key);
	}
	if (!c->host)
		return rf__fail(-EINVAL, "allreduce of %s (key %u): a host tensor, and this comm was "
				"launched by the environment (a store directory), without a host "
				"transport: its collectives go by its device's, on device tensors",
				ts[0]->name, key);
	struct rf__coll x = { .t = ts[0], .data = ts[0]->data, .numel = (size_t)numel, .key = key,
			      .bytes = (size_t)numel * rf_tdtype_size(ts[0]->dtype) };
	ret = rf__push_coll(c, rf__allreduce_fn, &x, ts, n, 0, "allreduce");
	if (ret == 0)
		c->seq++;
	return ret;
}

int rf_comm_allreduce_host(struct rf_comm *c, void *buf, size_t n, enum rf_comm_dtype dt,
			   enum rf_comm_reduce op, uint32_t key)
{
	struct rf__hostres *h;
	int ret;

	if (!c || !buf || !n || n > 4096 || (dt != RF_COMM_F64 && dt != RF_COMM_U64) ||
	    (op != RF_COMM_SUM && op != RF_COMM_MIN && op != RF_COMM_MAX))
		return rf__fail(-EINVAL, "allreduce_host (key %u): bad arguments (1..4096 values)", key);
	if (!(h = malloc(sizeof(*h) + n * 8)))
		return rf__fail(-ENOMEM, "allreduce_host: out of memory");
	h->refs = 2;
	memcpy(h->vals, buf, n * 8);
	if (c->host) {
		struct rf__coll x = { .buf = h->vals, .n = n, .dt = dt, .rop = op, .key = key,
				      .bytes = n * 8, .res = h };
		ret = rf__push_coll(c, rf__host_allreduce_fn, &x, NULL, 0, 0, "allreduce_host");
	} else if (c->dtr) {
		ret = c->dtr->allreduce_host(c, h, n, dt, op, key);
	} else {
		ret = rf__fail(-EINVAL, "allreduce_host (key %u): this comm has no host transport "
			       "(an environment launch), and no device is set up yet "
			       "(rf_comm_use_gpu): host values go through it", key);
	}
	if (ret < 0) {
		free(h);
		return ret;
	}
	c->seq++;
	ret = rf_engine_wait_var(c->eng, c->order);
	if (ret == 0)
		memcpy(buf, h->vals, n * 8);
	else
		rf__fail(ret, "%s", c->last_error[0] ? c->last_error : strerror(-ret));
	rf__hostres_put(h);
	return ret;
}

/* s's value v as the message prints it */
static int rf__setting_str(char *b, size_t n, const struct rf_comm_setting *s, uint64_t v)
{
	double d;

	if (s->kind == RF_COMM_SET_REAL) {
		memcpy(&d, &v, sizeof(d));
		return snprintf(b, n, "%g", d);
	}
	if (s->kind == RF_COMM_SET_HASH)
		return snprintf(b, n, "%016" PRIx64, v);
	return snprintf(b, n, "%" PRIu64, v);
}

int rf_comm_agree(struct rf_comm *c, const char *what, const struct rf_comm_setting *s,
		  unsigned n, uint32_t key)
{
	char msg[1024], mine[512], lo[32], hi[32], me[32];
	size_t m = 0, k = 0;
	unsigned bad = 0;
	uint64_t *v;
	int ret;

	if (!c || !s || n < 1 || n > 2048)
		return rf__fail(-EINVAL, "rf_comm_agree: %s: expected a comm and 1 to 2048 settings",
				what ? what : "(null)");
	if (!(v = malloc(2 * n * sizeof(*v))))
		return rf__fail(-ENOMEM, "%s: out of memory", what);
	for (unsigned i = 0; i < n; i++) {
		v[i] = s[i].value;
		v[n + i] = ~s[i].value;          /* min of the complement: the maximum */
	}
	ret = rf_comm_allreduce_host(c, v, 2 * n, RF_COMM_U64, RF_COMM_MIN, key);
	if (ret < 0) {
		free(v);
		return rf__fail(ret, "%s: comparing the processes' settings failed: %s", what,
				rf_comm_last_error(c));
	}
	msg[0] = mine[0] = 0;
	for (unsigned i = 0; i < n; i++) {
		if (v[i] == ~v[n + i])
			continue;
		if (++bad > 4)
			continue;
		uint64_t a = v[i], z = ~v[n + i];
		if (s[i].kind == RF_COMM_SET_REAL) {  /* by value, not by bit pattern */
			double da, dz;
			memcpy(&da, &a, 8);
			memcpy(&dz, &z, 8);
			if (da > dz) {
				uint64_t w = a;
				a = z;
				z = w;
			}
		}
		rf__setting_str(lo, sizeof(lo), &s[i], a);
		rf__setting_str(hi, sizeof(hi), &s[i], z);
		rf__setting_str(me, sizeof(me), &s[i], s[i].value);
		if (m < sizeof(msg))
			m += (size_t)snprintf(msg + m, sizeof(msg) - m, "%s%s %s",
					      bad > 1 ? ", " : "", s[i].name,
					      s[i].kind == RF_COMM_SET_HASH ? "differs" : lo);
		if (m < sizeof(msg) && s[i].kind != RF_COMM_SET_HASH)
			m += (size_t)snprintf(msg + m, sizeof(msg) - m, " to %s", hi);
		if (k < sizeof(mine) && s[i].kind != RF_COMM_SET_HASH)
			k += (size_t)snprintf(mine + k, sizeof(mine) - k, "%s%s %s",
					      k ? ", " : "", s[i].name, me);
	}
	free(v);
	if (!bad)
		return 0;
	c->apart = 1;
	return rf__fail(-EPROTO, "%s: the %d processes were given different settings: %s%s "
			"(this rank, %d%s%s)", what, rf_comm_size(c), msg,
			bad > 4 ? ", and more" : "", rf_comm_rank(c), k ? ": " : "", mine);
}

int rf_comm_host_ready(const struct rf_comm *c)
{
	return c && (c->host || c->dtr);
}

int rf_comm_apart(const struct rf_comm *c)
{
	return c ? c->apart : 0;
}

int rf_comm_wait(struct rf_comm *c)
{
	return rf_engine_wait_var(c->eng, c->order);
}

int rf_comm_rank(const struct rf_comm *c) { return c->rank; }
int rf_comm_size(const struct rf_comm *c) { return c->size; }
int rf_comm_local_rank(const struct rf_comm *c) { return c->local_rank; }
int rf_comm_local_size(const struct rf_comm *c) { return c->local_size; }
struct rf_stream *rf_comm_stream(const struct rf_comm *c) { return c->stream; }
uint64_t rf_comm_seq(const struct rf_comm *c) { return c->seq; }
const char *rf_comm_last_error(const struct rf_comm *c) { return c->last_error; }

int rf_comm_use_gpu(struct rf_comm *c, struct rf_device *dev, struct rf_stream *s)
{
	int ret = -ENOTSUP;

	if (!c || !dev || !s)
		return rf__fail(-EINVAL, "comm: rf_comm_use_gpu needs a comm, a device and one of "
				"its streams");
	if (rf_device_host_memory(dev))
		return rf__fail(-EINVAL, "comm: rf_comm_use_gpu: %s works in host memory, whose "
				"collectives go by the host transport", rf_device_name(dev));
	if (c->dtr)
		return rf__fail(-EBUSY, "comm: already on %s", rf_device_name(c->dev));
	for (unsigned i = 0; rf__dev_transports[i] && ret == -ENOTSUP; i++) {
		/* the transport is the comm's while it attaches: its warm-up collective is
		 * the first to meet a dead peer, and the watchdog must abort it then */
		c->dtr = rf__dev_transports[i];
		if ((ret = c->dtr->attach(c, dev, s)) < 0)
			c->dtr = NULL;
	}
	if (ret == -ENOTSUP)
		return rf__fail_under(-ENOTSUP, "comm: no transport carries collectives of %s's "
				      "memory", rf_device_name(dev));
	return ret;
}
