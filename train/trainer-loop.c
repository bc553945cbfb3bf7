/* train/trainer-loop.c -- the training loop, in one place: one pass over a loader (the
 * look-ahead queue of requested batches, then per batch the window wait, the
 * iteration's push, the optional barrier, the mid-epoch checkpoint and the progress
 * report), and what an epoch and an evaluation of the test set make of it (clear the
 * result slots, one pass, then read the slots back once). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "trainer-impl.h"

/* Request batches until `ahead` are queued, up to the end of epoch `last`. */
static int rf__fill(struct rf_trainer *t, struct rf_loader *ld, struct rf__queue *Q,
		    unsigned ahead, uint64_t last)
{
	int ret;

	while (Q->qn < ahead && Q->lepoch <= last) {
		ret = rf_loader_next(ld, &Q->q[(Q->qh + Q->qn) % RF__MAXQ]);
		if (ret < 0) {
			Q->valid = 0;
			/* the loader's own line says what failed (rf_loader_next, loader.h) */
			rf__trainer_msg(t, "%s", rf_last_error());
			return ret;
		}
		if (ret == 0)
			Q->lepoch++;
		else
			Q->qn++;
	}
	return 0;
}

/* Q must continue where this pass starts (batch `start` of epoch `epoch`); if it does
 * not (a checkpoint was loaded, a pass failed), the loader seeks and Q starts empty. Batches queued for another epoch
 * are dropped: their ops only wrote loader slots, which the loader reuses in order
 * after them. */
static int rf__queue_sync(struct rf_trainer *t, struct rf_loader *ld, struct rf__queue *Q,
			  uint64_t epoch, uint64_t start)
{
	int ret;

	if (Q->valid && (Q->qn ? Q->q[Q->qh].epoch == epoch && Q->q[Q->qh].index == start
			       : Q->lepoch == epoch && start == 0))
		return 0;
	if ((ret = rf_loader_seek(ld, epoch, start)) < 0) {
		rf__trainer_msg(t, "%s", rf_last_error());
		return ret;
	}
	Q->qh = Q->qn = 0;
	Q->lepoch = epoch;
	Q->valid = 1;
	return 0;
}

static int rf__wait_window(struct rf_trainer *t, struct rf_loader *ld)
{
	const char *op = NULL;
	int ret = rf__window_wait(t);

	if (ret >= 0)
		return ret;
	rf_var_error(t->marker[t->iter % t->nmark], &op);
	rf__trainer_msg(t, "iteration failed in op %s: %s%s%s", op ? op : "?", strerror(-ret),
			rf__loader_sep(ld), rf_loader_last_error(ld));
	return ret;
}

/* opts.barrier_every: wait for all work after every N batches of the pass. */
static int rf__barrier(struct rf_trainer *t, struct rf_loader *ld, uint64_t done)
{
	int ret;

	if (!t->o.barrier_every || done % t->o.barrier_every != 0)
		return 0;
	if ((ret = rf_engine_wait_all(t->eng)) >= 0)
		return ret;
	rf__trainer_msg(t, "barrier after batch %" PRIu64 ": an op failed: %s%s%s", done - 1,
			strerror(-ret), rf__loader_sep(ld), rf_loader_last_error(ld));
	return ret;
}

/* The running mean training loss (every opts.log_every batches and at the end: the
 * loss of the batches since the last read, waiting for them only), else -1. */
struct rf__progress {
	uint64_t logged;
	double lsum;
};

static void rf__report(struct rf_trainer *t, struct rf__progress *pr, uint64_t done,
		       uint64_t nb)
{
	double loss = -1;

	if (t->o.log_every && (done % t->o.log_every == 0 || done == nb)) {
		uint64_t b, seen = done * t->o.batch_size;
		unsigned r;
		for (b = pr->logged; b < done; b++) {
			for (r = 0; r < t->K; r++) {
				float v = 0;
				if (rf_tensor_read(t->tr[r].lv[b], &v) == 0)
					pr->lsum += v;
			}
		}
		pr->logged = done;
		if (seen > t->train_view.count)
			seen = t->train_view.count;
		/* with P processes, this rank's shards: 1/P of the records (the epoch's
		 * figures are summed over the ranks) */
		loss = pr->lsum / ((double)seen / t->P);
	}
	t->o.progress(t->o.progress_ctx, t->epochs_done + 1, done, nb, loss);
}

