/* loader-slot.c -- batch slots: per slot, host staging (u8 and i32 labels, in one
 * pinned arena), the device tensors a batch is served in and its reference count
 * (rf_loader_ref), allocated and touched at create; their poison is cleared before a
 * slot is reused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader-impl.h"

/* Shard i's tensors of slot s (slot number si, rows [a, a + shape[0])). */
static int rf__make_shard(struct rf_loader *l, struct rf__slot *s, unsigned si, unsigned i,
			  unsigned a, int nd, const int64_t *shape)
{
	struct rf_device *d = l->o.devices[i];
	struct rf_device *hd = l->remote ? l->host : d;
	char name[40];

	int64_t sh4[4] = { shape[0], nd == 3 ? 1 : shape[1], shape[nd - 2], shape[nd - 1] };

	if (rf__hwc(l)) {    /* u8 NHWC: (n, c, h, w) interleaved; (n, h, w) gets c = 1 */
		nd = 4;
		shape = sh4;
	}
	if (!rf__fused(l)) { /* fused: the gather writes x itself, no u8 staging */
		snprintf(name, sizeof(name), "loader.u8[%u].%u", si, i);
		rf_tensor_wrap(hd, s->stage + (size_t)a * l->pb, RF_U8, name, nd, shape, &s->su[i]);
		if (!s->su[i])
			return -ENOMEM;
		if (rf__hwc(l) && rf_tensor_set_layout(s->su[i], RF_LAYOUT_NHWC) < 0)
			return -EINVAL;
	}
	snprintf(name, sizeof(name), "loader.x[%u].%u", si, i);
	if (l->o.x_dtype == RF_U8 && !l->remote) {
		s->x[i] = s->su[i];          /* the records' bytes as they are: the staging */
	} else if (l->o.x_dtype == RF_U8) {
		/* the u8 copy on the device (ud, below) */
	} else if (l->o.x_layout == RF_LAYOUT_NHWC && nd == 3) {   /* (n, h, w) -> (n, 1, h, w) */
		rf_tensor_create_layout(d, l->o.x_dtype, RF_LAYOUT_NHWC, name, 4, sh4, &s->x[i]);
	} else {
		rf_tensor_create_layout(d, l->o.x_dtype, l->o.x_layout, name, nd, shape, &s->x[i]);
	}
	if (!s->x[i] && l->o.x_dtype != RF_U8)
		return -ENOMEM;
	if (l->remote) {
		snprintf(name, sizeof(name), "loader.u8d[%u].%u", si, i);
		rf_tensor_create_layout(d, RF_U8, rf__hwc(l) ? RF_LAYOUT_NHWC : RF_LAYOUT_ROWMAJOR,
					name, nd, shape, &s->ud[i]);
		if (!s->ud[i])
			return -ENOMEM;
		if (l->o.x_dtype == RF_U8)
			s->x[i] = s->ud[i];
	}
	if (!l->labels)
		return 0;
	snprintf(name, sizeof(name), "loader.yh[%u].%u", si, i);
	rf_tensor_wrap(hd, s->lab + a, RF_I32, name, 1, shape, &s->yh[i]);
	if (!s->yh[i])
		return -ENOMEM;
	if (!l->remote) {
		s->y[i] = s->yh[i];
		return 0;
	}
	snprintf(name, sizeof(name), "loader.y[%u].%u", si, i);
	rf_tensor_create(d, RF_I32, name, 1, shape, &s->y[i]);
	return s->y[i] ? 0 : -ENOMEM;
}

/* Slot si for batches of cap records, its staging at mem. Shard i of the batch's T
 * takes rows [cap*i/T, cap*(i+1)/T); the slot holds ours (rf__local_rows), from 0. */
