/* test-loader-slots -- references to batch slots (rf_loader_ref, rf_loader_unref,
 * rf_loader_refs) keep a kept batch's memory from being overwritten:
 * - every slot starts with no references; ref and unref move the count by one each,
 *   and a slot with any is never chosen (rf_loader_next_slot, rf_loader_next): its
 *   batch keeps its bytes while the rotation goes on through the others, full slots
 *   and tail slots alike; with every slot referenced rf_loader_next_slot is -1 and
 *   rf_loader_next fails with -EBUSY naming rf_loader_ref, and goes on, in the slot
 *   let go, once one reference is;
 * - an unref of a slot without references is refused (-EINVAL naming the slot) and
 *   the count stays 0 (never wraps); a slot past the last and a NULL loader are
 *   refused by both, naming the slot and the range;
 * - threads: the owner loops rf_loader_next_slot / rf_loader_next / rf_loader_wait,
 *   references each batch's slot twice and publishes it; two consumer threads each
 *   read every row of it (the records' own bytes and labels), one of them also taking
 *   and letting go a reference of its own on the way (a ref on another thread while
 *   holding one), the other keeping its last 3 batches until the owner finds every
 *   slot taken (a flag, read relaxed: no order from it), and let their references go with
 *   nothing else between them and the owner: the counts alone order the reads before
 *   the slot's next write, which ThreadSanitizer checks in the tsan build. The slot the
 *   owner is given never has a reference, every batch reaches both consumers intact,
 *   and at the end every count is 0. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "test-loader-util.h"

#define NREC 1000          /* records of RECB bytes: 41 full batches of 24 and a tail of 16 */
#define RECB 96
#define BATCH 24
#define EPOCHS 5
#define NCONS 2

static struct rf_loader *mk(struct tl_env *v, struct rf_dataset *ds, const char *path,
			    unsigned prefetch, unsigned tail_slots, enum rf_tdtype dt)
{
	struct rf_loader_opts o = { 0 };
	struct rf_loader *l;

	tl_open(v, 1);
	CHECK_OPEN(rf_dataset_open_rfrec(ds, path, 0), rf_last_error());
	o.batch = BATCH;
	o.seed = 2;
	o.prefetch = prefetch;
	o.tail_slots = tail_slots;
	o.x_dtype = dt;
	o.devices = v->dev;
	o.ndevices = 1;
	CHECK_OPEN(rf_loader_create(&l, v->e, ds, &o), rf_last_error());
	return l;
}

static void done(struct tl_env *v, struct rf_dataset *ds, struct rf_loader *l)
{
	rf_loader_destroy(l);
	rf_dataset_close(ds);
	tl_close(v);
}

