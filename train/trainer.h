/* ringflow/trainer.h — the training loop of rf-train as a library (tests call it).
 *
 * A trainer holds K model replicas (model.h), one per device, the Fashion-MNIST train
 * and test sets behind two loaders (loader.h), and for K > 1 a key-value store
 * (kvstore.h). rf_trainer_epoch() trains one epoch and evaluates the test set:
 *
 *   per batch t (asynchronous: every step below is pushed, nothing waits)
 *     loader:   batch t+L is requested L = prefetch−1 batches ahead (its read, gather
 *               and decode run while batches t, t+1 compute), sharded over the K devices;
 *               across the epoch boundary too: the first batches of epoch e+1 (and of
 *               the next evaluation) are requested while the last ones of epoch e (of
 *               this evaluation) are pushed, so that the reads of a new epoch do not
 *               stall its first iteration. The batches and their order are the same
 *               (the loader's order depends on (seed, epoch) only); after the last
 *               epoch those requests are wasted (a few batches' reads)
 *     window:   before pushing t, wait for the marker of iteration t−W (W = opts.window,
 *               default 2): batch t−2 has finished (its SGD too) before batch t starts,
 *               so at most two iterations are in flight (seed §12.2.4 and its exercise
 *               2). The marker of iteration t is an inline no-op op that reads every
 *               replica's parameters and the iteration's loss/correct slots and writes
 *               marker variable t mod W; waiting on that variable is
 *               rf_engine_wait_var. Each iteration in flight holds its own activations
 *               (allocated at push, freed when its backward pass has run), so W bounds
 *               the activation memory; without a window only the engine's op cap does.
 *     barrier:  optionally (opts.barrier_every) wait for all work every N iterations.
 *     replica r: forward on its shard; the loss sum and correct count go into slot
 *               t of two small per-epoch tensors on r's device (no host read per
 *               batch); backward writes r's gradient views, last layer first
 *     K = 1:    SGD of each layer is pushed right after its gradient (a model hook)
 *     K > 1:    per parameter tensor, last layer first: kv push of the K gradients
 *               (sum on the key's home), kv pull into every replica's gradient view,
 *               SGD on every replica with lr/K (each replica's gradient is the mean
 *               over its shard, so the sum/K is the batch mean; uneven shards are
 *               scaled by K·n_r/n first). The reduction of layer l runs on the kv
 *               stream as soon as layer l's gradients exist, while the replicas'
 *               backward passes go on with layers l−1 … 0 (seed §12.7).
 *   epoch end: wait for the parameters, read the per-epoch loss/correct slots once;
 *   then the test set, forward only, the same window, its correct counts read once.
 *
 * Every replica starts from replica 0's initialisation (copied) and applies the same
 * summed gradient, so all replicas hold the same bits after every step.
 *
 * Determinism: the same options and seed give the same weights bit for bit on the
 * same device kind and replica count (Philox init drawn in a fixed order, the loader's
 * shuffle from (seed, epoch), fixed summation orders, OpenBLAS with a fixed thread
 * count). Resuming from a checkpoint after epoch e gives the same weights as the
 * uninterrupted run: plain SGD has no state besides the weights, and the shuffle of
 * epoch e+1 depends only on (seed, e+1).
 *
 * Reactor thread only (the engine's). Functions return 0 or -errno and, where they
 * take err, write one line (no newline) saying what went wrong.
 */
#ifndef RINGFLOW_TRAINER_H
#define RINGFLOW_TRAINER_H

#include <stddef.h>
#include <stdint.h>
#include "engine.h"
#include "device.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_TRAIN_DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
#define RF_TRAIN_MAX_DEVICES 16
#define RF_TRAIN_WINDOW_NONE 0xffffffffu   /* rf_train_opts.window: no window */
#define RF_TRAIN_MAX_WINDOW 65536          /* largest finite window */

struct rf_epoch_stats {
	unsigned epoch;          /* 1-based: epochs completed including this one */
	uint64_t samples;        /* training samples of the epoch */
	double train_loss;       /* mean over the epoch's samples (weights as they were
				  * when each batch was seen, as d2l reports it) */
	double train_acc;
	double test_loss, test_acc; /* after the epoch, over the test set (or its limit) */
	double seconds;          /* wall time of the training part (first push to last
				  * parameter write), evaluation excluded as in d2l */
	double eval_seconds;     /* wall time of the test-set evaluation */
	double samples_per_s;    /* samples / seconds */
};

/* Progress (optional): after every pushed batch; loss is the running mean training
 * loss when it was read back (every opts.log_every batches), else negative. */
typedef void (*rf_train_progress_fn)(void *ctx, unsigned epoch, uint64_t batch,
				     uint64_t nbatches, double loss);

