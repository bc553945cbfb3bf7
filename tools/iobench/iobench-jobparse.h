/* tools/iobench-jobparse.h -- the text of an rf-iobench --job file, parsed without I/O of
 * its own or exits (iobench-jobfile.c reads the file and runs the jobs; the fuzz
 * harness fuzz/fuzz-jobfile.c feeds it bytes). The format: iobench-jobfile.c. */
#ifndef RF_IOBENCH_JOBPARSE_H
#define RF_IOBENCH_JOBPARSE_H

#include <stdio.h>

#define RF_JOB_LINE_MAX 1022 /* characters of a line, its newline not counted */

struct kv {
	char key[64], val[512];
	int line;
};

struct section {
	char name[128];
	int line;
	struct kv *kv;
	unsigned n, cap;
};

/* fio's key, or ours, -> our option; flag: takes no value (0/1 in a job file). */
struct jp_key {
	const char *key, *opt;
	int flag;
};
extern const struct jp_key keymap[];

/* keymap's index of a key ('-' already made '_'), or -1. */
int lookup(const char *key);

struct jp_file {
	struct section *secs;  /* [global] first, if any */
	unsigned n;
};

/* The sections of the job file read from f (path names it in messages). 0, or -1 with
 * one line in err naming the file and the line ("--job PATH: line N: ..."). Either way
 * the sections read so far are jf's: jp_free. */
int jp_parse(FILE *f, const char *path, struct jp_file *jf, char *err, size_t elen);
void jp_free(struct jp_file *jf);

#endif
