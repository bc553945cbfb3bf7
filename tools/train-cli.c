/* tools/train-cli.c -- rf-train's command line: the usage text, each option parsed
 * and range-checked, the combinations refused, and the paths checked before any
 * training starts (train-cli.h). Every refusal is one line naming the argument and
 * what was expected, exit status 2 (1 for a path that cannot be used). */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringflow/loader.h>
#include <ringflow/trainer.h>
#include <ringflow/checkpoint.h>
#include <ringflow/dataset.h>

#include "cli.h"
#include "train-cli.h"

/* "rf-train", or "rf-train[rank R]" in a run of several processes. */
char prog[32] = "rf-train";

static const char usage[] =
"usage: rf-train [--model mlp|lenet|resnet18] [options]\n"
"  --model NAME          mlp, lenet or resnet18 (the seeds' three; default mlp)\n"
"  --data DIR|FILE|URL   Fashion-MNIST IDX files, raw or .gz (default " RF_TRAIN_DEFAULT_DATA "),\n"
"                        or a .rfrec record file (rf-pack's) of the training set, local\n"
"                        or http://HOST[:PORT]/PATH.rfrec (read with Range requests;\n"
"                        https is not supported)\n"
"  --test-data FILE      with a .rfrec --data: the test set's .rfrec (default: beside\n"
"                        it, \"train\" in its name made \"t10k\", else \"test\")\n"
"  --image-size N        the data are JPEG/PNG images (rf-pack's .rfrec of an image folder,\n"
"                        or a WebDataset shard FILE.tar): decoded to 3 x N x N, with\n"
"                        RandomResizedCrop + flip for training and resize + centre crop\n"
"                        for the test set; the model takes the files' classes\n"
"  --stem S              ResNet-18's first layers with --image-size: auto (default:\n"
"                        imagenet from 128 pixels up), small (3x3, stride 1), imagenet\n"
"                        (7x7 stride 2 + 3x3 max pool)\n"
"  --crop-scale F        with --image-size: RandomResizedCrop's smallest area fraction\n"
"                        (default 0.08; 1: the whole image, resized, and the test set's\n"
"                        whole images too, not a centre crop)\n"
"  --epochs N            epochs to train (default 10)\n"
"  --batch-size B        minibatch size, split over the devices (default 256)\n"
"  --lr LR               SGD learning rate (default 0.1 mlp, 0.2 lenet, 0.1 resnet18)\n"
"  --optimizer sgd|adamw torch.optim.SGD (default) or AdamW (betas 0.9, 0.999, eps\n"
"                        1e-8; --wd its decoupled decay; default lr 0.001)\n"
"  --momentum M          SGD momentum, as torch.optim.SGD (dampening 0; default 0)\n"
"  --wd W                weight decay, added to the gradient as W * w (default 0)\n"
"  --nesterov            Nesterov momentum (needs --momentum > 0)\n"
"  --lr-schedule S       the lr per epoch: constant (default), step:N[:G] (times G,\n"
"                        default 0.1, every N epochs) or cosine[:T] (to 0 at epoch T,\n"
"                        default --epochs: T keeps a run cut short the same run)\n"
"  --warmup-epochs W     a linear warm-up first, from lr/(W+1) to lr at epoch W\n"
"  --device cpu|cuda     where to compute (default cpu)\n"
"  --devices K           data parallel over K devices (CPU: K worker streams; CUDA: K GPUs)\n"
"  --precision P         a GPU's math: tf32 (CUDA's default: tensor cores on TF32 inputs,\n"
"                        f32 sums), fp32 (FMA only: bit-comparisons with the CPU), bf16\n"
"                        (mixed precision: the convolutions' activations in bf16, weights,\n"
"                        optimizer and loss f32). The CPU computes in fp32 whatever is asked\n"
"  --layout L            the convolutions' activations: auto (default: NHWC on a GPU that\n"
"                        runs the model so, else NCHW), nchw, nhwc (on the CPU by its\n"
"                        reference path: slow, and the same bits as nchw)\n"
"  --seed S              seed of the weight init and the shuffle (default 0)\n"
"  --init KIND           weights: kaiming +-sqrt(6/fan_in) (mlp's and lenet's default),\n"
"                        uniform +-1/sqrt(fan_in) (PyTorch's; resnet18's default: kaiming\n"
"                        diverges there with momentum), normal N(0, 0.01^2) (the seed's),\n"
"                        xavier +-sqrt(6/(fan_in+fan_out)); biases 0 (uniform: +-1/sqrt(fan_in))\n"
"  --checkpoint FILE     save weights and state after every epoch\n"
"  --resume              continue from --checkpoint FILE where it was taken\n"
"  --checkpoint-every N  also save --checkpoint FILE after every N batches of an epoch;\n"
"                        --resume then goes on from that batch (each record once, the\n"
"                        weights of the uninterrupted run, bit for bit)\n"
"  --max-steps N         stop after N optimizer steps in all (a resumed run counts the\n"
"                        file's), saving --checkpoint FILE there (default 0: no limit)\n"
"  --trace FILE          write a Chrome-trace JSON timeline of every op (Perfetto)\n"
"  --metrics FILE.csv    one CSV row per epoch\n"
"  --export DIR          at the end, write the trained model to DIR (created if\n"
"                        missing): model.json (layers, shapes) and params.rfck, for\n"
"                        rf-infer and tools/rf-export-torch.py\n"
"  --json                print a final JSON object on stdout (progress goes to stderr)\n"
"  --limit N             train on the first N records only\n"
"  --test-limit N        evaluate on the first N test records only\n"
"  --log-every N         read the loss back every N batches (default: at epoch end)\n"
"  --streams 1|2         compute streams per device; 2: weight gradients beside data\n"
"                        gradients (default: 2 for lenet and resnet18 on a multi-core\n"
"                        CPU, else 1)\n"
"  --threads N           OpenBLAS threads (default: cores / compute streams)\n"
"  --prefetch N          loader batch slots (default 4)\n"
"  --in-memory           loader reads the payload file into memory first\n"
"  --verify              read each .rfrec data file whole first: its data CRC and\n"
"                        labels checked (default: the header and sizes only)\n"
"  --http-timeout MS     an http:// data set: milliseconds per connect, send, receive\n"
"                        and response head, 1..3600000 (default RF_HTTP_TIMEOUT_MS,\n"
"                        else 10000)\n"
"  --order O             the training set's shuffle: uniform (default: every order\n"
"                        equally likely; small records read one by one) or windowed\n"
"                        (chunks read whole and shuffled in windows: fewer, sequential\n"
"                        reads, but a batch draws from a few windows -- on a file sorted\n"
"                        by class, a few classes)\n"
"  --augment             training images: random crop (zero padding 4) and horizontal\n"
"                        flip, drawn per (seed, epoch, record) (default: off)\n"
"  --no-eval             skip the test-set evaluation\n"
"  --quiet               no progress bar\n"
"asynchrony (seed 12.2.4; these change timing and memory, never results):\n"
"  --window N            iterations in flight: batch t starts after batch t-N has\n"
"                        finished (default 2; 0: no window, push ahead without waiting)\n"
"  --hybridize           capture the training step at the first batch and replay it\n"
"                        after (seed 12.1; results bit-identical): the default in\n"
"                        one process on a GPU and for lenet and resnet18 on the\n"
"                        CPU (one launch per step); refused with several processes\n"
"  --no-hybridize        push every op of every step (the default for the mlp on the\n"
"                        CPU, where the batch's copy into the graph costs more, and\n"
"                        across processes)\n"
"  --update HOW          the optimizer's update with one device: fused (one op over\n"
"                        every parameter after backward), per-layer (each layer's\n"
"                        as its gradients are ready), auto (fused on a GPU, per\n"
"                        layer on the CPU; the default). The same bits either way\n"
"  --barrier-every N     wait for all work after every N batches, like a per-batch\n"
"                        .item() (default 0: never)\n"
"  --max-inflight N      the engine's cap on ops in flight; a push past it waits for\n"
"                        room (default 4096; 0: no cap)\n"
"  --stats               print the engine's op counts (and max in flight) and the\n"
"                        device's (graphs captured, replayed, failed; fallbacks; each\n"
"                        convolution's plan) on stderr and in the --json object\n"
"several processes (doc/distributed.md):\n"
"  --dist mpi            one process per rank under mpirun: each trains its shard of\n"
"                        every global batch; gradients summed over the ranks (MPI on a\n"
"                        comm stream). Rank 0 alone prints, checkpoints and writes files\n"
"  --dist-store DIR      one process per rank, launched with RANK, WORLD_SIZE and\n"
"                        LOCAL_RANK set (as torchrun sets them), without MPI: rank 0's\n"
"                        NCCL id reaches the others through files in DIR, a directory\n"
"                        every rank sees (made if missing; waits up to 300 s for every\n"
"                        rank). GPU runs only (--device cuda)\n"
"  --dist-timeout S      end the run when one collective has been outstanding S seconds\n"
"                        (a peer stalled or died; default 0: no watchdog). S must exceed\n"
"                        the longest pause of one rank alone (rank 0's checkpoint write)\n"
"  --bucket-kb N         reduce contiguous layers' gradients together until N KiB\n"
"                        (default 0: one collective per layer)\n";

