/* test-loader-cuda -- batches on a GPU. The u8 batch is staged in pinned host memory,
 * copied to the device and decoded there; labels are copied alongside. One epoch of
 * a small-record .rfrec and one of a large-record one are read back (rf_tensor_read)
 * batch by batch and compared with rf_dataset_read_record at the positions
 * rf_loader_order gives. Batches asked in a model's format (x_dtype bf16/f16, x_layout
 * NHWC: decoded on the GPU by one kernel) equal, bit for bit, the CPU's batches in that
 * format (decoded there by the reference path, checked against the formula by
 * test-loader-queue), a mean and std per channel too, and u8 NHWC batches (interleaved
 * by the gather, copied as they are) byte for byte, five batches of 8 and the
 * epoch's end. Without a usable CUDA device (none, no driver, or a build without
 * CUDA) the CPU stands in for the GPU in the format checks (their loop runs
 * everywhere), then it skips with 77. */
#include "test-loader-util.h"

static void cuda_epoch(struct rf_engine *e, struct rf_device *cpu, struct rf_device *gpu,
		       const char *path, unsigned batch)
{
	struct rf_dataset ds;
	struct rf_loader *l;
	struct rf_loader_opts o = { 0 };
	uint64_t *ord, pos = 0;
	uint8_t *row;
	float *x;
	int32_t *y, lab;

	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, 0), rf_last_error());
	o.batch = batch;
	o.seed = 17;
	o.devices = &gpu;
	o.ndevices = 1;
	o.host = cpu;
	CHECK_OPEN(rf_loader_create(&l, e, &ds, &o), rf_last_error());
	ord = malloc(ds.count * sizeof(*ord));
	row = malloc(ds.payload_bytes);
	x = malloc((size_t)batch * ds.payload_bytes * sizeof(float));
	y = malloc(batch * sizeof(*y));
	CHECK(ord && row && x && y);
	CHECK(rf_loader_order(l, 0, ord, ds.count) == 0);
	for (;;) {
		struct rf_batch b;
		int ret = rf_loader_next(l, &b);
		CHECK(ret >= 0);
		if (!ret)
			break;
		CHECK(rf_device_kind(b.x[0]->dev) == RF_DEVICE_CUDA);
		CHECK(rf_tensor_read(b.x[0], x) == 0);
		CHECK(rf_tensor_read(b.y[0], y) == 0);
		for (unsigned j = 0; j < b.n; j++, pos++) {
			CHECK(rf_dataset_read_record(&ds, ord[pos], row, &lab) == 0);
			CHECK_EQ(y[j], lab);
			for (size_t q = 0; q < ds.payload_bytes; q++)
				CHECK_EQ(lrintf(x[(size_t)j * ds.payload_bytes + q] * 255.0f), row[q]);
		}
	}
	CHECK_EQ(pos, ds.count);
	rf_loader_destroy(l);
	rf_dataset_close(&ds);
	free(ord);
	free(row);
	free(x);
	free(y);
}

