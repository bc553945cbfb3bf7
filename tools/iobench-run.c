/* tools/iobench-run.c -- one rf-iobench job: its ring and buffers, the I/O loop (issue
 * from the completion callback, one io_uring_enter a loop turn), rate limits, fsyncs,
 * the verify read-back, and the job's figures (slat/clat/lat histograms, CPU of its
 * thread, the ring's counters). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli-impl.h"
#include "iobench.h"
#include "iobench-verify.h"

static inline uint64_t splitmix64(uint64_t *s)
{
	return rf_randmap_mix(*s += 0x9e3779b97f4a7c15ull);
}

static void on_done(void *data, int64_t res);
static void issue_now(struct slot *s);

/* ---- --log-interval: one CSV row per interval, from a ring timer ---- */

static void on_log(void *data, int64_t res);

static void log_arm(struct iob_job *j)
{
	uint64_t now = rf_now_ns(), due = j->inext > now ? j->inext - now : 1;
	j->log_armed = rf_ring_timeout(j->r, due, on_log, j, &j->log_timer) == 0;
}

/* Write the interval's row: its end (s since the start), bandwidth, IOPS, and its
 * latency percentiles (an interval without completions -- a stall -- says 0 I/Os). */
static void log_row(struct iob_job *j, uint64_t end)
{
	/* the interval began one interval before its scheduled end (the last, partial
	 * one ends early: its rates are over its own length) */
	uint64_t begin = j->inext - j->o->log_ms * 1000000ull;
	double secs = end > begin ? (double)(end - begin) / 1e9 : (double)j->o->log_ms / 1e3;
	fprintf(j->log, "%.3f,%.3f,%.1f,%.2f,%.2f,%.2f\n", (double)(end - j->t0) / 1e9,
		(double)j->ibytes / 1e6 / secs, (double)j->iios / secs,
		rf_hist_pct(j->ilat, 50) / 1e3, rf_hist_pct(j->ilat, 99) / 1e3,
		(double)j->ilat->max / 1e3);
	j->ibytes = j->iios = 0;
	rf_hist_init(j->ilat);
}

static void on_log(void *data, int64_t res)
{
	struct iob_job *j = data;
	j->log_armed = 0;
	if (res < 0)
		return; /* cancelled: the run is over */
	log_row(j, j->inext);
	j->inext += j->o->log_ms * 1000000ull;
	if (!(j->stop && !j->inflight))
		log_arm(j);
}

/* The run is over once it stopped and nothing is in flight: the log timer must not
 * hold the loop up to one more interval. */
static void maybe_done(struct iob_job *j)
{
	if (j->stop && !j->inflight && j->log_armed)
		rf_ring_cancel(j->r, j->log_timer);
}

/* A slot held by --rate is due. Its I/O was counted when it was held (a one-pass run
 * must do it); only a time-based run past its deadline drops it. */
static void on_delay(void *data, int64_t res)
{
	struct slot *s = data;
	struct iob_job *j = s->j;
	j->inflight--;
	if (res < 0 || (!j->total_ios && rf_now_ns() >= j->deadline)) {
		j->stop = 1;
		maybe_done(j);
		return;
	}
	issue_now(s);
}

/* With --rate / --rate-iops: the I/O numbered j->issued may start no earlier than its
 * share of the run, t0 + issued / rate; before that a ring timeout holds the slot. */
static void issue(struct slot *s)
{
	struct iob_job *j = s->j;
	uint64_t due = 0;
	if (j->rate_iops)
		due = j->t0 + (uint64_t)((double)j->issued * 1e9 / (double)j->rate_iops);
	if (j->rate_bps) {
		uint64_t d2 = j->t0 + (uint64_t)((double)j->issued * (double)j->o->bs * 1e9 /
						 (double)j->rate_bps);
		if (d2 > due)
			due = d2;
	}
	uint64_t now = due ? rf_now_ns() : 0;
	j->issued++; /* this slot's turn is taken */
	if (due > now) {
		j->inflight++;
		int ret = rf_ring_timeout(j->r, due - now, on_delay, s, NULL);
		if (ret < 0)
			die(1, "cannot queue a timeout for --rate: %s", strerror(-ret));
		return;
	}
	issue_now(s);
}

