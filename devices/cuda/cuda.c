/* devices/cuda/cuda.c -- the CUDA device (host C on the CUDA runtime API; built only
 * with CUDA): each CUDA stream wrapped as an in-order engine stream, completion through
 * host functions and a notifier, a watchdog, chaining by events, memory.
 * How enqueue, completion and the watchdog work: devices/README.md, "CUDA streams".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda-impl.h"
#include "kernels-cuda-impl.h"
#include "cuda-rules.h"
#if RF_HAVE_CUDNN
#include "cudnn-impl.h"
#endif

static const struct rf_stream_ops rf__cs_ops;

static __thread int rf__cur_dev = -1;
static atomic_int rf__first_dev = -1;   /* the first GPU opened, for host registration */

int rf__cuda_set(int ordinal)
{
	cudaError_t err;

	if (rf__cur_dev == ordinal)
		return 0;
	err = cudaSetDevice(ordinal);
	if (err != cudaSuccess) {
		(void)cudaGetLastError(); /* not left pending for the next launch check */
		return -(RF_KC_ECUDA + (int)err);
	}
	rf__cur_dev = ordinal;
	return 0;
}

int rf__cuerr(cudaError_t e)
{
	return e == cudaSuccess ? 0 : -(RF_KC_ECUDA + (int)e);
}

int rf__cuda_count(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return n > 0 ? n : 0;
}

/* Host memory is registered in the calling thread's current context; a thread that
 * never chose a GPU would have the runtime make one on GPU 0, which the process may
 * not use. It takes the first GPU opened instead (the registration is portable: any
 * context serves every GPU). With none opened yet, GPU 0 is what there is. */
static void rf__cuda_host_dev(void)
{
	int d = atomic_load(&rf__first_dev);

	if (rf__cur_dev < 0 && d >= 0)
		rf__cuda_set(d);
}

static int rf__cuda_host_register(void *p, size_t bytes)
{
	if (rf__cuda_count() <= 0)
		return 0;
	rf__cuda_host_dev();
	if (cudaHostRegister(p, bytes, cudaHostRegisterPortable) != cudaSuccess) {
		rf__log(RF_LOG_WARN, "cudaHostRegister of %zu bytes failed: %s (staging memory "
			"stays pageable)", bytes, cudaGetErrorString(cudaGetLastError()));
		return 0;
	}
	return 1;
}

static void rf__cuda_host_unregister(void *p)
{
	rf__cuda_host_dev();
	if (cudaHostUnregister(p) != cudaSuccess)
		(void)cudaGetLastError();
}

int rf__cuda_dnn_ok(const char **why)
{
	const char *e = getenv("RF_CUDNN");

	if (e && !strcmp(e, "0")) {
		if (why)
			*why = "turned off by RF_CUDNN=0";
		return 0;
	}
#if RF_HAVE_CUDNN
	return rf__dnn_ok(why);
#else
	if (why)
		*why = "ringflow was built without cuDNN (meson -Dcudnn)";
	return 0;
#endif
}

struct rf__cuda_stream *rf__cs_of(const struct rf_stream *s)
{
	return s && s->ops == &rf__cs_ops ? s->ctx : NULL;
}

static struct rf__dstream *rf__cuda_dstream(const struct rf_stream *s)
{
	if (s && s->ops == &rf__cs_ops)
		return ((struct rf__cuda_stream *)s->ctx)->ds;
	return NULL;
}

static void *rf__cuda_stream_handle(const struct rf_stream *s)
{
	if (s && s->ops == &rf__cs_ops)
		return (void *)((struct rf__cuda_stream *)s->ctx)->cs;
	return NULL;
}

void *rf_cuda_stream_handle(const struct rf_stream *s)
{
	return rf__cuda_stream_handle(s);
}

int rf_cuda_count(void)
{
	return rf__cuda_count();
}

int rf_cuda_dnn_available(const char **why)
{
	return rf__cuda_dnn_ok(why);
}

