/* train/trainer-ckpt.c -- the trainer's checkpoints (checkpoint.h): replica 0's
 * parameters (and momentum buffers, with momentum) and the run's settings out; the
 * parameters and buffers into every replica and the epoch count, step count and init
 * generator's state back in. */
#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer-impl.h"
#include "checkpoint.h"
#include "runstate.h"

/* meta.extra holds the run state (runstate.h): the init generator's seed and counter,
 * the init kind, the training record count, the optimiser, the lr schedule, where
 * inside the epoch the file was taken (struct rf__mid) and augmentation. A field an
 * older file lacks reads as 0: plain SGD, a constant schedule, no augmentation. */
#define RF__ROWS_NAME "rf.replica_running_stats"

/* Where inside epoch meta.epoch a checkpoint was taken: after `batch` batches (0: at
 * its start), their loss sum and correct count over every rank, and, with running
 * statistics and several replicas (each moves its own until the epoch's end), every
 * replica's: row rank*K + r of the blob RF__ROWS_NAME (rows x buf_numel); the named
 * running statistics then hold their mean. */
struct rf__mid {
	uint64_t batch;
	double loss;
	uint64_t corr;
	unsigned rows;
	float *stats;
};

/* Names of the optimiser's state: PyTorch's parameter name + ".momentum_buffer", or
 * ".exp_avg" and ".exp_avg_sq" (AdamW). */
typedef char rf__bufname[RF_CKPT_NAME_MAX + 1];

/* Blocks of optimiser state per replica: 0 (plain SGD), 1 (momentum), 2 (AdamW). */
static unsigned rf__nstate(const struct rf_trainer *t)
{
	return t->o.adamw ? 2 : t->o.momentum > 0 ? 1 : 0;
}

/* The blob of tensor p named name, its floats at data (export.c's too). */
void rf__param_blob(struct rf_ckpt_blob *bl, const char *name, const struct rf_param_spec *p,
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
 * running statistic (a BN's running_mean and running_var), at host + (1+states)*numel;
 * then mid's rows, if any. Returns the count. */
static unsigned rf__blobs(struct rf_trainer *t, struct rf_ckpt_blob *bl, float *host,
			  rf__bufname *names, const struct rf__mid *mid)
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
		rf__param_blob(&bl[b], name, p, host + (size_t)(b / n) * t->spec->numel + p->offset);
	}
	for (k = 0; k < t->spec->nbufs; k++)
		rf__param_blob(&bl[nb + k], t->spec->b[k].name, &t->spec->b[k], bufs + t->spec->b[k].offset);
	nb += t->spec->nbufs;
	if (mid->rows) {
		struct rf_ckpt_blob *r = &bl[nb++];
		memset(r, 0, sizeof(*r));
		r->name = RF__ROWS_NAME;
		r->dtype = RF_CKPT_F32;
		r->ndim = 2;
		r->shape[0] = mid->rows;
		r->shape[1] = t->spec->buf_numel;
		r->data = mid->stats;
		r->nbytes = (uint64_t)mid->rows * t->spec->buf_numel * sizeof(float);
	}
	return nb;
}

