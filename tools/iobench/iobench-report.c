/* tools/iobench-report.c -- rf-iobench's report: the jobs' sum (bandwidth and IOPS over
 * the wall time from the first job's start to the last one's end, histograms merged,
 * CPU and syscalls added up) and, with several jobs, each job; one text block or one
 * JSON object. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "../cli.h"
#include "iobench.h"

/* A JSON number, null where it is not finite (no time elapsed: 0/0). */
static void jnum(const char *fmt, double v)
{
	rf_cli_json_num(stdout, fmt, v);
}

/* "NAME": {"n": .., "mean_us": .., "min_us": .., "max_us": .., "percentiles_us": {..}} */
static void json_lat(const char *name, const struct rf_hist *h)
{
	printf("\"%s\": {\"n\": %" PRIu64 ", \"mean_us\": ", name, h->n);
	jnum("%.3f", rf_hist_mean(h) / 1e3);
	printf(", \"min_us\": ");
	jnum("%.3f", h->n ? (double)h->min / 1e3 : 0);
	printf(", \"max_us\": ");
	jnum("%.3f", (double)h->max / 1e3);
	printf(", \"percentiles_us\": {");
	for (unsigned i = 0; i < RF_HIST_NPCTS; i++) {
		printf("%s\"%g\": ", i ? ", " : "", rf_hist_pcts[i]);
		jnum("%.3f", rf_hist_pct(h, rf_hist_pcts[i]) / 1e3);
	}
	printf("}}");
}

/* The histogram itself: [[lowest ns of the bucket, count], ...] for non-empty buckets,
 * with the scheme that says what a bucket spans. */
static void json_hist(const struct rf_hist *h)
{
	printf("\"lat_histogram\": {\"scheme\": \"HdrHistogram: exact below %u ns, then %u "
	       "sub-buckets per power of two\", \"buckets\": [", RF_HIST_EXACT, RF_HIST_SUB);
	int first = 1;
	for (unsigned i = 0; i < RF_HIST_N; i++)
		if (h->c[i]) {
			uint64_t lo, w;
			rf_hist_range(i, &lo, &w);
			printf("%s[%" PRIu64 ", %" PRIu64 "]", first ? "" : ", ", lo, h->c[i]);
			first = 0;
		}
	printf("]}");
}

void iob_json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* Direction k of j (0 reads, 1 writes, 2 trims): its completion and total latency
 * histograms, I/Os and bytes (empty and 0 where the run has none). A run of one
 * direction has the job's own; rw/randrw each direction's (iob_job.dir). */
static void dir_of(const struct iob_opts *o, const struct iob_job *j, int k,
		   const struct rf_hist **clat, const struct rf_hist **lat, uint64_t *ios,
		   uint64_t *bytes)
{
	static const struct rf_hist empty; /* n 0: printed as zeros */

	*clat = *lat = &empty;
	*ios = *bytes = 0;
	if (o->mixed ? k >= 2 : k != (o->trim ? 2 : o->write ? 1 : 0))
		return;
	if (o->mixed) {
		*clat = &j->dir[2 * k];
		*lat = &j->dir[2 * k + 1];
		*ios = j->dios[k];
	} else {
		*clat = &j->clat;
		*lat = &j->lat;
		*ios = j->ios;
	}
	*bytes = k == 0 ? j->rbytes : k == 1 ? j->wbytes : j->tbytes;
}

static const char *const dir_name[3] = { "read", "write", "trim" };

static double job_secs(const struct iob_job *j)
{
	return (double)(j->t_end - j->t_start) / 1e9;
}

