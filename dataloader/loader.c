/* dataloader/loader.c — batches as engine variables (loader.h).
 *
 * Three ways records reach a batch (l->mode):
 *   MEM   the payload source is in memory: the gather op reads it directly.
 *   SPAN  small records on disk: "groups" of W chunks (aligned spans of R records)
 *         are read into one of F fetch units; batches gather from 1..F-1 units.
 *   REC   large records on disk: the fetch of batch t reads each record's aligned
 *         span into unit t mod N.
 * A fetch unit is a buffer with an engine variable. Its read is an asynchronous op
 * that mutates the variable; gathers read it. So the engine recycles buffers: a
 * fetch waits for the gathers of the unit's previous contents. Slots (staging u8,
 * labels, device tensors) are recycled the same way through the tensors' variables.
 *
 * Push-order invariant for SPAN: group G (global count) goes to unit G mod F, and is
 * pushed only after every gather that reads group G - F was pushed (G - F is below
 * the first group of the batch being pushed). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset-impl.h"
#include "loader.h"
#include "ops.h"

enum { RF__MEM = 0, RF__SPAN = 1, RF__REC = 2 };

#define RF__ERRLEN 384

struct rf__unit {
	struct rf_loader *l;
	struct rf_var *var;
	uint8_t *buf;
};

/* The message of a failed fetch, by the fetch's id (SPAN: its global group number;
 * REC: its global batch number). Kept apart from the unit: the unit's next fetch may
 * start before the gathers that read the failed one have reported. */
struct rf__ferr {
	uint64_t id;
	int used;
	char msg[RF__ERRLEN];
};

struct rf__fetch;

struct rf__req {
	struct rf__fetch *f;
	uint64_t rec0, nrec;      /* the records the read is for (file order) */
	uint64_t off;             /* file offset (aligned) */
	uint32_t len;             /* aligned length */
	uint32_t need;            /* bytes that must arrive (through the last record) */
	size_t dst;               /* offset in the unit's buffer */
};

/* One fetch: a pushed read op; freed when it finishes. */
struct rf__fetch {
	struct rf_loader *l;
	struct rf__unit *u;
	struct rf_op *op;
	uint64_t id;              /* see struct rf__ferr */
	unsigned n, pending;
	int status;
	struct rf__req req[];
};

struct rf__slot {
	unsigned cap;             /* records in a batch of this slot */
	unsigned sn[RF_LOADER_MAX_SHARDS], soff[RF_LOADER_MAX_SHARDS];
	uint8_t *stage;           /* cap * pb bytes, shards back to back */
	int32_t *lab;             /* cap labels */
	struct rf_tensor *su[RF_LOADER_MAX_SHARDS];  /* u8 staging (host) */
	struct rf_tensor *yh[RF_LOADER_MAX_SHARDS];  /* i32 labels (host) */
	struct rf_tensor *ud[RF_LOADER_MAX_SHARDS];  /* CUDA: u8 on the device */
	struct rf_tensor *x[RF_LOADER_MAX_SHARDS];   /* f32 on the device */
	struct rf_tensor *y[RF_LOADER_MAX_SHARDS];   /* i32 on the device (CPU: == yh) */
};

/* The messages of the latest failed batches, by (epoch, index). */
#define RF__ERRLOG 256
struct rf__errlog {
	uint64_t epoch, index;
	int used;
	char msg[RF__ERRLEN + 64];
};

/* One gather op: pointers computed at push time. */
struct rf__gjob {
	struct rf_loader *l;
	struct rf__slot *s;
	uint64_t epoch, index;
	unsigned n, nunits;
	uint64_t fid[8];          /* ids of the fetches it reads */
	char err[RF__ERRLEN];     /* written by the worker on a bad label */
	const uint8_t **pp;       /* payload of record j */
	const uint8_t **lp;       /* label of record j, or NULL */
	uint64_t *idx;            /* record index (for messages) */
};

struct rf_loader {
	struct rf_engine *e;
	struct rf_ring *ring;
	const struct rf_dataset *ds;
	struct rf_loader_opts o;
	int mode, cuda, labels;
	unsigned K, N;
	size_t pb;                /* payload bytes */
	uint64_t count, nbatches, nfull;
	uint64_t align;

	int fd, direct, registered;
	unsigned rflags;
	const uint8_t *pmem;      /* payload source in memory (whole file), or NULL */
	uint8_t *pmem_own;
	const uint8_t *lmem;      /* label source in memory (whole file), or NULL */
	uint8_t *lmem_own;

	struct rf_pinned *uarena, *sarena;
	struct rf__unit *units;
	unsigned nunits;
	size_t unit_cap;

	/* SPAN geometry */
	uint64_t R, C, W, ngroups;
	size_t chunk_cap;
	uint32_t *cpos;           /* chunk -> position in the epoch's chunk order */
	uint64_t gbase;           /* global id of this epoch's group 0 */
	uint64_t gnext;           /* next global group to push */

	/* Slots are recycled by counters that run across epochs, never reset: full batch
	 * number f goes to slot f mod N, tail batch number k to tail slot k mod ntail.
	 * A slot is reused only by the N-th following batch (loader.h's promise). */
	struct rf__slot *slots;   /* N full slots, then ntail tail slots */
	unsigned nslots, nfslots, ntail;
	uint64_t nfull_done;      /* full batches pushed, all epochs */
	uint64_t ntail_done;      /* tail batches pushed, all epochs */
	uint64_t nbatch_done;     /* batches pushed, all epochs (REC fetch units) */
	struct rf_stream *gs;     /* gather worker stream */
	struct rf_device *host;

