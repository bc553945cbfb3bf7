/* devices/cuda/cublas-dl.c -- cuBLAS through dlopen (cublas-dl.h says why). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "cublas-dl.h"
#include "rf-internal.h"

#define RF__STR2(x) #x
#define RF__STR(x) RF__STR2(x)
#define RF__CUBLAS_SO "libcublas.so." RF__STR(CUBLAS_VER_MAJOR)

static struct {
	cublasStatus_t (*create)(cublasHandle_t *);
	cublasStatus_t (*destroy)(cublasHandle_t);
	cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
	cublasStatus_t (*set_workspace)(cublasHandle_t, void *, size_t);
	cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
				int, const float *, const float *, int, const float *, int,
				const float *, float *, int);
	cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
				  int, const void *, const void *, cudaDataType_t, int,
				  const void *, cudaDataType_t, int, const void *, void *,
				  cudaDataType_t, int, cublasComputeType_t, cublasGemmAlgo_t);
	const char *(*status_string)(cublasStatus_t);
	int ok;
	char err[256];
} rf__bl;
static pthread_once_t rf__bl_once = PTHREAD_ONCE_INIT;

static void rf__bl_open(void)
{
	static const char *const libs[] = { RF__CUBLAS_SO, NULL };
	const struct rf__dlsym syms[] = {
		{ "cublasCreate_v2", (void **)&rf__bl.create },
		{ "cublasDestroy_v2", (void **)&rf__bl.destroy },
		{ "cublasSetStream_v2", (void **)&rf__bl.set_stream },
		{ "cublasSetWorkspace_v2", (void **)&rf__bl.set_workspace },
		{ "cublasSgemm_v2", (void **)&rf__bl.sgemm },
		{ "cublasGemmEx", (void **)&rf__bl.gemm_ex },
		{ "cublasGetStatusString", (void **)&rf__bl.status_string },
	};
	/* the handle stays open: the process may use cuBLAS to its end */
	rf__bl.ok = rf__dl_open(libs, syms, sizeof(syms) / sizeof(syms[0]), rf__bl.err,
				sizeof(rf__bl.err)) != NULL;
}

int rf__blas_load(const char **why)
{
	pthread_once(&rf__bl_once, rf__bl_open);
	if (why)
		*why = rf__bl.ok ? NULL : rf__bl.err;
	return rf__bl.ok ? 0 : -ENOENT;
}

cublasStatus_t rf__blas_create(cublasHandle_t *h)
{
	return rf__blas_load(NULL) ? CUBLAS_STATUS_NOT_INITIALIZED : rf__bl.create(h);
}

/* Each entry loads the library on first use (pthread_once: one atomic load after
 * that): a handle may come from elsewhere -- a caller that links cuBLAS, as
 * test-kernels-cuda does -- and reach rf__kc_gemm before any rf__blas_create. */
cublasStatus_t rf__blas_destroy(cublasHandle_t h)
{
	return rf__blas_load(NULL) ? CUBLAS_STATUS_NOT_INITIALIZED : rf__bl.destroy(h);
}

cublasStatus_t rf__blas_set_stream(cublasHandle_t h, cudaStream_t s)
{
	return rf__blas_load(NULL) ? CUBLAS_STATUS_NOT_INITIALIZED : rf__bl.set_stream(h, s);
}

cublasStatus_t rf__blas_set_workspace(cublasHandle_t h, void *ws, size_t bytes)
{
	return rf__blas_load(NULL) ? CUBLAS_STATUS_NOT_INITIALIZED
				   : rf__bl.set_workspace(h, ws, bytes);
}

cublasStatus_t rf__blas_sgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
			      int m, int n, int k, const float *alpha, const float *a, int lda,
			      const float *b, int ldb, const float *beta, float *c, int ldc)
{
	if (rf__blas_load(NULL))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	return rf__bl.sgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

cublasStatus_t rf__blas_gemm_ex(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
				int m, int n, int k, const void *alpha, const void *a,
				cudaDataType_t at, int lda, const void *b, cudaDataType_t bt,
				int ldb, const void *beta, void *c, cudaDataType_t ct, int ldc,
				cublasComputeType_t compute)
{
	if (rf__blas_load(NULL))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	return rf__bl.gemm_ex(h, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc,
			      compute, CUBLAS_GEMM_DEFAULT);
}

const char *rf__blas_status_string(cublasStatus_t s)
{
	return rf__blas_load(NULL) ? "cuBLAS error (" RF__CUBLAS_SO " not loaded)"
				   : rf__bl.status_string(s);
}
