/* ringflow/kvstore.h -- a (key, value) store for data-parallel training: push sums
 * the values given for a key on its home device, pull copies the sum back out.
 * Everything is pushed as engine ops; nothing waits. Reactor thread only.
 * Functions return 0 or -errno with the message in rf_last_error(); every argument
 * is checked before anything is pushed, so a refused call leaves the store as it
 * was. Rounds, placement and ordering: train/README.md.
 */
#ifndef RINGFLOW_KVSTORE_H
#define RINGFLOW_KVSTORE_H

#include <stddef.h>
#include "engine.h"
#include "device.h"
#include "tensor.h"
#include "comm.h"

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
 * its shape is used). The value is allocated on the key's home; until a push gives
 * it one, a pull is refused (-ENODATA). */
int rf_kv_init(struct rf_kvstore *kv, int key, const struct rf_tensor *like);

/* store[key] (+)= vals[0] + ... + vals[n-1] (n 1..16, each f32 of the value's element
 * count); vals borrowed (read by the pushed ops). */
int rf_kv_push(struct rf_kvstore *kv, int key, struct rf_tensor *const *vals, unsigned n);
/* outs[i] = store[key] for i < n (n 1..16, each f32 of the value's element count);
 * outs borrowed (written by the pushed ops). */
int rf_kv_pull(struct rf_kvstore *kv, int key, struct rf_tensor *const *outs, unsigned n);

/* Distributed mode (c non-NULL; CPU homes only, else -ENOTSUP): the first pull of a
 * round sums the key's value over every rank of c before copying it out, so a pull
 * returns the sum over ranks, local values and pushes. Every rank must push and pull
 * its keys the same number of times, and pull them in the same order. NULL: local. */
int rf_kv_set_comm(struct rf_kvstore *kv, struct rf_comm *c);

/* The stored value of key (owned by the store), or NULL. */
struct rf_tensor *rf_kv_value(struct rf_kvstore *kv, int key);
/* The stream key's ops run on. */
struct rf_stream *rf_kv_stream(struct rf_kvstore *kv, int key);

#ifdef __cplusplus
}
#endif
#endif
