/* train/trainer.c -- the trainer's life: options, create (data, devices, replicas,
 * store, loaders, result slots, window markers, in that order), destroy, and what a
 * caller may ask of it. Training itself: trainer-loop.c,
 * trainer-step.c (train/README.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer-impl.h"
#include "net-impl.h"
#include "ops.h"

#define RF__KEY_AGREE 4        /* rf_comm_allreduce_host keys: 0-3 metrics, hashes, BN, ckpt */

/* Copy opts (its strings too) and fill in the defaults. A path longer than its copy
 * can hold is refused (cut short, it could name another file). */
static int rf__copy_opts(struct rf_trainer *t, const struct rf_train_opts *opts)
{
	static const char *const what[] = { "--data", "--test-data", "--checkpoint" };
	const char *path[] = { opts->data_dir, opts->test_data, opts->checkpoint };

	for (unsigned i = 0; i < 3; i++)
		if (path[i] && !path[i][0]) {
			rf__trainer_msg(t, "%s: an empty path (NULL for the default)", what[i]);
			return -EINVAL;
		} else if (path[i] && strlen(path[i]) >= sizeof(t->data_dir)) {
			rf__trainer_msg(t, "%s: a path of %zu bytes, expected fewer than %zu",
					what[i], strlen(path[i]), sizeof(t->data_dir));
			return -ENAMETOOLONG;
		}
	t->o = *opts;
	snprintf(t->model_name, sizeof(t->model_name), "%s", opts->model ? opts->model : "mlp");
	snprintf(t->device_kind, sizeof(t->device_kind), "%s", opts->device ? opts->device : "cpu");
	snprintf(t->data_dir, sizeof(t->data_dir), "%s",
		 opts->data_dir ? opts->data_dir : RF_TRAIN_DEFAULT_DATA);
	t->o.model = t->model_name;
	t->o.device = t->device_kind;
	t->o.data_dir = t->data_dir;
	snprintf(t->test_data, sizeof(t->test_data), "%s", opts->test_data ? opts->test_data : "");
	t->o.test_data = opts->test_data ? t->test_data : NULL;
	snprintf(t->ckpt_path, sizeof(t->ckpt_path), "%s", opts->checkpoint ? opts->checkpoint : "");
	t->o.checkpoint = opts->checkpoint ? t->ckpt_path : NULL;
	if (!t->o.batch_size)
		t->o.batch_size = 256;
	if (t->o.lr == 0.0f)
		t->o.lr = rf_model_spec(t->model_name) ? rf_model_spec(t->model_name)->default_lr : 0.1f;
	if (t->o.init == RF_INIT_DEFAULT && rf_model_spec(t->model_name))
		t->o.init = (enum rf_init)rf_model_spec(t->model_name)->default_init;
	return 0;
}

/* RF_TRAIN_AUTO's choice: capture the step where replaying measured faster or as fast
 * (doc/measured.md, "Capture and replay"): in one process, on a device with its own
 * memory (one graph launch instead of hundreds of kernel launches), and on the CPU
 * for a model with convolutions (LeNet 1.15x; ResNet-18 the same time in half the
 * peak memory, its activations allocated once). A dense-only model on the CPU stays
 * op by op: the MLP ran 0.94x replayed, the batch's copy into the graph's input on
 * the critical path of a 1.4 ms step costing more than the pushes it saves. */
static int rf__replay_pays(const struct rf_trainer *t)
{
	if (t->comm)
		return 0;
	if (rf_device_kind_host_memory(t->device_kind) == 0)
		return 1;
	for (unsigned i = 0; i < t->spec->ntable; i++)
		if (t->spec->table[i].kind == RF_LAYER_CONV)
			return 1;
	return 0;
}

/* The model, replica count, window and streams; -EINVAL with a message naming the
 * option. */
