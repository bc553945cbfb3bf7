/* devices/cuda/cuda-counter.c -- a CUDA stream's completion counter (cuda-ctr.h says
 * the protocol): the word in mapped pinned memory, its write from the stream
 * (cuStreamWriteValue64 through the runtime's driver entry points, or a one-thread
 * kernel), the ring poller that reads it every reactor turn, and the waker
 * (cuda-waker.h) that wakes a sleeping reactor without holding the stream. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h> /* the types of cuStreamWriteValue64; nothing links libcuda */

#include "cuda-impl.h"
#include "kernels-cuda-impl.h"

typedef CUresult (*rf__wv64_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
static rf__wv64_fn rf__wv64;         /* cuStreamWriteValue64 from the driver, or NULL */
static pthread_once_t rf__wv64_once = PTHREAD_ONCE_INIT;

static void rf__wv64_load(void)
{
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult q;

#if CUDART_VERSION >= 12050
	if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &fn, 12000,
					     cudaEnableDefault, &q) != cudaSuccess ||
	    q != cudaDriverEntryPointSuccess)
		fn = NULL;
#else
	if (cudaGetDriverEntryPoint("cuStreamWriteValue64", &fn, cudaEnableDefault, &q) !=
	    cudaSuccess || q != cudaDriverEntryPointSuccess)
		fn = NULL;
#endif
	(void)cudaGetLastError();
	rf__wv64 = (rf__wv64_fn)fn;
}

/* Queue the write of v into the counter. 0, or -errno with the counter turned off
 * for the stream (its signals then report through the host functions only). */
int rf__cs_ctr_write(struct rf__cuda_stream *c, uint64_t v)
{
	int ret = -ENOTSUP;

	if (c->ctr_mode == RF__CTR_STREAM)
		ret = rf__wv64((CUstream)c->cs, (CUdeviceptr)(uintptr_t)c->ctr_dev, v, 0) ==
		      CUDA_SUCCESS ? 0 : -EIO;
	else if (c->ctr_mode == RF__CTR_KERNEL)
		ret = rf__kc_write_u64(c->cs, c->ctr_dev, v);
	if (ret < 0) {
		(void)cudaGetLastError();
		rf__log(RF_LOG_WARN, "stream %s: writing the completion counter failed (%s): "
			"completions come by host function only from here", c->name,
			c->ctr_mode == RF__CTR_STREAM ? "cuStreamWriteValue64" : "a kernel");
		c->ctr_mode = RF__CTR_OFF;
	}
	return ret;
}

/* The ring's poller: what the counter says is done, reported. */
static unsigned rf__cs_poll(void *data, int *busy)
{
	struct rf__cuda_stream *c = data;
	unsigned n;

	if (c->dead) {
		*busy = 0;
		return 0;
	}
	n = rf__cs_report(c);
	*busy = !c->dead && rf__ctr_out(&c->ctr) > 0;
	return n;
}

/* ---- the waker ---------------------------------------------------------------------- */

/* Waker thread: block until signal k's event has completed (blocking sync: the thread
 * sleeps in the driver). A failed wait is the watchdog's to judge. */
static int rf__cs_wait(void *ctx, uint64_t k)
{
	struct rf__cuda_stream *c = ctx;

	if (rf__cuda_set(c->ordinal) < 0)
		return -ENODEV;
	if (cudaEventSynchronize(c->wev[k % RF__WEV]) != cudaSuccess) {
		(void)cudaGetLastError();
		return -EIO;
	}
	return 0;
}

/* Waker thread: whether signal k's event has completed, without blocking. */
static int rf__cs_query(void *ctx, uint64_t k)
{
	struct rf__cuda_stream *c = ctx;
	cudaError_t e;

	if (rf__cuda_set(c->ordinal) < 0)
		return -ENODEV;
	e = cudaEventQuery(c->wev[k % RF__WEV]);
	if (e == cudaSuccess)
		return 1;
	(void)cudaGetLastError(); /* cudaErrorNotReady is no error; others wait() judges */
	return e == cudaErrorNotReady ? 0 : -EIO;
}

static uint64_t rf__cs_word(void *ctx)
{
	struct rf__cuda_stream *c = ctx;

	return c->ctr.word ? __atomic_load_n(c->ctr.word, __ATOMIC_ACQUIRE) : 0;
}

static int rf__cs_wake(void *ctx)
{
	struct rf__cuda_stream *c = ctx;

	return rf_notifier_signal(c->wnotifier);
}

/* Waker thread: whether the reactor sleeps (else its poller sees the counter). */
static int rf__cs_asleep(void *ctx)
{
	struct rf__cuda_stream *c = ctx;

	return rf_ring_parked(rf_engine_ring(c->dev->eng));
}

/* Reactor: the waker woke it; the counter says what finished. */
static void rf__cs_woken(void *data, uint32_t count)
{
	struct rf__cuda_stream *c = data;

	c->wdelivered += count;
	if (!c->dead)
		(void)rf__cs_report(c);
}

int rf__cs_waker_signal(struct rf__cuda_stream *c, uint64_t k)
{
	if (!c->waker_on)
		return -ENOTSUP;
	if (cudaEventRecord(c->wev[k % RF__WEV], c->cs) != cudaSuccess) {
		(void)cudaGetLastError();
		return -EIO;  /* no wake-up for this signal: the caller fails the stream */
	}
	rf__waker_issue(&c->waker, k);
	return 0;
}

/* The waker where the counter is written (RF_CUDA_WAKE: waker, the default, or
 * hostfn). Without it (refused, or no counter) host functions wake the reactor. */