/* Push every batch of epoch `epoch` of ld through an iteration, with the look-ahead
 * queue Q and the window; a training pass starts at t->ebatch, and returns 1 where
 * opts.max_steps stops it (t->stop_at: the batches done). The pass queues the next epoch's first batches as the
 * epoch's last ones are pushed and leaves them in Q for the next pass. */
static int rf__pass_loop(struct rf_trainer *t, struct rf_loader *ld, struct rf__queue *Q,
			 uint64_t epoch, int train)
{
	unsigned prefetch = t->o.prefetch ? t->o.prefetch : 4;
	unsigned ahead = prefetch > 1 ? prefetch - 1 : 1;
	uint64_t nb = rf_loader_batches_per_epoch(ld), done = train ? t->ebatch : 0;
	/* resumed inside the epoch: the batches before it, as this rank's share */
	struct rf__progress pr = { done, train ? t->carry_loss / t->P : 0 };
	int ret;

	if (ahead > RF__MAXQ)
		ahead = RF__MAXQ;
	for (;;) {
		if ((ret = rf__fill(t, ld, Q, ahead, epoch + 1)) < 0)
			return ret;
		if (!Q->qn || Q->q[Q->qh].epoch != epoch)
			return 0;
		if ((ret = rf__wait_window(t, ld)) < 0)
			return ret;
		ret = train ? rf__train_iter(t, &Q->q[Q->qh]) : rf__eval_iter(t, &Q->q[Q->qh]);
		if (ret < 0) {
			rf__trainer_msg(t, "pushing batch %" PRIu64 ": %s (%s)", Q->q[Q->qh].index,
					strerror(-ret), rf_last_error());
			return ret;
		}
		Q->qh = (Q->qh + 1) % RF__MAXQ;
		Q->qn--;
		done++;
		if ((ret = rf__barrier(t, ld, done)) < 0)
			return ret;
		/* opts.max_steps reached inside the epoch: stop (after the checkpoint, if
		 * there is a file for it); at its last batch the epoch just ends */
		int stop = train && t->o.max_steps && t->steps >= t->o.max_steps && done < nb;
		if (train && done < nb && t->o.checkpoint &&
		    (stop || (t->o.checkpoint_every && done % t->o.checkpoint_every == 0)) &&
		    (ret = rf__save_mid(t, done)) < 0)
			return ret;
		if (stop) {
			t->stop_at = done;
			return 1;
		}
		if (train && t->o.progress)
			rf__report(t, &pr, done, nb);
	}
}

static int rf__pass(struct rf_trainer *t, struct rf_loader *ld, struct rf__queue *Q,
		    uint64_t epoch, int train)
{
	int ret = rf__queue_sync(t, ld, Q, epoch, train ? t->ebatch : 0);

	if (train && t->o.max_steps && t->steps >= t->o.max_steps && t->ebatch) {
		t->stop_at = t->ebatch;   /* stopped here already: nothing more to push */
		return 1;
	}

	if (ret == 0)
		ret = rf__pass_loop(t, ld, Q, epoch, train);
	if (ret < 0)
		Q->valid = 0;
	return ret;
}

/* ---- an epoch, an evaluation ---- */

/* seconds on the library's one monotonic clock (rf-internal.h) */
static double rf__now(void)
{
	return (double)rf__mono_ns() * 1e-9;
}

static int rf__evaluate(struct rf_trainer *t, double *acc, double *loss)
{
	double l = 0;
	uint64_t c = 0, nb = rf_loader_batches_per_epoch(t->test_ld);
	unsigned r;
	int ret = 0;

	for (r = 0; r < t->K && ret == 0; r++)
		ret = rf__slots_clear(&t->te[r], t->rep[r]->s);
	if (ret == 0)
		ret = rf__pass(t, t->test_ld, &t->eq, t->evals++, 0);
	for (r = 0; r < t->K && ret == 0; r++)
		ret = rf__slots_sum(&t->te[r], nb, &l, &c);
	if (ret == 0)
		ret = rf__dist_sum(t, &l, &c);
	if (ret < 0) {
		if (!t->msg[0])
			rf__trainer_msg(t, "evaluation failed: %s%s%s", strerror(-ret),
					rf__loader_sep(t->test_ld), rf_loader_last_error(t->test_ld));
		return ret;
	}
	*acc = (double)c / (double)t->test_view.count;
	if (loss)
		*loss = l / (double)t->test_view.count;
	return 0;
}

