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

size_t rf__gjob_bytes(unsigned n)
{
	return sizeof(struct rf__gjob) + (size_t)n * (2 * sizeof(void *) + sizeof(uint64_t) +
						      sizeof(uint32_t) + 1);
}

struct rf__gjob *rf__gjob_new(struct rf_loader *l, struct rf__slot *s, unsigned n)
{
	struct rf__gjob *j = rf__gjob_bytes(n) <= l->gjobs.size ? rf__slab_get(&l->gjobs) : NULL;

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
	j->bad = l->o.skip_bad_images ? (uint8_t *)(j->pl + n) : NULL;
	if (j->bad)
		memset(j->bad, 0, n);
	j->w = (unsigned)(l->ngather % l->ngs);
	j->gen = l->gen;
	j->warn[0] = 0;
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
	rf__decode_u8_norm(out, in, l->pb, &l->norm,
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

/* dst (H x W x C, interleaved) = src (C planes of H x W): a u8 NHWC sample. */
static void rf__to_hwc(uint8_t *restrict dst, const uint8_t *restrict src, unsigned C,
		       size_t HW)
{
	if (C == 3) {        /* images: the common case, unrolled */
		const uint8_t *r = src, *g = src + HW, *b = src + 2 * HW;
		for (size_t k = 0; k < HW; k++) {
			dst[3 * k] = r[k];
			dst[3 * k + 1] = g[k];
			dst[3 * k + 2] = b[k];
		}
		return;
	}
	for (unsigned c = 0; c < C; c++)
		for (size_t k = 0; k < HW; k++)
			dst[k * C + c] = src[c * HW + k];
}

/* Channels and pixels per channel of the samples served (C = 1 for (H, W) records);
 * records of 2 or 3 dims only. */
static void rf__chw(const struct rf_loader *l, unsigned *C, size_t *HW)
{
	*C = l->ndim == 3 ? l->shape[0] : 1;
	*HW = (size_t)l->shape[l->ndim - 2] * l->shape[l->ndim - 1];
}

/* Sample i of job j, made (CHW) at src: into its row -- f32 when fused, interleaved
 * when u8 NHWC of more than one channel, else copied unless made in place. */
static void rf__emit(struct rf__gjob *j, unsigned i, const uint8_t *src)
{
	struct rf_loader *l = j->l;
	struct rf__slot *s = j->s;
	uint8_t *row = s->stage + (size_t)i * l->pb;
	unsigned C;
	size_t HW;

	if (rf__fused(l)) {
		rf__decode_rec(l, s, rf__xrow(l, s, i), src);
		return;
	}
	if (rf__hwc(l)) {    /* records of (H, W) or (C, H, W): create refuses others */
		rf__chw(l, &C, &HW);
		if (C > 1) {
			rf__to_hwc(row, src, C, HW);
			return;
		}
	}
	if (src != row)
		memcpy(row, src, l->pb);
}

/* Where sample i of job j is made: its row itself, or the stream's scratch when it
 * goes on from there (f32 rows, an interleave). */
static uint8_t *rf__mkdst(struct rf__gjob *j, unsigned i)
{
	const struct rf_loader *l = j->l;

	if (l->gscratch[j->w] && (rf__fused(l) || rf__hwc(l)))
		return l->gscratch[j->w];
	return j->s->stage + (size_t)i * l->pb;
}

/* "PATH: record R (offset O, N bytes): MSG" for record i of j. */
static void rf__image_msg(const struct rf__gjob *j, unsigned i, const char *msg, char *buf,
			  size_t len)
{
	const struct rf_dataset *ds = j->l->ds;
	const char *path = ds->src[0].path;
	struct rf_dataset_loc loc;
	unsigned k;
	uint64_t off;

	rf_dataset_payload_loc(ds, j->idx[i], &loc);
	off = loc.offset;
	if (ds->nparts && rf_dataset_part_of(ds, loc.offset, loc.length, &k, &off) == 0)
		path = ds->parts[k].path;       /* several shards: its own, at its own offset */
	snprintf(buf, len, "%s: record %" PRIu64 " (offset %" PRIu64 ", %" PRIu64 " bytes): %s",
		 path, j->idx[i], off, loc.length, msg);
}

/* Image i of j did not decode: marked and counted, the first one's message kept (a
 * warning once the batch is delivered, rf__skip_report: the batch goes on). */
static void rf__bad_image(struct rf__gjob *j, unsigned i, const char *msg)
{
	j->bad[i] = 1;
	if (!j->skipped++)
		rf__image_msg(j, i, msg, j->warn, sizeof(j->warn));
}

/* On the reactor, gather j done with images skipped: its count into the table of its
 * epoch, its warning into the log until the consumer is given the batch. A batch
 * pushed before a seek is dropped by it (pushed again if it is wanted): not noted. */
static void rf__skip_note(struct rf_loader *l, const struct rf__gjob *j)
{
	unsigned e = (unsigned)(j->epoch & 1);
	struct rf__skipwarn *w;

	if (j->gen != l->gen || j->index >= l->nbatches)
		return;
	if (l->skip_epoch[e] != j->epoch || l->skip_gen[e] != j->gen) {
		memset(l->skipn[e], 0, l->nbatches * sizeof(uint32_t));
		l->skip_epoch[e] = j->epoch;
		l->skip_gen[e] = j->gen;
	}
	l->skipn[e][j->index] = j->skipped;
	w = &l->skipw[l->iskipw++ % RF__SKIPLOG];
	if (w->used && w->gen == l->gen)
		l->skipw_lost += w->n;
	w->gen = j->gen;
	w->epoch = j->epoch;
	w->index = j->index;
	w->n = j->skipped;
	w->used = 1;
	memcpy(w->msg, j->warn, sizeof(w->msg));
}

uint64_t rf__skip_report(struct rf_loader *l, uint64_t epoch, uint64_t first, uint64_t end)
{
	unsigned e = (unsigned)(epoch & 1);
	uint64_t n = 0;

	for (unsigned i = 0; i < RF__SKIPLOG; i++) {
		struct rf__skipwarn *w = &l->skipw[(l->iskipw + i) % RF__SKIPLOG];
		if (!w->used || w->gen != l->gen || w->epoch != epoch || w->index < first ||
		    w->index >= end)
			continue;
		char more[48] = "";
		w->used = 0;
		if (w->n > 1)
			snprintf(more, sizeof(more), "; %u images of the batch skipped", w->n);
		rf__log(RF_LOG_WARN, "%s (skipped: epoch %" PRIu64 ", batch %" PRIu64
			", counted from 0%s)", w->msg, w->epoch, w->index, more);
	}
	if (l->skipw_lost) {
		rf__log(RF_LOG_WARN, "%" PRIu64 " more images skipped whose warnings were not "
			"kept (at most %d batches' are)", l->skipw_lost, RF__SKIPLOG);
		l->skipw_lost = 0;
	}
	if (l->skip_epoch[e] != epoch || l->skip_gen[e] != l->gen)
		return 0;
	if (end > l->nbatches)
		end = l->nbatches;
	for (uint64_t b = first; b < end; b++)
		n += l->skipn[e][b];
	return n;
}

/* Each bad row of j takes the row and label of the nearest good one before it (after
 * it, for those at the start). -EBADMSG when no image of the batch decoded. */
static int rf__fill_bad(struct rf__gjob *j)
{
	struct rf_loader *l = j->l;
	struct rf__slot *s = j->s;
	unsigned first = 0;

	while (first < j->n && j->bad[first])
		first++;
	if (first == j->n) {
		snprintf(j->err, sizeof(j->err), "%s: none of the %u images of the batch decoded "
			 "(skip_bad_images): the first, record %" PRIu64 ", as the warnings say",
			 l->ds->src[0].path, j->n, j->idx[0]);
		return -EBADMSG;
	}
	for (unsigned i = 0, k = first; i < j->n; i++) {
		if (!j->bad[i]) {
			k = i;
			continue;
		}
		if (rf__fused(l))
			memcpy(rf__xrow(l, s, i), rf__xrow(l, s, k), l->pb * sizeof(float));
		else
			memcpy(s->stage + (size_t)i * l->pb, s->stage + (size_t)k * l->pb, l->pb);
		if (j->lp)
			j->lp[i] = j->lp[k];
	}
	return 0;
}

/* Images: each record decoded and augmented into its (3, size, size) u8 sample, in
 * its row of the staging or in the stream's scratch, and from there into its f32 row
 * (fused) or interleaved (u8 NHWC). */
static int rf__gather_images(struct rf__gjob *j)
{
	struct rf_loader *l = j->l;
	char msg[RF__ERRLEN - 96];

	for (unsigned i = 0; i < j->n; i++) {
		uint8_t *dst = rf__mkdst(j, i);
		int ret = rf__img_decode(l->img[j->w], &l->io, j->pp[i], j->pl[i], j->epoch,
					 j->idx[i], dst, msg, sizeof(msg));
		if (ret < 0 && ret != -ENOMEM && ret != -EINVAL && j->bad) {
			rf__bad_image(j, i, msg);
			continue;
		}
		if (ret < 0) {
			rf__image_msg(j, i, msg, j->err, sizeof(j->err));
			return ret;
		}
		rf__emit(j, i, dst);
	}
	return j->skipped ? rf__fill_bad(j) : 0;
}

/* The op (worker thread): records -> staging (augmented, if asked), or straight to
 * the f32 rows when fused; labels -> slot labels. */
static int rf__gather_run(void *ctx)
{
	struct rf__gjob *j = ctx;
	struct rf_loader *l = j->l;
	struct rf__slot *s = j->s;
	const struct rf_dataset *ds = l->ds;
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
			uint8_t *dst = rf__mkdst(j, i);
			rf_loader_augment_of(&l->o, j->epoch, j->idx[i], &dy, &dx, &flip);
			rf__augment_copy(dst, j->pp[i], C, H, W, dy, dx, flip);
			rf__emit(j, i, dst);
		}
	} else {
		for (i = 0; i < j->n; i++)
			rf__emit(j, i, j->pp[i]);
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

	j->l->st.images_skipped += j->skipped;   /* on the reactor: no other writer */
	if (j->skipped && j->l->skipw)
		rf__skip_note(j->l, j);
	if (status < 0)
		rf__gather_log(j, status);
	rf__slab_put(&j->l->gjobs, j);
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
		rf__slab_put(&l->gjobs, j);
	return ret;
}
