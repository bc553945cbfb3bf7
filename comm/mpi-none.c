/* comm/mpi-none.c -- stands in for mpi.c where ringflow was built without MPI: a comm
 * then exists only as an environment launch (rf_comm_opts.store_dir), whose
 * collectives go by a device transport. */
#include <errno.h>
#include <stdio.h>

#include "comm-impl.h"

static int rf__no_mpi(char *msg, size_t len)
{
	snprintf(msg, len, "ringflow was built without MPI (-Dmpi=disabled, or Open MPI's "
		 "headers missing at setup: apt-get install libopenmpi-dev, then meson "
		 "setup --reconfigure -Dmpi=enabled BUILDDIR)");
	return -ENOSYS;
}

static int rf__none_init(struct rf_comm *c, char *msg, size_t len)
{
	(void)c;
	return rf__no_mpi(msg, len);
}

static void rf__none_finalize(void)
{
}

static int rf__none_allreduce(void *buf, size_t n, enum rf__ctype t, enum rf_comm_reduce op,
			      const char *what, char *msg, size_t len)
{
	(void)buf, (void)n, (void)t, (void)op, (void)what;
	return rf__no_mpi(msg, len);
}

static int rf__none_allgather3(const uint64_t me[3], uint64_t *all, char *msg, size_t len)
{
	(void)me, (void)all;
	return rf__no_mpi(msg, len);
}

static int rf__none_bcast(void *buf, size_t n, char *msg, size_t len)
{
	(void)buf, (void)n;
	return rf__no_mpi(msg, len);
}

const struct rf__host_transport rf__mpi_transport = {
	/* .name       = */ "mpi",
	/* .init       = */ rf__none_init,
	/* .finalize   = */ rf__none_finalize,
	/* .allreduce  = */ rf__none_allreduce,
	/* .allgather3 = */ rf__none_allgather3,
	/* .bcast      = */ rf__none_bcast,
};
