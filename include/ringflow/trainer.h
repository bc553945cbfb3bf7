/* ringflow/trainer.h -- the training loop of rf-train as a library (tests call it):
 * K model replicas, the train and test loaders and, for K > 1, a key-value store.
 * What one iteration pushes, the reduction and determinism: train/README.md.
 * Reactor thread only. Functions return 0 or -errno; a failing call leaves one line
 * in rf_trainer_last_error() and rf_last_error() (rf_trainer_create: only the latter).
 */
#ifndef RINGFLOW_TRAINER_H
#define RINGFLOW_TRAINER_H

#include <stddef.h>
#include <stdint.h>
#include "engine.h"
#include "device.h"
#include "model.h"
#include "comm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_TRAIN_DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
#define RF_TRAIN_MAX_DEVICES 16
#define RF_TRAIN_WINDOW_NONE 0xffffffffu   /* rf_train_opts.window: no window */
#define RF_TRAIN_MAX_WINDOW 65536          /* largest finite window */
#define RF_TRAIN_AUGMENT_PAD 4             /* opts.augment: the crop's zero padding */
#define RF_TRAIN_PATH_MAX 4096             /* a data file's path, its NUL included */
#define RF_TRAIN_MAX_INPUTS 8              /* rf_train_inputs' paths at most */

struct rf_epoch_stats {
	unsigned epoch;          /* 1-based: epochs completed including this one */
	double lr;               /* the learning rate of this epoch (the schedule's) */
	uint64_t samples;        /* training samples of the epoch */
	double train_loss;       /* mean over the epoch's samples (weights as they were
				  * when each batch was seen, not recomputed after the epoch) */
	double train_acc;
	double test_loss, test_acc; /* after the epoch, over the test set (or its limit) */
	double seconds;          /* wall time of the training part (first push to last
				  * parameter write), evaluation excluded (eval_seconds) */
	double eval_seconds;     /* wall time of the test-set evaluation */
	double samples_per_s;    /* samples / seconds */
	uint64_t param_hash;     /* FNV-1a 64 of replica 0's parameter block after the
				  * epoch (with a comm: checked equal on every rank) */
	uint64_t batches;        /* batches this call trained */
	int stopped;             /* 1: opts.max_steps ended the call inside the epoch,
				  * after batch `batches_done` of it: epoch is not counted,
				  * the losses are of the batches so far, there was no
				  * evaluation, and the next call continues the epoch */
	uint64_t batches_done;   /* with stopped: the epoch's batches trained so far */
	uint64_t images_skipped; /* opts.skip_bad_images: training images of this call that
				  * failed to decode and were replaced */
};

/* Progress (optional): after every pushed batch; loss is the running mean training
 * loss when it was read back (every opts.log_every batches), else negative. */
typedef void (*rf_train_progress_fn)(void *ctx, unsigned epoch, uint64_t batch,
				     uint64_t nbatches, double loss);

/* The learning rate per epoch: a linear warm-up over warmup_epochs (from base/(W+1)
 * up, base at epoch W), then constant, step (times gamma every step_epochs) or cosine
 * (from base to 0 over the epochs left: epochs - W). PyTorch's LinearLR(start_factor
 * 1/(W+1), total_iters W), StepLR and CosineAnnealingLR(T_max epochs - W, eta_min 0),
 * joined by SequentialLR at epoch W; tests/train/ref/lr.ref holds their values. */
enum rf_lr_kind { RF_LR_CONSTANT = 0, RF_LR_STEP = 1, RF_LR_COSINE = 2 };
struct rf_lr_schedule {
	enum rf_lr_kind kind;
	unsigned step_epochs;      /* RF_LR_STEP: epochs per step (>= 1) */
	double gamma;              /* RF_LR_STEP: the factor per step */
	unsigned warmup_epochs;    /* 0: none */
	unsigned epochs;           /* RF_LR_COSINE: all epochs, the warm-up's included */
};
/* The learning rate of epoch e (0-based) for base lr. */
double rf_lr_at(const struct rf_lr_schedule *s, double base, unsigned e);

