/* test-loader-errors -- failures surface as errors that name the file and offset,
 * never a crash and never a silently short epoch. At create time: bad options, a
 * dataset too small for one batch with drop_last, an IDX label file truncated
 * between dataset open and loader create, and bad files refused by the dataset open
 * (named in its message: wrong magic, missing file, image/label count mismatch). After create: the record file is truncated under the
 * loader (small-record chunks and large-record reads): the batches whose records lie
 * past the new end fail with -EIO (poisoned tensors; rf_loader_wait returns it;
 * rf_loader_batch_error and rf_loader_last_error name the file and the offset), all
 * other batches are correct, and once the file is restored the next epoch is
 * complete again (the loader clears its slots' poison). A label outside
 * [0, num_classes) fails its batch with -ERANGE naming the record. */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>

#include "test-loader-util.h"

/* rf_loader_destroy and rf_loader_seek off the reactor thread, and destroy inside a
 * done callback: refused, the loader left as it was (it freed itself under its reads
 * in flight: a use-after-free) */
static struct rf_loader *g_l;
static int g_seek;
static char g_msg[512], g_cb_msg[512];

static void *off_reactor(void *p)
{
	(void)p;
	rf_loader_destroy(g_l);
	snprintf(g_msg, sizeof(g_msg), "%s", rf_last_error());
	g_seek = rf_loader_seek(g_l, 0, 0);
	return NULL;
}

static int nop(void *p)
{
	(void)p;
	return 0;
}

static void destroy_in_done(void *ctx, int status)
{
	(void)ctx;
	(void)status;
	rf_loader_destroy(g_l);
	snprintf(g_cb_msg, sizeof(g_cb_msg), "%s", rf_last_error());
}

