/* tools/iobench-run.c -- one rf-iobench job: its ring and buffers, the I/O loop (issue
 * from the completion callback, one io_uring_enter a loop turn), rate limits, fsyncs,
 * the verify read-back, and the job's figures (slat/clat/lat histograms, CPU of its
 * thread, the ring's counters). */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <ringflow/ring-ops.h>

#include "../cli.h"
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
	if (fprintf(j->log, "%.3f,%.3f,%.1f,%.2f,%.2f,%.2f\n", (double)(end - j->ramp_end) / 1e9,
		    (double)j->ibytes / 1e6 / secs, (double)j->iios / secs,
		    rf_hist_pct(j->ilat, 50) / 1e3, rf_hist_pct(j->ilat, 99) / 1e3,
		    (double)j->ilat->max / 1e3) < 0 && !j->log_err)
		j->log_err = errno ? errno : EIO;  /* said at the teardown, naming the file */
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
	if (res < 0 || (!j->one_pass && rf_now_ns() >= j->deadline)) {
		j->stop = 1;
		maybe_done(j);
		return;
	}
	issue_now(s);
}

static int cover_test(const uint64_t *c, uint64_t g)
{
	return (int)(c[g >> 6] >> (g & 63) & 1);
}

static void cover_set(uint64_t *c, uint64_t g)
{
	c[g >> 6] |= 1ull << (g & 63);
}

/* A new pass over file f: every grain to transfer again (time-based runs wrap). */
static void pass_begin(struct iob_job *j, unsigned f)
{
	struct iob_fstate *fs = &j->fs[f];
	uint64_t n = j->o->files[f].ngrains;
	fs->left = n;
	fs->next = 0;
	fs->rwnext[0] = fs->rwnext[1] = 0;
	if (fs->cover && fs->map.ctr) { /* the map's pass may hold draws all covered: a new one */
		memset(fs->cover, 0, (n + 63) / 64 * sizeof(uint64_t));
		fs->map.pass++;
		rf_randmap_rekey(&fs->map);
	}
}

/* The next I/O's file, offset and length (s->file, s->off, s->len): the files in turn
 * (fio's file_service_type=roundrobin), each file's pass in its own order. 0 when a
 * one-pass run has nothing left. With several sizes and the random map, an I/O starts
 * at a grain no I/O of this pass has covered and ends at the first covered one (as
 * fio's map trims an I/O to the free blocks), so a pass still covers each grain once. */
static int next_io(struct iob_job *j, struct slot *s)
{
	const struct iob_opts *o = j->o;
	unsigned f = j->cur;
	for (unsigned k = 0; k < o->nfiles; k++) {
		f = (j->cur + 1 + k) % o->nfiles;
		if (j->fs[f].left)
			break;
		if (!j->one_pass) {
			pass_begin(j, f);
			break;
		}
	}
	struct iob_fstate *fs = &j->fs[f];
	if (!fs->left)
		return 0;
	j->cur = f;
	uint64_t n = o->files[f].ngrains, g, len = 1;
	uint64_t want = j->readback ? o->bs.max / o->bs.grain
		      : o->bs.n == 1 ? 1 : rf_bs_draw(&o->bs, splitmix64(&j->rng)) / o->bs.grain;
	int op = -1;   /* sequential rw: chosen first, each direction at its own place */
	if (!j->random && o->mixed && j->write && !o->trim) {
		op = splitmix64(&j->rng) % 100 >= o->rwmixread ? IOB_WRITE : IOB_READ;
		uint64_t *pos = &fs->rwnext[op == IOB_WRITE];
		g = *pos < n ? *pos : 0;
		len = want < n - g ? want : n - g;
		*pos = g + len;
	} else if (!j->random) {
		g = fs->next < n ? fs->next : 0;
		len = want < n - g ? want : n - g;
		fs->next = g + len;
	} else if (o->dist.kind != RF_DIST_RANDOM || o->norandommap) {
		g = o->norandommap && o->dist.kind == RF_DIST_RANDOM ? splitmix64(&j->rng) % n
								       : rf_dist_next(&fs->dist);
		len = want < n - g ? want : n - g;
	} else if (!fs->cover) {
		g = rf_randmap_next(&fs->map);
	} else {
		do
			g = rf_randmap_next(&fs->map);
		while (cover_test(fs->cover, g));
		cover_set(fs->cover, g);
		while (len < want && g + len < n && !cover_test(fs->cover, g + len))
			cover_set(fs->cover, g + len++);
	}
	if (len > fs->left) /* draws with replacement: the pass's last I/O ends its bytes */
		len = fs->left;
	fs->left -= len;
	if (j->one_pass)
		j->left -= len;
	s->file = f;
	s->off = o->offset + g * o->bs.grain;
	s->len = len * o->bs.grain;
	if (o->trim)
		s->op = IOB_TRIM;
	else if (op >= 0)
		s->op = op;
	else if (o->mixed && j->write)
		s->op = splitmix64(&j->rng) % 100 >= o->rwmixread ? IOB_WRITE : IOB_READ;
	else
		s->op = j->write ? IOB_WRITE : IOB_READ;
	return 1;
}

