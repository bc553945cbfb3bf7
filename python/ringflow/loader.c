/* python/ringflow/loader.c -- ringflow._Loader: the C loader behind ringflow.Loader.
 *
 * Batches leave as Tensor objects (tensor.c) that export their memory through DLPack:
 * zero-copy. A Tensor -- and every DLPack capsule a consumer took from it, through
 * the Tensor -- holds a reference to its batch slot in the C loader (rf_loader_ref),
 * as does each batch in the prefetch queue; the C loader never pushes a batch into a
 * slot with references (rf_loader_next_slot), so memory Python can still see is never
 * overwritten. A Tensor let go on any thread lets its reference go there at once
 * (rf_loader_unref needs no lock and is safe while the owner waits without the GIL). */
#include "py-impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringflow/log.h>

int rf_py_ref(rf_py_loader *s, unsigned slot, int d)
{
	if (!s->l)         /* closed: close() refuses while a reference is Python's */
		return -EBADF;
	return d > 0 ? rf_loader_ref(s->l, slot) : rf_loader_unref(s->l, slot);
}

/* The IDX pair of a Fashion-MNIST-style directory, split "train" or "test", by the
 * names the library knows them by (raw, else .gz). */
static int rf_py_open_dir(struct rf_dataset *ds, const char *dir, const char *split)
{
	char img[4200], lab[4200];
	unsigned test = !strcmp(split, "test");
	struct stat st;

	snprintf(img, sizeof(img), "%s/%s", dir, rf_dataset_fmnist_name(test, 0));
	snprintf(lab, sizeof(lab), "%s/%s", dir, rf_dataset_fmnist_name(test, 1));
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
	struct rf_py_state *st = rf_py_state_of(self);
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
	struct stat sb;

	if (s->eng)
		return rf_py_raise(st, -EINVAL, "Loader: already initialised"), -1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "sI|$pKKIIIpsIsfffiIpIpIpOOpp", kws, &path,
					 &batch, &shuffle, &seed, &epoch, &rank, &world, &prefetch,
					 &drop_last, &device, &hold, &split, &mean, &std, &scale,
					 &order, &timeout_ms, &verify, &image_size, &augment, &workers,
					 &u8, &cmean, &cstd, &nhwc, &skip_bad))
		return -1;
	if (rf_py_channels(cmean, cstd, &o) < 0)
		return -1;
	/* the loader makes prefetch + hold full slots and at most as many tail slots: the
	 * queue (q[], prefetch batches) fits, and so does every slot */
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
		    (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode)))
			ret = rf_dataset_open_file_opts(&s->ds, path, &(struct rf_dataset_open_opts){
				.flags = verify ? RF_DS_VERIFY : 0, .http_timeout_ms = timeout_ms,
				.interrupt = rf_py_interrupted });
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
		if (ret != -EINTR || !PyErr_Occurred())  /* else Ctrl-C's (the open's wait) */
			rf_py_raise(st, ret, rf_last_error());
		rf_py_loader_free_all(s);
		(void)rf_py_warn_pending(st);   /* said beside the exception, which stays */
		return -1;
	}
	s->count = s->ds.count;
	s->nslots = rf_loader_slots(s->l);
	return rf_py_warn_pending(st);    /* the open's (a shard's samples passed over) */
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
		rf_py_raise(rf_py_state_of((PyObject *)s), -EBADF, "Loader: closed");
		return 0;
	}
	if (!rf_py_same_thread(rf_py_state_of((PyObject *)s), s->owner, s->pid))
		return 0;
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
			return rf_py_raise(rf_py_state_of((PyObject *)s), ret, rf_last_error()), -1;
		if (ret == 0) {
			s->ended = 1;
			break;
		}
		s->qlen++;
		s->pushed++;
		/* queued: not to be written again until read (the slot the loader just took:
		 * only a count at UINT_MAX refuses) */
		if ((ret = rf_py_ref(s, b->slot, 1)) < 0)
			return rf_py_raise(rf_py_state_of((PyObject *)s), ret, rf_last_error()), -1;
	}
	return 0;
}

/* The C loader to (epoch, batch), what was read ahead dropped: 0 or -errno (said in
 * rf_last_error()). */
static int rf_py_seek_to(rf_py_loader *s, uint64_t epoch, uint64_t batch)
{
	int ret;

	if ((ret = rf_loader_seek(s->l, epoch, batch)) < 0)
		return ret;
	while (s->qlen) {
		(void)rf_py_ref(s, s->q[s->qhead].slot, -1);
		s->qhead = (s->qhead + 1) % RF_PY_MAX_SLOTS;
		s->qlen--;
	}
	s->qhead = 0;
	s->epoch = epoch;
	s->returned = s->pushed = batch;
	s->ended = 0;
	s->past_last = 0;
	s->reread = 0;
	return 0;
}

static PyObject *rf_py_loader_next_in(PyObject *self, PyObject *unused);

