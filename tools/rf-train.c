/* rf-train -- train the MLP, LeNet or ResNet-18 on Fashion-MNIST (trainer.h), on the
 * CPU or CUDA, on one or several devices, with the engine running everything
 * asynchronously. The command line is train-cli.c's; this file runs what it asked.
 *
 *   rf-train --model mlp|lenet|resnet18 [--data DIR] [--epochs N] [--batch-size B] [--lr LR]
 *            [--device cpu|cuda] [--devices K] [--seed S] [--checkpoint FILE]
 *            [--resume] [--trace FILE] [--metrics FILE.csv] [--json] ...
 *
 * Exit status: 0 done; 1 a run-time failure (dataset missing, no CUDA device, a
 * refused checkpoint, an op failing) or a path that cannot be used (an output whose
 * directory is missing, anything but a regular file: checked before training starts);
 * 2 a bad argument. Every error is one line on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringflow/ring.h>
#include <ringflow/engine.h>
#include <ringflow/device.h>
#include <ringflow/trainer.h>
#include <ringflow/checkpoint.h>
#include <ringflow/export.h>
#include <ringflow/comm.h>
#include <ringflow/dataset.h>

#include "cli.h"
#include "train-cli.h"

/* Signals: SIGINT, SIGTERM or SIGHUP stops the run after the current step. The
 * library's checkpoints are kill-safe by themselves (written unnamed, O_TMPFILE, and
 * published by one rename: train/checkpoint.c), so this only keeps a step's save and
 * the step itself whole: the handler records the signal, and the run dies of it at
 * the next step boundary (the progress callback, or when a trainer call returns). A
 * second signal a second or more later kills at once: a run stuck in a collective or
 * a stalled read must still stop (a launcher's own repeat, timeout(1) signalling child
 * and group, comes at once and is the same request). A single signal does too, a
 * second later, when the step is stuck in a wait (interrupted(), below). */
static int sig_caught;        /* __atomic: set by a handler in any thread */
static int64_t sig_first_ms;  /* __atomic: when it came */

/* Rank 0 of several processes (or the only one) writes what the run leaves behind --
 * the checkpoint, metrics, export, trace -- and prints the stats and JSON. */
static int leader(const struct cli *c)
{
	return c->rank == 0;
}

/* Die of sig now (its default action). */
static void die_of(int sig)
{
	signal(sig, SIG_DFL);
	raise(sig);     /* in a handler: delivered, and fatal, once the handler returns */
}

static int64_t now_ms(void) /* async-signal-safe */
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_signal(int sig)
{
	int saved = errno, none = 0;
	int64_t t = now_ms();

	if (__atomic_compare_exchange_n(&sig_caught, &none, sig, 0, __ATOMIC_SEQ_CST,
					__ATOMIC_SEQ_CST))
		__atomic_store_n(&sig_first_ms, t, __ATOMIC_SEQ_CST);
	else if (t - __atomic_load_n(&sig_first_ms, __ATOMIC_SEQ_CST) >= 1000)
		die_of(sig);        /* the user insists */
	errno = saved;
}

/* The engine's interrupt (rf_engine_set_interrupt): a step that has not ended a second
 * after a signal is stuck -- a stalled server, a read that will time out -- and its
 * wait ends, so that the run dies of the signal at once (the trainer call returns). */
static int interrupted(void *arg)
{
	(void)arg;
	return __atomic_load_n(&sig_caught, __ATOMIC_SEQ_CST) &&
	       now_ms() - __atomic_load_n(&sig_first_ms, __ATOMIC_SEQ_CST) >= 1000;
}

/* A step boundary: a signal that came ends the run now. */
static void stop_if_signalled(void)
{
	int sig = __atomic_load_n(&sig_caught, __ATOMIC_SEQ_CST);

	if (sig)
		die_of(sig);
}