static void issue_now(struct slot *s)
{
	struct iob_job *j = s->j;
	const struct iob_opts *o = j->o;
	if (j->random && j->dist.kind != RF_DIST_RANDOM) {
		s->off = rf_dist_next(&j->dist) * o->bs;
	} else if (j->random && !o->norandommap) {
		s->off = rf_randmap_next(&j->map) * o->bs;
	} else if (j->random) {
		s->off = (splitmix64(&j->rng) % o->nblocks) * o->bs;
	} else {
		if (j->next_off + o->bs > o->nblocks * o->bs)
			j->next_off = 0;
		s->off = j->next_off;
		j->next_off += o->bs;
	}
	s->off += o->offset;
	s->write = o->mixed && j->write ? splitmix64(&j->rng) % 100 >= o->rwmixread : j->write;
	if (s->write && o->verify)
		rf_vfy_fill((uint8_t *)s->buf, o->bs, s->off, o->vgen); /* fio fills in the timed path too */
	s->tq = rf_now_ns();
	s->next = j->unsubmitted;
	j->unsubmitted = s;
	int ret = s->write ? rf_ring_write(j->r, 0, s->buf, o->bs, s->off, j->ioflags, on_done, s, NULL)
			   : rf_ring_read(j->r, 0, s->buf, o->bs, s->off, j->ioflags, on_done, s, NULL);
	if (ret < 0)
		die(1, "%s: cannot queue a %s at offset %" PRIu64 ": %s", o->file,
		    s->write ? "write" : "read", s->off, strerror(-ret));
	j->inflight++;
}

struct sync_req {
	struct iob_job *j;
	uint64_t tq;
};

static void on_sync(void *data, int64_t res)
{
	struct sync_req *q = data;
	struct iob_job *j = q->j;
	uint64_t now = rf_now_ns();
	j->sync_inflight--;
	if (res < 0)
		die(1, "%s: %s failed: %s", j->o->file, j->o->datasync ? "fdatasync" : "fsync",
		    strerror((int)-res));
	rf_hist_add(&j->sync, now - q->tq);
	j->syncs++;
	free(q);
}

/* An fsync (or fdatasync) through the ring, timed from queueing to completion. */
static void issue_sync(struct iob_job *j)
{
	struct sync_req *q = malloc(sizeof(*q));
	if (!q)
		die(1, "out of memory");
	q->j = j;
	q->tq = rf_now_ns();
	int ret = rf_ring_fsync(j->r, 0, RF_IO_FIXED_FILE, j->o->datasync, on_sync, q, NULL);
	if (ret < 0)
		die(1, "%s: cannot queue an fsync: %s", j->o->file, strerror(-ret));
	j->sync_inflight++;
}

static void on_done(void *data, int64_t res)
{
	struct slot *s = data;
	struct iob_job *j = s->j;
	const struct iob_opts *o = j->o;
	uint64_t now = rf_now_ns();
	j->inflight--;
	if (res < 0)
		die(1, "%s: %s of %" PRIu64 " bytes at offset %" PRIu64 " failed: %s", o->file,
		    s->write ? "write" : "read", o->bs, s->off, strerror((int)-res));
	if ((uint64_t)res != o->bs)
		die(1, "%s: %s at offset %" PRIu64 " transferred %" PRId64 " bytes, expected %" PRIu64
		    " (end of file?)", o->file, s->write ? "write" : "read", s->off, res, o->bs);
	if (now < j->ramp_end) /* --ramp-time: running, not yet measured */
		goto sync;
	if (!s->write && o->verify) {
		char msg[400];
		if (rf_vfy_check((const uint8_t *)s->buf, o->bs, s->off, o->write ? o->vgen : 0, msg,
				 sizeof(msg)) < 0)
			die(1, "--verify: %s: %s", o->file, msg);
		j->verified++;
	}
	rf_hist_add(&j->slat, s->ts - s->tq);
	rf_hist_add(&j->clat, now - s->ts);
	rf_hist_add(&j->lat, now - s->tq);
	if (j->log) {
		rf_hist_add(j->ilat, now - s->tq);
		j->ibytes += (uint64_t)res;
		j->iios++;
	}
	j->bytes += (uint64_t)res;
	if (s->write)
		j->wbytes += (uint64_t)res;
	else
		j->rbytes += (uint64_t)res;
	j->ios++;
sync:
	/* every N writes an fsync, as fio's fsync=N (several may be in flight); during
	 * the ramp too, so the measured run does not inherit its dirty pages */
	if (s->write && o->sync_every && ++j->since_sync >= o->sync_every) {
		j->since_sync = 0;
		issue_sync(j);
	}
	if (!j->stop && (j->total_ios ? j->issued >= j->total_ios : now >= j->deadline))
		j->stop = 1;
	if (!j->stop) {
		issue(s);
		return;
	}
	maybe_done(j);
}

