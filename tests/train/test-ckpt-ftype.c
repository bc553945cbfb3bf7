/* train-ckpt-ftype: checkpoints and files that are not regular files. rf_ckpt_load
 * and rf_ckpt_probe of a FIFO used to block in open() until a writer came, and
 * rf_ckpt_save blocked the same way on a FIFO at PATH.tmp and would rename over a
 * FIFO or a device node at PATH. Here load and probe refuse a FIFO, a directory and
 * a character device at once (-ENOEXEC, the message saying what the file is), and an
 * empty or truncated file with a message naming it; save refuses a FIFO, a device
 * node (one made with mknod when root, never the system's /dev/null then; else
 * /dev/null, which a non-root process cannot replace) and a directory at PATH, and a FIFO at PATH.tmp, leaving each as
 * it was and the previous checkpoint loadable. A SIGALRM after 20 s fails the test
 * instead of letting a blocked open() hang it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "test-ckpt.h"
#include "../test-util.h"

#define N 1000

static char dir[256];
static const char *step = "start";
static float w[N], back[N];

static void on_alarm(int sig)
{
	static const char msg[] = "train-ckpt-ftype: hung (20 s), in: ";
	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0 || write(2, step, strlen(step)) < 0 ||
	    write(2, "\n", 1) < 0)
		_exit(1);
	_exit(1);
}

/* DIR/name, in one of 16 static buffers (each call takes the next; fewer than 16 here) */
static const char *at(const char *name)
{
	static char p[16][320];
	static unsigned k;
	CHECK(k < 16);
	char *s = p[k++];
	snprintf(s, 320, "%s/%s", dir, name);
	return s;
}

static struct rf_ckpt_blob blob(float *data)
{
	struct rf_ckpt_blob b = { "w", RF_CKPT_F32, 1, { N }, data, N * sizeof(float) };
	return b;
}

static struct rf_ckpt_meta meta(uint64_t epoch)
{
	struct rf_ckpt_meta m;
	memset(&m, 0, sizeof(m));
	snprintf(m.model, sizeof(m.model), "mlp");
	m.epoch = epoch;
	m.lr = 0.1;
	m.batch_size = 256;
	return m;
}

static int load(const char *path, char *err, size_t len)
{
	struct rf_ckpt_meta m = meta(0);
	struct rf_ckpt_blob b = blob(back);
	alarm(20);
	int ret = ckpt_load(NULL, path, &m, &b, 1, err, len);
	alarm(0);
	return ret;
}

static int save(const char *path, uint64_t epoch, char *err, size_t len)
{
	struct rf_ckpt_meta m = meta(epoch);
	struct rf_ckpt_blob b = blob(w);
	alarm(20);
	int ret = ckpt_save(NULL, path, &m, &b, 1, err, len);
	alarm(0);
	return ret;
}

/* the message names the path and says `what` */
static void says(const char *err, const char *path, const char *what)
{
	if (!strstr(err, path) || !strstr(err, what)) {
		fprintf(stderr, "message '%s': want '%s' and '%s'\n", err, path, what);
		exit(1);
	}
	printf("  ok: %s\n", err);
}

static void previous_intact(const char *path, uint64_t epoch)
{
	struct rf_ckpt_meta m = meta(0);
	struct rf_ckpt_blob b = blob(back);
	char err[512];
	memset(back, 0, sizeof(back));
	CHECK_OK(ckpt_load(NULL, path, &m, &b, 1, err, sizeof(err)));
	CHECK_EQ(m.epoch, epoch);
	CHECK(memcmp(back, w, sizeof(w)) == 0);
}

