/* test-loader-util.h -- helpers for the loader tests: a ring + engine + CPU devices,
 * synthetic record files whose records encode their own index, and an epoch runner
 * that never waits: per batch it pushes a host op that reads the batch's tensors and
 * checks every row against the dataset's own accessor (rf_dataset_read_record), so
 * payloads and labels must stay paired. */
#ifndef RF_TEST_LOADER_UTIL_H
#define RF_TEST_LOADER_UTIL_H

#include <math.h>

#include "dl-test.h"
#include "loader.h"
#include "ops.h"

struct tl_env {
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *dev[RF_LOADER_MAX_SHARDS];
	unsigned ndev;
};

/* The engine's in-flight cap for tl_open (0: the engine's default), and its
 * synchronous debug mode (1: on). */
static unsigned tl_max_inflight;
static int tl_sync;

static inline void tl_open(struct tl_env *v, unsigned ndev)
{
	memset(v, 0, sizeof(*v));
	CHECK(rf_ring_create(&v->ring, NULL) == 0);
	CHECK(rf_engine_create(&v->e, v->ring,
			       &(struct rf_engine_opts){ .max_inflight = tl_max_inflight,
							 .sync = tl_sync }) == 0);
	for (unsigned i = 0; i < ndev; i++)
		CHECK(rf_cpu_open(v->e, &(struct rf_cpu_opts){ .streams = 1 }, &v->dev[i]) == 0);
	v->ndev = ndev;
}

static inline void tl_close(struct tl_env *v)
{
	for (unsigned i = 0; i < v->ndev; i++)
		rf_device_close(v->dev[i]);
	rf_engine_destroy(v->e);
	rf_ring_destroy(v->ring);
}

/* Byte k of record i's payload: bytes 0..3 are i (little-endian), the rest vary. */
static inline uint8_t tl_byte(uint64_t i, size_t k)
{
	if (k < 4)
		return (uint8_t)(i >> (8 * k));
	return (uint8_t)(i * 131 + k * 7 + (i >> 5) + (k >> 8));
}

/* A .rfrec of count records of P u8 bytes, label i % 10 (u8 or i32). */
/* The same with records of shape (ndim dims, their product P). */
static inline const char *tl_make_rfrec_shape(const char *name, uint64_t count, unsigned ndim,
					      const uint32_t *shape, enum rf_label_kind lk)
{
	const char *path = t_path(name);
	struct rf_rec_layout lay = { 0 };
	struct rf_rec_writer *w;
	uint32_t P = 1;
	uint8_t *buf;

	for (unsigned d = 0; d < ndim; d++)
		P *= shape[d];
	buf = malloc(P);
	CHECK(buf);
	lay.dtype = RF_DS_DT_U8;
	lay.ndim = ndim;
	for (unsigned d = 0; d < ndim; d++)
		lay.shape[d] = shape[d];
	lay.label_kind = lk;
	lay.num_classes = lk == RF_LABEL_NONE ? 0 : 10;
	CHECK_OPEN(rf_rec_writer_open(&w, path, &lay, RF_REC_OVERWRITE), rf_last_error());
	for (uint64_t i = 0; i < count; i++) {
		for (uint32_t k = 0; k < P; k++)
			buf[k] = tl_byte(i, k);
		CHECK_OPEN(rf_rec_writer_append(w, buf, (int32_t)(i % 10)), rf_last_error());
	}
	CHECK_OPEN(rf_rec_writer_finish(w), rf_last_error());
	free(buf);
	return path;
}

static inline const char *tl_make_rfrec(const char *name, uint64_t count, uint32_t P,
					enum rf_label_kind lk)
{
	return tl_make_rfrec_shape(name, count, 1, &P, lk);
}

/* Position-weighted checksum of a record's bytes. */
T_TSAN_WHOLE static inline uint64_t tl_sum_bytes(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t k = 0; k < n; k++)
		h = (h ^ p[k]) * 1099511628211ull;
	return h;
}