enum { RF_TRAIN_OFF = -1, RF_TRAIN_AUTO = 0, RF_TRAIN_ON = 1 };

struct rf_train_opts {
	const char *model;         /* "mlp" (default) or "lenet" */
	const char *data_dir;      /* NULL: RF_TRAIN_DEFAULT_DATA. A directory of the IDX
				    * files (raw or .gz), or a .rfrec file (rf-pack's) of the
				    * training set: u8 28x28 images, labels of 10 classes */
	const char *test_data;     /* with a .rfrec data_dir: the test set's .rfrec; NULL:
				    * beside it, its name with "train" made "t10k", else
				    * "test" (fmnist-train.rfrec: fmnist-t10k.rfrec) */
	/* Images (a .rfrec of JPEG/PNG images, rf-pack --image-folder, or a WebDataset
	 * shard PATH.tar, as data_dir and test_data): decoded to 3 x image_size x
	 * image_size, RandomResizedCrop + flip for training, resize + centre crop for the
	 * test set; the model takes that input and the files' class count. 0: the data
	 * are Fashion-MNIST's 28x28 images. */
	unsigned image_size;
	float crop_scale;          /* with image_size: RandomResizedCrop's smallest area
				    * fraction (0: 0.08; 1: the whole image, resized, and
				    * the test set's whole images, not a centre crop) */
	int stem;                  /* with image_size, ResNet-18's stem: 0 auto (ImageNet's
				    * 7x7/2 + max pool from 128 pixels up, else the small
				    * 3x3), 1 small, 2 ImageNet (enum rf_stem + 1) */
	/* x = (u8 / 255 - norm_mean[ch]) / norm_std[ch] for each of the input's channels
	 * (norm_channels: 3 for images, 1 for Fashion-MNIST; 1 with images: the one mean
	 * and std for every channel), as torchvision's Normalize; 0: x = u8 / 255. The
	 * model and its export record it (rf_model_input). */
	unsigned norm_channels;
	float norm_mean[RF_MODEL_NORM_MAX], norm_std[RF_MODEL_NORM_MAX];
	int skip_bad_images;       /* images that fail to decode take a good neighbour's row
				    * and label, counted in rf_epoch_stats (loader option
				    * skip_bad_images); 0: the step fails, naming the file */
	unsigned batch_size;       /* 0: 256 */
	float lr;                  /* 0: 0.1 (mlp), 0.2 (lenet) */
	float momentum;            /* torch.optim.SGD's (dampening 0); 0: plain SGD */
	float weight_decay;        /* L2 added to the gradient, as torch.optim.SGD */
	int nesterov;              /* 1: Nesterov momentum (needs momentum > 0) */
	int adamw;                 /* 1: torch.optim.AdamW (betas 0.9, 0.999, eps 1e-8) with
				    * lr and weight_decay (decoupled), instead of SGD */
	struct rf_lr_schedule sched;  /* zero: constant lr */
	const char *device;        /* "cpu" (default) or "cuda" */
	enum rf_precision precision; /* device.h: 0 the device's default (CUDA: tf32), fp32,
				    * tf32, bf16 (mixed precision: the convolutional part's
				    * activations in bf16, rf_model_set_format). The CPU
				    * computes in fp32 whatever is asked */
	int channels_last;         /* the convolutional part's layout: 0 auto (NHWC on a
				    * device whose memory is its own and which runs the
				    * model's ops so, else row-major), 1 NHWC, -1 row-major.
				    * Results are the same bits in either on the CPU */
	unsigned devices;          /* replicas K (0: 1). CPU: K CPU devices of one worker
				    * stream each; CUDA: GPU r mod (GPUs), two streams each */
	uint64_t seed;
	enum rf_init init;         /* RF_INIT_DEFAULT (0: the model's) or another (model.h) */
	uint64_t limit;            /* train on the first `limit` records (0: all) */
	uint64_t test_limit;       /* evaluate the first `test_limit` test records (0: all) */
	unsigned log_every;        /* read the loss back every N batches (0: epoch end) */
	unsigned prefetch;         /* loader batch slots (0: 4) */
	unsigned streams;          /* compute streams per replica, 1 or 2. With 2 the weight
				    * gradients and SGD run on the second, beside the data
				    * gradients on the first (model.h, s2). 0: auto: 2 for
				    * LeNet on a CPU with >= 2 cores and one replica, else 1
				    * (trainer-devices.c says why) */
	int blas_threads;          /* OpenBLAS threads (0: devices' policy) */
	int in_memory;             /* loader: read the payload file into memory */
	int order;                 /* the training set's shuffle (loader.h): 0 uniform
				    * (RF_LOADER_ORDER_UNIFORM), 1 windowed */
	unsigned http_timeout_ms;  /* an http:// data set: the loader's per-step timeout
				    * (rf_loader_opts.http_timeout_ms; 0: its default) */
	int verify;                /* 1: read every .rfrec whole at start: its data CRC and
				    * labels checked (RF_DS_VERIFY); 0: the header only */
	int augment;               /* 1: the training images, as the loader gathers them: a
				    * random crop of the image padded by RF_TRAIN_AUGMENT_PAD
				    * zeros, then a horizontal flip with probability 1/2; each
				    * record's draw a function of (seed, epoch, record) only
				    * (rf_loader_augment_of). The test set: never */
	int no_eval;               /* skip the test set (test_acc reported as -1) */
	unsigned window;           /* iterations in flight: before pushing iteration t, wait
				    * for iteration t-window to finish. 0: 2 (the default:
				    * two iterations in flight); RF_TRAIN_WINDOW_NONE: never wait
				    * (the front end runs ahead, bounded only by the engine's
				    * max_inflight and nothing else) */
	int hybridize;             /* the training
				    * iteration -- forward, backward, reductions, updates --
				    * captured at the first step (engine.h, capture and replay)
				    * and replayed after, the batch copied into the graph's
				    * inputs, lr and step passed per launch; a batch of
				    * another size is pushed op by op. Results bit-identical
				    * to the op-by-op run. One process only (no comm).
				    * RF_TRAIN_AUTO (0): on in one process where replaying
				    * measured faster or as fast: a device that is not host
				    * memory (one graph launch instead of hundreds of kernel
				    * launches) and, on the CPU, a model with convolutions
				    * (one push per step instead of 40-300, its activations
				    * allocated once); off for a dense-only model on the CPU
				    * (the batch's copy into the graph costs more) and with comm;
				    * RF_TRAIN_ON: on (refused with comm);
				    * RF_TRAIN_OFF: op by op */
	int fused_update;          /* the optimizer's update with one replica in one process:
				    * RF_TRAIN_ON: one op over the whole parameter block at the
				    * end of backward (one kernel instead of one per tensor);
				    * RF_TRAIN_OFF: per layer as its gradients are ready (on
				    * the second stream, overlapping the rest of backward);
				    * RF_TRAIN_AUTO (0): on for a device that is not host
				    * memory, off on the CPU. The same bits either way. With
				    * several replicas or processes updates follow the
				    * reductions, per layer */
	unsigned barrier_every;    /* after every N iterations of a pass (training or test
				    * set), wait for all work (rf_engine_wait_all), as a loop
				    * that reads its loss back (PyTorch's loss.item()) waits for
				    * the work before it. 0: never.
				    * Changes timing only, never results */
	struct rf_comm *comm;      /* several processes (borrowed; NULL: this one only): the
				    * global batch is cut into devices x size shards, this
				    * rank reads and trains its own; gradients are summed over
				    * every rank (train/README.md, "several processes") */
	unsigned bucket_kb;        /* with a comm and one device: reduce contiguous layers'
				    * gradients together until a bucket holds this many KiB
				    * (0: one layer's weight and bias per collective) */
	const char *checkpoint;    /* the file the trainer itself saves to inside an epoch:
				    * every checkpoint_every batches, and where max_steps
				    * stops it (NULL: none) */
	unsigned checkpoint_every; /* save `checkpoint` after every N batches of an epoch
				    * (not after its last: the caller saves at epoch ends with
				    * rf_trainer_save). Every rank takes part, rank 0 writes.
				    * rf_trainer_load of such a file continues at that batch:
				    * the epoch's remaining batches, each exactly once, and
				    * the weights of the uninterrupted run, bit for bit */
	uint64_t max_steps;        /* stop once this many optimizer steps are done in all
				    * (resumed runs count the file's; 0: no limit): an epoch
				    * ends there with stats.stopped, after saving checkpoint
				    * if set; later calls go on from there */
	rf_train_progress_fn progress;  /* optional */
	void *progress_ctx;
	int eval_only;             /* 1: only rf_trainer_evaluate is called (rf-infer): of a
				    * directory of IDX files only the test set's two are
				    * opened, and stand in for the training set too; the
				    * parameters start at zero, for the caller to load
				    * (rf_export_load, rf_trainer_load); rf_trainer_epoch
				    * refuses (-EINVAL) */
};

