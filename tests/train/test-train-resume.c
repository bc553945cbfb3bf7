/* test-train-resume: checkpoints through train/checkpoint.h. A run of 2 epochs (MLP,
 * 2048 records, and LeNet, 512 records) is compared with a run of 1 epoch that saves
 * a checkpoint, then a fresh trainer that loads it and trains the 2nd epoch: the final
 * weights are bitwise equal (plain SGD has no state besides the weights; the shuffle
 * of epoch 2 depends only on (seed, epoch)). Then every refusal says why: a truncated
 * file, a flipped data byte (CRC), another model (an MLP checkpoint into LeNet),
 * another seed, another batch size, a missing file, and fields resealed with valid CRCs
 * that no run writes (2^32 epochs, a flag of 2, an unknown schedule kind, a NaN
 * running loss, also inside an epoch, more correct answers than records seen) -- each
 * with a message naming the file or the field; weights that are not finite (a run that
 * diverged) are neither saved, the file kept as it was, nor loaded. Also the same with 2 data-parallel replicas (both get the loaded weights).
 * Inside an epoch (opts.checkpoint_every): the file taken after batch 3 of epoch 2,
 * loaded by a fresh trainer, ends epoch 2 with the uninterrupted run's weights and loss
 * (MLP, 1 and 2 replicas; LeNet with momentum; with augmentation, which a run without
 * it may not continue). Skips (77) without the dataset. */
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <zlib.h>
#include "train-test.h"
#include "checkpoint.h"
#include "trainer.h"

static char dir[256];

static struct rf_trainer *make(struct tt_env *t, const char *model, uint64_t seed,
			       unsigned batch, unsigned K, uint64_t limit)
{
	struct rf_train_opts o = { 0 };
	struct rf_trainer *tr;

	o.model = model;
	o.data_dir = tt_data_dir();
	o.seed = seed;
	o.batch_size = batch;
	o.devices = K;
	o.limit = limit;
	o.no_eval = 1;
	if (rf_trainer_create(&tr, t->eng, &o) < 0) {
		fprintf(stderr, "trainer: %s\n", rf_last_error());
		exit(1);
	}
	return tr;
}

static void epoch(struct rf_trainer *tr)
{
	struct rf_epoch_stats st;

	if (rf_trainer_epoch(tr, &st) < 0) {
		fprintf(stderr, "epoch: %s\n", rf_last_error());
		exit(1);
	}
}

static void resume_equal(struct tt_env *t, const char *model, unsigned K, uint64_t limit)
{
	size_t n = rf_model_spec(model)->numel;
	float *a = malloc(n * 4), *b = malloc(n * 4);
	char path[300];
	struct rf_trainer *tr;

	CHECK(a && b);
	snprintf(path, sizeof(path), "%s/%s.ckpt", dir, model);
	/* uninterrupted, saving after each epoch like rf-train does */
	tr = make(t, model, 5, 256, K, limit);
	epoch(tr);
	CHECK_OK(rf_trainer_save(tr, path));
	epoch(tr);
	CHECK_OK(rf_trainer_read_params(tr, 0, a));
	rf_trainer_destroy(tr);
	/* 1 epoch, save; then a fresh trainer resumes */
	tr = make(t, model, 5, 256, K, limit);
	epoch(tr);
	CHECK_OK(rf_trainer_save(tr, path));
	rf_trainer_destroy(tr);
	tr = make(t, model, 5, 256, K, limit);
	if (rf_trainer_load(tr, path) < 0) {
		fprintf(stderr, "load: %s\n", rf_last_error());
		exit(1);
	}
	CHECK_EQ(rf_trainer_epochs_done(tr), 1);
	epoch(tr);
	CHECK_EQ(rf_trainer_epochs_done(tr), 2);
	for (unsigned r = 0; r < K; r++) {
		CHECK_OK(rf_trainer_read_params(tr, r, b));
		long d = tt_bitdiff(a, b, n);
		if (d >= 0) {
			fprintf(stderr, "FAIL: %s K=%u: resumed replica %u differs at %ld: %.9g vs %.9g\n",
				model, K, r, d, a[d], b[d]);
			exit(1);
		}
	}
	rf_trainer_destroy(tr);
	printf("%s K=%u: 1 epoch + resume + 1 epoch == 2 epochs, bitwise (%zu floats)\n", model, K, n);
	free(a);
	free(b);
}

