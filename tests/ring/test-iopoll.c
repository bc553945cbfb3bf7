/* ring-iopoll: a polled ring (RF_RING_IOPOLL, IORING_SETUP_IOPOLL) writes and reads an
 * O_DIRECT file, plain and fixed-file, in one batch of several requests, and the bytes
 * come back; the setup flags say IOPOLL. A request the kernel does not poll (fsync)
 * completes with -EINVAL through its callback, and a buffered (not O_DIRECT) read with
 * -EOPNOTSUPP: errors, not hangs. Notifiers on a polled ring: through MSG_RING (where
 * the kernel has it) a signal is delivered; where they would need the eventfd fallback
 * (RF_RING_NO_MSG_RING) rf_notifier_create refuses with -EOPNOTSUPP and a message
 * (before, it succeeded and a wait for its signals spun for ever). Skips (77), after
 * those checks, where the device
 * refuses polled O_DIRECT I/O (a virtio disk without poll queues refuses reads with
 * -EOPNOTSUPP; fio --hipri fails the same way). */
#include "ring-test.h"

#include <liburing.h>

#include "log.h"

#define N 8
#define BS 4096

static struct rf_ring *r;
static uint8_t *buf[N];

static void on_notify(void *data, uint32_t count)
{
	*(uint32_t *)data += count;
}

/* Notifiers on polled rings: delivered through MSG_RING, refused without it. */
static void check_notifiers(void)
{
	struct rf_ring_info info;
	struct rf_notifier *n;
	uint32_t got = 0;

	rf_ring_get_info(r, &info);
	if (info.msg_ring) {
		T_OK(rf_notifier_create(r, on_notify, &got, &n));
		rf_notifier_expect(n, 1);
		T_OK(rf_notifier_signal(n));
		T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
		T_EQ(got, 1);
		rf_notifier_destroy(n);
	}
	struct rf_ring *fb;
	struct rf_ring_opts o = { .entries = 16, .flags = RF_RING_IOPOLL | RF_RING_NO_MSG_RING };
	T_OK(rf_ring_create(&fb, &o));
	n = (struct rf_notifier *)&got;
	T_EQ(rf_notifier_create(fb, on_notify, &got, &n), -EOPNOTSUPP);
	T_CHECK(n == NULL);
	T_CHECK(strstr(rf_last_error(), "rf_notifier_create") != NULL);
	T_CHECK(strstr(rf_last_error(), "RF_RING_IOPOLL") != NULL);
	T_EQ(rf_ring_pending(fb), 0);
	rf_ring_destroy(fb);
}

static int finish(int code)
{
	rf_ring_destroy(r);
	for (int i = 0; i < N; i++)
		free(buf[i]);
	return code;
}

int main(void)
{
	char path[4096];
	int fd = t_tmpfile(path, sizeof(path), O_DIRECT);
	unlink(path);
	T_OK(ftruncate(fd, N * BS));
	int bfd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC); /* buffered */
	T_CHECK(bfd >= 0);
	struct rf_ring_opts o = { .entries = 16, .flags = RF_RING_IOPOLL };
	int ret = rf_ring_create(&r, &o);
	if (ret < 0) {
		printf("skip: the kernel refuses an IOPOLL ring: %s\n", strerror(-ret));
		return 77;
	}
	struct rf_ring_info info;
	rf_ring_get_info(r, &info);
	T_CHECK(info.setup_flags & IORING_SETUP_IOPOLL);
	check_notifiers();
	struct t_res w[N] = { 0 }, rd[N] = { 0 };
	for (int i = 0; i < N; i++) {
		buf[i] = aligned_alloc(4096, BS);
		T_CHECK(buf[i]);
	}
	/* what a polled ring cannot do is an error through the callback */
	struct t_res fs = { 0 }, br = { 0 };
	T_OK(rf_ring_fsync(r, fd, 0, 0, t_store, &fs, NULL));
	T_EQ(t_wait1(r, &fs), -EINVAL);
	T_OK(rf_ring_read(r, bfd, buf[0], BS, 0, 0, t_store, &br, NULL));
	T_EQ(t_wait1(r, &br), -EOPNOTSUPP);
	for (int i = 0; i < N; i++) {
		t_fill(buf[i], BS, 7, (uint64_t)i * BS);
		T_OK(rf_ring_write(r, fd, buf[i], BS, (uint64_t)i * BS, 0, t_store, &w[i], NULL));
	}
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	if (w[0].res == -EOPNOTSUPP || w[0].res == -EINVAL) {
		printf("skip: polled O_DIRECT writes refused here: %s\n", strerror((int)-w[0].res));
		return finish(77);
	}
	for (int i = 0; i < N; i++) {
		T_EQ(w[i].calls, 1);
		T_EQ(w[i].res, BS);
		memset(buf[i], 0, BS);
	}
	/* read back through a registered (fixed) file */
	T_OK(rf_ring_register_files(r, &fd, 1));
	for (int i = 0; i < N; i++)
		T_OK(rf_ring_read(r, 0, buf[i], BS, (uint64_t)i * BS, RF_IO_FIXED_FILE, t_store, &rd[i],
				  NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	if (rd[0].res == -EOPNOTSUPP) { /* fio --hipri says the same on such a device */
		printf("skip: polled O_DIRECT reads refused here (no poll queues?): %s\n",
		       strerror(EOPNOTSUPP));
		return finish(77);
	}
	for (int i = 0; i < N; i++) {
		T_EQ(rd[i].calls, 1);
		T_EQ(rd[i].res, BS);
		T_EQ(t_verify(buf[i], BS, 7, (uint64_t)i * BS), -1);
	}
	finish(0);
	close(fd);
	close(bfd);
	printf("ring-iopoll: polled O_DIRECT writes and reads, errors for the rest: ok\n");
	return 0;
}