/* The next I/O for slot s: where it goes, then (with --rate / --rate-iops) no earlier
 * than its share of the run -- the I/O numbered j->issued, after j->issued_bytes, may
 * start at t0 + issued / rate -- a ring timeout holding the slot until then. */
static void issue(struct slot *s)
{
	struct iob_job *j = s->j;
	if (!next_io(j, s)) {
		j->stop = 1;
		maybe_done(j);
		return;
	}
	uint64_t due = 0;
	if (j->rate_iops)
		due = j->t0 + (uint64_t)((double)j->issued * 1e9 / (double)j->rate_iops);
	if (j->rate_bps) {
		uint64_t d2 = j->t0 + (uint64_t)((double)j->issued_bytes * 1e9 / (double)j->rate_bps);
		if (d2 > due)
			due = d2;
	}
	uint64_t now = due ? rf_now_ns() : 0;
	j->issued++; /* this slot's turn is taken */
	j->issued_bytes += s->len;
	if (due > now) {
		/* a time-based run waits no longer than its end: an I/O due after it is not
		 * made (--rate 1 --runtime 1 held a 4 KiB read for 4096 s) */
		if (!j->one_pass && due > j->deadline)
			due = j->deadline > now ? j->deadline : now + 1;
		j->inflight++;
		int ret = rf_ring_timeout(j->r, due - now, on_delay, s, NULL);
		if (ret < 0)
			die(1, "cannot queue a timeout for --rate: %s", strerror(-ret));
		return;
	}
	issue_now(s);
}

static const char *const op_name[] = { "read", "write", "trim" };

static void issue_now(struct slot *s)
{
	struct iob_job *j = s->j;
	const struct iob_opts *o = j->o;
	if (s->op == IOB_WRITE && o->verify) { /* a header per grain; fio fills in the timed path too */
		for (uint64_t k = 0; k < s->len; k += o->bs.grain)
			rf_vfy_fill((uint8_t *)s->buf + k, o->bs.grain, s->off + k, o->vgen);
	} else if (s->op == IOB_WRITE) {
		/* a buffer a read filled (mixed runs) gets its random pattern back: it wrote
		 * what was read, zeros on a new file; and each 512-byte sector carries its
		 * offset and a count, as fio's scramble_buffers, so no two writes are the
		 * same bytes to a deduplicating or compressing device */
		if (s->dirty)
			memcpy(s->buf, j->pattern, s->len);
		s->dirty = 0;
		for (uint64_t k = 0; k + 16 <= s->len; k += 512) {
			uint64_t w[2] = { s->off + k, ++j->scramble };
			memcpy(s->buf + k, w, sizeof(w));
		}
	} else if (s->op == IOB_READ) {
		s->dirty = 1;
	}
	s->tq = rf_now_ns();
	if (!s->unsub) {  /* with SQPOLL it may have completed and come back in one turn */
		s->unsub = 1;
		s->next = j->unsubmitted;
		j->unsubmitted = s;
	}
	int ret;
	if (s->op == IOB_WRITE)
		ret = rf_ring_write(j->r, (int)s->file, s->buf, s->len, s->off, j->ioflags, on_done, s, NULL);
	else if (s->op == IOB_READ)
		ret = rf_ring_read(j->r, (int)s->file, s->buf, s->len, s->off, j->ioflags, on_done, s, NULL);
	else /* a hole punched: the file system discards the blocks (fio's trim on a file) */
		ret = rf_ring_fallocate(j->r, (int)s->file, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					s->off, s->len, RF_IO_FIXED_FILE, on_done, s, NULL);
	if (ret < 0)
		die(1, "%s: cannot queue a %s at offset %" PRIu64 ": %s", o->files[s->file].path,
		    op_name[s->op], s->off, strerror(-ret));
	j->inflight++;
}

