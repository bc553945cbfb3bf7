/* examples/rf-httpd.c -- a small static-file HTTP/1.1 server on one ringflow ring:
 * GET and HEAD, keep-alive and pipelined requests (any number: with 8 queued the
 * connection's receive is cancelled until a response makes room), single byte ranges (206, 416),
 * 404 / 400 (two Range headers too) / 405 / 414 answers, and a clean stop on
 * SIGINT/SIGTERM.
 *
 *   rf-httpd [--port N] [--bind ADDR] [--buffers N] [--idle-timeout SEC]
 *            [--max-conns N] DIR
 *
 * How it is built on ringflow (one thread, one ring, no blocking call after start-up):
 *   - one multishot accept; each connection one multishot recv into a shared group
 *     of provided buffers (an idle connection holds no buffer), every buffer handed
 *     straight to the C http-parser (libhttp-parser) and given back;
 *   - each request: openat (beneath DIR only: a symbolic link leading out of it is a
 *     404) relative to DIR's fd through the ring, then fstat of what it opened (an
 *     inode already in memory: no I/O; a statx by path beside the open could see
 *     another file renamed over the path in between, and sent the old file's bytes
 *     under the new one's length); a small body is read through the ring into a response buffer (taken
 *     from a pool only while a response is being sent) after the header and sent in
 *     one send; a body over 64 KiB is spliced file -> pipe -> socket through the
 *     ring, no copy through user memory (nginx's sendfile; read+send of 1 MiB
 *     measured 0.76x nginx, splice: see the README); the file closed through the ring;
 *   - SIGINT/SIGTERM reach the ring through a notifier signalled from the handler;
 *     the accept is then cancelled and rf_ring_destroy cancels what connections
 *     have in flight.
 * Requests on one connection are answered in order; a connection is freed once no
 * request of it is in flight. This file holds the connections' side (accept, receive,
 * parse, close, the idle sweep, main); httpd-response.c the responses; httpd.h what
 * they share. Build outside the tree with `pkg-config --cflags --libs ringflow` and
 * -lhttp_parser. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ringflow/log.h>
#include <ringflow/ring-ops.h>

#include "httpd.h"

struct rf_ring *ring;
static struct rf_bufgroup *grp;
int rootfd;
static int lfd;
static volatile int stopping;
static unsigned nconns;
static struct conn *conns;
static uint64_t idle_ns = 60ull * 1000000000ull; /* --idle-timeout */
static unsigned max_conns;      /* --max-conns (0 until set from RLIMIT_NOFILE) */

/* ---- a connection's life ---------------------------------------------------------------- */

void on_closed(void *data, int64_t res)
{
	struct conn *c = data;
	c->inflight--;
	conn_maybe_free(c);
}

void set_closing(struct conn *c)
{
	if (!c->closing) {
		c->closing = 1;
		c->closing_since = rf_now_ns();
	}
}

/* Stop reading, close the socket once nothing else is in flight, then free. Whoever
 * set `closing` first (a response that ended early does), the receive still pending is
 * cancelled here: a connection waits for nothing that will not come. */
void conn_close(struct conn *c)
{
	set_closing(c);
	if (c->recv_id && !c->recv_cancelled) {
		c->recv_cancelled = 1;
		if (rf_ring_cancel(ring, c->recv_id) < 0 && c->fd >= 0)
			shutdown(c->fd, SHUT_RD); /* the receive then ends with 0 */
	}
	conn_maybe_free(c);
}

