/* core/opkind.h -- what kind an op is, as one row of a table: what the engine does with
 * it at each stage where it differs from a user's op. An op carries its kind and one
 * argument (struct rf_op's kind and arg); push, dispatch, completion, the queues, the
 * streams and the trace call through the row and know no kind by name. Each kind is
 * defined by the file that owns it: user ops in push.c, waits in wait.c, deletions in
 * var.c, graph launches and their ops in graph-run.c. A NULL hook means the user op's
 * way. Internal to core/. */
#ifndef RF_CORE_OPKIND_H
#define RF_CORE_OPKIND_H

#include <stdint.h>

struct rf_engine;
struct rf_op;
struct rf_op_desc;
struct rf_op_graph;

struct rf__opkind {
	const char *name;
	uint8_t counted;      /* a user's: in stats pushed and completed, and it waits for
			       * room under the in-flight cap when pushed */
	uint8_t traced;       /* a trace shows it and its reads */
	uint8_t no_fn;        /* engine-made: may have neither fn nor afn */
	uint8_t prechecked;   /* its descriptor was checked before (a launch's variables
			       * when bound): push does not check it again */
	uint8_t own_entries;  /* its entries are its owner's (fill), not freed with it */
	/* push: its entries from d; NULL: writes then reads, deduplicated (op.c) */
	int (*fill)(struct rf_op *op, const struct rf_op_desc *d);
	/* dispatch: nonzero to skip it (an input poisoned for good); NULL: the inherited
	 * error of its inputs (complete.c: rf__inherited_error) */
	int (*skip)(struct rf_engine *e, struct rf_op *op);
	/* after its stream took it; NULL: rf__q_dispatched (consumers on its stream may
	 * chain behind it) */
	void (*enqueued)(struct rf_engine *e, struct rf_op *op);
	/* its stream reported it; NULL: onto the finished list once at every front */
	void (*reported)(struct rf_engine *e, struct rf_op *op);
	/* it reached the front of every queue it is in (queue.c); NULL: nothing more */
	void (*at_front)(struct rf_engine *e, struct rf_op *op);
	/* finishing, instead of rf__finish's way; NULL: that way */
	void (*finish)(struct rf_engine *e, struct rf_op *op);
	/* after its done callback, before its record is freed (a deletion frees its
	 * variable, a launch releases its block); NULL: nothing */
	void (*finished)(struct rf_engine *e, struct rf_op *op);
	/* what its waiter learns (a wait: its variable's poison); NULL: its status */
	int (*wait_status)(const struct rf_op *op, int status);
	/* for streams (stream.h): rf_op_quiet and rf_op_graph; NULL: 0 */
	int (*quiet)(const struct rf_op *op);
	int (*graph)(const struct rf_op *op, struct rf_op_graph *out);
};

extern const struct rf__opkind rf__kind_user;    /* push.c */
extern const struct rf__opkind rf__kind_wait;    /* wait.c: arg.var, the waited one */
extern const struct rf__opkind rf__kind_delete;  /* var.c: arg.var, freed after */
extern const struct rf__opkind rf__kind_launch;  /* graph-run.c: arg.gl */
extern const struct rf__opkind rf__kind_node;    /* graph-run.c: arg.node */

#endif
