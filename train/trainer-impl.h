/* train/trainer-impl.h -- the trainer's state and the steps its files share; internal
 * to train/. Which file does what: train/README.md. */
#ifndef RF_TRAINER_IMPL_H
#define RF_TRAINER_IMPL_H

#include <stdint.h>
#include <string.h>

#include "trainer.h"
#include "kvstore.h"
#include "dataset.h"
#include "loader.h"
#include "rf-internal.h"
#include "checkpoint.h"

#define RF__WINDOW 2            /* iterations in flight by default */
#define RF__MAXQ 16             /* loader look-ahead queue */
#define RF__MAXV (RF_TRAIN_MAX_DEVICES * (RF_MODEL_MAX_TENSORS + 3))
#define RF__MSG_LEN 1024

/* Per-epoch result slots of one replica: slot b holds batch b's loss sum and correct
 * count. One block each (on the replica's device), a view per batch. */
struct rf__slots {
	struct rf_tensor *loss, *corr;          /* (nb) f32, (nb) i32 */
	struct rf_tensor **lv, **cv;            /* views (1) */
	uint64_t nb;
};

/* The loader look-ahead queue: batches requested (their ops pushed) and not yet
 * pushed through the model, at most prefetch-1 of them. It runs across the epoch
 * boundary (README.md, "look-ahead"). */
struct rf__queue {
	struct rf_batch q[RF__MAXQ];
	unsigned qh, qn;
	uint64_t lepoch;                        /* the epoch the loader's next call serves */
	int valid;                              /* q and lepoch follow the loader */
};

/* opts.hybridize: the training iteration captured once (its first full-size batch)
 * and replayed: the graph reads its own input tensors and writes its own result
 * scalars, which each replay's copies fill and empty (trainer-step.c). */
struct rf__hybrid {
	struct rf_graph *g;
	struct rf_model_acts *acts[RF_TRAIN_MAX_DEVICES];    /* kept: the graph uses them */
	struct rf_tensor *x[RF_TRAIN_MAX_DEVICES], *y[RF_TRAIN_MAX_DEVICES];
	struct rf_tensor *loss[RF_TRAIN_MAX_DEVICES], *corr[RF_TRAIN_MAX_DEVICES];
	uint64_t shard_n[RF_TRAIN_MAX_DEVICES];              /* the rows captured */
	uint64_t launches;
};

struct rf_trainer {
	struct rf_train_opts o;
	char model_name[16], device_kind[8], data_dir[RF_TRAIN_PATH_MAX],
	     test_data[RF_TRAIN_PATH_MAX];
	struct rf_engine *eng;
	const struct rf_model_spec *spec;
	unsigned K;
	struct rf_device *dev[RF_TRAIN_MAX_DEVICES];
	unsigned ndev_open;
	struct rf_device *host;                 /* devices of their own memory: a host
						 * device for staging */
	struct rf_model *rep[RF_TRAIN_MAX_DEVICES];
	struct rf_kvstore *kv;
	struct rf_comm *comm;                   /* borrowed; NULL: one process */
	unsigned P, rank;                       /* processes, ours */
	unsigned bucket_lo[RF_MODEL_MAX_LAYERS]; /* layer l's bucket is layers
						 * bucket_lo[l]..(its top) */
	struct rf_prng *prng;
	struct rf_dataset train_ds, test_ds;    /* opened (owned) */
	int no_test;                            /* no_eval and no test set named or beside
						 * the training set: test_ds is a copy of
						 * train_ds (not closed), one record of it
						 * viewed, never read */
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
	uint64_t ebatch;                        /* batches of epoch epochs_done trained before
						 * the next pass starts (a mid-epoch
						 * checkpoint's; else 0) */
	double carry_loss;                      /* their loss sum and correct count, summed */
	uint64_t carry_corr;                    /* over every rank */
	char ckpt_path[RF_TRAIN_PATH_MAX];      /* o.checkpoint's copy */
	uint64_t stop_at;                       /* where o.max_steps stopped the last pass */
	unsigned nstreams;                      /* compute streams per replica */
	struct rf_optim opt;                    /* set per epoch: lr (SGD: over K*P, the sum
						 * of K*P shards' mean gradients as one batch
						 * mean), weight decay times K*P (SGD) */
	struct rf__hybrid *hy;                  /* opts.hybridize, once captured */
	char msg[RF__MSG_LEN];                  /* the running call's message ("": none) */
	char broken[RF__MSG_LEN];               /* a pass failed after pushing: its first
						 * message ("": none); see rf__refuse_call */
	char last_error[RF__MSG_LEN];           /* rf_trainer_last_error() */
};

/* trainer-msg.c: a step writes what went wrong into t->msg; a public call ends with
 * rf__trainer_end(), which makes it the trainer's and the thread's last error. */
