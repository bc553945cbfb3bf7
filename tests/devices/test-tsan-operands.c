/* test-tsan-operands: ThreadSanitizer still sees a race on a tensor although the CPU
 * kernels are built without its instrumentation (devices/cpu/meson.build): the CPU
 * backend declares each op's operands to it, whole, before the kernel runs.
 *
 * Each case runs in a child process (this program, with the case's name) and must end
 * as said, its stderr read:
 *  - write-write: two tensors wrapped over the same memory are two variables, so the
 *    engine does not order ops on them; rf_scale of each on two worker streams races,
 *    and the report names the CPU backend's op on both sides;
 *  - read-write: a GEMM reading one alias on one stream, rf_scale writing the other on
 *    the second stream: a race;
 *  - host: rf_scale pushed on a tensor, then the caller stores into its memory
 *    without waiting: a race between the caller's store and the kernel;
 *  - convert: rf_scale pushed on a tensor, then rf_tensor_read_as of a bf16 tensor
 *    into the first one's memory, converted on the caller's thread by an element loop
 *    that is also built without instrumentation (devices/convert.c): a race;
 *  - ordered: the same ops on one tensor (the engine orders them), and the caller's
 *    store after rf_engine_wait_all: no report, exit 0.
 * Built only under ThreadSanitizer (tests/devices/meson.build). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "device.h"
#include "engine.h"
#include "ops.h"
#include "ring.h"
#include "tensor.h"
#include "test-util.h"

#define N 64

extern char **environ;

static void run_case(const char *name)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *d;
	struct rf_tensor *a, *b, *x, *c, *h;
	float *m = aligned_alloc(64, N * N * sizeof(float));
	float ones[N * N];

	CHECK(m);
	for (int i = 0; i < N * N; i++)
		m[i] = ones[i] = 1.0f;
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	CHECK_OK(rf_cpu_open(e, &(struct rf_cpu_opts){ .streams = 2 }, &d));
	CHECK_EQ(rf_device_nstreams(d), 2);
	struct rf_stream *s0 = rf_device_stream(d, 0), *s1 = rf_device_stream(d, 1);
	CHECK_OK(rf_tensor_wrap(d, m, RF_F32, "a", 2, (int64_t[]){ N, N }, &a));
	CHECK_OK(rf_tensor_wrap(d, m, RF_F32, "b (a's memory)", 2, (int64_t[]){ N, N }, &b));
	CHECK_OK(rf_tensor_create(d, RF_F32, "x", 2, (int64_t[]){ N, N }, &x));
	CHECK_OK(rf_tensor_create(d, RF_F32, "c", 2, (int64_t[]){ N, N }, &c));
	CHECK_OK(rf_tensor_create(d, RF_BF16, "h", 2, (int64_t[]){ N, N }, &h));
	CHECK_OK(rf_tensor_write(x, ones));
	CHECK_OK(rf_tensor_write_as(h, RF_F32, ones));
	CHECK_OK(rf_engine_wait_all(e));

	if (!strcmp(name, "write-write")) {
		CHECK_OK(rf_scale(s0, a, 2.0f));
		CHECK_OK(rf_scale(s1, b, 3.0f));
	} else if (!strcmp(name, "read-write")) {
		CHECK_OK(rf_gemm(s0, 0, 0, 1.0f, a, x, 0.0f, c));
		CHECK_OK(rf_scale(s1, b, 3.0f));
	} else if (!strcmp(name, "host")) {
		CHECK_OK(rf_scale(s0, a, 2.0f));
		m[N + 1] = 5.0f;
	} else if (!strcmp(name, "convert")) {
		CHECK_OK(rf_scale(s0, a, 2.0f));
		CHECK_OK(rf_tensor_read_as(h, RF_F32, m));
	} else if (!strcmp(name, "ordered")) {
		CHECK_OK(rf_scale(s0, a, 2.0f));
		CHECK_OK(rf_scale(s1, a, 3.0f));
		CHECK_OK(rf_gemm(s0, 0, 0, 1.0f, a, x, 0.0f, c));
		CHECK_OK(rf_scale(s1, a, 0.5f));
		CHECK_OK(rf_engine_wait_all(e));
		CHECK(m[0] == 3.0f);
		m[N + 1] = 5.0f;
		CHECK_OK(rf_tensor_read_as(h, RF_F32, m));
		CHECK(m[N + 1] == 1.0f);
	} else {
		fprintf(stderr, "unknown case %s\n", name);
		exit(2);
	}
	CHECK_OK(rf_engine_wait_all(e));
	rf_tensor_destroy(a);
	rf_tensor_destroy(b);
	rf_tensor_destroy(x);
	rf_tensor_destroy(c);
	rf_tensor_destroy(h);
	rf_device_close(d);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	free(m);
}

/* Run case `name` in a child with its stderr in a file; returns its wait status and
 * the text (malloc'd, NUL-terminated) in *err. */
