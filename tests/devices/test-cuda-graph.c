/* test-cuda-graph: a graph launch on one CUDA stream run as CUDA graphs
 * (devices/cuda/cuda-graph.c) gives the op-by-op results, bit for bit.
 *
 * A two-layer forward pass with a PRNG op in the middle (recorded as a run of its
 * own: it reads its counter when it runs, so the CUDA graph must not bake it in),
 * launched ITERS times with a new input written between launches: launch 1 runs op
 * by op, launch 2 is recorded, the rest replay the CUDA graphs. Every output equals
 * the same program pushed op by op, and the same launches with RF_CUDA_GRAPHS=0.
 * (A launch that arrives in part is tested on the CPU: tests/core/test-engine-gather.)
 * Exits 77 without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "test-device-suite.h"

enum { B = 8, K = 64, H = 32, O = 10, ITERS = 6 };

struct net {
	struct rf_tensor *x, *w1, *b1, *h1, *a1, *w2, *h2, *r, *y;
	struct rf_prng *g;
};

static int step(struct rf_stream *s, struct net *n)
{
	struct rf_tensor *in[2] = { n->h2, n->r };
	int ret;

	if ((ret = rf_gemm(s, 0, 0, 1.0f, n->x, n->w1, 0.0f, n->h1)) < 0 ||
	    (ret = rf_bias_add(s, n->h1, n->b1)) < 0 ||
	    (ret = rf_relu_fwd(s, n->a1, n->h1)) < 0 ||
	    (ret = rf_rand_uniform(s, n->r, n->g, -1, 1)) < 0 ||
	    (ret = rf_gemm(s, 0, 0, 1.0f, n->a1, n->w2, 0.0f, n->h2)) < 0 ||
	    (ret = rf_sum(s, n->y, in, 2)) < 0)
		return ret;
	return rf_scale(s, n->y, 0.5f);
}

/* mode 0: op by op; 1: replayed; 2: replayed with RF_CUDA_GRAPHS=0 */
static void run(int mode, float out[ITERS][B * O])
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *d;
	struct rf_stream *s;
	struct rf_graph *gr = NULL;
	struct net n;
	float xs[B * K];

	if (mode == 2)
		setenv("RF_CUDA_GRAPHS", "0", 1);
	else
		unsetenv("RF_CUDA_GRAPHS");
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	CHECK_OK(rf_cuda_open(e, 0, NULL, &d));
	s = rf_device_stream(d, 0);
	CHECK_OK(rf_prng_create(e, 7, "g", &n.g));
	CHECK_OK(rf_tensor_create(d, RF_F32, "x", RF_DIMS(B, K), &n.x));
	CHECK_OK(rf_tensor_create(d, RF_F32, "w1", RF_DIMS(K, H), &n.w1));
	CHECK_OK(rf_tensor_create(d, RF_F32, "b1", RF_DIMS(H), &n.b1));
	CHECK_OK(rf_tensor_create(d, RF_F32, "h1", RF_DIMS(B, H), &n.h1));
	CHECK_OK(rf_tensor_create(d, RF_F32, "a1", RF_DIMS(B, H), &n.a1));
	CHECK_OK(rf_tensor_create(d, RF_F32, "w2", RF_DIMS(H, O), &n.w2));
	CHECK_OK(rf_tensor_create(d, RF_F32, "h2", RF_DIMS(B, O), &n.h2));
	CHECK_OK(rf_tensor_create(d, RF_F32, "r", RF_DIMS(B, O), &n.r));
	CHECK_OK(rf_tensor_create(d, RF_F32, "y", RF_DIMS(B, O), &n.y));
	CHECK_OK(rf_rand_uniform(s, n.w1, n.g, -0.2f, 0.2f));
	CHECK_OK(rf_rand_uniform(s, n.b1, n.g, -0.2f, 0.2f));
	CHECK_OK(rf_rand_uniform(s, n.w2, n.g, -0.2f, 0.2f));
	CHECK_OK(rf_engine_wait_all(e));
	if (mode) {
		CHECK_OK(rf_engine_capture_begin(e, NULL));
		CHECK_OK(step(s, &n));
		CHECK_OK(rf_engine_capture_end(e, &gr));
	}
	for (int it = 0; it < ITERS; it++) {
		for (int i = 0; i < B * K; i++)
			xs[i] = (float)((i * 7 + it * 13) % 17) / 8.0f - 1.0f;
		CHECK_OK(rf_tensor_write(n.x, xs));
		if (mode)
			CHECK_OK(rf_graph_launch(gr, NULL, NULL, 0));
		else
			CHECK_OK(step(s, &n));
		CHECK_OK(rf_tensor_read(n.y, out[it]));
	}
	rf_graph_destroy(gr);
	rf_tensor_destroy(n.x); rf_tensor_destroy(n.w1); rf_tensor_destroy(n.b1);
	rf_tensor_destroy(n.h1); rf_tensor_destroy(n.a1); rf_tensor_destroy(n.w2);
	rf_tensor_destroy(n.h2); rf_tensor_destroy(n.r); rf_tensor_destroy(n.y);
	CHECK_OK(rf_engine_wait_all(e));
	rf_device_close(d);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
}

int main(void)
{
	static float a[ITERS][B * O], b[ITERS][B * O], c[ITERS][B * O];

	if (rf_cuda_count() <= 0) {
		fprintf(stderr, "no CUDA device: skip\n");
		return T_SKIP;
	}
	run(0, a);
	run(1, b);
	run(2, c);
	for (int it = 0; it < ITERS; it++) {
		CHECK(memcmp(a[it], b[it], sizeof(a[it])) == 0);
		CHECK(memcmp(a[it], c[it], sizeof(a[it])) == 0);
		CHECK(it == 0 || memcmp(a[it], a[it - 1], sizeof(a[it])) != 0); /* input, PRNG */
	}
	fprintf(stderr, "%d launches (op by op, recorded, replayed as CUDA graphs): outputs "
		"bitwise the op-by-op program's, and RF_CUDA_GRAPHS=0's\n", ITERS);
	return 0;
}
