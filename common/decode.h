/* common/decode.h -- u8 -> f32 decoding on the host, shared by the CPU backend's decode
 * op and the loader's gather so that both give the same bits. Never installed. */
#ifndef RF_COMMON_DECODE_H
#define RF_COMMON_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "u8norm.h"

/* out[i] = (in[i] * scale - mean) / std, each step rounded to float as written.
 * stream: the output is too large to stay in cache (streaming stores where they
 * exist); the values are the same either way. */
void rf__decode_u8_f32(float *restrict out, const uint8_t *restrict in, size_t n, float scale,
		       float mean, float std, int stream);

/* rf__decode_u8_f32 with a mean and std per channel (u8norm.h): element i of
 * in[0..n) is of channel (i / m->plane) % m->nch, counted from in[0]. The same bits
 * as rf__decode_u8_f32 over each channel's run. */
void rf__decode_u8_norm(float *restrict out, const uint8_t *restrict in, size_t n,
			const struct rf__u8norm *m, int stream);

#endif
