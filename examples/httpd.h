/* examples/httpd.h -- what rf-httpd's two files share: a connection, the ring, the
 * served directory, and the calls between the connections' side (rf-httpd.c: accept,
 * receive, parse, close) and the responses' (httpd-response.c: open, read or splice,
 * send, in request order). */
#ifndef RF_HTTPD_H
#define RF_HTTPD_H

#include <stdint.h>

#include <ringflow/ring-ops.h>

#include "httpd-request.h"

#define RESP_BUF (256u << 10)
#define QCAP HR_QCAP
#define SPLICE_MIN (64u << 10) /* bodies larger than this are spliced */

struct conn {
	struct conn *prev, *next; /* every live connection, for the idle sweep */
	uint64_t active;        /* last data received or response finished (ns) */
	uint64_t req_start;     /* the first byte of the request being received (ns), 0:
				 * none: it must be whole within --idle-timeout */
	uint64_t moved;         /* busy: the response last moved (a piece done, or the
				 * socket's unsent bytes changed), ns */
	int outq;               /* busy: the socket's unsent bytes at the last sweep */
	int fd;
	struct hr hr;           /* the requests received (httpd-request.h) */
	unsigned begun;         /* hr.begun when req_start was set */
	/* the response in progress */
	int busy;               /* a response is being produced */
	int file;               /* its file, or -1 */
	int64_t open_res;
	uint64_t off, left;     /* file bytes still to send */
	char *buf;              /* response buffer, RESP_BUF */
	size_t hlen;
	size_t sending;         /* the bytes of the send in flight (one that ends short -- a
				 * reset part of the way -- aborts the response) */
	int pipe[2];            /* splicing: a pipe from the pool, else -1 */
	unsigned pipesz;
	size_t inpipe;          /* bytes the last splice put in the pipe */
	int pipe_dirty;         /* may hold bytes: close it rather than reuse it */
	int inflight;           /* ring requests in flight for this connection */
	int closing, peer_gone;
	uint64_t closing_since; /* when closing was set (ns) */
	int recv_cancelled;
	int recv_paused;        /* the receive cancelled because the queue is full: rearmed
				 * once a response has made room (backpressure: the peer's
				 * further requests wait in its socket) */
	rf_req_id recv_id;
};

extern struct rf_ring *ring;   /* the server's one ring */
extern int rootfd;             /* DIR: every path is opened beneath it */

/* rf-httpd.c: a connection's life */
void set_closing(struct conn *c);
void conn_close(struct conn *c);
void conn_maybe_free(struct conn *c);
void on_closed(void *data, int64_t res);  /* a close through the ring ended */
void parsed(struct conn *c, int err);
void recv_resume(struct conn *c);

/* httpd-response.c: the next queued request's response, if none is in progress; at
 * exit, the pooled buffers and pipes freed */
void start_next(struct conn *c);
void response_pools_free(void);

#endif