struct rf_train_opts {
	const char *model;         /* "mlp" (default) or "lenet" */
	const char *data_dir;      /* NULL: RF_TRAIN_DEFAULT_DATA; IDX files, raw or .gz */
	unsigned batch_size;       /* 0: 256 */
	float lr;                  /* 0: 0.1 (mlp), 0.2 (lenet) */
	const char *device;        /* "cpu" (default) or "cuda" */
	unsigned devices;          /* replicas K (0: 1). CPU: K CPU devices of one worker
				    * stream each; CUDA: GPU r mod (GPUs), two streams each */
	uint64_t seed;
	enum rf_init init;         /* RF_INIT_KAIMING (0, the default) or another (model.h) */
	uint64_t limit;            /* train on the first `limit` records (0: all) */
	uint64_t test_limit;       /* evaluate the first `test_limit` test records (0: all) */
	unsigned log_every;        /* read the loss back every N batches (0: epoch end) */
	unsigned prefetch;         /* loader batch slots (0: 4) */
	unsigned streams;          /* compute streams per replica, 1 or 2. With 2 the weight
				    * gradients and SGD run on the second, beside the data
				    * gradients on the first (model.h, s2). 0: auto — 2 for
				    * LeNet on a CPU with >= 2 cores and one replica, else 1
				    * (trainer.c says why) */
	int blas_threads;          /* OpenBLAS threads (0: devices' policy) */
	int in_memory;             /* loader: read the payload file into memory */
	int no_eval;               /* skip the test set (test_acc reported as -1) */
	unsigned window;           /* iterations in flight: before pushing iteration t, wait
				    * for iteration t−window to finish. 0: 2 (the default,
				    * seed §12.2.4 exercise 2); RF_TRAIN_WINDOW_NONE: never wait
				    * (the front end runs ahead, bounded only by the engine's
				    * max_inflight and nothing else) */
	unsigned barrier_every;    /* after every N iterations of a pass (training or test
				    * set), wait for all work (rf_engine_wait_all), like the
				    * seed's per-batch .item()/wait_to_read() barrier. 0: never.
				    * Changes timing only, never results */
	rf_train_progress_fn progress;  /* optional */
	void *progress_ctx;
};

struct rf_trainer;

/* Open the data, the devices, the replicas (initialised from opts->seed), the
 * loaders and the store on engine e (borrowed; it must outlive the trainer). opts and
 * its strings are copied. Errors (with a message in err): -ENOENT dataset not found
 * (the message says "apt-get install dataset-fashion-mnist"), -ENODEV no CUDA device,
 * -EINVAL bad option, or what the loader/dataset report. *out owned by the caller. */
int rf_trainer_create(struct rf_trainer **out, struct rf_engine *e,
		      const struct rf_train_opts *opts, char *err, size_t errlen);
/* Waits for all work, frees everything, closes the devices. NULL ignored. */
void rf_trainer_destroy(struct rf_trainer *t);

/* Train one epoch and evaluate; fills *st. */
int rf_trainer_epoch(struct rf_trainer *t, struct rf_epoch_stats *st, char *err, size_t errlen);
/* Evaluate the test set with the current weights (accuracy and mean loss). */
int rf_trainer_evaluate(struct rf_trainer *t, double *acc, double *loss, char *err, size_t errlen);

/* Epochs completed so far (after a resume: the checkpoint's). */
unsigned rf_trainer_epochs_done(const struct rf_trainer *t);
unsigned rf_trainer_replicas(const struct rf_trainer *t);
/* Compute streams per replica in use (opts.streams, or the automatic choice). */
unsigned rf_trainer_streams(const struct rf_trainer *t);
const struct rf_model_spec *rf_trainer_spec(const struct rf_trainer *t);
struct rf_model *rf_trainer_replica(struct rf_trainer *t, unsigned r);
/* Batches per training epoch. */
uint64_t rf_trainer_batches(const struct rf_trainer *t);

/* Copy replica r's parameters (spec->numel floats, the whole block, padding included)
 * into dst (caller's). Waits for the writes pushed so far. */
int rf_trainer_read_params(struct rf_trainer *t, unsigned r, float *dst);

/* Checkpoints (train/checkpoint.h): save the parameters (replica 0, one tensor per
 * parameter, PyTorch names and shapes), epochs done, seed, lr, batch size, replicas
 * and the init PRNG's state; load them into every replica and continue after the
 * saved epoch. Load refuses (with a message) a file for another model or shapes, a
 * truncated or corrupt file, and one from a run with another seed, batch size or
 * learning rate (the continuation would not be that run). */
int rf_trainer_save(struct rf_trainer *t, const char *path, char *err, size_t errlen);
int rf_trainer_load(struct rf_trainer *t, const char *path, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
