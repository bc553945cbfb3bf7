/* test-loader-image -- a folder of JPEG and PNG images of every size, packed by
 * rf-pack --image-folder and served by the loader as (3, S, S) samples. The tree is
 * made here (TurboJPEG and libpng): three classes in folders named out of order, one
 * with a subfolder, a text file beside them; each image a flat colour of its class
 * with a small gradient. rf-pack must list the classes sorted, write each file's bytes
 * as they are with its class as label, and pass over what is not an image only when
 * asked. The loader, on the packed file, read from disk (O_DIRECT, each record by
 * itself) and in memory, in training (RandomResizedCrop + flip) and evaluation
 * (resize + centre crop): every row of every batch is its record's class colour
 * (within JPEG's error), its label the record's; the bits of every batch are the
 * same whatever prefetch, worker count, read mode, a resume inside the epoch or x
 * format (f32 rows, u8 decoded
 * by an op into bf16 NHWC compared after rounding, the u8 bytes themselves in NCHW and
 * NHWC; a mean and std per channel exactly, in the gather and by an op); two
 * epochs differ in training.
 * The same images in a WebDataset shard (a tar made here: KEY.jpg|.png, KEY.cls and a
 * caption each) are read where they lie in it (rf_dataset_open_wds, its member list
 * cached beside it) and packed by rf-pack --webdataset: both give the same bits as
 * the folder's file.
 * A corrupt image fails its batch with the file, record and offset named, or (skip_bad_
 * images) takes its neighbour's row and label and is counted; an image
 * size on a fixed-size dataset, or a variable file of raw records, is refused.
 * With workers 0 the loader starts one decoding thread per CPU the process may run on:
 * one under an affinity of one CPU (it counted the machine's online CPUs before). */
#include <png.h>
#include <sched.h>
#include <sys/wait.h>
#include <turbojpeg.h>

#include "test-loader-util.h"
#include "wds-test.h"

#define NCLS 3
static const char *const cls_dir[NCLS] = { "b_zebra", "a_ant", "c_cow" };  /* unsorted */
/* the colour of each class as sorted by name: a_ant, b_zebra, c_cow */
static const uint8_t colour[NCLS][3] = { { 200, 40, 40 }, { 40, 200, 40 }, { 40, 40, 200 } };

static void image_rgb(uint8_t *px, unsigned w, unsigned h, int k)
{
	for (unsigned y = 0; y < h; y++)
		for (unsigned x = 0; x < w; x++)
			for (unsigned c = 0; c < 3; c++)
				px[(y * w + x) * 3 + c] = (uint8_t)(colour[k][c] + (x * 6) / w);
}

static void write_jpeg(const char *path, unsigned w, unsigned h, int k)
{
	uint8_t *px = malloc((size_t)w * h * 3), *jb = NULL;
	unsigned long js = 0;
	tjhandle t = tjInitCompress();

	CHECK(px && t);
	image_rgb(px, w, h, k);
	CHECK(tjCompress2(t, px, (int)w, 0, (int)h, TJPF_RGB, &jb, &js, TJSAMP_420, 92, 0) == 0);
	t_write(path, jb, js);
	tjFree(jb);
	tjDestroy(t);
	free(px);
}

