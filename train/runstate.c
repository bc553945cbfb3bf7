/* train/runstate.c -- the run state record (runstate.h): version 2 written, versions 1
 * and 2 read. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "runstate.h"

static const char *const rf__rs_names[RF__RS_NFIELDS + 1] = {
	[RF__RS_PRNG_SEED] = "the init generator's seed",
	[RF__RS_PRNG_COUNTER] = "the init generator's counter",
	[RF__RS_INIT] = "the --init kind",
	[RF__RS_TRAIN_COUNT] = "the training record count",
	[RF__RS_MOMENTUM] = "--momentum",
	[RF__RS_WD] = "--wd",
	[RF__RS_NESTEROV] = "the --nesterov flag",
	[RF__RS_SCHED_KIND] = "the --lr-schedule kind",
	[RF__RS_SCHED_STEP] = "the --lr-schedule step (epochs)",
	[RF__RS_SCHED_GAMMA] = "the --lr-schedule gamma",
	[RF__RS_SCHED_WARMUP] = "--warmup-epochs",
	[RF__RS_SCHED_EPOCHS] = "the cosine schedule's epochs",
	[RF__RS_ADAMW] = "the --optimizer adamw flag",
	[RF__RS_MID_BATCH] = "the batches done inside the epoch",
	[RF__RS_MID_LOSS] = "the epoch's running loss",
	[RF__RS_MID_CORR] = "the epoch's running correct count",
	[RF__RS_MID_ROWS] = "the replicas' running-statistics rows",
	[RF__RS_AUGMENT] = "the --augment flag",
	[RF__RS_ORDER] = "the --order setting",
	[RF__RS_NORM] = "the --normalize mean and std",
};

const char *rf__rs_name(unsigned tag)
{
	return tag >= 1 && tag <= RF__RS_NFIELDS ? rf__rs_names[tag] : "an unknown field";
}

static void rf__w16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static unsigned rf__r16(const uint8_t *p)
{
	return p[0] | (unsigned)p[1] << 8;
}

static void rf__w64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t rf__r64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

uint32_t rf__rs_put(const struct rf__runstate *s, uint8_t *extra)
{
	uint8_t *p = extra + 8;

	memcpy(extra, "RFRS", 4);
	rf__w16(extra + 4, RF__RS_VERSION);
	rf__w16(extra + 6, RF__RS_NFIELDS);
	for (unsigned tag = 1; tag <= RF__RS_NFIELDS; tag++, p += 12) {
		rf__w16(p, tag);
		rf__w16(p + 2, 8);
		rf__w64(p + 4, s->v[tag]);
	}
	return (uint32_t)(p - extra);
}

int rf__rs_get(struct rf__runstate *s, const uint8_t *extra, uint32_t len, char *msg,
	       size_t msglen)
{
	memset(s, 0, sizeof(*s));
	if (len < 8 || memcmp(extra, "RFRS", 4) != 0) {
		/* version 1: fixed slots, as many as the length holds -- whole ones */
		s->version = 1;
		if (len % 8) {
			snprintf(msg, msglen, "run state of %u bytes without a version-2 header: "
				 "version 1 is 8-byte fields, a multiple of 8 bytes", len);
			return -EBADMSG;
		}
		for (unsigned tag = 1; tag <= RF__RS_NFIELDS && 8 * tag <= len; tag++) {
			s->v[tag] = rf__r64(extra + 8 * (tag - 1));
			s->have |= 1u << tag;
		}
		return 0;
	}
	unsigned ver = rf__r16(extra + 4), n = rf__r16(extra + 6);
	const uint8_t *p = extra + 8, *end = extra + len;
	s->version = ver;
	if (ver > RF__RS_VERSION) {
		snprintf(msg, msglen, "run state version %u is newer than this ringflow reads "
			 "(versions 1 to %u): written by a later rf-train", ver, RF__RS_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (ver < 2) {
		snprintf(msg, msglen, "run state version %u with a version-2 header: expected 2",
			 ver);
		return -EBADMSG;
	}
	for (unsigned i = 0; i < n; i++) {
		unsigned tag, flen;
		if (end - p < 4) {
			snprintf(msg, msglen, "run state field %u of %u: the record ends at byte %u",
				 i + 1, n, len);
			return -EBADMSG;
		}
		tag = rf__r16(p);
		flen = rf__r16(p + 2);
		if (tag < 1 || tag > RF__RS_NFIELDS || flen != 8 || (size_t)(end - p) < 4 + flen) {
			snprintf(msg, msglen, "run state field %u of %u (at byte %u): tag %u, %u bytes: "
				 "expected a tag 1..%u of 8 bytes inside the record's %u", i + 1, n,
				 (unsigned)(p - extra), tag, flen, RF__RS_NFIELDS, len);
			return -EBADMSG;
		}
		if (rf__rs_has(s, tag)) {
			snprintf(msg, msglen, "run state: %s (tag %u) given twice", rf__rs_name(tag), tag);
			return -EBADMSG;
		}
		s->v[tag] = rf__r64(p + 4);
		s->have |= 1u << tag;
		p += 4 + flen;
	}
	return 0;
}
