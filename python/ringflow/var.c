/* python/ringflow/var.c -- ringflow.Var, and what a failed op leaves on the Vars: the
 * callable's exception kept (the __cause__ of the ringflow.Error a wait() raises), the
 * poison its Vars take and pass on to the ops that read them, the Engine's list of
 * failures for wait_all, and clear_error. The ops' run and done callbacks are here:
 * they are what records a failure. */
#include "py-impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringflow/log.h>

/* *slot = a new reference to o (or NULL), the old one dropped. */
static void rf_py_set(PyObject **slot, PyObject *o)
{
	PyObject *old = *slot;

	*slot = o;
	Py_XINCREF(o);
	Py_XDECREF(old);
}

/* A failure record let go (freed with its last reference). */
static void rf_py_fail_put(struct rf_py_fail *f)
{
	if (f && --f->refs == 0)
		free(f);
}

/* Off the Engine's list: wait_all no longer raises it. */
void rf_py_fail_unlist(rf_py_engine *s, struct rf_py_fail *f)
{
	if (!f || !f->listed)
		return;
	if (f->prev)
		f->prev->next = f->next;
	else
		s->fails = f->next;
	if (f->next)
		f->next->prev = f->prev;
	else
		s->fails_tail = f->prev;
	f->listed = 0;
	s->nfails--;
	f->prev = f->next = NULL;
	Py_CLEAR(f->exc);
	rf_py_fail_put(f);
}

/* Var v's poison: text, its exception, its failure (each may be NULL: clean). */
static void rf_py_var_poison(rf_py_var *v, const char *text, PyObject *exc,
			     struct rf_py_fail *f)
{
	snprintf(v->err, sizeof(v->err), "%s", text ? text : "");
	rf_py_set(&v->exc, exc);
	if (f)
		f->refs++;
	rf_py_fail_put(v->fail);
	v->fail = f;
}

/* Drop what an op holds (under the GIL). */
void rf_py_op_free(struct rf_py_op *op)
{
	rf_py_engine *s = op->e;

	if (op->listed) {
		if (op->prev)
			op->prev->next = op->next;
		else
			s->ops = op->next;
		if (op->next)
			op->next->prev = op->prev;
	}
	Py_XDECREF(op->fn);
	Py_XDECREF(op->reads);
	Py_XDECREF(op->writes);
	Py_XDECREF(op->exc);
	free(op);
}

