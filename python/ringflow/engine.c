/* python/ringflow/engine.c -- ringflow.Engine and ringflow.Var: the dependency engine
 * with Python callables on worker streams. An exception a callable raises is kept
 * and becomes the __cause__ of the ringflow.Error its wait() or wait_all() raises. */
#include "py-impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ringflow/log.h>

#define RF_PY_ENGINE_MAX_WORKERS 64

typedef struct {
	PyObject_HEAD
	pthread_t owner;
	pid_t pid;                 /* the process that made it */
	struct rf_ring *ring;
	struct rf_engine *eng;
	struct rf_stream **ws;
	unsigned nws, next;
	char last_err[512];              /* the latest failed op's text, for wait_all */
	PyObject *last_exc;              /* and its exception (NULL: none) */
	int closed;                      /* close() ran: every call is EBADF */
	unsigned busy;                   /* in push or a wait (a signal handler's close()
					  * would free the engine under it) */
} rf_py_engine;

/* Engine and Var are collected as cycles: an exception kept keeps its traceback, whose
 * frames may hold the Var or the Engine it is kept on. */
typedef struct {
	PyObject_HEAD
	rf_py_engine *e;                 /* strong reference */
	struct rf_var *v;                /* freed with the engine: used only while it lives */
	PyObject *name;                  /* its name (a str), which outlives the engine */
	char err[512];                   /* the failing op's exception, for wait() */
	PyObject *exc;                   /* that exception (NULL: none, or a skip's) */
} rf_py_var;

struct rf_py_op {
	rf_py_engine *e;                 /* borrowed: the engine outlives its ops */
	PyObject *fn;
	PyObject *reads, *writes;        /* tuples of Vars: writes are told the exception */
	char err[512];
	PyObject *exc;                   /* the exception fn raised (strong) */
};

/* Drop what an op holds (under the GIL). */
static void rf_py_op_free(struct rf_py_op *op)
{
	Py_DECREF(op->fn);
	Py_XDECREF(op->reads);
	Py_XDECREF(op->writes);
	Py_XDECREF(op->exc);
	free(op);
}

/* *slot = a new reference to o (or NULL), the old one dropped. */
static void rf_py_set(PyObject **slot, PyObject *o)
{
	PyObject *old = *slot;

	*slot = o;
	Py_XINCREF(o);
	Py_XDECREF(old);
}

static int rf_py_op_run(void *ctx)   /* on a worker thread */
{
	struct rf_py_op *op = ctx;
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *r = PyObject_CallNoArgs(op->fn);
	int ret = 0;

	if (!r) {
		PyObject *et, *ev, *tb;
		PyErr_Fetch(&et, &ev, &tb);
		PyErr_NormalizeException(&et, &ev, &tb);
		if (ev && tb)
			PyException_SetTraceback(ev, tb);
		PyObject *name = et ? PyObject_GetAttrString(et, "__name__") : NULL;
		PyObject *txt = ev ? PyObject_Str(ev) : NULL;
		const char *n = name ? PyUnicode_AsUTF8AndSize(name, NULL) : NULL;
		const char *m = txt ? PyUnicode_AsUTF8AndSize(txt, NULL) : NULL;
		snprintf(op->err, sizeof(op->err), "%s: %s", n ? n : "exception", m ? m : "");
		Py_XDECREF(name);
		Py_XDECREF(txt);
		Py_XDECREF(et);
		op->exc = ev;            /* kept: the wait raises with it as __cause__ */
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

	if (status < 0 && op->err[0]) {
		snprintf(op->e->last_err, sizeof(op->e->last_err), "%s", op->err);
		rf_py_set(&op->e->last_exc, op->exc);
	}
	if (status < 0) {
		/* skipped (no text of its own): which variable held the poison, one it
		 * writes or, if none of those, one it reads; the exception that poisoned
		 * it, where one did, is the skip's too */
		const char *why = "a variable it reads", *name = NULL;
		PyObject *cause = op->exc;
		for (Py_ssize_t i = 0; !op->err[0] && i < PyTuple_Size(op->writes); i++) {
			rf_py_var *w = (rf_py_var *)PyTuple_GetItem(op->writes, i);
			if (w->err[0] && !name) {
				why = "a variable it writes";
				name = rf_var_name(w->v);
				cause = w->exc;
			}
		}
		for (Py_ssize_t i = 0; !cause && i < PyTuple_Size(op->reads); i++)
			cause = ((rf_py_var *)PyTuple_GetItem(op->reads, i))->exc;
		for (Py_ssize_t i = 0; i < PyTuple_Size(op->writes); i++) {
			rf_py_var *v = (rf_py_var *)PyTuple_GetItem(op->writes, i);
			if (op->err[0]) {
				snprintf(v->err, sizeof(v->err), "%s", op->err);
				rf_py_set(&v->exc, op->exc);
			} else if (!v->err[0]) { /* a poisoned one keeps its first cause */
				snprintf(v->err, sizeof(v->err), "skipped: %s%s%s%s was poisoned by a "
					 "failed op (%s; Var.clear_error() clears it)", why,
					 name ? " ('" : "", name ? name : "", name ? "')" : "",
					 strerror(-status));
				rf_py_set(&v->exc, cause);
			}
		}
	}
	rf_py_op_free(op);
	PyGILState_Release(g);
}

static int rf_py_engine_init(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kws[] = { "workers", NULL };
	rf_py_engine *s = (rf_py_engine *)self;
	struct rf_py_state *st = rf_py_state_of(self);
	PyObject *wobj = NULL;
	unsigned long long workers = 2;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kws, &wobj) ||
	    (wobj && rf_py_uint_arg(wobj, "Engine: workers", 1, RF_PY_ENGINE_MAX_WORKERS,
				    &workers) < 0))
		return -1;
	/* once made (or closed: its Vars name freed variables) it stays that engine */
	if (s->closed)
		return rf_py_raise(st, -EBADF, "Engine: closed; make a new Engine"), -1;
	if (s->eng)
		return rf_py_raise(st, -EINVAL, "Engine: already initialised"), -1;
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
	for (unsigned i = 0; ret == 0 && i < (unsigned)workers; i++) {
		char name[32];
		snprintf(name, sizeof(name), "py%u", i);
		ret = rf_worker_stream_create(s->eng, name, 0, &s->ws[i]);
		s->nws += ret == 0;
	}
	if (ret < 0)
		return rf_py_raise(st, ret, rf_last_error()), -1;
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

