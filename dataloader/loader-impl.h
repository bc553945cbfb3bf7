/* loader-impl.h -- the loader's state and the steps loader.c strings together.
 * Internal to dataloader/. Files: loader.c (create/destroy/next API), loader-plan.c
 * (epoch order, window geometry), loader-source.c (sources: in-memory copies, the
 * O_DIRECT reopen), loader-read.c (fetch units, read ops through the ring),
 * loader-gather.c (records -> slot staging + labels), loader-slot.c (batch slots and
 * their tensors), loader-decode.c (u8 -> f32 on the devices). */
#ifndef RINGFLOW_LOADER_IMPL_H
#define RINGFLOW_LOADER_IMPL_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "http-impl.h"
#include "dataset-impl.h"
#include "image-impl.h"
#include "loader.h"
#include "ops.h"
#include "slab.h"
#include "u8norm.h"

/* How records reach a batch (l->mode, rf_loader_stats.mode). */
enum { RF__MEM = 0, RF__SPAN = 1, RF__REC = 2 };

#define RF__ERRLEN 384
#define RF__ERRLOG 256 /* failed batches whose messages are kept */
#define RF__MAXREADS 8 /* fetch units one gather may read */
#define RF__MAXGS 16   /* gather streams */

/* A fetch unit: a read buffer with an engine variable. */
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

/* One ring read of a fetch: the loader's own record (the ring's request record is
 * ring/ring-impl.h's rf__req). */
struct rf__lread {
	struct rf__fetch *f;
	uint64_t rec0, nrec;      /* the records the read is for (file order) */
	unsigned part;            /* the shard it reads (l->pfd), 0 without parts */
	uint64_t off;             /* file offset (aligned; in that shard's file) */
	uint32_t len;             /* aligned length */
	uint32_t need;            /* bytes that must arrive (through the last record) */
	size_t dst;               /* offset in the unit's buffer */
	struct rf__lread *next;     /* the loader's read queue (rf__rq_*) */
};

/* One fetch: a pushed read op; freed when it finishes. */
struct rf__fetch {
	struct rf_loader *l;
	struct rf__unit *u;
	struct rf_op *op;
	uint64_t id;              /* see struct rf__ferr */
	unsigned n, pending;      /* requests; those not yet finished (queued or in flight) */
	int status;
	int starting;             /* 1 while its op's start function runs */
	struct rf__hreq *hq;      /* remote: one range request per req[] */
	struct rf__lread req[];
};

/* A batch slot: staging and device tensors of one batch in flight. */
struct rf__slot {
	unsigned cap;             /* records in a batch of this slot */
	unsigned sn[RF_LOADER_MAX_SHARDS], soff[RF_LOADER_MAX_SHARDS];
	uint8_t *stage;           /* cap * pb bytes, shards back to back */
	int32_t *lab;             /* cap labels */
	struct rf_tensor *su[RF_LOADER_MAX_SHARDS];  /* u8 staging (host) */
	struct rf_tensor *yh[RF_LOADER_MAX_SHARDS];  /* i32 labels (host) */
	struct rf_tensor *ud[RF_LOADER_MAX_SHARDS];  /* remote: u8 on the device */
	struct rf_tensor *x[RF_LOADER_MAX_SHARDS];   /* f32 on the device */
	struct rf_tensor *y[RF_LOADER_MAX_SHARDS];   /* i32 on the device (CPU: == yh) */
};

/* The message of a failed batch, by (epoch, index). */
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
	uint64_t fid[RF__MAXREADS]; /* ids of the fetches it reads */
	struct rf_var *reads[RF__MAXREADS]; /* their units' variables */
	unsigned w;               /* the gather stream it runs on */
	char err[RF__ERRLEN];     /* written by the worker on a bad label or image */
	const uint8_t **pp;       /* payload of record j */
	uint32_t *pl;             /* its length (a variable dataset's records) */
	const uint8_t **lp;       /* label of record j, or NULL */
	uint64_t *idx;            /* record index (for messages) */
	unsigned skipped;         /* skip_bad_images: images replaced (counted when done) */
	uint8_t *bad;             /* skip_bad_images: bad[j] (n bytes), else NULL */
	uint64_t gen;             /* l->gen when pushed (rf__skip_note) */
	char warn[RF__ERRLEN];    /* skip_bad_images: the first bad image's message */
};

/* skip_bad_images: a batch's bad images, kept until the consumer is given them
 * (rf_loader_wait, rf_loader_images_skipped): a batch pushed ahead and never used --
 * the next epoch's first batches at the end of a run -- is neither said nor counted. */
