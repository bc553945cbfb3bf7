/* test-slab: core/slab.h's records. A freed record is the next one handed out; chunks
 * are 16 KiB, then 2 MiB and 2 MiB-aligned; rf__slab_warm makes the first chunk once
 * (and it serves the first records); 200,000 records live at
 * once never overlap (each carries its own pattern, checked after all are out); the
 * live count follows gets and puts; release leaves an empty slab that works again.
 * Under AddressSanitizer a record given back is poisoned (unless the slab is made
 * without it). Then the engine: after a warm-up round, further rounds of creating,
 * using and destroying 20,000 variables fault (almost) no new pages: their records,
 * op records and queue groups come back from the engine's slabs. (What the slabs'
 * huge chunks save on the first touch depends on the kernel's transparent huge
 * pages, so it is measured by rf-bench engine's faults/Mop, not asserted here.) */
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include <ringflow/engine.h>
#include <ringflow/ring.h>
#include "slab.h"
#include "../test-util.h"

#define NREC 200000
#define RSIZE 200

static void check_reuse(void)
{
	struct rf__slab s;
	void *a, *b, *c;

	rf__slab_init(&s, 40, 1);
	CHECK_EQ(s.size, 48); /* rounded to 16 */
	CHECK(s.chunks == NULL);
	a = rf__slab_get(&s);
	b = rf__slab_get(&s);
	CHECK(a && b && a != b);
	CHECK_EQ((uintptr_t)a % 16, 0);
	CHECK_EQ((uintptr_t)b % 16, 0);
	CHECK_EQ(s.live, 2);
	rf__slab_put(&s, a);
	rf__slab_put(&s, NULL); /* ignored */
	CHECK_EQ(s.live, 1);
#if defined(__SANITIZE_ADDRESS__)
	CHECK(__asan_address_is_poisoned(a));
	CHECK(!__asan_address_is_poisoned(b));
#endif
	c = rf__slab_get(&s);
	CHECK(c == a); /* the one given back comes first */
	rf__slab_release(&s);
	CHECK(s.chunks == NULL && s.live == 0);

	/* made without poisoning: a record given back stays readable */
	rf__slab_init(&s, 64, 0);
	a = rf__slab_get(&s);
	memset(a, 0x5a, 64);
	rf__slab_put(&s, a);
	CHECK_EQ(((unsigned char *)a)[63], 0x5a); /* only the link (its first 8) changed */
	rf__slab_release(&s);
}

static void check_many(void)
{
	static unsigned char *rec[NREC];
	struct rf__slab s;
	struct rf__slab_chunk *c;
	size_t huge = 0, i, j;

	rf__slab_init(&s, RSIZE, 1);
	for (i = 0; i < NREC; i++) {
		CHECK((rec[i] = rf__slab_get(&s)) != NULL);
		memset(rec[i], (int)(i * 7 + 1), RSIZE);
	}
	CHECK_EQ(s.live, NREC);
	for (i = 0; i < NREC; i++)
		for (j = 0; j < RSIZE; j += 37)
			CHECK_EQ(rec[i][j], (unsigned char)(i * 7 + 1));
	for (c = s.chunks; c; c = c->next) {
		CHECK(c->bytes >= RF__SLAB_FIRST && c->bytes <= RF__SLAB_HUGE);
		if (c->bytes == RF__SLAB_HUGE) {
			CHECK_EQ((uintptr_t)c % RF__SLAB_HUGE, 0);
			huge++;
		}
	}
	/* the first 16 KiB holds ~80; the rest are 2 MiB chunks of ~10,000 each */
	CHECK(huge >= 18 && huge <= 20);
	CHECK_EQ(s.nchunks, huge + 1);
	/* give every other one back: they come out again, newest first */
	for (i = 0; i < NREC; i += 2)
		rf__slab_put(&s, rec[i]);
	CHECK_EQ(s.live, NREC / 2);
	for (i = NREC; i > 0; i -= 2)
		CHECK(rf__slab_get(&s) == rec[i - 2]);
	size_t chunks = s.nchunks;
	CHECK(rf__slab_get(&s) != NULL); /* from the bump region, or one new chunk */
	CHECK(s.nchunks <= chunks + 1);
	rf__slab_release(&s);
	CHECK((rec[0] = rf__slab_get(&s)) != NULL); /* works again after a release */
	CHECK_EQ(s.nchunks, 1);
	rf__slab_release(&s);
	/* warm: the first chunk, made once, and the records come from it */
	CHECK_EQ(rf__slab_warm(&s), 0);
	CHECK_EQ(s.nchunks, 1);
	CHECK_EQ(s.live, 0);
	c = s.chunks;
	CHECK_EQ(c->bytes, RF__SLAB_FIRST);
	CHECK_EQ(rf__slab_warm(&s), 0);
	CHECK_EQ(s.nchunks, 1);
	CHECK((rec[0] = rf__slab_get(&s)) != NULL);
	CHECK((unsigned char *)rec[0] > (unsigned char *)c &&
	      (unsigned char *)rec[0] < (unsigned char *)c + c->bytes);
	CHECK_EQ(s.nchunks, 1);
	rf__slab_release(&s);
}

static int nop(void *ctx)
{
	(void)ctx;
	return 0;
}

static long minor_faults(void)
{
	struct rusage u;

	CHECK(getrusage(RUSAGE_SELF, &u) == 0);
	return u.ru_minflt;
}

/* One round: n variables in a chain of ops (each reads the one before), all queued
 * behind a gate so every op, entry and group is live at once, then destroyed. */
#define NVAR 20000
static void engine_round(struct rf_engine *e, struct rf_var **v)
{
	struct rf_var *gate;
	long i;

	CHECK_OK(rf_var_create(e, "gate", &gate));
	CHECK_OK(rf_engine_push_simple(e, nop, NULL, NULL, 0, &gate, 1, NULL, "gate"));
	for (i = 0; i < NVAR; i++) {
		struct rf_var *r[2] = { gate, i ? v[i - 1] : gate };
		CHECK_OK(rf_var_create(e, NULL, &v[i]));
		CHECK_OK(rf_engine_push_simple(e, nop, NULL, r, i ? 2 : 1, &v[i], 1, NULL, "op"));
	}
	CHECK_OK(rf_engine_wait_all(e));
	for (i = 0; i < NVAR; i++)
		CHECK_OK(rf_var_destroy(e, v[i], NULL, NULL, NULL));
	CHECK_OK(rf_var_destroy(e, gate, NULL, NULL, NULL));
	CHECK_OK(rf_engine_wait_all(e));
}

static void check_engine_reuse(void)
{
	static struct rf_var *v[NVAR];
	struct rf_ring *ring;
	struct rf_engine *e;
	long f0, f1;
	int k;

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .max_inflight = 4 * NVAR }));
	engine_round(e, v); /* warm-up: the slabs grow */
	f0 = minor_faults();
	for (k = 0; k < 5; k++)
		engine_round(e, v);
	f1 = minor_faults();
	fprintf(stderr, "5 rounds of %d variables after the first: %ld page faults\n", NVAR,
		f1 - f0);
	/* 100,000 variables and ops, all from records already there; allow a few for
	 * the allocator's own bookkeeping and the sanitizers' */
	CHECK(f1 - f0 < 200);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
}

int main(void)
{
	check_reuse();
	check_many();
	check_engine_reuse();
	return 0;
}
