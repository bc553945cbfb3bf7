/* loader-read.c -- issuing reads: fetch units (aligned, ring-registered buffers with
 * an engine variable each) and the read op, an asynchronous engine op that issues
 * ring reads and finishes from the last completion. Also says where each record of
 * a batch will lie once read.
 *
 * SPAN push order: group G (global count) goes to unit G mod F, and is pushed only
 * after every gather that reads group G - F was pushed (G - F is below the first
 * group of the batch being pushed). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader-impl.h"

/* ---- the read op ---- */

size_t rf__fetch_bytes(unsigned n)
{
	return sizeof(struct rf__fetch) + (size_t)n * sizeof(((struct rf__fetch *)0)->req[0]);
}

struct rf__fetch *rf__fetch_new(struct rf_loader *l, unsigned n)
{
	struct rf__fetch *f = rf__fetch_bytes(n) <= l->fetches.size ? rf__slab_get(&l->fetches)
								      : NULL;

	if (f)
		memset(f, 0, rf__fetch_bytes(n));
	return f;
}

void rf__fetch_free(struct rf_loader *l, struct rf__fetch *f)
{
	if (!f)
		return;
	free(f->hq);
	rf__slab_put(&l->fetches, f);
}

static void rf__fetch_finish(struct rf__fetch *f)
{
	struct rf_op *op = f->op;
	int status = f->status;

	rf__fetch_free(f->l, f);
	rf_engine_op_done(op, status);
}

/* "record R" or "records A..B" */
static void rf__recs(char *buf, size_t len, uint64_t r0, uint64_t n)
{
	if (n == 1)
		snprintf(buf, len, "record %" PRIu64, r0);
	else
		snprintf(buf, len, "records %" PRIu64 "..%" PRIu64, r0, r0 + n - 1);
}

/* Record the first failure of f: its status and its message, kept by f->id. */
static void rf__fetch_fail(struct rf__fetch *f, const struct rf__lread *q, int err, int64_t got)
{
	struct rf_loader *l = f->l;
	const char *path = l->pfd ? l->ds->parts[q->part].path
				  : l->ds->src[RF_DS_SRC_PAYLOAD].path;
	struct rf__ferr *e;
	char recs[64];

	if (f->status < 0 || l->closing)
		return; /* keep the first; none while the loader is torn down */
	f->status = err;
	/* the batch has failed: its reads not yet sent are not (each would wait for its
	 * own timeout against a server that stalls: per-record reads are hundreds) */
	for (unsigned i = 0; f->hq && i < f->n; i++)
		f->hq[i].skip = 1;
	e = &l->ferr[l->iferr++ % l->nferr];
	e->used = 1;
	e->id = f->id;
	rf__recs(recs, sizeof(recs), q->rec0, q->nrec);
	if (f->hq && f->hq[q - f->req].err[0])
		snprintf(e->msg, sizeof(e->msg), "%.300s (for %s)", f->hq[q - f->req].err, recs);
	else if (got >= 0)
		snprintf(e->msg, sizeof(e->msg),
			 "%s: offset %" PRIu64 ": short read for %s: got %" PRId64 " of the %u "
			 "bytes expected (file truncated after open?)", path, q->off, recs, got,
			 q->need);
	else
		snprintf(e->msg, sizeof(e->msg),
			 "%s: offset %" PRIu64 ": read of %u bytes for %s failed: %s", path, q->off,
			 q->len, recs, strerror(-err));
	memcpy(l->last_err, e->msg, sizeof(l->last_err));
	l->st.read_errors++;
}

const char *rf__fetch_msg(const struct rf_loader *l, uint64_t id)
{
	for (unsigned i = 0; i < l->nferr; i++)
		if (l->ferr[i].used && l->ferr[i].id == id)
			return l->ferr[i].msg;
	return NULL;
}

static void rf__fetch_cb(void *data, int64_t res);

/* A finish that cannot run where the fetch's last request ended (inside the pump,
 * which may run inside another op's start): from the ring, on the next turn. */
