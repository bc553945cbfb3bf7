/* devices/cpu/cpu.c -- the CPU backend: its table, worker streams, host memory and
 * the OpenBLAS threading policy.
 *
 * Streams are core's worker streams (one thread each, SPSC queue in, notifier out).
 * An op's function runs rf__cpu_compute (cpu-ops.c) on the worker thread: GEMM
 * through OpenBLAS (rf__k_gemm), the rest plain vectorizable C (the other files of
 * cpu/). The copy stream runs memcpy. OpenBLAS's (process-wide) thread count follows
 * the policy in devices/README.md: cores / compute streams of all open CPU devices.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu-impl.h"
#include "kernels-impl.h"
#include "par.h"

/* ---- threading policy ------------------------------------------------------------- */

static int rf__cpu_total_streams; /* compute streams of all open CPU devices */
static int rf__cpu_forced;        /* > 0: blas threads fixed by an opts; -1: untouched */

#define RF__BLAS_THREADS_MAX 1024

/* RF_BLAS_THREADS=N, OpenBLAS's threads at most: 0 and *cap (0 where unset), or
 * -EINVAL with the message naming the variable (it was read with atoi: "abc", "-5" and
 * "99999999999" were silently no cap). */
static int rf__blas_threads_env(int *cap)
{
	uint64_t v;
	int ret = rf__env_u64("RF_BLAS_THREADS", getenv("RF_BLAS_THREADS"), 1,
			      RF__BLAS_THREADS_MAX, 0, "the OpenBLAS threads at most", &v);

	*cap = (int)v;  /* 0 (no cap) where unset or refused */
	return ret;
}

static void rf__cpu_policy_update(int delta_streams, int forced_threads)
{
	int cores = rf__cpus(), t;

	rf__cpu_total_streams += delta_streams;
	if (forced_threads)
		rf__cpu_forced = forced_threads;
	if (rf__cpu_total_streams <= 0) {
		rf__cpu_total_streams = 0;
		rf__cpu_forced = 0;
		return;
	}
	if (rf__cpu_forced < 0)
		return;
	t = rf__cpu_forced > 0 ? rf__cpu_forced : cores / rf__cpu_total_streams;
	{
		/* RF_BLAS_THREADS=N caps OpenBLAS's threads whatever the policy says (1 for
		 * ThreadSanitizer runs: OpenBLAS's own thread handoffs are invisible to it). */
		int cap;
		if (rf__blas_threads_env(&cap) == 0 && cap > 0 && t > cap) /* checked at open */
			t = cap;
	}
	if (t < 1)
		t = 1;
	rf__k_blas_set_threads(t); /* -ENOTSUP without OpenBLAS: nothing to set */
}

/* ---- backend ------------------------------------------------------------------------- */

static int rf__cpu_mem_alloc(void *ctx, size_t bytes, void **out)
{
	return rf__host_alloc(ctx, bytes, out);
}

static void rf__cpu_mem_free(void *ctx, void *p, size_t bytes)
{
	rf__host_free(ctx, p, bytes);
}

/* After the streams are gone: the policy no longer counts this device's streams. */
static void rf__cpu_close(struct rf_device *d)
{
	rf__cpu_policy_update(-(int)d->ncompute, 0);
	rf__par_release();
}

static int rf__cpu_count(void)
{
	return 1;
}

static int rf__cpu_open_be(struct rf_engine *e, int ordinal, const struct rf_device_opts *opts,
			   struct rf_device **out);

const struct rf__backend rf__cpu_backend = {
	/* .kind            = */ "cpu",
	/* .id              = */ RF_DEVICE_CPU,
	/* .hostmem         = */ 1,
	/* .count           = */ rf__cpu_count,
	/* .open            = */ rf__cpu_open_be,
	/* .close           = */ rf__cpu_close,
	/* .supports_op     = */ rf__cpu_supports,
	/* .compute         = */ rf__cpu_compute,
	/* .workspace       = */ rf__cpu_workspace,
	/* .strerror        = */ NULL, /* optional */
	/* .mem_alloc       = */ rf__cpu_mem_alloc,
	/* .mem_free        = */ rf__cpu_mem_free,
	/* .host_register   = */ NULL, /* optional: host memory is its own */
	/* .host_unregister = */ NULL,
	/* .dstream         = */ NULL, /* its streams are core's worker streams */
	/* .stream_handle   = */ NULL,
	/* .stats           = */ NULL, /* optional */
	/* .plan_json       = */ NULL,
	/* .conv_group      = */ rf__k_conv2d_group,
};

