/* core/capture.c -- recording: while a capture is on, a push records its op (the
 * descriptor, its variables deduplicated as rf__op_fill does: writes first, a
 * variable both read and written is a write) instead of queuing it. graph.c turns
 * the recording into a graph. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "graph-impl.h"
#include "rf-internal.h"

static int rf__grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
	uint32_t nc = *cap ? *cap : 16;
	void *n;

	if (need <= *cap)
		return 0;
	while (nc < need) {
		if (nc > UINT32_MAX / 2)
			return -ENOMEM;
		nc *= 2;
	}
	if (!(n = realloc(*p, (size_t)nc * size)))
		return -ENOMEM;
	*p = n;
	*cap = nc;
	return 0;
}

static uint32_t rf__vhash(const struct rf_var *v, uint32_t mask)
{
	uint64_t x = (uint64_t)(uintptr_t)v * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(x >> 32) & mask;
}

static int rf__rehash(struct rf__capture *c, uint32_t hcap)
{
	uint32_t *h = calloc(hcap, sizeof(*h));

	if (!h)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->nvar; i++) {
		uint32_t k = rf__vhash(c->vars[i], hcap - 1);
		while (h[k])
			k = (k + 1) & (hcap - 1);
		h[k] = i + 1;
	}
	free(c->hash);
	c->hash = h;
	c->hcap = hcap;
	return 0;
}

/* The index of v in the capture's variables, added on first use. */
static int rf__var_index(struct rf__capture *c, struct rf_var *v, uint32_t *out)
{
	uint32_t k;
	int ret;

	if (2 * (c->nvar + 1) > c->hcap && (ret = rf__rehash(c, c->hcap ? 2 * c->hcap : 64)) < 0)
		return ret;
	for (k = rf__vhash(v, c->hcap - 1); c->hash[k]; k = (k + 1) & (c->hcap - 1))
		if (c->vars[c->hash[k] - 1] == v) {
			*out = c->hash[k] - 1;
			return 0;
		}
	if ((ret = rf__grow((void **)&c->vars, &c->cap_var, c->nvar + 1, sizeof(*c->vars))) < 0)
		return ret;
	c->vars[c->nvar] = v;
	c->hash[k] = c->nvar + 1;
	*out = c->nvar++;
	return 0;
}

/* Add an entry of the node being recorded (entries from ent0 on), merging a repeat:
 * by comparing (mark 0) or by v->mark, as op.c does for a push. */
static int rf__cap_entry(struct rf__capture *c, uint32_t ent0, struct rf_var *v, int write,
			 uint64_t mark)
{
	uint32_t x, i;
	int ret;

	if (mark && v->mark == mark) {
		c->ent[v->mark_ent].write |= (uint8_t)write;
		return 0;
	}
	if ((ret = rf__var_index(c, v, &x)) < 0)
		return ret;
	for (i = ent0; !mark && i < c->nent; i++)
		if (c->ent[i].var == x) {
			c->ent[i].write |= (uint8_t)write;
			return 0;
		}
	if ((ret = rf__grow((void **)&c->ent, &c->cap_ent, c->nent + 1, sizeof(*c->ent))) < 0)
		return ret;
	if (mark) {
		v->mark = mark;
		v->mark_ent = c->nent;
	}
	c->ent[c->nent].var = x;
	c->ent[c->nent].prod = RF__GNONE;
	c->ent[c->nent].write = (uint8_t)write;
	c->nent++;
	return 0;
}