/* constant | step:N[:G] | cosine into s (its warm-up untouched). 0 or -1. */
static int parse_sched(const char *a, struct rf_lr_schedule *s)
{
	char *end;

	if (!strcmp(a, "constant") || !strcmp(a, "cosine")) {
		s->kind = !strcmp(a, "constant") ? RF_LR_CONSTANT : RF_LR_COSINE;
		s->epochs = 0;          /* cosine: over --epochs */
		return 0;
	}
	if (!strncmp(a, "cosine:", 7)) {
		errno = 0;
		unsigned long n = a[7] >= '1' && a[7] <= '9' ? strtoul(a + 7, &end, 10) : 0;
		if (errno || n < 1 || n > 100000 || *end)
			return -1;
		s->kind = RF_LR_COSINE;
		s->epochs = (unsigned)n;
		return 0;
	}
	if (strncmp(a, "step:", 5) || a[5] < '1' || a[5] > '9')
		return -1;
	errno = 0;
	unsigned long n = strtoul(a + 5, &end, 10);
	if (errno || n < 1 || n > 100000)
		return -1;
	s->kind = RF_LR_STEP;
	s->step_epochs = (unsigned)n;
	s->gamma = 0.1;
	if (!*end)
		return 0;
	double g;
	if (*end != ':' || rf_cli_double(end + 1, 0, 1e6, &g) || !(g > 0))
		return -1;
	s->gamma = g;
	return 0;
}

