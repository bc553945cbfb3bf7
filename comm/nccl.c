/* comm/nccl.c -- the NCCL transport: the comm's device transport (comm-impl.h) for
 * collectives on CUDA tensors, beside the comm stream.
 *
 * The NCCL communicator is made on the comm thread (rank 0's ncclUniqueId goes to the
 * others by MPI_Bcast, or through the store directory of an environment launch, then
 * ncclCommInitRank, which blocks until every rank has come) and warmed up with one
 * collective, before any training: both can block. A collective
 * is an engine op on a CUDA stream of the GPU (the caller's): its fn, run when the op
 * is dispatched, launches ncclAllReduce into that stream, behind the compute streams'
 * work by the engine's CUDA-event chaining, and the op completes through the stream's
 * host-function path like every kernel. It reads and writes the comm's ordering
 * variable, so MPI and NCCL collectives together keep one global push order.
 *
 * Without MPI (an environment launch) the host collectives go through the GPU: the
 * values into a pinned buffer, over to a device scratch, ncclAllReduce, and back; the
 * op's done callback hands them over. The order check (c->check) is two ops before
 * each NCCL collective: an ncclAllGather of every rank's (seq, key, bytes) on the
 * GPU stream, then the comparison on the comm thread, which fails (poisoning the
 * ordering variable, so the collective is skipped) on a mismatch.
 *
 * libnccl.so (over 200 MB) is opened with dlopen on first use, not linked: every
 * program that links ringflow would otherwise map it at start-up (~0.2 s here), and a
 * build with NCCL would not start where it is missing. nccl.h gives the types. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "comm-impl.h"
#include "device.h"
#include "rf-internal.h"
#include "store.h"

/* The NCCL calls we use, resolved from libnccl.so.2 once. */
static struct {
	ncclResult_t (*get_unique_id)(ncclUniqueId *);
	ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
	ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
				   ncclComm_t, cudaStream_t);
	ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
				   cudaStream_t);
	ncclResult_t (*destroy)(ncclComm_t);
	ncclResult_t (*abort)(ncclComm_t);
	const char *(*error_string)(ncclResult_t);
	int ok;
	char err[256];
} rf__nc;
static pthread_once_t rf__nc_once = PTHREAD_ONCE_INIT;

static void rf__nc_load(void)
{
	static const char *const libs[] = { "libnccl.so.2", "libnccl.so", NULL };
	const struct rf__dlsym syms[] = {
		{ "ncclGetUniqueId", (void **)&rf__nc.get_unique_id },
		{ "ncclCommInitRank", (void **)&rf__nc.init_rank },
		{ "ncclAllReduce", (void **)&rf__nc.all_reduce },
		{ "ncclAllGather", (void **)&rf__nc.all_gather },
		{ "ncclCommDestroy", (void **)&rf__nc.destroy },
		{ "ncclCommAbort", (void **)&rf__nc.abort },
		{ "ncclGetErrorString", (void **)&rf__nc.error_string },
	};
	rf__nc.ok = rf__dl_open(libs, syms, sizeof(syms) / sizeof(syms[0]), rf__nc.err,
				sizeof(rf__nc.err)) != NULL;
}

/* The scratch of host collectives and the order check, in words of 8 bytes, the same
 * layout on the device and in the pinned host buffer: the values, then this rank's
 * (seq, key, bytes), then every rank's. */
#define RF__NS_VALS 4096
#define RF__NS_ME RF__NS_VALS
#define RF__NS_ALL (RF__NS_ME + 3)

struct rf__nccl {
	ncclComm_t comm;
	int ordinal;
	int aborted;
	struct rf_tensor *dscr;     /* device scratch */
	struct rf_pinned *pin;      /* page-locked memory holding hscr */
	uint64_t *hscr;             /* host scratch */
};

/* the transport's state, once attached */
#define RF__NC(c) ((struct rf__nccl *)(c)->dctx)

static void rf__nccl_abort(struct rf_comm *c);
static void rf__nccl_destroy(struct rf_comm *c);

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
	void *data;             /* a tensor collective; NULL: host values (res) */
	struct rf__hostres *res;
	size_t numel, bytes;
	ncclDataType_t dt;
	ncclRedOp_t op;
	uint64_t seq;
	uint32_t key;
	const char *what;
	char msg[320];
};


