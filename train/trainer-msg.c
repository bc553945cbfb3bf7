/* train/trainer-msg.c -- the trainer's error messages: the running call's, and the last
 * failing call's (rf_trainer_last_error, rf_last_error). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "trainer-impl.h"

void rf__trainer_msg(struct rf_trainer *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->msg, sizeof(t->msg), fmt, ap);
	va_end(ap);
}

int rf__trainer_end(struct rf_trainer *t, int ret)
{
	const char *ce = t->comm ? rf_comm_last_error(t->comm) : "";

	if (ret >= 0)
		return ret;
	/* a failed collective poisons what follows it: its own message says which */
	if (ce[0] && !strstr(t->msg, ce))
		return rf__fail_into(t->last_error, sizeof(t->last_error), ret, "%s; comm: %s",
				     t->msg, ce);
	return rf__fail_into(t->last_error, sizeof(t->last_error), ret, "%s", t->msg);
}

const char *rf__loader_sep(const struct rf_loader *ld)
{
	return rf_loader_last_error(ld)[0] ? "; loader: " : "";
}

const char *rf_trainer_last_error(const struct rf_trainer *t)
{
	return t->last_error;
}
