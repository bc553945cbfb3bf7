/* devices/backends.c -- the registry: every backend this build has, and the few
 * questions generic code asks of all of them. The one generic file that names the
 * backends. */
#include <string.h>

#include "backend-impl.h"

extern const struct rf__backend rf__cpu_backend;   /* cpu/cpu.c */
extern const struct rf__backend rf__cuda_backend;  /* cuda/cuda.c, or cuda/cuda-none.c
						     * where built without CUDA */

const struct rf__backend *const rf__backends[] = { &rf__cpu_backend, &rf__cuda_backend, NULL };

const struct rf__backend *rf__backend_find(const char *kind, size_t klen)
{
	for (unsigned i = 0; rf__backends[i]; i++)
		if (strlen(rf__backends[i]->kind) == klen && !strncmp(rf__backends[i]->kind, kind, klen))
			return rf__backends[i];
	return NULL;
}

struct rf__dstream *rf__backend_dstream(const struct rf_stream *s)
{
	struct rf__dstream *ds;

	for (unsigned i = 0; s && rf__backends[i]; i++)
		if (rf__backends[i]->dstream && (ds = rf__backends[i]->dstream(s)))
			return ds;
	return NULL;
}

const struct rf__backend *rf__host_register(void *p, size_t bytes)
{
	for (unsigned i = 0; rf__backends[i]; i++)
		if (rf__backends[i]->host_register && rf__backends[i]->host_register(p, bytes))
			return rf__backends[i];
	return NULL;
}

void rf__host_unregister(const struct rf__backend *be, void *p)
{
	if (be && be->host_unregister)
		be->host_unregister(p);
}
