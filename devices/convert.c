/* devices/convert.c -- element types and layouts on the host: bf16 and f16 to and from
 * f32 (round to nearest even), and moving a tensor's elements between row-major and
 * NHWC. The CPU backend's reference path and the host reads and writes of a tensor
 * (rf_tensor_read_as) use these; they run on any thread. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "backend-impl.h"

RF__TSAN_WHOLE static uint32_t rf__bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

RF__TSAN_WHOLE static float rf__float(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

RF__TSAN_WHOLE float rf__bf16_to_f32(uint16_t h)
{
	return rf__float((uint32_t)h << 16);
}

RF__TSAN_WHOLE uint16_t rf__f32_to_bf16(float f)
{
	uint32_t u = rf__bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)        /* NaN: stays one, made quiet */
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);             /* nearest, ties to even */
	return (uint16_t)(u >> 16);
}

RF__TSAN_WHOLE float rf__f16_to_f32(uint16_t h)
{
	const uint32_t shifted_exp = 0x7c00u << 13;  /* f16's exponent mask, at f32's place */
	uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
	uint32_t exp = shifted_exp & o;

	o += (uint32_t)(127 - 15) << 23;             /* rebias the exponent */
	if (exp == shifted_exp) {                    /* inf or NaN */
		o += (uint32_t)(128 - 16) << 23;
	} else if (exp == 0) {                       /* zero or subnormal: renormalise */
		o += 1u << 23;
		o = rf__bits(rf__float(o) - rf__float(113u << 23));
	}
	return rf__float(o | ((uint32_t)h & 0x8000u) << 16);
}

RF__TSAN_WHOLE uint16_t rf__f32_to_f16(float f)
{
	const uint32_t f32inf = 255u << 23, f16max = (127u + 16) << 23;
	const uint32_t denorm_magic = ((127u - 15) + (23 - 10) + 1) << 23;
	uint32_t x = rf__bits(f), sign = x & 0x80000000u;
	uint16_t o;

	x ^= sign;
	if (x >= f16max) {                           /* overflow to inf; NaN stays quiet NaN */
		o = x > f32inf ? 0x7e00 : 0x7c00;
	} else if (x < (113u << 23)) {               /* an f16 subnormal or zero: align the
						      * 10 mantissa bits at the bottom by an
						      * addition, rounded to nearest even */
		o = (uint16_t)(rf__bits(rf__float(x) + rf__float(denorm_magic)) - denorm_magic);
	} else {
		uint32_t odd = (x >> 13) & 1u;
		x += ((uint32_t)(15 - 127) << 23) + 0xfffu; /* rebias, round half down ... */
		x += odd;                                    /* ... and ties to even */
		o = (uint16_t)(x >> 13);
	}
	return (uint16_t)(o | sign >> 16);
}

int rf__is_float(enum rf_tdtype dt)
{
	return dt == RF_F32 || dt == RF_BF16 || dt == RF_F16;
}

RF__TSAN_WHOLE static float rf__get(const void *p, enum rf_tdtype dt, size_t i)
{
	switch (dt) {
	case RF_BF16:
		return rf__bf16_to_f32(((const uint16_t *)p)[i]);
	case RF_F16:
		return rf__f16_to_f32(((const uint16_t *)p)[i]);
	default:
		return ((const float *)p)[i];
	}
}

RF__TSAN_WHOLE static void rf__put(void *p, enum rf_tdtype dt, size_t i, float v)
{
	switch (dt) {
	case RF_BF16:
		((uint16_t *)p)[i] = rf__f32_to_bf16(v);
		break;
	case RF_F16:
		((uint16_t *)p)[i] = rf__f32_to_f16(v);
		break;
	default:
		((float *)p)[i] = v;
		break;
	}
}

/* Element i of src into element j of dst. */
RF__TSAN_WHOLE static inline void rf__move(void *dst, enum rf_tdtype ddt, size_t j, const void *src,
			    enum rf_tdtype sdt, size_t i, size_t esz)
{
	if (ddt == sdt)
		memcpy((char *)dst + j * esz, (const char *)src + i * esz, esz);
	else
		rf__put(dst, ddt, j, rf__get(src, sdt, i));
}

