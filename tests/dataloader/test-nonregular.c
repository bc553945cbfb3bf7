/* test-nonregular -- paths that are not the regular file a dataset needs. Every entry
 * point that opens a path (rf_dataset_open_idx, both sides of rf_dataset_open_idx_pair,
 * rf_dataset_open_rfrec, rf_dataset_open_raw, the loader's reopen of a dataset's
 * file, rf_rec_writer_open's output and its OUT.tmp, and rf-pack's --images, --labels,
 * -o and --check; argv[1] is rf-pack) is given a FIFO with no writer (open() would
 * block forever), a directory, /dev/null, a Unix socket, an empty file and a
 * truncated file (rf-pack, a slow start, on a few of them). Each must be refused at once -- a watchdog (alarm) fails the test
 * on a hang instead of hanging -- with one message that starts with (or, from rf-pack,
 * names) the offending path and says what it found and what was expected; nothing
 * may be left behind: no new file in the directory, no file descriptor open, the
 * FIFO or directory itself untouched. */
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <dirent.h>

#include "test-loader-util.h"

static const char *g_step = "";
static char err[1024];

static void on_alarm(int sig)
{
	static const char m[] = "HANG: blocked in: ";
	(void)sig;
	if (write(2, m, sizeof(m) - 1) < 0 || write(2, g_step, strlen(g_step)) < 0 ||
	    write(2, "\n", 1) < 0)
		_exit(1);
	_exit(1);
}

/* Start a step: the watchdog fails the test if it takes 20 s (it takes microseconds). */
static void step(const char *what)
{
	g_step = what;
	alarm(20);
}

static unsigned count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	unsigned n = 0;

	CHECK(d);
	while ((e = readdir(d)))
		n++;
	closedir(d);
	return n;
}

static unsigned count_fds(void)
{
	return count_dir("/proc/self/fd");
}

struct special {
	const char *name;      /* for messages */
	const char *path;
	const char *found;     /* what the message must say it is */
};

static unsigned before_files, before_fds;

static void begin(const char *what)
{
	step(what);
	before_files = count_dir(t_dir);
	before_fds = count_fds();
	err[0] = 0;
}

/* The call refused: ret < 0, err starts with path and holds found (and expected),
 * and nothing was left behind. */
static void refused(int ret, const char *path, const char *found, const char *expected)
{
	alarm(0);
	if (ret >= 0 || strncmp(err, path, strlen(path)) != 0 || err[strlen(path)] != ':' ||
	    (found && !strstr(err, found)) || (expected && !strstr(err, expected)) ||
	    strchr(err, '\n')) {
		fprintf(stderr, "%s: returned %d (want < 0), message must start with \"%s:\" and "
			"say \"%s\" and \"%s\": '%s'\n", g_step, ret, path, found ? found : "",
			expected ? expected : "", err);
		exit(1);
	}
	if (count_dir(t_dir) != before_files) {
		fprintf(stderr, "%s: left a file behind in %s\n", g_step, t_dir);
		exit(1);
	}
	if (count_fds() != before_fds) {
		fprintf(stderr, "%s: leaked a file descriptor\n", g_step);
		exit(1);
	}
	printf("ok %-44s %s\n", g_step, err);
}

static uint8_t fill(uint64_t i)
{
	return (uint8_t)(i * 7);
}

static uint8_t fill_lab(uint64_t i)
{
	return (uint8_t)(i % 10);
}

/* ---- rf-pack, as a child with a time limit ----------------------------------------- */

static const char *rf_pack;
static char cerr[4096], pack_err[300];

static void rm_pack_err(void)
{
	unlink(pack_err);
}