static void write_png(const char *path, unsigned w, unsigned h, int k)
{
	uint8_t *px = malloc((size_t)w * h * 3);
	FILE *f = fopen(path, "wb");
	png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png_create_info_struct(p);

	CHECK(px && f && p && info);
	image_rgb(px, w, h, k);
	if (setjmp(png_jmpbuf(p)))
		CHECK(!"libpng failed writing the test image");
	png_init_io(p, f);
	png_set_IHDR(p, info, w, h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(p, info);
	for (unsigned y = 0; y < h; y++)
		png_write_row(p, px + (size_t)y * w * 3);
	png_write_end(p, NULL);
	png_destroy_write_struct(&p, &info);
	fclose(f);
	free(px);
}

/* The tree: per class 12 images (every third a PNG) of sizes 24..200, some in a
 * subfolder; a text file in one class and one beside the classes. Returns its root. */
static const char *make_tree(unsigned *count)
{
	const char *root = t_path("tree");
	char p[512];

	CHECK(mkdir(root, 0755) == 0);
	*count = 0;
	for (int d = 0; d < NCLS; d++) {
		int k = d == 0 ? 1 : d == 1 ? 0 : 2;     /* the class's index when sorted */
		snprintf(p, sizeof(p), "%s/%s", root, cls_dir[d]);
		CHECK(mkdir(p, 0755) == 0);
		snprintf(p, sizeof(p), "%s/%s/deeper", root, cls_dir[d]);
		CHECK(mkdir(p, 0755) == 0);
		for (unsigned i = 0; i < 12; i++, (*count)++) {
			unsigned w = 24 + (i * 37 + (unsigned)d * 11) % 177;
			unsigned h = 24 + (i * 53 + (unsigned)d * 7) % 150;
			snprintf(p, sizeof(p), "%s/%s/%s%02u.%s", root, cls_dir[d], i >= 9 ? "deeper/" : "",
				 i, i % 3 == 2 ? "png" : i % 2 ? "JPG" : "jpeg");
			if (i % 3 == 2)
				write_png(p, w, h, k);
			else
				write_jpeg(p, w, h, k);
		}
	}
	snprintf(p, sizeof(p), "%s/a_ant/notes.txt", root);
	t_write(p, "not an image", 12);
	snprintf(p, sizeof(p), "%s/README", root);
	t_write(p, "x", 1);
	return root;
}

/* A WebDataset shard of the tree's images in rf-pack's record order (class by class
 * sorted, each class's files sorted; a text member per sample beside them), keys
 * %05u with .jpg/.png and .cls. */
static const char *make_shard(const char *root)
{
	static const char *const sorted_dir[NCLS] = { "a_ant", "b_zebra", "c_cow" };
	const char *path = t_path("shard-000.tar");
	FILE *f = fopen(path, "wb");
	uint8_t zero[1024] = { 0 };

	CHECK(f);
	for (unsigned r = 0; r < NCLS * 12; r++) {
		unsigned k = r / 12, i = r % 12, d;
		char p[512], name[64], cls[16];
		size_t n;
		uint8_t *b;
		for (d = 0; strcmp(cls_dir[d], sorted_dir[k]); d++)
			;
		snprintf(p, sizeof(p), "%s/%s/%s%02u.%s", root, cls_dir[d], i >= 9 ? "deeper/" : "",
			 i, i % 3 == 2 ? "png" : i % 2 ? "JPG" : "jpeg");
		b = t_read(p, &n);
		snprintf(name, sizeof(name), "s/%05u.%s", r, i % 3 == 2 ? "png" : "jpg");
		w_member(f, name, b, n);
		snprintf(name, sizeof(name), "s/%05u.cls", r);
		snprintf(cls, sizeof(cls), "%u\n", k);
		w_member(f, name, cls, strlen(cls));
		snprintf(name, sizeof(name), "s/%05u.txt", r);
		w_member(f, name, "caption", 7);
		free(b);
	}
	CHECK(fwrite(zero, 1, 1024, f) == 1024);
	CHECK(fclose(f) == 0);
	return path;
}

static int run(const char *const *argv)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The packed file: the classes sorted, every image's bytes and its label. */
static void check_packed(const char *path, unsigned count)
{
	struct rf_dataset ds;
	uint64_t per[NCLS] = { 0 };

	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, RF_DS_VERIFY), rf_last_error());
	CHECK(rf_dataset_variable(&ds) && ds.encoding == RF_REC_ENC_IMAGE);
	CHECK_EQ(ds.count, count);
	CHECK_EQ(ds.num_classes, NCLS);
	CHECK(ds.classes && !strcmp(ds.classes[0], "a_ant") && !strcmp(ds.classes[1], "b_zebra") &&
	      !strcmp(ds.classes[2], "c_cow"));
	for (uint64_t i = 0; i < ds.count; i++) {
		int32_t lab;
		uint8_t *b = malloc(ds.max_record);
		CHECK(b);
		CHECK(rf_dataset_read_record(&ds, i, b, &lab) == 0);
		CHECK(lab >= 0 && lab < NCLS);
		CHECK(i == 0 || per[lab] || lab == (int32_t)(i / 12)); /* class by class */
		per[lab]++;
		CHECK((b[0] == 0xff && b[1] == 0xd8) || b[0] == 0x89);
		free(b);
	}
	for (int k = 0; k < NCLS; k++)
		CHECK_EQ(per[k], 12u);
	rf_dataset_close(&ds);
}