/* The next batch as (images, labels), or None at the end of the epoch (the following
 * call starts the next). */
static PyObject *rf_py_loader_next_in(PyObject *self, PyObject *unused)
{
	rf_py_loader *s = (rf_py_loader *)self;
	struct rf_batch b;
	int ret;
	(void)unused;

	if (!rf_py_loader_ready(s))
		return NULL;
	/* the batch whose next() failed was not handed out: read it again (the C loader
	 * has moved past it, and pushed what follows) */
	if (s->reread && (ret = rf_py_seek_to(s, s->epoch, s->returned)) < 0)
		return rf_py_raise(rf_py_state_of(self), ret, rf_last_error());
	if (s->ended && !s->qlen) {      /* the epoch is over: the next call starts anew */
		if (s->epoch >= (uint64_t)RF_PY_MAX_EPOCH) {
			/* no epoch after the last: its end is said once (the state stays
			 * (last, its batches), which load_state_dict takes), then refused */
			if (!s->past_last) {
				s->past_last = 1;
				Py_RETURN_NONE;
			}
			char msg[200];
			snprintf(msg, sizeof(msg), "Loader: epoch %llu, the last one (epochs are 0 "
				 "to %lld), is read to its end: set_epoch() or load_state_dict() to "
				 "read another", (unsigned long long)s->epoch, (long long)RF_PY_MAX_EPOCH);
			return rf_py_raise(rf_py_state_of(self), -EOVERFLOW, msg);
		}
		s->epoch++;
		s->returned = s->pushed = 0;
		s->ended = 0;
		Py_RETURN_NONE;
	}
	if (rf_py_fill(s) < 0)
		return NULL;
	if (!s->qlen) {
		if (s->ended)   /* the epoch's end: None, as itself (not a re-entry) */
			return rf_py_loader_next_in(self, NULL);
		return rf_py_raise(rf_py_state_of(self), -EBUSY, "Loader: every batch slot is "
				   "held by a batch still referenced from Python; drop old "
				   "batches (or their torch/numpy views), copy the ones to keep "
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
	if (ret < 0) {   /* not handed out: not counted (state_dict), and read again */
		const char *why = rf_loader_batch_error(s->l, &b);
		s->reread = 1;
		(void)rf_py_ref(s, b.slot, -1);   /* the queue's: it took one */
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", why && *why ? why : rf_loader_last_error(s->l));
		return rf_py_raise(rf_py_state_of(self), ret, msg);
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
	(void)rf_py_ref(s, b.slot, -1);  /* out of the queue: the tensors hold it now */
	if (!y) {                        /* not handed out: read again */
		s->reread = 1;
		Py_XDECREF(x);
		return NULL;
	}
	if (rf_py_fill(s) < 0) {        /* keep the pipeline full while Python computes */
		s->reread = 1;
		Py_DECREF(x);
		Py_DECREF(y);
		return NULL;
	}
	s->returned++;
	PyObject *r = PyTuple_Pack(2, x, y);
	Py_DECREF(x);
	Py_DECREF(y);
	return r;
}

/* Exactly-once resume: where the next batch handed out is. */
/* A call on this Loader from a signal handler that a wait of its own runs (next() and
 * seek() wait with Python's handlers running, rf_py_interrupted): the outer call's
 * state is half-moved -- the same batch twice, a queue emptied under it. EBUSY. */
static int rf_py_loader_reentered(rf_py_loader *s, const char *what)
{
	if (!s->busy)
		return 0;
	char msg[200];

	snprintf(msg, sizeof(msg), "Loader.%s: called from inside next() or seek() of this "
		 "Loader (a signal handler?); call it after that returns", what);
	rf_py_raise(rf_py_state_of((PyObject *)s), -EBUSY, msg);
	return 1;
}

/* next(), marked busy: its waits run Python's signal handlers (rf_py_interrupted) */
static PyObject *rf_py_loader_next(PyObject *self, PyObject *unused)
{
	rf_py_loader *s = (rf_py_loader *)self;
	PyObject *r;

	if (rf_py_loader_reentered(s, "next"))
		return NULL;
	/* the warnings of earlier calls first: one made an error by a filter is raised
	 * here, before a batch is taken, so that no batch is lost to it */
	if (rf_py_warn_pending(rf_py_state_of(self)) < 0)
		return NULL;
	s->busy++;
	r = rf_py_loader_next_in(self, unused);
	s->busy--;
	if (r)  /* this call's: said now; one a filter makes an error waits for the next */
		rf_py_warn_keep(rf_py_state_of(self));
	else
		(void)rf_py_warn_pending(rf_py_state_of(self)); /* beside the exception */
	return r;
}

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
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:i,s:i,s:K,s:I}", "batches",
			     (unsigned long long)st.batches, "records",
			     (unsigned long long)st.records, "reads", (unsigned long long)st.reads,
			     "read_bytes", (unsigned long long)st.read_bytes, "read_errors",
			     (unsigned long long)st.read_errors, "images_skipped",
			     (unsigned long long)st.images_skipped, "direct", st.direct,
			     "mode", st.mode, "chunk_records", (unsigned long long)st.chunk_records,
			     "window_chunks", st.window_chunks);
}