/* The progress callback of the uninterrupted run: once batch `at` of epoch 2 is
 * pushed, the trainer has just saved the checkpoint taken there; keep a copy. */
struct snap {
	const char *from, *to;
	uint64_t at;
	int taken;
};

static void copy_file(const char *from, const char *to, long trunc, long flip);

static void snap_progress(void *ctx, unsigned epoch, uint64_t batch, uint64_t nb, double loss)
{
	struct snap *s = ctx;

	(void)nb;
	(void)loss;
	if (epoch == 2 && batch == s->at && !s->taken) {
		copy_file(s->from, s->to, -1, -1);
		s->taken = 1;
	}
}

/* Inside an epoch: a run of 2 epochs saving every 3 batches, and a fresh trainer that
 * loads the file taken after batch 3 of epoch 2 and trains the rest of it, end with the
 * same weights (every replica), the same epoch count and the same loss. */
static void resume_mid(struct tt_env *t, const char *model, unsigned K, float momentum,
		       int augment, uint64_t limit)
{
	size_t n = rf_model_spec(model)->numel;
	float *a = malloc(n * 4), *b = malloc(n * 4);
	char path[300], mid[300];
	struct rf_train_opts o = { 0 };
	struct rf_epoch_stats sa, sb;
	struct rf_trainer *tr;
	struct snap sn = { path, mid, 3, 0 };

	CHECK(a && b);
	snprintf(path, sizeof(path), "%s/%s-every.ckpt", dir, model);
	snprintf(mid, sizeof(mid), "%s/%s-mid.ckpt", dir, model);
	o.model = model;
	o.data_dir = tt_data_dir();
	o.seed = 9;
	o.batch_size = 128;
	o.devices = K;
	o.limit = limit;
	o.no_eval = 1;
	o.momentum = momentum;
	o.augment = augment;
	o.checkpoint = path;
	o.checkpoint_every = 3;
	o.progress = snap_progress;
	o.progress_ctx = &sn;
	CHECK_OK(rf_trainer_create(&tr, t->eng, &o));
	CHECK(rf_trainer_batches(tr) > 4);
	CHECK_OK(rf_trainer_epoch(tr, &sa));
	CHECK_OK(rf_trainer_epoch(tr, &sa));
	CHECK(sn.taken);
	CHECK_OK(rf_trainer_read_params(tr, 0, a));
	rf_trainer_destroy(tr);
	o.progress = NULL;
	o.checkpoint_every = 0;
	CHECK_OK(rf_trainer_create(&tr, t->eng, &o));
	if (rf_trainer_load(tr, mid) < 0) {
		fprintf(stderr, "load: %s\n", rf_last_error());
		exit(1);
	}
	CHECK_EQ(rf_trainer_epochs_done(tr), 1);
	CHECK_EQ(rf_trainer_epoch_batches_done(tr), 3);
	CHECK_OK(rf_trainer_epoch(tr, &sb));
	CHECK_EQ(rf_trainer_epochs_done(tr), 2);
	CHECK_EQ(sb.batches, rf_trainer_batches(tr) - 3);
	CHECK(fabs(sa.train_loss - sb.train_loss) <= 1e-9 * fabs(sa.train_loss));
	CHECK_EQ(sa.param_hash, sb.param_hash);
	for (unsigned r = 0; r < K; r++) {
		CHECK_OK(rf_trainer_read_params(tr, r, b));
		long d = tt_bitdiff(a, b, n);
		if (d >= 0) {
			fprintf(stderr, "FAIL: %s K=%u: resumed inside the epoch, replica %u differs "
				"at %ld: %.9g vs %.9g\n", model, K, r, d, a[d], b[d]);
			exit(1);
		}
	}
	rf_trainer_destroy(tr);
	printf("%s K=%u momentum %g%s: resumed after batch 3 of epoch 2 == uninterrupted, "
	       "bitwise; loss %.9g == %.9g\n", model, K, (double)momentum,
	       augment ? " augment" : "", sa.train_loss, sb.train_loss);
	if (augment) {
		/* the run goes on with the same augmentation or not at all */
		o.augment = 0;
		CHECK_OK(rf_trainer_create(&tr, t->eng, &o));
		CHECK(rf_trainer_load(tr, mid) == -ESTALE);
		printf("  without --augment    -> %s\n", rf_trainer_last_error(tr));
		CHECK(strstr(rf_trainer_last_error(tr), "--augment"));
		rf_trainer_destroy(tr);
	}
	free(a);
	free(b);
}

