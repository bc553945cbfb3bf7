/* devices/cpu/cpu.c -- the CPU device: worker streams, host memory, kernels.h kernels.
 *
 * Streams are core's worker streams (one thread each, SPSC queue in, notifier out).
 * An op's function runs rf__cpu_compute on the worker thread: GEMM through OpenBLAS
 * (rf_k_gemm), the rest plain vectorizable C (the other files of cpu/). The copy stream runs
 * memcpy. OpenBLAS's (process-wide) thread count follows the policy in device.h:
 * cores / compute streams of all open CPU devices.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../device-impl.h"

/* ---- threading policy ------------------------------------------------------------- */

static int rf__cpu_total_streams; /* compute streams of all open CPU devices */
static int rf__cpu_forced;        /* > 0: blas threads fixed by an opts; -1: untouched */

static int rf__online_cores(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	{
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		return n > 0 ? (int)n : 1;
	}
}

#define RF__BLAS_THREADS_MAX 1024

/* RF_BLAS_THREADS=N, OpenBLAS's threads at most: 0 and *cap (0 where unset), or
 * -EINVAL with the message naming the variable (it was read with atoi: "abc", "-5" and
 * "99999999999" were silently no cap). */
static int rf__blas_threads_env(int *cap)
{
	const char *env = getenv("RF_BLAS_THREADS"), *p;
	long v = 0;

	*cap = 0;
	if (!env)
		return 0;
	for (p = env; *p >= '0' && *p <= '9' && v <= RF__BLAS_THREADS_MAX; p++)
		v = v * 10 + (*p - '0');
	if (!*env || *p || v < 1 || v > RF__BLAS_THREADS_MAX)
		return rf__fail(-EINVAL,
				"RF_BLAS_THREADS=%s: expected an integer from 1 to %d (the "
				"OpenBLAS threads at most), or the variable unset",
				env, RF__BLAS_THREADS_MAX);
	*cap = (int)v;
	return 0;
}

