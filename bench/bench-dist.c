/* bench-dist: rf-bench allreduce -- the comm stream's allreduce against a bare
 * MPI_Allreduce loop of the same sizes in the same run, under mpirun:
 *
 *   mpirun -np 2 build/bench/rf-bench allreduce [--max-mib N] [--json]
 *
 * Both run on the comm stream's thread (MPI belongs to it): "bare" is one op that calls
 * MPI_Allreduce in a loop and times itself; "ours" pushes one engine op per
 * allreduce and waits once, so it adds the engine, the worker queue and the ring's
 * completion path. The ratio bare/ours is the share of MPI's speed that is kept. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ringflow/comm.h>
#include <ringflow/device.h>
#include <ringflow/log.h>
#include <ringflow/rf-config.h>

#include "bench.h"
#include "bench-args.h"

static const char allreduce_usage[] =
	"usage: mpirun -np P rf-bench allreduce [--max-mib N] [--json]\n"
	"  --max-mib N   the largest allreduce, in MiB, 1..4096 (default 64)\n"
	"  --json        one JSON object per size\n";

/* The arguments: -1 to go on, else the exit status (0 after --help, 2 for a bad one,
 * said) -- the same in a build without MPI, where a good command line then exits 77. */
static int allreduce_args(int argc, char **argv, long *max_mib, int *json)
{
	for (int i = 1; i < argc; i++) {
		int rc;
		if (bench_is_help(argv[i])) {
			fputs(allreduce_usage, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--json")) {
			*json = 1;
		} else if (!strcmp(argv[i], "--max-mib")) {
			if ((rc = bench_long("allreduce", argc, argv, &i, 1, 4096, max_mib)))
				return rc;
		} else {
			return bench_unknown("allreduce", argv[i]);
		}
	}
	return -1;
}

#if RF_HAVE_MPI
#include <mpi.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct bare {
	struct rf_tensor *t;
	long iters;
	double secs;
	int err;
};

/* On the comm thread: the peer, a bare loop between two barriers. */
static int bare_fn(void *arg)
{
	struct bare *b = arg;
	double t0;

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = now_s();
	for (long i = 0; i < b->iters && !b->err; i++)
		b->err = MPI_Allreduce(MPI_IN_PLACE, b->t->data, (int)b->t->numel, MPI_FLOAT,
				       MPI_SUM, MPI_COMM_WORLD);
	b->secs = now_s() - t0;
	return b->err ? -EIO : 0;
}

static int barrier_fn(void *arg)
{
	(void)arg;
	return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -EIO;
}

/* Seconds for iters allreduces of t through the comm stream, after a barrier. */
static double ours(struct rf_engine *e, struct rf_comm *c, struct rf_tensor *t, long iters)
{
	struct rf_var *ord = t->var;
	double t0;

	if (rf_engine_push_simple(e, barrier_fn, NULL, NULL, 0, &ord, 1, rf_comm_stream(c),
				  "barrier") < 0 || rf_engine_wait_var(e, ord) < 0)
		return -1;
	t0 = now_s();
	for (long i = 0; i < iters; i++)
		if (rf_comm_allreduce(c, t, 0) < 0)
			return -1;
	if (rf_comm_wait(c) < 0)
		return -1;
	return now_s() - t0;
}

static double bare(struct rf_engine *e, struct rf_comm *c, struct rf_tensor *t, long iters)
{
	struct bare b = { t, iters, 0, 0 };
	struct rf_var *v = t->var;

	if (rf_engine_push_simple(e, bare_fn, &b, NULL, 0, &v, 1, rf_comm_stream(c), "bare") < 0 ||
	    rf_engine_wait_var(e, v) < 0)
		return -1;
	return b.secs;
}

int rf_bench_allreduce(int argc, char **argv)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *cpu;
	struct rf_comm *c;
	long max_mib = 64;
	int json = 0, rank, P;

	int rc = allreduce_args(argc, argv, &max_mib, &json);

	if (rc >= 0)
		return rc;
	if (rf_ring_create(&ring, NULL) < 0 || rf_engine_create(&e, ring, NULL) < 0 ||
	    rf_cpu_open(e, NULL, &cpu) < 0) {
		fprintf(stderr, "rf-bench allreduce: setup failed: %s\n", rf_last_error());
		return 1;
	}
	if (rf_comm_create(e, NULL, &c) < 0) {
		fprintf(stderr, "rf-bench allreduce: %s\n", rf_last_error());
		return 1;
	}
	rank = rf_comm_rank(c);
	P = rf_comm_size(c);
	if (rank == 0 && !json)
		printf("allreduce of f32, %d ranks: the comm stream (ours) vs a bare MPI_Allreduce "
		       "loop on the same thread (best of 3)\n%10s %8s %12s %12s %8s\n", P, "bytes",
		       "iters", "ours us", "bare us", "bare/ours");
	if (rank == 0 && json)
		printf("{\"ranks\": %d, \"rows\": [", P);
	for (size_t bytes = 4096, row = 0; bytes <= (size_t)max_mib << 20; bytes *= 4, row++) {
		struct rf_tensor *t;
		long iters = (long)(((size_t)256 << 20) / bytes);
		double o = 1e30, b = 1e30;

		iters = iters < 8 ? 8 : iters > 2000 ? 2000 : iters;
		if (rf_tensor_create(cpu, RF_F32, "x", RF_DIMS((int64_t)(bytes / 4)), &t) < 0)
			return 1;
		memset(t->data, 0, bytes);
		for (int rep = 0; rep < 3; rep++) {
			double x = ours(e, c, t, iters), y = bare(e, c, t, iters);
			if (x < 0 || y < 0) {
				fprintf(stderr, "rank %d: %s\n", rank, rf_comm_last_error(c));
				return 1;
			}
			o = x < o ? x : o;
			b = y < b ? y : b;
		}
		if (rank == 0 && !json)
			printf("%10zu %8ld %12.1f %12.1f %8.2f\n", bytes, iters, o / iters * 1e6,
			       b / iters * 1e6, b / o);
		if (rank == 0 && json)
			printf("%s{\"bytes\": %zu, \"iters\": %ld, \"ours_us\": %.2f, \"bare_us\": %.2f, "
			       "\"ratio\": %.3f}", row ? ", " : "", bytes, iters, o / iters * 1e6,
			       b / iters * 1e6, b / o);
		rf_tensor_destroy(t);
	}
	if (rank == 0 && json)
		printf("]}\n");
	if (rank == 0 && !json) {
		struct rf_engine_stats st;
		rf_engine_get_stats(e, &st);
		printf("engine: %llu ops, %llu dispatched early behind their predecessor on the "
		       "comm stream\n", (unsigned long long)st.completed,
		       (unsigned long long)st.chained);
	}
	rf_comm_destroy(c);
	rf_device_close(cpu);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
#else
int rf_bench_allreduce(int argc, char **argv)
{
	long max_mib = 64;
	int json = 0, rc = allreduce_args(argc, argv, &max_mib, &json);

	if (rc >= 0)
		return rc;
	fprintf(stderr, "rf-bench allreduce: ringflow was built without MPI\n");
	return 77;
}
#endif
