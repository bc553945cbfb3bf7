/* core/var.c -- a variable's record: creation, name, poison, freeing. Deleting and
 * clearing a variable are pushed ops (push.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-impl.h"
#include "rf-internal.h"

int rf_var_create(struct rf_engine *e, const char *name, struct rf_var **out)
{
	struct rf_var *v;

	if (!e || !out)
		return rf__fail(-EINVAL, "rf_var_create: %s is NULL", e ? "out" : "e");
	*out = NULL;
	int ret = rf__push_thread(e, "rf_var_create"); /* the engine's list of them */
	if (ret < 0)
		return ret;
	v = rf__slab_get(&e->var_slab);
	if (!v)
		return rf__fail(-ENOMEM, "variable %s: out of memory", name ? name : "");
	memset(v, 0, sizeof(*v));
	v->eng = e;
	if (name && !(v->name = strdup(name))) {
		rf__slab_put(&e->var_slab, v);
		return rf__fail(-ENOMEM, "variable %s: out of memory", name);
	}
	v->next = e->vars;
	if (e->vars)
		e->vars->prev = v;
	e->vars = v;
	*out = v;
	return 0;
}

const char *rf_var_name(const struct rf_var *v)
{
	if (!v)
		return "(null)";
	return v->name ? v->name : "(unnamed)";
}

int rf_var_error(const struct rf_var *v, const char **op_name)
{
	if (!v) {
		if (op_name)
			*op_name = NULL;
		return rf__fail(-EINVAL, "rf_var_error: v is NULL");
	}
	if (op_name)
		*op_name = v->err_op;
	return v->err;
}

/* After its deletion op completed. */
void rf__var_free(struct rf_var *v)
{
	if (v->err)
		v->eng->npoisoned--;
	rf__trace_var_free(v);
	if (v->prev)
		v->prev->next = v->next;
	else
		v->eng->vars = v->next;
	if (v->next)
		v->next->prev = v->prev;
	free(v->name);
	rf__slab_put(&v->eng->var_slab, v);
}

/* At the engine's end (nothing queued): the variables never destroyed. */
void rf__vars_free(struct rf_engine *e)
{
	while (e->vars)
		rf__var_free(e->vars);
}

/* ---- deleting a variable: an op that writes it last, then frees it ---- */

/* After its done callback: the variable goes. */
static void rf__delete_finished(struct rf_engine *e, struct rf_op *op)
{
	(void)e;
	rf__var_free(op->arg.var);
}

const struct rf__opkind rf__kind_delete = {
	.name = "delete", .counted = 1, .traced = 1, .no_fn = 1,
	.finished = rf__delete_finished,
};

/* The deletion's function: the caller's free_fn, kept in the variable (which lives
 * until the deletion has finished), so a deletion allocates nothing. */
static int rf__del_run(void *ctx)
{
	struct rf_var *v = ctx;

	if (v->del_fn)
		v->del_fn(v->del_arg);
	return 0;
}

int rf_var_destroy(struct rf_engine *e, struct rf_var *v, void (*free_fn)(void *), void *arg,
		  struct rf_stream *stream)
{
	int ret;

	if (!v || v->eng != e)
		return rf__fail(-EINVAL, "rf_var_destroy: %s", v ? "a variable of another engine"
								: "v is NULL");
	if (v->deleting) /* the first deletion frees it: a second would free it twice */
		return rf__fail(-EINVAL, "rf_var_destroy %s: already being destroyed",
				rf_var_name(v));
	/* named as this call (the push's check would say rf_engine_push) */
	if (stream && (ret = rf__check_stream(e, stream, "rf_var_destroy", rf_var_name(v), 0)) < 0)
		return ret;
	v->del_fn = free_fn;
	v->del_arg = arg;
	v->deleting = 1;
	return rf__var_delete_push(e, v, stream);
}

int rf__var_delete_push(struct rf_engine *e, struct rf_var *v, struct rf_stream *stream)
{
	struct rf_op_desc d = { 0 };

	d.fn = rf__del_run;
	d.ctx = v;
	d.writes = &v;
	d.nwrites = 1;
	d.stream = stream;
	d.name = "delete";
	d.flags = RF_OP_ALWAYS;
	int ret = rf__push_as(e, &d, &rf__kind_delete, v, "rf_var_destroy");
	if (ret < 0) {   /* undone: the variable stays */
		v->del_fn = NULL;
		v->del_arg = NULL;
		v->deleting = 0;
	}
	return ret;
}

