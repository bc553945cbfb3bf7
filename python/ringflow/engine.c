/* python/ringflow/engine.c -- ringflow.Engine: the dependency engine with Python
 * callables on worker streams (push, wait, wait_all, close). What a callable's
 * exception leaves on the Vars, and the Var type, are var.c's. */
#include "py-impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ringflow/log.h>

#define RF_PY_ENGINE_MAX_WORKERS 64

static int rf_py_engine_init(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kws[] = { "workers", "threads", NULL };
	rf_py_engine *s = (rf_py_engine *)self;
	struct rf_py_state *st = rf_py_state_of(self);
	PyObject *wobj = NULL, *tobj = NULL;
	unsigned long long workers = 2, threads;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO", kws, &wobj, &tobj) ||
	    (wobj && rf_py_uint_arg(wobj, "Engine: workers", 1, RF_PY_ENGINE_MAX_WORKERS,
				    &workers) < 0))
		return -1;
	/* threads: the worker streams share that many threads (default: one each) */
	threads = workers;
	if (tobj && tobj != Py_None &&
	    rf_py_uint_arg(tobj, "Engine: threads", 1, workers, &threads) < 0)
		return -1;
	/* once made (or closed: its Vars name freed variables) it stays that engine */
	if (s->closed)
		return rf_py_raise(st, -EBADF, "Engine: closed; make a new Engine"), -1;
	if (s->eng)
		return rf_py_raise(st, -EINVAL, "Engine: already initialised"), -1;
	s->owner = pthread_self();
	s->pid = getpid();
	if (!s->live) {      /* listed now: a failed init is closed as any Engine */
		s->lprev = NULL;
		s->lnext = st->engines;
		if (st->engines)
			st->engines->lprev = s;
		st->engines = s;
		s->live = 1;
	}
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
		/* stream i runs on thread i % threads: the first `threads` make them */
		ret = i < threads ? rf_worker_stream_create(s->eng, name, 0, &s->ws[i])
				  : rf_worker_stream_create_shared(s->eng, name, 0,
								   s->ws[i % threads], &s->ws[i]);
		s->nws += ret == 0;
	}
	if (ret < 0)
		return rf_py_raise(st, ret, rf_last_error()), -1;
	return 0;
}

/* Off the module state's list of open Engines (under the GIL, before closing). */
static void rf_py_engine_unlist(rf_py_engine *s)
{
	struct rf_py_state *st = rf_py_state_of((PyObject *)s);

	if (!s->live)
		return;
	if (s->lprev)
		s->lprev->lnext = s->lnext;
	else
		st->engines = s->lnext;
	if (s->lnext)
		s->lnext->lprev = s->lprev;
	s->live = 0;
}

/* Without the GIL (the ops' callables and done callbacks take it), unlisted first. */
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

/* Closed for good, under the GIL: what was pushed runs (the GIL released: the
 * callables and the ops' done callbacks take it), then the workers, engine and ring
 * go; marked busy meanwhile (a signal handler's close() is refused). */
static void rf_py_engine_shut(rf_py_engine *s)
{
	s->closed = 1;
	rf_py_engine_unlist(s);
	s->busy++;
	Py_BEGIN_ALLOW_THREADS
	rf_py_engine_close_all(s);
	Py_END_ALLOW_THREADS
	s->busy--;
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
	rf_py_engine_shut(s);
	if (rf_py_warn_pending(st) < 0)
		return NULL;
	Py_RETURN_NONE;
}

