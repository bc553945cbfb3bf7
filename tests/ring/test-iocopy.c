/* ring-iocopy: rf_io_copy_size / rf_io_copy, the one deep copy of a struct rf_io (the
 * ring's at submission, rf_engine_push_io's at push): the socket address, the iovec
 * array and both paths land in the block, aligned, and the copy keeps its values after
 * the caller's originals are overwritten; the buffers stay the caller's; a descriptor
 * that points to nothing needs no bytes; an address longer than a sockaddr_storage is
 * copied only that far. */
#include "ring-test.h"

#include <netinet/in.h>
#include "ring-ops.h"

int main(void)
{
	char path[] = "dir/a", path2[] = "dir/bb";
	char b0[8], b1[8];
	struct iovec iov[2] = { { b0, sizeof(b0) }, { b1, sizeof(b1) } };
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(8080) };
	struct rf_io io = { .op = RF_IOP_RENAMEAT, .fd = 3, .buf = b0, .len = 8, .iov = iov,
			    .iovcnt = 2, .path = path, .path2 = path2,
			    .addr = (struct sockaddr *)&sin, .addrlen = sizeof(sin), .arg = 7 };
	size_t n = rf_io_copy_size(&io);
	T_EQ(n, 16 + 2 * sizeof(struct iovec) + sizeof(path) + sizeof(path2));
	char *mem = malloc(n);
	T_CHECK(mem);
	struct rf_io c;
	rf_io_copy(&c, &io, mem);
	/* the originals change: the copy does not */
	memset(path, 'x', sizeof(path) - 1);
	memset(path2, 'y', sizeof(path2) - 1);
	iov[0].iov_len = iov[1].iov_len = 0;
	sin.sin_port = 0;
	T_EQ(strcmp(c.path, "dir/a"), 0);
	T_EQ(strcmp(c.path2, "dir/bb"), 0);
	T_EQ(c.iovcnt, 2);
	T_CHECK(c.iov[0].iov_base == b0 && c.iov[0].iov_len == 8);
	T_CHECK(c.iov[1].iov_base == b1 && c.iov[1].iov_len == 8);
	T_EQ(ntohs(((const struct sockaddr_in *)c.addr)->sin_port), 8080);
	T_EQ(c.addrlen, sizeof(sin));
	T_CHECK(c.buf == b0 && c.len == 8 && c.fd == 3 && c.arg == 7 && c.op == RF_IOP_RENAMEAT);
	/* everything pointed to lies in the block, the iovec array aligned */
	T_CHECK((const char *)c.addr == mem);
	T_CHECK((const char *)c.iov >= mem && (const char *)(c.iov + 2) <= mem + n);
	T_EQ((uintptr_t)c.iov % _Alignof(struct iovec), 0);
	T_CHECK(c.path >= mem && c.path2 + sizeof(path2) <= mem + n);
	free(mem);

	/* nothing pointed to: nothing to copy */
	struct rf_io plain = { .op = RF_IOP_SEND, .fd = 4, .buf = b1, .len = 8 };
	T_EQ(rf_io_copy_size(&plain), 0);
	rf_io_copy(&c, &plain, NULL);
	T_CHECK(c.op == RF_IOP_SEND && c.fd == 4 && c.buf == b1 && !c.path && !c.iov && !c.addr);

	/* an address longer than a sockaddr_storage: copied that far (a connect with it
	 * is refused by rf_ring_check_io and rf_engine_push_io) */
	char big[sizeof(struct sockaddr_storage) + 32];
	memset(big, 5, sizeof(big));
	struct rf_io longaddr = { .op = RF_IOP_CONNECT, .addr = (struct sockaddr *)big,
				  .addrlen = sizeof(big) };
	n = rf_io_copy_size(&longaddr);
	T_EQ(n, sizeof(struct sockaddr_storage));
	mem = malloc(n);
	T_CHECK(mem);
	rf_io_copy(&c, &longaddr, mem);
	T_EQ(memcmp(c.addr, big, sizeof(struct sockaddr_storage)), 0);
	free(mem);
	printf("ok\n");
	return 0;
}
