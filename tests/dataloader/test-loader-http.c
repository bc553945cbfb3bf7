/* test-loader-http -- the loader reading an .rfrec over HTTP Range requests (driven
 * by test-loader-http.py, which starts the servers). Modes:
 *   make DIR            write DIR/small.rfrec (3000 records of 100 bytes: read in
 *                       chunk spans), DIR/large.rfrec (60 x 70,000 bytes: one
 *                       request per record) and DIR/images.rfrec (90 JPEGs, a
 *                       version 2 file of records of any length)
 *   same BASEURL DIR [windowed]
 *                       for each file: the dataset opened from BASEURL/NAME has the
 *                       local file's header fields; a loader over it (2 devices, 4
 *                       connections) serves two epochs in which every row has the
 *                       local record's bytes and label, every record once, in the
 *                       order a loader over the local file gives (same seed); in
 *                       the uniform order, images.rfrec decoded at 24 pixels with
 *                       RandomResizedCrop + flip: the local file's bits, batch by batch
 *   fail URL FILE WHAT  the dataset opens but every batch fails; each failure's
 *                       message names URL, a byte range and WHAT (FILE: the same
 *                       file, local, for the checker's reference)
 *   openfail URL WHAT   opening fails with a message naming URL and WHAT */
#include <turbojpeg.h>

#include "test-loader-util.h"

/* images.rfrec: 90 JPEGs of sizes 20..120 (a version 2 file of records of any length) */
static void make_images(void)
{
	struct rf_rec_layout lay = { .variable = 1, .encoding = RF_REC_ENC_IMAGE,
				     .label_kind = RF_LABEL_I32, .num_classes = 3 };
	struct rf_rec_writer *w;
	tjhandle t = tjInitCompress();
	uint8_t *px = malloc(120 * 120 * 3);

	CHECK(t && px);
	CHECK_OPEN(rf_rec_writer_open(&w, t_path("images.rfrec"), &lay, RF_REC_OVERWRITE),
		   rf_last_error());
	for (unsigned i = 0; i < 90; i++) {
		int W = 20 + (int)(i * 37 % 101), H = 20 + (int)(i * 53 % 101);
		uint8_t *jb = NULL;
		unsigned long js = 0;
		for (int k = 0; k < W * H * 3; k++)
			px[k] = (uint8_t)(i * 13 + (unsigned)k * 7 % 251);
		CHECK(tjCompress2(t, px, W, 0, H, TJPF_RGB, &jb, &js, TJSAMP_420, 90, 0) == 0);
		CHECK_OPEN(rf_rec_writer_append_bytes(w, jb, js, (int32_t)(i % 3)), rf_last_error());
		tjFree(jb);
	}
	CHECK_OPEN(rf_rec_writer_finish(w), rf_last_error());
	tjDestroy(t);
	free(px);
}

static void make(const char *dir)
{
	snprintf(t_dir, sizeof(t_dir), "%s", dir);
	tl_make_rfrec("small.rfrec", 3000, 100, RF_LABEL_U8);
	tl_make_rfrec("large.rfrec", 60, 70000, RF_LABEL_I32);
	make_images();
}

/* images.rfrec over HTTP and from the file: every batch the same bits (records of any
 * length by Range requests, decoded and augmented). */
static void same_images(const char *base, const char *dir)
{
	char url[512], path[512];
	struct rf_dataset rd, ld;
	struct tl_env v;
	struct rf_loader *l[2];
	struct rf_loader_opts o = { .batch = 16, .seed = 5, .image_size = 24, .hflip = 1,
				    .http_conns = 3, .buffered = 1 };
	uint64_t rows = 0;

	snprintf(url, sizeof(url), "%s/images.rfrec", base);
	snprintf(path, sizeof(path), "%s/images.rfrec", dir);
	CHECK_OPEN(rf_dataset_open_rfrec(&rd, url, 0), rf_last_error());
	CHECK_OPEN(rf_dataset_open_rfrec(&ld, path, 0), rf_last_error());
	CHECK(rf_dataset_variable(&rd) && rd.count == ld.count && rd.max_record == ld.max_record);
	tl_open(&v, 1);
	o.devices = v.dev;
	o.ndevices = 1;
	CHECK_OPEN(rf_loader_create(&l[0], v.e, &rd, &o), rf_last_error());
	CHECK_OPEN(rf_loader_create(&l[1], v.e, &ld, &o), rf_last_error());
	for (int ep = 0; ep < 2; ep++)
		for (;;) {
			struct rf_batch b[2];
			int r0 = rf_loader_next(l[0], &b[0]), r1 = rf_loader_next(l[1], &b[1]);
			CHECK(r0 == r1 && r0 >= 0);
			if (!r0)
				break;
			CHECK_OPEN(rf_loader_wait(l[0], &b[0]), rf_loader_batch_error(l[0], &b[0]));
			CHECK_OPEN(rf_loader_wait(l[1], &b[1]), rf_loader_batch_error(l[1], &b[1]));
			CHECK(b[0].n == b[1].n);
			CHECK(memcmp(b[0].x[0]->data, b[1].x[0]->data, b[0].n * 3 * 24 * 24 * 4) == 0);
			CHECK(memcmp(b[0].y[0]->data, b[1].y[0]->data, b[0].n * 4) == 0);
			rows += b[0].n;
		}
	CHECK_EQ(rows, 2 * rd.count);
	printf("images.rfrec: 2 epochs of %" PRIu64 " JPEGs over HTTP decode to the local "
	       "file's bits\n", rd.count);
	rf_loader_destroy(l[0]);
	rf_loader_destroy(l[1]);
	tl_close(&v);
	rf_dataset_close(&rd);
	rf_dataset_close(&ld);
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
		if (order == RF_LOADER_ORDER_UNIFORM)
			same_images(argv[2], argv[3]);
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "fail")) {
		fail(argv[2], argv[3], argv[4]);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "opens")) {
		struct rf_dataset ds;
		if (rf_dataset_open_rfrec(&ds, argv[2], 0) < 0) {
			fprintf(stderr, "%s\n", rf_last_error());
			return 1;
		}
		printf("opened %s: %llu records\n", argv[2], (unsigned long long)ds.count);
		rf_dataset_close(&ds);
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
		"opens URL | openfail URL WHAT\n");
	return 2;
}
