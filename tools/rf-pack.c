/* rf-pack -- pack an IDX image/label pair or a folder of JPEG/PNG images into a ringflow
 * record file, or check one.
 *
 *   rf-pack --images IMG.idx[.gz] --labels LBL.idx[.gz] -o OUT.rfrec [--classes N] [--force]
 *   rf-pack --image-folder DIR -o OUT.rfrec [--skip-bad-images] [--force]
 *   rf-pack --webdataset SHARD.tar... -o OUT.rfrec [--force]
 *   rf-pack --check FILE.rfrec
 *
 * The output is written to OUT.tmp, fsync'd and renamed, so OUT only ever appears
 * complete; on any error (or SIGINT/SIGTERM/SIGHUP) OUT.tmp is removed.
 * Every path is checked before anything is read or written: the inputs must be
 * regular files (a FIFO would block open() forever), OUT (and OUT.tmp, if there)
 * a regular file or absent in an existing directory, and OUT not one of the inputs.
 * Exit status: 0 ok, 1 a file is bad (or OUT exists without --force, or I/O
 * failed), 2 bad arguments. Every error is one line on stderr. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringflow/dataset.h>
#include "cli.h"
#include "pack-folder.h"

static char tmp_path[4096];
static volatile sig_atomic_t tmp_armed;

static void on_signal(int sig)
{
	int saved = errno; /* the interrupted code's (ThreadSanitizer checks it) */
	if (tmp_armed)
		unlink(tmp_path);
	signal(sig, SIG_DFL);
	errno = saved;
	raise(sig);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rf-pack --images IMG.idx[.gz] --labels LBL.idx[.gz] -o OUT.rfrec [--classes N] [--force]\n"
		"       rf-pack --image-folder DIR -o OUT.rfrec [--skip-bad-images] [--force]\n"
		"       rf-pack --webdataset SHARD.tar... -o OUT.rfrec [--force]\n"
		"       rf-pack --check FILE.rfrec\n"
		"  --images F   IDX u8 images (count x rows x cols), raw or gzip'd\n"
		"  --labels F   IDX u8 labels (count), raw or gzip'd\n"
		"  -o, --output F  the .rfrec to write (via F.tmp, fsync, rename)\n"
		"  --classes N  labels must lie in [0, N), 1 <= N <= 256 (default: max label + 1)\n"
		"  --image-folder DIR  torchvision's ImageFolder layout: DIR/CLASS/.../NAME.jpg|.jpeg|.png,\n"
		"               classes sorted by name (label k: the k-th), written into the file with\n"
		"               each image's bytes as they are (a version 2 .rfrec)\n"
		"  --webdataset  the arguments are WebDataset shards (tar: KEY.jpg|.jpeg|.png and\n"
		"               KEY.cls per sample), packed in order into one version 2 .rfrec\n"
		"  --skip-bad-images  pass over (and count) files that are not JPEG or PNG inside\n"
		"               instead of failing on the first\n"
		"  --force      replace an existing output\n"
		"  --check F    validate F (header, sizes, padding, data CRC, labels), print a summary;\n"
		"               F may be an http:// URL (Range requests, as rf-train reads one)\n");
}

static int bad_arg(const char *arg, const char *fmt, const char *val)
{
	char why[2048];
	snprintf(why, sizeof(why), fmt, val);
	rf_cli_say("rf-pack", "%s: %s", arg, why);
	return 2;
}

/* A path that cannot be used: one line naming the option, exit status 1. */
static int bad_path(const char *opt, const char *why)
{
	rf_cli_say("rf-pack", "%s %s", opt, why);
	return 1;
}

/* Open path (flags: RF_DS_VERIFY or 0) and print what it holds: 0, or 1 after one
 * line naming what is wrong. */
