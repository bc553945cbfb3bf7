/* core/var.c -- a variable's record: creation, name, poison, freeing. Deleting and
 * clearing a variable are pushed ops (push.c). */
#include <stdlib.h>
#include <string.h>

#include "engine-impl.h"

struct rf_var *rf_var_new(struct rf_engine *e, const char *name)
{
	struct rf_var *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->eng = e;
	if (name && !(v->name = strdup(name))) {
		free(v);
		return NULL;
	}
	return v;
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
	rf__trace_var_free(v);
	free(v->name);
	free(v);
}