PyObject *rf_py_exit_engines(PyObject *mod, PyObject *unused)
{
	struct rf_py_state *st = PyModule_GetState(mod);
	rf_py_engine *s, *next;
	(void)unused;

	st->exiting = 1;
	for (s = st->engines; s; s = next) {
		next = s->lnext;
		if (s->pid != getpid())
			continue;      /* a forked copy: no workers here */
		if (s->busy || !pthread_equal(s->owner, pthread_self())) {
			/* not this thread's to close: its workers must not ask for the GIL
			 * once the interpreter is gone (PyGILState_Ensure would crash) */
			__atomic_store_n(&s->abandoned, 1, __ATOMIC_RELEASE);
			continue;
		}
		Py_INCREF((PyObject *)s);    /* closing drops the Vars, which hold it */
		rf_py_engine_shut(s);
		next = st->engines;          /* the list may have changed meanwhile */
		Py_DECREF((PyObject *)s);
	}
	if (PyErr_Occurred())
		PyErr_WriteUnraisable(mod);
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
	rf_py_engine *s = (rf_py_engine *)self;

	Py_VISIT(Py_TYPE(self));
	for (struct rf_py_fail *f = s->fails; f; f = f->next)
		Py_VISIT(f->exc);
	/* a pending op holds its Vars, each Var the Engine: a cycle nothing else breaks
	 * when the program lets them all go (no wait turns the reactor that would finish
	 * the op), which the collector finds through here */
	for (struct rf_py_op *op = s->ops; op; op = op->next) {
		Py_VISIT(op->fn);
		Py_VISIT(op->reads);
		Py_VISIT(op->writes);
		Py_VISIT(op->exc);
	}
	return 0;
}

/* The collector found the Engine unreachable with ops pending: finish them and close
 * it, as close() does -- which lets their Vars, and so the Engine, go. From
 * tp_finalize, before the collector clears anything: the callables run as pushed. On
 * the thread that made it only (its ring is that thread's); found on another, that
 * collection clears the cycle's objects (the callables' globals and closures among
 * them) and leaves it, and a later one on the owner's thread finishes it from
 * tp_clear. */
static void rf_py_engine_collect(PyObject *self)
{
	rf_py_engine *s = (rf_py_engine *)self;
	PyObject *et, *ev, *tb;

	if (!s->eng || !s->ops || s->busy || s->pid != getpid() ||
	    !pthread_equal(s->owner, pthread_self()))
		return;
	if (rf_py_state_of(self)->exiting)
		return;            /* the workers may no longer take the GIL: left */
	PyErr_Fetch(&et, &ev, &tb);
	rf_py_engine_shut(s);
	if (PyErr_Occurred())      /* a signal's exception, checked during the drain */
		PyErr_WriteUnraisable(self);
	PyErr_Restore(et, ev, tb);
}

static void rf_py_engine_finalize(PyObject *self)
{
	rf_py_engine *s = (rf_py_engine *)self;

	/* found by another thread's collection, which then clears the cycle's objects
	 * one by one (the callables among them): from now on none is called -- set here,
	 * before the first tp_clear, not in ours, which may come after a callable's */
	if (s->ops && (s->pid != getpid() || !pthread_equal(s->owner, pthread_self())))
		s->cleared = 1;
	rf_py_engine_collect(self);
}

static int rf_py_engine_clear(PyObject *self)
{
	rf_py_engine *s = (rf_py_engine *)self;

	/* the callables may be cleared now: from here on none is called (a worker may
	 * take one before the owner's thread collects again) */
	if (s->ops)
		s->cleared = 1;
	rf_py_engine_collect(self);   /* tp_finalize ran on another thread */
	while (s->fails)
		rf_py_fail_unlist(s, s->fails);
	return 0;
}

