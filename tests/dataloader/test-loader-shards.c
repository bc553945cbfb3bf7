/* test-loader-shards -- the loader over several WebDataset shards opened as one
 * dataset (rf_dataset_open_wds_list): 23 JPEGs made here (TurboJPEG; 8x8 to 96x96,
 * flat and noisy, so records of a few hundred bytes to over a page) cut into three
 * shards -- the last ending right after its last image, so that image's read aligned
 * up to 4096 passes the end of the file -- and one shard of the same samples in the
 * same order. An epoch of the set gives the bits of an epoch of the one shard, batch
 * for batch (x and labels): shuffled and in file order (where neighbours in the file
 * share a read, but never two shards), from disk with O_DIRECT (where the filesystem
 * takes it) and buffered, and from memory (each shard loaded at its place). A shard
 * replaced after the open: the loader reads the file the dataset opened (the same bits);
 * where it must reopen by the path (a child not root, the file's mode 0) it finds
 * another file and refuses with -ESTALE naming the shard. A shard cut short after the
 * open fails the batch of its record with a message naming that shard and the offset
 * in it, while the other batches are served. */
#include <sys/wait.h>
#include <turbojpeg.h>

#include "test-loader-util.h"
#include "wds-test.h"

#define NS 23
#define S 16
static struct w_sample smp[NS];
static const size_t cut[4] = { 0, 8, 15, NS };

/* Sample i's JPEG: w x h, noisy (large) or flat with a gradient. */
static void make_samples(void)
{
	tjhandle t = tjInitCompress();
	unsigned long long seed = 5;

	CHECK(t);
	for (size_t i = 0; i < NS; i++) {
		unsigned w = 8 + (unsigned)(i * 37 % 89), h = 8 + (unsigned)(i * 53 % 89);
		uint8_t *px = malloc((size_t)w * h * 3), *jb = NULL;
		unsigned long js = 0;
		CHECK(px);
		for (size_t k = 0; k < (size_t)w * h * 3; k++)
			px[k] = i % 3 == 1 ? (uint8_t)t_splitmix64(&seed)
					   : (uint8_t)(40 * (i % 5) + k % 3 * 50 + (k / 3 % w) * 20 / w);
		CHECK(tjCompress2(t, px, (int)w, 0, (int)h, TJPF_RGB, &jb, &js, TJSAMP_420, 95, 0) == 0);
		smp[i].img = malloc(js);
		CHECK(smp[i].img);
		memcpy(smp[i].img, jb, js);
		smp[i].n = js;
		smp[i].label = (int32_t)(i % 5);
		tjFree(jb);
		free(px);
	}
	tjDestroy(t);
}

struct epoch_out {
	uint8_t *x;       /* the batches' x bytes, back to back */
	int32_t *y;
	size_t nx;
	unsigned failed;  /* batches that failed */
	char msg[512];    /* the last failed batch's message */
	int direct;       /* the loader read with O_DIRECT */
};

static void epoch(struct tl_env *v, const struct rf_dataset *ds, struct rf_loader_opts o,
		  struct epoch_out *e)
{
	struct rf_loader *l;
	struct rf_batch b;
	struct rf_loader_stats st;
	size_t row = 3 * S * S * sizeof(float), pos = 0;
	int r;

	memset(e, 0, sizeof(*e));
	o.devices = v->dev;
	o.ndevices = 1;
	o.host = v->dev[0];
	CHECK_OPEN(rf_loader_create(&l, v->e, ds, &o), rf_last_error());
	e->x = calloc(ds->count, row);
	e->y = calloc(ds->count, sizeof(int32_t));
	CHECK(e->x && e->y);
	while ((r = rf_loader_next(l, &b)) == 1) {
		if (rf_loader_wait(l, &b) < 0) {
			snprintf(e->msg, sizeof(e->msg), "%s", rf_loader_batch_error(l, &b));
			e->failed++;
			pos += b.n;
			continue;
		}
		CHECK(b.x[0]->dtype == RF_F32);
		memcpy(e->x + pos * row, b.x[0]->data, b.n * row);
		memcpy(e->y + pos, b.y[0]->data, b.n * sizeof(int32_t));
		pos += b.n;
	}
	CHECK(r == 0);
	CHECK_EQ(pos, ds->count);
	e->nx = pos * row;
	rf_loader_get_stats(l, &st);
	e->direct = st.direct;
	CHECK_EQ(st.mode, o.in_memory ? 0 : 2);
	rf_loader_destroy(l);
}

