/* bench/bench-cqe.c -- how fast a CUDA op's completion reaches the reactor (issue 17).
 *
 * rf-bench cqe [--count N] [--json]
 *   N times (default 10,000, after N/10 warm-up rounds) a 4-byte cudaMemsetAsync on
 *   cuda:0's compute stream, completed three ways, each measured from its launch to
 *   the caller knowing it finished:
 *     ringflow   an engine op whose fn launches the memset on the device stream
 *                (rf_cuda_stream_handle); its host function signals the ring and the
 *                reactor, asleep in io_uring_enter, reports the op: rf_engine_wait_var
 *                returns;
 *     sync       the memset, then cudaStreamSynchronize;
 *     poll       the memset and an event, then cudaEventQuery until it is done.
 *   Prints median, p90 and p99 of each, and the reactor (calling) thread's CPU time
 *   over its wall time: a spinning wait is near 100 %, ringflow's should be near 0
 *   (the thread sleeps in the kernel while the GPU works). The completion path's own
 *   cost is estimated as ringflow's median minus poll's (the polling loop learns of the
 *   end soonest). Exit 77 without a CUDA device or in a build without CUDA. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ringflow/ring.h>
#include <ringflow/engine.h>
#include <ringflow/device.h>
#include "bench.h"

#if RF_BENCH_CUDA
#include <cuda_runtime_api.h>

struct cqe_ctx {
	struct rf_stream *s;
	void *p;
};

/* The op: launch the memset into the device stream; the op completes with it. */
static int cqe_memset(void *arg)
{
	struct cqe_ctx *c = arg;
	cudaStream_t cs = (cudaStream_t)rf_cuda_stream_handle(c->s);

	return cudaMemsetAsync(c->p, 0, 4, cs) == cudaSuccess ? 0 : -EIO;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct cqe_res {
	const char *name;
	double med_us, p90_us, p99_us, cpu_frac;
};

static void summarize(struct cqe_res *r, uint64_t *lat, long n, uint64_t wall, uint64_t cpu)
{
	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	r->med_us = (double)lat[n / 2] / 1e3;
	r->p90_us = (double)lat[(size_t)((double)n * 0.90)] / 1e3;
	r->p99_us = (double)lat[(size_t)((double)n * 0.99)] / 1e3;
	r->cpu_frac = wall ? (double)cpu / (double)wall : 0;
}

#define CK(x) do { cudaError_t _e = (x); if (_e != cudaSuccess) { \
	fprintf(stderr, "rf-bench cqe: %s: %s\n", #x, cudaGetErrorString(_e)); goto out; } } while (0)
#define RK(x) do { int _r = (x); if (_r < 0) { \
	fprintf(stderr, "rf-bench cqe: %s: %s\n", #x, strerror(-_r)); goto out; } } while (0)

int rf_bench_cqe(int argc, char **argv)
{
	long n = 10000, warm;
	int json = 0, rc = 1;
	struct rf_ring *ring = NULL;
	struct rf_engine *e = NULL;
	struct rf_device *dev = NULL;
	struct rf_var *v = NULL;
	struct cqe_ctx c = { 0 };
	struct cqe_res res[3] = { { "ringflow" }, { "sync" }, { "poll" } };
	cudaEvent_t ev = NULL;
	uint64_t *lat = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--count") && i + 1 < argc &&
			   (n = strtol(argv[i + 1], NULL, 10)) >= 100 && n <= 10000000) {
			i++;
		} else {
			fprintf(stderr, "rf-bench cqe: bad argument '%s' (options: --count N, "
				"100..10000000; --json)\n", argv[i]);
			return 2;
		}
	}
	warm = n / 10;
	if (rf_cuda_count() <= 0) {
		printf("rf-bench cqe: no CUDA device: skipping\n");
		return 77;
	}
	if (!(lat = malloc((size_t)n * sizeof(*lat))))
		return 1;
	RK(rf_ring_create(&ring, NULL));
	RK(rf_engine_create(&e, ring, NULL));
	RK(rf_cuda_open(e, 0, NULL, &dev));
	RK(rf_var_create(e, "cqe", &v));
	c.s = rf_device_stream(dev, 0);
	cudaStream_t cs = (cudaStream_t)rf_cuda_stream_handle(c.s);
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&c.p, 4));
	CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));

	for (int way = 0; way < 3; way++) {
		uint64_t w0 = 0, c0 = 0;
		for (long i = -warm; i < n; i++) {
			if (i == 0) {
				w0 = rf_now_ns();
				c0 = thread_cpu_ns();
			}
			uint64_t t0 = rf_now_ns();
			if (way == 0) {
				RK(rf_engine_push_simple(e, cqe_memset, &c, NULL, 0, &v, 1, c.s, "memset"));
				RK(rf_engine_wait_var(e, v));
			} else {
				CK(cudaMemsetAsync(c.p, 0, 4, cs));
				if (way == 1) {
					CK(cudaStreamSynchronize(cs));
				} else {
					cudaError_t q;
					CK(cudaEventRecord(ev, cs));
					while ((q = cudaEventQuery(ev)) == cudaErrorNotReady)
						;
					CK(q);
				}
			}
			if (i >= 0)
				lat[i] = rf_now_ns() - t0;
		}
		summarize(&res[way], lat, n, rf_now_ns() - w0, thread_cpu_ns() - c0);
	}
	if (json) {
		printf("{\"bench\":\"cqe\",\"count\":%ld", n);
		for (int k = 0; k < 3; k++)
			printf(",\"%s\":{\"median_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,"
			       "\"thread_cpu\":%.3f}", res[k].name, res[k].med_us, res[k].p90_us,
			       res[k].p99_us, res[k].cpu_frac);
		printf(",\"path_us\":%.2f}\n", res[0].med_us - res[2].med_us);
	} else {
		printf("cqe: a 4-byte memset on cuda:0, launch to known-complete, %ld times\n", n);
		printf("  %-9s %9s %9s %9s %12s\n", "way", "median", "p90", "p99", "thread CPU");
		for (int k = 0; k < 3; k++)
			printf("  %-9s %7.2f us %6.2f us %6.2f us %10.1f %%\n", res[k].name,
			       res[k].med_us, res[k].p90_us, res[k].p99_us, 100 * res[k].cpu_frac);
		printf("  completion path (ringflow - poll, medians): %.2f us (goal <= 10 us)\n",
		       res[0].med_us - res[2].med_us);
	}
	rc = 0;
out:
	if (ev)
		cudaEventDestroy(ev);
	if (c.p) {
		if (e)
			rf_engine_wait_all(e);
		cudaFree(c.p);
	}
	if (v)
		rf_var_destroy(e, v, NULL, NULL, NULL);
	if (dev)
		rf_device_close(dev);
	if (e)
		rf_engine_destroy(e);
	if (ring)
		rf_ring_destroy(ring);
	free(lat);
	return rc;
}

#else /* a build without CUDA */

int rf_bench_cqe(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("rf-bench cqe: this build has no CUDA (meson -Dcuda=enabled): skipping\n");
	return 77;
}

#endif
