/* ring-eof: a read that reaches end of file completes with the bytes read so far. A
 * read of 16 KiB from a 10,000-byte file returns 10,000 (after the short piece is
 * resubmitted and the next piece returns 0); a read starting past the end returns 0;
 * a read from a pipe whose writer wrote 100 bytes and closed returns 100, and the next
 * one returns 0. */
#include "ring-test.h"

int main(void)
{
	char path[256];
	int fd = t_tmpfile(path, sizeof(path), 0);
	unlink(path);
	uint8_t *data = malloc(16384);
	T_CHECK(data);
	t_fill(data, 10000, 5, 0);
	T_EQ(pwrite(fd, data, 10000, 0), 10000);

	struct rf_ring *r;
	T_OK(rf_ring_create(&r, NULL));
	struct t_res a = { 0 }, b = { 0 }, c = { 0 };
	memset(data, 0, 16384);
	T_OK(rf_ring_read(r, fd, data, 16384, 0, 0, t_store, &a, NULL));
	T_OK(rf_ring_read(r, fd, data, 4096, 20000, 0, t_store, &b, NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(a.calls, 1);
	T_EQ(a.res, 10000);
	T_EQ(t_verify(data, 10000, 5, 0), -1);
	T_EQ(b.calls, 1);
	T_EQ(b.res, 0);

	/* Starting in the middle: 10000 - 6000 = 4000 bytes. */
	T_OK(rf_ring_read(r, fd, data, 8192, 6000, 0, t_store, &c, NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(c.res, 4000);
	T_EQ(t_verify(data, 4000, 5, 6000), -1);

	int p[2];
	T_CHECK(pipe(p) == 0);
	t_fill(data, 100, 6, 0);
	T_EQ(write(p[1], data, 100), 100);
	close(p[1]);
	struct t_res d = { 0 }, e = { 0 };
	memset(data, 0, 4096);
	T_OK(rf_ring_read(r, p[0], data, 4096, UINT64_MAX, 0, t_store, &d, NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(d.res, 100);
	T_EQ(t_verify(data, 100, 6, 0), -1);
	T_OK(rf_ring_read(r, p[0], data, 4096, UINT64_MAX, 0, t_store, &e, NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(e.calls, 1);
	T_EQ(e.res, 0);

	rf_ring_destroy(r);
	close(p[0]);
	close(fd);
	free(data);
	return 0;
}
