/* test-cublas-dl: the CUDA backend's cuBLAS is opened with dlopen on first use
 * (devices/cuda/cublas-dl.h), not linked; every symbol it resolves must exist in the
 * toolkit's libcublas.so.N, which this checks without a GPU (loading and resolving
 * touch no device), and a status string comes back through it. Skips (77) where the
 * library cannot be loaded (a toolkit without cuBLAS at run time). */
#include <stdio.h>
#include <string.h>

#include "../../devices/cuda/cublas-dl.h"

int main(void)
{
	const char *why = NULL;
	if (rf__blas_load(&why) < 0) {
		if (why && strstr(why, "cannot load")) {
			printf("SKIP: %s\n", why);
			return 77;
		}
		fprintf(stderr, "FAIL: %s\n", why ? why : "rf__blas_load failed, no reason");
		return 1;
	}
	const char *s = rf__blas_status_string(CUBLAS_STATUS_INVALID_VALUE);
	if (!s || !*s) {
		fprintf(stderr, "FAIL: no status string\n");
		return 1;
	}
	printf("cublas-dl: every cuBLAS symbol resolved; INVALID_VALUE is \"%s\": ok\n", s);
	return 0;
}