static int show(const char *path, unsigned flags)
{
	struct rf_dataset ds;
	char desc[1024];

	if (rf_dataset_open_rfrec(&ds, path, flags)) {
		rf_cli_say("rf-pack", "%s", rf_last_error());
		return 1;
	}
	rf_dataset_describe(&ds, desc, sizeof(desc));
	printf("%s; data crc32 0x%08" PRIx32 "%s, file %" PRIu64 " bytes\n", desc,
	       ds.data_crc32, flags & RF_DS_VERIFY ? " ok" : "", ds.src[0].size);
	rf_dataset_close(&ds);
	return 0;
}

static int check(const char *path)
{
	char why[8400];
	/* a URL is checked by opening it, as rf-train and rf-infer read one */
	if (strncmp(path, "http://", 7) && rf_cli_check_input(path, 0, why, sizeof(why)) < 0)
		return bad_path("--check", why);
	if (rf_cli_check_env("rf-pack"))
		return 1;
	return show(path, RF_DS_VERIFY);
}

/* OUT.tmp is this run's (created, locked) from a successful open until finish has
 * renamed or removed it: only then may a signal remove it -- before, the name may
 * hold another writer's file or a user's, after, another run's. Signals are held
 * back across both calls, so none lands between the file and the flag. */
static sigset_t sigs, old_sigs;

static int writer_begin(const char *out, const struct rf_rec_layout *lay, int force,
			struct rf_rec_writer **w)
{
	int ret;

	rf_cli_on_signals(on_signal);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, &old_sigs);
	ret = rf_rec_writer_open(w, out, lay, force ? RF_REC_OVERWRITE : 0);
	tmp_armed = ret == 0;
	sigprocmask(SIG_SETMASK, &old_sigs, NULL);
	if (ret)
		rf_cli_say("rf-pack", "-o %s", rf_last_error()); /* names OUT or OUT.tmp */
	return ret;
}

/* Finish w (renamed into place, or removed) and print what out holds. 0 or 1. */
static int writer_end(struct rf_rec_writer *w, const char *out)
{
	int ret;

	sigprocmask(SIG_BLOCK, &sigs, NULL);
	ret = rf_rec_writer_finish(w); /* renames or removes it itself */
	tmp_armed = 0;
	sigprocmask(SIG_SETMASK, &old_sigs, NULL);
	if (ret) {
		rf_cli_say("rf-pack", "%s", rf_last_error());
		return 1;
	}
	return show(out, 0);
}

/* OUT (and OUT.tmp) may be written: absent or (with force) a regular file. */
static int check_output(const char *out, int force)
{
	char why[8400];
	int exists;

	if (snprintf(tmp_path, sizeof(tmp_path), "%s.tmp", out) >= (int)sizeof(tmp_path))
		return bad_arg("-o", "path too long: '%s'", out);
	/* OUT.tmp first: it is the file created (its directory is OUT's) */
	if (rf_cli_check_output(tmp_path, 0, NULL, why, sizeof(why)) < 0)
		return bad_path("-o", why);
	if (rf_cli_check_output(out, 0, &exists, why, sizeof(why)) < 0)
		return bad_path("-o", why);
	if (exists && !force) {
		rf_cli_say("rf-pack", "-o %s: file exists, expected a new file (use --force to "
			   "overwrite)", out);
		return 1;
	}
	return 0;
}

