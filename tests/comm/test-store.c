/* test-store -- the environment launch without MPI: RANK / WORLD_SIZE / LOCAL_RANK read
 * strictly, and the directory rendezvous that carries rank 0's NCCL id, with ranks as
 * forked processes (no MPI, no GPU):
 *   - 2 and 4 ranks started in shuffled order get rank 0's blob, and the directory is
 *     left empty;
 *   - a previous run's files (join, ack and id of other nonces, one of another world
 *     size) are never taken for this run's;
 *   - two processes with one RANK: the replaced one fails (-EEXIST) naming the other;
 *     one that comes after the first took the id makes rank 0 fail (-EEXIST);
 *   - a rank that never comes, and a rank with another WORLD_SIZE: every other rank
 *     times out (-ETIMEDOUT) naming what is missing, none hangs;
 *   - a FIFO at a name the store reads (id) does not block it past its timeout;
 *   - a file is written under a temporary name that is created new: a symbolic link
 *     planted there is not written through (rf__write_whole);
 *   - rank 0 joined and died (its join file names an exited pid of this host): the
 *     others fail (-EPIPE) saying so, without waiting out their timeout; and rank 0
 *     names a rank that joined and died before taking the id;
 *   - a directory that cannot be made fails (-EIO) naming it;
 *   - a comm made by the environment: rank and size from it, no MPI; a CPU tensor or a
 *     host collective before the GPU is set up is refused with the reason. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "rf-internal.h"
#include "device.h"
#include "log.h"
#include "rf-config.h"
#include "store.h"
#include "../test-util.h"

static char root[256];
static unsigned char blob0[128];

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* A rank in a child: exits 0 when it got blob0, else 10 + -ret; its message in
 * ROOT/msg.RANK.PID. */
static pid_t spawn(const char *dir, int rank, int size, double timeout_s, int delay_ms)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid)
		return pid;
	unsigned char b[sizeof(blob0)];
	char err[1024] = "", path[512];
	sleep_ms(delay_ms);
	memcpy(b, rank == 0 ? blob0 : (unsigned char[sizeof(blob0)]){ 0 }, sizeof(b));
	int ret = rf__store_exchange(dir, rank, size, b, sizeof(b), timeout_s, err, sizeof(err));
	snprintf(path, sizeof(path), "%s/msg.%d.%d", root, rank, (int)getpid());
	FILE *f = fopen(path, "w");
	if (f) {
		fprintf(f, "%s", err);
		fclose(f);
	}
	_exit(ret < 0 ? 10 + -ret : memcmp(b, blob0, sizeof(b)) ? 3 : 0);
}

/* The child's exit code; its message into msg. */
static int reap(const char *dir, int rank, pid_t pid, char *msg, size_t len)
{
	char path[512];
	int st = 0;

	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	snprintf(path, sizeof(path), "%s/msg.%d.%d", root, rank, (int)pid);
	msg[0] = 0;
	FILE *f = fopen(path, "r");
	if (f) {
		size_t n = fread(msg, 1, len - 1, f);
		msg[n] = 0;
		fclose(f);
		unlink(path);
	}
	return WEXITSTATUS(st);
}

static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	CHECK(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static void put(const char *dir, const char *name, const char *text)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	CHECK(f);
	fputs(text, f);
	fclose(f);
}

/* size ranks in an order shuffled by seed, all must get the blob. */
static void run_ok(const char *dir, int size, unsigned long long seed)
{
	pid_t pid[8];
	char msg[1024];

	for (int r = 0; r < size; r++)
		pid[r] = spawn(dir, r, size, 20, (int)(t_splitmix64(&seed) % 150));
	for (int r = 0; r < size; r++) {
		int x = reap(dir, r, pid[r], msg, sizeof(msg));
		if (x)
			fprintf(stderr, "rank %d of %d: exit %d: %s\n", r, size, x, msg);
		CHECK_EQ(x, 0);
	}
	CHECK_EQ(dir_entries(dir), 0);   /* rank 0 removed the files */
}

