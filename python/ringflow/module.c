/* python/ringflow/module.c -- the `ringflow._ringflow` module: multi-phase
 * initialisation (PEP 489) with its state (the exception and the types, no static
 * globals), the error and thread helpers every type uses, and _pack.
 *
 * Threads: a Loader or an Engine owns its ring, engine and devices and is driven from
 * the thread that made it (the reactor thread); another thread's call is refused.
 * Waiting turns the reactor with the GIL released, so other Python threads run. */
#include "py-impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <ringflow/log.h>

PyObject *rf_py_raise_from(struct rf_py_state *st, int ret, const char *text,
			   PyObject *cause)
{
	int e = ret < 0 ? -ret : EIO;
	PyObject *err = PyObject_CallFunction(st->error, "is", e, text && *text ? text :
					      strerror(e));

	if (!err)
		return NULL;
	if (cause)
		PyException_SetCause(err, Py_NewRef(cause));   /* takes the reference */
	PyErr_SetObject(st->error, err);
	Py_DECREF(err);
	return NULL;
}

/* The object is used on the thread that made it, in the process that made it: a
 * fork() copies neither its ring's kernel state nor its threads (and the child's
 * thread can have the parent's pthread_t). */
int rf_py_same_thread(struct rf_py_state *st, pthread_t owner, pid_t pid)
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
	rf_py_raise(st, -EPERM, "ringflow: a Loader or Engine is used from the thread that made "
			"it (its reactor thread); make one per thread or process");
	return 0;
}

void rf_py_type_error(const char *what, const char *expected, PyObject *o)
{
	PyObject *tn = PyType_GetName(Py_TYPE(o));

	if (tn)
		PyErr_Format(PyExc_TypeError, "%s: expected %s, got %S %R", what, expected, tn, o);
	Py_XDECREF(tn);
}

int rf_py_uint_arg(PyObject *o, const char *what, unsigned long long lo,
		   unsigned long long hi, unsigned long long *out)
{
	unsigned long long u = 0;
	PyObject *i;
	int neg = 0, past64 = 0, ovf;

	if (PyBool_Check(o) || !PyIndex_Check(o)) {
		rf_py_type_error(what, "an int", o);
		return -1;
	}
	if (!(i = PyNumber_Index(o)))
		return -1;
	long long v = PyLong_AsLongLongAndOverflow(i, &ovf);
	if (v == -1 && PyErr_Occurred()) {
		Py_DECREF(i);
		return -1;
	}
	if (ovf < 0) {
		neg = past64 = 1;
	} else if (ovf > 0) {         /* 2^63 and up: unsigned, or past 64 bits */
		u = PyLong_AsUnsignedLongLong(i);
		if (u == (unsigned long long)-1 && PyErr_Occurred()) {
			PyErr_Clear();
			past64 = 1;
		}
	} else if (v < 0) {
		neg = 1;
	} else {
		u = (unsigned long long)v;
	}
	Py_DECREF(i);
	if (neg || past64 || u < lo || u > hi) {
		PyErr_Format(past64 ? PyExc_OverflowError : PyExc_ValueError, "%s=%S: expected "
			     "an int from %llu to %llu", what, o, lo, hi);
		return -1;
	}
	*out = u;
	return 0;
}

/* ---- the library's warnings, as Python's ------------------------------------------
 * The library logs warnings (an image skipped, a shard's samples passed over) through
 * one process-wide callback, on whichever thread meets them, with or without the GIL.
 * They were dropped: no callback was set. Now they wait here (a mutex: this is the
 * binding, not the runtime's path) until the next call returns to Python, which gives
 * them to the warnings module (rf_py_warn_pending). At most RF_PY_LOGQ wait; more are
 * counted and said. */
#define RF_PY_LOGQ 32
static pthread_mutex_t rf_py_logmu = PTHREAD_MUTEX_INITIALIZER;
static char rf_py_logq[RF_PY_LOGQ][512];
static unsigned rf_py_logn, rf_py_logdropped;

/* A child forked while another thread held the queue's lock would wait on it for good:
 * it starts with a lock of its own (the queue's messages are the parent's). */
static void rf_py_log_atfork_child(void)
{
	pthread_mutex_init(&rf_py_logmu, NULL);
	rf_py_logn = rf_py_logdropped = 0;
}

