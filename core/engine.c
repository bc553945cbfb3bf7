/* core/engine.c -- an engine's lifecycle: create (options, environment), destroy,
 * getters and stats, starting and stopping a trace. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph-impl.h"
#include "rf-internal.h"

/* Options and environment: the cap, synchronous mode. */
static void rf__engine_configure(struct rf_engine *e, const struct rf_engine_opts *opts)
{
	const char *env;

	e->max_inflight = opts && opts->max_inflight ? opts->max_inflight : 4096;
	e->max_bytes = opts ? opts->max_bytes : 0;
	e->sync = opts ? opts->sync : -1;
	if (e->sync < 0) {
		env = getenv("RF_ENGINE_SYNC");
		e->sync = env && *env && strcmp(env, "0") != 0;
	}
}

int rf_engine_create(struct rf_engine **out, struct rf_ring *ring, const struct rf_engine_opts *opts)
{
	struct rf_engine *e;
	const char *trace_path;
	int ret;

	if (!out || !ring)
		return rf__fail(-EINVAL, "rf_engine_create: %s is NULL", out ? "ring" : "out");
	*out = NULL;
	if (opts && (opts->sync < -1 || opts->sync > 1))
		return rf__fail(-EINVAL, "rf_engine_create: opts->sync = %d, expected 1 (on), 0 "
				"(off) or -1 (RF_ENGINE_SYNC)", opts->sync);
	e = calloc(1, sizeof(*e));
	if (!e)
		return rf__fail(-ENOMEM, "rf_engine_create: out of memory");
	e->ring = ring;
	rf__slab_init(&e->op_slab, sizeof(struct rf_op), 0);
	rf__slab_init(&e->ent_slab, RF__ENT_BLOCK * sizeof(struct rf__entry), 1);
	rf__slab_init(&e->var_slab, sizeof(struct rf_var), 1);
	/* groups never go back to it: the queue's reserve list keeps them (queue.c) */
	rf__slab_init(&e->group_slab, sizeof(struct rf__group), 0);
	/* the first records' pages faulted in here, not under the first pushes (an
	 * engine that cannot have them now gets them on demand, as ever) */
	(void)rf__slab_warm(&e->op_slab);
	(void)rf__slab_warm(&e->var_slab);
	(void)rf__slab_warm(&e->group_slab);
	rf__engine_configure(e, opts);
	e->owner_tid = rf__gettid();
	rf__streams_init(e);
	trace_path = opts && opts->trace_path ? opts->trace_path : getenv("RF_TRACE");
	if (trace_path && *trace_path && (ret = rf__trace_open(e, trace_path)) < 0) {
		rf__slab_release(&e->op_slab);
		rf__slab_release(&e->var_slab);
		rf__slab_release(&e->group_slab);
		free(e);
		if (!(opts && opts->trace_path))
			return rf__fail_under(ret, "RF_TRACE");
		return ret;
	}
	*out = e;
	return 0;
}

void rf_engine_destroy(struct rf_engine *e)
{
	if (!e)
		return;
	/* from inside an op or callback the engine is in use below us; from another
	 * thread it cannot be waited for: refused (leaked), said in the log */
	if (rf__wait_refused(e, "rf_engine_destroy", 1) < 0) {
		rf__log(RF_LOG_ERROR, "%s", rf_last_error());
		return;
	}
	rf__capture_discard(e);
	rf_engine_wait_idle(e);
	/* graphs the caller did not destroy: theirs as any (their recorded ops' done
	 * callbacks run); each frees itself once its last launch and deletion end */
	for (;;) {   /* from the head each time: a done callback may destroy others */
		struct rf_graph *g = e->graphs;
		while (g && g->doomed)
			g = g->next;
		if (!g)
			break;
		rf_graph_destroy(g);
	}
	rf_engine_wait_idle(e);
	rf__streams_destroy(e);
	rf__vars_free(e);
	if (e->trace && rf__trace_close(e) < 0) /* nobody to return it to: said in the log */
		rf__log(RF_LOG_ERROR, "%s", rf_last_error());
	rf__ops_release(e);
	rf__slab_release(&e->var_slab);
	rf__q_free_groups(e);
	free(e);
}

struct rf_ring *rf_engine_ring(struct rf_engine *e)
{
	return e->ring;
}

int rf_engine_is_sync(const struct rf_engine *e)
{
	return e && e->sync != 0;
}

void rf_engine_get_stats(const struct rf_engine *e, struct rf_engine_stats *st)
{
	*st = e->st;
	st->inflight = e->inflight;
	st->inflight_bytes = e->inflight_bytes;
}

int rf_engine_trace_start(struct rf_engine *e, const char *path)
{
	int ret = rf__admin_refused(e, "rf_engine_trace_start");

	if (ret < 0)
		return ret;
	if (e->trace)
		return rf__fail(-EBUSY, "rf_engine_trace_start %s: already tracing to %s (RF_TRACE "
				"set?)", path ? path : "", e->trace->path);
	if (!path || !*path)
		return rf__fail(-EINVAL, "rf_engine_trace_start: no file path");
	return rf__trace_open(e, path);
}

int rf_engine_trace_stop(struct rf_engine *e)
{
	int ret = rf__admin_refused(e, "rf_engine_trace_stop");

	if (ret < 0)
		return ret;
	if (!e->trace)
		return rf__fail(-ENOENT, "rf_engine_trace_stop: no trace is on");
	return rf__trace_close(e);
}