struct rf_trainer;

/* Check a training configuration without starting anything (no engine, device or
 * read of the data): what rf_trainer_create refuses from the options alone -- the
 * model and whether that kind of device runs its ops, the numbers (devices, window,
 * optimiser, schedule, ...) -- and the data named: https refused, a directory's IDX
 * files (any that are there) regular files, a .rfrec's header (local or http://), a
 * test set a regular file. Nothing is opened that could block (no FIFO). 0, or
 * -errno with the message, naming the option (--data, --model, ...), in
 * rf_last_error. A missing data directory is left to rf_trainer_create (its message
 * says how to install Fashion-MNIST). */
int rf_trainer_check_opts(const struct rf_train_opts *opts);
/* Open the data, the devices, the replicas (initialised from opts->seed), the
 * loaders and the store on engine e (borrowed; it must outlive the trainer). opts and
 * its strings are copied. Errors (with a message in rf_last_error()): -ENOENT dataset not found
 * (the message says "apt-get install dataset-fashion-mnist"), -ENODEV no CUDA device,
 * -EINVAL bad option, or what the loader/dataset report. *out owned by the caller. */
int rf_trainer_create(struct rf_trainer **out, struct rf_engine *e,
		      const struct rf_train_opts *opts);
/* Waits for all work, frees everything, closes the devices. NULL ignored. */
void rf_trainer_destroy(struct rf_trainer *t);

