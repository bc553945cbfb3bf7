/* test-conv-split: rf_conv2d_fwd_group on the CPU device, and the promise it makes --
 * a batch run as parts that start at multiples of the group (views of x and y, on two
 * streams, as rf-train's split forward runs a model's leading layers) gives the bits of
 * one call on the whole batch. Shapes: LeNet's second convolution (batches of 64 and
 * of 44, a tail), a padded 28x28 stem, a strided one, a batch smaller than its group,
 * and a single-channel one the direct kernel runs image by image (group 1). The group
 * is checked against its rule: a power of two whose GEMM reaches ~1024 columns, or
 * the whole batch when that is smaller. Bad arguments are refused by name.
 *
 * Run twice (meson.build): with the library's own GEMM, and as an AVX2-only machine
 * runs -- RF_KERNELS_NO_AVX512=1 here, OPENBLAS_CORETYPE=Haswell set below where the
 * CPU has AVX2 and FMA -- whose OpenBLAS sgemm rounds an element differently with the
 * GEMM's width: there a split at the batch's half (not a multiple of the group) gave
 * rf-train's NCHW and NHWC runs different checkpoints. A split off the group is
 * reported, not asserted (it is OpenBLAS's behaviour, not ours). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "engine.h"
#include "device.h"
#include "tensor.h"
#include "log.h"
#include "ops.h"
#include "../test-util.h"

#define TARGET_COLS 1024 /* devices/cpu/conv.c: RF__CONV_TARGET_COLS */

struct shape {
	const char *name;
	int n, c, h, w, o, k, stride, pad;
};

static unsigned long long seed = 99;

static void fill(float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (float)((t_splitmix64(&seed) >> 40) * (1.0 / 16777216.0)) - 0.5f;
}

static struct rf_tensor *tensor(struct rf_device *d, const char *name, int64_t a, int64_t b,
				int64_t c, int64_t e, const float *host)
{
	struct rf_tensor *t;

	CHECK_OK(rf_tensor_create(d, RF_F32, name, RF_DIMS(a, b, c, e), &t));
	if (host)
		CHECK_OK(rf_tensor_write(t, host));
	return t;
}

/* y of the whole batch, or of parts [0, h) and [h, n) on two streams */
static void forward(struct rf_engine *e, struct rf_device *d, const struct shape *s,
		    struct rf_tensor *x, struct rf_tensor *w, struct rf_tensor *b, int oh, int ow,
		    int h, float *out)
{
	struct rf_tensor *y = tensor(d, "y", s->n, s->o, oh, ow, NULL);

	if (!h) {
		CHECK_OK(rf_conv2d_fwd(rf_device_stream(d, 0), y, x, w, b, s->stride, s->pad));
	} else {
		for (int part = 0; part < 2; part++) {
			int i0 = part ? h : 0, k = part ? s->n - h : h;
			struct rf_tensor *xv, *yv;
			CHECK_OK(rf_tensor_view(x, (size_t)i0 * s->c * s->h * s->w, RF_F32, "xv",
						RF_DIMS(k, s->c, s->h, s->w), &xv));
			CHECK_OK(rf_tensor_view(y, (size_t)i0 * s->o * oh * ow, RF_F32, "yv",
						RF_DIMS(k, s->o, oh, ow), &yv));
			CHECK_OK(rf_conv2d_fwd(rf_device_stream(d, part), yv, xv, w, b, s->stride,
					       s->pad));
			rf_tensor_destroy(xv);
			rf_tensor_destroy(yv);
		}
	}
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_OK(rf_tensor_read(y, out));
	rf_tensor_destroy(y);
}

