/* fuzz-ckpt: the checkpoint reader (train/ckpt-format.c, train/checkpoint.c). The CRCs
 * (header, table entries, trailer) would stop almost every mutation at the first check,
 * so the harness reseals them when the first byte says so: the header's field checks,
 * the table's and the trailer's are what is fuzzed. The header is read with pread
 * (rf__ck_read_header, as rf_ckpt_probe does), then rf_ckpt_probe and, every other
 * input, rf_ckpt_load of every tensor the table lists through a ring; the header's extra
 * field goes through the trainer's run-state decoder (train/runstate.c), whose accepted
 * version-2 records must re-encode to the same fields. */
#include "fuzz.h"

#include <fcntl.h>

#include "checkpoint.h"
#include "ckpt-impl.h"
#include "ring.h"
#include "runstate.h"

static struct rf_ring *ring;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (rf_ring_create(&ring, NULL) < 0)
		ring = NULL; /* no io_uring here: the loads are skipped */
	return 0;
}

static void reseal(uint8_t *b, size_t n)
{
	if (n < RF__CK_FIXED)
		return;
	uint32_t nt = rf__get32(b + 24) % 8;
	uint64_t hs = rf__header_size(nt);
	if (n < hs + RF__CK_TRAILER)
		return;
	memcpy(b, RF__CK_MAGIC, 8);
	rf__put32(b + 24, nt);
	rf__put32(b + 12, (uint32_t)hs);
	rf__put64(b + 16, n);
	for (uint32_t i = 0; i < nt; i++) {
		uint8_t *e = b + RF__CK_FIXED + RF__CK_ENTRY * i;
		uint64_t o = rf__get64(e + 104), nb = rf__get64(e + 112);
		if (o <= n && nb <= n - o)
			rf__put32(e + 120, rf__crc(b + o, nb));
	}
	uint32_t hc = rf__crc(b, hs - 8);
	rf__put32(b + hs - 8, hc);
	uint8_t *t = b + n - RF__CK_TRAILER;
	memcpy(t, RF__CK_END_MAGIC, 8);
	rf__put64(t + 8, n);
	rf__put32(t + 16, hc);
	rf__put32(t + 28, rf__crc(t, 28));
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct rf__hdr h;
	struct rf_ckpt_meta meta;
	if (n < 2 || n > (1u << 20))
		return 0;
	size_t m = n - 1;
	uint8_t *b = malloc(m);
	FZ_ASSERT(b);
	memcpy(b, d + 1, m);
	if (d[0] & 1)
		reseal(b, m);
	const char *path = fz_file(0, b, m);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	FZ_ASSERT(fd >= 0);
	struct rf__src src = { NULL, fd };
	if (rf__ck_read_header(&src, "fuzz.rfck", m, &h) == 0) {
		FZ_ASSERT(h.ntensors <= RF_CKPT_MAX_TENSORS && h.file_size == m);
		struct rf_ckpt_blob *bl = calloc(h.ntensors + 1, sizeof(*bl));
		FZ_ASSERT(bl);
		for (uint32_t i = 0; i < h.ntensors; i++) {
			FZ_ASSERT(h.e[i].offset <= m && h.e[i].nbytes <= m - h.e[i].offset);
			bl[i].name = h.e[i].name;
			bl[i].dtype = h.e[i].dtype;
			bl[i].ndim = h.e[i].ndim;
			memcpy(bl[i].shape, h.e[i].shape, sizeof(bl[i].shape));
			bl[i].nbytes = h.e[i].nbytes;
			bl[i].data = malloc(h.e[i].nbytes + 1);
			FZ_ASSERT(bl[i].data);
		}
		if ((d[0] & 2) && ring) {
			memset(&meta, 0, sizeof(meta)); /* model "": any */
			(void)rf_ckpt_load(ring, path, &meta, bl, h.ntensors);
		}
		for (uint32_t i = 0; i < h.ntensors; i++)
			free(bl[i].data);
		free(bl);
		free(h.e);
	}
	memset(&meta, 0, sizeof(meta));
	if (rf_ckpt_probe(path, &meta) >= 0) {
		struct rf__runstate rs, rs2;
		uint8_t enc[RF_CKPT_EXTRA_MAX];
		char msg[256];
		FZ_ASSERT(meta.extra_len <= RF_CKPT_EXTRA_MAX);
		if (rf__rs_get(&rs, meta.extra, meta.extra_len, msg, sizeof(msg)) == 0 &&
		    rs.version == 2) {
			uint32_t len = rf__rs_put(&rs, enc);
			FZ_ASSERT(len <= RF_CKPT_EXTRA_MAX);
			FZ_ASSERT(rf__rs_get(&rs2, enc, len, msg, sizeof(msg)) == 0);
			for (unsigned tag = 1; tag <= RF__RS_NFIELDS; tag++)
				FZ_ASSERT(rs2.v[tag] == rs.v[tag]);
		}
	}
	close(fd);
	free(b);
	return 0;
}
