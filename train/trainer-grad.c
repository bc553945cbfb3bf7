/* train/trainer-grad.c -- the gradients' way to the update when they are summed over
 * K replicas and/or P processes: buckets of layers, reduced as soon as the backward
 * pass has pushed their last gradient (last layers first, so their reduction runs
 * while backward goes on with the earlier ones), then SGD on every replica. And the
 * cross-process checks of an epoch: metrics summed, replicas compared by hash. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "trainer-impl.h"
#include "ops.h"

/* tensors one rf_comm_allreduce_span takes (comm/comm-impl.h RF__COMM_MAXT) */
#define RF__SPAN_MAXT 64

int rf__reduces(const struct rf_trainer *t)
{
	return t->K > 1 || t->P > 1;
}

/* Layers from the last down, each bucket growing by whole layers until it holds
 * bucket_kb KiB (0: a layer each). One device per process only: with K > 1 the
 * kv-store reduces per tensor (one key each). */
void rf__make_buckets(struct rf_trainer *t)
{
	const struct rf_model_spec *sp = t->spec;
	size_t cap = t->K == 1 ? (size_t)t->o.bucket_kb * 1024 : 0, bytes = 0;
	int l, lo, hi = (int)sp->nlayers - 1;

	for (l = hi; l >= 0; l--) {
		for (unsigned k = sp->lfirst[l]; k < sp->lfirst[l + 1]; k++)
			bytes += sp->p[k].numel * sizeof(float);
		/* a span collective takes at most RF__SPAN_MAXT tensors: close the bucket
		 * before the next layer would pass that */
		unsigned nt = sp->lfirst[hi + 1] - sp->lfirst[l];
		unsigned next = l > 0 ? sp->lfirst[hi + 1] - sp->lfirst[l - 1] : 0;
		if (bytes >= cap || l == 0 || next > RF__SPAN_MAXT || nt >= RF__SPAN_MAXT) {
			for (lo = l; lo <= hi; lo++)
				t->bucket_lo[lo] = (unsigned)l;
			hi = l - 1;
			bytes = 0;
		}
	}
}

/* Uneven shards: make the sum over all T = K*P shards of c_r * g_r the batch mean's
 * T-fold (g_r is the mean over n_r rows): c_r = T*n_r/n; an empty shard's gradient is
 * zeroed. Per tensor k of replica r. */
static int rf__scale_uneven(struct rf_trainer *t, const struct rf_batch *b, unsigned r,
			    unsigned k)
{
	uint64_t T = (uint64_t)t->K * t->P;

	if ((uint64_t)b->shard_n[r] * T == b->global_n)
		return 0;
	if (!b->shard_n[r])
		return rf_fill(t->rep[r]->s, t->rep[r]->g[k], 0.0f);
	return rf_scale(t->rep[r]->s, t->rep[r]->g[k],
			(float)((double)b->shard_n[r] * (double)T / b->global_n));
}

/* Layers lo..hi: scale, sum over replicas and processes, update every replica. */
static int rf__reduce_bucket(struct rf_trainer *t, const struct rf_batch *b, unsigned lo,
			     unsigned hi)
{
	struct rf_tensor *g[RF_TRAIN_MAX_DEVICES];
	unsigned r, k, k0 = t->spec->lfirst[lo], k1 = t->spec->lfirst[hi + 1] - 1;
	int ret = 0;

	for (r = 0; r < t->K && ret == 0; r++)
		for (k = k0; k <= k1 && ret == 0; k++)
			ret = rf__scale_uneven(t, b, r, k);
	if (ret == 0 && t->K == 1)
		ret = rf_comm_allreduce_span(t->comm, &t->rep[0]->g[k0], k1 - k0 + 1, lo);
	/* K > 1: kv push of the K gradients (summed on the key's home, then over the
	 * processes at the pull when the store has the comm), pull into every replica */
	for (k = k1 + 1; t->K > 1 && k-- > k0 && ret == 0;) {
		for (r = 0; r < t->K; r++)
			g[r] = t->rep[r]->g[k];
		if ((ret = rf_kv_push(t->kv, (int)k, g, t->K)) == 0)
			ret = rf_kv_pull(t->kv, (int)k, g, t->K);
	}
	for (r = 0; r < t->K && ret == 0; r++)
		for (k = k1 + 1; k-- > k0 && ret == 0;)
			ret = rf_model_update(t->rep[r], k, &t->opt, t->rep[r]->s);
	return ret;
}

/* Reduce every bucket from rd->todo down whose layers all lie at or above `layer`
 * (their gradients pushed). */
int rf__reduce_through(struct rf__reduce *rd, int layer)
{
	struct rf_trainer *t = rd->t;
	int ret;

	while (rd->todo >= 0 && (int)t->bucket_lo[rd->todo] >= layer) {
		int lo = (int)t->bucket_lo[rd->todo];
		if ((ret = rf__reduce_bucket(t, rd->b, (unsigned)lo, (unsigned)rd->todo)) < 0)
			return ret;
		rd->todo = lo - 1;
	}
	return 0;
}

/* The backward hook: layer `layer`'s gradients are pushed on this replica; once the
 * last replica has pushed them, the buckets they complete go. */
int rf__grad_hook(void *ctx, struct rf_model *m, unsigned layer)
{
	struct rf__reduce *rd = ctx;

	return m == rd->t->rep[rd->t->K - 1] ? rf__reduce_through(rd, (int)layer) : 0;
}

/* ---- the epoch's checks across processes ---- */

int rf__params_hash(struct rf_trainer *t, uint64_t *h)
{
	size_t n = t->rep[0]->params->numel;
	float *buf = rf__alloc_big(n * sizeof(float)); /* ResNet-18's: 45 MB, once an epoch */
	uint64_t v = 0xcbf29ce484222325ull;
	int ret;

	if (!buf)
		return -ENOMEM;
	if ((ret = rf_tensor_read(t->rep[0]->params, buf)) == 0) {
		const unsigned char *p = (const unsigned char *)buf;
		for (size_t i = 0; i < n * sizeof(float); i++)
			v = (v ^ p[i]) * 0x100000001b3ull;
		*h = v;
	}
	free(buf);
	return ret;
}

/* Sum a loss and a count over the processes; then compare the replicas' hash. */
int rf__dist_sum(struct rf_trainer *t, double *l, uint64_t *c)
{
	double v[2] = { *l, (double)*c };
	int ret;

	if (t->P == 1)
		return 0;
	if ((ret = rf_comm_allreduce_host(t->comm, v, 2, RF_COMM_F64, RF_COMM_SUM, 0)) < 0) {
		rf__trainer_msg(t, "summing the metrics over the processes failed: %s",
				rf_comm_last_error(t->comm));
		return ret;
	}
	*l = v[0];
	*c = (uint64_t)v[1];
	return 0;
}
