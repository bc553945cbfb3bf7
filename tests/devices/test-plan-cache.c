/* test-plan-cache -- the CUDA backend's convolution plan cache and workspace budget,
 * which are plain C and run here without a GPU: keys that differ in any field are
 * different plans; a full cache gives up its least recently used plan (freeing its
 * descriptors, once); RF_CUDNN_WORKSPACE's values are read or refused by name, and
 * unset the budget is a sixteenth of free memory within [16 MiB, 1 GiB]. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../devices/cuda/plan-cache.h"
#include "../test-util.h"

static int freed[16];

static void free_descs(void *d)
{
	freed[(int)(long)d]++;
}

static struct rf__plan_key key(int dir, int n, int c)
{
	struct rf__plan_key k;

	memset(&k, 0, sizeof(k));
	k.dir = dir;
	k.n = n;
	k.c = c;
	k.h = k.w = 32;
	k.o = 64;
	k.kh = k.kw = 3;
	k.stride = 1;
	k.pad = 1;
	return k;
}

int main(void)
{
	struct rf__plan_cache pc;
	struct rf__plan *p, *q;
	struct rf__plan_key a = key(0, 256, 3), b = key(1, 256, 3), c = key(0, 256, 64);
	size_t v;
	char err[200];

	CHECK_OK(rf__plan_cache_init(&pc, 3, free_descs));
	CHECK(!rf__plan_find(&pc, &a));
	CHECK_EQ(pc.misses, 1);
	p = rf__plan_add(&pc, &a);
	CHECK(p && p->algo == -1 && p->ws == 0 && !p->descs);
	p->algo = 7;
	p->ws = 1 << 20;
	p->descs = (void *)1L;
	CHECK(rf__plan_find(&pc, &a) == p && pc.hits == 1);
	/* any field makes another plan */
	CHECK(!rf__plan_find(&pc, &b));
	CHECK(!rf__plan_find(&pc, &c));
	{
		struct rf__plan_key d = a;
		d.math = 1;
		CHECK(!rf__plan_find(&pc, &d));
		d = a;
		d.layout = 1;
		CHECK(!rf__plan_find(&pc, &d));
		d = a;
		d.dtype = 0x20;
		CHECK(!rf__plan_find(&pc, &d));
	}
	q = rf__plan_add(&pc, &b);
	q->descs = (void *)2L;
	q = rf__plan_add(&pc, &c);
	q->descs = (void *)3L;
	/* a used again: b is now the least recent, and goes when a fourth comes */
	CHECK(rf__plan_find(&pc, &a));
	{
		struct rf__plan_key d = key(2, 128, 3);
		q = rf__plan_add(&pc, &d);
		CHECK(q && q->algo == -1 && !q->descs);
		CHECK_EQ(pc.evictions, 1);
		CHECK_EQ(freed[2], 1);
		CHECK(!rf__plan_find(&pc, &b));
		CHECK(rf__plan_find(&pc, &a) && rf__plan_find(&pc, &c) && rf__plan_find(&pc, &d));
	}
	rf__plan_cache_fini(&pc);
	CHECK(freed[1] == 1 && freed[2] == 1 && freed[3] == 1);   /* each exactly once */

	/* the budget */
	CHECK_OK(rf__ws_budget("256M", 0, &v, err, sizeof(err)));
	CHECK_EQ(v, (size_t)256 << 20);
	CHECK_OK(rf__ws_budget("1g", 0, &v, err, sizeof(err)));
	CHECK_EQ(v, (size_t)1 << 30);
	CHECK_OK(rf__ws_budget("4096", 0, &v, err, sizeof(err)));
	CHECK_EQ(v, 4096);
	CHECK_OK(rf__ws_budget("0", 0, &v, err, sizeof(err)));    /* no workspace at all */
	CHECK_EQ(v, 0);
	{
		static const char *const bad[] = { "", "M", "12x", "-1", " 5", "5 ", "1.5G",
						   "99999999999999999999", "17179869184G" };
		for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char want[64];
			CHECK_EQ(rf__ws_budget(bad[i], 0, &v, err, sizeof(err)), -EINVAL);
			snprintf(want, sizeof(want), "RF_CUDNN_WORKSPACE=%s: expected", bad[i]);
			CHECK(strstr(err, want));
		}
	}
	CHECK_OK(rf__ws_budget(NULL, (size_t)80 << 30, &v, err, sizeof(err)));
	CHECK_EQ(v, RF__WS_MAX);
	CHECK_OK(rf__ws_budget(NULL, (size_t)100 << 20, &v, err, sizeof(err)));
	CHECK_EQ(v, RF__WS_MIN);
	CHECK_OK(rf__ws_budget(NULL, (size_t)1 << 30, &v, err, sizeof(err)));
	CHECK_EQ(v, (size_t)64 << 20);
	fprintf(stderr, "plan cache and workspace budget: ok\n");
	return 0;
}