static void rf_py_log(enum rf_log_level level, const char *msg, void *user)
{
	(void)user;
	if (level == RF_LOG_INFO)
		return;
	pthread_mutex_lock(&rf_py_logmu);
	if (rf_py_logn < RF_PY_LOGQ)
		snprintf(rf_py_logq[rf_py_logn++], sizeof(rf_py_logq[0]), "%s", msg);
	else
		rf_py_logdropped++;
	pthread_mutex_unlock(&rf_py_logmu);
}

static void rf_py_log_atfork_once(void)
{
	(void)pthread_atfork(NULL, NULL, rf_py_log_atfork_child);
}

/* Put msg back at the queue's front: the next call says it first. */
static void rf_py_log_unshift(const char *msg)
{
	pthread_mutex_lock(&rf_py_logmu);
	if (rf_py_logn == RF_PY_LOGQ) {  /* full: the newest goes, counted */
		rf_py_logn--;
		rf_py_logdropped++;
	}
	memmove(rf_py_logq[1], rf_py_logq[0], rf_py_logn * sizeof(rf_py_logq[0]));
	snprintf(rf_py_logq[0], sizeof(rf_py_logq[0]), "%s", msg);
	rf_py_logn++;
	pthread_mutex_unlock(&rf_py_logmu);
}

/* Take the queue's first message into msg: 1, or 0 when it is empty -- then, where
 * dropped is given, the count of those dropped is taken into it too. */
static int rf_py_log_shift(char *msg, unsigned *dropped)
{
	int got;

	pthread_mutex_lock(&rf_py_logmu);
	got = rf_py_logn > 0;
	if (got) {
		memcpy(msg, rf_py_logq[0], sizeof(rf_py_logq[0]));
		memmove(rf_py_logq[0], rf_py_logq[1], (--rf_py_logn) * sizeof(rf_py_logq[0]));
	} else if (dropped) {
		*dropped = rf_py_logdropped;
		rf_py_logdropped = 0;
	}
	pthread_mutex_unlock(&rf_py_logmu);
	return got;
}

void rf_py_warn_keep(struct rf_py_state *st)
{
	char msg[sizeof(rf_py_logq[0])];

	/* a count of dropped ones waits for rf_py_warn_pending */
	while (rf_py_log_shift(msg, NULL)) {
		if (PyErr_WarnEx(st->warning, msg, 1) < 0) {
			PyErr_Clear();           /* an error by a filter: raised by the next */
			rf_py_log_unshift(msg);  /* call, before it takes anything */
			return;
		}
	}
}

int rf_py_warn_pending(struct rf_py_state *st)
{
	char msg[sizeof(rf_py_logq[0])];
	PyObject *et, *ev, *tb;
	unsigned dropped = 0;
	int kept = PyErr_Occurred() != NULL, ret = 0;

	if (kept)
		PyErr_Fetch(&et, &ev, &tb);
	while (rf_py_log_shift(msg, &dropped)) {
		if (PyErr_WarnEx(st->warning, msg, 1) < 0) {
			if (!kept) {
				ret = -1;  /* the rest stays queued for the next call */
				break;
			}
			/* an exception is pending already: this one waits for the next call */
			PyErr_Clear();
			rf_py_log_unshift(msg);
			break;
		}
	}
	if (ret == 0 && dropped && PyErr_WarnFormat(st->warning, 1, "%u more warnings of "
						     "ringflow's were dropped (at most %d "
						     "wait between calls)", dropped,
						     RF_PY_LOGQ) < 0) {
		if (kept)
			PyErr_Clear();
		else
			ret = -1;
	}
	if (kept)
		PyErr_Restore(et, ev, tb);
	return ret;
}

/* Asked every 100 ms while a wait turns the reactor without the GIL: a signal Python
 * has a handler for (Ctrl-C) ends the wait with its exception set, instead of after
 * the batch, or a stalled server's timeout. */
int rf_py_interrupted(void *arg)
{
	PyGILState_STATE g = PyGILState_Ensure();
	int stop = PyErr_CheckSignals() < 0;

	(void)arg;
	PyGILState_Release(g);
	return stop;
}