static void rf__fill_meta(struct rf_trainer *t, struct rf_ckpt_meta *meta,
			  const struct rf__mid *mid)
{
	uint64_t lb;

	snprintf(meta->model, sizeof(meta->model), "%s", t->spec->name);
	meta->epoch = t->epochs_done;
	meta->seed = t->o.seed;
	meta->step = t->steps;
	meta->lr = t->o.lr;
	meta->batch_size = t->o.batch_size;
	meta->devices = t->K * t->P;  /* replicas: the optimizer state's scale (run state v3) */
	struct rf__runstate rs = { 0 };
	uint64_t *v = rs.v;
	v[RF__RS_PRNG_SEED] = t->prng->seed;
	v[RF__RS_PRNG_COUNTER] = t->prng->counter;
	v[RF__RS_INIT] = (uint64_t)t->o.init;
	v[RF__RS_TRAIN_COUNT] = t->train_view.count;
	v[RF__RS_MOMENTUM] = rf__fbits(t->o.momentum);
	v[RF__RS_WD] = rf__fbits(t->o.weight_decay);
	v[RF__RS_NESTEROV] = (uint64_t)t->o.nesterov;
	v[RF__RS_SCHED_KIND] = (uint64_t)t->o.sched.kind;
	v[RF__RS_SCHED_STEP] = t->o.sched.step_epochs;
	memcpy(&v[RF__RS_SCHED_GAMMA], &t->o.sched.gamma, 8);
	v[RF__RS_SCHED_WARMUP] = t->o.sched.warmup_epochs;
	v[RF__RS_SCHED_EPOCHS] = t->o.sched.kind == RF_LR_COSINE ? t->o.sched.epochs : 0;
	v[RF__RS_ADAMW] = (uint64_t)t->o.adamw;
	v[RF__RS_MID_BATCH] = mid->batch;
	memcpy(&lb, &mid->loss, 8);
	v[RF__RS_MID_LOSS] = lb;
	v[RF__RS_MID_CORR] = mid->corr;
	v[RF__RS_MID_ROWS] = mid->rows;
	v[RF__RS_AUGMENT] = (uint64_t)t->o.augment;
	v[RF__RS_ORDER] = 1 + (uint64_t)t->o.order;
	v[RF__RS_NORM] = rf__norm_hash(&t->spec->in);
	meta->extra_len = rf__rs_put(&rs, meta->extra);
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

/* The first value of the state in host (parameters, then momenta, then running
 * statistics at bufs) that is not finite, as "TENSOR[i] is nan"; 0 when all are. A
 * run that diverged has nothing worth saving or resuming. */
static int rf__nonfinite(const struct rf_trainer *t, const float *host, const float *bufs,
			 char *what, size_t len)
{
	static const char *const state[] = { "", "the momentum of ", "the second moment of " };
	const struct rf_model_spec *sp = t->spec;
	unsigned ns = rf__nstate(t);

	for (unsigned s = 0; s <= ns; s++)
		for (unsigned k = 0; k < sp->ntensors; k++) {
			const float *v = host + s * sp->numel + sp->p[k].offset;
			for (size_t i = 0; i < sp->p[k].numel; i++)
				if (!isfinite(v[i])) {
					snprintf(what, len, "%s%s[%zu] is %s", s ? state[s] : "",
						 sp->p[k].name, i, isnan(v[i]) ? "nan" : "infinite");
					return 1;
				}
		}
	for (unsigned k = 0; bufs && k < sp->nbufs; k++)
		for (size_t i = 0; i < sp->b[k].numel; i++)
			if (!isfinite(bufs[sp->b[k].offset + i])) {
				snprintf(what, len, "the running statistic %s[%zu] is %s",
					 sp->b[k].name, i,
					 isnan(bufs[sp->b[k].offset + i]) ? "nan" : "infinite");
				return 1;
			}
	return 0;
}

/* A block's values into host, in the file's form (f32, logical row-major order):
 * the bytes themselves where every view is f32 and row-major, else view by view
 * (converted: a checkpoint stays portable whatever the devices' dtypes and layouts),
 * the gaps between views zero. */
static int rf__read_block(struct rf_tensor *block, struct rf_tensor *const *views, unsigned n,
			  const size_t *offsets, size_t numel, float *host)
{
	unsigned k;
	int ret = 0;

	for (k = 0; k < n; k++)
		if (views[k]->dtype != RF_F32 || views[k]->layout != RF_LAYOUT_ROWMAJOR)
			break;
	if (k == n)
		return rf_tensor_read(block, host);
	memset(host, 0, numel * sizeof(float));
	for (k = 0; k < n && ret == 0; k++)
		ret = rf_tensor_read_as(views[k], RF_F32, host + offsets[k]);
	return ret;
}

/* The offsets of the spec's parameters (or buffers), for rf__read_block. */
static void rf__offsets(const struct rf_model_spec *sp, int bufs, size_t *off)
{
	unsigned n = bufs ? sp->nbufs : sp->ntensors;

	for (unsigned k = 0; k < n; k++)
		off[k] = bufs ? sp->b[k].offset : sp->p[k].offset;
}

static int rf__save(struct rf_trainer *t, const char *path, const struct rf__mid *mid)
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
	size_t poff[RF_MODEL_MAX_TENSORS], boff[RF_MODEL_MAX_BUFFERS];
	const struct rf_model_spec *sp = t->spec;

	rf__offsets(sp, 0, poff);
	rf__offsets(sp, 1, boff);
	/* waits for the last SGD */
	ret = rf__read_block(m0->params, m0->p, sp->ntensors, poff, sp->numel, host);
	if (ret == 0 && ns)
		ret = t->o.adamw ? rf_model_moments(m0) : rf_model_momentum(m0);
	if (ret == 0 && ns)
		ret = rf__read_block(m0->mom, m0->v, sp->ntensors, poff, sp->numel, host + sp->numel);
	if (ret == 0 && ns > 1)
		ret = rf__read_block(m0->mom2, m0->v2, sp->ntensors, poff, sp->numel,
				     host + 2 * sp->numel);
	if (ret == 0 && m0->bufs && !mid->rows)
		ret = rf__read_block(m0->bufs, m0->b, sp->nbufs, boff, sp->buf_numel,
				     host + (1 + ns) * sp->numel);
	if (ret == 0 && mid->rows) {
		/* inside an epoch the replicas' statistics differ: the named ones are their
		 * mean, for readers of the file; a resume takes the rows */
		float *b = host + (1 + ns) * t->spec->numel;
		for (size_t i = 0; i < t->spec->buf_numel; i++) {
			float sum = 0;
			for (unsigned r = 0; r < mid->rows; r++)
				sum += mid->stats[(size_t)r * t->spec->buf_numel + i];
			b[i] = sum / (float)mid->rows;
		}
	}
	if (ret < 0) {
		rf__trainer_msg(t, "%s: cannot read the parameters: %s", path, strerror(-ret));
		free(host);
		return ret;
	}
	char bad[160];
	if (rf__nonfinite(t, host, host + (1 + ns) * t->spec->numel, bad, sizeof(bad)) ||
	    (!isfinite(mid->loss) && snprintf(bad, sizeof(bad), "the epoch's running loss is "
					      "%g", mid->loss))) {
		/* the file keeps its last state, from before the run diverged */
		char when[64];
		if (mid->batch)
			snprintf(when, sizeof(when), "after batch %" PRIu64 " of epoch %u",
				 mid->batch, t->epochs_done + 1);
		else if (t->epochs_done)
			snprintf(when, sizeof(when), "after epoch %u", t->epochs_done);
		else
			snprintf(when, sizeof(when), "before the first batch");
		rf__trainer_msg(t, "%s: not written: %s %s: the run diverged (a lower --lr, or "
				"--warmup-epochs, may help)", path, bad, when);
		free(host);
		return -EDOM;
	}
	rf_engine_wait_var(t->eng, t->prng->var);
	rf__fill_meta(t, &meta, mid);
	unsigned nb = rf__blobs(t, bl, host, names, mid);
	ret = rf__ckpt_write(t, path, &meta, bl, nb);
	free(host);
	return ret;
}