static int rf__cs_waker_init(struct rf__cuda_stream *c)
{
	uint64_t spin_us;
	unsigned i;
	int wake;

	/* cuda-rules.c; the open checked both */
	if (rf__cuda_env_wake_get(&wake) < 0)
		return -EINVAL;
	if (c->ctr_mode == RF__CTR_OFF || !wake)
		return 0;
	if (rf__cuda_env_spin_get(&spin_us) < 0)
		return -EINVAL;
	if (!(c->wev = calloc(RF__WEV, sizeof(*c->wev))))
		return -ENOMEM;
	for (i = 0; i < RF__WEV; i++)
		if (cudaEventCreateWithFlags(&c->wev[i], cudaEventDisableTiming |
					     cudaEventBlockingSync) != cudaSuccess) {
			(void)cudaGetLastError();
			goto without;
		}
	if (rf_notifier_create(rf_engine_ring(c->dev->eng), rf__cs_woken, c, &c->wnotifier) < 0)
		goto without;
	c->waker.wait = rf__cs_wait;
	c->waker.query = rf__cs_query;
	c->waker.spin_ns = spin_us * 1000;
	c->waker.window = RF__WEV;
	c->waker.word = rf__cs_word;
	c->waker.wake = rf__cs_wake;
	c->waker.asleep = rf__cs_asleep;
	c->waker.ctx = c;
	if (rf__waker_start(&c->waker) < 0)
		goto without;
	c->waker_on = 1;
	return 0;
without:
	rf__log(RF_LOG_WARN, "stream %s: no waker thread (events, notifier or thread refused): "
		"host functions wake the reactor", c->name);
	(void)rf__cs_waker_fini(c);
	return 0;
}

int rf__cs_waker_fini(struct rf__cuda_stream *c)
{
	struct rf_ring *r = rf_engine_ring(c->dev->eng);

	if (c->waker.running && c->dead == -ETIMEDOUT &&
	    atomic_load(&c->waker.seen) < atomic_load(&c->waker.issued)) {
		/* it may be blocked on the stuck GPU for good: told to stop, not joined */
		atomic_store(&c->waker.stop, 1);
		return 0;
	}
	rf__waker_stop(&c->waker);
	c->waker_on = 0;
	if (c->wnotifier) {
		/* its wake-ups still on their way are delivered before it goes */
		uint64_t sent = atomic_load(&c->waker.wakes);
		if (sent > c->wdelivered)
			rf_notifier_expect(c->wnotifier, (uint32_t)(sent - c->wdelivered));
		while (rf_notifier_owed(c->wnotifier))
			if (rf_ring_run(r, RF_RUN_ONCE) < 0)
				break;
		rf_notifier_destroy(c->wnotifier);
		c->wnotifier = NULL;
	}
	if (c->wev) {
		for (unsigned i = 0; i < RF__WEV; i++)
			if (c->wev[i])
				cudaEventDestroy(c->wev[i]);
		free(c->wev);
		c->wev = NULL;
	}
	return 1;
}

/* The counter word, its mode (RF_CUDA_COUNTER: stream, kernel or off; default the
 * stream write where a trial write works, else the kernel) and the poller. Without
 * it the stream still works: by host function only. */
int rf__cs_ctr_init(struct rf__cuda_stream *c)
{
	void *w = NULL;
	int ret, want, mode, trial_ok = 0;

	if ((ret = rf__cuda_env_counter_get(&want)) < 0)   /* cuda-rules.c; the open checked it */
		return ret;
	if (want == RF__CTR_OFF)
		return 0;
	if (cudaHostAlloc(&w, 64, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess ||
	    cudaHostGetDevicePointer(&c->ctr_dev, w, 0) != cudaSuccess) {
		(void)cudaGetLastError();
		if (w)
			cudaFreeHost(w);
		rf__log(RF_LOG_WARN, "stream %s: no mapped pinned memory for the completion "
			"counter: completions come by host function only", c->name);
		return 0;
	}
	memset(w, 0, 64);
	c->ctr.word = w;
	pthread_once(&rf__wv64_once, rf__wv64_load);
	if (want != RF__CTR_KERNEL && rf__wv64) {
		/* a trial write of 0: some devices and drivers refuse stream memory ops */
		trial_ok = rf__wv64((CUstream)c->cs, (CUdeviceptr)(uintptr_t)c->ctr_dev, 0, 0) ==
			   CUDA_SUCCESS && cudaStreamSynchronize(c->cs) == cudaSuccess;
		if (!trial_ok)
			(void)cudaGetLastError();
	}
	if ((mode = rf__cuda_counter_mode(want, rf__wv64 != NULL, trial_ok)) < 0)
		return rf__fail(mode, "stream %s: RF_CUDA_COUNTER=stream, but %s", c->name,
				rf__wv64 ? "cuStreamWriteValue64 is refused here"
					 : "the driver has no cuStreamWriteValue64");
	c->ctr_mode = mode;
	if ((ret = rf_poller_add(rf_engine_ring(c->dev->eng), rf__cs_poll, c, &c->poller)) < 0)
		return ret;
	return rf__cs_waker_init(c);
}

const char *rf_cuda_completion(const struct rf_stream *s)
{
	const struct rf__cuda_stream *c = rf__cs_of(s);

	if (!c)
		return NULL;
	if (c->ctr_mode == RF__CTR_OFF)
		return "host function";
	if (c->ctr_mode == RF__CTR_STREAM)
		return c->waker_on ? "counter (cuStreamWriteValue64), waker thread"
				   : "counter (cuStreamWriteValue64), host functions";
	return c->waker_on ? "counter (kernel), waker thread" : "counter (kernel), host functions";
}

