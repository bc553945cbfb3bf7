/* devices/cpu/blas-dl.c -- OpenBLAS through dlopen (blas-dl.h says why). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "blas-dl.h"
#include "rf-config.h"
#include "rf-internal.h"

#define RF__OPENBLAS_SO "libopenblas.so.0"

static struct rf__openblas rf__ob;
static int rf__ob_ok;
static char rf__ob_err[256];
static pthread_once_t rf__ob_once = PTHREAD_ONCE_INIT;

static void rf__ob_open(void)
{
	void *h = NULL;
	/* the directory pkg-config named at build time first (Debian's openblas-pthread/,
	 * a prefix of its own), then the loader's search path */
	char path[512];
	if (RF_OPENBLAS_LIBDIR[0] &&
	    snprintf(path, sizeof(path), "%s/" RF__OPENBLAS_SO, RF_OPENBLAS_LIBDIR) < (int)sizeof(path))
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen(RF__OPENBLAS_SO, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(rf__ob_err, sizeof(rf__ob_err), "cannot load " RF__OPENBLAS_SO ": %.200s",
			 dlerror());
	} else if (!(*(void **)&rf__ob.sgemm = dlsym(h, "cblas_sgemm")) ||
		   !(*(void **)&rf__ob.sgemv = dlsym(h, "cblas_sgemv")) ||
		   !(*(void **)&rf__ob.set_num_threads = dlsym(h, "openblas_set_num_threads")) ||
		   !(*(void **)&rf__ob.get_num_threads = dlsym(h, "openblas_get_num_threads"))) {
		snprintf(rf__ob_err, sizeof(rf__ob_err), RF__OPENBLAS_SO " lacks cblas_sgemm, "
			 "cblas_sgemv or openblas_{set,get}_num_threads");
		dlclose(h);
	} else {
		rf__ob_ok = 1; /* stays open to the process's end */
		return;
	}
	rf__log(RF_LOG_WARN, "OpenBLAS: %s; the CPU device multiplies with its own portable "
	       "gemm (slower)", rf__ob_err);
}

const struct rf__openblas *rf__openblas(const char **why)
{
	pthread_once(&rf__ob_once, rf__ob_open);
	if (why)
		*why = rf__ob_ok ? NULL : rf__ob_err;
	return rf__ob_ok ? &rf__ob : NULL;
}