static void progress(void *ctx, unsigned epoch, uint64_t batch, uint64_t nb, double loss)
{
	struct cli *c = ctx;

	stop_if_signalled(); /* between two steps */

	if (loss >= 0)
		c->last_loss = loss;
	else if (batch <= 1)
		c->last_loss = -1;
	if (c->tty && !c->quiet) {
		int w = 30, fill = (int)(batch * (uint64_t)w / (nb ? nb : 1)), i;
		fprintf(c->out, "\repoch %u [", epoch);
		for (i = 0; i < w; i++)
			fputc(i < fill ? '=' : i == fill ? '>' : ' ', c->out);
		fprintf(c->out, "] %" PRIu64 "/%" PRIu64, batch, nb);
		if (c->last_loss >= 0)
			fprintf(c->out, " loss %.4f", c->last_loss);
		fflush(c->out);
	} else if (loss >= 0 && !c->quiet) {
		fprintf(c->out, "epoch %u batch %" PRIu64 "/%" PRIu64 " loss %.4f\n", epoch, batch, nb,
			loss);
	}
}

static void json_list(FILE *f, const char *key, const double *v, unsigned n, const char *fmt)
{
	fprintf(f, ", \"%s\": [", key);
	for (unsigned i = 0; i < n; i++) {
		fprintf(f, i ? ", " : "");
		rf_cli_json_num(f, fmt, v[i]);
	}
	fprintf(f, "]");
}

/* A write to the --metrics CSV failed (a full disk): one line, exit status 1. */
static int metrics_failed(const struct cli *c)
{
	rf_cli_say(prog, "--metrics %s: cannot write: %s", c->metrics, strerror(errno));
	return -1;
}

static int open_metrics(const struct cli *c, FILE **mf)
{
	struct stat sb;
	char why[4200];
	int append = c->resume && stat(c->metrics, &sb) == 0 && sb.st_size > 0;
	int fd = rf_cli_open(c->metrics, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC),
			     0644, 0, NULL, why, sizeof(why));

	if (fd < 0 || !(*mf = fdopen(fd, append ? "a" : "w"))) {
		if (fd >= 0) {
			snprintf(why, sizeof(why), "%s: %s", c->metrics, strerror(errno));
			close(fd);
		}
		rf_cli_say(prog, "--metrics %s", why);
		return -1;
	}
	if (!append && (fprintf(*mf, "epoch,train_loss,train_acc,test_acc,seconds,"
				  "samples_per_s\n") < 0 || fflush(*mf) != 0))
		return metrics_failed(c);
	return 0;
}

static void print_header(const struct cli *c, const struct rf_trainer *t)
{
	const struct rf_model_spec *sp = rf_trainer_spec(t);
	size_t np = 0;

	for (unsigned k = 0; k < sp->ntensors; k++)
		np += sp->p[k].numel;
	fprintf(c->out, "rf-train: %s (%zu parameters) on %s x%u (%u stream%s each)", sp->name, np,
		c->o.device, rf_trainer_replicas(t), rf_trainer_streams(t),
		rf_trainer_streams(t) > 1 ? "s" : "");
	if (c->dist)
		fprintf(c->out, " x %d process%s (%s)", c->world, c->world == 1 ? "" : "es",
			c->dist == 1 ? "MPI" : "NCCL, launched by RANK/WORLD_SIZE");
	fprintf(c->out, ", batch %u, lr %g, seed %" PRIu64 ", %" PRIu64 " batches/epoch\n",
		c->o.batch_size ? c->o.batch_size : 256,
		(double)c->o.lr, c->o.seed,
		rf_trainer_batches(t));
}

/* The epoch's line, and its --metrics row: 0, or -1 where the row could not be
 * written (said). */
static int print_epoch(const struct cli *c, const struct rf_epoch_stats *st, FILE *mf)
{
	if (c->tty && !c->quiet)
		fprintf(c->out, "\r\033[K");
	fprintf(c->out, "epoch %u/%u: loss %.4f, train acc %.4f, ", st->epoch, c->epochs,
		st->train_loss, st->train_acc);
	if (st->test_acc >= 0)
		fprintf(c->out, "test acc %.4f, ", st->test_acc);
	fprintf(c->out, "%.2f s (%.0f samples/s)", st->seconds, st->samples_per_s);
	if (st->test_acc >= 0)
		fprintf(c->out, ", eval %.2f s", st->eval_seconds);
	if (c->o.sched.kind != RF_LR_CONSTANT || c->o.sched.warmup_epochs)
		fprintf(c->out, ", lr %.6g", st->lr);
	if (st->images_skipped)
		fprintf(c->out, ", %" PRIu64 " bad image%s skipped", st->images_skipped,
			st->images_skipped == 1 ? "" : "s");
	fputc('\n', c->out);
	fflush(c->out);
	if (mf && (fprintf(mf, "%u,%.6f,%.6f,%.6f,%.4f,%.1f\n", st->epoch, st->train_loss,
			   st->train_acc, st->test_acc, st->seconds, st->samples_per_s) < 0 ||
		   fflush(mf) != 0))
		return metrics_failed(c);
	return 0;
}

