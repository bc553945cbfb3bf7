/* train/kvstore.c -- push/pull over engine ops; see kvstore.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore.h"
#include "rf-internal.h"
#include "ops.h"

#define RF__KV_MAX_KEYS 1024
#define RF__KV_MAX_HOMES 16
#define RF__KV_MAX_VALS 16

struct rf__kv_key {
	struct rf_tensor *val;                       /* on the home device */
	struct rf_tensor *stage[RF__KV_MAX_VALS];    /* copies of values from other devices */
	unsigned home;
	int pulled;                                  /* 1: the next push starts a round */
	int pushed;                                  /* a push since rf_kv_init: a value */
};

struct rf_kvstore {
	struct rf_engine *eng;
	unsigned nhomes;
	struct rf_device *homes[RF__KV_MAX_HOMES];
	struct rf_stream *streams[RF__KV_MAX_HOMES];
	struct rf_stream *worker;                    /* for CPU homes without a stream */
	struct rf__kv_key *keys[RF__KV_MAX_KEYS];
	struct rf_comm *comm;                        /* distributed mode: sum across ranks */
};

int rf_kv_create(struct rf_kvstore **out, struct rf_engine *e, struct rf_device *const *homes,
		 struct rf_stream *const *streams, unsigned nhomes)
{
	struct rf_kvstore *kv;
	unsigned i;
	int ret;

