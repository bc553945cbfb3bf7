/* common/dl.c -- opening a library on first use (rf-internal.h: rf__dl_open), for the
 * libraries ringflow does not link: OpenBLAS, cuBLAS, cuDNN, NCCL. */
#include <dlfcn.h>
#include <stdio.h>

#include "rf-internal.h"

void *rf__dl_open(const char *const *libs, const struct rf__dlsym *syms, size_t n, char *err,
		  size_t errlen)
{
	void *h = NULL;
	const char *lib = NULL;

	for (const char *const *l = libs; *l && !h; l++)
		h = dlopen(lib = *l, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "cannot load %s: %.200s", libs[0], dlerror());
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (!(*syms[i].slot = dlsym(h, syms[i].name))) {
			snprintf(err, errlen, "%s lacks %s", lib, syms[i].name);
			dlclose(h);
			return NULL;
		}
	return h;
}
