/* train/trainer-ckpt.c -- the trainer's checkpoints (checkpoint.h): replica 0's
 * parameters (and momentum buffers, with momentum) and the run's settings out; the
 * parameters and buffers into every replica and the epoch count, step count and init
 * generator's state back in. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer-impl.h"
#include "checkpoint.h"

/* meta.extra: the init generator's seed and counter, the init kind and the training
 * record count, then the optimiser's momentum, weight decay (float bits) and Nesterov
 * flag, little-endian. A file of 32 bytes (before the optimiser) was plain SGD. */
#define RF__EXTRA_LEN 104  /* + the lr schedule: kind, step, gamma, warm-up, epochs;
			    * + 1 for AdamW */

static void rf__put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t rf__get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Names of the optimiser's state: PyTorch's parameter name + ".momentum_buffer", or
 * ".exp_avg" and ".exp_avg_sq" (AdamW). */
typedef char rf__bufname[RF_CKPT_NAME_MAX + 1];

/* Blocks of optimiser state per replica: 0 (plain SGD), 1 (momentum), 2 (AdamW). */
static unsigned rf__nstate(const struct rf_trainer *t)
{
	return t->o.adamw ? 2 : t->o.momentum > 0 ? 1 : 0;
}

/* The blob of tensor p named name, its floats at data. */
static void rf__blob(struct rf_ckpt_blob *bl, const char *name, const struct rf_param_spec *p,
		     float *data)
{
	memset(bl, 0, sizeof(*bl));
	bl->name = name;
	bl->dtype = RF_CKPT_F32;
	bl->ndim = (uint32_t)p->ndim;
	for (int d = 0; d < p->ndim; d++)
		bl->shape[d] = (uint64_t)p->shape[d];
	bl->data = data;
	bl->nbytes = p->numel * sizeof(float);
}

/* One blob per parameter tensor (PyTorch names and shapes), its data in host; then one
 * per parameter and state block j, its data at host + (1+j)*numel; then one per
 * running statistic (a BN's running_mean and running_var), at host + (1+states)*numel.
 * Returns the count. */
static unsigned rf__blobs(struct rf_trainer *t, struct rf_ckpt_blob *bl, float *host,
			  rf__bufname *names)
{
	static const char *const suffix[2][2] = { { "momentum_buffer", "" },
						  { "exp_avg", "exp_avg_sq" } };
	unsigned k, n = t->spec->ntensors, nb = (1 + rf__nstate(t)) * n;
	float *bufs = host + (size_t)(1 + rf__nstate(t)) * t->spec->numel;

	for (unsigned b = 0; b < nb; b++) {
		const struct rf_param_spec *p = &t->spec->p[b % n];
		const char *name = p->name;
		if (b >= n) {
			snprintf(names[b - n], sizeof(names[b - n]), "%s.%s", p->name,
				 suffix[t->o.adamw][b / n - 1]);
			name = names[b - n];
		}
		rf__blob(&bl[b], name, p, host + (size_t)(b / n) * t->spec->numel + p->offset);
	}
	for (k = 0; k < t->spec->nbufs; k++)
		rf__blob(&bl[nb + k], t->spec->b[k].name, &t->spec->b[k], bufs + t->spec->b[k].offset);
	return nb + t->spec->nbufs;
}

static uint32_t rf__fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static void rf__fill_meta(struct rf_trainer *t, struct rf_ckpt_meta *meta)
{
	snprintf(meta->model, sizeof(meta->model), "%s", t->spec->name);
	meta->epoch = t->epochs_done;
	meta->seed = t->o.seed;
	meta->step = t->steps;
	meta->lr = t->o.lr;
	meta->batch_size = t->o.batch_size;
	meta->devices = t->K;
	rf__put64(meta->extra, t->prng->seed);
	rf__put64(meta->extra + 8, t->prng->counter);
	rf__put64(meta->extra + 16, (uint64_t)t->o.init);
	rf__put64(meta->extra + 24, t->train_view.count);
	rf__put64(meta->extra + 32, rf__fbits(t->o.momentum));
	rf__put64(meta->extra + 40, rf__fbits(t->o.weight_decay));
	rf__put64(meta->extra + 48, (uint64_t)t->o.nesterov);
	rf__put64(meta->extra + 56, (uint64_t)t->o.sched.kind);
	rf__put64(meta->extra + 64, t->o.sched.step_epochs);
	memcpy(meta->extra + 72, &t->o.sched.gamma, 8);
	rf__put64(meta->extra + 80, t->o.sched.warmup_epochs);
	rf__put64(meta->extra + 88, t->o.sched.kind == RF_LR_COSINE ? t->o.sched.epochs : 0);
	rf__put64(meta->extra + 96, (uint64_t)t->o.adamw);
	meta->extra_len = RF__EXTRA_LEN;
}