static void test_env(void)
{
	struct rf__launch l;

	unsetenv("RANK");
	unsetenv("WORLD_SIZE");
	unsetenv("LOCAL_RANK");
	unsetenv("LOCAL_WORLD_SIZE");
	CHECK_EQ(rf__launch_from_env(&l), -EINVAL);
	CHECK(strstr(rf_last_error(), "WORLD_SIZE is not set"));
	setenv("WORLD_SIZE", "2", 1);
	CHECK_EQ(rf__launch_from_env(&l), -EINVAL);
	CHECK(strstr(rf_last_error(), "RANK is not set"));
	setenv("RANK", "2", 1);
	CHECK_EQ(rf__launch_from_env(&l), -EINVAL);
	CHECK(strstr(rf_last_error(), "RANK=2: expected an integer from 0 to 1"));
	const char *bad[] = { "", "-1", "1x", " 1", "0x1", "99999999999999999999" };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("RANK", bad[i], 1);
		CHECK_EQ(rf__launch_from_env(&l), -EINVAL);
		CHECK(strstr(rf_last_error(), "RANK="));
	}
	setenv("RANK", "1", 1);
	CHECK_OK(rf__launch_from_env(&l));
	CHECK(l.rank == 1 && l.size == 2 && l.local_rank == 0 && l.local_size == 1);
	setenv("LOCAL_RANK", "1", 1);
	CHECK_OK(rf__launch_from_env(&l));
	CHECK(l.local_rank == 1 && l.local_size == 2);
	setenv("LOCAL_WORLD_SIZE", "1", 1);
	CHECK_EQ(rf__launch_from_env(&l), -EINVAL);
	CHECK(strstr(rf_last_error(), "LOCAL_WORLD_SIZE=1: expected an integer from 2 to 2"));
	setenv("LOCAL_WORLD_SIZE", "2", 1);
	CHECK_OK(rf__launch_from_env(&l));
	setenv("WORLD_SIZE", "0", 1);
	CHECK_EQ(rf__launch_from_env(&l), -EINVAL);
	CHECK(strstr(rf_last_error(), "WORLD_SIZE=0"));
}

/* A comm made by the environment: no MPI in it; what it cannot carry is refused. */
static void test_comm(const char *dir)
{
	struct rf_comm_opts co = { .check = 0, .store_dir = dir };
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *cpu;
	struct rf_tensor *t;
	struct rf_comm *c;
	double v = 1;

	setenv("WORLD_SIZE", "3", 1);
	setenv("RANK", "2", 1);
	setenv("LOCAL_RANK", "0", 1);
	setenv("LOCAL_WORLD_SIZE", "1", 1);
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	CHECK_OK(rf_cpu_open(e, NULL, &cpu));
	if (rf_comm_create(e, &co, &c) < 0) {
		fprintf(stderr, "comm: %s\n", rf_last_error());
		exit(1);
	}
	CHECK(rf_comm_rank(c) == 2 && rf_comm_size(c) == 3 && rf_comm_local_rank(c) == 0 &&
	      rf_comm_local_size(c) == 1);
	CHECK_OK(rf_tensor_create(cpu, RF_F32, "w", RF_DIMS(4), &t));
	CHECK_EQ(rf_comm_allreduce(c, t, 7), -EINVAL);
	CHECK(strstr(rf_last_error(), "a host tensor, and this comm was launched by the "
		     "environment"));
	/* host values go through the GPU here: not before it is set up (a trainer compares
	 * its settings after that, not before, rf_comm_host_ready) */
	CHECK_EQ(rf_comm_host_ready(c), 0);
	CHECK_EQ(rf_comm_host_ready(NULL), 0);
	CHECK_EQ(rf_comm_allreduce_host(c, &v, 1, RF_COMM_F64, RF_COMM_SUM, 8), -EINVAL);
	CHECK(strstr(rf_last_error(), "allreduce_host (key 8)"));
	/* a host device's collectives go by the host transport, never a device's */
	CHECK_EQ(rf_comm_use_gpu(c, cpu, rf_device_stream(cpu, 0)), -EINVAL);
	CHECK(strstr(rf_last_error(), "cpu:") && strstr(rf_last_error(), "works in host memory"));
	CHECK_EQ(rf_comm_seq(c), 0);
	CHECK_OK(rf_comm_wait(c));
	rf_tensor_destroy(t);
	rf_comm_destroy(c);
	rf_device_close(cpu);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	unsetenv("WORLD_SIZE");
	co.store_timeout_s = -1;
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	CHECK_EQ(rf_comm_create(e, &co, &c), -EINVAL);
	CHECK(strstr(rf_last_error(), "store timeout -1"));
	co.store_timeout_s = 0;
	CHECK_EQ(rf_comm_create(e, &co, &c), -EINVAL);
	CHECK(strstr(rf_last_error(), "WORLD_SIZE is not set"));
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
}