int main(void)
{
	char err[512];
	struct stat st;
	int ret;

	signal(SIGALRM, on_alarm);
	snprintf(dir, sizeof(dir), "%s/rf-ckpt-ftype.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	CHECK(mkdtemp(dir));
	for (int i = 0; i < N; i++)
		w[i] = (float)i * 0.5f - 3.0f;
	const char *good = at("good.ckpt");
	CHECK_OK(save(good, 1, err, sizeof(err)));
	previous_intact(good, 1);

	/* ---- load and probe ---- */
	printf("load/probe:\n");
	const char *fifo = at("fifo");
	CHECK(mkfifo(fifo, 0644) == 0);
	const char *sub = at("sub");
	CHECK(mkdir(sub, 0755) == 0);
	struct { const char *path, *what; } odd[] = {
		{ fifo, "FIFO" }, { sub, "directory" }, { "/dev/null", "character device" },
	};
	for (unsigned i = 0; i < 3; i++) {
		struct rf_ckpt_meta m;
		step = odd[i].path;
		ret = load(odd[i].path, err, sizeof(err));
		CHECK_EQ(ret, -ENOEXEC);
		says(err, odd[i].path, odd[i].what);
		alarm(20);
		ret = ckpt_probe(odd[i].path, &m, err, sizeof(err));
		alarm(0);
		CHECK_EQ(ret, -ENOEXEC);
		says(err, odd[i].path, odd[i].what);
	}
	const char *empty = at("empty.ckpt"), *cut = at("cut.ckpt");
	{
		int fd = open(empty, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		CHECK(fd >= 0);
		close(fd);
		FILE *f = fopen(good, "rb"), *g = fopen(cut, "wb");
		char buf[600];
		CHECK(f && g && fread(buf, 1, sizeof(buf), f) == sizeof(buf));
		CHECK(fwrite(buf, 1, sizeof(buf), g) == sizeof(buf));
		fclose(f);
		fclose(g);
	}
	step = empty;
	ret = load(empty, err, sizeof(err));
	CHECK(ret < 0);
	says(err, empty, "empty");
	step = cut;
	ret = load(cut, err, sizeof(err));
	CHECK(ret < 0);
	says(err, cut, "truncated");

	/* ---- save ---- */
	printf("save:\n");
	step = "save to a FIFO";
	ret = save(fifo, 2, err, sizeof(err));
	CHECK_EQ(ret, -EINVAL);
	says(err, fifo, "is a FIFO");
	CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
	CHECK(access(at("fifo.tmp"), F_OK) < 0);

	/* Root could rename over /dev/null itself if save were wrong: root uses a node of
	 * its own, and leaves the case out where it cannot make one. */
	const char *dev = "/dev/null";
	const char *mine = at("null");
	if (geteuid() == 0)
		dev = mknod(mine, S_IFCHR | 0666, makedev(1, 3)) == 0 ? mine : NULL;
	if (dev) {
		struct stat before;
		CHECK(stat(dev, &before) == 0 && S_ISCHR(before.st_mode));
		step = "save to a device node";
		ret = save(dev, 2, err, sizeof(err));
		CHECK_EQ(ret, -EINVAL);
		says(err, dev, "is a character device");
		CHECK(stat(dev, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == before.st_rdev &&
		      st.st_ino == before.st_ino);
	} else {
		printf("  (save to a device node not run: root without mknod)\n");
	}

	step = "save to a directory";
	ret = save(sub, 2, err, sizeof(err));
	CHECK_EQ(ret, -EISDIR);
	says(err, sub, "is a directory");
	CHECK(stat(sub, &st) == 0 && S_ISDIR(st.st_mode));

	/* a FIFO squatting on PATH.tmp: refused without blocking, both left alone */
	const char *gtmp = at("good.ckpt.tmp");
	CHECK(mkfifo(gtmp, 0644) == 0);
	step = "save with PATH.tmp a FIFO";
	ret = save(good, 2, err, sizeof(err));
	CHECK_EQ(ret, -EINVAL);
	says(err, gtmp, "a FIFO");
	CHECK(lstat(gtmp, &st) == 0 && S_ISFIFO(st.st_mode));
	previous_intact(good, 1);
	CHECK(unlink(gtmp) == 0);
	/* and after all that, saves and loads still work */
	CHECK_OK(save(good, 3, err, sizeof(err)));
	previous_intact(good, 3);

	unlink(good);
	unlink(fifo);
	unlink(empty);
	unlink(cut);
	if (dev && strcmp(dev, "/dev/null"))
		unlink(dev);
	rmdir(sub);
	rmdir(dir);
	printf("train-ckpt-ftype: ok\n");
	return 0;
}