	if (!out)
		return rf__fail(-EINVAL, "rf_kv_create: out is NULL");
	*out = NULL;
	if (!e || !homes)
		return rf__fail(-EINVAL, "rf_kv_create: %s is NULL", !e ? "the engine" : "homes");
	if (nhomes < 1 || nhomes > RF__KV_MAX_HOMES)
		return rf__fail(-EINVAL, "rf_kv_create: %u homes: expected 1 to %d", nhomes,
				RF__KV_MAX_HOMES);
	for (i = 0; i < nhomes; i++) {
		if (!homes[i])
			return rf__fail(-EINVAL, "rf_kv_create: homes[%u] is NULL", i);
		if (rf_device_engine(homes[i]) != e)
			return rf__fail(-EINVAL, "rf_kv_create: homes[%u] '%s' is a device of "
					"another engine", i, rf_device_name(homes[i]));
	}
	kv = calloc(1, sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	kv->eng = e;
	kv->nhomes = nhomes;
	for (i = 0; i < nhomes; i++) {
		kv->homes[i] = homes[i];
		kv->streams[i] = streams ? streams[i] : NULL;
		if (!kv->streams[i]) {
			if (!rf_device_host_memory(homes[i])) {
				/* a device home without a stream: its second compute stream, or its
				 * first */
				unsigned ns = rf_device_nstreams(homes[i]);
				kv->streams[i] = rf_device_stream(homes[i], ns > 1 ? 1 : 0);
				continue;
			}
			if (!kv->worker) {
				ret = rf_worker_stream_create(e, "kv", 0, &kv->worker);
				if (ret < 0) {
					free(kv);
					return ret;
				}
			}
			kv->streams[i] = kv->worker;
		}
	}
	*out = kv;
	return 0;
}

void rf_kv_destroy(struct rf_kvstore *kv)
{
	unsigned k, j;

	if (!kv)
		return;
	for (k = 0; k < RF__KV_MAX_KEYS; k++) {
		struct rf__kv_key *key = kv->keys[k];
		if (!key)
			continue;
		rf_tensor_destroy(key->val);
		for (j = 0; j < RF__KV_MAX_VALS; j++)
			rf_tensor_destroy(key->stage[j]);
		free(key);
	}
	free(kv);
}

/* A store and a key in range: 0, or -EINVAL with the message naming what (the call). */
static int rf__kv_slot(const struct rf_kvstore *kv, int key, const char *what)
{
	if (!kv)
		return rf__fail(-EINVAL, "%s: the store is NULL", what);
	if (key < 0 || key >= RF__KV_MAX_KEYS)
		return rf__fail(-EINVAL, "%s: key %d: expected 0 to %d", what, key,
				RF__KV_MAX_KEYS - 1);
	return 0;
}

/* key's record, or NULL with -EINVAL's message naming what (the call what). */
static struct rf__kv_key *rf__kv_key(struct rf_kvstore *kv, int key, const char *what)
{
	if (rf__kv_slot(kv, key, what) < 0)
		return NULL;
	if (!kv->keys[key])
		rf__fail(-EINVAL, "%s: key %d was not declared (rf_kv_init)", what, key);
	return kv->keys[key];
}

/* The n tensors of ts, each one that can hold k's value (non-NULL, f32, as many
 * elements): checked before anything is pushed, so that a refused call leaves the
 * store as it was. 0, or -EINVAL naming the one that cannot. */
static int rf__kv_check(const struct rf_kvstore *kv, const struct rf__kv_key *k, int key,
			struct rf_tensor *const *ts, unsigned n, const char *what, const char *arg)
{
	if (!ts)
		return rf__fail(-EINVAL, "%s: key %d: %s is NULL", what, key, arg);
	if (n < 1 || n > RF__KV_MAX_VALS)
		return rf__fail(-EINVAL, "%s: key %d: %u %s: expected 1 to %d", what, key, n, arg,
				RF__KV_MAX_VALS);
	for (unsigned i = 0; i < n; i++) {
		const struct rf_tensor *t = ts[i];
		if (!t)
			return rf__fail(-EINVAL, "%s: key %d: %s[%u] is NULL", what, key, arg, i);
		if (t->dtype != RF_F32 || t->numel != k->val->numel)
			return rf__fail(-EINVAL, "%s: key %d: %s[%u] '%s' is %s of %zu elements: "
					"expected f32 of %zu, as the key's value", what, key, arg,
					i, t->name, rf_tdtype_name(t->dtype), t->numel,
					k->val->numel);
		if (!t->dev || rf_device_engine(t->dev) != kv->eng)
			return rf__fail(-EINVAL, "%s: key %d: %s[%u] '%s' is a tensor of another "
					"engine", what, key, arg, i, t->name);
		if (t->data == k->val->data || t->var == k->val->var)
			return rf__fail(-EINVAL, "%s: key %d: %s[%u] '%s' is the key's own value "
					"(rf_kv_value): expected a tensor of the caller's", what,
					key, arg, i, t->name);
		/* copies (a pull's, a staged push's) keep the bytes as they lie */
		if (t->ndim == 4 && t->layout != k->val->layout)
			return rf__fail(-EINVAL, "%s: key %d: %s[%u] '%s' is channels-last: "
					"expected the key's value's layout (row-major)", what, key,
					arg, i, t->name);
	}
	return 0;
}

int rf_kv_init(struct rf_kvstore *kv, int key, const struct rf_tensor *like)
{
	struct rf__kv_key *k;
	char name[40];
	int ret;

	if ((ret = rf__kv_slot(kv, key, "rf_kv_init")) < 0)
		return ret;
	if (!like || like->dtype != RF_F32)
		return rf__fail(-EINVAL, "rf_kv_init: key %d: like is %s: expected an f32 tensor",
				key, like ? rf_tdtype_name(like->dtype) : "NULL");
	if (kv->keys[key])
		return rf__fail(-EINVAL, "rf_kv_init: key %d is declared already", key);
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->home = (unsigned)key % kv->nhomes;
	k->pulled = 1;
	snprintf(name, sizeof(name), "kv[%d]", key);
	ret = rf_tensor_create(kv->homes[k->home], RF_F32, name, like->ndim, like->shape, &k->val);
	if (ret < 0) {
		free(k);
		return ret;
	}
	kv->keys[key] = k;
	return 0;
}

/* A value usable by an op on the key's home: itself, or a staging copy on the home
 * when it lives in another device's memory. */
static int rf__kv_local(struct rf_kvstore *kv, struct rf__kv_key *k, unsigned i,
			struct rf_tensor *v, struct rf_tensor **out)
{
	struct rf_device *home = kv->homes[k->home];
	int ret;

