/* core/wait.c -- the user's waits: for a variable, for everything (reporting the
 * first error), for idleness. A wait that would deadlock is refused. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine-impl.h"
#include "rf-internal.h"

/* -EDEADLK (and the message in rf_last_error()) if waiting now would deadlock. */
int rf__wait_refused(struct rf_engine *e, const char *what, int capture_ok)
{
	if (!e)
		return rf__fail(-EINVAL, "%s: e is NULL", what);
	if (rf__gettid() != e->owner_tid)
		return rf__fail(-EDEADLK, "%s called from a thread other than the engine's "
				"reactor thread (from inside a worker-stream op?): refused, it "
				"would deadlock; push a dependent op instead", what);
	if (e->cap && !capture_ok)
		return rf__fail(-EBUSY, "%s while a capture is recording: refused (the ops "
				"it records have not run; end the capture and launch the "
				"graph first)", what);
	if (rf__in_callback(e))
		return rf__fail(-EDEADLK, "%s called from inside an engine op, done callback "
				"or ring callback: refused (it would deadlock: the op cannot "
				"finish while it waits)", what);
	return 0;
}

int rf__admin_refused(struct rf_engine *e, const char *what)
{
	if (!e)
		return rf__fail(-EINVAL, "%s: e is NULL", what);
	if (rf__gettid() != e->owner_tid)
		return rf__fail(-EPERM, "%s called from a thread other than the engine's reactor "
				"thread: refused", what);
	if (rf__in_callback(e))
		return rf__fail(-EBUSY, "%s called from inside an engine op, done callback or "
				"ring callback: refused (ops call rf_engine_push only)", what);
	return 0;
}

int rf_engine_may_wait(struct rf_engine *e, const char *what)
{
	if (!e)
		return rf__fail(-EINVAL, "%s: no engine (NULL)", what ? what : "rf_engine_may_wait");
	return rf__wait_refused(e, what ? what : "rf_engine_may_wait", 1);
}

/* A wait's waiter learns its variable's poison at the wait's turn. */
static int rf__wait_status(const struct rf_op *op, int status)
{
	(void)status;
	return op->arg.var->err;
}

const struct rf__opkind rf__kind_wait = {
	.name = "wait_var", .no_fn = 1, .wait_status = rf__wait_status,
};

/* A no-op read at the end of v's queue: it completes after every earlier write, and
 * reports v's poison at that point. It always runs, even if v is poisoned. */
static int rf__push_wait_op(struct rf_engine *e, struct rf_var *v, struct rf__waiter *w)
{
	struct rf_op_desc d = { 0 };

	d.reads = &v;
	d.nreads = 1;
	d.name = "wait_var";
	d.flags = RF_OP_ALWAYS;
	return rf__push_op(e, &d, &rf__kind_wait, v, w);
}

/* An op's status a wait returns (ret < 0): where the failure came during this wait
 * (the caller knows) and nothing on this thread said why since it began (an op on
 * another thread, whose message is that thread's), the message names the variable
 * (NULL: the wait for all) and the op, not what an earlier, unrelated call left. A
 * failure from before the wait keeps whatever it said then. */
static int rf__wait_says(int ret, unsigned gen0, const char *fn, const struct rf_var *v,
			 const char *op)
{
	if (ret >= 0 || rf__error_gen() != gen0)
		return ret;
	return rf__fail(ret, "%s%s%s: %s %s%s%s failed (%d: %s)", fn, v ? " " : "",
			v ? rf_var_name(v) : "", v ? "poisoned:" : "the first error since the "
			"last wait_all:", op ? "op '" : "an op", op ? op : "", op ? "'" : "", ret,
			strerror(-ret));
}

int rf_engine_wait_var(struct rf_engine *e, struct rf_var *v)
{
	struct rf__waiter *w;
	int ret, err = 0, was;
	unsigned gen0 = rf__error_gen();

	if (!v || v->eng != e)
		return rf__fail(-EINVAL, "rf_engine_wait_var: %s", v ? "a variable of another "
								     "engine" : "v is NULL");
	if ((ret = rf__wait_refused(e, "rf_engine_wait_var", 0)) < 0)
		return ret;
	if (v->deleting) /* its deletion frees it when it runs: the wait would outlive it */
		return rf__fail(-EINVAL, "rf_engine_wait_var %s: being destroyed (rf_var_destroy "
				"was called): wait for it before destroying it", rf_var_name(v));
	if (!v->nqueued)
		return v->err;  /* from before the wait: as it was said then */
	if (!(w = calloc(1, sizeof(*w))))
		return rf__fail(-ENOMEM, "rf_engine_wait_var: out of memory");
	if ((ret = rf__push_wait_op(e, v, w)) < 0) {
		free(w);
		return ret;
	}
	was = v->err;
	ret = rf__wait_waiter(e, w, &err);
	return ret < 0 ? ret : was ? err : rf__wait_says(err, gen0, "rf_engine_wait_var", v,
							   v->err_op);
}

int rf_engine_wait_idle(struct rf_engine *e)
{
	int ret;

	if ((ret = rf__wait_refused(e, "rf_engine_wait_idle", 1)) < 0)
		return ret;
	return rf__wait_idle(e, 0);
}

int rf_engine_wait_all(struct rf_engine *e)
{
	int ret;

	unsigned gen0 = rf__error_gen();
	int before;

	if ((ret = rf__wait_refused(e, "rf_engine_wait_all", 0)) < 0)
		return ret;
	before = e->first_error;
	if ((ret = rf__wait_idle(e, 1)) < 0)
		return ret;
	ret = before ? before : rf__wait_says(e->first_error, gen0, "rf_engine_wait_all", NULL,
					      e->first_error_op);
	e->first_error = 0;
	e->first_error_op = NULL;
	return ret;
}
