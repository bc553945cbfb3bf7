/* python/ringflow/_ringflow.c -- the C half of the `ringflow` package: the loader and
 * the dependency engine behind small Python types, on CPython's stable ABI (3.11+:
 * one build serves every later interpreter; nothing outside Debian's python3-dev).
 *
 * Threads: a Loader or an Engine owns its ring, engine and devices and is driven from
 * the thread that made it (the reactor thread); another thread's call is refused.
 * Waiting turns the reactor with the GIL released, so other Python threads run.
 *
 * Batches leave as Tensor objects that export their memory through DLPack
 * (torch.from_dlpack, numpy.from_dlpack): zero-copy. A Tensor -- and every DLPack
 * capsule a consumer took from it -- keeps its batch slot held; the Loader never pushes
 * a batch into a held slot (rf_loader_next_slot), so memory Python can still see is
 * never overwritten.
 *
 * Errors are ringflow.Error (an OSError: errno, and the C text -- file, offset, URL --
 * as its message). */
#define Py_LIMITED_API 0x030b0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringflow/ring.h>
#include <ringflow/engine.h>
#include <ringflow/device.h>
#include <ringflow/tensor.h>
#include <ringflow/dataset.h>
#include <ringflow/loader.h>
#include <ringflow/log.h>

static PyObject *rf_py_error;     /* ringflow.Error */

/* ringflow.Error(errno, text) for a failed call (ret < 0) with its message. */
static PyObject *rf_py_raise(int ret, const char *text)
{
	PyObject *args = Py_BuildValue("(is)", ret < 0 ? -ret : EIO,
				       text && *text ? text : strerror(ret < 0 ? -ret : EIO));
	if (args) {
		PyErr_SetObject(rf_py_error, args);
		Py_DECREF(args);
	}
	return NULL;
}

/* The object is used on the thread that made it, in the process that made it: a
 * fork() copies neither its ring's kernel state nor its threads (and the child's
 * thread can have the parent's pthread_t). */
static int rf_py_same_thread_in(pthread_t owner, pid_t pid)
{
	if (pid && pid != getpid()) {
		PyErr_Format(PyExc_RuntimeError, "ringflow: a Loader or Engine made in process %d "
			     "is used in process %d, forked from it: its io_uring ring and threads "
			     "do not survive fork(); make it in the process that uses it (a "
			     "DataLoader worker: inside the worker, as RecordDataset does)",
			     (int)pid, (int)getpid());
		return 0;
	}
	if (pthread_equal(owner, pthread_self()))
		return 1;
	rf_py_raise(-EPERM, "ringflow: a Loader or Engine is used from the thread that made it "
			    "(its reactor thread); make one per thread or process");
	return 0;
}

#define rf_py_same_thread(owner) rf_py_same_thread_in((owner), s->pid)

/* The engine's interrupt (rf_engine_set_interrupt), asked every 100 ms while a wait
 * turns the reactor without the GIL: a signal Python has a handler for (Ctrl-C) ends
 * the wait with its exception set, instead of after the batch, or a stalled server's
 * timeout. */
static int rf_py_interrupted(void *arg)
{
	PyGILState_STATE g = PyGILState_Ensure();
	int stop = PyErr_CheckSignals() < 0;

	(void)arg;
	PyGILState_Release(g);
	return stop;
}

/* ---- DLPack (v0.8 ABI: the structs every consumer reads) ------------------------- */

