/* test-engine-trace: a Chrome-trace JSON file is written with one track per stream
 * (thread_name metadata), one complete ("X") event per op with its name, and one flow
 * pair ("s"/"f") per dependency edge. The test pushes a small diamond (A -> B, A -> C,
 * B+C -> D) over two worker streams, then checks the file: the counts of events and
 * edges, and the JSON is validated by python3's json module when python3 exists
 * (the meson test runs it). A stream closed before the file is written keeps its
 * track name. A trace that cannot be written whole (the file size limit standing in
 * for a full disk) leaves the file that was at the path, and no temporary file. */
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include "engine.h"
#include "log.h"
#include "../test-util.h"

static int nop(void *p)
{
	(void)p;
	usleep(1000);
	return 0;
}

static int count(const char *buf, const char *pat)
{
	int n = 0;
	const char *p = buf;
	while ((p = strstr(p, pat))) {
		n++;
		p += strlen(pat);
	}
	return n;
}

/* The trace file at path, whole, into buf (NUL-terminated); a trace's JSON object. */
static void read_trace(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	CHECK(fd >= 0);
	n = read(fd, buf, len - 1);
	close(fd);
	CHECK(n > 0);
	buf[n] = 0;
	CHECK(strstr(buf, "\"traceEvents\""));
}

int main(int argc, char **argv)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_stream *s1, *s2;
	struct rf_var *a, *b, *c, *d;
	char path[] = "/tmp/rf-trace-XXXXXX";
	char buf[65536];
	int fd;

	fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = 0 }));
	CHECK_OK(rf_worker_stream_create(e, "compute", 0, &s1));
	CHECK_OK(rf_worker_stream_create(e, "copy", 0, &s2));
	CHECK_OK(rf_engine_trace_start(e, path));
	rf_var_create(e, "a", &a); rf_var_create(e, "b", &b); rf_var_create(e, "c", &c); rf_var_create(e, "d", &d);
	CHECK_OK(rf_engine_push_simple(e, nop, NULL, NULL, 0, &a, 1, s1, "opA"));
	CHECK_OK(rf_engine_push_simple(e, nop, NULL, &a, 1, &b, 1, s1, "opB"));
	CHECK_OK(rf_engine_push_simple(e, nop, NULL, &a, 1, &c, 1, s2, "opC"));
	CHECK_OK(rf_engine_push_simple(e, nop, NULL, (struct rf_var *[]){ b, c }, 2, &d, 1, s2, "opD"));
	CHECK_EQ(rf_engine_wait_all(e), 0);
	{ /* a stream closed before the trace is written keeps its track name */
		struct rf_stream *s3;
		struct rf_var *q;
		rf_var_create(e, "q", &q);
		CHECK_OK(rf_worker_stream_create(e, "shortlived", 0, &s3));
		CHECK_OK(rf_engine_push_simple(e, nop, NULL, NULL, 0, &q, 1, s3, "opE"));
		rf_stream_destroy(s3);
		rf_var_destroy(e, q, NULL, NULL, NULL);
	}
	CHECK_OK(rf_engine_trace_stop(e));
	rf_var_destroy(e, a, NULL, NULL, NULL);
	rf_var_destroy(e, b, NULL, NULL, NULL);
	rf_var_destroy(e, c, NULL, NULL, NULL);
	rf_var_destroy(e, d, NULL, NULL, NULL);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);

	read_trace(path, buf, sizeof(buf));
	CHECK_EQ(count(buf, "\"ph\":\"X\""), 6); /* 4 + opE + the deletion of q */
	CHECK_EQ(count(buf, "\"ph\":\"s\""), 5); /* A->B, A->C, B->D, C->D, E->delete */
	CHECK_EQ(count(buf, "\"ph\":\"f\""), 5);
	CHECK(strstr(buf, "\"name\":\"compute\""));
	CHECK(strstr(buf, "\"name\":\"copy\""));
	CHECK(strstr(buf, "\"name\":\"shortlived\""));
	CHECK(strstr(buf, "\"name\":\"opD\""));
	if (argc > 1 && access(argv[1], X_OK) == 0) {
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "%s -c 'import json,sys; json.load(open(sys.argv[1]))' %s", argv[1], path);
		CHECK_EQ(system(cmd), 0);
	}
	/* a trace of no op: a valid file with no event (its empty event table was sorted,
	 * a NULL pointer given to qsort: UBSan stopped rf-train --trace with RF_TRACE set) */
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = 0 }));
	CHECK_OK(rf_engine_trace_start(e, path));
	CHECK_OK(rf_engine_trace_stop(e));
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	read_trace(path, buf, sizeof(buf));
	CHECK_EQ(count(buf, "\"ph\":\"X\""), 0);
	/* a trace that cannot be written whole (here the file size limit, as a full disk)
	 * leaves the file that was there, and no temporary file: it was cut short in
	 * place, the old trace lost */
	{
		static const char old[] = "{\"traceEvents\":[]} the trace before";
		struct rlimit keep, small;
		char dir[] = "/tmp/rf-trace-dir-XXXXXX", p2[64];
		CHECK(mkdtemp(dir));
		snprintf(p2, sizeof(p2), "%s/t.json", dir);
		fd = open(p2, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		CHECK(fd >= 0 && write(fd, old, sizeof(old) - 1) == (ssize_t)sizeof(old) - 1);
		close(fd);
		signal(SIGXFSZ, SIG_IGN);   /* a write past the limit: EFBIG, not a signal */
		CHECK_OK(getrlimit(RLIMIT_FSIZE, &keep));
		CHECK_OK(rf_ring_create(&ring, NULL));
		CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = 0 }));
		CHECK_OK(rf_engine_trace_start(e, p2));
		rf_var_create(e, "a", &a);
		for (int i = 0; i < 100; i++)
			CHECK_OK(rf_engine_push_simple(e, nop, NULL, NULL, 0, &a, 1, NULL, "op"));
		CHECK_EQ(rf_engine_wait_all(e), 0);
		small = keep;
		small.rlim_cur = 512;
		CHECK_OK(setrlimit(RLIMIT_FSIZE, &small));
		int ret = rf_engine_trace_stop(e);
		CHECK_OK(setrlimit(RLIMIT_FSIZE, &keep));
		CHECK(ret < 0 && strstr(rf_last_error(), "left as it was"));
		rf_var_destroy(e, a, NULL, NULL, NULL);
		rf_engine_destroy(e);
		rf_ring_destroy(ring);
		fd = open(p2, O_RDONLY);
		CHECK(fd >= 0);
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		CHECK(n == (ssize_t)sizeof(old) - 1 && !memcmp(buf, old, sizeof(old) - 1));
		unlink(p2);
		CHECK_OK(rmdir(dir));       /* fails if a temporary file was left */
	}
	unlink(path);
	return 0;
}
