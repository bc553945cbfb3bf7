/* examples/httpd-response.c -- rf-httpd's responses, one at a time per connection and
 * in request order: the file opened beneath DIR through the ring and fstat'ed, then a
 * small body read into the response buffer after the header and sent in one send, a
 * large one spliced file -> pipe -> socket; errors answered with their status. The
 * buffers and pipes come from small pools. (rf-httpd.c says how it fits together.) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <ringflow/log.h>

#include "httpd.h"

static char *pool[64];
static unsigned npool;

static int pipes[64][2];
static unsigned npipes;

/* A pipe for splicing, grown to 1 MiB where the system allows. 0 or -1. */
static int pipe_get(struct conn *c)
{
	if (npipes) {
		npipes--;
		c->pipe[0] = pipes[npipes][0];
		c->pipe[1] = pipes[npipes][1];
	} else {
		if (pipe2(c->pipe, O_CLOEXEC) < 0) {
			c->pipe[0] = c->pipe[1] = -1;
			return -1;
		}
		fcntl(c->pipe[1], F_SETPIPE_SZ, 1 << 20);
	}
	int sz = fcntl(c->pipe[1], F_GETPIPE_SZ);
	c->pipesz = sz > 0 ? (unsigned)sz : 65536;
	c->pipe_dirty = 0;
	return 0;
}

static void pipe_put(struct conn *c)
{
	if (c->pipe[0] < 0)
		return;
	if (!c->pipe_dirty && npipes < 64) {
		pipes[npipes][0] = c->pipe[0];
		pipes[npipes][1] = c->pipe[1];
		npipes++;
	} else {
		close(c->pipe[0]);
		close(c->pipe[1]);
	}
	c->pipe[0] = c->pipe[1] = -1;
}

void response_pools_free(void)
{
	while (npool)
		free(pool[--npool]);
	while (npipes) {
		npipes--;
		close(pipes[npipes][0]);
		close(pipes[npipes][1]);
	}
}

static char *buf_get(void)
{
	return npool ? pool[--npool] : malloc(RESP_BUF);
}

static void buf_put(char *b)
{
	if (npool < 64)
		pool[npool++] = b;
	else
		free(b);
}

/* ---- responses ---------------------------------------------------------------------- */

static const char *http_date(void)
{
	static char buf[64];
	static time_t last;
	time_t now = time(NULL);
	if (now != last) {
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		last = now;
	}
	return buf;
}

static void on_sent(void *data, int64_t res);
static void response_done(struct conn *c);

/* A response that cannot be finished (the file shrank or went, a read, splice or send
 * failed): the Content-Length sent promised more, and only a close can tell the peer.
 * The socket is shut down at once; the connection closes when what is in flight ends. */
static void response_abort(struct conn *c)
{
	c->left = 0;
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
	set_closing(c);
	response_done(c);
}

static void send_buf(struct conn *c, size_t len, int msg_flags)
{
	c->inflight++;
	c->sending = len;
	if (rf_ring_send(ring, c->fd, c->buf, len, msg_flags, 0, 0, on_sent, c, NULL) < 0) {
		c->inflight--;
		response_abort(c);
	}
}

static void response_done(struct conn *c)
{
	struct hr_req *r = &c->hr.q[c->hr.qhead];
	int keep = r->keep_alive && !r->status;
	c->hr.qhead = (c->hr.qhead + 1) % QCAP;
	c->hr.qlen--;
	if (c->file >= 0) {
		c->inflight++;
		if (rf_ring_close(ring, c->file, 0, on_closed, c, NULL) < 0) {
			c->inflight--;
			close(c->file);
		}
		c->file = -1;
	}
	buf_put(c->buf);
	c->buf = NULL;
	pipe_put(c);
	c->busy = 0;
	c->active = rf_now_ns();
	if (!keep || c->closing || (c->peer_gone && !c->hr.qlen && !hr_holding(&c->hr))) {
		conn_close(c);
		return;
	}
	/* room in the queue: what was held is parsed, and reading goes on */
	if (hr_holding(&c->hr))
		parsed(c, hr_resume(&c->hr));
	recv_resume(c);
	start_next(c);
}

static void on_read(void *data, int64_t res)
{
	struct conn *c = data;
	c->inflight--;
	c->moved = rf_now_ns(); /* the response moved (the sweep's stall check) */
	size_t want = c->left < RESP_BUF - c->hlen ? (size_t)c->left : RESP_BUF - c->hlen;
	if (res != (int64_t)want || c->closing) { /* file shrank or failed: drop the connection */
		response_abort(c);
		return;
	}
	c->off += want;
	c->left -= want;
	size_t n = c->hlen + want;
	c->hlen = 0; /* before the send: a failed one may free c */
	send_buf(c, n, 0);
}

