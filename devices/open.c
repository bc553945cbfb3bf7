/* devices/open.c -- opening a device by name ("cpu", "cpu:N", "cuda", "cuda:N") and
 * the public CUDA entry points, which pick the backend. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device-impl.h"

int rf_device_open(struct rf_engine *e, const char *spec, struct rf_device **out)
{
	const char *colon;
	int n = 0;
	size_t klen;

	if (!e || !spec || !out)
		return -EINVAL;
	colon = strchr(spec, ':');
	klen = colon ? (size_t)(colon - spec) : strlen(spec);
	if (colon) {
		char *end;
		long v = strtol(colon + 1, &end, 10);
		if (end == colon + 1 || *end || v < 0 || v > 1024)
			return rf__fail(-EINVAL, "device '%s': expected cpu, cpu:N, cuda or cuda:N",
					spec);
		n = (int)v;
	}
	if (klen == 3 && !strncmp(spec, "cpu", 3)) {
		int ret = rf_cpu_open(e, NULL, out);
		if (ret == 0) {
			(*out)->ordinal = n;
			snprintf((*out)->name, sizeof((*out)->name), "cpu:%d", n);
		}
		return ret;
	}
	if (klen == 4 && !strncmp(spec, "cuda", 4))
		return rf_cuda_open(e, n, NULL, out);
	return rf__fail(-EINVAL, "device '%s': expected cpu, cpu:N, cuda or cuda:N", spec);
}

void *rf_cuda_stream_handle(const struct rf_stream *s)
{
	return rf__cuda_stream_handle(s);
}

int rf_cuda_count(void)
{
	return rf__cuda_count();
}

int rf_cuda_dnn_available(const char **why)
{
	return rf__cuda_dnn_ok(why);
}

int rf_cuda_open(struct rf_engine *e, int ordinal, const struct rf_cuda_opts *opts,
		 struct rf_device **out)
{
	if (!e || !out || ordinal < 0)
		return -EINVAL;
	return rf__cuda_open(e, ordinal, opts, out);
}
