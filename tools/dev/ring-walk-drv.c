/* tools/dev/ring-walk-drv.c -- the driver tools/dev/ring-walk builds with ring/ and
 * common/ compiled -finstrument-functions: one request of a kind (read, write, short:
 * a read past the end of the file, retried; timeout) after an untraced warm-up, every
 * function entry (+address) and exit (-address) from its push until its callback has
 * run, printed one per line for ring-walk's analysis. Uses ring.h's calls only, the
 * same at every commit measured. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ring.h"

/* the trace: every entry (+addr) and exit (-addr) while armed */
static int armed;
static long trace[1 << 16];
static int ntrace;
void __cyg_profile_func_enter(void *fn, void *site) __attribute__((no_instrument_function));
void __cyg_profile_func_exit(void *fn, void *site) __attribute__((no_instrument_function));
void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)site;
	if (armed && ntrace < (1 << 16))
		trace[ntrace++] = (long)fn;
}
void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)site;
	if (armed && ntrace < (1 << 16))
		trace[ntrace++] = -(long)fn;
}

static int done;

static void cb(void *d, int64_t res)
{
	(void)d;
	(void)res;
	done++;
}

static int pred(void *a)
{
	return done >= *(int *)a;
}

int main(int argc, char **argv)
{
	struct rf_ring *r;
	char buf[8192], path[] = "/tmp/ring-walk-XXXXXX";
	int fd = mkstemp(path), want;
	const char *what = argc > 1 ? argv[1] : "read";

	memset(buf, 7, sizeof(buf));
	if (fd < 0 || write(fd, buf, 8192) != 8192)
		return 1;
	if (rf_ring_create(&r, NULL) < 0)
		return 1;
	/* one warm-up of each, untraced */
	rf_ring_read(r, fd, buf, 4096, 0, 0, cb, NULL, NULL);
	rf_ring_timeout(r, 1000, cb, NULL, NULL);
	want = 2;
	rf_ring_run_until(r, pred, &want, 0);
	done = 0;
	armed = 1;
	if (!strcmp(what, "read"))
		rf_ring_read(r, fd, buf, 4096, 0, 0, cb, NULL, NULL);
	else if (!strcmp(what, "write"))
		rf_ring_write(r, fd, buf, 4096, 0, 0, cb, NULL, NULL);
	else if (!strcmp(what, "short"))
		rf_ring_read(r, fd, buf, 8192, 4096, 0, cb, NULL, NULL);
	else
		rf_ring_timeout(r, 1000, cb, NULL, NULL);
	want = 1;
	rf_ring_run_until(r, pred, &want, 0);
	armed = 0;
	for (int i = 0; i < ntrace; i++)
		printf("%ld\n", trace[i]);
	rf_ring_destroy(r);
	unlink(path);
	return 0;
}
