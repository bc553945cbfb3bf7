/* devices/cuda/cuda-graph.c -- a graph launch on one CUDA stream run as CUDA graphs.
 *
 * The engine tells a stream which ops belong to a launch of a graph that runs every
 * op on it (rf_op_graph, stream.h): a launch enqueues them in one dispatch round, in
 * the same order each time, and the stream's flush call ends the round. The second
 * launch of such a graph is recorded: each maximal run of ops that only enqueue
 * device work on fixed pointers is captured (cudaStreamBeginCapture) and becomes one
 * CUDA graph, instantiated and launched at once; an op that reads host state when it
 * runs (a live learning rate, a PRNG's counter, a host function, a copy from pageable
 * memory, a cuDNN call whose handle or convolution plan is not made yet) runs as usual
 * between them. Later launches run the same plan: the ops of a
 * run are put in the FIFO as they arrive and its graph is launched when the run's
 * last op arrives -- one launch for the run, no per-op kernel launches, events or
 * host functions; one host function after the launch's last op reports all of them.
 *
 * The first launch runs op by op (kernels get loaded, cuBLAS makes its workspace:
 * nothing a capture must see). Anything unexpected -- an op of something else in the
 * middle, an op out of the recorded order, a launch that arrives in part (poison made
 * the engine skip an op: the flush call tells), a capture or instantiation that
 * fails -- starts what is held op by op, in order, and the plan is dropped for good:
 * that graph runs op by op from then on. A small cache keeps the plans of the last
 * few graphs per stream. RF_CUDA_GRAPHS=0 turns it off (every launch op by op), for
 * comparisons. Design: devices/README.md, "CUDA graphs". */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cuda-impl.h"
#include "cuda-rules.h"
#if RF_HAVE_CUDNN
#include "cudnn-impl.h"
#endif
#include "../op-impl.h"

#define RF__CG_CACHE 4
#define RF__CG_TRIES 3

struct rf__cgplan {
	uint64_t id;              /* the engine graph's; 0: a free entry */
	uint32_t n;
	uint32_t first;           /* the index of the first op the first launch enqueued */
	int seen;                 /* a launch ran op by op: the next one is recorded */
	int ready;                /* recorded: replays use it */
	int fails;                /* launches that diverged: RF__CG_TRIES make it bad */
	int bad;                  /* run op by op */
	uint64_t used;            /* LRU clock */
	uint64_t ws_gen;          /* the stream's cuDNN workspace generation it was recorded at */
	uint32_t *order;          /* n: the op index each position expects */
	int32_t *seg;             /* n: the position's CUDA graph, or -1: run as usual */
	cudaGraphExec_t *exec;    /* n (at most): one per run */
	uint32_t nseg;
};

struct rf__cg {
	struct rf__cgplan plan[RF__CG_CACHE];
	uint64_t clock;
	int off;                  /* RF_CUDA_GRAPHS=0 when the stream first saw a graph */
	/* the launch in progress */
	struct rf__cgplan *cur;   /* NULL: none */
	int recording;
	int capturing;            /* a capture is open on the stream (recording) */
	uint32_t pos;             /* its ops seen */
	uint32_t put;             /* its ops in the FIFO */
	uint64_t seq;             /* the newest one's stream sequence number */
	/* ops whose work is not started: in the open capture, or waiting for their run's
	 * graph. Consecutive FIFO entries from held0. */
	struct rf_op **held;      /* capacity: the largest plan's n */
	uint32_t nheld, held_cap;
	uint64_t held0;
};

/* Can op be recorded: does running it only enqueue device work on pointers fixed at
 * push, reading no host state that changes between launches (cuda-rules.h)? */
static int rf__cg_capturable(const struct rf__cuda_stream *c, struct rf_op *op)
{
	struct rf__op *o;
	rf_op_fn fn;
	void *ctx;

	rf_op_fn_ctx(op, &fn, &ctx);
	if (fn != rf__op_fn || !(o = ctx))
		return 0;
	switch (rf__cuda_cap_need(o, rf__cuda_dnn_ok(NULL))) {
	case RF__CAP_ALWAYS:
		return 1;
	case RF__CAP_DNN_READY:
#if RF_HAVE_CUDNN
		return rf__dnn_capturable(c, o);
#else
		return 0;
#endif
	case RF__CAP_PINNED: {
		/* device or page-locked host memory, first and last byte: a copy node */
		const char *dst = o->o.copy.dst.data, *src = o->o.copy.src.data;
		size_t bytes = o->p.copy.bytes;
		const char *p[4] = { dst, dst + bytes - 1, src, src + bytes - 1 };
		for (int i = 0; i < 4; i++) {
			struct cudaPointerAttributes a;
			if (cudaPointerGetAttributes(&a, p[i]) != cudaSuccess) {
				(void)cudaGetLastError();
				return 0;
			}
			if (a.type == cudaMemoryTypeUnregistered)
				return 0;
		}
		return 1;
	}
	default:
		return 0;
	}
}

