/* tools/train-cli.h -- rf-train's command line (train-cli.c), shared by rf-train.c:
 * the parsed options and the one call that fills them. */
#ifndef RF_TOOLS_TRAIN_CLI_H
#define RF_TOOLS_TRAIN_CLI_H

#include <stdio.h>
#include <ringflow/trainer.h>

/* "rf-train", or "rf-train[rank R]" in a run of several processes: the prefix of
 * every message. */
extern char prog[32];

struct cli {
	struct rf_train_opts o;
	unsigned epochs;
	const char *checkpoint, *trace, *metrics;
	const char *export_dir;  /* --export DIR */
	int resume, json, quiet, tty, stats;
	unsigned max_inflight;   /* engine cap; 0: the engine's default; UINT_MAX: none */
	double last_loss;        /* the running loss last read back (< 0: none yet) */
	int lr_set;              /* --lr given */
	int dist;                /* 0: one process; 1: --dist mpi; 2: --dist-store */
	int dist_mpi;            /* --dist mpi given */
	const char *dist_store;  /* --dist-store DIR */
	double dist_timeout;     /* --dist-timeout S */
	int rank, world;         /* with --dist: this process's rank, and how many */
	FILE *out;               /* human output: stdout, or stderr with --json */
};

/* The command line into c, checked (paths included). -1: go on; else the exit status
 * (0 after --help). c->o.progress is left to the caller. */
int parse_args(struct cli *c, int argc, char **argv);

/* ---- shared by train-cli.c and train-cli-paths.c ---- */
/* One line "PROG: ARG: WHY; see rf-train --help"; returns the exit status 2. */
int rf_tc_bad(const char *arg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The checks of train-cli-paths.c, each 0 or the exit status of its one-line refusal:
 * the inputs and outputs of o (data, --checkpoint with --resume its header, metrics,
 * trace: no two the same file), --export DIR, and no output that is an input. */
int rf_tc_check_paths(const struct rf_train_opts *o, const char *data, const char *ckpt,
		      int resume, const char *metrics, const char *trace);
int rf_tc_check_export(const char *dir);
int rf_tc_check_inputs(const struct cli *c, const char *data);
/* With --image-size: a --data or --test-data that is a folder of images
 * (train-folder.h) replaced by its packed copy; a training folder named train without
 * --test-data takes the folder val (else test) beside it. 0 or the exit status. */
int rf_tc_folders(struct cli *c);

#endif
