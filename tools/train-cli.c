/* tools/train-cli.c -- rf-train's command line: the usage text, each option parsed
 * and range-checked, the combinations refused; the paths are checked before any
 * training starts by train-cli-paths.c (train-cli.h). Every refusal is one line naming the argument and
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
"  --model NAME          mlp, lenet or resnet18 (default mlp)\n"
"  --data DIR|FILE|URL   Fashion-MNIST IDX files, raw or .gz (default " RF_TRAIN_DEFAULT_DATA "),\n"
"                        or a .rfrec record file (rf-pack's) of the training set, local\n"
"                        or http://HOST[:PORT]/PATH.rfrec (read with Range requests;\n"
"                        no https or other scheme)\n"
"  --test-data FILE      with a .rfrec --data: the test set's .rfrec (default: beside\n"
"                        it, \"train\" in its name made \"t10k\", else \"test\")\n"
"  --image-size N        the data are JPEG/PNG images (rf-pack's .rfrec of an image folder,\n"
"                        a WebDataset shard FILE.tar, or the folder itself -- one folder\n"
"                        per class; packed once into a cached .rfrec, its test set the\n"
"                        folder val or test beside a folder named train): decoded to\n"
"                        3 x N x N, with RandomResizedCrop + flip for training and\n"
"                        resize + centre crop for the test set; the model takes the\n"
"                        files' classes\n"
"  --stem S              ResNet-18's first layers with --image-size: auto (default:\n"
"                        imagenet from 128 pixels up), small (3x3, stride 1), imagenet\n"
"                        (7x7 stride 2 + 3x3 max pool)\n"
"  --crop-scale F        with --image-size: RandomResizedCrop's smallest area fraction\n"
"                        (default 0.08; 1: the whole image, resized, and the test set's\n"
"                        whole images too, not a centre crop)\n"
"  --normalize M/S       x = (pixel / 255 - M[c]) / S[c] for each input channel c, as\n"
"                        torchvision's Normalize: M and S one number, or one per channel\n"
"                        separated by commas (0.485,0.456,0.406/0.229,0.224,0.225), or\n"
"                        'imagenet' for those; the export records it, rf-infer applies it\n"
"                        (default: x = pixel / 255)\n"
"  --skip-bad-images     an image that fails to decode takes the row and label of a good\n"
"                        one of its batch, with a warning naming it (counted per epoch),\n"
"                        instead of ending the run\n"
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
"  --no-eval             skip the test-set evaluation (then no test set is needed)\n"
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
"                        room (default 4096; 0: no cap); a replayed step counts its\n"
"                        ops, and one larger than N waits for all else to finish\n"
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

int rf_tc_bad(const char *arg, const char *fmt, ...)
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
	return rf_tc_bad(opt, "got '%s', expected an integer %" PRIu64 "..%" PRIu64 " (%s)", a, min, max,
		   what);
}

enum { O_DATA = 256, O_EPOCHS, O_BATCH, O_LR, O_DEVICE, O_DEVICES, O_SEED, O_CKPT,
       O_RESUME, O_TRACE, O_METRICS, O_JSON, O_LIMIT, O_TLIMIT, O_LOG, O_THREADS,
       O_PREFETCH, O_INMEM, O_ORDER, O_HTTP_TMO, O_VERIFY, O_NOEVAL, O_QUIET, O_INIT, O_MODEL, O_STREAMS, O_WINDOW,
       O_BARRIER, O_MAXINF, O_STATS, O_DIST, O_DIST_TIMEOUT, O_BUCKET,
       O_DIST_STORE, O_TEST_DATA, O_MOMENTUM, O_WD, O_NESTEROV,
       O_LR_SCHED, O_WARMUP, O_OPTIMIZER, O_CKPT_EVERY, O_MAX_STEPS, O_AUGMENT, O_EXPORT, O_HYBRID, O_NO_HYBRID, O_UPDATE,
       O_PRECISION, O_LAYOUT, O_IMAGE_SIZE, O_STEM, O_CROP_SCALE, O_NORMALIZE,
       O_SKIP_BAD };

/* "M[,M...]/S[,S...]" (1 to RF_MODEL_NORM_MAX each, as many) or "imagenet" into o's
 * norm_*. 0, or -1 with what is wrong in why. */
