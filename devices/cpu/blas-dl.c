/* devices/cpu/blas-dl.c -- OpenBLAS through dlopen (blas-dl.h says why). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "blas-dl.h"
#include "rf-config.h"
#include "rf-internal.h"

#define RF__OPENBLAS_SO "libopenblas.so.0"

static struct rf__openblas rf__ob;
static int rf__ob_ok;
static char rf__ob_err[256];
static pthread_once_t rf__ob_once = PTHREAD_ONCE_INIT;
static _Atomic int rf__ob_want;     /* the thread count asked for (0: none yet) */
static _Atomic int rf__ob_opened;   /* the library is open and its calls set */

/* Give OpenBLAS the latest count asked for; again if another came meanwhile (two
 * threads applying at once end on the latest). */
static void rf__ob_apply(void)
{
	int n;

	do {
		n = atomic_load(&rf__ob_want);
		if (n > 0)
			rf__ob.set_num_threads(n);
	} while (atomic_load(&rf__ob_want) != n);
}

static void rf__ob_open(void)
{
	/* the directory pkg-config named at build time first (Debian's openblas-pthread/,
	 * a prefix of its own), then the loader's search path */
	char path[512];
	const char *libs[3] = { RF__OPENBLAS_SO, NULL, NULL };
	if (RF_OPENBLAS_LIBDIR[0] &&
	    snprintf(path, sizeof(path), "%s/" RF__OPENBLAS_SO, RF_OPENBLAS_LIBDIR) < (int)sizeof(path)) {
		libs[0] = path;
		libs[1] = RF__OPENBLAS_SO;
	}
	const struct rf__dlsym syms[] = {
		{ "cblas_sgemm", (void **)&rf__ob.sgemm },
		{ "cblas_sgemv", (void **)&rf__ob.sgemv },
		{ "openblas_set_num_threads", (void **)&rf__ob.set_num_threads },
		{ "openblas_get_num_threads", (void **)&rf__ob.get_num_threads },
		{ "openblas_get_corename", (void **)&rf__ob.get_corename },
	};
	if (rf__dl_open(libs, syms, sizeof(syms) / sizeof(syms[0]), rf__ob_err, sizeof(rf__ob_err))) {
		rf__ob_ok = 1; /* stays open to the process's end */
		atomic_store(&rf__ob_opened, 1);
		rf__ob_apply(); /* a count asked for before: a CPU device's open */
		return;
	}
	rf__log(RF_LOG_WARN, "OpenBLAS: %s; the CPU device multiplies with its own portable "
	       "gemm (slower)", rf__ob_err);
}

void rf__openblas_set_threads(int n)
{
	/* store, then look: rf__ob_open stores `opened`, then applies -- one of the two
	 * sees the other's store (both seq_cst) */
	atomic_store(&rf__ob_want, n);
	if (atomic_load(&rf__ob_opened))
		rf__ob_apply();
}

const struct rf__openblas *rf__openblas(const char **why)
{
	pthread_once(&rf__ob_once, rf__ob_open);
	if (why)
		*why = rf__ob_ok ? NULL : rf__ob_err;
	return rf__ob_ok ? &rf__ob : NULL;
}
