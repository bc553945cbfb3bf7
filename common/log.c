/* common/log.c -- the thread's last error and the log callback. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "rf-internal.h"

#define RF__ERR_LEN 512

static _Thread_local char rf__last[RF__ERR_LEN];
static _Thread_local unsigned rf__last_gen;
static _Atomic(rf_log_fn) rf__log_fn;
static void *_Atomic rf__log_user;

void rf_log_set(rf_log_fn fn, void *user)
{
	atomic_store(&rf__log_user, user);
	atomic_store(&rf__log_fn, fn);
}

const char *rf_last_error(void)
{
	return rf__last;
}

/* Formatted apart, then copied: an argument may be rf_last_error() itself (a caller
 * that wraps the message below it), which vsnprintf into the same buffer would read
 * while overwriting. */
static int rf__vfail(int code, const char *fmt, va_list ap)
{
	char buf[RF__ERR_LEN];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	memcpy(rf__last, buf, sizeof(buf));
	rf__last_gen++;
	return code;
}

unsigned rf__error_gen(void)
{
	return rf__last_gen;
}

int rf__fail(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rf__vfail(code, fmt, ap);
	va_end(ap);
	return code;
}

int rf__fail_under(int code, const char *fmt, ...)
{
	char inner[RF__ERR_LEN];
	size_t n;
	va_list ap;

	snprintf(inner, sizeof(inner), "%s", rf__last);
	va_start(ap, fmt);
	rf__vfail(code, fmt, ap);
	va_end(ap);
	n = strlen(rf__last);
	if (snprintf(rf__last + n, sizeof(rf__last) - n, ": %s", inner) >= (int)(sizeof(rf__last) - n))
		memcpy(rf__last + sizeof(rf__last) - 4, "...", 4); /* cut short: say so */
	return code;
}

int rf__fail_into(char *buf, size_t len, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rf__vfail(code, fmt, ap);
	va_end(ap);
	if (buf && len)
		snprintf(buf, len, "%s", rf__last);
	return code;
}

void rf__log(enum rf_log_level level, const char *fmt, ...)
{
	rf_log_fn fn = atomic_load(&rf__log_fn);
	char msg[RF__ERR_LEN];
	va_list ap;

	if (!fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fn(level, msg, atomic_load(&rf__log_user));
}
