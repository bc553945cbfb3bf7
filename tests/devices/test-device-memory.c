/* test-device-memory: tensor lifetime and the caching allocator, through the engine.
 *  - A tensor freed while a slow op still reads it keeps its memory (in_use unchanged)
 *    until that reader finished; then its block sits in the cache.
 *  - A new tensor of the same size class reuses the cached block: no new backend
 *    allocation. Size classes round up by at most 25%. Trimming gives cached blocks
 *    back.
 *  - A block carved into views: its memory returns only after the block and every
 *    view are freed, in any order.
 *  - Copies: host to host on the copy stream, between two CPU devices, read/write
 *    round trips, wrapped external memory (never freed by us).
 *  - The pinned arena: first-fit carving with alignment, coalescing on free, tensors
 *    in it, and the arena's address and size for rf_ring_register_memory.
 *  - A memory limit: what grows with the work in flight (tensors pushed ahead of
 *    their slow readers) waits for that work to give memory back instead of failing;
 *    what can never fit fails at once with a message; the limit is never exceeded.
 * Timing is never asserted: the slow reader is made slow by a flag it waits on. */
#include <stdatomic.h>
#include <unistd.h>

#include "test-device-suite.h"

static _Atomic int release_reader;
static _Atomic int reader_ran;

static int slow_reader(void *arg)
{
	(void)arg;
	while (!atomic_load(&release_reader))
		usleep(1000);
	atomic_store(&reader_ran, 1);
	return 0;
}

static int slow_once(void *arg)
{
	(void)arg;
	usleep(2000);
	return 0;
}

static int release_fn(void *arg)
{
	(void)arg;
	atomic_store(&release_reader, 1);
	return 0;
}