#define RF__SKIPLOG 64
struct rf__skipwarn {
	uint64_t gen, epoch, index;
	unsigned n;               /* images skipped in that batch */
	int used;                 /* 1: not yet said */
	char msg[RF__ERRLEN];     /* the first one's */
};

struct rf_loader {
	struct rf_engine *e;
	struct rf_ring *ring;
	const struct rf_dataset *ds;
	struct rf_loader_opts o;
	int mode, labels;
	int closing;                   /* rf_loader_destroy has begun: reads are cancelled */
	int remote;                    /* the devices' memory is not host memory: batches
					* are staged on the host and copied over */
	/* the record served: (3, image_size, image_size) for images, else the dataset's */
	unsigned ndim;
	uint32_t shape[RF_DS_MAX_DIMS];
	int image;                     /* records are encoded images, decoded by the gather */
	struct rf__u8norm norm;        /* u8 -> float: opts' scale, mean and std, or per channel */
	struct rf__img_opts io;        /* their decode and augmentation */
	unsigned K, N;            /* shards (devices), full slots */
	unsigned T, base;         /* shards per batch over all processes; our first */
	size_t pb;                /* payload bytes */
	uint64_t count, nbatches, nfull;
	uint64_t align;

	int fd, direct, registered;
	/* several shards (ds->parts): each reopened for ring reads, l->fd unused (-1); a
	 * read names its shard (rf__lread.part) and lies inside it */
	int *pfd;
	unsigned npfd;
	struct rf__http *http;    /* a remote payload (http://): its range client, else NULL */
	unsigned rflags;
	const uint8_t *pmem;      /* payload source in memory (whole file), or NULL */
	uint8_t *pmem_own;
	const uint8_t *lmem;      /* label source in memory (whole file), or NULL */
	uint8_t *lmem_own;

	/* The read queue: every fetch's requests wait here in push order and go to the
	 * ring while the bytes in flight stay within rq_max (at least one read is always
	 * in flight while any waits), so the device sees a steady queue depth whatever
	 * the batch size and the prefetch depth -- and their count within rq_nmax, the
	 * queue depth of the device under the payload files (loader-source.c: rf__dev_depth;
	 * 0: no device, no bound but the bytes). */
	struct rf__lread *rq_head, *rq_tail;
	size_t rq_bytes, rq_max;  /* bytes in flight; their bound */
	unsigned rq_n;            /* reads in flight */
	unsigned rq_nmax;         /* their bound, or 0 */
	int rq_busy;              /* rf__rq_pump is running (it is not re-entered) */

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
	unsigned fcur, tcur;      /* the full and tail slots the next batches try first (the
				   * rotation runs on across epochs) */
	/* nslots references (rf_loader_ref): a slot with any is skipped by the rotation.
	 * Allocated at create and never moved, so any thread may rf_loader_unref: the
	 * decrement releases, the owner's slot choice (rf__slot_of) acquires. */
	_Atomic unsigned *refs;
	uint64_t nbatch_done;     /* batches pushed, all epochs (REC fetch units) */
	/* a batch's gather job and fetch, from slabs (reactor only): given back and
	 * taken again, not malloc'd and freed, so their pages stay faulted in -- a
	 * fresh page's first touch costs ~15 us on a virtual machine, and up to the
	 * engine's in-flight cap of each are out at once */
	struct rf__slab gjobs;    /* sized for a full batch */
	struct rf__slab fetches;  /* sized for max(batch, W) requests */
	/* Gather worker streams: batch t gathers on gs[t mod ngs] (one but for images);
	 * each with its image decoder and, fused with augmentation, one record of scratch */
	struct rf_stream *gs[RF__MAXGS];
	unsigned ngs;
	uint64_t ngather;         /* gathers pushed */
	struct rf__imgctx *img[RF__MAXGS];
	uint8_t *gscratch[RF__MAXGS];
	struct rf_device *host;

	uint64_t epoch, t;        /* next batch: (epoch, t) */
	int planned;
	uint64_t *order;          /* the epoch's records; SPAN appends the inverse chunk order */

	struct rf_loader_stats st;
	/* skip_bad_images: images skipped per batch of the last two epochs gathered (by
	 * epoch parity), in batches pushed since the last seek (gen: rf_loader_seek and
	 * rf_loader_seek_epoch count it; a batch pushed before one is not delivered);
	 * skipn[] NULL without skip_bad_images */
	uint32_t *skipn[2];
	uint64_t skip_epoch[2], skip_gen[2];
	uint64_t gen;
	struct rf__skipwarn *skipw;    /* RF__SKIPLOG, a ring at iskipw */
	unsigned iskipw;
	uint64_t skipw_lost;           /* warnings overwritten before they were said */
	struct rf__ferr *ferr;    /* failed fetches' messages, a ring of nferr */
	unsigned nferr, iferr;
	char last_err[RF__ERRLEN];
	struct rf__errlog log[RF__ERRLOG];
	unsigned nlog;
};