static void rf__fetch_finish_cb(void *data, int64_t res)
{
	(void)res;
	rf__fetch_finish(data);
}

/* Request q of f is over (completed, or refused before it reached the ring). */
static void rf__req_end(struct rf__fetch *f, int deferred)
{
	if (--f->pending || f->starting)
		return; /* a starting fetch's start function ends it */
	if (deferred && rf_ring_timeout(f->l->ring, 0, rf__fetch_finish_cb, f, NULL) == 0)
		return;
	rf__fetch_finish(f);
}

/* Hand q to the ring (or the HTTP client). */
static int rf__issue(struct rf_loader *l, struct rf__lread *q)
{
	struct rf__fetch *f = q->f;

	if (l->http) {
		uint64_t size = l->ds->src[RF_DS_SRC_PAYLOAD].size;
		struct rf__hreq *h = &f->hq[q - f->req];
		if (q->off >= size)
			return -EINVAL;
		h->off = q->off;
		h->len = q->off + q->len > size ? (size_t)(size - q->off) : q->len;
		h->dst = f->u->buf + q->dst;
		h->cb = rf__fetch_cb;
		h->data = q;
		return rf__http_get(l->http, h);
	}
	return rf_ring_read(l->ring, l->pfd ? l->pfd[q->part] : l->fd, f->u->buf + q->dst,
			    q->len, q->off, l->rflags, rf__fetch_cb, q, NULL);
}

/* Issue queued requests in order while the bytes in flight and the device's queue
 * depth allow (one always may go when none is in flight). Requests the ring refuses
 * fail their fetch. */
static void rf__rq_pump(struct rf_loader *l)
{
	if (l->rq_busy)
		return; /* the running pump goes on with what was queued meanwhile */
	l->rq_busy = 1;
	while (l->rq_head) {
		struct rf__lread *q = l->rq_head;
		int ret;
		if (l->rq_n && (l->rq_bytes + q->len > l->rq_max ||
				(l->rq_nmax && l->rq_n >= l->rq_nmax)))
			break;
		l->rq_head = q->next;
		if (!l->rq_head)
			l->rq_tail = NULL;
		q->next = NULL;
		if (q->f->status < 0) {  /* its fetch failed already: not issued */
			rf__req_end(q->f, 1);
			continue;
		}
		ret = rf__issue(l, q);
		if (ret < 0) {
			rf__fetch_fail(q->f, q, ret, -1);
			rf__req_end(q->f, 1);
			continue;
		}
		if (!q->f->starting)
			l->st.read_queued++; /* it waited for room */
		l->rq_n++;
		l->rq_bytes += q->len;
		if (q->len > l->st.largest_read)
			l->st.largest_read = q->len;
		l->st.reads++;
		l->st.read_bytes += q->len;
		if (l->rq_n > l->st.max_reads_inflight)
			l->st.max_reads_inflight = l->rq_n;
		if (l->rq_bytes > l->st.max_bytes_inflight)
			l->st.max_bytes_inflight = l->rq_bytes;
	}
	l->rq_busy = 0;
}

static void rf__fetch_cb(void *data, int64_t res)
{
	struct rf__lread *q = data;
	struct rf__fetch *f = q->f;
	struct rf_loader *l = f->l;

	if (res < 0)
		rf__fetch_fail(f, q, (int)res, -1);
	else if ((uint64_t)res < q->need)
		rf__fetch_fail(f, q, -EIO, res);
	l->rq_n--;
	l->rq_bytes -= q->len;
	rf__rq_pump(l); /* the next reads go out before this fetch's gather is started */
	rf__req_end(f, 0);
}

