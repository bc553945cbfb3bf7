/* test-engine-io: ring operations as engine ops (rf_engine_push_io). A file pipeline
 * is pushed all at once, before anything ran: openat (result = the fd, mutates the
 * file's variable) -> writev -> fsync -> statx -> read into a buffer (fd taken from the
 * open's result when the op starts) -> a CPU op that checks the bytes -> close; the
 * ops run in dependency order and the pushed path may go right after the push. A
 * socket exchange: the recv (MSG_WAITALL) is pushed before the send on another
 * variable and both are in flight at once; a send that ends short (a stalled peer, its
 * deadline) fails with -EIO, its count in the result. A failing open poisons its variable: the
 * read after it is skipped and wait_all names the open's error; a bad descriptor is
 * refused at push. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "../test-util.h"

static int checked;
static uint8_t wbuf[3000], rbuf[3000];

static int check_fn(void *ctx)
{
	checked = memcmp(wbuf, rbuf, sizeof(wbuf)) == 0 ? 1 : -1;
	return 0;
}

int main(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	struct rf_var *F, *B;
	CHECK_OK(rf_var_create(e, "file", &F));
	CHECK_OK(rf_var_create(e, "buf", &B));
	for (size_t i = 0; i < sizeof(wbuf); i++)
		wbuf[i] = (uint8_t)(i * 7 + 1);

	const char *tmp = getenv("TMPDIR");
	char *path = malloc(512);
	snprintf(path, 512, "%s/rf-engine-io-%d", tmp && *tmp ? tmp : "/var/tmp", (int)getpid());
	int64_t fd = -1, wres = 0, sres = -1, rres = 0, cres = -1;
	struct statx stx;
	struct iovec iov[2] = { { wbuf, 1000 }, { wbuf + 1000, 2000 } };
	struct rf_io_push p;

	p = (struct rf_io_push){ .io = { .op = RF_IOP_OPENAT, .dirfd = AT_FDCWD, .path = path,
			       .arg = O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, .mode = 0600 },
			.result = &fd, .writes = &F, .nwrites = 1 };
	CHECK_OK(rf_engine_push_io(e, &p));
	char keep[512];
	snprintf(keep, sizeof(keep), "%s", path);
	memset(path, 'X', 511); /* copied at push */
	path[511] = 0;
	p = (struct rf_io_push){ .io = { .op = RF_IOP_WRITEV, .iov = iov, .iovcnt = 2, .off = 0 },
			.fd_from = &fd, .result = &wres, .writes = &F, .nwrites = 1 };
	CHECK_OK(rf_engine_push_io(e, &p));
	memset(iov, 0, sizeof(iov));
	p = (struct rf_io_push){ .io = { .op = RF_IOP_FSYNC }, .fd_from = &fd, .writes = &F, .nwrites = 1 };
	CHECK_OK(rf_engine_push_io(e, &p));
	p = (struct rf_io_push){ .io = { .op = RF_IOP_STATX, .dirfd = AT_FDCWD, .path = keep,
			       .mask = STATX_SIZE, .stx = &stx },
			.result = &sres, .reads = &F, .nreads = 1 };
	CHECK_OK(rf_engine_push_io(e, &p));
	p = (struct rf_io_push){ .io = { .op = RF_IOP_READ, .buf = rbuf, .len = sizeof(rbuf), .off = 0 },
			.fd_from = &fd, .result = &rres, .reads = &F, .nreads = 1, .writes = &B, .nwrites = 1 };
	CHECK_OK(rf_engine_push_io(e, &p));
	CHECK_OK(rf_engine_push_simple(e, check_fn, NULL, &B, 1, NULL, 0, NULL, "check"));
	p = (struct rf_io_push){ .io = { .op = RF_IOP_CLOSE }, .fd_from = &fd, .result = &cres,
			.reads = &B, .nreads = 1, .writes = &F, .nwrites = 1 };
	CHECK_OK(rf_engine_push_io(e, &p));
	CHECK_OK(rf_engine_wait_all(e));
	CHECK(fd >= 0);
	CHECK_EQ(wres, sizeof(wbuf));
	CHECK_EQ(sres, 0);
	CHECK_EQ(stx.stx_size, sizeof(wbuf));
	CHECK_EQ(rres, sizeof(rbuf));
	CHECK_EQ(checked, 1);
	CHECK_EQ(cres, 0);
	CHECK(fcntl((int)fd, F_GETFD) < 0);
	unlink(keep);

	/* recv pushed before the send it waits for; different variables: both in flight */
	int sp[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
	struct rf_var *A, *C;
	CHECK_OK(rf_var_create(e, "rx", &A));
	CHECK_OK(rf_var_create(e, "tx", &C));
	static uint8_t big[1 << 20], got[1 << 20];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i ^ (i >> 9));
	int64_t nr = 0, ns = 0;
	p = (struct rf_io_push){ .io = { .op = RF_IOP_RECV, .fd = sp[1], .buf = got, .len = sizeof(got),
			       .arg = MSG_WAITALL }, .result = &nr, .writes = &A, .nwrites = 1 };
	CHECK_OK(rf_engine_push_io(e, &p));
	p = (struct rf_io_push){ .io = { .op = RF_IOP_SEND, .fd = sp[0], .buf = big, .len = sizeof(big) },
			.result = &ns, .writes = &C, .nwrites = 1 };
	CHECK_OK(rf_engine_push_io(e, &p));
	CHECK_OK(rf_engine_wait_all(e));
	CHECK_EQ(nr, sizeof(got));
	CHECK_EQ(ns, sizeof(big));
	CHECK_EQ(memcmp(big, got, sizeof(big)), 0);
	close(sp[0]);
	close(sp[1]);

	/* a send that ends short -- its peer never reads, its deadline passes after part
	 * of it went -- fails (-EIO), its count in the result: it succeeded with the count
	 * once the ring reported it (the ops after it would run as if all had gone) */
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
	struct rf_var *D;
	CHECK_OK(rf_var_create(e, "stalled", &D));
	ns = 0;
	p = (struct rf_io_push){ .io = { .op = RF_IOP_SEND, .fd = sp[0], .buf = big,
					 .len = sizeof(big), .timeout_ns = 100 * 1000000ull },
				 .result = &ns, .writes = &D, .nwrites = 1 };
	CHECK_OK(rf_engine_push_io(e, &p));
	int wret = rf_engine_wait_all(e);
	printf("a send that ended short: wait_all %d, result %lld\n", wret, (long long)ns);
	CHECK(ns > 0 && ns < (int64_t)sizeof(big));
	CHECK_EQ(wret, -EIO);
	CHECK_EQ(rf_var_error(D, NULL), -EIO);
	CHECK_OK(rf_var_clear_error(e, D));
	CHECK_OK(rf_engine_wait_all(e));
	close(sp[0]);
	close(sp[1]);

	/* a failing open poisons F: the read after it is skipped */
	struct rf_var *G;
	CHECK_OK(rf_var_create(e, "missing", &G));
	int64_t mfd = 0, mres = 12345;
	p = (struct rf_io_push){ .io = { .op = RF_IOP_OPENAT, .dirfd = AT_FDCWD,
			       .path = "/nonexistent/rf-engine-io", .arg = O_RDONLY },
			.result = &mfd, .writes = &G, .nwrites = 1, .name = "open missing" };
	CHECK_OK(rf_engine_push_io(e, &p));
	p = (struct rf_io_push){ .io = { .op = RF_IOP_READ, .buf = rbuf, .len = 16 }, .fd_from = &mfd,
			.result = &mres, .reads = &G, .nreads = 1, .writes = &B, .nwrites = 1 };
	CHECK_OK(rf_engine_push_io(e, &p));
	CHECK_EQ(rf_engine_wait_all(e), -ENOENT);
	CHECK_EQ(mfd, -ENOENT);
	CHECK_EQ(mres, 12345); /* skipped: never started */
	const char *who = NULL;
	CHECK_EQ(rf_var_error(G, &who), -ENOENT);
	CHECK(who && !strcmp(who, "open missing"));

	p = (struct rf_io_push){ .io = { .op = (enum rf_iop)77 } };
	CHECK_EQ(rf_engine_push_io(e, &p), -EINVAL);
	free(path);
	struct rf_var *all[] = { F, B, A, C, G, D };
	for (unsigned i = 0; i < 6; i++)
		CHECK_OK(rf_var_destroy(e, all[i], NULL, NULL, NULL));
	CHECK_OK(rf_engine_wait_idle(e));
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
