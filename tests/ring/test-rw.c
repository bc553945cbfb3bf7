/* ring-rw: write, fsync and read back a file through the ring in every flavour the
 * reactor offers -- plain buffers and fds, registered (fixed) buffers, registered
 * (fixed) files, both together, O_DIRECT with the alignment rf_dio_align reports, and
 * (if the kernel allows it) an SQPOLL ring -- and check the bytes, the callbacks'
 * results (bytes transferred, 0 for fsync) and the byte counters. Also checks that a
 * fixed-buffer request outside the registered arena (or spanning two of its buffers)
 * is refused with -EINVAL. rf_blk_queue_attr: the file's disk's nr_requests as this
 * test reads sysfs itself (-ENOENT where the file is on no block device), -ENOENT for
 * a pipe and an unknown attribute, -EBADF for a closed fd (its message naming it). */
#include "ring-test.h"
#include "log.h"

#include <sys/stat.h>

#define N 8
#define BS (64 * 1024)

static void queue_attr(int fd)
{
	char got[64], where[160];
	unsigned want = t_disk_depth(fd);   /* the test's own read of sysfs */
	int pfd[2];

	int ret = rf_blk_queue_attr(fd, "nr_requests", got, sizeof(got), where, sizeof(where));
	if (want) {
		T_EQ(ret, 0);
		T_EQ(strtoul(got, NULL, 10), want);
		T_CHECK(strstr(where, "/queue/nr_requests") != NULL);
		T_EQ(rf_blk_queue_attr(fd, "no_such_attribute", got, sizeof(got), NULL, 0), -ENOENT);
	} else {
		T_EQ(ret, -ENOENT);
	}
	T_OK(pipe(pfd));
	T_EQ(rf_blk_queue_attr(pfd[0], "nr_requests", got, sizeof(got), NULL, 0), -ENOENT);
	close(pfd[0]);
	close(pfd[1]);
	T_EQ(rf_blk_queue_attr(pfd[0], "nr_requests", got, sizeof(got), NULL, 0), -EBADF);
	T_CHECK(strstr(rf_last_error(), "rf_blk_queue_attr: fd ") != NULL);
	printf("disk queue depth: %u (0: no block device)\n", want);
}