/* The epochs' times, for the final JSON. */
struct run {
	double *secs, *sps, tot_s, tot_n;
	unsigned ran;                /* epochs run by this process */
	int stopped;                 /* --max-steps ended the run */
	uint64_t skipped;            /* --skip-bad-images: images replaced, all epochs */
	struct rf_epoch_stats st;    /* the last epoch's */
	const char *const *cn;       /* --export: the data's class names (NULL: none) */
	unsigned ncn;
};

/* Train up to c->epochs, checkpointing after each epoch. 0 or the exit status. */
static int train_epochs(const struct cli *c, struct rf_trainer *t, FILE *mf, struct run *run)
{
	while (rf_trainer_epochs_done(t) < c->epochs) {
		int ret = rf_trainer_epoch(t, &run->st);

		stop_if_signalled();
		if (ret < 0) {
			if (c->tty && !c->quiet)
				fputc('\n', c->out);
			/* the epoch that failed, in its training or its evaluation */
			rf_cli_say(prog, "epoch %u: %s", run->st.epoch, rf_trainer_last_error(t));
			return 1;
		}
		if (run->st.stopped) {
			/* --max-steps inside an epoch (the trainer saved the checkpoint) */
			if (c->tty && !c->quiet)
				fprintf(c->out, "\r\033[K");
			fprintf(c->out, "stopped after step %" PRIu64 " (--max-steps): epoch %u, "
				"batch %" PRIu64 "/%" PRIu64 ", loss so far %.4f%s%s\n",
				rf_trainer_steps(t), run->st.epoch, run->st.batches_done,
				rf_trainer_batches(t), run->st.train_loss,
				c->checkpoint ? ", saved to " : "", c->checkpoint ? c->checkpoint : "");
			run->stopped = 1;
			return 0;
		}
		if (print_epoch(c, &run->st, mf) < 0)
			return 1;
		if (!isfinite(run->st.train_loss)) {
			/* nothing recovers from here; the checkpoint keeps its last state */
			rf_cli_say(prog, "epoch %u: the training loss is %s: the run diverged (a "
				   "lower --lr, or --warmup-epochs, may help)%s%s%s", run->st.epoch,
				   isnan(run->st.train_loss) ? "nan" : "infinite",
				   c->checkpoint ? "; " : "",
				   c->checkpoint ? c->checkpoint : "",
				   c->checkpoint ? " not written" : "");
			return 1;
		}
		run->secs[run->ran] = run->st.seconds;
		run->sps[run->ran] = run->st.samples_per_s;
		run->tot_s += run->st.seconds;
		run->tot_n += (double)run->st.samples;
		run->skipped += run->st.images_skipped;
		run->ran++;
		if (c->checkpoint && leader(c)) {
			ret = rf_trainer_save(t, c->checkpoint);
			stop_if_signalled();
			if (ret < 0) {
				rf_cli_say(prog, "checkpoint: %s", rf_trainer_last_error(t));
				return 1;
			}
		}
		if (c->o.max_steps && rf_trainer_steps(t) >= c->o.max_steps &&
		    rf_trainer_epochs_done(t) < c->epochs) {
			fprintf(c->out, "stopped after step %" PRIu64 " (--max-steps), at the end of "
				"epoch %u\n", rf_trainer_steps(t), rf_trainer_epochs_done(t));
			run->stopped = 1;
			return 0;
		}
	}
	return 0;
}

/* Nothing left to train (--epochs 0, or resumed at the last epoch): report the
 * weights as they are -- their hash, and (unless --no-eval) their test accuracy. */
static int evaluate_only(const struct cli *c, struct rf_trainer *t, struct run *run)
{
	run->st.epoch = rf_trainer_epochs_done(t);
	run->st.train_loss = run->st.train_acc = -1;
	run->st.test_acc = run->st.test_loss = -1;
	if (rf_trainer_param_hash(t, &run->st.param_hash) < 0) {
		rf_cli_say(prog, "%s", rf_trainer_last_error(t));
		return 1;
	}
	if (c->o.no_eval)
		return 0;
	if (rf_trainer_evaluate(t, &run->st.test_acc, &run->st.test_loss) < 0) {
		rf_cli_say(prog, "%s", rf_trainer_last_error(t));
		return 1;
	}
	fprintf(c->out, "nothing to train (%u epochs done): test acc %.4f\n", run->st.epoch,
		run->st.test_acc);
	return 0;
}