static int pack_folder(const char *dir, const char *out, int force, int skip_bad)
{
	struct rf__folder f;
	struct rf_rec_layout lay = { .variable = 1, .encoding = RF_REC_ENC_IMAGE,
				     .label_kind = RF_LABEL_I32 };
	struct rf_rec_writer *w = NULL;
	size_t bad = 0, packed = 0;
	char err[8400];
	int rc = 1;

	if ((rc = check_output(out, force)))
		return rc;
	/* a file written in the folder would replace an image or be read as one */
	if (rf_cli_inside(out, dir) || rf_cli_inside(tmp_path, dir)) {
		rf_cli_say("rf-pack", "-o %s: inside --image-folder %s, expected a path outside it",
			   out, dir);
		return 1;
	}
	rc = 1;
	if (rf__folder_scan(&f, dir, err, sizeof(err)) < 0) {
		rf_cli_say("rf-pack", "--image-folder %s", err);
		return 1;
	}
	lay.num_classes = f.nclasses;
	lay.classes = (const char *const *)f.classes;
	if (writer_begin(out, &lay, force, &w))
		goto out;
	if (rf__folder_write(&f, w, skip_bad, &packed, &bad, err, sizeof(err)) < 0) {
		rf_cli_say("rf-pack", "%s", err);
		goto out;
	}
	if (!packed) {
		rf_cli_say("rf-pack", "--image-folder %s: all %zu images were passed over as not "
			   "JPEG or PNG, nothing to write", dir, bad);
		goto out;
	}
	rc = writer_end(w, out);
	w = NULL;
	if (!rc)
		printf("%zu images of %u classes from %s%s", packed, f.nclasses, dir,
		       bad || f.other ? "" : "\n");
	if (!rc && (bad || f.other))
		printf(" (passed over: %zu not JPEG or PNG inside, %zu other entries)\n", bad,
		       f.other);
out:
	rf_rec_writer_abort(w);
	tmp_armed = 0;
	rf__folder_free(&f);
	return rc;
}

/* WebDataset shards, in order, into one file: labelled all or none, num_classes the
 * largest label + 1 over every shard. */
static int pack_shards(char *const *shards, int n, const char *out, int force)
{
	struct rf_dataset *ds = calloc((size_t)n, sizeof(*ds));
	struct rf_rec_layout lay = { .variable = 1, .encoding = RF_REC_ENC_IMAGE };
	struct rf_rec_writer *w = NULL;
	uint64_t longest = 0, total = 0;
	uint8_t *buf = NULL;
	int opened = 0, rc = 1, labelled = -1;
	char why[8400];

	if (!ds)
		return bad_path("--webdataset", "out of memory");
	if ((rc = check_output(out, force)))
		goto out;
	rc = 1;
	for (; opened < n; opened++) {
		if (rf_cli_check_input(shards[opened], 0, why, sizeof(why)) < 0) {
			bad_path("--webdataset", why);
			goto out;
		}
		if (rf_cli_same_file(out, shards[opened])) {
			rf_cli_say("rf-pack", "-o %s: the same file as shard %s, expected a new file",
				   out, shards[opened]);
			goto out;
		}
		if (rf_dataset_open_wds(&ds[opened], shards[opened], 0, 0)) {
			rf_cli_say("rf-pack", "%s", rf_last_error());
			goto out;
		}
		int has = ds[opened].label_kind != RF_LABEL_NONE;
		if (labelled >= 0 && has != labelled) {
			rf_cli_say("rf-pack", "%s: %s .cls labels while %s %s: expected every shard "
				   "labelled or none", shards[opened], has ? "has" : "has no",
				   shards[0], labelled ? "has" : "has none");
			opened++;
			goto out;
		}
		labelled = has;
		if (has && ds[opened].num_classes > lay.num_classes)
			lay.num_classes = ds[opened].num_classes;
		if (ds[opened].max_record > longest)
			longest = ds[opened].max_record;
		total += ds[opened].count;
	}
	lay.label_kind = labelled ? RF_LABEL_I32 : RF_LABEL_NONE;
	if (!(buf = malloc(longest))) {
		rf_cli_say("rf-pack", "out of memory for an image of %" PRIu64 " bytes", longest);
		goto out;
	}
	if (writer_begin(out, &lay, force, &w))
		goto out;
	for (int s = 0; s < n; s++)
		for (uint64_t i = 0; i < ds[s].count; i++) {
			struct rf_dataset_loc loc;
			int32_t label;
			rf_dataset_payload_loc(&ds[s], i, &loc);
			if (rf_dataset_read_record(&ds[s], i, buf, &label) ||
			    rf_rec_writer_append_bytes(w, buf, loc.length, label)) {
				rf_cli_say("rf-pack", "%s", rf_last_error());
				goto out;
			}
		}
	rc = writer_end(w, out);
	w = NULL;
	if (!rc)
		printf("%" PRIu64 " images from %d shard%s\n", total, n, n > 1 ? "s" : "");
out:
	rf_rec_writer_abort(w);
	tmp_armed = 0;
	free(buf);
	for (int i = 0; i < opened; i++)
		rf_dataset_close(&ds[i]);
	free(ds);
	return rc;
}

