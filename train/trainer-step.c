/* train/trainer-step.c -- one iteration, pushed and not waited for: the window wait,
 * the training step (rf__step: each replica's forward and backward pass, the
 * gradients' reduction and the update pushed from its hook: trainer-grad.c), which
 * --hybridize captures once and replays, and the end-of-iteration marker.
 * Evaluation's iteration is the forward pass and the marker. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	struct rf_trainer *t = ((struct rf__reduce *)ctx)->t;

	/* fused: every parameter at once after the last layer's hook (layer 0 comes last) */
	if (t->o.fused_update > 0)
		return layer == 0 ? rf_model_update_all(m, &t->opt) : 0;
	return rf_model_update_layer(m, layer, &t->opt);
}

/* What one step reads and writes, per replica: its shard (x, y; n rows, 0: an empty
 * shard), where its loss and correct count go, its activations; keep: the activations
 * outlive the step (a capture: nothing is freed while recording); b: the batch (its
 * shard sizes scale uneven shards' gradients). */
struct rf__step_io {
	const struct rf_batch *b;
	struct rf_tensor *x[RF_TRAIN_MAX_DEVICES], *y[RF_TRAIN_MAX_DEVICES];
	struct rf_tensor *loss[RF_TRAIN_MAX_DEVICES], *corr[RF_TRAIN_MAX_DEVICES];
	unsigned n[RF_TRAIN_MAX_DEVICES];
	struct rf_model_acts **acts;
	int keep;
};

/* The training step, pushed and not waited for: each replica's forward pass on its
 * shard; each replica's backward pass, whose hook reduces a layer's gradient across
 * replicas and processes and updates the layer as soon as it is ready (one replica,
 * one process: the SGD hook alone; trainer-grad.c); then the buckets no hook reached
 * (the last replica's shard was empty). The one function both a step pushed op by op
 * and a captured one (--hybridize) run. */
static int rf__step(struct rf_trainer *t, const struct rf__step_io *io)
{
	rf_grad_hook hook = rf__reduces(t) ? rf__grad_hook : rf__sgd_hook;
	struct rf__reduce rd = { t, io->b, (int)t->spec->nlayers - 1 };
	unsigned r;
	int ret = 0;

	for (r = 0; r < t->K && ret == 0; r++) {
		if (!io->n[r])
			continue;
		t->rep[r]->keep_acts = io->keep;
		ret = rf_model_forward(t->rep[r], io->x[r], io->y[r], io->loss[r], io->corr[r], 1,
				       &io->acts[r]);
		t->rep[r]->keep_acts = 0;
	}
	for (r = 0; r < t->K; r++) {
		if (!io->acts[r])
			continue;
		if (ret == 0)
			ret = rf_model_backward(t->rep[r], io->acts[r], hook, &rd);
		else if (!io->keep)     /* after a failed forward: only freed */
			rf_model_acts_destroy(io->acts[r]);
	}
	if (ret == 0 && rf__reduces(t))
		ret = rf__reduce_through(&rd, 0);
	return ret;
}

/* ---- opts.hybridize: capture once, replay after -------------------------------- */

void rf__hybrid_free(struct rf_trainer *t)
{
	struct rf__hybrid *h = t->hy;

	if (!h)
		return;
	/* the caller has waited for all work (rf_trainer_destroy): the graph goes at once
	 * and the deletions below find its variables idle */
	rf_graph_destroy(h->g);
	for (unsigned r = 0; r < RF_TRAIN_MAX_DEVICES; r++) {
		rf_model_acts_destroy(h->acts[r]);   /* deletions ordered after them */
		rf_tensor_destroy(h->x[r]);
		rf_tensor_destroy(h->y[r]);
		rf_tensor_destroy(h->loss[r]);
		rf_tensor_destroy(h->corr[r]);
	}
	free(h);
	t->hy = NULL;
}

/* Record one training iteration (forward, backward, reductions, updates) on the
 * graph's own tensors shaped as batch b, with the optimizer's lr and step read from
 * the launch arguments. The optimizer state is made first: its zeroing must not be
 * replayed. */
