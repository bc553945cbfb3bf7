/* train-ckpt-engine: checkpoint save and load on the ring of a live dependency engine.
 * The engine has work in flight when the checkpoint functions are called: an
 * asynchronous op waiting on a 60 s ring timeout (it would only finish if something
 * waited for the ring to go idle) and a chain of 64 ops on a worker stream, each
 * sleeping 1 ms and bumping a counter, whose completions arrive as notifier signals
 * while the checkpoint's reads and writes are in flight. Save and load must return
 * with the async op still pending (they turn the ring only until their own I/O is
 * done), the bytes must round-trip, and afterwards the engine finishes everything:
 * the timeout is cancelled, wait_all returns 0, and all 64 chained ops ran in order. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test-ckpt.h"
#include "engine.h"
#include "../test-util.h"

#define NCHAIN 64

static int chain_count, chain_order_ok = 1;

struct chain_ctx {
	int index;
};

static int chain_fn(void *ctx)
{
	struct chain_ctx *c = ctx;
	usleep(1000);
	if (__atomic_load_n(&chain_count, __ATOMIC_ACQUIRE) != c->index)
		chain_order_ok = 0;
	__atomic_store_n(&chain_count, c->index + 1, __ATOMIC_RELEASE);
	return 0;
}

static void chain_done(void *ctx, int status)
{
	free(ctx);
}

struct slow {
	struct rf_ring *ring;
	struct rf_op *op;
	rf_req_id id;
	int done;
	int64_t res;
};

static void slow_cb(void *data, int64_t res)
{
	struct slow *s = data;
	s->res = res;
	s->done = 1;
	rf_engine_op_done(s->op, 0);
}

static int slow_start(void *ctx, struct rf_op *op)
{
	struct slow *s = ctx;
	s->op = op;
	return rf_ring_timeout(s->ring, 60ull * 1000000000ull, slow_cb, s, &s->id);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	char dir[256], path[300];
	const char *tdir = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/rf-ckpt-engine-XXXXXX", tdir && *tdir ? tdir : "/var/tmp");
	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/model.ckpt", dir);

	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_stream *ws;
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	CHECK_OK(rf_worker_stream_create(e, "work", 0, &ws));

	/* engine work in flight */
	struct slow s = { .ring = ring };
	struct rf_var *sv, *cv;
	CHECK_EQ(rf_var_create(e, "slow", &sv), 0);
	CHECK_EQ(rf_var_create(e, "chain", &cv), 0);
	CHECK(sv && cv);
	struct rf_op_desc d = { .afn = slow_start, .ctx = &s, .writes = &sv, .nwrites = 1,
				.name = "slow" };
	CHECK_OK(rf_engine_push(e, &d));
	for (int i = 0; i < NCHAIN; i++) {
		struct chain_ctx *c = malloc(sizeof(*c));
		CHECK(c);
		c->index = i;
		struct rf_op_desc cd = { .fn = chain_fn, .ctx = c, .done = chain_done, .writes = &cv,
					 .nwrites = 1, .stream = ws, .name = "chain" };
		CHECK_OK(rf_engine_push(e, &cd));
	}

	/* a 4 MB tensor and a small one */
	size_t n = 1u << 20;
	float *w = malloc(n * sizeof(float)), *w2 = malloc(n * sizeof(float));
	int32_t step = 1234, step2 = 0;
	CHECK(w && w2);
	unsigned long long seed = 7;
	for (size_t i = 0; i < n; i++)
		w[i] = (float)(t_splitmix64(&seed) >> 40) * 0x1p-24f;
	struct rf_ckpt_blob b[2] = {
		{ .name = "w", .dtype = RF_CKPT_F32, .ndim = 2, .shape = { 1024, 1024 }, .data = w,
		  .nbytes = n * sizeof(float) },
		{ .name = "step", .dtype = RF_CKPT_I32, .ndim = 0, .data = &step, .nbytes = 4 },
	};
	struct rf_ckpt_meta meta = { .model = "mlp", .epoch = 3, .lr = 0.1, .batch_size = 256 };
	char err[512];
	int ret = ckpt_save(ring, path, &meta, b, 2, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "save: %s\n", err);
		return 1;
	}
	int after_save = __atomic_load_n(&chain_count, __ATOMIC_ACQUIRE);
	CHECK(!s.done); /* the engine's slow op is still waiting */

	b[0].data = w2;
	b[1].data = &step2;
	struct rf_ckpt_meta m2 = { .model = "mlp" };
	ret = ckpt_load(ring, path, &m2, b, 2, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "load: %s\n", err);
		return 1;
	}
	CHECK(!s.done);
	CHECK(memcmp(w, w2, n * sizeof(float)) == 0);
	CHECK_EQ(step2, 1234);
	CHECK_EQ(m2.epoch, 3);
	int after_load = __atomic_load_n(&chain_count, __ATOMIC_ACQUIRE);

	/* let the engine finish */
	CHECK_OK(rf_ring_cancel(ring, s.id));
	CHECK_OK(rf_engine_wait_all(e));
	CHECK(s.done);
	CHECK_EQ(s.res, -ECANCELED);
	CHECK_EQ(chain_count, NCHAIN);
	CHECK(chain_order_ok);
	printf("chained ops done: %d after save, %d after load, %d at the end; async op pending "
	       "throughout\n", after_save, after_load, chain_count);

	CHECK_OK(rf_var_destroy(e, sv, NULL, NULL, NULL));
	CHECK_OK(rf_var_destroy(e, cv, NULL, NULL, NULL));
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	unlink(path);
	CHECK(rmdir(dir) == 0);
	free(w);
	free(w2);
	printf("ok\n");
	return 0;
}