/* The one place each checkpoint call is made (their messages land in t->msg). */
static int rf__ckpt_write(struct rf_trainer *t, const char *path, const struct rf_ckpt_meta *meta,
			  const struct rf_ckpt_blob *bl, unsigned nb)
{
	int ret = rf_ckpt_save(rf_engine_ring(t->eng), path, meta, bl, nb);

	if (ret < 0)
		rf__trainer_msg(t, "%s", rf_last_error());
	return ret;
}

static int rf__ckpt_read(struct rf_trainer *t, const char *path, struct rf_ckpt_meta *meta,
			 struct rf_ckpt_blob *bl, unsigned nb)
{
	int ret = rf_ckpt_load(rf_engine_ring(t->eng), path, meta, bl, nb);

	if (ret < 0)
		rf__trainer_msg(t, "%s", rf_last_error());
	return ret;
}

static int rf__save(struct rf_trainer *t, const char *path)
{
	struct rf_ckpt_blob bl[3 * RF_MODEL_MAX_TENSORS + RF_MODEL_MAX_BUFFERS];
	rf__bufname names[2 * RF_MODEL_MAX_TENSORS];
	struct rf_ckpt_meta meta = { 0 };
	unsigned ns = rf__nstate(t);
	float *host = malloc((t->spec->numel * (1 + ns) + t->spec->buf_numel) * sizeof(float));
	struct rf_model *m0 = t->rep[0];
	int ret;

	if (!host)
		return -ENOMEM;
	ret = rf_tensor_read(m0->params, host);   /* waits for the last SGD */
	if (ret == 0 && ns)
		ret = t->o.adamw ? rf_model_moments(m0) : rf_model_momentum(m0);
	if (ret == 0 && ns)
		ret = rf_tensor_read(m0->mom, host + t->spec->numel);
	if (ret == 0 && ns > 1)
		ret = rf_tensor_read(m0->mom2, host + 2 * t->spec->numel);
	if (ret == 0 && m0->bufs)
		ret = rf_tensor_read(m0->bufs, host + (1 + ns) * t->spec->numel);
	if (ret < 0) {
		rf__trainer_msg(t, "%s: cannot read the parameters: %s", path, strerror(-ret));
		free(host);
		return ret;
	}
	rf_engine_wait_var(t->eng, t->prng->var);
	rf__fill_meta(t, &meta);
	unsigned nb = rf__blobs(t, bl, host, names);
	ret = rf__ckpt_write(t, path, &meta, bl, nb);
	free(host);
	return ret;
}

static const char *const rf__sched_names[] = { "constant", "step", "cosine" };

/* The schedule must be the run's (a file from before it was saved is constant). */
static int rf__check_same_sched(struct rf_trainer *t, const char *path,
				const struct rf_ckpt_meta *meta)
{
	struct rf_lr_schedule s = { 0 }, m = t->o.sched;

	if (meta->extra_len >= 96) {
		s.kind = (enum rf_lr_kind)rf__get64(meta->extra + 56);
		s.step_epochs = (unsigned)rf__get64(meta->extra + 64);
		memcpy(&s.gamma, meta->extra + 72, 8);
		s.warmup_epochs = (unsigned)rf__get64(meta->extra + 80);
		s.epochs = (unsigned)rf__get64(meta->extra + 88);
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
			rf__sched_names[s.kind <= RF_LR_COSINE ? s.kind : 0], s.step_epochs, s.gamma,
			s.warmup_epochs, s.epochs, rf__sched_names[m.kind], m.step_epochs, m.gamma,
			m.warmup_epochs, m.epochs);
	return -ESTALE;
}

/* The optimiser must be the run's (a file from before it was saved is plain SGD). */
static int rf__check_same_optim(struct rf_trainer *t, const char *path,
				const struct rf_ckpt_meta *meta)
{
	int has = meta->extra_len >= 56;
	uint32_t mb = has ? (uint32_t)rf__get64(meta->extra + 32) : 0;
	uint32_t wb = has ? (uint32_t)rf__get64(meta->extra + 40) : 0;
	int nest = has ? (int)rf__get64(meta->extra + 48) : 0;
	int adamw = meta->extra_len >= 104 ? (int)rf__get64(meta->extra + 96) : 0;
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
		return rf__check_same_sched(t, path, meta);
	rf__trainer_msg(t, "%s: saved by a run with --momentum %g --wd %g%s, this run has "
			"--momentum %g --wd %g%s", path, (double)m, (double)wd,
			nest ? " --nesterov" : "", (double)t->o.momentum,
			(double)t->o.weight_decay, t->o.nesterov ? " --nesterov" : "");
	return -ESTALE;
}

