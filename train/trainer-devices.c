/* train/trainer-devices.c -- the trainer's devices and what lives on them: K devices
 * of the kind asked for (with a host device for staging where theirs is not host
 * memory), the model replicas (replica 0 initialised, the others copies), and for
 * K > 1 the key-value store that sums the gradients. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trainer-impl.h"
#include "ops.h"

/* The cores this process may use (its affinity), shared with the other ranks on the
 * machine when there is a comm. */
static int rf__cores_here(const struct rf_trainer *t)
{
	int cores = rf__cpus(), local;

	local = t->comm && rf_comm_local_size(t->comm) > 0 ? rf_comm_local_size(t->comm) : 1;
	return cores / local;
}

/* Compute streams per replica when not asked for. The MLP's work is two large GEMMs
 * per step, which the BLAS library spreads over every core of a single stream.
 * LeNet's is many small GEMMs (im2col groups) between single-threaded im2col, pooling
 * and ReLU passes: with two BLAS threads on one stream the second core mostly spins in
 * sched_yield, while two streams of one thread each (weight gradients beside data
 * gradients) keep both cores busy -- measured on a 2-core machine, 30,720 records:
 * 12.8 s (1 stream, 2 threads) vs 6.1 s (2 streams, 1 thread each). So: LeNet on a
 * host device with >= 2 cores and one replica gets 2 streams, and so does ResNet-18
 * (its convolutions are larger GEMMs, but the same split of weight and data gradients
 * applies); the MLP and everything else 1. */