/* Let go on another thread than the owner's (the collector, a consumer thread): the
 * ring, the engine and its threads belong to the owner's thread (a single-issuer
 * ring; an engine's waits and destroy are its reactor thread's), so nothing is freed
 * from here -- that would free memory under worker threads still running. They are
 * leaked, with the object itself (a loader reads the dataset struct inside it), and
 * a ResourceWarning says how not to: close() on the owner's thread. */
int rf_py_foreign_drop(PyObject *self, pthread_t owner, pid_t pid, int live,
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

/* ---- _pack: a .rfrec from a buffer of u8 records ------------------------------------ */

static PyObject *rf_py_pack(PyObject *mod, PyObject *args, PyObject *kw)
{
	static char *kws[] = { "path", "images", "n", "shape", "labels", "num_classes", NULL };
	struct rf_py_state *st = PyModule_GetState(mod);
	const char *path;
	PyObject *imgs, *labs, *shape, *nobj, *ncobj;
	Py_buffer bi = { 0 }, bl = { 0 };
	struct rf_rec_layout lay = { 0 };
	struct rf_rec_writer *w = NULL;
	unsigned long long n, num_classes, dim;
	Py_ssize_t ndim;
	int ret = 0, have_labels;
	size_t rec = 1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "$sOOO!OO", kws, &path, &imgs, &nobj,
					 &PyTuple_Type, &shape, &labs, &ncobj))
		return NULL;
	/* each checked whole: a shape cut to RF_DS_MAX_DIMS dims, a dim or num_classes
	 * cut to 32 bits, would write another file than the one asked for */
	if (rf_py_uint_arg(nobj, "pack: n", 1, UINT64_MAX, &n) < 0 ||
	    rf_py_uint_arg(ncobj, "pack: num_classes", 0, INT32_MAX, &num_classes) < 0)
		return NULL;
	ndim = PyTuple_Size(shape);
	if (ndim < 1 || ndim > RF_DS_MAX_DIMS) {
		PyErr_Format(PyExc_ValueError, "pack: shape of %zd record dims: expected 1 to %d "
			     "record dims", ndim, RF_DS_MAX_DIMS);
		return NULL;
	}
	lay.ndim = (unsigned)ndim;
	for (unsigned d = 0; d < lay.ndim; d++) {
		char what[32];
		snprintf(what, sizeof(what), "pack: shape[%u]", d);
		if (rf_py_uint_arg(PyTuple_GetItem(shape, d), what, 1, UINT32_MAX, &dim) < 0)
			return NULL;
		lay.shape[d] = (uint32_t)dim;
		if (__builtin_mul_overflow(rec, (size_t)dim, &rec)) {
			PyErr_Format(PyExc_ValueError, "pack: shape %R: a record of more than "
				     "%zu bytes", shape, SIZE_MAX);
			return NULL;
		}
	}
	have_labels = labs != Py_None;
	if (PyObject_GetBuffer(imgs, &bi, PyBUF_C_CONTIGUOUS) < 0)
		return NULL;
	if (have_labels && PyObject_GetBuffer(labs, &bl, PyBUF_C_CONTIGUOUS) < 0) {
		PyBuffer_Release(&bi);
		return NULL;
	}
	lay.dtype = RF_DS_DT_U8;
	lay.label_kind = have_labels ? RF_LABEL_I32 : RF_LABEL_NONE;
	lay.num_classes = (uint32_t)num_classes;
	size_t total;
	if (__builtin_mul_overflow(rec, (size_t)n, &total) || (size_t)bi.len != total ||
	    (have_labels && (n > SIZE_MAX / 4 || (size_t)bl.len != 4 * n))) {
		PyErr_Format(PyExc_ValueError, "pack: %llu records of %zu bytes: images hold %zd "
			     "bytes%s", n, rec, bi.len, have_labels ? " (and labels 4 bytes each)" : "");
		PyBuffer_Release(&bi);
		if (have_labels)
			PyBuffer_Release(&bl);
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
		return rf_py_raise(st, ret, rf_last_error());
	Py_RETURN_NONE;
}

/* ---- the module --------------------------------------------------------------------- */