struct sync_req {
	struct iob_job *j;
	unsigned file;
	uint64_t tq;
};

static void on_sync(void *data, int64_t res)
{
	struct sync_req *q = data;
	struct iob_job *j = q->j;
	uint64_t now = rf_now_ns();
	j->sync_inflight--;
	if (res < 0)
		die(1, "%s: %s failed: %s", j->o->files[q->file].path,
		    j->o->datasync ? "fdatasync" : "fsync", strerror((int)-res));
	if (q->tq >= j->ramp_end) {  /* one of the ramp's: not measured */
		rf_hist_add(&j->sync, now - q->tq);
		j->syncs++;
	}
	free(q);
}

/* An fsync (or fdatasync) of one file through the ring, timed from queueing to
 * completion. */
static void issue_sync(struct iob_job *j, unsigned file)
{
	struct sync_req *q = malloc(sizeof(*q));
	if (!q)
		die(1, "out of memory");
	q->j = j;
	q->file = file;
	q->tq = rf_now_ns();
	int ret = rf_ring_fsync(j->r, (int)file, RF_IO_FIXED_FILE, j->o->datasync, on_sync, q, NULL);
	if (ret < 0)
		die(1, "%s: cannot queue an fsync: %s", j->o->files[file].path, strerror(-ret));
	j->sync_inflight++;
}