void conn_maybe_free(struct conn *c)
{
	if (!c->closing || c->inflight || c->recv_id || c->busy)
		return;
	if (c->fd >= 0) {
		int fd = c->fd;
		c->fd = -1;
		c->inflight++;
		if (rf_ring_close(ring, fd, 0, on_closed, c, NULL) == 0)
			return;
		c->inflight--;
		close(fd);
	}
	nconns--;
	hr_free(&c->hr);
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

/* ---- connections ---------------------------------------------------------------------- */

static void on_recv(void *data, int64_t res, void *buf, int more);

/* After bytes were parsed (err: hr_feed's or hr_resume's): an error answers what came
 * before, then itself, then closes; a full queue stops reading until a response makes
 * room (recv_resume). */
void parsed(struct conn *c, int err)
{
	if ((err || hr_holding(&c->hr)) && c->recv_id && !c->recv_cancelled) {
		c->recv_cancelled = 1;
		c->recv_paused = !err;
		rf_ring_cancel(ring, c->recv_id);
	}
	/* a request must arrive whole within --idle-timeout of its first byte */
	if (!c->hr.in_request)
		c->req_start = 0;
	else if (c->hr.begun != c->begun || !c->req_start)
		c->req_start = rf_now_ns();
	c->begun = c->hr.begun;
}

/* The receive a full queue cancelled, armed again once the queue has room and the
 * cancellation has ended. */
void recv_resume(struct conn *c)
{
	if (!c->recv_paused || c->recv_id || hr_holding(&c->hr) || c->hr.bad || c->closing ||
	    c->peer_gone)
		return;
	c->recv_paused = 0;
	c->recv_cancelled = 0;
	if (rf_ring_recv_multishot(ring, c->fd, grp, 0, on_recv, c, &c->recv_id) < 0) {
		c->recv_id = 0;
		conn_close(c);
	}
}

static void on_recv(void *data, int64_t res, void *buf, int more)
{
	struct conn *c = data;
	if (!more)
		c->recv_id = 0;
	if (res > 0) {
		size_t n = (size_t)res;
		c->active = rf_now_ns();
		if (!c->hr.bad && !c->closing)
			parsed(c, hr_feed(&c->hr, buf, n));
		rf_bufgroup_put(grp, buf);
		if (!more)
			recv_resume(c);
		start_next(c);
		return;
	}
	if (!more && res == -ECANCELED && c->recv_paused && !c->closing) {
		recv_resume(c);   /* paused, not gone: rearmed now if there is room */
		return;
	}
	if (!more) { /* end of stream, an error, or cancelled */
		c->peer_gone = 1;
		if (!c->busy && !c->hr.qlen)
			conn_close(c);
		else
			conn_maybe_free(c);
	}
}

/* A complaint that may repeat many times a second (out of fds, the connection limit):
 * said at once, then at most once a second with how many were not said. */
static void say_limited(const char *what)
{
	static char last[160];
	static uint64_t last_ns;
	static unsigned quiet;
	uint64_t now = rf_now_ns();

	if (!strcmp(last, what) && now - last_ns < 1000000000ull) {
		quiet++;
		return;
	}
	if (quiet)
		fprintf(stderr, "rf-httpd: (%u more like the last)\n", quiet);
	fprintf(stderr, "rf-httpd: %s\n", what);
	snprintf(last, sizeof(last), "%s", what);
	last_ns = now;
	quiet = 0;
}

static void on_accept(void *data, int64_t res, void *buf, int more)
{
	char msg[160];
	if (res < 0) {
		if (!stopping) {
			snprintf(msg, sizeof(msg), "accept: %s", strerror((int)-res));
			say_limited(msg);
		}
		return;
	}
	if (stopping) {
		close((int)res);
		return;
	}
	if (nconns >= max_conns) {
		/* past the limit: the fds left serve the files of the connections there are */
		close((int)res);
		snprintf(msg, sizeof(msg), "%u connections (--max-conns): closing new ones",
			 max_conns);
		say_limited(msg);
		return;
	}
	struct conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close((int)res);
		return;
	}
	c->fd = (int)res;
	c->file = -1;
	c->pipe[0] = c->pipe[1] = -1;
	hr_init(&c->hr);
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	nconns++;
	c->active = rf_now_ns();
	c->next = conns;
	if (conns)
		conns->prev = c;
	conns = c;
	if (rf_ring_recv_multishot(ring, c->fd, grp, 0, on_recv, c, &c->recv_id) < 0) {
		c->recv_id = 0;
		conn_close(c);
	}
}

static rf_req_id accept_id, sweep_id;

/* Once a second: close connections idle past --idle-timeout (a peer that sends
 * nothing, or stops halfway through a request, holds nothing for ever). A connection
 * with a response in flight is not idle, but one whose response made no progress for
 * as long has a peer that stopped reading: its socket is shut down, which ends the
 * send or splice waiting on it (-EPIPE; a splice blocked in the socket on an io_uring
 * worker is not interrupted by a request deadline, ring/README.md), and the
 * connection closes through that callback. */