static int rf__cpu_ordinal;

static int rf__cpu_open_be(struct rf_engine *e, int ordinal, const struct rf_device_opts *opts,
			   struct rf_device **out)
{
	struct rf_device *d;
	unsigned n = opts && opts->streams ? opts->streams : 1, i;
	unsigned q = opts ? opts->queue : 0;
	char nm[48];
	int ret;

	/* every failure leaves its message (rf_last_error): the trainer prints it */
	if (!e || !out)
		return rf__fail(-EINVAL, "CPU device: an engine and an out pointer are required");
	if (n + 1 > RF__MAX_STREAMS)
		return rf__fail(-EINVAL, "CPU device: %u compute streams, expected at most %d", n,
				RF__MAX_STREAMS - 1);
	int cap;
	if (opts && (unsigned)opts->precision > RF_PRECISION_BF16)
		return rf__fail(-EINVAL, "CPU device: precision %d: expected one of enum "
				"rf_precision", (int)opts->precision);
	if ((ret = rf__blas_threads_env(&cap)) < 0)
		return ret;
	if ((ret = rf__par_acquire()) < 0)
		return ret;
	d = rf__device_new(e, &rf__cpu_backend, ordinal);
	if (!d) {
		rf__par_release();
		return rf__fail(-ENOMEM, "CPU device: %s", strerror(ENOMEM));
	}
	d->mem.limit = opts ? opts->mem_limit : 0;
	for (i = 0; i < n; i++) {
		struct rf_stream *s;
		snprintf(nm, sizeof(nm), "%s/s%u", d->name, i);
		ret = rf_worker_stream_create(e, nm, q, &s);
		if (ret < 0)
			goto fail;
		rf__device_add_stream(d, s, RF__ROLE_COMPUTE, NULL);
	}
	{
		struct rf_stream *s;
		snprintf(nm, sizeof(nm), "%s/copy", d->name);
		ret = rf_worker_stream_create(e, nm, q, &s);
		if (ret < 0)
			goto fail;
		rf__device_add_stream(d, s, RF__ROLE_COPY, NULL);
	}
	rf__cpu_policy_update((int)d->ncompute, opts ? opts->blas_threads : 0);
	*out = d;
	return 0;
fail:;
	char why[300];  /* the stream's own words (a thread limit, say), before cleanup's */
	snprintf(why, sizeof(why), "%s", rf_last_error());
	for (i = d->nds; i-- > 0;)
		rf_stream_destroy(d->ds[i].s);
	rf__device_free(d);
	rf__par_release();
	return rf__fail(ret, "CPU device: cannot start stream %s: %s", nm,
			why[0] ? why : strerror(-ret));
}

int rf_cpu_open(struct rf_engine *e, const struct rf_cpu_opts *opts, struct rf_device **out)
{
	struct rf_device_opts o = { 0 };

	if (opts) {
		o.streams = opts->streams;
		o.queue = opts->queue;
		o.blas_threads = opts->blas_threads;
	}
	return rf__cpu_open_be(e, rf__cpu_ordinal++, &o, out);
}

const char *rf_cpu_kernels(char *buf, size_t len)
{
	const char *core = rf__k_blas_core();

	snprintf(buf, len, "%s (ringflow's kernels); %s%s", rf__k_use_avx512() ? "avx512" : "portable",
		 core ? "OpenBLAS " : RF_HAVE_OPENBLAS ? "no OpenBLAS (not found)" :
		 "no OpenBLAS (built without it)", core ? core : "");
	return buf;
}
