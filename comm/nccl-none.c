/* comm/nccl-none.c -- stands in for nccl.c where ringflow was built without NCCL: a
 * device transport that carries nothing and says why. */
#include <errno.h>

#include "comm-impl.h"
#include "rf-internal.h"

static int rf__none_attach(struct rf_comm *c, struct rf_device *dev, struct rf_stream *s)
{
	(void)c, (void)s;
	return rf__fail(-ENOSYS, "comm: %s: ringflow was built without NCCL (it needs CUDA "
			"and nccl.h/libnccl.so under the CUDA toolkit)", rf_device_name(dev));
}

static int rf__none_allreduce(struct rf_comm *c, struct rf_tensor *const *ts, unsigned n,
			      size_t numel, uint32_t key)
{
	(void)c, (void)n, (void)numel;
	return rf__fail(-EINVAL, "allreduce of %s (key %u): a device tensor, and ringflow was "
			"built without NCCL", ts[0]->name, key);
}

static int rf__none_allreduce_host(struct rf_comm *c, struct rf__hostres *res, size_t n,
				   enum rf_comm_dtype dt, enum rf_comm_reduce op, uint32_t key)
{
	(void)c, (void)res, (void)n, (void)dt, (void)op;
	return rf__fail(-EINVAL, "allreduce_host (key %u): this comm has no MPI, and ringflow "
			"was built without NCCL: nothing can carry it", key);
}

static void rf__none_abort(struct rf_comm *c)
{
	(void)c;
}

const struct rf__dev_transport rf__nccl_transport = {
	/* .name           = */ "nccl",
	/* .attach         = */ rf__none_attach,
	/* .allreduce      = */ rf__none_allreduce,
	/* .allreduce_host = */ rf__none_allreduce_host,
	/* .abort          = */ rf__none_abort,
	/* .destroy        = */ rf__none_abort,
};