static void one(struct rf_engine *e, struct rf_device *d, const struct shape *s)
{
	int oh = (s->h + 2 * s->pad - s->k) / s->stride + 1, ow = (s->w + 2 * s->pad - s->k) / s->stride + 1;
	size_t nx = (size_t)s->n * s->c * s->h * s->w, nw = (size_t)s->o * s->c * s->k * s->k;
	size_t ny = (size_t)s->n * s->o * oh * ow;
	float *hx = malloc(nx * 4), *hw = malloc(nw * 4), *hb = malloc((size_t)s->o * 4);
	float *whole = malloc(ny * 4), *split = malloc(ny * 4);
	int g, splits = 0, off = 0, off_same = 0;

	CHECK(hx && hw && hb && whole && split);
	fill(hx, nx);
	fill(hw, nw);
	fill(hb, (size_t)s->o);
	struct rf_tensor *x = tensor(d, "x", s->n, s->c, s->h, s->w, hx);
	struct rf_tensor *w = tensor(d, "w", s->o, s->c, s->k, s->k, hw);
	struct rf_tensor *b;
	CHECK_OK(rf_tensor_create(d, RF_F32, "b", RF_DIMS(s->o), &b));
	CHECK_OK(rf_tensor_write(b, hb));

	g = rf_conv2d_fwd_group(d, x, w, s->stride, s->pad);
	CHECK(g >= 1 && g <= s->n);
	if (s->c == 1 && s->stride == 1 && s->pad == 0) {
		CHECK_EQ(g, 1); /* the direct kernel: image by image */
	} else if (g < s->n) {
		/* a power of two, the least whose GEMM reaches the target width */
		CHECK((g & (g - 1)) == 0);
		CHECK((size_t)g * oh * ow >= TARGET_COLS);
		CHECK(g == 1 || (size_t)(g / 2) * oh * ow < TARGET_COLS);
	}
	forward(e, d, s, x, w, b, oh, ow, 0, whole);
	for (int h = 1; h < s->n; h++) {
		forward(e, d, s, x, w, b, oh, ow, h, split);
		int same = memcmp(whole, split, ny * 4) == 0;
		if (h % g == 0) {
			if (!same) {
				fprintf(stderr, "%s: split at %d (a multiple of the group %d) differs "
					"from the whole batch\n", s->name, h, g);
				exit(1);
			}
			splits++;
		} else {
			off++;
			off_same += same;
		}
	}
	printf("  %-28s n %2d: group %2d (%4d columns); %d splits at its multiples give the "
	       "whole batch's bits; %d of %d splits off it do\n", s->name, s->n, g, g * oh * ow,
	       splits, off_same, off);
	rf_tensor_destroy(x);
	rf_tensor_destroy(w);
	rf_tensor_destroy(b);
	free(hx), free(hw), free(hb), free(whole), free(split);
}

static void refused(const char *what, int ret, const char *needle)
{
	printf("  %-28s -> %d: %s\n", what, ret, rf_last_error());
	CHECK_EQ(ret, -EINVAL);
	CHECK(strstr(rf_last_error(), needle));
}

static void bad_args(struct rf_device *d)
{
	struct rf_tensor *x = tensor(d, "x", 2, 3, 8, 8, NULL), *w = tensor(d, "w", 4, 3, 3, 3, NULL);
	struct rf_tensor *w2 = tensor(d, "w2", 4, 2, 3, 3, NULL), *x3;

	CHECK_OK(rf_tensor_create(d, RF_F32, "x3", RF_DIMS(2, 3, 8), &x3));
	refused("NULL device", rf_conv2d_fwd_group(NULL, x, w, 1, 0), "NULL device");
	refused("3-D x", rf_conv2d_fwd_group(d, x3, w, 1, 0), "4-D");
	refused("pad 3 with a 3x3 kernel", rf_conv2d_fwd_group(d, x, w, 1, 3),
		"the pad must be smaller than the kernel");
	refused("stride 0", rf_conv2d_fwd_group(d, x, w, 0, 0), "stride 0");
	refused("w of 2 channels, x of 3", rf_conv2d_fwd_group(d, x, w2, 1, 0), "(4, 2, 3, 3)");
	rf_tensor_destroy(x);
	rf_tensor_destroy(x3);
	rf_tensor_destroy(w);
	rf_tensor_destroy(w2);
}

int main(void)
{
	static const struct shape shapes[] = {
		{ "LeNet conv2 (5x5, 20->50)", 64, 20, 13, 13, 50, 5, 1, 0 },
		{ "LeNet conv2, a tail batch", 44, 20, 13, 13, 50, 5, 1, 0 },
		{ "3x3 pad 1 on 28x28", 12, 3, 28, 28, 16, 3, 1, 1 },
		{ "3x3 stride 2 pad 1", 20, 8, 15, 15, 8, 3, 2, 1 },
		{ "a batch under its group", 5, 20, 13, 13, 50, 5, 1, 0 },
		{ "single channel (direct)", 9, 1, 28, 28, 20, 3, 1, 0 },
	};
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *d;
	char kern[128];
	const char *nx = getenv("RF_KERNELS_NO_AVX512");

	setvbuf(stdout, NULL, _IONBF, 0);
#if defined(__x86_64__)
	/* as an AVX2-only machine runs (OpenBLAS is opened on first use, after this) */
	if (nx && *nx && *nx != '0' && !getenv("OPENBLAS_CORETYPE") &&
	    __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		setenv("OPENBLAS_CORETYPE", "Haswell", 1);
#endif
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	CHECK_OK(rf_cpu_open(e, &(struct rf_cpu_opts){ .streams = 2 }, &d));
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		one(e, d, &shapes[i]);
	bad_args(d);
	printf("test-conv-split: OK (kernels: %s)\n", rf_cpu_kernels(kern, sizeof(kern)));
	rf_device_close(d);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
