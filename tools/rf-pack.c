/* rf-pack -- pack an IDX image/label pair into a ringflow record file, or check one.
 *
 *   rf-pack --images IMG.idx[.gz] --labels LBL.idx[.gz] -o OUT.rfrec [--classes N] [--force]
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
		"       rf-pack --check FILE.rfrec\n"
		"  --images F   IDX u8 images (count x rows x cols), raw or gzip'd\n"
		"  --labels F   IDX u8 labels (count), raw or gzip'd\n"
		"  -o, --output F  the .rfrec to write (via F.tmp, fsync, rename)\n"
		"  --classes N  labels must lie in [0, N), 1 <= N <= 256 (default: max label + 1)\n"
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

static int check(const char *path)
{
	struct rf_dataset ds;
	char desc[1024];
	int ret;

	char why[8400];
	/* a URL is checked by opening it, as rf-train and rf-infer read one */
	if (strncmp(path, "http://", 7) && rf_cli_check_input(path, 0, why, sizeof(why)) < 0)
		return bad_path("--check", why);
	if (rf_cli_check_env("rf-pack"))
		return 1;
	ret = rf_dataset_open_rfrec(&ds, path, RF_DS_VERIFY);
	if (ret) {
		rf_cli_say("rf-pack", "%s", rf_last_error());
		return 1;
	}
	rf_dataset_describe(&ds, desc, sizeof(desc));
	printf("%s; data crc32 0x%08" PRIx32 " ok, file %" PRIu64 " bytes\n", desc,
	       ds.data_crc32, ds.src[0].size);
	rf_dataset_close(&ds);
	return 0;
}

static int pack(const char *images, const char *labels, const char *out, uint32_t classes,
		int force)
{
	struct rf_dataset in, res;
	struct rf_rec_writer *w = NULL;
	struct rf_rec_layout lay = { 0 };
	char desc[1024];
	uint8_t *buf = NULL;
	int ret, rc = 1;

	char why[8400];
	int exists;

	if (rf_cli_check_input(images, 0, why, sizeof(why)) < 0)
		return bad_path("--images", why);
	if (rf_cli_check_input(labels, 0, why, sizeof(why)) < 0)
		return bad_path("--labels", why);
	if (snprintf(tmp_path, sizeof(tmp_path), "%s.tmp", out) >= (int)sizeof(tmp_path))
		return bad_arg("-o", "path too long: '%s'", out);
	/* OUT.tmp first: it is the file created (its directory is OUT's) */
	if (rf_cli_check_output(tmp_path, 0, NULL, why, sizeof(why)) < 0)
		return bad_path("-o", why);
	if (rf_cli_check_output(out, 0, &exists, why, sizeof(why)) < 0)
		return bad_path("-o", why);
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
	if (exists && !force) {
		rf_cli_say("rf-pack", "-o %s: file exists, expected a new file (use --force to "
			   "overwrite)", out);
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

	rf_cli_on_signals(on_signal);

	/* OUT.tmp is this run's (created, locked) from a successful open until finish has
	 * renamed or removed it: only then may a signal remove it -- before, the name may
	 * hold another writer's file or a user's, after, another run's. Signals are held
	 * back across both calls, so none lands between the file and the flag. */
	sigset_t sigs, old_sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, &old_sigs);
	ret = rf_rec_writer_open(&w, out, &lay, force ? RF_REC_OVERWRITE : 0);
	tmp_armed = ret == 0;
	sigprocmask(SIG_SETMASK, &old_sigs, NULL);
	if (ret) {
		rf_cli_say("rf-pack", "-o %s", rf_last_error()); /* names OUT or OUT.tmp */
		goto out;
	}
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
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	ret = rf_rec_writer_finish(w); /* renames or removes it itself */
	w = NULL;
	tmp_armed = 0;
	sigprocmask(SIG_SETMASK, &old_sigs, NULL);
	if (ret) {
		rf_cli_say("rf-pack", "%s", rf_last_error());
		goto out;
	}
	ret = rf_dataset_open_rfrec(&res, out, 0);
	if (ret) {
		rf_cli_say("rf-pack", "%s", rf_last_error());
		goto out;
	}
	rf_dataset_describe(&res, desc, sizeof(desc));
	printf("%s; data crc32 0x%08" PRIx32 ", file %" PRIu64 " bytes\n", desc,
	       res.data_crc32, res.src[0].size);
	rf_dataset_close(&res);
	rc = 0;
out:
	rf_rec_writer_abort(w);
	tmp_armed = 0;
	free(buf);
	rf_dataset_close(&in);
	return rc;
}

int main(int argc, char **argv)
{
	enum { O_IMAGES = 256, O_LABELS, O_CLASSES, O_FORCE, O_CHECK };
	static const struct option opts[] = {
		{ "images", required_argument, NULL, O_IMAGES },
		{ "labels", required_argument, NULL, O_LABELS },
		{ "output", required_argument, NULL, 'o' },
		{ "classes", required_argument, NULL, O_CLASSES },
		{ "force", no_argument, NULL, O_FORCE },
		{ "check", required_argument, NULL, O_CHECK },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *images = NULL, *labels = NULL, *out = NULL, *checkf = NULL;
	unsigned long classes = 0;
	int force = 0, c;

	rf_log_set(rf_cli_log_stderr, NULL);
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
	if (optind < argc)
		return bad_arg(argv[optind], "%s", "unexpected argument (see --help)");
	if ((images && !*images) || (labels && !*labels) || (checkf && !*checkf))
		return bad_arg(images && !*images ? "--images" : labels && !*labels ? "--labels" :
			       "--check", "%s", "empty path");
	if (checkf) {
		if (images || labels || out)
			return bad_arg("--check", "%s", "cannot be combined with --images, --labels or -o");
		return check(checkf);
	}
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