/* mid->stats: every replica's running statistics, row rank*K + r (summed over the
 * ranks: each fills its own rows, the others are zero). Every rank calls it. */
static int rf__gather_stats(struct rf_trainer *t, struct rf__mid *mid)
{
	size_t bn = t->spec->buf_numel;
	unsigned n = t->K * t->P, r;
	int ret = 0;

	if (!t->spec->nbufs || n == 1)
		return 0;
	mid->stats = calloc((size_t)n * bn, sizeof(float));
	if (!mid->stats)
		return -ENOMEM;
	mid->rows = n;
	size_t boff[RF_MODEL_MAX_BUFFERS];

	rf__offsets(t->spec, 1, boff);
	for (r = 0; r < t->K && ret == 0; r++)
		ret = rf__read_block(t->rep[r]->bufs, t->rep[r]->b, t->spec->nbufs, boff, bn,
				     mid->stats + (size_t)(t->rank * t->K + r) * bn);
	if (ret < 0) {
		rf__trainer_msg(t, "reading the running statistics failed: %s", strerror(-ret));
		return ret;
	}
	/* host collectives carry up to 4096 f64: the floats go as doubles (exact, and
	 * x + 0 is x), a chunk at a time */
	for (size_t i = 0; t->P > 1 && i < (size_t)n * bn && ret == 0; i += 4096) {
		double v[4096];
		size_t c = (size_t)n * bn - i < 4096 ? (size_t)n * bn - i : 4096;
		for (size_t j = 0; j < c; j++)
			v[j] = mid->stats[i + j];
		ret = rf_comm_allreduce_host(t->comm, v, c, RF_COMM_F64, RF_COMM_SUM, 2);
		for (size_t j = 0; j < c && ret == 0; j++)
			mid->stats[i + j] = (float)v[j];
	}
	if (ret < 0)
		rf__trainer_msg(t, "gathering the running statistics failed: %s",
				rf_comm_last_error(t->comm));
	return ret;
}

