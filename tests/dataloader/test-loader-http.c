/* test-loader-http -- the loader reading an .rfrec over HTTP Range requests (driven
 * by test-loader-http.py, which starts the servers). Modes:
 *   make DIR            write DIR/small.rfrec (3000 records of 100 bytes: read in
 *                       chunk spans) and DIR/large.rfrec (60 x 70,000 bytes: one
 *                       request per record)
 *   same BASEURL DIR [windowed]
 *                       for each file: the dataset opened from BASEURL/NAME has the
 *                       local file's header fields; a loader over it (2 devices, 4
 *                       connections) serves two epochs in which every row has the
 *                       local record's bytes and label, every record once, in the
 *                       order a loader over the local file gives (same seed)
 *   fail URL FILE WHAT  the dataset opens but every batch fails; each failure's
 *                       message names URL, a byte range and WHAT (FILE: the same
 *                       file, local, for the checker's reference)
 *   openfail URL WHAT   opening fails with a message naming URL and WHAT */
#include "test-loader-util.h"

static void make(const char *dir)
{
	snprintf(t_dir, sizeof(t_dir), "%s", dir);
	tl_make_rfrec("small.rfrec", 3000, 100, RF_LABEL_U8);
	tl_make_rfrec("large.rfrec", 60, 70000, RF_LABEL_I32);
}

static void same(const char *base, const char *dir, const char *name, int order)
{
	char url[512], path[512];
	snprintf(url, sizeof(url), "%s/%s", base, name);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	struct rf_dataset rd, ld;
	CHECK_OPEN(rf_dataset_open_rfrec(&rd, url, 0), rf_last_error());
	CHECK_OPEN(rf_dataset_open_rfrec(&ld, path, 0), rf_last_error());
	CHECK(rd.src[0].remote && rd.src[0].fd < 0);
	CHECK_EQ(rd.count, ld.count);
	CHECK_EQ(rd.src[0].size, ld.src[0].size);
	CHECK_EQ(rd.src[0].stride, ld.src[0].stride);
	CHECK_EQ(rd.payload_bytes, ld.payload_bytes);
	CHECK_EQ(rd.data_crc32, ld.data_crc32);

	struct tl_env v;
	tl_open(&v, 2);
	struct rf_loader_opts o = { .batch = 64, .seed = 7, .devices = v.dev, .ndevices = 2,
				    .buffered = 1, .http_conns = 4, .order = order };
	struct rf_loader *rl, *ll;
	CHECK_OPEN(rf_loader_create(&rl, v.e, &rd, &o), rf_last_error());
	CHECK_OPEN(rf_loader_create(&ll, v.e, &ld, &o), rf_last_error());
	uint64_t *ro = malloc(rd.count * sizeof(*ro)), *lo = malloc(rd.count * sizeof(*lo));
	struct tl_run r;
	tl_run_init(&r, &ld); /* rows checked against the local file's records */
	for (uint64_t ep = 0; ep < 2; ep++) {
		uint64_t failed = 0;
		tl_epoch(&v, rl, &r, &failed, NULL);
		CHECK_EQ(failed, 0);
		tl_expect_complete(&r);
		CHECK(rf_loader_order(rl, ep, ro, rd.count) == 0);
		CHECK(rf_loader_order(ll, ep, lo, rd.count) == 0);
		CHECK(memcmp(ro, lo, rd.count * sizeof(*ro)) == 0);
		for (uint64_t i = 0; i < rd.count; i++)
			CHECK_EQ(r.order[i], ro[i]);
	}
	printf("%s: 2 epochs of %" PRIu64 " records over HTTP match the local file\n", name, rd.count);
	tl_run_free(&r);
	free(ro);
	free(lo);
	rf_loader_destroy(rl);
	rf_loader_destroy(ll);
	tl_close(&v);
	rf_dataset_close(&rd);
	rf_dataset_close(&ld);
}

static void fail(const char *url, const char *file, const char *what)
{
	struct rf_dataset ds, ld;
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, url, 0), rf_last_error());
	CHECK_OPEN(rf_dataset_open_rfrec(&ld, file, 0), rf_last_error());
	struct tl_env v;
	tl_open(&v, 1);
	/* the windowed order: the faults are what is tested, and one chunk read per epoch
	 * keeps a stalling server's timeouts few (each record read by itself, every batch
	 * would wait out its own; "same" reads the uniform order over HTTP) */
	struct rf_loader_opts o = { .batch = 64, .seed = 1, .devices = v.dev, .ndevices = 1,
				    .order = RF_LOADER_ORDER_WINDOWED };
	struct rf_loader *l;
	CHECK_OPEN(rf_loader_create(&l, v.e, &ds, &o), rf_last_error());
	struct tl_run r;
	tl_run_init(&r, &ld);
	uint64_t failed = 0, nb = rf_loader_batches_per_epoch(l);
	tl_epoch(&v, l, &r, &failed, NULL);
	CHECK_EQ(failed, nb);
	const char *msg = rf_loader_last_error(l);
	CHECK(msg && strstr(msg, url) && strstr(msg, "bytes ") && strstr(msg, what));
	printf("every batch failed, e.g.: %s\n", msg);
	tl_run_free(&r);
	rf_loader_destroy(l);
	tl_close(&v);
	rf_dataset_close(&ds);
	rf_dataset_close(&ld);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "make")) {
		make(argv[2]);
		return 0;
	}
	if ((argc == 4 || (argc == 5 && !strcmp(argv[4], "windowed"))) &&
	    !strcmp(argv[1], "same")) {
		int order = argc == 5 ? RF_LOADER_ORDER_WINDOWED : RF_LOADER_ORDER_UNIFORM;
		same(argv[2], argv[3], "small.rfrec", order);
		same(argv[2], argv[3], "large.rfrec", order);
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "fail")) {
		fail(argv[2], argv[3], argv[4]);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "openfail")) {
		struct rf_dataset ds;
		CHECK(rf_dataset_open_rfrec(&ds, argv[2], 0) < 0);
		const char *m = rf_last_error();
		printf("open failed: %s\n", m);
		CHECK(strstr(m, argv[2]) && strstr(m, argv[3]));
		return 0;
	}
	fprintf(stderr, "usage: test-loader-http make DIR | same BASEURL DIR | fail URL FILE WHAT | "
		"openfail URL WHAT\n");
	return 2;
}