static void refused(struct rf_trainer *tr, const char *path, const char *what, const char *needle)
{
	int ret = rf_trainer_load(tr, path);
	const char *err = rf_trainer_last_error(tr);

	printf("  %-22s -> %d: %s\n", what, ret, err);
	CHECK(ret < 0);
	CHECK(err[0] && strstr(err, needle));
	CHECK(strcmp(err, rf_last_error()) == 0);
}

static void copy_file(const char *from, const char *to, long trunc, long flip)
{
	FILE *f = fopen(from, "rb"), *g = fopen(to, "wb");
	char buf[1 << 16];
	size_t n, tot = 0;

	CHECK(f && g);
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		if (flip >= 0 && (long)tot <= flip && flip < (long)(tot + n))
			buf[flip - (long)tot] ^= 0x10;
		if (trunc >= 0 && tot + n > (size_t)trunc)
			n = (size_t)trunc - tot;
		fwrite(buf, 1, n, g);
		tot += n;
		if (trunc >= 0 && tot >= (size_t)trunc)
			break;
	}
	fclose(f);
	fclose(g);
}

/* Set the u64 at off (little-endian) and reseal the file: the header CRC (its last
 * 8 bytes hold it) and the trailer's copy of it and own CRC (train/ckpt-format.c), so
 * that only the field's meaning can refuse it. */