static void refused_calls(struct tl_env *v, const char *small, struct rf_loader_opts o)
{
	struct rf_dataset ds;
	struct rf_batch b;
	struct rf_var *x;
	pthread_t t;

	CHECK_OPEN(rf_dataset_open_rfrec(&ds, small, 0), rf_last_error());
	o.batch = 100;
	CHECK_OPEN(rf_loader_create(&g_l, v->e, &ds, &o), rf_last_error());
	for (int i = 0; i < 4; i++)
		CHECK(rf_loader_next(g_l, &b) == 1);        /* reads and gathers in flight */
	CHECK(pthread_create(&t, NULL, off_reactor, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	printf("destroy off the reactor: %s\n", g_msg);
	CHECK(strstr(g_msg, "rf_loader_destroy called from a thread other than"));
	CHECK_EQ(g_seek, -EDEADLK);
	CHECK(rf_var_create(v->e, "x", &x) == 0);
	CHECK(rf_engine_push(v->e, &(struct rf_op_desc){ .fn = nop, .done = destroy_in_done,
							.writes = &x, .nwrites = 1,
							.name = "cb" }) == 0);
	CHECK(rf_engine_wait_all(v->e) == 0);
	printf("destroy in a done callback: %s\n", g_cb_msg);
	CHECK(strstr(g_cb_msg, "rf_loader_destroy called from inside"));
	CHECK(rf_loader_wait(g_l, &b) == 0);            /* the loader goes on */
	CHECK_EQ(rf_loader_wait(g_l, NULL), -EINVAL);
	CHECK(strstr(rf_last_error(), "rf_loader_wait: b is NULL"));
	CHECK_EQ(rf_loader_wait(NULL, &b), -EINVAL);
	CHECK_EQ(rf_loader_next(NULL, &b), -EINVAL);
	CHECK(strstr(rf_last_error(), "rf_loader_next: l is NULL"));
	CHECK_EQ(rf_loader_order(g_l, 0, NULL, 5), -EINVAL);
	CHECK_EQ(rf_loader_order(g_l, 0, (uint64_t[1]){ 0 }, ds.count + 1), -ERANGE);
	CHECK(strstr(rf_last_error(), "more than the 3000 records"));
	rf_var_destroy(v->e, x, NULL, NULL, NULL);
	rf_loader_destroy(g_l);                         /* on the reactor: freed */
	rf_dataset_close(&ds);
	/* a dataset opened into NULL */
	CHECK_EQ(rf_dataset_open_rfrec(NULL, small, 0), -EINVAL);
	CHECK(strstr(rf_last_error(), "rf_dataset_open_rfrec: ds is NULL"));
	CHECK_EQ(rf_dataset_open_idx_pair(NULL, small, small, 10, 0), -EINVAL);
	CHECK_EQ(rf_dataset_open_file(NULL, small, 0), -EINVAL);
	memset(&ds, 0x5a, sizeof(ds));                  /* what a stack struct holds */
	CHECK_EQ(rf_dataset_open_rfrec(&ds, small, 0x100), -EINVAL);
	CHECK(strstr(rf_last_error(), "bits 0x100 are no RF_DS_* flag"));
	rf_dataset_close(&ds);                          /* refused: zeroed, a no-op */
	CHECK_EQ(rf_dataset_verify(NULL), -EINVAL);
	CHECK(strstr(rf_last_error(), "rf_dataset_verify: ds is NULL"));
	/* scale, mean, std: NaN or infinite gave batches of NaN */
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, small, 0), rf_last_error());
	{
		struct rf_loader *l2 = NULL;
		struct rf_loader_opts bad = o;
		bad.std = NAN;
		CHECK_EQ(rf_loader_create(&l2, v->e, &ds, &bad), -EINVAL);
		CHECK(strstr(rf_last_error(), "expected finite numbers"));
		bad.std = 0;
		bad.scale = INFINITY;
		CHECK_EQ(rf_loader_create(&l2, v->e, &ds, &bad), -EINVAL);
		bad.scale = 0;
		bad.devices = NULL;
		CHECK_EQ(rf_loader_create(&l2, v->e, &ds, &bad), -EINVAL);
		CHECK(strstr(rf_last_error(), "devices NULL"));
	}
	rf_dataset_close(&ds);
	/* windowed chunks past a read's 32-bit length, on a sparse file of 4.5 GiB: refused
	 * at create (the reads were cut short), naming chunk_bytes; 512 KiB ones are fine */
	{
		const char *big = t_path("big.raw");
		struct rf_loader *l2 = NULL;
		struct rf_loader_opts w = o;
		int fd = open(big, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
		CHECK(fd >= 0 && ftruncate(fd, (off_t)784 * 6163058) == 0); /* 4.5 GiB, no blocks */
		close(fd);
		CHECK_OPEN(rf_dataset_open_raw(&ds, big, &(struct rf_raw_desc){ .record_bytes = 784 },
					       0), rf_last_error());
		w.batch = 64;
		w.order = RF_LOADER_ORDER_WINDOWED;
		w.chunk_bytes = (size_t)8 << 30;
		CHECK_EQ(rf_loader_create(&l2, v->e, &ds, &w), -EINVAL);
		CHECK(strstr(rf_last_error(), "chunk_bytes 8589934592") &&
		      strstr(rf_last_error(), "at most 4 GiB - 1"));
		w.chunk_bytes = 512 << 10;
		CHECK_OPEN(rf_loader_create(&l2, v->e, &ds, &w), rf_last_error());
		rf_loader_destroy(l2);
		rf_dataset_close(&ds);
		unlink(big);
	}
	printf("refused: destroy and seek off the reactor, destroy in a callback, NULLs, "
	       "chunks past 4 GiB\n");
}

static void truncated_case(const char *path, uint64_t count, uint32_t P, struct rf_loader_opts o,
			   int mode)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l;
	struct tl_run r;
	struct rf_loader_stats st;
	size_t fsz;
	uint8_t *orig = t_read(path, &fsz);
	uint64_t failed = 0;

	(void)P;
	tl_open(&v, 1);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, 0), rf_last_error());
	tl_run_init(&r, &ds);
	o.devices = v.dev;
	o.ndevices = 1;
	CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
	rf_loader_get_stats(l, &st);
	CHECK_EQ(st.mode, mode);

	/* cut the file in the middle of the data area */
	CHECK(truncate(path, 4096 + (off_t)(ds.src[0].stride * count / 2)) == 0);
	tl_epoch(&v, l, &r, &failed, path);
	printf("mode %d: %" PRIu64 " of %" PRIu64 " batches failed, %" PRIu64 " records served; "
	       "last error: %s\n", mode, failed, r.nb, r.records, rf_loader_last_error(l));
	CHECK(failed > 0); /* shuffled: most batches hold a record past the cut */
	CHECK(strstr(rf_loader_last_error(l), t_base(path)));
	CHECK(strstr(rf_loader_last_error(l), "short read"));
	for (uint64_t i = 0; i < count; i++)
		CHECK(r.seen[i] <= 1);
	/* served + lost = count: nothing silently missing */
	{
		uint64_t lost = 0;
		for (uint64_t t = 0; t < r.nb; t++)
			if (!r.b[t].checked)
				lost += r.b[t].b.n;
		CHECK_EQ(r.records + lost, count);
	}
	/* restore: the next epoch is complete */
	t_write(path, orig, fsz);
	tl_epoch(&v, l, &r, &failed, path);
	CHECK_EQ(failed, 0);
	tl_expect_complete(&r);

	/* a failing batch, waited on directly */
	CHECK(truncate(path, 4096) == 0);
	{
		struct rf_batch b;
		int ret;
		CHECK(rf_loader_next(l, &b) == 1);
		ret = rf_loader_wait(l, &b);
		CHECK_EQ(ret, -EIO);
		CHECK(strstr(rf_loader_batch_error(l, &b), t_base(path)));
		CHECK(strstr(rf_loader_batch_error(l, &b), "offset"));
		printf("waited batch: %d: %s\n", ret, rf_loader_batch_error(l, &b));
	}
	t_write(path, orig, fsz);
	rf_engine_wait_all(v.e);
	rf_loader_destroy(l);
	tl_run_free(&r);
	rf_dataset_close(&ds);
	tl_close(&v);
	free(orig);
}

