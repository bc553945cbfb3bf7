/* train/trainer-step.c -- one iteration, pushed and not waited for: the window wait,
 * each replica's forward and backward pass (the gradients' reduction and the SGD
 * update are pushed from its hook: trainer-grad.c), and the end-of-iteration marker. Evaluation's iteration is the
 * forward pass and the marker. */
#include <errno.h>

#include "trainer-impl.h"
#include "ops.h"

static int rf__noop(void *ctx)
{
	(void)ctx;
	return 0;
}

/* Wait until the iteration that last used this window slot has finished (no window:
 * never wait; the markers are still pushed, one variable for all, so the ops pushed
 * are the same whatever the window). */
int rf__window_wait(struct rf_trainer *t)
{
	if (!t->window || t->iter < t->window)
		return 0;
	return rf_engine_wait_var(t->eng, t->marker[t->iter % t->nmark]);
}

/* The end-of-iteration marker: reads what the iteration wrote last (every replica's
 * parameters when training, and the iteration's result slots), writes the slot's
 * marker variable. */
static int rf__push_marker(struct rf_trainer *t, int train, struct rf__slots *sl, uint64_t b)
{
	struct rf_var *reads[RF__MAXV];
	struct rf_var *wr = t->marker[t->iter % t->nmark];
	struct rf_op_desc d = { 0 };
	unsigned n = 0, r, k;

	for (r = 0; r < t->K; r++) {
		if (train) {
			reads[n++] = t->rep[r]->params->var;
			for (k = 0; k < t->spec->ntensors; k++)
				reads[n++] = t->rep[r]->p[k]->var;
		}
		reads[n++] = sl[r].lv[b]->var;
		reads[n++] = sl[r].cv[b]->var;
	}
	d.fn = rf__noop;
	d.reads = reads;
	d.nreads = n;
	d.writes = &wr;
	d.nwrites = 1;
	d.name = "iter_done";
	t->iter++;
	return rf_engine_push(t->eng, &d);
}

/* K = 1: the SGD of a layer right after its gradient. */
static int rf__sgd_hook(void *ctx, struct rf_model *m, unsigned layer)
{
	struct rf_trainer *t = ctx;

	return rf_model_update_layer(m, layer, &t->opt);
}

/* Each replica's forward pass on its shard; the activations kept for backward. */
static int rf__forward_all(struct rf_trainer *t, const struct rf_batch *b,
			   struct rf_model_acts **acts)
{
	uint64_t bi = b->index;
	unsigned r;
	int ret = 0;

	for (r = 0; r < t->K && ret == 0; r++) {
		if (!b->shard_n[r])
			continue;
		ret = rf_model_forward(t->rep[r], b->x[r], b->y[r], t->tr[r].lv[bi], t->tr[r].cv[bi],
				       1, &acts[r]);
	}
	return ret;
}

/* Each replica's backward pass, with the SGD hook (one replica, one process) or the
 * reduction hook (trainer-grad.c); after a failed forward the activations are only
 * freed. */
static int rf__backward_all(struct rf_trainer *t, struct rf_model_acts **acts, int ret)
{
	unsigned r;

	for (r = 0; r < t->K; r++) {
		if (!acts[r])
			continue;
		if (ret == 0)
			ret = rf_model_backward(t->rep[r], acts[r],
						rf__reduces(t) ? rf__grad_hook : rf__sgd_hook, t);
		else
			rf_model_acts_destroy(acts[r]);
	}
	return ret;
}

int rf__train_iter(struct rf_trainer *t, const struct rf_batch *b)
{
	struct rf_model_acts *acts[RF_TRAIN_MAX_DEVICES] = { 0 };
	int ret;

	t->cur = b;
	t->todo = (int)t->spec->nlayers - 1;
	t->opt.step = t->steps + 1;         /* AdamW's bias correction counts this step */
	ret = rf__backward_all(t, acts, rf__forward_all(t, b, acts));
	/* buckets no hook reached (the last replica's shard was empty) */
	if (ret == 0 && rf__reduces(t))
		ret = rf__reduce_through(t, 0);
	if (ret == 0)
		t->steps++;
	return ret < 0 ? ret : rf__push_marker(t, 1, t->tr, b->index);
}

int rf__eval_iter(struct rf_trainer *t, const struct rf_batch *b)
{
	uint64_t bi = b->index;
	unsigned r;
	int ret = 0;

	for (r = 0; r < t->K && ret == 0; r++)
		if (b->shard_n[r])
			ret = rf_model_forward(t->rep[r], b->x[r], b->y[r], t->te[r].lv[bi],
					       t->te[r].cv[bi], 0, NULL);
	return ret < 0 ? ret : rf__push_marker(t, 0, t->te, bi);
}