/* ---- an epoch, checked -------------------------------------------------------------- */

struct tl_run;

struct tl_bctx {
	struct tl_run *run;
	struct rf_batch b;
	uint64_t pos0;           /* position of the batch's first record in the epoch */
	int checked;             /* 1: the host op ran */
};

struct tl_run {
	const struct rf_dataset *ds;
	uint64_t *ref;           /* per record: checksum from rf_dataset_read_record */
	int32_t *ref_label;
	uint64_t *order;         /* position -> record seen */
	uint64_t *expect;        /* position -> record, as rf_loader_order says */
	uint32_t *seen;          /* record -> times seen */
	struct tl_bctx *b;
	uint64_t nb, records, bad;
	float scale, mean, std;
	uint8_t *row;
	unsigned base, T;        /* a loader of shards base.. of T per batch (T 0: all) */
	uint64_t start, bsz;     /* tl_epoch after rf_loader_seek: its first batch, and the
				  * batch size (start 0: the whole epoch) */
};

static inline void tl_run_init(struct tl_run *r, const struct rf_dataset *ds)
{
	memset(r, 0, sizeof(*r));
	r->ds = ds;
	r->ref = calloc(ds->count, sizeof(*r->ref));
	r->ref_label = calloc(ds->count, sizeof(*r->ref_label));
	r->order = calloc(ds->count, sizeof(*r->order));
	r->expect = calloc(ds->count, sizeof(*r->expect));
	r->seen = calloc(ds->count, sizeof(*r->seen));
	r->row = malloc(ds->payload_bytes);
	CHECK(r->ref && r->ref_label && r->order && r->expect && r->seen && r->row);
	for (uint64_t i = 0; i < ds->count; i++) {
		CHECK(rf_dataset_read_record(ds, i, r->row, &r->ref_label[i]) == 0);
		r->ref[i] = tl_sum_bytes(r->row, ds->payload_bytes);
	}
	r->scale = 1.0f / 255.0f;
	r->std = 1.0f;
}

static inline void tl_run_free(struct tl_run *r)
{
	free(r->ref);
	free(r->ref_label);
	free(r->order);
	free(r->expect);
	free(r->seen);
	free(r->b);
	free(r->row);
}

/* A row's floats back to the bytes they were made from; -1 if one is not a byte. */
T_TSAN_WHOLE static int tl_row_bytes(uint8_t *row, const float *x, size_t P,
				       const struct tl_run *r)
{
	for (size_t q = 0; q < P; q++) {
		long b = lrintf((x[q] * r->std + r->mean) / r->scale);
		if (b < 0 || b > 255)
			return -1;
		row[q] = (uint8_t)b;
	}
	return 0;
}

/* The host op: decode every row back to bytes and compare them (checksum) and the
 * label with the record rf_dataset_read_record gives for that position of the order;
 * the order itself must be a permutation (tl_expect_complete). */
static int tl_check_batch(void *arg)
{
	struct tl_bctx *c = arg;
	struct tl_run *r = c->run;
	const struct rf_dataset *ds = r->ds;
	size_t P = ds->payload_bytes;
	uint64_t pos = c->pos0;

	c->checked = 1;
	for (unsigned k = 0; k < c->b.nshards; k++) {
		const float *x = c->b.x[k]->data;
		const int32_t *y = c->b.y[k] ? c->b.y[k]->data : NULL;
		CHECK_EQ(c->b.x[k]->shape[0], c->b.shard_n[k]);
		/* the batch's memory declared to ThreadSanitizer whole: the loops below
		 * read it unchecked (test-util.h, T_TSAN_WHOLE) */
		t_tsan_read(x, c->b.shard_n[k] * P * sizeof(float));
		t_tsan_write(r->row, P);
		for (unsigned j = 0; j < c->b.shard_n[k]; j++, pos++) {
			CHECK(tl_row_bytes(r->row, x + (size_t)j * P, P, r) == 0);
			uint64_t h = tl_sum_bytes(r->row, P), rec = r->expect[pos];
			if (r->ref[rec] != h) {
				fprintf(stderr, "batch %" PRIu64 " row %u (position %" PRIu64 "): bytes "
					"differ from record %" PRIu64 "\n", c->b.index, j, pos, rec);
				r->bad++;
				continue;
			}
			if (y && y[j] != r->ref_label[rec]) {
				fprintf(stderr, "batch %" PRIu64 " row %u: record %" PRIu64 " label %d, "
					"expected %d\n", c->b.index, j, rec, y[j], r->ref_label[rec]);
				r->bad++;
			}
			r->seen[rec]++;
			r->order[pos] = rec;
			r->records++;
		}
	}
	return 0;
}

