/* train/trainer.c — the training loop: data, replicas, window, reduction, evaluation.
 * See trainer.h for what one iteration pushes and why. Reads top to bottom: setup
 * (data, devices, replicas, store, loaders), one iteration, one epoch, evaluation,
 * checkpoints. */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trainer.h"
#include "kvstore.h"
#include "ops.h"
#include "dataset.h"
#include "loader.h"
#include "checkpoint.h"

#define RF__WINDOW 2            /* iterations in flight by default */
#define RF__MAXQ 16             /* loader look-ahead queue */
#define RF__MAXV (RF_TRAIN_MAX_DEVICES * (RF_MODEL_MAX_TENSORS + 3))

/* Per-epoch result slots of one replica: slot b holds batch b's loss sum and correct
 * count. One block each (on the replica's device), a view per batch. */
struct rf__slots {
	struct rf_tensor *loss, *corr;          /* (nb) f32, (nb) i32 */
	struct rf_tensor **lv, **cv;            /* views (1) */
	uint64_t nb;
};

/* The loader look-ahead queue: batches requested (their ops pushed) and not yet
 * trained on, at most prefetch−1 of them (so a batch's slot is never reused before its
 * ops are pushed, loader.h). The training queue outlives the pass and runs across
 * the epoch boundary: while the last batches of epoch e are queued, the first ones of
 * epoch e+1 are requested already, so that their reads and gathers run under the last
 * iterations of epoch e (and the evaluation) instead of stalling the first iteration
 * of epoch e+1. The batches are the same, in the same order: the loader, having
 * returned 0 at the end of epoch e, continues with epoch e+1 exactly as
 * rf_loader_seek_epoch(e+1) would. The test set's queue does the same from one
 * evaluation to the next (its loader does not shuffle: every "epoch" is the same
 * order), so the test reads run under the next training epoch. */
struct rf__queue {
	struct rf_batch q[RF__MAXQ];
	unsigned qh, qn;
	uint64_t lepoch;                        /* the epoch the loader's next call serves */
	int valid;                              /* q and lepoch follow the loader */
};

struct rf_trainer {
	struct rf_train_opts o;
	char model_name[16], device_kind[8], data_dir[512];
	struct rf_engine *eng;
	const struct rf_model_spec *spec;
	unsigned K;
	struct rf_device *dev[RF_TRAIN_MAX_DEVICES];
	unsigned ndev_open;
	struct rf_device *host;                 /* CUDA: a CPU device for staging */
	struct rf_model *rep[RF_TRAIN_MAX_DEVICES];
	struct rf_kvstore *kv;
	struct rf_prng *prng;
	struct rf_dataset train_ds, test_ds;    /* opened (owned) */
	struct rf_dataset train_view, test_view; /* limited copies the loaders read */
	struct rf_loader *train_ld, *test_ld;
	struct rf__slots tr[RF_TRAIN_MAX_DEVICES], te[RF_TRAIN_MAX_DEVICES];
	struct rf__queue tq, eq;                /* the loaders' look-ahead queues */
	uint64_t evals;                         /* evaluations pushed (the test loader's
						 * "epoch": unshuffled, the same order) */
	struct rf_var **marker;                 /* nmark end-of-iteration markers */
	unsigned window;                        /* 0: none (RF_TRAIN_WINDOW_NONE) */
	unsigned nmark;                         /* window, or 1 without a window */
	uint64_t iter;                          /* iterations pushed (train + eval) */
	uint64_t steps;                         /* SGD steps */
	unsigned epochs_done;
	unsigned nstreams;                      /* compute streams per replica */
	float lr;
};

