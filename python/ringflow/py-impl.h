/* python/ringflow/py-impl.h -- what the files of the `ringflow._ringflow` extension
 * share: the module state, the Loader's and the Tensor's structs, the error and
 * thread helpers (module.c) and each file's type spec.
 *
 * The extension is built on CPython's stable ABI (3.11+: one build serves every later
 * interpreter). Its types are heap types made per module (PyType_FromModuleAndSpec,
 * multi-phase initialisation, PEP 489), and none of them is subclassable, so an
 * object's own type is always the one its module made: a method finds the module
 * state with PyType_GetModuleState(Py_TYPE(self)). (PyType_GetModuleByDef, which
 * would also serve subclasses, is in the limited API only from 3.13.)
 *
 * Errors are ringflow.Error (an OSError: errno, and the C text -- file, offset, URL --
 * as its message). */
#ifndef RINGFLOW_PY_IMPL_H
#define RINGFLOW_PY_IMPL_H

#define Py_LIMITED_API 0x030b0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <ringflow/ring.h>
#include <ringflow/engine.h>
#include <ringflow/device.h>
#include <ringflow/tensor.h>
#include <ringflow/dataset.h>
#include <ringflow/loader.h>

struct rf_py_engine_s;

/* The module's state: its exception and its types (strong references), and the
 * Engines that are open (engine.c: closed at the interpreter's exit). */
struct rf_py_state {
	PyObject *error;                 /* ringflow.Error */
	PyObject *warning;               /* ringflow.Warning (a RuntimeWarning) */
	PyTypeObject *loader_type, *tensor_type, *engine_type, *var_type;
	struct rf_py_engine_s *engines;  /* open: listed by init, unlisted by closing */
	int exiting;                     /* _exit_engines ran: the interpreter is ending */
};

/* The state of the module that made self's type (a type of this extension). */
static inline struct rf_py_state *rf_py_state_of(PyObject *self)
{
	return PyType_GetModuleState(Py_TYPE(self));
}

/* ---- module.c: errors and threads ------------------------------------------------ */

/* Raise ringflow.Error(errno, text) for a failed call (ret < 0; else EIO), with cause
 * (when not NULL) as its __cause__. Returns NULL. */
PyObject *rf_py_raise_from(struct rf_py_state *st, int ret, const char *text,
			   PyObject *cause);
#define rf_py_raise(st, ret, text) rf_py_raise_from((st), (ret), (text), NULL)
/* 1 when called on the thread that made the object (owner), in the process that made
 * it (pid); else 0 with the exception that says so. */
int rf_py_same_thread(struct rf_py_state *st, pthread_t owner, pid_t pid);
/* TypeError "WHAT: expected EXPECTED, got TYPE REPR" (o's type name and repr). */
void rf_py_type_error(const char *what, const char *expected, PyObject *o);
/* An integer argument o in [lo, hi] into *out, as the package's Python half checks
 * one (ringflow._int): never a bool, float or str taken for an int (TypeError), out
 * of range a ValueError (past 64 bits an OverflowError), each naming what ("Engine:
 * workers") and the value as given. 0, or -1 with the exception set. */
int rf_py_uint_arg(PyObject *o, const char *what, unsigned long long lo,
		   unsigned long long hi, unsigned long long *out);
/* The library's warnings queued since the last call (rf_log_set, any thread), given to
 * Python's warnings module as ringflow.Warning. GIL held. An exception already set is
 * kept (the warnings then cannot fail); else 0, or -1 when a filter made a warning an
 * error (its exception set). */
int rf_py_warn_pending(struct rf_py_state *st);
/* The same after a call that has taken something it must hand back (a batch): a
 * warning a filter makes an error is not raised now but put back, first in the queue,
 * and the next call raises it before it takes anything -- nothing is lost. */
void rf_py_warn_keep(struct rf_py_state *st);
/* The engine's interrupt (rf_engine_set_interrupt): a signal Python handles. */
int rf_py_interrupted(void *arg);
/* Let go on another thread than the owner's: 1 when nothing may be freed (the
 * object is leaked, with a ResourceWarning naming what). */
int rf_py_foreign_drop(PyObject *self, pthread_t owner, pid_t pid, int live,
		       const char *what);

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

/* ---- loader.c ----------------------------------------------------------------------- */

#define RF_PY_MAX_SLOTS 256
/* The last epoch a Loader reads (an int64, as torch and JSON keep it): its end does
 * not advance to another, so every state_dict() it gives is one load_state_dict()
 * takes. (A long: the module adds it as an int constant, on LP64 Linux.) */
#define RF_PY_MAX_EPOCH 9223372036854775807L

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
	int past_last;                   /* epoch RF_PY_MAX_EPOCH was read to its end */
	int reread;                      /* a batch's next() failed: not handed out, read
					  * again by the next call (a seek back to it) */
	unsigned busy;                   /* in next() or seek(), whose waits run signal
					  * handlers: a handler's close() must not free it */
	/* pushed, not yet handed out: a ring. Each entry, as each Tensor, holds a
	 * reference to its slot in the C loader (rf_loader_ref): the loader passes over
	 * slots with references */
	struct rf_batch q[RF_PY_MAX_SLOTS];
	unsigned qhead, qlen;
} rf_py_loader;

