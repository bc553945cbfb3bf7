/* train/trainer-slots.c -- per-epoch result slots: each batch's loss sum and correct
 * count stay on the replica's device, written by the batch's forward pass, and are
 * read back once per epoch (no host read per batch). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer-impl.h"
#include "ops.h"

int rf__slots_make(struct rf__slots *sl, struct rf_device *d, uint64_t nb, const char *tag)
{
	char name[40];
	uint64_t b;

	sl->nb = nb;
	snprintf(name, sizeof(name), "%s.loss", tag);
	rf_tensor_create(d, RF_F32, name, RF_DIMS((int64_t)nb), &sl->loss);
	snprintf(name, sizeof(name), "%s.correct", tag);
	rf_tensor_create(d, RF_I32, name, RF_DIMS((int64_t)nb), &sl->corr);
	sl->lv = calloc(nb, sizeof(*sl->lv));
	sl->cv = calloc(nb, sizeof(*sl->cv));
	if (!sl->loss || !sl->corr || !sl->lv || !sl->cv)
		return -ENOMEM;
	for (b = 0; b < nb; b++) {
		rf_tensor_view(sl->loss, b, RF_F32, "loss_b", RF_DIMS(1), &sl->lv[b]);
		rf_tensor_view(sl->corr, b, RF_I32, "correct_b", RF_DIMS(1), &sl->cv[b]);
		if (!sl->lv[b] || !sl->cv[b])
			return -ENOMEM;
	}
	return 0;
}

void rf__epoch_slots_free(struct rf__slots *sl)
{
	uint64_t b;

	for (b = 0; b < sl->nb; b++) {
		if (sl->lv)
			rf_tensor_destroy(sl->lv[b]);
		if (sl->cv)
			rf_tensor_destroy(sl->cv[b]);
	}
	free(sl->lv);
	free(sl->cv);
	rf_tensor_destroy(sl->loss);
	rf_tensor_destroy(sl->corr);
	memset(sl, 0, sizeof(*sl));
}

/* Zero all slots (one op on each block, ordered against every view). */
int rf__slots_clear(struct rf__slots *sl, struct rf_stream *s)
{
	int ret = rf_fill(s, sl->loss, 0.0f);

	return ret < 0 ? ret : rf_fill(s, sl->corr, 0.0f);
}

/* Read slots [0, nb) back (waits) and add them up. */
int rf__slots_sum(struct rf__slots *sl, uint64_t nb, double *loss, uint64_t *corr)
{
	float *l = malloc(sl->nb * sizeof(float));
	int32_t *c = malloc(sl->nb * sizeof(int32_t));
	int ret = -ENOMEM;
	uint64_t b;

	if (l && c) {
		ret = rf_tensor_read(sl->loss, l);
		if (ret == 0)
			ret = rf_tensor_read(sl->corr, c);
		for (b = 0; ret == 0 && b < nb && b < sl->nb; b++) {
			*loss += l[b];
			*corr += (uint64_t)c[b];
		}
	}
	free(l);
	free(c);
	return ret;
}