static int rf__make_slot(struct rf_loader *l, struct rf__slot *s, unsigned cap, uint8_t *mem,
			 unsigned si)
{
	unsigned i, k, lo, hi;
	int ret;

	rf__local_rows(l, cap, &lo, &hi);
	s->cap = hi - lo;
	s->stage = mem;
	s->lab = (int32_t *)(mem + (rf__fused(l) ? 0 : rf__align_up((size_t)s->cap * l->pb, 64)));
	for (i = 0; i < l->K; i++) {
		int64_t shape[RF_TENSOR_MAX_DIMS] = { 0 };
		int nd = 1 + (int)l->ndim;
		unsigned a = (unsigned)((uint64_t)cap * (l->base + i) / l->T) - lo;
		unsigned b = (unsigned)((uint64_t)cap * (l->base + i + 1) / l->T) - lo;

		if (nd > RF_TENSOR_MAX_DIMS)
			return -ENOTSUP;
		s->soff[i] = a;
		s->sn[i] = b - a;
		shape[0] = b - a;
		for (k = 0; k < l->ndim; k++)
			shape[1 + k] = l->shape[k];
		ret = rf__make_shard(l, s, si, i, a, nd, shape);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Bytes of a slot's staging for batches of cap records (our rows of them): u8
 * records (not when fused), then i32 labels. */
static size_t rf__slot_bytes(const struct rf_loader *l, unsigned cap)
{
	unsigned lo, hi;

	rf__local_rows(l, cap, &lo, &hi);
	cap = hi - lo;
	return rf__align_up((rf__fused(l) ? 0 : rf__align_up((size_t)cap * l->pb, 64)) + (size_t)cap * 4,
			 4096);
}

/* Slots: N full ones, plus tail slots for the last partial batch. The tail batch
 * comes once every nbatches batches, so ceil(N / nbatches) tail slots keep each
 * one intact for the N - 1 batches that follow it (with nbatches >= N: one), or
 * opts.tail_slots where more are asked (a consumer that holds tails across epochs). */
static int rf__slots_alloc(struct rf_loader *l)
{
	unsigned tail = !l->o.drop_last ? (unsigned)(l->count % l->o.batch) : 0;
	size_t full = rf__slot_bytes(l, l->o.batch);
	size_t tsz = tail ? rf__slot_bytes(l, tail) : 0;
	uint8_t *base;
	unsigned i;
	int ret;

	l->nfslots = l->nfull ? l->N : 0;
	l->ntail = tail ? (unsigned)((l->N + l->nbatches - 1) / l->nbatches) : 0;
	if (tail && l->o.tail_slots > l->ntail)
		l->ntail = l->o.tail_slots;
	l->nslots = l->nfslots + l->ntail;
	l->slots = calloc(l->nslots, sizeof(*l->slots));
	l->refs = malloc(l->nslots * sizeof(*l->refs));
	if (!l->slots || !l->refs)
		return rf__fail(-ENOMEM, "loader: no memory for the table of %u batch slots",
				l->nslots);
	for (i = 0; i < l->nslots; i++)
		atomic_init(&l->refs[i], 0);
	/* a loader whose shards get no rows of any batch (more shards than records in a
	 * batch) still maps a page: its slots are empty */
	size_t total = full * l->nfslots + tsz * l->ntail;
	ret = rf_pinned_create(total ? total : 4096, &l->sarena);
	if (ret < 0)
		return rf__fail(ret, "loader: cannot map %zu bytes of staging buffers: %s",
				full * l->nfslots + tsz * l->ntail, strerror(-ret));
	l->st.buffer_bytes += rf_pinned_size(l->sarena);
	base = rf_pinned_base(l->sarena);
	for (i = 0; i < l->nslots; i++) {
		int is_tail = i >= l->nfslots;
		size_t at = is_tail ? full * l->nfslots + tsz * (i - l->nfslots) : full * i;
		ret = rf__make_slot(l, &l->slots[i], is_tail ? tail : l->o.batch, base + at, i);
		if (ret < 0)
			return rf__fail(ret, "loader: cannot allocate the batch tensors");
	}
	return 0;
}

/* Touch the device tensors now (first-touch page faults, a device's lazy mapping), so an
 * epoch's time is the loader's steady state. */
static int rf__slots_touch(struct rf_loader *l)
{
	unsigned i, k;
	int ret;

	for (i = 0; i < l->nslots; i++)
		for (k = 0; k < l->K; k++) {
			struct rf__slot *s = &l->slots[i];
			int own = s->x[k] != s->su[k] && s->x[k] != s->ud[k];
			if ((own && rf_fill(NULL, s->x[k], 0.0f) < 0) ||
			    (s->ud[k] && rf_fill(NULL, s->ud[k], 0.0f) < 0) ||
			    (s->y[k] && s->y[k] != s->yh[k] && rf_fill(NULL, s->y[k], 0.0f) < 0))
				return rf__fail(-ENOMEM, "loader: cannot initialise the batch tensors");
		}
	for (i = 0; i < l->nslots; i++)
		for (k = 0; k < l->K; k++) {
			struct rf__slot *s = &l->slots[i];
			ret = rf_tensor_wait(s->x[k]);
			if (!ret && s->ud[k])
				ret = rf_tensor_wait(s->ud[k]);
			if (!ret && s->y[k] && s->y[k] != s->yh[k])
				ret = rf_tensor_wait(s->y[k]);
			if (ret < 0)
				return rf__fail(ret, "loader: initialising the batch tensors failed: %s",
						strerror(-ret));
		}
	return 0;
}

int rf__slots_create(struct rf_loader *l)
{
	int ret = rf__slots_alloc(l);

	return ret < 0 ? ret : rf__slots_touch(l);
}

void rf__slots_free(struct rf_loader *l)
{
	unsigned i, k;

	for (i = 0; l->slots && i < l->nslots; i++) {
		struct rf__slot *s = &l->slots[i];
		for (k = 0; k < l->K; k++) {
			if (s->y[k] != s->yh[k])
				rf_tensor_destroy(s->y[k]);
			rf_tensor_destroy(s->yh[k]);
			if (s->x[k] != s->su[k] && s->x[k] != s->ud[k])
				rf_tensor_destroy(s->x[k]);
			rf_tensor_destroy(s->su[k]);
			rf_tensor_destroy(s->ud[k]);
		}
	}
}

int rf__clear_slot(struct rf_loader *l, struct rf__slot *s)
{
	unsigned k;
	int ret = 0;

	for (k = 0; k < l->K && !ret; k++) {
		ret = s->su[k] ? rf_var_clear_error(l->e, s->su[k]->var) : 0;
		if (!ret)
			ret = rf_var_clear_error(l->e, s->x[k]->var);
		if (!ret && s->ud[k])
			ret = rf_var_clear_error(l->e, s->ud[k]->var);
		if (!ret && s->yh[k])
			ret = rf_var_clear_error(l->e, s->yh[k]->var);
		if (!ret && s->y[k] && s->y[k] != s->yh[k])
			ret = rf_var_clear_error(l->e, s->y[k]->var);
	}
	return ret;
}