typedef struct {
	int32_t device_type; /* kDLCPU 1, kDLCUDA 2 */
	int32_t device_id;
} DLDevice;
typedef struct {
	uint8_t code;        /* kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4 */
	uint8_t bits;
	uint16_t lanes;
} DLDataType;
typedef struct {
	void *data;
	DLDevice device;
	int32_t ndim;
	DLDataType dtype;
	int64_t *shape;
	int64_t *strides;    /* NULL: compact row-major */
	uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
	DLTensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* ---- Loader ------------------------------------------------------------------------ */

#define RF_PY_MAX_SLOTS 256

typedef struct {
	PyObject_HEAD
	pthread_t owner;
	pid_t pid;                 /* the process that made it */
	struct rf_ring *ring;
	struct rf_engine *eng;
	struct rf_device *cpu, *dev;     /* dev: the batches' device (cpu or a GPU) */
	struct rf_dataset ds;
	int ds_open;
	struct rf_loader *l;
	unsigned batch, prefetch, world, rank, nslots;
	uint64_t seed, count;
	int shuffle, drop_last;
	uint64_t epoch;                  /* the epoch being read */
	uint64_t returned;               /* batches of it handed out */
	uint64_t pushed;                 /* batches of it pushed (>= returned) */
	int ended;                       /* the epoch's last batch is pushed */
	struct rf_batch q[RF_PY_MAX_SLOTS];   /* pushed, not yet handed out: a ring */
	unsigned qhead, qlen;
	unsigned held[RF_PY_MAX_SLOTS];  /* per slot: queued (1) + live Tensors; > 0: the
					  * loader passes over it (rf_loader_hold) */
	unsigned char unhold[RF_PY_MAX_SLOTS]; /* its last Tensor went on another thread:
						* the owner releases it at its next call */
	unsigned nunhold;
	int closed;
} rf_py_loader;

/* A batch's tensor, exported zero-copy: holds its loader and slot. */
typedef struct {
	PyObject_HEAD
	rf_py_loader *owner;             /* strong reference */
	unsigned slot;
	void *data;
	int ndim;
	int64_t shape[4];
	DLDataType dt;
	DLDevice dev;
	const char *dtname;
} rf_py_tensor;

static PyTypeObject *rf_py_tensor_type, *rf_py_loader_type;

/* One more or one less reference to a slot's memory; the loader is told when the
 * first comes and the last goes. */
static void rf_py_ref(rf_py_loader *s, unsigned slot, int d)
{
	if (slot >= RF_PY_MAX_SLOTS)
		return;
	s->held[slot] += d;               /* under the GIL, whichever thread */
	if (!s->l)
		return;
	if (d > 0 && s->held[slot] == 1) {
		if (s->unhold[slot]) {    /* never released in C: still held there */
			s->unhold[slot] = 0;
			s->nunhold--;
		} else
			rf_loader_hold(s->l, slot, 1);
	} else if (d < 0 && s->held[slot] == 0) {
		/* Only the owner touches the C loader: it may be inside rf_loader_wait
		 * with the GIL released. Elsewhere (a Tensor freed by another thread) the
		 * release waits for the owner's next call (rf_py_loader_ready). */
		if (pthread_equal(s->owner, pthread_self()))
			rf_loader_hold(s->l, slot, 0);
		else if (!s->unhold[slot]) {
			s->unhold[slot] = 1;
			s->nunhold++;
		}
	}
}

/* The owner's side of the releases above. */
static void rf_py_unhold(rf_py_loader *s)
{
	for (unsigned i = 0; s->nunhold && i < RF_PY_MAX_SLOTS; i++)
		if (s->unhold[i]) {
			s->unhold[i] = 0;
			s->nunhold--;
			if (s->l)      /* held[i] is 0: a re-hold clears unhold[i] */
				rf_loader_hold(s->l, i, 0);
		}
}

/* Let go on another thread than the owner's (the collector, a consumer thread): the
 * ring, the engine and its threads belong to the owner's thread (a single-issuer
 * ring; an engine's waits and destroy are its reactor thread's), so nothing is freed
 * from here -- that would free memory under worker threads still running. They are
 * leaked, with the object itself (a loader reads the dataset struct inside it), and
 * a ResourceWarning says how not to: close() on the owner's thread. Returns 1 when
 * the caller must free nothing. */
static int rf_py_foreign_drop(PyObject *self, pthread_t owner, pid_t pid, int live,
			      const char *what)
{
	PyObject *et, *ev, *tb;

	if (live && pid && pid != getpid())
		return 1;  /* a forked copy: the parent's ring and threads are not ours to stop */
	if (!live || pthread_equal(owner, pthread_self()))
		return 0;
	PyErr_Fetch(&et, &ev, &tb);
	if (PyErr_WarnFormat(PyExc_ResourceWarning, 1, "ringflow.%s let go on another thread "
			     "than the one that made it: its ring, threads and memory are "
			     "leaked (close() it on its own thread, or use it in a with "
			     "block there)", what) < 0)
		PyErr_WriteUnraisable(self);
	PyErr_Restore(et, ev, tb);
	return 1;
}

/* The IDX pair of a Fashion-MNIST-style directory: split "train" or "t10k". */
static int rf_py_open_dir(struct rf_dataset *ds, const char *dir, const char *split)
{
	char img[4200], lab[4200];
	const char *pre = !strcmp(split, "test") ? "t10k" : split;
	struct stat st;

	snprintf(img, sizeof(img), "%s/%s-images-idx3-ubyte", dir, pre);
	snprintf(lab, sizeof(lab), "%s/%s-labels-idx1-ubyte", dir, pre);
	if (stat(img, &st) < 0) {
		strncat(img, ".gz", sizeof(img) - strlen(img) - 1);
		strncat(lab, ".gz", sizeof(lab) - strlen(lab) - 1);
	}
	return rf_dataset_open_idx_pair(ds, img, lab, 10, 0);
}

static void rf_py_loader_free_all(rf_py_loader *s)
{
	rf_loader_destroy(s->l);
	s->l = NULL;
	if (s->ds_open)
		rf_dataset_close(&s->ds);
	s->ds_open = 0;
	if (s->dev && s->dev != s->cpu)
		rf_device_close(s->dev);
	if (s->cpu)
		rf_device_close(s->cpu);
	s->dev = s->cpu = NULL;
	rf_engine_destroy(s->eng);
	s->eng = NULL;
	rf_ring_destroy(s->ring);
	s->ring = NULL;
}

/* channel_mean and channel_std (tuples of one float per channel, or both None) into
 * o's norm_channels, channel_mean and channel_std. 0, or -1 with an exception. */
static int rf_py_channels(PyObject *cmean, PyObject *cstd, struct rf_loader_opts *o)
{
	PyObject *in[2] = { cmean, cstd };
	float *out[2] = { o->channel_mean, o->channel_std };
	Py_ssize_t n;

	if (cmean == Py_None && cstd == Py_None)
		return 0;
	if (!PyTuple_Check(cmean) || !PyTuple_Check(cstd)) {
		PyErr_SetString(PyExc_TypeError, "channel_mean, channel_std: expected tuples of "
				"floats");
		return -1;
	}
	n = PyTuple_Size(cmean);
	if (n < 1 || n > RF_LOADER_NORM_MAX_CH || PyTuple_Size(cstd) != n) {
		PyErr_Format(PyExc_ValueError, "channel_mean, channel_std: %zd and %zd values: "
			     "expected as many, 1 to %d", n, PyTuple_Size(cstd), RF_LOADER_NORM_MAX_CH);
		return -1;
	}
	for (int k = 0; k < 2; k++)
		for (Py_ssize_t i = 0; i < n; i++) {
			double v = PyFloat_AsDouble(PyTuple_GetItem(in[k], i));
			if (v == -1.0 && PyErr_Occurred())
				return -1;
			out[k][i] = (float)v;
		}
	o->norm_channels = (unsigned)n;
	return 0;
}

static int rf_py_loader_init(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kws[] = { "path", "batch_size", "shuffle", "seed", "epoch", "rank", "world",
			       "prefetch", "drop_last", "device", "hold", "split", "mean", "std",
			       "scale", "order", "timeout_ms", "verify", "image_size", "augment",
			       "workers", "u8", "channel_mean", "channel_std", "nhwc",
			       "skip_bad_images", NULL };
	rf_py_loader *s = (rf_py_loader *)self;
	const char *path, *device = "cpu", *split = "train";
	unsigned batch, prefetch = 3, hold = 1, rank = 0, world = 1;
	unsigned long long seed = 0, epoch = 0;
	int shuffle = 1, drop_last = 0, order = RF_LOADER_ORDER_UNIFORM, ret;
	unsigned timeout_ms = 0;
	int verify = 0, augment = 1, u8 = 0, nhwc = 0, skip_bad = 0;
	unsigned image_size = 0, workers = 0;
	float mean = 0.0f, std = 1.0f, scale = 0.0f;
	PyObject *cmean = Py_None, *cstd = Py_None;
	struct rf_loader_opts o = { 0 };
	struct stat st;

	if (s->eng)
		return rf_py_raise(-EINVAL, "Loader: already initialised"), -1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "sI|pKKIIIpsIsfffiIpIpIpOOpp", kws, &path,
					 &batch, &shuffle, &seed, &epoch, &rank, &world, &prefetch,
					 &drop_last, &device, &hold, &split, &mean, &std, &scale,
					 &order, &timeout_ms, &verify, &image_size, &augment, &workers,
					 &u8, &cmean, &cstd, &nhwc, &skip_bad))
		return -1;
	if (rf_py_channels(cmean, cstd, &o) < 0)
		return -1;
	/* the loader makes prefetch + hold full slots and at most as many tail slots: all
	 * of them fit held[] */
	if (!batch || !world || rank >= world || !prefetch ||
	    (uint64_t)prefetch + hold > RF_PY_MAX_SLOTS / 2) {
		PyErr_Format(PyExc_ValueError, "Loader: batch_size %u, rank %u, world %u, prefetch %u, "
			     "hold %u: expected batch_size >= 1, 0 <= rank < world, prefetch >= 1 "
			     "and prefetch + hold <= %d", batch, rank, world, prefetch, hold,
			     RF_PY_MAX_SLOTS / 2);
		return -1;
	}
	if (strcmp(split, "train") && strcmp(split, "test")) {
		PyErr_Format(PyExc_ValueError, "Loader: split '%s': expected 'train' or 'test'", split);
		return -1;
	}
	s->owner = pthread_self();
	s->pid = getpid();
	s->batch = batch;
	s->prefetch = prefetch;
	s->world = world;
	s->rank = rank;
	s->seed = seed;
	s->shuffle = shuffle;
	s->drop_last = drop_last;
	s->epoch = epoch;
	Py_BEGIN_ALLOW_THREADS
	ret = rf_ring_create(&s->ring, NULL);
	if (ret == 0)
		ret = rf_engine_create(&s->eng, s->ring, NULL);
	if (ret == 0)
		rf_engine_set_interrupt(s->eng, rf_py_interrupted, NULL, 100000000ull);
	if (ret == 0)
		ret = rf_cpu_open(s->eng, NULL, &s->cpu);
	if (ret == 0 && strcmp(device, "cpu"))
		ret = rf_device_open(s->eng, device, &s->dev);
	else if (ret == 0)
		s->dev = s->cpu;
	if (ret == 0) {
		if (!strncmp(path, "http://", 7) || rf_dataset_is_shard_pattern(path) ||
		    (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)))
			ret = rf_dataset_open_file(&s->ds, path, verify ? RF_DS_VERIFY : 0);
		else
			ret = rf_py_open_dir(&s->ds, path, split);
		s->ds_open = ret == 0;
	}
	if (ret == 0) {
		o.batch = batch;
		o.prefetch = prefetch + hold;     /* slots: in flight, and held by Python */
		/* a tail Python keeps (the last batch of an epoch) is one of hold's: the next
		 * epoch's tail takes another slot of its own */
		o.tail_slots = 1 + (hold < 63 ? hold : 63);
		o.seed = seed;
		o.no_shuffle = !shuffle;
		o.order = order;
		o.http_timeout_ms = timeout_ms;
		o.drop_last = drop_last;
		o.devices = &s->dev;
		o.ndevices = 1;
		o.host = s->cpu;
		o.shard_base = rank;              /* as rf-train's rank r of world processes */
		o.shard_total = world;
		o.mean = mean;
		o.std = std;
		o.scale = scale;
		o.image_size = image_size;
		o.image_eval = !augment;
		o.hflip = image_size && augment;
		o.workers = workers;
		o.x_dtype = u8 ? RF_U8 : RF_F32;
		o.x_layout = nhwc ? RF_LAYOUT_NHWC : RF_LAYOUT_ROWMAJOR;
		o.skip_bad_images = skip_bad;
		ret = rf_loader_create(&s->l, s->eng, &s->ds, &o);
	}
	if (ret == 0)
		rf_loader_seek_epoch(s->l, epoch);
	Py_END_ALLOW_THREADS
	if (ret < 0) {
		rf_py_raise(ret, rf_last_error());
		rf_py_loader_free_all(s);
		return -1;
	}
	s->count = s->ds.count;
	s->nslots = rf_loader_slots(s->l);
	return 0;
}