static void rf_py_engine_dealloc(PyObject *self)
{
	rf_py_engine *s = (rf_py_engine *)self;
	PyTypeObject *tp = Py_TYPE(self);

	PyObject_GC_UnTrack(self);
	if (rf_py_foreign_drop(self, s->owner, s->pid, s->ring != NULL, "Engine"))
		return;   /* the object too, as the Loader's */
	if (s->ops && rf_py_state_of(self)->exiting)
		return;   /* made after _exit_engines: its workers cannot take the GIL */
	rf_py_engine_unlist(s);
	Py_BEGIN_ALLOW_THREADS
	rf_py_engine_close_all(s);  /* the ops' done callbacks (failures) run in it */
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
		rf_py_type_error("Engine.var: name", "a str", nobj);
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
	v->fail = NULL;
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

/* Push d with the GIL released (a full engine turns the reactor, and the workers need
 * the GIL), marked busy: a signal handler's close() must not free the engine under it.
 * op is listed first: its done callback may run inside the push. */
int rf_py_push_op(rf_py_engine *s, struct rf_op_desc *d, struct rf_py_op *op)
{
	int ret;

	op->e = s;
	op->prev = NULL;
	op->next = s->ops;
	if (s->ops)
		s->ops->prev = op;
	s->ops = op;
	op->listed = 1;
	d->ctx = op;
	s->busy++;
	Py_BEGIN_ALLOW_THREADS
	ret = rf_engine_push(s->eng, d);
	Py_END_ALLOW_THREADS
	s->busy--;
	if (ret < 0) {     /* never pushed: done is not called */
		rf_py_op_free(op);
		rf_py_raise(rf_py_state_of((PyObject *)s), ret, rf_last_error());
		return -1;
	}
	return 0;
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
	PyObject *fn, *reads = NULL, *muts = NULL;
	struct rf_var *rv[64], *wv[64];
	unsigned nr = 0, nw = 0;
	struct rf_op_desc d = { 0 };
	struct rf_py_op *op;

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
			PyErr_Clear();
			rf_py_type_error(k ? "push: mutates" : "push: reads", "a sequence of Vars", o);
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
	d.reads = rv;
	d.nreads = nr;
	d.writes = wv;
	d.nwrites = nw;
	d.stream = s->ws[s->next++ % s->nws];
	d.name = "python";
	if (rf_py_push_op(s, &d, op) < 0)
		return NULL;
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
		rf_py_raise_from(st, ret, v->err[0] ? v->err : rf_last_error(), v->exc);
	if (rf_py_warn_pending(st) < 0 || ret < 0)  /* the library's warnings, said */
		return NULL;
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
	if (ret == -EINTR || (ret < 0 && !s->nfailed))
		return rf_py_raise(st, ret, rf_last_error());   /* the wait's own error */
	/* the engine's error since the last wait_all is an op's (ret) or none: raised
	 * is the first failure since then that no clear_error cleared */
	struct rf_py_fail *f = s->fails;
	PyObject *r = NULL;
	if (f) {
		char msg[600];
		snprintf(msg, sizeof(msg), "an op failed: %s", f->text);
		rf_py_raise_from(st, ret < 0 ? ret : -EIO, msg, f->exc);
	} else if (s->unkept) {
		char msg[200];
		snprintf(msg, sizeof(msg), "%lu ops failed beyond the %d failures kept for "
			 "wait_all (their Vars hold their exceptions: wait(var) raises them)",
			 s->unkept, RF_PY_MAX_FAILS);
		rf_py_raise(st, -EIO, msg);
	} else {
		r = Py_NewRef(Py_None);
	}
	while (s->fails)
		rf_py_fail_unlist(s, s->fails);
	s->nfailed = 0;
	s->unkept = 0;
	if (rf_py_warn_pending(st) < 0)  /* the library's warnings, said */
		Py_CLEAR(r);
	return r;
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
	{ "wait_all", rf_py_engine_wait_all, METH_NOARGS, "until every op pushed is done; "
	  "raises the first failure since the last wait_all that no clear_error cleared" },
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
	{ Py_tp_finalize, rf_py_engine_finalize },
	{ Py_tp_methods, rf_py_engine_methods },
	{ Py_tp_doc, "Engine(workers=2, threads=None): the dependency engine, Python callables "
	  "on 1 to 64 worker streams, run by `threads` threads (1 to workers; None: one each); "
	  "close() it, or use it in a with block" },
	{ 0, NULL },
};

PyType_Spec rf_py_engine_spec = {
	"ringflow.Engine", sizeof(rf_py_engine), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	rf_py_engine_slots,
};
