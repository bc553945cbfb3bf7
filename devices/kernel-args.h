/* devices/kernel-args.h -- the shapes every backend's kernels take (each backend's
 * kernel header includes this) and the checks and workspace grouping of a conv2d they
 * share (C, and C++ device code). Internal to devices/. */
#ifndef RF_KERNEL_ARGS_H
#define RF_KERNEL_ARGS_H

#include <errno.h>
#include <stddef.h>

/* Shape of a conv2d: input x (n, c, h, w), weight (o, c, kh, kw), bias (o), stride and
 * zero padding the same along both axes (stride 0 is taken as 1, so a designated
 * initialiser that leaves them out describes LeNet's stride-1 unpadded conv),
 * output y (n, o, oh, ow) with oh = (h + 2*pad - kh)/stride + 1, ow likewise. */
struct rf__conv2d {
	int n, c, h, w;   /* input */
	int o, kh, kw;    /* output channels, kernel */
	int stride, pad;  /* 0 and 0: stride 1, unpadded */
};
static inline int rf__conv2d_stride(const struct rf__conv2d *s)
{
	return s->stride > 0 ? s->stride : 1;
}
static inline int rf__conv2d_oh(const struct rf__conv2d *s)
{
	return (s->h + 2 * s->pad - s->kh) / rf__conv2d_stride(s) + 1;
}
static inline int rf__conv2d_ow(const struct rf__conv2d *s)
{
	return (s->w + 2 * s->pad - s->kw) / rf__conv2d_stride(s) + 1;
}

/* Over x (n, c, hw) per channel, as PyTorch's BatchNorm2d: eps added to the variance,
 * momentum the running statistics' update weight (0.1 in PyTorch). */
struct rf__bn {
	int n, c, hw;
	float eps, momentum;
	int relu;       /* forward: y = max(bn(x), 0); backward: dy masked by y > 0 */
};
/* 0 if s describes a conv2d (a kernel that fits the padded input, stride >= 0 with
 * 0 taken as 1, pad >= 0 and smaller than the kernel), else -EINVAL */
static inline int rf__conv_check(const struct rf__conv2d *s)
{
	if (!s || s->n < 0 || s->c < 1 || s->o < 1 || s->kh < 1 || s->kw < 1 ||
	    s->stride < 0 || s->pad < 0 || s->pad >= s->kh || s->pad >= s->kw ||
	    s->h + 2 * s->pad < s->kh || s->w + 2 * s->pad < s->kw)
		return -EINVAL;
	return 0;
}

/* stride 1 and no padding: the shape every specialised path was written for */
static inline int rf__conv_plain(const struct rf__conv2d *s)
{
	return rf__conv2d_stride(s) == 1 && s->pad == 0;
}

/* workspace bytes for one image: its im2col matrix and its output block */
static inline size_t rf__conv_per_image(const struct rf__conv2d *s)
{
	size_t ckk = (size_t)s->c * s->kh * s->kw;
	size_t ohw = (size_t)rf__conv2d_oh(s) * rf__conv2d_ow(s);
	return (ckk + (size_t)s->o) * ohw * sizeof(float);
}

/* the least workspace that works (one image at a time), 0 for a bad shape */
static inline size_t rf__conv_workspace_min(const struct rf__conv2d *s)
{
	return rf__conv_check(s) ? 0 : rf__conv_per_image(s);
}

/* images per group that the workspace holds (>= 1), or 0 if it holds none */
static inline int rf__conv_group(const struct rf__conv2d *s, const void *ws, size_t ws_bytes)
{
	size_t per = rf__conv_per_image(s);
	size_t g;

	if (!ws || ws_bytes < per)
		return 0;
	g = ws_bytes / per;
	if (g > (size_t)s->n)
		g = (size_t)s->n;
	return g < 1 ? 1 : (int)g;
}

/* The preamble of a forward or data-gradient conv: -EINVAL for a bad shape or a
 * workspace too small for one image, 0 when there is no image, else the images per
 * group (>= 1). */
static inline int rf__conv_begin(const struct rf__conv2d *s, const void *ws, size_t ws_bytes)
{
	int g;

	if (rf__conv_check(s))
		return -EINVAL;
	if (s->n == 0)
		return 0;
	g = rf__conv_group(s, ws, ws_bytes);
	return g ? g : -EINVAL;
}

#endif