static void rf_py_loader_dealloc(PyObject *self)
{
	rf_py_loader *s = (rf_py_loader *)self;
	PyTypeObject *tp = Py_TYPE(self);

	if (rf_py_foreign_drop(self, s->owner, s->pid, s->l != NULL, "Loader"))
		return;   /* the object too: the loader reads its dataset (s->ds) */
	Py_BEGIN_ALLOW_THREADS
	rf_py_loader_free_all(s);
	Py_END_ALLOW_THREADS
	((freefunc)PyType_GetSlot(tp, Py_tp_free))(self);
	Py_DECREF(tp);
}

static int rf_py_loader_ready(rf_py_loader *s)
{
	if (!s->l) {
		rf_py_raise(-EBADF, "Loader: closed");
		return 0;
	}
	if (!rf_py_same_thread(s->owner))
		return 0;
	rf_py_unhold(s);
	return 1;
}

/* Push batches ahead, up to prefetch, never into a slot Python still holds. */
static int rf_py_fill(rf_py_loader *s)
{
	while (!s->ended && s->qlen < s->prefetch) {
		int slot = rf_loader_next_slot(s->l), ret;
		struct rf_batch *b = &s->q[(s->qhead + s->qlen) % RF_PY_MAX_SLOTS];

		if (s->pushed >= rf_loader_batches_per_epoch(s->l)) {
			rf_loader_next(s->l, b);   /* 0: the epoch is over; no slot is touched */
			s->ended = 1;
			break;
		}
		if (slot < 0 || (unsigned)slot >= s->nslots)
			return 0;          /* all held: push once Python lets a batch go */
		ret = rf_loader_next(s->l, b);
		if (ret < 0)
			return rf_py_raise(ret, rf_last_error()), -1;
		if (ret == 0) {
			s->ended = 1;
			break;
		}
		rf_py_ref(s, b->slot, 1);  /* queued: not to be written again until read */
		s->qlen++;
		s->pushed++;
	}
	return 0;
}

static PyObject *rf_py_tensor_new(rf_py_loader *s, const struct rf_batch *b, int labels)
{
	rf_py_tensor *t = PyObject_New(rf_py_tensor, rf_py_tensor_type);
	struct rf_tensor *x = labels ? b->y[0] : b->x[0];

	if (!t)
		return NULL;
	Py_INCREF((PyObject *)s);
	t->owner = s;
	t->slot = b->slot;
	t->data = x->data;
	t->ndim = x->ndim;
	for (int i = 0; i < 4; i++)
		t->shape[i] = i < x->ndim ? x->shape[i] : 1;
	if (x->layout == RF_LAYOUT_NHWC) {  /* the shape as the bytes lie: (n, h, w, c) */
		t->shape[1] = x->shape[2];
		t->shape[2] = x->shape[3];
		t->shape[3] = x->shape[1];
	}
	t->dt = labels ? (DLDataType){ 0, 32, 1 } : x->dtype == RF_U8 ? (DLDataType){ 1, 8, 1 }
							    : (DLDataType){ 2, 32, 1 };
	t->dtname = labels ? "int32" : x->dtype == RF_U8 ? "uint8" : "float32";
	t->dev = rf_device_host_memory(x->dev) ? (DLDevice){ 1, 0 }
					       : (DLDevice){ 2, rf_device_ordinal(x->dev) };
	rf_py_ref(s, t->slot, 1);
	return (PyObject *)t;
}