void rf__trainer_msg(struct rf_trainer *t, const char *fmt, ...) RF__PRINTF(2, 3);
int rf__trainer_end(struct rf_trainer *t, int ret);
/* "; loader: " when ld has a message, else "": "%s%s", rf__loader_sep(ld), its message */
const char *rf__loader_sep(const struct rf_loader *ld);

/* trainer-data.c */
int rf__open_data(struct rf_trainer *t);
/* The data the options name, checked without opening anything that could block (a
 * FIFO): https refused, IDX files regular, a test set a regular file; headers: the
 * .rfrec headers read too (rf_trainer_check_opts; rf__open_data's opens read them). */
int rf__check_data(struct rf_trainer *t, int headers);
int rf__make_loaders(struct rf_trainer *t);

/* trainer-devices.c */
unsigned rf__auto_streams(const struct rf_trainer *t);
int rf__open_devices(struct rf_trainer *t);
int rf__make_replicas(struct rf_trainer *t);
int rf__make_kvstore(struct rf_trainer *t);
void rf__close_devices(struct rf_trainer *t);

/* trainer-slots.c */
int rf__slots_make(struct rf__slots *sl, struct rf_device *d, uint64_t nb, const char *tag);
void rf__epoch_slots_free(struct rf__slots *sl);
int rf__slots_clear(struct rf__slots *sl, struct rf_stream *s);
int rf__slots_sum(struct rf__slots *sl, uint64_t nb, double *loss, uint64_t *corr);

/* trainer-grad.c: from gradients to the update when they are summed (K > 1 or a
 * comm); one process, one device: rf__sgd_hook. */
int rf__reduces(const struct rf_trainer *t);
void rf__make_buckets(struct rf_trainer *t);
/* One step's reduction state, the backward hooks' ctx (nothing of it lives in the
 * trainer): its batch (uneven shards are scaled by it) and the highest layer whose
 * gradients it has not reduced yet. */
struct rf__reduce {
	struct rf_trainer *t;
	const struct rf_batch *b;
	int todo;
};
int rf__grad_hook(void *ctx, struct rf_model *m, unsigned layer);
int rf__reduce_through(struct rf__reduce *rd, int layer);
int rf__params_hash(struct rf_trainer *t, uint64_t *h);
/* After a failed epoch or evaluation call: whether it left poisoned state behind (its
 * markers), and then every later pass is refused with -EIO and broken's message
 * (trainer-msg.c); save and the parameter reads too, where the weights are poisoned.
 * rf__refuse_call, asked first by every call that turns the reactor, also refuses one
 * made off the engine's thread or inside its callbacks (-EDEADLK). */
void rf__note_broken(struct rf_trainer *t);
int rf__refuse_call(struct rf_trainer *t, int weights);
/* The device kinds of this build, for a message: "a, b or c" (trainer-devices.c). */
const char *rf__kinds_or(void);
int rf__dist_sum(struct rf_trainer *t, double *l, uint64_t *c);

/* trainer-step.c */
int rf__window_wait(struct rf_trainer *t);
int rf__train_iter(struct rf_trainer *t, const struct rf_batch *b);
int rf__eval_iter(struct rf_trainer *t, const struct rf_batch *b);
/* opts.hybridize: free the captured iteration (after its launches; never waits). */
void rf__hybrid_free(struct rf_trainer *t);

/* trainer-ckpt.c: the checkpoint after `done` batches of the running epoch
 * (o.checkpoint_every); every rank calls it, rank 0 writes. */
int rf__save_mid(struct rf_trainer *t, uint64_t done);

/* A float's bits (the run state keeps --momentum and --wd so). */
static inline uint32_t rf__fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

/* trainer-ckpt-check.c: the model input's mean and std per channel as one word (0:
 * none; the run state's RF__RS_NORM); and whether the checkpoint at path (meta, its run
 * state rs) is of this run: 0, or -ESTALE / -EBADMSG with the message in t. */
uint64_t rf__norm_hash(const struct rf_model_input *in);
struct rf_ckpt_meta;
struct rf__runstate;
int rf__ckpt_same_run(struct rf_trainer *t, const char *path, const struct rf_ckpt_meta *meta,
		      const struct rf__runstate *rs);
/* ... its optimiser and schedule only (checked first: they decide the file's tensors) */
int rf__ckpt_same_optim(struct rf_trainer *t, const char *path, const struct rf_ckpt_meta *meta,
			const struct rf__runstate *rs);

/* trainer-ckpt.c: the checkpoint blob of parameter tensor p, named name, its floats at
 * data (the checkpoints' and the exports' builder) */
void rf__param_blob(struct rf_ckpt_blob *bl, const char *name, const struct rf_param_spec *p,
		    float *data);

#endif
