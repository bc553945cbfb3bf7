/* core/graph-impl.h -- captured graphs and their replays, shared by capture.c (the
 * recording), graph.c (building a graph, launching it) and graph-run.c (running a
 * launch's ops). Not installed. The design: core/README.md, "Capture and replay". */
#ifndef RF_GRAPH_IMPL_H
#define RF_GRAPH_IMPL_H

#include "engine-impl.h"

#define RF__GNONE UINT32_MAX

/* A captured op: its descriptor (the variables become entries), and its place in the
 * graph's precomputed dependencies. */
struct rf__gnode {
	rf_op_fn fn;
	rf_async_fn afn;
	void *ctx;
	rf_op_done_fn done;      /* called once, when the graph is freed */
	struct rf_stream *stream;
	const char *name;
	size_t bytes;
	unsigned flags;
	uint8_t quiet;           /* has successors, all on its in-order stream (rf_op_quiet) */
	uint32_t ent0, nent;     /* its entries: g->ent[ent0 .. ent0 + nent) */
	uint32_t succ0, nsucc;   /* ops that depend on it: g->succ[succ0 ..) */
	uint32_t pred0, npred;   /* ops it depends on: g->pred[pred0 ..) */
};

/* An op's use of a graph variable. prod: the entry of the write before it in the
 * graph (the version it sees), or RF__GNONE: the variable as the launch found it. */
struct rf__gent {
	uint32_t var;
	uint32_t prod;
	uint8_t write;
};

struct rf__gvar {
	struct rf_var *v;        /* as captured (a launch may bind another in its place) */
	uint32_t last;           /* the graph's last write entry, RF__GNONE: only read */
};

struct rf__glaunch;

struct rf_graph {
	struct rf_engine *eng;
	char *name;
	uint32_t n, nent, nvar, nedge, nroots;
	size_t bytes;            /* its ops' bytes: a launch counts them (and n ops) against
				  * the engine's caps while in flight */
	struct rf__gnode *nodes;
	struct rf__gent *ent;
	struct rf__gvar *vars;
	uint32_t *succ;          /* nedge */
	uint8_t *succ_same;      /* nedge: the successor is on the same in-order stream */
	uint32_t *pred;          /* nedge */
	uint32_t *roots;         /* ops with no predecessor */
	uint32_t *npred;         /* n: each op's predecessors (a launch's counters start so) */
	void *args;              /* the replay arguments' buffer */
	size_t args_size;
	struct rf_var *args_var;
	struct rf__glaunch *free_launches;
	unsigned inflight;       /* launches not finished */
	struct rf_stream *single; /* every op on this one in-order stream, no arguments: a
				   * launch may chain behind what precedes it there */
	int one_stream;          /* every op on one stream (arguments or not): rf_op_graph */
	uint64_t id;             /* unique in the process (rf_op_graph) */
	int doomed;              /* rf_graph_destroy called: freed by its last launch */
	struct rf_graph *prev, *next; /* the engine's graphs (destroyed with it) */
};

/* One replay in flight: the macro op that holds the graph's variables in the engine's
 * queues, and the state of each captured op. */