/* On the comm thread (it owns MPI): the unique id from rank 0, then the communicator. */
static int rf__nccl_init_fn(void *arg)
{
	struct rf__ninit *in = arg;
	struct rf_comm *c = in->c;
	ncclUniqueId id;
	ncclResult_t r;
	int ret;

	memset(&id, 0, sizeof(id));
	/* the device first: a rank that cannot use its GPU must fail before the others
	 * have its part of the rendezvous and wait in ncclCommInitRank for it */
	if (cudaSetDevice(in->ordinal) != cudaSuccess || cudaFree(NULL) != cudaSuccess) {
		snprintf(in->msg, sizeof(in->msg), "cudaSetDevice(%d): %s", in->ordinal,
			 cudaGetErrorString(cudaGetLastError()));
		return -EIO;
	}
	if (c->host)    /* the store has a timeout of its own: the watchdog is for MPI's wait */
		rf__comm_publish(c, in->seq, UINT32_MAX - 1, sizeof(id));
	if (c->rank == 0 && (r = rf__nc.get_unique_id(&id)) != ncclSuccess) {
		snprintf(in->msg, sizeof(in->msg), "ncclGetUniqueId: %s", rf__nc.error_string(r));
		atomic_store(&c->run_seq1, 0);
		return -EIO;   /* the others then wait for the id: the watchdog's or store's case */
	}
	ret = c->host ? c->host->bcast(&id, sizeof(id), in->msg, sizeof(in->msg))
		     : rf__store_exchange(c->store_dir, c->rank, c->size, &id, sizeof(id),
					  c->store_timeout_s, in->msg, sizeof(in->msg));
	if (ret < 0) {
		atomic_store(&c->run_seq1, 0);
		return ret;
	}
	/* published for the watchdog: ncclCommInitRank waits for every rank, without a
	 * timeout of its own (--dist-timeout bounds it) */
	rf__comm_publish(c, in->seq, UINT32_MAX - 1, sizeof(id));
	if ((r = rf__nc.init_rank(&in->comm, c->size, id, c->rank)) != ncclSuccess) {
		snprintf(in->msg, sizeof(in->msg), "ncclCommInitRank (rank %d of %d, GPU %d): %s",
			 c->rank, c->size, in->ordinal, rf__nc.error_string(r));
		ret = -EIO;
	}
	atomic_store(&c->run_seq1, 0);
	return ret;
}

/* On the reactor thread, when the op is dispatched onto the CUDA stream: launch the
 * collective (host values: with their copies in and out) behind the stream's work. */
static int rf__nccl_fn(void *arg)
{
	struct rf__ncoll *x = arg;
	struct rf_comm *c = x->c;
	struct rf__nccl *n = RF__NC(c);
	cudaStream_t cs = (cudaStream_t)rf_cuda_stream_handle(c->dstream);
	void *d;
	ncclResult_t r;

	if (!n || n->aborted) {
		snprintf(x->msg, sizeof(x->msg), "nccl %s #%" PRIu64 " (key %u): the communicator "
			 "is gone (an earlier collective failed on this rank)", x->what, x->seq,
			 x->key);
		return -EIO;
	}
	d = x->data ? x->data : n->dscr->data;
	if (!x->data) {
		memcpy(n->hscr, x->res->vals, x->bytes);
		if (cudaMemcpyAsync(d, n->hscr, x->bytes, cudaMemcpyHostToDevice, cs) != cudaSuccess)
			goto cuda_fail;
	}
	/* launched now; outstanding until its done (a later one launched behind it on the
	 * stream takes over the watch: a stall of either shows) */
	rf__comm_publish(c, x->seq, x->key, x->bytes);
	r = rf__nc.all_reduce(d, d, x->numel, x->dt, x->op, n->comm, cs);
	if (r != ncclSuccess) {
		snprintf(x->msg, sizeof(x->msg), "nccl %s #%" PRIu64 " (key %u, %zu bytes, rank %d "
			 "of %d): %s", x->what, x->seq, x->key, x->bytes, c->rank, c->size,
			 rf__nc.error_string(r));
		/* a CUDA error NCCL left pending would fail the stream's next launch */
		(void)cudaGetLastError();
		rf__nccl_abort(c);
		return -EIO;
	}
	if (!x->data &&
	    cudaMemcpyAsync(n->hscr, d, x->bytes, cudaMemcpyDeviceToHost, cs) != cudaSuccess)
		goto cuda_fail;
	return 0;
cuda_fail:
	snprintf(x->msg, sizeof(x->msg), "nccl %s #%" PRIu64 " (key %u): copying the values: %s",
		 x->what, x->seq, x->key, cudaGetErrorString(cudaGetLastError()));
	rf__nccl_abort(c);     /* a collective chained behind this one must not go out alone */
	return -EIO;
}