static void round_trip(struct rf_ring *r, int fd, int fdarg, unsigned flags,
		       uint8_t *const *bufs, uint64_t seed)
{
	struct t_res w[N] = { 0 }, rd[N] = { 0 }, fs = { 0 };
	for (int i = 0; i < N; i++) {
		t_fill(bufs[i], BS, seed, (uint64_t)i * BS);
		T_OK(rf_ring_write(r, fdarg, bufs[i], BS, (uint64_t)i * BS, flags, t_store, &w[i], NULL));
	}
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	for (int i = 0; i < N; i++) {
		T_EQ(w[i].calls, 1);
		T_EQ(w[i].res, BS);
	}
	T_OK(rf_ring_fsync(r, fdarg, flags & RF_IO_FIXED_FILE, 1, t_store, &fs, NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(fs.calls, 1);
	T_EQ(fs.res, 0);
	for (int i = 0; i < N; i++) {
		memset(bufs[i], 0, BS);
		T_OK(rf_ring_read(r, fdarg, bufs[i], BS, (uint64_t)i * BS, flags, t_store, &rd[i], NULL));
	}
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	for (int i = 0; i < N; i++) {
		T_EQ(rd[i].calls, 1);
		T_EQ(rd[i].res, BS);
		T_EQ(t_verify(bufs[i], BS, seed, (uint64_t)i * BS), -1);
	}
	(void)fd;
}

static void run_all(struct rf_ring *r, int fd, int dfd, uint32_t mem_align)
{
	uint8_t *plain[N];
	for (int i = 0; i < N; i++) {
		plain[i] = aligned_alloc(mem_align < 4096 ? 4096 : mem_align, BS);
		T_CHECK(plain[i]);
	}
	int fds[2] = { fd, dfd };
	T_OK(rf_ring_register_files(r, fds, 2));
	T_OK(rf_ring_register_buffers(r, N, BS, 4096));
	T_EQ(rf_ring_buffer_count(r), N);
	T_EQ(rf_ring_buffer_size(r), BS);
	uint8_t *fixed[N];
	for (int i = 0; i < N; i++) {
		fixed[i] = rf_ring_buffer(r, i);
		T_CHECK(fixed[i] && ((uintptr_t)fixed[i] & 4095) == 0);
	}
	T_CHECK(rf_ring_buffer(r, N) == NULL);

	struct rf_ring_stats st0, st1;
	rf_ring_get_stats(r, &st0);
	round_trip(r, fd, fd, 0, plain, 1);
	round_trip(r, fd, fd, RF_IO_FIXED_BUF, fixed, 2);
	round_trip(r, fd, 0, RF_IO_FIXED_FILE, plain, 3);
	round_trip(r, fd, 0, RF_IO_FIXED_FILE | RF_IO_FIXED_BUF, fixed, 4);
	if (dfd >= 0) {
		round_trip(r, dfd, dfd, 0, plain, 5);
		round_trip(r, dfd, 1, RF_IO_FIXED_FILE | RF_IO_FIXED_BUF, fixed, 6);
	}
	rf_ring_get_stats(r, &st1);
	uint64_t rounds = dfd >= 0 ? 6 : 4;
	T_EQ(st1.bytes_written - st0.bytes_written, rounds * N * BS);
	T_EQ(st1.bytes_read - st0.bytes_read, rounds * N * BS);
	if (!(st1.enters > st0.enters && st1.submissions >= st0.submissions + rounds * (2 * N + 1)))
		fprintf(stderr, "enters %llu -> %llu, submissions %llu -> %llu (want >= +%llu)\n",
			(unsigned long long)st0.enters, (unsigned long long)st1.enters,
			(unsigned long long)st0.submissions, (unsigned long long)st1.submissions,
			(unsigned long long)(rounds * (2 * N + 1)));
	T_CHECK(st1.enters > st0.enters && st1.submissions >= st0.submissions + rounds * (2 * N + 1));

	/* A fixed-buffer request outside the arena, or spanning two buffers. */
	struct t_res t = { 0 };
	T_EQ(rf_ring_read(r, fd, plain[0], 512, 0, RF_IO_FIXED_BUF, t_store, &t, NULL), -EINVAL);
	T_EQ(rf_ring_read(r, fd, fixed[0] + 4096, BS, 0, RF_IO_FIXED_BUF, t_store, &t, NULL), -EINVAL);
	T_EQ(rf_ring_register_buffers(r, 1, 4096, 4096), -EEXIST);
	T_EQ(rf_ring_pending(r), 0);
	for (int i = 0; i < N; i++)
		free(plain[i]);
}

int main(void)
{
	char path[256];
	int fd = t_tmpfile(path, sizeof(path), 0);
	uint32_t ma = 0, oa = 0;
	T_OK(rf_dio_align(fd, NULL, &ma, &oa));
	uint32_t ma2 = 0, oa2 = 0;
	T_OK(rf_dio_align(-1, path, &ma2, &oa2));
	T_EQ(ma, ma2);
	T_EQ(oa, oa2);
	T_CHECK(ma >= 1 && oa >= 1 && (ma & (ma - 1)) == 0 && (oa & (oa - 1)) == 0);
	T_CHECK(BS % oa == 0 && 4096 % ma == 0);
	T_EQ(rf_dio_align(-1, "/nonexistent/rf-ring", &ma2, &oa2), -ENOENT);
	queue_attr(fd);
	int dfd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (dfd < 0)
		fprintf(stderr, "O_DIRECT not available on %s (%s): those rounds skipped\n", path,
			strerror(errno));
	unlink(path);
	printf("dio alignment: mem %u, offset %u\n", ma, oa);

	struct rf_ring *r;
	T_OK(rf_ring_create(&r, NULL));
	struct rf_ring_info info;
	rf_ring_get_info(r, &info);
	printf("setup flags 0x%x, sq %u, cq %u, msg_ring %d\n", info.setup_flags, info.sq_entries,
	       info.cq_entries, info.msg_ring);
	T_EQ(info.sq_entries, 256);
	T_EQ(info.cq_entries, 1024);
	run_all(r, fd, dfd, ma);
	rf_ring_destroy(r);

	/* Same again on an SQPOLL ring where the kernel lets us have one. */
	struct rf_ring_opts o = { .entries = 32, .flags = RF_RING_SQPOLL, .sqpoll_idle_ms = 50 };
	if (rf_ring_create(&r, &o) == 0) {
		rf_ring_get_info(r, &info);
		printf("sqpoll ring: setup flags 0x%x\n", info.setup_flags);
		T_EQ(info.cq_entries, 128);
		run_all(r, fd, dfd, ma);
		rf_ring_destroy(r);
	} else {
		printf("SQPOLL ring refused: that round skipped\n");
	}
	close(fd);
	if (dfd >= 0)
		close(dfd);
	return 0;
}
