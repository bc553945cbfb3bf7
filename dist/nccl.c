/* dist/nccl.c -- collectives on GPU tensors with NCCL, beside the MPI comm stream.
 *
 * The NCCL communicator is made on the comm thread (rank 0's ncclUniqueId goes to the
 * others by MPI_Bcast, then ncclCommInitRank, which blocks until every rank has come)
 * and warmed up with one collective, before any training: both can block. A collective
 * is an engine op on a CUDA stream of the GPU (the caller's): its fn, run when the op
 * is dispatched, launches ncclAllReduce into that stream, behind the compute streams'
 * work by the engine's CUDA-event chaining, and the op completes through the stream's
 * host-function path like every kernel. It reads and writes the comm's ordering
 * variable, so MPI and NCCL collectives together keep one global push order.
 *
 * libnccl.so (over 200 MB) is opened with dlopen on first use, not linked: every
 * program that links ringflow would otherwise map it at start-up (~0.2 s here), and a
 * build with NCCL would not start where it is missing. nccl.h gives the types. */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include "comm-impl.h"
#include "device.h"
#include "rf-internal.h"

/* The NCCL calls we use, resolved from libnccl.so.2 once. */
static struct {
	ncclResult_t (*get_unique_id)(ncclUniqueId *);
	ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
	ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
				   ncclComm_t, cudaStream_t);
	ncclResult_t (*destroy)(ncclComm_t);
	ncclResult_t (*abort)(ncclComm_t);
	const char *(*error_string)(ncclResult_t);
	int ok;
	char err[256];
} rf__nc;
static pthread_once_t rf__nc_once = PTHREAD_ONCE_INIT;

static void rf__nc_load(void)
{
	void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);

	if (!h)
		h = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(rf__nc.err, sizeof(rf__nc.err), "cannot load libnccl.so.2: %s", dlerror());
		return;
	}
#define RF__SYM(f, name) \
	if (!(*(void **)&rf__nc.f = dlsym(h, name))) { \
		snprintf(rf__nc.err, sizeof(rf__nc.err), "libnccl.so.2 lacks %s", name); \
		return; \
	}
	RF__SYM(get_unique_id, "ncclGetUniqueId")
	RF__SYM(init_rank, "ncclCommInitRank")
	RF__SYM(all_reduce, "ncclAllReduce")
	RF__SYM(destroy, "ncclCommDestroy")
	RF__SYM(abort, "ncclCommAbort")
	RF__SYM(error_string, "ncclGetErrorString")
#undef RF__SYM
	rf__nc.ok = 1;
}

struct rf__nccl {
	ncclComm_t comm;
	int ordinal;
	int aborted;
};

struct rf__ninit {
	int refs;               /* the op and the caller (reactor thread only) */
	struct rf_comm *c;
	uint64_t seq;           /* the collectives pushed before it (for the watchdog) */
	int ordinal;
	ncclComm_t comm;
	char msg[256];
};

struct rf__ncoll {
	struct rf_comm *c;
	void *data;
	size_t numel, bytes;
	int i32;
	uint64_t seq;
	uint32_t key;
	char msg[320];
};

/* For the watchdog (comm.c: rf__watchdog_cb): the collective now outstanding. */
static void rf__nccl_publish(struct rf_comm *c, uint64_t seq, uint32_t key, size_t bytes)
{
	atomic_store(&c->run_key, key);
	atomic_store(&c->run_bytes, bytes);
	atomic_store(&c->run_start_ns, rf_now_ns());
	atomic_store(&c->run_seq1, seq + 1);
}

