/* core/var.c -- a variable's record: creation, name, poison, freeing. Deleting and
 * clearing a variable are pushed ops (push.c). */
#include <errno.h>
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
	v = calloc(1, sizeof(*v));
	if (!v)
		return rf__fail(-ENOMEM, "variable %s: out of memory", name ? name : "");
	v->eng = e;
	if (name && !(v->name = strdup(name))) {
		free(v);
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
	return v->name ? v->name : "(unnamed)";
}

int rf_var_error(const struct rf_var *v, const char **op_name)
{
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
	free(v);
}

/* At the engine's end (nothing queued): the variables never destroyed. */
void rf__vars_free(struct rf_engine *e)
{
	while (e->vars)
		rf__var_free(e->vars);
}