/* The next batch as (images, labels), or None at the end of the epoch (the following
 * call starts the next). */
static PyObject *rf_py_loader_next(PyObject *self, PyObject *unused)
{
	rf_py_loader *s = (rf_py_loader *)self;
	struct rf_batch b;
	int ret;
	(void)unused;

	if (!rf_py_loader_ready(s))
		return NULL;
	if (s->ended && !s->qlen) {      /* the epoch is over: the next call starts anew */
		s->epoch++;
		s->returned = s->pushed = 0;
		s->ended = 0;
		Py_RETURN_NONE;
	}
	if (rf_py_fill(s) < 0)
		return NULL;
	if (!s->qlen) {
		if (s->ended)
			return rf_py_loader_next(self, NULL);
		return rf_py_raise(-EBUSY, "Loader: every batch slot is held by a batch still "
				   "referenced from Python; drop old batches (or their "
				   "torch/numpy views), copy the ones to keep "
				   "(torch.from_dlpack(x).clone()), or make the Loader with a "
				   "larger hold=");
	}
	b = s->q[s->qhead];
	Py_BEGIN_ALLOW_THREADS
	ret = rf_loader_wait(s->l, &b);
	Py_END_ALLOW_THREADS
	if (ret == -EINTR && PyErr_Occurred())
		return NULL;     /* Ctrl-C (a signal's exception): the batch stays queued */
	s->qhead = (s->qhead + 1) % RF_PY_MAX_SLOTS;
	s->qlen--;
	s->returned++;
	if (ret < 0) {
		const char *why = rf_loader_batch_error(s->l, &b);
		rf_py_ref(s, b.slot, -1);
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", why && *why ? why : rf_loader_last_error(s->l));
		return rf_py_raise(ret, msg);
	}
	/* a file without labels (ringflow.pack's default, rf-pack without a label file):
	 * the batch's labels are None */
	PyObject *x = rf_py_tensor_new(s, &b, 0), *y = NULL;
	if (x && b.y[0])
		y = rf_py_tensor_new(s, &b, 1);
	else if (x) {
		y = Py_None;
		Py_INCREF(y);
	}
	rf_py_ref(s, b.slot, -1);        /* out of the queue: the tensors hold it now */
	if (!y) {
		Py_XDECREF(x);
		return NULL;
	}
	if (rf_py_fill(s) < 0) {        /* keep the pipeline full while Python computes */
		Py_DECREF(x);
		Py_DECREF(y);
		return NULL;
	}
	PyObject *r = PyTuple_Pack(2, x, y);
	Py_DECREF(x);
	Py_DECREF(y);
	return r;
}

/* Exactly-once resume: where the next batch handed out is. */
static PyObject *rf_py_loader_state(PyObject *self, PyObject *unused)
{
	rf_py_loader *s = (rf_py_loader *)self;
	(void)unused;

	if (!rf_py_loader_ready(s))
		return NULL;
	return Py_BuildValue("{s:K,s:K,s:K,s:I,s:I,s:I,s:K,s:i,s:i}", "epoch",
			     (unsigned long long)s->epoch, "batch", (unsigned long long)s->returned,
			     "seed", (unsigned long long)s->seed, "batch_size", s->batch, "world",
			     s->world, "rank", s->rank, "records", (unsigned long long)s->count,
			     "shuffle", s->shuffle, "drop_last", s->drop_last);
}

/* The loader's counters since it was made. */
static PyObject *rf_py_loader_stats(PyObject *self, PyObject *unused)
{
	rf_py_loader *s = (rf_py_loader *)self;
	struct rf_loader_stats st;
	(void)unused;

	if (!rf_py_loader_ready(s))
		return NULL;
	rf_loader_get_stats(s->l, &st);
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:i}", "batches",
			     (unsigned long long)st.batches, "records",
			     (unsigned long long)st.records, "reads", (unsigned long long)st.reads,
			     "read_bytes", (unsigned long long)st.read_bytes, "read_errors",
			     (unsigned long long)st.read_errors, "images_skipped",
			     (unsigned long long)st.images_skipped, "direct", st.direct);
}

/* Seek to (epoch, batch): what was pushed ahead is dropped (its slots are overwritten
 * only after its writes, in engine order). */
static PyObject *rf_py_loader_seek(PyObject *self, PyObject *args)
{
	rf_py_loader *s = (rf_py_loader *)self;
	unsigned long long epoch, batch;
	int ret;

	if (!PyArg_ParseTuple(args, "KK", &epoch, &batch) || !rf_py_loader_ready(s))
		return NULL;
	ret = rf_loader_seek(s->l, epoch, batch);
	if (ret < 0)
		return rf_py_raise(ret, rf_last_error());
	while (s->qlen) {                /* what was read ahead is dropped */
		rf_py_ref(s, s->q[s->qhead].slot, -1);
		s->qhead = (s->qhead + 1) % RF_PY_MAX_SLOTS;
		s->qlen--;
	}
	s->qhead = 0;
	s->epoch = epoch;
	s->returned = s->pushed = batch;
	s->ended = 0;
	Py_RETURN_NONE;
}

static PyObject *rf_py_loader_len(PyObject *self, PyObject *unused)
{
	rf_py_loader *s = (rf_py_loader *)self;
	(void)unused;

	if (!rf_py_loader_ready(s))
		return NULL;
	return PyLong_FromUnsignedLongLong(rf_loader_batches_per_epoch(s->l));
}

/* References to slot i from Python objects (its held count less its queue entries). */
static unsigned rf_py_tensor_refs(const rf_py_loader *s, unsigned i)
{
	unsigned q = 0;

	for (unsigned k = 0; k < s->qlen; k++)
		q += s->q[(s->qhead + k) % RF_PY_MAX_SLOTS].slot == i;
	return s->held[i] - q;
}

static PyObject *rf_py_loader_close(PyObject *self, PyObject *unused)
{
	rf_py_loader *s = (rf_py_loader *)self;
	(void)unused;

	if (s->l && !rf_py_same_thread(s->owner))
		return NULL;
	for (unsigned i = 0; i < RF_PY_MAX_SLOTS; i++)
		if (rf_py_tensor_refs(s, i))    /* a live view would see freed memory */
			return rf_py_raise(-EBUSY, "Loader.close: batches are still referenced "
					   "from Python (their memory is the loader's)");
	Py_BEGIN_ALLOW_THREADS
	rf_py_loader_free_all(s);
	Py_END_ALLOW_THREADS
	Py_RETURN_NONE;
}

