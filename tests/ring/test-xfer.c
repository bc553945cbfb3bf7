/* ring-xfer: the transfer pump (ring-io.h). Segments of odd sizes and offsets,
 * one of length 0 and several larger than a chunk, are written and read back with
 * small chunks and depths (blocking and with a callback) and the bytes match. A read
 * past end of file fails with -ENODATA naming the chunk's offset; a write to a
 * read-only fd fails with the kernel's -EBADF; nothing to transfer still calls back
 * from the ring; a transfer from inside a callback is refused with -EDEADLK. Under
 * RF_FAULT_INJECT short and eagain faults (read+write) the round trip still
 * matches and faults were injected; under eio=1 the read fails with -EIO. A socket is
 * refused (-ESPIPE) before a byte is taken from it. */
#include "ring-test.h"

#include "ring-io.h"
#include "log.h"

#include <sys/socket.h>

#define FILE_LEN (3u << 20)
#define NSEG 5

static const struct { uint64_t off, len; } layout[NSEG] = {
	{ 0, 1000 }, { 4096, 0 }, { 5000, 1300000 }, { 1400000, 77 }, { 1500000, 1500000 },
};

struct t_done {
	struct rf_xfer_result res;
	int calls;
};

static void done_cb(void *data, const struct rf_xfer_result *res)
{
	struct t_done *d = data;
	d->res = *res;
	d->calls++;
}

static int is_done(void *arg)
{
	return ((struct t_done *)arg)->calls > 0;
}

static void segs_for(struct rf_io_seg *s, uint8_t *mem)
{
	for (int i = 0; i < NSEG; i++)
		s[i] = (struct rf_io_seg){ mem + layout[i].off, layout[i].len, layout[i].off };
}

static uint64_t total_len(void)
{
	uint64_t n = 0;
	for (int i = 0; i < NSEG; i++)
		n += layout[i].len;
	return n;
}

/* Write the pattern in segments, read it back into a cleared buffer, compare. */
static void round_trip(struct rf_ring *r, int fd, uint8_t *src, uint8_t *dst,
		       const struct rf_xfer_opts *o, int async)
{
	struct rf_io_seg ws[NSEG], rs[NSEG];
	struct rf_xfer_result res;

	segs_for(ws, src);
	segs_for(rs, dst);
	memset(dst, 0, FILE_LEN);
	if (async) {
		struct t_done w = { 0 }, d = { 0 };
		T_OK(rf_xfer_start(r, fd, RF_XFER_WRITE, ws, NSEG, o, done_cb, &w));
		T_OK(rf_ring_run_until(r, is_done, &w, 0));
		T_EQ(w.calls, 1);
		T_OK(w.res.err);
		T_EQ(w.res.bytes, total_len());
		T_OK(rf_xfer_start(r, fd, RF_XFER_READ, rs, NSEG, o, done_cb, &d));
		T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
		T_EQ(d.calls, 1);
		T_OK(d.res.err);
		T_EQ(d.res.bytes, total_len());
	} else {
		T_OK(rf_xfer(r, fd, RF_XFER_WRITE, ws, NSEG, o, &res));
		T_EQ(res.bytes, total_len());
		T_OK(rf_xfer(r, fd, RF_XFER_READ, rs, NSEG, o, &res));
		T_EQ(res.bytes, total_len());
	}
	for (int i = 0; i < NSEG; i++)
		T_EQ(memcmp(src + layout[i].off, dst + layout[i].off, layout[i].len), 0);
}

static struct rf_ring *ring_with(const char *faults)
{
	struct rf_ring *r;
	if (faults)
		T_CHECK(setenv("RF_FAULT_INJECT", faults, 1) == 0);
	T_OK(rf_ring_create(&r, NULL));
	T_CHECK(unsetenv("RF_FAULT_INJECT") == 0);
	return r;
}

struct nested {
	struct rf_ring *r;
	int fd;
	uint8_t *buf;
	int ret;
	int calls;
};

static void nested_cb(void *data, int64_t res)
{
	struct nested *n = data;
	struct rf_io_seg s = { n->buf, 10, 0 };
	(void)res;
	n->ret = rf_xfer(n->r, n->fd, RF_XFER_READ, &s, 1, NULL, NULL);
	n->calls++;
}