/* One more (d 1: rf_loader_ref, on the owner's thread) or one less (d -1:
 * rf_loader_unref, on any thread) reference to a slot's memory, under the GIL.
 * 0, or -errno with the message in rf_last_error() (-EBADF: closed, no message). */
int rf_py_ref(rf_py_loader *s, unsigned slot, int d);

extern PyType_Spec rf_py_loader_spec;

/* ---- tensor.c ----------------------------------------------------------------------- */

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

/* A Tensor of batch b's images (labels 0) or labels (1), holding its slot. */
PyObject *rf_py_tensor_new(rf_py_loader *s, const struct rf_batch *b, int labels);

extern PyType_Spec rf_py_tensor_spec;

/* ---- engine.c: ringflow.Engine; var.c: ringflow.Var and the failures ------------ */

/* failures kept for wait_all at once (each holds its exception and traceback): past
 * this, a failure only poisons its Vars and is counted (rf_py_engine.unkept) */
#define RF_PY_MAX_FAILS 64

/* A failure: an op whose callable raised. The Vars it poisoned (and those skipped for
 * that poison) point at it; the Engine lists it from the failure until a clear_error
 * clears it or wait_all reports it. Plain C, counted under the GIL: the exception is
 * owned by the record only while it is listed (the Engine traverses it), each Var
 * holds its own reference. */
struct rf_py_fail {
	unsigned refs;
	int listed;
	struct rf_py_fail *prev, *next;
	PyObject *exc;                   /* while listed (NULL: none) */
	char text[512];
};

typedef struct rf_py_engine_s {
	PyObject_HEAD
	pthread_t owner;
	pid_t pid;                 /* the process that made it */
	struct rf_ring *ring;
	struct rf_engine *eng;
	struct rf_py_engine_s *lprev, *lnext;  /* on the module state's engines */
	int live;                        /* listed there */
	struct rf_stream **ws;
	unsigned nws, next;
	struct rf_py_fail *fails, *fails_tail; /* since the last wait_all, not cleared */
	unsigned long nfailed;           /* ops failed or skipped since the last wait_all */
	unsigned nfails;                 /* listed in fails (at most RF_PY_MAX_FAILS) */
	unsigned long unkept;            /* failures not listed: RF_PY_MAX_FAILS were */
	int closed;                      /* close() ran: every call is EBADF */
	unsigned busy;                   /* in push or a wait (a signal handler's close()
					  * would free the engine under it) */
	struct rf_py_op *ops;            /* pushed, not yet done (traversed: what they
					  * hold keeps the Engine, through their Vars) */
	int cleared;                     /* collected from tp_clear: callables not yet
					  * started are not called (they may be cleared) */
	int abandoned;                   /* another thread's at the interpreter's exit:
					  * its workers call no callable more (atomic:
					  * read before asking for the GIL) */
} rf_py_engine;

/* Engine and Var are collected as cycles: an exception kept keeps its traceback, whose
 * frames may hold the Var or the Engine it is kept on. */
typedef struct {
	PyObject_HEAD
	rf_py_engine *e;                 /* strong reference */
	struct rf_var *v;                /* freed with the engine: used only while it lives */
	PyObject *name;                  /* its name (a str), which outlives the engine */
	/* the variable's poison as the C engine holds it, set and cleared in engine
	 * order (by the done callbacks of the ops that write it): */
	char err[512];                   /* what wait() says ("": clean) */
	PyObject *exc;                   /* the failure's exception (NULL: none) */
	struct rf_py_fail *fail;         /* the failure (NULL: none) */
} rf_py_var;

/* A pushed callable (NULL: a clear_error) and the Vars it reads and writes (each a
 * tuple of Vars), listed on its Engine from before the push until it is freed. */
struct rf_py_op {
	rf_py_engine *e;                 /* borrowed: the engine outlives its ops */
	struct rf_py_op *prev, *next;    /* on e->ops while listed */
	int listed;
	PyObject *fn;
	PyObject *reads, *writes;        /* tuples of Vars: writes are told the exception */
	char err[512];
	PyObject *exc;                   /* the exception fn raised (strong) */
};

/* var.c: f off the Engine's list of failures (wait_all no longer raises it). */
void rf_py_fail_unlist(rf_py_engine *s, struct rf_py_fail *f);
/* var.c: a pushed op's function (on a worker: calls fn under the GIL), its done
 * callback (on the reactor: the Vars it writes take its failure or their inputs'
 * poison) and what frees it (under the GIL, off its Engine's list; done frees it
 * itself). */
int rf_py_op_run(void *ctx);
void rf_py_op_done(void *ctx, int status);
void rf_py_op_free(struct rf_py_op *op);
/* engine.c: the module's atexit hook (registered by its exec): every open Engine of
 * this thread is closed -- what was pushed runs -- while its workers can still take
 * the GIL; those of other threads are left (the process ends them). */
PyObject *rf_py_exit_engines(PyObject *mod, PyObject *unused);
/* engine.c: push d, whose ctx is op (listed on s first, freed if the push fails),
 * with the GIL released and the engine marked busy. 0, or NULL-returning -1 with
 * the exception set. */
int rf_py_push_op(rf_py_engine *s, struct rf_op_desc *d, struct rf_py_op *op);

extern PyType_Spec rf_py_engine_spec, rf_py_var_spec;

#endif
