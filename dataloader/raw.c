/* raw.c -- generic files of fixed-size records (rf_dataset_open_raw): a header to
 * skip, then records whose payload and label lie where the caller's description says. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#include "dataset-impl.h"

/* Record layout from the description: the payload's size and shape inferred where
 * the description leaves them 0, then the checks shared with .rfrec. */
static int raw_layout(struct rf_dataset *ds, const char *path, const struct rf_raw_desc *d)
{
	size_t es;

	ds->dtype = d->dtype ? d->dtype : RF_DS_DT_U8;
	es = rf_ds_dtype_size(ds->dtype);
	ds->label_kind = d->label_kind;
	ds->label_offset = d->label_offset;
	ds->label_src = RF_DS_SRC_PAYLOAD;
	ds->num_classes = d->num_classes;
	ds->payload_offset = d->payload_offset;
	ds->payload_bytes = d->payload_bytes;
	if (d->record_bytes == 0)
		return rf__ds_fail(-EINVAL, path, "description: record size 0, expected >= 1");
	if (!ds->payload_bytes && d->payload_offset < d->record_bytes) {
		uint64_t end = d->record_bytes;
		if (d->label_kind != RF_LABEL_NONE && d->label_offset > d->payload_offset)
			end = d->label_offset;
		ds->payload_bytes = end - d->payload_offset;
	}
	if (d->ndim == 0 && es) {
		if (ds->payload_bytes % es)
			return rf__ds_fail(-EINVAL, path,
					   "description: payload of %" PRIu64 " bytes is not a whole "
					   "number of %s elements", ds->payload_bytes,
					   rf_ds_dtype_name(ds->dtype));
		if (ds->payload_bytes / es > UINT32_MAX)
			return rf__ds_fail(-EINVAL, path,
					   "description: payload too large for one dim, give a shape");
		ds->ndim = ds->payload_bytes ? 1 : 0;
		ds->shape[0] = (uint32_t)(ds->payload_bytes / es);
	} else {
		ds->ndim = d->ndim;
		memcpy(ds->shape, d->shape, sizeof(ds->shape));
	}
	return rf__ds_check_layout(ds, "description");
}

/* Records in a file of size bytes: a whole number (>= 1) unless RF_DS_ALLOW_TAIL. */
static int raw_count(struct rf_dataset *ds, const char *path, const struct rf_raw_desc *d,
		     uint64_t size, unsigned flags)
{
	uint64_t body;

	if (size == 0)
		return rf__ds_fail(-EINVAL, path,
				   "offset 0: file is empty (no records), expected %s%" PRIu64 "-byte records",
				   d->header_bytes ? "a header and " : "", d->record_bytes);
	if (d->header_bytes > size)
		return rf__ds_fail(-EINVAL, path,
				   "offset %" PRIu64 ": file is %" PRIu64 " bytes, shorter than its %"
				   PRIu64 "-byte header", size, size, d->header_bytes);
	body = size - d->header_bytes;
	ds->count = body / d->record_bytes;
	ds->tail_bytes = body % d->record_bytes;
	if (ds->tail_bytes && !(flags & RF_DS_ALLOW_TAIL))
		return rf__ds_fail(-EINVAL, path,
				   "offset %" PRIu64 ": %" PRIu64 " bytes left over after %" PRIu64
				   " whole records of %" PRIu64 " bytes (file %" PRIu64 " bytes, header %"
				   PRIu64 "), expected a multiple of %" PRIu64,
				   size - ds->tail_bytes, ds->tail_bytes, ds->count, d->record_bytes,
				   size, d->header_bytes, d->record_bytes);
	if (ds->count == 0)
		return rf__ds_fail(-EINVAL, path,
				   "offset %" PRIu64 ": no records (file %" PRIu64 " bytes, header %"
				   PRIu64 ", record %" PRIu64 " bytes), expected at least one",
				   d->header_bytes, size, d->header_bytes, d->record_bytes);
	ds->src[0].data_bytes = ds->count * d->record_bytes;
	return 0;
}

/* RF_DS_VERIFY: every label in range; num_classes inferred when 0. */
static int raw_verify(struct rf_dataset *ds)
{
	int32_t max = -1;
	int ret = rf__ds_scan(ds, 1, &max, NULL);

	if (ret)
		return ret;
	if (!ds->num_classes)
		ds->num_classes = (uint32_t)max + 1;
	return 0;
}

int rf_dataset_open_raw(struct rf_dataset *ds, const char *path,
			const struct rf_raw_desc *d, unsigned flags)
{
	int aret = rf__ds_open_args(ds, flags, __func__);
	if (aret < 0)
		return aret;
	struct rf_dataset_src *s = &ds->src[0];
	struct stat st;
	int ret;

	memset(ds, 0, sizeof(*ds));
	ds->src[0].fd = ds->src[1].fd = -1;
	if (!path || !d)
		return rf__ds_fail(-EINVAL, path, "no path or description given");
	ds->kind = RF_DS_RAW;
	ds->nsrc = 1;
	if ((ret = rf__ds_src_open(s, path, "a file of fixed-size records", &st)) < 0)
		goto fail;
	s->size = (uint64_t)st.st_size;
	s->data_offset = d->header_bytes;
	s->stride = d->record_bytes;
	ret = raw_layout(ds, path, d);
	if (!ret)
		ret = raw_count(ds, path, d, s->size, flags);
	if (!ret && (flags & RF_DS_VERIFY) && ds->label_kind != RF_LABEL_NONE)
		ret = raw_verify(ds);
	if (!ret)
		return 0;
fail:
	rf_dataset_close(ds);
	return ret;
}