static void splice_in(struct conn *c);

static void on_splice_out(void *data, int64_t res)
{
	struct conn *c = data;
	c->inflight--;
	c->moved = rf_now_ns(); /* the response moved (the sweep's stall check) */
	if (res != (int64_t)c->inpipe || c->closing) {
		response_abort(c);
		return;
	}
	c->pipe_dirty = 0;
	c->off += c->inpipe;
	c->left -= c->inpipe;
	if (c->left)
		splice_in(c);
	else
		response_done(c);
}

static void on_splice_in(void *data, int64_t res)
{
	struct conn *c = data;
	c->inflight--;
	c->moved = rf_now_ns(); /* the response moved (the sweep's stall check) */
	if (res <= 0 || c->closing) { /* the file shrank or failed */
		response_abort(c);
		return;
	}
	c->inpipe = (size_t)res;
	struct rf_io io = { .op = RF_IOP_SPLICE, .fd = c->pipe[0], .off = UINT64_MAX, .fd2 = c->fd,
			    .off2 = UINT64_MAX, .len = c->inpipe,
			    .arg = SPLICE_F_MOVE | (c->left > c->inpipe ? SPLICE_F_MORE : 0) };
	c->inflight++;
	if (rf_ring_submit(ring, &io, on_splice_out, c, NULL) < 0) {
		c->inflight--;
		response_abort(c);
	}
}

/* Move the next piece of the file into the pipe (as much as the pipe holds). */
static void splice_in(struct conn *c)
{
	size_t want = c->left < c->pipesz ? (size_t)c->left : c->pipesz;
	struct rf_io io = { .op = RF_IOP_SPLICE, .fd = c->file, .off = c->off, .fd2 = c->pipe[1],
			    .off2 = UINT64_MAX, .len = want, .arg = SPLICE_F_MOVE,
			    .flags = RF_IO_NO_RETRY_SHORT };
	c->pipe_dirty = 1;
	c->inflight++;
	if (rf_ring_submit(ring, &io, on_splice_in, c, NULL) < 0) {
		c->inflight--;
		response_abort(c);
	}
}

/* Send the header (alone when the body is spliced), then the body piece by piece:
 * read into the buffer after the header and sent with it, or spliced. */
static void next_piece(struct conn *c)
{
	if (c->hlen && (!c->left || c->pipe[0] >= 0)) {
		size_t n = c->hlen;
		c->hlen = 0;
		send_buf(c, n, c->left ? MSG_MORE : 0);
		return;
	}
	if (!c->left) {
		response_done(c);
		return;
	}
	if (c->pipe[0] >= 0) {
		splice_in(c);
		return;
	}
	size_t want = c->left < RESP_BUF - c->hlen ? (size_t)c->left : RESP_BUF - c->hlen;
	c->inflight++;
	if (rf_ring_read(ring, c->file, c->buf + c->hlen, want, c->off, 0, on_read, c, NULL) < 0) {
		c->inflight--;
		response_abort(c);
	}
}

static void on_sent(void *data, int64_t res)
{
	struct conn *c = data;
	c->inflight--;
	c->moved = rf_now_ns(); /* the response moved (the sweep's stall check) */
	if (res != (int64_t)c->sending || c->closing) { /* an error, or cut short by one */
		response_abort(c);
		return;
	}
	next_piece(c);
}

static void error_response(struct conn *c, int status)
{
	static const struct { int code; const char *text; } msgs[] = {
		{ 400, "Bad Request" }, { 403, "Forbidden" }, { 404, "Not Found" },
		{ 405, "Method Not Allowed" }, { 414, "URI Too Long" }, { 500, "Internal Server Error" },
		{ 505, "HTTP Version Not Supported" },
	};
	const char *text = "Error";
	for (unsigned i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++)
		if (msgs[i].code == status)
			text = msgs[i].text;
	struct hr_req *r = &c->hr.q[c->hr.qhead];
	char body[128];
	int blen = snprintf(body, sizeof(body), "%d %s\n", status, text);
	c->hlen = (size_t)snprintf(c->buf, RESP_BUF,
				   "HTTP/1.1 %d %s\r\nServer: rf-httpd\r\nDate: %s\r\n"
				   "Content-Type: text/plain\r\nContent-Length: %d\r\n%s"
				   "Connection: %s\r\n\r\n%s",
				   status, text, http_date(), blen,
				   status == 405 ? "Allow: GET, HEAD\r\n" : "",
				   r->keep_alive && status == 404 ? "keep-alive" : "close",
				   r->head ? "" : body);
	/* a 404 keeps the connection; any other error closes it, as its header says */
	r->status = status == 404 ? 0 : status;
	c->left = 0;
	next_piece(c);
}