/* ---- memory ------------------------------------------------------------------------ */

/* ---- streams ------------------------------------------------------------------------- */

static void CUDART_CB rf__cs_host_fn(void *arg)
{
	struct rf__cuda_stream *c = arg;
	uint64_t t0 = rf_now_ns();

	/* One syscall. A transient failure (the target ring's completion queue full) is
	 * retried for up to ~10 s in all, counted from the first try (rf__signal_retry);
	 * past that, or on any other error, the signal is given up: this thread runs
	 * every stream's host functions, and blocking it would stall them all. The
	 * watchdog then finds the stream idle without its completions and fails its ops
	 * (-EIO). No CUDA call here (host functions may make none). */
	for (;;) {
		int ret;
		if (atomic_load(&c->orphaned))
			return; /* nobody listens (rf__cs_destroy) */
		ret = rf_notifier_signal(c->notifier);
		if (ret >= 0 || !rf__signal_retry(ret, t0, rf_now_ns()))
			return;
		usleep(50);
	}
}

static void rf__cs_flush_dead(struct rf__cuda_stream *c)
{
	if (c->flushing)
		return;
	c->flushing = 1;
	while (c->tail < c->head) {
		struct rf_op *op = c->fifo[c->tail & (c->cap - 1)];
		c->tail++;
		rf_engine_op_done(op, c->dead);
	}
	c->flushing = 0;
}

static void rf__cs_die(struct rf__cuda_stream *c, int code, const char *what)
{
	if (c->dead)
		return;
	c->dead = code;
	rf__cg_drop(c); /* an open capture ends; held ops fail below with the rest */
	rf__device_error(c->dev, "stream %s: %s; failing its %llu pending ops with %d",
			 c->name, what, (unsigned long long)(c->head - c->tail), code);
	rf__cs_flush_dead(c);
}

static void rf__cs_wd(void *data, int64_t res);

static void rf__cs_arm(struct rf__cuda_stream *c)
{
	struct rf__cuda_dev *cd = c->dev->ctx;

	if (c->wd_armed || c->dead)
		return;
	if (rf_ring_timeout(rf_engine_ring(c->dev->eng), cd->period_ns, rf__cs_wd, c, &c->wd_id) == 0)
		c->wd_armed = 1;
}

static void rf__cs_wd(void *data, int64_t res)
{
	struct rf__cuda_stream *c = data;
	struct rf__cuda_dev *cd = c->dev->ctx;
	enum rf__wd_seen seen;
	cudaError_t err;
	char msg[160];

	c->wd_armed = 0;
	/* no signal out: only quiet ops are, waiting for the op that reports them */
	if (res < 0 || c->dead || c->tail == c->head || rf__ctr_out(&c->ctr) == 0) {
		rf__wd_reset(&c->wd, c->tail);
		return;
	}
	if (rf__wd_progress(&c->wd, c->tail)) {
		rf__cs_arm(c);
		return;
	}
	rf__cuda_set(cd->ordinal);
	err = cudaStreamQuery(c->cs);
	if (err != cudaSuccess)
		/* cudaErrorNotReady (and any other result) is also recorded as the thread's
		 * last error: cleared here, or the next kernel launch on this thread would
		 * read it back from cudaGetLastError and fail a healthy op */
		(void)cudaGetLastError();
	seen = err == cudaErrorNotReady ? RF__WD_BUSY : err == cudaSuccess ? RF__WD_IDLE
									    : RF__WD_ERROR;
	switch (rf__wd_tick(&c->wd, seen, cd->period_ns, cd->hang_ns)) {
	case RF__WD_HUNG:
		snprintf(msg, sizeof(msg), "no op finished for %llu ms though the GPU is "
			 "still busy", (unsigned long long)(c->wd.busy_ns / 1000000));
		cd->hung = 1;
		rf__cs_die(c, -ETIMEDOUT, msg);
		return;
	case RF__WD_LOST:
		rf__cs_die(c, -EIO, "the stream is idle but completions never arrived");
		return;
	case RF__WD_FAILED:
		snprintf(msg, sizeof(msg), "CUDA error %s: %s (host functions will not run)",
			 cudaGetErrorName(err), cudaGetErrorString(err));
		rf__cs_die(c, -(RF_KC_ECUDA + (int)err), msg);
		return;
	case RF__WD_REARM:
		break;
	}
	rf__cs_arm(c);
}

