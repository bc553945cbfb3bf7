/* wds.c -- a WebDataset shard (a tar of KEY.jpg|.jpeg|.png + KEY.cls members) opened as a
 * dataset of encoded images read where they lie in the tar: the tar's member list
 * (tar.c, cached beside the shard by tar-index.c) gives each sample's image (offset,
 * length) and label, which go into an in-memory index of the layout a version 2
 * .rfrec keeps (16 bytes a record), so a loader reads a shard as it reads such a
 * file. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dataset-impl.h"
#include "tar-impl.h"

/* Samples -> the index (src[1]) and the fields of ds. */
static int wds_fill(struct rf_dataset *ds, const struct rf__wds_sample *sm, size_t n,
		    const char *path, uint32_t num_classes)
{
	struct rf_dataset_src *x = &ds->src[1];
	uint8_t *ix = malloc(n * RF_REC_INDEX_ENTRY);
	size_t with = 0;
	int32_t top = -1;

	if (!ix)
		return rf__ds_fail(-ENOMEM, path, "out of memory for the index of %zu samples", n);
	for (size_t i = 0; i < n; i++)
		with += sm[i].label >= 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = ix + i * RF_REC_INDEX_ENTRY;
		if (sm[i].img_size == 0 || sm[i].img_size > UINT32_MAX) {
			free(ix);
			return rf__ds_fail(-EINVAL, path, "offset %" PRIu64 ": sample %s: image of %"
					   PRIu64 " bytes, expected 1 byte to 4 GiB", sm[i].img_off,
					   sm[i].key, sm[i].img_size);
		}
		if (with && sm[i].label < 0) {
			free(ix);
			return rf__ds_fail(-EINVAL, path, "offset %" PRIu64 ": sample %s has no .cls "
					   "label while %zu others have one: expected every sample "
					   "labelled or none", sm[i].img_off, sm[i].key, with);
		}
		if (num_classes && sm[i].label >= 0 && (uint32_t)sm[i].label >= num_classes) {
			free(ix);
			return rf__ds_fail(-ERANGE, path, "sample %s: label %" PRId32 " outside [0, %"
					   PRIu32 ")", sm[i].key, sm[i].label, num_classes);
		}
		rf__put_le64(e, sm[i].img_off);
		rf__put_le32(e + 8, (uint32_t)sm[i].img_size);
		rf__put_le32(e + 12, (uint32_t)sm[i].label);
		if (sm[i].img_size > ds->max_record)
			ds->max_record = sm[i].img_size;
		if (sm[i].label > top)
			top = sm[i].label;
	}
	x->fd = -1;
	x->mem = ix;
	x->size = x->data_bytes = n * RF_REC_INDEX_ENTRY;
	x->stride = RF_REC_INDEX_ENTRY;
	ds->nsrc = 2;
	ds->count = n;
	ds->encoding = RF_REC_ENC_IMAGE;
	ds->dtype = RF_DS_DT_U8;
	ds->label_src = RF_DS_SRC_LABEL;
	ds->label_offset = 12;
	ds->label_kind = with ? RF_LABEL_I32 : RF_LABEL_NONE;
	ds->num_classes = with ? (num_classes ? num_classes : (uint32_t)top + 1) : 0;
	if (!(x->path = strdup(path)))
		return rf__ds_fail(-ENOMEM, path, "out of memory");
	return 0;
}

int rf_dataset_open_file(struct rf_dataset *ds, const char *path, unsigned flags)
{
	size_t n = path ? strlen(path) : 0;

	if (n > 4 && !strcmp(path + n - 4, ".tar") && strncmp(path, "http://", 7))
		return rf_dataset_open_wds(ds, path, 0, flags);
	return rf_dataset_open_rfrec(ds, path, flags);
}

int rf_dataset_open_wds(struct rf_dataset *ds, const char *path, uint32_t num_classes,
			unsigned flags)
{
	struct rf__tar t = { 0 };
	struct rf__wds_sample *sm = NULL;
	size_t n = 0, noimg = 0;
	int ret;

	memset(ds, 0, sizeof(*ds));
	ds->src[0].fd = ds->src[1].fd = -1;
	if (!path)
		return rf__ds_fail(-EINVAL, path, "no path given");
	if ((ret = rf__tar_index_load_or_build(&t, path)) < 0)
		return ret;
	ret = rf__wds_samples(&t, rf__tar_read_at, &t, &sm, &n, &noimg);
	if (!ret && !n)
		ret = rf__ds_fail(-EINVAL, path, "no sample with a .jpg, .jpeg or .png member "
				  "(%zu members, %zu samples without an image): expected a "
				  "WebDataset shard of images", t.n, noimg);
	if (ret)
		goto out;
	ds->kind = RF_DS_TAR;
	ds->src[0].fd = t.fd;          /* the tar, kept open: the dataset's now */
	t.has_fd = 0;
	t.fd = -1;
	ds->src[0].size = t.size;
	ds->src[0].data_offset = 0;
	ds->src[0].data_bytes = t.size;
	ds->src[0].stride = 0;
	if (!(ds->src[0].path = strdup(path))) {
		ret = rf__ds_fail(-ENOMEM, path, "out of memory");
		goto out;
	}
	ds->nsrc = 1;
	if ((ret = wds_fill(ds, sm, n, path, num_classes)) == 0 && (flags & RF_DS_VERIFY))
		ret = rf_dataset_verify(ds);
out:
	free(sm);
	rf__tar_close(&t);
	if (ret)
		rf_dataset_close(ds);
	return ret;
}