int main(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *d, *d2;
	struct rf_mem_stats m0, m1, m2;
	unsigned bin;

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = 0 }));
	CHECK_OK(rf_cpu_open(e, &(struct rf_cpu_opts){ .streams = 2 }, &d));

	/* ---- lifetime: memory freed only after the last reader ---- */
	{
		struct rf_tensor *t;
		rf_tensor_create(d, RF_F32, "t", RF_DIMS(1000, 100), &t);
		struct rf_tensor *other;
		rf_tensor_create(d, RF_F32, "other", RF_DIMS(1), &other);
		CHECK(t && other);
		rf_device_mem_stats(d, &m0);
		CHECK(m0.in_use >= 400000);
		/* the reader blocks on stream 0 until a release op on stream 1 runs */
		CHECK_OK(rf_host_op(rf_device_stream(d, 0), slow_reader, NULL, &t, 1, NULL, 0, "slow_reader"));
		rf_tensor_destroy(t);
		rf_device_mem_stats(d, &m1);
		CHECK_EQ(m1.in_use, m0.in_use);       /* still held: the reader is pending */
		CHECK_EQ(m1.cached, m0.cached);
		CHECK_EQ(atomic_load(&reader_ran), 0);
		CHECK_OK(rf_host_op(rf_device_stream(d, 1), release_fn, NULL, NULL, 0, &other, 1, "release"));
		CHECK_OK(rf_engine_wait_all(e));
		CHECK_EQ(atomic_load(&reader_ran), 1);
		rf_device_mem_stats(d, &m2);
		CHECK(m2.in_use < m0.in_use);
		CHECK_EQ(m2.cached, m0.cached + (m0.in_use - m2.in_use));
		/* reuse: same size class, no backend call */
		rf_tensor_create(d, RF_F32, "t2", RF_DIMS(100, 1000), &t);
		rf_device_mem_stats(d, &m1);
		CHECK_EQ(m1.backend_allocs, m2.backend_allocs);
		CHECK_EQ(m1.reuses, m2.reuses + 1);
		CHECK_EQ(m1.cached, m0.cached);
		rf_tensor_destroy(t);
		rf_tensor_destroy(other);
		CHECK_OK(rf_engine_wait_all(e));
		fprintf(stderr, "lifetime and reuse: ok\n");
	}

	/* ---- size classes ---- */
	{
		extern size_t rf__cache_class(size_t bytes, unsigned *bin);
		CHECK_EQ(rf__cache_class(1, &bin), 256);
		CHECK_EQ(rf__cache_class(257, &bin), 320);
		CHECK_EQ(rf__cache_class(16000000, &bin), 16777216);
		for (size_t b = 1; b < ((size_t)1 << 34); b = b * 3 + 1) {
			size_t c = rf__cache_class(b, &bin);
			CHECK(c >= b && (b <= 256 || c <= b + b / 4 + 1));
		}
		void *p, *q;
		rf_device_mem_stats(d, &m0);
		CHECK_OK(rf_device_alloc(d, 5000, &p));
		rf_device_free(d, p, 5000);
		CHECK_OK(rf_device_alloc(d, 4500, &q)); /* same class (4096 < x <= 5120) */
		CHECK(p == q);
		rf_device_free(d, q, 4500);
		CHECK(rf_device_mem_trim(d) > 0);
		rf_device_mem_stats(d, &m1);
		CHECK_EQ(m1.cached, 0);
		CHECK_EQ(m1.backend_frees, m1.backend_allocs);
		fprintf(stderr, "size classes and trim: ok\n");
	}

	/* ---- blocks and views: memory returns after the last of them ---- */
	{
		struct rf_tensor *blk;
		rf_tensor_create(d, RF_F32, "grads", RF_DIMS(4096), &blk);
		struct rf_tensor *a;
		rf_tensor_view(blk, 0, RF_F32, "ga", RF_DIMS(64, 32), &a);
		struct rf_tensor *b;
		rf_tensor_view(blk, 2048, RF_F32, "gb", RF_DIMS(2048), &b);
		CHECK(blk && a && b && blk->nviews == 2 && a->base == blk);
		CHECK(b->data == (char *)blk->data + 2048 * 4);
		rf_device_mem_stats(d, &m0);
		CHECK_OK(rf_fill(NULL, blk, 0.0f));
		rf_tensor_destroy(blk);
		CHECK(a->base == NULL);
		CHECK_OK(rf_engine_wait_all(e));
		rf_device_mem_stats(d, &m1);
		CHECK_EQ(m1.in_use, m0.in_use);
		rf_tensor_destroy(b);
		CHECK_OK(rf_engine_wait_all(e));
		rf_device_mem_stats(d, &m1);
		CHECK_EQ(m1.in_use, m0.in_use);
		CHECK_OK(rf_scale(NULL, a, 2.0f));
		rf_tensor_destroy(a);
		CHECK_OK(rf_engine_wait_all(e));
		rf_device_mem_stats(d, &m1);
		CHECK_EQ(m1.in_use, m0.in_use - 16384);
		fprintf(stderr, "blocks and views lifetime: ok\n");
	}

	/* ---- copies ---- */
	CHECK_OK(rf_cpu_open(e, NULL, &d2));
	{
		enum { N = 100000 };
		float *src = ts_randv(N), *dst = malloc(N * sizeof(float)), *ext = malloc(N * sizeof(float));
		struct rf_tensor *a = ts_upload(d, RF_F32, src, "a", RF_DIMS(N));
		struct rf_tensor *b;
		rf_tensor_create(d, RF_F32, "b", RF_DIMS(N), &b);
		struct rf_tensor *c;
		rf_tensor_create(d2, RF_F32, "c", RF_DIMS(N), &c);
		struct rf_tensor *w;
		rf_tensor_wrap(d2, ext, RF_F32, "ext", RF_DIMS(N), &w);
		struct rf_tensor *as_i;
		rf_tensor_create(d, RF_I32, "bits", RF_DIMS(N), &as_i);
		CHECK(w && w->data == ext);
		CHECK_OK(rf_copy(NULL, b, a));                       /* copy stream */
		CHECK_OK(rf_copy(rf_device_stream(d2, 0), c, b));    /* across CPU devices */
		CHECK_OK(rf_copy(NULL, w, c));                       /* into wrapped memory */
		CHECK_OK(rf_copy(NULL, as_i, w));                    /* same bytes, other dtype */
		CHECK_OK(rf_tensor_read(as_i, dst));
		CHECK(memcmp(dst, src, N * sizeof(float)) == 0);
		CHECK_OK(rf_tensor_wait(w));
		CHECK(memcmp(ext, src, N * sizeof(float)) == 0);
		{
			struct rf_tensor *small;
			rf_tensor_create(d, RF_F32, "small", RF_DIMS(3), &small);
			CHECK(rf_copy(NULL, b, small) == -EINVAL);
			rf_tensor_destroy(small);
		}
		rf_tensor_destroy(a); rf_tensor_destroy(b); rf_tensor_destroy(c); rf_tensor_destroy(w);
		rf_tensor_destroy(as_i);
		CHECK_OK(rf_engine_wait_all(e));
		free(src); free(dst); free(ext);
		fprintf(stderr, "copies: ok\n");
	}

	/* ---- pinned arena ---- */
	{
		struct rf_pinned *p;
		void *x, *y, *z;
		CHECK_OK(rf_pinned_create(3 << 20, &p));
		CHECK_EQ(rf_pinned_size(p), 4 << 20);
		CHECK(rf_pinned_base(p) != NULL);
		CHECK_EQ(rf_pinned_is_registered(p), rf_cuda_count() > 0);
		CHECK_OK(rf_pinned_alloc(p, 1000, 0, &x));
		CHECK_OK(rf_pinned_alloc(p, 5000, 4096, &y));
		CHECK(((uintptr_t)y & 4095) == 0 && y != x);
		CHECK_OK(rf_pinned_alloc(p, 100, 64, &z));   /* fits in the padding after x */
		CHECK((char *)z < (char *)y);
		CHECK(rf_pinned_alloc(p, 8 << 20, 0, &x) == -ENOMEM);
		rf_pinned_free(p, z, 100);
		rf_pinned_free(p, y, 5000);
		rf_pinned_free(p, x, 1000);
		CHECK_EQ(rf_pinned_in_use(p), 0);
		CHECK_OK(rf_pinned_alloc(p, 4 << 20, 0, &x)); /* all coalesced again */
		rf_pinned_free(p, x, 4 << 20);
		{
			uint8_t img[784];
			float got[784];
			struct rf_tensor *pt;
			rf_tensor_create_pinned(d, p, RF_U8, "img", RF_DIMS(1, 784), &pt);
			struct rf_tensor *f;
			rf_tensor_create(d, RF_F32, "imgf", RF_DIMS(1, 784), &f);
			CHECK(pt && ((uintptr_t)pt->data & 4095) == 0);
			for (int i = 0; i < 784; i++)
				img[i] = (uint8_t)i;
			CHECK_OK(rf_tensor_write(pt, img));
			CHECK_OK(rf_u8_to_f32(NULL, f, pt, 1.0f, 0.0f, 1.0f));
			CHECK_OK(rf_tensor_read(f, got));
			for (int i = 0; i < 784; i++)
				CHECK(got[i] == (float)(uint8_t)i);
			rf_tensor_destroy(pt);
			rf_tensor_destroy(f);
			CHECK_OK(rf_engine_wait_all(e));
			CHECK_EQ(rf_pinned_in_use(p), 0);
		}
		rf_pinned_destroy(p);
		fprintf(stderr, "pinned arena: ok\n");
	}

	/* ---- a memory limit: backpressure, not failure, for what grows with the work in
	 * flight; the limit never exceeded ---- */
	{
		struct rf_device *lim;
		struct rf_device_opts o = { .streams = 1, .mem_limit = (size_t)1 << 20 };
		struct rf_mem_stats ms;
		CHECK_OK(rf_device_open_opts(e, "cpu:7", &o, &lim));
		/* 16 tensors of 256 KiB, each read by a slow op and freed at once: without
		 * waiting, the fifth would find the megabyte held by pending readers */
		for (int i = 0; i < 16; i++) {
			struct rf_tensor *t = NULL;
			CHECK_OK(rf_tensor_create(lim, RF_F32, "big", RF_DIMS(65536), &t));
			CHECK_OK(rf_fill(NULL, t, (float)i));
			CHECK_OK(rf_host_op(rf_device_stream(lim, 0), slow_once, NULL, &t, 1, NULL, 0,
					    "slow_once"));
			rf_tensor_destroy(t);
		}
		CHECK_OK(rf_engine_wait_all(e));
		rf_device_mem_stats(lim, &ms);
		CHECK(ms.mem_waits > 0);
		CHECK(ms.peak <= o.mem_limit);
		CHECK_EQ(ms.limit, o.mem_limit);
		/* more than the limit can ever hold: refused at once, naming the device */
		{
			struct rf_tensor *t = NULL;
			CHECK_EQ(rf_tensor_create(lim, RF_F32, "huge", RF_DIMS(1 << 20), &t), -ENOMEM);
			CHECK(!t && strstr(rf_last_error(), "cpu:7"));
		}
		rf_device_close(lim);
		fprintf(stderr, "memory limit: %llu waits, peak %zu of %zu bytes: ok\n",
			(unsigned long long)ms.mem_waits, ms.peak, o.mem_limit);
	}

	rf_device_mem_stats(d, &m0);
	CHECK_EQ(m0.in_use, 0);
	rf_device_close(d2);
	rf_device_close(d);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