static int rf__check_opts(struct rf_trainer *t)
{
	const struct rf_train_opts *o = &t->o;

	t->spec = rf_model_spec(t->model_name);
	if (!t->spec) {
		rf__trainer_msg(t, "--model %s: expected %s", t->model_name, rf_model_names());
		return -EINVAL;
	}
	if (rf_device_kind_host_memory(t->device_kind) < 0) {
		rf__trainer_msg(t, "--device %s: expected %s", t->device_kind, rf__kinds_or());
		return -EINVAL;
	}
	/* numbers the run would take without a word and go wrong with (a NaN lr diverges,
	 * an unknown init is none of the documented ones, a warm-up of 2^32 - 1 epochs
	 * wraps the schedule's arithmetic, a batch of 2^32 - 1 asks for terabytes) */
	if (!(o->lr > 0 && o->lr <= 1e6f)) {
		rf__trainer_msg(t, "--lr %g: expected a learning rate in (0, 1e6]", (double)o->lr);
		return -EINVAL;
	}
	if ((unsigned)o->init > RF_INIT_KAIMING) {
		rf__trainer_msg(t, "init %d: expected RF_INIT_DEFAULT (0) to RF_INIT_KAIMING (%d)",
				(int)o->init, RF_INIT_KAIMING);
		return -EINVAL;
	}
	if (o->batch_size > (1u << 20) || o->prefetch > 256) {
		rf__trainer_msg(t, "batch_size %u, prefetch %u: expected at most %u samples a batch "
				"and 256 slots", o->batch_size, o->prefetch, 1u << 20);
		return -EINVAL;
	}
	if (o->sched.warmup_epochs > 1000000 || o->sched.step_epochs > 1000000 ||
	    o->sched.epochs > 1000000) {
		rf__trainer_msg(t, "lr schedule: warm-up %u, step %u, %u epochs: expected at most "
				"1000000 each", o->sched.warmup_epochs, o->sched.step_epochs,
				o->sched.epochs);
		return -EINVAL;
	}
	if (o->blas_threads < 0 || o->blas_threads > 4096) {
		rf__trainer_msg(t, "blas_threads %d: expected 0 (the devices' policy) to 4096",
				o->blas_threads);
		return -EINVAL;
	}
	for (unsigned c = 0; c < o->norm_channels && c < RF_MODEL_NORM_MAX; c++)
		if (!isfinite(o->norm_mean[c]) || !isfinite(o->norm_std[c]) || o->norm_std[c] == 0) {
			rf__trainer_msg(t, "--normalize: channel %u: mean %g, std %g: expected finite "
					"numbers and a nonzero std", c, (double)o->norm_mean[c],
					(double)o->norm_std[c]);
			return -EINVAL;
		}
	/* every op the model pushes runs on that kind of device (say a GPU's library is
	 * missing): refused before anything starts */
	for (unsigned i = 0; i < t->spec->ntable; i++) {
		const char *ops[4];
		unsigned n = rf__layer_ops(t->spec->table[i].kind, ops);
		for (unsigned j = 0; j < n; j++)
			if (rf_device_kind_supports(t->device_kind, ops[j], RF_F32,
						    RF_LAYOUT_ROWMAJOR) == -ENOTSUP) {
				rf__trainer_msg(t, "--model %s --device %s: %s", t->model_name,
						t->device_kind, rf_last_error());
				return -ENOTSUP;
			}
	}
	if (t->o.image_size > 4096 || t->o.stem < 0 || t->o.stem > 2 ||
	    (t->o.stem && !t->o.image_size) ||
	    !(t->o.crop_scale >= 0.0f && t->o.crop_scale <= 1.0f) ||
	    (t->o.crop_scale != 0.0f && !t->o.image_size) ||
	    (t->o.stem == 2 && strcmp(t->model_name, "resnet18"))) {
		rf__trainer_msg(t, "image_size %u, stem %d, crop_scale %g: expected a size of "
				"1..4096 for images (0: Fashion-MNIST), and with a size only a stem "
				"(1 small, 2 ImageNet; ImageNet's for resnet18 only) and a crop "
				"scale in (0, 1]", t->o.image_size, t->o.stem,
				(double)t->o.crop_scale);
		return -EINVAL;
	}
	if (t->o.norm_channels > RF_MODEL_NORM_MAX) {
		rf__trainer_msg(t, "norm_channels %u: expected 0 (no mean and std) to %d",
				t->o.norm_channels, RF_MODEL_NORM_MAX);
		return -EINVAL;
	}
	if (t->o.image_size && t->o.augment) {
		rf__trainer_msg(t, "--augment: images are augmented by RandomResizedCrop and a "
				"flip already (--image-size); drop --augment");
		return -EINVAL;
	}
	if (t->o.order != RF_LOADER_ORDER_UNIFORM && t->o.order != RF_LOADER_ORDER_WINDOWED) {
		rf__trainer_msg(t, "order %d: expected RF_LOADER_ORDER_UNIFORM (0) or "
				"RF_LOADER_ORDER_WINDOWED (1)", t->o.order);
		return -EINVAL;
	}
	if ((unsigned)t->o.precision > RF_PRECISION_BF16 || t->o.channels_last < -1 ||
	    t->o.channels_last > 1) {
		rf__trainer_msg(t, "precision %d, channels_last %d: expected one of enum "
				"rf_precision and -1, 0 or 1", (int)t->o.precision, t->o.channels_last);
		return -EINVAL;
	}
	t->K = t->o.devices ? t->o.devices : 1;
	t->comm = t->o.comm;
	t->P = t->comm ? (unsigned)rf_comm_size(t->comm) : 1;
	t->rank = t->comm ? (unsigned)rf_comm_rank(t->comm) : 0;
	if (t->K > RF_TRAIN_MAX_DEVICES || (uint64_t)t->K * t->P > t->o.batch_size) {
		rf__trainer_msg(t, "--devices %u: expected 1..%d, and devices x processes (%u x %u) "
				"at most the batch size (%u)", t->K, RF_TRAIN_MAX_DEVICES, t->K,
				t->P, t->o.batch_size);
		return -EINVAL;
	}
	if (t->o.checkpoint_every && (!t->o.checkpoint || !t->o.checkpoint[0])) {
		rf__trainer_msg(t, "--checkpoint-every %u: needs --checkpoint FILE",
				t->o.checkpoint_every);
		return -EINVAL;
	}
	if (t->o.hybridize < RF_TRAIN_OFF || t->o.hybridize > RF_TRAIN_ON) {
		rf__trainer_msg(t, "opts.hybridize %d: expected RF_TRAIN_OFF (-1), RF_TRAIN_AUTO (0) "
				"or RF_TRAIN_ON (1)", t->o.hybridize);
		return -EINVAL;
	}
	if (t->o.fused_update < RF_TRAIN_OFF || t->o.fused_update > RF_TRAIN_ON) {
		rf__trainer_msg(t, "opts.fused_update %d: expected RF_TRAIN_OFF (-1), RF_TRAIN_AUTO "
				"(0) or RF_TRAIN_ON (1)", t->o.fused_update);
		return -EINVAL;
	}
	if (t->o.fused_update == RF_TRAIN_AUTO)
		t->o.fused_update = rf_device_kind_host_memory(t->device_kind) == 0 ? RF_TRAIN_ON
										   : RF_TRAIN_OFF;
	if (t->o.hybridize == RF_TRAIN_AUTO)  /* resolved once, here */
		t->o.hybridize = rf__replay_pays(t) ? RF_TRAIN_ON : RF_TRAIN_OFF;
	if (t->comm && t->o.hybridize > 0) {
		rf__trainer_msg(t, "--hybridize: one process only (a captured step would replay "
				"its collectives' sequence numbers); drop it or --dist");
		return -ENOTSUP;
	}
	if (t->comm && rf_device_kind_host_memory(t->device_kind) == 0 && t->K > 1) {
		rf__trainer_msg(t, "--device %s --devices %u with several processes: the "
				"kv-store sums across processes on host devices only; use one %s "
				"device per process (--devices 1)", t->device_kind, t->K, t->device_kind);
		return -ENOTSUP;
	}
	/* the gradient is a sum of K*P means: the decay grows with it, so that
	 * lr/(K*P) * (sum + K*P*wd*w) = lr * (mean + wd*w) (for K*P = 1: torch's bits) */
	if (!(t->o.momentum >= 0 && t->o.momentum < 1e6) ||
	    !(t->o.weight_decay >= 0 && t->o.weight_decay < 1e6) ||
	    (t->o.nesterov && t->o.momentum <= 0) ||
	    (t->o.adamw && (t->o.momentum != 0 || t->o.nesterov))) {
		rf__trainer_msg(t, "optimiser: momentum %g, weight decay %g%s: expected both >= 0%s",
				(double)t->o.momentum, (double)t->o.weight_decay,
				t->o.nesterov ? ", Nesterov" : "",
				t->o.adamw ? " (AdamW has no momentum setting)" :
				t->o.nesterov ? ", and momentum > 0 for Nesterov" : "");
		return -EINVAL;
	}
	if (t->o.sched.kind > RF_LR_COSINE ||
	    (t->o.sched.kind == RF_LR_STEP && (!t->o.sched.step_epochs ||
					       !(t->o.sched.gamma > 0 && t->o.sched.gamma <= 1e6))) ||
	    (t->o.sched.kind == RF_LR_COSINE && t->o.sched.epochs <= t->o.sched.warmup_epochs)) {
		rf__trainer_msg(t, "lr schedule: kind %d, step %u epochs, gamma %g, warm-up %u of %u "
				"epochs: expected constant, step (>= 1 epoch, gamma > 0) or cosine "
				"(more epochs than the warm-up)", (int)t->o.sched.kind,
				t->o.sched.step_epochs, t->o.sched.gamma, t->o.sched.warmup_epochs,
				t->o.sched.epochs);
		return -EINVAL;
	}
	t->opt.momentum = t->o.momentum;
	t->opt.weight_decay = t->o.weight_decay * (float)(t->K * t->P);
	t->opt.nesterov = t->o.nesterov;
	if (t->o.adamw) {
		/* Adam's step m/sqrt(v) does not change when the gradient is a sum of K*P
		 * means instead of their mean (m and sqrt(v) both grow K*P times), but for
		 * eps, which must grow with them: (S m)/(S sqrt(v) + S eps) is one device's
		 * step. (It was divided by S: eps 1e-8/S^2 in the mean's units, elements of
		 * tiny gradients stepping up to S times too far.) The decay is decoupled
		 * (w *= 1 - lr*wd): the lr and decay are the run's. */
		t->opt.adamw = 1;
		t->opt.beta1 = 0.9;
		t->opt.beta2 = 0.999;
		t->opt.eps = 1e-8 * (double)(t->K * t->P);
		t->opt.weight_decay = t->o.weight_decay;
	}
	rf__make_buckets(t);
	t->nstreams = t->o.streams ? t->o.streams : rf__auto_streams(t);
	if (t->o.window == RF_TRAIN_WINDOW_NONE) {
		t->window = 0;
	} else {
		t->window = t->o.window ? t->o.window : RF__WINDOW;
		if (t->window > RF_TRAIN_MAX_WINDOW) {
			rf__trainer_msg(t, "--window %u: expected 0..%d", t->window,
					RF_TRAIN_MAX_WINDOW);
			return -EINVAL;
		}
	}
	t->nmark = t->window ? t->window : 1;
	if (t->nstreams > 2) {
		rf__trainer_msg(t, "--streams %u: expected 1 or 2", t->nstreams);
		return -EINVAL;
	}
	return 0;
}

