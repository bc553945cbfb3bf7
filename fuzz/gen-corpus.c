/* fuzz/gen-corpus.c -- writes the binary seeds of fuzz/corpus/ (checkpoints, record
 * files) with the library's own writers, so that each is a file the readers accept:
 *
 *   build/fuzz/fuzz-gen-corpus fuzz/corpus
 *
 * Each seed starts with the harness's selector byte (fuzz-ckpt: 0x03 reseal and load,
 * 0x01 reseal; fuzz-rfrec: bits 0x01 reseal the header, 0x02 verify, 0x04 reseal
 * the data CRC, 0x08 a version 2 index's, 0x10 its class names'). The text seeds
 * (HTTP, job files, option values, IDX) are written by fuzz/corpus/README.md's
 * commands. Not part of any test run; kept so that the corpus can be made again. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ringflow/checkpoint.h>
#include <ringflow/dataset.h>
#include <ringflow/ring.h>

#include "runstate.h" /* train/: the trainer's run state in extra */

static void prefix(const char *path, uint8_t sel, const char *out)
{
	FILE *in = fopen(path, "rb"), *o = fopen(out, "wb");
	int ch;
	if (!in || !o) {
		perror(out);
		exit(1);
	}
	fputc(sel, o);
	while ((ch = fgetc(in)) != EOF)
		fputc(ch, o);
	fclose(in);
	fclose(o);
	unlink(path);
}

static void ckpt(struct rf_ring *r, const char *dir, const char *name, unsigned nt, int extra)
{
	char tmp[512], out[512];
	struct rf_ckpt_meta m = { .epoch = 3, .seed = 7, .step = 11, .lr = 0.1, .batch_size = 4,
				  .devices = 1 };
	struct rf_ckpt_blob b[4];
	static uint8_t u8[16];
	static float f32[6];
	static int32_t i32[1];
	static double f64[2] = { 1.5, -2 };
	snprintf(m.model, sizeof(m.model), "mlp");
	if (extra == 1) {
		m.extra_len = 24;
		memset(m.extra, 0x5a, 24);
	} else if (extra == 2) { /* a version-2 run state, as rf-train writes it */
		struct rf__runstate rs = { 0 };
		for (unsigned tag = 1; tag <= RF__RS_NFIELDS; tag++)
			rs.v[tag] = tag * 3;
		rs.v[RF__RS_NESTEROV] = rs.v[RF__RS_ADAMW] = rs.v[RF__RS_AUGMENT] = 1;
		rs.v[RF__RS_SCHED_KIND] = 2;
		m.extra_len = rf__rs_put(&rs, m.extra);
	}
	b[0] = (struct rf_ckpt_blob){ "a", RF_CKPT_U8, 1, { 16 }, u8, 16 };
	b[1] = (struct rf_ckpt_blob){ "w1", RF_CKPT_F32, 2, { 2, 3 }, f32, 24 };
	b[2] = (struct rf_ckpt_blob){ "step", RF_CKPT_I32, 0, { 0 }, i32, 4 };
	b[3] = (struct rf_ckpt_blob){ "d", RF_CKPT_F64, 1, { 2 }, f64, 16 };
	snprintf(tmp, sizeof(tmp), "%s/ckpt.tmp.%s", dir, name);
	snprintf(out, sizeof(out), "%s/ckpt/%s", dir, name);
	if (rf_ckpt_save(r, tmp, &m, b, nt) < 0) {
		fprintf(stderr, "%s: %s\n", tmp, rf_last_error());
		exit(1);
	}
	prefix(tmp, 0x03, out);
}

static void rfrec(const char *dir, const char *name, const struct rf_rec_layout *lay,
		  unsigned count, unsigned payload, uint8_t sel)
{
	char tmp[512], out[512];
	struct rf_rec_writer *w;
	uint8_t p[1024];
	snprintf(tmp, sizeof(tmp), "%s/rfrec.tmp.%s", dir, name);
	snprintf(out, sizeof(out), "%s/rfrec/%s", dir, name);
	if (rf_rec_writer_open(&w, tmp, lay, RF_REC_OVERWRITE) < 0) {
		fprintf(stderr, "%s: %s\n", tmp, rf_last_error());
		exit(1);
	}
	for (unsigned i = 0; i < count; i++) {
		for (unsigned k = 0; k < payload; k++)
			p[k] = (uint8_t)(i * 31 + k);
		if ((lay->variable ? rf_rec_writer_append_bytes(w, p, 1 + (i * 37) % payload,
								 lay->label_kind ? (int32_t)(i % 3) : -1)
				   : rf_rec_writer_append(w, p, (int32_t)(i % 3))) < 0)
			exit(1);
	}
	if (rf_rec_writer_finish(w) < 0) {
		fprintf(stderr, "%s: %s\n", tmp, rf_last_error());
		exit(1);
	}
	prefix(tmp, sel, out);
}

int main(int argc, char **argv)
{
	struct rf_ring *r;
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	if (rf_ring_create(&r, NULL) < 0)
		return 1;
	ckpt(r, argv[1], "zero", 0, 0);
	ckpt(r, argv[1], "one-u8", 1, 0);
	ckpt(r, argv[1], "four", 4, 1);
	ckpt(r, argv[1], "runstate-v2", 1, 2);
	rfrec(argv[1], "u8-label", &(struct rf_rec_layout){ .stride = 101, .payload_offset = 0,
		.dtype = RF_DS_DT_U8, .ndim = 1, .shape = { 100 }, .label_kind = RF_LABEL_U8,
		.label_offset = 100, .num_classes = 3 }, 3, 100, 0x07);
	rfrec(argv[1], "image-i32", &(struct rf_rec_layout){ .stride = 788, .payload_offset = 0,
		.dtype = RF_DS_DT_U8, .ndim = 3, .shape = { 1, 28, 28 }, .label_kind = RF_LABEL_I32,
		.label_offset = 784, .num_classes = 10 }, 2, 784, 0x03);
	rfrec(argv[1], "nolabel", &(struct rf_rec_layout){ .stride = 16, .payload_offset = 0,
		.dtype = RF_DS_DT_U8, .ndim = 1, .shape = { 16 }, .label_kind = RF_LABEL_NONE },
		5, 16, 0x01);
	rfrec(argv[1], "var-classes", &(struct rf_rec_layout){ .variable = 1,
		.encoding = RF_REC_ENC_IMAGE, .label_kind = RF_LABEL_I32, .num_classes = 3,
		.classes = (const char *const[]){ "cat", "dog", "n01440764" } }, 6, 300, 0x1f);
	rfrec(argv[1], "var-nolabel", &(struct rf_rec_layout){ .variable = 1,
		.label_kind = RF_LABEL_NONE }, 4, 50, 0x0b);
	rf_ring_destroy(r);
	return 0;
}
