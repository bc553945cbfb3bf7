/* train/trainer-msg.c -- the trainer's error messages: the running call's, and the last
 * failing call's (rf_trainer_last_error, rf_last_error). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "trainer-impl.h"

void rf__trainer_msg(struct rf_trainer *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->msg, sizeof(t->msg), fmt, ap);
	va_end(ap);
}

int rf__trainer_end(struct rf_trainer *t, int ret)
{
	const char *ce = t->comm ? rf_comm_last_error(t->comm) : "";

	if (ret >= 0)
		return ret;
	/* a failed collective poisons what follows it: its own message says which */
	if (ce[0] && !strstr(t->msg, ce))
		return rf__fail_into(t->last_error, sizeof(t->last_error), ret, "%s; comm: %s",
				     t->msg, ce);
	return rf__fail_into(t->last_error, sizeof(t->last_error), ret, "%s", t->msg);
}

void rf__note_broken(struct rf_trainer *t)
{
	if (t->broken[0])
		return;
	for (unsigned w = 0; w < t->nmark; w++)
		if (t->marker && t->marker[w] && rf_var_error(t->marker[w], NULL)) {
			snprintf(t->broken, sizeof(t->broken), "%s",
				 t->msg[0] ? t->msg : "an op failed");
			/* nothing more is read: the prefetched batches' reads (a stalled
			 * server's, retried, timed out one after another) end now, not in the
			 * teardown's wait (an error at 40 s, the exit at 200 s) */
			rf_loader_cancel(t->train_ld);
			rf_loader_cancel(t->test_ld);
			return;
		}
}

/* Whether a failed step left a replica's weights poisoned (its block, or a tensor's
 * view an update wrote). */
static int rf__weights_poisoned(const struct rf_trainer *t)
{
	for (unsigned r = 0; r < t->K; r++) {
		if (rf_var_error(t->rep[r]->params->var, NULL))
			return 1;
		for (unsigned i = 0; i < t->spec->ntensors; i++)
			if (t->rep[r]->p[i] && rf_var_error(t->rep[r]->p[i]->var, NULL))
				return 1;
	}
	return 0;
}

/* A pass that failed poisons what its ops wrote (markers, result slots, activations,
 * and in training the weights and optimiser state, as of a step the trainer cannot
 * name): nothing later is pushed on it, which would fail in the same op again, or
 * with an unrelated message. weights: the call reads the weights (save, hashes),
 * which only a failed training step leaves poisoned. */
int rf__refuse_call(struct rf_trainer *t, int weights)
{
	/* every call that asks this of a trainer turns its engine's reactor: on the
	 * engine's thread, outside its ops and callbacks (else it said only "Operation
	 * not permitted", the first push's refusal, without a message) */
	if (rf_engine_may_wait(t->eng, "the trainer") < 0) {
		rf__trainer_msg(t, "%s", rf_last_error());
		return -EDEADLK;
	}
	if (!t->broken[0])
		return 0;
	if (weights && !rf__weights_poisoned(t))
		return 0;   /* an evaluation failed: the weights are as trained */
	rf__trainer_msg(t, "a pass failed before (%s): the trainer's state is of no known "
			"step; destroy it, create another and rf_trainer_load a checkpoint to go "
			"on", t->broken);
	return -EIO;
}

const char *rf__loader_sep(const struct rf_loader *ld)
{
	return rf_loader_last_error(ld)[0] ? "; loader: " : "";
}

const char *rf_trainer_last_error(const struct rf_trainer *t)
{
	return t->last_error;
}