/* 1 when data (a --data value) names a .rfrec file -- an http:// URL or a local
 * regular file -- or WebDataset shards by a brace pattern (rf_dataset_is_shard_pattern)
 * rather than a directory of IDX files; else 0. Every tool classifies
 * its data this way, so that a path and a URL to the same file mean the same thing. */
int rf_train_data_is_rfrec(const char *data);
/* The local files rf_trainer_create reads for opts, as it finds them, so that a caller
 * can keep its outputs off them before anything runs: a .rfrec data_dir and its test
 * set (test_data, or the one beside it); of a directory, each IDX file there, raw and
 * .gz both where both are (either may be read). URLs and files that are not there are
 * left out (rf_trainer_create reports those). Fills paths[0..n-1] (caller's, at least
 * RF_TRAIN_MAX_INPUTS of them); returns n. */
int rf_train_inputs(const struct rf_train_opts *opts, char (*paths)[RF_TRAIN_PATH_MAX]);

/* Train one epoch and evaluate; fills *st. On failure (in training or in the
 * evaluation after it) st->epoch still names the epoch that failed (1-based).
 * A pass that fails after pushing leaves the trainer's state poisoned, as of a step it
 * cannot name: every later epoch, evaluation and load is refused with -EIO and a
 * message naming that first failure -- as are save, rf_trainer_param_hash and
 * rf_trainer_read_params where a training step failed (after a failed evaluation the
 * weights are as trained, and a save works). To go on: destroy the trainer, create
 * another and rf_trainer_load a checkpoint. */