/* The plan's CUDA graphs go (it is recorded again, or freed). */
static void rf__cg_plan_forget(struct rf__cgplan *p)
{
	for (uint32_t i = 0; i < p->nseg; i++)
		if (p->exec[i])
			cudaGraphExecDestroy(p->exec[i]);
	if (p->exec)
		memset(p->exec, 0, p->nseg * sizeof(*p->exec));
	p->nseg = 0;
	p->ready = 0;
}

static void rf__cg_plan_clear(struct rf__cgplan *p)
{
	rf__cg_plan_forget(p);
	free(p->order);
	free(p->seg);
	free(p->exec);
	memset(p, 0, sizeof(*p));
}

/* The plan of graph id (made if new: the least recently used entry goes), or NULL. */
static struct rf__cgplan *rf__cg_plan(struct rf__cg *g, uint64_t id, uint32_t n)
{
	struct rf__cgplan *p = NULL, *lru = &g->plan[0];

	for (int i = 0; i < RF__CG_CACHE; i++) {
		if (g->plan[i].id == id) {
			p = &g->plan[i];
			break;
		}
		if (g->plan[i].used < lru->used)
			lru = &g->plan[i];
	}
	if (!p) {
		p = lru;
		rf__cg_plan_clear(p);
		p->order = malloc((size_t)n * sizeof(*p->order));
		p->seg = malloc((size_t)n * sizeof(*p->seg));
		p->exec = calloc(n, sizeof(*p->exec));
		if (n > g->held_cap) {
			struct rf_op **h = realloc(g->held, (size_t)n * sizeof(*h));
			if (h) {
				g->held = h;
				g->held_cap = n;
			}
		}
		if (!p->order || !p->seg || !p->exec || n > g->held_cap) {
			rf__cg_plan_clear(p);
			return NULL;
		}
		p->id = id;
		p->n = n;
	}
	p->used = ++g->clock;
	return p;
}

/* A CUDA graph call failed: said (each time: it is rare, and a plan stops recording
 * after RF__CG_TRIES) and counted; its ops run op by op. */
