/* loader.c -- batches as engine variables (loader.h): create, destroy and next string
 * the steps together. Per batch: plan (loader-plan.c), read (loader-read.c), gather
 * (loader-gather.c), decode (loader-decode.c), into a slot (loader-slot.c).
 *
 * Three ways records reach a batch (l->mode):
 *   MEM   the payload source is in memory: the gather op reads it directly.
 *   SPAN  small records on disk: "groups" of W chunks (aligned spans of R records)
 *         are read into one of F fetch units; batches gather from 1..F-1 units.
 *   REC   large records on disk: the fetch of batch t reads each record's aligned
 *         span into unit t mod N.
 * A fetch unit is a buffer with an engine variable. Its read is an asynchronous op
 * that mutates the variable; gathers read it. So the engine recycles buffers: a
 * fetch waits for the gathers of the unit's previous contents. Slots (staging u8,
 * labels, device tensors) are recycled the same way through the tensors' variables. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loader-impl.h"

/* ---- create ---- */

/* The loader's image options as the image module takes them. */
static void rf__img_opts_of(const struct rf_loader_opts *o, struct rf__img_opts *io)
{
	*io = (struct rf__img_opts){ .size = o->image_size, .train = !o->image_eval,
				     .hflip = o->hflip && !o->image_eval,
				     .no_dct_scale = o->image_exact, .seed = o->seed,
				     .scale_min = o->image_scale_min ? o->image_scale_min : 0.08f,
				     .scale_max = 1.0f, .resize_ratio = o->image_eval_ratio };
}

/* An image dataset's options: the images, their size and crops (the image module's
 * rules), no other augmentation. */
static int rf__check_image_args(const struct rf_dataset *ds, const struct rf_loader_opts *o)
{
	const char *path = ds->src[0].path;
	struct rf__img_opts io;
	char err[160];

	if (!rf_dataset_variable(ds))
		return rf__fail(-EINVAL, "%s: image_size %u: the records are not encoded images "
				"(a fixed-size dataset of %" PRIu64 "-byte records is served as it "
				"is; expected image_size 0)", path, o->image_size, ds->payload_bytes);
	if (ds->encoding != RF_REC_ENC_IMAGE)
		return rf__fail(-ENOTSUP, "%s: records of any length that are not images "
				"(encoding %u): the loader serves only encoded images (JPEG, PNG) "
				"from such a file", path, ds->encoding);
	if (o->image_size < 1)
		return rf__fail(-EINVAL, "%s: image_size 0: the records are encoded images; "
				"expected the size to decode them to, 1 to %u", path,
				RF__IMG_MAX_SIZE);
	rf__img_opts_of(o, &io);
	if (rf__img_opts_check(&io, err, sizeof(err)) < 0)
		return rf__fail(-EINVAL, "%s: %s", path, err);
	if (o->crop_pad)
		return rf__fail(-EINVAL, "%s: crop_pad %u: images are cropped by "
				"RandomResizedCrop (image_size); expected crop_pad 0", path,
				o->crop_pad);
	return 0;
}

/* Records of (C, H, W) (image records: 3 x size x size), (H, W) (C = 1), anything
 * else none (0): the channels a mean and std per channel apply to. */
static unsigned rf__channels(const struct rf_dataset *ds, const struct rf_loader_opts *o,
			     uint64_t *plane)
{
	if (o->image_size) {
		*plane = (uint64_t)o->image_size * o->image_size;
		return 3;
	}
	if (ds->ndim == 3 || ds->ndim == 2) {
		*plane = (uint64_t)ds->shape[ds->ndim - 2] * ds->shape[ds->ndim - 1];
		return ds->ndim == 3 ? ds->shape[0] : 1;
	}
	return 0;
}

_Static_assert(RF_LOADER_NORM_MAX_CH == RF_U8_NORM_MAX_CH &&
	       RF_U8_NORM_MAX_CH == RF__U8NORM_MAX_CH, "one channel limit");