static int rf__cs_grow(struct rf__cuda_stream *c)
{
	unsigned cap = c->cap ? c->cap * 2 : 64, i;
	struct rf_op **f = malloc(cap * sizeof(*f));
	int *st = malloc(cap * sizeof(*st));
	uint64_t *tl = malloc(cap * sizeof(*tl));
	uint8_t *nh = malloc(cap);

	if (!f || !st || !tl || !nh) {
		free(f);
		free(st);
		free(tl);
		free(nh);
		return -ENOMEM;
	}
	for (i = 0; i < c->head - c->tail; i++) {
		uint64_t k = c->tail + i;
		f[k & (cap - 1)] = c->fifo[k & (c->cap - 1)];
		st[k & (cap - 1)] = c->st[k & (c->cap - 1)];
		tl[k & (cap - 1)] = c->t_launch[k & (c->cap - 1)];
		nh[k & (cap - 1)] = c->nohf[k & (c->cap - 1)];
	}
	free(c->fifo);
	free(c->st);
	free(c->t_launch);
	free(c->nohf);
	c->fifo = f;
	c->st = st;
	c->t_launch = tl;
	c->nohf = nh;
	c->cap = cap;
	return 0;
}

void rf__cs_put(struct rf__cuda_stream *c, struct rf_op *op, int st, uint64_t t0)
{
	unsigned i = (unsigned)(c->head & (c->cap - 1));

	c->t_launch[i] = t0;
	c->fifo[i] = op;
	c->st[i] = st;
	c->nohf[i] = 1;
	c->head++;
}

void rf__cs_signal(struct rf__cuda_stream *c, uint64_t seq)
{
	cudaError_t err;

	c->nohf[(c->head - 1) & (c->cap - 1)] = 0;
	/* An event after this op, for chaining (only while its slot is not still owned by
	 * an unreported op RF__EVRING back). */
	if (c->head - c->tail <= RF__EVRING) {
		unsigned slot = (unsigned)(seq % RF__EVRING);
		if (cudaEventRecord(c->ev[slot], c->cs) == cudaSuccess) {
			c->ev_seq[slot] = seq;
		} else {
			c->ev_seq[slot] = 0;
			(void)cudaGetLastError(); /* no chaining after this op; not an op error */
		}
	}
	/* the counter first, then the host function: stream order makes the count written
	 * before the host function runs (cuda-ctr.h) */
	uint64_t k = rf__ctr_issue(&c->ctr);
	if (c->ctr_mode != RF__CTR_OFF)
		(void)rf__cs_ctr_write(c, k);
	if (c->waker_on) {
		/* the waker wakes a sleeping reactor from beside the stream (its seen count
		 * reports k even if the counter's write was refused) */
		int ret = rf__cs_waker_signal(c, k);
		if (ret < 0) {
			rf__cs_die(c, ret, "cudaEventRecord of the waker's event failed");
			return;
		}
		rf__cs_arm(c);
		return;
	}
	err = cudaLaunchHostFunc(c->cs, rf__cs_host_fn, c);
	if (err != cudaSuccess) {
		char msg[160];
		snprintf(msg, sizeof(msg), "cudaLaunchHostFunc: %s: %s", cudaGetErrorName(err),
			 cudaGetErrorString(err));
		rf__cs_die(c, -(RF_KC_ECUDA + (int)err), msg);
		return;
	}
	c->hf_owed++;
	rf_notifier_expect(c->notifier, 1);
	rf__cs_arm(c);
}