static PyObject *rf_py_loader_held(PyObject *self, PyObject *unused)
{
	rf_py_loader *s = (rf_py_loader *)self;
	unsigned n = 0;
	(void)unused;

	for (unsigned i = 0; i < RF_PY_MAX_SLOTS; i++)
		n += rf_py_tensor_refs(s, i) != 0;
	return PyLong_FromUnsignedLong(n);
}

static PyMethodDef rf_py_loader_methods[] = {
	{ "next", rf_py_loader_next, METH_NOARGS, "the next (images, labels), or None at the "
	  "end of the epoch" },
	{ "state", rf_py_loader_state, METH_NOARGS, "where the next batch is, as a dict" },
	{ "stats", rf_py_loader_stats, METH_NOARGS, "the loader's counters, as a dict" },
	{ "seek", rf_py_loader_seek, METH_VARARGS, "seek(epoch, batch)" },
	{ "batches", rf_py_loader_len, METH_NOARGS, "batches per epoch" },
	{ "close", rf_py_loader_close, METH_NOARGS, "free everything now" },
	{ "held_slots", rf_py_loader_held, METH_NOARGS, "batch slots Python holds" },
	{ NULL, NULL, 0, NULL },
};

static PyType_Slot rf_py_loader_slots_[] = {
	{ Py_tp_init, rf_py_loader_init },
	{ Py_tp_new, PyType_GenericNew },
	{ Py_tp_dealloc, rf_py_loader_dealloc },
	{ Py_tp_methods, rf_py_loader_methods },
	{ Py_tp_doc, "_Loader(path, batch_size, ...): ringflow's loader (use ringflow.Loader)" },
	{ 0, NULL },
};

static PyType_Spec rf_py_loader_spec = {
	"ringflow._ringflow._Loader", sizeof(rf_py_loader), 0, Py_TPFLAGS_DEFAULT,
	rf_py_loader_slots_,
};

/* ---- Tensor: DLPack export ----------------------------------------------------------- */

struct rf_py_managed {
	DLManagedTensor m;
	int64_t shape[4];
	PyObject *tensor;                /* strong reference: the slot stays held */
};

static void rf_py_dl_deleter(DLManagedTensor *m)
{
	struct rf_py_managed *pm = (struct rf_py_managed *)m;
	PyGILState_STATE g = PyGILState_Ensure();   /* any thread, GIL or not */

	Py_DECREF(pm->tensor);
	free(pm);
	PyGILState_Release(g);
}

static void rf_py_capsule_free(PyObject *cap)
{
	/* a capsule nobody consumed ("used_dltensor" once one has) */
	if (PyCapsule_IsValid(cap, "dltensor")) {
		DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
		if (m)
			m->deleter(m);
	}
}

static PyObject *rf_py_tensor_dlpack(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kws[] = { "stream", "max_version", "dl_device", "copy", NULL };
	rf_py_tensor *t = (rf_py_tensor *)self;
	PyObject *stream = NULL, *maxv = NULL, *dld = NULL, *copy = NULL;
	struct rf_py_managed *pm;
	PyObject *cap;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO", kws, &stream, &maxv, &dld, &copy))
		return NULL;
	if (copy && copy == Py_True) {
		PyErr_SetString(PyExc_BufferError, "ringflow batches are exported without copy");
		return NULL;
	}
	pm = calloc(1, sizeof(*pm));
	if (!pm)
		return PyErr_NoMemory();
	memcpy(pm->shape, t->shape, sizeof(pm->shape));
	pm->m.dl_tensor.data = t->data;
	pm->m.dl_tensor.device = t->dev;
	pm->m.dl_tensor.ndim = t->ndim;
	pm->m.dl_tensor.dtype = t->dt;
	pm->m.dl_tensor.shape = pm->shape;
	pm->m.dl_tensor.strides = NULL;
	pm->m.manager_ctx = pm;
	pm->m.deleter = rf_py_dl_deleter;
	Py_INCREF(self);
	pm->tensor = self;
	cap = PyCapsule_New(&pm->m, "dltensor", rf_py_capsule_free);
	if (!cap) {
		Py_DECREF(self);
		free(pm);
	}
	return cap;
}

static PyObject *rf_py_tensor_dlpack_device(PyObject *self, PyObject *unused)
{
	rf_py_tensor *t = (rf_py_tensor *)self;
	(void)unused;
	return Py_BuildValue("(ii)", t->dev.device_type, t->dev.device_id);
}

static PyObject *rf_py_tensor_shape(PyObject *self, void *unused)
{
	rf_py_tensor *t = (rf_py_tensor *)self;
	PyObject *r = PyTuple_New(t->ndim);
	(void)unused;

	for (int i = 0; r && i < t->ndim; i++)
		PyTuple_SetItem(r, i, PyLong_FromLongLong(t->shape[i]));
	return r;
}

static PyObject *rf_py_tensor_dtype(PyObject *self, void *unused)
{
	(void)unused;
	return PyUnicode_FromString(((rf_py_tensor *)self)->dtname);
}

static PyObject *rf_py_tensor_device(PyObject *self, void *unused)
{
	rf_py_tensor *t = (rf_py_tensor *)self;
	(void)unused;
	if (t->dev.device_type == 1)
		return PyUnicode_FromString("cpu");
	return PyUnicode_FromFormat("cuda:%d", t->dev.device_id);
}

static void rf_py_tensor_dealloc(PyObject *self)
{
	rf_py_tensor *t = (rf_py_tensor *)self;
	PyTypeObject *tp = Py_TYPE(self);

	if (t->owner) {
		rf_py_ref(t->owner, t->slot, -1);
		Py_DECREF(t->owner);
	}
	PyObject_Free(self);
	Py_DECREF(tp);
}