/* --stats: the engine's counters on stderr. */
static void print_stats(const struct cli *c, struct rf_engine *eng, struct rf_engine_stats *es)
{
	char cap[24] = "none", win[24] = "none";

	rf_engine_wait_all(eng);
	rf_engine_get_stats(eng, es);
	if (c->max_inflight != UINT_MAX)
		snprintf(cap, sizeof(cap), "%u", c->max_inflight ? c->max_inflight : 4096);
	if (c->o.window != RF_TRAIN_WINDOW_NONE)
		snprintf(win, sizeof(win), "%u", c->o.window ? c->o.window : 2);
	fprintf(stderr, "rf-train: engine: %" PRIu64 " ops pushed, %" PRIu64 " completed, %"
		PRIu64 " failed, %" PRIu64 " cap waits, max in flight %u (cap %s), window %s, "
		"barrier every %u\n", es->pushed, es->completed, es->failed, es->cap_waits,
		es->max_inflight_seen, cap, win, c->o.barrier_every);
}

/* What ran how on replica 0's device (graph replays, fallbacks, each convolution's
 * plan): on stderr (--stats), or as the --json object's "device_stats". */
static void print_device_stats(const struct rf_trainer *t, int json)
{
	const struct rf_model *m = rf_trainer_replica((struct rf_trainer *)t, 0);
	struct rf_device_stats ds;
	char buf[512];

	if (!m || rf_device_get_stats(m->dev, &ds) < 0)
		return;
	if (!json) {
		fprintf(stderr, "rf-train: %s: %" PRIu64 " device graphs captured, %" PRIu64
			" replayed, %" PRIu64 " failed, %" PRIu64 " stale; %" PRIu64 " ops by a "
			"fallback path; %u convolution plans\n", rf_device_name(m->dev),
			ds.graph_captures, ds.graph_replays, ds.graph_failures, ds.graph_stale,
			ds.fallbacks, ds.plans);
		for (unsigned i = 0; i < ds.plans; i++)
			if (rf_device_plan_json(m->dev, i, buf, sizeof(buf)) > 0)
				fprintf(stderr, "rf-train:   plan %s\n", buf);
		return;
	}
	printf(", \"device_stats\": {\"graph_captures\": %" PRIu64 ", \"graph_replays\": %"
	       PRIu64 ", \"graph_failures\": %" PRIu64 ", \"graph_stale\": %" PRIu64
	       ", \"fallbacks\": %" PRIu64 ", \"plans\": [", ds.graph_captures, ds.graph_replays,
	       ds.graph_failures, ds.graph_stale, ds.fallbacks);
	for (unsigned i = 0, k = 0; i < ds.plans; i++)
		if (rf_device_plan_json(m->dev, i, buf, sizeof(buf)) > 0)
			printf("%s%s", k++ ? ", " : "", buf);
	printf("]}");
}