static void rf__msg(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void rf__msg(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

static double rf__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- data ----------------------------------------------------------------------------- */

/* DIR/NAME or DIR/NAME.gz, whichever exists; -ENOENT if neither. */
static int rf__find(const char *dir, const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", dir, name);
	if (access(out, R_OK) == 0)
		return 0;
	snprintf(out, len, "%s/%s.gz", dir, name);
	return access(out, R_OK) == 0 ? 0 : -ENOENT;
}

static int rf__open_data(struct rf_trainer *t, char *err, size_t errlen)
{
	static const char *names[4] = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
					"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte" };
	char p[4][600];
	int i, ret;

	for (i = 0; i < 4; i++) {
		if (rf__find(t->data_dir, names[i], p[i], sizeof(p[i])) < 0) {
			rf__msg(err, errlen, "Fashion-MNIST not found: %s/%s.gz is missing; "
				"install it with: apt-get install dataset-fashion-mnist",
				t->data_dir, names[i]);
			return -ENOENT;
		}
	}
	ret = rf_dataset_open_idx_pair(&t->train_ds, p[0], p[1], 10, 0);
	if (ret == 0)
		ret = rf_dataset_open_idx_pair(&t->test_ds, p[2], p[3], 10, 0);
	if (ret < 0) {
		rf__msg(err, errlen, "%s", rf_last_error());
		return ret;
	}
	for (i = 0; i < 2; i++) {
		const struct rf_dataset *d = i ? &t->test_ds : &t->train_ds;
		char shape[96] = "";
		size_t n = 0;
		unsigned k;
		if (d->ndim == 2 && d->shape[0] == 28 && d->shape[1] == 28)
			continue;
		for (k = 0; k < d->ndim && n < sizeof(shape); k++)
			n += (size_t)snprintf(shape + n, sizeof(shape) - n, "%s%u", k ? "x" : "",
					      (unsigned)d->shape[k]);
		rf__msg(err, errlen, "%s: offset 8: images of %s, expected 28x28 (Fashion-MNIST)",
			p[i ? 2 : 0], d->ndim ? shape : "no dims");
		return -EINVAL;
	}
	/* A subset is the first `limit` records: a copy of the description with a smaller
	 * count (the loader reads records 0 .. count-1 only). */
	t->train_view = t->train_ds;
	t->test_view = t->test_ds;
	if (t->o.limit && t->o.limit < t->train_view.count)
		t->train_view.count = t->o.limit;
	if (t->o.test_limit && t->o.test_limit < t->test_view.count)
		t->test_view.count = t->o.test_limit;
	for (i = 0; i < 2; i++) {
		struct rf_dataset *v = i ? &t->test_view : &t->train_view;
		unsigned s;
		for (s = 0; s < v->nsrc; s++)
			v->src[s].data_bytes = v->count * v->src[s].stride;
	}
	return 0;
}

/* ---- result slots ----------------------------------------------------------------------- */

static int rf__slots_make(struct rf__slots *sl, struct rf_device *d, uint64_t nb, const char *tag)
{
	char name[40];
	uint64_t b;

	sl->nb = nb;
	snprintf(name, sizeof(name), "%s.loss", tag);
	sl->loss = rf_tensor_new(d, RF_F32, name, RF_DIMS((int64_t)nb));
	snprintf(name, sizeof(name), "%s.correct", tag);
	sl->corr = rf_tensor_new(d, RF_I32, name, RF_DIMS((int64_t)nb));
	sl->lv = calloc(nb, sizeof(*sl->lv));
	sl->cv = calloc(nb, sizeof(*sl->cv));
	if (!sl->loss || !sl->corr || !sl->lv || !sl->cv)
		return -ENOMEM;
	for (b = 0; b < nb; b++) {
		sl->lv[b] = rf_tensor_view(sl->loss, b, RF_F32, "loss_b", RF_DIMS(1));
		sl->cv[b] = rf_tensor_view(sl->corr, b, RF_I32, "correct_b", RF_DIMS(1));
		if (!sl->lv[b] || !sl->cv[b])
			return -ENOMEM;
	}
	return 0;
}

static void rf__slots_free(struct rf__slots *sl)
{
	uint64_t b;

	for (b = 0; b < sl->nb; b++) {
		if (sl->lv)
			rf_tensor_free(sl->lv[b]);
		if (sl->cv)
			rf_tensor_free(sl->cv[b]);
	}
	free(sl->lv);
	free(sl->cv);
	rf_tensor_free(sl->loss);
	rf_tensor_free(sl->corr);
	memset(sl, 0, sizeof(*sl));
}

/* Zero all slots (one op on each block, ordered against every view). */
static int rf__slots_clear(struct rf__slots *sl, struct rf_stream *s)
{
	int ret = rf_fill(s, sl->loss, 0.0f);

	return ret < 0 ? ret : rf_fill(s, sl->corr, 0.0f);
}

/* Read slots [0, nb) back (waits) and add them up. */
static int rf__slots_sum(struct rf__slots *sl, uint64_t nb, double *loss, uint64_t *corr)
{
	float *l = malloc(sl->nb * sizeof(float));
	int32_t *c = malloc(sl->nb * sizeof(int32_t));
	int ret = -ENOMEM;
	uint64_t b;

	if (l && c) {
		ret = rf_tensor_read(sl->loss, l);
		if (ret == 0)
			ret = rf_tensor_read(sl->corr, c);
		for (b = 0; ret == 0 && b < nb && b < sl->nb; b++) {
			*loss += l[b];
			*corr += (uint64_t)c[b];
		}
	}
	free(l);
	free(c);
	return ret;
}

/* ---- setup ------------------------------------------------------------------------------ */

static int rf__open_devices(struct rf_trainer *t, char *err, size_t errlen)
{
	unsigned r;
	int ret;

	if (strcmp(t->device_kind, "cuda") == 0) {
		int n = rf_cuda_count();
		/* compute streams, then one for the kv store's reductions when K > 1 */
		struct rf_cuda_opts co = { .streams = t->nstreams + (t->K > 1 ? 1 : 0) };
		if (n <= 0) {
			rf__msg(err, errlen, "--device cuda: no usable CUDA device (%s)",
				n == 0 ? "no GPU, no driver, or a build without CUDA" : "error");
			return -ENODEV;
		}
		for (r = 0; r < t->K; r++) {
			ret = rf_cuda_open(t->eng, (int)(r % (unsigned)n), &co, &t->dev[r]);
			if (ret < 0) {
				rf__msg(err, errlen, "--device cuda: cannot open GPU %u: %s", r % (unsigned)n,
					strerror(-ret));
				return ret == -ENOTSUP ? -ENODEV : ret;
			}
			t->ndev_open++;
		}
		ret = rf_cpu_open(t->eng, NULL, &t->host);
		if (ret < 0) {
			rf__msg(err, errlen, "cannot open the host device: %s", strerror(-ret));
			return ret;
		}
		return 0;
	}
	if (strcmp(t->device_kind, "cpu") != 0) {
		rf__msg(err, errlen, "--device %s: expected cpu or cuda", t->device_kind);
		return -EINVAL;
	}
	for (r = 0; r < t->K; r++) {
		struct rf_cpu_opts co = { .streams = t->nstreams, .blas_threads = t->o.blas_threads };
		ret = rf_cpu_open(t->eng, &co, &t->dev[r]);
		if (ret < 0) {
			rf__msg(err, errlen, "cannot open CPU device %u: %s", r, strerror(-ret));
			return ret;
		}
		t->ndev_open++;
	}
	return 0;
}

/* Compute streams per replica when not asked for. The MLP's work is two large GEMMs
 * per step, which OpenBLAS spreads over every core of a single stream. LeNet's is
 * many small GEMMs (im2col groups) between single-threaded im2col, pooling and ReLU
 * passes: with two OpenBLAS threads on one stream the second core mostly spins in
 * sched_yield, while two streams of one thread each (weight gradients beside data
 * gradients) keep both cores busy — measured on the 2-core machine, 30,720 records:
 * 12.8 s (1 stream, 2 threads) vs 6.1 s (2 streams, 1 thread each). So: LeNet on a
 * CPU with >= 2 cores and one replica gets 2 streams; everything else 1. */
static unsigned rf__auto_streams(const struct rf_trainer *t)
{
	cpu_set_t set;
	int cores = 1;

	if (strcmp(t->spec->name, "lenet") != 0 || strcmp(t->device_kind, "cpu") != 0 || t->K > 1)
		return 1;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		cores = CPU_COUNT(&set);
	return cores >= 2 ? 2 : 1;
}

/* Replica 0 is initialised from the seeded generator; the others copy it. */
static int rf__init_weights(struct rf_trainer *t)
{
	unsigned r;
	int ret;

	ret = rf_model_init(t->rep[0], t->prng, t->o.init);
	for (r = 1; r < t->K && ret == 0; r++)
		ret = rf_copy(t->rep[r]->s, t->rep[r]->params, t->rep[0]->params);
	return ret;
}

static int rf__make_loader(struct rf_trainer *t, const struct rf_dataset *ds, int shuffle,
			   struct rf_loader **out, char *err, size_t errlen)
{
	struct rf_loader_opts lo = { 0 };
	int ret;

	lo.batch = t->o.batch_size;
	lo.prefetch = t->o.prefetch;
	lo.seed = t->o.seed;
	lo.no_shuffle = !shuffle;
	lo.drop_last = 0;
	lo.devices = t->dev;
	lo.ndevices = t->K;
	lo.host = t->host;
	lo.scale = 1.0f / 255.0f;   /* x = pixel / 255, as d2l's ToTensor (no normalisation) */
	lo.in_memory = t->o.in_memory;
	ret = rf_loader_create(out, t->eng, ds, &lo);
	if (ret < 0)
		rf__msg(err, errlen, "%s", rf_last_error());
	return ret;
}

int rf_trainer_create(struct rf_trainer **out, struct rf_engine *e,
		      const struct rf_train_opts *opts, char *err, size_t errlen)
{
	struct rf_train_opts def = { 0 };
	struct rf_trainer *t;
	unsigned r, w;
	int ret;

	*out = NULL;
	if (err && errlen)
		err[0] = 0;
	if (!opts)
		opts = &def;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->eng = e;
	t->o = *opts;
	snprintf(t->model_name, sizeof(t->model_name), "%s", opts->model ? opts->model : "mlp");
	snprintf(t->device_kind, sizeof(t->device_kind), "%s", opts->device ? opts->device : "cpu");
	snprintf(t->data_dir, sizeof(t->data_dir), "%s",
		 opts->data_dir ? opts->data_dir : RF_TRAIN_DEFAULT_DATA);
	t->o.model = t->model_name;
	t->o.device = t->device_kind;
	t->o.data_dir = t->data_dir;
	t->spec = rf_model_spec(t->model_name);
	if (!t->spec) {
		rf__msg(err, errlen, "--model %s: expected mlp or lenet", t->model_name);
		ret = -EINVAL;
		goto fail;
	}
	if (!t->o.batch_size)
		t->o.batch_size = 256;
	if (t->o.lr == 0.0f)
		t->o.lr = strcmp(t->model_name, "mlp") == 0 ? 0.1f : 0.2f;
	t->K = t->o.devices ? t->o.devices : 1;
	if (t->K > RF_TRAIN_MAX_DEVICES || t->K > t->o.batch_size) {
		rf__msg(err, errlen, "--devices %u: expected 1..%d and at most the batch size (%u)",
			t->K, RF_TRAIN_MAX_DEVICES, t->o.batch_size);
		ret = -EINVAL;
		goto fail;
	}
	t->lr = t->o.lr / (float)t->K;
	t->nstreams = t->o.streams ? t->o.streams : rf__auto_streams(t);
	if (t->o.window == RF_TRAIN_WINDOW_NONE) {
		t->window = 0;
	} else {
		t->window = t->o.window ? t->o.window : RF__WINDOW;
		if (t->window > RF_TRAIN_MAX_WINDOW) {
			rf__msg(err, errlen, "--window %u: expected 0..%d", t->window,
				RF_TRAIN_MAX_WINDOW);
			ret = -EINVAL;
			goto fail;
		}
	}
	t->nmark = t->window ? t->window : 1;
	if (t->nstreams > 2) {
		rf__msg(err, errlen, "--streams %u: expected 1 or 2", t->nstreams);
		ret = -EINVAL;
		goto fail;
	}

	if ((ret = rf__open_data(t, err, errlen)) < 0)
		goto fail;
	if ((ret = rf__open_devices(t, err, errlen)) < 0)
		goto fail;
	for (r = 0; r < t->K; r++) {
		char tag[16];
		snprintf(tag, sizeof(tag), "r%u", r);
		ret = rf_model_create(&t->rep[r], t->spec, t->dev[r], rf_device_stream(t->dev[r], 0),
				      t->K > 1 ? tag : NULL);
		if (ret < 0) {
			rf__msg(err, errlen, "cannot create replica %u: %s", r, strerror(-ret));
			goto fail;
		}
		if (t->nstreams > 1)
			t->rep[r]->s2 = rf_device_stream(t->dev[r], 1);
	}
	t->prng = rf_prng_new(e, t->o.seed, "init_prng");
	if (!t->prng) {
		ret = -ENOMEM;
		goto fail;
	}
	if ((ret = rf__init_weights(t)) < 0) {
		rf__msg(err, errlen, "cannot initialise the weights: %s", strerror(-ret));
		goto fail;
	}
	if (t->K > 1) {
		/* key k = parameter tensor k, homed on replica k mod K's device */
		struct rf_stream *ks[RF_TRAIN_MAX_DEVICES] = { 0 };
		for (r = 0; r < t->K; r++)   /* CUDA: the stream after the compute ones */
			if (rf_device_kind(t->dev[r]) == RF_DEVICE_CUDA)
				ks[r] = rf_device_stream(t->dev[r], t->nstreams);
		ret = rf_kv_create(&t->kv, e, t->dev, ks, t->K);
		for (unsigned k = 0; ret == 0 && k < t->spec->ntensors; k++)
			ret = rf_kv_init(t->kv, (int)k, t->rep[0]->g[k]);
		if (ret < 0) {
			rf__msg(err, errlen, "cannot create the key-value store: %s", strerror(-ret));
			goto fail;
		}
	}
	if ((ret = rf__make_loader(t, &t->train_view, 1, &t->train_ld, err, errlen)) < 0 ||
	    (ret = rf__make_loader(t, &t->test_view, 0, &t->test_ld, err, errlen)) < 0)
		goto fail;
	for (r = 0; r < t->K; r++) {
		char tag[24];
		snprintf(tag, sizeof(tag), "train%u", r);
		ret = rf__slots_make(&t->tr[r], t->dev[r], rf_loader_batches_per_epoch(t->train_ld), tag);
		snprintf(tag, sizeof(tag), "test%u", r);
		if (ret == 0)
			ret = rf__slots_make(&t->te[r], t->dev[r], rf_loader_batches_per_epoch(t->test_ld), tag);
		if (ret < 0)
			goto fail;
	}
	t->marker = calloc(t->nmark, sizeof(*t->marker));
	if (!t->marker) {
		ret = -ENOMEM;
		goto fail;
	}
	for (w = 0; w < t->nmark; w++) {
		char name[32];
		snprintf(name, sizeof(name), "iter_done.%u", w);
		t->marker[w] = rf_var_new(e, name);
		if (!t->marker[w]) {
			ret = -ENOMEM;
			goto fail;
		}
	}
	*out = t;
	return 0;
fail:
	if (err && errlen && !err[0])
		rf__msg(err, errlen, "trainer: %s", strerror(-ret));
	rf_trainer_destroy(t);
	return ret;
}

void rf_trainer_destroy(struct rf_trainer *t)
{
	unsigned r, w;

	if (!t)
		return;
	rf_engine_wait_all(t->eng);
	rf_loader_destroy(t->train_ld);
	rf_loader_destroy(t->test_ld);
	for (w = 0; t->marker && w < t->nmark; w++)
		if (t->marker[w])
			rf_var_delete(t->eng, t->marker[w], NULL, NULL, NULL);
	free(t->marker);
	for (r = 0; r < RF_TRAIN_MAX_DEVICES; r++) {
		rf__slots_free(&t->tr[r]);
		rf__slots_free(&t->te[r]);
		rf_model_destroy(t->rep[r]);
	}
	rf_kv_destroy(t->kv);
	if (t->prng)
		rf_prng_free(t->prng);
	rf_engine_wait_all(t->eng);
	for (r = 0; r < t->ndev_open; r++)
		rf_device_close(t->dev[r]);
	rf_device_close(t->host);
	rf_dataset_close(&t->train_ds);
	rf_dataset_close(&t->test_ds);
	free(t);
}

/* ---- one iteration ------------------------------------------------------------------------ */

static int rf__noop(void *ctx)
{
	(void)ctx;
	return 0;
}

/* Wait until the iteration that last used this window slot has finished (no window:
 * never wait; the markers are still pushed, one variable for all, so the ops pushed
 * are the same whatever the window). */
static int rf__window_wait(struct rf_trainer *t)
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

/* K > 1: per parameter tensor, last first: push the K gradients, pull the sum into
 * every replica's gradient, SGD on every replica. */
static int rf__reduce_and_step(struct rf_trainer *t, const struct rf_batch *b)
{
	struct rf_tensor *g[RF_TRAIN_MAX_DEVICES];
	unsigned r;
	int k, ret;

	/* uneven shards: make Σ_r g_r / K the batch mean (g_r is the mean over n_r rows) */
	for (r = 0; r < t->K; r++) {
		if ((uint64_t)b->shard_n[r] * t->K != b->n) {
			float c = (float)((double)b->shard_n[r] * t->K / b->n);
			ret = b->shard_n[r] ? rf_scale(t->rep[r]->s, t->rep[r]->grads, c)
					    : rf_fill(t->rep[r]->s, t->rep[r]->grads, 0.0f);
			if (ret < 0)
				return ret;
		}
	}
	for (k = (int)t->spec->ntensors - 1; k >= 0; k--) {
		for (r = 0; r < t->K; r++)
			g[r] = t->rep[r]->g[k];
		if ((ret = rf_kv_push(t->kv, k, g, t->K)) < 0 ||
		    (ret = rf_kv_pull(t->kv, k, g, t->K)) < 0)
			return ret;
		for (r = 0; r < t->K; r++)
			if ((ret = rf_sgd(t->rep[r]->s, t->rep[r]->p[k], t->rep[r]->g[k], t->lr, 0.0f)) < 0)
				return ret;
	}
	return 0;
}

static int rf__train_iter(struct rf_trainer *t, const struct rf_batch *b)
{
	struct rf_model_acts *acts[RF_TRAIN_MAX_DEVICES] = { 0 };
	uint64_t bi = b->index;
	unsigned r;
	int ret = 0;

	for (r = 0; r < t->K && ret == 0; r++) {
		if (!b->shard_n[r])
			continue;
		ret = rf_model_forward(t->rep[r], b->x[r], b->y[r], t->tr[r].lv[bi], t->tr[r].cv[bi],
				       1, &acts[r]);
	}
	for (r = 0; r < t->K; r++) {
		if (!acts[r])
			continue;
		if (ret == 0)
			ret = rf_model_backward(t->rep[r], acts[r], t->K == 1 ? rf__sgd_hook : NULL, t);
		else
			rf_model_acts_free(acts[r]);
	}
	if (ret == 0 && t->K > 1)
		ret = rf__reduce_and_step(t, b);
	if (ret == 0)
		t->steps++;
	return ret < 0 ? ret : rf__push_marker(t, 1, t->tr, bi);
}

static int rf__eval_iter(struct rf_trainer *t, const struct rf_batch *b)
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

/* ---- one pass over a loader --------------------------------------------------------------- */

/* Request batches until `ahead` are queued, up to the end of epoch `last`. */
static int rf__fill(struct rf_loader *ld, struct rf__queue *Q, unsigned ahead, uint64_t last,
		    char *err, size_t errlen)
{
	int ret;

	while (Q->qn < ahead && Q->lepoch <= last) {
		ret = rf_loader_next(ld, &Q->q[(Q->qh + Q->qn) % RF__MAXQ]);
		if (ret < 0) {
			Q->valid = 0;
			rf__msg(err, errlen, "loader: %s", strerror(-ret));
			return ret;
		}
		if (ret == 0)
			Q->lepoch++;
		else
			Q->qn++;
	}
	return 0;
}

/* Push every batch of epoch `epoch` of ld through fn, with the look-ahead queue Q and
 * the window. The pass queues the next epoch's first batches as the epoch's last
 * ones are pushed and leaves them in Q for the next pass; Q is reset (seek) when it
 * does not continue where this pass starts (a checkpoint was loaded, a pass failed). */
static int rf__pass(struct rf_trainer *t, struct rf_loader *ld, struct rf__queue *Q,
		    uint64_t epoch, int train, char *err, size_t errlen)
{
	unsigned prefetch = t->o.prefetch ? t->o.prefetch : 4;
	unsigned ahead = prefetch > 1 ? prefetch - 1 : 1;
	uint64_t nb = rf_loader_batches_per_epoch(ld), done = 0, logged = 0;
	uint64_t last = epoch + 1;
	double lsum = 0;
	int ret;

	if (ahead > RF__MAXQ)
		ahead = RF__MAXQ;
	if (!Q->valid || (Q->qn ? Q->q[Q->qh].epoch != epoch : Q->lepoch != epoch)) {
		/* batches queued for another epoch are dropped: their ops only wrote loader
		 * slots, which the loader reuses in order after them */
		rf_loader_seek_epoch(ld, epoch);
		Q->qh = Q->qn = 0;
		Q->lepoch = epoch;
		Q->valid = 1;
	}
	for (;;) {
		if ((ret = rf__fill(ld, Q, ahead, last, err, errlen)) < 0)
			return ret;
		if (!Q->qn || Q->q[Q->qh].epoch != epoch)
			break;
		if ((ret = rf__window_wait(t)) < 0) {
			const char *op = NULL;
			Q->valid = 0;
			rf_var_error(t->marker[t->iter % t->nmark], &op);
			rf__msg(err, errlen, "iteration failed in op %s: %s%s%s", op ? op : "?",
				strerror(-ret), rf_loader_last_error(ld)[0] ? "; loader: " : "",
				rf_loader_last_error(ld));
			return ret;
		}
		ret = train ? rf__train_iter(t, &Q->q[Q->qh]) : rf__eval_iter(t, &Q->q[Q->qh]);
		if (ret < 0) {
			Q->valid = 0;
			rf__msg(err, errlen, "pushing batch %" PRIu64 ": %s", Q->q[Q->qh].index,
				strerror(-ret));
			return ret;
		}
		Q->qh = (Q->qh + 1) % RF__MAXQ;
		Q->qn--;
		done++;
		if (t->o.barrier_every && done % t->o.barrier_every == 0 &&
		    (ret = rf_engine_wait_all(t->eng)) < 0) {
			Q->valid = 0;
			rf__msg(err, errlen, "barrier after batch %" PRIu64 ": an op failed: %s%s%s",
				done - 1, strerror(-ret), rf_loader_last_error(ld)[0] ? "; loader: " : "",
				rf_loader_last_error(ld));
			return ret;
		}
		if (train && t->o.progress) {
			double loss = -1;
			if (t->o.log_every && (done % t->o.log_every == 0 || done == nb)) {
				/* the loss of the batches since the last read (waits for them only) */
				uint64_t b, seen = done * t->o.batch_size;
				unsigned r;
				for (b = logged; b < done; b++) {
					for (r = 0; r < t->K; r++) {
						float v = 0;
						if (rf_tensor_read(t->tr[r].lv[b], &v) == 0)
							lsum += v;
					}
				}
				logged = done;
				if (seen > t->train_view.count)
					seen = t->train_view.count;
				loss = lsum / (double)seen;
			}
			t->o.progress(t->o.progress_ctx, t->epochs_done + 1, done, nb, loss);
		}
	}
	return 0;
}

/* ---- epochs and evaluation -------------------------------------------------------------- */

int rf_trainer_evaluate(struct rf_trainer *t, double *acc, double *loss, char *err, size_t errlen)
{
	double l = 0;
	uint64_t c = 0, nb = rf_loader_batches_per_epoch(t->test_ld);
	unsigned r;
	int ret = 0;

	for (r = 0; r < t->K && ret == 0; r++)
		ret = rf__slots_clear(&t->te[r], t->rep[r]->s);
	if (ret == 0)
		ret = rf__pass(t, t->test_ld, &t->eq, t->evals++, 0, err, errlen);
	for (r = 0; r < t->K && ret == 0; r++)
		ret = rf__slots_sum(&t->te[r], nb, &l, &c);
	if (ret < 0) {
		if (err && errlen && !err[0])
			rf__msg(err, errlen, "evaluation failed: %s%s%s", strerror(-ret),
				rf_loader_last_error(t->test_ld)[0] ? "; loader: " : "",
				rf_loader_last_error(t->test_ld));
		return ret;
	}
	*acc = (double)c / (double)t->test_view.count;
	if (loss)
		*loss = l / (double)t->test_view.count;
	return 0;
}

int rf_trainer_epoch(struct rf_trainer *t, struct rf_epoch_stats *st, char *err, size_t errlen)
{
	uint64_t nb = rf_loader_batches_per_epoch(t->train_ld), c = 0;
	double t0, l = 0;
	unsigned r;
	int ret = 0;

	if (err && errlen)
		err[0] = 0;
	memset(st, 0, sizeof(*st));
	t0 = rf__now();
	for (r = 0; r < t->K && ret == 0; r++)
		ret = rf__slots_clear(&t->tr[r], t->rep[r]->s);
	if (ret == 0)
		ret = rf__pass(t, t->train_ld, &t->tq, t->epochs_done, 1, err, errlen);
	/* the epoch is over when every replica's parameters are written */
	for (r = 0; r < t->K && ret == 0; r++)
		ret = rf_tensor_wait(t->rep[r]->params);
	for (r = 0; r < t->K && ret == 0; r++)
		ret = rf__slots_sum(&t->tr[r], nb, &l, &c);
	if (ret < 0) {
		if (err && errlen && !err[0]) {
			const char *op = NULL;
			rf_var_error(t->rep[0]->params->var, &op);
			rf__msg(err, errlen, "training failed%s%s: %s%s%s", op ? " in op " : "",
				op ? op : "", strerror(-ret),
				rf_loader_last_error(t->train_ld)[0] ? "; loader: " : "",
				rf_loader_last_error(t->train_ld));
		}
		return ret;
	}
	st->seconds = rf__now() - t0;
	t->epochs_done++;
	st->epoch = t->epochs_done;
	st->samples = t->train_view.count;
	st->train_loss = l / (double)st->samples;
	st->train_acc = (double)c / (double)st->samples;
	st->samples_per_s = st->seconds > 0 ? (double)st->samples / st->seconds : 0;
	st->test_acc = st->test_loss = -1;
	if (!t->o.no_eval) {
		t0 = rf__now();
		ret = rf_trainer_evaluate(t, &st->test_acc, &st->test_loss, err, errlen);
		st->eval_seconds = rf__now() - t0;
	}
	return ret;
}

unsigned rf_trainer_epochs_done(const struct rf_trainer *t)
{
	return t->epochs_done;
}

unsigned rf_trainer_replicas(const struct rf_trainer *t)
{
	return t->K;
}

unsigned rf_trainer_streams(const struct rf_trainer *t)
{
	return t->nstreams;
}

const struct rf_model_spec *rf_trainer_spec(const struct rf_trainer *t)
{
	return t->spec;
}

struct rf_model *rf_trainer_replica(struct rf_trainer *t, unsigned r)
{
	return r < t->K ? t->rep[r] : NULL;
}

uint64_t rf_trainer_batches(const struct rf_trainer *t)
{
	return rf_loader_batches_per_epoch(t->train_ld);
}

int rf_trainer_read_params(struct rf_trainer *t, unsigned r, float *dst)
{
	if (r >= t->K || !dst)
		return -EINVAL;
	return rf_tensor_read(t->rep[r]->params, dst);
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

/* extra: the init generator's state (seed, counter) and the init kind, little-endian */
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

static void rf__blobs(struct rf_trainer *t, struct rf_ckpt_blob *bl, float *host)
{
	unsigned k;
	int d;

	for (k = 0; k < t->spec->ntensors; k++) {
		const struct rf_param_spec *p = &t->spec->p[k];
		memset(&bl[k], 0, sizeof(bl[k]));
		bl[k].name = p->name;
		bl[k].dtype = RF_CKPT_F32;
		bl[k].ndim = (uint32_t)p->ndim;
		for (d = 0; d < p->ndim; d++)
			bl[k].shape[d] = (uint64_t)p->shape[d];
		bl[k].data = host + p->offset;
		bl[k].nbytes = p->numel * sizeof(float);
	}
}

int rf_trainer_save(struct rf_trainer *t, const char *path, char *err, size_t errlen)
{
	struct rf_ckpt_blob bl[RF_MODEL_MAX_TENSORS];
	struct rf_ckpt_meta meta = { 0 };
	float *host = malloc(t->spec->numel * sizeof(float));
	int ret;

	if (!host)
		return -ENOMEM;
	ret = rf_tensor_read(t->rep[0]->params, host);   /* waits for the last SGD */
	if (ret < 0) {
		rf__msg(err, errlen, "%s: cannot read the parameters: %s", path, strerror(-ret));
		free(host);
		return ret;
	}
	rf_engine_wait_var(t->eng, t->prng->var);
	snprintf(meta.model, sizeof(meta.model), "%s", t->spec->name);
	meta.epoch = t->epochs_done;
	meta.seed = t->o.seed;
	meta.step = t->steps;
	meta.lr = t->o.lr;
	meta.batch_size = t->o.batch_size;
	meta.devices = t->K;
	rf__put64(meta.extra, t->prng->seed);
	rf__put64(meta.extra + 8, t->prng->counter);
	rf__put64(meta.extra + 16, (uint64_t)t->o.init);
	rf__put64(meta.extra + 24, t->train_view.count);
	meta.extra_len = 32;
	rf__blobs(t, bl, host);
	ret = rf_ckpt_save(rf_engine_ring(t->eng), path, &meta, bl, t->spec->ntensors, err, errlen);
	free(host);
	return ret;
}

int rf_trainer_load(struct rf_trainer *t, const char *path, char *err, size_t errlen)
{
	struct rf_ckpt_blob bl[RF_MODEL_MAX_TENSORS];
	struct rf_ckpt_meta meta = { 0 };
	float *host = calloc(t->spec->numel, sizeof(float));
	unsigned r, k;
	int ret;

	if (!host)
		return -ENOMEM;
	snprintf(meta.model, sizeof(meta.model), "%s", t->spec->name);
	rf__blobs(t, bl, host);
	ret = rf_ckpt_load(rf_engine_ring(t->eng), path, &meta, bl, t->spec->ntensors, err, errlen);
	if (ret == 0) {
		/* the continuation must be the same run */
		if (meta.seed != t->o.seed)
			rf__msg(err, errlen, "%s: saved by a run with --seed %" PRIu64 ", this run has "
				"--seed %" PRIu64, path, meta.seed, t->o.seed), ret = -ESTALE;
		else if (meta.batch_size != t->o.batch_size)
			rf__msg(err, errlen, "%s: saved by a run with --batch-size %u, this run has %u",
				path, meta.batch_size, t->o.batch_size), ret = -ESTALE;
		else if ((float)meta.lr != t->o.lr)
			rf__msg(err, errlen, "%s: saved by a run with --lr %g, this run has %g", path,
				meta.lr, (double)t->o.lr), ret = -ESTALE;
		else if (meta.extra_len >= 32 && rf__get64(meta.extra + 24) != t->train_view.count)
			rf__msg(err, errlen, "%s: saved by a run on %" PRIu64 " training records, this "
				"run has %" PRIu64, path, rf__get64(meta.extra + 24),
				t->train_view.count), ret = -ESTALE;
	}
	if (ret < 0) {
		free(host);
		return ret;
	}
	/* every replica gets the saved weights (views: padding stays 0) */
	for (r = 0; r < t->K && ret == 0; r++)
		for (k = 0; k < t->spec->ntensors && ret == 0; k++)
			ret = rf_tensor_write(t->rep[r]->p[k], host + t->spec->p[k].offset);
	if (ret == 0) {
		rf_engine_wait_var(t->eng, t->prng->var);
		if (meta.extra_len >= 16)
			t->prng->counter = rf__get64(meta.extra + 8);
		t->epochs_done = (unsigned)meta.epoch;
		t->steps = meta.step;
	} else {
		rf__msg(err, errlen, "%s: cannot write the parameters: %s", path, strerror(-ret));
	}
	free(host);
	return ret;
}