static int child(const char *self, const char *name, char **err)
{
	char path[] = "/tmp/rf-tsan-operands.XXXXXX";
	int fd = mkstemp(path), st;
	posix_spawn_file_actions_t fa;
	pid_t pid;
	char *argv[] = { (char *)self, (char *)name, NULL };

	CHECK(fd >= 0);
	unlink(path);
	CHECK_EQ(posix_spawn_file_actions_init(&fa), 0);
	CHECK_EQ(posix_spawn_file_actions_adddup2(&fa, fd, 2), 0);
	CHECK_EQ(posix_spawn(&pid, self, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	CHECK(waitpid(pid, &st, 0) == pid);
	off_t n = lseek(fd, 0, SEEK_END);
	CHECK(n >= 0);
	*err = malloc((size_t)n + 1);
	CHECK(*err);
	CHECK(pread(fd, *err, (size_t)n, 0) == n);
	(*err)[n] = 0;
	close(fd);
	return st;
}

/* both_ops: the report names the CPU backend's op on both sides; else on one, and
 * `other` (a function) on the other side, when not NULL */
static void expect_race(const char *self, const char *name, int both_ops, const char *other)
{
	char *err;
	int st = child(self, name, &err);
	const char *r = strstr(err, "ThreadSanitizer: data race");

	if (!(WIFEXITED(st) && WEXITSTATUS(st) != 0) || !r) {
		fprintf(stderr, "%s: want a data race reported and a failed exit, got status "
			"%#x and:\n%s\n", name, st, err);
		exit(1);
	}
	/* the kernel's side of the race is the backend's declaration of its operands
	 * (both sides when two ops race) */
	const char *k = strstr(r, "rf__cpu_compute");
	if (!k || (both_ops && !strstr(k + 1, "rf__cpu_compute"))) {
		fprintf(stderr, "%s: the report does not name the CPU op (rf__cpu_compute)%s:\n%s\n",
			name, both_ops ? " on both sides" : "", err);
		exit(1);
	}
	if (other && !strstr(r, other)) {
		fprintf(stderr, "%s: the report does not name %s:\n%s\n", name, other, err);
		exit(1);
	}
	fprintf(stderr, "ok: %s: the race is reported\n", name);
	free(err);
}

int main(int argc, char **argv)
{
#ifndef __SANITIZE_THREAD__
	(void)argc;
	(void)argv;
	puts("SKIP: only meaningful under ThreadSanitizer");
	return T_SKIP;
#else
	if (argc > 1) {
		run_case(argv[1]);
		return 0;
	}
	expect_race("/proc/self/exe", "write-write", 1, NULL);
	expect_race("/proc/self/exe", "read-write", 1, NULL);
	expect_race("/proc/self/exe", "host", 0, "run_case");
	expect_race("/proc/self/exe", "convert", 0, "rf__convert_host");
	char *err;
	int st = child("/proc/self/exe", "ordered", &err);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || strstr(err, "ThreadSanitizer")) {
		fprintf(stderr, "ordered: want a clean exit, got status %#x and:\n%s\n", st, err);
		return 1;
	}
	free(err);
	fprintf(stderr, "ok: ordered: no report\n");
	return 0;
#endif
}