/* One job's (or the sum's) figures as JSON members, without braces. */
static void json_figures(const struct iob_opts *o, const struct iob_job *j, double secs)
{
	const char *keys[8] = { "seconds", "bw_MBps", "iops", "lat_mean_us", "lat_p50_us",
				"lat_p99_us", "cpu_user_s", "cpu_sys_s" };
	const char *fmts[8] = { "%.6f", "%.3f", "%.1f", "%.2f", "%.2f", "%.2f", "%.6f", "%.6f" };
	double v[8] = { secs, (double)j->bytes / 1e6 / secs, (double)j->ios / secs,
			rf_hist_mean(&j->lat) / 1e3, rf_hist_pct(&j->lat, 50) / 1e3,
			rf_hist_pct(&j->lat, 99) / 1e3, j->usr, j->sys };
	printf("\"bytes\": %" PRIu64 ", \"ios\": %" PRIu64 ", \"read_bytes\": %" PRIu64 ", "
	       "\"write_bytes\": %" PRIu64, j->bytes, j->ios, j->rbytes, j->wbytes);
	for (unsigned k = 0; k < 8; k++) {
		printf(", \"%s\": ", keys[k]);
		jnum(fmts[k], v[k]);
	}
	printf(", \"enters\": %" PRIu64 ", \"submissions\": %" PRIu64 ", \"completions\": %"
	       PRIu64 ", \"syncs\": %" PRIu64 ", ", j->st.enters, j->st.submissions,
	       j->st.completions, j->syncs);
	/* the measured run's start and end as Unix times (jobs of a job file run in
	 * processes of their own: these say which ran together) */
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	double off = (double)rt.tv_sec + (double)rt.tv_nsec / 1e9 - (double)rf_now_ns() / 1e9;
	printf("\"start_unix_s\": ");
	jnum("%.6f", off + (double)j->t_start / 1e9);
	printf(", \"end_unix_s\": ");
	jnum("%.6f", off + (double)j->t_end / 1e9);
	printf(", \"trim_bytes\": %" PRIu64 ", \"verified_blocks\": %" PRIu64 ", ", j->tbytes,
	       j->verified);
	json_lat("slat", &j->slat);
	printf(", ");
	json_lat("clat", &j->clat);
	printf(", ");
	json_lat("lat", &j->lat);
	printf(", ");
	json_lat("sync", &j->sync);
	/* each direction apart, as fio's "read", "write" and "trim" (zeros where none) */
	for (int k = 0; k < 3; k++) {
		const struct rf_hist *c, *l;
		uint64_t ios, bytes;
		dir_of(o, j, k, &c, &l, &ios, &bytes);
		printf(", \"%s\": {\"ios\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"iops\": ",
		       dir_name[k], ios, bytes);
		jnum("%.1f", (double)ios / secs);
		printf(", \"bw_MBps\": ");
		jnum("%.3f", (double)bytes / 1e6 / secs);
		printf(", ");
		json_lat("clat", c);
		printf(", ");
		json_lat("lat", l);
		printf("}");
	}
}

static void text_hist(const char *name, const struct rf_hist *h)
{
	printf("  %s (us): mean %.2f, min %.2f, max %.2f |", name, rf_hist_mean(h) / 1e3,
	       h->n ? (double)h->min / 1e3 : 0, (double)h->max / 1e3);
	for (unsigned i = 0; i < RF_HIST_NPCTS; i++)
		printf(" p%g %.1f", rf_hist_pcts[i], rf_hist_pct(h, rf_hist_pcts[i]) / 1e3);
	printf("\n");
}

static void text_lat(const struct iob_opts *o, const struct iob_job *j, double secs)
{
	text_hist("slat", &j->slat);
	text_hist("clat", &j->clat);
	text_hist(" lat", &j->lat);
	for (int k = 0; o->mixed && k < 2; k++) { /* each direction apart, as fio */
		const struct rf_hist *c, *l;
		uint64_t ios, bytes;
		char name[16];
		dir_of(o, j, k, &c, &l, &ios, &bytes);
		printf("  %s: %.1f MB/s, %.0f IOPS, %" PRIu64 " I/Os\n", dir_name[k],
		       (double)bytes / 1e6 / secs, (double)ios / secs, ios);
		snprintf(name, sizeof(name), "  %s clat", dir_name[k]);
		text_hist(name, c);
		snprintf(name, sizeof(name), "  %s  lat", dir_name[k]);
		text_hist(name, l);
	}
}