unsigned rf__auto_streams(const struct rf_trainer *t)
{
	if (strcmp(t->spec->name, "mlp") == 0 || rf_device_kind_host_memory(t->device_kind) != 1 ||
	    t->K > 1)
		return 1;
	return rf__cores_here(t) >= 2 ? 2 : 1;
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

/* Devices whose memory is not the host's: device r mod (devices) for replica r, the
 * ranks on a machine taking them in turn; the compute streams, then one for the kv
 * store's reductions (K > 1) or a comm's collectives; and a host device for staging.
 * They take no fallback path: a training run that would convolve by a slower path
 * than the device's library says so and stops (rf_device_opts.no_fallback). */
static int rf__open_remote(struct rf_trainer *t, int n)
{
	struct rf_device_opts o = { .streams = t->nstreams + (t->K > 1 || t->comm ? 1 : 0),
				    .precision = t->o.precision, .no_fallback = 1 };
	unsigned first = t->comm ? (unsigned)rf_comm_local_rank(t->comm) * t->K : 0;
	unsigned r;
	int ret;

	if (t->comm && (unsigned)rf_comm_local_size(t->comm) * t->K > (unsigned)n) {
		rf__trainer_msg(t, "--device %s: %d processes x %u devices on this machine, and "
				"%d device%s: each rank needs devices of its own", t->device_kind,
				rf_comm_local_size(t->comm), t->K, n, n == 1 ? "" : "s");
		return -ENODEV;
	}
	for (r = 0; r < t->K; r++) {
		char spec[32];
		snprintf(spec, sizeof(spec), "%s:%u", t->device_kind, (first + r) % (unsigned)n);
		ret = rf_device_open_opts(t->eng, spec, &o, &t->dev[r]);
		if (ret < 0) {
			rf__trainer_msg(t, "--device %s: cannot open %s: %s", t->device_kind, spec,
					rf_last_error());
			return ret == -ENOTSUP ? -ENODEV : ret;
		}
		t->ndev_open++;
	}
	ret = rf_device_open(t->eng, "cpu", &t->host);
	if (ret < 0) {
		rf__trainer_msg(t, "cannot open the host device: %s", rf_last_error());
		return ret;
	}
	return 0;
}

static int rf__open_host(struct rf_trainer *t)
{
	struct rf_device_opts o = { .streams = t->nstreams, .blas_threads = rf__blas_threads(t),
				    .precision = t->o.precision };
	unsigned r;
	int ret;

	for (r = 0; r < t->K; r++) {
		char spec[32];
		snprintf(spec, sizeof(spec), "%s:%u", t->device_kind, r);
		ret = rf_device_open_opts(t->eng, spec, &o, &t->dev[r]);
		if (ret < 0) {
			rf__trainer_msg(t, "cannot open device %s: %s", spec, rf_last_error());
			return ret;
		}
		t->ndev_open++;
	}
	return 0;
}

/* "a, b or c": the device kinds of this build */
const char *rf__kinds_or(void)
{
	static char buf[128];
	const char *k = rf_device_kinds(), *last = strrchr(k, ',');

	if (!last)
		return k;
	snprintf(buf, sizeof(buf), "%.*s or%s", (int)(last - k), k, last + 1);
	return buf;
}

int rf__open_devices(struct rf_trainer *t)
{
	int host = rf_device_kind_host_memory(t->device_kind), n;

	if (host < 0) {
		rf__trainer_msg(t, "--device %s: expected %s", t->device_kind, rf__kinds_or());
		return -EINVAL;
	}
	if (host)
		return rf__open_host(t);
	if ((n = rf_device_count(t->device_kind)) <= 0) {
		struct rf_device *d = NULL;
		char spec[32];
		/* opening one says why there is none */
		snprintf(spec, sizeof(spec), "%s:0", t->device_kind);
		if (rf_device_open(t->eng, spec, &d) == 0)
			rf_device_close(d);
		rf__trainer_msg(t, "--device %s: no usable device: %s", t->device_kind,
				rf_last_error());
		return -ENODEV;
	}
	return rf__open_remote(t, n);
}

/* The replicas' compute format: bf16 where asked on a device that computes in bf16
 * (not the CPU: it ignores the precision), NHWC where asked, or by default where the
 * device's memory is its own and it runs every op of the model's convolutional part
 * in NHWC; else f32 row-major. */
static int rf__set_formats(struct rf_trainer *t)
{
	struct rf_device *d = t->dev[0];
	enum rf_tdtype dt = rf_device_precision(d) == RF_PRECISION_BF16 ? RF_BF16 : RF_F32;
	int ret = 0;

	for (unsigned r = 0; r < t->K && ret == 0; r++) {
		enum rf_layout lay = t->o.channels_last > 0 ? RF_LAYOUT_NHWC : RF_LAYOUT_ROWMAJOR;
		if (t->o.channels_last == 0 && !rf_device_host_memory(d) &&
		    rf_model_set_format(t->rep[r], dt, RF_LAYOUT_NHWC) == 0)
			continue;
		if ((ret = rf_model_set_format(t->rep[r], dt, lay)) < 0)
			rf__trainer_msg(t, "--device %s%s%s: %s", t->device_kind,
					dt == RF_BF16 ? " --precision bf16" : "",
					lay == RF_LAYOUT_NHWC ? " --layout nhwc" : "", rf_last_error());
	}
	return ret;
}

/* Replica 0 is initialised from the seeded generator; the others copy it. An
 * evaluating trainer's parameters are loaded by its caller (rf-infer: an export), so
 * they are zeroed, not drawn (ResNet-18's 11 M draws were 7 % of a short rf-infer). */
static int rf__init_weights(struct rf_trainer *t)
{
	unsigned r;
	int ret;

	ret = t->o.eval_only ? rf_fill(t->rep[0]->s, t->rep[0]->params, 0.0f)
			     : rf_model_init(t->rep[0], t->prng, t->o.init);
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
	if ((ret = rf__set_formats(t)) < 0)
		return ret;
	rf_prng_create(t->eng, t->o.seed, "init_prng", &t->prng);
	if (!t->prng)
		return -ENOMEM;
	if ((ret = rf__init_weights(t)) < 0) {
		rf__trainer_msg(t, "cannot initialise the weights: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

/* With a comm on a device whose memory is not the host's (one per process): its
 * collectives on the stream after the compute ones; blocks until every rank has made
 * its communicator. */
static int rf__comm_gpu(struct rf_trainer *t)
{
	int ret;

	if (!t->comm || rf_device_host_memory(t->dev[0]))
		return 0;
	ret = rf_comm_use_gpu(t->comm, t->dev[0], rf_device_stream(t->dev[0], t->nstreams));
	if (ret < 0)
		rf__trainer_msg(t, "%s", rf_last_error());
	return ret;
}

/* K > 1: key k = parameter tensor k, homed on replica k mod K's device; where that is
 * not host memory its reductions run on the stream after the compute ones. */
int rf__make_kvstore(struct rf_trainer *t)
{
	struct rf_stream *ks[RF_TRAIN_MAX_DEVICES] = { 0 };
	unsigned r, k;
	int ret;

	if (t->K == 1)
		return rf__comm_gpu(t);
	for (r = 0; r < t->K; r++)
		if (!rf_device_host_memory(t->dev[r]))
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