static int pack(const char *images, const char *labels, const char *out, uint32_t classes,
		int force)
{
	struct rf_dataset in;
	struct rf_rec_writer *w = NULL;
	struct rf_rec_layout lay = { 0 };
	uint8_t *buf = NULL;
	int ret, rc = 1;

	char why[8400];

	if (rf_cli_check_input(images, 0, why, sizeof(why)) < 0)
		return bad_path("--images", why);
	if (rf_cli_check_input(labels, 0, why, sizeof(why)) < 0)
		return bad_path("--labels", why);
	if ((rc = check_output(out, force)))
		return rc;
	rc = 1;
	if (rf_cli_same_file(out, images) || rf_cli_same_file(out, labels)) {
		rf_cli_say("rf-pack", "-o %s: the same file as --%s, expected a new file", out,
			   rf_cli_same_file(out, images) ? "images" : "labels");
		return 1;
	}
	/* OUT.tmp is truncated and then removed on failure: it must not be an input */
	if (rf_cli_same_file(tmp_path, images) || rf_cli_same_file(tmp_path, labels)) {
		rf_cli_say("rf-pack", "-o %s: its scratch file %s is --%s, expected another "
			   "output name (or move the input)", out, tmp_path,
			   rf_cli_same_file(tmp_path, images) ? "images" : "labels");
		return 1;
	}
	ret = rf_dataset_open_idx_pair(&in, images, labels, classes, 0);
	if (ret) {
		rf_cli_say("rf-pack", "%s", rf_last_error());
		return 1;
	}
	lay.dtype = in.dtype;
	lay.ndim = in.ndim;
	memcpy(lay.shape, in.shape, sizeof(lay.shape));
	lay.label_kind = RF_LABEL_U8;
	lay.num_classes = in.num_classes;

	if (writer_begin(out, &lay, force, &w))
		goto out;
	if (!(buf = malloc(in.payload_bytes))) {
		rf_cli_say("rf-pack", "out of memory for a record of %" PRIu64 " bytes", (uint64_t)in.payload_bytes);
		goto out;
	}
	for (uint64_t i = 0; i < in.count; i++) {
		int32_t label;
		ret = rf_dataset_read_record(&in, i, buf, &label);
		if (ret) {
			/* names the input (images or labels), the record and the bytes */
			rf_cli_say("rf-pack", "%s", rf_last_error());
			goto out;
		}
		ret = rf_rec_writer_append(w, buf, label);
		if (ret) {
			rf_cli_say("rf-pack", "%s", rf_last_error());
			goto out;
		}
	}
	rc = writer_end(w, out);
	w = NULL;
out:
	rf_rec_writer_abort(w);
	tmp_armed = 0;
	free(buf);
	rf_dataset_close(&in);
	return rc;
}