int rf_trainer_epoch(struct rf_trainer *t, struct rf_epoch_stats *st);
/* Evaluate the test set with the current weights (accuracy and mean loss). */
int rf_trainer_evaluate(struct rf_trainer *t, double *acc, double *loss);

/* Epochs completed so far (after a resume: the checkpoint's). */
unsigned rf_trainer_epochs_done(const struct rf_trainer *t);
/* Batches of the next epoch already trained: 0, or after loading a checkpoint taken
 * inside an epoch (opts.checkpoint_every), the batch the next rf_trainer_epoch starts
 * at. */
uint64_t rf_trainer_epoch_batches_done(const struct rf_trainer *t);
/* Optimizer steps done in all (after a resume: the checkpoint's included). */
uint64_t rf_trainer_steps(const struct rf_trainer *t);
/* Model replicas this process trains (opts.devices; 0 there: 1). */
unsigned rf_trainer_replicas(const struct rf_trainer *t);
/* Compute streams per replica in use (opts.streams, or the automatic choice). */
unsigned rf_trainer_streams(const struct rf_trainer *t);
/* whether the training step is captured and replayed (opts.hybridize resolved) */
int rf_trainer_hybridized(const struct rf_trainer *t);
/* The spec of the model being trained, made for the data's input shape and classes
 * (static storage, as rf_model_spec's). */
const struct rf_model_spec *rf_trainer_spec(const struct rf_trainer *t);
/* Replica r's model (owned by the trainer, valid while t lives), NULL for
 * r >= rf_trainer_replicas(t). */
struct rf_model *rf_trainer_replica(struct rf_trainer *t, unsigned r);
/* Batches per training epoch. */
uint64_t rf_trainer_batches(const struct rf_trainer *t);
/* Records of the test set an evaluation reads (opts.test_limit applied). */
uint64_t rf_trainer_test_samples(const struct rf_trainer *t);
/* The class names of the data (the training set's; the test set's with
 * opts.eval_only), label k's at [k], and their count in *n; NULL and *n 0 where the files
 * name none (IDX files, WebDataset shards, an .rfrec written without names). Valid
 * while t lives. rf-train exports them, rf-infer compares them with an export's. */
const char *const *rf_trainer_class_names(const struct rf_trainer *t, unsigned *n);

/* The FNV-1a 64 hash of replica 0's parameter block as it is now (the whole block,
 * padding included: rf_epoch_stats.param_hash's). Waits for the writes pushed so far. */
int rf_trainer_param_hash(struct rf_trainer *t, uint64_t *hash);

/* Copy replica r's parameters (spec->numel floats, the whole block, padding included)
 * into dst (caller's). Waits for the writes pushed so far. */
int rf_trainer_read_params(struct rf_trainer *t, unsigned r, float *dst);

/* Checkpoints (train/checkpoint.h): save the parameters (replica 0, one tensor per
 * parameter, PyTorch names and shapes), epochs done, seed, lr, batch size, replicas
 * and the init PRNG's state; load them into every replica and continue after the
 * saved epoch. Load refuses (with a message) a file for another model or shapes, a
 * truncated or corrupt file, and one from a run with another seed, batch size or
 * learning rate (the continuation would not be that run). A run that diverged has
 * nothing worth keeping: save refuses (-EDOM, the file left as it was) when a weight,
 * a momentum, a running statistic or the epoch's running loss is NaN or infinite, and
 * load refuses a file holding one. With several processes (opts.comm) load is a
 * collective: every rank calls it, and the ranks compare where they resumed and the
 * weights' hash (rf_comm_agree: -EPROTO, rf_comm_apart, when they differ).
 * rf_trainer_save and rf_trainer_load return 0 or -errno, the message in
 * rf_trainer_last_error(). */
int rf_trainer_save(struct rf_trainer *t, const char *path);
int rf_trainer_load(struct rf_trainer *t, const char *path);

/* The message of the trainer's last failing call ("" if none); kept until the next
 * failure. */
const char *rf_trainer_last_error(const struct rf_trainer *t);

#ifdef __cplusplus
}
#endif
#endif
