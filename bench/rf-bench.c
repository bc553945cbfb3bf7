/* rf-bench: ringflow's benchmarks, one subcommand each. Timings on a shared 2-core
 * machine are noisy: every subcommand prints ratios measured within one run. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} cmds[] = {
	{ "engine", rf_bench_engine, "no-op ops through the engine: chain, fan-out, random DAG" },
	{ "hybridize", rf_bench_hybridize, "seeds 12.1: an MLP op by op vs captured and replayed" },
	{ "async", rf_bench_async, "seeds 12.2.3: y = x + 1 with a wait after each vs one wait" },
	{ "parallel", rf_bench_parallel, "seeds 12.3.1: matmuls on two devices, separately and together" },
	{ "copy", rf_bench_copy, "seeds 12.3.2: compute then copy vs overlapped" },
	{ "cqe", rf_bench_cqe, "a CUDA op's completion to the reactor vs sync/poll" },
	{ "gemm", rf_bench_gemm, "GEMM through the engine vs OpenBLAS called directly" },
	{ "threads", rf_bench_threads, "OpenBLAS threads vs stream threads on the cores" },
	{ "loader", rf_bench_loader, "dataloader throughput on a record file" },
	{ "open", rf_bench_open, "opening a dataset (a set of shards: scan vs index)" },
	{ "flops", rf_bench_flops, "a model's FLOP limit: its training GEMMs timed with our gemm" },
	{ "allreduce", rf_bench_allreduce, "under mpirun: the comm stream's allreduce vs bare MPI" },
};

int main(int argc, char **argv)
{
	size_t i;

	rf_cli_limits(argv);
	rf_cli_check_stdout("rf-bench"); /* a result that cannot be written is a failure */
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fprintf(argc < 2 ? stderr : stdout, "usage: rf-bench COMMAND [options] [--json]\n");
		for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
			fprintf(argc < 2 ? stderr : stdout, "  %-9s %s\n", cmds[i].name, cmds[i].help);
		return argc < 2 ? 2 : 0;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "rf-bench: unknown command '%s' (try rf-bench --help)\n", argv[1]);
	return 2;
}
