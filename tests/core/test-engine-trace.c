/* test-engine-trace: a Chrome-trace JSON file is written with one track per stream
 * (thread_name metadata), one complete ("X") event per op with its name, and one flow
 * pair ("s"/"f") per dependency edge. The test pushes a small diamond (A -> B, A -> C,
 * B+C -> D) over two worker streams, then checks the file: the counts of events and
 * edges, and the JSON is validated by python3's json module when python3 exists
 * (the meson test runs it). A stream closed before the file is written keeps its
 * track name. */
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <unistd.h>

#include "engine.h"
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
	unlink(path);
	return 0;
}
