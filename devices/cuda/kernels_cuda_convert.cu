/* devices/cuda/kernels_cuda_convert.cu -- rf__kc_convert: a tensor's elements from one
 * float dtype into another (f32, bf16, f16; rounded to nearest even, as the CPU's
 * devices/convert.c) and between row-major and NHWC, one thread per element. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <errno.h>
#include <stdint.h>

#include "kernels-cuda-common.cuh"

namespace {

struct shape4 {
	size_t n, c, h, w;
};

__device__ inline float load(const void *p, int dt, size_t i)
{
	switch (dt) {
	case RF_BF16:
		return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
	case RF_F16:
		return __half2float(((const __half *)p)[i]);
	default:
		return ((const float *)p)[i];
	}
}

__device__ inline void store(void *p, int dt, size_t i, float v)
{
	switch (dt) {
	case RF_BF16:
		((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
		break;
	case RF_F16:
		((__half *)p)[i] = __float2half_rn(v);
		break;
	default:
		((float *)p)[i] = v;
		break;
	}
}

/* The offset of logical element i (row-major order) in a tensor laid out NHWC. I is
 * uint32_t whenever the tensor has fewer than 2^31 elements (nearly always): 32-bit
 * divisions are several times cheaper on a GPU than 64-bit ones, which it emulates. */
template <typename I> __device__ inline I nhwc_of(I i, I C, I H, I W)
{
	I hw = H * W, n = i / (C * hw), r = i - n * (C * hw);
	I c = r / hw, q = r - c * hw;
	return (n * hw + q) * C + c;
}

template <typename I>
__global__ void k_convert(void *dst, int ddt, int dnhwc, const void *src, int sdt, int snhwc,
			  shape4 s, I total, int esz)
{
	const I C = (I)s.c, H = (I)s.h, W = (I)s.w;
	for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total;
	     i += (I)blockDim.x * gridDim.x) {
		I si = snhwc ? nhwc_of<I>(i, C, H, W) : i, di = dnhwc ? nhwc_of<I>(i, C, H, W) : i;
		if (ddt == sdt && esz == 1)
			((uint8_t *)dst)[di] = ((const uint8_t *)src)[si];
		else if (ddt == sdt && esz == 2)
			((uint16_t *)dst)[di] = ((const uint16_t *)src)[si];
		else if (ddt == sdt)
			((uint32_t *)dst)[di] = ((const uint32_t *)src)[si];
		else
			store(dst, ddt, di, load(src, sdt, si));
	}
}

/* u8 (row-major, logical order) decoded as k_u8_to_f32 does, then stored in dt (rounded
 * to nearest even) at its place in a row-major or NHWC tensor */
template <typename I>
__global__ void k_u8_decode(void *dst, int ddt, int dnhwc, const uint8_t *src, shape4 s,
			    I total, rf__u8norm m)
{
	const I C = (I)s.c, H = (I)s.h, W = (I)s.w;
	for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total;
	     i += (I)blockDim.x * gridDim.x) {
		unsigned ch = m.nch > 1 ? (unsigned)((i / (I)m.plane) % m.nch) : 0;
		float v = __fdiv_rn(__fsub_rn(__fmul_rn((float)src[i], m.scale), m.mean[ch]),
				    m.std[ch]);
		store(dst, ddt, dnhwc ? nhwc_of<I>(i, C, H, W) : i, v);
	}
}

bool is_float(int dt)
{
	return dt == RF_F32 || dt == RF_BF16 || dt == RF_F16;
}

int elem_size(int dt)
{
	return dt == RF_U8 ? 1 : dt == RF_BF16 || dt == RF_F16 ? 2 : dt == RF_F32 || dt == RF_I32 ? 4 : 0;
}

/* The element count of (ndim, shape) and, for 4-D, its dims as s. */
size_t count_of(int ndim, const int64_t *shape, shape4 *s)
{
	size_t total = 1;

	for (int d = 0; d < ndim; d++)
		total *= (size_t)shape[d];
	if (ndim == 4)
		*s = { (size_t)shape[0], (size_t)shape[1], (size_t)shape[2], (size_t)shape[3] };
	return total;
}

} // namespace

int rf__kc_u8_decode(void *stream, void *dst, int ddt, int dst_nhwc, const uint8_t *src,
		     int ndim, const int64_t *shape, const struct rf__u8norm *m)
{
	shape4 s = { 1, 1, 1, 1 };
	size_t total;

	if (!is_float(ddt) || (dst_nhwc && ndim != 4) || ndim < 0 || ndim > 4)
		return -EINVAL;
	total = count_of(ndim, shape, &s);
	if (!total)
		return 0;
	if (total <= (size_t)INT32_MAX) /* no wrap of i + stride */
		k_u8_decode<uint32_t><<<blocks_for(total), kThreads, 0, S(stream)>>>(
			dst, ddt, dst_nhwc, src, s, (uint32_t)total, *m);
	else
		k_u8_decode<size_t><<<blocks_for(total), kThreads, 0, S(stream)>>>(
			dst, ddt, dst_nhwc, src, s, total, *m);
	return launch_rc();
}

int rf__kc_convert(void *stream, void *dst, int ddt, int dst_nhwc, const void *src, int sdt,
		   int src_nhwc, int ndim, const int64_t *shape)
{
	shape4 s = { 1, 1, 1, 1 };
	size_t total;

	if (!elem_size(ddt) || !elem_size(sdt) || (ddt != sdt && !(is_float(ddt) && is_float(sdt))) ||
	    ((dst_nhwc || src_nhwc) && ndim != 4) || ndim < 0 || ndim > 4)
		return -EINVAL;
	total = count_of(ndim, shape, &s);
	if (!total)
		return 0;
	if (total <= (size_t)INT32_MAX) /* no wrap of i + stride */
		k_convert<uint32_t><<<blocks_for(total), kThreads, 0, S(stream)>>>(
			dst, ddt, dst_nhwc, src, sdt, src_nhwc, s, (uint32_t)total, elem_size(sdt));
	else
		k_convert<size_t><<<blocks_for(total), kThreads, 0, S(stream)>>>(
			dst, ddt, dst_nhwc, src, sdt, src_nhwc, s, total, elem_size(sdt));
	return launch_rc();
}
