/* ring-accept-slot: accepting into a fixed-file slot (RF_IO_ALLOC_SLOT), run twice --
 * with the kernel's multishot accept and with RF_RING_NO_MULTISHOT. The kernel refuses
 * SOCK_CLOEXEC for a slot (a slot has no close-on-exec), which the ring passed there:
 * every such accept failed with -EINVAL. Here a one-shot accept (rf_ring_accept, and
 * rf_ring_submit with .arg = SOCK_CLOEXEC as a caller may ask for a plain fd) and a
 * multishot accept of two clients each give a slot index of the sparse table; a
 * message sent through each slot (RF_IO_FIXED_FILE) reaches its client, and closing
 * the slot gives the client end of stream. A socket (SOCK_CLOEXEC) and an openat
 * (O_CLOEXEC) into a slot work too. */
#include "ring-test.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "ring-ops.h"

#define NSLOT 8

static struct rf_ring *r;
static int64_t ms_res[4];
static int ms_n, ms_final;

static void on_accept(void *data, int64_t res, void *buf, int more)
{
	(void)data;
	(void)buf;
	if (res >= 0 && ms_n < 4)
		ms_res[ms_n++] = res;
	else if (res < 0)
		fprintf(stderr, "multishot accept: %s\n", strerror((int)-res));
	if (!more)
		ms_final++;
}

static int client(const struct sockaddr_in *sa)
{
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_CHECK(c >= 0 && connect(c, (const struct sockaddr *)sa, sizeof(*sa)) == 0);
	return c;
}

/* Send a message through slot s; client c reads it, then end of stream once the slot
 * is closed. */
static void through(int s, int c, const char *msg)
{
	struct t_res t = { 0 };
	char got[64] = "";
	size_t n = strlen(msg);

	T_CHECK(s >= 0 && s < NSLOT);
	T_OK(rf_ring_send(r, s, msg, n, 0, 0, RF_IO_FIXED_FILE, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), (int64_t)n);
	T_EQ(recv(c, got, n, MSG_WAITALL), (ssize_t)n);
	T_CHECK(memcmp(got, msg, n) == 0);
	memset(&t, 0, sizeof(t));
	T_OK(rf_ring_close(r, s, RF_IO_FIXED_FILE, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);
	T_EQ(recv(c, got, sizeof(got), 0), 0);
	close(c);
}

int main(int argc, char **argv)
{
	int oneshot = argc > 1 && !strcmp(argv[1], "oneshot");
	struct rf_ring_opts o = { .flags = oneshot ? RF_RING_NO_MULTISHOT : 0 };
	T_OK(rf_ring_create(&r, &o));
	T_OK(rf_ring_register_files_sparse(r, NSLOT));

	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	T_CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 8) == 0);
	socklen_t sl = sizeof(sa);
	T_CHECK(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);

	/* one-shot accept into a slot */
	int c = client(&sa);
	struct t_res t = { 0 };
	T_OK(rf_ring_accept(r, lfd, NULL, NULL, RF_IO_ALLOC_SLOT, t_store, &t, NULL));
	int64_t s = t_wait1(r, &t);
	if (s < 0)
		fprintf(stderr, "rf_ring_accept(RF_IO_ALLOC_SLOT): %s\n", strerror((int)-s));
	through((int)s, c, "one-shot");

	/* the same through rf_ring_submit, asking for SOCK_CLOEXEC as for a plain fd */
	c = client(&sa);
	memset(&t, 0, sizeof(t));
	struct rf_io io = { .op = RF_IOP_ACCEPT, .flags = RF_IO_ALLOC_SLOT, .fd = lfd,
			    .arg = SOCK_CLOEXEC };
	T_OK(rf_ring_submit(r, &io, t_store, &t, NULL));
	s = t_wait1(r, &t);
	if (s < 0)
		fprintf(stderr, "RF_IOP_ACCEPT(SOCK_CLOEXEC, RF_IO_ALLOC_SLOT): %s\n",
			strerror((int)-s));
	through((int)s, c, "submitted");

	/* multishot (or rearmed one-shot) accept of two clients into slots */
	rf_req_id aid;
	T_OK(rf_ring_accept_multishot(r, lfd, RF_IO_ALLOC_SLOT, on_accept, NULL, &aid));
	int c1 = client(&sa), c2 = client(&sa);
	while (ms_n < 2 && !ms_final)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(ms_n, 2);
	T_CHECK(ms_res[0] != ms_res[1]);
	T_OK(rf_ring_cancel(r, aid));
	while (!ms_final)
		T_OK(rf_ring_run(r, RF_RUN_ONCE));
	T_EQ(ms_final, 1);
	/* which slot is whose: each client's message comes back through its own */
	through((int)ms_res[0], c1, "first");
	through((int)ms_res[1], c2, "second");

	/* the same for a socket and an openat asking for close-on-exec into a slot */
	memset(&t, 0, sizeof(t));
	T_OK(rf_ring_socket(r, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0, RF_IO_ALLOC_SLOT, t_store,
			    &t, NULL));
	s = t_wait1(r, &t);
	T_CHECK(s >= 0 && s < NSLOT);
	memset(&t, 0, sizeof(t));
	T_OK(rf_ring_close(r, (int)s, RF_IO_FIXED_FILE, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);
	memset(&t, 0, sizeof(t));
	T_OK(rf_ring_openat(r, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC, 0, RF_IO_ALLOC_SLOT,
			    t_store, &t, NULL));
	s = t_wait1(r, &t);
	T_CHECK(s >= 0 && s < NSLOT);
	memset(&t, 0, sizeof(t));
	T_OK(rf_ring_close(r, (int)s, RF_IO_FIXED_FILE, t_store, &t, NULL));
	T_EQ(t_wait1(r, &t), 0);

	close(lfd);
	rf_ring_destroy(r);
	printf("ring-accept-slot (%s): one-shot, submitted and multishot accepts into slots\n",
	       oneshot ? "oneshot" : "multishot");
	return 0;
}