/* norm_channels and its means and stds against the records. */
static int rf__check_norm(const struct rf_dataset *ds, const struct rf_loader_opts *o)
{
	const char *path = ds->src[0].path;
	uint64_t plane = 0;
	unsigned C = rf__channels(ds, o, &plane);

	if (!o->norm_channels)
		return 0;
	if (o->norm_channels > RF_U8_NORM_MAX_CH)
		return rf__fail(-EINVAL, "loader: norm_channels %u: expected 0 (one mean and std) "
				"to %d", o->norm_channels, RF_LOADER_NORM_MAX_CH);
	if (C != o->norm_channels)
		return rf__fail(-EINVAL, "%s: norm_channels %u: the records are %s%u channel%s",
				path, o->norm_channels, C ? "" : "not images of (C, H, W) or (H, W): ",
				C, C == 1 ? "" : "s");
	if (o->x_dtype == RF_U8)
		return rf__fail(-EINVAL, "loader: norm_channels %u with x_dtype RF_U8: u8 batches "
				"are the bytes as they are; normalize on the model's side or ask "
				"for a float x_dtype", o->norm_channels);
	if (o->mean != 0.0f || (o->std != 0.0f && o->std != 1.0f))
		return rf__fail(-EINVAL, "loader: mean %g and std %g beside norm_channels %u: "
				"expected one or the other (mean 0, std 0)", (double)o->mean,
				(double)o->std, o->norm_channels);
	for (unsigned c = 0; c < C; c++)
		if (!isfinite(o->channel_mean[c]) || !isfinite(o->channel_std[c]) ||
		    o->channel_std[c] == 0.0f)
			return rf__fail(-EINVAL, "loader: channel %u: mean %g, std %g: expected "
					"finite numbers and a nonzero std", c,
					(double)o->channel_mean[c], (double)o->channel_std[c]);
	return 0;
}

/* What can be refused before anything is allocated. */
static int rf__check_args(struct rf_engine *e, const struct rf_dataset *ds,
			  const struct rf_loader_opts *opts)
{
	if (!e || !ds || !opts || !ds->count || ds->kind == RF_DS_NONE)
		return rf__fail(-EINVAL, "loader: missing engine, dataset or options");
	if (!opts->batch || !opts->devices || !opts->ndevices ||
	    opts->ndevices > RF_LOADER_MAX_SHARDS)
		return rf__fail(-EINVAL, "loader: need batch >= 1 and 1..%d devices (got batch %u, "
				"%u devices%s)", RF_LOADER_MAX_SHARDS, opts->batch, opts->ndevices,
				opts->devices ? "" : ", devices NULL");
	/* x = (u8 * scale - mean) / std: every batch NaN or infinite otherwise */
	if (!isfinite(opts->scale) || !isfinite(opts->mean) || !isfinite(opts->std))
		return rf__fail(-EINVAL, "loader: scale %g, mean %g, std %g: expected finite "
				"numbers (0: the defaults, 1/255 and 1)", (double)opts->scale,
				(double)opts->mean, (double)opts->std);
	if (opts->shard_total && (opts->shard_base + (uint64_t)opts->ndevices > opts->shard_total))
		return rf__fail(-EINVAL, "loader: shards %u..%u of %u: expected shard_base + "
				"ndevices <= shard_total", opts->shard_base,
				opts->shard_base + opts->ndevices - 1, opts->shard_total);
	if (opts->tail_slots > 64)
		return rf__fail(-EINVAL, "loader: tail_slots %u: expected 0 to 64", opts->tail_slots);
	if (opts->http_timeout_ms > 3600000)
		return rf__fail(-EINVAL, "loader: http_timeout_ms %u: expected 1 to 3600000 (0: the "
				"default)", opts->http_timeout_ms);
	if (opts->order != RF_LOADER_ORDER_UNIFORM && opts->order != RF_LOADER_ORDER_WINDOWED)
		return rf__fail(-EINVAL, "loader: order %d: expected RF_LOADER_ORDER_UNIFORM (0) or "
				"RF_LOADER_ORDER_WINDOWED (1)", opts->order);
	if (ds->dtype != RF_DS_DT_U8)
		return rf__fail(-ENOTSUP, "%s: payload dtype %s: the loader decodes u8 only",
				ds->src[0].path, rf_ds_dtype_name(ds->dtype));
	if (opts->workers > RF__MAXGS)
		return rf__fail(-EINVAL, "loader: workers %u: expected 0 (one per CPU) to %d",
				opts->workers, RF__MAXGS);
	if (rf_dataset_variable(ds) || opts->image_size) {
		int ret = rf__check_image_args(ds, opts);
		if (ret < 0)
			return ret;
	} else if ((opts->crop_pad || opts->hflip) &&
		   (ds->ndim < 2 || ds->ndim > 3 || opts->crop_pad > 64))
		return rf__fail(-EINVAL, "%s: augmentation (crop padding %u%s) needs images of "
				"(H, W) or (C, H, W) and a padding of at most 64; records are of %u "
				"dims", ds->src[0].path, opts->crop_pad, opts->hflip ? ", flip" : "",
				ds->ndim);
	if (opts->x_dtype && opts->x_dtype != RF_F32 && opts->x_dtype != RF_BF16 &&
	    opts->x_dtype != RF_F16 && opts->x_dtype != RF_U8)
		return rf__fail(-EINVAL, "loader: x_dtype %d: expected RF_F32, RF_BF16, RF_F16 or "
				"RF_U8", (int)opts->x_dtype);
	if (opts->x_layout != RF_LAYOUT_ROWMAJOR && opts->x_layout != RF_LAYOUT_NHWC)
		return rf__fail(-EINVAL, "loader: x_layout %d: expected RF_LAYOUT_ROWMAJOR or "
				"RF_LAYOUT_NHWC", (int)opts->x_layout);
	if (opts->x_layout == RF_LAYOUT_NHWC && !opts->image_size && ds->ndim != 2 && ds->ndim != 3)
		return rf__fail(-EINVAL, "%s: x_layout NHWC needs images of (H, W) or (C, H, W); "
				"records are of %u dims", ds->src[0].path, ds->ndim);
	if (ds->ndim + 1 > RF_TENSOR_MAX_DIMS)
		return rf__fail(-ENOTSUP, "%s: records of %u dims: a batch tensor holds at most %d",
				ds->src[0].path, ds->ndim, RF_TENSOR_MAX_DIMS - 1);
	return rf__check_norm(ds, opts);
}