/* norm: a mean and std per channel (ImageNet's) instead of one */
static void cuda_format(struct rf_engine *e, struct rf_device *cpu, struct rf_device *gpu,
			const char *path, enum rf_tdtype dt, enum rf_layout lay, int norm)
{
	static const float m3[3] = { 0.485f, 0.456f, 0.406f }, s3[3] = { 0.229f, 0.224f, 0.225f };
	struct rf_dataset ds;
	struct rf_loader *l[2];
	struct rf_device *dev[2] = { gpu, cpu };
	uint8_t *x[2];

	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, 0), rf_last_error());
	for (int k = 0; k < 2; k++) {
		struct rf_loader_opts o = { 0 };
		o.batch = 8;
		o.seed = 23;
		o.devices = &dev[k];
		o.ndevices = 1;
		o.host = cpu;
		o.mean = norm ? 0.0f : 0.2860f;
		o.std = norm ? 0.0f : 0.3530f;
		o.norm_channels = norm ? 3 : 0;
		memcpy(o.channel_mean, m3, sizeof(m3));
		memcpy(o.channel_std, s3, sizeof(s3));
		o.x_dtype = dt;
		o.x_layout = lay;
		CHECK_OPEN(rf_loader_create(&l[k], e, &ds, &o), rf_last_error());
		x[k] = malloc(8 * ds.payload_bytes * sizeof(float));
		CHECK(x[k]);
	}
	/* 40 records in batches of 8: five batches, then the epoch's end (0) */
	for (int it = 0;; it++) {
		struct rf_batch b[2];
		int r[2];
		for (int k = 0; k < 2; k++) {
			r[k] = rf_loader_next(l[k], &b[k]);
			if (r[k] < 0)
				fprintf(stderr, "%s loader, batch %d: %s\n", k ? "cpu" : "gpu", it,
					rf_loader_last_error(l[k]));
			CHECK(r[k] >= 0);
		}
		CHECK_EQ(r[0], r[1]);
		if (!r[0]) {
			CHECK_EQ(it, 5);
			break;
		}
		for (int k = 0; k < 2; k++) {
			CHECK_EQ(b[k].x[0]->dtype, dt);
			CHECK_EQ(b[k].x[0]->layout, lay);
			CHECK_OK(rf_tensor_read(b[k].x[0], x[k]));    /* the bytes as they lie */
		}
		CHECK(memcmp(x[0], x[1], b[0].x[0]->nbytes) == 0);
	}
	for (int k = 0; k < 2; k++) {
		rf_loader_destroy(l[k]);
		free(x[k]);
	}
	rf_dataset_close(&ds);
	printf("%s: batches as %s %s%s equal the CPU's\n", rf_device_name(gpu), rf_tdtype_name(dt),
	       rf_layout_name(lay), norm ? " (a mean and std per channel)" : "");
}

int main(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *cpu, *gpu, *g;

	t_mkdir("loader-cuda");
	CHECK(rf_ring_create(&ring, NULL) == 0);
	CHECK(rf_engine_create(&e, ring, NULL) == 0);
	CHECK(rf_cpu_open(e, NULL, &cpu) == 0);
	/* without a GPU the CPU stands in for it (the test's own loop and checks run
	 * everywhere; what a GPU computes is checked where there is one) */
	gpu = cpu;
	if (rf_cuda_count() <= 0)
		fprintf(stderr, "no usable CUDA device: the formats on the CPU only, then skip\n");
	else if (rf_cuda_open(e, 0, NULL, &g) < 0)
		fprintf(stderr, "cannot open cuda:0 (%s): the formats on the CPU only, then skip\n",
			rf_last_error());
	else
		gpu = g;
	if (gpu != cpu) {
		cuda_epoch(e, cpu, gpu, tl_make_rfrec("small.rfrec", 3000, 100, RF_LABEL_I32), 64);
		cuda_epoch(e, cpu, gpu, tl_make_rfrec("large.rfrec", 100, 70000, RF_LABEL_U8), 16);
		printf("cuda: both epochs match\n");
	}
	{
		static const uint32_t chw[3] = { 3, 5, 7 };
		const char *img = tl_make_rfrec_shape("chw.rfrec", 40, 3, chw, RF_LABEL_I32);
		cuda_format(e, cpu, gpu, img, RF_BF16, RF_LAYOUT_NHWC, 0);
		cuda_format(e, cpu, gpu, img, RF_F16, RF_LAYOUT_ROWMAJOR, 0);
		cuda_format(e, cpu, gpu, img, RF_F32, RF_LAYOUT_NHWC, 0);
		cuda_format(e, cpu, gpu, img, RF_F32, RF_LAYOUT_ROWMAJOR, 1);
		cuda_format(e, cpu, gpu, img, RF_BF16, RF_LAYOUT_NHWC, 1);
		cuda_format(e, cpu, gpu, img, RF_U8, RF_LAYOUT_NHWC, 0);
	}
	if (gpu != cpu)
		rf_device_close(gpu);
	rf_device_close(cpu);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return gpu != cpu ? 0 : T_SKIP;
}
