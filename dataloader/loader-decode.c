/* loader-decode.c -- decoding by an op: on a device with memory of its own the slot's
 * u8 staging and labels are copied to the device and rf_u8_to_f32 decodes them there,
 * into x's dtype and layout; on a host device asked for another format than f32
 * row-major, rf_u8_to_f32 decodes the staging in place; u8 batches are the staging
 * itself on a host device, its copy on a GPU. Host devices with f32
 * row-major batches decode in the gather instead (rf__fused, loader-gather.c). */
#include "loader-impl.h"

/* Shard k of slot s on device k. */
static int rf__decode_shard(struct rf_loader *l, struct rf__slot *s, unsigned k)
{
	int ret = l->remote ? rf_copy(NULL, s->ud[k], s->su[k]) : 0;

	if (!ret && l->o.x_dtype != RF_U8 && l->o.norm_channels) /* u8: the bytes as they are */
		ret = rf_u8_normalize(NULL, s->x[k], l->remote ? s->ud[k] : s->su[k],
				      l->norm.scale, l->norm.nch, l->norm.plane, l->norm.mean,
				      l->norm.std);
	else if (!ret && l->o.x_dtype != RF_U8)
		ret = rf_u8_to_f32(NULL, s->x[k], l->remote ? s->ud[k] : s->su[k], l->o.scale,
				   l->o.mean, l->o.std);
	if (!ret && s->y[k] && s->y[k] != s->yh[k])
		ret = rf_copy(NULL, s->y[k], s->yh[k]);
	return ret;
}

int rf__push_decode(struct rf_loader *l, struct rf__slot *s)
{
	if (rf__fused(l))
		return 0; /* the gather wrote the f32 rows */
	for (unsigned k = 0; k < l->K; k++) {
		int ret = rf__decode_shard(l, s, k);
		if (ret < 0)
			return ret;
	}
	return 0;
}
