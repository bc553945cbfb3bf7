/* dist/comm.c -- MPI collectives as engine ops on a comm stream (one worker thread that
 * owns MPI); their completions reach the reactor as every worker completion does. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "comm-impl.h"
#include "rf-internal.h"

/* One collective (or init/finalize) in flight; freed by its done callback. */
struct rf__coll {
	struct rf_comm *c;
	struct rf_tensor *t;
	uint64_t seq;
	uint32_t key;
	char msg[512];          /* written on the comm thread, read in done */
};

static int rf__mpi_fail(struct rf__coll *x, int code, const char *what, int err)
{
	char es[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(err, es, &len) != MPI_SUCCESS)
		snprintf(es, sizeof(es), "MPI error %d", err);
	snprintf(x->msg, sizeof(x->msg), "%.200s: %.250s", what, es);
	return code;
}

static int rf__local_rank(void)
{
	const char *v = getenv("OMPI_COMM_WORLD_LOCAL_RANK");

	if (!v)
		v = getenv("LOCAL_RANK");
	return v ? atoi(v) : 0;
}

static int rf__init_fn(void *arg)
{
	struct rf__coll *x = arg;
	struct rf_comm *c = x->c;
	int provided = 0, inited = 0, ret;

	MPI_Initialized(&inited);
	if (inited) {
		snprintf(x->msg, sizeof(x->msg), "MPI is already initialized in this process: "
			 "one comm per process, and MPI belongs to its stream");
		return -EBUSY;
	}
	ret = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
	if (ret != MPI_SUCCESS)
		return rf__mpi_fail(x, -EIO, "MPI_Init_thread", ret);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &c->size);
	c->local_rank = rf__local_rank();
	c->peers = calloc((size_t)c->size * 3, sizeof(uint64_t));
	if (!c->peers) {
		snprintf(x->msg, sizeof(x->msg), "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static int rf__fini_fn(void *arg)
{
	int inited = 0, done = 0;

	MPI_Initialized(&inited);
	MPI_Finalized(&done);
	if (inited && !done)
		MPI_Finalize();
	return 0;
}

/* Every rank gathers every rank's (seq, key, bytes) and compares: a mismatch fails the
 * collective on every rank, naming both sides, before any data moves. */
static int rf__order_check(struct rf__coll *x)
{
	struct rf_comm *c = x->c;
	uint64_t me[3] = { x->seq, x->key, x->t->nbytes };
	int ret = MPI_Allgather(me, 3, MPI_UINT64_T, c->peers, 3, MPI_UINT64_T, MPI_COMM_WORLD);

	if (ret != MPI_SUCCESS)
		return rf__mpi_fail(x, -EIO, "order check (MPI_Allgather)", ret);
	for (int r = 0; r < c->size; r++) {
		const uint64_t *p = c->peers + 3 * r;
		if (p[0] == me[0] && p[1] == me[1] && p[2] == me[2])
			continue;
		snprintf(x->msg, sizeof(x->msg), "allreduce #%" PRIu64 ": collectives out of "
			 "order: rank %d has key %" PRIu64 " (%" PRIu64 " bytes, #%" PRIu64 "), rank "
			 "%d has key %" PRIu64 " (%" PRIu64 " bytes, #%" PRIu64 ")", x->seq, c->rank,
			 me[1], me[2], me[0], r, p[1], p[2], p[0]);
		return -EPROTO;
	}
	return 0;
}

static int rf__allreduce_fn(void *arg)
{
	struct rf__coll *x = arg;
	struct rf_tensor *t = x->t;
	MPI_Datatype dt = t->dtype == RF_F32 ? MPI_FLOAT : MPI_INT32_T;
	int ret;

	if (x->c->check && (ret = rf__order_check(x)) < 0)
		return ret;
	ret = MPI_Allreduce(MPI_IN_PLACE, t->data, (int)t->numel, dt, MPI_SUM, MPI_COMM_WORLD);
	if (ret != MPI_SUCCESS) {
		char what[128];
		snprintf(what, sizeof(what), "allreduce #%" PRIu64 " (key %u, %zu bytes, rank %d "
			 "of %d)", x->seq, x->key, t->nbytes, x->c->rank, x->c->size);
		return rf__mpi_fail(x, -EIO, what, ret);
	}
	return 0;
}

static void rf__coll_done(void *arg, int status)
{
	struct rf__coll *x = arg;

	/* the first failure is the cause; the skipped ones after it carry no message */
	if (status < 0 && x->msg[0] && !x->c->last_error[0])
		rf__fail_into(x->c->last_error, sizeof(x->c->last_error), status, "%s", x->msg);
	free(x);
}

static int rf__push_coll(struct rf_comm *c, rf_op_fn fn, struct rf_tensor *t, uint32_t key,
			 unsigned flags, const char *name)
{
	struct rf__coll *x = calloc(1, sizeof(*x));
	struct rf_var *w[2] = { c->order, t ? t->var : NULL };
	/* reading the ordering variable too: after a failed collective every later one is
	 * skipped (poisoned), never issued with some ranks missing */
	struct rf_op_desc d = { .fn = fn, .ctx = x, .done = rf__coll_done, .reads = w,
				.nreads = 1, .writes = w, .nwrites = t ? 2 : 1,
				.stream = c->stream, .name = name, .flags = flags };
	int ret;

	if (!x)
		return rf__fail(-ENOMEM, "%s: out of memory", name);
	x->c = c;
	x->t = t;
	x->key = key;
	x->seq = c->seq;
	ret = rf_engine_push(c->eng, &d);
	if (ret < 0) {
		free(x);
		return rf__fail(ret, "%s: push failed: %s", name, strerror(-ret));
	}
	return 0;
}

int rf_comm_create(struct rf_engine *e, const struct rf_comm_opts *opts, struct rf_comm **out)
{
	struct rf_comm *c;
	const char *env;
	int ret;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return rf__fail(-ENOMEM, "comm: out of memory");
	c->eng = e;
	c->check = opts ? opts->check : -1;
	if (c->check < 0)
		c->check = (env = getenv("RF_DIST_CHECK")) && *env && strcmp(env, "0");
	ret = rf_var_create(e, "comm_order", &c->order);
	if (ret == 0)
		ret = rf_worker_stream_create(e, "comm", 0, &c->stream);
	if (ret < 0) {
		if (c->order)
			rf_var_destroy(e, c->order, NULL, NULL, NULL);
		free(c);
		return rf__fail(ret, "comm: cannot start the comm stream: %s", strerror(-ret));
	}
	ret = rf__push_coll(c, rf__init_fn, NULL, 0, 0, "mpi_init");
	if (ret == 0)
		ret = rf_engine_wait_var(e, c->order);
	if (ret < 0) {
		char msg[sizeof(c->last_error)];
		snprintf(msg, sizeof(msg), "%s", c->last_error[0] ? c->last_error : rf_last_error());
		rf_comm_destroy(c);
		return rf__fail(ret, "comm: %s", msg);
	}
	*out = c;
	return 0;
}

void rf_comm_destroy(struct rf_comm *c)
{
	if (!c)
		return;
	if (rf__push_coll(c, rf__fini_fn, NULL, 0, RF_OP_ALWAYS, "mpi_finalize") == 0)
		rf_engine_wait_var(c->eng, c->order);
	rf_stream_destroy(c->stream);   /* waits for what else runs on it */
	rf_var_destroy(c->eng, c->order, NULL, NULL, NULL);
	rf_engine_wait_idle(c->eng);
	free(c->peers);
	free(c);
}

int rf_comm_allreduce(struct rf_comm *c, struct rf_tensor *t, uint32_t key)
{
	int ret;

	if (!c || !t)
		return rf__fail(-EINVAL, "allreduce: no comm or no tensor");
	if (rf_device_kind(t->dev) != RF_DEVICE_CPU || (t->dtype != RF_F32 && t->dtype != RF_I32))
		return rf__fail(-EINVAL, "allreduce of %s (key %u): expected an f32 or i32 tensor on "
				"a CPU device", t->name, key);
	if (t->numel > (size_t)INT32_MAX)
		return rf__fail(-EINVAL, "allreduce of %s (key %u): %zu elements, at most 2^31-1",
				t->name, key, t->numel);
	ret = rf__push_coll(c, rf__allreduce_fn, t, key, 0, "allreduce");
	if (ret == 0)
		c->seq++;
	return ret;
}

int rf_comm_wait(struct rf_comm *c)
{
	return rf_engine_wait_var(c->eng, c->order);
}

int rf_comm_rank(const struct rf_comm *c) { return c->rank; }
int rf_comm_size(const struct rf_comm *c) { return c->size; }
int rf_comm_local_rank(const struct rf_comm *c) { return c->local_rank; }
struct rf_stream *rf_comm_stream(const struct rf_comm *c) { return c->stream; }
uint64_t rf_comm_seq(const struct rf_comm *c) { return c->seq; }
const char *rf_comm_last_error(const struct rf_comm *c) { return c->last_error; }