static void rf__nccl_done(void *arg, int status)
{
	struct rf__ncoll *x = arg;

	rf__comm_unpublish(x->c, x->seq);
	if (x->res && status == 0)
		memcpy(x->res->vals, RF__NC(x->c)->hscr, x->bytes);
	rf__comm_keep_error(x->c, status, x->msg);
	rf__hostres_put(x->res);
	free(x);
}

/* ---- the order check: gather (seq, key, bytes) on the GPU, compare on the comm thread */

struct rf__ncheck {
	int refs;               /* the gather op and the compare op (reactor thread only) */
	struct rf_comm *c;
	uint64_t me[3];
	const char *what;
	char msg[400];
};

static int rf__ncheck_gather_fn(void *arg)
{
	struct rf__ncheck *k = arg;
	struct rf_comm *c = k->c;
	struct rf__nccl *n = RF__NC(c);
	cudaStream_t cs = (cudaStream_t)rf_cuda_stream_handle(c->dstream);
	uint64_t *d;
	ncclResult_t r;

	if (!n || n->aborted) {
		snprintf(k->msg, sizeof(k->msg), "nccl order check #%" PRIu64 ": the communicator is "
			 "gone (an earlier collective failed on this rank)", k->me[0]);
		return -EIO;
	}
	d = n->dscr->data;
	memcpy(n->hscr + RF__NS_ME, k->me, sizeof(k->me));
	if (cudaMemcpyAsync(d + RF__NS_ME, n->hscr + RF__NS_ME, sizeof(k->me),
			    cudaMemcpyHostToDevice, cs) != cudaSuccess)
		goto cuda_fail;
	rf__comm_publish(c, k->me[0], (uint32_t)k->me[1], sizeof(k->me));
	if ((r = rf__nc.all_gather(d + RF__NS_ME, d + RF__NS_ALL, 3, ncclUint64, n->comm, cs)) !=
	    ncclSuccess) {
		snprintf(k->msg, sizeof(k->msg), "nccl order check (ncclAllGather): %s",
			 rf__nc.error_string(r));
		(void)cudaGetLastError();       /* as in rf__nccl_fn */
		rf__nccl_abort(c);
		return -EIO;
	}
	if (cudaMemcpyAsync(n->hscr + RF__NS_ALL, d + RF__NS_ALL, (size_t)c->size * 24,
			    cudaMemcpyDeviceToHost, cs) != cudaSuccess)
		goto cuda_fail;
	return 0;
cuda_fail:
	snprintf(k->msg, sizeof(k->msg), "nccl order check: %s",
		 cudaGetErrorString(cudaGetLastError()));
	rf__nccl_abort(c);
	return -EIO;
}

static int rf__ncheck_compare_fn(void *arg)
{
	struct rf__ncheck *k = arg;

	return rf__order_compare(k->c, k->me, RF__NC(k->c)->hscr + RF__NS_ALL, k->what, k->msg,
				 sizeof(k->msg));
}

static void rf__ncheck_put(struct rf__ncheck *k)
{
	if (--k->refs == 0)
		free(k);
}

static void rf__ncheck_gather_done(void *arg, int status)
{
	struct rf__ncheck *k = arg;

	rf__comm_unpublish(k->c, k->me[0]);
	rf__comm_keep_error(k->c, status, k->msg);
	rf__ncheck_put(k);
}

static void rf__ncheck_compare_done(void *arg, int status)
{
	struct rf__ncheck *k = arg;

	rf__comm_keep_error(k->c, status, k->msg);
	rf__ncheck_put(k);
}

/* Before collective seq: the gather on the GPU stream, the comparison on the comm
 * stream; both write the ordering variable, so the collective runs after them, or is
 * skipped when they fail. */