/* With several processes every rank learns whether rank 0's write worked, so that all
 * stop together, and none goes on before the file is there. */
static int rf__agree(struct rf_trainer *t, int ret)
{
	uint64_t v = ret < 0 ? (uint64_t)-ret : 0;
	int r2;

	if (t->P == 1)
		return ret;
	if ((r2 = rf_comm_allreduce_host(t->comm, &v, 1, RF_COMM_U64, RF_COMM_MAX, 3)) < 0) {
		rf__trainer_msg(t, "checkpoint: agreeing on the write failed: %s",
				rf_comm_last_error(t->comm));
		return r2;
	}
	if (ret == 0 && v)
		rf__trainer_msg(t, "checkpoint %s: rank 0 could not write it: %s", t->o.checkpoint,
				strerror((int)v));
	return ret < 0 ? ret : -(int)v;
}

int rf__save_mid(struct rf_trainer *t, uint64_t done)
{
	struct rf__mid mid = { done, 0, 0, 0, NULL };
	unsigned r;
	int ret = 0;

	for (r = 0; r < t->K && ret == 0; r++)
		ret = rf__slots_sum(&t->tr[r], done, &mid.loss, &mid.corr);
	if (ret < 0)
		rf__trainer_msg(t, "reading the losses back failed: %s", strerror(-ret));
	if (ret == 0)
		ret = rf__dist_sum(t, &mid.loss, &mid.corr);
	mid.loss += t->carry_loss;
	mid.corr += t->carry_corr;
	if (ret == 0)
		ret = rf__gather_stats(t, &mid);
	if (ret == 0 && t->rank == 0)
		ret = rf__save(t, t->o.checkpoint, &mid);
	if (ret == 0 || t->rank == 0)
		ret = rf__agree(t, ret);
	free(mid.stats);
	return ret;
}

/* The run state of meta, or -errno with the message in t (a newer version, or a
 * malformed record). */
static int rf__rs_of(struct rf_trainer *t, const char *path, const struct rf_ckpt_meta *meta,
		     struct rf__runstate *rs)
{
	char msg[256];
	int ret = rf__rs_get(rs, meta->extra, meta->extra_len, msg, sizeof(msg));

	if (ret < 0)
		rf__trainer_msg(t, "%s: %s", path, msg);
	return ret;
}

/* Counts a run could have reached, and fields in their range: a file whose CRCs hold
 * but whose numbers do not (written by another program, or damaged before its CRCs
 * were taken) would otherwise wrap the step count (max_steps' accounting) or the epoch
 * count, or name an init that is none. */