static int rf_py_add_type(PyObject *m, PyType_Spec *spec, PyTypeObject **out)
{
	*out = (PyTypeObject *)PyType_FromModuleAndSpec(m, spec, NULL);
	if (!*out)
		return -1;
	return PyModule_AddType(m, *out);    /* by its name's last part */
}

static int rf_py_exec(PyObject *m)
{
	struct rf_py_state *st = PyModule_GetState(m);

	st->error = PyErr_NewException("ringflow.Error", PyExc_OSError, NULL);
	st->warning = PyErr_NewException("ringflow.Warning", PyExc_RuntimeWarning, NULL);
	if (!st->error || PyModule_AddObjectRef(m, "Error", st->error) < 0 ||
	    !st->warning || PyModule_AddObjectRef(m, "Warning", st->warning) < 0 ||
	    /* the limits the package's Python half checks against */
	    PyModule_AddIntConstant(m, "_MAX_RECORD_DIMS", RF_DS_MAX_DIMS) < 0 ||
	    PyModule_AddIntConstant(m, "_MAX_EPOCH", RF_PY_MAX_EPOCH) < 0 ||
	    rf_py_add_type(m, &rf_py_loader_spec, &st->loader_type) < 0 ||
	    rf_py_add_type(m, &rf_py_tensor_spec, &st->tensor_type) < 0 ||
	    rf_py_add_type(m, &rf_py_engine_spec, &st->engine_type) < 0 ||
	    rf_py_add_type(m, &rf_py_var_spec, &st->var_type) < 0)
		return -1;   /* what was made is the state's: rf_py_clear frees it */
	/* at exit, the Engines' pushed callables run while their workers may take the
	 * GIL (once the interpreter finalizes, a thread asking for it is ended) */
	PyObject *ax = PyImport_ImportModule("atexit");
	PyObject *fn = PyObject_GetAttrString(m, "_exit_engines");
	PyObject *r = ax && fn ? PyObject_CallMethod(ax, "register", "O", fn) : NULL;
	Py_XDECREF(ax);
	Py_XDECREF(fn);
	if (!r)
		return -1;
	Py_DECREF(r);
	rf_log_set(rf_py_log, NULL);   /* the library's warnings: rf_py_warn_pending */
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	(void)pthread_once(&once, rf_py_log_atfork_once);
	return 0;
}

static int rf_py_traverse(PyObject *m, visitproc visit, void *arg)
{
	struct rf_py_state *st = PyModule_GetState(m);

	if (!st)
		return 0;
	Py_VISIT(st->error);
	Py_VISIT(st->warning);
	Py_VISIT(st->loader_type);
	Py_VISIT(st->tensor_type);
	Py_VISIT(st->engine_type);
	Py_VISIT(st->var_type);
	return 0;
}

static int rf_py_clear(PyObject *m)
{
	struct rf_py_state *st = PyModule_GetState(m);

	if (!st)
		return 0;
	Py_CLEAR(st->error);
	Py_CLEAR(st->warning);
	Py_CLEAR(st->loader_type);
	Py_CLEAR(st->tensor_type);
	Py_CLEAR(st->engine_type);
	Py_CLEAR(st->var_type);
	return 0;
}

static void rf_py_free(void *m)
{
	rf_py_clear(m);
}

static PyMethodDef rf_py_functions[] = {
	{ "_pack", (PyCFunction)(void (*)(void))rf_py_pack, METH_VARARGS | METH_KEYWORDS,
	  "_pack(*, path, images, n, shape, labels, num_classes): a .rfrec of n u8 records" },
	{ "_exit_engines", rf_py_exit_engines, METH_NOARGS, "close this thread's open Engines "
	  "(atexit: what they were pushed runs)" },
	{ NULL, NULL, 0, NULL },
};

static PyModuleDef_Slot rf_py_slots[] = {
	{ Py_mod_exec, rf_py_exec },
	{ 0, NULL },
};

static struct PyModuleDef rf_py_module = {
	PyModuleDef_HEAD_INIT, "_ringflow", "ringflow's C half (use the ringflow package)",
	sizeof(struct rf_py_state), rf_py_functions, rf_py_slots, rf_py_traverse, rf_py_clear,
	rf_py_free,
};

PyMODINIT_FUNC PyInit__ringflow(void)
{
	return PyModuleDef_Init(&rf_py_module);
}