/* The continuation must be the same run: the same seed, batch size, learning rate,
 * training records and optimiser. */
static int rf__check_same_run(struct rf_trainer *t, const char *path,
			      const struct rf_ckpt_meta *meta)
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
	else if (meta->extra_len >= 32 && rf__get64(meta->extra + 24) != t->train_view.count)
		rf__trainer_msg(t, "%s: saved by a run on %" PRIu64 " training records, this "
				"run has %" PRIu64, path, rf__get64(meta->extra + 24),
				t->train_view.count);
	else
		return rf__check_same_optim(t, path, meta);
	return -ESTALE;
}

/* Every replica gets the saved weights (views: padding stays 0); the generator, epoch
 * and step counts continue from the file's. */
static int rf__restore(struct rf_trainer *t, const char *path, const struct rf_ckpt_meta *meta,
		       const float *host)
{
	unsigned r, k;
	int ret = 0;

	for (r = 0; r < t->K && ret == 0; r++)
		for (k = 0; k < t->spec->ntensors && ret == 0; k++)
			ret = rf_tensor_write(t->rep[r]->p[k], host + t->spec->p[k].offset);
	for (r = 0; rf__nstate(t) && r < t->K && ret == 0; r++) {
		struct rf_model *m = t->rep[r];
		ret = t->o.adamw ? rf_model_moments(m) : rf_model_momentum(m);
		for (k = 0; k < t->spec->ntensors && ret == 0; k++)
			ret = rf_tensor_write(m->v[k], host + t->spec->numel + t->spec->p[k].offset);
		for (k = 0; t->o.adamw && k < t->spec->ntensors && ret == 0; k++)
			ret = rf_tensor_write(m->v2[k],
					      host + 2 * t->spec->numel + t->spec->p[k].offset);
	}
	for (r = 0; t->spec->nbufs && r < t->K && ret == 0; r++)
		for (k = 0; k < t->spec->nbufs && ret == 0; k++)
			ret = rf_tensor_write(t->rep[r]->b[k], host + (1 + rf__nstate(t)) * t->spec->numel +
					      t->spec->b[k].offset);
	if (ret < 0) {
		rf__trainer_msg(t, "%s: cannot write the parameters: %s", path, strerror(-ret));
		return ret;
	}
	rf_engine_wait_var(t->eng, t->prng->var);
	if (meta->extra_len >= 16)
		t->prng->counter = rf__get64(meta->extra + 8);
	t->epochs_done = (unsigned)meta->epoch;
	t->steps = meta->step;
	return 0;
}

static int rf__load(struct rf_trainer *t, const char *path)
{
	struct rf_ckpt_blob bl[3 * RF_MODEL_MAX_TENSORS + RF_MODEL_MAX_BUFFERS];
	rf__bufname names[2 * RF_MODEL_MAX_TENSORS];
	struct rf_ckpt_meta meta = { 0 };
	float *host = calloc(t->spec->numel * (1 + rf__nstate(t)) + t->spec->buf_numel,
			     sizeof(float));
	struct rf_ckpt_meta probe;
	int ret;

	if (!host)
		return -ENOMEM;
	/* the optimiser first: a file of another one holds another set of tensors, and
	 * the message should say which setting differs */
	if (rf_ckpt_probe(path, &probe) >= 0 && !strcmp(probe.model, t->spec->name) &&
	    (ret = rf__check_same_optim(t, path, &probe)) < 0) {
		free(host);
		return ret;
	}
	snprintf(meta.model, sizeof(meta.model), "%s", t->spec->name);
	unsigned nb = rf__blobs(t, bl, host, names);
	ret = rf__ckpt_read(t, path, &meta, bl, nb);
	if (ret == 0)
		ret = rf__check_same_run(t, path, &meta);
	if (ret == 0)
		ret = rf__restore(t, path, &meta, host);
	free(host);
	return ret;
}

int rf_trainer_save(struct rf_trainer *t, const char *path)
{
	t->msg[0] = 0;
	return rf__trainer_end(t, rf__save(t, path));
}

int rf_trainer_load(struct rf_trainer *t, const char *path)
{
	t->msg[0] = 0;
	return rf__trainer_end(t, rf__load(t, path));
}