static int rf__rs_sane(struct rf_trainer *t, const char *path, const struct rf_ckpt_meta *meta,
		       const struct rf__runstate *rs)
{
	if (meta->step > (1ull << 48) || meta->epoch > (1ull << 31)) {
		rf__trainer_msg(t, "%s: step %" PRIu64 ", epoch %" PRIu64 ": more than a run takes "
				"(at most 2^48 steps, 2^31 epochs): not a checkpoint of a run",
				path, meta->step, meta->epoch);
		return -EBADMSG;
	}
	if (rf__rs_has(rs, RF__RS_INIT) && rs->v[RF__RS_INIT] > RF_INIT_KAIMING) {
		rf__trainer_msg(t, "%s: the --init kind %" PRIu64 ": expected 0 to %d", path,
				rs->v[RF__RS_INIT], RF_INIT_KAIMING);
		return -EBADMSG;
	}
	return 0;
}

/* Every replica gets the saved weights (views: padding stays 0); the generator, epoch
 * and step counts continue from the file's. */
static int rf__restore(struct rf_trainer *t, const char *path, const struct rf_ckpt_meta *meta,
		       const struct rf__runstate *rs, const float *host, const struct rf__mid *mid)
{
	unsigned r, k;
	int ret = 0;

	for (r = 0; r < t->K && ret == 0; r++)
		for (k = 0; k < t->spec->ntensors && ret == 0; k++)
			ret = rf_tensor_write_as(t->rep[r]->p[k], RF_F32, host + t->spec->p[k].offset);
	for (r = 0; rf__nstate(t) && r < t->K && ret == 0; r++) {
		struct rf_model *m = t->rep[r];
		ret = t->o.adamw ? rf_model_moments(m) : rf_model_momentum(m);
		for (k = 0; k < t->spec->ntensors && ret == 0; k++)
			ret = rf_tensor_write_as(m->v[k], RF_F32,
						 host + t->spec->numel + t->spec->p[k].offset);
		for (k = 0; t->o.adamw && k < t->spec->ntensors && ret == 0; k++)
			ret = rf_tensor_write_as(m->v2[k], RF_F32,
						 host + 2 * t->spec->numel + t->spec->p[k].offset);
	}
	for (r = 0; t->spec->nbufs && r < t->K && ret == 0; r++) {
		/* inside an epoch, each replica's own row */
		const float *b = mid->rows ? mid->stats + (size_t)(t->rank * t->K + r) *
							  t->spec->buf_numel
					   : host + (1 + rf__nstate(t)) * t->spec->numel;
		for (k = 0; k < t->spec->nbufs && ret == 0; k++)
			ret = rf_tensor_write_as(t->rep[r]->b[k], RF_F32, b + t->spec->b[k].offset);
	}
	if (ret < 0) {
		rf__trainer_msg(t, "%s: cannot write the parameters: %s", path, strerror(-ret));
		return ret;
	}
	rf_engine_wait_var(t->eng, t->prng->var);
	if (rf__rs_has(rs, RF__RS_PRNG_COUNTER))
		t->prng->counter = rs->v[RF__RS_PRNG_COUNTER];
	t->epochs_done = (unsigned)meta->epoch;
	t->steps = meta->step;
	t->ebatch = mid->batch;
	t->carry_loss = mid->loss;
	t->carry_corr = mid->corr;
	t->tq.valid = 0;  /* batches queued ahead are not where the file continues */
	return 0;
}

/* Where inside its epoch the file was taken (meta.extra, struct rf__mid); with rows,
 * mid->stats is allocated for them. Refuses rows of another replica count and a
 * batch past the epoch. */