/* An engine the call `what` may use: open (else EBADF, as a closed Loader's), on the
 * thread that made it. */
static int rf_py_engine_ready(rf_py_engine *s, const char *what)
{
	struct rf_py_state *st = rf_py_state_of((PyObject *)s);

	if (!s->eng) {
		char msg[128];
		snprintf(msg, sizeof(msg), "Engine.%s: the Engine is %s", what,
			 s->closed ? "closed" : "not initialised");
		rf_py_raise(st, -EBADF, msg);
		return 0;
	}
	return rf_py_same_thread(st, s->owner, s->pid);
}

/* Drain what was pushed, then free the workers, the engine and the ring: what the
 * Engine let go does, now. Again, or on an Engine never made: nothing. */
static PyObject *rf_py_engine_close(PyObject *self, PyObject *unused)
{
	rf_py_engine *s = (rf_py_engine *)self;
	struct rf_py_state *st = rf_py_state_of(self);
	(void)unused;

	if (!s->ring && !s->eng) {
		s->closed = 1;
		Py_RETURN_NONE;
	}
	if (!rf_py_same_thread(st, s->owner, s->pid))
		return NULL;
	if (s->busy)
		return rf_py_raise(st, -EBUSY, "Engine.close: called from inside a push or wait "
				   "of this Engine (a signal handler?); close it after that returns");
	s->closed = 1;
	s->busy++;
	Py_BEGIN_ALLOW_THREADS
	rf_py_engine_close_all(s);  /* the ops' done callbacks (last_exc) run in it */
	Py_END_ALLOW_THREADS
	s->busy--;
	Py_RETURN_NONE;
}

static PyObject *rf_py_engine_enter(PyObject *self, PyObject *unused)
{
	rf_py_engine *s = (rf_py_engine *)self;
	(void)unused;

	if (!s->eng)
		return rf_py_raise(rf_py_state_of(self), -EBADF, s->closed ?
				   "Engine.__enter__: the Engine is closed" :
				   "Engine.__enter__: the Engine is not initialised");
	return Py_NewRef(self);
}

static PyObject *rf_py_engine_exit(PyObject *self, PyObject *args)
{
	PyObject *r = rf_py_engine_close(self, NULL);

	(void)args;
	if (!r)
		return NULL;
	Py_DECREF(r);
	Py_RETURN_FALSE;       /* an exception of the block goes on */
}

static int rf_py_engine_traverse(PyObject *self, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(self));
	Py_VISIT(((rf_py_engine *)self)->last_exc);
	return 0;
}

