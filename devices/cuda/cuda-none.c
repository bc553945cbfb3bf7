/* devices/cuda/cuda-none.c -- the CUDA backend in a build without CUDA: registered
 * like the real one, with no devices, so that "cuda" is a known kind that says why
 * it cannot open; and the public CUDA entry points. */
#include <errno.h>
#include <stdio.h>

#include "../backend-impl.h"

#define RF__NO_CUDA "ringflow was built without CUDA"

static int rf__none_count(void)
{
	return 0;
}

static int rf__none_open(struct rf_engine *e, int ordinal, const struct rf_device_opts *opts,
			 struct rf_device **out)
{
	(void)e; (void)opts;
	if (out)
		*out = NULL;
	return rf__fail(-ENOTSUP, "cuda:%d: " RF__NO_CUDA, ordinal);
}

static int rf__none_supports(const struct rf_device *d, const struct rf__op *op, char *why,
			     size_t len)
{
	(void)d; (void)op;
	/* what a refusal must say first is the op (rf_device_kind_supports: "a cuda
	 * device does not run OP: ..."); then why, and what to do */
	snprintf(why, len, RF__NO_CUDA " (reconfigure with -Dcuda=enabled where the CUDA "
		 "toolkit is: nvcc, cuda_runtime.h)");
	return 0;
}

static int rf__none_compute(struct rf_device *d, struct rf__dstream *ds, struct rf__op *op)
{
	(void)d; (void)ds; (void)op;
	return -ENOSYS;
}

static int rf__none_alloc(void *ctx, size_t bytes, void **out)
{
	(void)ctx; (void)bytes; (void)out;
	return -ENOMEM;
}

static void rf__none_free(void *ctx, void *p, size_t bytes)
{
	(void)ctx; (void)p; (void)bytes;
}

const struct rf__backend rf__cuda_backend = {
	/* .kind            = */ "cuda",
	/* .id              = */ RF_DEVICE_CUDA,
	/* .hostmem         = */ 0,
	/* .count           = */ rf__none_count,
	/* .open            = */ rf__none_open,
	/* .close           = */ NULL,
	/* .supports_op     = */ rf__none_supports,
	/* .compute         = */ rf__none_compute,
	/* .workspace       = */ NULL,
	/* .strerror        = */ NULL,
	/* .mem_alloc       = */ rf__none_alloc,
	/* .mem_free        = */ rf__none_free,
	/* .host_register   = */ NULL,
	/* .host_unregister = */ NULL,
	/* .dstream         = */ NULL,
	/* .stream_handle   = */ NULL,
	/* .stats           = */ NULL,
	/* .plan_json       = */ NULL,
};

int rf_cuda_count(void) { return 0; }

int rf_cuda_open(struct rf_engine *e, int ordinal, const struct rf_cuda_opts *opts,
		 struct rf_device **out)
{
	(void)opts;
	if (!e || !out || ordinal < 0)
		return -EINVAL;
	return rf__none_open(e, ordinal, NULL, out);
}

void *rf_cuda_stream_handle(const struct rf_stream *s) { (void)s; return NULL; }

const char *rf_cuda_completion(const struct rf_stream *s) { (void)s; return NULL; }

int rf_cuda_dnn_available(const char **why)
{
	if (why)
		*why = RF__NO_CUDA;
	return 0;
}
