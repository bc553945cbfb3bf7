/* python/ringflow/tensor.c -- ringflow.Tensor: a batch's images or labels, exported
 * zero-copy through DLPack (torch.from_dlpack, numpy.from_dlpack). It holds its
 * loader and a reference to its batch slot (rf_loader_ref), as every capsule taken
 * from it holds the Tensor; freed on whichever thread, it lets the slot go there. */
#include "py-impl.h"

#include <stdlib.h>
#include <string.h>

#include <ringflow/log.h>

/* DLPack v0.8: the tensor and its managed wrapper (DLDevice, DLDataType: py-impl.h) */
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

PyObject *rf_py_tensor_new(rf_py_loader *s, const struct rf_batch *b, int labels)
{
	struct rf_py_state *st = rf_py_state_of((PyObject *)s);
	rf_py_tensor *t = PyObject_New(rf_py_tensor, st->tensor_type);
	struct rf_tensor *x = labels ? b->y[0] : b->x[0];

	if (!t)
		return NULL;
	t->owner = NULL;
	int ret = rf_py_ref(s, b->slot, 1);
	if (ret < 0) {
		Py_DECREF((PyObject *)t);
		return rf_py_raise(st, ret, rf_last_error());
	}
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
	return (PyObject *)t;
}

/* ---- DLPack export -------------------------------------------------------------------- */

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
	/* the array API's stream: None for host memory; for a CUDA batch None or an int
	 * other than 0 (ambiguous there). The batch is whole when next() hands it out
	 * (its ops waited for), so any consumer stream may read it at once. */
	if (stream && stream != Py_None) {
		if (!PyLong_Check(stream) || PyBool_Check(stream)) {
			rf_py_type_error("__dlpack__: stream", "None or an int", stream);
			return NULL;
		}
		if (t->dev.device_type == 1) {
			PyErr_Format(PyExc_BufferError, "__dlpack__: stream=%R: a host (CPU) batch "
				     "takes stream=None", stream);
			return NULL;
		}
		long long sv = PyLong_AsLongLong(stream);
		if (sv == -1 && PyErr_Occurred())
			return NULL;
		if (sv == 0 || sv < -1) {
			PyErr_Format(PyExc_ValueError, "__dlpack__: stream=%R: expected None, -1, 1, "
				     "2 or a CUDA stream handle (0 is ambiguous)", stream);
			return NULL;
		}
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

	if (t->owner) {   /* any thread: rf_loader_unref needs no lock */
		(void)rf_py_ref(t->owner, t->slot, -1);
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

PyType_Spec rf_py_tensor_spec = {
	/* made by a Loader only: Tensor() raises TypeError instead of making an empty one */
	"ringflow.Tensor", sizeof(rf_py_tensor), 0,
	Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, rf_py_tensor_slots,
};

