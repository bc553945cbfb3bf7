/* test-openblas-dl: OpenBLAS is opened at the first CPU gemm (devices/cpu/blas-dl.h),
 * not when a program using ringflow starts: after a ring, an engine and I/O on it,
 * libopenblas is not in the process's mappings and no OpenBLAS thread exists. Nor
 * after a CPU device of two compute streams is opened (a loader's device never
 * multiplies): its thread count waits. The first rf__k_gemm maps it, with the
 * device's count applied (cores / 2 streams, at least 1, under RF_BLAS_THREADS), and
 * the product is right (against a direct sum). Skips (77) in a build without
 * OpenBLAS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <sched.h>

#include "ring.h"
#include "engine.h"
#include "device.h"
#include "kernels.h"
#include "../test-util.h"

static int mapped(const char *lib)
{
	char line[4096];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	CHECK(f != NULL);
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, lib) != NULL;
	fclose(f);
	return found;
}

static void on_timer(void *data, int64_t res)
{
	int *t = (int *)((char *)data + sizeof(int64_t));
	(void)res;
	*t = 1;
}

static int threads(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	CHECK(d != NULL);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int main(void)
{
	struct rf_ring *r;
	struct rf_engine *e;
	struct { int64_t res; int calls; } t = { 0, 0 };

	/* a program that only does I/O: no OpenBLAS, no thread of it */
	CHECK_OK(rf_ring_create(&r, NULL));
	CHECK_OK(rf_engine_create(&e, r, NULL));
	CHECK_OK(rf_ring_timeout(r, 1000000, on_timer, &t, NULL));
	while (!t.calls)
		CHECK_OK(rf_ring_run(r, RF_RUN_ONCE));
	CHECK(!mapped("libopenblas"));
	CHECK_EQ(threads(), 1);

	/* a CPU device: its streams' threads, still no OpenBLAS */
	struct rf_device *d;
	CHECK_OK(rf_cpu_open(e, &(struct rf_cpu_opts){ .streams = 2 }, &d));
	CHECK(!mapped("libopenblas"));
	CHECK(threads() >= 1 + 3); /* two compute streams, the copy stream (TSan: + its own) */

	/* the first gemm opens it */
	enum { M = 7, N = 9, K = 11 };
	float a[M * K], b[K * N], c[M * N];
	for (int i = 0; i < M * K; i++)
		a[i] = (float)(i % 5) - 2.0f;
	for (int i = 0; i < K * N; i++)
		b[i] = (float)(i % 7) - 3.0f;
	CHECK_OK(rf__k_gemm(0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N));
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			float s = 0;
			for (int p = 0; p < K; p++)
				s += a[i * K + p] * b[p * N + j];
			CHECK(c[i * N + j] == s); /* small integers: exact */
		}
	if (rf__k_blas_get_threads() == -ENOTSUP) {
		printf("SKIP: built without OpenBLAS (or it cannot be loaded): the portable "
		       "gemm multiplied\n");
		rf_device_close(d);
		rf_engine_destroy(e);
		rf_ring_destroy(r);
		return T_SKIP;
	}
	CHECK(mapped("libopenblas"));
	{
		cpu_set_t set;
		int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
		int want = cores / 2 > 0 ? cores / 2 : 1;
		const char *cap = getenv("RF_BLAS_THREADS");
		if (cap && atoi(cap) > 0 && want > atoi(cap))
			want = atoi(cap);
		CHECK_EQ(rf__k_blas_get_threads(), want);
	}
	printf("openblas-dl: not mapped by ring + engine + I/O (1 thread), nor by a CPU "
	       "device's open; mapped by the first gemm, with the device's thread count, "
	       "which is right: ok\n");
	rf_device_close(d);
	rf_engine_destroy(e);
	rf_ring_destroy(r);
	return 0;
}