int main(int argc, char **argv)
{
	enum { O_IMAGES = 256, O_LABELS, O_CLASSES, O_FORCE, O_CHECK, O_FOLDER, O_SKIP_BAD, O_WDS };
	static const struct option opts[] = {
		{ "images", required_argument, NULL, O_IMAGES },
		{ "labels", required_argument, NULL, O_LABELS },
		{ "output", required_argument, NULL, 'o' },
		{ "classes", required_argument, NULL, O_CLASSES },
		{ "force", no_argument, NULL, O_FORCE },
		{ "check", required_argument, NULL, O_CHECK },
		{ "image-folder", required_argument, NULL, O_FOLDER },
		{ "skip-bad-images", no_argument, NULL, O_SKIP_BAD },
		{ "webdataset", no_argument, NULL, O_WDS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *images = NULL, *labels = NULL, *out = NULL, *checkf = NULL, *folder = NULL;
	unsigned long classes = 0;
	int force = 0, skip_bad = 0, wds = 0, c;

	rf_log_set(rf_cli_log_stderr, NULL);
	rf_cli_limits(argv);
	rf_cli_check_stdout("rf-pack");
	opterr = 0;
	for (;;) {
		int before = optind;
		if ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) == -1)
			break;
		switch (c) {
		case O_IMAGES: images = optarg; break;
		case O_LABELS: labels = optarg; break;
		case 'o': out = optarg; break;
		case O_FORCE: force = 1; break;
		case O_CHECK: checkf = optarg; break;
		case O_FOLDER: folder = optarg; break;
		case O_SKIP_BAD: skip_bad = 1; break;
		case O_WDS: wds = 1; break;
		case O_CLASSES: {
			uint64_t v;
			if (rf_cli_u64(optarg, 1, 256, &v))
				return bad_arg("--classes", "got '%s', expected an integer in [1, 256]",
					       optarg);
			classes = (unsigned long)v;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default: { /* '?' or ':' */
			static const char *const why[3] = {
				"unknown or ambiguous option (see --help)", "takes no value",
				"missing value"
			};
			char nm[64];
			int k = rf_cli_bad_opt(c, before, argc, argv, ":o:h", opts, nm, sizeof(nm));
			return bad_arg(nm, "%s", nm[1] != '-' && k == RF_CLI_OPT_UNKNOWN ?
				       "unknown option (see --help)" : why[k]);
		}
		}
	}
	if (wds) {
		if (images || labels || classes || folder || checkf || skip_bad)
			return bad_arg("--webdataset", "%s", "cannot be combined with --images, "
				       "--labels, --classes, --image-folder, --check or "
				       "--skip-bad-images");
		if (optind >= argc)
			return bad_arg("--webdataset", "%s", "no shard given (the shards are the "
				       "arguments)");
		if (!out || !*out)
			return bad_arg("-o", "%s", out ? "empty path" :
				       "missing (the output .rfrec path is required)");
		for (int i = optind; i < argc; i++)
			if (!*argv[i])
				return bad_arg("--webdataset", "%s", "empty shard path");
		return pack_shards(argv + optind, argc - optind, out, force);
	}
	if (optind < argc)
		return bad_arg(argv[optind], "%s", "unexpected argument (see --help)");
	if ((images && !*images) || (labels && !*labels) || (checkf && !*checkf))
		return bad_arg(images && !*images ? "--images" : labels && !*labels ? "--labels" :
			       "--check", "%s", "empty path");
	if (checkf) {
		if (images || labels || out || folder)
			return bad_arg("--check", "%s", "cannot be combined with --images, --labels, "
				       "--image-folder or -o");
		return check(checkf);
	}
	if (folder) {
		if (!*folder)
			return bad_arg("--image-folder", "%s", "empty path");
		if (images || labels || classes)
			return bad_arg("--image-folder", "%s", "cannot be combined with --images, "
				       "--labels or --classes (the folders are the classes)");
		if (!out || !*out)
			return bad_arg("-o", "%s", out ? "empty path" :
				       "missing (the output .rfrec path is required)");
		return pack_folder(folder, out, force, skip_bad);
	}
	if (skip_bad)
		return bad_arg("--skip-bad-images", "%s", "only with --image-folder");
	if (!images)
		return bad_arg("--images", "%s", "missing (an IDX images file is required)");
	if (!labels)
		return bad_arg("--labels", "%s", "missing (an IDX labels file is required)");
	if (!out)
		return bad_arg("-o", "%s", "missing (the output .rfrec path is required)");
	if (!*out)
		return bad_arg("-o", "%s", "empty path");
	return pack(images, labels, out, (uint32_t)classes, force);
}