static void on_sweep(void *data, int64_t res)
{
	sweep_id = 0;
	if (res < 0 || stopping)
		return;
	uint64_t now = rf_now_ns();
	for (struct conn *c = conns, *next; c; c = next) {
		next = c->next; /* conn_close may free c */
		if (c->closing) {
			/* a close waiting on something in flight that never ends (a splice
			 * blocked in a socket the peer stopped reading): shut it down */
			if (c->fd >= 0 && now - c->closing_since > idle_ns)
				shutdown(c->fd, SHUT_RDWR);
			continue;
		}
		/* a request trickled in a byte at a time (each byte refreshes `active`) is
		 * held to the same limit, counted from its first byte */
		if (c->req_start && now - c->req_start > idle_ns && !c->busy) {
			conn_close(c);
			continue;
		}
		if (!c->busy) {
			if (now - c->active > idle_ns)
				conn_close(c);
			continue;
		}
		/* a slow reader still drains the socket within a piece: that is progress */
		int q = -1;
		if (c->fd >= 0 && ioctl(c->fd, SIOCOUTQ, &q) == 0 && q != c->outq) {
			c->outq = q;
			c->moved = now;
		}
		if (now - c->moved > idle_ns && c->fd >= 0)
			shutdown(c->fd, SHUT_RDWR); /* the stalled piece fails; then it closes */
	}
	if (rf_ring_timeout(ring, 1000000000ull, on_sweep, NULL, &sweep_id) < 0)
		sweep_id = 0;
}
static struct rf_notifier *stop_note;

/* The signal handler only posts to the ring (one syscall, async-signal-safe); the
 * ring's owner thread does the rest. (A signalfd would need the signals blocked in
 * every thread, and a library may have started threads before main.) */
static void on_signal_handler(int sig)
{
	int saved = errno; /* the interrupted code's */
	rf_notifier_signal(stop_note);
	errno = saved;
}

static void on_stop(void *data, uint32_t count)
{
	stopping = 1;
	if (accept_id)
		rf_ring_cancel(ring, accept_id);
	if (sweep_id)
		rf_ring_cancel(ring, sweep_id);
}

static void on_accept_end(void *data, int64_t res, void *buf, int more);

static void rearm_accept(void *data, int64_t res)
{
	accept_id = 0;
	if (!stopping && rf_ring_accept_multishot(ring, lfd, 0, on_accept_end, NULL, &accept_id) < 0)
		accept_id = 0;
}

static void on_accept_end(void *data, int64_t res, void *buf, int more)
{
	if (!more) {
		accept_id = 0;
		/* the kernel ended the accept on an error (EMFILE, ...): listen again in
		 * 100 ms, not at once, so a lack of fds does not spin */
		if (!stopping && rf_ring_timeout(ring, 100000000ull, rearm_accept, NULL, &accept_id) < 0)
			accept_id = 0;
	}
	on_accept(data, res, buf, more);
}

static long arg_num(const char *opt, const char *v, long lo, long hi)
{
	char *end;
	if (!v) {
		fprintf(stderr, "rf-httpd: %s needs a value\n", opt);
		exit(2);
	}
	errno = 0;
	long x = strtol(v, &end, 10);
	if (*end || !*v || errno || x < lo || x > hi) {
		fprintf(stderr, "rf-httpd: %s: expected an integer in [%ld, %ld], got '%s'\n", opt,
			lo, hi, v);
		exit(2);
	}
	return x;
}

