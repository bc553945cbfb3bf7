/* common/u8norm.h -- how u8 inputs become floats: x = (u8 * scale - mean[c]) / std[c],
 * c the channel of the element. Plain C without restrict, so that the CUDA kernels
 * (C++), the backends' op records and the host decoder share one definition. Never
 * installed. */
#ifndef RF_COMMON_U8NORM_H
#define RF_COMMON_U8NORM_H

#include <stdint.h>

#define RF__U8NORM_MAX_CH 4

/* Element i (logical row-major order) is of channel (i / plane) % nch; nch 1 is one
 * mean and std for every element (plane then unused). */
struct rf__u8norm {
	float scale;
	unsigned nch;                    /* 1 .. RF__U8NORM_MAX_CH */
	uint64_t plane;                  /* elements of one channel's run, >= 1 */
	float mean[RF__U8NORM_MAX_CH], std[RF__U8NORM_MAX_CH];
};

/* One mean and std for all elements. */
static inline struct rf__u8norm rf__u8norm_one(float scale, float mean, float std)
{
	struct rf__u8norm m = { scale, 1, 1, { mean, 0, 0, 0 }, { std, 1, 1, 1 } };
	return m;
}

#endif