static void rf__cg_failed(struct rf__cuda_stream *c, const char *what, cudaError_t e)
{
	struct rf__cuda_dev *cd = c->dev->ctx;

	cd->cg_failures++;
	(void)cudaGetLastError();
	rf__log(RF_LOG_WARN, "stream %s: %s failed: %s: %s (the launch's ops run op by op)",
		c->name, what, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* Close the open capture: its graph, instantiated if instantiate, or NULL (then
 * nothing of it ran). */
static cudaGraphExec_t rf__cg_capture_end(struct rf__cuda_stream *c, int instantiate)
{
	struct rf__cg *g = c->cg;
	cudaGraph_t graph = NULL;
	cudaGraphExec_t exec = NULL;
	cudaError_t e;

	g->capturing = 0;
	if ((e = cudaStreamEndCapture(c->cs, &graph)) != cudaSuccess || !graph) {
		if (instantiate)
			rf__cg_failed(c, "cudaStreamEndCapture", e);
		else
			(void)cudaGetLastError();
		return NULL;
	}
	if (instantiate && (e = cudaGraphInstantiateWithFlags(&exec, graph, 0)) != cudaSuccess) {
		rf__cg_failed(c, "cudaGraphInstantiateWithFlags", e);
		exec = NULL;
	}
	cudaGraphDestroy(graph);
	return exec;
}

/* No launch in progress any more. */
static void rf__cg_end_launch(struct rf__cg *g)
{
	g->cur = NULL;
	g->recording = 0;
	g->pos = g->put = g->nheld = 0;
}

/* Start the held ops one by one (their work never started), with their statuses. */
static void rf__cg_run_held(struct rf__cuda_stream *c)
{
	struct rf__cg *g = c->cg;

	for (uint32_t i = 0; i < g->nheld; i++) {
		rf_op_fn fn;
		void *ctx;
		rf_op_fn_ctx(g->held[i], &fn, &ctx);
		if (fn == rf__op_fn && ctx) /* a failed run into the capture wrote it */
			((struct rf__op *)ctx)->err[0] = 0;
		c->st[(g->held0 + i) & (c->cap - 1)] = rf_op_execute(g->held[i]);
	}
	g->nheld = 0;
}

/* The plan's graphs read a cuDNN workspace since replaced: counted, and forgotten (it
 * is recorded again at a later launch). */
static void rf__cg_stale(struct rf__cuda_stream *c, struct rf__cgplan *p)
{
	((struct rf__cuda_dev *)c->dev->ctx)->cg_stale++;
	rf__cg_plan_forget(p);
}

/* The launch in progress ends early: what is held starts op by op, a host function
 * reports everything put in the FIFO so far, and the plan is recorded again at a
 * later launch. fail: it diverged (an op of something else came between, say), which
 * after RF__CG_TRIES drops the plan for good; else it went stale (the stream's cuDNN
 * workspace was replaced), which is no fault of the plan's. */
static void rf__cg_end_early(struct rf__cuda_stream *c, int fail)
{
	struct rf__cg *g = c->cg;
	struct rf__cgplan *p = g->cur;

	if (g->capturing)
		(void)rf__cg_capture_end(c, 0); /* discarded: its ops run below */
	if (p && fail && ++p->fails >= RF__CG_TRIES) {
		p->bad = 1;
		rf__log(RF_LOG_WARN, "stream %s: graph %llu diverged from its recorded order %d "
			"times: it runs op by op from now on", c->name, (unsigned long long)p->id,
			RF__CG_TRIES);
	} else if (p && fail) {
		rf__cg_plan_forget(p);
	} else if (p) {
		rf__cg_stale(c, p);
	}
	rf__cg_run_held(c);
	if (g->put)
		rf__cs_signal(c, g->seq);
	rf__cg_end_launch(g);
}

static void rf__cg_diverge(struct rf__cuda_stream *c)
{
	rf__cg_end_early(c, 1);
}

/* Launch exec for the held ops; on failure they start op by op. */
static void rf__cg_launch(struct rf__cuda_stream *c, cudaGraphExec_t exec)
{
	struct rf__cg *g = c->cg;
	struct rf__cuda_dev *cd = c->dev->ctx;
	cudaError_t e = cudaErrorInvalidValue;

	if (exec && (e = cudaGraphLaunch(exec, c->cs)) == cudaSuccess) {
		if (g->recording)
			cd->cg_captures++;
		else
			cd->cg_replays++;
		g->nheld = 0;
		return;
	}
	if (exec)
		rf__cg_failed(c, "cudaGraphLaunch", e);
	rf__cg_run_held(c);
	if (g->cur)
		g->cur->bad = 1; /* a graph that cannot be launched will not be */
}

/* Into the FIFO as one of the launch's ops: reported by the launch's host function. */
static void rf__cg_put(struct rf__cuda_stream *c, struct rf_op *op, int st, uint64_t t0)
{
	c->cg->put++;
	rf__cs_put(c, op, st, t0);
}

static void rf__cg_hold(struct rf__cuda_stream *c, struct rf_op *op)
{
	struct rf__cg *g = c->cg;

	if (!g->nheld)
		g->held0 = c->head;
	g->held[g->nheld++] = op;
	rf__cg_put(c, op, 0, rf_now_ns());
}

/* Run op now, as any op of the stream (its place in the launch is not captured). */
static void rf__cg_run(struct rf__cuda_stream *c, struct rf_op *op)
{
	uint64_t t0 = rf_now_ns();
	rf__cg_put(c, op, rf_op_execute(op), t0);
}

/* The open capture's run ends: its CUDA graph is kept in the plan and launched. */
static void rf__cg_close_run(struct rf__cuda_stream *c, struct rf__cgplan *p)
{
	cudaGraphExec_t ex = rf__cg_capture_end(c, 1);
	p->exec[p->nseg++] = ex;
	rf__cg_launch(c, ex);
}

/* Recording: op at position pos of the plan's second launch. */
static void rf__cg_record(struct rf__cuda_stream *c, struct rf_op *op, uint32_t index)
{
	struct rf__cg *g = c->cg;
	struct rf__cgplan *p = g->cur;
	uint32_t pos = g->pos;

	p->order[pos] = index;
	if (!rf__cg_capturable(c, op)) {
		if (g->capturing) /* the run before it ends: its graph starts now */
			rf__cg_close_run(c, p);
		p->seg[pos] = -1;
		rf__cg_run(c, op);
		return;
	}
	if (!g->capturing) {
		cudaError_t e = cudaStreamBeginCapture(c->cs, cudaStreamCaptureModeRelaxed);
		if (e != cudaSuccess) {
			rf__cg_failed(c, "cudaStreamBeginCapture", e);
			p->bad = 1; /* this launch goes on being recorded, op by op */
			p->seg[pos] = -1;
			rf__cg_run(c, op);
			return;
		}
		g->capturing = 1;
	}
	p->seg[pos] = (int32_t)p->nseg;
	rf__cg_hold(c, op);
	if (rf_op_execute(op) != 0) /* not recordable after all: started op by op */
		rf__cg_diverge(c);
}

int rf__cg_enqueue(struct rf__cuda_stream *c, struct rf_op *op)
{
	struct rf__cg *g = c->cg;
	struct rf__cgplan *p;
	struct rf_op_graph gi;
	int isg = rf_op_graph(op, &gi);

	if (g && g->cur) {
		p = g->cur;
		if (!isg || gi.id != p->id || (!g->recording && gi.index != p->order[g->pos]))
			rf__cg_diverge(c); /* then op goes as usual, or starts a launch below */
		else
			goto continue_launch;
		if (c->dead)
			return 0; /* the caller fails op with the rest */
	}
	if (!isg || gi.n < 2)
		return 0;
	if (!g) {
		const char *off = getenv("RF_CUDA_GRAPHS");
		if (!(g = c->cg = calloc(1, sizeof(*g))))
			return 0;
		g->off = off && !strcmp(off, "0");
	}
	if (g->off)
		return 0;
	if (!(p = rf__cg_plan(g, gi.id, gi.n)) || p->bad)
		return 0;
	if (!p->seen) {
		p->seen = 1;
		p->first = gi.index; /* the first launch runs op by op */
		return 0;
	}
	if (gi.index != p->first)
		return 0; /* not a launch's first op: it runs as usual */
	rf__cg_end_launch(g); /* a clean start */
	if (p->ready && !rf__cg_replayable(p->ws_gen, c->dnn_ws_gen)) {
		rf__cg_stale(c, p);  /* its graphs read a replaced workspace: record again */
	}
	g->cur = p;
	g->recording = !p->ready;
	if (g->recording)
		p->ws_gen = c->dnn_ws_gen;
continue_launch:
	g->seq = rf_op_seq(op);
	if (g->recording) {
		rf__cg_record(c, op, gi.index);
		if (!g->cur)
			return 1; /* diverged (op included) */
	} else {
		int32_t k = p->seg[g->pos];
		if (k < 0) {
			rf__cg_run(c, op);
		} else {
			rf__cg_hold(c, op);
			if (g->pos + 1 == p->n || p->seg[g->pos + 1] != k) {
				if (!rf__cg_replayable(p->ws_gen, c->dnn_ws_gen)) {
					/* an op run between its graphs replaced the workspace:
					 * the rest of the launch runs op by op */
					rf__cg_end_early(c, 0);
					return 1;
				}
				rf__cg_launch(c, p->exec[k]);
			}
		}
	}
	if (++g->pos < p->n)
		return 1;
	/* the launch is complete */
	if (g->capturing)
		rf__cg_close_run(c, p);
	if (g->recording && !p->bad) {
		if (rf__cg_replayable(p->ws_gen, c->dnn_ws_gen)) {
			p->ready = 1;
		} else {
			/* the workspace grew while it was recorded: its early graphs read the
			 * old one */
			rf__cg_stale(c, p);
		}
	}
	rf__cs_signal(c, g->seq);
	rf__cg_end_launch(g);
	return 1;
}

void rf__cg_flush(struct rf__cuda_stream *c)
{
	if (c->cg && c->cg->cur)
		rf__cg_diverge(c); /* the round ended with the launch in part: ops skipped */
}

int rf__cg_capturing(const struct rf__cuda_stream *c)
{
	return c->cg && c->cg->capturing;
}

void rf__cg_drop(struct rf__cuda_stream *c)
{
	struct rf__cg *g = c->cg;

	if (!g)
		return;
	if (g->capturing)
		(void)rf__cg_capture_end(c, 0);
	if (g->cur)
		g->cur->bad = 1;
	rf__cg_end_launch(g);
}

void rf__cg_free(struct rf__cuda_stream *c)
{
	struct rf__cg *g = c->cg;

	if (!g)
		return;
	rf__cg_drop(c);
	for (int i = 0; i < RF__CG_CACHE; i++)
		rf__cg_plan_clear(&g->plan[i]);
	free(g->held);
	free(g);
	c->cg = NULL;
}