/* The engine's dispatch round is over: a launch gathered in part starts op by op. */
static void rf__cs_flush(struct rf_stream *s)
{
	struct rf__cuda_stream *c = s->ctx;
	int ret;

	if (!c->cg || c->dead)
		return;
	if ((ret = rf__cuda_set(c->dev->ordinal)) < 0)
		rf__cs_die(c, ret, "cudaSetDevice failed");
	else
		rf__cg_flush(c);
}

/* Nothing in the FIFO may wait for a host function that will not come: a launch
 * being gathered starts op by op, and a quiet op at the end gets its own. */
static void rf__cs_settle(struct rf__cuda_stream *c)
{
	rf__cs_flush(&c->s);
	if (!c->dead && c->head > c->tail && c->nohf[(c->head - 1) & (c->cap - 1)])
		rf__cs_signal(c, rf_op_seq(c->fifo[(c->head - 1) & (c->cap - 1)]));
}

static int rf__cs_enqueue(struct rf_stream *s, struct rf_op *op)
{
	struct rf__cuda_stream *c = s->ctx;
	uint64_t t0;
	int st, ret;

	if (c->head - c->tail == c->cap && (ret = rf__cs_grow(c)) < 0) {
		rf__cs_settle(c); /* op fails: what waits for its host function must not */
		return ret;
	}
	if (!c->dead) {
		if ((ret = rf__cuda_set(c->dev->ordinal)) < 0) {
			/* held ops could neither start nor be reported in order: all fail */
			rf__cs_die(c, ret, "cudaSetDevice failed");
		} else if (rf__cg_enqueue(c, op)) {
			if (c->dead) /* its launch's host function was refused */
				rf__cs_flush_dead(c);
			return 0; /* a graph launch's op, run with its launch */
		}
	}
	if (c->dead) { /* dead before, or now */
		rf__cs_put(c, op, c->dead, rf_now_ns());
		rf__cs_flush_dead(c);
		return 0;
	}
	t0 = rf_now_ns();
	st = rf_op_execute(op);
	rf__cs_put(c, op, st, t0);
	/* A quiet op (stream.h: its dependents are enqueued behind it here, one is sure
	 * to come) leaves its completion to the next op's host function: a host function
	 * holds the stream until it returns, so each one left out is a gap between
	 * kernels saved. The last op of a launch is never quiet. */
	if (!rf_op_quiet(op))
		rf__cs_signal(c, rf_op_seq(op));
	return 0;
}

unsigned rf__cs_report(struct rf__cuda_stream *c)
{
	uint64_t count;

	if (c->waker_on)
		rf__ctr_at_least(&c->ctr, atomic_load(&c->waker.seen));
	count = rf__ctr_ready(&c->ctr);
	unsigned ops = 0;

	/* Each signal reports the quiet ops before its op, then its op. */
	while (count && c->tail < c->head && !c->dead) {
		struct rf_op *op = c->fifo[c->tail & (c->cap - 1)];
		if (!c->nohf[c->tail & (c->cap - 1)])
			count--;
		int st = c->st[c->tail & (c->cap - 1)];
		uint64_t t0 = c->t_launch[c->tail & (c->cap - 1)], t1 = rf_now_ns();
		c->tail++;
		/* For traces: the op ran on the GPU between its launch (or the previous op's
		 * completion, in stream order) and now, as seen by the reactor. */
		if (t0 < c->t_last_done)
			t0 = c->t_last_done;
		c->t_last_done = t1;
		rf_op_set_times(op, t0, t1);
		ops++;
		rf_engine_op_done(op, st);
	}
	if (c->nretired)
		rf__cs_reap(c, 0);
	if (c->waker_on)
		rf__waker_reported(&c->waker, c->ctr.done);
	return ops;
}

