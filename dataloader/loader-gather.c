/* loader-gather.c -- gathering: a host op on the loader's worker stream copies a
 * batch's records (from fetch buffers or memory) into the slot's contiguous u8
 * staging and checks and decodes its labels. A failed batch's message is kept here. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "loader-impl.h"

struct rf__gjob *rf__gjob_new(struct rf_loader *l, struct rf__slot *s, unsigned n)
{
	struct rf__gjob *j = malloc(sizeof(*j) + (size_t)n * (2 * sizeof(void *) + sizeof(uint64_t) +
							    sizeof(uint32_t)));

	if (!j)
		return NULL;
	memset(j, 0, sizeof(*j));
	j->l = l;
	j->s = s;
	j->epoch = l->epoch;
	j->index = l->t;
	j->n = n;
	j->pp = (const uint8_t **)(j + 1);
	j->lp = l->labels ? j->pp + n : NULL;
	j->idx = (uint64_t *)(j->pp + 2 * n);
	j->pl = (uint32_t *)(j->idx + n);
	j->w = (unsigned)(l->ngather % l->ngs);
	return j;
}

static uint64_t rf__mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void rf_loader_augment_of(const struct rf_loader_opts *o, uint64_t epoch, uint64_t index,
			  int *dy, int *dx, int *flip)
{
	uint64_t u = rf__mix(rf__mix(rf__mix(o->seed ^ 0x6175676d656e74ull) ^ epoch) ^ index);
	uint64_t n = 2 * (uint64_t)o->crop_pad + 1;

	*dy = (int)(u % n) - (int)o->crop_pad;
	*dx = (int)((u >> 20) % n) - (int)o->crop_pad;
	*flip = o->hflip ? (int)(u >> 63) : 0;
}

/* dst = the crop at (dy, dx) of src (C planes of H x W), flipped if flip. */
static void rf__augment_copy(uint8_t *dst, const uint8_t *src, unsigned C, unsigned H,
			     unsigned W, int dy, int dx, int flip)
{
	for (unsigned c = 0; c < C; c++) {
		for (unsigned y = 0; y < H; y++) {
			uint8_t *row = dst + ((size_t)c * H + y) * W;
			int sy = (int)y + dy;
			if (sy < 0 || sy >= (int)H) {
				memset(row, 0, W);
				continue;
			}
			const uint8_t *srow = src + ((size_t)c * H + (unsigned)sy) * W;
			for (unsigned x = 0; x < W; x++) {
				int sx = (flip ? (int)(W - 1 - x) : (int)x) + dx;
				row[x] = sx >= 0 && sx < (int)W ? srow[sx] : 0;
			}
		}
	}
}

/* Record bytes -> f32 rows, as the CPU backend's decode op computes them (the same
 * function): streamed past the caches when a batch's floats outgrow them. */
static void rf__decode_rec(const struct rf_loader *l, const struct rf__slot *s, float *out,
			   const uint8_t *in)
{
	rf__decode_u8_f32(out, in, l->pb, l->o.scale, l->o.mean, l->o.std,
			  (size_t)s->cap * l->pb * sizeof(float) >= (4u << 20));
}

/* Local row i of slot s: where its f32 row lies (fused). */
static float *rf__xrow(const struct rf_loader *l, const struct rf__slot *s, unsigned i)
{
	unsigned k = 0;

	while (k + 1 < l->K && i >= s->soff[k + 1])
		k++;
	return (float *)s->x[k]->data + (size_t)(i - s->soff[k]) * l->pb;
}

/* Images: each record decoded and augmented into its (3, size, size) u8 sample, in
 * the staging or (fused) the stream's scratch and from there into its f32 row. */
static int rf__gather_images(struct rf__gjob *j)
{
	struct rf_loader *l = j->l;
	struct rf__slot *s = j->s;
	const struct rf_dataset *ds = l->ds;
	char msg[RF__ERRLEN - 96];

	for (unsigned i = 0; i < j->n; i++) {
		uint8_t *dst = rf__fused(l) ? l->gscratch[j->w] : s->stage + (size_t)i * l->pb;
		int ret = rf__img_decode(l->img[j->w], &l->io, j->pp[i], j->pl[i], j->epoch,
					 j->idx[i], dst, msg, sizeof(msg));
		if (ret < 0) {
			struct rf_dataset_loc loc;
			rf_dataset_payload_loc(ds, j->idx[i], &loc);
			snprintf(j->err, sizeof(j->err), "%s: record %" PRIu64 " (offset %" PRIu64
				 ", %" PRIu64 " bytes): %s", ds->src[0].path, j->idx[i], loc.offset,
				 loc.length, msg);
			return ret;
		}
		if (rf__fused(l))
			rf__decode_rec(l, s, rf__xrow(l, s, i), dst);
	}
	return 0;
}