/* The training part: the pass, then wait for every replica's parameters (the epoch is
 * over when they are written) and add up the slots. */
static int rf__train_pass(struct rf_trainer *t, double *l, uint64_t *c, int *stopped)
{
	uint64_t nb = rf_loader_batches_per_epoch(t->train_ld);
	unsigned r;
	int ret = 0;

	for (r = 0; r < t->K && ret == 0; r++)
		ret = rf__slots_clear(&t->tr[r], t->rep[r]->s);
	if (ret == 0)
		ret = rf__pass(t, t->train_ld, &t->tq, t->epochs_done, 1);
	*stopped = ret == 1;
	if (ret == 1)
		ret = 0;
	for (r = 0; r < t->K && ret == 0; r++)
		ret = rf_tensor_wait(t->rep[r]->params);
	for (r = 0; r < t->K && ret == 0; r++)
		ret = rf__slots_sum(&t->tr[r], nb, l, c);
	if (ret == 0)
		ret = rf__dist_sum(t, l, c);
	if (ret == 0) {
		/* a resumed epoch: the batches before the checkpoint (every rank's) */
		*l += t->carry_loss;
		*c += t->carry_corr;
	}
	if (ret < 0 && !t->msg[0]) {
		const char *op = NULL;
		rf_var_error(t->rep[0]->params->var, &op);
		rf__trainer_msg(t, "training failed%s%s: %s%s%s", op ? " in op " : "",
				op ? op : "", strerror(-ret), rf__loader_sep(t->train_ld),
				rf_loader_last_error(t->train_ld));
	}
	return ret;
}

/* The parameters' hash; with several processes, equal on every rank (min = max). */
static int rf__check_replicas(struct rf_trainer *t, uint64_t *hash)
{
	uint64_t v[2];
	int ret = rf__params_hash(t, hash);

	if (ret < 0) {
		rf__trainer_msg(t, "reading the parameters back failed: %s", strerror(-ret));
		return ret;
	}
	if (t->P == 1)
		return 0;
	v[0] = *hash;
	v[1] = ~*hash;
	if ((ret = rf_comm_allreduce_host(t->comm, v, 2, RF_COMM_U64, RF_COMM_MIN, 1)) < 0) {
		rf__trainer_msg(t, "comparing the replicas failed: %s", rf_comm_last_error(t->comm));
		return ret;
	}
	if (v[0] != ~v[1]) {
		rf__trainer_msg(t, "the replicas differ after epoch %u: parameter hashes range from "
				"%016" PRIx64 " to %016" PRIx64 " over the %u processes (this rank, %u: "
				"%016" PRIx64 ")", t->epochs_done, v[0], ~v[1], t->P, t->rank, *hash);
		return -EPROTO;
	}
	return 0;
}

/* The running statistics (BN): each replica's moved with its own shard. At the end of
 * an epoch every replica and process takes their mean, so evaluation, the checkpoint
 * and a resumed run all see the same values (DDP instead broadcasts rank 0's before
 * each forward; the mean uses every shard). */
static int rf__sync_buffers(struct rf_trainer *t)
{
	struct rf_tensor *b[RF_TRAIN_MAX_DEVICES];
	struct rf_model *m0 = t->rep[0];
	unsigned r;
	int ret = 0;

	if (!m0->bufs || t->K * t->P == 1)
		return 0;
	for (r = 0; r < t->K; r++)
		b[r] = t->rep[r]->bufs;
	if (t->K > 1)
		ret = rf_sum(m0->s, m0->bufs, b, (int)t->K);
	if (ret == 0 && t->P > 1)
		ret = rf_comm_allreduce(t->comm, m0->bufs, RF_MODEL_MAX_LAYERS);
	if (ret == 0)
		ret = rf_scale(m0->s, m0->bufs, 1.0f / (float)(t->K * t->P));
	for (r = 1; r < t->K && ret == 0; r++)
		ret = rf_copy(m0->s, t->rep[r]->bufs, m0->bufs);
	if (ret == 0)
		ret = rf_tensor_wait(m0->bufs);
	if (ret < 0)
		rf__trainer_msg(t, "averaging the running statistics failed: %s%s%s", strerror(-ret),
				t->P > 1 ? ": " : "", t->P > 1 ? rf_comm_last_error(t->comm) : "");
	return ret;
}