/* The host functions' wake-up: count more ran; report what is now known done. */
static void rf__cs_notified(void *data, uint32_t count)
{
	struct rf__cuda_stream *c = data;

	if (c->dead)
		return; /* already reported */
	c->hf_owed -= count < c->hf_owed ? count : c->hf_owed;
	rf__ctr_hf(&c->ctr, count);
	(void)rf__cs_report(c);
}

static int rf__cs_chain(struct rf_stream *s, struct rf_stream *producer, uint64_t seq)
{
	struct rf__cuda_stream *c = s->ctx, *p;
	unsigned slot = (unsigned)(seq % RF__EVRING);

	if (!producer || producer->ops != &rf__cs_ops)
		return -ENOTSUP;
	p = producer->ctx;
	if (p->dev != c->dev || p->dead || c->dead || p->ev_seq[slot] != seq || seq <= p->tail ||
	    rf__cg_capturing(c)) /* a wait on an outside event would end the capture */
		return -ENOTSUP;
	rf__cuda_set(c->dev->ordinal);
	if (cudaStreamWaitEvent(c->cs, p->ev[slot], 0) != cudaSuccess) {
		(void)cudaGetLastError();
		return -ENOTSUP;
	}
	return 0;
}

static void rf__cs_free(struct rf__cuda_stream *c)
{
	unsigned i;

	/* events, the cuBLAS handle and the stream belong to the stream's GPU */
	if (c->dev) {
		rf__cuda_set(c->dev->ordinal);
		(void)rf__cs_waker_fini(c);
	}
	rf_poller_remove(c->poller);
	if (c->notifier)
		rf_notifier_destroy(c->notifier);
	if (c->ctr.word && cudaFreeHost(c->ctr.word) != cudaSuccess)
		(void)cudaGetLastError();
	for (i = 0; i < RF__EVRING; i++)
		if (c->ev[i])
			cudaEventDestroy(c->ev[i]);
	rf__cg_free(c);
	if (c->blas)
		rf__blas_destroy(c->blas);
	if (c->blas_ws && cudaFree(c->blas_ws) != cudaSuccess)
		(void)cudaGetLastError();
#if RF_HAVE_CUDNN
	rf__dnn_destroy(c->dnn);
#endif
	if (c->dev)
		rf__cs_reap(c, 1);
	if (c->dnn_ws && c->dev)
		rf__cache_free(&c->dev->mem, c->dnn_ws, c->dnn_ws_bytes);
	if (c->cs)
		cudaStreamDestroy(c->cs);
	free(c->fifo);
	free(c->st);
	free(c->t_launch);
	free(c->nohf);
	free(c);
}

static void rf__cs_destroy(struct rf_stream *s)
{
	struct rf__cuda_stream *c = s->ctx;
	struct rf__cuda_dev *cd = c->dev->ctx;
	struct rf_ring *r = rf_engine_ring(c->dev->eng);
	int drain = !c->dead, joined;

	/* A failed stream (say a refused cudaLaunchHostFunc) can still have kernels and
	 * host functions queued on a live context: let them finish, so that none signals a
	 * freed notifier. A broken context returns an error at once, and its host
	 * functions never run. Not after a watchdog timeout: the GPU is stuck there, and
	 * waiting would hang the teardown (see below). */
	if (c->dead && c->dead != -ETIMEDOUT && c->cs) {
		rf__cuda_set(c->dev->ordinal);
		if (cudaStreamSynchronize(c->cs) == cudaSuccess)
			drain = 1;
		else
			(void)cudaGetLastError();
	}
	/* Reap the watchdog and any signal still on its way before freeing. */
	if (c->wd_armed)
		rf_ring_cancel(r, c->wd_id);
	while (c->wd_armed || (drain && rf_notifier_owed(c->notifier)))
		if (rf_ring_run(r, RF_RUN_ONCE) < 0)
			break;
	/* After a watchdog timeout, host functions still queued on the stuck GPU run with
	 * c whenever it moves again; cuBLAS's and cuDNN's destroy calls would wait for it.
	 * So c, its notifier, CUDA stream and handles are left allocated, on purpose: the
	 * host functions find c orphaned and signal nothing (the ring frees the notifier
	 * when it is destroyed). */
	joined = rf__cs_waker_fini(c);
	if (!rf__cuda_stream_frees(c->dead == -ETIMEDOUT, cd->hung, rf_notifier_owed(c->notifier),
				   joined)) {
		atomic_store(&c->orphaned, 1);
		rf_poller_remove(c->poller); /* the counter's memory stays: the GPU may write */
		c->poller = NULL;
		if (c->dead == -ETIMEDOUT)
			rf__log(RF_LOG_WARN, "stream %s: destroyed after a watchdog timeout with %u "
				"host functions%s still queued on the GPU: its state, CUDA stream and "
				"handles are left allocated for them (a leak)", c->name,
				rf_notifier_owed(c->notifier), joined ? "" : " and its waker");
		else
			rf__log(RF_LOG_WARN, "stream %s: destroyed after another stream of its GPU "
				"hung: its CUDA stream and handles are left allocated (freeing them "
				"would wait for the stuck GPU)", c->name);
		return;
	}
	rf__cs_free(c);
}

