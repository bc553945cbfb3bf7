/* ring-sockfault: RF_FAULT_INJECT on sockets (ops=send+recv). Faults there are decided
 * before a piece is queued -- an error replaces it, a short count shrinks it -- since a
 * socket cannot be re-read. With eagain, eintr and short faults, 4 MiB sent and
 * received with MSG_WAITALL arrive intact (the ring retried and resubmitted; the
 * stats say how often); with eio=1 both sides fail with -EIO and nothing is lost
 * from the stream (a later clean ring reads the bytes still in flight). */
#include "ring-test.h"

#include <sys/socket.h>

#include "ring-ops.h"

static void transfer(struct rf_ring *r, int a, int b, size_t n, int64_t *rs, int64_t *rr)
{
	uint8_t *src = malloc(n), *dst = malloc(n);
	t_fill(src, n, 21, 0);
	memset(dst, 0, n);
	struct t_res ts = { 0 }, tr = { 0 };
	T_OK(rf_ring_send(r, a, src, n, 0, 0, 0, t_store, &ts, NULL));
	T_OK(rf_ring_recv(r, b, dst, n, MSG_WAITALL, 0, t_store, &tr, NULL));
	while (!ts.calls || !tr.calls)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	*rs = ts.res;
	*rr = tr.res;
	if (tr.res == (int64_t)n)
		T_EQ(t_verify(dst, n, 21, 0), -1);
	free(src);
	free(dst);
}

int main(void)
{
	int sp[2];
	T_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
	setenv("RF_FAULT_INJECT", "eagain=0.2,eintr=0.1,short=0.3,seed=3,ops=send+recv", 1);
	struct rf_ring *r;
	T_OK(rf_ring_create(&r, NULL));
	int64_t rs, rr;
	transfer(r, sp[0], sp[1], 4u << 20, &rs, &rr);
	T_EQ(rs, 4u << 20);
	T_EQ(rr, 4u << 20);
	struct rf_ring_stats st;
	rf_ring_get_stats(r, &st);
	T_CHECK(st.faults_injected > 10);
	T_CHECK(st.retries > 0);
	T_CHECK(st.short_resubmits > 0);
	rf_ring_destroy(r);

	/* eio: both fail, nothing moves */
	setenv("RF_FAULT_INJECT", "eio=1,ops=send+recv", 1);
	T_OK(rf_ring_create(&r, NULL));
	transfer(r, sp[0], sp[1], 4096, &rs, &rr);
	T_EQ(rs, -EIO);
	T_EQ(rr, -EIO);
	rf_ring_destroy(r);
	unsetenv("RF_FAULT_INJECT");
	char c;
	T_EQ(recv(sp[1], &c, 1, MSG_DONTWAIT), -1); /* the faked send sent nothing */
	T_EQ(errno, EAGAIN);
	close(sp[0]);
	close(sp[1]);
	return 0;
}
