/* loader-gather.c -- gathering: a host op on the loader's worker stream copies a
 * batch's records (from fetch buffers or memory) into the slot's contiguous u8
 * staging and checks and decodes its labels. A failed batch's message is kept here. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader-impl.h"

struct rf__gjob *rf__gjob_new(struct rf_loader *l, struct rf__slot *s, unsigned n)
{
	struct rf__gjob *j = malloc(sizeof(*j) + (size_t)n * (2 * sizeof(void *) + sizeof(uint64_t)));

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
	return j;
}

/* The op (worker thread): records -> staging, labels -> slot labels. */
static int rf__gather_run(void *ctx)
{
	struct rf__gjob *j = ctx;
	struct rf_loader *l = j->l;
	struct rf__slot *s = j->s;
	const struct rf_dataset *ds = l->ds;
	size_t pb = l->pb;
	unsigned i;

	for (i = 0; i < j->n; i++)
		memcpy(s->stage + (size_t)i * pb, j->pp[i], pb);
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
		writes[nw++] = s->su[k]->var;
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
	d.stream = l->gs;
	d.name = "loader_gather";
	ret = rf_engine_push(l->e, &d);
	if (ret < 0)
		free(j);
	return ret;
}