/* The element strides of a (n, c, h, w) tensor of C x H x W per image in a layout. */
RF__TSAN_WHOLE static void rf__strides(enum rf_layout lay, size_t C, size_t H, size_t W, size_t st[4])
{
	if (lay == RF_LAYOUT_NHWC) {
		st[0] = H * W * C, st[1] = 1, st[2] = W * C, st[3] = C;
	} else {
		st[0] = C * H * W, st[1] = H * W, st[2] = W, st[3] = 1;
	}
}

/* The n elements (n, c, h, w when a layout changes) of src into dst: rf__convert_host
 * checked the arguments and declared both buffers to ThreadSanitizer. */
RF__TSAN_WHOLE static void rf__convert_elems(void *dst, enum rf_tdtype ddt, enum rf_layout dlay,
					     const void *src, enum rf_tdtype sdt,
					     enum rf_layout slay, const int64_t *shape, size_t n,
					     size_t esz)
{
	size_t i;

	if (dlay == slay) {
		for (i = 0; i < n; i++)
			rf__put(dst, ddt, i, rf__get(src, sdt, i));
		return;
	}
	/* a permute: walk the logical (n, c, h, w) order, each side's offset by its
	 * layout's strides; an element of one dtype moved as an integer of its size (a
	 * memcpy per element was a call per element, and a sanitizer's check per call) */
	{
		size_t C = (size_t)shape[1], H = (size_t)shape[2], W = (size_t)shape[3];
		size_t ss[4], ds[4], a, b, y, x;
		rf__strides(slay, C, H, W, ss);
		rf__strides(dlay, C, H, W, ds);
		for (a = 0; a < (size_t)shape[0]; a++)
			for (b = 0; b < C; b++)
				for (y = 0; y < H; y++) {
					size_t si = a * ss[0] + b * ss[1] + y * ss[2];
					size_t di = a * ds[0] + b * ds[1] + y * ds[2];
					if (ddt == sdt && esz == 4)
						for (x = 0; x < W; x++)
							((uint32_t *)dst)[di + x * ds[3]] =
								((const uint32_t *)src)[si + x * ss[3]];
					else if (ddt == sdt && esz == 2)
						for (x = 0; x < W; x++)
							((uint16_t *)dst)[di + x * ds[3]] =
								((const uint16_t *)src)[si + x * ss[3]];
					else
						for (x = 0; x < W; x++)
							rf__move(dst, ddt, di + x * ds[3], src, sdt,
								 si + x * ss[3], esz);
				}
	}
}

int rf__convert_host(void *dst, enum rf_tdtype ddt, enum rf_layout dlay, const void *src,
		     enum rf_tdtype sdt, enum rf_layout slay, int ndim, const int64_t *shape)
{
	size_t n = 1, esz = rf_tdtype_size(sdt);
	int d;

	if (!esz || !rf_tdtype_size(ddt) || (ddt != sdt && !(rf__is_float(ddt) && rf__is_float(sdt))))
		return -EINVAL;
	if ((dlay != RF_LAYOUT_ROWMAJOR || slay != RF_LAYOUT_ROWMAJOR) && ndim != 4)
		return -EINVAL;
	for (d = 0; d < ndim; d++)
		n *= (size_t)shape[d];
	if (dlay == slay && ddt == sdt) {
		if (n)
			memmove(dst, src, n * esz);
		return 0;
	}
	rf__tsan_read(src, n * esz);
	rf__tsan_write(dst, n * rf_tdtype_size(ddt));
	rf__convert_elems(dst, ddt, dlay, src, sdt, slay, shape, n, esz);
	return 0;
}

unsigned rf__fill_bits(enum rf_tdtype dt, float v, uint32_t *bits)
{
	switch (dt) {
	case RF_F32:
		memcpy(bits, &v, 4);
		return 4;
	case RF_I32: {
		int32_t i = v != v ? 0 : v >= 2147483647.0f ? INT32_MAX
			  : v <= -2147483648.0f ? INT32_MIN : (int32_t)v;
		*bits = (uint32_t)i;
		return 4;
	}
	case RF_BF16:
		*bits = rf__f32_to_bf16(v);
		return 2;
	case RF_F16:
		*bits = rf__f32_to_f16(v);
		return 2;
	case RF_U8:
		*bits = v != v || v <= 0.0f ? 0u : v >= 255.0f ? 255u : (uint32_t)v;
		return 1;
	default:
		*bits = 0;
		return 0;
	}
}