/* --json: the final object on stdout. */
static void print_json(const struct cli *c, const struct rf_trainer *t, const struct run *run,
		       const struct rf_engine_stats *es)
{
	const struct rf_epoch_stats *st = &run->st;

	/* numbers through rf_cli_json_num: a NaN or an infinity is null (JSON has none) */
	printf("{\"model\": \"%s\", \"device\": \"%s\", \"devices\": %u, \"streams\": %u, "
	       "\"epochs\": %u, \"epochs_run\": %u, \"batch_size\": %u, \"lr\": ",
	       rf_trainer_spec(t)->name, c->o.device, rf_trainer_replicas(t),
	       rf_trainer_streams(t), c->epochs, run->ran,
	       c->o.batch_size ? c->o.batch_size : 256);
	rf_cli_json_num(stdout, "%g", (double)c->o.lr);
	printf(", \"seed\": %" PRIu64, c->o.seed);
	{
		/* what the run computed in: the device's precision, the convolutional
		 * part's dtype and layout */
		const struct rf_model *m = rf_trainer_replica((struct rf_trainer *)t, 0);
		printf(", \"precision\": \"%s\", \"act_dtype\": \"%s\", \"layout\": \"%s\"",
		       m ? rf_precision_name(rf_device_precision(m->dev)) : "?",
		       m ? rf_tdtype_name(m->act_dtype) : "?",
		       m ? rf_layout_name(m->act_layout) : "?");
	}
	printf(", \"hybridize\": %s", rf_trainer_hybridized(t) ? "true" : "false");
	{
		char k[160];
		/* plain words (an ISA, OpenBLAS's core name): nothing to escape */
		printf(", \"cpu_kernels\": \"%s\"", rf_cpu_kernels(k, sizeof(k)));
	}
	printf(", \"optimizer\": \"%s\", \"momentum\": ", c->o.adamw ? "adamw" : "sgd");
	rf_cli_json_num(stdout, "%g", (double)c->o.momentum);
	printf(", \"weight_decay\": ");
	rf_cli_json_num(stdout, "%g", (double)c->o.weight_decay);
	printf(", \"nesterov\": %s", c->o.nesterov ? "true" : "false");
	printf(", \"final_train_loss\": ");
	rf_cli_json_num(stdout, "%.6f", st->train_loss);
	printf(", \"final_train_acc\": ");
	rf_cli_json_num(stdout, "%.6f", st->train_acc);
	/* -1: not evaluated (--no-eval): null, not a number that reads as one */
	printf(", \"final_test_acc\": ");
	rf_cli_json_num(stdout, "%.6f", st->test_acc < 0 ? NAN : st->test_acc);
	printf(", \"final_test_loss\": ");
	rf_cli_json_num(stdout, "%.6f", st->test_acc < 0 ? NAN : st->test_loss);
	json_list(stdout, "epoch_seconds", run->secs, run->ran, "%.4f");
	json_list(stdout, "epoch_samples_per_s", run->sps, run->ran, "%.1f");
	printf(", \"images_skipped\": %" PRIu64, run->skipped);
	if (c->stats)
		printf(", \"engine\": {\"pushed\": %" PRIu64 ", \"completed\": %" PRIu64
		       ", \"graph_launches\": %" PRIu64
		       ", \"cap_waits\": %" PRIu64 ", \"max_inflight_seen\": %u"
		       ", \"max_inflight\": %u, \"window\": %u, \"barrier_every\": %u}",
		       es->pushed, es->completed, es->graph_launches, es->cap_waits,
		       es->max_inflight_seen,
		       c->max_inflight == UINT_MAX ? 0 : c->max_inflight ? c->max_inflight : 4096,
		       c->o.window == RF_TRAIN_WINDOW_NONE ? 0 : c->o.window ? c->o.window : 2,
		       c->o.barrier_every);
	print_device_stats(t, 1);
	printf(", \"world_size\": %d, \"param_hash\": \"%016" PRIx64 "\"", c->dist ? c->world : 1,
	       st->param_hash);
	printf(", \"samples_per_s\": ");
	rf_cli_json_num(stdout, "%.1f", run->tot_s > 0 ? run->tot_n / run->tot_s : 0.0);
	printf("}\n");
}

/* A failure of the run's start, said and turned into the exit status: ranks given
 * different settings (rf_comm_apart: every rank knows it) say it once, from rank 0, and
 * exit 2 as for a bad argument (a rerun would start apart again); rank 0 waits a
 * moment first so that its line is out before mpirun ends the job for the others'
 * exits. Anything else: said by the rank it happened on, status 1. */
static int apart_or(const struct cli *c, const char *msg)
{
	if (!c->o.comm || !rf_comm_apart(c->o.comm)) {
		rf_cli_say(prog, "%s", msg);
		return 1;
	}
	if (leader(c)) {
		rf_cli_say(prog, "%s", msg);
		fflush(NULL);
	} else {
		usleep(200000);
	}
	return 2;
}

/* The trainer (resumed with --resume), the metrics file, the epochs and the reports.
 * 0 or the exit status. */