	uint64_t epoch, t;        /* next batch: (epoch, t) */
	int planned;
	uint64_t *order;

	struct rf_loader_stats st;
	struct rf__ferr *ferr;    /* failed fetches' messages, a ring of nferr */
	unsigned nferr, iferr;
	char last_err[RF__ERRLEN];
	struct rf__errlog log[RF__ERRLOG];
	unsigned nlog;
};

static void rf__err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- randomness: splitmix64, per-epoch stream ---------------------------------------- */

static uint64_t rf__sm64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n): Lemire's multiply-shift (bias <= n / 2^64). */
static uint64_t rf__below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)rf__sm64(s) * n) >> 64);
}

static void rf__shuffle(uint64_t *a, uint64_t n, uint64_t *s)
{
	for (uint64_t i = n; i > 1; i--) {
		uint64_t j = rf__below(s, i), t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
}

/* The epoch's order into order[count]; SPAN also fills cpos[C]. */
static int rf__plan(const struct rf_loader *l, uint64_t epoch, uint64_t *order, uint32_t *cpos)
{
	uint64_t s = l->o.seed ^ 0x5851f42d4c957f2dull, i;
	int shuffle = !l->o.no_shuffle;

	s ^= rf__sm64(&(uint64_t){ epoch + 1 });
	rf__sm64(&s);
	if (l->mode != RF__SPAN) {
		for (i = 0; i < l->count; i++)
			order[i] = i;
		if (shuffle)
			rf__shuffle(order, l->count, &s);
		return 0;
	}
	uint64_t *cperm = malloc(l->C * sizeof(*cperm)), p = 0, g;
	if (!cperm)
		return -ENOMEM;
	for (i = 0; i < l->C; i++)
		cperm[i] = i;
	if (shuffle)
		rf__shuffle(cperm, l->C, &s);
	for (i = 0; i < l->C; i++)
		if (cpos)
			cpos[cperm[i]] = (uint32_t)i;
	for (g = 0; g < l->ngroups; g++) {
		uint64_t start = p, w;
		for (w = g * l->W; w < (g + 1) * l->W && w < l->C; w++) {
			uint64_t c = cperm[w], r0 = c * l->R, r1 = r0 + l->R;
			if (r1 > l->count)
				r1 = l->count;
			for (i = r0; i < r1; i++)
				order[p++] = i;
		}
		if (shuffle)
			rf__shuffle(order + start, p - start, &s);
	}
	free(cperm);
	return 0;
}

int rf_loader_order(struct rf_loader *l, uint64_t epoch, uint64_t *order, uint64_t n)
{
	uint64_t *tmp;
	int ret;

	if (n > l->count)
		return -ERANGE;
	tmp = malloc(l->count * sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	ret = rf__plan(l, epoch, tmp, NULL);
	if (!ret)
		memcpy(order, tmp, n * sizeof(*order));
	free(tmp);
	return ret;
}

/* ---- fetch: the read as an asynchronous engine op --------------------------------- */

static void rf__fetch_finish(struct rf__fetch *f)
{
	struct rf_op *op = f->op;
	int status = f->status;

	free(f);
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

static void rf__fetch_fail(struct rf__fetch *f, const struct rf__req *q, int err, int64_t got)
{
	struct rf_loader *l = f->l;
	const char *path = l->ds->src[RF_DS_SRC_PAYLOAD].path;
	struct rf__ferr *e;
	char recs[64];

	if (f->status < 0)
		return; /* keep the first */
	f->status = err;
	e = &l->ferr[l->iferr++ % l->nferr];
	e->used = 1;
	e->id = f->id;
	rf__recs(recs, sizeof(recs), q->rec0, q->nrec);
	if (got >= 0)
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

static const char *rf__fetch_msg(const struct rf_loader *l, uint64_t id)
{
	for (unsigned i = 0; i < l->nferr; i++)
		if (l->ferr[i].used && l->ferr[i].id == id)
			return l->ferr[i].msg;
	return NULL;
}

static void rf__fetch_cb(void *data, int64_t res)
{
	struct rf__req *q = data;
	struct rf__fetch *f = q->f;

	if (res < 0)
		rf__fetch_fail(f, q, (int)res, -1);
	else if ((uint64_t)res < q->need)
		rf__fetch_fail(f, q, -EIO, res);
	if (--f->pending == 0)
		rf__fetch_finish(f);
}

static int rf__fetch_start(void *ctx, struct rf_op *op)
{
	struct rf__fetch *f = ctx;
	struct rf_loader *l = f->l;
	unsigned i;

	f->op = op;
	for (i = 0; i < f->n; i++) {
		struct rf__req *q = &f->req[i];
		int ret = rf_ring_read(l->ring, l->fd, f->u->buf + q->dst, q->len, q->off, l->rflags,
				       rf__fetch_cb, q, NULL);
		if (ret < 0) {
			rf__fetch_fail(f, q, ret, -1);
			break;
		}
		f->pending++;
		l->st.reads++;
		l->st.read_bytes += q->len;
	}
	if (f->pending == 0) {
		int st = f->status;
		free(f);
		return st; /* the engine fails the op with it */
	}
	return 0;
}

/* Push the fetch of unit u with the requests already in f. */
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
		free(f);
	return ret;
}

/* ---- SPAN: group reads ------------------------------------------------------------ */

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

static int rf__push_group(struct rf_loader *l, uint64_t G)
{
	uint64_t gl = G - l->gbase, w;
	struct rf__unit *u = &l->units[G % l->nunits];
	unsigned n = 0;
	struct rf__fetch *f = calloc(1, sizeof(*f) + l->W * sizeof(f->req[0]));

	if (!f)
		return -ENOMEM;
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

/* ---- gather: fetch buffers (or memory) -> staging u8 + labels ------------------------ */

static int rf__gather_run(void *ctx)
{
	struct rf__gjob *j = ctx;
	struct rf_loader *l = j->l;
	struct rf__slot *s = j->s;
	const struct rf_dataset *ds = l->ds;
	size_t pb = l->pb;
	unsigned i;

	for (i = 0; i < j->n; i++)
		memcpy(s->stage + (size_t)i * pb, j->pp[i], pb);
	if (j->lp) {
		for (i = 0; i < j->n; i++) {
			int32_t v = rf_dataset_decode_label(ds, j->lp[i]);
			if (ds->num_classes && (v < 0 || (uint32_t)v >= ds->num_classes)) {
				snprintf(j->err, sizeof(j->err), "%s: record %" PRIu64 ": label %d "
					 "outside [0, %u)", ds->src[ds->label_src].path, j->idx[i], v,
					 ds->num_classes);
				return -ERANGE;
			}
			s->lab[i] = v;
		}
	}
	return 0;
}

static void rf__gather_done(void *ctx, int status)
{
	struct rf__gjob *j = ctx;
	struct rf_loader *l = j->l;
	unsigned i;

	if (status < 0) {
		const char *msg = j->err[0] ? j->err : NULL;
		struct rf__errlog *e = &l->log[l->nlog++ % RF__ERRLOG];
		for (i = 0; !msg && i < j->nunits; i++)
			msg = rf__fetch_msg(l, j->fid[i]);
		e->used = 1;
		e->epoch = j->epoch;
		e->index = j->index;
		snprintf(e->msg, sizeof(e->msg), "%s (epoch %" PRIu64 ", batch %" PRIu64 ")",
			 msg ? msg : strerror(-status), j->epoch, j->index);
		if (j->err[0])
			memcpy(l->last_err, j->err, sizeof(l->last_err));
	}
	free(j);
}

/* ---- create ------------------------------------------------------------------------- */

static int rf__load_file(const struct rf_dataset_src *src, uint8_t **out, char *err, size_t errlen)
{
	uint8_t *m = malloc(src->size ? src->size : 1);
	uint64_t off = 0;

	if (!m) {
		rf__err(err, errlen, "%s: cannot allocate %" PRIu64 " bytes for it", src->path, src->size);
		return -ENOMEM;
	}
	while (off < src->size) {
		ssize_t n = pread(src->fd, m + off, src->size - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? -errno : -EIO;
			rf__err(err, errlen, "%s: offset %" PRIu64 ": %s (expected %" PRIu64 " bytes)",
				src->path, off, n < 0 ? strerror(errno) : "unexpected end of file",
				src->size);
			free(m);
			return e;
		}
		off += (uint64_t)n;
	}
	*out = m;
	return 0;
}

/* Reopen the very file the dataset validated (even if renamed since) with *fl (O_DIRECT
 * dropped from *fl where the filesystem refuses it): through /proc/self/fd, else by
 * its path. Never blocks (a FIFO put at the path since), and refuses anything but
 * that same regular file. Returns the fd or -errno with err filled. */
static int rf__reopen(const struct rf_dataset_src *s0, int *fl, char *err, size_t errlen)
{
	struct stat want, got;
	char p[64];
	int fd = -EBADF, not_reg = 0, i;

	if (s0->fd < 0 || fstat(s0->fd, &want) < 0) {
		rf__err(err, errlen, "%s: the dataset holds no open file to read", s0->path);
		return -EBADF;
	}
	snprintf(p, sizeof(p), "/proc/self/fd/%d", s0->fd);
	for (i = 0; i < 2; i++) {
		fd = rf__open_regular(p, *fl, 0, &got, &not_reg);
		if (fd < 0 && !not_reg && fd != -EINVAL)
			fd = rf__open_regular(s0->path, *fl, 0, &got, &not_reg); /* no /proc */
		if (fd == -EINVAL && !not_reg && (*fl & O_DIRECT)) {
			*fl &= ~O_DIRECT; /* a filesystem without O_DIRECT (tmpfs) */
			continue;
		}
		break;
	}
	if (fd < 0 && not_reg) {
		rf__err(err, errlen, "%s: is now %s, not a regular file: expected the file the "
			"dataset was opened from", s0->path, rf__ds_ftype(got.st_mode));
		return fd;
	}
	if (fd < 0) {
		rf__err(err, errlen, "%s: cannot reopen for reading: %s", s0->path, strerror(-fd));
		return fd;
	}
	if (got.st_dev != want.st_dev || got.st_ino != want.st_ino) {
		close(fd);
		rf__err(err, errlen, "%s: is another file than the one the dataset was opened from "
			"(replaced since?)", s0->path);
		return -ESTALE;
	}
	return fd;
}

static size_t rf__round(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

static int rf__make_slot(struct rf_loader *l, struct rf__slot *s, unsigned cap, uint8_t *mem,
			 unsigned si)
{
	const struct rf_dataset *ds = l->ds;
	unsigned i, k;
	char name[40];

	s->cap = cap;
	s->stage = mem;
	s->lab = (int32_t *)(mem + rf__round((size_t)cap * l->pb, 64));
	for (i = 0; i < l->K; i++) {
		struct rf_device *d = l->o.devices[i];
		int64_t shape[RF_TENSOR_MAX_DIMS] = { 0 };
		int nd = 1 + (int)ds->ndim;
		unsigned a = (unsigned)((uint64_t)cap * i / l->K), b = (unsigned)((uint64_t)cap * (i + 1) / l->K);

		if (nd > RF_TENSOR_MAX_DIMS)
			return -ENOTSUP;
		s->soff[i] = a;
		s->sn[i] = b - a;
		shape[0] = b - a;
		for (k = 0; k < ds->ndim; k++)
			shape[1 + k] = ds->shape[k];
		struct rf_device *hd = l->cuda ? l->host : d;
		snprintf(name, sizeof(name), "loader.u8[%u].%u", si, i);
		s->su[i] = rf_tensor_wrap(hd, s->stage + (size_t)a * l->pb, RF_U8, name, nd, shape);
		snprintf(name, sizeof(name), "loader.x[%u].%u", si, i);
		s->x[i] = rf_tensor_new(d, RF_F32, name, nd, shape);
		if (!s->su[i] || !s->x[i])
			return -ENOMEM;
		if (l->cuda) {
			snprintf(name, sizeof(name), "loader.u8d[%u].%u", si, i);
			s->ud[i] = rf_tensor_new(d, RF_U8, name, nd, shape);
			if (!s->ud[i])
				return -ENOMEM;
		}
		if (l->labels) {
			snprintf(name, sizeof(name), "loader.yh[%u].%u", si, i);
			s->yh[i] = rf_tensor_wrap(hd, s->lab + a, RF_I32, name, 1, shape);
			if (!s->yh[i])
				return -ENOMEM;
			if (l->cuda) {
				snprintf(name, sizeof(name), "loader.y[%u].%u", si, i);
				s->y[i] = rf_tensor_new(d, RF_I32, name, 1, shape);
				if (!s->y[i])
					return -ENOMEM;
			} else {
				s->y[i] = s->yh[i];
			}
		}
	}
	return 0;
}

int rf_loader_create(struct rf_loader **out, struct rf_engine *e, const struct rf_dataset *ds,
		     const struct rf_loader_opts *opts, char *err, size_t errlen)
{
	struct rf_loader *l;
	const struct rf_dataset_src *s0;
	unsigned i;
	int ret;

	if (err && errlen)
		err[0] = 0;
	if (!out || !e || !ds || !opts || !ds->count || ds->kind == RF_DS_NONE) {
		rf__err(err, errlen, "loader: missing engine, dataset or options");
		return -EINVAL;
	}
	if (!opts->batch || !opts->devices || !opts->ndevices ||
	    opts->ndevices > RF_LOADER_MAX_SHARDS) {
		rf__err(err, errlen, "loader: need batch >= 1 and 1..%d devices (got batch %u, %u devices)",
			RF_LOADER_MAX_SHARDS, opts->batch, opts->ndevices);
		return -EINVAL;
	}
	if (ds->dtype != RF_DS_DT_U8) {
		rf__err(err, errlen, "%s: payload dtype %s: the loader decodes u8 only",
			ds->src[0].path, rf_ds_dtype_name(ds->dtype));
		return -ENOTSUP;
	}
	if (ds->ndim + 1 > RF_TENSOR_MAX_DIMS) {
		rf__err(err, errlen, "%s: records of %u dims: a batch tensor holds at most %d",
			ds->src[0].path, ds->ndim, RF_TENSOR_MAX_DIMS - 1);
		return -ENOTSUP;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->e = e;
	l->ring = rf_engine_ring(e);
	l->ds = ds;
	l->o = *opts;
	l->fd = -1;
	l->K = opts->ndevices;
	l->N = opts->prefetch ? opts->prefetch : 4;
	if (!l->o.scale)
		l->o.scale = 1.0f / 255.0f;
	if (!l->o.std)
		l->o.std = 1.0f;
	if (!l->o.chunk_bytes)
		l->o.chunk_bytes = 512 << 10;
	if (!l->o.window_chunks)
		l->o.window_chunks = 8;
	if (!l->o.large_record)
		l->o.large_record = 64 << 10;
	l->pb = ds->payload_bytes;
	l->count = ds->count;
	l->labels = ds->label_kind != RF_LABEL_NONE;
	l->nfull = l->count / opts->batch;
	l->nbatches = l->nfull + (!opts->drop_last && l->count % opts->batch ? 1 : 0);
	if (!l->nbatches) {
		rf__err(err, errlen, "%s: %" PRIu64 " records make no whole batch of %u (drop_last)",
			ds->src[0].path, l->count, opts->batch);
		free(l);
		return -EINVAL;
	}
	for (i = 0; i < l->K; i++) {
		if (rf_device_engine(opts->devices[i]) != e) {
			rf__err(err, errlen, "loader: device %u belongs to another engine", i);
			free(l);
			return -EINVAL;
		}
		if (rf_device_kind(opts->devices[i]) == RF_DEVICE_CUDA)
			l->cuda = 1;
	}
	if (l->cuda && l->K > 1)
		for (i = 0; i < l->K; i++)
			if (rf_device_kind(opts->devices[i]) != RF_DEVICE_CUDA) {
				rf__err(err, errlen, "loader: devices must be all CPU or all CUDA");
				free(l);
				return -EINVAL;
			}
	l->host = opts->host ? opts->host : opts->devices[0];
	if (rf_device_kind(l->host) != RF_DEVICE_CPU) {
		rf__err(err, errlen, "loader: a CUDA target needs opts.host, an open CPU device "
			"for the host staging tensors");
		free(l);
		return -EINVAL;
	}

	/* Sources: labels in a separate file are small: keep them in memory. */
	s0 = &ds->src[RF_DS_SRC_PAYLOAD];
	if (l->labels && ds->label_src != RF_DS_SRC_PAYLOAD) {
		l->lmem = ds->src[ds->label_src].mem;
		if (!l->lmem) {
			ret = rf__load_file(&ds->src[ds->label_src], &l->lmem_own, err, errlen);
			if (ret < 0)
				goto fail;
			l->lmem = l->lmem_own;
		}
	}
	l->pmem = s0->mem;
	if (!l->pmem && opts->in_memory) {
		ret = rf__load_file(s0, &l->pmem_own, err, errlen);
		if (ret < 0)
			goto fail;
		l->pmem = l->pmem_own;
	}
	if (l->labels && ds->label_src == RF_DS_SRC_PAYLOAD)
		l->lmem = l->pmem;

	if (l->pmem) {
		l->mode = RF__MEM;
	} else {
		uint32_t ma = 0, oa = 0;
		int fl = O_RDONLY | (opts->buffered ? 0 : O_DIRECT);

		ret = rf__reopen(s0, &fl, err, errlen);
		if (ret < 0)
			goto fail;
		l->fd = ret;
		l->direct = !!(fl & O_DIRECT);
		l->align = 4096;
		if (l->direct && rf_dio_align(l->fd, s0->path, &ma, &oa) == 0) {
			if (oa > l->align)
				l->align = oa;
			if (ma > l->align)
				l->align = ma;
		}
		l->mode = s0->stride >= l->o.large_record ? RF__REC : RF__SPAN;
	}

	/* Fetch units. */
	if (l->mode == RF__SPAN) {
		uint64_t rl, minint, span;
		l->R = l->o.chunk_bytes / s0->stride;
		if (!l->R)
			l->R = 1;
		l->C = (l->count + l->R - 1) / l->R;
		l->W = l->o.window_chunks;
		rl = l->count - (l->C - 1) * l->R;
		for (;;) {
			l->ngroups = (l->C + l->W - 1) / l->W;
			minint = l->W * l->R;
			if (l->W >= 2 && (l->W - 1) * l->R + rl < minint)
				minint = (l->W - 1) * l->R + rl;
			if (l->W == 1 && rl < minint)
				minint = rl;
			/* windows one batch can touch: k - 2 whole interior ones of >= minint */
			span = l->ngroups == 1 ? 1 : 2 + (opts->batch + minint - 1) / minint;
			if (span <= 8)
				break;
			l->W *= 2; /* a batch larger than the windows: widen them */
		}
		l->chunk_cap = rf__round(l->R * s0->stride, l->align) + l->align;
		l->unit_cap = l->W * l->chunk_cap;
		l->nunits = (unsigned)span + 1; /* + 1: the next group is read ahead */
	} else if (l->mode == RF__REC) {
		l->nunits = l->N;
		l->chunk_cap = rf__round(s0->stride, l->align) + l->align;
		l->unit_cap = (size_t)opts->batch * l->chunk_cap;
	}
	if (l->nunits) {
		size_t total = l->unit_cap * l->nunits;
		ret = rf_pinned_create(total, &l->uarena);
		if (ret < 0) {
			rf__err(err, errlen, "loader: cannot map %zu bytes of read buffers: %s", total,
				strerror(-ret));
			goto fail;
		}
		l->units = calloc(l->nunits, sizeof(*l->units));
		/* a failed fetch's message must outlive the few fetches that can fail before
		 * the gathers reading it report: at most one in flight per unit */
		l->nferr = 2 * l->nunits + 16;
		l->ferr = calloc(l->nferr, sizeof(*l->ferr));
		if (!l->units || !l->ferr) {
			ret = -ENOMEM;
			goto fail;
		}
		for (i = 0; i < l->nunits; i++) {
			char name[32];
			snprintf(name, sizeof(name), "loader.fetch[%u]", i);
			l->units[i].l = l;
			l->units[i].buf = (uint8_t *)rf_pinned_base(l->uarena) + i * l->unit_cap;
			l->units[i].var = rf_var_new(e, name);
			if (!l->units[i].var) {
				ret = -ENOMEM;
				goto fail;
			}
		}
		if (!opts->no_register) {
			void *b = rf_pinned_base(l->uarena);
			size_t n = rf_pinned_size(l->uarena);
			if (rf_ring_register_memory(l->ring, &b, &n, 1) == 0) {
				l->registered = 1;
				l->rflags = RF_IO_FIXED_BUF;
			}
		}
		l->st.buffer_bytes += rf_pinned_size(l->uarena);
	}

	/* Slots: N full ones, plus tail slots for the last partial batch. The tail batch
	 * comes once every nbatches batches, so ceil(N / nbatches) tail slots keep each
	 * one intact for the N - 1 batches that follow it (with nbatches >= N: one). */
	{
		unsigned tail = !opts->drop_last ? (unsigned)(l->count % opts->batch) : 0;
		size_t full = rf__round(rf__round((size_t)opts->batch * l->pb, 64) +
					(size_t)opts->batch * 4, 4096);
		size_t tsz = tail ? rf__round(rf__round((size_t)tail * l->pb, 64) + (size_t)tail * 4,
					      4096) : 0;
		uint8_t *base;

		l->nfslots = l->nfull ? l->N : 0;
		l->ntail = tail ? (unsigned)((l->N + l->nbatches - 1) / l->nbatches) : 0;
		l->nslots = l->nfslots + l->ntail;
		l->slots = calloc(l->nslots, sizeof(*l->slots));
		if (!l->slots) {
			ret = -ENOMEM;
			goto fail;
		}
		ret = rf_pinned_create(full * l->nfslots + tsz * l->ntail, &l->sarena);
		if (ret < 0) {
			rf__err(err, errlen, "loader: cannot map %zu bytes of staging buffers: %s",
				full * l->nfslots + tsz * l->ntail, strerror(-ret));
			goto fail;
		}
		l->st.buffer_bytes += rf_pinned_size(l->sarena);
		base = rf_pinned_base(l->sarena);
		for (i = 0; i < l->nslots; i++) {
			int is_tail = i >= l->nfslots;
			size_t at = is_tail ? full * l->nfslots + tsz * (i - l->nfslots) : full * i;
			ret = rf__make_slot(l, &l->slots[i], is_tail ? tail : opts->batch, base + at, i);
			if (ret < 0) {
				rf__err(err, errlen, "loader: cannot allocate the batch tensors");
				goto fail;
			}
		}
	}
	/* Touch the device tensors now (first-touch page faults, CUDA lazy mapping), so
	 * an epoch's time is the loader's steady state. */
	for (i = 0; i < l->nslots; i++)
		for (unsigned k = 0; k < l->K; k++) {
			struct rf__slot *s = &l->slots[i];
			if (rf_fill(NULL, s->x[k], 0.0f) < 0 || (s->ud[k] && rf_fill(NULL, s->ud[k], 0.0f) < 0) ||
			    (s->y[k] && s->y[k] != s->yh[k] && rf_fill(NULL, s->y[k], 0.0f) < 0)) {
				ret = -ENOMEM;
				rf__err(err, errlen, "loader: cannot initialise the batch tensors");
				goto fail;
			}
		}
	for (i = 0; i < l->nslots; i++)
		for (unsigned k = 0; k < l->K; k++) {
			struct rf__slot *s = &l->slots[i];
			ret = rf_tensor_wait(s->x[k]);
			if (!ret && s->ud[k])
				ret = rf_tensor_wait(s->ud[k]);
			if (!ret && s->y[k] && s->y[k] != s->yh[k])
				ret = rf_tensor_wait(s->y[k]);
			if (ret < 0) {
				rf__err(err, errlen, "loader: initialising the batch tensors failed: %s",
					strerror(-ret));
				goto fail;
			}
		}
	ret = rf_worker_stream_create(e, "loader", 0, &l->gs);
	if (ret < 0) {
		rf__err(err, errlen, "loader: cannot start the gather stream: %s", strerror(-ret));
		goto fail;
	}
	/* order[] holds the records' order; SPAN appends the inverse chunk order. */
	l->order = malloc((l->count + l->C) * sizeof(*l->order));
	if (l->mode == RF__SPAN)
		l->cpos = malloc(l->C * sizeof(*l->cpos));
	if (!l->order || (l->mode == RF__SPAN && !l->cpos)) {
		ret = -ENOMEM;
		goto fail;
	}
	l->st.direct = l->direct;
	l->st.registered = l->registered;
	l->st.mode = l->mode;
	l->st.chunk_records = l->R;
	l->st.window_chunks = (unsigned)l->W;
	l->st.fetch_units = l->nunits;
	*out = l;
	return 0;
fail:
	if (err && errlen && !err[0])
		rf__err(err, errlen, "loader: %s", strerror(-ret));
	rf_loader_destroy(l);
	return ret;
}

void rf_loader_destroy(struct rf_loader *l)
{
	unsigned i, k;

	if (!l)
		return;
	rf_engine_wait_idle(l->e);
	for (i = 0; l->slots && i < l->nslots; i++) {
		struct rf__slot *s = &l->slots[i];
		for (k = 0; k < l->K; k++) {
			if (s->y[k] != s->yh[k])
				rf_tensor_free(s->y[k]);
			rf_tensor_free(s->yh[k]);
			rf_tensor_free(s->su[k]);
			rf_tensor_free(s->ud[k]);
			rf_tensor_free(s->x[k]);
		}
	}
	for (i = 0; l->units && i < l->nunits; i++)
		if (l->units[i].var)
			rf_var_delete(l->e, l->units[i].var, NULL, NULL, NULL);
	if (l->gs)
		rf_stream_destroy(l->gs); /* waits for all the engine's work */
	else
		rf_engine_wait_idle(l->e);
	/* Every read is done: the ring lets go of the arena before it is unmapped. */
	if (l->registered)
		rf_ring_unregister_memory(l->ring, rf_pinned_base(l->uarena));
	rf_pinned_destroy(l->sarena);
	rf_pinned_destroy(l->uarena);
	if (l->fd >= 0)
		close(l->fd);
	free(l->pmem_own);
	free(l->lmem_own);
	free(l->units);
	free(l->ferr);
	free(l->slots);
	free(l->order);
	free(l->cpos);
	free(l);
}

/* ---- next ---------------------------------------------------------------------------- */

static int rf__start_epoch(struct rf_loader *l)
{
	int ret = rf__plan(l, l->epoch, l->order, l->cpos);
	uint64_t c;

	if (ret < 0)
		return ret;
	if (l->mode == RF__SPAN) {
		for (c = 0; c < l->C; c++)
			l->order[l->count + l->cpos[c]] = c;
		l->gbase = l->gnext;
	}
	l->planned = 1;
	return 0;
}

static inline uint64_t rf__group_of(const struct rf_loader *l, uint64_t rec)
{
	return l->gbase + l->cpos[rec / l->R] / l->W;
}

static int rf__clear_slot(struct rf_loader *l, struct rf__slot *s)
{
	unsigned k;
	int ret = 0;

	for (k = 0; k < l->K && !ret; k++) {
		ret = rf_var_clear_error(l->e, s->su[k]->var);
		if (!ret)
			ret = rf_var_clear_error(l->e, s->x[k]->var);
		if (!ret && s->ud[k])
			ret = rf_var_clear_error(l->e, s->ud[k]->var);
		if (!ret && s->yh[k])
			ret = rf_var_clear_error(l->e, s->yh[k]->var);
		if (!ret && s->y[k] && s->y[k] != s->yh[k])
			ret = rf_var_clear_error(l->e, s->y[k]->var);
	}
	return ret;
}

int rf_loader_next(struct rf_loader *l, struct rf_batch *b)
{
	const struct rf_dataset *ds = l->ds;
	const struct rf_dataset_src *s0 = &ds->src[RF_DS_SRC_PAYLOAD];
	uint64_t t = l->t, p0, i;
	unsigned n, k, si;
	struct rf__slot *s;
	struct rf__gjob *j;
	struct rf_var *reads[8], *writes[2 * RF_LOADER_MAX_SHARDS];
	unsigned nr = 0, nw = 0;
	int ret;

	if (!l || !b)
		return -EINVAL;
	if (t == l->nbatches) {
		l->epoch++;
		l->t = 0;
		l->planned = 0;
		return 0;
	}
	if (!l->planned && (ret = rf__start_epoch(l)) < 0)
		return ret;
	p0 = t * l->o.batch;
	n = t < l->nfull ? l->o.batch : (unsigned)(l->count - p0);
	si = t < l->nfull ? (unsigned)(l->nfull_done % l->N)
			  : l->nfslots + (unsigned)(l->ntail_done % l->ntail);
	s = &l->slots[si];

	j = malloc(sizeof(*j) + (size_t)n * (2 * sizeof(void *) + sizeof(uint64_t)));
	if (!j)
		return -ENOMEM;
	memset(j, 0, sizeof(*j));
	j->l = l;
	j->s = s;
	j->epoch = l->epoch;
	j->index = t;
	j->n = n;
	j->pp = (const uint8_t **)(j + 1);
	j->lp = l->labels ? j->pp + n : NULL;
	j->idx = (uint64_t *)(j->pp + 2 * n);

	/* 1. reads, and where each record will lie */
	if (l->mode == RF__MEM) {
		for (i = 0; i < n; i++) {
			uint64_t r = l->order[p0 + i];
			struct rf_dataset_loc loc = { 0 };
			j->idx[i] = r;
			rf_dataset_payload_loc(ds, r, &loc);
			j->pp[i] = l->pmem + loc.offset;
			if (j->lp) {
				rf_dataset_label_loc(ds, r, &loc);
				j->lp[i] = l->lmem + loc.offset;
			}
		}
	} else if (l->mode == RF__REC) {
		struct rf__unit *u = &l->units[l->nbatch_done % l->nunits];
		struct rf__fetch *f = calloc(1, sizeof(*f) + n * sizeof(f->req[0]));
		if (!f) {
			free(j);
			return -ENOMEM;
		}
		for (i = 0; i < n; i++) {
			uint64_t r = l->order[p0 + i], off, len, a = s0->data_offset + r * s0->stride;
			const uint8_t *rec;
			rf_dataset_span(ds, RF_DS_SRC_PAYLOAD, r, 1, l->align, &off, &len);
			f->req[i].f = f;
			f->req[i].rec0 = r;
			f->req[i].nrec = 1;
			f->req[i].off = off;
			f->req[i].len = (uint32_t)len;
			f->req[i].need = (uint32_t)(a + s0->stride - off);
			f->req[i].dst = i * l->chunk_cap;
			rec = u->buf + i * l->chunk_cap + (a - off);
			j->idx[i] = r;
			j->pp[i] = rec + ds->payload_offset;
			if (j->lp) {
				struct rf_dataset_loc loc = { 0 };
				rf_dataset_label_loc(ds, r, &loc);
				j->lp[i] = ds->label_src == RF_DS_SRC_PAYLOAD ? rec + ds->label_offset
									   : l->lmem + loc.offset;
			}
		}
		f->n = n;
		f->id = l->nbatch_done;
		ret = rf__push_fetch(l, u, f);
		if (ret < 0) {
			free(j);
			return ret;
		}
		j->fid[j->nunits++] = l->nbatch_done;
		reads[nr++] = u->var;
	} else {
		uint64_t gfirst = rf__group_of(l, l->order[p0]);
		uint64_t glast = rf__group_of(l, l->order[p0 + n - 1]);
		uint64_t gend = l->gbase + l->ngroups, G;
		/* push every group we may: the batch's, then read-ahead */
		while (l->gnext < gend && l->gnext < gfirst + l->nunits) {
			ret = rf__push_group(l, l->gnext);
			if (ret < 0) {
				free(j);
				return ret;
			}
			l->gnext++;
		}
		if (glast >= l->gnext) { /* cannot happen: nunits covers a batch's span */
			free(j);
			return -EOVERFLOW;
		}
		for (G = gfirst; G <= glast; G++) {
			j->fid[j->nunits++] = G;
			reads[nr++] = l->units[G % l->nunits].var;
		}
		for (i = 0; i < n; i++) {
			uint64_t r = l->order[p0 + i], c = r / l->R, pos = l->cpos[c];
			uint64_t Gr = l->gbase + pos / l->W, w = pos % l->W, off, len, need;
			uint64_t a = s0->data_offset + r * s0->stride;
			const uint8_t *rec;
			rf__chunk_span(l, c, &off, &len, &need);
			rec = l->units[Gr % l->nunits].buf + w * l->chunk_cap + (a - off);
			j->idx[i] = r;
			j->pp[i] = rec + ds->payload_offset;
			if (j->lp) {
				struct rf_dataset_loc loc = { 0 };
				rf_dataset_label_loc(ds, r, &loc);
				j->lp[i] = ds->label_src == RF_DS_SRC_PAYLOAD ? rec + ds->label_offset
									   : l->lmem + loc.offset;
			}
		}
	}

	/* 2. the slot's poison from an earlier failure goes before its reuse */
	ret = rf__clear_slot(l, s);
	if (ret < 0) {
		free(j);
		return ret;
	}

	/* 3. gather */
	for (k = 0; k < l->K; k++) {
		writes[nw++] = s->su[k]->var;
		if (s->yh[k])
			writes[nw++] = s->yh[k]->var;
	}
	{
		struct rf_op_desc d = { 0 };
		d.fn = rf__gather_run;
		d.ctx = j;
		d.done = rf__gather_done;
		d.reads = reads;
		d.nreads = nr;
		d.writes = writes;
		d.nwrites = nw;
		d.stream = l->gs;
		d.name = "loader_gather";
		ret = rf_engine_push(l->e, &d);
		if (ret < 0) {
			free(j);
			return ret;
		}
	}

	/* 4. decode on the devices */
	for (k = 0; k < l->K; k++) {
		struct rf_device *d = l->o.devices[k];
		if (l->cuda) {
			ret = rf_copy(NULL, s->ud[k], s->su[k]);
			if (!ret)
				ret = rf_u8_to_f32(NULL, s->x[k], s->ud[k], l->o.scale, l->o.mean, l->o.std);
			if (!ret && s->y[k])
				ret = rf_copy(NULL, s->y[k], s->yh[k]);
		} else {
			unsigned ns = rf_device_nstreams(d);
			struct rf_stream *st = rf_device_stream(d, (unsigned)((t + k) % (ns ? ns : 1)));
			ret = rf_u8_to_f32(st, s->x[k], s->su[k], l->o.scale, l->o.mean, l->o.std);
		}
		if (ret < 0)
			return ret;
	}

	memset(b, 0, sizeof(*b));
	b->epoch = l->epoch;
	b->index = t;
	b->n = n;
	b->nshards = l->K;
	b->slot = si;
	for (k = 0; k < l->K; k++) {
		b->shard_n[k] = s->sn[k];
		b->x[k] = s->x[k];
		b->y[k] = s->y[k];
	}
	l->t++;
	l->nbatch_done++;
	if (t < l->nfull)
		l->nfull_done++;
	else
		l->ntail_done++;
	l->st.batches++;
	l->st.records += n;
	return 1;
}

uint64_t rf_loader_batches_per_epoch(const struct rf_loader *l)
{
	return l->nbatches;
}

void rf_loader_seek_epoch(struct rf_loader *l, uint64_t epoch)
{
	l->epoch = epoch;
	l->t = 0;
	l->planned = 0;
}

int rf_loader_wait(struct rf_loader *l, const struct rf_batch *b)
{
	int ret = 0, r;
	unsigned k;

	for (k = 0; k < b->nshards; k++) {
		r = rf_engine_wait_var(l->e, b->x[k]->var);
		if (r < 0 && !ret)
			ret = r;
		if (b->y[k]) {
			r = rf_engine_wait_var(l->e, b->y[k]->var);
			if (r < 0 && !ret)
				ret = r;
		}
	}
	return ret;
}

const char *rf_loader_batch_error(const struct rf_loader *l, const struct rf_batch *b)
{
	unsigned i;

	if (!l || !b)
		return "";
	for (i = 0; i < RF__ERRLOG; i++)
		if (l->log[i].used && l->log[i].epoch == b->epoch && l->log[i].index == b->index)
			return l->log[i].msg;
	return "";
}

const char *rf_loader_last_error(const struct rf_loader *l)
{
	return l ? l->last_err : "";
}

void rf_loader_get_stats(const struct rf_loader *l, struct rf_loader_stats *st)
{
	*st = l->st;
}