int main(void)
{
	char dir[300], msg[1024], msg2[1024];
	unsigned long long seed = 0x5703e;
	pid_t a, b, z;

	signal(SIGPIPE, SIG_IGN);
	snprintf(root, sizeof(root), "%s/rf-store.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	CHECK(mkdtemp(root));
	for (unsigned i = 0; i < sizeof(blob0); i++)
		blob0[i] = (unsigned char)t_splitmix64(&seed);

	test_env();

	/* 2 and 4 ranks, shuffled starts, several times; a fresh and a reused directory */
	snprintf(dir, sizeof(dir), "%s/ok", root);
	for (int i = 0; i < 6; i++)
		run_ok(dir, i % 2 ? 4 : 2, seed + (unsigned long long)i);
	printf("ok: 2 and 4 ranks, shuffled starts: rank 0's blob everywhere, nothing left\n");

	/* a previous run's files: never this run's */
	snprintf(dir, sizeof(dir), "%s/stale", root);
	CHECK_OK(mkdir(dir, 0755));
	put(dir, "join.1", "ringflow-store 1 join rank=1 size=2 nonce=00000000000000aa pid=1 host=old\n");
	put(dir, "ack.1", "ringflow-store 1 ack rank=1 nonce=00000000000000aa gen=00000000000000bb\n");
	put(dir, "join.3", "ringflow-store 1 join rank=3 size=4 nonce=00000000000000cc pid=1 host=old\n");
	char id[600] = "ringflow-store 1 id size=2 gen=00000000000000bb blob=";
	for (unsigned i = 0; i < sizeof(blob0); i++)
		strcat(id, "00");
	strcat(id, "\nnonce=00000000000000bb\nnonce=00000000000000aa\n");
	put(dir, "id", id);
	/* rank 0 first: it sees the stale join.1 (and writes an id for it) before rank 1
	 * replaces it; rank 1 must still end up with this run's blob */
	z = spawn(dir, 0, 2, 20, 0);
	a = spawn(dir, 1, 2, 20, 200);
	CHECK_EQ(reap(dir, 0, z, msg, sizeof(msg)), 0);
	CHECK_EQ(reap(dir, 1, a, msg, sizeof(msg)), 0);
	printf("ok: a previous run's join, ack and id are not taken for this run's\n");

	/* two processes claim RANK=1: the replaced one says so */
	snprintf(dir, sizeof(dir), "%s/dup", root);
	a = spawn(dir, 1, 2, 5, 0);
	char j1[400];
	snprintf(j1, sizeof(j1), "%s/join.1", dir);
	for (int i = 0; i < 500 && access(j1, F_OK); i++)
		sleep_ms(10);
	b = spawn(dir, 1, 2, 5, 0);
	sleep_ms(400);
	z = spawn(dir, 0, 2, 5, 0);
	CHECK_EQ(reap(dir, 1, a, msg, sizeof(msg)), 10 + EEXIST);
	CHECK(strstr(msg, "two processes have RANK=1") && strstr(msg, "replaced by another "
								  "process (pid"));
	CHECK_EQ(reap(dir, 1, b, msg2, sizeof(msg2)), 0);
	CHECK_EQ(reap(dir, 0, z, msg2, sizeof(msg2)), 0);
	printf("ok: two processes with RANK=1: %s\n", msg);

	/* a second RANK=1 after the first took the id: rank 0 (still waiting for rank 2,
	 * whose join file is there but which never acknowledges) says so */
	snprintf(dir, sizeof(dir), "%s/dup-late", root);
	z = spawn(dir, 0, 3, 3, 0);
	a = spawn(dir, 1, 3, 3, 0);
	for (int i = 0; i < 500 && access(dir, F_OK); i++)
		sleep_ms(10);
	put(dir, "join.2", "ringflow-store 1 join rank=2 size=3 nonce=0000000000000abc pid=1 host=fake\n");
	CHECK_EQ(reap(dir, 1, a, msg, sizeof(msg)), 0);
	b = spawn(dir, 1, 3, 3, 0);
	CHECK_EQ(reap(dir, 0, z, msg, sizeof(msg)), 10 + EEXIST);
	CHECK(strstr(msg, "join.1 changed after rank 1 took the id") &&
	      strstr(msg, "two processes have RANK=1"));
	CHECK(reap(dir, 1, b, msg2, sizeof(msg2)) != 0);
	printf("ok: a second RANK=1 after the first took the id: %s\n", msg);

	/* rank 2 of 3 never comes: both others time out, naming it */
	snprintf(dir, sizeof(dir), "%s/missing", root);
	z = spawn(dir, 0, 3, 0.5, 0);
	a = spawn(dir, 1, 3, 0.5, 0);
	CHECK_EQ(reap(dir, 0, z, msg, sizeof(msg)), 10 + ETIMEDOUT);
	CHECK(strstr(msg, "rank 0 of 3: some ranks never joined (no join.RANK of this run) within 0.5 s: 2"));
	CHECK_EQ(reap(dir, 1, a, msg2, sizeof(msg2)), 10 + ETIMEDOUT);
	CHECK(strstr(msg2, "no id for this run within 0.5 s: ranks 2 have not joined"));
	printf("ok: a rank that never comes: %s\n", msg);

	/* a FIFO where the id is read: open() would block for ever; the rank times out */
	snprintf(dir, sizeof(dir), "%s/fifo", root);
	CHECK_OK(mkdir(dir, 0755));
	char fifo[400];
	snprintf(fifo, sizeof(fifo), "%s/id", dir);
	CHECK_OK(mkfifo(fifo, 0644));
	struct timespec f0, f1;
	clock_gettime(CLOCK_MONOTONIC, &f0);
	a = spawn(dir, 1, 2, 0.5, 0);
	CHECK_EQ(reap(dir, 1, a, msg, sizeof(msg)), 10 + ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &f1);
	CHECK(f1.tv_sec - f0.tv_sec < 10);
	unlink(fifo);
	printf("ok: a FIFO at the id's name: %s\n", msg);

	/* a symbolic link at the temporary name: removed, not written through */
	{
		char target[400], link_[400], path[400];
		const char *step;
		snprintf(target, sizeof(target), "%s/target", root);
		snprintf(link_, sizeof(link_), "%s/x.tmp", root);
		snprintf(path, sizeof(path), "%s/x", root);
		put(root, "target", "keep\n");
		CHECK_OK(symlink(target, link_));
		CHECK_OK(rf__write_whole(path, link_, "new\n", 4, 0, &step));
		FILE *f = fopen(target, "r");
		char got[16] = "";
		CHECK(f && fgets(got, sizeof(got), f));
		fclose(f);
		CHECK(!strcmp(got, "keep\n"));
		struct stat sb;
		CHECK(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 4);
		unlink(path);
		unlink(target);
		printf("ok: a link at the temporary name is not written through\n");
	}

	/* WORLD_SIZE differs: rank 0 names it */
	snprintf(dir, sizeof(dir), "%s/size", root);
	z = spawn(dir, 0, 2, 0.5, 0);
	a = spawn(dir, 1, 3, 0.5, 0);
	CHECK_EQ(reap(dir, 0, z, msg, sizeof(msg)), 10 + ETIMEDOUT);
	CHECK(strstr(msg, "join.1 names WORLD_SIZE=3, this run has 2"));
	CHECK_EQ(reap(dir, 1, a, msg2, sizeof(msg2)), 10 + ETIMEDOUT);
	printf("ok: another WORLD_SIZE: %s\n", msg);

	/* rank 0 joined, then died (its join file names a pid of this host that has
	 * exited): rank 1 says so once the grace for stale files is over (a quarter of
	 * its 4 s timeout), not at the timeout */
	snprintf(dir, sizeof(dir), "%s/rank0-died", root);
	CHECK_OK(mkdir(dir, 0755));
	pid_t dead = fork();
	CHECK(dead >= 0);
	if (dead == 0)
		_exit(0);
	CHECK(waitpid(dead, NULL, 0) == dead);
	char host[256] = "?", j0[512];
	gethostname(host, sizeof(host) - 1);
	host[strcspn(host, " \t\n")] = 0;
	snprintf(j0, sizeof(j0), "ringflow-store 1 join rank=0 size=2 nonce=0000000000000d1e "
		 "pid=%d host=%s\n", (int)dead, host);
	put(dir, "join.0", j0);
	a = spawn(dir, 1, 2, 4, 0);
	CHECK_EQ(reap(dir, 1, a, msg, sizeof(msg)), 10 + EPIPE);
	CHECK(strstr(msg, "rank 0 (pid") && strstr(msg, "has exited without an id"));
	printf("ok: rank 0 died after joining: %s\n", msg);

	/* and the other way: rank 1 joined and died before taking the id */
	snprintf(dir, sizeof(dir), "%s/rank1-died", root);
	CHECK_OK(mkdir(dir, 0755));
	snprintf(j0, sizeof(j0), "ringflow-store 1 join rank=1 size=2 nonce=0000000000000d1f "
		 "pid=%d host=%s\n", (int)dead, host);
	put(dir, "join.1", j0);
	z = spawn(dir, 0, 2, 4, 0);
	CHECK_EQ(reap(dir, 0, z, msg, sizeof(msg)), 10 + EPIPE);
	CHECK(strstr(msg, "rank 1 (pid") && strstr(msg, "has exited before taking the id"));
	printf("ok: rank 1 died after joining: %s\n", msg);

	/* a directory that cannot be made */
	snprintf(dir, sizeof(dir), "%s/file", root);
	put(root, "file", "x");
	strcat(dir, "/sub");
	z = spawn(dir, 0, 2, 0.5, 0);
	CHECK_EQ(reap(dir, 0, z, msg, sizeof(msg)), 10 + EIO);
	CHECK(strstr(msg, "cannot create the directory") && strstr(msg, "file/sub"));
	printf("ok: %s\n", msg);

	snprintf(dir, sizeof(dir), "%s/comm", root);
	test_comm(dir);
	printf("ok: a comm launched by the environment: no MPI; CPU tensors refused\n");

	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	CHECK_EQ(system(cmd), 0);
	return 0;
}