/* On the comm thread (it owns MPI): the unique id from rank 0, then the communicator. */
static int rf__nccl_init_fn(void *arg)
{
	struct rf__ninit *in = arg;
	struct rf_comm *c = in->c;
	ncclUniqueId id;
	ncclResult_t r;
	int ret;

	memset(&id, 0, sizeof(id));
	rf__nccl_publish(c, in->seq, UINT32_MAX - 1, sizeof(id));
	if (c->rank == 0 && (r = rf__nc.get_unique_id(&id)) != ncclSuccess) {
		snprintf(in->msg, sizeof(in->msg), "ncclGetUniqueId: %s", rf__nc.error_string(r));
		atomic_store(&c->run_seq1, 0);
		return -EIO;   /* the others then wait in MPI_Bcast: the watchdog's case */
	}
	ret = MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
	if (ret != MPI_SUCCESS) {
		snprintf(in->msg, sizeof(in->msg), "MPI_Bcast of the NCCL id: MPI error %d", ret);
		atomic_store(&c->run_seq1, 0);
		return -EIO;
	}
	ret = 0;
	if (cudaSetDevice(in->ordinal) != cudaSuccess) {
		snprintf(in->msg, sizeof(in->msg), "cudaSetDevice(%d): %s", in->ordinal,
			 cudaGetErrorString(cudaGetLastError()));
		ret = -EIO;
	} else if ((r = rf__nc.init_rank(&in->comm, c->size, id, c->rank)) != ncclSuccess) {
		snprintf(in->msg, sizeof(in->msg), "ncclCommInitRank (rank %d of %d, GPU %d): %s",
			 c->rank, c->size, in->ordinal, rf__nc.error_string(r));
		ret = -EIO;
	}
	atomic_store(&c->run_seq1, 0);
	return ret;
}

/* On the reactor thread, when the op is dispatched onto the CUDA stream. */
static int rf__nccl_fn(void *arg)
{
	struct rf__ncoll *x = arg;
	struct rf_comm *c = x->c;
	cudaStream_t cs = (cudaStream_t)rf_cuda_stream_handle(c->gstream);
	ncclResult_t r;

	if (!c->nccl || c->nccl->aborted) {
		snprintf(x->msg, sizeof(x->msg), "nccl allreduce #%" PRIu64 " (key %u): the "
			 "communicator is gone", x->seq, x->key);
		return -EIO;
	}
	/* launched now; outstanding until its done (a later one launched behind it on the
	 * stream takes over the watch: a stall of either shows) */
	rf__nccl_publish(c, x->seq, x->key, x->bytes);
	r = rf__nc.all_reduce(x->data, x->data, x->numel, x->i32 ? ncclInt32 : ncclFloat32, ncclSum,
			  c->nccl->comm, cs);
	if (r != ncclSuccess) {
		snprintf(x->msg, sizeof(x->msg), "nccl allreduce #%" PRIu64 " (key %u, %zu bytes, "
			 "rank %d of %d): %s", x->seq, x->key, x->bytes, c->rank, c->size,
			 rf__nc.error_string(r));
		return -EIO;
	}
	return 0;
}

static void rf__nccl_done(void *arg, int status)
{
	struct rf__ncoll *x = arg;

	uint64_t mine = x->seq + 1;

	atomic_compare_exchange_strong(&x->c->run_seq1, &mine, 0);
	rf__comm_keep_error(x->c, status, x->msg);
	free(x);
}

static void rf__ninit_done(void *arg, int status)
{
	struct rf__ninit *in = arg;

	(void)status;
	if (--in->refs == 0)
		free(in);
}

int rf__nccl_allreduce(struct rf_comm *c, struct rf_tensor *const *ts, unsigned n,
		       size_t numel, uint32_t key)
{
	struct rf_var *w[1 + RF__COMM_MAXT] = { c->order };
	struct rf__ncoll *x;
	struct rf_op_desc d = { 0 };
	int ret;

	if (!c->nccl)
		return rf__fail(-EINVAL, "allreduce of %s (key %u): a GPU tensor, and this comm has "
				"no GPU (rf_comm_use_gpu)", ts[0]->name, key);
	if (ts[0]->dev != c->gpu)
		return rf__fail(-EINVAL, "allreduce of %s (key %u): on %s, the comm's GPU is %s",
				ts[0]->name, key, rf_device_name(ts[0]->dev), rf_device_name(c->gpu));
	if (!(x = calloc(1, sizeof(*x))))
		return rf__fail(-ENOMEM, "allreduce: out of memory");
	for (unsigned i = 0; i < n; i++)
		w[1 + i] = ts[i]->var;
	x->c = c;
	x->data = ts[0]->data;
	x->numel = numel;
	x->i32 = ts[0]->dtype == RF_I32;
	x->bytes = numel * 4;
	x->seq = c->seq;
	x->key = key;
	d.fn = rf__nccl_fn;
	d.ctx = x;
	d.done = rf__nccl_done;
	d.reads = w;
	d.nreads = 1;
	d.writes = w;
	d.nwrites = 1 + n;
	d.stream = c->gstream;
	d.name = "nccl_allreduce";
	if ((ret = rf_engine_push(c->eng, &d)) < 0) {
		free(x);
		return rf__fail(ret, "nccl allreduce: push failed: %s", strerror(-ret));
	}
	c->seq++;
	return 0;
}

