/* devices/cuda/cublas-dl.h -- the cuBLAS calls ringflow makes, through libcublas.so.N
 * (N: the header's major version) opened with dlopen on first use -- a CUDA stream's
 * creation -- not linked: libcublas and libcublasLt (some hundreds of MB) would
 * otherwise be mapped at the start of every program that links ringflow, ~0.3 s of
 * every rf-iobench or rf-pack launch on a machine without a GPU. cublas_v2.h gives the
 * types. Internal to devices/cuda/. */
#ifndef RF_CUBLAS_DL_H
#define RF_CUBLAS_DL_H

#include <cublas_v2.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Load the library once: 0, or -ENOENT with *why saying what is missing. */
int rf__blas_load(const char **why);
/* cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2, cublasSetWorkspace_v2,
 * cublasSgemm_v2, cublasGemmEx and cublasGetStatusString, after a successful
 * rf__blas_load (before it: an error). */
cublasStatus_t rf__blas_create(cublasHandle_t *h);
cublasStatus_t rf__blas_destroy(cublasHandle_t h);
cublasStatus_t rf__blas_set_stream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t rf__blas_set_workspace(cublasHandle_t h, void *ws, size_t bytes);
cublasStatus_t rf__blas_sgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
			      int m, int n, int k, const float *alpha, const float *a, int lda,
			      const float *b, int ldb, const float *beta, float *c, int ldc);
/* cublasGemmEx (its default algorithm): a, b and c of their own data types, products
 * in the compute type (CUBLAS_COMPUTE_32F_FAST_TF32: tensor cores on TF32 inputs). */
cublasStatus_t rf__blas_gemm_ex(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
				int m, int n, int k, const void *alpha, const void *a,
				cudaDataType_t at, int lda, const void *b, cudaDataType_t bt,
				int ldb, const void *beta, void *c, cudaDataType_t ct, int ldc,
				cublasComputeType_t compute);
const char *rf__blas_status_string(cublasStatus_t s);

#ifdef __cplusplus
}
#endif
#endif
