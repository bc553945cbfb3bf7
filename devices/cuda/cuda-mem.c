/* devices/cuda/cuda-mem.c -- a CUDA device's memory: the caching allocator's backing
 * (cudaMalloc, cudaFree) and the buffers a stream retires (replaced while work queued
 * on it may still use them: freed once that work is reported done). */
#include <errno.h>

#include "cuda-impl.h"

int rf__cuda_mem_alloc(void *ctx, size_t bytes, void **out)
{
	struct rf_device *d = ctx;
	cudaError_t err;

	if (rf__cuda_set(d->ordinal) < 0)
		return -ENODEV;
	err = cudaMalloc(out, bytes);
	if (err != cudaSuccess) {
		(void)cudaGetLastError();
		return -ENOMEM;
	}
	return 0;
}

void rf__cuda_mem_free(void *ctx, void *p, size_t bytes)
{
	struct rf_device *d = ctx;

	struct rf__cuda_dev *cd = d->ctx;

	(void)bytes;
	if (cd && cd->hung)
		return;  /* cudaFree synchronises the device: it would wait for good; leaked */
	rf__cuda_set(d->ordinal);
	if (cudaFree(p) != cudaSuccess)
		(void)cudaGetLastError();
}

void rf__cs_retire(struct rf__cuda_stream *c, void *p, size_t bytes)
{
	if (c->nretired == RF__RETIRED) {
		/* never with a few growths in flight: wait for the stream, free them all */
		if (cudaStreamSynchronize(c->cs) != cudaSuccess)
			(void)cudaGetLastError();
		for (unsigned i = 0; i < c->nretired; i++)
			rf__cache_free(&c->dev->mem, c->retired[i].p, c->retired[i].bytes);
		c->nretired = 0;
	}
	c->retired[c->nretired].p = p;
	c->retired[c->nretired].bytes = bytes;
	/* the op running now goes into the FIFO at head (or is already at head - 1) */
	c->retired[c->nretired].after = c->head + 1;
	c->nretired++;
}

/* Free the retired buffers whose last users are reported done. */
void rf__cs_reap(struct rf__cuda_stream *c, int all)
{
	unsigned k = 0;

	for (unsigned i = 0; i < c->nretired; i++) {
		if (all || c->tail >= c->retired[i].after)
			rf__cache_free(&c->dev->mem, c->retired[i].p, c->retired[i].bytes);
		else
			c->retired[k++] = c->retired[i];
	}
	c->nretired = k;
}

