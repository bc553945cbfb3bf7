/* ringflow/kvstore.h -- a (key, value) store for data-parallel training.
 *
 *   push(key, values)  accumulates: the store's value for key becomes the sum of the
 *                      values pushed since the last pull of that key (the first push
 *                      of a round overwrites, later ones add).
 *   pull(key, outs)    retrieves the aggregate: each out = the store's value. The next
 *                      push of the key starts a new round.
 *
 * Every push and pull is engine ops (rf_sum, rf_copy) on the store's stream for that
 * key, reading and writing tensor variables, so a reduction starts the moment its
 * last input gradient is written -- while the backward pass computes earlier layers'
 * gradients on the compute streams (overlapping synchronisation with computation).
 * Nothing here waits. Sums run left to right over the values in the order given, so
 * the result is the same bits on every run.
 *
 * Placement (as the seed puts it: "aggregate some of the parameters on one GPU and some on
 * another"): key k lives on homes[k mod nhomes]. On CPU devices (one shared memory)
 * the ops run on one worker stream of the store ("kv"); a CUDA home uses the stream
 * given for it (a second compute stream of that GPU), and a value on another GPU is
 * first copied to the home (rf_copy) unless it is the same GPU.
 *
 * Reactor thread only. Functions return 0 or -errno.
 */
#ifndef RINGFLOW_KVSTORE_H
#define RINGFLOW_KVSTORE_H

#include <stddef.h>
#include "engine.h"
#include "device.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rf_kvstore;

/* A store on engine e with nhomes (1..16) home devices (borrowed; must outlive the
 * store). streams[i] is the stream for ops of keys homed on homes[i]; NULL for a CPU
 * home means the store's own worker stream (created here). *out owned by the caller:
 * rf_kv_destroy. */
int rf_kv_create(struct rf_kvstore **out, struct rf_engine *e, struct rf_device *const *homes,
		 struct rf_stream *const *streams, unsigned nhomes);
/* Frees the store's tensors (deletions ordered after their last ops). Its worker
 * stream, if any, stays with the engine (destroyed by rf_engine_destroy). NULL ignored. */
void rf_kv_destroy(struct rf_kvstore *kv);

/* Declare key (>= 0, < 1024) with the dtype (f32) and shape of like (borrowed; only
 * its shape is used). The value is allocated on the key's home, uninitialised. */
int rf_kv_init(struct rf_kvstore *kv, int key, const struct rf_tensor *like);

/* store[key] (+)= vals[0] + ... + vals[n-1]; vals borrowed (read by the pushed ops). */
int rf_kv_push(struct rf_kvstore *kv, int key, struct rf_tensor *const *vals, unsigned n);
/* outs[i] = store[key] for i < n; outs borrowed (written by the pushed ops). */
int rf_kv_pull(struct rf_kvstore *kv, int key, struct rf_tensor *const *outs, unsigned n);

/* The stored value of key (owned by the store), or NULL. */
struct rf_tensor *rf_kv_value(struct rf_kvstore *kv, int key);
/* The stream key's ops run on. */
struct rf_stream *rf_kv_stream(struct rf_kvstore *kv, int key);

#ifdef __cplusplus
}
#endif
#endif
