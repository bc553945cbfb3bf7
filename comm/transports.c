/* comm/transports.c -- the registry: the host transport that launches the processes
 * and carries host collectives, and the device transports, tried in order by
 * rf_comm_use_gpu. The one generic file that names them. */
#include "comm-impl.h"

extern const struct rf__host_transport rf__mpi_transport;   /* mpi.c, or mpi-none.c */
extern const struct rf__dev_transport rf__nccl_transport;   /* nccl.c, or nccl-none.c */

const struct rf__host_transport *const rf__host_transport = &rf__mpi_transport;
const struct rf__dev_transport *const rf__dev_transports[] = { &rf__nccl_transport, NULL };