static int run_pack(const char **args)
{
	const char *argv[16];
	int n = 0, st, fd;
	pid_t pid;

	argv[n++] = rf_pack;
	while (*args && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int e = open(pack_err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (e < 0)
			_exit(127);
		dup2(e, 2);
		alarm(20); /* a hung rf-pack dies of SIGALRM: the parent reports it */
		execv(rf_pack, (char *const *)argv);
		_exit(127);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	fd = open(pack_err, O_RDONLY);
	CHECK(fd >= 0);
	ssize_t r = read(fd, cerr, sizeof(cerr) - 1);
	cerr[r > 0 ? r : 0] = 0;
	close(fd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void pack_refused(const char *what, const char **args, const char *path, const char *found)
{
	unsigned nl = 0, files = count_dir(t_dir);
	int rc = run_pack(args);

	for (const char *p = cerr; *p; p++)
		nl += *p == '\n';
	if (rc != 1 || nl != 1 || !strstr(cerr, path) || (found && !strstr(cerr, found))) {
		fprintf(stderr, "rf-pack %s: exit %d (want 1%s), stderr must be one line naming %s "
			"and \"%s\": '%s'\n", what, rc, rc == 128 + SIGALRM ? ": it hung" : "",
			path, found ? found : "", cerr);
		exit(1);
	}
	if (count_dir(t_dir) != files) {
		fprintf(stderr, "rf-pack %s: left a file behind\n", what);
		exit(1);
	}
	printf("ok rf-pack %-36s %s", what, cerr);
}

int main(int argc, char **argv)
{
	struct rf_dataset ds;
	struct rf_raw_desc rd = { .record_bytes = 16 };
	struct rf_rec_layout lay = { .dtype = RF_DS_DT_U8, .ndim = 1, .shape = { 16 } };
	struct rf_rec_writer *w;
	const char *img, *lab, *rec, *raw, *empty, *fifo, *dir, *sock;
	struct sigaction sa;
	char name[160];
	int ret;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH-TO-rf-pack\n", argv[0]);
		return 1;
	}
	rf_pack = argv[1];
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* the scratch directory holds the files under test only: rf-pack's stderr goes
	 * beside it, so counting its entries sees what a call leaves */
	t_mkdir("nonregular");
	snprintf(pack_err, sizeof(pack_err), "%s.stderr", t_dir);
	atexit(rm_pack_err);
	{
		uint32_t di[3] = { 50, 4, 4 }, dl[1] = { 50 };
		size_t ni, nl;
		uint8_t *b = t_idx(0x08, 3, di, fill, &ni), *c = t_idx(0x08, 1, dl, fill_lab, &nl);
		img = t_path("img-idx3-ubyte");
		lab = t_path("lab-idx1-ubyte");
		t_write(img, b, ni);
		t_write(lab, c, nl);
		/* truncated copies: the header promises more than the file holds */
		t_write(t_path("img-trunc"), b, ni / 2);
		t_write(t_path("lab-trunc"), c, nl - 3);
		t_write_gz(t_path("img-trunc.gz"), b, ni);
		{
			size_t gn;
			uint8_t *g = t_read(t_path("img-trunc.gz"), &gn);
			t_write(t_path("img-trunc.gz"), g, gn / 2);
			free(g);
		}
		free(b);
		free(c);
	}
	rec = tl_make_rfrec("ok.rfrec", 40, 16, RF_LABEL_U8);
	{
		size_t n;
		uint8_t *b = t_read(rec, &n);
		t_write(t_path("trunc.rfrec"), b, 4096 + 300); /* inside the records */
		t_write(t_path("trunc-hdr.rfrec"), b, 4000);   /* inside the header */
		free(b);
	}
	raw = t_path("trunc.raw");
	{
		uint8_t b[16 * 5 + 7] = { 0 };
		t_write(raw, b, sizeof(b)); /* 5 records and 7 bytes of a sixth */
	}
	empty = t_path("empty");
	t_write(empty, "", 0);
	fifo = t_path("fifo");
	CHECK(mkfifo(fifo, 0644) == 0);
	dir = t_path("dir");
	CHECK(mkdir(dir, 0755) == 0);
	sock = t_path("sock");
	{
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		CHECK(s >= 0 && strlen(sock) < sizeof(a.sun_path));
		strcpy(a.sun_path, sock);
		CHECK(bind(s, (struct sockaddr *)&a, sizeof(a)) == 0);
		close(s); /* the socket file stays */
	}

	const struct special sp[] = {
		{ "FIFO", fifo, "FIFO" },
		{ "directory", dir, "directory" },
		{ "/dev/null", "/dev/null", "character device" },
		{ "socket", sock, "socket" },
		{ "empty file", empty, "empty" },
	};
	for (unsigned i = 0; i < sizeof(sp) / sizeof(sp[0]); i++) {
		const struct special *s = &sp[i];
		int special = i < 4;

		snprintf(name, sizeof(name), "open_idx(%s)", s->name);
		begin(name);
		ret = t_msg(rf_dataset_open_idx(&ds, s->path, 0, 0), err, sizeof(err));
		refused(ret, s->path, s->found, special ? "expected an IDX file" : "IDX header");

		snprintf(name, sizeof(name), "open_idx_pair(images = %s)", s->name);
		begin(name);
		ret = t_msg(rf_dataset_open_idx_pair(&ds, s->path, lab, 10, 0), err, sizeof(err));
		refused(ret, s->path, s->found, special ? "expected an IDX images file" : "IDX header");

		snprintf(name, sizeof(name), "open_idx_pair(labels = %s)", s->name);
		begin(name);
		ret = t_msg(rf_dataset_open_idx_pair(&ds, img, s->path, 10, 0), err, sizeof(err));
		refused(ret, s->path, s->found, special ? "expected an IDX labels file" : "IDX header");

		snprintf(name, sizeof(name), "open_rfrec(%s)", s->name);
		begin(name);
		ret = t_msg(rf_dataset_open_rfrec(&ds, s->path, 0), err, sizeof(err));
		refused(ret, s->path, s->found, special ? "expected an .rfrec file" : ".rfrec header");

		snprintf(name, sizeof(name), "open_raw(%s)", s->name);
		begin(name);
		ret = t_msg(rf_dataset_open_raw(&ds, s->path, &rd, 0), err, sizeof(err));
		refused(ret, s->path, s->found, special ? "expected a file of fixed-size records" :
			"16-byte records");

		if (!special || i == 2)
			continue; /* never aim a writer at /dev/null: the others stand for it */
		/* the output of a writer: refused with or without OVERWRITE, the thing left
		 * as it was, no OUT.tmp made */
		for (unsigned f = 0; f < 2; f++) {
			struct stat a, b;
			snprintf(name, sizeof(name), "rec_writer_open(%s%s)", s->name,
				 f ? ", overwrite" : "");
			CHECK(stat(s->path, &a) == 0);
			begin(name);
			w = NULL;
			ret = t_msg(rf_rec_writer_open(&w, s->path, &lay, f ? RF_REC_OVERWRITE : 0), err, sizeof(err));
			CHECK(!w);
			refused(ret, s->path, s->found, "expected a new .rfrec file");
			CHECK(stat(s->path, &b) == 0 && a.st_ino == b.st_ino && a.st_mode == b.st_mode);
			snprintf(name, sizeof(name), "%s.tmp", s->path);
			CHECK(!t_exists(name));
		}
	}

	/* OUT.tmp that is not a regular file: refused naming it, and left alone */
	{
		const char *out = t_path("new.rfrec"), *tmp = t_path("new.rfrec.tmp");
		for (int k = 0; k < 2; k++) {
			struct stat st;
			if (k == 0)
				CHECK(mkfifo(tmp, 0644) == 0);
			else
				CHECK(mkdir(tmp, 0755) == 0);
			begin(k == 0 ? "rec_writer_open(OUT.tmp is a FIFO)" :
			      "rec_writer_open(OUT.tmp is a directory)");
			w = NULL;
			ret = t_msg(rf_rec_writer_open(&w, out, &lay, RF_REC_OVERWRITE), err, sizeof(err));
			CHECK(!w);
			refused(ret, tmp, k == 0 ? "FIFO" : "directory", "expected a scratch file");
			CHECK(stat(tmp, &st) == 0 && (k == 0 ? S_ISFIFO(st.st_mode) : S_ISDIR(st.st_mode)));
			CHECK(!t_exists(out));
			CHECK((k == 0 ? unlink(tmp) : rmdir(tmp)) == 0);
		}
	}

	/* truncated files */
	begin("open_idx(truncated)");
	ret = t_msg(rf_dataset_open_idx(&ds, t_path("img-trunc"), 3, 0), err, sizeof(err));
	refused(ret, t_path("img-trunc"), "truncated", "expected");
	begin("open_idx_pair(labels truncated)");
	ret = t_msg(rf_dataset_open_idx_pair(&ds, img, t_path("lab-trunc"), 10, 0), err, sizeof(err));
	refused(ret, t_path("lab-trunc"), "truncated", "expected");
	begin("open_idx(gzip truncated)");
	ret = t_msg(rf_dataset_open_idx(&ds, t_path("img-trunc.gz"), 3, 0), err, sizeof(err));
	refused(ret, t_path("img-trunc.gz"), "truncated", "expected");
	begin("open_rfrec(truncated)");
	ret = t_msg(rf_dataset_open_rfrec(&ds, t_path("trunc.rfrec"), 0), err, sizeof(err));
	refused(ret, t_path("trunc.rfrec"), "truncated", "expected");
	begin("open_rfrec(truncated header)");
	ret = t_msg(rf_dataset_open_rfrec(&ds, t_path("trunc-hdr.rfrec"), 0), err, sizeof(err));
	refused(ret, t_path("trunc-hdr.rfrec"), "truncated", "expected");
	begin("open_raw(truncated)");
	ret = t_msg(rf_dataset_open_raw(&ds, raw, &rd, 0), err, sizeof(err));
	refused(ret, raw, "left over", "expected a multiple of 16");

	/* the loader reopens the dataset's file: a dataset whose descriptor is a FIFO, a
	 * directory or /dev/null (as a caller could build one) is refused, never blocks */
	{
		const struct special *ls[] = { &sp[0], &sp[1], &sp[2] };
		for (unsigned i = 0; i < 3; i++) {
			struct tl_env v;
			struct rf_loader *l = NULL;
			struct rf_loader_opts o = { .batch = 4, .buffered = i == 1 };
			const char *path = ls[i]->path;

			CHECK_OPEN(rf_dataset_open_rfrec(&ds, rec, 0), rf_last_error());
			tl_open(&v, 1);
			o.devices = v.dev;
			o.ndevices = 1;
			close(ds.src[0].fd);
			ds.src[0].fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
			CHECK(ds.src[0].fd >= 0);
			free(ds.src[0].path);
			ds.src[0].path = strdup(path);
			CHECK(ds.src[0].path);
			snprintf(name, sizeof(name), "loader_create(dataset file: %s)", ls[i]->name);
			begin(name);
			ret = t_msg(rf_loader_create(&l, v.e, &ds, &o), err, sizeof(err));
			CHECK(!l);
			refused(ret, path, ls[i]->found, "expected the file the dataset was opened from");
			tl_close(&v);
			rf_dataset_close(&ds);
		}
	}

	/* rf-pack end to end (a child: a hang is SIGALRM); the library calls above cover
	 * every kind, so a few cases do (each rf-pack start costs most of a second) */
	{
		const char *out = t_path("pack.rfrec");
		pack_refused("--images FIFO", (const char *[]){ "--images", fifo, "--labels", lab,
				"-o", out, NULL }, fifo, "FIFO");
		pack_refused("--labels directory", (const char *[]){ "--images", img, "--labels",
				dir, "-o", out, NULL }, dir, "directory");
		pack_refused("--check /dev/null", (const char *[]){ "--check", "/dev/null", NULL },
			     "/dev/null", "character device");
		pack_refused("-o FIFO --force", (const char *[]){ "--images", img, "--labels", lab,
				"-o", fifo, "--force", NULL }, fifo, "FIFO");
		pack_refused("-o socket --force", (const char *[]){ "--images", img, "--labels", lab,
				"-o", sock, "--force", NULL }, sock, "socket");
		pack_refused("--images truncated", (const char *[]){ "--images", t_path("img-trunc"),
				"--labels", lab, "-o", out, NULL }, t_path("img-trunc"), "truncated");
		CHECK(!t_exists(out));
	}
	{
		struct stat st;
		CHECK(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
		CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
	}
	printf("every entry point refused every non-regular, empty or truncated path at once\n");
	return 0;
}
