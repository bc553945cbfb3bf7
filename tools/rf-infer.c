/* rf-infer -- evaluate an exported model (rf-train --export DIR) on a dataset.
 *
 * rf-infer DIR [--data DIR|FILE.rfrec] [--device cpu|cuda] [--batch-size B]
 *              [--limit N] [--json] [--quiet]
 *
 * Reads DIR/model.json and checks it against the table of the model it names, loads
 * DIR/params.rfck (header, CRCs, and its hash against model.json's), then evaluates
 * the test set through the loader and the engine, as rf-train evaluates after each
 * epoch: accuracy, mean loss and samples/s. --data: a directory of Fashion-MNIST IDX
 * files (its t10k set is evaluated; default /usr/share/datasets/fashion-mnist) or an
 * .rfrec file (evaluated itself). Exit status: 0, 1 for a refused export or a failed
 * run (one line on stderr naming the file and what was expected), 2 for bad usage. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ringflow/ring.h>
#include <ringflow/engine.h>
#include <ringflow/export.h>
#include <ringflow/trainer.h>
#include "cli.h"
#include "train-folder.h"

static const char *prog = "rf-infer";

static const char usage[] =
"usage: rf-infer DIR [options]   (DIR: an export, as rf-train writes it with its\n"
"                                 export option: model.json and params.rfck)\n"
"  --data DIR|FILE       Fashion-MNIST IDX files (the t10k set is evaluated, and is all\n"
"                        that need be there; default /usr/share/datasets/fashion-mnist)\n"
"                        or an .rfrec file, local or http://HOST[:PORT]/PATH; for a\n"
"                        model of images also a folder of them (one folder per class,\n"
"                        packed once into a cached .rfrec) or a WebDataset shard\n"
"  --device cpu|cuda     where to compute (default cpu)\n"
"  --batch-size B        evaluation batch (default 256)\n"
"  --limit N             evaluate the first N records only\n"
"  --json                print one JSON object on stdout\n"
"  --quiet               no summary line (errors still go to stderr)\n";

enum { O_DATA = 256, O_DEVICE, O_BATCH, O_LIMIT, O_JSON, O_QUIET, O_HELP };

static const struct option long_opts[] = {
	{ "data", required_argument, 0, O_DATA },
	{ "device", required_argument, 0, O_DEVICE },
	{ "batch-size", required_argument, 0, O_BATCH },
	{ "limit", required_argument, 0, O_LIMIT },
	{ "json", no_argument, 0, O_JSON },
	{ "quiet", no_argument, 0, O_QUIET },
	{ "help", no_argument, 0, O_HELP },
	{ 0, 0, 0, 0 },
};

struct cli {
	const char *dir, *data, *device;
	uint64_t batch, limit;
	int json, quiet;
};

static int bad(const char *opt, const char *val, const char *why)
{
	rf_cli_say(prog, "%s: got '%s', %s; see rf-infer --help", opt, val, why);
	return 2;
}

/* 0, or the exit status. */
static int parse(struct cli *c, int argc, char **argv)
{
	int opt;

	c->data = RF_TRAIN_DEFAULT_DATA;
	c->device = "cpu";
	c->batch = 256;
	opterr = 0;
	for (;;) {
		int before = optind;
		if ((opt = getopt_long(argc, argv, "", long_opts, NULL)) == -1)
			break;
		const char *a = optarg;
		switch (opt) {
		case O_DATA:
			c->data = a;
			break;
		case O_DEVICE:
			if (strcmp(a, "cpu") && strcmp(a, "cuda"))
				return bad("--device", a, "expected cpu or cuda");
			c->device = a;
			break;
		case O_BATCH:
			if (rf_cli_u64(a, 1, 65536, &c->batch) < 0)
				return bad("--batch-size", a, "expected an integer from 1 to 65536");
			break;
		case O_LIMIT:
			if (rf_cli_u64(a, 1, UINT64_MAX / 2, &c->limit) < 0)
				return bad("--limit", a, "expected an integer from 1 to "
					   "9223372036854775807");
			break;
		case O_JSON:
			c->json = 1;
			break;
		case O_QUIET:
			c->quiet = 1;
			break;
		case O_HELP:
			fputs(usage, stdout);
			exit(0); /* stdout checked at exit */
		default: {
			static const char *const why[3] = { "unknown option", "takes no value",
							    "needs a value" };
			char nm[64];
			int k = rf_cli_bad_opt(opt, before, argc, argv, "", long_opts, nm,
					       sizeof(nm));
			rf_cli_say(prog, "%s: %s; see rf-infer --help", nm, why[k]);
			return 2;
		}
		}
	}
	if (optind != argc - 1) {
		rf_cli_say(prog, optind >= argc ? "expected the export directory (rf-train "
			   "--export DIR); see rf-infer --help" : "expected one export directory, "
			   "got more arguments; see rf-infer --help");
		return 2;
	}
	c->dir = argv[optind];
	if (!*c->dir) {
		rf_cli_say(prog, "DIR: got '', an empty path, expected the export directory "
			   "(rf-train --export DIR); see rf-infer --help");
		return 2;
	}
	if (!*c->data)
		return bad("--data", "", "an empty path, expected a directory or a .rfrec file");
	char scheme[64], why[160];
	if (rf_cli_other_scheme(c->data, scheme, sizeof(scheme))) { /* only http:// is read */
		snprintf(why, sizeof(why), "%s is not supported, expected http://HOST[:PORT]"
			 "/PATH.rfrec (or a local directory or file)", scheme);
		return bad("--data", c->data, why);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct cli c = { 0 };
	struct rf_export x;
	struct rf_train_opts o = { 0 };
	struct rf_ring *ring = NULL;
	struct rf_engine *eng = NULL;
	struct rf_trainer *t = NULL;
	double acc = 0, loss = 0;
	char folder[PATH_MAX];
	const char *data_arg;  /* --data as given (a folder of images is read packed) */
	int ret, rc = 1;

	rf_log_set(rf_cli_log_stderr, NULL);
	rf_cli_limits(argv);
	rf_cli_check_stdout(prog);
	if ((rc = parse(&c, argc, argv)))
		return rc;
	if (rf_cli_check_env(prog) || rf_cli_check_trace_env(prog)) /* RF_TRACE: at the end */
		return 1;
	rc = 1;
	if (rf_export_open(c.dir, &x) < 0 || rf_export_load(NULL, &x, NULL) < 0) {
		rf_cli_say(prog, "%s", rf_last_error()); /* the export first, then the data */
		return 1;
	}
	o.model = x.spec->name;
	data_arg = c.data;
	/* a model of images (an export's input other than Fashion-MNIST's): the data are
	 * encoded images decoded to its input, by its stem */
	if (x.spec->in.c != 1 || x.spec->in.h != 28 || x.spec->in.w != 28) {
		o.image_size = (unsigned)x.spec->in.h;
		o.stem = x.spec->in.stem == RF_STEM_IMAGENET ? 2 : 1;
		/* a folder of images (ImageFolder): read through its packed copy */
		if (rf_folder_is_images(c.data)) {
			if (rf_folder_packed(prog, "--data", c.data, 0, c.quiet || c.json, folder,
					     sizeof(folder)))
				goto out;
			c.data = folder;
		}
	}
	/* fed as it was trained: the export's mean and std per channel, if it has them */
	o.norm_channels = x.spec->in.norm_channels;
	memcpy(o.norm_mean, x.spec->in.mean, sizeof(o.norm_mean));
	memcpy(o.norm_std, x.spec->in.std, sizeof(o.norm_std));
	o.data_dir = c.data;
	if (rf_train_data_is_rfrec(c.data))
		o.test_data = c.data;          /* a .rfrec, a path or an http:// URL: that file */
	o.device = c.device;
	o.batch_size = (unsigned)c.batch;
	o.test_limit = c.limit;
	o.eval_only = 1;     /* a directory's training files are not needed */
	if ((ret = rf_ring_create(&ring, NULL)) < 0 || (ret = rf_engine_create(&eng, ring, NULL)) < 0) {
		rf_cli_say(prog, "cannot create the ring or the engine: %s", rf_last_error());
		goto out;
	}
	if (rf_trainer_create(&t, eng, &o) < 0) {
		rf_cli_say(prog, "%s", rf_last_error());
		goto out;
	}
	/* the model the data make (images: their classes) against the export's */
	{
		const struct rf_model_spec *dm = rf_trainer_replica(t, 0)->spec;
		if (dm->in.classes != x.spec->in.classes) {
			rf_cli_say(prog, "--data %s: %d classes, and the export %s was trained on %d: "
				   "expected data of its classes",
				   data_arg ? data_arg : RF_TRAIN_DEFAULT_DATA, dm->in.classes, c.dir,
				   x.spec->in.classes);
			goto out;
		}
	}
	{       /* and their names, where both the data and the export have them */
		unsigned nc;
		const char *const *cn = rf_trainer_class_names(t, &nc);
		if (rf_export_check_classes(&x, cn, nc) < 0) {
			rf_cli_say(prog, "--data %s: %s", data_arg ? data_arg : RF_TRAIN_DEFAULT_DATA,
				   rf_last_error());
			goto out;
		}
	}
	if (rf_export_load(ring, &x, rf_trainer_replica(t, 0)) < 0) {
		rf_cli_say(prog, "%s", rf_last_error());
		goto out;
	}
	uint64_t t0 = rf_now_ns();
	if (rf_trainer_evaluate(t, &acc, &loss) < 0) {
		rf_cli_say(prog, "evaluation failed: %s", rf_trainer_last_error(t));
		goto out;
	}
	double s = (double)(rf_now_ns() - t0) / 1e9;
	uint64_t n = rf_trainer_test_samples(t);
	if (c.json) { /* a NaN loss (weights that overflow on this data) is null */
		printf("{\"model\": \"%s\", \"device\": \"%s\", \"samples\": %" PRIu64 ", "
		       "\"accuracy\": ", x.spec->name, c.device, n);
		rf_cli_json_num(stdout, "%.6f", acc);
		printf(", \"loss\": ");
		rf_cli_json_num(stdout, "%.6f", loss);
		printf(", \"seconds\": ");
		rf_cli_json_num(stdout, "%.6f", s);
		printf(", \"samples_per_s\": ");
		rf_cli_json_num(stdout, "%.1f", s > 0 ? (double)n / s : 0.0);
		printf("}\n");
	} else if (!c.quiet)
		printf("rf-infer: %s from %s on %s: accuracy %.4f, loss %.4f, %" PRIu64
		       " samples in %.3f s (%.0f samples/s)\n", x.spec->name, c.dir, c.device,
		       acc, loss, n, s, (double)n / s);
	rc = 0;
out:
	rf_trainer_destroy(t);
	if (eng) { /* RF_TRACE's file: a write error (a full disk) fails the run */
		rf_engine_wait_all(eng);
		if ((ret = rf_engine_trace_stop(eng)) < 0 && ret != -ENOENT) {
			rf_cli_say(prog, "%s", rf_last_error());
			rc = 1;
		}
		rf_engine_destroy(eng);
	}
	rf_ring_destroy(ring);
	return rc;
}