/* Counts, the rotation past referenced slots, -EBUSY, and what is refused. */
static void counts(const char *path)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l = mk(&v, &ds, path, 3, 0, RF_F32);
	struct rf_batch b0, b;
	unsigned ns = rf_loader_slots(l), tail = 0;
	float *keep;
	char want[64];

	CHECK(ns >= 4);                       /* 3 full slots and a tail slot */
	for (unsigned s = 0; s < ns; s++)
		CHECK_EQ(rf_loader_refs(l, s), 0);
	CHECK_EQ(rf_loader_next_slot(l), 0);
	CHECK(rf_loader_next(l, &b0) == 1 && rf_loader_wait(l, &b0) == 0);
	CHECK_OK(rf_loader_ref(l, b0.slot));
	CHECK_OK(rf_loader_ref(l, b0.slot));
	CHECK_EQ(rf_loader_refs(l, b0.slot), 2);
	CHECK_OK(rf_loader_unref(l, b0.slot));
	CHECK_EQ(rf_loader_refs(l, b0.slot), 1);
	keep = malloc(b0.x[0]->nbytes);
	CHECK(keep);
	memcpy(keep, b0.x[0]->data, b0.x[0]->nbytes);
	for (int i = 0; i < 120; i++) {       /* the rotation, many times round, 2 epochs */
		int s = rf_loader_next_slot(l), r = rf_loader_next(l, &b);
		if (r == 0)
			continue;
		CHECK(r == 1 && rf_loader_wait(l, &b) == 0);
		CHECK(s >= 0 && b.slot == (unsigned)s && b.slot != b0.slot);
		CHECK_EQ(rf_loader_refs(l, b.slot), 0);
		tail += b.n < BATCH;
	}
	CHECK(tail >= 2);
	CHECK(memcmp(keep, b0.x[0]->data, b0.x[0]->nbytes) == 0);
	for (unsigned s = 0; s < ns; s++)
		CHECK_OK(rf_loader_ref(l, s));
	CHECK_EQ(rf_loader_next_slot(l), -1);
	CHECK_EQ(rf_loader_next(l, &b), -EBUSY);
	CHECK(strstr(rf_last_error(), "rf_loader_ref") && strstr(rf_last_error(), "batch"));
	CHECK_OK(rf_loader_unref(l, 1));      /* the third epoch's batch 35 is next: full */
	CHECK_EQ(rf_loader_next_slot(l), 1);
	CHECK(rf_loader_next(l, &b) == 1 && b.slot == 1 && rf_loader_wait(l, &b) == 0);
	CHECK_EQ(rf_loader_refs(l, 1), 0);
	/* below 0: refused, the count stays 0 */
	CHECK_OK(rf_loader_unref(l, 0));
	CHECK_OK(rf_loader_unref(l, 0));      /* b0's (slot 0) and the one just above */
	CHECK_EQ(rf_loader_refs(l, 0), 0);
	CHECK_EQ(rf_loader_unref(l, 0), -EINVAL);
	snprintf(want, sizeof(want), "rf_loader_unref: slot 0: no references");
	CHECK(strstr(rf_last_error(), want));
	CHECK_EQ(rf_loader_refs(l, 0), 0);
	CHECK_OK(rf_loader_ref(l, 0));        /* and counts from 0 again */
	CHECK_EQ(rf_loader_refs(l, 0), 1);
	CHECK_OK(rf_loader_unref(l, 0));
	/* no such slot; no loader */
	CHECK_EQ(rf_loader_ref(l, ns), -EINVAL);
	snprintf(want, sizeof(want), "rf_loader_ref: slot %u: expected 0..%u", ns, ns - 1);
	CHECK(strstr(rf_last_error(), want));
	CHECK_EQ(rf_loader_unref(l, ns + 7), -EINVAL);
	snprintf(want, sizeof(want), "rf_loader_unref: slot %u: expected 0..%u", ns + 7, ns - 1);
	CHECK(strstr(rf_last_error(), want));
	CHECK_EQ(rf_loader_refs(l, ns), 0);
	CHECK_EQ(rf_loader_ref(NULL, 0), -EINVAL);
	CHECK_EQ(rf_loader_unref(NULL, 0), -EINVAL);
	CHECK(strstr(rf_last_error(), "NULL"));
	CHECK_EQ(rf_loader_refs(NULL, 0), 0);
	for (unsigned s = 1; s < ns; s++)     /* slot 1 was let go above */
		if (rf_loader_refs(l, s))
			CHECK_OK(rf_loader_unref(l, s));
	for (unsigned s = 0; s < ns; s++)
		CHECK_EQ(rf_loader_refs(l, s), 0);
	free(keep);
	done(&v, &ds, l);
	printf("slot references: counted, passed over, -EBUSY when all are, refused below 0 "
	       "and past the last slot\n");
}

/* ---- threads ---- */

/* A slot's mailbox: the owner fills it and publishes it (seq, release) after the
 * batch is written and referenced once per consumer; a consumer reads it after seeing
 * seq (acquire) and lets its reference go when done. Nothing else orders the
 * consumers' reads before the owner's next fill of the slot but the count. */
struct mbox {
	_Atomic uint64_t seq;
	const uint8_t *x;         /* the batch: n rows of RECB bytes (u8: the records' bytes) */
	const int32_t *y;
	unsigned n;
	uint64_t sum;             /* tl_sum_bytes of x when the owner published it */
};

struct shared {
	struct rf_loader *l;
	struct mbox *mb;
	unsigned ns;
	_Atomic int stop;
	_Atomic int want;         /* the owner found every slot taken (relaxed: a hint) */
	_Atomic uint64_t rows_read;
};

struct cons {
	struct shared *sh;
	unsigned id;
	uint64_t batches;
};

/* Every row of the slot's batch: the record's bytes (tl_byte) and label. */
static void check_batch(const struct mbox *m)
{
	CHECK_EQ(tl_sum_bytes(m->x, (size_t)m->n * RECB), m->sum);
	for (unsigned j = 0; j < m->n; j++) {
		const uint8_t *row = m->x + (size_t)j * RECB;
		uint64_t i = row[0] | (uint64_t)row[1] << 8 | (uint64_t)row[2] << 16 |
			     (uint64_t)row[3] << 24;
		CHECK(i < NREC);
		for (size_t k = 4; k < RECB; k++)
			CHECK_EQ(row[k], tl_byte(i, k));
		CHECK_EQ(m->y[j], (int32_t)(i % 10));
	}
}

/* Consumer 1 keeps its references to the last KEEP batches until the owner wants a
 * slot. */
#define KEEP 3