struct epoch_out {
	uint8_t *x;              /* every row's 3 x S x S values as u8 (x * 255 rounded) */
	int32_t *y;
	uint64_t *order;
};

/* Epoch ep of a loader made with o into e (rows in the epoch's order), from batch b0
 * on (a resume: rf_loader_seek; the rows before it stay zero). */
static void epoch_from(struct tl_env *v, const struct rf_dataset *ds, struct rf_loader_opts o,
		       uint64_t ep, uint64_t b0, struct epoch_out *e)
{
	struct rf_loader *l;
	struct rf_batch b;
	size_t S = o.image_size, row = 3 * S * S, pos = b0 * o.batch;
	int r;

	o.devices = v->dev;
	o.ndevices = 1;
	o.host = v->dev[0];
	CHECK_OPEN(rf_loader_create(&l, v->e, ds, &o), rf_last_error());
	CHECK(rf_loader_seek(l, ep, b0) == 0);
	e->x = calloc(ds->count, row);
	e->y = calloc(ds->count, sizeof(int32_t));
	e->order = malloc(ds->count * sizeof(uint64_t));
	CHECK(e->x && e->y && e->order);
	CHECK(rf_loader_order(l, ep, e->order, ds->count) == 0);
	while ((r = rf_loader_next(l, &b)) == 1) {
		CHECK_OPEN(rf_loader_wait(l, &b), rf_loader_batch_error(l, &b));
		for (unsigned j = 0; j < b.n; j++, pos++) {
			const struct rf_tensor *x = b.x[0];
			for (size_t c = 0; c < 3; c++)
				for (size_t k = 0; k < S * S; k++) {
					float f;
					if (x->dtype == RF_U8 && x->layout == RF_LAYOUT_NHWC) {
						CHECK(x->ndim == 4 && x->shape[1] == 3);
						f = ((const uint8_t *)x->data)[j * row + k * 3 + c] / 255.0f;
					} else if (x->dtype == RF_U8) {
						f = ((const uint8_t *)x->data)[j * row + c * S * S + k] / 255.0f;
					} else if (x->dtype == RF_F32) {
						f = ((const float *)x->data)[j * row + c * S * S + k];
					} else { /* bf16 NHWC */
						uint16_t h = ((const uint16_t *)x->data)[j * row + k * 3 + c];
						uint32_t u = (uint32_t)h << 16;
						memcpy(&f, &u, 4);
					}
					e->x[pos * row + c * S * S + k] = (uint8_t)lrintf(f * 255.0f);
				}
			e->y[pos] = b.y[0] ? ((const int32_t *)b.y[0]->data)[j] : -1;
		}
	}
	CHECK(r == 0);
	CHECK_EQ(pos, ds->count);
	rf_loader_destroy(l);
}

/* With workers 0: as many decoding threads as CPUs the process may run on (at most
 * 16), with its affinity as it is and narrowed to one CPU. */
static void check_auto_workers(struct tl_env *v, const struct rf_dataset *ds,
			       struct rf_loader_opts o)
{
	cpu_set_t all, one;
	struct rf_loader *l;
	int first = -1;