static int rf__nccl_check(struct rf_comm *c, uint64_t seq, uint32_t key, size_t bytes,
			  const char *what)
{
	struct rf__ncheck *k = calloc(1, sizeof(*k));
	struct rf_op_desc d = { .fn = rf__ncheck_gather_fn, .ctx = k,
				.done = rf__ncheck_gather_done, .reads = &c->order, .nreads = 1,
				.writes = &c->order, .nwrites = 1, .stream = c->dstream,
				.name = "nccl_order_gather" };
	int ret;

	if (!k)
		return rf__fail(-ENOMEM, "nccl order check: out of memory");
	k->refs = 2;
	k->c = c;
	k->me[0] = seq;
	k->me[1] = key;
	k->me[2] = bytes;
	k->what = what;
	if ((ret = rf_engine_push(c->eng, &d)) < 0) {
		free(k);
		return rf__fail(ret, "nccl order check: push failed: %s", strerror(-ret));
	}
	d.fn = rf__ncheck_compare_fn;
	d.done = rf__ncheck_compare_done;
	d.stream = c->stream;
	d.name = "nccl_order_compare";
	if ((ret = rf_engine_push(c->eng, &d)) < 0) {
		rf__ncheck_put(k);    /* the gather's reference stays with the gather */
		rf__nccl_abort(c);    /* its allgather goes out on this rank alone */
		return rf__fail(ret, "nccl order check: push failed: %s", strerror(-ret));
	}
	return 0;
}

static void rf__ninit_done(void *arg, int status)
{
	struct rf__ninit *in = arg;

	(void)status;
	if (--in->refs == 0)
		free(in);
}

/* Push collective x (its tensors' variables in w[1..nw-1]); c->seq is the caller's. */
static int rf__nccl_push(struct rf_comm *c, struct rf__ncoll *x, struct rf_var **w, unsigned nw)
{
	struct rf_op_desc d = { .fn = rf__nccl_fn, .ctx = x, .done = rf__nccl_done, .reads = w,
				.nreads = 1, .writes = w, .nwrites = nw, .stream = c->dstream,
				.name = x->data ? "nccl_allreduce" : "nccl_allreduce_host" };
	int ret;

	x->c = c;
	x->seq = c->seq;
	if (c->check && (ret = rf__nccl_check(c, x->seq, x->key, x->bytes, x->what)) < 0) {
		free(x);
		return ret;
	}
	if ((ret = rf_engine_push(c->eng, &d)) < 0) {
		free(x);
		if (c->check)
			rf__nccl_abort(c);   /* its order check went out without it */
		return rf__fail(ret, "nccl %s: push failed: %s", d.name, strerror(-ret));
	}
	return 0;
}

static int rf__nccl_allreduce(struct rf_comm *c, struct rf_tensor *const *ts, unsigned n,
			      size_t numel, uint32_t key)
{
	struct rf_var *w[1 + RF__COMM_MAXT] = { c->order };
	struct rf__ncoll *x;
	int ret;

	if (!RF__NC(c))
		return rf__fail(-EINVAL, "allreduce of %s (key %u): a GPU tensor, and this comm has "
				"no GPU (rf_comm_use_gpu)", ts[0]->name, key);
	if (ts[0]->dev != c->dev)
		return rf__fail(-EINVAL, "allreduce of %s (key %u): on %s, the comm's GPU is %s",
				ts[0]->name, key, rf_device_name(ts[0]->dev), rf_device_name(c->dev));
	if (!(x = calloc(1, sizeof(*x))))
		return rf__fail(-ENOMEM, "allreduce: out of memory");
	for (unsigned i = 0; i < n; i++)
		w[1 + i] = ts[i]->var;
	x->data = ts[0]->data;
	x->numel = numel;
	x->dt = ts[0]->dtype == RF_I32 ? ncclInt32 : ncclFloat32;
	x->op = ncclSum;
	x->bytes = numel * 4;
	x->key = key;
	x->what = "allreduce";
	if ((ret = rf__nccl_push(c, x, w, 1 + n)) == 0)
		c->seq++;
	return ret;
}

static int rf__nccl_allreduce_host(struct rf_comm *c, struct rf__hostres *res, size_t n,
				   enum rf_comm_dtype dt, enum rf_comm_reduce op, uint32_t key)
{
	static const ncclRedOp_t ops[] = { [RF_COMM_SUM] = ncclSum, [RF_COMM_MIN] = ncclMin,
					   [RF_COMM_MAX] = ncclMax };
	struct rf_var *w[1] = { c->order };
	struct rf__ncoll *x;

	if (!RF__NC(c))
		return rf__fail(-EINVAL, "allreduce_host (key %u): this comm has no MPI, and its "
				"GPU is not set up yet (rf_comm_use_gpu): host values go through it",
				key);
	if (n > RF__NS_VALS)
		return rf__fail(-EINVAL, "allreduce_host (key %u): %zu values, at most %d", key, n,
				RF__NS_VALS);
	if (!(x = calloc(1, sizeof(*x))))
		return rf__fail(-ENOMEM, "allreduce_host: out of memory");
	x->res = res;
	x->numel = n;
	x->bytes = n * 8;
	x->dt = dt == RF_COMM_F64 ? ncclFloat64 : ncclUint64;
	x->op = ops[op];
	x->key = key;
	x->what = "allreduce_host";
	/* res->refs already counts the op's reference (rf_comm_allreduce_host) */
	return rf__nccl_push(c, x, w, 1);
}

