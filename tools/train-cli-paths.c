/* tools/train-cli-paths.c -- rf-train's paths checked before any training starts: the
 * checkpoint, metrics and trace outputs, the export directory, and no output that is
 * also an input or another option's output (train-cli.h). A path that cannot be used
 * is one line naming the option, exit status 1. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringflow/trainer.h>
#include <ringflow/checkpoint.h>
#include <ringflow/dataset.h>

#include "cli.h"
#include "train-cli.h"
#include "train-folder.h"
#include "pack-folder.h"

/* A path that cannot be used: one line naming the option, exit status 1. */
static int bad_path(const char *opt, const char *why)
{
	rf_cli_say(prog, "%s %s", opt, why);
	return 1;
}

/* --export DIR: a directory that exists and may be written, or a new name in one; in
 * one that exists, the files the export writes (model.json, params.rfck, each through
 * NAME.tmp) regular files or new names, checked now rather than after the training. */
int rf_tc_check_export(const char *dir)
{
	static const char *const files[4] = { "params.rfck", "params.rfck.tmp", "model.json",
					      "model.json.tmp" };
	char why[8400], parent[4200], d[4200], p[4300];
	struct stat st;
	const char *slash;
	size_t n;

	if (!*dir)
		return rf_tc_bad("--export", "got an empty path, expected a directory (created if missing)");
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
			/* NAME.tmp is created, then renamed over NAME: tried now */
			if (i % 2 && rf_cli_probe_write(p, why, sizeof(why)) < 0)
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
	/* the export makes it: tried now (access() passes a root process where mkdir
	 * fails, in /proc or on a read-only mount) */
	if (rf_cli_probe_mkdir(dir, why, sizeof(why)) < 0)
		return bad_path("--export", why);
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
int rf_tc_check_inputs(const struct cli *c, const char *data)
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
	/* the export's directory is no other option's file (both new: the file made
	 * first, the export's mkdir then failed after the training) */
	for (int j = 0; j < k && !ret && c->export_dir; j++)
		if (strcmp(out[j].opt, "--export") && rf_cli_same_file(c->export_dir, out[j].path)) {
			snprintf(why, sizeof(why), "%s: the file %s writes (%s), expected another "
				 "directory", c->export_dir, out[j].opt, out[j].path);
			ret = bad_path("--export", why);
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
int rf_tc_check_paths(const struct rf_train_opts *o, const char *data, const char *ckpt,
		      int resume, const char *metrics, const char *trace)
{
	const char *model = o->model;
	const char *outs[3][2] = { { "--checkpoint", ckpt }, { "--metrics", metrics },
				   { "--trace", trace } };
	char why[4608], p[4200], scheme[64];

	if (!*data)
		return rf_tc_bad("--data", "got an empty path, expected a directory or a .rfrec file");
	/* only http:// is read: another SCHEME:// was taken for a directory of IDX files
	 * ("Fashion-MNIST not found: ftp://x/y/train-images...") */
	if (rf_cli_other_scheme(data, scheme, sizeof(scheme)))
		return rf_tc_bad("--data", "got '%s': %s is not supported, expected http://HOST"
				 "[:PORT]/PATH.rfrec (or a local directory or file)", data, scheme);
	if (o->test_data && rf_cli_other_scheme(o->test_data, scheme, sizeof(scheme)))
		return rf_tc_bad("--test-data", "got '%s': %s is not supported, expected http://HOST"
				 "[:PORT]/PATH.rfrec (or a local file)", o->test_data, scheme);
	for (int i = 0; i < 3; i++)
		if (outs[i][1] && !*outs[i][1])
			return rf_tc_bad(outs[i][0], "got an empty path, expected a file name");
	/* a usage error (exit 2) where the library would refuse the pair: a test set of
	 * its own with IDX data (a test set that is no file is the library's to name) */
	if (o->test_data && rf_cli_check_input(o->test_data, 0, why, sizeof(why)) == 0 &&
	    !rf_train_data_is_rfrec(data))
		return rf_tc_bad("--test-data", "names the test set of a .rfrec --data, and %s is not "
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
		/* the metrics file and the trace are opened for writing at the path itself
		 * (the checkpoint only through PATH.tmp, below): tried now */
		if (i && rf_cli_probe_write(outs[i][1], why, sizeof(why)) < 0)
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
		/* as the save does: PATH.tmp created in PATH's directory (O_TMPFILE there
		 * else by name), then renamed over PATH -- access() passes a root process
		 * where that fails (/proc, a read-only mount): tried now, and removed */
		if (rf_cli_probe_write(p, why, sizeof(why)) < 0)
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

/* No output inside folder, a folder of images read as input (opt names it): a file
 * written there would replace an image or be read as one. 0 or the exit status. */
static int outside_folder(const struct cli *c, const char *opt, const char *folder)
{
	const char *outs[5][2] = { { "--checkpoint", c->checkpoint }, { "--metrics", c->metrics },
				   { "--trace", c->trace }, { "--export", c->export_dir },
				   { "RF_TRACE", getenv("RF_TRACE") } };
	char why[8400];

	for (int i = 0; i < 5; i++)
		if (outs[i][1] && *outs[i][1] && rf_cli_inside(outs[i][1], folder)) {
			snprintf(why, sizeof(why), "%s: inside %s %s, a folder of images read as "
				 "input, expected a path outside it", outs[i][1], opt, folder);
			return bad_path(outs[i][0], why);
		}
	return 0;
}

/* The training and test folders' classes (as listed), compared before either is packed
 * (the trainer would name their packed copies in the cache). 0 or the exit status. */
static int same_classes(const struct rf__folder *fd, const char *d, const char *dopt,
			const struct rf__folder *ft, const char *t, const char *topt)
{
	char err[8400];

	for (unsigned k = 0; k < fd->nclasses && k < ft->nclasses; k++)
		if (strcmp(fd->classes[k], ft->classes[k])) {
			snprintf(err, sizeof(err), "%s: class %u (sorted by name) is \"%s\", and in "
				 "%s %s \"%s\": expected the same classes", d, k, fd->classes[k],
				 topt, t, ft->classes[k]);
			return bad_path(dopt, err);
		}
	if (fd->nclasses != ft->nclasses) {
		snprintf(err, sizeof(err), "%s: %u classes, and %s %s has %u: expected the same "
			 "classes", d, fd->nclasses, topt, t, ft->nclasses);
		return bad_path(dopt, err);
	}
	return 0;
}

int rf_tc_folders(struct cli *c)
{
	static char data[PATH_MAX], test[PATH_MAX];
	char sib[PATH_MAX];
	const char *d = c->o.data_dir, *t = c->o.test_data;
	int ret;

	if (rf_folder_is_images(d) && !t) {
		if (rf_folder_test_sibling(d, sib, sizeof(sib)) == 0)
			t = sib;
		else if (!c->o.no_eval)   /* --no-eval: none is needed */
			return rf_tc_bad("--data", "%s: a folder of images, and its test set? expected "
					 "--test-data, a folder val or test beside a folder named "
					 "train, or --no-eval", d);
	}
	/* before anything is packed */
	if ((rf_folder_is_images(d) && (ret = outside_folder(c, "--data", d))) ||
	    (rf_folder_is_images(t) && (ret = outside_folder(c, t == sib ? "--data's test set" :
							     "--test-data", t))))
		return ret;
	/* each folder listed once: compared, then packed from that listing */
	{
		struct rf__folder f[2] = { 0 };
		const char *dir[2] = { rf_folder_is_images(d) ? d : NULL,
				       rf_folder_is_images(t) ? t : NULL };
		const char *opt[2] = { "--data", t == sib ? "its test set" : "--test-data" };
		char err[8400], *out[2] = { data, test };
		ret = 0;
		for (int i = 0; i < 2 && !ret; i++)
			if (dir[i] && rf__folder_scan(&f[i], dir[i], err, sizeof(err)) < 0)
				ret = bad_path(i ? "--test-data" : "--data", err);
		if (!ret && dir[0] && dir[1])
			ret = same_classes(&f[0], d, opt[0], &f[1], t, opt[1]);
		for (int i = 0; i < 2 && !ret; i++)
			if (dir[i])
				ret = rf_folder_packed_scanned(prog, i ? "--test-data" : "--data", dir[i],
							       &f[i], c->o.skip_bad_images, c->quiet,
							       out[i], PATH_MAX);
		rf__folder_free(&f[0]);
		rf__folder_free(&f[1]);
		if (ret)
			return ret;
		if (dir[0])
			c->o.data_dir = data;
		if (dir[1])
			c->o.test_data = test;
	}
	return 0;
}