static int rf__hybrid_capture(struct rf_trainer *t, const struct rf_batch *b)
{
	struct rf__hybrid *h = calloc(1, sizeof(*h));
	struct rf_capture_opts co = { .args_size = sizeof(struct rf_live_hyper),
				      .name = "train_step" };
	struct rf_var *av = NULL;
	char why[512] = "";
	unsigned r;
	int ret = h ? 0 : -ENOMEM;

	for (r = 0; r < t->K && ret == 0; r++) {
		struct rf_model *m = t->rep[r];
		struct rf_tensor *x = b->x[r], *y = b->y[r];
		/* every replica's state, an empty shard's too: the reduction updates all */
		ret = rf_model_optim_state(m, &t->opt);
		h->shard_n[r] = b->shard_n[r];
		if (ret < 0 || !b->shard_n[r])
			continue;
		ret = rf_tensor_create_layout(m->dev, x->dtype, x->layout, "hy_x", x->ndim, x->shape,
					      &h->x[r]);
		if (ret == 0)
			ret = rf_tensor_create(m->dev, y->dtype, "hy_y", y->ndim, y->shape, &h->y[r]);
		if (ret == 0)
			ret = rf_tensor_create(m->dev, RF_F32, "hy_loss", RF_DIMS(1), &h->loss[r]);
		if (ret == 0)
			ret = rf_tensor_create(m->dev, RF_I32, "hy_correct", RF_DIMS(1), &h->corr[r]);
	}
	if (ret == 0)
		ret = rf_engine_capture_begin(t->eng, &co);
	if (ret == 0) {
		struct rf_live_hyper *args = rf_engine_capture_args(t->eng, &av);
		struct rf__step_io io = { .b = b, .acts = h->acts, .keep = 1 };
		for (r = 0; r < t->K; r++) {
			io.x[r] = h->x[r];
			io.y[r] = h->y[r];
			io.loss[r] = h->loss[r];
			io.corr[r] = h->corr[r];
			io.n[r] = h->shard_n[r];
		}
		t->opt.live = args;
		t->opt.live_var = av;
		ret = rf__step(t, &io);       /* the very step, recorded */
		t->opt.live = NULL;
		t->opt.live_var = NULL;
		if (ret < 0)   /* its cause, before the capture's end says its own */
			snprintf(why, sizeof(why), "%s", rf_last_error());
		int e = rf_engine_capture_end(t->eng, &h->g);
		if (ret == 0)
			ret = e;
	}
	if (ret < 0 || !h->g) {
		if (!why[0])
			snprintf(why, sizeof(why), "%s", rf_last_error());
		rf__trainer_msg(t, "--hybridize: capturing the training step: %s (%s)",
				strerror(ret < 0 ? -ret : EINVAL), why);
		if (h) {
			t->hy = h;
			rf__hybrid_free(t);
		}
		/* the caller says rf_last_error(): the cause, not the cleanup's last word */
		return rf__fail(ret < 0 ? ret : -EINVAL, "%s", why);
	}
	t->hy = h;
	return 0;
}

/* One training iteration as a replay: the batch copied into the graph's inputs, the
 * launch with this step's lr and step, its loss and correct count copied out to the
 * batch's result slots. 1: not this batch (another size: pushed op by op). */
static int rf__hybrid_iter(struct rf_trainer *t, const struct rf_batch *b)
{
	struct rf__hybrid *h = t->hy;
	struct rf_live_hyper a;
	unsigned r;
	int ret = 0;

	if (h)
		for (r = 0; r < t->K; r++)
			if (h->shard_n[r] != b->shard_n[r])
				return 1;
	uint64_t full = t->o.batch_size < t->train_view.count ? t->o.batch_size : t->train_view.count;
	if (!h && b->global_n != full)
		return 1; /* capture a full batch: an epoch's (or a resume's) tail would lock
			   * every later batch out of the replay */
	if (!h && (ret = rf__hybrid_capture(t, b)) < 0)
		return ret;
	h = t->hy;
	for (r = 0; r < t->K && ret == 0; r++) {
		if (!h->shard_n[r])
			continue;
		ret = rf_copy(t->rep[r]->s, h->x[r], b->x[r]);
		if (ret == 0)
			ret = rf_copy(t->rep[r]->s, h->y[r], b->y[r]);
	}
	a.lr = t->opt.lr;
	a.step = t->steps + 1;
	if (ret == 0)
		ret = rf_graph_launch(h->g, &a, NULL, 0);
	for (r = 0; r < t->K && ret == 0; r++) {
		if (!h->shard_n[r])
			continue;
		ret = rf_copy(t->rep[r]->s, t->tr[r].lv[b->index], h->loss[r]);
		if (ret == 0)
			ret = rf_copy(t->rep[r]->s, t->tr[r].cv[b->index], h->corr[r]);
	}
	h->launches += ret == 0;
	return ret;
}

int rf__train_iter(struct rf_trainer *t, const struct rf_batch *b)
{
	struct rf_model_acts *acts[RF_TRAIN_MAX_DEVICES] = { 0 };
	struct rf__step_io io = { .b = b, .acts = acts };
	int ret;

	t->opt.step = t->steps + 1;         /* AdamW's bias correction counts this step */
	if (t->o.hybridize > 0 && (ret = rf__hybrid_iter(t, b)) != 1) {
		if (ret == 0)
			t->steps++;
		return ret < 0 ? ret : rf__push_marker(t, 1, t->tr, b->index);
	}
	for (unsigned r = 0; r < t->K; r++) {
		io.x[r] = b->x[r];
		io.y[r] = b->y[r];
		io.loss[r] = t->tr[r].lv[b->index];
		io.corr[r] = t->tr[r].cv[b->index];
		io.n[r] = b->shard_n[r];
	}
	ret = rf__step(t, &io);
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
