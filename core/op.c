/* core/op.c -- op records: filling one from a descriptor (its entries, deduplicated,
 * queued on their variables); allocation (from the engine's slab) is inline in
 * engine-impl.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "graph-impl.h"

/* Teardown: the op records' and entry blocks' chunks. */
void rf__ops_release(struct rf_engine *e)
{
	rf__slab_release(&e->op_slab);
	rf__slab_release(&e->ent_slab);
}

/* Room for n entries in a fresh op: its own RF__INLINE_ENTRIES, else a block of
 * RF__ENT_BLOCK from the engine's slab, else malloc'd to the count. Taken once, at the
 * count the descriptor names (deduplication only lowers it): growing by doubling
 * from malloc cost an op of 5 variables a malloc and a copy, and a million such ops
 * waiting at once (rf-bench engine --pattern queued) 33,000 page faults of fresh
 * memory, 2,000 now. rf__op_free gives the block back (cap_ent says which it is: a
 * malloc'd array is always larger than a block). */
static int rf__op_reserve_entries(struct rf_engine *e, struct rf_op *op, uint64_t n)
{
	struct rf__entry *b;

	if (n <= op->cap_ent)
		return 0;
	if (n > UINT32_MAX / sizeof(*b))
		return rf__fail(-E2BIG, "push of op '%s': %llu variables named, more than an "
				"op can hold", op->name, (unsigned long long)n);
	b = n <= RF__ENT_BLOCK ? rf__slab_get(&e->ent_slab) : malloc(n * sizeof(*b));
	if (!b)
		return rf__fail(-ENOMEM, "push of op '%s': out of memory for its %llu variables' "
				"entries", op->name, (unsigned long long)n);
	op->ent = b;
	op->cap_ent = n <= RF__ENT_BLOCK ? RF__ENT_BLOCK : (uint32_t)n;
	return 0;
}

/* Add var v to op with mode write (1) or read (0), merging duplicates: a few are
 * compared with the entries so far; past RF__SCAN_MAX, v->mark says whether this fill
 * (generation mark) has an entry for v already, and which -- one pass, not n^2. */
static int rf__op_add_var(struct rf_op *op, struct rf_var *v, int write, uint64_t mark)
{
	uint32_t i;

	if (!mark) {
		for (i = 0; i < op->nent; i++)
			if (op->ent[i].var == v) {
				op->ent[i].write |= (uint8_t)write;
				return 0;
			}
	} else if (v->mark == mark) {
		op->ent[v->mark_ent].write |= (uint8_t)write;
		return 0;
	}
	if (op->nent == op->cap_ent)   /* rf__op_reserve_entries took the count */
		return rf__fail(-EOVERFLOW, "push of op '%s': more entries than reserved",
				op->name);
	if (mark) {
		v->mark = mark;
		v->mark_ent = op->nent;
	}
	op->ent[op->nent].op = op;
	op->ent[op->nent].var = v;
	op->ent[op->nent].write = (uint8_t)write;
	op->nent++;
	return 0;
}

static void rf__op_fill_fields(struct rf_engine *e, struct rf_op *op, const struct rf_op_desc *d)
{
	op->fn = d->fn;
	op->afn = d->afn;
	op->ctx = d->ctx;
	op->done = d->done;
	op->stream = d->afn ? &e->async_stream : d->stream ? d->stream : &e->inline_stream;
	op->qstream = op->stream;   /* a kind's fill may say otherwise (a launch's) */
	op->name = d->name ? d->name : "op";
	op->bytes = d->bytes;
	op->flags = d->flags;
}

/* Writes first, then reads, deduplicated in one pass (an op may name thousands). */
static int rf__op_fill_entries(struct rf_engine *e, struct rf_op *op, const struct rf_op_desc *d)
{
	uint64_t mark = (uint64_t)d->nwrites + d->nreads > RF__SCAN_MAX ? ++e->mark : 0;
	uint32_t i;
	int ret;

	if (op->kind->fill)
		return op->kind->fill(op, d);
	if ((ret = rf__op_reserve_entries(e, op, (uint64_t)d->nwrites + d->nreads)) < 0)
		return ret;
	for (i = 0; i < d->nwrites; i++)
		if ((ret = rf__op_add_var(op, d->writes[i], 1, mark)) < 0)
			return ret;
	for (i = 0; i < d->nreads; i++)
		if ((ret = rf__op_add_var(op, d->reads[i], 0, mark)) < 0)
			return ret;
	return 0;
}

/* Fill op from d: its function, stream and names, its entries, queued on their
 * variables. On failure nothing is queued. */
int rf__op_fill(struct rf_engine *e, struct rf_op *op, const struct rf_op_desc *d)
{
	uint32_t i;
	int ret;

	rf__op_fill_fields(e, op, d);
	if ((ret = rf__op_fill_entries(e, op, d)) < 0)
		return ret;
	if ((ret = rf__q_reserve(e, op->nent)) < 0)
		return rf__fail(ret, "push of op '%s': out of memory for its places in %u "
				"variables' queues", op->name, op->nent);
	op->pending = op->nent + 1; /* +1: not ready before every entry is queued */
	for (i = 0; i < op->nent; i++)
		rf__q_add(e, &op->ent[i]);
	return 0;
}
