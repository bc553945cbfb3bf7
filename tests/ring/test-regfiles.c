/* ring-regfiles: replacing the registered file table. A table of one file serves a
 * fixed-file read; then calls the kernel would refuse -- a closed fd in the new table,
 * an io_uring fd (the ring's own, white-box), n = 0, a sparse table of 0 slots -- fail
 * with a message naming the call, and leave that table registered: slot 0 still reads
 * the same file (before, the old table was unregistered first and slot 0 gave -EBADF).
 * A table with an empty slot (-1) then replaces it: slot 1 reads the file, slot 0 is
 * empty. */
#include "ring-test.h"

#include "log.h"
#include "ring-impl.h"
#include "ring-ops.h"

static int64_t fixed_read(struct rf_ring *r, unsigned slot, char *buf)
{
	struct t_res t = { 0 };
	memset(buf, 0, 5);
	T_OK(rf_ring_read(r, (int)slot, buf, 4, 0, RF_IO_FIXED_FILE, t_store, &t, NULL));
	return t_wait1(r, &t);
}

int main(void)
{
	char path[256], buf[5];
	int fd = t_tmpfile(path, sizeof(path), 0);
	unlink(path);
	T_EQ(pwrite(fd, "0123", 4, 0), 4);
	struct rf_ring *r;
	T_OK(rf_ring_create(&r, NULL));
	int closed = dup(fd);
	close(closed);

	T_OK(rf_ring_register_files(r, &fd, 1));
	T_EQ(fixed_read(r, 0, buf), 4);
	T_CHECK(!memcmp(buf, "0123", 4));

	int bad[2] = { fd, closed };
	T_EQ(rf_ring_register_files(r, bad, 2), -EBADF);
	char msg[512];
	snprintf(msg, sizeof(msg), "%s", rf_last_error());
	T_EQ(fixed_read(r, 0, buf), 4);
	T_CHECK(!memcmp(buf, "0123", 4));
	T_CHECK(strstr(msg, "rf_ring_register_files") && strstr(msg, "fds[1]"));

	int uring[2] = { fd, r->ring.ring_fd };
	T_EQ(rf_ring_register_files(r, uring, 2), -EBADF);
	T_CHECK(strstr(rf_last_error(), "rf_ring_register_files") != NULL);
	T_EQ(fixed_read(r, 0, buf), 4);
	T_CHECK(!memcmp(buf, "0123", 4));

	T_EQ(rf_ring_register_files(r, &fd, 0), -EINVAL);
	T_CHECK(strstr(rf_last_error(), "rf_ring_register_files") != NULL);
	T_EQ(rf_ring_register_files_sparse(r, 0), -EINVAL);
	T_CHECK(strstr(rf_last_error(), "rf_ring_register_files_sparse") != NULL);
	T_EQ(fixed_read(r, 0, buf), 4);
	T_CHECK(!memcmp(buf, "0123", 4));

	int holes[2] = { -1, fd };
	T_OK(rf_ring_register_files(r, holes, 2));
	T_EQ(fixed_read(r, 1, buf), 4);
	T_CHECK(!memcmp(buf, "0123", 4));
	int64_t res = fixed_read(r, 0, buf);
	T_CHECK(res == -EBADF || res == -ENXIO);

	T_EQ(rf_ring_pending(r), 0);
	rf_ring_destroy(r);
	close(fd);
	printf("ring-regfiles: refused tables leave the registered one working: ok\n");
	return 0;
}
