/* bench/bench.h -- rf-bench subcommands. Each lives in its own file and returns a
 * process exit code (0 ok, 1 failure, 2 bad arguments). */
#ifndef RF_BENCH_H
#define RF_BENCH_H

int rf_bench_engine(int argc, char **argv);   /* bench-engine.c */
double bench_pingpong(long hops, int futex);  /* bench-pingpong.c: seconds a hop */
/* bench-pingpong.c: seconds an end-to-end hop through a middle thread (two hand-overs) */
double bench_relay(long hops);
int rf_bench_async(int argc, char **argv);    /* bench-engine.c: seeds section 12.2.3 */
int rf_bench_parallel(int argc, char **argv); /* bench-devices.c: seeds section 12.3.1 */
int rf_bench_copy(int argc, char **argv);     /* bench-devices.c: seeds section 12.3.2 */
int rf_bench_gemm(int argc, char **argv);     /* bench-devices.c: engine vs OpenBLAS */
int rf_bench_threads(int argc, char **argv);  /* bench-devices.c: BLAS threads vs streams */
int rf_bench_loader(int argc, char **argv);   /* bench-loader.c */
int rf_bench_open(int argc, char **argv);     /* bench-open.c: a dataset's open */
int rf_bench_allreduce(int argc, char **argv); /* bench-dist.c: comm stream vs bare MPI */
int rf_bench_flops(int argc, char **argv);    /* bench-flops.c: a model's GEMM limit */
int rf_bench_hybridize(int argc, char **argv); /* bench-hybridize.c: seeds section 12.1 */
int rf_bench_cqe(int argc, char **argv);       /* bench-cqe.c: CUDA completion latency */

/* A library call failed: one line with the library's reason (rf_last_error: a
 * malformed RF_FAULT_INJECT, RF_RING_SPIN_US, ...) on stderr; returns -1. */
#include <stdio.h>
#include <ringflow/log.h>
static inline int bench_lib_fail(const char *what)
{
	fprintf(stderr, "%s: %s\n", what, rf_last_error());
	return -1;
}

#endif