static int rf_py_engine_clear(PyObject *self)
{
	Py_CLEAR(((rf_py_engine *)self)->last_exc);
	return 0;
}

static void rf_py_engine_dealloc(PyObject *self)
{
	rf_py_engine *s = (rf_py_engine *)self;
	PyTypeObject *tp = Py_TYPE(self);

	PyObject_GC_UnTrack(self);
	if (rf_py_foreign_drop(self, s->owner, s->pid, s->ring != NULL, "Engine"))
		return;   /* the object too, as the Loader's */
	Py_BEGIN_ALLOW_THREADS
	rf_py_engine_close_all(s);  /* the ops' done callbacks (last_exc) run in it */
	Py_END_ALLOW_THREADS
	rf_py_engine_clear(self);
	((freefunc)PyType_GetSlot(tp, Py_tp_free))(self);
	Py_DECREF(tp);
}

static PyObject *rf_py_engine_var(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kws[] = { "name", NULL };
	rf_py_engine *s = (rf_py_engine *)self;
	struct rf_py_state *st = rf_py_state_of(self);
	PyObject *nobj = NULL;
	const char *name = "var";
	Py_ssize_t len;
	rf_py_var *v;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kws, &nobj))
		return NULL;
	if (nobj && !PyUnicode_Check(nobj)) {
		PyObject *tn = PyType_GetName(Py_TYPE(nobj));
		if (tn)
			PyErr_Format(PyExc_TypeError, "Engine.var: name: expected a str, got %S %R",
				     tn, nobj);
		Py_XDECREF(tn);
		return NULL;
	}
	if (nobj && !(name = PyUnicode_AsUTF8AndSize(nobj, &len)))
		return NULL;
	if (nobj && strlen(name) != (size_t)len) {
		PyErr_Format(PyExc_ValueError, "Engine.var: name=%R: expected a str without NUL "
			     "characters", nobj);
		return NULL;
	}
	if (!rf_py_engine_ready(s, "var"))
		return NULL;
	v = PyObject_GC_New(rf_py_var, st->var_type);
	if (!v)
		return NULL;
	v->e = NULL;
	v->v = NULL;
	v->name = NULL;
	v->err[0] = 0;
	v->exc = NULL;
	PyObject_GC_Track((PyObject *)v);
	ret = rf_var_create(s->eng, name, &v->v);
	if (ret < 0) {
		Py_DECREF(v);
		return rf_py_raise(st, ret, rf_last_error());
	}
	if (!(v->name = PyUnicode_FromString(rf_var_name(v->v)))) {
		Py_DECREF(v);
		return NULL;
	}
	Py_INCREF((PyObject *)s);
	v->e = s;
	return (PyObject *)v;
}

/* The Vars of this engine in tuple t into out (max at most); -1 with an exception. */
static int rf_py_vars(rf_py_engine *s, PyObject *t, struct rf_var **out, unsigned max,
		      unsigned *n, const char *what)
{
	PyTypeObject *var_type = rf_py_state_of((PyObject *)s)->var_type;

	*n = 0;
	if ((size_t)PyTuple_Size(t) > max) {
		PyErr_Format(PyExc_ValueError, "push: %s: %zd Vars, expected at most %u", what,
			     PyTuple_Size(t), max);
		return -1;
	}
	for (Py_ssize_t i = 0; i < PyTuple_Size(t); i++) {
		PyObject *o = PyTuple_GetItem(t, i);
		if (!PyObject_TypeCheck(o, var_type) || ((rf_py_var *)o)->e != s) {
			PyErr_Format(PyExc_TypeError, "push: %s[%zd]: expected a Var of this Engine, "
				     "got %R", what, i, o);
			return -1;
		}
		out[(*n)++] = ((rf_py_var *)o)->v;
	}
	return 0;
}

