/* bench/bench-cqe.c -- how fast a CUDA op's completion reaches the reactor (issue 17).
 *
 * rf-bench cqe [--count N] [--bytes B] [--json]
 *   N rounds (default 10,000, after N/10 warm-up rounds) of a cudaMemsetAsync of B
 *   bytes (default 64 MiB: ~20-40 us of GPU work, long enough that the launch overlaps
 *   it and what follows the kernel's end is the completion path) on cuda:0's compute
 *   stream, completed four ways, in turn within each round (so clock changes touch
 *   all alike), each timed from the launch to the caller knowing it finished:
 *     busy       an engine op whose fn launches the memset on the device stream
 *                (rf_cuda_stream_handle); the stream writes its completion counter
 *                into pinned memory and the reactor, polling while GPU work is out
 *                (the ring's spin, default 50 us), reads it: rf_engine_wait_var
 *                returns;
 *     asleep     the same with the ring's spin 0: the reactor sleeps in io_uring_enter
 *                and the stream's host function wakes it (MSG_RING, or the eventfd
 *                fallback: printed); the counter, already written, reports the op;
 *     sync       the memset, then cudaStreamSynchronize;
 *     poll       the memset and an event, then cudaEventQuery until it is done.
 *   Prints median, p90 and p99 of each. The completion path's own cost is estimated
 *   as each ringflow way's median minus poll's (the polling loop learns of the end
 *   soonest). Whether the reactor idles while it waits: its thread's CPU time inside
 *   rf_engine_wait_var over the wall time spent there (a spinning wait is ~100 %), and
 *   per op the voluntary context switches and io_uring_enter calls. The counter's
 *   mode (rf_cuda_completion; RF_CUDA_COUNTER chooses) is printed.
 *   Exit 77 without a CUDA device or in a build without CUDA. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

#include <ringflow/ring.h>
#include <ringflow/engine.h>
#include <ringflow/device.h>
#include "bench.h"
#include "bench-args.h"

static const char cqe_usage[] =
	"usage: rf-bench cqe [--count N] [--bytes B] [--json]\n"
	"  --count N   completions timed, 100..10000000 (default 10000)\n"
	"  --bytes B   bytes of the copy each op makes, 4..17179869184 (default 64 MiB)\n"
	"  --json      one JSON object\n";

/* The options into *n, *bytes, *json: -1 to go on, else the exit status. */
static int cqe_args(int argc, char **argv, long *n, long *bytes, int *json)
{
	for (int i = 1; i < argc; i++) {
		long *dst = NULL, lo = 0, hi = 0;
		int r;
		if (bench_is_help(argv[i])) {
			fputs(cqe_usage, stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--json")) {
			*json = 1;
			continue;
		}
		if (!strcmp(argv[i], "--count"))
			dst = n, lo = 100, hi = 10000000;
		else if (!strcmp(argv[i], "--bytes"))
			dst = bytes, lo = 4, hi = 1l << 34;
		if (!dst)
			return bench_unknown("cqe", argv[i]);
		if ((r = bench_long("cqe", argc, argv, &i, lo, hi, dst)))
			return r;
	}
	return -1;
}

#if RF_BENCH_CUDA
#include <cuda_runtime_api.h>

struct cqe_ctx {
	struct rf_stream *s;
	void *p;
	size_t bytes;
};

/* The op: launch the memset into the device stream; the op completes with it. */
static int cqe_memset(void *arg)
{
	struct cqe_ctx *c = arg;
	cudaStream_t cs = (cudaStream_t)rf_cuda_stream_handle(c->s);

	return cudaMemsetAsync(c->p, 0, c->bytes, cs) == cudaSuccess ? 0 : -EIO;
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
	double med_us, p90_us, p99_us;
};

static void summarize(struct cqe_res *r, uint64_t *lat, long n)
{
	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	r->med_us = (double)lat[n / 2] / 1e3;
	r->p90_us = (double)lat[(size_t)((double)n * 0.90)] / 1e3;
	r->p99_us = (double)lat[(size_t)((double)n * 0.99)] / 1e3;
}

static long nvcsw(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : 0;
}

#define CK(x) do { cudaError_t _e = (x); if (_e != cudaSuccess) { \
	fprintf(stderr, "rf-bench cqe: %s: %s\n", #x, cudaGetErrorString(_e)); goto out; } } while (0)
#define RK(x) do { int _r = (x); if (_r < 0) { \
	fprintf(stderr, "rf-bench cqe: %s: %s\n", #x, rf_last_error()); goto out; } } while (0)

#define WAYS 4

int rf_bench_cqe(int argc, char **argv)
{
	long n = 10000, warm, bytes = 64l << 20, csw[2] = { 0 };
	int json = 0, rc = 1;
	struct rf_ring *ring = NULL;
	struct rf_engine *e = NULL;
	struct rf_device *dev = NULL;
	struct rf_var *v = NULL;
	struct cqe_ctx c = { 0 };
	struct cqe_res res[WAYS] = { { "busy" }, { "asleep" }, { "sync" }, { "poll" } };
	struct rf_ring_info ri;
	struct rf_ring_stats s0, s1;
	cudaEvent_t ev = NULL;
	cudaStream_t cs;
	uint64_t *lat[WAYS] = { NULL }, wait_wall[2] = { 0 }, wait_cpu[2] = { 0 };
	uint64_t enters[2] = { 0 }, spin = 0;

	if ((rc = cqe_args(argc, argv, &n, &bytes, &json)) >= 0)
		return rc;
	rc = 1;
	warm = n / 10;
	if (rf_cuda_count() <= 0) {
		printf("rf-bench cqe: no CUDA device: skipping\n");
		return 77;
	}
	for (int k = 0; k < WAYS; k++)
		if (!(lat[k] = malloc((size_t)n * sizeof(*lat[k]))))
			goto out;
	c.bytes = (size_t)bytes;
	RK(rf_ring_create(&ring, NULL));
	RK(rf_engine_create(&e, ring, NULL));
	RK(rf_cuda_open(e, 0, NULL, &dev));
	RK(rf_var_create(e, "cqe", &v));
	c.s = rf_device_stream(dev, 0);
	cs = (cudaStream_t)rf_cuda_stream_handle(c.s);
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&c.p, c.bytes));
	CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	rf_ring_get_info(ring, &ri);
	{
		/* the ring's spin as created (RF_RING_SPIN_US or 50 us), for the busy way */
		const char *env = getenv("RF_RING_SPIN_US");
		spin = env ? strtoull(env, NULL, 10) * 1000ull : 50000ull;
	}

	for (long i = -warm; i < n; i++) {
		if (i == 0)
			rf_ring_get_stats(ring, &s0);
		for (int way = 0; way < WAYS; way++) {
			uint64_t t0 = rf_now_ns(), t;
			if (way < 2) {
				struct rf_ring_stats a, b;
				RK(rf_ring_set_spin(ring, way == 0 ? spin : 0));
				rf_ring_get_stats(ring, &a);
				t0 = rf_now_ns();
				RK(rf_engine_push_simple(e, cqe_memset, &c, NULL, 0, &v, 1, c.s, "memset"));
				uint64_t w0 = rf_now_ns(), c0 = thread_cpu_ns();
				long x0 = nvcsw();
				RK(rf_engine_wait_var(e, v));
				t = rf_now_ns() - t0;
				if (i >= 0) {
					wait_cpu[way] += thread_cpu_ns() - c0;
					wait_wall[way] += rf_now_ns() - w0;
					csw[way] += nvcsw() - x0;
					rf_ring_get_stats(ring, &b);
					enters[way] += b.enters - a.enters;
				}
			} else {
				CK(cudaMemsetAsync(c.p, 0, c.bytes, cs));
				if (way == 2) {
					CK(cudaStreamSynchronize(cs));
				} else {
					cudaError_t q;
					CK(cudaEventRecord(ev, cs));
					while ((q = cudaEventQuery(ev)) == cudaErrorNotReady)
						;
					/* NotReady is also the thread's last error: cleared, or the
					 * next launch on this thread would read it back */
					(void)cudaGetLastError();
					CK(q);
				}
				t = rf_now_ns() - t0;
			}
			if (i >= 0)
				lat[way][i] = t;
		}
	}
	rf_ring_get_stats(ring, &s1);
	for (int k = 0; k < WAYS; k++)
		summarize(&res[k], lat[k], n);
	const char *mode = rf_cuda_completion(c.s);
	double cpu[2], ent[2], vcs[2];
	for (int k = 0; k < 2; k++) {
		cpu[k] = wait_wall[k] ? (double)wait_cpu[k] / (double)wait_wall[k] : 0;
		ent[k] = (double)enters[k] / (double)n;
		vcs[k] = (double)csw[k] / (double)n;
	}
	if (json) {
		printf("{\"bench\":\"cqe\",\"count\":%ld,\"bytes\":%ld,\"msg_ring\":%d,"
		       "\"completion\":\"%s\",\"spin_us\":%.1f", n, bytes, ri.msg_ring,
		       mode ? mode : "?", (double)spin / 1e3);
		for (int k = 0; k < WAYS; k++)
			printf(",\"%s\":{\"median_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f}",
			       res[k].name, res[k].med_us, res[k].p90_us, res[k].p99_us);
		for (int k = 0; k < 2; k++)
			printf(",\"%s_path_us\":%.2f,\"%s_wait_cpu\":%.3f,\"%s_enters_per_op\":%.2f,"
			       "\"%s_vcsw_per_op\":%.2f", res[k].name, res[k].med_us - res[3].med_us,
			       res[k].name, cpu[k], res[k].name, ent[k], res[k].name, vcs[k]);
		printf(",\"polled\":%llu,\"spin_hits\":%llu}\n",
		       (unsigned long long)(s1.polled - s0.polled),
		       (unsigned long long)(s1.spin_hits - s0.spin_hits));
	} else {
		printf("cqe: a %ld-byte memset on cuda:0, launch to known-complete, %ld rounds "
		       "(completion: %s; wake-up: %s; busy spin %.0f us)\n", bytes, n,
		       mode ? mode : "?", ri.msg_ring ? "MSG_RING" : "eventfd", (double)spin / 1e3);
		printf("  %-9s %9s %9s %9s\n", "way", "median", "p90", "p99");
		for (int k = 0; k < WAYS; k++)
			printf("  %-9s %7.2f us %6.2f us %6.2f us\n", res[k].name, res[k].med_us,
			       res[k].p90_us, res[k].p99_us);
		printf("  completion path (ringflow - poll, medians): reactor busy %.2f us (goal "
		       "<= 3 us), asleep %.2f us (goal <= 10 us)\n", res[0].med_us - res[3].med_us,
		       res[1].med_us - res[3].med_us);
		for (int k = 0; k < 2; k++)
			printf("  reactor %-6s while waiting: %.1f %% CPU, %.2f io_uring_enter and %.2f "
			       "voluntary context switches per op\n", res[k].name, 100 * cpu[k], ent[k],
			       vcs[k]);
		printf("  ops reported by the counter poll: %llu, polls that found it: %llu\n",
		       (unsigned long long)(s1.polled - s0.polled),
		       (unsigned long long)(s1.spin_hits - s0.spin_hits));
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
	for (int k = 0; k < WAYS; k++)
		free(lat[k]);
	return rc;
}

#else /* a build without CUDA */

int rf_bench_cqe(int argc, char **argv)
{
	long n, bytes;
	int json, rc = cqe_args(argc, argv, &n, &bytes, &json);

	if (rc >= 0)
		return rc;
	printf("rf-bench cqe: this build has no CUDA (meson -Dcuda=enabled): skipping\n");
	return 77;
}

#endif