static void epoch_free(struct epoch_out *e)
{
	free(e->x);
	free(e->y);
}

static void same(const struct epoch_out *a, const struct epoch_out *b)
{
	CHECK(!a->failed && !b->failed);
	CHECK_EQ(a->nx, b->nx);
	CHECK(!memcmp(a->x, b->x, a->nx));
	CHECK(!memcmp(a->y, b->y, NS * sizeof(int32_t)));
}

/* In a child that is not root (nobody, if it was), the loader's reopen of ds's shard
 * whose file is named path now another: -ESTALE naming it. Its exit status: 0, 1, or
 * 77 when there is no user to drop to. */
static int estale(const struct rf_dataset *ds, const char *path)
{
	unsigned k = 0;
	pid_t pid;
	int st;

#if defined(__SANITIZE_THREAD__)
	(void)ds;
	(void)path;
	(void)pid;
	(void)st;
	(void)k;
	return T_SKIP;  /* ThreadSanitizer refuses a fork after threads (the loaders') */
#endif
	while (strcmp(ds->parts[k].path, path))
		k++;
	CHECK(fchmod(ds->parts[k].fd, 0) == 0);   /* the opened file: no reopen through /proc */
	CHECK(chmod(t_dir, 0755) == 0);
	fflush(NULL);
	if ((pid = fork()) == 0) {
		struct tl_env v;
		struct rf_loader *l = NULL;
		struct rf_loader_opts o = { .batch = 5, .image_size = S, .workers = 1 };
		char err[1024];
		if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
			_exit(T_SKIP);
		tl_open(&v, 1);
		o.devices = v.dev;
		o.ndevices = 1;
		EXPECT_FAIL(t_msg(rf_loader_create(&l, v.e, ds, &o), err, sizeof(err)), -ESTALE,
			    err, path, "another file than the one the dataset was opened from");
		printf("refused: %s\n", err);
		fflush(NULL);
		_exit(l == NULL ? 0 : 1);
	}
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	CHECK(chmod(t_dir, 0700) == 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(void)
{
	struct tl_env v;
	struct rf_dataset one, set;
	struct rf_loader_opts base = { .batch = 5, .seed = 3, .hflip = 1, .image_size = S,
				       .workers = 2 };
	struct epoch_out ref, got;
	const char *sh[3];

	t_mkdir("loader-shards");
	make_samples();
	const char *path1 = w_shard(t_path("one.tar"), smp, 0, NS, 0);
	for (int k = 0; k < 3; k++) {
		char name[32];
		snprintf(name, sizeof(name), "sh-%d.tar", k);
		sh[k] = w_shard(t_path(name), smp, cut[k], cut[k + 1] - cut[k], k == 2);
	}
	CHECK_OPEN(rf_dataset_open_wds(&one, path1, 0, 0), rf_last_error());
	CHECK_OPEN(rf_dataset_open_wds_list(&set, sh, 3, 0, RF_DS_VERIFY), rf_last_error());
	CHECK(set.nparts == 3 && set.count == NS && set.num_classes == 5);
	CHECK(set.parts[2].size % 4096 != 0);
	tl_open(&v, 1);

	/* shuffled and in file order: disk (O_DIRECT, buffered) and memory */
	for (int ns = 0; ns < 2; ns++) {
		struct rf_loader_opts o = base;
		o.no_shuffle = ns;
		epoch(&v, &one, o, &ref);
		CHECK(!ref.failed);
		epoch(&v, &set, o, &got);
		printf("%s, disk (%s): the same bits\n", ns ? "file order" : "shuffled",
		       got.direct ? "O_DIRECT" : "buffered: no O_DIRECT here");
		same(&ref, &got);
		epoch_free(&got);
		o.buffered = 1;
		epoch(&v, &set, o, &got);
		CHECK(!got.direct);
		same(&ref, &got);
		epoch_free(&got);
		o.buffered = 0;
		o.in_memory = 1;
		o.prefetch = 2;
		epoch(&v, &set, o, &got);
		same(&ref, &got);
		epoch_free(&got);
		epoch(&v, &one, o, &got);
		same(&ref, &got);
		epoch_free(&got);
		epoch_free(&ref);
	}
	/* another epoch of the set: another order */
	{
		struct rf_loader *l;
		uint64_t a[NS], b[NS];
		struct rf_loader_opts o = base;
		o.devices = v.dev;
		o.ndevices = 1;
		CHECK_OPEN(rf_loader_create(&l, v.e, &set, &o), rf_last_error());
		CHECK(rf_loader_order(l, 0, a, NS) == 0 && rf_loader_order(l, 1, b, NS) == 0);
		CHECK(memcmp(a, b, sizeof(a)));
		rf_loader_destroy(l);
	}
	rf_dataset_close(&set);

	/* a shard replaced after the open (renamed over): the loader reads the file the
	 * dataset opened, through /proc/self/fd, and serves its bits. Where that reopen
	 * is refused (the opened file's mode made 0, in a child that is not root) it goes
	 * by the path, finds another file there and refuses it: -ESTALE naming the shard. */
	{
		const char *c[3] = { t_path("r-0.tar"), t_path("r-1.tar"), t_path("r-2.tar") };
		struct rf_loader_opts o = base;
		for (int k = 0; k < 3; k++)
			w_shard(c[k], smp, cut[k], cut[k + 1] - cut[k], k == 2);
		CHECK_OPEN(rf_dataset_open_wds_list(&set, c, 3, 0, 0), rf_last_error());
		w_shard(t_path("r-new.tar"), smp, 0, 4, 0);
		CHECK(rename(t_path("r-new.tar"), c[1]) == 0);
		epoch(&v, &one, o, &ref);
		epoch(&v, &set, o, &got);
		same(&ref, &got);
		epoch_free(&got);
		epoch_free(&ref);
		int code = estale(&set, c[1]);
		CHECK(code == 0 || code == T_SKIP);
		if (code == T_SKIP)
			printf("-ESTALE not checked: no user to drop to (or ThreadSanitizer, which "
			       "refuses the fork)\n");
		rf_dataset_close(&set);
	}

	/* a shard cut short after the open: its batches fail naming it and the offset */
	{
		const char *c[3] = { t_path("t-0.tar"), t_path("t-1.tar"), t_path("t-2.tar") };
		struct rf_loader_opts o = base;
		struct rf_dataset_loc loc;
		unsigned part;
		uint64_t real;
		char want[96];
		for (int k = 0; k < 3; k++)
			w_shard(c[k], smp, cut[k], cut[k + 1] - cut[k], k == 2);
		CHECK_OPEN(rf_dataset_open_wds_list(&set, c, 3, 0, 0), rf_last_error());
		rf_dataset_payload_loc(&set, cut[2] - 1, &loc);   /* shard 1's last image */
		CHECK_OK(rf_dataset_part_of(&set, loc.offset, loc.length, &part, &real));
		CHECK_EQ(part, 1);
		CHECK(truncate(c[1], (off_t)real) == 0);
		o.no_shuffle = 1;
		o.batch = 1;
		epoch(&v, &set, o, &got);
		CHECK_EQ(got.failed, 1);
		snprintf(want, sizeof(want), "offset %" PRIu64 ": short read for record %zu",
			 real / 4096 * 4096, cut[2] - 1);
		CHECK(strstr(got.msg, c[1]) && strstr(got.msg, want));
		printf("failed batch: %s\n", got.msg);
		epoch_free(&got);
		rf_dataset_close(&set);
	}
	rf_dataset_close(&one);
	tl_close(&v);
	for (size_t i = 0; i < NS; i++)
		free(smp[i].img);
	printf("ok\n");
	return 0;
}