static int rf__mid_of(struct rf_trainer *t, const char *path, const struct rf_ckpt_meta *meta,
		      const struct rf__runstate *rs, struct rf__mid *mid)
{
	uint64_t rows, nb = rf_loader_batches_per_epoch(t->train_ld);

	memset(mid, 0, sizeof(*mid));
	/* a file of another batch size: refused later by rf__check_same_run, naming both;
	 * its batches are not this run's to count */
	if (!rf__rs_has(rs, RF__RS_MID_ROWS) || meta->batch_size != t->o.batch_size)
		return 0;
	mid->batch = rs->v[RF__RS_MID_BATCH];
	memcpy(&mid->loss, &rs->v[RF__RS_MID_LOSS], 8);
	mid->corr = rs->v[RF__RS_MID_CORR];
	rows = rs->v[RF__RS_MID_ROWS];
	if (mid->batch >= nb && mid->batch) {
		rf__trainer_msg(t, "%s: taken after batch %" PRIu64 " of epoch %" PRIu64 ", but an "
				"epoch of this run has %" PRIu64 " batches", path, mid->batch,
				meta->epoch + 1, nb);
		return -ESTALE;
	}
	/* the epoch's running sums so far: a loss is finite and never negative (a run
	 * that diverged is not saved; an older version saved NaN), at most one correct answer per record seen --
	 * at the file's batch size, which the run's may yet differ from (refused later,
	 * naming both) -- and nothing before the first batch */
	if (!(mid->loss >= 0) || isinf(mid->loss) || (!mid->batch && mid->loss != 0)) {
		rf__trainer_msg(t, "%s: the epoch's running loss is %g after %" PRIu64 " batches: "
				"expected a finite sum >= 0 (0 before the first batch)", path,
				mid->loss, mid->batch);
		return -EBADMSG;
	}
	if (mid->corr > mid->batch * (uint64_t)meta->batch_size) {
		rf__trainer_msg(t, "%s: %" PRIu64 " correct answers counted after %" PRIu64
				" batches of %u: expected at most %" PRIu64, path, mid->corr,
				mid->batch, meta->batch_size, mid->batch * (uint64_t)meta->batch_size);
		return -EBADMSG;
	}
	if (rows && rows != (uint64_t)t->K * t->P) {
		rf__trainer_msg(t, "%s: taken inside epoch %" PRIu64 " by a run of %" PRIu64
				" replicas (devices x processes), each with its own running "
				"statistics; this run has %u x %u: resume it with as many devices "
				"and processes", path, meta->epoch + 1,
				rows, t->K, t->P);
		return -ESTALE;
	}
	if (rows) {
		mid->rows = (unsigned)rows;
		mid->stats = calloc(rows * t->spec->buf_numel, sizeof(float));
		if (!mid->stats)
			return -ENOMEM;
	}
	return 0;
}

/* The optimizer's state (momentum buffers, AdamW's moments) is in units of the summed
 * gradient of the replicas that made it: K*P shard means, K*P times one device's
 * (squared for exp_avg_sq). Another count of replicas takes it rescaled -- the same
 * run, up to rounding, as one that had that many from the start; a file from before
 * the count was kept (run state 1, 2: its devices field is K alone) is refused where
 * it differs from this run's devices. */
static int rf__rescale_state(struct rf_trainer *t, const char *path,
			     const struct rf_ckpt_meta *meta, const struct rf__runstate *rs,
			     float *host)
{
	unsigned now = t->K * t->P, saved = meta->devices;
	size_t n = t->spec->numel;

	if (rs->version < 3) {
		if (saved && saved != t->K) {
			rf__trainer_msg(t, "%s: optimizer state saved by a run of %u devices, in "
					"their summed gradient's units, before the file said so of "
					"its processes too: resume it with --devices %u", path, saved,
					saved);
			return -ESTALE;
		}
		return 0;
	}
	if (!saved || saved == now)
		return 0;
	double f = (double)now / saved;
	for (size_t i = 0; i < n; i++)
		host[n + i] = (float)(host[n + i] * f);
	if (rf__nstate(t) > 1)
		for (size_t i = 0; i < n; i++)
			host[2 * n + i] = (float)(host[2 * n + i] * f * f);
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
	 * the message should say which setting differs; then where in its epoch it was
	 * taken, which says whether it holds every replica's running statistics (a file of
	 * another model fails in the read, with its own message) */
	struct rf__mid mid = { 0 };
	struct rf__runstate rs;
	int probed = rf_ckpt_probe(path, &probe) >= 0 && !strcmp(probe.model, t->spec->name);
	if (probed && ((ret = rf__rs_of(t, path, &probe, &rs)) < 0 ||
		       (ret = rf__ckpt_same_optim(t, path, &probe, &rs)) < 0 ||
		       (ret = rf__mid_of(t, path, &probe, &rs, &mid)) < 0)) {
		free(host);
		return ret;
	}
	snprintf(meta.model, sizeof(meta.model), "%s", t->spec->name);
	unsigned nb = rf__blobs(t, bl, host, names, &mid);
	ret = rf__ckpt_read(t, path, &meta, bl, nb);
	if (ret == 0)
		ret = rf__rs_of(t, path, &meta, &rs); /* the header read now: its own run state */
	if (ret == 0)
		ret = rf__rs_sane(t, path, &meta, &rs);
	if (ret == 0)
		ret = rf__ckpt_same_run(t, path, &meta, &rs);
	/* the header read now must say what the probe said */
	if (ret == 0 && probed && (meta.extra_len != probe.extra_len ||
			 memcmp(meta.extra, probe.extra, meta.extra_len) != 0)) {
		rf__trainer_msg(t, "%s: changed while it was being read", path);
		ret = -ESTALE;
	}
	char bad[160];
	if (ret == 0 && rf__nonfinite(t, host, host + (1 + rf__nstate(t)) * t->spec->numel, bad,
				      sizeof(bad))) {
		rf__trainer_msg(t, "%s: %s: the run that wrote it diverged (taken after step %"
				PRIu64 "); nothing to resume", path, bad, meta.step);
		ret = -EDOM;
	}
	if (ret == 0 && rf__nstate(t))
		ret = rf__rescale_state(t, path, &meta, &rs, host);
	if (ret == 0)
		ret = rf__restore(t, path, &meta, &rs, host, &mid);
	free(mid.stats);
	free(host);
	return ret;
}

