/* ring-fileops: the metadata operations through the ring, each checked against what
 * the kernel says through plain syscalls: openat (an fd, and a fixed-file slot from a
 * sparse table), statx (size and type, and -ENOENT naming nothing), writev/readv with
 * iovecs of odd sizes (the array is copied at submission: the test scribbles over its
 * own copy right after), splice (file -> pipe -> file), fallocate, renameat, unlinkat, close (fd and slot), a NOP,
 * openat with RF_IO_BENEATH (links inside the directory followed, ones leading out -EXDEV),
 * and malformed descriptors refused with -EINVAL before anything is queued. */
#include "ring-test.h"

#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "ring-ops.h"

static struct rf_ring *r;

int main(void)
{
	char dir[256];
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/rf-fileops-XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
	T_CHECK(mkdtemp(dir));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	T_CHECK(dfd >= 0);
	T_OK(rf_ring_create(&r, NULL));
	T_CHECK(rf_ring_op_supported(r, RF_IOP_OPENAT));
	T_CHECK(!rf_ring_op_supported(r, (enum rf_iop)999));

	/* openat relative to a directory fd, O_CREAT */
	struct t_res t = { 0 };
	T_OK(rf_ring_openat(r, dfd, "a.bin", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640, 0, t_store, &t, NULL));
	int fd = (int)t_wait1(r, &t);
	T_CHECK(fd >= 0);
	struct stat sb;
	T_CHECK(fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 0777) == 0640);

	/* writev: three pieces, the caller's array overwritten once submitted */
	uint8_t data[10000];
	t_fill(data, sizeof(data), 5, 0);
	struct iovec iov[3] = { { data, 1 }, { data + 1, 4095 }, { data + 4096, sizeof(data) - 4096 } };
	t = (struct t_res){ 0 };
	T_OK(rf_ring_writev(r, fd, iov, 3, 100, 0, t_store, &t, NULL));
	memset(iov, 0, sizeof(iov));
	T_EQ(t_wait1(r, &t), sizeof(data));
	uint8_t back[10000];
	T_EQ(pread(fd, back, sizeof(back), 100), (ssize_t)sizeof(back));
	T_EQ(memcmp(back, data, sizeof(data)), 0);

	/* readv across the end of the file: the count stops at EOF */
	memset(back, 0, sizeof(back));
	uint8_t tail[64];
	struct iovec riov[2] = { { back, sizeof(back) }, { tail, sizeof(tail) } };
	t = (struct t_res){ 0 };
	T_OK(rf_ring_readv(r, fd, riov, 2, 100, 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), sizeof(back));
	T_EQ(memcmp(back, data, sizeof(data)), 0);

	/* fallocate grows the file */
	t = (struct t_res){ 0 };
	T_OK(rf_ring_fallocate(r, fd, 0, 0, 1 << 20, 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);
	T_CHECK(fstat(fd, &sb) == 0 && sb.st_size == 1 << 20);

	/* statx by path and by fd (AT_EMPTY_PATH) */
	struct statx stx;
	memset(&stx, 0, sizeof(stx));
	t = (struct t_res){ 0 };
	T_OK(rf_ring_statx(r, dfd, "a.bin", 0, STATX_SIZE | STATX_TYPE, &stx, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);
	T_EQ(stx.stx_size, 1 << 20);
	T_CHECK(S_ISREG(stx.stx_mode));
	t = (struct t_res){ 0 };
	T_OK(rf_ring_statx(r, fd, "", AT_EMPTY_PATH, STATX_SIZE, &stx, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);
	T_EQ(stx.stx_size, 1 << 20);
	t = (struct t_res){ 0 };
	T_OK(rf_ring_statx(r, dfd, "missing", 0, STATX_SIZE, &stx, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), -ENOENT);

	/* renameat, then the old name is gone and the new one opens */
	t = (struct t_res){ 0 };
	T_OK(rf_ring_renameat(r, dfd, "a.bin", dfd, "b.bin", 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);
	T_CHECK(faccessat(dfd, "a.bin", F_OK, 0) < 0 && errno == ENOENT);
	T_CHECK(faccessat(dfd, "b.bin", F_OK, 0) == 0);

	/* splice: file -> pipe (a short move: the pipe fills), pipe -> file at an offset */
	int pp[2];
	T_CHECK(pipe2(pp, O_CLOEXEC) == 0);
	struct rf_io sp_in = { .op = RF_IOP_SPLICE, .fd = fd, .off = 100, .fd2 = pp[1],
			       .off2 = UINT64_MAX, .len = sizeof(data), .flags = RF_IO_NO_RETRY_SHORT };
	t = (struct t_res){ 0 };
	T_OK(rf_ring_submit(r, &sp_in, t_store, &t, NULL));
	int64_t moved = t_wait1(r, &t);
	T_CHECK(moved > 0 && moved <= (int64_t)sizeof(data));
	struct rf_io sp_out = { .op = RF_IOP_SPLICE, .fd = pp[0], .off = UINT64_MAX, .fd2 = fd,
				.off2 = 200000, .len = (size_t)moved };
	t = (struct t_res){ 0 };
	T_OK(rf_ring_submit(r, &sp_out, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), moved);
	memset(back, 0, sizeof(back));
	T_EQ(pread(fd, back, (size_t)moved, 200000), moved);
	T_EQ(memcmp(back, data, (size_t)moved), 0);
	close(pp[0]);
	close(pp[1]);

	/* close through the ring: the fd is gone */
	t = (struct t_res){ 0 };
	T_OK(rf_ring_close(r, fd, 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);
	T_CHECK(fcntl(fd, F_GETFD) < 0 && errno == EBADF);

	/* a fixed-file slot: open into a sparse table, read through it, close the slot */
	T_OK(rf_ring_register_files_sparse(r, 8));
	t = (struct t_res){ 0 };
	T_OK(rf_ring_openat(r, dfd, "b.bin", O_RDONLY, 0, RF_IO_ALLOC_SLOT, t_store, &t, NULL));
	int slot = (int)t_wait1(r, &t);
	T_CHECK(slot >= 0 && slot < 8);
	memset(back, 0, sizeof(back));
	t = (struct t_res){ 0 };
	T_OK(rf_ring_read(r, slot, back, sizeof(back), 100, RF_IO_FIXED_FILE, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), sizeof(back));
	T_EQ(memcmp(back, data, sizeof(data)), 0);
	t = (struct t_res){ 0 };
	T_OK(rf_ring_close(r, slot, RF_IO_FIXED_FILE, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);
	t = (struct t_res){ 0 };
	T_OK(rf_ring_read(r, slot, back, 16, 0, RF_IO_FIXED_FILE, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), -EBADF);

	/* unlinkat, then a NOP and an open of what is gone */
	t = (struct t_res){ 0 };
	T_OK(rf_ring_unlinkat(r, dfd, "b.bin", 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);
	struct rf_io nop = { .op = RF_IOP_NOP };
	t = (struct t_res){ 0 };
	T_OK(rf_ring_submit(r, &nop, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);
	t = (struct t_res){ 0 };
	T_OK(rf_ring_openat(r, dfd, "b.bin", O_RDONLY, 0, 0, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), -ENOENT);

	/* RF_IO_BENEATH (openat2's RESOLVE_BENEATH): a file and a link inside dirfd open;
	 * "..", an absolute path, and links that lead out (relative, absolute, through a
	 * directory) fail with -EXDEV; created with O_CREAT, the mode is kept */
	{
		char p[400];
		snprintf(p, sizeof(p), "%s/in.bin", dir);
		int w = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		T_CHECK(w >= 0 && close(w) == 0);
		T_CHECK(symlinkat("in.bin", dfd, "alias") == 0);
		T_CHECK(symlinkat("../", dfd, "up") == 0);
		T_CHECK(symlinkat("/etc/hostname", dfd, "abs") == 0);
		T_CHECK(symlinkat("../etc", dfd, "rel") == 0);
		const char *ok[] = { "in.bin", "alias", "./in.bin" };
		for (unsigned i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
			t = (struct t_res){ 0 };
			T_OK(rf_ring_openat(r, dfd, ok[i], O_RDONLY | O_CLOEXEC, 0, RF_IO_BENEATH,
					    t_store, &t, NULL));
			int64_t got = t_wait1(r, &t);
			T_CHECK(got >= 0);
			close((int)got);
		}
		const char *out[] = { "../", "/etc/hostname", "abs", "up/x", "rel/hostname" };
		for (unsigned i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
			t = (struct t_res){ 0 };
			T_OK(rf_ring_openat(r, dfd, out[i], O_RDONLY | O_CLOEXEC, 0, RF_IO_BENEATH,
					    t_store, &t, NULL));
			T_EQ(t_wait1(r, &t), -EXDEV);
		}
		t = (struct t_res){ 0 };
		T_OK(rf_ring_openat(r, dfd, "made.bin", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600,
				    RF_IO_BENEATH, t_store, &t, NULL));
		int64_t mfd = t_wait1(r, &t);
		T_CHECK(mfd >= 0 && fstat((int)mfd, &sb) == 0 && (sb.st_mode & 0777) == 0600);
		close((int)mfd);
		const char *gone[] = { "in.bin", "alias", "up", "abs", "rel", "made.bin" };
		for (unsigned i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
			T_CHECK(unlinkat(dfd, gone[i], 0) == 0);
		/* a directory, with a mode given: openat2 takes a mode only with O_CREAT or
		 * O_TMPFILE (whose bits include O_DIRECTORY's) */
		t = (struct t_res){ 0 };
		T_OK(rf_ring_openat(r, dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0644,
				    RF_IO_BENEATH, t_store, &t, NULL));
		mfd = t_wait1(r, &t);
		T_CHECK(mfd >= 0);
		close((int)mfd);
		/* the flag is openat's alone */
		struct rf_io st = { .op = RF_IOP_STATX, .path = "x", .stx = &(struct statx){ 0 },
				    .flags = RF_IO_BENEATH };
		T_EQ(rf_ring_submit(r, &st, t_store, &t, NULL), -EINVAL);
	}

	/* malformed descriptors: nothing queued */
	struct rf_io bad[] = {
		{ .op = RF_IOP_OPENAT },                               /* no path */
		{ .op = RF_IOP_STATX, .path = "x" },                   /* no statx buffer */
		{ .op = RF_IOP_RENAMEAT, .path = "x" },                /* no new path */
		{ .op = RF_IOP_READV, .fd = 0 },                       /* no iovecs */
		{ .op = RF_IOP_CONNECT, .fd = 0 },                     /* no address */
		{ .op = RF_IOP_CLOSE, .flags = RF_IO_ALLOC_SLOT },     /* slot flag on close */
		{ .op = (enum rf_iop)0 },
		{ .op = (enum rf_iop)1000 },
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		T_EQ(rf_ring_submit(r, &bad[i], t_store, &t, NULL), -EINVAL);
	T_EQ(rf_ring_pending(r), 0);

	rf_ring_destroy(r);
	close(dfd);
	T_CHECK(rmdir(dir) == 0);
	return 0;
}