static int rf__epoch(struct rf_trainer *t, struct rf_epoch_stats *st)
{
	uint64_t c = 0;
	double t0, l = 0;
	int ret;

	memset(st, 0, sizeof(*st));
	st->epoch = t->epochs_done + 1;     /* named by a failure, in training or evaluation */
	if (t->o.eval_only) {
		rf__trainer_msg(t, "this trainer was opened to evaluate only (opts.eval_only): "
				"it has no training set");
		return -EINVAL;
	}
	/* this epoch's rate (a constant schedule gives o.lr itself back); SGD's over K*P */
	float lr = (float)rf_lr_at(&t->o.sched, t->o.lr, t->epochs_done);
	t->opt.lr = lr / (t->o.adamw ? 1.0f : (float)(t->K * t->P));
	st->lr = lr;
	uint64_t nb = rf_loader_batches_per_epoch(t->train_ld), start = t->ebatch, end = nb;
	int stopped;
	uint64_t epoch = t->epochs_done;
	t0 = rf__now();
	if ((ret = rf__train_pass(t, &l, &c, &stopped)) < 0)
		return ret;
	/* the batches this call trained on, every gather done (the parameters waited
	 * for): not those of the next epoch the pass queued ahead */
	st->images_skipped = rf_loader_images_skipped(t->train_ld, epoch, start,
						      stopped ? t->stop_at : nb);
	st->seconds = rf__now() - t0;
	st->test_acc = st->test_loss = -1;
	st->samples = t->train_view.count;
	if (stopped) {
		/* opts.max_steps: the epoch goes on from here in a later call */
		end = t->stop_at;
		t->ebatch = end;
		t->carry_loss = l;
		t->carry_corr = c;
		st->stopped = 1;
		st->batches_done = end;
		st->samples = end * t->o.batch_size;
	} else {
		t->epochs_done++;
		t->ebatch = 0;
		t->carry_loss = 0;
		t->carry_corr = 0;
	}
	st->epoch = t->epochs_done + (unsigned)stopped;
	st->batches = end - start;
	st->train_loss = st->samples ? l / (double)st->samples : 0;
	st->train_acc = st->samples ? (double)c / (double)st->samples : 0;
	/* the rate of the batches this call trained (all of them unless resumed inside) */
	double trained = (double)t->train_view.count * (double)(end - start) / (double)(nb ? nb : 1);
	st->samples_per_s = st->seconds > 0 ? trained / st->seconds : 0;
	if ((ret = rf__check_replicas(t, &st->param_hash)) < 0)
		return ret;
	if (stopped)
		return 0;
	if ((ret = rf__sync_buffers(t)) < 0)
		return ret;
	if (!t->o.no_eval) {
		t0 = rf__now();
		ret = rf__evaluate(t, &st->test_acc, &st->test_loss);
		st->eval_seconds = rf__now() - t0;
	}
	return ret;
}

int rf_trainer_epoch(struct rf_trainer *t, struct rf_epoch_stats *st)
{
	int ret;

	t->msg[0] = 0;
	if ((ret = rf__refuse_call(t, 0)) == 0 && (ret = rf__epoch(t, st)) < 0)
		rf__note_broken(t);
	return rf__trainer_end(t, ret);
}

int rf_trainer_evaluate(struct rf_trainer *t, double *acc, double *loss)
{
	int ret;

	t->msg[0] = 0;
	if (t->no_test) {
		rf__trainer_msg(t, "rf_trainer_evaluate: no test set (no_eval, and none was "
				"named or found beside %s)", t->data_dir);
		return rf__trainer_end(t, -ENOENT);
	}
	if ((ret = rf__refuse_call(t, 0)) == 0 && (ret = rf__evaluate(t, acc, loss)) < 0)
		rf__note_broken(t);
	return rf__trainer_end(t, ret);
}