/* Options with their defaults filled in, and the epoch's batch counts. */
static void rf__init(struct rf_loader *l, struct rf_engine *e, const struct rf_dataset *ds,
		     const struct rf_loader_opts *opts)
{
	l->e = e;
	l->ring = rf_engine_ring(e);
	l->ds = ds;
	l->o = *opts;
	l->fd = -1;
	l->K = opts->ndevices;
	l->T = opts->shard_total ? opts->shard_total : opts->ndevices;
	l->base = opts->shard_total ? opts->shard_base : 0;
	l->N = opts->prefetch ? opts->prefetch : 4;
	if (!l->o.x_dtype)
		l->o.x_dtype = RF_F32;
	if (!l->o.scale)
		l->o.scale = 1.0f / 255.0f;
	if (!l->o.std)
		l->o.std = 1.0f;
	if (!l->o.chunk_bytes)
		l->o.chunk_bytes = 512 << 10;
	if (!l->o.window_chunks)
		l->o.window_chunks = 8;
	if (!l->o.read_bytes)
		l->o.read_bytes = 8 << 20;
	l->rq_max = l->o.read_bytes;
	l->st.read_limit = l->o.read_bytes;
	if (!l->o.large_record)
		l->o.large_record = 64 << 10;
	l->pb = ds->payload_bytes;
	l->ndim = ds->ndim;
	memcpy(l->shape, ds->shape, sizeof(l->shape));
	l->ngs = 1;
	if (opts->image_size) {
		int cpus = rf__cpus();  /* those it may run on (affinity, cpuset) */
		l->image = 1;
		l->ndim = 3;
		l->shape[0] = 3;
		l->shape[1] = l->shape[2] = opts->image_size;
		l->shape[3] = 0;
		l->pb = 3 * (size_t)opts->image_size * opts->image_size;
		l->ngs = opts->workers ? opts->workers : cpus > RF__MAXGS ? RF__MAXGS : (unsigned)cpus;
		rf__img_opts_of(opts, &l->io);
	}
	l->norm = rf__u8norm_one(l->o.scale, l->o.mean, l->o.std);
	if (opts->norm_channels) {
		l->norm.nch = rf__channels(ds, opts, &l->norm.plane);
		memcpy(l->norm.mean, opts->channel_mean, sizeof(l->norm.mean));
		memcpy(l->norm.std, opts->channel_std, sizeof(l->norm.std));
	}
	l->count = ds->count;
	l->labels = ds->label_kind != RF_LABEL_NONE;
	l->nfull = l->count / opts->batch;
	l->nbatches = l->nfull + (!opts->drop_last && l->count % opts->batch ? 1 : 0);
}