/* Run the loader's current epoch: push every batch (never waiting), each followed by
 * its checking host op; then wait for everything. Returns the batches served; failed
 * batches (poisoned) are counted in *failed (may be NULL), with their messages
 * checked to name path when path is not NULL. */
static inline uint64_t tl_epoch(struct tl_env *v, struct rf_loader *l, struct tl_run *r,
				uint64_t *failed, const char *path)
{
	uint64_t nb = rf_loader_batches_per_epoch(l), t = r->start, pos = r->start * r->bsz;
	uint64_t nfail = 0, t0 = t;
	/* pos: the epoch position of the batch's first record; with shards of another
	 * process's loaders, ours start global_n*base/T into it */
	int ret;

	free(r->b);
	r->b = calloc(nb, sizeof(*r->b));
	CHECK(r->b);
	memset(r->seen, 0, r->ds->count * sizeof(*r->seen));
	r->records = 0;
	r->nb = nb;
	for (;;) {
		struct rf_batch b;
		ret = rf_loader_next(l, &b);
		CHECK(ret >= 0);
		if (ret == 0)
			break;
		CHECK(t < nb);
		CHECK_EQ(b.index, t);
		if (t == t0)
			CHECK(rf_loader_order(l, b.epoch, r->expect, r->ds->count) == 0);
		struct tl_bctx *c = &r->b[t];
		c->run = r;
		c->b = b;
		c->pos0 = pos + (r->T ? (uint64_t)b.global_n * r->base / r->T : 0);
		CHECK(r->T || b.global_n == b.n);
		struct rf_tensor *rd[2 * RF_LOADER_MAX_SHARDS];
		unsigned nrd = 0;
		for (unsigned k = 0; k < b.nshards; k++) {
			rd[nrd++] = b.x[k];
			if (b.y[k])
				rd[nrd++] = b.y[k];
		}
		CHECK(rf_host_op(NULL, tl_check_batch, c, rd, nrd, NULL, 0, "check") == 0);
		pos += b.global_n;
		t++;
	}
	CHECK_EQ(t, nb);
	rf_engine_wait_all(v->e);
	for (t = t0; t < nb; t++) {
		if (!r->b[t].checked) {
			const char *m = rf_loader_batch_error(l, &r->b[t].b);
			nfail++;
			if (path && !strstr(m, t_base(path))) {
				fprintf(stderr, "batch %" PRIu64 " failed without naming %s: '%s'\n", t,
					path, m);
				exit(1);
			}
			if (path && !strstr(m, "offset")) {
				fprintf(stderr, "batch %" PRIu64 ": message lacks the offset: '%s'\n", t, m);
				exit(1);
			}
		}
	}
	if (failed)
		*failed = nfail;
	CHECK_EQ(r->bad, 0);
	return nb;
}

/* Every record exactly once (a complete epoch). */
static inline void tl_expect_complete(const struct tl_run *r)
{
	for (uint64_t i = 0; i < r->ds->count; i++)
		if (r->seen[i] != 1) {
			fprintf(stderr, "record %" PRIu64 " seen %u times\n", i, r->seen[i]);
			exit(1);
		}
	CHECK_EQ(r->records, r->ds->count);
}

#endif