static void patch_reseal(const char *from, const char *to, long off, uint64_t v)
{
	FILE *f = fopen(from, "rb");
	long n;
	unsigned char *b;

	CHECK(f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0);
	CHECK((b = malloc((size_t)n)) && fread(b, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	for (int i = 0; i < 8; i++)
		b[off + i] = (unsigned char)(v >> (8 * i));
	uint32_t hs = (uint32_t)b[12] | (uint32_t)b[13] << 8 | (uint32_t)b[14] << 16 |
		      (uint32_t)b[15] << 24;
	uint32_t hc = (uint32_t)crc32(0L, b, hs - 8);
	unsigned char *tr = b + n - 32;
	for (int i = 0; i < 4; i++) {
		b[hs - 8 + i] = (unsigned char)(hc >> (8 * i));
		tr[16 + i] = (unsigned char)(hc >> (8 * i));
	}
	uint32_t tc = (uint32_t)crc32(0L, tr, 28);
	for (int i = 0; i < 4; i++)
		tr[28 + i] = (unsigned char)(tc >> (8 * i));
	CHECK((f = fopen(to, "wb")) && fwrite(b, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	free(b);
}

static unsigned char *read_all(const char *p, size_t *n)
{
	FILE *f = fopen(p, "rb");
	unsigned char *b = NULL;
	long sz;

	if (f && fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (b = malloc((size_t)sz + 1)) && fread(b, 1, (size_t)sz, f) == (size_t)sz)
		*n = (size_t)sz;
	else {
		free(b);
		b = NULL;
	}
	if (f)
		fclose(f);
	return b;
}

/* A run that diverged: weights that are not finite are never saved (the file keeps its
 * last state), and a file holding them (written by hand here, as an older version
 * wrote them) is refused on load, naming the tensor and the element. */
static void nonfinite(struct tt_env *t, struct rf_trainer *tr, const char *good)
{
	const struct rf_model_spec *sp = rf_trainer_spec(tr);
	struct rf_ckpt_blob bl[RF_MODEL_MAX_TENSORS];
	struct rf_ckpt_meta meta;
	char path[310], err[512];
	float *host = malloc(sp->numel * sizeof(float));
	size_t before, after;
	unsigned char *a, *b;

	CHECK(host);
	/* save refused: a copy of the good file stays byte for byte */
	snprintf(path, sizeof(path), "%s/diverged.ckpt", dir);
	copy_file(good, path, -1, -1);
	CHECK_OK(rf_trainer_read_params(tr, 0, host));
	float keep = host[sp->p[0].offset + 7];
	host[sp->p[0].offset + 7] = NAN;
	CHECK_OK(rf_tensor_write(rf_trainer_replica(tr, 0)->p[0], host + sp->p[0].offset));
	int ret = rf_trainer_save(tr, path);
	snprintf(err, sizeof(err), "%s", rf_trainer_last_error(tr));
	printf("  %-22s -> %d: %s\n", "save of NaN weights", ret, err);
	CHECK(ret == -EDOM);
	CHECK(strstr(err, "diverged.ckpt: not written") && strstr(err, "[7] is nan") &&
	      strstr(err, sp->p[0].name) && strstr(err, "diverged"));
	a = read_all(good, &before);
	b = read_all(path, &after);
	CHECK(a && b && before == after && memcmp(a, b, before) == 0);
	free(a);
	free(b);
	host[sp->p[0].offset + 7] = INFINITY;
	CHECK_OK(rf_tensor_write(rf_trainer_replica(tr, 0)->p[0], host + sp->p[0].offset));
	CHECK(rf_trainer_save(tr, path) == -EDOM);
	CHECK(strstr(rf_trainer_last_error(tr), "[7] is infinite"));
	host[sp->p[0].offset + 7] = keep;
	CHECK_OK(rf_tensor_write(rf_trainer_replica(tr, 0)->p[0], host + sp->p[0].offset));

	/* load refused: the good file's tensors (plain SGD: the parameters alone) with a
	 * NaN put in the last tensor, written through the checkpoint format itself */
	CHECK(sp->ntensors <= RF_MODEL_MAX_TENSORS);
	for (unsigned k = 0; k < sp->ntensors; k++) {
		memset(&bl[k], 0, sizeof(bl[k]));
		bl[k].name = sp->p[k].name;
		bl[k].dtype = RF_CKPT_F32;
		bl[k].ndim = (uint32_t)sp->p[k].ndim;
		for (int d = 0; d < sp->p[k].ndim; d++)
			bl[k].shape[d] = (uint64_t)sp->p[k].shape[d];
		bl[k].data = host + sp->p[k].offset;
		bl[k].nbytes = sp->p[k].numel * sizeof(float);
	}
	CHECK_OK(rf_ckpt_probe(good, &meta));
	CHECK_OK(rf_ckpt_load(t->ring, good, &meta, bl, sp->ntensors));
	const struct rf_param_spec *last = &sp->p[sp->ntensors - 1];
	host[last->offset + last->numel - 1] = NAN;
	CHECK_OK(rf_ckpt_save(t->ring, path, &meta, bl, sp->ntensors));
	snprintf(err, sizeof(err), "%s[%zu] is nan", last->name, last->numel - 1);
	refused(tr, path, "NaN weights", err);
	CHECK(strstr(rf_trainer_last_error(tr), "the run that wrote it diverged"));
	free(host);
}

static void refusals(struct tt_env *t)
{
	char good[300], bad[300];
	struct rf_trainer *tr = make(t, "mlp", 5, 256, 1, 512), *le;
	struct stat st;

	snprintf(good, sizeof(good), "%s/good.ckpt", dir);
	snprintf(bad, sizeof(bad), "%s/bad.ckpt", dir);
	CHECK_OK(rf_trainer_save(tr, good));
	CHECK(stat(good, &st) == 0);
	copy_file(good, bad, st.st_size / 2, -1);
	refused(tr, bad, "truncated", "bad.ckpt");
	copy_file(good, bad, -1, (long)st.st_size - 4096 - 100);  /* inside w1's data */
	refused(tr, bad, "flipped byte", "bad.ckpt");
	le = make(t, "lenet", 5, 256, 1, 512);
	refused(le, good, "other model", "good.ckpt");
	rf_trainer_destroy(le);
	le = make(t, "mlp", 6, 256, 1, 512);
	refused(le, good, "other seed", "seed");
	rf_trainer_destroy(le);
	le = make(t, "mlp", 5, 128, 1, 512);
	refused(le, good, "other batch size", "batch");
	rf_trainer_destroy(le);
	snprintf(bad, sizeof(bad), "%s/missing.ckpt", dir);
	refused(tr, bad, "missing", "missing.ckpt");
	/* fields that pass every CRC but no run could have written (the header's extra
	 * field starts at byte 112 and holds the run state, train/runstate.h: an 8-byte
	 * header, then per field a u16 tag, a u16 length and the value, so the value of
	 * tag N lies at RS(N)); a newer run state version and an unknown field */
#define RS(tag) (112 + 8 + 12 * ((tag) - 1) + 4)
	{
		double nan = NAN;
		uint64_t nanbits;
		static const struct { const char *what; long off; uint64_t v; const char *needle; } f[] = {
			{ "2^32 epochs done", 64, 1ull << 32, "epochs done" },
			{ "nesterov 2^32", RS(7), 1ull << 32, "--nesterov" },
			{ "schedule kind 77", RS(8), 77, "--lr-schedule kind" },
			{ "adamw flag 2", RS(13), 2, "--optimizer" },
			{ "augment 2^32", RS(18), 1ull << 32, "--augment" },
			{ "corr 5 at batch 0", RS(16), 5, "correct answers" },
			{ "run state version 4", 116, 4 | 18u << 16 | 1ull << 32 | 8ull << 48,
			  "run state version 4 is newer than this ringflow reads (versions 1 to 3)" },
			{ "run state field 99", 116, 2 | 18u << 16 | 99ull << 32 | 8ull << 48, "tag 99" },
			{ "run state field twice", 112 + 8 + 12, 1 | 8u << 16, "given twice" },
		};
		snprintf(bad, sizeof(bad), "%s/tampered.ckpt", dir);
		for (unsigned i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
			patch_reseal(good, bad, f[i].off, f[i].v);
			refused(tr, bad, f[i].what, f[i].needle);
			CHECK(strstr(rf_trainer_last_error(tr), "tampered.ckpt"));
		}
		memcpy(&nanbits, &nan, 8);
		patch_reseal(good, bad, RS(15), nanbits);
		refused(tr, bad, "running loss NaN", "running loss");
	}
	/* a NaN running loss inside an epoch (batch 1): NaN passed a "< 0" check */
	{
		char bad2[310];
		double nan = NAN;
		uint64_t nanbits;
		memcpy(&nanbits, &nan, 8);
		snprintf(bad2, sizeof(bad2), "%s/tampered2.ckpt", dir);
		patch_reseal(good, bad, RS(14), 1);
		patch_reseal(bad, bad2, RS(15), nanbits);
		refused(tr, bad2, "running loss NaN, mid", "running loss is nan");
	}
	nonfinite(t, tr, good);
	/* the good one still loads */
	CHECK_OK(rf_trainer_load(tr, good));
	rf_trainer_destroy(tr);
}

int main(void)
{
	struct tt_env t;
	const char *tmp = getenv("TMPDIR");

	tt_data_dir();
	snprintf(dir, sizeof(dir), "%s/rf-train-resume-XXXXXX", tmp ? tmp : "/tmp");
	CHECK(mkdtemp(dir));
	tt_open(&t);
	resume_equal(&t, "mlp", 1, 2048);
	resume_equal(&t, "lenet", 1, 512);
	resume_equal(&t, "mlp", 2, 1024);
	resume_mid(&t, "mlp", 1, 0, 0, 1024);
	resume_mid(&t, "mlp", 2, 0.9f, 1, 1024);
	resume_mid(&t, "lenet", 1, 0.9f, 1, 1024);
	refusals(&t);
	tt_close(&t);
	{
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "warning: could not remove %s\n", dir);
	}
	return 0;
}