/* At least one batch; devices of this engine, all in host memory or none; a host
 * device for the staging. */
static int rf__check_devices(struct rf_loader *l)
{
	const struct rf_loader_opts *opts = &l->o;
	unsigned i;

	if (!l->nbatches)
		return rf__fail(-EINVAL, "%s: %" PRIu64 " records make no whole batch of %u "
				"(drop_last)", l->ds->src[0].path, l->count, opts->batch);
	for (i = 0; i < l->K; i++) {
		if (rf_device_engine(opts->devices[i]) != l->e)
			return rf__fail(-EINVAL, "loader: device %u belongs to another engine", i);
		if (!rf_device_host_memory(opts->devices[i]))
			l->remote = 1;
	}
	if (l->remote && l->K > 1) {
		unsigned r = 0;           /* the first device of memory of its own */
		while (rf_device_host_memory(opts->devices[r]))
			r++;
		for (i = 0; i < l->K; i++)
			if (rf_device_host_memory(opts->devices[i]))
				return rf__fail(-EINVAL, "loader: devices must all have host memory "
						"(cpu) or none (%s is a host device, %s is not)",
						rf_device_name(opts->devices[i]),
						rf_device_name(opts->devices[r]));
	}
	l->host = opts->host ? opts->host : opts->devices[0];
	if (!rf_device_host_memory(l->host))
		return rf__fail(-EINVAL, "loader: the host staging tensors need a host device "
				"(cpu) as opts.host%s%s, as the targets' memory is their own",
				opts->host ? ", not " : "", opts->host ? rf_device_name(opts->host) : "");
	return 0;
}

/* The gather streams (with their image decoders and scratch), the order arrays, the
 * stats that do not change. */
static int rf__finish_create(struct rf_loader *l)
{
	for (unsigned k = 0; k < l->ngs; k++) {
		char name[24];
		int ret;
		snprintf(name, sizeof(name), k ? "loader%u" : "loader", k);
		if ((ret = rf_worker_stream_create(l->e, name, 0, &l->gs[k])) < 0)
			return rf__fail_under(ret, "loader: cannot start gather stream %u", k);
		if (l->image && rf__imgctx_create(&l->img[k]) < 0)
			return rf__fail(-ENOMEM, "loader: no memory for gather stream %u's JPEG "
					"decoder", k);
		if ((rf__fused(l) || rf__hwc(l)) && (l->image || l->o.crop_pad || l->o.hflip) &&
		    !(l->gscratch[k] = malloc(l->pb)))
			return rf__fail(-ENOMEM, "loader: no memory for gather stream %u's scratch "
					"record (%zu bytes)", k, (size_t)l->pb);
	}
	/* order[] holds the records' order; SPAN appends the inverse chunk order. Large
	 * (8 bytes a record): huge pages where the kernel gives them, else it faults a
	 * page per 512 records the first epoch. */
	l->order = rf__alloc_big((l->count + l->C) * sizeof(*l->order));
	if (l->mode == RF__SPAN)
		l->cpos = rf__alloc_big(l->C * sizeof(*l->cpos));
	rf__slab_init(&l->gjobs, rf__gjob_bytes(l->o.batch), 1);
	rf__slab_init(&l->fetches, rf__fetch_bytes(l->o.batch > l->W ? l->o.batch : (unsigned)l->W),
		      1);
	if (!l->order || (l->mode == RF__SPAN && !l->cpos))
		return rf__fail(-ENOMEM, "loader: no memory for the order of %llu records "
				"(%zu bytes)", (unsigned long long)l->count,
				(size_t)((l->count + l->C) * sizeof(*l->order)));
	if (l->o.skip_bad_images && l->image) {
		size_t nb = l->nbatches ? (size_t)l->nbatches : 1;  /* per epoch parity */
		l->skipn[0] = calloc(2 * nb, sizeof(uint32_t));
		l->skipw = calloc(RF__SKIPLOG, sizeof(*l->skipw));
		if (!l->skipn[0] || !l->skipw)
			return rf__fail(-ENOMEM, "loader: no memory for the skipped images' "
					"counts");
		l->skipn[1] = l->skipn[0] + nb;
		l->skip_epoch[0] = l->skip_epoch[1] = UINT64_MAX;
	}
	l->st.direct = l->direct;
	l->st.registered = l->registered;
	l->st.mode = l->mode;
	l->st.chunk_records = l->R;
	l->st.window_chunks = (unsigned)l->W;
	l->st.fetch_units = l->nunits;
	return 0;
}