static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

void iob_job_setup(struct iob_job *j)
{
	pthread_once(&crc_once, rf_crc32c_init); /* this file's table: it fills and checks */
	const struct iob_opts *o = j->o;
	struct rf_ring_opts ro = { .entries = (unsigned)(o->qd < 8 ? 8 : o->qd),
				   .flags = o->sqpoll ? RF_RING_SQPOLL : 0 };
	int ret = rf_ring_create(&j->r, &ro);
	if (ret == -EBADMSG) { /* RF_FAULT_INJECT malformed: the ring's one line says why */
		rf_cli_log_stderr(RF_LOG_ERROR, rf_last_error(), NULL);
		die(1, NULL);
	}
	if (ret < 0)
		die(1, "cannot create the io_uring ring: %s", strerror(-ret));
	rf_ring_set_max_batch(j->r, (unsigned)o->batch);
	ret = rf_ring_register_files(j->r, &o->fd, 1);
	if (ret < 0)
		die(1, "--file %s: cannot register the file with the ring: %s", o->file, strerror(-ret));
	j->slots = calloc((size_t)o->qd, sizeof(*j->slots));
	if (!j->slots)
		die(1, "out of memory for %ld request slots (--qd)", o->qd);
	j->ioflags = RF_IO_FIXED_FILE;
	if (o->fixedbufs) {
		ret = rf_ring_register_buffers(j->r, (unsigned)o->qd, o->bs, o->mem_align);
		if (ret < 0)
			die(1, "--fixedbufs: cannot register %ld buffers of %" PRIu64 " bytes (--qd x --bs):"
			    " %s", o->qd, o->bs, strerror(-ret));
		j->ioflags |= RF_IO_FIXED_BUF;
	}
	uint64_t seed = 0x5eed + (uint64_t)j->id;
	for (long i = 0; i < o->qd; i++) {
		struct slot *s = &j->slots[i];
		s->j = j;
		s->buf = o->fixedbufs ? rf_ring_buffer(j->r, (unsigned)i) : aligned_alloc(o->mem_align, o->bs);
		if (!s->buf)
			die(1, "out of memory for %ld buffers of %" PRIu64 " bytes (--qd x --bs)", o->qd, o->bs);
		if (o->write) {
			for (uint64_t k = 0; k + 8 <= o->bs; k += 8) {
				uint64_t w = splitmix64(&seed);
				memcpy(s->buf + k, &w, 8);
			}
		} else {
			memset(s->buf, 0, o->bs); /* fault the pages in before timing */
		}
	}
	j->write = o->write;
	j->random = o->random;
	j->rate_bps = o->rate_bps;
	j->rate_iops = o->rate_iops;
	j->end_fsync = o->end_fsync;
	j->rng = 0x243f6a8885a308d3ull + 0x9e3779b97f4a7c15ull * (uint64_t)j->id;
	j->total_ios = o->runtime > 0 ? 0 : o->nblocks;
	rf_randmap_init(&j->map, o->nblocks, j->rng);
	j->dist = o->dist;
	rf_dist_init(&j->dist, o->nblocks, j->rng ^ 0xd157ull);
	rf_hist_init(&j->slat);
	rf_hist_init(&j->clat);
	rf_hist_init(&j->lat);
	rf_hist_init(&j->sync);
	if (o->log_ms) {
		char path[4200];
		snprintf(path, sizeof(path), "%s.job%d.csv", o->log_prefix, j->id);
		j->ilat = malloc(sizeof(*j->ilat));
		j->log = fopen(path, "we");
		if (!j->ilat || !j->log)
			die(1, "--log-interval: cannot write %s: %s", path, strerror(errno));
		rf_hist_init(j->ilat);
		fprintf(j->log, "time_s,bw_MBps,iops,lat_p50_us,lat_p99_us,lat_max_us\n");
	}
}