__attribute__((format(printf, 2, 3)))
static int bad(const char *arg, const char *fmt, ...)
{
	char why[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	rf_cli_say(prog, "%s: %s; see rf-train --help", arg, why);
	return 2;
}

/* An integer option: digits only (no sign, space or suffix), in [min, max]; what
 * says what it counts. 0, or the exit status of the one-line refusal. */
static int int_opt(const char *opt, const char *a, uint64_t min, uint64_t max, const char *what,
		   uint64_t *out)
{
	if (rf_cli_u64(a, min, max, out) == 0)
		return 0;
	return bad(opt, "got '%s', expected an integer %" PRIu64 "..%" PRIu64 " (%s)", a, min, max,
		   what);
}

/* A path that cannot be used: one line naming the option, exit status 1. */
static int bad_path(const char *opt, const char *why)
{
	rf_cli_say(prog, "%s %s", opt, why);
	return 1;
}

/* --export DIR: a directory that exists and may be written, or a new name in one; in
 * one that exists, the files the export writes (model.json, params.rfck, each through
 * NAME.tmp) regular files or new names, checked now rather than after the training. */
static int check_export(const char *dir)
{
	static const char *const files[4] = { "params.rfck", "params.rfck.tmp", "model.json",
					      "model.json.tmp" };
	char why[8400], parent[4200], d[4200], p[4300];
	struct stat st;
	const char *slash;
	size_t n;

	if (!*dir)
		return bad("--export", "got an empty path, expected a directory (created if missing)");
	if (stat(dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode)) {
			snprintf(why, sizeof(why), "%s: is %s, expected a directory (created if "
				 "missing)", dir, rf_cli_ftype(st.st_mode));
			return bad_path("--export", why);
		}
		if (access(dir, W_OK) < 0) {
			snprintf(why, sizeof(why), "%s: cannot be written: %s", dir, strerror(errno));
			return bad_path("--export", why);
		}
		for (int i = 0; i < 4; i++) {
			snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
			if (rf_cli_check_output(p, 0, NULL, why, sizeof(why)) < 0)
				return bad_path("--export", why);
		}
		return 0;
	}
	snprintf(d, sizeof(d), "%s", dir); /* "new/" is a new directory's name too */
	for (n = strlen(d); n > 1 && d[n - 1] == '/'; n--)
		d[n - 1] = 0;
	slash = strrchr(d, '/');
	snprintf(parent, sizeof(parent), "%.*s", slash ? (int)(slash == d ? 1 : slash - d) : 1,
		 slash ? d : ".");
	if (errno != ENOENT || stat(parent, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    access(parent, W_OK) < 0) {
		snprintf(why, sizeof(why), "%s: cannot create: %s is not a writable directory",
			 dir, parent);
		return bad_path("--export", why);
	}
	return 0;
}

/* What names input file `in` on the command line, for a refusal: --data, --test-data,
 * the test set found beside a .rfrec --data, or a file of a --data directory. */
static void input_origin(const struct rf_train_opts *o, const char *data, const char *in,
			 char *out, size_t len)
{
	struct stat st;

	if (rf_cli_same_file(in, data))
		snprintf(out, len, "--data");
	else if (o->test_data && rf_cli_same_file(in, o->test_data))
		snprintf(out, len, "--test-data");
	else if (stat(data, &st) == 0 && S_ISREG(st.st_mode))
		snprintf(out, len, "the test set beside --data %s", data);
	else
		snprintf(out, len, "a file of --data %s", data);
}

/* Outputs that are inputs: rf_train_inputs lists the files the trainer will read
 * (the IDX files of a --data directory, raw and .gz; a .rfrec and its test set);
 * no output, nor a file written on the way to one (CKPT.tmp, the export's files), may
 * be one of them, nor another option's output. 0 or the exit status. */
static int check_inputs(const struct cli *c, const char *data)
{
	static const char *const exp_files[4] = { "params.rfck", "params.rfck.tmp",
						  "model.json", "model.json.tmp" };
	char (*in)[RF_TRAIN_PATH_MAX] = calloc(RF_TRAIN_MAX_INPUTS, RF_TRAIN_PATH_MAX);
	struct { const char *opt, *path; } out[9];   /* what the run writes */
	char why[9000], from[4200], p[4400];
	char own[5][4200];
	int n, k = 0, ret = 0;

	if (!in) {
		rf_cli_say(prog, "out of memory");
		return 1;
	}
	n = rf_train_inputs(&c->o, in);
	if (c->checkpoint) {
		snprintf(own[0], sizeof(own[0]), "%s.tmp", c->checkpoint);
		out[k].opt = out[k + 1].opt = "--checkpoint";
		out[k++].path = c->checkpoint;
		out[k++].path = own[0];
	}
	if (c->metrics) {
		out[k].opt = "--metrics";
		out[k++].path = c->metrics;
	}
	if (c->trace) {
		out[k].opt = "--trace";
		out[k++].path = c->trace;
	}
	/* the engine truncates RF_TRACE's file when it is created (a checkpoint there was
	 * lost before --resume could read it) */
	const char *rt = getenv("RF_TRACE");
	if (rt && *rt) {
		out[k].opt = "RF_TRACE";
		out[k++].path = rt;
	}
	for (int i = 0; c->export_dir && i < 4; i++) {
		snprintf(own[1 + i], sizeof(own[1 + i]), "%s/%s", c->export_dir, exp_files[i]);
		out[k].opt = "--export";
		out[k++].path = own[1 + i];
	}
	for (int j = 0; j < k && !ret; j++)
		for (int i = 0; i < n && !ret; i++) {
			if (!rf_cli_same_file(out[j].path, in[i]))
				continue;
			input_origin(&c->o, data, in[i], from, sizeof(from));
			if (!strcmp(in[i], out[j].path))
				snprintf(p, sizeof(p), "%s", out[j].path);
			else
				snprintf(p, sizeof(p), "%s (%s)", out[j].path, in[i]);
			snprintf(why, sizeof(why), "%s: the same file as an input (%s), expected "
				 "another file", p, from);
			ret = bad_path(out[j].opt, why);
		}
	/* and no two outputs of different options (the export's files against the
	 * checkpoint, the CSV, the trace; check_paths compares those three) */
	for (int j = 0; j < k && !ret; j++)
		for (int i = 0; i < j && !ret; i++)
			if (strcmp(out[i].opt, out[j].opt) &&
			    rf_cli_same_file(out[i].path, out[j].path)) {
				snprintf(why, sizeof(why), "%s: the same file as %s writes (%s), "
					 "expected another file", out[j].path, out[i].opt,
					 out[i].path);
				ret = bad_path(out[j].opt, why);
			}
	free(in);
	return ret;
}

/* The paths, before anything runs: the library checks the configuration and the data
 * it names (rf_trainer_check_opts: https, FIFOs, .rfrec headers, IDX files); here
 * --checkpoint (an existing regular file with --resume), --metrics and --trace
 * writable paths in existing directories, none of them a directory, FIFO or device,
 * and no two the same file (an input too: check_inputs). With --resume the
 * checkpoint's header is checked too (its model against --model). 0 or the exit
 * status. */
static int check_paths(const struct rf_train_opts *o, const char *data, const char *ckpt,
		       int resume, const char *metrics, const char *trace)
{
	const char *model = o->model;
	const char *outs[3][2] = { { "--checkpoint", ckpt }, { "--metrics", metrics },
				   { "--trace", trace } };
	char why[4608], p[4200];

	if (!*data)
		return bad("--data", "got an empty path, expected a directory or a .rfrec file");
	if (!strncmp(data, "https://", 8))
		return bad("--data", "got '%s': https is not supported, expected http://HOST[:PORT]"
			   "/PATH.rfrec (or a local directory or file)", data);
	if (o->test_data && !strncmp(o->test_data, "https://", 8))
		return bad("--test-data", "got '%s': https is not supported, expected http://HOST"
			   "[:PORT]/PATH.rfrec (or a local file)", o->test_data);
	for (int i = 0; i < 3; i++)
		if (outs[i][1] && !*outs[i][1])
			return bad(outs[i][0], "got an empty path, expected a file name");
	/* a usage error (exit 2) where the library would refuse the pair: a test set of
	 * its own with IDX data (a test set that is no file is the library's to name) */
	if (o->test_data && rf_cli_check_input(o->test_data, 0, why, sizeof(why)) == 0 &&
	    !rf_train_data_is_rfrec(data))
		return bad("--test-data", "names the test set of a .rfrec --data, and %s is not "
			   "one (a directory of IDX files holds both sets)", data);
	if (rf_trainer_check_opts(o) < 0) {
		rf_cli_say(prog, "%s", rf_last_error());
		return 1;
	}
	if (ckpt && resume) {
		/* The header now (magic, version, sizes, CRC, model), not after the data. */
		struct rf_ckpt_meta meta;
		if (rf_cli_check_input(ckpt, 0, why, sizeof(why)) < 0)
			return bad_path("--resume: --checkpoint", why);
		if (rf_ckpt_probe(ckpt, &meta) < 0) {
			rf_cli_say(prog, "cannot resume: %s", rf_last_error());
			return 1;
		}
		if (strncmp(meta.model, model, sizeof(meta.model))) {
			rf_cli_say(prog, "cannot resume: %s: checkpoint is for model '%.31s', "
				   "this run has --model %s", ckpt, meta.model, model);
			return 1;
		}
	}
	for (int i = 0; i < 3; i++) {
		if (!outs[i][1])
			continue;
		if (rf_cli_check_output(outs[i][1], 0, NULL, why, sizeof(why)) < 0)
			return bad_path(outs[i][0], why);
		for (int j = 0; j < i; j++)
			if (outs[j][1] && rf_cli_same_file(outs[i][1], outs[j][1])) {
				snprintf(why, sizeof(why), "%s: the same file as %s %s, expected "
					 "another file", outs[i][1], outs[j][0], outs[j][1]);
				return bad_path(outs[i][0], why);
			}
	}
	if (ckpt) {
		/* saved through FILE.tmp, renamed over FILE */
		snprintf(p, sizeof(p), "%s.tmp", ckpt);
		if (rf_cli_check_output(p, 0, NULL, why, sizeof(why)) < 0)
			return bad_path("--checkpoint", why);
		for (int i = 1; i < 3; i++)
			if (outs[i][1] && rf_cli_same_file(p, outs[i][1])) {
				snprintf(why, sizeof(why), "%s: the file --checkpoint %s is written "
					 "through, expected another file", outs[i][1], ckpt);
				return bad_path(outs[i][0], why);
			}
	}
	return 0;
}

enum { O_DATA = 256, O_EPOCHS, O_BATCH, O_LR, O_DEVICE, O_DEVICES, O_SEED, O_CKPT,
       O_RESUME, O_TRACE, O_METRICS, O_JSON, O_LIMIT, O_TLIMIT, O_LOG, O_THREADS,
       O_PREFETCH, O_INMEM, O_ORDER, O_HTTP_TMO, O_VERIFY, O_NOEVAL, O_QUIET, O_INIT, O_MODEL, O_STREAMS, O_WINDOW,
       O_BARRIER, O_MAXINF, O_STATS, O_DIST, O_DIST_TIMEOUT, O_BUCKET,
       O_DIST_STORE, O_TEST_DATA, O_MOMENTUM, O_WD, O_NESTEROV,
       O_LR_SCHED, O_WARMUP, O_OPTIMIZER, O_CKPT_EVERY, O_MAX_STEPS, O_AUGMENT, O_EXPORT, O_HYBRID, O_NO_HYBRID, O_UPDATE,
       O_PRECISION, O_LAYOUT, O_IMAGE_SIZE, O_STEM, O_CROP_SCALE };

static const struct option long_opts[] = {
	{ "model", required_argument, 0, O_MODEL },
	{ "data", required_argument, 0, O_DATA },
	{ "epochs", required_argument, 0, O_EPOCHS },
	{ "batch-size", required_argument, 0, O_BATCH },
	{ "lr", required_argument, 0, O_LR },
	{ "device", required_argument, 0, O_DEVICE },
	{ "devices", required_argument, 0, O_DEVICES },
	{ "precision", required_argument, 0, O_PRECISION },
	{ "layout", required_argument, 0, O_LAYOUT },
	{ "seed", required_argument, 0, O_SEED },
	{ "init", required_argument, 0, O_INIT },
	{ "checkpoint", required_argument, 0, O_CKPT },
	{ "export", required_argument, 0, O_EXPORT },
	{ "resume", no_argument, 0, O_RESUME },
	{ "checkpoint-every", required_argument, 0, O_CKPT_EVERY },
	{ "max-steps", required_argument, 0, O_MAX_STEPS },
	{ "trace", required_argument, 0, O_TRACE },
	{ "metrics", required_argument, 0, O_METRICS },
	{ "json", no_argument, 0, O_JSON },
	{ "limit", required_argument, 0, O_LIMIT },
	{ "test-limit", required_argument, 0, O_TLIMIT },
	{ "log-every", required_argument, 0, O_LOG },
	{ "threads", required_argument, 0, O_THREADS },
	{ "streams", required_argument, 0, O_STREAMS },
	{ "prefetch", required_argument, 0, O_PREFETCH },
	{ "in-memory", no_argument, 0, O_INMEM },
	{ "order", required_argument, 0, O_ORDER },
	{ "http-timeout", required_argument, 0, O_HTTP_TMO },
	{ "verify", no_argument, 0, O_VERIFY },
	{ "augment", no_argument, 0, O_AUGMENT },
	{ "no-eval", no_argument, 0, O_NOEVAL },
	{ "quiet", no_argument, 0, O_QUIET },
	{ "window", required_argument, 0, O_WINDOW },
	{ "barrier-every", required_argument, 0, O_BARRIER },
	{ "hybridize", no_argument, 0, O_HYBRID },
	{ "no-hybridize", no_argument, 0, O_NO_HYBRID },
	{ "update", required_argument, 0, O_UPDATE },
	{ "max-inflight", required_argument, 0, O_MAXINF },
	{ "stats", no_argument, 0, O_STATS },
	{ "dist", required_argument, 0, O_DIST },
	{ "dist-timeout", required_argument, 0, O_DIST_TIMEOUT },
	{ "dist-store", required_argument, 0, O_DIST_STORE },
	{ "test-data", required_argument, 0, O_TEST_DATA },
	{ "image-size", required_argument, 0, O_IMAGE_SIZE },
	{ "stem", required_argument, 0, O_STEM },
	{ "crop-scale", required_argument, 0, O_CROP_SCALE },
	{ "momentum", required_argument, 0, O_MOMENTUM },
	{ "wd", required_argument, 0, O_WD },
	{ "nesterov", no_argument, 0, O_NESTEROV },
	{ "lr-schedule", required_argument, 0, O_LR_SCHED },
	{ "warmup-epochs", required_argument, 0, O_WARMUP },
	{ "optimizer", required_argument, 0, O_OPTIMIZER },
	{ "bucket-kb", required_argument, 0, O_BUCKET },
	{ "help", no_argument, 0, 'h' },
	{ 0, 0, 0, 0 },
};

/* One option and its value a into c: 0, or the exit status of the refusal. */
static int parse_opt(struct cli *c, int opt, const char *a)
{
	uint64_t v = 0;
	int ret;

	switch (opt) {
	case O_MODEL:
		if (!rf_model_spec(a))
			return bad("--model", "got '%s', expected %s", a, rf_model_names());
		c->o.model = a;
		break;
	case O_DATA:
		c->o.data_dir = a;
		break;
	case O_TEST_DATA:
		c->o.test_data = a;
		break;
	case O_EPOCHS:
		if ((ret = int_opt("--epochs", a, 0, 100000, "epochs to train", &v)))
			return ret;
		c->epochs = (unsigned)v;
		break;
	case O_BATCH:
		if ((ret = int_opt("--batch-size", a, 1, 1u << 20, "samples per batch", &v)))
			return ret;
		c->o.batch_size = (unsigned)v;
		break;
	case O_LR: {
		/* A normal float: 1e-50 would round to 0.0f (and a subnormal lose its
		 * precision); the lr is a float from here on. */
		double d;
		if (rf_cli_double(a, FLT_MIN, 1e6, &d) || !isnormal((float)d))
			return bad("--lr", "got '%s', expected a decimal learning rate from "
				   "%g (the smallest normal float) to 1e6", a, (double)FLT_MIN);
		c->o.lr = (float)d;
		c->lr_set = 1;
		break;
	}
	case O_MOMENTUM:
	case O_WD: {
		const char *o = opt == O_MOMENTUM ? "--momentum" : "--wd";
		double d;
		if (rf_cli_double(a, 0, 1e3, &d) || (d != 0 && !isnormal((float)d)))
			return bad(o, "got '%s', expected a decimal from 0 to 1e3", a);
		*(opt == O_MOMENTUM ? &c->o.momentum : &c->o.weight_decay) = (float)d;
		break;
	}
	case O_NESTEROV:
		c->o.nesterov = 1;
		break;
	case O_OPTIMIZER:
		if (strcmp(a, "sgd") && strcmp(a, "adamw"))
			return bad("--optimizer", "got '%s', expected sgd or adamw", a);
		c->o.adamw = !strcmp(a, "adamw");
		break;
	case O_LR_SCHED:
		if (parse_sched(a, &c->o.sched))
			return bad("--lr-schedule", "got '%s', expected constant, step:N[:G] (N epochs "
				   "from 1 to 100000, G a decimal from 0 to 1e6, not 0) or cosine[:T] "
				   "(T epochs from 1 to 100000)", a);
		break;
	case O_WARMUP:
		if ((ret = int_opt("--warmup-epochs", a, 0, 100000, "epochs of linear warm-up", &v)))
			return ret;
		c->o.sched.warmup_epochs = (unsigned)v;
		break;
	case O_DEVICE:
		if (strcmp(a, "cpu") && strcmp(a, "cuda"))
			return bad("--device", "got '%s', expected cpu or cuda", a);
		c->o.device = a;
		break;
	case O_DEVICES:
		if ((ret = int_opt("--devices", a, 1, RF_TRAIN_MAX_DEVICES, "devices", &v)))
			return ret;
		c->o.devices = (unsigned)v;
		break;
	case O_PRECISION:
		if (!strcmp(a, "fp32"))
			c->o.precision = RF_PRECISION_FP32;
		else if (!strcmp(a, "tf32"))
			c->o.precision = RF_PRECISION_TF32;
		else if (!strcmp(a, "bf16"))
			c->o.precision = RF_PRECISION_BF16;
		else
			return bad("--precision", "got '%s', expected fp32, tf32 or bf16", a);
		break;
	case O_LAYOUT:
		if (!strcmp(a, "auto"))
			c->o.channels_last = 0;
		else if (!strcmp(a, "nchw"))
			c->o.channels_last = -1;
		else if (!strcmp(a, "nhwc"))
			c->o.channels_last = 1;
		else
			return bad("--layout", "got '%s', expected auto, nchw or nhwc", a);
		break;
	case O_SEED:
		if ((ret = int_opt("--seed", a, 0, UINT64_MAX, "the seed", &v)))
			return ret;
		c->o.seed = v;
		break;
	case O_INIT:
		if (!strcmp(a, "uniform"))
			c->o.init = RF_INIT_UNIFORM;
		else if (!strcmp(a, "normal"))
			c->o.init = RF_INIT_NORMAL;
		else if (!strcmp(a, "kaiming"))
			c->o.init = RF_INIT_KAIMING;
		else if (!strcmp(a, "xavier"))
			c->o.init = RF_INIT_XAVIER;
		else
			return bad("--init", "got '%s', expected uniform, normal, kaiming or xavier",
				   a);
		break;
	case O_CKPT:
		c->checkpoint = a;
		break;
	case O_EXPORT:
		c->export_dir = a;
		break;
	case O_RESUME:
		c->resume = 1;
		break;
	case O_TRACE:
		c->trace = a;
		break;
	case O_METRICS:
		c->metrics = a;
		break;
	case O_JSON:
		c->json = 1;
		break;
	case O_LIMIT:
		if ((ret = int_opt("--limit", a, 1, UINT64_MAX, "training records", &v)))
			return ret;
		c->o.limit = v;
		break;
	case O_TLIMIT:
		if ((ret = int_opt("--test-limit", a, 1, UINT64_MAX, "test records", &v)))
			return ret;
		c->o.test_limit = v;
		break;
	case O_LOG:
		if ((ret = int_opt("--log-every", a, 1, UINT32_MAX, "batches", &v)))
			return ret;
		c->o.log_every = (unsigned)v;
		break;
	case O_THREADS:
		if ((ret = int_opt("--threads", a, 1, 1024, "OpenBLAS threads", &v)))
			return ret;
		c->o.blas_threads = (int)v;
		break;
	case O_STREAMS:
		if ((ret = int_opt("--streams", a, 1, 2, "compute streams per device", &v)))
			return ret;
		c->o.streams = (unsigned)v;
		break;
	case O_IMAGE_SIZE:
		if ((ret = int_opt("--image-size", a, 8, 4096, "the side images are decoded to", &v)))
			return ret;
		c->o.image_size = (unsigned)v;
		break;
	case O_CROP_SCALE: {
		char *end;
		errno = 0;
		double f = strtod(a, &end);
		if (!*a || *end || errno || !(f > 0.0 && f <= 1.0))
			return bad("--crop-scale", "got '%s', expected a fraction of the image's "
				   "area in (0, 1]", a);
		c->o.crop_scale = (float)f;
		break;
	}
	case O_STEM:
		if (!strcmp(a, "auto"))
			c->o.stem = 0;
		else if (!strcmp(a, "small"))
			c->o.stem = 1;
		else if (!strcmp(a, "imagenet"))
			c->o.stem = 2;
		else
			return bad("--stem", "got '%s', expected auto, small or imagenet", a);
		break;
	case O_PREFETCH:
		if ((ret = int_opt("--prefetch", a, 1, 16, "loader batch slots", &v)))
			return ret;
		c->o.prefetch = (unsigned)v;
		break;
	case O_INMEM:
		c->o.in_memory = 1;
		break;
	case O_VERIFY:
		c->o.verify = 1;
		break;
	case O_HTTP_TMO:
		if ((ret = int_opt("--http-timeout", a, 1, 3600000, "milliseconds", &v)))
			return ret;
		c->o.http_timeout_ms = (unsigned)v;
		break;
	case O_ORDER:
		if (!strcmp(a, "uniform"))
			c->o.order = RF_LOADER_ORDER_UNIFORM;
		else if (!strcmp(a, "windowed"))
			c->o.order = RF_LOADER_ORDER_WINDOWED;
		else
			return bad("--order", "got '%s', expected uniform or windowed", a);
		break;
	case O_AUGMENT:
		c->o.augment = 1;
		break;
	case O_NOEVAL:
		c->o.no_eval = 1;
		break;
	case O_HYBRID:
		c->o.hybridize = RF_TRAIN_ON;
		break;
	case O_NO_HYBRID:
		c->o.hybridize = RF_TRAIN_OFF;
		break;
	case O_UPDATE:
		if (!strcmp(a, "fused"))
			c->o.fused_update = RF_TRAIN_ON;
		else if (!strcmp(a, "per-layer"))
			c->o.fused_update = RF_TRAIN_OFF;
		else if (!strcmp(a, "auto"))
			c->o.fused_update = RF_TRAIN_AUTO;
		else
			return bad("--update", "'%s': expected fused, per-layer or auto", a);
		break;
	case O_QUIET:
		c->quiet = 1;
		break;
	case O_WINDOW:
		if ((ret = int_opt("--window", a, 0, RF_TRAIN_MAX_WINDOW,
				   "iterations in flight; 0: no window", &v)))
			return ret;
		c->o.window = v ? (unsigned)v : RF_TRAIN_WINDOW_NONE;
		break;
	case O_BARRIER:
		if ((ret = int_opt("--barrier-every", a, 0, UINT32_MAX, "batches; 0: never", &v)))
			return ret;
		c->o.barrier_every = (unsigned)v;
		break;
	case O_MAXINF:
		if ((ret = int_opt("--max-inflight", a, 0, UINT32_MAX - 1,
				   "ops in flight; 0: no cap", &v)))
			return ret;
		c->max_inflight = v ? (unsigned)v : UINT_MAX;
		break;
	case O_STATS:
		c->stats = 1;
		break;
	case O_DIST:
		if (strcmp(a, "mpi") && strcmp(a, "none"))
			return bad("--dist", "got '%s', expected mpi (or none)", a);
		c->dist_mpi = !strcmp(a, "mpi");
		break;
	case O_DIST_STORE:
		if (!*a)
			return bad("--dist-store", "expected a directory, got an empty name");
		c->dist_store = a;
		break;
	case O_DIST_TIMEOUT: {
		double d;
		if (rf_cli_double(a, 0, 1e6, &d))
			return bad("--dist-timeout", "got '%s', expected seconds from 0 (none) to 1e6",
				   a);
		c->dist_timeout = d;
		break;
	}
	case O_CKPT_EVERY:
		if ((ret = int_opt("--checkpoint-every", a, 1, 1000000000, "batches between "
				   "checkpoints", &v)))
			return ret;
		c->o.checkpoint_every = (unsigned)v;
		break;
	case O_MAX_STEPS:
		if ((ret = int_opt("--max-steps", a, 0, UINT64_MAX / 2, "optimizer steps", &v)))
			return ret;
		c->o.max_steps = v;
		break;
	case O_BUCKET:
		if ((ret = int_opt("--bucket-kb", a, 0, 1u << 20, "KiB per gradient bucket; 0: a "
				   "layer each", &v)))
			return ret;
		c->o.bucket_kb = (unsigned)v;
		break;
	}
	return 0;
}

/* What getopt could not match: one line naming the option, exit status 2. */
static int unknown_opt(int ret, int before, int argc, char **argv)
{
	static const char *const why[3] = { "unknown or ambiguous option", "takes no value",
					    "needs a value" };
	char nm[64];
	int k = rf_cli_bad_opt(ret, before, argc, argv, "h", long_opts, nm, sizeof(nm));

	return bad(nm, "%s", nm[1] != '-' && k == RF_CLI_OPT_UNKNOWN ? "unknown option" : why[k]);
}

/* The command line into c, checked (paths included). -1: go on; else the exit status
 * (0 after --help). */
int parse_args(struct cli *c, int argc, char **argv)
{
	int opt, ret;

	c->epochs = 10;
	c->o.model = "mlp";
	c->o.device = "cpu";
	opterr = 0;
	for (;;) {
		int before = optind;
		if ((opt = getopt_long(argc, argv, "h", long_opts, NULL)) == -1)
			break;
		if (opt == 'h') {
			fputs(usage, stdout);
			return 0;
		}
		if (opt < O_DATA)   /* '?': unknown, ambiguous, or a missing value */
			return unknown_opt(opt, before, argc, argv);
		if ((ret = parse_opt(c, opt, optarg)))
			return ret;
	}
	if (optind < argc)
		return bad(argv[optind], "unexpected argument");
	if (c->resume && !c->checkpoint)
		return bad("--resume", "needs --checkpoint FILE");
	if (c->o.checkpoint_every && !c->checkpoint)
		return bad("--checkpoint-every", "needs --checkpoint FILE");
	c->o.checkpoint = c->checkpoint;
	if (c->o.adamw && (c->o.momentum > 0 || c->o.nesterov))
		return bad("--optimizer", "adamw has no --momentum or --nesterov (its betas are "
			   "0.9, 0.999)");
	if (c->o.nesterov && c->o.momentum <= 0)
		return bad("--nesterov", "needs --momentum > 0");
	if (!c->o.sched.epochs)             /* cosine: down to 0 over the run's epochs */
		c->o.sched.epochs = c->epochs;
	if (c->o.sched.kind == RF_LR_COSINE && c->o.sched.warmup_epochs >= c->o.sched.epochs)
		return bad("--lr-schedule", "cosine over %u epochs with a warm-up of %u: expected "
			   "more epochs than the warm-up", c->o.sched.epochs,
			   c->o.sched.warmup_epochs);
	if (c->dist_mpi && c->dist_store)
		return bad("--dist-store", "is the launch without MPI: not with --dist mpi (choose "
			   "one)");
	c->dist = c->dist_mpi ? 1 : c->dist_store ? 2 : 0;
	if (!c->dist && c->dist_timeout > 0)
		return bad("--dist-timeout", "needs --dist mpi or --dist-store");
	if (c->o.hybridize > 0 && c->dist)
		return bad("--hybridize",
			   "one process only (a captured step would replay its "
			   "collectives' sequence numbers): not with %s",
			   c->dist_mpi ? "--dist mpi" : "--dist-store");
	if (c->dist_store && strcmp(c->o.device, "cuda"))
		return bad("--dist-store", "the launch without MPI reduces by NCCL, on GPUs: it "
			   "needs --device cuda (CPU runs: --dist mpi under mpirun)");
	if (c->o.devices > 1 && c->o.batch_size && c->o.devices > c->o.batch_size)
		return bad("--devices", "%u devices, more than the %u samples in a batch", c->o.devices,
			   c->o.batch_size);
	/* The default lr is resolved here, so that no user value stands for "default". */
	if (!c->lr_set)
		c->o.lr = c->o.adamw ? 1e-3f : rf_model_spec(c->o.model)->default_lr;
	if (rf_cli_check_env(prog)) /* before a path check reads an http:// --data */
		return 1;
	if ((ret = check_paths(&c->o, c->o.data_dir ? c->o.data_dir : RF_TRAIN_DEFAULT_DATA,
			       c->checkpoint, c->resume, c->metrics, c->trace)))
		return ret;
	if (c->export_dir && (ret = check_export(c->export_dir)))
		return ret;
	if ((ret = check_inputs(c, c->o.data_dir ? c->o.data_dir : RF_TRAIN_DEFAULT_DATA)))
		return ret;
	c->out = c->json ? stderr : stdout;
	c->tty = isatty(fileno(c->out));
	return -1;
}