int rf_loader_create(struct rf_loader **out, struct rf_engine *e, const struct rf_dataset *ds,
		     const struct rf_loader_opts *opts)
{
	struct rf_loader *l;
	int ret = out ? rf__check_args(e, ds, opts)
		      : rf__fail(-EINVAL, "loader: missing engine, dataset or options");

	if (ret < 0)
		return ret;
	l = calloc(1, sizeof(*l));
	if (!l)
		return rf__fail(-ENOMEM, "loader: no memory for the loader (%zu bytes)",
				sizeof(*l));
	rf__init(l, e, ds, opts);
	ret = rf__check_devices(l);
	if (ret < 0) {
		free(l);
		return ret;
	}
	ret = rf__open_sources(l);
	if (!ret)
		ret = rf__units_create(l);
	if (!ret)
		ret = rf__slots_create(l);
	if (!ret)
		ret = rf__finish_create(l);
	if (ret < 0) {
		rf_loader_destroy(l);
		return ret;
	}
	*out = l;
	return 0;
}

void rf_loader_cancel(struct rf_loader *l)
{
	if (!l)
		return;
	l->closing = 1;
	rf__http_cancel(l->http);
}

void rf_loader_destroy(struct rf_loader *l)
{
	unsigned i;

	if (!l)
		return;
	/* from another thread or inside an op or callback, its reads and ops would run on
	 * after the free: refused, the loader left (said in the log) */
	if (rf_engine_may_wait(l->e, "rf_loader_destroy") < 0) {
		rf__log(RF_LOG_ERROR, "%s; the loader is left, not freed", rf_last_error());
		return;
	}
	/* What is still to be read will not be: an HTTP request stalled on a server that
	 * never answers ends now, not at its timeout (one after another), and the fetches
	 * it fails are no error of the user's (rf__fetch_fail) */
	l->closing = 1;
	rf__http_cancel(l->http);
	if (rf_engine_wait_idle(l->e) < 0) {  /* the ring failed: ops may be left in flight */
		rf__log(RF_LOG_ERROR, "rf_loader_destroy: the wait for its reads and ops failed "
			"(%s); the loader is left, not freed under them", rf_last_error());
		return;
	}
	rf__slots_free(l);
	for (i = 0; l->units && i < l->nunits; i++)
		if (l->units[i].var)
			rf_var_destroy(l->e, l->units[i].var, NULL, NULL, NULL);
	rf_engine_wait_idle(l->e);
	for (i = 0; i < l->ngs; i++) {
		if (l->gs[i])
			rf_stream_destroy(l->gs[i]);
		rf__imgctx_destroy(l->img[i]);
		free(l->gscratch[i]);
	}
	/* Every read is done: the ring lets go of the arena before it is unmapped. */
	if (l->registered)
		rf_ring_unregister_memory(l->ring, rf_pinned_base(l->uarena));
	rf_pinned_destroy(l->sarena);
	rf_pinned_destroy(l->uarena);
	rf__close_sources(l);
	rf__http_destroy(l->http);
	free(l->pmem_own);
	free(l->lmem_own);
	free(l->units);
	free(l->ferr);
	free(l->slots);
	free(l->order);
	free(l->cpos);
	rf__slab_release(&l->gjobs);
	rf__slab_release(&l->fetches);
	free(l->refs);
	free(l->skipn[0]);
	free(l->skipw);
	free(l);
}