/* One collective of one float that every rank sets to 1: the sum is the world size. */
static int rf__nccl_warmup(struct rf_comm *c)
{
	struct rf_tensor *t = NULL;
	float v = 0;
	int ret;

	if ((ret = rf_tensor_create(c->dev, RF_F32, "nccl_warmup", RF_DIMS(1), &t)) < 0)
		return rf__fail(ret, "comm: NCCL warm-up: cannot allocate on %s", rf_device_name(c->dev));
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

static int rf__nccl_attach(struct rf_comm *c, struct rf_device *gpu, struct rf_stream *s)
{
	struct rf__ninit *in;
	struct rf_op_desc d = { 0 };
	int ret;

	if (rf_device_kind(gpu) != RF_DEVICE_CUDA)
		return rf__fail(-ENOTSUP, "NCCL carries CUDA devices' collectives, %s is none",
				rf_device_name(gpu));
	if (!rf_cuda_stream_handle(s))
		return rf__fail(-EINVAL, "comm: NCCL on %s needs one of its streams, %s is none",
				rf_device_name(gpu), rf_stream_name(s));
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
	c->dctx = calloc(1, sizeof(struct rf__nccl));
	if (!c->dctx) {
		rf__nc.destroy(in->comm);
		rf__ninit_done(in, 0);
		return rf__fail(-ENOMEM, "comm: out of memory");
	}
	RF__NC(c)->comm = in->comm;
	RF__NC(c)->ordinal = in->ordinal;
	rf__ninit_done(in, 0);
	c->dev = gpu;
	c->dstream = s;
	size_t words = RF__NS_ALL + 3 * (size_t)c->size;
	/* The host scratch is the device layer's pinned memory, registered in a context
	 * this process has: cudaMallocHost, on a thread that never chose a GPU, would
	 * make a context on GPU 0. */
	if ((ret = rf_tensor_create(gpu, RF_F32, "nccl_scratch", RF_DIMS((int64_t)words * 2),
				    &RF__NC(c)->dscr)) < 0) {
		rf__fail(ret, "comm: NCCL: cannot allocate its scratch on %s", rf_device_name(gpu));
	} else if ((ret = rf_pinned_create(words * 8, &RF__NC(c)->pin)) < 0 ||
		   !rf_pinned_is_registered(RF__NC(c)->pin)) {
		ret = rf__fail(ret < 0 ? ret : -ENOMEM, "comm: NCCL: cannot pin %zu bytes of host "
			       "memory", words * 8);
	} else {
		RF__NC(c)->hscr = rf_pinned_base(RF__NC(c)->pin);
		ret = rf__nccl_warmup(c);
	}
	if (ret < 0) {      /* no half-made GPU side: the comm is as before the call */
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", rf_last_error());
		rf__nccl_abort(c);
		rf__nccl_destroy(c);
		c->dev = NULL;
		c->dstream = NULL;
		rf__fail(ret, "%s", msg);
	}
	return ret;
}

static void rf__nccl_abort(struct rf_comm *c)
{
	if (RF__NC(c) && !RF__NC(c)->aborted) {
		rf__nc.abort(RF__NC(c)->comm);
		RF__NC(c)->aborted = 1;
	}
}

void rf__nccl_destroy(struct rf_comm *c)
{
	if (!RF__NC(c))
		return;
	rf_engine_wait_var(c->eng, c->order);
	if (!RF__NC(c)->aborted)
		rf__nc.destroy(RF__NC(c)->comm);
	rf_tensor_destroy(RF__NC(c)->dscr);
	rf_pinned_destroy(RF__NC(c)->pin);
	free(c->dctx);
	c->dctx = NULL;
}

const struct rf__dev_transport rf__nccl_transport = {
	/* .name           = */ "nccl",
	/* .attach         = */ rf__nccl_attach,
	/* .allreduce      = */ rf__nccl_allreduce,
	/* .allreduce_host = */ rf__nccl_allreduce_host,
	/* .abort          = */ rf__nccl_abort,
	/* .destroy        = */ rf__nccl_destroy,
};