int main(void)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l = NULL;
	struct rf_loader_opts o = { 0 };
	char err[512] = "";
	const char *small, *large;
	int ret;

	t_mkdir("loader-errors");
	small = tl_make_rfrec("small.rfrec", 3000, 100, RF_LABEL_I32);
	large = tl_make_rfrec("large.rfrec", 64, 70000, RF_LABEL_I32);

	/* ---- create-time errors ---- */
	tl_open(&v, 1);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, small, 0), rf_last_error());
	o.devices = v.dev;
	o.ndevices = 1;
	ret = t_msg(rf_loader_create(&l, v.e, &ds, &o), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "batch");
	o.batch = 5000;
	o.drop_last = 1;
	ret = t_msg(rf_loader_create(&l, v.e, &ds, &o), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "small.rfrec", "3000 records");
	o.drop_last = 0;
	o.batch = 10;
	o.ndevices = 0;
	ret = t_msg(rf_loader_create(&l, v.e, &ds, &o), err, sizeof(err));
	EXPECT_FAIL(ret, -EINVAL, err, "devices");
	o.ndevices = 1;
	rf_dataset_close(&ds);
	refused_calls(&v, small, o);

	/* IDX labels truncated between dataset open and loader create */
	{
		uint32_t di[3] = { 100, 4, 4 }, dl[1] = { 100 };
		size_t ni, nl;
		uint8_t *img = t_idx(0x08, 3, di, NULL, &ni), *lab = t_idx(0x08, 1, dl, NULL, &nl);
		t_write(t_path("i-idx3-ubyte"), img, ni);
		t_write(t_path("l-idx1-ubyte"), lab, nl);
		CHECK_OPEN(rf_dataset_open_idx_pair(&ds, t_path("i-idx3-ubyte"), t_path("l-idx1-ubyte"),
						    10, 0), rf_last_error());
		CHECK(truncate(t_path("l-idx1-ubyte"), 50) == 0);
		ret = t_msg(rf_loader_create(&l, v.e, &ds, &o), err, sizeof(err));
		EXPECT_FAIL(ret, -EIO, err, "l-idx1-ubyte", "offset 50");
		printf("create: %s\n", err);
		rf_dataset_close(&ds);
		free(img);
		free(lab);
	}
	/* bad files at open are the dataset's to refuse, by name */
	t_write(t_path("junk.rfrec"), "not a record file at all", 24);
	ret = t_msg(rf_dataset_open_rfrec(&ds, t_path("junk.rfrec"), 0), err, sizeof(err));
	EXPECT_FAIL(ret, 0, err, "junk.rfrec");
	ret = t_msg(rf_dataset_open_rfrec(&ds, t_path("missing.rfrec"), 0), err, sizeof(err));
	EXPECT_FAIL(ret, -ENOENT, err, "missing.rfrec");
	{
		/* IDX images and labels whose counts disagree */
		uint32_t di[3] = { 100, 4, 4 }, dl[1] = { 90 };
		size_t ni, nl;
		uint8_t *img = t_idx(0x08, 3, di, NULL, &ni), *lab = t_idx(0x08, 1, dl, NULL, &nl);
		t_write(t_path("c-idx3-ubyte"), img, ni);
		t_write(t_path("c-idx1-ubyte"), lab, nl);
		ret = t_msg(rf_dataset_open_idx_pair(&ds, t_path("c-idx3-ubyte"), t_path("c-idx1-ubyte"), 10,
					       0), err, sizeof(err));
		EXPECT_FAIL(ret, 0, err, "idx", "100", "90");
		printf("count mismatch: %s\n", err);
		free(img);
		free(lab);
	}

	/* a label out of range (the file's CRC is only checked with RF_DS_VERIFY) */
	{
		const char *p = tl_make_rfrec("badlabel.rfrec", 200, 100, RF_LABEL_U8);
		uint8_t bad = 99;
		struct rf_batch b;
		int seen_fail = 0;
		/* record 37: payload 100 bytes then the u8 label */
		t_poke(p, 4096 + 37 * 101 + 100, &bad, 1);
		CHECK_OPEN(rf_dataset_open_rfrec(&ds, p, 0), rf_last_error());
		o.batch = 200;
		o.no_shuffle = 1;
		CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
		CHECK(rf_loader_next(l, &b) == 1);
		ret = rf_loader_wait(l, &b);
		CHECK_EQ(ret, -ERANGE);
		seen_fail = strstr(rf_loader_batch_error(l, &b), "record 37") != NULL;
		printf("bad label: %s\n", rf_loader_batch_error(l, &b));
		CHECK(seen_fail);
		CHECK(strstr(rf_loader_batch_error(l, &b), "label 99"));
		rf_engine_wait_all(v.e);
		rf_loader_destroy(l);
		rf_dataset_close(&ds);
		o.no_shuffle = 0;
	}
	tl_close(&v);

	/* ---- truncated under the loader ---- */
	o = (struct rf_loader_opts){ 0 };
	o.batch = 40;
	o.seed = 3;
	o.chunk_bytes = 8 << 10;
	o.window_chunks = 2;
	o.order = RF_LOADER_ORDER_WINDOWED; /* the mode under test: chunks in windows */
	truncated_case(small, 3000, 100, o, 1);
	o.batch = 8;
	truncated_case(large, 64, 70000, o, 2);
	return 0;
}