static const struct rf_stream_ops rf__cs_ops = {
	/* .enqueue = */ rf__cs_enqueue,
	/* .chain   = */ rf__cs_chain,
	/* .destroy = */ rf__cs_destroy,
	/* .flush   = */ rf__cs_flush,
};

/* cuBLAS's workspace, fixed for the handle's life: eager runs and CUDA graph captures
 * (cuda-graph.c) then give cuBLAS the same workspace, so the same algorithms, and a
 * capture allocates none. Set after cublasSetStream, which puts the handle back on
 * cuBLAS's own pool. The size is cuBLAS's recommendation: 32 MiB from Hopper (compute
 * capability 9) on, 4 MiB before. */
static int rf__cs_blas_ws(struct rf__cuda_stream *c)
{
	int major = 0, ret;
	size_t bytes;
	cublasStatus_t st;

	if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->dev->ordinal) !=
	    cudaSuccess)
		(void)cudaGetLastError();
	bytes = (size_t)(major >= 9 ? 32 : 4) << 20;
	if ((ret = rf__cuerr(cudaMalloc(&c->blas_ws, bytes))) < 0) {
		(void)cudaGetLastError();
		c->blas_ws = NULL;
		return ret;
	}
	if ((st = rf__blas_set_workspace(c->blas, c->blas_ws, bytes)) != CUBLAS_STATUS_SUCCESS)
		return rf__fail(-EIO, "%s: cublasSetWorkspace of %zu bytes: %s", c->name, bytes,
				rf__blas_status_string(st));
	return 0;
}