int main(void)
{
	char path[256];
	int fd = t_tmpfile(path, sizeof(path), 0);
	uint8_t *src = malloc(FILE_LEN), *dst = malloc(FILE_LEN);
	T_CHECK(src && dst);
	t_fill(src, FILE_LEN, 11, 0);
	struct rf_xfer_opts small = { .chunk = 64 * 1024, .depth = 3 };
	struct rf_xfer_result res;

	/* Round trips: defaults, small chunks, async. */
	struct rf_ring *r = ring_with(NULL);
	round_trip(r, fd, src, dst, NULL, 0);
	round_trip(r, fd, src, dst, &small, 0);
	round_trip(r, fd, src, dst, &small, 1);

	/* End of file: the file is 3000000 bytes long; read 4096 at 2998000. */
	struct rf_io_seg eof = { dst, 4096, 2998000 };
	T_EQ(rf_xfer(r, fd, RF_XFER_READ, &eof, 1, NULL, &res), -ENODATA);
	T_EQ(res.err, -ENODATA);
	T_EQ(res.err_off, 2998000);
	T_EQ(res.err_res, 2000);
	/* Several chunks past the end: the lowest offset is reported. */
	struct rf_io_seg eof2 = { dst, 2000000, 2000000 };
	T_EQ(rf_xfer(r, fd, RF_XFER_READ, &eof2, 1, &small, &res), -ENODATA);
	T_EQ(res.err_off, 2000000 + 15 * 64 * 1024);

	/* An fd error: writing through a read-only fd. */
	int rfd = open(path, O_RDONLY | O_CLOEXEC);
	T_CHECK(rfd >= 0);
	struct rf_io_seg w1 = { src, 100, 0 };
	T_EQ(rf_xfer(r, rfd, RF_XFER_WRITE, &w1, 1, NULL, &res), -EBADF);
	T_EQ(res.err_res, -EBADF);
	struct t_done d = { 0 };
	T_EQ(rf_xfer_start(r, rfd, RF_XFER_WRITE, &w1, 1, NULL, done_cb, &d), 0);
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(d.calls, 1);
	T_EQ(d.res.err, -EBADF);
	close(rfd);

	/* Bad arguments. */
	T_EQ(rf_xfer_start(r, fd, RF_XFER_READ, &w1, 1, NULL, NULL, NULL), -EINVAL);
	struct rf_xfer_opts deep = { .depth = RF_XFER_DEPTH_MAX + 1 };
	T_EQ(rf_xfer(r, fd, RF_XFER_READ, &w1, 1, &deep, NULL), -EINVAL);

	/* Nothing to transfer: the callback still comes from the ring. */
	struct rf_io_seg empty = { dst, 0, 0 };
	memset(&d, 0, sizeof(d));
	T_OK(rf_xfer_start(r, fd, RF_XFER_READ, &empty, 1, NULL, done_cb, &d));
	T_EQ(d.calls, 0);
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(d.calls, 1);
	T_OK(d.res.err);
	T_OK(rf_xfer(r, fd, RF_XFER_READ, NULL, 0, NULL, NULL));

	/* From inside a callback: refused before anything is queued. */
	struct nested n = { r, fd, dst, 0, 0 };
	T_OK(rf_ring_timeout(r, 1000, nested_cb, &n, NULL));
	T_OK(rf_ring_run(r, RF_RUN_UNTIL_IDLE));
	T_EQ(n.calls, 1);
	T_EQ(n.ret, -EDEADLK);
	T_EQ(rf_ring_pending(r), 0);
	T_OK(rf_ring_fsync_wait(r, fd, 0));
	rf_ring_destroy(r);

	/* Faults: short and eagain on reads and writes; the bytes still match. */
	struct rf_ring_stats st;
	r = ring_with("short=0.3,eagain=0.2,seed=5,ops=read+write");
	round_trip(r, fd, src, dst, &small, 0);
	round_trip(r, fd, src, dst, &small, 1);
	rf_ring_get_stats(r, &st);
	printf("faults %llu, short resubmits %llu, retries %llu\n",
	       (unsigned long long)st.faults_injected, (unsigned long long)st.short_resubmits,
	       (unsigned long long)st.retries);
	T_CHECK(st.faults_injected > 0 && st.short_resubmits > 0 && st.retries > 0);
	rf_ring_destroy(r);

	/* eio=1: every read fails; the first chunk's offset is reported. */
	r = ring_with("eio=1");
	struct rf_io_seg rs[NSEG];
	segs_for(rs, dst);
	T_EQ(rf_xfer(r, fd, RF_XFER_READ, rs, NSEG, &small, &res), -EIO);
	T_EQ(res.err_off, 0);
	T_EQ(res.err_res, -EIO);
	rf_ring_destroy(r);

	/* a socket or a pipe: refused before anything is read (it took the first chunk,
	 * then failed -ESPIPE with those bytes consumed) */
	r = ring_with(NULL);
	int sp[2];
	T_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
	T_EQ(write(sp[1], "abc", 3), 3);
	T_EQ(rf_xfer(r, sp[0], RF_XFER_READ, rs, NSEG, &small, &res), -ESPIPE);
	T_CHECK(strstr(rf_last_error(), "a socket"));
	char three[4];
	T_EQ(read(sp[0], three, 3), 3);   /* still there */
	close(sp[0]);
	close(sp[1]);
	rf_ring_destroy(r);

	close(fd);
	unlink(path);
	free(src);
	free(dst);
	printf("ok\n");
	return 0;
}