static int run_training(struct cli *c, struct rf_engine *eng, struct rf_trainer **tp,
			FILE **mf, struct run *run)
{
	struct rf_engine_stats es = { 0 };
	struct rf_trainer *t;
	int rc, ret;

	if ((ret = rf_trainer_create(tp, eng, &c->o)) < 0) {
		stop_if_signalled();  /* an open a signal interrupted: the run dies of it */
		return apart_or(c, rf_last_error());
	}
	t = *tp;
	/* the command line's own settings that every rank must share (the trainer's
	 * options were compared by rf_trainer_create -- after which a launch without MPI
	 * has its host collectives, through the GPU -- the resumed place is by
	 * rf_trainer_load): another epoch count leaves one rank in a collective the
	 * others never join; one rank resuming, another not, trains two runs */
	const struct rf_comm_setting s[] = {
		{ "--epochs", c->epochs, RF_COMM_SET_INT },
		{ "--resume", (uint64_t)c->resume, RF_COMM_SET_INT },
	};
	if (c->o.comm && rf_comm_agree(c->o.comm, "rf-train", s, 2, 6) < 0)
		return apart_or(c, rf_last_error());
	/* the data's class names for the export, where its files name them: asked now,
	 * not after the training (names that JSON cannot hold: an export without them) */
	if (c->export_dir && (run->cn = rf_trainer_class_names(t, &run->ncn)) &&
	    rf_export_check_names(run->cn, run->ncn) < 0) {
		rf_cli_say(prog, "--export: the data's %s: the export records no class names "
			   "(rf-infer then compares the class count only)", rf_last_error());
		run->cn = NULL;
		run->ncn = 0;
	}
	if (c->resume) {
		if (rf_trainer_load(t, c->checkpoint) < 0) {
			char m[1100];
			snprintf(m, sizeof(m), "cannot resume: %s", rf_trainer_last_error(t));
			return apart_or(c, m);
		}
		if (rf_trainer_epoch_batches_done(t))
			fprintf(c->out, "resumed from %s in epoch %u after batch %" PRIu64 "/%"
				PRIu64 "\n", c->checkpoint, rf_trainer_epochs_done(t) + 1,
				rf_trainer_epoch_batches_done(t), rf_trainer_batches(t));
		else
			fprintf(c->out, "resumed from %s after epoch %u\n", c->checkpoint,
				rf_trainer_epochs_done(t));
	}
	if (c->metrics && leader(c) && open_metrics(c, mf) < 0)
		return 1;
	run->secs = calloc(c->epochs + 1, sizeof(double));
	run->sps = calloc(c->epochs + 1, sizeof(double));
	if (!run->secs || !run->sps)
		return 1;
	print_header(c, t);
	if ((rc = train_epochs(c, t, *mf, run)))
		return rc;
	if (!run->ran && !run->stopped && (rc = evaluate_only(c, t, run)))
		return rc;
	if (c->export_dir && leader(c) &&
	    rf_model_export_named(rf_engine_ring(eng), rf_trainer_replica(t, 0), c->export_dir,
				  run->cn, run->ncn) < 0) {
		rf_cli_say(prog, "--export: %s", rf_last_error());
		return 1;
	}
	if (c->stats && leader(c)) {
		print_stats(c, eng, &es);
		print_device_stats(t, 0);
	}
	if (c->json && leader(c))
		print_json(c, t, run, &es);
	return 0;
}

/* The watchdog fired: a collective has been outstanding --dist-timeout seconds. */
static void on_stall(void *ctx, const struct rf_comm_stall *st, const char *msg)
{
	(void)ctx;
	(void)st;
	rf_cli_say(prog, "--dist-timeout: %s", msg);
	fflush(NULL);
	_exit(1);
}

/* --dist mpi or --dist-store: the comm (MPI starts on its stream, or the rank comes
 * from the environment); rank 0 alone prints and writes (its trace starts here, once
 * the rank is known). 0 or the exit status. */