static void meta_done(struct conn *c)
{
	struct hr_req *r = &c->hr.q[c->hr.qhead];
	struct stat st;
	int e = 0;
	if (c->open_res >= 0) {
		c->file = (int)c->open_res;
		if (fstat(c->file, &st) < 0)    /* the opened file's own size and time */
			e = errno;
	} else {
		e = (int)-c->open_res;
	}
	if (e) {
		/* EXDEV: the path leads outside the root (a symbolic link; RF_IO_BENEATH);
		 * ENAMETOOLONG: a name no file can have -- neither is the server's fault */
		error_response(c, e == ENOENT || e == ENOTDIR || e == ELOOP || e == EXDEV ||
				  e == ENAMETOOLONG ? 404 : e == EACCES ? 403 : 500);
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		error_response(c, 404);
		return;
	}
	uint64_t size = (uint64_t)st.st_size, a = 0, b = size ? size - 1 : 0;
	int rng = r->has_range ? hr_range(r->range, size, &a, &b) : 0;
	const char *conn = r->keep_alive ? "keep-alive" : "close";
	char lm[64];
	struct tm tm;
	time_t mt = st.st_mtime;
	gmtime_r(&mt, &tm);
	strftime(lm, sizeof(lm), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (rng < 0) {
		c->hlen = (size_t)snprintf(c->buf, RESP_BUF,
			"HTTP/1.1 416 Range Not Satisfiable\r\nServer: rf-httpd\r\nDate: %s\r\n"
			"Content-Range: bytes */%llu\r\nContent-Length: 0\r\nConnection: %s\r\n\r\n",
			http_date(), (unsigned long long)size, conn);
		c->left = 0;
	} else {
		uint64_t len = size ? b - a + 1 : 0;
		char cr[96] = "";
		if (rng > 0)
			snprintf(cr, sizeof(cr), "Content-Range: bytes %llu-%llu/%llu\r\n",
				 (unsigned long long)a, (unsigned long long)b, (unsigned long long)size);
		c->hlen = (size_t)snprintf(c->buf, RESP_BUF,
			"HTTP/1.1 %s\r\nServer: rf-httpd\r\nDate: %s\r\nContent-Type: %s\r\n"
			"Content-Length: %llu\r\nLast-Modified: %s\r\n%sAccept-Ranges: bytes\r\n"
			"Connection: %s\r\n\r\n",
			rng > 0 ? "206 Partial Content" : "200 OK", http_date(), hr_mime(r->path),
			(unsigned long long)len, lm, cr, conn);
		c->off = a;
		c->left = r->head ? 0 : len;
		if (c->left > SPLICE_MIN)
			pipe_get(c); /* no pipe: read and send instead */
	}
	next_piece(c);
}

static void on_open(void *data, int64_t res)
{
	struct conn *c = data;
	c->inflight--;
	c->open_res = res;
	meta_done(c);
}

void start_next(struct conn *c)
{
	if (c->busy || !c->hr.qlen || c->closing)
		return;
	struct hr_req *r = &c->hr.q[c->hr.qhead];
	c->busy = 1;
	c->moved = rf_now_ns();
	c->outq = -1;
	c->file = -1;
	c->pipe[0] = c->pipe[1] = -1;
	c->hlen = 0;
	c->buf = buf_get();
	if (!c->buf) {
		c->busy = 0;
		conn_close(c);
		return;
	}
	if (r->status) {
		error_response(c, r->status);
		return;
	}
	/* beneath the root only: a symbolic link that leads out of it fails (-EXDEV); the
	 * size and time are then the opened file's (meta_done) */
	c->inflight++;
	int e1 = rf_ring_openat(ring, rootfd, r->path, O_RDONLY | O_CLOEXEC, 0, RF_IO_BENEATH,
				on_open, c, NULL);
	if (e1 < 0) {
		c->open_res = e1;
		c->inflight--;
		meta_done(c);
	}
}