struct rf__glaunch {
	struct rf_graph *g;
	struct rf__glaunch *next;      /* free list */
	struct rf_op *macro;
	uint32_t nleft;                /* ops not finished */
	int poison;                    /* some poison may be seen: check inputs, keep versions */
	int init_done;                 /* init_err read (a chained launch: at its front) */
	int at_front;                  /* its macro op is at every front (queue.c sets it) */
	uint32_t ndisp;                /* ops enqueued on their streams */
	uint64_t lastseq;              /* the last one's stream sequence number */
	struct rf__oplist deferred;    /* reported before a chained launch reached its front */
	uint64_t uid0;                 /* op i's uid is uid0 + i */
	struct rf_op *ops;             /* n op records */
	uint32_t *pend_disp;           /* predecessors not finished nor chained */
	uint32_t *pend_fin;            /* predecessors not finished */
	uint8_t *reported;             /* reported while a predecessor was unfinished */
	uint8_t *chained;              /* nedge: satisfied when its producer was enqueued */
	int *ver_err;                  /* nent: a write entry's outcome (the poison after it) */
	const char **ver_name;
	int *init_err;                 /* nvar: the poison the launch found */
	const char **init_name;
	struct rf_var **bound;         /* nvar: the variable each stands for in this launch */
	struct rf_var **rd, **wr;      /* the macro op's reads and writes */
	struct rf__entry *ents;        /* and its entries (nvar + 1) */
	uint8_t *fast;                 /* n: an inline op, run from runq without a record */
	uint32_t *runq;                /* n: inline ops ready to run */
	uint32_t rq_head, rq_tail;
	int draining;                  /* rf__glaunch_drain is running runq */
	unsigned nrd, nwr;
	unsigned char *args;           /* this launch's arguments (args_size) */
	int has_args;                  /* 0: the launch passed none (the buffer stays)  */
};

/* Under the engine's in-flight cap a launch stands for its graph's ops (and their
 * bytes: its macro op's): the macro op counts one, this the rest -- added when it is
 * pushed, taken off when it finishes (graph-run.c: rf__glaunch_finished). */
static inline uint32_t rf__glaunch_extra(const struct rf_graph *g)
{
	return g->n > 1 ? g->n - 1 : 0;
}

/* graph-run.c */
extern const struct rf_stream_ops rf__graph_stream_ops;
void rf__glaunch_init_ops(struct rf_engine *e, struct rf__glaunch *L);
/* Free g and its launch blocks, calling each captured op's done callback once. */
void rf__graph_free(struct rf_graph *g);
void rf__glaunch_free(struct rf__glaunch *L);

/* capture.c: what a capture records */
struct rf__capture {
	struct rf__gnode *nodes;
	uint32_t n, cap;
	struct rf__gent *ent;      /* var: an index into vars */
	uint32_t nent, cap_ent;
	struct rf_var **vars;      /* distinct, in order of first use */
	uint32_t nvar, cap_var;
	uint32_t *hash;            /* open addressing: var pointer -> index + 1 */
	uint32_t hcap;
	int err;                   /* the first push refused while capturing */
	struct rf__deferred { struct rf_var *v; struct rf_stream *stream; } *dels;
	uint32_t ndel, cap_del;    /* rf_var_destroy while recording: pushed at the end */
	char *name;
	void *args;
	size_t args_size;
	struct rf_var *args_var;
};

/* Record d in the capture (checked: rf__check_desc's verdict on it): 0, or the
 * refusal (a bad descriptor, -ENOMEM), which voids the capture: the graph would not be
 * the program (rf_engine_capture_end then returns it, no graph). */
int rf__capture_add(struct rf_engine *e, const struct rf_op_desc *d, int checked);
void rf__capture_free(struct rf__capture *c);
void rf__capture_discard(struct rf_engine *e);
/* Whether the recording names v (a variable a callback may not destroy meanwhile). */
int rf__capture_uses(const struct rf__capture *c, const struct rf_var *v);
/* rf_var_destroy while recording: v's deletion waits for the capture's end. */
int rf__capture_defer_delete(struct rf_engine *e, struct rf_var *v, struct rf_stream *s);
/* At the capture's end (e->cap already NULL): the deferred deletions pushed; 0 or the
 * first error (its deletion then left undone: the variable stays). */
int rf__capture_push_deletes(struct rf_engine *e, struct rf__capture *c);
/* The first deferred deletion of a variable the recording names, or NULL. */
struct rf_var *rf__capture_deleted_used(const struct rf__capture *c);
/* Each recorded op's done callback, once, with -ECANCELED: the ops will never run. */
void rf__capture_cancel(struct rf_engine *e, struct rf__capture *c);

#endif