static void on_done(void *data, int64_t res)
{
	struct slot *s = data;
	struct iob_job *j = s->j;
	const struct iob_opts *o = j->o;
	const char *path = o->files[s->file].path;
	uint64_t now = rf_now_ns();
	j->inflight--;
	if (res == -EOPNOTSUPP && o->hipri)
		die(1, "--hipri: %s: polled I/O refused (%s): its device or file system does not poll",
		    path, strerror(EOPNOTSUPP));
	if (res == -EOPNOTSUPP && s->op == IOB_TRIM)
		die(1, "--rw %s: %s cannot discard blocks (punching a hole: %s)", o->rw, path,
		    strerror(EOPNOTSUPP));
	if (res < 0)
		die(1, "%s: %s of %" PRIu64 " bytes at offset %" PRIu64 " failed: %s", path,
		    op_name[s->op], s->len, s->off, strerror((int)-res));
	if (s->op == IOB_TRIM && !res)
		res = (int64_t)s->len; /* fallocate says 0 for all of it */
	if ((uint64_t)res != s->len)
		die(1, "%s: %s at offset %" PRIu64 " transferred %" PRId64 " bytes, expected %" PRIu64
		    " (end of file?)", path, op_name[s->op], s->off, res, s->len);
	if (now < j->ramp_end) /* --ramp-time: running, not yet measured */
		goto sync;
	if (s->op == IOB_READ && o->verify) {
		char msg[400];
		for (uint64_t k = 0; k < s->len; k += o->bs.grain) {
			if (rf_vfy_check((const uint8_t *)s->buf + k, o->bs.grain, s->off + k,
					 o->write ? o->vgen : 0, msg, sizeof(msg)) < 0)
				die(1, "--verify: %s: %s", path, msg);
			j->verified++;
		}
	}
	if (s->unsub)  /* done before the turn that submits it was stamped (SQPOLL) */
		s->ts = s->tq;
	rf_hist_add(&j->slat, s->ts - s->tq);
	rf_hist_add(&j->clat, now - s->ts);
	rf_hist_add(&j->lat, now - s->tq);
	if (j->dir && !j->readback && s->op != IOB_TRIM) {
		int w = s->op == IOB_WRITE;
		rf_hist_add(&j->dir[2 * w], now - s->ts);
		rf_hist_add(&j->dir[2 * w + 1], now - s->tq);
		j->dios[w]++;
	}
	if (j->log) {
		rf_hist_add(j->ilat, now - s->tq);
		j->ibytes += (uint64_t)res;
		j->iios++;
	}
	j->bytes += (uint64_t)res;
	if (s->op == IOB_WRITE)
		j->wbytes += (uint64_t)res;
	else if (s->op == IOB_READ)
		j->rbytes += (uint64_t)res;
	else
		j->tbytes += (uint64_t)res;
	j->ios++;
sync:
	/* every N writes an fsync of the file written, as fio's fsync=N (several may be in
	 * flight); during the ramp too, so the measured run does not inherit its dirty
	 * pages */
	if (s->op == IOB_WRITE && o->sync_every && ++j->since_sync >= o->sync_every) {
		j->since_sync = 0;
		issue_sync(j, s->file);
	}
	if (!j->stop && (j->one_pass ? !j->left : now >= j->deadline))
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
				   .flags = (o->sqpoll ? RF_RING_SQPOLL : 0) |
					    (o->hipri ? RF_RING_IOPOLL : 0) };
	int ret = rf_ring_create(&j->r, &ro);
	if (ret == -EBADMSG) { /* RF_FAULT_INJECT malformed: the ring's one line says why */
		rf_cli_log_stderr(RF_LOG_ERROR, rf_last_error(), NULL);
		die(1, NULL);
	}
	if (ret < 0)
		die(1, "cannot create the io_uring ring: %s", rf_last_error());
	rf_ring_set_max_batch(j->r, (unsigned)o->batch);
	int fds[IOB_MAX_FILES];
	for (unsigned f = 0; f < o->nfiles; f++)
		fds[f] = o->files[f].fd;
	ret = rf_ring_register_files(j->r, fds, o->nfiles);
	if (ret < 0)
		die(1, "--file %s: cannot register %u file%s with the ring: %s", o->file, o->nfiles,
		    o->nfiles > 1 ? "s" : "", strerror(-ret));
	j->slots = calloc((size_t)o->qd, sizeof(*j->slots));
	j->fs = calloc(o->nfiles, sizeof(*j->fs));
	if (!j->slots || !j->fs)
		die(1, "out of memory for %ld request slots (--qd)", o->qd);
	j->ioflags = RF_IO_FIXED_FILE;
	uint64_t bmax = o->bs.max;
	/* aligned_alloc's size a multiple of the alignment, as C11 required (C17 dropped
	 * the rule; ASan still reports the call): a --bs of 512 or 1000 bytes gets a
	 * buffer of one alignment unit */
	uint64_t bcap = (bmax + o->mem_align - 1) / o->mem_align * o->mem_align;
	if (o->fixedbufs) {
		ret = rf_ring_register_buffers(j->r, (unsigned)o->qd, bmax, o->mem_align);
		if (ret < 0)
			die(1, "--fixedbufs: cannot register %ld buffers of %" PRIu64 " bytes (--qd x --bs):"
			    " %s", o->qd, bmax, strerror(-ret));
		j->ioflags |= RF_IO_FIXED_BUF;
	}
	uint64_t seed = 0x5eed + (uint64_t)j->id;
	if (o->write && !(j->pattern = malloc(bmax)))
		die(1, "out of memory for a write pattern of %" PRIu64 " bytes (--bs)", bmax);
	for (uint64_t k = 0; j->pattern && k + 8 <= bmax; k += 8) {
		uint64_t w = splitmix64(&seed);
		memcpy(j->pattern + k, &w, 8);
	}
	for (long i = 0; i < o->qd; i++) {
		struct slot *s = &j->slots[i];
		s->j = j;
		s->buf = o->fixedbufs ? rf_ring_buffer(j->r, (unsigned)i) : aligned_alloc(o->mem_align, bcap);
		if (!s->buf)
			die(1, "out of memory for %ld buffers of %" PRIu64 " bytes (--qd x --bs)", o->qd, bmax);
		if (o->write) {
			memcpy(s->buf, j->pattern, bmax);
		} else {
			memset(s->buf, 0, bmax); /* fault the pages in before timing */
		}
	}
	j->write = o->write;
	j->random = o->random;
	j->rate_bps = o->rate_bps;
	j->rate_iops = o->rate_iops;
	j->end_fsync = o->end_fsync;
	j->rng = 0x243f6a8885a308d3ull + 0x9e3779b97f4a7c15ull * (uint64_t)j->id;
	j->one_pass = !(o->runtime > 0);
	j->left = o->ngrains;
	j->cur = o->nfiles - 1; /* the first I/O goes to file 0 */
	int cover = o->random && !o->norandommap && o->dist.kind == RF_DIST_RANDOM &&
		    o->bs.max > o->bs.grain;
	for (unsigned f = 0; f < o->nfiles; f++) {
		struct iob_fstate *fs = &j->fs[f];
		uint64_t n = o->files[f].ngrains, fseed = j->rng + 0x632be59bd9b4e019ull * f;
		fs->left = n;
		rf_randmap_init(&fs->map, n, fseed);
		fs->dist = o->dist;
		rf_dist_init(&fs->dist, n, fseed ^ 0xd157ull);
		if (cover && !(fs->cover = calloc((n + 63) / 64, sizeof(uint64_t))))
			die(1, "out of memory for the random map of %s (%" PRIu64 " blocks)",
			    o->files[f].path, n);
	}
	rf_hist_init(&j->slat);
	rf_hist_init(&j->clat);
	rf_hist_init(&j->lat);
	rf_hist_init(&j->sync);
	if (o->mixed)
		j->dir = iob_dir_new();
	if (o->log_ms) {
		char path[4200];
		snprintf(path, sizeof(path), "%s.job%d.csv", o->log_prefix, j->id);
		/* checked in main (a regular file or a new name, not a --file); opened
		 * without blocking all the same (a FIFO made since is refused, not waited on) */
		char why[4400];
		int fd = rf_cli_open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644, 0, NULL, why,
				     sizeof(why));
		if (fd < 0)
			die(1, "--log-prefix %s", why);
		j->ilat = malloc(sizeof(*j->ilat));
		j->log = fdopen(fd, "w");
		j->log_path = strdup(path);
		if (!j->ilat || !j->log || !j->log_path)
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
		for (struct slot *s = j->unsubmitted; s; s = s->next) {
			s->ts = now;
			s->unsub = 0;
		}
		j->unsubmitted = NULL;
		int ret = rf_ring_run(j->r, RF_RUN_ONCE);
		if (ret < 0)
			die(1, "%s: ring failed: %s", j->o->file, strerror(-ret));
		if (end_fsync && !rf_ring_pending(j->r) && !j->sync_inflight && end_fsync++ == 1)
			for (unsigned f = 0; f < j->o->nfiles; f++)
				issue_sync(j, f); /* the data must reach the device inside the timed run */
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
	if (j->log) {  /* from the measured start: the ramp's I/Os are not counted */
		j->inext = j->ramp_end + o->log_ms * 1000000ull;
		log_arm(j);
	}
	for (long i = 0; i < o->qd && (!j->one_pass || j->left); i++)
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
		j->readback = 1; /* the largest size, sequentially: each grain checked */
		j->rate_bps = j->rate_iops = 0;
		j->stop = 0;
		j->one_pass = 1;
		j->left = o->ngrains;
		j->cur = o->nfiles - 1;
		for (unsigned f = 0; f < o->nfiles; f++) {
			j->fs[f].next = 0;
			j->fs[f].left = o->files[f].ngrains;
		}
		for (long i = 0; i < o->qd && j->left; i++)
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
	if (j->log) {
		/* a row's write may have failed (its buffer flushed then): its errno */
		int e = j->log_err ? j->log_err : ferror(j->log) ? EIO : 0;
		if (fclose(j->log) != 0 && !e)
			e = errno;
		if (e)
			die(1, "--log-interval: writing %s (job %d's log): %s", j->log_path, j->id,
			    strerror(e));
	}
	free(j->log_path);
	free(j->ilat);
	rf_ring_destroy(j->r);
	if (!j->o->fixedbufs)
		for (long i = 0; i < j->o->qd; i++)
			free(j->slots[i].buf);
	free(j->slots);
	free(j->pattern);
	for (unsigned f = 0; f < j->o->nfiles; f++)
		free(j->fs[f].cover);
	free(j->fs);
}
