/* test-cublas-dl: the CUDA backend's cuBLAS is opened with dlopen on first use
 * (devices/cuda/cublas-dl.h), not linked; every symbol it resolves must exist in the
 * toolkit's libcublas.so.N, which this checks without a GPU (loading and resolving
 * touch no device), and a status string comes back through it -- asked for first,
 * before any explicit load: every entry loads the library itself (a handle made by a
 * caller that links cuBLAS reaches rf__blas_sgemm with nothing loaded). Skips (77)
 * where the library cannot be loaded (a toolkit without cuBLAS at run time). */
#include <stdio.h>
#include <string.h>

#include "../../devices/cuda/cublas-dl.h"

int main(void)
{
	const char *why = NULL;
	const char *s = rf__blas_status_string(CUBLAS_STATUS_INVALID_VALUE);
	if (rf__blas_load(&why) < 0) {
		if (why && strstr(why, "cannot load")) {
			printf("SKIP: %s\n", why);
			return 77;
		}
		fprintf(stderr, "FAIL: %s\n", why ? why : "rf__blas_load failed, no reason");
		return 1;
	}
	if (!s || !*s || strstr(s, "not loaded")) {
		fprintf(stderr, "FAIL: status string before a load: %s\n", s ? s : "(null)");
		return 1;
	}
	printf("cublas-dl: every cuBLAS symbol resolved; INVALID_VALUE is \"%s\": ok\n", s);
	return 0;
}
