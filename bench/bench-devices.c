/* bench/bench-devices.c — placeholder until the devices benchmarks land. */
#include <stdio.h>
#include "bench.h"
static int todo(const char *n) { fprintf(stderr, "rf-bench %s: not built yet\n", n); return 1; }
int rf_bench_parallel(int argc, char **argv) { (void)argc; (void)argv; return todo("parallel"); }
int rf_bench_copy(int argc, char **argv) { (void)argc; (void)argv; return todo("copy"); }
int rf_bench_gemm(int argc, char **argv) { (void)argc; (void)argv; return todo("gemm"); }
int rf_bench_threads(int argc, char **argv) { (void)argc; (void)argv; return todo("threads"); }
