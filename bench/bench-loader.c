/* bench/bench-loader.c — placeholder until the loader benchmarks land. */
#include <stdio.h>
#include "bench.h"
int rf_bench_loader(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "rf-bench loader: not built yet\n"); return 1; }