/* Every replica's per-epoch result slots, for the training and the test set. */
static int rf__make_slots(struct rf_trainer *t)
{
	uint64_t ntrain = rf_loader_batches_per_epoch(t->train_ld);
	uint64_t ntest = rf_loader_batches_per_epoch(t->test_ld);
	unsigned r;
	int ret;

	for (r = 0; r < t->K; r++) {
		char tag[24];
		snprintf(tag, sizeof(tag), "train%u", r);
		ret = rf__slots_make(&t->tr[r], t->dev[r], ntrain, tag);
		snprintf(tag, sizeof(tag), "test%u", r);
		if (ret == 0)
			ret = rf__slots_make(&t->te[r], t->dev[r], ntest, tag);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* The window's end-of-iteration marker variables. */
static int rf__make_markers(struct rf_trainer *t)
{
	unsigned w;

	t->marker = calloc(t->nmark, sizeof(*t->marker));
	if (!t->marker)
		return -ENOMEM;
	for (w = 0; w < t->nmark; w++) {
		char name[32];
		snprintf(name, sizeof(name), "iter_done.%u", w);
		rf_var_create(t->eng, name, &t->marker[w]);
		if (!t->marker[w])
			return -ENOMEM;
	}
	return 0;
}

static uint64_t rf__real(double d)
{
	uint64_t v;

	memcpy(&v, &d, sizeof(v));
	return v;
}

/* Several processes: every rank was given the same options that decide its
 * collectives and its result, compared before whatever depends on them, so that ranks
 * started with different arguments stop together, naming what differs, instead of
 * hanging (another device kind: one rank in its GPU's collective set-up, the other in this
 * comparison; another epoch count or evaluation), failing steps later in a collective
 * of another size (model, batch, buckets), or training a mix silently (limits, seed,
 * augmentation). Two parts: what was given (RF__AGREE_GIVEN), compared before any
 * data or device is opened, and what follows from the data and the model
 * (RF__AGREE_MADE: parameter and record counts), before the first collective of a
 * device's set-up. A comm without MPI (an environment launch) compares host values
 * over its GPU, so there both come after that set-up (rf_comm_host_ready). Local
 * choices (logging, prefetch, streams, paths) may differ. */
enum { RF__AGREE_GIVEN = 1, RF__AGREE_MADE = 2 };

static int rf__agree_opts(struct rf_trainer *t, unsigned parts)
{
	const struct rf_train_opts *o = &t->o;
	uint64_t norm = rf__fnv(RF__FNV0, &o->norm_channels, sizeof(o->norm_channels));
	struct rf_comm_setting s[48];
	unsigned n = 0;
	int ret;

	if (t->P == 1)
		return 0;
	norm = rf__fnv(norm, o->norm_mean, sizeof(o->norm_mean));
	norm = rf__fnv(norm, o->norm_std, sizeof(o->norm_std));
	const struct rf_comm_setting given[] = {
		{ "model", rf__fnv(RF__FNV0, t->model_name, sizeof(t->model_name)),
		  RF_COMM_SET_HASH },
		{ "device", rf__fnv(RF__FNV0, t->device_kind, sizeof(t->device_kind)),
		  RF_COMM_SET_HASH },
		{ "devices", t->K, RF_COMM_SET_INT },
		{ "batch_size", o->batch_size, RF_COMM_SET_INT },
		{ "seed", o->seed, RF_COMM_SET_INT },
		{ "init", (uint64_t)o->init, RF_COMM_SET_INT },
		{ "no_eval", (uint64_t)o->no_eval, RF_COMM_SET_INT },
		{ "order", (uint64_t)o->order, RF_COMM_SET_INT },
		{ "augment", (uint64_t)o->augment, RF_COMM_SET_INT },
		{ "image_size", o->image_size, RF_COMM_SET_INT },
		{ "crop_scale", rf__real(o->crop_scale), RF_COMM_SET_REAL },
		{ "stem", (uint64_t)o->stem, RF_COMM_SET_INT },
		{ "normalisation", norm, RF_COMM_SET_HASH },
		{ "skip_bad_images", (uint64_t)o->skip_bad_images, RF_COMM_SET_INT },
		{ "lr", rf__real(o->lr), RF_COMM_SET_REAL },
		{ "momentum", rf__real(o->momentum), RF_COMM_SET_REAL },
		{ "weight_decay", rf__real(o->weight_decay), RF_COMM_SET_REAL },
		{ "nesterov", (uint64_t)o->nesterov, RF_COMM_SET_INT },
		{ "adamw", (uint64_t)o->adamw, RF_COMM_SET_INT },
		{ "sched.kind", (uint64_t)o->sched.kind, RF_COMM_SET_INT },
		{ "sched.step_epochs", o->sched.step_epochs, RF_COMM_SET_INT },
		{ "sched.gamma", rf__real(o->sched.gamma), RF_COMM_SET_REAL },
		{ "sched.warmup_epochs", o->sched.warmup_epochs, RF_COMM_SET_INT },
		{ "sched.epochs", o->sched.epochs, RF_COMM_SET_INT },
		{ "precision", (uint64_t)o->precision, RF_COMM_SET_INT },
		{ "bucket_kb", o->bucket_kb, RF_COMM_SET_INT },
		{ "checkpoint (set)", o->checkpoint && o->checkpoint[0], RF_COMM_SET_INT },
		{ "checkpoint_every", o->checkpoint_every, RF_COMM_SET_INT },
		{ "max_steps", o->max_steps, RF_COMM_SET_INT },
	};
	_Static_assert(sizeof(given) / sizeof(given[0]) + 3 <= sizeof(s) / sizeof(s[0]),
		       "room for both parts");
	if (parts & RF__AGREE_GIVEN)
		for (unsigned i = 0; i < sizeof(given) / sizeof(given[0]); i++)
			s[n++] = given[i];
	if (parts & RF__AGREE_MADE) {
		s[n++] = (struct rf_comm_setting){ "parameters", t->rep[0]->params->numel,
						   RF_COMM_SET_INT };
		s[n++] = (struct rf_comm_setting){ "training records (limit)",
						   t->train_view.count, RF_COMM_SET_INT };
		s[n++] = (struct rf_comm_setting){ "test records (test_limit)",
						   o->no_eval ? 0 : t->test_view.count,
						   RF_COMM_SET_INT };
	}
	ret = rf_comm_agree(t->comm, "trainer", s, n, RF__KEY_AGREE);
	if (ret < 0)
		rf__trainer_msg(t, "%s", rf_last_error());
	return ret;
}

static int rf__setup(struct rf_trainer *t, const struct rf_train_opts *opts)
{
	int ret;

	int now;

	if ((ret = rf__copy_opts(t, opts)) < 0 || (ret = rf__check_opts(t)) < 0)
		return ret;
	now = !t->comm || rf_comm_host_ready(t->comm); /* else after the GPU's set-up */
	if ((now && (ret = rf__agree_opts(t, RF__AGREE_GIVEN)) < 0) ||
	    (ret = rf__open_data(t)) < 0 ||
	    (ret = rf__open_devices(t)) < 0 ||
	    (ret = rf__make_replicas(t)) < 0 ||
	    (now && (ret = rf__agree_opts(t, RF__AGREE_MADE)) < 0) ||
	    (ret = rf__make_kvstore(t)) < 0 ||
	    (ret = rf__make_loaders(t)) < 0 ||
	    (ret = rf__make_slots(t)) < 0 ||
	    (ret = rf__make_markers(t)) < 0 ||
	    (!now && (ret = rf__agree_opts(t, RF__AGREE_GIVEN | RF__AGREE_MADE)) < 0))
		return ret;
	return 0;
}

int rf_trainer_check_opts(const struct rf_train_opts *opts)
{
	struct rf_train_opts def = { 0 };
	struct rf_trainer *t = calloc(1, sizeof(*t));
	int ret;

	if (!t)
		return rf__fail(-ENOMEM, "rf_trainer_check_opts: %s", strerror(ENOMEM));
	if ((ret = rf__copy_opts(t, opts ? opts : &def)) == 0 && (ret = rf__check_opts(t)) == 0)
		ret = rf__check_data(t, 1);
	if (ret < 0)
		rf__fail(ret, "%s", t->msg[0] ? t->msg : strerror(-ret));
	free(t);
	return ret < 0 ? ret : 0;
}

int rf_trainer_create(struct rf_trainer **out, struct rf_engine *e,
		      const struct rf_train_opts *opts)
{
	struct rf_train_opts def = { 0 };
	struct rf_trainer *t;
	int ret;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return rf__fail(-ENOMEM, "trainer: %s", strerror(ENOMEM));
	t->eng = e;
	ret = rf__setup(t, opts ? opts : &def);
	if (ret < 0) {
		if (!t->msg[0])
			rf__trainer_msg(t, "trainer: %s", strerror(-ret));
		rf__fail(ret, "%s", t->msg);
		rf_trainer_destroy(t);
		return ret;
	}
	*out = t;
	return 0;
}

static void rf__free_markers(struct rf_trainer *t)
{
	unsigned w;

	for (w = 0; t->marker && w < t->nmark; w++)
		if (t->marker[w])
			rf_var_destroy(t->eng, t->marker[w], NULL, NULL, NULL);
	free(t->marker);
}

void rf_trainer_destroy(struct rf_trainer *t)
{
	unsigned r;

	if (!t)
		return;
	rf_loader_cancel(t->train_ld);  /* nothing more is read: stalled reads end now */
	rf_loader_cancel(t->test_ld);
	rf_engine_wait_all(t->eng);
	rf__hybrid_free(t);
	rf_loader_destroy(t->train_ld);
	rf_loader_destroy(t->test_ld);
	rf__free_markers(t);
	for (r = 0; r < RF_TRAIN_MAX_DEVICES; r++) {
		rf__epoch_slots_free(&t->tr[r]);
		rf__epoch_slots_free(&t->te[r]);
		rf_model_destroy(t->rep[r]);
	}
	rf_kv_destroy(t->kv);
	if (t->prng)
		rf_prng_destroy(t->prng);
	rf_engine_wait_all(t->eng);
	rf__close_devices(t);
	rf_dataset_close(&t->train_ds);
	if (!t->no_test)                /* else the training set's copy */
		rf_dataset_close(&t->test_ds);
	free(t);
}

unsigned rf_trainer_epochs_done(const struct rf_trainer *t)
{
	return t->epochs_done;
}

uint64_t rf_trainer_epoch_batches_done(const struct rf_trainer *t)
{
	return t->ebatch;
}

uint64_t rf_trainer_steps(const struct rf_trainer *t)
{
	return t->steps;
}

unsigned rf_trainer_replicas(const struct rf_trainer *t)
{
	return t->K;
}

int rf_trainer_hybridized(const struct rf_trainer *t)
{
	return t->o.hybridize > 0;
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

uint64_t rf_trainer_test_samples(const struct rf_trainer *t)
{
	return t->no_test ? 0 : t->test_view.count;
}

const char *const *rf_trainer_class_names(const struct rf_trainer *t, unsigned *n)
{
	const struct rf_dataset *ds = t->o.eval_only ? &t->test_ds : &t->train_ds;

	*n = ds->classes ? ds->num_classes : 0;
	return ds->classes ? (const char *const *)ds->classes : NULL;
}

int rf_trainer_param_hash(struct rf_trainer *t, uint64_t *hash)
{
	int ret;

	t->msg[0] = 0;
	if ((ret = rf__refuse_call(t, 1)) == 0 && (ret = rf__params_hash(t, hash)) < 0)
		rf__trainer_msg(t, "reading the parameters back failed: %s", strerror(-ret));
	return rf__trainer_end(t, ret);
}

int rf_trainer_read_params(struct rf_trainer *t, unsigned r, float *dst)
{
	int ret;

	t->msg[0] = 0;
	if (r >= t->K || !dst) {
		rf__trainer_msg(t, "rf_trainer_read_params: replica %u of %u, dst %s: expected a "
				"replica below the count and a buffer", r, t->K, dst ? "set" : "NULL");
		ret = -EINVAL;
	} else if ((ret = rf__refuse_call(t, 1)) == 0 &&
		   (ret = rf_tensor_read(t->rep[r]->params, dst)) < 0) {
		rf__trainer_msg(t, "reading replica %u's parameters failed: %s", r, strerror(-ret));
	}
	return rf__trainer_end(t, ret);
}
