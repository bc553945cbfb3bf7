/* train/trainer-ckpt-check.c -- whether a checkpoint is of this run: every field of its
 * run state (runstate.h) within what a run writes, and the run's settings -- seed,
 * batch size, lr, augmentation, order, normalization, training records, optimiser,
 * schedule -- the file's, each refused by name (trainer-ckpt.c reads and restores). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "trainer-impl.h"
#include "checkpoint.h"
#include "runstate.h"

/* The model input's mean and std per channel as one word: 0 for none, else an FNV-1a
 * 64 of the channel count and the floats' bits (never 0). */
uint64_t rf__norm_hash(const struct rf_model_input *in)
{
	uint64_t h = 0xcbf29ce484222325ull;
	uint32_t w[1 + 2 * RF_MODEL_NORM_MAX] = { in->norm_channels };

	if (!in->norm_channels)
		return 0;
	memcpy(w + 1, in->mean, sizeof(in->mean));
	memcpy(w + 1 + RF_MODEL_NORM_MAX, in->std, sizeof(in->std));
	for (unsigned i = 0; i < 1 + in->norm_channels; i++)
		for (unsigned b = 0; b < 4; b++)
			h = (h ^ ((w[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
	for (unsigned i = 0; i < in->norm_channels; i++)
		for (unsigned b = 0; b < 4; b++)
			h = (h ^ ((w[1 + RF_MODEL_NORM_MAX + i] >> (8 * b)) & 0xff)) *
			    0x100000001b3ull;
	return h | 1;
}

static const char *const rf__sched_names[] = { "constant", "step", "cosine" };

/* The schedule must be the run's (a file from before it was saved is constant). */
static int rf__check_same_sched(struct rf_trainer *t, const char *path,
				const struct rf__runstate *rs)
{
	struct rf_lr_schedule s = { 0 }, m = t->o.sched;

	if (rf__rs_has(rs, RF__RS_SCHED_EPOCHS)) {
		s.kind = (enum rf_lr_kind)rs->v[RF__RS_SCHED_KIND];
		s.step_epochs = (unsigned)rs->v[RF__RS_SCHED_STEP];
		memcpy(&s.gamma, &rs->v[RF__RS_SCHED_GAMMA], 8);
		s.warmup_epochs = (unsigned)rs->v[RF__RS_SCHED_WARMUP];
		s.epochs = (unsigned)rs->v[RF__RS_SCHED_EPOCHS];
	}
	if (m.kind != RF_LR_COSINE)
		m.epochs = 0;
	if (m.kind != RF_LR_STEP) {
		m.step_epochs = 0;
		m.gamma = 0;
	}
	if (s.kind == m.kind && s.step_epochs == m.step_epochs && s.gamma == m.gamma &&
	    s.warmup_epochs == m.warmup_epochs && s.epochs == m.epochs)
		return 0;
	rf__trainer_msg(t, "%s: saved by a run with --lr-schedule %s (step %u, gamma %g, "
			"warm-up %u, cosine over %u epochs), this run has %s (step %u, gamma %g, "
			"warm-up %u, cosine over %u epochs)", path,
			rf__sched_names[s.kind], s.step_epochs, s.gamma,
			s.warmup_epochs, s.epochs, rf__sched_names[m.kind], m.step_epochs, m.gamma,
			m.warmup_epochs, m.epochs);
	return -ESTALE;
}

/* The run state's fields that hold a count or a choice, each checked once against
 * what it can be (they are CRC-checked, but a file that says 2^32 epochs, or a flag of
 * 7, was not written by a run): 0, or -EBADMSG with a message naming the field. */
static int rf__check_fields(struct rf_trainer *t, const char *path,
			    const struct rf_ckpt_meta *meta, const struct rf__runstate *rs)
{
	static const struct { unsigned tag; uint64_t max; } f[] = {
		{ RF__RS_NESTEROV, 1 },
		{ RF__RS_SCHED_KIND, RF_LR_COSINE },
		{ RF__RS_SCHED_STEP, UINT32_MAX },
		{ RF__RS_SCHED_WARMUP, UINT32_MAX },
		{ RF__RS_SCHED_EPOCHS, UINT32_MAX },
		{ RF__RS_ADAMW, 1 },
		{ RF__RS_AUGMENT, 1 },
		{ RF__RS_ORDER, 2 },
	};

	if (meta->epoch >= UINT32_MAX) {
		rf__trainer_msg(t, "%s: %" PRIu64 " epochs done: expected fewer than 2^32", path,
				meta->epoch);
		return -EBADMSG;
	}
	for (unsigned i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		uint64_t v = rs->v[f[i].tag];
		if (rf__rs_has(rs, f[i].tag) && v > f[i].max) {
			rf__trainer_msg(t, "%s: %s is %" PRIu64 " (run state version %u, field %u): "
					"expected 0..%" PRIu64, path, rf__rs_name(f[i].tag), v,
					rs->version, f[i].tag, f[i].max);
			return -EBADMSG;
		}
	}
	return 0;
}

/* The optimiser must be the run's (a file from before it was saved is plain SGD). rs:
 * meta's run state (rf__rs_of). */
int rf__ckpt_same_optim(struct rf_trainer *t, const char *path, const struct rf_ckpt_meta *meta,
			const struct rf__runstate *rs)
{
	int ret = rf__check_fields(t, path, meta, rs);

	if (ret < 0)
		return ret;
	uint32_t mb = (uint32_t)rs->v[RF__RS_MOMENTUM], wb = (uint32_t)rs->v[RF__RS_WD];
	int nest = (int)rs->v[RF__RS_NESTEROV], adamw = (int)rs->v[RF__RS_ADAMW];
	float m, wd;

	memcpy(&m, &mb, 4);
	memcpy(&wd, &wb, 4);
	if (adamw != t->o.adamw) {
		rf__trainer_msg(t, "%s: saved by a run with --optimizer %s, this run has %s", path,
				adamw ? "adamw" : "sgd", t->o.adamw ? "adamw" : "sgd");
		return -ESTALE;
	}
	if (mb == rf__fbits(t->o.momentum) && wb == rf__fbits(t->o.weight_decay) &&
	    nest == t->o.nesterov)
		return rf__check_same_sched(t, path, rs);
	rf__trainer_msg(t, "%s: saved by a run with --momentum %g --wd %g%s, this run has "
			"--momentum %g --wd %g%s", path, (double)m, (double)wd,
			nest ? " --nesterov" : "", (double)t->o.momentum,
			(double)t->o.weight_decay, t->o.nesterov ? " --nesterov" : "");
	return -ESTALE;
}

/* The continuation must be the same run: the same seed, batch size, learning rate,
 * training records and optimiser. rs: meta's run state. */
int rf__ckpt_same_run(struct rf_trainer *t, const char *path, const struct rf_ckpt_meta *meta,
		      const struct rf__runstate *rs)
{
	if (meta->seed != t->o.seed)
		rf__trainer_msg(t, "%s: saved by a run with --seed %" PRIu64 ", this run has "
				"--seed %" PRIu64, path, meta->seed, t->o.seed);
	else if (meta->batch_size != t->o.batch_size)
		rf__trainer_msg(t, "%s: saved by a run with --batch-size %u, this run has %u",
				path, meta->batch_size, t->o.batch_size);
	else if ((float)meta->lr != t->o.lr)
		rf__trainer_msg(t, "%s: saved by a run with --lr %g, this run has %g", path,
				meta->lr, (double)t->o.lr);
	else if ((int)rs->v[RF__RS_AUGMENT] != t->o.augment)
		rf__trainer_msg(t, "%s: saved by a run %s --augment, this run is %s it", path,
				t->o.augment ? "without" : "with", t->o.augment ? "with" : "without");
	else if (rs->v[RF__RS_ORDER] && rs->v[RF__RS_ORDER] - 1 != (uint64_t)t->o.order)
		rf__trainer_msg(t, "%s: saved by a run with --order %s, this run has --order %s",
				path, rs->v[RF__RS_ORDER] == 1 ? "uniform" : "windowed",
				t->o.order ? "windowed" : "uniform");
	else if (rs->v[RF__RS_NORM] != rf__norm_hash(&t->spec->in))
		rf__trainer_msg(t, "%s: saved by a run %s --normalize, this run %s", path,
				rs->v[RF__RS_NORM] ? "with" : "without", t->spec->in.norm_channels ?
				(rs->v[RF__RS_NORM] ? "has another mean or std" : "has it") :
				"has none");
	else if (rf__rs_has(rs, RF__RS_TRAIN_COUNT) && rs->v[RF__RS_TRAIN_COUNT] != t->train_view.count)
		rf__trainer_msg(t, "%s: saved by a run on %" PRIu64 " training records, this "
				"run has %" PRIu64, path, rs->v[RF__RS_TRAIN_COUNT],
				t->train_view.count);
	else
		return rf__ckpt_same_optim(t, path, meta, rs);
	return -ESTALE;
}