/* Host devices (!remote) with f32 row-major batches: the gather decodes each record
 * straight into the batch's tensors -- no u8 staging, no staging copy and no decode op.
 * Otherwise the gather fills u8 staging and rf_u8_to_f32 decodes it into x's format. */
static inline int rf__fused(const struct rf_loader *l)
{
	return !l->remote && l->o.x_dtype == RF_F32 && l->o.x_layout == RF_LAYOUT_ROWMAJOR;
}

/* u8 batches in NHWC: the gather writes each sample's channels interleaved. */
static inline int rf__hwc(const struct rf_loader *l)
{
	return l->o.x_dtype == RF_U8 && l->o.x_layout == RF_LAYOUT_NHWC;
}

static inline size_t rf__align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* ---- loader-plan.c ---- */
/* SPAN: records per chunk R, chunks C, chunks per window W (widened until one batch
 * spans at most 8 windows); returns the windows one batch can touch. */
uint64_t rf__plan_windows(struct rf_loader *l);
/* The epoch's order into l->order (and l->cpos, the inverse chunk order). */
int rf__start_epoch(struct rf_loader *l);
/* Go on to epoch `epoch` at its first batch: the end of an epoch read through, not a
 * seek (the batches pushed before stay delivered: l->gen unchanged). */
void rf__next_epoch(struct rf_loader *l, uint64_t epoch);

/* SPAN: the global group (window) that holds record rec this epoch. */
static inline uint64_t rf__group_of(const struct rf_loader *l, uint64_t rec)
{
	return l->gbase + l->cpos[rec / l->R] / l->W;
}

/* ---- loader-source.c ---- */
/* Labels of a separate file and (MEM) the payload into memory; else reopen the
 * payload file for ring reads. Sets l->mode. 0 or -errno with rf_last_error(). */
int rf__open_sources(struct rf_loader *l);
/* Close the payload file(s) the loader reopened. */
void rf__close_sources(struct rf_loader *l);

/* ---- loader-read.c ---- */
/* Fetch units: the read arena (registered with the ring if it may), one variable each. */
int rf__units_create(struct rf_loader *l);
/* Push the reads of batch records order[p0, p0+n) and point j at where each
 * record's payload and label will lie. */
int rf__read_batch(struct rf_loader *l, uint64_t p0, struct rf__gjob *j);
/* Bytes of a fetch of n requests. */
size_t rf__fetch_bytes(unsigned n);
/* A zeroed fetch of n <= max(batch, W) requests, from l->fetches; NULL when out of
 * memory. */
struct rf__fetch *rf__fetch_new(struct rf_loader *l, unsigned n);
/* Give f (and its range requests) back. */
void rf__fetch_free(struct rf_loader *l, struct rf__fetch *f);
/* The message of failed fetch id, or NULL. */
const char *rf__fetch_msg(const struct rf_loader *l, uint64_t id);

/* ---- loader-gather.c ---- */
/* Bytes of a gather job for n records (its slab takes a full batch's). */
size_t rf__gjob_bytes(unsigned n);
/* A job for n <= batch records of slot s, from l->gjobs (given back there when its op
 * is done); NULL when out of memory. */
struct rf__gjob *rf__gjob_new(struct rf_loader *l, struct rf__slot *s, unsigned n);
/* Push the gather op of j (owns j from here, success or not). */
int rf__push_gather(struct rf_loader *l, struct rf__gjob *j);
/* skip_bad_images: log the warnings not yet said of batches [first, end) of epoch
 * `epoch` (pushed since the last seek) and return the images they skipped. */
uint64_t rf__skip_report(struct rf_loader *l, uint64_t epoch, uint64_t first, uint64_t end);

/* ---- loader-slot.c ---- */
/* N full slots and the tail slots, their tensors allocated and touched. */
int rf__slots_create(struct rf_loader *l);
void rf__slots_free(struct rf_loader *l);
/* Clear the poison an earlier failure left on the slot's variables. */
int rf__clear_slot(struct rf_loader *l, struct rf__slot *s);

/* ---- loader-decode.c ---- */
/* Push the decode of slot s onto every device (none when rf__fused). */
int rf__push_decode(struct rf_loader *l, struct rf__slot *s);

/* The rows [*lo, *hi) of a batch of n records that this loader's shards take. */
static inline void rf__local_rows(const struct rf_loader *l, unsigned n, unsigned *lo,
				  unsigned *hi)
{
	*lo = (unsigned)((uint64_t)n * l->base / l->T);
	*hi = (unsigned)((uint64_t)n * (l->base + l->K) / l->T);
}

#endif