static PyObject *rf_py_engine_push(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kws[] = { "fn", "reads", "mutates", NULL };
	rf_py_engine *s = (rf_py_engine *)self;
	struct rf_py_state *st = rf_py_state_of(self);
	PyObject *fn, *reads = NULL, *muts = NULL;
	struct rf_var *rv[64], *wv[64];
	unsigned nr = 0, nw = 0;
	struct rf_op_desc d = { 0 };
	struct rf_py_op *op;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO", kws, &fn, &reads, &muts))
		return NULL;
	/* each sequence read once, first (iterating may run Python code): the Vars
	 * checked are the Vars kept */
	PyObject *in[2] = { reads, muts }, *t[2] = { NULL, NULL };
	for (int k = 0; k < 2; k++) {
		PyObject *o = in[k];
		t[k] = !o ? PyTuple_New(0) : PyUnicode_Check(o) || PyBytes_Check(o) ? NULL :
			PySequence_Tuple(o);
		if (!t[k] && o && (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError))) {
			PyObject *tn = PyType_GetName(Py_TYPE(o));
			PyErr_Clear();
			if (tn)
				PyErr_Format(PyExc_TypeError, "push: %s: expected a sequence of Vars, "
					     "got %S %R", k ? "mutates" : "reads", tn, o);
			Py_XDECREF(tn);
		}
		if (!t[k]) {
			Py_XDECREF(t[0]);
			return NULL;
		}
	}
	if (!rf_py_engine_ready(s, "push") || !PyCallable_Check(fn)) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "push: fn must be callable (no arguments)");
		Py_DECREF(t[0]);
		Py_DECREF(t[1]);
		return NULL;
	}
	op = calloc(1, sizeof(*op));
	if (!op) {
		Py_DECREF(t[0]);
		Py_DECREF(t[1]);
		return PyErr_NoMemory();
	}
	Py_INCREF(fn);
	op->e = s;
	op->fn = fn;
	op->reads = t[0];
	op->writes = t[1];
	if (rf_py_vars(s, op->reads, rv, 64, &nr, "reads") < 0 ||
	    rf_py_vars(s, op->writes, wv, 64, &nw, "mutates") < 0) {
		rf_py_op_free(op);
		return NULL;
	}
	d.fn = rf_py_op_run;
	d.done = rf_py_op_done;
	d.ctx = op;
	d.reads = rv;
	d.nreads = nr;
	d.writes = wv;
	d.nwrites = nw;
	d.stream = s->ws[s->next++ % s->nws];
	d.name = "python";
	s->busy++;
	Py_BEGIN_ALLOW_THREADS   /* a full engine turns the reactor: workers need the GIL */
	ret = rf_engine_push(s->eng, &d);
	Py_END_ALLOW_THREADS
	s->busy--;
	if (ret < 0) {     /* never pushed: done is not called */
		rf_py_op_free(op);
		return rf_py_raise(st, ret, rf_last_error());
	}
	Py_RETURN_NONE;
}

static PyObject *rf_py_engine_wait(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kws[] = { "var", NULL };
	rf_py_engine *s = (rf_py_engine *)self;
	struct rf_py_state *st = rf_py_state_of(self);
	PyObject *o;
	rf_py_var *v;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!", kws, st->var_type, &o) ||
	    !rf_py_engine_ready(s, "wait"))
		return NULL;
	v = (rf_py_var *)o;
	if (v->e != s) {
		PyErr_SetString(PyExc_TypeError, "wait: a Var of another Engine");
		return NULL;
	}
	s->busy++;
	Py_BEGIN_ALLOW_THREADS
	ret = rf_engine_wait_var(s->eng, v->v);
	Py_END_ALLOW_THREADS
	s->busy--;
	if (ret == -EINTR && PyErr_Occurred())
		return NULL;     /* Ctrl-C: its exception */
	if (ret < 0)
		return rf_py_raise_from(st, ret, v->err[0] ? v->err : rf_last_error(), v->exc);
	Py_RETURN_NONE;
}

static PyObject *rf_py_engine_wait_all(PyObject *self, PyObject *unused)
{
	rf_py_engine *s = (rf_py_engine *)self;
	struct rf_py_state *st = rf_py_state_of(self);
	int ret;
	(void)unused;

	if (!rf_py_engine_ready(s, "wait_all"))
		return NULL;
	s->busy++;
	Py_BEGIN_ALLOW_THREADS
	ret = rf_engine_wait_all(s->eng);
	Py_END_ALLOW_THREADS
	s->busy--;
	if (ret == -EINTR && PyErr_Occurred())
		return NULL;
	if (ret < 0) {
		char msg[600];
		snprintf(msg, sizeof(msg), "an op failed: %s", s->last_err[0] ? s->last_err :
			 strerror(-ret));
		s->last_err[0] = 0;
		rf_py_raise_from(st, ret, msg, s->last_exc);
		Py_CLEAR(s->last_exc);
		return NULL;
	}
	Py_RETURN_NONE;
}