void iob_report(const struct iob_opts *o, const struct iob_job *jobs, unsigned n, int json)
{
	/* the sum: heap, its histograms are large */
	struct iob_job *sum = calloc(1, sizeof(*sum));
	if (!sum)
		die(1, "out of memory");
	rf_hist_init(&sum->slat);
	rf_hist_init(&sum->clat);
	rf_hist_init(&sum->lat);
	rf_hist_init(&sum->sync);
	if (o->mixed)
		sum->dir = iob_dir_new();
	sum->t_start = UINT64_MAX;
	for (unsigned i = 0; i < n; i++) {
		const struct iob_job *j = &jobs[i];
		sum->bytes += j->bytes;
		sum->ios += j->ios;
		sum->rbytes += j->rbytes;
		sum->wbytes += j->wbytes;
		sum->tbytes += j->tbytes;
		sum->syncs += j->syncs;
		sum->verified += j->verified;
		sum->usr += j->usr;
		sum->sys += j->sys;
		sum->st.enters += j->st.enters;
		sum->st.submissions += j->st.submissions;
		sum->st.completions += j->st.completions;
		if (j->t_start < sum->t_start)
			sum->t_start = j->t_start;
		if (j->t_end > sum->t_end)
			sum->t_end = j->t_end;
		rf_hist_merge(&sum->slat, &j->slat);
		rf_hist_merge(&sum->clat, &j->clat);
		rf_hist_merge(&sum->lat, &j->lat);
		rf_hist_merge(&sum->sync, &j->sync);
		for (unsigned k = 0; o->mixed && k < 4; k++)
			rf_hist_merge(&sum->dir[k], &j->dir[k]);
		sum->dios[0] += j->dios[0];
		sum->dios[1] += j->dios[1];
	}
	double secs = job_secs(sum);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	long peak_kib = ru.ru_maxrss; /* KiB on Linux */
	uint64_t buf_bytes = (uint64_t)o->qd * o->bs.max * n;
	int map = o->random && !o->norandommap && o->dist.kind == RF_DIST_RANDOM;
	if (json) {
		printf("{\"file\": ");
		iob_json_str(o->file);
		printf(", \"files\": [");
		for (unsigned f = 0; f < o->nfiles; f++) {
			printf("%s", f ? ", " : "");
			iob_json_str(o->files[f].path);
		}
		printf("], \"nrfiles\": %u, \"region_bytes\": %" PRIu64 ", \"bs_spec\": ", o->nfiles,
		       o->size);
		iob_json_str(o->bs_arg);
		printf(", \"bs_max\": %" PRIu64 ", \"hipri\": %s, ", o->bs.max,
		       o->hipri ? "true" : "false");
		printf("\"rw\": \"%s\", \"bs\": %" PRIu64 ", \"qd\": %ld, \"batch\": %ld, "
		       "\"numjobs\": %u, \"direct\": %s, \"fixedbufs\": %s, \"random_map\": %s, "
		       "\"rwmixread\": %u, \"end_fsync\": %s, \"qd_used\": %ld, \"buffers\": %ld, "
		       "\"buffer_bytes\": %" PRIu64 ", \"peak_rss_kib\": %ld, ", o->rw, o->bs.grain,
		       o->qd_req, o->batch, n, o->direct ? "true" : "false", o->fixedbufs ? "true" : "false",
		       map ? "true" : "false",
		       o->mixed ? o->rwmixread : (o->write || o->trim ? 0 : 100),
		       o->end_fsync ? "true" : "false", o->qd, o->qd * (long)n, buf_bytes, peak_kib);
		json_figures(o, sum, secs);
		printf(", ");
		json_hist(&sum->lat);
		printf(", \"jobs\": [");
		for (unsigned i = 0; i < n; i++) {
			printf("%s{\"job\": %u, ", i ? ", " : "", i);
			json_figures(o, &jobs[i], job_secs(&jobs[i]));
			printf("}");
		}
		printf("]}\n");
	} else {
		char qds[64] = "", nj[32] = "";
		if (o->qd != o->qd_req)
			snprintf(qds, sizeof(qds), " (%ld in flight: the region's blocks)", o->qd);
		if (n > 1)
			snprintf(nj, sizeof(nj), " x %u jobs", n);
		printf("%s bs=%s qd=%ld%s%s%s%s: %.1f MB/s, %.0f IOPS, lat p50 %.1f us p99 %.1f us, "
		       "cpu %.2f s usr + %.2f s sys, %" PRIu64 " bytes in %.2f s, %" PRIu64 " enters for %" PRIu64
		       " submissions, %ld buffers (%" PRIu64 " KiB), peak RSS %ld KiB\n",
		       o->rw, o->bs_arg, o->qd_req, qds, nj, o->direct ? " direct" : "",
		       o->fixedbufs ? " fixedbufs" : "", (double)sum->bytes / 1e6 / secs,
		       (double)sum->ios / secs, rf_hist_pct(&sum->lat, 50) / 1e3,
		       rf_hist_pct(&sum->lat, 99) / 1e3, sum->usr, sum->sys, sum->bytes, secs,
		       sum->st.enters, sum->st.submissions, o->qd * (long)n, buf_bytes >> 10, peak_kib);
		text_lat(o, sum, secs);
		if (sum->syncs)
			printf("  sync (us): %" PRIu64 " %s, mean %.1f, p50 %.1f, p99 %.1f\n", sum->syncs,
			       o->datasync ? "fdatasyncs" : "fsyncs", rf_hist_mean(&sum->sync) / 1e3,
			       rf_hist_pct(&sum->sync, 50) / 1e3, rf_hist_pct(&sum->sync, 99) / 1e3);
		for (unsigned i = 0; n > 1 && i < n; i++) {
			const struct iob_job *j = &jobs[i];
			double s = job_secs(j);
			printf("  job %u: %.1f MB/s, %.0f IOPS, lat p50 %.1f us p99 %.1f us, cpu %.2f s usr + "
			       "%.2f s sys\n", i, (double)j->bytes / 1e6 / s, (double)j->ios / s,
			       rf_hist_pct(&j->lat, 50) / 1e3, rf_hist_pct(&j->lat, 99) / 1e3, j->usr, j->sys);
		}
	}
	free(sum->dir);
	free(sum);
}