static void *consumer(void *arg)
{
	struct cons *c = arg;
	struct shared *sh = c->sh;
	uint64_t *seen = calloc(sh->ns, sizeof(*seen));
	unsigned kept[KEEP + 1], nkept = 0;

	CHECK(seen);
	for (;;) {
		int stop = atomic_load_explicit(&sh->stop, memory_order_acquire), any = 0;
		for (unsigned s = 0; s < sh->ns; s++) {
			struct mbox *m = &sh->mb[s];
			if (atomic_load_explicit(&m->seq, memory_order_acquire) == seen[s])
				continue;
			seen[s]++;
			any = 1;
			if (c->id == 0 && seen[s] % 2) {   /* a ref of its own, holding one */
				CHECK_OK(rf_loader_ref(sh->l, s));
				CHECK(rf_loader_refs(sh->l, s) >= 2);
			}
			check_batch(m);
			atomic_fetch_add_explicit(&sh->rows_read, m->n, memory_order_relaxed);
			if (c->id == 0 && seen[s] % 2)
				CHECK_OK(rf_loader_unref(sh->l, s));
			c->batches++;
			if (c->id == 0) {
				CHECK_OK(rf_loader_unref(sh->l, s));
				continue;
			}
			kept[nkept++] = s;
			if (nkept > KEEP) {
				CHECK_OK(rf_loader_unref(sh->l, kept[0]));
				memmove(kept, kept + 1, --nkept * sizeof(*kept));
			}
		}
		if (any)
			continue;
		if (stop || atomic_load_explicit(&sh->want, memory_order_relaxed))
			while (nkept)         /* the owner waits: let go of what it kept */
				CHECK_OK(rf_loader_unref(sh->l, kept[--nkept]));
		if (stop)
			break;
		sched_yield();
	}
	free(seen);
	return NULL;
}

static void threads(const char *path)
{
	struct tl_env v;
	struct rf_dataset ds;
	struct rf_loader *l = mk(&v, &ds, path, 3, 2, RF_U8);
	struct shared sh = { .l = l, .ns = rf_loader_slots(l) };
	struct cons cs[NCONS];
	pthread_t th[NCONS];
	uint64_t pushed = 0, busy = 0, rows = 0;
	unsigned epochs = 0;
	int waiting = 0;

	sh.mb = calloc(sh.ns, sizeof(*sh.mb));
	CHECK(sh.mb);
	for (unsigned s = 0; s < sh.ns; s++)
		atomic_init(&sh.mb[s].seq, 0);
	atomic_init(&sh.stop, 0);
	atomic_init(&sh.want, 0);
	atomic_init(&sh.rows_read, 0);
	for (unsigned k = 0; k < NCONS; k++) {
		cs[k] = (struct cons){ .sh = &sh, .id = k };
		CHECK_EQ(pthread_create(&th[k], NULL, consumer, &cs[k]), 0);
	}
	while (epochs < EPOCHS) {
		struct rf_batch b;
		int s = rf_loader_next_slot(l), r;
		if (s < 0) {                  /* every slot is the consumers': wait for one */
			busy += !waiting;
			waiting = 1;
			atomic_store_explicit(&sh.want, 1, memory_order_relaxed);
			sched_yield();
			continue;
		}
		waiting = 0;
		atomic_store_explicit(&sh.want, 0, memory_order_relaxed);
		r = rf_loader_next(l, &b);    /* others only let go: s, or one freed since */
		if (r == 0) {
			epochs++;
			continue;
		}
		CHECK_EQ(r, 1);
		CHECK_EQ(rf_loader_refs(l, b.slot), 0);
		CHECK_EQ(rf_loader_wait(l, &b), 0);
		struct mbox *m = &sh.mb[b.slot];
		m->x = b.x[0]->data;
		m->y = b.y[0]->data;
		m->n = b.n;
		m->sum = tl_sum_bytes(m->x, (size_t)b.n * RECB);
		for (unsigned k = 0; k < NCONS; k++)
			CHECK_OK(rf_loader_ref(l, b.slot));
		atomic_fetch_add_explicit(&m->seq, 1, memory_order_release);
		pushed++;
		rows += b.n;
	}
	atomic_store_explicit(&sh.want, 1, memory_order_relaxed);
	for (unsigned s = 0; s < sh.ns; s++)  /* the consumers' last references */
		while (rf_loader_refs(l, s))
			sched_yield();
	atomic_store_explicit(&sh.stop, 1, memory_order_release);
	for (unsigned k = 0; k < NCONS; k++) {
		CHECK_EQ(pthread_join(th[k], NULL), 0);
		CHECK_EQ(cs[k].batches, pushed);
	}
	CHECK_EQ(pushed, (uint64_t)EPOCHS * ((NREC + BATCH - 1) / BATCH));
	CHECK_EQ(rows, (uint64_t)EPOCHS * NREC);
	CHECK_EQ(atomic_load(&sh.rows_read), NCONS * rows);
	for (unsigned s = 0; s < sh.ns; s++)
		CHECK_EQ(rf_loader_refs(l, s), 0);
	CHECK(busy > 0);
	printf("threads: %" PRIu64 " batches in %u slots, each read by %d consumers that let "
	       "its slot go; the owner found every slot taken %" PRIu64 " times\n", pushed,
	       sh.ns, NCONS, busy);
	free(sh.mb);
	done(&v, &ds, l);
}

int main(void)
{
	const char *path;

	t_mkdir("loader-slots");
	path = tl_make_rfrec("slots.rfrec", NREC, RECB, RF_LABEL_I32);
	counts(path);
	threads(path);
	return 0;
}
