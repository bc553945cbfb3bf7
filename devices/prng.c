/* devices/prng.c -- counter-based random number generators (an engine variable
 * each, so draws are ordered) and the ops that fill a tensor from one. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "op-impl.h"

int rf_prng_create(struct rf_engine *e, uint64_t seed, const char *name, struct rf_prng **out)
{
	struct rf_prng *g = calloc(1, sizeof(*g));
	int ret;

	*out = NULL;
	if (!g)
		return rf__fail(-ENOMEM, "prng %s: out of memory", name ? name : "prng");
	ret = rf_var_create(e, name ? name : "prng", &g->var);
	if (ret < 0) {
		free(g);
		return ret;
	}
	g->seed = seed;
	g->eng = e;
	*out = g;
	return 0;
}

void rf_prng_destroy(struct rf_prng *g)
{
	if (g && rf_var_destroy(g->eng, g->var, free, g, NULL) < 0) {
		rf_engine_wait_idle(g->eng);
		free(g);
	}
}

static int rf__rand(struct rf_stream *s, const char *fn, enum rf__opcode code,
		    struct rf_tensor *x, struct rf_prng *g, float a, float b2)
{
	struct rf__b b;

	RF__TRY(RF__SIG(fn, code, x));
	if (!g || g->eng != x->dev->eng)
		return rf__bad(fn, "no generator, or one of another engine");
	RF__TRY(rf__b_init(&b, fn, code, NULL, 0));
	b.c->p.rand.n = x->numel;
	b.c->p.rand.g = g;
	b.c->p.rand.a = a;
	b.c->p.rand.b = b2;
	rf__b_set(&b, &b.c->o.rand.x, x);
	rf__b_var(&b, g->var, 1);      /* the draw advances the generator */
	return rf__b_push(&b, s, x->dev);
}

int rf_rand_uniform(struct rf_stream *s, struct rf_tensor *x, struct rf_prng *g, float lo,
		    float hi)
{
	return rf__rand(s, "rf_rand_uniform", RF__OP_RAND_UNIFORM, x, g, lo, hi);
}

int rf_rand_normal(struct rf_stream *s, struct rf_tensor *x, struct rf_prng *g, float mean,
		   float std)
{
	return rf__rand(s, "rf_rand_normal", RF__OP_RAND_NORMAL, x, g, mean, std);
}
