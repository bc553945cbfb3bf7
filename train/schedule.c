/* train/schedule.c -- the learning rate per epoch (trainer.h: rf_lr_at): a linear
 * warm-up, then constant, step or cosine, as PyTorch's LinearLR, StepLR and
 * CosineAnnealingLR joined by SequentialLR (tests/train/ref/lr.ref). */
#include <math.h>

#include "trainer.h"

double rf_lr_at(const struct rf_lr_schedule *s, double base, unsigned e)
{
	unsigned w = s->warmup_epochs;

	if (e < w)     /* from base/(W+1) at epoch 0 to base at epoch W */
		return base * (1.0 / (w + 1) + (1.0 - 1.0 / (w + 1)) * e / w);
	e -= w;
	switch (s->kind) {
	case RF_LR_STEP:
		return base * pow(s->gamma, (double)(e / (s->step_epochs ? s->step_epochs : 1)));
	case RF_LR_COSINE: {
		unsigned t = s->epochs > w ? s->epochs - w : 1;
		return base * (1.0 + cos(M_PI * (double)(e < t ? e : t) / t)) / 2.0;
	}
	default:
		return base;
	}
}