int main(int argc, char **argv)
{
	long port = 8080, nbufs = 1024;
	const char *bind_addr = "127.0.0.1", *dir = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port"))
			port = arg_num("--port", argv[++i], 0, 65535);
		else if (!strcmp(argv[i], "--bind")) {
			bind_addr = argv[++i];
			if (!bind_addr) {
				fprintf(stderr, "rf-httpd: --bind needs a value\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "--buffers"))
			nbufs = arg_num("--buffers", argv[++i], 1, 32768);
		else if (!strcmp(argv[i], "--idle-timeout"))
			idle_ns = (uint64_t)arg_num("--idle-timeout", argv[++i], 1, 86400) * 1000000000ull;
		else if (!strcmp(argv[i], "--max-conns"))
			max_conns = (unsigned)arg_num("--max-conns", argv[++i], 1, 1000000);
		else if (!strcmp(argv[i], "--help")) {
			printf("usage: rf-httpd [--port N] [--bind ADDR] [--buffers N] "
			       "[--idle-timeout SEC] [--max-conns N] DIR\n"
			       "  --port N      TCP port (default 8080; 0: any free one, printed)\n"
			       "  --bind ADDR   IPv4 address to listen on (default 127.0.0.1)\n"
			       "  --buffers N   receive buffers shared by all connections, rounded\n"
			       "                up to a power of two (default 1024, 4 KiB each)\n"
			       "  --idle-timeout SEC  close a connection idle this long, one whose\n"
			       "                request has not arrived whole this long after its\n"
			       "                first byte, or whose response the peer has taken\n"
			       "                nothing of this long, 1..86400 (default 60)\n"
			       "  --max-conns N connections at once; past them new ones are\n"
			       "                closed (default: a quarter of the open-file\n"
			       "                limit less 32: a busy connection holds a socket,\n"
			       "                a file and a pipe's two ends)\n");
			int e0 = errno, e = fflush(stdout) ? errno : 0;
			if (e || ferror(stdout)) { /* a full disk, /dev/full */
				fprintf(stderr, "rf-httpd: stdout: %s\n", e ? strerror(e) :
					e0 ? strerror(e0) : "a write failed");
				return 1;
			}
			return 0;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "rf-httpd: unknown option '%s' (see --help)\n", argv[i]);
			return 2;
		} else if (!dir)
			dir = argv[i];
		else {
			fprintf(stderr, "rf-httpd: unexpected argument '%s'\n", argv[i]);
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "rf-httpd: missing DIR (usage: rf-httpd [--port N] [--bind ADDR] "
			"[--buffers N] DIR)\n");
		return 2;
	}
	if (!max_conns) {
		struct rlimit rl;
		rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
		n = n == RLIM_INFINITY || n > 4000128 ? 4000128 : n;
		max_conns = n > 36 ? (unsigned)((n - 32) / 4) : 1;
	}
	rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		fprintf(stderr, "rf-httpd: %s: cannot open directory: %s\n", dir, strerror(errno));
		return 1;
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "rf-httpd: --bind: expected an IPv4 address, got '%s'\n", bind_addr);
		return 2;
	}
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	socklen_t sl = sizeof(sa);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1024) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
		fprintf(stderr, "rf-httpd: %s:%ld: cannot listen: %s\n", bind_addr, port, strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	unsigned nb = 1;
	while (nb < (unsigned)nbufs)
		nb <<= 1;
	int ret = rf_ring_create(&ring, &(struct rf_ring_opts){ .entries = 1024 });
	if (ret < 0 || (ret = rf_bufgroup_create(ring, nb, 4096, &grp)) < 0) {
		/* the library prints nothing: its reason (a malformed RF_FAULT_INJECT, ...)
		 * is rf_last_error()'s */
		fprintf(stderr, "rf-httpd: cannot set up the ring: %s\n", rf_last_error());
		return 1;
	}
	if ((ret = rf_ring_accept_multishot(ring, lfd, 0, on_accept_end, NULL, &accept_id)) < 0 ||
	    (ret = rf_notifier_create(ring, on_stop, NULL, &stop_note)) < 0) {
		fprintf(stderr, "rf-httpd: cannot start: %s\n", rf_last_error());
		return 1;
	}
	if ((ret = rf_ring_timeout(ring, 1000000000ull, on_sweep, NULL, &sweep_id)) < 0) {
		fprintf(stderr, "rf-httpd: cannot start: %s\n", rf_last_error());
		return 1;
	}
	struct sigaction sa_stop = { .sa_handler = on_signal_handler };
	sigemptyset(&sa_stop.sa_mask);
	sigaction(SIGINT, &sa_stop, NULL);
	sigaction(SIGTERM, &sa_stop, NULL);
	printf("rf-httpd: serving %s on http://%s:%u/\n", dir, bind_addr, ntohs(sa.sin_port));
	fflush(stdout);
	/* until a signal: then the accept is cancelled */
	while (!stopping || accept_id || sweep_id) {
		ret = rf_ring_run(ring, RF_RUN_ONCE);
		if (ret < 0) {
			fprintf(stderr, "rf-httpd: ring: %s\n", rf_last_error());
			return 1;
		}
	}
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	rf_notifier_destroy(stop_note);
	rf_ring_destroy(ring); /* cancels what connections still have in flight */
	close(lfd);
	close(rootfd);
	response_pools_free();
	return 0;
}
