/* train/trainer-devices.c -- the trainer's devices and what lives on them: K CPU or
 * CUDA devices, the model replicas (replica 0 initialised, the others copies), and for
 * K > 1 the key-value store that sums the gradients. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "trainer-impl.h"
#include "ops.h"

/* The cores this process may use (its affinity), shared with the other ranks on the
 * machine when there is a comm. */
static int rf__cores_here(const struct rf_trainer *t)
{
	cpu_set_t set;
	int cores = 1, local;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		cores = CPU_COUNT(&set);
	local = t->comm && rf_comm_local_size(t->comm) > 0 ? rf_comm_local_size(t->comm) : 1;
	return cores / local;
}

/* Compute streams per replica when not asked for. The MLP's work is two large GEMMs
 * per step, which OpenBLAS spreads over every core of a single stream. LeNet's is
 * many small GEMMs (im2col groups) between single-threaded im2col, pooling and ReLU
 * passes: with two OpenBLAS threads on one stream the second core mostly spins in
 * sched_yield, while two streams of one thread each (weight gradients beside data
 * gradients) keep both cores busy -- measured on a 2-core machine, 30,720 records:
 * 12.8 s (1 stream, 2 threads) vs 6.1 s (2 streams, 1 thread each). So: LeNet on a
 * CPU with >= 2 cores and one replica gets 2 streams, and so does ResNet-18 (its
 * convolutions are larger GEMMs, but the same split of weight and data gradients
 * applies); the MLP and everything else 1. */
unsigned rf__auto_streams(const struct rf_trainer *t)
{
	if (strcmp(t->spec->name, "mlp") == 0 || strcmp(t->device_kind, "cpu") != 0 || t->K > 1)
		return 1;
	return rf__cores_here(t) >= 2 ? 2 : 1;
}

/* GPU r mod (GPUs) for replica r: the compute streams, then one for the kv store's
 * reductions when K > 1; and a CPU device for staging. */