static int start_dist(struct cli *c, struct rf_engine *eng, struct rf_comm **comm)
{
	struct rf_comm_opts co = { .check = -1, .timeout_s = c->dist_timeout,
				   .on_stall = on_stall, .store_dir = c->dist_store };
	int ret;

	if ((ret = rf_comm_create(eng, &co, comm)) < 0) {
		if (c->dist_store)
			rf_cli_say(prog, "--dist-store %s: %s", c->dist_store, rf_last_error());
		else
			rf_cli_say(prog, "--dist mpi: %s", rf_last_error());
		return 1;
	}
	c->rank = rf_comm_rank(*comm);
	c->world = rf_comm_size(*comm);
	snprintf(prog, sizeof(prog), "rf-train[rank %d]", c->rank);
	/* a usage error only the process count shows (one process: parse_args's) */
	unsigned k = c->o.devices ? c->o.devices : 1, b = c->o.batch_size ? c->o.batch_size : 256;
	if ((uint64_t)k * (unsigned)c->world > b) {
		if (leader(c))
			rf_cli_say(prog, "--devices %u: devices x processes (%u x %d) must be at most "
				   "the batch size (%u)", k, k, c->world, b);
		return 2;
	}
	if (leader(c)) {
		if (c->trace && (ret = rf_engine_trace_start(eng, c->trace)) < 0) {
			rf_cli_say(prog, "--trace: %s", rf_last_error());
			c->trace = NULL; /* not ours: a trace on now is RF_TRACE's */
			return 1;
		}
		return 0;
	}
	c->quiet = 1;
	c->json = 0;
	if (!(c->out = fopen("/dev/null", "w"))) {
		rf_cli_say(prog, "/dev/null: %s", strerror(errno));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct cli c = { 0 };
	struct rf_ring *ring = NULL;
	struct rf_engine *eng = NULL;
	struct rf_engine_opts eo = { 0 };
	struct rf_trainer *t = NULL;
	struct rf_comm *comm = NULL;
	struct run run = { 0 };
	FILE *mf = NULL;
	int ret, rc = 1;

	rf_log_set(rf_cli_log_stderr, NULL);
	rf_cli_limits(argv);
	rf_cli_check_stdout(prog);
	if ((ret = parse_args(&c, argc, argv)) >= 0)
		return ret;
	if (c.checkpoint)
		rf_cli_on_signals(on_signal); /* before any thread inherits the mask */
	c.o.progress = progress;
	c.o.progress_ctx = &c;
	if ((ret = rf_ring_create(&ring, NULL)) < 0) {
		if (ret == -EBADMSG) /* RF_FAULT_INJECT malformed: the ring's one line says why */
			rf_cli_log_stderr(RF_LOG_ERROR, rf_last_error(), NULL);
		else
			rf_cli_say(prog, "cannot create the io_uring ring: %s", rf_last_error());
		return 1;
	}
	eo.max_inflight = c.max_inflight;
	if ((ret = rf_engine_create(&eng, ring, &eo)) < 0) {
		rf_cli_say(prog, "cannot create the engine: %s", rf_last_error()); /* RF_TRACE? */
		goto out;
	}
	rf_engine_set_interrupt(eng, interrupted, NULL, 100000000ull);
	/* Started here and stopped before the devices close, so that every stream's track
	 * has its name (a trace written by rf_engine_destroy has lost them). */
	if (c.trace && !c.dist && (ret = rf_engine_trace_start(eng, c.trace)) < 0) {
		rf_cli_say(prog, "--trace: %s", rf_last_error());
		c.trace = NULL; /* not ours: a trace on now is RF_TRACE's */
		goto out;
	}
	if (c.dist && (rc = start_dist(&c, eng, &comm)))
		goto out;
	c.o.comm = comm;
	rc = run_training(&c, eng, &t, &mf, &run);
out:
	/* A failed rank leaves at once: its peers may sit in a collective that will never
	 * complete, and MPI_Finalize would wait for them. mpirun ends the job when a rank
	 * exits without finalizing. */
	if (comm && rc) {
		fflush(NULL);
		_exit(rc);
	}
	if (mf && fclose(mf) != 0 && rc == 0) {
		rf_cli_say(prog, "--metrics %s: cannot write: %s", c.metrics, strerror(errno));
		rc = 1;
	}
	free(run.secs);
	free(run.sps);
	if (eng && leader(&c)) { /* --trace, or RF_TRACE's: a write error fails the run */
		rf_engine_wait_all(eng);
		if ((ret = rf_engine_trace_stop(eng)) < 0 && ret != -ENOENT) {
			rf_cli_say(prog, "%s%s%s%s", c.trace ? "--trace " : "", c.trace ? c.trace : "",
				   c.trace ? ": " : "", rf_last_error());
			rc = 1;
		}
	}
	rf_trainer_destroy(t);
	rf_comm_destroy(comm);
	if (eng)
		rf_engine_destroy(eng);
	rf_ring_destroy(ring);
	return rc;
}