static int rf__cs_create(struct rf_device *d, int role, const char *suffix)
{
	struct rf__cuda_stream *c = calloc(1, sizeof(*c));
	unsigned i;
	int ret;

	if (!c)
		return -ENOMEM;
	c->dev = d;
	c->ordinal = d->ordinal;
	snprintf(c->name, sizeof(c->name), "%s/%s", d->name, suffix);
	ret = rf__cuerr(cudaStreamCreateWithFlags(&c->cs, cudaStreamNonBlocking));
	if (ret < 0)
		goto fail;
	const char *why;
	if (rf__blas_load(&why) < 0) {
		ret = rf__fail(-ENOENT, "%s: %s", c->name, why);
		goto fail;
	}
	if (rf__blas_create(&c->blas) != CUBLAS_STATUS_SUCCESS) {
		c->blas = NULL;
		ret = -ENOMEM;
		goto fail;
	}
	rf__blas_set_stream(c->blas, c->cs);
	if (role == RF__ROLE_COMPUTE && (ret = rf__cs_blas_ws(c)) < 0)
		goto fail;
	for (i = 0; i < RF__EVRING; i++) {
		ret = rf__cuerr(cudaEventCreateWithFlags(&c->ev[i], cudaEventDisableTiming));
		if (ret < 0)
			goto fail;
	}
	ret = rf__cs_grow(c);
	if (ret < 0)
		goto fail;
	ret = rf_notifier_create(rf_engine_ring(d->eng), rf__cs_notified, c, &c->notifier);
	if (ret < 0)
		goto fail;
	if ((ret = rf__cs_ctr_init(c)) < 0)
		goto fail;
	c->s.ops = &rf__cs_ops;
	c->s.ctx = c;
	c->s.name = c->name;
	c->s.flags = RF_STREAM_IN_ORDER;
	ret = rf__device_add_stream(d, &c->s, role, c);
	if (ret < 0)
		goto fail;
	c->ds = &d->ds[d->nds - 1];
	if ((ret = rf_engine_add_stream(d->eng, &c->s)) < 0) { /* off the reactor, in an op */
		d->nds--;               /* the device's entry added just above */
		goto fail;
	}
	return 0;
fail:
	if (ret < -RF_KC_ECUDA)
		rf__fail(ret, "%s: %s", c->name, rf__kc_error_string(ret));
	rf__cs_free(c);
	return ret;
}

static void rf__cuda_close(struct rf_device *d)
{
#if RF_HAVE_CUDNN
	if (d->ctx)
		rf__dnn_dev_fini(d->ctx);
#endif
	free(d->ctx);
	d->ctx = NULL;
}

static int rf__cuda_open(struct rf_engine *e, int ordinal, const struct rf_device_opts *opts,
			 struct rf_device **out);

const struct rf__backend rf__cuda_backend = {
	/* .kind            = */ "cuda",
	/* .id              = */ RF_DEVICE_CUDA,
	/* .hostmem         = */ 0,
	/* .count           = */ rf__cuda_count,
	/* .open            = */ rf__cuda_open,
	/* .close           = */ rf__cuda_close,
	/* .supports_op     = */ rf__cuda_supports,
	/* .compute         = */ rf__cuda_compute,
	/* .workspace       = */ rf__cuda_workspace,
	/* .strerror        = */ rf__kc_error_string,
	/* .mem_alloc       = */ rf__cuda_mem_alloc,
	/* .mem_free        = */ rf__cuda_mem_free,
	/* .host_register   = */ rf__cuda_host_register,
	/* .host_unregister = */ rf__cuda_host_unregister,
	/* .dstream         = */ rf__cuda_dstream,
	/* .stream_handle   = */ rf__cuda_stream_handle,
	/* .stats           = */ rf__cuda_stats,
	/* .plan_json       = */ rf__cuda_plan_json,
};

static int rf__cuda_open(struct rf_engine *e, int ordinal, const struct rf_device_opts *opts,
			 struct rf_device **out)
{
	struct rf_device *d;
	struct rf__cuda_dev *cd;
	unsigned n = opts && opts->streams ? opts->streams : 1, i;
	unsigned period = opts ? opts->watchdog_ms : 0;
	unsigned hang = opts && opts->hang_ms ? opts->hang_ms : 600000;
	uint64_t env_ms;
	char nm[16];
	int ret, none = -1;

