/* common/decode.c -- u8 -> f32 on the host: x = (u8 * scale - mean) / std, each step
 * rounded to float as written (no fused multiply-add). One implementation for the CPU
 * backend's decode op and the loader's gather, so both give the same bits.
 * - mean 0 and std 1 (the loader's default, /255): the subtraction and the division
 *   change nothing, so only the multiply is done, 16 lanes at a time on AVX-512 (a
 *   division per byte was 45 % of the CPU time of a shuffled epoch of 150 KB
 *   records), with streaming stores when asked (outputs larger than any cache: no
 *   read of each line before it is written, a third less memory traffic);
 * - otherwise, n >= 1024: a u8 has 256 values, computed once and looked up;
 * - otherwise the formula. */
#include <stdint.h>

#include "decode.h"
#include "rf-internal.h"

#if defined(__GNUC__) && !defined(__clang__)
#define RF__NOFMA __attribute__((optimize("fp-contract=off")))
#else
#define RF__NOFMA
#endif

RF__NOFMA
static float rf__one(uint8_t v, float scale, float mean, float std)
{
	float t = (float)v * scale;
	t = t - mean;
	return t / std;
}

RF__NOFMA
static void rf__formula(float *restrict out, const uint8_t *restrict in, size_t n, float scale,
			float mean, float std)
{
	for (size_t i = 0; i < n; i++)
		out[i] = rf__one(in[i], scale, mean, std);
}

static void rf__scale_def(float *restrict out, const uint8_t *restrict in, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (float)in[i] * scale;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define RF__DEC_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2")))

RF__DEC_AVX512 static void rf__scale_avx512(float *out, const uint8_t *in, size_t n, float scale,
					    int stream)
{
	const __m512 s = _mm512_set1_ps(scale);
	size_t i = 0;

	if (stream) /* streamed stores want 64-byte aligned addresses */
		for (; i < n && ((uintptr_t)(out + i) & 63); i++)
			out[i] = (float)in[i] * scale;
	for (; i + 16 <= n; i += 16) {
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(in + i));
		__m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b)), s);
		if (stream)
			_mm512_stream_ps(out + i, f);
		else
			_mm512_storeu_ps(out + i, f);
	}
	for (; i < n; i++)
		out[i] = (float)in[i] * scale;
	if (stream)
		_mm_sfence(); /* ordered before whatever the caller signals next */
}
#endif

void rf__decode_u8_f32(float *restrict out, const uint8_t *restrict in, size_t n, float scale,
		       float mean, float std, int stream)
{
	if (mean == 0.0f && std == 1.0f) {
#ifdef RF__DEC_AVX512
		if (rf__isa_avx512()) {
			rf__scale_avx512(out, in, n, scale, stream);
			return;
		}
#endif
		(void)stream;
		rf__scale_def(out, in, n, scale);
	} else if (n >= 1024) {
		float lut[256];
		for (unsigned v = 0; v < 256; v++)
			lut[v] = rf__one((uint8_t)v, scale, mean, std);
		for (size_t i = 0; i < n; i++)
			out[i] = lut[in[i]];
	} else {
		rf__formula(out, in, n, scale, mean, std);
	}
}

void rf__decode_u8_norm(float *restrict out, const uint8_t *restrict in, size_t n,
			const struct rf__u8norm *m, int stream)
{
	unsigned nch = m->nch ? m->nch : 1, plain = 1;
	float lut[RF__U8NORM_MAX_CH][256];

	for (unsigned c = 0; c < nch; c++)
		plain &= m->mean[c] == m->mean[0] && m->std[c] == m->std[0];
	if (nch == 1 || plain || !m->plane) {
		rf__decode_u8_f32(out, in, n, m->scale, m->mean[0], m->std[0], stream);
		return;
	}
	if (n < 1024) {  /* small: the formula, run by run (a table costs more) */
		for (size_t i = 0, c = 0; i < n; i += m->plane, c = (c + 1) % nch) {
			size_t r = n - i < m->plane ? n - i : (size_t)m->plane;
			rf__formula(out + i, in + i, r, m->scale, m->mean[c], m->std[c]);
		}
		return;
	}
	for (unsigned c = 0; c < nch; c++)
		for (unsigned v = 0; v < 256; v++)
			lut[c][v] = rf__one((uint8_t)v, m->scale, m->mean[c], m->std[c]);
	for (size_t i = 0, c = 0; i < n; i += m->plane, c = (c + 1) % nch) {
		size_t r = n - i < m->plane ? n - i : (size_t)m->plane;
		const float *t = lut[c];
		for (size_t k = 0; k < r; k++)
			out[i + k] = t[in[i + k]];
	}
}