	CHECK(sched_getaffinity(0, sizeof(all), &all) == 0);
	for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
		if (CPU_ISSET(c, &all))
			first = c;
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	o.workers = 0;
	o.devices = v->dev;
	o.ndevices = 1;
	o.host = v->dev[0];
	for (int k = 0; k < 2; k++) {
		unsigned want = k ? 1u : (unsigned)CPU_COUNT(&all) < 16 ? (unsigned)CPU_COUNT(&all) : 16;
		CHECK(sched_setaffinity(0, sizeof(cpu_set_t), k ? &one : &all) == 0);
		CHECK_EQ(t_threads_named("rf-loader", 1), 0u);
		CHECK_OPEN(rf_loader_create(&l, v->e, ds, &o), rf_last_error());
		CHECK_EQ(t_threads_named("rf-loader", 1), want);
		rf_loader_destroy(l);
	}
	CHECK(sched_setaffinity(0, sizeof(all), &all) == 0);
}

static void epoch(struct tl_env *v, const struct rf_dataset *ds, struct rf_loader_opts o,
		  uint64_t ep, struct epoch_out *e)
{
	epoch_from(v, ds, o, ep, 0, e);
}

static void epoch_free(struct epoch_out *e)
{
	free(e->x);
	free(e->y);
	free(e->order);
}

/* Every row its record's class colour (within tol), its label its record's. */
static void check_colours(const struct rf_dataset *ds, const struct epoch_out *e, unsigned S,
			  int tol)
{
	for (uint64_t p = 0; p < ds->count; p++) {
		int32_t lab;
		CHECK(rf_dataset_read_record(ds, e->order[p], NULL, &lab) == 0);
		CHECK_EQ(e->y[p], lab);
		for (unsigned c = 0; c < 3; c++)
			for (unsigned k = 0; k < S * S; k++) {
				int v = e->x[(p * 3 + c) * S * S + k];
				if (abs(v - colour[lab][c] - 3) > tol) {
					fprintf(stderr, "record %" PRIu64 " (class %d) channel %u pixel %u: "
						"%d, expected %d +- %d\n", e->order[p], lab, c, k, v,
						colour[lab][c] + 3, tol);
					exit(1);
				}
			}
	}
}

/* Epoch ep's x as floats in (n, 3, S, S) order, from f32 NCHW or bf16 NHWC batches. */
static float *epoch_floats(struct tl_env *v, const struct rf_dataset *ds,
			   struct rf_loader_opts o, uint64_t ep)
{
	struct rf_loader *l;
	struct rf_batch b;
	size_t S = o.image_size, row = 3 * S * S, pos = 0;
	float *out = calloc(ds->count, row * sizeof(float));
	int r;

	o.devices = v->dev;
	o.ndevices = 1;
	o.host = v->dev[0];
	CHECK(out);
	CHECK_OPEN(rf_loader_create(&l, v->e, ds, &o), rf_last_error());
	CHECK(rf_loader_seek(l, ep, 0) == 0);
	while ((r = rf_loader_next(l, &b)) == 1) {
		CHECK_OPEN(rf_loader_wait(l, &b), rf_loader_batch_error(l, &b));
		for (unsigned j = 0; j < b.n; j++, pos++)
			for (size_t c = 0; c < 3; c++)
				for (size_t k = 0; k < S * S; k++) {
					float f;
					if (b.x[0]->dtype == RF_F32) {
						f = ((const float *)b.x[0]->data)[j * row + c * S * S + k];
					} else {
						uint16_t h = ((const uint16_t *)b.x[0]->data)[j * row + k * 3 + c];
						uint32_t u = (uint32_t)h << 16;
						memcpy(&f, &u, 4);
					}
					out[pos * row + c * S * S + k] = f;
				}
	}
	CHECK(r == 0);
	CHECK_EQ(pos, ds->count);
	rf_loader_destroy(l);
	return out;
}

static float bf16_round(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
	memcpy(&f, &u, 4);
	return f;
}