/* Turn the loop until nothing is pending: each turn stamps what was queued since the
 * last (the turn's enter submits it: the end of its slat), then one enter that
 * submits and waits. */
static double tv_s(struct timeval tv);

/* The CPU and ring counters the figures start from: at the end of the ramp. */
static void snap_start(struct iob_job *j)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	j->usr = -tv_s(ru.ru_utime);
	j->sys = -tv_s(ru.ru_stime);
	rf_ring_get_stats(j->r, &j->st);
	j->snapped = 1;
}

static void run_loop(struct iob_job *j, int end_fsync)
{
	while (rf_ring_pending(j->r)) {
		uint64_t now = rf_now_ns();
		if (!j->snapped && now >= j->ramp_end)
			snap_start(j);
		for (struct slot *s = j->unsubmitted; s; s = s->next)
			s->ts = now;
		j->unsubmitted = NULL;
		int ret = rf_ring_run(j->r, RF_RUN_ONCE);
		if (ret < 0)
			die(1, "%s: ring failed: %s", j->o->file, strerror(-ret));
		if (end_fsync && !rf_ring_pending(j->r) && !j->sync_inflight && end_fsync++ == 1)
			issue_sync(j); /* the data must reach the device inside the timed run */
	}
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

void iob_job_run(struct iob_job *j)
{
	const struct iob_opts *o = j->o;
	struct rusage ru1;
	struct rf_ring_stats st1;
	j->t_start = j->t0 = rf_now_ns();
	j->ramp_end = j->t0 + (uint64_t)(o->ramp * 1e9);
	j->t_start = j->ramp_end; /* the measured run starts after the ramp */
	j->deadline = j->ramp_end + (uint64_t)(o->runtime * 1e9);
	if (!o->ramp)
		snap_start(j);
	if (j->log) {
		j->inext = j->t0 + o->log_ms * 1000000ull;
		log_arm(j);
	}
	for (long i = 0; i < o->qd && (!j->total_ios || j->issued < j->total_ios); i++)
		issue(&j->slots[i]);
	run_loop(j, j->end_fsync);
	j->t_end = rf_now_ns();
	if (j->log && j->iios && j->t_end > j->inext - o->log_ms * 500000ull)
		log_row(j, j->t_end); /* the last, partial interval, if at least half of one */
	if (!j->snapped)
		snap_start(j);
	getrusage(RUSAGE_THREAD, &ru1); /* the figures end here: not the verify read-back */
	rf_ring_get_stats(j->r, &st1);
	j->usr += tv_s(ru1.ru_utime);
	j->sys += tv_s(ru1.ru_stime);
	j->st.enters = st1.enters - j->st.enters;
	j->st.submissions = st1.submissions - j->st.submissions;
	j->st.completions = st1.completions - j->st.completions;
	if (o->verify && o->write) {
		/* read every block back (sequentially, the same queue depth), outside the
		 * timed run, checking each against its header and CRC; the reads' figures
		 * are not the run's */
		struct rf_hist *keep = malloc(3 * sizeof(*keep));
		if (!keep)
			die(1, "out of memory");
		keep[0] = j->slat;
		keep[1] = j->clat;
		keep[2] = j->lat;
		uint64_t ios = j->ios, bytes = j->bytes, rbytes = j->rbytes;
		j->write = j->random = 0;
		j->rate_bps = j->rate_iops = 0;
		j->next_off = 0;
		j->issued = 0;
		j->stop = 0;
		j->total_ios = o->nblocks;
		for (long i = 0; i < o->qd && j->issued < j->total_ios; i++)
			issue(&j->slots[i]);
		run_loop(j, 0);
		j->slat = keep[0];
		j->clat = keep[1];
		j->lat = keep[2];
		free(keep);
		j->ios = ios;
		j->bytes = bytes;
		j->rbytes = rbytes;
		j->write = 1;
	}
}

void iob_job_teardown(struct iob_job *j)
{
	if (j->log && fclose(j->log) != 0)
		die(1, "--log-interval: writing job %d's log: %s", j->id, strerror(errno));
	free(j->ilat);
	rf_ring_destroy(j->r);
	if (!j->o->fixedbufs)
		for (long i = 0; i < j->o->qd; i++)
			free(j->slots[i].buf);
	free(j->slots);
}
