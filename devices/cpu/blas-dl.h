/* devices/cpu/blas-dl.h -- OpenBLAS through dlopen, opened at the first CPU gemm (a
 * thread count set before waits for it), from RF_OPENBLAS_LIBDIR
 * (pkg-config's libdir at build time) first, then the loader's search path. Linked,
 * libopenblas (with libgfortran) was mapped, and its constructor ran and started its
 * thread pool, in every program using ringflow:
 * 5.5 ms of each start here, and a pool thread spinning on sched_yield for ~0.1 s
 * after it, though an I/O program (rf-iobench, rf-httpd, an embedder's reactor)
 * never multiplies a matrix. Internal to devices/cpu. */
#ifndef RF_BLAS_DL_H
#define RF_BLAS_DL_H

#include <cblas.h>

struct rf__openblas {
	void (*sgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint,
		      blasint, blasint, float, const float *, blasint, const float *, blasint,
		      float, float *, blasint);
	void (*sgemv)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, blasint, blasint, float,
		      const float *, blasint, const float *, blasint, float, float *, blasint);
	void (*set_num_threads)(int);
	int (*get_num_threads)(void);
	char *(*get_corename)(void);
};

/* The loaded library's calls, or NULL (then *why, if why, says what failed: the
 * callers fall back to the portable gemm, and say so once). Thread-safe. */
const struct rf__openblas *rf__openblas(const char **why);
/* OpenBLAS's thread count: set now if it is open, else when it opens (a CPU device's
 * open does not open it: a program that never multiplies -- a loader's -- neither maps
 * it nor meets its pool's ~0.1 s spin). Thread-safe. */
void rf__openblas_set_threads(int n);

#endif