	if (!e || !out || ordinal < 0)
		return rf__fail(-EINVAL, "cuda:%d: an engine and an out pointer are required", ordinal);
	*out = NULL;
	/* refused before a device is looked for: a typo is reported on any machine */
	if (!period) {
		if (rf__env_u64("RF_CUDA_WATCHDOG_MS", getenv("RF_CUDA_WATCHDOG_MS"), 1, 3600000,
				2000, "milliseconds between stuck-stream checks", &env_ms) < 0)
			return rf__fail_under(-EINVAL, "cuda:%d", ordinal);
		period = (unsigned)env_ms;
	}
	if (rf__cuda_env_check() < 0)   /* RF_CUDA_COUNTER, RF_CUDA_WAKE, RF_CUDA_WAKER_SPIN_US */
		return rf__fail_under(-EINVAL, "cuda:%d", ordinal);
	if (ordinal >= rf__cuda_count())
		return rf__fail(-ENODEV, "cuda:%d: no usable CUDA device there (%d found: no GPU, "
				"no driver, or a driver too old)", ordinal, rf__cuda_count());
	if (n + 2 > RF__MAX_STREAMS)
		return rf__fail(-EINVAL, "cuda:%d: %u compute streams, expected at most %d",
				ordinal, n, RF__MAX_STREAMS - 2);
	if (opts && (unsigned)opts->precision > RF_PRECISION_BF16)
		return rf__fail(-EINVAL, "cuda:%d: precision %d: expected one of enum rf_precision",
				ordinal, (int)opts->precision);
	ret = rf__cuda_set(ordinal);
	if (ret < 0)
		return rf__fail(-ENODEV, "cuda:%d: cudaSetDevice failed", ordinal);
	int major = 0, minor = 0;
	if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal) !=
	    cudaSuccess ||
	    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ordinal) !=
	    cudaSuccess) {
		(void)cudaGetLastError();
		major = minor = 0;       /* unknown: the rules refuse nothing on it */
	}
	char cwhy[160];
	if (!rf__cuda_rule_precision(opts ? (int)opts->precision : 0, major * 10 + minor, cwhy,
				     sizeof(cwhy)))
		return rf__fail(-ENOTSUP, "cuda:%d: %s", ordinal, cwhy);
	atomic_compare_exchange_strong(&rf__first_dev, &none, ordinal);
	d = rf__device_new(e, &rf__cuda_backend, ordinal);
	cd = calloc(1, sizeof(*cd));
	if (!d || !cd) {
		free(cd);
		if (d)
			rf__device_free(d);
		return -ENOMEM;
	}
	d->mem.limit = opts ? opts->mem_limit : 0;
	d->precision = !opts || opts->precision == RF_PRECISION_DEFAULT ? RF_PRECISION_TF32
									: opts->precision;
	cd->ordinal = ordinal;
	cd->cc = major * 10 + minor;
	cd->no_fallback = opts ? opts->no_fallback : 0;
	cd->period_ns = (uint64_t)period * 1000000ull;
	cd->hang_ns = (uint64_t)hang * 1000000ull;
	d->ctx = cd;
#if RF_HAVE_CUDNN
	if (rf__dnn_dev_init(cd) < 0) {
		free(cd);
		rf__device_free(d);
		return rf__fail(-ENOMEM, "cuda:%d: out of memory", ordinal);
	}
#endif
	for (i = 0; i < n && ret == 0; i++) {
		snprintf(nm, sizeof(nm), "s%u", i);
		ret = rf__cs_create(d, RF__ROLE_COMPUTE, nm);
	}
	if (ret == 0)
		ret = rf__cs_create(d, RF__ROLE_H2D, "h2d");
	if (ret == 0)
		ret = rf__cs_create(d, RF__ROLE_D2H, "d2h");
	if (ret < 0) {
		for (i = d->nds; i-- > 0;)
			rf_stream_destroy(d->ds[i].s);
		rf__device_free(d);
#if RF_HAVE_CUDNN
		rf__dnn_dev_fini(cd);
#endif
		free(cd);
		return ret;
	}
	*out = d;
	return 0;
}

int rf_cuda_open(struct rf_engine *e, int ordinal, const struct rf_cuda_opts *opts,
		 struct rf_device **out)
{
	struct rf_device_opts o = { 0 };

	if (opts) {
		o.streams = opts->streams;
		o.watchdog_ms = opts->watchdog_ms;
		o.hang_ms = opts->hang_ms;
		o.precision = opts->precision;
	}
	return rf__cuda_open(e, ordinal, &o, out);
}
