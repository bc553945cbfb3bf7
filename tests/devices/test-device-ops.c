/* test-device-ops: every op of ops.h on the CPU device, pushed through the engine on
 * the device's worker streams (two compute streams, ops spread over both), checked
 * against plain double-precision references: GEMM in all transposes, bias add and
 * gradient, ReLU, softmax cross-entropy with loss and accuracy, conv2d forward and
 * both backwards, average pooling, SGD (with momentum), axpy/scale/sum, fill, u8
 * decoding, the PRNG as a variable (draws on two streams stay serial and equal the
 * kernel's sequence), a dependent chain across two streams, blocks and views. Then the
 * same on an engine in synchronous mode, and with every op on the engine's inline
 * stream (a stream the device does not own). */
#include "test-device-suite.h"

static void run(int sync, int inline_stream)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *d;
	struct rf_mem_stats ms;

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = sync }));
	CHECK_OK(rf_cpu_open(e, &(struct rf_cpu_opts){ .streams = 2 }, &d));
	CHECK_EQ(rf_device_kind(d), RF_DEVICE_CPU);
	CHECK_EQ(rf_device_nstreams(d), 2);
	CHECK(rf_device_h2d_stream(d) && rf_device_h2d_stream(d) == rf_device_d2h_stream(d));
	if (inline_stream) {
		struct rf_stream *s = rf_engine_inline_stream(e);
		ts_gemm(d, s, 9, 7, 5, 1, 0, 0.25f);
		ts_bias_relu(d, s);
		ts_add_relu(d, s);
		ts_bn_relu(d, s);
		ts_xent(d, s);
		ts_conv_pool(d, s);
		ts_vector(d, s);
		ts_rand_ops(d, s, s);
		ts_chain(d, s, rf_device_stream(d, 1));
		ts_views(d, s, rf_device_stream(d, 0));
		fprintf(stderr, "inline stream: ok\n");
	} else {
		ts_all(d);
	}
	CHECK_OK(rf_engine_wait_all(e));
	rf_device_mem_stats(d, &ms);
	CHECK_EQ(ms.in_use, 0);
	rf_device_close(d);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
}

int main(void)
{
	run(0, 0);
	run(1, 0);
	fprintf(stderr, "synchronous engine: ok\n");
	run(0, 1);
	return 0;
}
