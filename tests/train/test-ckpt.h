/* tests/train/test-ckpt.h -- the checkpoint calls with the message copied out of
 * rf_last_error() into a caller's buffer ("" on success), so the tests can keep
 * checking what a refusal says. */
#ifndef RF_TEST_CKPT_H
#define RF_TEST_CKPT_H

#include <stdio.h>

#include "checkpoint.h"

static inline int ckpt_msg(int ret, char *err, size_t len)
{
	if (err && len)
		snprintf(err, len, "%s", ret < 0 ? rf_last_error() : "");
	return ret;
}

static inline int ckpt_save(struct rf_ring *r, const char *path, const struct rf_ckpt_meta *meta,
			    const struct rf_ckpt_blob *b, unsigned n, char *err, size_t len)
{
	return ckpt_msg(rf_ckpt_save(r, path, meta, b, n), err, len);
}

static inline int ckpt_load(struct rf_ring *r, const char *path, struct rf_ckpt_meta *meta,
			    struct rf_ckpt_blob *b, unsigned n, char *err, size_t len)
{
	return ckpt_msg(rf_ckpt_load(r, path, meta, b, n), err, len);
}

static inline int ckpt_probe(const char *path, struct rf_ckpt_meta *meta, char *err, size_t len)
{
	return ckpt_msg(rf_ckpt_probe(path, meta), err, len);
}

#endif
