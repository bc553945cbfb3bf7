/* dist/comm-none.c -- stands in for comm.c where ringflow was built without MPI. */
#include <errno.h>
#include <stddef.h>

#include "comm-impl.h"
#include "rf-internal.h"

int rf_comm_create(struct rf_engine *e, const struct rf_comm_opts *opts, struct rf_comm **out)
{
	*out = NULL;
	return rf__fail(-ENOSYS, "comm: ringflow was built without MPI (install libopenmpi-dev "
			"and reconfigure: meson setup -Dmpi=enabled)");
}

void rf_comm_destroy(struct rf_comm *c) {}
int rf_comm_allreduce(struct rf_comm *c, struct rf_tensor *t, uint32_t key) { return -ENOSYS; }
int rf_comm_wait(struct rf_comm *c) { return -ENOSYS; }
int rf_comm_rank(const struct rf_comm *c) { return 0; }
int rf_comm_size(const struct rf_comm *c) { return 1; }
int rf_comm_local_rank(const struct rf_comm *c) { return 0; }
int rf_comm_local_size(const struct rf_comm *c) { return 1; }
struct rf_stream *rf_comm_stream(const struct rf_comm *c) { return NULL; }
uint64_t rf_comm_seq(const struct rf_comm *c) { return 0; }
const char *rf_comm_last_error(const struct rf_comm *c) { return ""; }
int rf_comm_allreduce_host(struct rf_comm *c, void *buf, size_t n, enum rf_comm_dtype dt,
			   enum rf_comm_reduce op, uint32_t key) { return -ENOSYS; }
int rf_comm_allreduce_span(struct rf_comm *c, struct rf_tensor *const *ts, unsigned n,
			   uint32_t key) { return -ENOSYS; }
