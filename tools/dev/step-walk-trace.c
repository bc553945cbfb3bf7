/* tools/dev/step-walk-trace.c -- the tracer behind tools/dev/step-walk: a shared object
 * linked into a build compiled with -finstrument-functions. It counts call edges
 * (caller, callee) in two tables and writes them at exit:
 *
 *   call    the calls made on the thread of the marked function's Nth call, while that
 *           call is on its stack: what the step's own code does (pushes, checks);
 *   window  the calls of every thread from the Nth entry of the marked function to the
 *           next: the step as it runs (worker streams, completions, the reactor, and
 *           the loader reading ahead in the meantime).
 *
 * Environment: RF_WALK_OBJ (a substring of the marked function's object path),
 * RF_WALK_OFF (its hex offset there, from nm), RF_WALK_NTH (default 2), RF_WALK_OUT
 * (the output file: lines "table caller-object caller-offset callee-object
 * callee-offset count"). A developer's tool: not built by meson, not installed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOI __attribute__((no_instrument_function))
#define NT (1u << 16)
#define DEPTH 4096

struct edge { void *a, *b; unsigned long n; };
static struct edge tab[2][NT];
static atomic_flag lk = ATOMIC_FLAG_INIT;
static atomic_int win;
static void *mark;
static int nth, seen;
static __thread void *stk[DEPTH];
static __thread int depth, in_call;

NOI static void add(int t, void *a, void *b)
{
	unsigned h = (unsigned)(((uintptr_t)a * 31 + (uintptr_t)b) >> 3) & (NT - 1);

	while (atomic_flag_test_and_set(&lk))
		;
	while (tab[t][h].n && !(tab[t][h].a == a && tab[t][h].b == b))
		h = (h + 1) & (NT - 1);
	tab[t][h].a = a;
	tab[t][h].b = b;
	tab[t][h].n++;
	atomic_flag_clear(&lk);
}

NOI static void find_mark(void *fn)
{
	const char *obj = getenv("RF_WALK_OBJ"), *off = getenv("RF_WALK_OFF");
	Dl_info di;

	if (!nth)
		nth = getenv("RF_WALK_NTH") ? atoi(getenv("RF_WALK_NTH")) : 2;
	if (obj && off && dladdr(fn, &di) && strstr(di.dli_fname, obj))
		mark = (char *)di.dli_fbase + strtoul(off, NULL, 16);
}

NOI void __cyg_profile_func_enter(void *fn, void *site)
{
	void *caller = depth > 0 && depth <= DEPTH ? stk[depth - 1] : NULL;

	(void)site;
	if (!mark)
		find_mark(fn);
	if (depth < DEPTH)
		stk[depth] = fn;
	depth++;
	if (fn == mark) {
		int k = __atomic_add_fetch(&seen, 1, __ATOMIC_SEQ_CST);
		atomic_store(&win, k == nth);
		if (k == nth)
			in_call = depth;
	}
	if (in_call)
		add(0, caller, fn);
	if (atomic_load(&win))
		add(1, caller, fn);
}

NOI void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)fn;
	(void)site;
	if (in_call == depth)
		in_call = 0;
	depth--;
}

NOI __attribute__((destructor)) static void dump(void)
{
	static const char *const name[2] = { "call", "window" };
	const char *p = getenv("RF_WALK_OUT");
	FILE *f = p ? fopen(p, "w") : NULL;

	if (!f)
		return;
	for (int t = 0; t < 2; t++)
		for (unsigned i = 0; i < NT; i++) {
			struct edge *e = &tab[t][i];
			Dl_info da = { 0 }, db = { 0 };
			if (!e->n || !dladdr(e->b, &db))
				continue;
			if (!e->a || !dladdr(e->a, &da))
				da.dli_fname = "-", da.dli_fbase = e->a;
			fprintf(f, "%s %s %lx %s %lx %lu\n", name[t], da.dli_fname,
				(unsigned long)((char *)e->a - (char *)da.dli_fbase), db.dli_fname,
				(unsigned long)((char *)e->b - (char *)db.dli_fbase), e->n);
		}
	fclose(f);
}