/* Seek to (epoch, batch): what was pushed ahead is dropped (its slots are overwritten
 * only after its writes, in engine order). */
static PyObject *rf_py_loader_seek(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kws[] = { "epoch", "batch", NULL };
	rf_py_loader *s = (rf_py_loader *)self;
	unsigned long long epoch, batch;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "KK", kws, &epoch, &batch) ||
	    !rf_py_loader_ready(s) || rf_py_loader_reentered(s, "seek"))
		return NULL;
	s->busy++;                       /* it waits for the batches in flight */
	ret = rf_py_seek_to(s, epoch, batch);
	s->busy--;
	if (ret < 0)
		return rf_py_raise(rf_py_state_of(self), ret, rf_last_error());
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

/* References to slot i from Python objects: the C loader's count less the queue's
 * entries (under the GIL, which every rf_py_ref holds: neither moves meanwhile). */
static unsigned rf_py_tensor_refs(const rf_py_loader *s, unsigned i)
{
	unsigned q = 0, r = s->l ? rf_loader_refs(s->l, i) : 0;

	for (unsigned k = 0; k < s->qlen; k++)
		q += s->q[(s->qhead + k) % RF_PY_MAX_SLOTS].slot == i;
	return r > q ? r - q : 0;
}

static PyObject *rf_py_loader_close(PyObject *self, PyObject *unused)
{
	rf_py_loader *s = (rf_py_loader *)self;
	struct rf_loader *l = s->l;
	(void)unused;

	if (l && !rf_py_same_thread(rf_py_state_of(self), s->owner, s->pid))
		return NULL;
	if (s->busy)  /* a signal handler run by a wait of this Loader's: it would free it */
		return rf_py_raise(rf_py_state_of(self), -EBUSY, "Loader.close: called from inside "
				   "next() or seek() of this Loader (a signal handler?); close it "
				   "after that returns");
	for (unsigned i = 0; i < s->nslots; i++)
		if (rf_py_tensor_refs(s, i))    /* a live view would see freed memory */
			return rf_py_raise(rf_py_state_of(self), -EBUSY, "Loader.close: batches "
					   "are still referenced from Python (their memory is the "
					   "loader's)");
	/* No Tensor is left to reach s->l, and another thread's held_slots() reads it
	 * under the GIL: it goes before the GIL does */
	s->l = NULL;
	Py_BEGIN_ALLOW_THREADS
	rf_loader_destroy(l);
	rf_py_loader_free_all(s);
	Py_END_ALLOW_THREADS
	if (rf_py_warn_pending(rf_py_state_of(self)) < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *rf_py_loader_held(PyObject *self, PyObject *unused)
{
	rf_py_loader *s = (rf_py_loader *)self;
	unsigned n = 0;
	(void)unused;

	for (unsigned i = 0; i < s->nslots; i++)
		n += rf_py_tensor_refs(s, i) != 0;
	return PyLong_FromUnsignedLong(n);
}

static PyMethodDef rf_py_loader_methods[] = {
	{ "next", rf_py_loader_next, METH_NOARGS, "the next (images, labels), or None at the "
	  "end of the epoch" },
	{ "state", rf_py_loader_state, METH_NOARGS, "where the next batch is, as a dict" },
	{ "stats", rf_py_loader_stats, METH_NOARGS, "the loader's counters, as a dict" },
	{ "seek", (PyCFunction)(void (*)(void))rf_py_loader_seek, METH_VARARGS | METH_KEYWORDS,
	  "seek(epoch, batch)" },
	{ "batches", rf_py_loader_len, METH_NOARGS, "batches per epoch" },
	{ "close", rf_py_loader_close, METH_NOARGS, "free everything now" },
	{ "held_slots", rf_py_loader_held, METH_NOARGS, "batch slots Python holds" },
	{ NULL, NULL, 0, NULL },
};

static PyType_Slot rf_py_loader_slots[] = {
	{ Py_tp_init, rf_py_loader_init },
	{ Py_tp_new, PyType_GenericNew },
	{ Py_tp_dealloc, rf_py_loader_dealloc },
	{ Py_tp_methods, rf_py_loader_methods },
	{ Py_tp_doc, "_Loader(path, batch_size, *, shuffle, seed, ...): ringflow's loader, every "
	  "option by name (use ringflow.Loader)" },
	{ 0, NULL },
};

PyType_Spec rf_py_loader_spec = {
	"ringflow._Loader", sizeof(rf_py_loader), 0, Py_TPFLAGS_DEFAULT, rf_py_loader_slots,
};
