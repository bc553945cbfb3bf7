/* comm/store.h -- the launch without a host transport: rank and size from the
 * environment, and a rendezvous through a directory every rank can see (a shared file
 * system across machines). Internal: rf_comm_create (opts.store_dir) and the device
 * transports use it. */
#ifndef RF_COMM_STORE_H
#define RF_COMM_STORE_H

#include <stddef.h>

struct rf__launch {
	int rank, size, local_rank, local_size;
};

/* RANK and WORLD_SIZE (required), LOCAL_RANK (default 0) and LOCAL_WORLD_SIZE (default
 * LOCAL_RANK + 1), each a decimal integer: 0 <= RANK < WORLD_SIZE <= 65536 and
 * 0 <= LOCAL_RANK < LOCAL_WORLD_SIZE <= WORLD_SIZE. Returns 0, or -EINVAL with a
 * message naming the variable and what was expected (rf_last_error). */
int rf__launch_from_env(struct rf__launch *l);

/* Rank 0's blob (len bytes, at most 4096) reaches every rank through dir (created if
 * missing): each rank writes join.RANK with a random nonce, rank 0 writes id with
 * every rank's nonce and the blob once all have joined, each rank takes the blob
 * from an id that names its own nonce and acknowledges it, and rank 0 returns (and
 * removes the files) once every rank has acknowledged. Every file is written whole
 * and renamed into place. A previous run's files are never taken for this run's (the
 * nonces differ). Blocks up to timeout_s; returns 0, or -ETIMEDOUT / -EEXIST (another
 * process has this RANK) / -EIO with a message in err naming the directory, the file
 * and what is missing. Any thread (the comm thread calls it). */
int rf__store_exchange(const char *dir, int rank, int size, void *blob, size_t len,
		       double timeout_s, char *err, size_t errlen);

#endif