static int rf__cap_record(struct rf_engine *e, struct rf__capture *c, const struct rf_op_desc *d)
{
	struct rf__gnode *nd;
	uint64_t mark = (uint64_t)d->nwrites + d->nreads > RF__SCAN_MAX ? ++e->mark : 0;
	uint32_t ent0 = c->nent, i;
	int ret;

	if ((ret = rf__grow((void **)&c->nodes, &c->cap, c->n + 1, sizeof(*c->nodes))) < 0)
		return ret;
	for (i = 0; i < d->nwrites; i++)
		if ((ret = rf__cap_entry(c, ent0, d->writes[i], 1, mark)) < 0)
			goto undo;
	for (i = 0; i < d->nreads; i++)
		if ((ret = rf__cap_entry(c, ent0, d->reads[i], 0, mark)) < 0)
			goto undo;
	nd = &c->nodes[c->n++];
	memset(nd, 0, sizeof(*nd));
	nd->fn = d->fn;
	nd->afn = d->afn;
	nd->ctx = d->ctx;
	nd->done = d->done;
	nd->stream = d->afn ? &e->async_stream : d->stream ? d->stream : &e->inline_stream;
	nd->name = d->name ? d->name : "op";
	nd->bytes = d->bytes;
	nd->flags = d->flags;
	nd->ent0 = ent0;
	nd->nent = c->nent - ent0;
	return 0;
undo:
	c->nent = ent0; /* variables added stay: unused ones cost only a slot */
	return ret;
}

int rf__capture_add(struct rf_engine *e, const struct rf_op_desc *d, int checked)
{
	struct rf__capture *c = e->cap;
	int ret;

	if (checked < 0)
		ret = checked;  /* said by the check; voids the capture below */
	else if (c->err)
		return rf__fail(c->err, "push of op '%s' while capturing '%s': refused, the "
				"capture is void (an earlier push was refused: %s)",
				d->name ? d->name : "op", c->name, strerror(-c->err));
	else
		ret = rf__cap_record(e, c, d);
	if (ret < 0 && !c->err)
		c->err = ret;
	return ret;
}

int rf__capture_uses(const struct rf__capture *c, const struct rf_var *v)
{
	if (!c->hcap)
		return 0;
	for (uint32_t k = rf__vhash(v, c->hcap - 1); c->hash[k]; k = (k + 1) & (c->hcap - 1))
		if (c->vars[c->hash[k] - 1] == v)
			return 1;
	return 0;
}

int rf__capture_defer_delete(struct rf_engine *e, struct rf_var *v, struct rf_stream *s)
{
	struct rf__capture *c = e->cap;
	int ret;

	if ((ret = rf__grow((void **)&c->dels, &c->cap_del, c->ndel + 1, sizeof(*c->dels))) < 0)
		return rf__fail(ret, "rf_var_destroy('%s') while capturing: out of memory", v->name);
	c->dels[c->ndel].v = v;
	c->dels[c->ndel++].stream = s;
	return 0;
}

struct rf_var *rf__capture_deleted_used(const struct rf__capture *c)
{
	for (uint32_t i = 0; i < c->ndel; i++)
		if (rf__capture_uses(c, c->dels[i].v))
			return c->dels[i].v;
	return NULL;
}

int rf__capture_push_deletes(struct rf_engine *e, struct rf__capture *c)
{
	int ret = 0;

	for (uint32_t i = 0; i < c->ndel; i++) {
		int r = rf__var_delete_push(e, c->dels[i].v, c->dels[i].stream);
		if (r < 0 && !ret)
			ret = r;   /* that deletion undone: the variable stays */
	}
	c->ndel = 0;
	return ret;
}

void rf__capture_cancel(struct rf_engine *e, struct rf__capture *c)
{
	e->in_callback++;
	for (uint32_t i = 0; i < c->n; i++)
		if (c->nodes[i].done)
			c->nodes[i].done(c->nodes[i].ctx, -ECANCELED);
	e->in_callback--;
}

void rf__capture_free(struct rf__capture *c)
{
	if (!c)
		return;
	free(c->nodes);
	free(c->dels);
	free(c->ent);
	free(c->vars);
	free(c->hash);
	free(c->name);
	free(c->args);
	free(c);
}

/* The engine is destroyed while recording: the recorded ops never run; each done
 * callback runs once (-ECANCELED), as every accepted push's must. */
void rf__capture_discard(struct rf_engine *e)
{
	struct rf__capture *c = e->cap;

	if (!c)
		return;
	e->cap = NULL;
	rf__capture_cancel(e, c);
	(void)rf__capture_push_deletes(e, c);  /* run by the engine's drain that follows */
	if (c->args_var)
		rf__var_free(c->args_var);
	rf__capture_free(c);
}
