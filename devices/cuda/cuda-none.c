/* devices/cuda/cuda-none.c -- the CUDA backend's entry points in a build without
 * CUDA: no devices, nothing registered. */
#include <errno.h>

#include "../device-impl.h"

int rf__cuda_count(void) { return 0; }
int rf__cuda_open(struct rf_engine *e, int ordinal, const struct rf_cuda_opts *opts,
		  struct rf_device **out)
{
	(void)e; (void)ordinal; (void)opts; (void)out;
	return -ENOTSUP;
}
struct rf__dstream *rf__cuda_dstream(const struct rf_stream *s) { (void)s; return NULL; }
void *rf__cuda_stream_handle(const struct rf_stream *s) { (void)s; return NULL; }
int rf__cuda_host_register(void *p, size_t bytes) { (void)p; (void)bytes; return 0; }
void rf__cuda_host_unregister(void *p) { (void)p; }
int rf__cuda_dnn_ok(const char **why)
{
	if (why)
		*why = "ringflow was built without CUDA";
	return 0;
}
