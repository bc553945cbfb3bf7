/* train/trainer-step.c -- one iteration, pushed and not waited for: the window wait,
 * each replica's forward and backward pass, the gradient reduction across replicas
 * and the SGD update, and the end-of-iteration marker. Evaluation's iteration is the
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

	return rf_model_sgd_layer(m, layer, t->lr);
}

/* Uneven shards: make sum_r g_r / K the batch mean (g_r is the mean over n_r rows),
 * by scaling g_r by K*n_r/n (an empty shard's gradient is zeroed). */
static int rf__scale_uneven(struct rf_trainer *t, const struct rf_batch *b)
{
	unsigned r;
	int ret;

	for (r = 0; r < t->K; r++) {
		if ((uint64_t)b->shard_n[r] * t->K != b->n) {
			float c = (float)((double)b->shard_n[r] * t->K / b->n);
			ret = b->shard_n[r] ? rf_scale(t->rep[r]->s, t->rep[r]->grads, c)
					    : rf_fill(t->rep[r]->s, t->rep[r]->grads, 0.0f);
			if (ret < 0)
				return ret;
		}
	}
	return 0;
}

/* Parameter tensor k: kv push of the K gradients (summed on the key's home), kv pull
 * of the sum into every replica's gradient, SGD on every replica. */
static int rf__reduce_tensor(struct rf_trainer *t, int k)
{
	struct rf_tensor *g[RF_TRAIN_MAX_DEVICES];
	unsigned r;
	int ret;

	for (r = 0; r < t->K; r++)
		g[r] = t->rep[r]->g[k];
	if ((ret = rf_kv_push(t->kv, k, g, t->K)) < 0 ||
	    (ret = rf_kv_pull(t->kv, k, g, t->K)) < 0)
		return ret;
	for (r = 0; r < t->K; r++)
		if ((ret = rf_sgd(t->rep[r]->s, t->rep[r]->p[k], t->rep[r]->g[k], t->lr, 0.0f)) < 0)
			return ret;
	return 0;
}

/* K > 1: every parameter tensor, last first, so that the reduction of the last layers
 * runs while the replicas' backward passes go on with the earlier ones. */
static int rf__reduce_and_step(struct rf_trainer *t, const struct rf_batch *b)
{
	int k, ret;

	if ((ret = rf__scale_uneven(t, b)) < 0)
		return ret;
	for (k = (int)t->spec->ntensors - 1; k >= 0; k--)
		if ((ret = rf__reduce_tensor(t, k)) < 0)
			return ret;
	return 0;
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

/* Each replica's backward pass (K = 1: with the SGD hook); after a failed forward the
 * activations are only freed. */
static int rf__backward_all(struct rf_trainer *t, struct rf_model_acts **acts, int ret)
{
	unsigned r;

	for (r = 0; r < t->K; r++) {
		if (!acts[r])
			continue;
		if (ret == 0)
			ret = rf_model_backward(t->rep[r], acts[r], t->K == 1 ? rf__sgd_hook : NULL, t);
		else
			rf_model_acts_destroy(acts[r]);
	}
	return ret;
}

int rf__train_iter(struct rf_trainer *t, const struct rf_batch *b)
{
	struct rf_model_acts *acts[RF_TRAIN_MAX_DEVICES] = { 0 };
	int ret;

	ret = rf__backward_all(t, acts, rf__forward_all(t, b, acts));
	if (ret == 0 && t->K > 1)
		ret = rf__reduce_and_step(t, b);
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
