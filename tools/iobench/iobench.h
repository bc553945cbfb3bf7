/* tools/iobench/iobench.h -- rf-iobench's parts: the options every job shares, a job (its own
 * thread, ring, buffers, histograms and figures), and the functions that run and
 * report them (iobench-run.c, iobench-report.c; options and the file: rf-iobench.c). */
#ifndef RF_IOBENCH_H
#define RF_IOBENCH_H

#include <stdint.h>

#include <ringflow/ring.h>

#include "iobench-bs.h"
#include "iobench-dist.h"
#include "iobench-hist.h"
#include "iobench-map.h"

struct iob_job;

enum { IOB_READ, IOB_WRITE, IOB_TRIM };

struct slot {
	struct iob_job *j;
	char *buf;
	uint64_t off, len;
	unsigned file;        /* index into o->files (and the ring's registered files) */
	uint64_t tq, ts;      /* queued; submitted (the loop turn's enter) */
	int op;               /* IOB_READ, IOB_WRITE, IOB_TRIM */
	int unsub;            /* on the job's unsubmitted list (ts not yet stamped) */
	int dirty;            /* buf holds what a read brought, not the write pattern */
	struct slot *next;    /* queued, not yet submitted */
};

#define IOB_MAX_FILES 256

/* One file of the run: its region is [o->offset, o->offset + size). */
struct iob_file {
	const char *path;
	int fd;
	uint64_t size, ngrains; /* ngrains = size / o->bs.grain */
};

/* A job's place in one file. */
struct iob_fstate {
	uint64_t next;        /* sequential: the next grain */
	uint64_t rwnext[2];   /* sequential rw: the next grain to read, to write (fio keeps
			       * a position per direction) */
	uint64_t left;        /* grains this pass has still to transfer */
	struct rf_randmap map;
	struct rf_dist dist;
	uint64_t *cover;      /* random map with sizes of several grains: the grains done */
};

struct iob_opts {
	const char *file, *rw, *bs_arg; /* file: the first (the report's name) */
	struct iob_file *files;
	unsigned nfiles;
	int write, random, mixed, trim, norandommap, verify, end_fsync, fixedbufs, direct, datasync;
	int hipri;
	unsigned rwmixread, numjobs;
	uint64_t log_ms;      /* --log-interval: 0 none */
	const char *log_prefix; /* the CSVs: PREFIX.jobN.csv */
	long qd, qd_req, batch;
	struct rf_bs bs;      /* --bs: bs.grain is the smallest size, bs.max the largest */
	uint64_t size, ngrains, sync_every, rate_bps, rate_iops; /* size, ngrains: all files' */
	double runtime, ramp;
	uint64_t offset;      /* the region: [offset, offset + size) */
	int sqpoll;
	int invalidate;       /* drop the region's cached pages first (fio's invalidate=1) */
	uint64_t vgen;        /* --verify: this run's generation, in every block header */
	uint32_t mem_align;
	struct rf_dist dist;  /* kind and parameter; each job draws from its own copy */
};

struct iob_job {
	int id;
	const struct iob_opts *o;
	struct rf_ring *r;
	struct slot *slots;
	unsigned ioflags;
	/* the run */
	int write, random, stop, sync_inflight, end_fsync;
	unsigned inflight;
	uint64_t rate_bps, rate_iops;
	int one_pass, readback;
	uint64_t issued, issued_bytes, left, deadline, rng, t0; /* left: grains, all files */
	unsigned cur;         /* the file the last I/O went to (round robin) */
	struct iob_fstate *fs;
	struct slot *unsubmitted;
	uint8_t *pattern;     /* writes: the buffers' random contents, to restore after a
			       * read (mixed runs) */
	uint64_t scramble;    /* writes: a count stamped into each sector (dedup) */
	/* the figures */
	uint64_t bytes, ios, rbytes, wbytes, tbytes, since_sync, syncs, verified;
	uint64_t t_start, t_end, ramp_end;
	int snapped;          /* the CPU/ring-counter start figures are taken */
	double usr, sys;      /* this job's thread */
	struct rf_ring_stats st;
	struct rf_hist slat, clat, lat, sync;
	/* rw/randrw: each direction's own figures, as fio reports them (NULL otherwise:
	 * one direction's are the job's): clat and lat of the reads, then of the
	 * writes, and how many of each */
	struct rf_hist *dir;
	uint64_t dios[2];
	/* --log-interval: this interval's figures, written as a CSV row by a ring timer */
	struct rf_hist *ilat;
	uint64_t ibytes, iios, inext;
	FILE *log;
	char *log_path;       /* its name, for messages */
	int log_err;          /* the first row's write that failed: its errno */
	rf_req_id log_timer;
	int log_armed;
};

/* Print one line naming what failed (removing a file this run created) and exit. */
__attribute__((noreturn, format(printf, 2, 3))) void die(int code, const char *fmt, ...);

/* iob_job.dir's four histograms, empty (a job's and the report's sum). */
static inline struct rf_hist *iob_dir_new(void)
{
	struct rf_hist *d = malloc(4 * sizeof(*d));

	if (!d)
		die(1, "out of memory for the per-direction histograms");
	for (unsigned k = 0; k < 4; k++)
		rf_hist_init(&d[k]);
	return d;
}

/* In the job's own thread: its ring (registered file, buffers), then the run (and,
 * for --verify writes, the read-back), then the ring's end. */
void iob_job_setup(struct iob_job *j);
void iob_job_run(struct iob_job *j);
void iob_job_teardown(struct iob_job *j);

/* s as a JSON string (quotes, backslashes and control characters escaped). */
void iob_json_str(const char *s);

/* rf-iobench --job FILE (iobench-jobfile.c): run the file's jobs one after another;
 * the exit status of the first that fails, else 0. */
int iob_jobfile_run(const char *path, int json);

/* The report of n jobs: their sum (and, with several, each), as text or JSON. */
void iob_report(const struct iob_opts *o, const struct iob_job *jobs, unsigned n, int json);

#endif