/* ---- next ---- */

/* The slot of batch t: full batches take the full slots in turn, the tail its own;
 * a slot with references (rf_loader_ref) is passed over. -1: every candidate has some.
 * The count is read with acquire order: it pairs with rf_loader_unref's release, so
 * whatever another thread did with the slot's batch before its last unref happens
 * before the ops the caller then pushes to overwrite the slot. */
static int rf__slot_of(const struct rf_loader *l, uint64_t t)
{
	unsigned base = t < l->nfull ? 0 : l->nfslots, n = t < l->nfull ? l->N : l->ntail;
	unsigned cur = t < l->nfull ? l->fcur : l->tcur;

	for (unsigned j = 0; j < n; j++) {
		unsigned s = base + (cur + j) % n;
		if (!atomic_load_explicit(&l->refs[s], memory_order_acquire))
			return (int)s;
	}
	return -1;
}

static void rf__fill_batch(struct rf_loader *l, struct rf_batch *b, unsigned si, unsigned n,
			   unsigned global_n)
{
	struct rf__slot *s = &l->slots[si];

	memset(b, 0, sizeof(*b));
	b->epoch = l->epoch;
	b->index = l->t;
	b->n = n;
	b->global_n = global_n;
	b->nshards = l->K;
	b->slot = si;
	for (unsigned k = 0; k < l->K; k++) {
		b->shard_n[k] = s->sn[k];
		b->x[k] = s->x[k];
		b->y[k] = s->y[k];
	}
}

/* Count the pushed batch. */
static void rf__advance(struct rf_loader *l, unsigned n)
{
	l->t++;
	l->nbatch_done++;
	l->st.batches++;
	l->st.records += n;
}

int rf_loader_next(struct rf_loader *l, struct rf_batch *b)
{
	uint64_t t, p0;
	unsigned n, si, lo, hi;
	struct rf__slot *s;
	struct rf__gjob *j;
	int ret, slot;

	if (!l || !b)
		return rf__fail(-EINVAL, "rf_loader_next: %s is NULL", !l ? "l" : "b");
	t = l->t;
	if (t == l->nbatches) {
		rf__next_epoch(l, l->epoch + 1);
		return 0;
	}
	if (!l->planned && (ret = rf__start_epoch(l)) < 0)
		return ret;
	p0 = t * l->o.batch;
	n = t < l->nfull ? l->o.batch : (unsigned)(l->count - p0);
	rf__local_rows(l, n, &lo, &hi);
	if ((slot = rf__slot_of(l, t)) < 0)
		return rf__fail(-EBUSY, "loader: every batch slot that batch %" PRIu64 " could take "
				"is referenced (rf_loader_ref); expected one let go "
				"(rf_loader_unref) first", t);
	si = (unsigned)slot;
	s = &l->slots[si];
	if (t < l->nfull)      /* the rotation goes on after it */
		l->fcur = (si + 1) % l->N;
	else
		l->tcur = (si - l->nfslots + 1) % l->ntail;
	j = rf__gjob_new(l, s, hi - lo);
	if (!j)
		return rf__fail(-ENOMEM, "loader: no memory for batch %" PRIu64 "'s gather job", t);
	ret = hi > lo ? rf__read_batch(l, p0 + lo, j) : 0;
	/* the slot's poison from an earlier failure goes before its reuse */
	if (!ret)
		ret = rf__clear_slot(l, s);
	if (ret < 0) {
		rf__slab_put(&l->gjobs, j);
		return ret;
	}
	ret = rf__push_gather(l, j);
	if (!ret)
		ret = rf__push_decode(l, s);
	if (ret < 0)
		return ret;
	rf__fill_batch(l, b, si, hi - lo, n);
	rf__advance(l, hi - lo);
	return 1;
}

unsigned rf_loader_slots(const struct rf_loader *l)
{
	return l->nfslots + l->ntail;
}

