/* ring-fault: RF_FAULT_INJECT, read at rf_ring_create. With "short=0.5" reads of a
 * regular file come back short half the time and the ring resubmits the remainder:
 * all 64 reads of 64 KiB complete in full with the right bytes, and
 * stats.faults_injected and short_resubmits are > 0 (also with O_DIRECT, where the
 * truncation keeps 4 KiB alignment). With "eio=1" every file read completes with -EIO.
 * With "eio=0.3,seed=S" the set of failing reads is the same on two runs with the
 * same seed, and the same for seed=099 and seed=0x63 (decimal, or hex after 0x; not
 * octal). A malformed spec makes rf_ring_create fail with -EBADMSG (the messages
 * are checked by ring-fault-spec). */
#include "ring-test.h"

#define NR 64
#define BS (64 * 1024)

static int64_t res[NR];

static void cb(void *data, int64_t r)
{
	res[(uintptr_t)data] = r;
}

static void read_all(int fd, uint8_t *buf, const char *spec, struct rf_ring_stats *st)
{
	setenv("RF_FAULT_INJECT", spec, 1);
	struct rf_ring *r;
	T_OK(rf_ring_create(&r, NULL));
	unsetenv("RF_FAULT_INJECT");
	memset(buf, 0, (size_t)NR * BS);
	for (uintptr_t i = 0; i < NR; i++) {
		res[i] = 1234567;
		T_OK(rf_ring_read(r, fd, buf + i * BS, BS, i * BS, 0, cb, (void *)i, NULL));
	}
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	rf_ring_get_stats(r, st);
	rf_ring_destroy(r);
}

int main(void)
{
	char path[256];
	int fd = t_tmpfile(path, sizeof(path), 0);
	size_t sz = (size_t)NR * BS;
	uint8_t *buf = aligned_alloc(4096, sz);
	T_CHECK(buf);
	t_fill(buf, sz, 11, 0);
	T_EQ(pwrite(fd, buf, sz, 0), (ssize_t)sz);
	T_CHECK(fsync(fd) == 0);
	int dfd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	unlink(path);

	struct rf_ring_stats st;
	read_all(fd, buf, "short=0.5,seed=3", &st);
	for (int i = 0; i < NR; i++)
		T_EQ(res[i], BS);
	T_EQ(t_verify(buf, sz, 11, 0), -1);
	printf("short=0.5: faults %llu, short resubmits %llu\n",
	       (unsigned long long)st.faults_injected, (unsigned long long)st.short_resubmits);
	T_CHECK(st.faults_injected > 0 && st.short_resubmits >= st.faults_injected);
	T_EQ(st.bytes_read, sz);

	if (dfd >= 0) {
		read_all(dfd, buf, "short=0.7,seed=4", &st);
		for (int i = 0; i < NR; i++)
			T_EQ(res[i], BS);
		T_EQ(t_verify(buf, sz, 11, 0), -1);
		T_CHECK(st.faults_injected > 0);
	}

	read_all(fd, buf, "eio=1", &st);
	for (int i = 0; i < NR; i++)
		T_EQ(res[i], -EIO);
	T_EQ(st.faults_injected, NR);

	int64_t first[NR];
	read_all(fd, buf, "eio=0.3,seed=99", &st);
	memcpy(first, res, sizeof(first));
	int nfail = 0;
	for (int i = 0; i < NR; i++) {
		T_CHECK(res[i] == -EIO || res[i] == BS);
		nfail += res[i] == -EIO;
	}
	T_CHECK(nfail > 0 && nfail < NR);
	T_EQ(st.faults_injected, nfail);
	read_all(fd, buf, "eio=0.3,seed=99", &st);
	T_CHECK(memcmp(first, res, sizeof(first)) == 0);
	/* a seed is decimal, or hex after 0x: 099 is 99 (base 0 read a leading 0 as octal:
	 * 010 was 8, and 099 refused), 0x63 is 99 too */
	read_all(fd, buf, "eio=0.3,seed=099", &st);
	T_CHECK(memcmp(first, res, sizeof(first)) == 0);
	read_all(fd, buf, "eio=0.3,seed=0x63", &st);
	T_CHECK(memcmp(first, res, sizeof(first)) == 0);

	struct rf_ring *r;
	setenv("RF_FAULT_INJECT", "eio=2", 1);
	T_EQ(rf_ring_create(&r, NULL), -EBADMSG);
	setenv("RF_FAULT_INJECT", "bogus=1", 1);
	T_EQ(rf_ring_create(&r, NULL), -EBADMSG);
	unsetenv("RF_FAULT_INJECT");
	if (dfd >= 0)
		close(dfd);
	close(fd);
	free(buf);
	return 0;
}