/* The op's start: queue every request of f and issue what the bound allows. */
static int rf__fetch_start(void *ctx, struct rf_op *op)
{
	struct rf__fetch *f = ctx;
	struct rf_loader *l = f->l;
	unsigned i;

	f->op = op;
	if (l->http && !(f->hq = calloc(f->n, sizeof(*f->hq)))) {
		rf__fetch_free(l, f);
		return -ENOMEM;
	}
	for (i = 0; i < f->n; i++) {
		struct rf__lread *q = &f->req[i];
		q->next = NULL;
		if (l->rq_tail)
			l->rq_tail->next = q;
		else
			l->rq_head = q;
		l->rq_tail = q;
	}
	f->pending = f->n;
	f->starting = 1;
	rf__rq_pump(l);
	f->starting = 0;
	if (f->pending == 0) { /* every request refused before it reached the ring */
		int st = f->status;
		rf__fetch_free(l, f);
		return st; /* the engine fails the op with it */
	}
	return 0;
}

/* Push the fetch of unit u with the requests already in f (f is freed on failure). */
static int rf__push_fetch(struct rf_loader *l, struct rf__unit *u, struct rf__fetch *f)
{
	struct rf_op_desc d = { 0 };
	int ret;

	f->l = l;
	f->u = u;
	d.flags = RF_OP_OVERWRITE; /* a read heals the buffer after a failed one */
	d.afn = rf__fetch_start;
	d.ctx = f;
	d.writes = &u->var;
	d.nwrites = 1;
	d.name = "loader_read";
	ret = rf_engine_push(l->e, &d);
	if (ret < 0)
		rf__fetch_free(l, f);
	return ret;
}

/* ---- fetch units ---- */

