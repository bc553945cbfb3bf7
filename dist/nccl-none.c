/* dist/nccl-none.c -- stands in for nccl.c where ringflow was built without NCCL. */
#include <errno.h>

#include "comm-impl.h"
#include "rf-internal.h"

int rf_comm_use_gpu(struct rf_comm *c, struct rf_device *gpu, struct rf_stream *s)
{
	return rf__fail(-ENOSYS, "comm: ringflow was built without NCCL (it needs CUDA "
			"and nccl.h/libnccl.so under the CUDA toolkit)");
}

int rf__nccl_allreduce(struct rf_comm *c, struct rf_tensor *const *ts, unsigned n,
		       size_t numel, uint32_t key)
{
	return rf__fail(-EINVAL, "allreduce of %s (key %u): a GPU tensor, and ringflow was "
			"built without NCCL", ts[0]->name, key);
}

void rf__nccl_abort(struct rf_comm *c) {}
void rf__nccl_destroy(struct rf_comm *c) {}

int rf__nccl_allreduce_host(struct rf_comm *c, struct rf__hostres *res, size_t n,
			    enum rf_comm_dtype dt, enum rf_comm_reduce op, uint32_t key)
{
	return rf__fail(-EINVAL, "allreduce_host (key %u): this comm has no MPI, and ringflow "
			"was built without NCCL: nothing can carry it", key);
}
