/* comm/mpi.c -- the MPI transport: the comm's host transport (comm-impl.h), its calls
 * made on the comm thread only (it owns MPI: MPI_THREAD_FUNNELED). comm.c holds
 * everything else, so a build without MPI (mpi-none.c) keeps the environment launch
 * and the device transports. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#include "comm-impl.h"

/* Under ASan, what MPI_Init and MPI_Finalize allocate on the comm thread is MPI's to
 * keep until the process exits (~1 MB, every run): LeakSanitizer ignores it, rather
 * than matching each of those blocks against suppressions by library name at exit
 * (1.2 s of an MPI process's 2.7 s, ASan build). Ours, made anywhere else, are still
 * reported; what MPI's own threads allocate is tests/comm/lsan.supp's. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define RF__LSAN_OFF() __lsan_disable()
#define RF__LSAN_ON() __lsan_enable()
#else
#define RF__LSAN_OFF() ((void)0)
#define RF__LSAN_ON() ((void)0)
#endif

static int rf__mpi_err(int code, char *msg, size_t len, const char *what, int err)
{
	char es[MPI_MAX_ERROR_STRING];
	int n = 0;

	if (MPI_Error_string(err, es, &n) != MPI_SUCCESS)
		snprintf(es, sizeof(es), "MPI error %d", err);
	snprintf(msg, len, "%.200s: %.250s", what, es);
	return code;
}

static int rf__mpi_init(struct rf_comm *c, char *msg, size_t len)
{
	int provided = 0, inited = 0, ret;
	const char *v = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
	MPI_Comm sh;

	MPI_Initialized(&inited);
	if (inited) {
		snprintf(msg, len, "MPI is already initialized in this process: one comm per "
			 "process, and MPI belongs to its stream");
		return -EBUSY;
	}
	RF__LSAN_OFF();
	ret = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
	RF__LSAN_ON();
	if (ret != MPI_SUCCESS)
		return rf__mpi_err(-EIO, msg, len, "MPI_Init_thread", ret);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &c->size);
	if (!v)
		v = getenv("LOCAL_RANK");
	c->local_rank = v ? atoi(v) : 0;
	if (c->local_rank < 0)
		c->local_rank = 0;
	c->local_size = c->local_rank + 1;  /* at least, where the split below fails */
	if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &sh) ==
	    MPI_SUCCESS) {
		MPI_Comm_rank(sh, &c->local_rank);
		MPI_Comm_size(sh, &c->local_size);
		MPI_Comm_free(&sh);
	}
	return 0;
}

static void rf__mpi_finalize(void)
{
	int inited = 0, done = 0;

	MPI_Initialized(&inited);
	MPI_Finalized(&done);
	if (inited && !done) {
		RF__LSAN_OFF();
		MPI_Finalize();
		RF__LSAN_ON();
	}
}

static int rf__mpi_allreduce(void *buf, size_t n, enum rf__ctype t, enum rf_comm_reduce op,
			     const char *what, char *msg, size_t len)
{
	static const MPI_Op ops[] = { [RF_COMM_SUM] = MPI_SUM, [RF_COMM_MIN] = MPI_MIN,
				      [RF_COMM_MAX] = MPI_MAX };
	MPI_Datatype dt = t == RF__CT_F32 ? MPI_FLOAT : t == RF__CT_I32 ? MPI_INT32_T :
			  t == RF__CT_F64 ? MPI_DOUBLE : MPI_UINT64_T;
	int ret = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, dt, ops[op], MPI_COMM_WORLD);

	return ret == MPI_SUCCESS ? 0 : rf__mpi_err(-EIO, msg, len, what, ret);
}

static int rf__mpi_allgather3(const uint64_t me[3], uint64_t *all, char *msg, size_t len)
{
	int ret = MPI_Allgather(me, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, MPI_COMM_WORLD);

	return ret == MPI_SUCCESS ? 0 :
	       rf__mpi_err(-EIO, msg, len, "order check (MPI_Allgather)", ret);
}

static int rf__mpi_bcast(void *buf, size_t n, char *msg, size_t len)
{
	int ret = MPI_Bcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);

	return ret == MPI_SUCCESS ? 0 : rf__mpi_err(-EIO, msg, len, "MPI_Bcast", ret);
}

const struct rf__host_transport rf__mpi_transport = {
	/* .name       = */ "mpi",
	/* .init       = */ rf__mpi_init,
	/* .finalize   = */ rf__mpi_finalize,
	/* .allreduce  = */ rf__mpi_allreduce,
	/* .allgather3 = */ rf__mpi_allgather3,
	/* .bcast      = */ rf__mpi_bcast,
};