int rf_py_op_run(void *ctx)   /* on a worker thread */
{
	struct rf_py_op *op = ctx;
	PyGILState_STATE g;
	PyObject *r = NULL;
	int ret = 0;

	/* left at the interpreter's exit (another thread's Engine): no Python, no GIL */
	if (__atomic_load_n(&op->e->abandoned, __ATOMIC_ACQUIRE))
		return -ECANCELED;
	g = PyGILState_Ensure();
	if (op->e->cleared) {    /* its Engine collected: fn may have been cleared */
		snprintf(op->err, sizeof(op->err), "not run: its Engine was collected with "
			 "it pending");
		ret = -ECANCELED;
	} else if (!(r = PyObject_CallNoArgs(op->fn))) {
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

/* On the reactor thread, after the engine settled the op's variables: the Vars it
 * writes take the same poison. The Vars' state mirrors the engine's here (each
 * changes only in the done callback of an op that writes it, in engine order), so
 * the variable that held the poison -- one it writes or, if none, one it reads, as
 * the engine looks -- is found on them. */
void rf_py_op_done(void *ctx, int status)
{
	struct rf_py_op *op = ctx;
	rf_py_engine *s = op->e;
	PyGILState_STATE g = PyGILState_Ensure();
	rf_py_var *src = NULL;
	const char *why = NULL;

	if (status >= 0)
		goto out;
	s->nfailed++;
	for (Py_ssize_t i = 0; !src && i < PyTuple_Size(op->writes); i++) {
		rf_py_var *w = (rf_py_var *)PyTuple_GetItem(op->writes, i);
		if (w->err[0])
			src = w, why = "a variable it writes";
	}
	for (Py_ssize_t i = 0; !src && i < PyTuple_Size(op->reads); i++) {
		rf_py_var *r = (rf_py_var *)PyTuple_GetItem(op->reads, i);
		if (r->err[0])
			src = r, why = "a variable it reads";
	}
	if (!src) {
		/* failed itself (its inputs clean): a new failure, listed for wait_all */
		struct rf_py_fail *f = calloc(1, sizeof(*f)); /* NULL: the Vars only */
		const char *text = op->err[0] ? op->err : strerror(-status);
		if (f && s->nfails >= RF_PY_MAX_FAILS) {
			free(f);        /* a program that never calls wait_all: bounded */
			f = NULL;
			s->unkept++;
		}
		if (f) {
			snprintf(f->text, sizeof(f->text), "%s", text);
			f->refs = 1;
			f->listed = 1;
			f->exc = op->exc;
			Py_XINCREF(f->exc);
			s->nfails++;
			f->prev = s->fails_tail;
			if (s->fails_tail)
				s->fails_tail->next = f;
			else
				s->fails = f;
			s->fails_tail = f;
		}
		for (Py_ssize_t i = 0; i < PyTuple_Size(op->writes); i++)
			rf_py_var_poison((rf_py_var *)PyTuple_GetItem(op->writes, i), text,
					 op->exc, f);
	} else {
		/* skipped (had it run, chained, its result is discarded): the Vars it writes
		 * that were clean take src's failure, with their own text */
		char msg[512];
		snprintf(msg, sizeof(msg), "skipped: %s ('%.100s') was poisoned by a failed op (%.300s; "
			 "Var.clear_error() clears it)", why, rf_var_name(src->v),
			 src->fail ? src->fail->text : src->err);
		for (Py_ssize_t i = 0; i < PyTuple_Size(op->writes); i++) {
			rf_py_var *v = (rf_py_var *)PyTuple_GetItem(op->writes, i);
			if (!v->err[0])  /* a poisoned one keeps its first cause */
				rf_py_var_poison(v, msg, src->exc, src->fail);
		}
	}
out:
	rf_py_op_free(op);
	PyGILState_Release(g);
}

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
	rf_py_fail_put(v->fail);
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

static int rf_py_clear_run(void *ctx)   /* inline: the reactor thread, no GIL */
{
	(void)ctx;
	return 0;
}

/* The clear ran (in engine order): the Var's poison goes with the engine's, and its
 * failure is no longer one for wait_all. */
static void rf_py_clear_done(void *ctx, int status)
{
	struct rf_py_op *op = ctx;
	PyGILState_STATE g = PyGILState_Ensure();
	rf_py_var *v = (rf_py_var *)PyTuple_GetItem(op->writes, 0);

	if (status >= 0) {
		rf_py_fail_unlist(v->e, v->fail);
		rf_py_var_poison(v, NULL, NULL, NULL);
	}
	rf_py_op_free(op);
	PyGILState_Release(g);
}

/* Clear the poison a failed op left, as the engine's rf_var_clear_error does: an op
 * pushed after the ops on it that runs even if it is poisoned and clears it (always
 * and overwrite), whose done callback clears the Var's record at that same point --
 * not now, while an op pushed before may still poison it. Ops pushed after run again. */
static PyObject *rf_py_var_clear_error(PyObject *self, PyObject *unused)
{
	rf_py_var *v = (rf_py_var *)self;
	struct rf_py_state *st = rf_py_state_of(self);
	rf_py_engine *s = v->e;
	struct rf_op_desc d = { 0 };
	struct rf_py_op *op;
	(void)unused;

	if (!s || !s->eng || !v->v)
		return rf_py_raise(st, -EBADF, "Var.clear_error: its Engine is closed");
	if (!rf_py_same_thread(st, s->owner, s->pid))
		return NULL;
	/* an op without a callable: what it holds is the Var (its writes) */
	if (!(op = calloc(1, sizeof(*op))))
		return PyErr_NoMemory();
	if (!(op->writes = PyTuple_Pack(1, self))) {
		free(op);
		return NULL;
	}
	d.fn = rf_py_clear_run;
	d.done = rf_py_clear_done;
	d.writes = &v->v;
	d.nwrites = 1;
	d.name = "clear_error";
	d.flags = RF_OP_ALWAYS | RF_OP_OVERWRITE;
	if (rf_py_push_op(s, &d, op) < 0)
		return NULL;
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