static int rf__cmp_desc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* REC over records of any length: the reads of one batch fill its unit from the
 * start, each an aligned span of at most round_up(length) + align bytes; the unit
 * holds those of the batch's largest records, whichever they are. 0: no memory for
 * the sort (the caller's allocation then fails). */
static size_t rf__var_unit_cap(const struct rf_loader *l)
{
	uint64_t n = l->count, k = l->o.batch < n ? l->o.batch : n;
	uint32_t *len = malloc(n * sizeof(*len));
	size_t cap = 0;

	if (!len)
		return 0;
	for (uint64_t i = 0; i < n; i++) {
		struct rf_dataset_loc loc;
		rf_dataset_payload_loc(l->ds, i, &loc);
		len[i] = (uint32_t)loc.length;
	}
	qsort(len, n, sizeof(*len), rf__cmp_desc);
	for (uint64_t i = 0; i < k; i++)
		cap += rf__align_up(len[i], l->align) + l->align;
	free(len);
	return cap;
}

/* SPAN: F = windows a batch can touch + the windows the read bound can keep in
 * flight ahead of them (at least 1); REC: one per full slot + 1, so that batch t + N's
 * reads queue while batch t is still being gathered. */
static void rf__units_size(struct rf_loader *l)
{
	const struct rf_dataset_src *s0 = &l->ds->src[RF_DS_SRC_PAYLOAD];

	if (l->mode == RF__SPAN) {
		uint64_t span = rf__plan_windows(l);
		l->chunk_cap = rf__align_up(l->R * s0->stride, l->align) + l->align;
		l->unit_cap = l->W * l->chunk_cap;
		uint64_t ahead = (l->o.read_bytes + l->unit_cap - 1) / l->unit_cap;
		if (ahead > 8)
			ahead = 8;
		l->nunits = (unsigned)(span + (ahead ? ahead : 1));
	} else if (l->mode == RF__REC) {
		l->nunits = l->N + 1;
		l->chunk_cap = rf__align_up(s0->stride, l->align) + l->align;
		l->unit_cap = rf_dataset_variable(l->ds) ? rf__var_unit_cap(l)
							 : (size_t)l->o.batch * l->chunk_cap;
	}
}

static void rf__units_register(struct rf_loader *l)
{
	void *b = rf_pinned_base(l->uarena);
	size_t n = rf_pinned_size(l->uarena);

	if (rf_ring_register_memory(l->ring, &b, &n, 1) == 0) {
		l->registered = 1;
		l->rflags = RF_IO_FIXED_BUF;
	}
}

int rf__units_create(struct rf_loader *l)
{
	size_t total;
	unsigned i;
	int ret;

	rf__units_size(l);
	if (!l->nunits)
		return 0;
	/* a chunk is one read, whose length is 32 bits (a longer one was cut short) */
	if (l->mode == RF__SPAN && l->chunk_cap > UINT32_MAX)
		return rf__fail(-EINVAL, "loader: chunk_bytes %zu: chunks of %" PRIu64 " records "
				"(%zu bytes with alignment), expected at most 4 GiB - 1 a chunk",
				l->o.chunk_bytes, (uint64_t)l->R, (size_t)l->chunk_cap);
	if (__builtin_mul_overflow(l->unit_cap, (size_t)l->nunits, &total))
		return rf__fail(-ENOMEM, "loader: read buffers of %u x %zu bytes: more than "
				"memory holds (chunk_bytes %zu, window_chunks %u)", l->nunits,
				l->unit_cap, l->o.chunk_bytes, l->o.window_chunks);
	ret = rf_pinned_create(total, &l->uarena);
	if (ret < 0)
		return rf__fail(ret, "loader: cannot map %zu bytes of read buffers: %s", total,
				strerror(-ret));
	l->units = calloc(l->nunits, sizeof(*l->units));
	/* a failed fetch's message must outlive the few fetches that can fail before
	 * the gathers reading it report: at most one in flight per unit */
	l->nferr = 2 * l->nunits + 16;
	l->ferr = calloc(l->nferr, sizeof(*l->ferr));
	if (!l->units || !l->ferr)
		return rf__fail(-ENOMEM, "loader: no memory for the tables of %u fetch units",
				l->nunits);
	for (i = 0; i < l->nunits; i++) {
		char name[32];
		snprintf(name, sizeof(name), "loader.fetch[%u]", i);
		l->units[i].l = l;
		l->units[i].buf = (uint8_t *)rf_pinned_base(l->uarena) + i * l->unit_cap;
		rf_var_create(l->e, name, &l->units[i].var);
		if (!l->units[i].var)
			return rf__fail(-ENOMEM, "loader: no memory for fetch unit %u's variable", i);
	}
	if (!l->o.no_register)
		rf__units_register(l);
	l->st.buffer_bytes += rf_pinned_size(l->uarena);
	return 0;
}

/* ---- the reads of a batch, and where its records lie ---- */

/* Where record r's label lies: inside the record read to rec, or in memory. */
static const uint8_t *rf__label_at(const struct rf_loader *l, uint64_t r, const uint8_t *rec)
{
	const struct rf_dataset *ds = l->ds;
	struct rf_dataset_loc loc = { 0 };

	rf_dataset_label_loc(ds, r, &loc);
	return ds->label_src == RF_DS_SRC_PAYLOAD ? rec + ds->label_offset : l->lmem + loc.offset;
}

/* MEM: no reads; records lie in the in-memory sources. */
static void rf__locate_mem(struct rf_loader *l, uint64_t p0, struct rf__gjob *j)
{
	const struct rf_dataset *ds = l->ds;

	for (unsigned i = 0; i < j->n; i++) {
		uint64_t r = l->order[p0 + i];
		struct rf_dataset_loc loc = { 0 };
		j->idx[i] = r;
		rf_dataset_payload_loc(ds, r, &loc);
		j->pp[i] = l->pmem + loc.offset;
		j->pl[i] = (uint32_t)loc.length;
		if (j->lp) {
			rf_dataset_label_loc(ds, r, &loc);
			j->lp[i] = l->lmem + loc.offset;
		}
	}
}

/* REC: one read per record (its aligned span) into the batch's fetch unit; records
 * that follow each other in the file and in the batch (an unshuffled epoch) share one
 * read of up to RF__MERGE_MAX bytes: fewer, larger reads, and the page two neighbours
 * share is read once. Record i's slot of the unit starts at i * chunk_cap, and a read
 * starting at record k's slot and covering records k..i ends inside slot i (a slot
 * holds a record's span plus one alignment unit), so merged reads stay in the unit.
 * Records of any length have no slot of a fixed size: each read goes where the one
 * before ended (rf__var_unit_cap sizes the unit for the largest records). Of several
 * shards, a record's span is aligned in its own shard's file (rf_dataset_part_of) and
 * read from it; records of two shards never share a read, so none spans a shard's end
 * (the last one's aligned span may pass it: a short read there, as at a file's end). */
#define RF__MERGE_MAX (1u << 20)
static int rf__read_records(struct rf_loader *l, uint64_t p0, struct rf__gjob *j)
{
	const struct rf_dataset *ds = l->ds;
	const struct rf_dataset_src *s0 = &ds->src[RF_DS_SRC_PAYLOAD];
	struct rf__unit *u = &l->units[l->nbatch_done % l->nunits];
	unsigned i, n = j->n, nq = 0;
	int var = rf_dataset_variable(ds);
	struct rf__fetch *f = rf__fetch_new(l, n);
	int ret;

	if (!f)
		return rf__fail(-ENOMEM, "loader: no memory for the reads of %u records", n);
	for (i = 0; i < n; i++) {
		uint64_t r = l->order[p0 + i], off, len, a = s0->data_offset + r * s0->stride;
		uint64_t rl = s0->stride;
		struct rf__lread *q = nq ? &f->req[nq - 1] : NULL;
		unsigned part = 0;
		const uint8_t *rec;
		if (var) {
			struct rf_dataset_loc loc;
			rf_dataset_payload_loc(ds, r, &loc);
			a = loc.offset;
			rl = loc.length;
			if (l->pfd && rf_dataset_part_of(ds, loc.offset, rl, &part, &a) < 0) {
				rf__fetch_free(l, f);
				return rf__fail(-EIO, "%s: record %" PRIu64 ": bytes [%" PRIu64 ", %"
						PRIu64 ") of the shards' payload lie in no one shard",
						s0->path, r, loc.offset, loc.offset + rl);
			}
			j->pl[i] = (uint32_t)rl;
			off = a & ~(l->align - 1);
			len = rf__align_up(a + rl, l->align) - off;
		} else {
			rf_dataset_span(ds, RF_DS_SRC_PAYLOAD, r, 1, l->align, &off, &len);
		}
		if (q && r == q->rec0 + q->nrec && q->part == part &&
		    off + len - q->off <= RF__MERGE_MAX) {
			q->nrec++; /* the next record in the file: the same read, longer */
			q->len = (uint32_t)(off + len - q->off);
			q->need = (uint32_t)(a + rl - q->off);
		} else {
			q = &f->req[nq++];
			q->f = f;
			q->rec0 = r;
			q->nrec = 1;
			q->part = part;
			q->off = off;
			q->len = (uint32_t)len;
			q->need = (uint32_t)(a + rl - off);
			q->dst = !var ? i * l->chunk_cap : nq > 1 ? f->req[nq - 2].dst + f->req[nq - 2].len : 0;
		}
		rec = u->buf + q->dst + (a - q->off);
		j->idx[i] = r;
		j->pp[i] = rec + ds->payload_offset;
		if (j->lp)
			j->lp[i] = rf__label_at(l, r, rec);
	}
	f->n = nq;
	f->id = l->nbatch_done;
	ret = rf__push_fetch(l, u, f);
	if (ret < 0)
		return ret;
	j->fid[j->nunits] = l->nbatch_done;
	j->reads[j->nunits++] = u->var;
	return 0;
}

/* SPAN: the aligned span of chunk c, and the bytes of it that must arrive. */
static void rf__chunk_span(const struct rf_loader *l, uint64_t c, uint64_t *off, uint64_t *len,
			   uint64_t *need)
{
	const struct rf_dataset_src *s = &l->ds->src[RF_DS_SRC_PAYLOAD];
	uint64_t r0 = c * l->R, n = l->R;

	if (r0 + n > l->count)
		n = l->count - r0;
	rf_dataset_span(l->ds, RF_DS_SRC_PAYLOAD, r0, n, l->align, off, len);
	*need = s->data_offset + (r0 + n) * s->stride - *off;
}

/* SPAN: push the read of group G (its W chunks) into unit G mod F. */
static int rf__push_group(struct rf_loader *l, uint64_t G)
{
	uint64_t gl = G - l->gbase, w;
	struct rf__unit *u = &l->units[G % l->nunits];
	unsigned n = 0;
	struct rf__fetch *f = rf__fetch_new(l, (unsigned)l->W);

	if (!f)
		return rf__fail(-ENOMEM, "loader: no memory for the reads of a window of %u "
				"chunks", (unsigned)l->W);
	for (w = 0; w < l->W; w++) {
		uint64_t p = gl * l->W + w, off, len, need, c;
		if (p >= l->C)
			break;
		c = l->order[l->count + p]; /* the inverse chunk order, kept after order[] */
		rf__chunk_span(l, c, &off, &len, &need);
		f->req[n].f = f;
		f->req[n].rec0 = c * l->R;
		f->req[n].nrec = c * l->R + l->R <= l->count ? l->R : l->count - c * l->R;
		f->req[n].off = off;
		f->req[n].len = (uint32_t)len;
		f->req[n].need = (uint32_t)need;
		f->req[n].dst = w * l->chunk_cap;
		n++;
	}
	f->n = n;
	f->id = G;
	return rf__push_fetch(l, u, f);
}

/* SPAN: push every group we may (the batch's, then read-ahead); the gather reads the
 * batch's groups. */
static int rf__read_groups(struct rf_loader *l, uint64_t p0, struct rf__gjob *j)
{
	uint64_t gfirst = rf__group_of(l, l->order[p0]);
	uint64_t glast = rf__group_of(l, l->order[p0 + j->n - 1]);
	uint64_t gend = l->gbase + l->ngroups, G;
	int ret;

	/* after a seek into the epoch, the groups before the batch's are never read */
	if (l->gnext < gfirst)
		l->gnext = gfirst;
	while (l->gnext < gend && l->gnext < gfirst + l->nunits) {
		ret = rf__push_group(l, l->gnext);
		if (ret < 0)
			return ret;
		l->gnext++;
	}
	if (glast >= l->gnext) /* cannot happen: nunits covers a batch's span */
		return rf__fail(-EOVERFLOW, "loader: a batch spans chunk groups %llu..%llu, more "
				"than its %u fetch units hold", (unsigned long long)gfirst,
				(unsigned long long)glast, l->nunits);
	for (G = gfirst; G <= glast; G++) {
		j->fid[j->nunits] = G;
		j->reads[j->nunits++] = l->units[G % l->nunits].var;
	}
	return 0;
}

/* SPAN: where each record lies in its group's unit. */
static void rf__locate_groups(struct rf_loader *l, uint64_t p0, struct rf__gjob *j)
{
	const struct rf_dataset *ds = l->ds;
	const struct rf_dataset_src *s0 = &ds->src[RF_DS_SRC_PAYLOAD];

	for (unsigned i = 0; i < j->n; i++) {
		uint64_t r = l->order[p0 + i], c = r / l->R, pos = l->cpos[c];
		uint64_t Gr = l->gbase + pos / l->W, w = pos % l->W, off, len, need;
		uint64_t a = s0->data_offset + r * s0->stride;
		const uint8_t *rec;
		rf__chunk_span(l, c, &off, &len, &need);
		rec = l->units[Gr % l->nunits].buf + w * l->chunk_cap + (a - off);
		j->idx[i] = r;
		j->pp[i] = rec + ds->payload_offset;
		if (j->lp)
			j->lp[i] = rf__label_at(l, r, rec);
	}
}

int rf__read_batch(struct rf_loader *l, uint64_t p0, struct rf__gjob *j)
{
	int ret;

	if (l->mode == RF__MEM) {
		rf__locate_mem(l, p0, j);
		return 0;
	}
	if (l->mode == RF__REC)
		return rf__read_records(l, p0, j);
	ret = rf__read_groups(l, p0, j);
	if (ret < 0)
		return ret;
	rf__locate_groups(l, p0, j);
	return 0;
}
