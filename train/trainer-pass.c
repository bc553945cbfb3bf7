/* train/trainer-pass.c -- one pass over a loader (a training epoch or an evaluation):
 * the look-ahead queue of requested batches, then per batch the window wait, the
 * iteration's push, the optional barrier and the progress report. */
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
			rf__trainer_msg(t, "loader: %s", strerror(-ret));
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

int rf__pass(struct rf_trainer *t, struct rf_loader *ld, struct rf__queue *Q,
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