	*out = v;
	if (rf_device_host_memory(home) && rf_device_host_memory(v->dev))
		return 0;
	if (rf_device_kind(home) == rf_device_kind(v->dev) &&
	    rf_device_ordinal(home) == rf_device_ordinal(v->dev))
		return 0;
	if (!k->stage[i]) {
		ret = rf_tensor_create(home, RF_F32, "kv_stage", v->ndim, v->shape, &k->stage[i]);
		if (ret < 0)
			return ret;
	}
	*out = k->stage[i];
	return 0;
}

int rf_kv_push(struct rf_kvstore *kv, int key, struct rf_tensor *const *vals, unsigned n)
{
	struct rf_tensor *in[RF__KV_MAX_VALS + 1];
	struct rf__kv_key *k;
	unsigned i, m = 0;
	int ret;

	if (!(k = rf__kv_key(kv, key, "rf_kv_push")))
		return -EINVAL;
	if ((ret = rf__kv_check(kv, k, key, vals, n, "rf_kv_push", "vals")) < 0)
		return ret;
	if (!k->pulled)
		in[m++] = k->val;       /* accumulate onto this round's sum */
	/* the staging tensors first: an allocation that fails pushes nothing */
	for (i = 0; i < n; i++)
		if ((ret = rf__kv_local(kv, k, i, vals[i], &in[m + i])) < 0)
			return ret;
	for (i = 0; i < n; i++)
		if (in[m + i] != vals[i] &&
		    (ret = rf_copy(kv->streams[k->home], in[m + i], vals[i])) < 0)
			return ret;
	m += n;
	ret = rf_sum(kv->streams[k->home], k->val, in, (int)m);
	if (ret == 0) {
		k->pulled = 0;
		k->pushed = 1;
	}
	return ret;
}

int rf_kv_set_comm(struct rf_kvstore *kv, struct rf_comm *c)
{
	if (!kv)
		return rf__fail(-EINVAL, "rf_kv_set_comm: the store is NULL");
	for (unsigned h = 0; c && h < kv->nhomes; h++)
		if (!rf_device_host_memory(kv->homes[h]))
			return rf__fail(-ENOTSUP, "kv-store: the distributed mode needs homes in "
					"host memory (home %u is %s): collectives of device memory "
					"between processes are not in yet", h,
					rf_device_name(kv->homes[h]));
	kv->comm = c;
	return 0;
}

int rf_kv_pull(struct rf_kvstore *kv, int key, struct rf_tensor *const *outs, unsigned n)
{
	struct rf__kv_key *k;
	unsigned i;
	int ret;

	if (!(k = rf__kv_key(kv, key, "rf_kv_pull")))
		return -EINVAL;
	/* every output checked first: a refused pull leaves the round as it was (a
	 * distributed one not summed over the ranks yet) */
	if ((ret = rf__kv_check(kv, k, key, outs, n, "rf_kv_pull", "outs")) < 0)
		return ret;
	if (!k->pushed)
		return rf__fail(-ENODATA, "rf_kv_pull: key %d has no value: nothing was pushed "
				"to it since rf_kv_init", key);
	/* Distributed: this round's local sum, summed over every rank once, at its first
	 * pull (one collective per key and round, ordered by the comm). */
	if (kv->comm && !k->pulled && (ret = rf_comm_allreduce(kv->comm, k->val, (uint32_t)key)) < 0)
		return ret;
	k->pulled = 1;   /* summed over the ranks: a retried pull must not sum again */
	for (i = 0; i < n; i++) {
		ret = rf_copy(kv->streams[k->home], outs[i], k->val);
		if (ret < 0)
			return ret;
	}
	return 0;
}

struct rf_tensor *rf_kv_value(struct rf_kvstore *kv, int key)
{
	return kv && key >= 0 && key < RF__KV_MAX_KEYS && kv->keys[key] ? kv->keys[key]->val : NULL;
}

struct rf_stream *rf_kv_stream(struct rf_kvstore *kv, int key)
{
	return kv && key >= 0 && key < RF__KV_MAX_KEYS && kv->keys[key]
		? kv->streams[kv->keys[key]->home] : NULL;
}