/* A mean and std per channel (ImageNet's): each float is (u8 / 255 - mean[c]) / std[c]
 * of the u8 epoch's byte, exactly -- decoded in the gather (f32 rows) and by an op (bf16
 * NHWC) -- and the refusals of options that do not fit. */
static void check_norm(struct tl_env *v, const struct rf_dataset *ds, struct rf_loader_opts o)
{
	static const float m[3] = { 0.485f, 0.456f, 0.406f }, sd[3] = { 0.229f, 0.224f, 0.225f };
	size_t S = o.image_size, row = 3 * S * S;
	struct epoch_out u;
	struct rf_loader *l;

	o.x_dtype = RF_U8;
	epoch(v, ds, o, 0, &u);
	o.x_dtype = RF_F32;
	o.norm_channels = 3;
	memcpy(o.channel_mean, m, sizeof(m));
	memcpy(o.channel_std, sd, sizeof(sd));
	for (int pass = 0; pass < 2; pass++) {
		if (pass) {
			o.x_dtype = RF_BF16;
			o.x_layout = RF_LAYOUT_NHWC;
		}
		float *f = epoch_floats(v, ds, o, 0);
		for (size_t i = 0; i < ds->count * row; i++) {
			unsigned c = (unsigned)(i % row / (S * S));
			volatile float t = (float)u.x[i] * (1.0f / 255.0f);
			volatile float w = t - m[c];
			float want = w / sd[c];
			if (pass)
				want = bf16_round(want);
			if (f[i] != want) {
				fprintf(stderr, "norm pass %d: value %zu (channel %u): %.9g, expected "
					"%.9g\n", pass, i, c, f[i], want);
				exit(1);
			}
		}
		free(f);
	}
	epoch_free(&u);
	o.devices = v->dev;
	o.ndevices = 1;
	o.norm_channels = 1;
	CHECK(rf_loader_create(&l, v->e, ds, &o) == -EINVAL);
	CHECK(strstr(rf_last_error(), "norm_channels 1: the records are 3 channels"));
	o.norm_channels = 5;
	CHECK(rf_loader_create(&l, v->e, ds, &o) == -EINVAL);
	CHECK(strstr(rf_last_error(), "expected 0 (one mean and std) to 4"));
	o.norm_channels = 3;
	o.channel_std[1] = 0;
	CHECK(rf_loader_create(&l, v->e, ds, &o) == -EINVAL);
	CHECK(strstr(rf_last_error(), "channel 1: mean 0.456, std 0"));
	o.channel_std[1] = sd[1];
	o.mean = 0.5f;
	CHECK(rf_loader_create(&l, v->e, ds, &o) == -EINVAL);
	CHECK(strstr(rf_last_error(), "expected one or the other"));
	o.mean = 0;
	o.x_dtype = RF_U8;
	o.x_layout = RF_LAYOUT_ROWMAJOR;
	CHECK(rf_loader_create(&l, v->e, ds, &o) == -EINVAL);
	CHECK(strstr(rf_last_error(), "with x_dtype RF_U8"));
}

static int same(const struct rf_dataset *ds, const struct epoch_out *a,
		const struct epoch_out *b, unsigned S, int tol)
{
	for (size_t i = 0; i < ds->count * 3 * S * S; i++)
		if (abs((int)a->x[i] - (int)b->x[i]) > tol)
			return 0;
	return !memcmp(a->y, b->y, ds->count * sizeof(int32_t));
}