static int parse_norm(const char *a, struct rf_train_opts *o, char *why, size_t len)
{
	static const float im[2][3] = { { 0.485f, 0.456f, 0.406f }, { 0.229f, 0.224f, 0.225f } };
	static const char *const part[2] = { "MEAN", "STD" };
	const char *p = a;
	unsigned n[2] = { 0, 0 };
	float v[2][RF_MODEL_NORM_MAX];

	if (!strcmp(a, "imagenet")) {
		o->norm_channels = 3;
		memcpy(o->norm_mean, im[0], sizeof(im[0]));
		memcpy(o->norm_std, im[1], sizeof(im[1]));
		return 0;
	}
	if (!strchr(a, '/')) {
		snprintf(why, len, "no '/' between MEAN and STD");
		return -1;
	}
	for (int h = 0; h < 2; h++) {
		for (;;) {
			char *end;
			errno = 0;
			double d = strtod(p, &end);
			if (end == p || (*end && *end != ',' && *end != (h ? '\0' : '/'))) {
				snprintf(why, len, "%s value %u: '%.*s' is not a number", part[h],
					 n[h] + 1, (int)strcspn(p, h ? "," : ",/"), p);
				return -1;
			}
			if (!isfinite(d) || fabs(d) > FLT_MAX) {
				snprintf(why, len, "%s value %u: %.*s is not finite or beyond a float's range", part[h],
					 n[h] + 1, (int)(end - p), p);
				return -1;
			}
			if (n[h] == RF_MODEL_NORM_MAX) {
				snprintf(why, len, "more than %d %s values (at most one per channel)",
					 RF_MODEL_NORM_MAX, part[h]);
				return -1;
			}
			if (h && d == 0.0) {
				snprintf(why, len, "STD value %u is 0 (it divides)",
					 n[h] + 1);
				return -1;
			}
			v[h][n[h]++] = (float)d;
			p = end;
			if (*p != ',')
				break;
			p++;
		}
		p++;      /* past the '/' (the end of the string only after the last STD) */
	}
	if (n[0] != n[1]) {
		snprintf(why, len, "%u MEAN value(s) and %u STD value(s)", n[0], n[1]);
		return -1;
	}
	o->norm_channels = n[0];
	memcpy(o->norm_mean, v[0], sizeof(v[0]));
	memcpy(o->norm_std, v[1], sizeof(v[1]));
	return 0;
}

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
	{ "normalize", required_argument, 0, O_NORMALIZE },
	{ "skip-bad-images", no_argument, 0, O_SKIP_BAD },
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
			return rf_tc_bad("--model", "got '%s', expected %s", a, rf_model_names());
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
			return rf_tc_bad("--lr", "got '%s', expected a decimal learning rate from "
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
			return rf_tc_bad(o, "got '%s', expected a decimal from 0 to 1e3", a);
		*(opt == O_MOMENTUM ? &c->o.momentum : &c->o.weight_decay) = (float)d;
		break;
	}
	case O_NESTEROV:
		c->o.nesterov = 1;
		break;
	case O_OPTIMIZER:
		if (strcmp(a, "sgd") && strcmp(a, "adamw"))
			return rf_tc_bad("--optimizer", "got '%s', expected sgd or adamw", a);
		c->o.adamw = !strcmp(a, "adamw");
		break;
	case O_LR_SCHED:
		if (parse_sched(a, &c->o.sched))
			return rf_tc_bad("--lr-schedule", "got '%s', expected constant, step:N[:G] (N epochs "
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
			return rf_tc_bad("--device", "got '%s', expected cpu or cuda", a);
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
			return rf_tc_bad("--precision", "got '%s', expected fp32, tf32 or bf16", a);
		break;
	case O_LAYOUT:
		if (!strcmp(a, "auto"))
			c->o.channels_last = 0;
		else if (!strcmp(a, "nchw"))
			c->o.channels_last = -1;
		else if (!strcmp(a, "nhwc"))
			c->o.channels_last = 1;
		else
			return rf_tc_bad("--layout", "got '%s', expected auto, nchw or nhwc", a);
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
			return rf_tc_bad("--init", "got '%s', expected uniform, normal, kaiming or xavier",
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
			return rf_tc_bad("--crop-scale", "got '%s', expected a fraction of the image's "
				   "area in (0, 1]", a);
		c->o.crop_scale = (float)f;
		break;
	}
	case O_NORMALIZE: {
		char why[256];
		if (parse_norm(a, &c->o, why, sizeof(why)) < 0)
			return rf_tc_bad("--normalize", "got '%s': %s; expected MEAN/STD, each 1 to %d "
					 "finite numbers, comma-separated (one for all channels or one "
					 "per channel), as many STDs as MEANs, no STD 0; or 'imagenet'",
					 a, why, RF_MODEL_NORM_MAX);
		break;
	}
	case O_SKIP_BAD:
		c->o.skip_bad_images = 1;
		break;
	case O_STEM:
		if (!strcmp(a, "auto"))
			c->o.stem = 0;
		else if (!strcmp(a, "small"))
			c->o.stem = 1;
		else if (!strcmp(a, "imagenet"))
			c->o.stem = 2;
		else
			return rf_tc_bad("--stem", "got '%s', expected auto, small or imagenet", a);
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
			return rf_tc_bad("--order", "got '%s', expected uniform or windowed", a);
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
			return rf_tc_bad("--update", "'%s': expected fused, per-layer or auto", a);
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
			return rf_tc_bad("--dist", "got '%s', expected mpi (or none)", a);
		c->dist_mpi = !strcmp(a, "mpi");
		break;
	case O_DIST_STORE:
		if (!*a)
			return rf_tc_bad("--dist-store", "expected a directory, got an empty name");
		c->dist_store = a;
		break;
	case O_DIST_TIMEOUT: {
		double d;
		if (rf_cli_double(a, 0, 1e6, &d))
			return rf_tc_bad("--dist-timeout", "got '%s', expected seconds from 0 (none) to 1e6",
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

	return rf_tc_bad(nm, "%s", nm[1] != '-' && k == RF_CLI_OPT_UNKNOWN ? "unknown option" : why[k]);
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
		return rf_tc_bad(argv[optind], "unexpected argument");
	if (c->resume && !c->checkpoint)
		return rf_tc_bad("--resume", "needs --checkpoint FILE");
	if (c->o.checkpoint_every && !c->checkpoint)
		return rf_tc_bad("--checkpoint-every", "needs --checkpoint FILE");
	c->o.checkpoint = c->checkpoint;
	if (c->o.adamw && (c->o.momentum > 0 || c->o.nesterov))
		return rf_tc_bad("--optimizer", "adamw has no --momentum or --nesterov (its betas are "
			   "0.9, 0.999)");
	if (c->o.nesterov && c->o.momentum <= 0)
		return rf_tc_bad("--nesterov", "needs --momentum > 0");
	/* the options of image data, without images */
	if (!c->o.image_size && c->o.stem)
		return rf_tc_bad("--stem", "needs --image-size N (the data are images)");
	if (!c->o.image_size && c->o.crop_scale > 0)
		return rf_tc_bad("--crop-scale", "needs --image-size N (the data are images)");
	if (!c->o.sched.epochs)             /* cosine: down to 0 over the run's epochs */
		c->o.sched.epochs = c->epochs;
	if (c->o.sched.kind == RF_LR_COSINE && c->o.sched.warmup_epochs >= c->o.sched.epochs)
		return rf_tc_bad("--lr-schedule", "cosine over %u epochs with a warm-up of %u: expected "
			   "more epochs than the warm-up", c->o.sched.epochs,
			   c->o.sched.warmup_epochs);
	if (c->dist_mpi && c->dist_store)
		return rf_tc_bad("--dist-store", "is the launch without MPI: not with --dist mpi (choose "
			   "one)");
	c->dist = c->dist_mpi ? 1 : c->dist_store ? 2 : 0;
	if (!c->dist && c->dist_timeout > 0)
		return rf_tc_bad("--dist-timeout", "needs --dist mpi or --dist-store");
	if (c->o.hybridize > 0 && c->dist)
		return rf_tc_bad("--hybridize",
			   "one process only (a captured step would replay its "
			   "collectives' sequence numbers): not with %s",
			   c->dist_mpi ? "--dist mpi" : "--dist-store");
	if (c->dist_store && strcmp(c->o.device, "cuda"))
		return rf_tc_bad("--dist-store", "the launch without MPI reduces by NCCL, on GPUs: it "
			   "needs --device cuda (CPU runs: --dist mpi under mpirun)");
	if (c->o.devices > 1 && c->o.batch_size && c->o.devices > c->o.batch_size)
		return rf_tc_bad("--devices", "%u devices, more than the %u samples in a batch", c->o.devices,
			   c->o.batch_size);
	/* The default lr is resolved here, so that no user value stands for "default". */
	if (!c->lr_set)
		c->o.lr = c->o.adamw ? 1e-3f : rf_model_spec(c->o.model)->default_lr;
	if (rf_cli_check_env(prog)) /* before a path check reads an http:// --data */
		return 1;
	if (c->o.image_size && (ret = rf_tc_folders(c)))
		return ret;
	if ((ret = rf_tc_check_paths(&c->o, c->o.data_dir ? c->o.data_dir : RF_TRAIN_DEFAULT_DATA,
			       c->checkpoint, c->resume, c->metrics, c->trace)))
		return ret;
	if (c->export_dir && (ret = rf_tc_check_export(c->export_dir)))
		return ret;
	if (rf_cli_check_trace_env(prog)) /* written at the end, as --trace's file */
		return 1;
	if ((ret = rf_tc_check_inputs(c, c->o.data_dir ? c->o.data_dir : RF_TRAIN_DEFAULT_DATA)))
		return ret;
	c->out = c->json ? stderr : stdout;
	c->tty = isatty(fileno(c->out));
	return -1;
}