/* Between passes: at an epoch's end, or still where a loaded checkpoint left off
 * inside one (its rows then are this process's replicas'). */
static int rf__save_now(struct rf_trainer *t, const char *path)
{
	struct rf__mid mid = { t->ebatch, t->carry_loss, t->carry_corr, 0, NULL };
	int ret = 0;

	if (t->ebatch && t->spec->nbufs && t->K * t->P > 1) {
		if (t->P > 1) {
			rf__trainer_msg(t, "%s: inside epoch %u with several processes, the "
					"checkpoint is taken by every rank (checkpoint_every)", path,
					t->epochs_done + 1);
			return -EINVAL;
		}
		ret = rf__gather_stats(t, &mid);
	}
	if (ret == 0)
		ret = rf__save(t, path, &mid);
	free(mid.stats);
	return ret;
}

int rf_trainer_save(struct rf_trainer *t, const char *path)
{
	int ret;

	t->msg[0] = 0;
	if ((ret = rf__refuse_call(t, 1)) == 0)
		ret = rf__save_now(t, path);
	return rf__trainer_end(t, ret);
}

/* Several processes: every rank resumed at the same place with the same weights (each
 * read its own file: another path, or a copy taken at another time, would train on
 * from somewhere else and be found only at the epoch's end). */
static int rf__agree_loaded(struct rf_trainer *t, const char *path)
{
	uint64_t h;
	int ret;

	if (t->P == 1)
		return 0;
	if ((ret = rf__params_hash(t, &h)) < 0) {
		rf__trainer_msg(t, "%s: reading the parameters back failed: %s", path,
				strerror(-ret));
		return ret;
	}
	const struct rf_comm_setting s[] = {
		{ "epochs done", t->epochs_done, RF_COMM_SET_INT },
		{ "batches done in the epoch", t->ebatch, RF_COMM_SET_INT },
		{ "optimizer steps", t->steps, RF_COMM_SET_INT },
		{ "parameters", h, RF_COMM_SET_HASH },
	};
	if ((ret = rf_comm_agree(t->comm, "resume", s, sizeof(s) / sizeof(s[0]), 5)) < 0)
		rf__trainer_msg(t, "%s: %s", path, rf_last_error());
	return ret;
}

int rf_trainer_load(struct rf_trainer *t, const char *path)
{
	int ret;

	t->msg[0] = 0;
	if ((ret = rf__refuse_call(t, 0)) == 0 && (ret = rf__load(t, path)) == 0)
		ret = rf__agree_loaded(t, path);
	return rf__trainer_end(t, ret);
}