static PyMethodDef rf_py_engine_methods[] = {
	{ "var", (PyCFunction)(void (*)(void))rf_py_engine_var, METH_VARARGS | METH_KEYWORDS,
	  "var(name='var'): a new variable" },
	{ "push", (PyCFunction)(void (*)(void))rf_py_engine_push, METH_VARARGS | METH_KEYWORDS,
	  "push(fn, reads=(), mutates=()): run fn() on a worker once what it reads and mutates "
	  "is ready" },
	{ "wait", (PyCFunction)(void (*)(void))rf_py_engine_wait, METH_VARARGS | METH_KEYWORDS,
	  "wait(var): until every op on var is done; a failed op's exception is the "
	  "ringflow.Error's __cause__" },
	{ "wait_all", rf_py_engine_wait_all, METH_NOARGS, "until every op pushed is done" },
	{ "close", rf_py_engine_close, METH_NOARGS, "run what was pushed, then free the "
	  "workers and the ring now (again: nothing); a call after it raises ringflow.Error "
	  "(EBADF)" },
	{ "__enter__", rf_py_engine_enter, METH_NOARGS, "the Engine itself" },
	{ "__exit__", rf_py_engine_exit, METH_VARARGS, "close()" },
	{ NULL, NULL, 0, NULL },
};

static PyType_Slot rf_py_engine_slots[] = {
	{ Py_tp_init, rf_py_engine_init },
	{ Py_tp_new, PyType_GenericNew },
	{ Py_tp_dealloc, rf_py_engine_dealloc },
	{ Py_tp_traverse, rf_py_engine_traverse },
	{ Py_tp_clear, rf_py_engine_clear },
	{ Py_tp_methods, rf_py_engine_methods },
	{ Py_tp_doc, "Engine(workers=2): the dependency engine, Python callables on 1 to 64 "
	  "worker streams; close() it, or use it in a with block" },
	{ 0, NULL },
};

PyType_Spec rf_py_engine_spec = {
	"ringflow.Engine", sizeof(rf_py_engine), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	rf_py_engine_slots,
};

static int rf_py_var_traverse(PyObject *self, visitproc visit, void *arg)
{
	rf_py_var *v = (rf_py_var *)self;

	Py_VISIT(Py_TYPE(self));
	Py_VISIT((PyObject *)v->e);
	Py_VISIT(v->exc);
	return 0;
}

static int rf_py_var_clear(PyObject *self)
{
	Py_CLEAR(((rf_py_var *)self)->exc);
	return 0;
}

static void rf_py_var_dealloc(PyObject *self)
{
	rf_py_var *v = (rf_py_var *)self;
	PyTypeObject *tp = Py_TYPE(self);

	PyObject_GC_UnTrack(self);
	if (v->e) {
		/* deleted after the ops on it, in engine order; on another thread than the
		 * engine's a push is refused: the engine frees it when it is destroyed */
		if (v->v && v->e->eng && pthread_equal(v->e->owner, pthread_self()))
			rf_var_destroy(v->e->eng, v->v, NULL, NULL, NULL);
		Py_DECREF(v->e);
	}
	Py_XDECREF(v->exc);
	Py_XDECREF(v->name);
	PyObject_GC_Del(self);
	Py_DECREF(tp);
}

static PyObject *rf_py_var_name(PyObject *self, void *unused)
{
	rf_py_var *v = (rf_py_var *)self;
	(void)unused;
	return v->name ? Py_NewRef(v->name) : PyUnicode_FromString("");
}

/* Clear the poison a failed op left (pushed after the ops on it, as the engine's
 * rf_var_clear_error does): ops pushed after this run again. */
static PyObject *rf_py_var_clear_error(PyObject *self, PyObject *unused)
{
	rf_py_var *v = (rf_py_var *)self;
	struct rf_py_state *st = rf_py_state_of(self);
	rf_py_engine *s = v->e;
	int ret;
	(void)unused;

	if (!s || !s->eng || !v->v)
		return rf_py_raise(st, -EBADF, "Var.clear_error: its Engine is closed");
	if (!rf_py_same_thread(st, s->owner, s->pid))
		return NULL;
	if ((ret = rf_var_clear_error(s->eng, v->v)) < 0)
		return rf_py_raise(st, ret, rf_last_error());
	v->err[0] = 0;
	Py_CLEAR(v->exc);
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
	{ Py_tp_traverse, rf_py_var_traverse },
	{ Py_tp_clear, rf_py_var_clear },
	{ Py_tp_getset, rf_py_var_getset },
	{ Py_tp_methods, rf_py_var_methods },
	{ Py_tp_doc, "An engine variable (Engine.var())" },
	{ 0, NULL },
};

PyType_Spec rf_py_var_spec = {
	/* made by Engine.var() only */
	"ringflow.Var", sizeof(rf_py_var), 0,
	Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
	rf_py_var_slots,
};
