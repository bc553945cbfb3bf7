/* train/runstate.h -- the trainer's run state in a checkpoint's meta.extra: a versioned,
 * self-describing record. Internal to train/.
 *
 * Version 2 (written since 2026-11-28): "RFRS", a u16 version, a u16 field count, then
 * per field a u16 tag, a u16 length (8) and the value, little-endian. A reader refuses
 * a newer version naming both, and an unknown tag or a repeated one as corrupt.
 * Version 1 (before): no header, the fields at fixed offsets 8 * (tag - 1), the file's
 * extra_len saying how many there are (older files stop earlier: 16, 32, 56, 96, 104,
 * 136 or 144 bytes); a field past the end is absent and reads as its default, 0. */
#ifndef RF_TRAIN_RUNSTATE_H
#define RF_TRAIN_RUNSTATE_H

#include <stddef.h>
#include <stdint.h>

/* 3 (2026-12-01): the fields of 2; the header's devices field is the saving run's
 * replicas, devices x processes, in whose summed gradient the optimizer's state is */
#define RF__RS_VERSION 3

/* Field tags (and, minus one, the version-1 slot). */
enum {
	RF__RS_PRNG_SEED = 1, RF__RS_PRNG_COUNTER, RF__RS_INIT, RF__RS_TRAIN_COUNT,
	RF__RS_MOMENTUM,       /* f32 bits */
	RF__RS_WD,             /* f32 bits */
	RF__RS_NESTEROV, RF__RS_SCHED_KIND, RF__RS_SCHED_STEP,
	RF__RS_SCHED_GAMMA,    /* f64 bits */
	RF__RS_SCHED_WARMUP, RF__RS_SCHED_EPOCHS, RF__RS_ADAMW,
	RF__RS_MID_BATCH,      /* inside the epoch: batches done */
	RF__RS_MID_LOSS,       /* f64 bits: their loss sum */
	RF__RS_MID_CORR, RF__RS_MID_ROWS, RF__RS_AUGMENT,
	RF__RS_ORDER,          /* the training set's shuffle, plus one (0: before --order) */
	RF__RS_NORM,           /* the input's mean and std per channel, hashed (0: none,
				* x = u8 / 255; also before --normalize existed) */
	RF__RS_NFIELDS = RF__RS_NORM
};

struct rf__runstate {
	unsigned version;                 /* of the record read (1 or 2) */
	uint64_t v[RF__RS_NFIELDS + 1];   /* by tag; absent fields 0 */
	uint32_t have;                    /* bit tag: present in the record */
};

/* The field's name, for messages ("the --nesterov flag"). */
const char *rf__rs_name(unsigned tag);

/* Encode s (every field) into extra; returns the bytes used (<= 256). */
uint32_t rf__rs_put(const struct rf__runstate *s, uint8_t *extra);

/* Decode extra[0, len). 0, or -EPROTONOSUPPORT (a newer version) / -EBADMSG (a malformed
 * record), with one line in msg ("run state version 3 is newer ..."). */
int rf__rs_get(struct rf__runstate *s, const uint8_t *extra, uint32_t len, char *msg,
	       size_t msglen);

static inline int rf__rs_has(const struct rf__runstate *s, unsigned tag)
{
	return (s->have >> tag) & 1;
}

#endif