/* The op (worker thread): records -> staging (augmented, if asked), or straight to
 * the f32 rows when fused; labels -> slot labels. */
static int rf__gather_run(void *ctx)
{
	struct rf__gjob *j = ctx;
	struct rf_loader *l = j->l;
	struct rf__slot *s = j->s;
	const struct rf_dataset *ds = l->ds;
	size_t pb = l->pb;
	unsigned i;
	int ret;

	if (l->image) {
		if ((ret = rf__gather_images(j)) < 0)
			return ret;
	} else if (l->o.crop_pad || l->o.hflip) {
		unsigned C = l->ndim == 3 ? l->shape[0] : 1;
		unsigned H = l->shape[l->ndim - 2], W = l->shape[l->ndim - 1];
		for (i = 0; i < j->n; i++) {
			int dy, dx, flip;
			uint8_t *dst = rf__fused(l) ? l->gscratch[j->w] : s->stage + (size_t)i * pb;
			rf_loader_augment_of(&l->o, j->epoch, j->idx[i], &dy, &dx, &flip);
			rf__augment_copy(dst, j->pp[i], C, H, W, dy, dx, flip);
			if (rf__fused(l))
				rf__decode_rec(l, s, rf__xrow(l, s, i), dst);
		}
	} else if (rf__fused(l)) {
		for (i = 0; i < j->n; i++)
			rf__decode_rec(l, s, rf__xrow(l, s, i), j->pp[i]);
	} else {
		for (i = 0; i < j->n; i++)
			memcpy(s->stage + (size_t)i * pb, j->pp[i], pb);
	}
	if (!j->lp)
		return 0;
	for (i = 0; i < j->n; i++) {
		int32_t v = rf_dataset_decode_label(ds, j->lp[i]);
		if (ds->num_classes && (v < 0 || (uint32_t)v >= ds->num_classes)) {
			snprintf(j->err, sizeof(j->err), "%s: record %" PRIu64 ": label %d "
				 "outside [0, %u)", ds->src[ds->label_src].path, j->idx[i], v,
				 ds->num_classes);
			return -ERANGE;
		}
		s->lab[i] = v;
	}
	return 0;
}

/* Keep the message of failed batch j: its own, or that of a fetch it read. */
static void rf__gather_log(struct rf__gjob *j, int status)
{
	struct rf_loader *l = j->l;
	const char *msg = j->err[0] ? j->err : NULL;
	struct rf__errlog *e = &l->log[l->nlog++ % RF__ERRLOG];

	for (unsigned i = 0; !msg && i < j->nunits; i++)
		msg = rf__fetch_msg(l, j->fid[i]);
	e->used = 1;
	e->epoch = j->epoch;
	e->index = j->index;
	snprintf(e->msg, sizeof(e->msg), "%s (epoch %" PRIu64 ", batch %" PRIu64 ")",
		 msg ? msg : strerror(-status), j->epoch, j->index);
	if (j->err[0])
		memcpy(l->last_err, j->err, sizeof(l->last_err));
}

static void rf__gather_done(void *ctx, int status)
{
	struct rf__gjob *j = ctx;

	if (status < 0)
		rf__gather_log(j, status);
	free(j);
}

int rf__push_gather(struct rf_loader *l, struct rf__gjob *j)
{
	struct rf__slot *s = j->s;
	struct rf_var *reads[RF__MAXREADS], *writes[2 * RF_LOADER_MAX_SHARDS];
	struct rf_op_desc d = { 0 };
	unsigned k, nr = j->nunits, nw = 0;
	int ret;

	memcpy(reads, j->reads, nr * sizeof(reads[0])); /* j may be gone when push returns */

	for (k = 0; k < l->K; k++) {
		writes[nw++] = rf__fused(l) ? s->x[k]->var : s->su[k]->var;
		if (s->yh[k])
			writes[nw++] = s->yh[k]->var;
	}
	d.fn = rf__gather_run;
	d.ctx = j;
	d.done = rf__gather_done;
	d.reads = reads;
	d.nreads = nr;
	d.writes = writes;
	d.nwrites = nw;
	d.stream = l->gs[j->w];
	l->ngather++;
	d.name = "loader_gather";
	ret = rf_engine_push(l->e, &d);
	if (ret < 0)
		free(j);
	return ret;
}
