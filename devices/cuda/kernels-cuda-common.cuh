/* devices/cuda/kernels-cuda-common.cuh -- what the CUDA kernel files share: launch
 * geometry (grid-stride loops), the stream cast and the error mapping. */
#ifndef RF_KERNELS_CUDA_COMMON_CUH
#define RF_KERNELS_CUDA_COMMON_CUH

#include <cuda_runtime.h>

#include "kernels-cuda-impl.h"

namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 8192;

inline unsigned blocks_for(size_t n)
{
	size_t b = (n + kThreads - 1) / kThreads;
	if (b > kMaxBlocks)
		b = kMaxBlocks;
	return b ? (unsigned)b : 1u;
}

inline cudaStream_t S(void *stream) { return (cudaStream_t)stream; }

inline int cuda_rc(cudaError_t e) { return e == cudaSuccess ? 0 : -(RF_KC_ECUDA + (int)e); }
inline int launch_rc() { return cuda_rc(cudaGetLastError()); }

#define GRID_STRIDE(i, n) \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
	     i += (size_t)blockDim.x * gridDim.x)

} // namespace

#endif
