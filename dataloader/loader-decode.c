/* loader-decode.c -- decoding: rf_u8_to_f32 of a slot's staging into its f32 tensors
 * on the target devices (a device with memory of its own: the u8 batch and the
 * labels are copied to it first and decoded there). Host devices decode in the
 * gather instead (l->fused, loader-gather.c). */
#include "loader-impl.h"

/* Shard k of slot s on device k; CPU streams rotate with the batch number t. */
static int rf__decode_shard(struct rf_loader *l, struct rf__slot *s, unsigned k, uint64_t t)
{
	struct rf_device *d = l->o.devices[k];
	unsigned ns;
	int ret;

	if (l->remote) {
		ret = rf_copy(NULL, s->ud[k], s->su[k]);
		if (!ret)
			ret = rf_u8_to_f32(NULL, s->x[k], s->ud[k], l->o.scale, l->o.mean, l->o.std);
		if (!ret && s->y[k])
			ret = rf_copy(NULL, s->y[k], s->yh[k]);
		return ret;
	}
	ns = rf_device_nstreams(d);
	return rf_u8_to_f32(rf_device_stream(d, (unsigned)((t + k) % (ns ? ns : 1))), s->x[k],
			    s->su[k], l->o.scale, l->o.mean, l->o.std);
}

int rf__push_decode(struct rf_loader *l, struct rf__slot *s, uint64_t t)
{
	if (l->fused)
		return 0; /* the gather wrote the f32 rows */
	for (unsigned k = 0; k < l->K; k++) {
		int ret = rf__decode_shard(l, s, k, t);
		if (ret < 0)
			return ret;
	}
	return 0;
}