static int rf__open_cuda(struct rf_trainer *t)
{
	int n = rf_cuda_count();
	/* an extra stream for the kv-store's reductions (K > 1) or NCCL's (a comm) */
	struct rf_cuda_opts co = { .streams = t->nstreams + (t->K > 1 || t->comm ? 1 : 0) };
	/* the ranks on a machine take its GPUs in turn */
	unsigned first = t->comm ? (unsigned)rf_comm_local_rank(t->comm) * t->K : 0;
	unsigned r;
	int ret;

	if (n <= 0) {
		rf__trainer_msg(t, "--device cuda: no usable CUDA device (%s)",
				n == 0 ? "no GPU, no driver, or a build without CUDA" : "error");
		return -ENODEV;
	}
	if (t->comm && (unsigned)rf_comm_local_size(t->comm) * t->K > (unsigned)n) {
		rf__trainer_msg(t, "--device cuda: %d processes x %u devices on this machine, and "
				"%d GPU%s: NCCL needs a GPU of its own per rank", rf_comm_local_size(t->comm),
				t->K, n, n == 1 ? "" : "s");
		return -ENODEV;
	}
	for (r = 0; r < t->K; r++) {
		ret = rf_cuda_open(t->eng, (int)((first + r) % (unsigned)n), &co, &t->dev[r]);
		if (ret < 0) {
			rf__trainer_msg(t, "--device cuda: cannot open GPU %u: %s",
					(first + r) % (unsigned)n, strerror(-ret));
			return ret == -ENOTSUP ? -ENODEV : ret;
		}
		t->ndev_open++;
	}
	ret = rf_cpu_open(t->eng, NULL, &t->host);
	if (ret < 0) {
		rf__trainer_msg(t, "cannot open the host device: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

/* With a comm and no --threads: the machine's cores split between its ranks and
 * then between each rank's compute streams (else the devices' policy). */
static int rf__blas_threads(const struct rf_trainer *t)
{
	int cores;

	if (t->o.blas_threads || !t->comm)
		return t->o.blas_threads;
	cores = rf__cores_here(t) / (int)(t->K * t->nstreams);
	return cores > 1 ? cores : 1;
}

static int rf__open_cpus(struct rf_trainer *t)
{
	struct rf_cpu_opts co = { .streams = t->nstreams, .blas_threads = rf__blas_threads(t) };
	unsigned r;
	int ret;

	for (r = 0; r < t->K; r++) {
		ret = rf_cpu_open(t->eng, &co, &t->dev[r]);
		if (ret < 0) {
			rf__trainer_msg(t, "cannot open CPU device %u: %s", r, rf_last_error());
			return ret;
		}
		t->ndev_open++;
	}
	return 0;
}

int rf__open_devices(struct rf_trainer *t)
{
	if (strcmp(t->device_kind, "cuda") == 0)
		return rf__open_cuda(t);
	if (strcmp(t->device_kind, "cpu") != 0) {
		rf__trainer_msg(t, "--device %s: expected cpu or cuda", t->device_kind);
		return -EINVAL;
	}
	return rf__open_cpus(t);
}

/* Replica 0 is initialised from the seeded generator; the others copy it. */
static int rf__init_weights(struct rf_trainer *t)
{
	unsigned r;
	int ret;

	ret = rf_model_init(t->rep[0], t->prng, t->o.init);
	for (r = 1; r < t->K && ret == 0; r++)
		ret = rf_copy(t->rep[r]->s, t->rep[r]->params, t->rep[0]->params);
	return ret;
}

int rf__make_replicas(struct rf_trainer *t)
{
	unsigned r;
	int ret;

	for (r = 0; r < t->K; r++) {
		char tag[16];
		snprintf(tag, sizeof(tag), "r%u", r);
		ret = rf_model_create(&t->rep[r], t->spec, t->dev[r], rf_device_stream(t->dev[r], 0),
				      t->K > 1 ? tag : NULL);
		if (ret < 0) {
			rf__trainer_msg(t, "cannot create replica %u: %s", r, strerror(-ret));
			return ret;
		}
		if (t->nstreams > 1)
			t->rep[r]->s2 = rf_device_stream(t->dev[r], 1);
	}
	rf_prng_create(t->eng, t->o.seed, "init_prng", &t->prng);
	if (!t->prng)
		return -ENOMEM;
	if ((ret = rf__init_weights(t)) < 0) {
		rf__trainer_msg(t, "cannot initialise the weights: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

/* K > 1: key k = parameter tensor k, homed on replica k mod K's device; on CUDA its
 * reductions run on the stream after the compute ones. */
/* With a comm on CUDA (one GPU per process): NCCL on the stream after the compute
 * ones; blocks until every rank has made its communicator. */
static int rf__comm_gpu(struct rf_trainer *t)
{
	int ret;

	if (!t->comm || rf_device_kind(t->dev[0]) != RF_DEVICE_CUDA)
		return 0;
	ret = rf_comm_use_gpu(t->comm, t->dev[0], rf_device_stream(t->dev[0], t->nstreams));
	if (ret < 0)
		rf__trainer_msg(t, "%s", rf_last_error());
	return ret;
}

int rf__make_kvstore(struct rf_trainer *t)
{
	struct rf_stream *ks[RF_TRAIN_MAX_DEVICES] = { 0 };
	unsigned r, k;
	int ret;

	if (t->K == 1)
		return rf__comm_gpu(t);
	for (r = 0; r < t->K; r++)
		if (rf_device_kind(t->dev[r]) == RF_DEVICE_CUDA)
			ks[r] = rf_device_stream(t->dev[r], t->nstreams);
	ret = rf_kv_create(&t->kv, t->eng, t->dev, ks, t->K);
	for (k = 0; ret == 0 && k < t->spec->ntensors; k++)
		ret = rf_kv_init(t->kv, (int)k, t->rep[0]->g[k]);
	if (ret == 0 && t->comm)
		ret = rf_kv_set_comm(t->kv, t->comm);
	if (ret < 0) {
		rf__trainer_msg(t, "cannot create the key-value store: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

void rf__close_devices(struct rf_trainer *t)
{
	unsigned r;

	for (r = 0; r < t->ndev_open; r++)
		rf_device_close(t->dev[r]);
	rf_device_close(t->host);
}