/* One collective of one float that every rank sets to 1: the sum is the world size. */
static int rf__nccl_warmup(struct rf_comm *c)
{
	struct rf_tensor *t = NULL;
	float v = 0;
	int ret;

	if ((ret = rf_tensor_create(c->gpu, RF_F32, "nccl_warmup", RF_DIMS(1), &t)) < 0)
		return rf__fail(ret, "comm: NCCL warm-up: cannot allocate on %s", rf_device_name(c->gpu));
	v = 1.0f;
	ret = rf_tensor_write(t, &v);
	if (ret == 0)
		ret = rf__nccl_allreduce(c, &t, 1, 1, UINT32_MAX);
	if (ret == 0)
		ret = rf_tensor_read(t, &v);
	if (ret == 0 && v != (float)c->size)
		ret = rf__fail(-EIO, "comm: NCCL warm-up: the sum of 1 over %d ranks came back as %g",
			       c->size, (double)v);
	else if (ret < 0)
		rf__fail(ret, "comm: NCCL warm-up failed: %s",
			 c->last_error[0] ? c->last_error : rf_last_error());
	rf_tensor_destroy(t);
	return ret;
}

int rf_comm_use_gpu(struct rf_comm *c, struct rf_device *gpu, struct rf_stream *s)
{
	struct rf__ninit *in;
	struct rf_op_desc d = { 0 };
	int ret;

	if (!c || !gpu || rf_device_kind(gpu) != RF_DEVICE_CUDA || !rf_cuda_stream_handle(s))
		return rf__fail(-EINVAL, "comm: rf_comm_use_gpu needs a CUDA device and one of its "
				"streams");
	if (c->nccl)
		return rf__fail(-EBUSY, "comm: already on %s", rf_device_name(c->gpu));
	pthread_once(&rf__nc_once, rf__nc_load);
	if (!rf__nc.ok)
		return rf__fail(-ENOSYS, "comm: NCCL: %s", rf__nc.err);
	if (!(in = calloc(1, sizeof(*in))))
		return rf__fail(-ENOMEM, "comm: out of memory");
	in->refs = 2;       /* a wait that returns early must not leave the op a dead frame */
	in->c = c;
	in->ordinal = rf_device_ordinal(gpu);
	in->seq = c->seq;
	d.fn = rf__nccl_init_fn;
	d.ctx = in;
	d.done = rf__ninit_done;
	d.reads = &c->order;
	d.nreads = 1;
	d.writes = &c->order;
	d.nwrites = 1;
	d.stream = c->stream;
	d.name = "nccl_init";
	if ((ret = rf_engine_push(c->eng, &d)) < 0) {
		free(in);
		return rf__fail(ret, "comm: NCCL: push failed: %s", strerror(-ret));
	}
	ret = rf_engine_wait_var(c->eng, c->order);
	if (ret < 0) {
		rf__fail(ret, "comm: NCCL: %s", in->msg[0] ? in->msg : strerror(-ret));
		rf__ninit_done(in, 0);
		return ret;
	}
	c->nccl = calloc(1, sizeof(*c->nccl));
	if (!c->nccl) {
		rf__nc.destroy(in->comm);
		rf__ninit_done(in, 0);
		return rf__fail(-ENOMEM, "comm: out of memory");
	}
	c->nccl->comm = in->comm;
	c->nccl->ordinal = in->ordinal;
	rf__ninit_done(in, 0);
	c->gpu = gpu;
	c->gstream = s;
	return rf__nccl_warmup(c);
}

void rf__nccl_abort(struct rf_comm *c)
{
	if (c->nccl && !c->nccl->aborted) {
		rf__nc.abort(c->nccl->comm);
		c->nccl->aborted = 1;
	}
}

void rf__nccl_destroy(struct rf_comm *c)
{
	if (!c->nccl)
		return;
	rf_engine_wait_var(c->eng, c->order);
	if (!c->nccl->aborted)
		rf__nc.destroy(c->nccl->comm);
	free(c->nccl);
	c->nccl = NULL;
}