void rf__cpu_policy_update(int delta_streams, int forced_threads)
{
	int cores = rf__online_cores(), t;

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
	rf_k_blas_set_threads(t); /* -ENOTSUP without OpenBLAS: nothing to set */
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

static void rf__fill_any(void *x, size_t n, float v, int dtype)
{
	size_t i;

	switch (dtype) {
	case RF_F32:
		rf_k_fill(x, v, n);
		break;
	case RF_I32: {
		int32_t *p = x, iv = (int32_t)v;
		for (i = 0; i < n; i++)
			p[i] = iv;
		break;
	}
	default:
		memset(x, (int)(uint8_t)v, n);
		break;
	}
}

int rf__cpu_compute(struct rf__opctx *op)
{
	int ret = 0;

	switch (op->code) {
	case RF__GEMM: {
		int lda = op->u.gemm.ta ? op->u.gemm.m : op->u.gemm.k;
		int ldb = op->u.gemm.tb ? op->u.gemm.k : op->u.gemm.n;
		ret = rf_k_gemm(op->u.gemm.ta, op->u.gemm.tb, op->u.gemm.m, op->u.gemm.n,
				op->u.gemm.k, op->u.gemm.alpha, op->u.gemm.a, lda > 0 ? lda : 1,
				op->u.gemm.b, ldb > 0 ? ldb : 1, op->u.gemm.beta, op->u.gemm.c,
				op->u.gemm.n > 0 ? op->u.gemm.n : 1);
		break;
	}
	case RF__BIAS_ADD:
		rf_k_bias_add(op->u.bias.y, op->u.bias.b, op->u.bias.rows, op->u.bias.cols);
		break;
	case RF__BIAS_GRAD:
		rf_k_bias_grad(op->u.bias.y, op->u.bias.b, op->u.bias.rows, op->u.bias.cols,
			       op->u.bias.acc);
		break;
	case RF__RELU_FWD:
		rf_k_relu_fwd(op->u.ew.y, op->u.ew.x, op->u.ew.n);
		break;
	case RF__RELU_BWD:
		rf_k_relu_bwd(op->u.ew.y, op->u.ew.x, op->u.ew.aux, op->u.ew.n);
		break;
	case RF__XENT:
		ret = rf_k_softmax_xent(op->u.xent.dlogits, op->u.xent.loss, op->u.xent.correct,
					op->u.xent.logits, op->u.xent.labels, op->u.xent.rows,
					op->u.xent.cols);
		if (ret < 0)
			snprintf(op->err, sizeof(op->err),
				 "a label is outside [0, %d) (logits %d x %d)", op->u.xent.cols,
				 op->u.xent.rows, op->u.xent.cols);
		break;
	case RF__CONV_FWD:
		ret = rf_k_conv2d_fwd(&op->u.conv.s, op->u.conv.out, op->u.conv.in, op->u.conv.in2,
				      op->u.conv.in3, op->ws, op->ws_bytes);
		break;
	case RF__CONV_BWD_DATA:
		ret = rf_k_conv2d_bwd_data(&op->u.conv.s, op->u.conv.out, op->u.conv.in,
					   op->u.conv.in2, op->ws, op->ws_bytes);
		break;
	case RF__CONV_BWD_FILTER:
		ret = rf_k_conv2d_bwd_filter(&op->u.conv.s, op->u.conv.out, op->u.conv.out2,
					     op->u.conv.in, op->u.conv.in2, op->u.conv.acc,
					     op->ws, op->ws_bytes);
		break;
	case RF__POOL_FWD:
		rf_k_avgpool2d_fwd(op->u.pool.y, op->u.pool.x, op->u.pool.n, op->u.pool.c,
				   op->u.pool.h, op->u.pool.w, op->u.pool.k);
		break;
	case RF__POOL_BWD:
		rf_k_avgpool2d_bwd(op->u.pool.y, op->u.pool.x, op->u.pool.n, op->u.pool.c,
				   op->u.pool.h, op->u.pool.w, op->u.pool.k);
		break;
	case RF__SGD:
		rf_k_sgd(op->u.sgd.w, op->u.sgd.g, op->u.sgd.n, rf__sgd_lr(op), op->u.sgd.wd);
		break;
	case RF__SGD_MOMENTUM:
		rf_k_sgd_momentum(op->u.sgd.w, op->u.sgd.v, op->u.sgd.g, op->u.sgd.n, rf__sgd_lr(op),
				  op->u.sgd.mom, op->u.sgd.wd, op->u.sgd.nesterov);
		break;
	case RF__ADAMW:
	{
		struct rf_k_adamw p = rf__adamw_p(op);
		rf_k_adamw(op->u.adamw.w, op->u.adamw.m, op->u.adamw.v, op->u.adamw.g, op->u.adamw.n, &p);
	}
		break;
	case RF__AXPY:
		rf_k_axpy(op->u.axpy.y, op->u.axpy.a, op->u.axpy.x, op->u.axpy.n);
		break;
	case RF__SCALE:
		rf_k_scale(op->u.axpy.y, op->u.axpy.a, op->u.axpy.n);
		break;
	case RF__SUM:
		rf_k_reduce_sum(op->u.sum.out, op->u.sum.in, op->u.sum.k, op->u.sum.n);
		break;
	case RF__FILL:
		rf__fill_any(op->u.fill.x, op->u.fill.n, op->u.fill.v, op->u.fill.dtype);
		break;
	case RF__U8_F32:
		rf_k_u8_to_f32(op->u.dec.out, op->u.dec.in, op->u.dec.n, op->u.dec.scale,
			       op->u.dec.mean, op->u.dec.std);
		break;
	case RF__U8_I32:
		rf_k_u8_to_i32(op->u.dec.out, op->u.dec.in, op->u.dec.n);
		break;
	case RF__RAND_UNIFORM:
	case RF__RAND_NORMAL: {
		/* The generator is this op's written variable: mutate it here. */
		struct rf_prng *g = op->u.rand.g;
		if (op->code == RF__RAND_UNIFORM)
			rf_k_rand_uniform(op->u.rand.x, op->u.rand.n, g->seed, g->counter,
					  op->u.rand.a, op->u.rand.b);
		else
			rf_k_rand_normal(op->u.rand.x, op->u.rand.n, g->seed, g->counter,
					 op->u.rand.a, op->u.rand.b);
		g->counter += op->u.rand.n;
		break;
	}
	case RF__COPY:
		if (op->u.copy.bytes && op->u.copy.dst != op->u.copy.src)
			memcpy(op->u.copy.dst, op->u.copy.src, op->u.copy.bytes);
		break;
	case RF__HOST:
		ret = op->u.host.fn(op->u.host.arg);
		break;
	default:
		ret = -ENOSYS;
	}
	return ret;
}

static int rf__cpu_iface_compute(struct rf_device *d, struct rf__dstream *ds, struct rf__opctx *op)
{
	(void)d;
	(void)ds;
	return rf__cpu_compute(op);
}

/* After the streams are gone: the policy no longer counts this device's streams. */
static void rf__cpu_close(struct rf_device *d)
{
	rf__cpu_policy_update(-(int)d->ncompute, 0);
}

static size_t rf__cpu_conv_ws(const struct rf_k_conv2d *s, int min)
{
	return min ? rf_k_conv2d_workspace_min(s) : rf_k_conv2d_workspace_size(s);
}

const struct rf__device_iface rf__cpu_iface = {
	/* .kind      = */ "cpu",
	/* .mem_alloc = */ rf__cpu_mem_alloc,
	/* .mem_free  = */ rf__cpu_mem_free,
	/* .compute   = */ rf__cpu_iface_compute,
	/* .strerror  = */ NULL, /* optional */
	/* .conv_ws   = */ rf__cpu_conv_ws,
	/* .close     = */ rf__cpu_close,
};

static int rf__cpu_ordinal;

int rf_cpu_open(struct rf_engine *e, const struct rf_cpu_opts *opts, struct rf_device **out)
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
	if ((ret = rf__blas_threads_env(&cap)) < 0)
		return ret;
	d = rf__device_new(e, &rf__cpu_iface, RF_DEVICE_CPU, rf__cpu_ordinal++);
	if (!d)
		return rf__fail(-ENOMEM, "CPU device: %s", strerror(ENOMEM));
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
fail:
	for (i = d->nds; i-- > 0;)
		rf_stream_destroy(d->ds[i].s);
	rf__device_free(d);
	return rf__fail(ret, "CPU device: cannot start stream %s: %s", nm, strerror(-ret));
}