int main(int argc, char **argv)
{
	struct tl_env v;
	struct rf_dataset ds, fixed;
	struct rf_loader_opts base = { .batch = 8, .seed = 11, .hflip = 1, .image_size = 20 };
	struct epoch_out a, b;
	const char *root, *out, *bad;
	unsigned count;

	if (argc != 2) {
		fprintf(stderr, "usage: %s RF-PACK\n", argv[0]);
		return 2;
	}
	t_mkdir("loader-image");
	root = make_tree(&count);
	out = t_path("tree.rfrec");
	CHECK(run((const char *const[]){ argv[1], "--image-folder", root, "-o", out, NULL }) == 0);
	check_packed(out, count);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, out, RF_DS_VERIFY), rf_last_error());
	tl_open(&v, 1);

	/* training and evaluation: class colours and labels, read from disk */
	epoch(&v, &ds, base, 0, &a);
	check_colours(&ds, &a, 20, 12);
	base.image_eval = 1;
	epoch(&v, &ds, base, 0, &b);
	check_colours(&ds, &b, 20, 12);
	epoch_free(&b);
	base.image_eval = 0;

	/* the same bits whatever prefetch, workers, read mode; exact decode too */
	struct rf_loader_opts o = base;
	o.prefetch = 1;
	o.workers = 3;
	epoch(&v, &ds, o, 0, &b);
	CHECK(same(&ds, &a, &b, 20, 0));
	epoch_free(&b);
	o = base;
	o.in_memory = 1;
	o.workers = 1;
	epoch(&v, &ds, o, 0, &b);
	CHECK(same(&ds, &a, &b, 20, 0));
	epoch_free(&b);
	o = base;
	o.buffered = 1;
	o.prefetch = 7;
	epoch(&v, &ds, o, 0, &b);
	CHECK(same(&ds, &a, &b, 20, 0));
	epoch_free(&b);
	/* a resume at batch 2: the same bits from there on */
	epoch_from(&v, &ds, base, 0, 2, &b);
	CHECK(!memcmp(a.x + 2 * 8 * 3 * 20 * 20, b.x + 2 * 8 * 3 * 20 * 20,
		      (ds.count - 16) * 3 * 20 * 20));
	CHECK(!memcmp(a.y + 16, b.y + 16, (ds.count - 16) * sizeof(int32_t)));
	epoch_free(&b);
	/* u8 staging decoded by an op into bf16 NHWC: the same values, rounded to bf16 */
	o = base;
	o.x_dtype = RF_BF16;
	o.x_layout = RF_LAYOUT_NHWC;
	epoch(&v, &ds, o, 0, &b);
	CHECK(same(&ds, &a, &b, 20, 1));
	epoch_free(&b);
	/* the bytes themselves (x_dtype u8: the gather's staging is x) */
	o = base;
	o.x_dtype = RF_U8;
	epoch(&v, &ds, o, 0, &b);
	CHECK(same(&ds, &a, &b, 20, 0));
	epoch_free(&b);
	/* u8 NHWC: the same bytes, each pixel's channels side by side */
	o.x_layout = RF_LAYOUT_NHWC;
	epoch(&v, &ds, o, 0, &b);
	CHECK(same(&ds, &a, &b, 20, 0));
	epoch_free(&b);
	check_norm(&v, &ds, base);
	check_auto_workers(&v, &ds, base);
	o = base;
	o.image_exact = 1;
	epoch(&v, &ds, o, 0, &b);
	check_colours(&ds, &b, 20, 12);
	epoch_free(&b);
	/* another epoch: another order, other crops */
	epoch(&v, &ds, base, 1, &b);
	check_colours(&ds, &b, 20, 12);
	CHECK(memcmp(a.order, b.order, ds.count * sizeof(uint64_t)));
	epoch_free(&b);
	epoch_free(&a);

	/* the images read from a WebDataset shard where they lie, and packed from it: the
	 * same records, so the same bits */
	{
		const char *shard = make_shard(root), *packed = t_path("shard.rfrec");
		struct rf_dataset w;
		struct epoch_out c;
		char idx[512];
		epoch(&v, &ds, base, 0, &a);
		CHECK_OPEN(rf_dataset_open_wds(&w, shard, 0, RF_DS_VERIFY), rf_last_error());
		CHECK(rf_dataset_variable(&w) && w.count == ds.count && w.num_classes == NCLS);
		epoch(&v, &w, base, 0, &b);
		CHECK(same(&ds, &a, &b, 20, 0));
		epoch_free(&b);
		rf_dataset_close(&w);
		snprintf(idx, sizeof(idx), "%s.idx", shard);
		CHECK(t_exists(idx));            /* the member list, cached beside it */
		CHECK_OPEN(rf_dataset_open_wds(&w, shard, 0, 0), rf_last_error());
		rf_dataset_close(&w);
		CHECK(run((const char *const[]){ argv[1], "--webdataset", shard, "-o", packed,
						 NULL }) == 0);
		CHECK_OPEN(rf_dataset_open_rfrec(&w, packed, RF_DS_VERIFY), rf_last_error());
		epoch(&v, &w, base, 0, &c);
		CHECK(same(&ds, &a, &c, 20, 0));
		epoch_free(&c);
		rf_dataset_close(&w);
		CHECK(rf_dataset_open_wds(&w, root, 0, 0) < 0);   /* a folder is no shard */
		epoch_free(&a);
	}

	/* a corrupt image: its batch fails naming the file, the record and its offset */
	{
		size_t n;
		uint8_t *f = t_read(out, &n);
		struct rf_dataset_loc loc;
		struct rf_dataset d2;
		struct rf_loader *l;
		struct rf_batch bt;
		char want[128];
		int failed = 0, r;
		rf_dataset_payload_loc(&ds, 5, &loc);
		for (uint64_t k = 0; k < loc.length - 8; k++)
			f[loc.offset + 8 + k] ^= 0x5a;
		bad = t_path("bad.rfrec");
		t_write(bad, f, n);
		free(f);
		CHECK_OPEN(rf_dataset_open_rfrec(&d2, bad, 0), rf_last_error());
		o = base;
		o.devices = v.dev;
		o.ndevices = 1;
		CHECK_OPEN(rf_loader_create(&l, v.e, &d2, &o), rf_last_error());
		snprintf(want, sizeof(want), "record 5 (offset %" PRIu64 ", %" PRIu64 " bytes)",
			 loc.offset, loc.length);
		while ((r = rf_loader_next(l, &bt)) == 1)
			if (rf_loader_wait(l, &bt) < 0) {
				const char *m = rf_loader_batch_error(l, &bt);
				CHECK(strstr(m, "bad.rfrec") && strstr(m, want));
				failed++;
			}
		CHECK(r == 0 && failed == 1);
		rf_loader_destroy(l);
		/* skip_bad_images: the epoch is whole, record 5's row and label are its
		 * neighbour's in the batch (f32 rows and u8 NHWC), the image counted; a
		 * batch of that image alone still fails */
		for (int pass = 0; pass < 2; pass++) {
			struct rf_loader_stats st;
			struct epoch_out e;
			size_t row = 3 * 20 * 20;
			uint64_t p = 0;
			o = base;
			o.skip_bad_images = 1;
			if (pass) {
				o.x_dtype = RF_U8;
				o.x_layout = RF_LAYOUT_NHWC;
			}
			epoch(&v, &d2, o, 0, &e);
			while (e.order[p] != 5)
				p++;
			uint64_t q = p % o.batch ? p - 1 : p + 1;
			CHECK(!memcmp(e.x + p * row, e.x + q * row, row) && e.y[p] == e.y[q]);
			o.devices = v.dev;
			o.ndevices = 1;
			CHECK_OPEN(rf_loader_create(&l, v.e, &d2, &o), rf_last_error());
			while ((r = rf_loader_next(l, &bt)) == 1)
				CHECK_OPEN(rf_loader_wait(l, &bt), rf_loader_batch_error(l, &bt));
			rf_loader_get_stats(l, &st);
			CHECK(r == 0 && st.images_skipped == 1);
			/* per batch delivered: epoch 0's count is its own, whatever is pushed
			 * of epoch 1 ahead of it (the stats count that too); a seek drops
			 * what was pushed before it */
			uint64_t nb = rf_loader_batches_per_epoch(l), b5 = p / o.batch;
			CHECK(rf_loader_images_skipped(l, 0, 0, nb) == 1);
			CHECK(rf_loader_images_skipped(l, 0, b5, b5 + 1) == 1);
			CHECK(rf_loader_images_skipped(l, 0, 0, b5) == 0);
			CHECK(rf_loader_images_skipped(l, 0, b5 + 1, nb) == 0);
			while ((r = rf_loader_next(l, &bt)) == 1)
				CHECK_OPEN(rf_loader_wait(l, &bt), rf_loader_batch_error(l, &bt));
			CHECK(r == 0);
			rf_loader_get_stats(l, &st);
			CHECK(st.images_skipped == 2);
			CHECK(rf_loader_images_skipped(l, 0, 0, nb) == 1);
			CHECK(rf_loader_images_skipped(l, 1, 0, nb) == 1);
			CHECK(rf_loader_seek(l, 1, 0) == 0);
			CHECK(rf_loader_images_skipped(l, 1, 0, nb) == 0);
			rf_loader_destroy(l);
			epoch_free(&e);
		}
		o = base;
		o.skip_bad_images = 1;
		o.batch = 1;
		o.devices = v.dev;
		o.ndevices = 1;
		CHECK_OPEN(rf_loader_create(&l, v.e, &d2, &o), rf_last_error());
		failed = 0;
		while ((r = rf_loader_next(l, &bt)) == 1)
			if (rf_loader_wait(l, &bt) < 0) {
				CHECK(strstr(rf_loader_batch_error(l, &bt), "none of the 1 images"));
				failed++;
			}
		CHECK(r == 0 && failed == 1);
		rf_loader_destroy(l);
		rf_dataset_close(&d2);
	}

	/* refusals: an image size on fixed records; a variable file of raw records */
	{
		struct rf_loader *l;
		const char *fx = tl_make_rfrec("fixed.rfrec", 20, 12, RF_LABEL_U8);
		const char *raw = t_path("raw.rfrec");
		struct rf_rec_writer *w;
		CHECK_OPEN(rf_dataset_open_rfrec(&fixed, fx, 0), rf_last_error());
		o = base;
		o.devices = v.dev;
		o.ndevices = 1;
		CHECK(rf_loader_create(&l, v.e, &fixed, &o) == -EINVAL);
		CHECK(strstr(rf_last_error(), "not encoded images"));
		rf_dataset_close(&fixed);
		CHECK_OPEN(rf_rec_writer_open(&w, raw, &(struct rf_rec_layout){ .variable = 1 },
					      RF_REC_OVERWRITE), rf_last_error());
		CHECK(rf_rec_writer_append_bytes(w, "abc", 3, -1) == 0);
		CHECK(rf_rec_writer_finish(w) == 0);
		CHECK_OPEN(rf_dataset_open_rfrec(&fixed, raw, 0), rf_last_error());
		CHECK(rf_loader_create(&l, v.e, &fixed, &o) == -ENOTSUP);
		CHECK(strstr(rf_last_error(), "not images"));
		o.image_size = 0;
		CHECK(rf_loader_create(&l, v.e, &fixed, &o) < 0);
		rf_dataset_close(&fixed);
	}

	/* rf-pack: a file that is not an image inside the tree fails, or is passed over */
	{
		char p[512];
		snprintf(p, sizeof(p), "%s/c_cow/fake.jpg", root);
		t_write(p, "GIF89a....", 10);
		CHECK(run((const char *const[]){ argv[1], "--image-folder", root, "-o", out,
						 "--force", NULL }) == 1);
		CHECK(run((const char *const[]){ argv[1], "--image-folder", root, "-o", out,
						 "--force", "--skip-bad-images", NULL }) == 0);
		check_packed(out, count);
	}
	rf_dataset_close(&ds);
	tl_close(&v);
	printf("ok\n");
	return 0;
}
