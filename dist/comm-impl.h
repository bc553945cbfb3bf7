/* dist/comm-impl.h -- the comm's record, shared by comm.c and its stand-in. */
#ifndef RF_DIST_COMM_IMPL_H
#define RF_DIST_COMM_IMPL_H

#include <stdint.h>

#include "comm.h"

struct rf_comm {
	struct rf_engine *eng;
	struct rf_stream *stream;      /* the worker stream that owns MPI */
	struct rf_var *order;          /* written by every collective: push order = issue order */
	int rank, size, local_rank;
	int check;                     /* compare (seq, key, bytes) across ranks first */
	uint64_t seq;                  /* collectives pushed */
	uint64_t *peers;               /* the order check's gather buffer: 3 words per rank */
	char last_error[512];          /* set on the reactor thread, from an op's message */
};

#endif