static PyMethodDef rf_py_tensor_methods[] = {
	{ "__dlpack__", (PyCFunction)(void (*)(void))rf_py_tensor_dlpack,
	  METH_VARARGS | METH_KEYWORDS, "a DLPack capsule of the batch's memory (no copy)" },
	{ "__dlpack_device__", rf_py_tensor_dlpack_device, METH_NOARGS, "(device type, id)" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef rf_py_tensor_getset[] = {
	{ "shape", rf_py_tensor_shape, NULL, "the logical shape", NULL },
	{ "dtype", rf_py_tensor_dtype, NULL, "'float32' or 'int32'", NULL },
	{ "device", rf_py_tensor_device, NULL, "'cpu' or 'cuda:N'", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot rf_py_tensor_slots[] = {
	{ Py_tp_dealloc, rf_py_tensor_dealloc },
	{ Py_tp_methods, rf_py_tensor_methods },
	{ Py_tp_getset, rf_py_tensor_getset },
	{ Py_tp_doc, "A batch's images or labels: torch.from_dlpack / numpy.from_dlpack take it "
	  "without a copy; it keeps its batch slot from being reused." },
	{ 0, NULL },
};

static PyType_Spec rf_py_tensor_spec = {
	/* made by a Loader only: Tensor() raises TypeError instead of making an empty one */
	"ringflow._ringflow.Tensor", sizeof(rf_py_tensor), 0,
	Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, rf_py_tensor_slots,
};

/* ---- pack: a .rfrec from a buffer of u8 records -------------------------------------- */

static PyObject *rf_py_pack(PyObject *mod, PyObject *args)
{
	const char *path;
	PyObject *imgs, *labs, *shape;
	unsigned num_classes;
	Py_buffer bi = { 0 }, bl = { 0 };
	struct rf_rec_layout lay = { 0 };
	struct rf_rec_writer *w = NULL;
	unsigned long long n;
	int ret = 0, have_labels;
	(void)mod;

	if (!PyArg_ParseTuple(args, "sOKOOI", &path, &imgs, &n, &shape, &labs, &num_classes))
		return NULL;
	have_labels = labs != Py_None;
	if (PyObject_GetBuffer(imgs, &bi, PyBUF_C_CONTIGUOUS) < 0)
		return NULL;
	if (have_labels && PyObject_GetBuffer(labs, &bl, PyBUF_C_CONTIGUOUS) < 0) {
		PyBuffer_Release(&bi);
		return NULL;
	}
	lay.dtype = RF_DS_DT_U8;
	lay.ndim = (unsigned)PyTuple_Size(shape);
	size_t rec = 1;
	for (unsigned d = 0; d < lay.ndim && d < RF_DS_MAX_DIMS; d++) {
		lay.shape[d] = (uint32_t)PyLong_AsUnsignedLong(PyTuple_GetItem(shape, d));
		rec *= lay.shape[d];
	}
	lay.label_kind = have_labels ? RF_LABEL_I32 : RF_LABEL_NONE;
	lay.num_classes = num_classes;
	if (PyErr_Occurred() || lay.ndim < 1 || lay.ndim > RF_DS_MAX_DIMS ||
	    (size_t)bi.len != rec * n || (have_labels && (size_t)bl.len != 4 * n)) {
		PyBuffer_Release(&bi);
		if (have_labels)
			PyBuffer_Release(&bl);
		if (!PyErr_Occurred())
			PyErr_Format(PyExc_ValueError, "pack: %llu records of %zu bytes: images "
				     "hold %zd bytes%s", n, rec, bi.len,
				     have_labels ? " (and labels 4 bytes each)" : "");
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = rf_rec_writer_open(&w, path, &lay, RF_REC_OVERWRITE);
	for (unsigned long long i = 0; ret == 0 && i < n; i++)
		ret = rf_rec_writer_append(w, (const uint8_t *)bi.buf + i * rec,
					   have_labels ? ((const int32_t *)bl.buf)[i] : 0);
	if (ret == 0)
		ret = rf_rec_writer_finish(w);
	else if (w)
		rf_rec_writer_abort(w);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&bi);
	if (have_labels)
		PyBuffer_Release(&bl);
	if (ret < 0)
		return rf_py_raise(ret, rf_last_error());
	Py_RETURN_NONE;
}

/* ---- Engine: the dependency engine with Python callables on worker streams ----------- */

typedef struct {
	PyObject_HEAD
	pthread_t owner;
	pid_t pid;                 /* the process that made it */
	struct rf_ring *ring;
	struct rf_engine *eng;
	struct rf_stream **ws;
	unsigned nws, next;
	char last_err[512];              /* the latest failed op's text, for wait_all */
} rf_py_engine;

typedef struct {
	PyObject_HEAD
	rf_py_engine *e;                 /* strong reference */
	struct rf_var *v;
	char err[512];                   /* the failing op's exception, for wait() */
} rf_py_var;

static PyTypeObject *rf_py_engine_type, *rf_py_var_type;

struct rf_py_op {
	rf_py_engine *e;                 /* borrowed: the engine outlives its ops */
	PyObject *fn;
	PyObject *writes;                /* tuple of Vars: told the exception */
	char err[512];
};

static int rf_py_op_run(void *ctx)   /* on a worker thread */
{
	struct rf_py_op *op = ctx;
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *r = PyObject_CallNoArgs(op->fn);
	int ret = 0;

	if (!r) {
		PyObject *et, *ev, *tb;
		PyErr_Fetch(&et, &ev, &tb);
		PyObject *name = et ? PyObject_GetAttrString(et, "__name__") : NULL;
		PyObject *txt = ev ? PyObject_Str(ev) : NULL;
		const char *n = name ? PyUnicode_AsUTF8AndSize(name, NULL) : NULL;
		const char *m = txt ? PyUnicode_AsUTF8AndSize(txt, NULL) : NULL;
		snprintf(op->err, sizeof(op->err), "%s: %s", n ? n : "exception", m ? m : "");
		Py_XDECREF(name);
		Py_XDECREF(txt);
		Py_XDECREF(et);
		Py_XDECREF(ev);
		Py_XDECREF(tb);
		PyErr_Clear();
		ret = -EIO;
	}
	Py_XDECREF(r);
	PyGILState_Release(g);
	return ret;
}

static void rf_py_op_done(void *ctx, int status)   /* on the reactor thread */
{
	struct rf_py_op *op = ctx;
	PyGILState_STATE g = PyGILState_Ensure();

	if (status < 0 && op->err[0])
		snprintf(op->e->last_err, sizeof(op->e->last_err), "%s", op->err);
	if (status < 0) {
		/* skipped (no text of its own): which variable held the poison, one it
		 * writes or, if none of those, one it reads */
		const char *why = "a variable it reads", *name = NULL;
		for (Py_ssize_t i = 0; !op->err[0] && i < PyTuple_Size(op->writes); i++) {
			rf_py_var *w = (rf_py_var *)PyTuple_GetItem(op->writes, i);
			if (w->err[0] && !name) {
				why = "a variable it writes";
				name = rf_var_name(w->v);
			}
		}
		for (Py_ssize_t i = 0; i < PyTuple_Size(op->writes); i++) {
			rf_py_var *v = (rf_py_var *)PyTuple_GetItem(op->writes, i);
			if (op->err[0])
				snprintf(v->err, sizeof(v->err), "%s", op->err);
			else if (!v->err[0]) /* a poisoned one keeps its first cause */
				snprintf(v->err, sizeof(v->err), "skipped: %s%s%s%s was poisoned by a "
					 "failed op (%s; Var.clear_error() clears it)", why,
					 name ? " ('" : "", name ? name : "", name ? "')" : "",
					 strerror(-status));
		}
	}
	Py_DECREF(op->fn);
	Py_DECREF(op->writes);
	free(op);
	PyGILState_Release(g);
}

static int rf_py_engine_init(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kws[] = { "workers", NULL };
	rf_py_engine *s = (rf_py_engine *)self;
	unsigned workers = 2;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|I", kws, &workers))
		return -1;
	if (!workers || workers > 64) {
		PyErr_Format(PyExc_ValueError, "Engine: workers %u: expected 1..64", workers);
		return -1;
	}
	if (s->eng)
		return rf_py_raise(-EINVAL, "Engine: already initialised"), -1;
	s->owner = pthread_self();
	s->pid = getpid();
	s->ws = calloc(workers, sizeof(*s->ws));
	if (!s->ws)
		return PyErr_NoMemory(), -1;
	ret = rf_ring_create(&s->ring, NULL);
	if (ret == 0)
		ret = rf_engine_create(&s->eng, s->ring, NULL);
	if (ret == 0)
		rf_engine_set_interrupt(s->eng, rf_py_interrupted, NULL, 100000000ull);
	for (unsigned i = 0; ret == 0 && i < workers; i++) {
		char name[32];
		snprintf(name, sizeof(name), "py%u", i);
		ret = rf_worker_stream_create(s->eng, name, 0, &s->ws[i]);
		s->nws += ret == 0;
	}
	if (ret < 0)
		return rf_py_raise(ret, rf_last_error()), -1;
	return 0;
}

static void rf_py_engine_close_all(rf_py_engine *s)
{
	if (s->eng)
		rf_engine_wait_idle(s->eng);
	for (unsigned i = 0; i < s->nws; i++)
		rf_stream_destroy(s->ws[i]);
	free(s->ws);
	s->ws = NULL;
	s->nws = 0;
	rf_engine_destroy(s->eng);
	s->eng = NULL;
	rf_ring_destroy(s->ring);
	s->ring = NULL;
}

static void rf_py_engine_dealloc(PyObject *self)
{
	rf_py_engine *s = (rf_py_engine *)self;
	PyTypeObject *tp = Py_TYPE(self);

	if (rf_py_foreign_drop(self, s->owner, s->pid, s->ring != NULL, "Engine"))
		return;   /* the object too, as the Loader's */
	Py_BEGIN_ALLOW_THREADS
	rf_py_engine_close_all(s);
	Py_END_ALLOW_THREADS
	((freefunc)PyType_GetSlot(tp, Py_tp_free))(self);
	Py_DECREF(tp);
}

static PyObject *rf_py_engine_var(PyObject *self, PyObject *args)
{
	rf_py_engine *s = (rf_py_engine *)self;
	const char *name = "var";
	rf_py_var *v;
	int ret;

	if (!PyArg_ParseTuple(args, "|s", &name) || !rf_py_same_thread(s->owner))
		return NULL;
	v = PyObject_New(rf_py_var, rf_py_var_type);
	if (!v)
		return NULL;
	v->e = NULL;
	v->v = NULL;
	v->err[0] = 0;
	ret = rf_var_create(s->eng, name, &v->v);
	if (ret < 0) {
		Py_DECREF(v);
		return rf_py_raise(ret, rf_last_error());
	}
	Py_INCREF((PyObject *)s);
	v->e = s;
	return (PyObject *)v;
}

/* (vars) of this engine into out (n at most); -1 with an exception */
static int rf_py_vars(rf_py_engine *s, PyObject *seq, struct rf_var **out, unsigned max,
		      unsigned *n, const char *what)
{
	PyObject *t = PySequence_Tuple(seq);

	if (!t)
		return -1;
	*n = 0;
	for (Py_ssize_t i = 0; i < PyTuple_Size(t); i++) {
		PyObject *o = PyTuple_GetItem(t, i);
		if (!PyObject_TypeCheck(o, rf_py_var_type) || ((rf_py_var *)o)->e != s ||
		    *n >= max) {
			PyErr_Format(PyExc_TypeError, "push: %s[%zd]: expected a Var of this Engine "
				     "(at most %u)", what, i, max);
			Py_DECREF(t);
			return -1;
		}
		out[(*n)++] = ((rf_py_var *)o)->v;
	}
	Py_DECREF(t);
	return 0;
}

static PyObject *rf_py_engine_push(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kws[] = { "fn", "reads", "mutates", NULL };
	rf_py_engine *s = (rf_py_engine *)self;
	PyObject *fn, *reads = NULL, *muts = NULL, *wt;
	struct rf_var *rv[64], *wv[64];
	unsigned nr = 0, nw = 0;
	struct rf_op_desc d = { 0 };
	struct rf_py_op *op;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO", kws, &fn, &reads, &muts) ||
	    !rf_py_same_thread(s->owner))
		return NULL;
	if (!PyCallable_Check(fn)) {
		PyErr_SetString(PyExc_TypeError, "push: fn must be callable (no arguments)");
		return NULL;
	}
	if ((reads && rf_py_vars(s, reads, rv, 64, &nr, "reads") < 0) ||
	    (muts && rf_py_vars(s, muts, wv, 64, &nw, "mutates") < 0))
		return NULL;
	wt = muts ? PySequence_Tuple(muts) : PyTuple_New(0);
	if (!wt)
		return NULL;
	op = calloc(1, sizeof(*op));
	if (!op) {
		Py_DECREF(wt);
		return PyErr_NoMemory();
	}
	Py_INCREF(fn);
	op->e = s;
	op->fn = fn;
	op->writes = wt;
	d.fn = rf_py_op_run;
	d.done = rf_py_op_done;
	d.ctx = op;
	d.reads = rv;
	d.nreads = nr;
	d.writes = wv;
	d.nwrites = nw;
	d.stream = s->ws[s->next++ % s->nws];
	d.name = "python";
	Py_BEGIN_ALLOW_THREADS   /* a full engine turns the reactor: workers need the GIL */
	ret = rf_engine_push(s->eng, &d);
	Py_END_ALLOW_THREADS
	if (ret < 0) {     /* never pushed: done is not called */
		Py_DECREF(op->fn);
		Py_DECREF(op->writes);
		free(op);
		return rf_py_raise(ret, rf_last_error());
	}
	Py_RETURN_NONE;
}

static PyObject *rf_py_engine_wait(PyObject *self, PyObject *args)
{
	rf_py_engine *s = (rf_py_engine *)self;
	PyObject *o;
	rf_py_var *v;
	int ret;

	if (!PyArg_ParseTuple(args, "O!", rf_py_var_type, &o) || !rf_py_same_thread(s->owner))
		return NULL;
	v = (rf_py_var *)o;
	if (v->e != s) {
		PyErr_SetString(PyExc_TypeError, "wait: a Var of another Engine");
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = rf_engine_wait_var(s->eng, v->v);
	Py_END_ALLOW_THREADS
	if (ret == -EINTR && PyErr_Occurred())
		return NULL;     /* Ctrl-C: its exception */
	if (ret < 0)
		return rf_py_raise(ret, v->err[0] ? v->err : rf_last_error());
	Py_RETURN_NONE;
}

static PyObject *rf_py_engine_wait_all(PyObject *self, PyObject *unused)
{
	rf_py_engine *s = (rf_py_engine *)self;
	int ret;
	(void)unused;

	if (!rf_py_same_thread(s->owner))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	ret = rf_engine_wait_all(s->eng);
	Py_END_ALLOW_THREADS
	if (ret == -EINTR && PyErr_Occurred())
		return NULL;
	if (ret < 0) {
		char msg[600];
		snprintf(msg, sizeof(msg), "an op failed: %s", s->last_err[0] ? s->last_err :
			 strerror(-ret));
		s->last_err[0] = 0;
		return rf_py_raise(ret, msg);
	}
	Py_RETURN_NONE;
}

static PyMethodDef rf_py_engine_methods[] = {
	{ "var", rf_py_engine_var, METH_VARARGS, "var(name='var'): a new variable" },
	{ "push", (PyCFunction)(void (*)(void))rf_py_engine_push, METH_VARARGS | METH_KEYWORDS,
	  "push(fn, reads=(), mutates=()): run fn() on a worker once what it reads and mutates "
	  "is ready" },
	{ "wait", rf_py_engine_wait, METH_VARARGS, "wait(var): until every op on var is done" },
	{ "wait_all", rf_py_engine_wait_all, METH_NOARGS, "until every op pushed is done" },
	{ NULL, NULL, 0, NULL },
};

static PyType_Slot rf_py_engine_slots[] = {
	{ Py_tp_init, rf_py_engine_init },
	{ Py_tp_new, PyType_GenericNew },
	{ Py_tp_dealloc, rf_py_engine_dealloc },
	{ Py_tp_methods, rf_py_engine_methods },
	{ Py_tp_doc, "Engine(workers=2): the dependency engine, Python callables on worker "
	  "streams" },
	{ 0, NULL },
};

static PyType_Spec rf_py_engine_spec = {
	"ringflow.Engine", sizeof(rf_py_engine), 0, Py_TPFLAGS_DEFAULT, rf_py_engine_slots,
};

static void rf_py_var_dealloc(PyObject *self)
{
	rf_py_var *v = (rf_py_var *)self;
	PyTypeObject *tp = Py_TYPE(self);

	if (v->e) {
		/* deleted after the ops on it, in engine order; on another thread than the
		 * engine's a push is refused: the engine frees it when it is destroyed */
		if (v->v && v->e->eng && pthread_equal(v->e->owner, pthread_self()))
			rf_var_destroy(v->e->eng, v->v, NULL, NULL, NULL);
		Py_DECREF(v->e);
	}
	PyObject_Free(self);
	Py_DECREF(tp);
}

static PyObject *rf_py_var_name(PyObject *self, void *unused)
{
	rf_py_var *v = (rf_py_var *)self;
	(void)unused;
	return PyUnicode_FromString(v->v ? rf_var_name(v->v) : "");
}

/* Clear the poison a failed op left (pushed after the ops on it, as the engine's
 * rf_var_clear_error does): ops pushed after this run again. */
static PyObject *rf_py_var_clear_error(PyObject *self, PyObject *unused)
{
	rf_py_var *v = (rf_py_var *)self;
	rf_py_engine *s = v->e;
	int ret;
	(void)unused;

	if (!s || !s->eng || !v->v)
		return rf_py_raise(-EBADF, "Var.clear_error: its Engine is closed");
	if (!rf_py_same_thread(s->owner))
		return NULL;
	if ((ret = rf_var_clear_error(s->eng, v->v)) < 0)
		return rf_py_raise(ret, rf_last_error());
	v->err[0] = 0;
	Py_RETURN_NONE;
}

static PyMethodDef rf_py_var_methods[] = {
	{ "clear_error", rf_py_var_clear_error, METH_NOARGS, "clear the poison a failed op "
	  "left on this variable (after the ops pushed on it before)" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef rf_py_var_getset[] = {
	{ "name", rf_py_var_name, NULL, "the variable's name", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot rf_py_var_slots[] = {
	{ Py_tp_dealloc, rf_py_var_dealloc },
	{ Py_tp_getset, rf_py_var_getset },
	{ Py_tp_methods, rf_py_var_methods },
	{ Py_tp_doc, "An engine variable (Engine.var())" },
	{ 0, NULL },
};

static PyType_Spec rf_py_var_spec = {
	/* made by Engine.var() only */
	"ringflow.Var", sizeof(rf_py_var), 0,
	Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, rf_py_var_slots,
};

/* ---- the module ------------------------------------------------------------------------ */

static PyMethodDef rf_py_functions[] = {
	{ "_pack", rf_py_pack, METH_VARARGS, "_pack(path, images, n, shape, labels, classes)" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef rf_py_module = {
	PyModuleDef_HEAD_INIT, "_ringflow", "ringflow's C half (use the ringflow package)", -1,
	rf_py_functions, NULL, NULL, NULL, NULL,
};

static int rf_py_add_type(PyObject *m, PyType_Spec *spec, PyTypeObject **out, const char *name)
{
	*out = (PyTypeObject *)PyType_FromSpec(spec);
	if (!*out)
		return -1;
	Py_INCREF((PyObject *)*out);
	return PyModule_AddObject(m, name, (PyObject *)*out);
}

PyMODINIT_FUNC PyInit__ringflow(void)
{
	PyObject *m = PyModule_Create(&rf_py_module);

	if (!m)
		return NULL;
	rf_py_error = PyErr_NewException("ringflow.Error", PyExc_OSError, NULL);
	if (!rf_py_error || PyModule_AddObject(m, "Error", rf_py_error) < 0 ||
	    rf_py_add_type(m, &rf_py_loader_spec, &rf_py_loader_type, "_Loader") < 0 ||
	    rf_py_add_type(m, &rf_py_tensor_spec, &rf_py_tensor_type, "Tensor") < 0 ||
	    rf_py_add_type(m, &rf_py_engine_spec, &rf_py_engine_type, "Engine") < 0 ||
	    rf_py_add_type(m, &rf_py_var_spec, &rf_py_var_type, "Var") < 0) {
		Py_DECREF(m);
		return NULL;
	}
	Py_INCREF(rf_py_error);
	return m;
}
