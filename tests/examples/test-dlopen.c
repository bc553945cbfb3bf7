/* test-dlopen -- libringflow loads into a process that did not link it: dlopen the
 * shared library named by argv[1], find functions with dlsym, and use them (a ring, an
 * engine, a CPU device, a tensor allocated and freed: the host allocator's path), then
 * dlclose. Built twice: plain, and linked with jemalloc (a host process that has its
 * own allocator). Before the library stopped linking jemalloc, dlopen failed with
 * "cannot allocate memory in static TLS block". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <ringflow/device.h>
#include <ringflow/ops.h>
#include <ringflow/engine.h>
#include <ringflow/log.h>
#include <ringflow/ring.h>
#include <ringflow/tensor.h>

#define SYM(h, name) ((__typeof__(&name))sym(h, #name))

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p) {
		fprintf(stderr, "test-dlopen: dlsym(%s): %s\n", name, dlerror());
		exit(1);
	}
	return p;
}

int main(int argc, char **argv)
{
	struct rf_ring *ring = NULL;
	struct rf_engine *e = NULL;
	struct rf_device *d = NULL;
	struct rf_tensor *t = NULL;
	void *h;

	if (argc != 2) {
		fprintf(stderr, "usage: test-dlopen LIBRINGFLOW.so\n");
		return 2;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "test-dlopen: dlopen(%s): %s\n", argv[1], dlerror());
		return 1;
	}
	if (SYM(h, rf_ring_create)(&ring, NULL) < 0 || SYM(h, rf_engine_create)(&e, ring, NULL) < 0 ||
	    SYM(h, rf_cpu_open)(e, NULL, &d) < 0 ||
	    SYM(h, rf_tensor_create)(d, RF_F32, "t", 2, (const int64_t[]){ 1024, 1024 }, &t) < 0) {
		fprintf(stderr, "test-dlopen: %s\n", SYM(h, rf_last_error)());
		return 1;
	}
	if (SYM(h, rf_fill)(NULL, t, 1.5f) < 0 || SYM(h, rf_tensor_wait)(t) < 0 ||
	    ((float *)t->data)[1024 * 1024 - 1] != 1.5f) {
		fprintf(stderr, "test-dlopen: fill: %s\n", SYM(h, rf_last_error)());
		return 1;
	}
	SYM(h, rf_tensor_destroy)(t);
	SYM(h, rf_device_close)(d);
	SYM(h, rf_engine_destroy)(e);
	SYM(h, rf_ring_destroy)(ring);
	if (dlclose(h) != 0) {
		fprintf(stderr, "test-dlopen: dlclose: %s\n", dlerror());
		return 1;
	}
	printf("dlopen %s: ring, engine, CPU device, a 4 MiB tensor: ok\n", argv[1]);
	return 0;
}
