/* devices/cpu/cpu-impl.h -- what the CPU backend's files share: its ops (cpu-ops.c)
 * for the table in cpu.c. Internal to devices/cpu. */
#ifndef RF_CPU_IMPL_H
#define RF_CPU_IMPL_H

#include "../backend-impl.h"
#include "kernels.h"

/* cpu-ops.c: the table's op entries */
int rf__cpu_supports(const struct rf_device *d, const struct rf__op *op, char *why, size_t len);
size_t rf__cpu_workspace(const struct rf_device *d, const struct rf__op *op, int min);
int rf__cpu_compute(struct rf_device *d, struct rf__dstream *ds, struct rf__op *op);

#endif