int rf_loader_next_slot(const struct rf_loader *l)
{
	return rf__slot_of(l, l->t == l->nbatches ? 0 : l->t);
}

/* slot names one of l's slots; else the refusal, naming the caller. */
static int rf__check_slot(const struct rf_loader *l, unsigned slot, const char *fn)
{
	if (!l)
		return rf__fail(-EINVAL, "%s: slot %u: no loader (NULL)", fn, slot);
	if (slot >= l->nslots)
		return rf__fail(-EINVAL, "%s: slot %u: expected 0..%u (rf_loader_slots() - 1)",
				fn, slot, l->nslots - 1);
	return 0;
}

/* Both counts change by compare-and-swap, so neither wraps: at UINT_MAX a ref is
 * refused, at 0 an unref. A ref needs no order (the slot is the owner's to choose,
 * or already has a reference); an unref releases what its thread did with the batch. */
int rf_loader_ref(struct rf_loader *l, unsigned slot)
{
	int ret = rf__check_slot(l, slot, "rf_loader_ref");
	unsigned c;

	if (ret < 0)
		return ret;
	c = atomic_load_explicit(&l->refs[slot], memory_order_relaxed);
	do {
		if (c == UINT_MAX)
			return rf__fail(-EOVERFLOW, "rf_loader_ref: slot %u: %u references "
					"already, the most a count holds", slot, c);
	} while (!atomic_compare_exchange_weak_explicit(&l->refs[slot], &c, c + 1,
							memory_order_relaxed,
							memory_order_relaxed));
	return 0;
}

int rf_loader_unref(struct rf_loader *l, unsigned slot)
{
	int ret = rf__check_slot(l, slot, "rf_loader_unref");
	unsigned c;

	if (ret < 0)
		return ret;
	c = atomic_load_explicit(&l->refs[slot], memory_order_relaxed);
	do {
		if (!c)
			return rf__fail(-EINVAL, "rf_loader_unref: slot %u: no references to let "
					"go (expected one rf_loader_ref took)", slot);
	} while (!atomic_compare_exchange_weak_explicit(&l->refs[slot], &c, c - 1,
							memory_order_release,
							memory_order_relaxed));
	return 0;
}

unsigned rf_loader_refs(const struct rf_loader *l, unsigned slot)
{
	if (!l || slot >= l->nslots)
		return 0;
	return atomic_load_explicit(&l->refs[slot], memory_order_acquire);
}

/* ---- waiting and errors ---- */

int rf_loader_wait(struct rf_loader *l, const struct rf_batch *b)
{
	int ret = 0, r;
	unsigned k;

	if (!l || !b)
		return rf__fail(-EINVAL, "rf_loader_wait: %s is NULL", !l ? "l" : "b");
	for (k = 0; k < b->nshards; k++) {
		r = rf_engine_wait_var(l->e, b->x[k]->var);
		if (r == -EINTR)
			return r;  /* the engine's interrupt: no further wait */
		if (r < 0 && !ret)
			ret = r;
		if (b->y[k]) {
			r = rf_engine_wait_var(l->e, b->y[k]->var);
			if (r == -EINTR)
				return r;
			if (r < 0 && !ret)
				ret = r;
		}
	}
	if (l->skipw)   /* its bad images are the consumer's now: said */
		rf__skip_report(l, b->epoch, b->index, b->index + 1);
	return ret;
}

uint64_t rf_loader_images_skipped(struct rf_loader *l, uint64_t epoch, uint64_t first,
				  uint64_t end)
{
	return l && l->skipw ? rf__skip_report(l, epoch, first, end) : 0;
}

const char *rf_loader_batch_error(const struct rf_loader *l, const struct rf_batch *b)
{
	unsigned i;

	if (!l || !b)
		return "";
	for (i = 0; i < RF__ERRLOG; i++)
		if (l->log[i].used && l->log[i].epoch == b->epoch && l->log[i].index == b->index)
			return l->log[i].msg;
	return "";
}

const char *rf_loader_last_error(const struct rf_loader *l)
{
	return l ? l->last_err : "";
}

void rf_loader_get_stats(const struct rf_loader *l, struct rf_loader_stats *st)
{
	*st = l->st;
}
