/* train/trainer-data.c -- the trainer's data: the Fashion-MNIST IDX files (raw or .gz)
 * or two .rfrec files, their shape check, the limited views (--limit, --test-limit)
 * and the two loaders. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trainer-impl.h"

/* Fashion-MNIST's file i: train images, train labels, test images, test labels. */
static const char *rf__fmnist(int i)
{
	return rf_dataset_fmnist_name(i >= 2, i & 1);
}

/* DIR/NAME or DIR/NAME.gz, whichever exists; -ENOENT if neither, -ENAMETOOLONG if
 * the path does not fit out (cut short, it could name another file); where one exists
 * and cannot be read (permissions), that error, out naming it. */
static int rf__find(const char *dir, const char *name, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/%s", dir, name), e;

	if (n < 0 || (size_t)n + 3 >= len)
		return -ENAMETOOLONG;
	if (access(out, R_OK) == 0)
		return 0;
	e = errno;
	memcpy(out + n, ".gz", 4);
	if (access(out, R_OK) == 0)
		return 0;
	if (e != ENOENT) {   /* the plain one is there and unreadable: its error, named */
		out[n] = 0;
		return -e;
	}
	return -errno;
}

/* The IDX files the trainer opens: all four, or with opts.eval_only the test set's
 * two only (first at p[2], p[3]). */
static int rf__find_files(struct rf_trainer *t, char p[4][RF_TRAIN_PATH_MAX])
{
	struct stat st;
	int i;

	if (stat(t->data_dir, &st) < 0) {  /* not there at all: not "a file is missing" */
		int e = errno;
		if (e == ENOENT && !strcmp(t->data_dir, RF_TRAIN_DEFAULT_DATA))
			rf__trainer_msg(t, "Fashion-MNIST not found: %s does not exist; install "
					"it with: apt-get install dataset-fashion-mnist",
					t->data_dir);
		else
			rf__trainer_msg(t, "--data %s: %s (expected a directory of Fashion-MNIST "
					"IDX files, a .rfrec file or an http:// URL of one)",
					t->data_dir, strerror(e));
		return -e;
	}
	for (i = t->o.eval_only ? 2 : 0; i < 4; i++) {
		int ret = rf__find(t->data_dir, rf__fmnist(i), p[i], sizeof(p[i]));
		if (ret == -ENAMETOOLONG) {
			rf__trainer_msg(t, "--data: %s/%s.gz is longer than %d bytes", t->data_dir,
					rf__fmnist(i), RF_TRAIN_PATH_MAX - 1);
			return ret;
		}
		if (ret < 0 && i >= 2 && t->o.no_eval && !t->o.eval_only) {
			/* no test set, and none needed: the training pair stands in */
			memcpy(p[2], p[0], sizeof(p[2]));
			memcpy(p[3], p[1], sizeof(p[3]));
			t->no_test = 1;
			return 0;
		}
		if (ret < 0 && ret != -ENOENT) {  /* there, but not for us (permissions) */
			rf__trainer_msg(t, "--data: %s: %s", p[i], strerror(-ret));
			return ret;
		}
		if (ret < 0) {
			rf__trainer_msg(t, "Fashion-MNIST not found: %s/%s.gz is missing; "
					"install it with: apt-get install dataset-fashion-mnist",
					t->data_dir, rf__fmnist(i));
			return -ENOENT;
		}
	}
	return 0;
}

/* The images must be u8 28x28 with labels of 10 classes; the message names the file,
 * where the field is (IDX: offset 8; .rfrec: its 4096-byte header) and what was found. */
static int rf__check_shape(struct rf_trainer *t, const struct rf_dataset *d, const char *path)
{
	const char *where = d->kind == RF_DS_RFREC ? "header" : "offset 8";
	char shape[96] = "";
	size_t n = 0;
	unsigned k;

	if (rf_dataset_variable(d)) {
		/* opts.eval_only: rf-infer, whose model's input is fixed by its export (one
		 * of Fashion-MNIST's here): it has no --image-size to give */
		rf__trainer_msg(t, "%s: %s of any length (%s): expected 28x28 images, %s", path,
				d->kind == RF_DS_TAR ? "a WebDataset shard of records" : "records",
				d->encoding == RF_REC_ENC_IMAGE ? "encoded images" : "raw bytes",
				t->o.eval_only ? "the input of this model (Fashion-MNIST's; a model "
				"trained on images, rf-train --image-size, reads these)" :
				"or give --image-size to decode them");
		return -EINVAL;
	}
	if (d->ndim != 2 || d->shape[0] != 28 || d->shape[1] != 28) {
		for (k = 0; k < d->ndim && n < sizeof(shape); k++)
			n += (size_t)snprintf(shape + n, sizeof(shape) - n, "%s%u", k ? "x" : "",
					      (unsigned)d->shape[k]);
		rf__trainer_msg(t, "%s: %s: images of %s, expected 28x28 (Fashion-MNIST)", path,
				where, d->ndim ? shape : "no dims");
		return -EINVAL;
	}
	if (d->dtype != RF_DS_DT_U8) {
		rf__trainer_msg(t, "%s: %s: pixels of dtype 0x%02x, expected u8 (0x08)", path, where,
				(unsigned)d->dtype);
		return -EINVAL;
	}
	if (d->label_kind == RF_LABEL_NONE || (d->num_classes && d->num_classes != 10)) {
		rf__trainer_msg(t, "%s: %s: %s, expected labels of 10 classes", path, where,
				d->label_kind == RF_LABEL_NONE ? "no labels" : "labels of another "
				"class count");
		return -EINVAL;
	}
	return 0;
}

/* A subset is the first `limit` records: a copy of the description with a smaller
 * count (the loader reads records 0 .. count-1 only). */
static void rf__limit_view(struct rf_dataset *v, const struct rf_dataset *ds, uint64_t limit)
{
	unsigned s;

	*v = *ds;
	if (limit && limit < v->count)
		v->count = limit;
	for (s = 0; s < v->nsrc; s++)
		if (v->src[s].stride)    /* a variable file's records: its index says where */
			v->src[s].data_bytes = v->count * v->src[s].stride;
}

/* The one place the datasets are opened (their messages land in t->msg). */
static int rf__open_pair(struct rf_trainer *t, struct rf_dataset *ds, const char *images,
			 const char *labels)
{
	int ret = rf_dataset_open_idx_pair(ds, images, labels, 10, 0);

	if (ret < 0)
		rf__trainer_msg(t, "%s", rf_last_error());
	return ret;
}

/* How the trainer's opens read: its http:// timeout, and the engine's interrupt (a
 * Ctrl-C ends a stalled open as it ends a step, not after every retry's timeout). */
static struct rf_dataset_open_opts rf__open_opts(struct rf_trainer *t, unsigned flags)
{
	struct rf_dataset_open_opts oo = { .flags = flags,
					   .http_timeout_ms = t->o.http_timeout_ms };

	rf_engine_get_interrupt(t->eng, &oo.interrupt, &oo.interrupt_arg);
	return oo;
}

/* The test set beside a .rfrec training set: the last "train" of its file name made
 * "t10k", else "test"; 0 with the path in out, or -ENOENT with the message. t NULL
 * (rf_train_inputs): no message, and no server asked whether an http:// one exists. */
static int rf__beside(struct rf_trainer *t, const char *train, char *out, size_t len)
{
	static const char *const as[2] = { "t10k", "test" };
	const char *base = strrchr(train, '/'), *hit = NULL, *p;

	base = base ? base + 1 : train;
	for (p = base; (p = strstr(p, "train")); p++)
		hit = p;
	if (!hit) {
		if (t)
			rf__trainer_msg(t,
					"%s: no test set: its name has no \"train\" to find one "
					"beside it by; name it (rf-train --test-data FILE.rfrec)",
					train);
		return -ENOENT;
	}
	for (int i = 0; i < 2; i++) {
		if ((size_t)snprintf(out, len, "%.*s%s%s", (int)(hit - train), train, as[i],
				     hit + 5) >= len) {
			if (t)
				rf__trainer_msg(t, "%s: the name of a test set beside it would be "
						"over %zu bytes", train, len - 1);
			return -ENAMETOOLONG;
		}
		if (!strncmp(out, "http://", 7)) { /* does the server have it? */
			if (!t)
				continue;
			struct rf_dataset probe;
			struct rf_dataset_open_opts oo = rf__open_opts(t, 0);
			int e = rf_dataset_open_file_opts(&probe, out, &oo);
			if (e == 0) {
				rf_dataset_close(&probe);
				return 0;
			}
			/* only a 404 means "not there": a server error, a timeout, a file
			 * that is not a record file is this test set's own failure */
			if (e != -ENOENT) {
				rf__trainer_msg(t, "%s (the test set beside %s)", rf_last_error(),
						train);
				return e;
			}
		} else if (access(out, F_OK) == 0 || rf_dataset_is_shard_pattern(out)) {
			return 0;       /* a pattern's shards are named by the open if missing */
		} else if (errno != ENOENT) {
			int e = errno;
			if (t)
				rf__trainer_msg(t, "%s: %s (the test set beside %s)", out,
						strerror(e), train);
			return -e;
		}
	}
	if (t)
		rf__trainer_msg(t,
				"%s: no test set beside it: neither %.*st10k%s nor the same with "
				"\"test\" exists (rf-train --test-data FILE.rfrec names one)",
				train, (int)(hit - train), train, hit + 5);
	return -ENOENT;
}

/* opt's file is there and a regular file (never a FIFO an open would block on). */
static int rf__regular(struct rf_trainer *t, const char *opt, const char *path)
{
	struct stat st;

	if (!*path) {
		rf__trainer_msg(t, "%s '': empty path, expected a regular file", opt);
		return -EINVAL;
	}
	if (stat(path, &st) < 0) {
		int e = errno;
		rf__trainer_msg(t, "%s %s: cannot open: %s, expected a regular file", opt, path,
				strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		rf__trainer_msg(t, "%s %s: is %s, expected a regular file", opt, path,
				rf__ftype(st.st_mode));
		return -EINVAL;
	}
	return 0;
}

/* A .rfrec file's header (magic, version, sizes, CRC), local or http://, or a shard's
 * member list, now. */
static int rf__probe_rfrec(struct rf_trainer *t, const char *opt, const char *path)
{
	struct rf_dataset ds;
	struct rf_dataset_open_opts oo = rf__open_opts(t, 0);
	int ret = rf_dataset_open_file_opts(&ds, path, &oo);

	if (ret < 0) {
		rf__trainer_msg(t, "%s %s", opt, rf_last_error());
		return ret;
	}
	rf_dataset_close(&ds);
	return 0;
}

int rf__check_data(struct rf_trainer *t, int headers)
{
	const char *data = t->data_dir, *test = t->o.test_data;
	char p[RF_TRAIN_PATH_MAX + 32];
	struct stat st;
	int ret;

	if (!strncmp(data, "https://", 8) || (test && !strncmp(test, "https://", 8))) {
		rf__trainer_msg(t, "%s: https is not supported: ringflow reads http:// URLs only "
				"(serve the file over http, or copy it here)",
				strncmp(data, "https://", 8) ? test : data);
		return -EPROTONOSUPPORT;
	}
	if (!strncmp(data, "http://", 7) || rf_dataset_is_shard_pattern(data)) {
		/* a .rfrec over HTTP, or shards by a pattern: the header, the shards' lists */
		if (test && strncmp(test, "http://", 7) && !rf_dataset_is_shard_pattern(test) &&
		    (ret = rf__regular(t, "--test-data", test)) < 0)
			return ret;
		if (headers && (ret = rf__probe_rfrec(t, "--data", data)) < 0)
			return ret;
		return test && headers ? rf__probe_rfrec(t, "--test-data", test) : 0;
	}
	if (test) {
		if (strncmp(test, "http://", 7) && !rf_dataset_is_shard_pattern(test) &&
		    (ret = rf__regular(t, "--test-data", test)) < 0)
			return ret;
		if (stat(data, &st) == 0 && !S_ISREG(st.st_mode)) {
			rf__trainer_msg(t, "--test-data: names the test set of a .rfrec --data, and "
					"%s is %s (a directory of IDX files holds both sets)", data,
					rf__ftype(st.st_mode));
			return -EINVAL;
		}
		if (headers && (ret = rf__probe_rfrec(t, "--test-data", test)) < 0)
			return ret;
	}
	if (stat(data, &st) < 0)
		return 0;       /* rf__open_data says what is missing and how to install it */
	if (S_ISREG(st.st_mode))
		return headers ? rf__probe_rfrec(t, "--data", data) : 0;
	if (!S_ISDIR(st.st_mode)) {
		rf__trainer_msg(t, "--data %s: is %s, expected a directory of Fashion-MNIST IDX "
				"files or a .rfrec file", data, rf__ftype(st.st_mode));
		return -EINVAL;
	}
	/* a directory is Fashion-MNIST's IDX files: 28 x 28 greyscale, no encoded images */
	if (t->o.image_size) {
		rf__trainer_msg(t, "--image-size %u: %s is a directory of Fashion-MNIST IDX files: "
				"fixed-size records, expected encoded images (rf-pack "
				"--image-folder, or a WebDataset shard PATH.tar)", t->o.image_size,
				data);
		return -EINVAL;
	}
	if (t->o.norm_channels > 1) {
		rf__trainer_msg(t, "--normalize: a mean and std for %u channels, and %s holds "
				"Fashion-MNIST's greyscale images: expected one", t->o.norm_channels,
				data);
		return -EINVAL;
	}
	for (int i = 0; i < 8; i++) {   /* raw and .gz: whichever is there must be a file */
		snprintf(p, sizeof(p), "%s/%s%s", data, rf__fmnist(i / 2), i % 2 ? ".gz" : "");
		if (stat(p, &st) == 0 && !S_ISREG(st.st_mode)) {
			rf__trainer_msg(t, "--data %s: is %s, expected a regular file", p,
					rf__ftype(st.st_mode));
			return -EINVAL;
		}
	}
	return 0;
}

static int rf__open_rfrec(struct rf_trainer *t, struct rf_dataset *ds, const char *path)
{
	struct rf_dataset_open_opts oo = rf__open_opts(t, t->o.verify ? RF_DS_VERIFY : 0);
	int ret = rf_dataset_open_file_opts(ds, path, &oo);

	if (ret < 0)
		rf__trainer_msg(t, "%s", rf_last_error());
	return ret;
}

int rf_train_data_is_rfrec(const char *data)
{
	struct stat st;

	return data && (!strncmp(data, "http://", 7) || rf_dataset_is_shard_pattern(data) ||
			(stat(data, &st) == 0 && S_ISREG(st.st_mode)));
}

static int rf__is_rfrec(const char *data)
{
	return rf_train_data_is_rfrec(data);
}

/* paths[*n] = path, where path names a local file that is there. */
static void rf__add_input(char (*paths)[RF_TRAIN_PATH_MAX], int *n, const char *path)
{
	struct stat st;

	if (strncmp(path, "http://", 7) && stat(path, &st) == 0)
		snprintf(paths[(*n)++], RF_TRAIN_PATH_MAX, "%s", path);
}

int rf_train_inputs(const struct rf_train_opts *o, char (*paths)[RF_TRAIN_PATH_MAX])
{
	const char *data = o->data_dir ? o->data_dir : RF_TRAIN_DEFAULT_DATA;
	char p[RF_TRAIN_PATH_MAX];
	int n = 0;

	if (rf__is_rfrec(data)) {
		rf__add_input(paths, &n, data);
		if (o->test_data)
			rf__add_input(paths, &n, o->test_data);
		else if (rf__beside(NULL, data, p, sizeof(p)) == 0)
			rf__add_input(paths, &n, p);
		return n;
	}
	for (int i = o->eval_only ? 2 : 0; i < 4; i++) { /* raw and .gz: either may be read */
		snprintf(p, sizeof(p), "%s/%s", data, rf__fmnist(i));
		rf__add_input(paths, &n, p);
		snprintf(p, sizeof(p), "%s/%s.gz", data, rf__fmnist(i));
		rf__add_input(paths, &n, p);
	}
	return n;
}

/* Images: both sets encoded images with labels of one class count; the model made for
 * them (t->spec: 3 x image_size x image_size, that many classes, the stem). */
static int rf__image_model(struct rf_trainer *t, const char *train, const char *test)
{
	const struct rf_dataset *d[2] = { &t->train_ds, &t->test_ds };
	const char *path[2] = { train, test };
	unsigned S = t->o.image_size;
	struct rf_model_input in = { 3, (int)S, (int)S, 0, RF_STEM_SMALL };

	for (int i = 0; i < 2; i++) {
		if (!rf_dataset_variable(d[i]) || d[i]->encoding != RF_REC_ENC_IMAGE) {
			rf__trainer_msg(t, "%s: %s, expected encoded images (rf-pack --image-folder, "
					"or a WebDataset shard PATH.tar) for %s", path[i],
					rf_dataset_variable(d[i]) ? "records of raw bytes" :
					"fixed-size records",
					t->o.eval_only ? "a model of images" : "--image-size");
			return -EINVAL;
		}
		if (d[i]->label_kind == RF_LABEL_NONE || d[i]->num_classes < 2) {
			rf__trainer_msg(t, "%s: %s, expected labels of 2 or more classes", path[i],
					d[i]->label_kind == RF_LABEL_NONE ? "no labels" :
					"labels of one class");
			return -EINVAL;
		}
	}
	if (d[0]->num_classes != d[1]->num_classes) {
		rf__trainer_msg(t, "%s: %u classes, and the test set %s has %u: expected the same "
				"classes", train, d[0]->num_classes, test, d[1]->num_classes);
		return -EINVAL;
	}
	for (unsigned k = 0; d[0]->classes && d[1]->classes && k < d[0]->num_classes; k++)
		if (strcmp(d[0]->classes[k], d[1]->classes[k])) {
			rf__trainer_msg(t, "%s: class %u is \"%s\", and in the test set %s \"%s\": "
					"expected the same classes in the same order", train, k,
					d[0]->classes[k], test, d[1]->classes[k]);
			return -EINVAL;
		}
	if (d[0]->num_classes > RF_MODEL_MAX_CLASSES) {
		rf__trainer_msg(t, "%s: labels up to %u (%u classes; a shard's count is its "
				"largest label + 1), expected at most %d classes", train,
				d[0]->num_classes - 1, d[0]->num_classes, RF_MODEL_MAX_CLASSES);
		return -EINVAL;
	}
	in.classes = (int)d[0]->num_classes;
	if (t->o.stem == 2 || (t->o.stem == 0 && S >= 128 && !strcmp(t->model_name, "resnet18")))
		in.stem = RF_STEM_IMAGENET;
	if (!(t->spec = rf_model_spec_for(t->model_name, &in))) {
		rf__trainer_msg(t, "%s %u: %s", t->o.eval_only ? "images of" : "--image-size", S,
				rf_last_error());
		return -EINVAL;
	}
	return 0;
}

/* opts' mean and std per channel made part of the model's input (its export says
 * them; the loaders read them from there). */
static int rf__model_norm(struct rf_trainer *t)
{
	struct rf_model_input in = t->spec->in;
	const struct rf_model_spec *sp;

	if (!t->o.norm_channels)
		return 0;
	in.norm_channels = t->o.norm_channels;
	memcpy(in.mean, t->o.norm_mean, sizeof(in.mean));
	memcpy(in.std, t->o.norm_std, sizeof(in.std));
	if (in.norm_channels == 1 && in.c > 1 && in.c <= RF_MODEL_NORM_MAX) { /* one for all */
		for (int k = 1; k < in.c; k++) {
			in.mean[k] = in.mean[0];
			in.std[k] = in.std[0];
		}
		in.norm_channels = (unsigned)in.c;
	}
	if (!(sp = rf_model_spec_for(t->model_name, &in))) {
		rf__trainer_msg(t, "--normalize: %s", rf_last_error());
		return -EINVAL;
	}
	t->spec = sp;
	return 0;
}

int rf__open_data(struct rf_trainer *t)
{
	char p[4][RF_TRAIN_PATH_MAX];
	int ret;

	/* https and FIFOs before any open; the opens below read the headers themselves */
	if ((ret = rf__check_data(t, 0)) < 0)
		return ret;
	if (rf__is_rfrec(t->data_dir)) {
		/* a .rfrec training set, and its test set named or beside it */
		snprintf(p[0], sizeof(p[0]), "%s", t->data_dir);
		if ((ret = rf__open_rfrec(t, &t->train_ds, p[0])) < 0)
			return ret;
		if (t->o.test_data)
			snprintf(p[2], sizeof(p[2]), "%s", t->o.test_data);
		else
			ret = rf__beside(t, p[0], p[2], sizeof(p[2]));
		if (ret == 0)
			ret = rf__open_rfrec(t, &t->test_ds, p[2]);
		if (ret == -ENOENT && t->o.no_eval && !t->o.test_data) {
			/* nothing is evaluated, so none is needed (none beside it, or a pattern
			 * beside it, t10k-{0..9}.tar, whose shards are not there): the training
			 * set stands in */
			snprintf(p[2], sizeof(p[2]), "%s", p[0]);
			t->no_test = 1;
			t->msg[0] = 0;
			ret = 0;
		}
	} else if (t->o.test_data) {
		rf__trainer_msg(t, "%s: a test set names a .rfrec file, and the training data %s "
				"is not one (a directory of IDX files holds both sets)",
				t->o.test_data, t->data_dir);
		return -EINVAL;
	} else {
		if ((ret = rf__find_files(t, p)) < 0)
			return ret;
		if (t->o.eval_only) { /* the test set stands in for the training set */
			memcpy(p[0], p[2], sizeof(p[0]));
			memcpy(p[1], p[3], sizeof(p[1]));
		}
		ret = rf__open_pair(t, &t->train_ds, p[0], p[1]);
		if (ret == 0 && !t->no_test)
			ret = rf__open_pair(t, &t->test_ds, p[2], p[3]);
	}
	/* no test set and none needed: the training set, not opened again (a second
	 * decompression or in-memory copy), stands in -- one record of it, never read;
	 * not closed twice (rf_trainer_destroy) */
	if (ret == 0 && t->no_test)
		t->test_ds = t->train_ds;
	if (ret == 0 && t->o.image_size)
		ret = rf__image_model(t, p[0], p[2]);
	else if (ret == 0)
		ret = rf__check_shape(t, &t->train_ds, p[0]);
	if (ret == 0 && !t->o.image_size)
		ret = rf__check_shape(t, &t->test_ds, p[2]);
	if (ret < 0)
		return ret;
	/* A file that does not say its class count (.rfrec num_classes 0) holds labels for
	 * these models' 10 classes: the loader then refuses one outside [0, 10), naming the
	 * file and record, before it reaches the loss (which could only say "a label"). */
	if (!t->train_ds.num_classes)
		t->train_ds.num_classes = 10;
	if (!t->test_ds.num_classes)
		t->test_ds.num_classes = 10;
	rf__limit_view(&t->train_view, &t->train_ds, t->o.limit);
	rf__limit_view(&t->test_view, &t->test_ds, t->no_test ? 1 : t->o.test_limit);
	return rf__model_norm(t);
}

/* The one place a loader is created (its message lands in t->msg). */
static int rf__make_loader(struct rf_trainer *t, const struct rf_dataset *ds, int shuffle,
			   struct rf_loader **out)
{
	struct rf_loader_opts lo = { 0 };

	lo.batch = t->o.batch_size;
	lo.prefetch = t->o.prefetch;
	lo.seed = t->o.seed;
	lo.no_shuffle = !shuffle;
	lo.drop_last = 0;
	lo.devices = t->dev;
	lo.ndevices = t->K;
	lo.shard_base = t->rank * t->K;      /* several processes: this rank's shards */
	lo.shard_total = t->K * t->P;
	lo.host = t->host;
	lo.scale = 1.0f / 255.0f;   /* x = pixel / 255, as PyTorch's ToTensor, then the model's */
	lo.norm_channels = t->spec->in.norm_channels;   /* mean and std, if it has them */
	memcpy(lo.channel_mean, t->spec->in.mean, sizeof(lo.channel_mean));
	memcpy(lo.channel_std, t->spec->in.std, sizeof(lo.channel_std));
	lo.skip_bad_images = t->o.skip_bad_images;
	/* the stand-in test set (no_test) is the training file: never a second copy */
	lo.in_memory = t->o.in_memory && !(t->no_test && !shuffle);
	lo.order = shuffle ? t->o.order : RF_LOADER_ORDER_UNIFORM;
	lo.http_timeout_ms = t->o.http_timeout_ms;
	/* a device with memory of its own gets batches decoded straight into the model's
	 * compute format (one kernel; the model then reads x as it is); host devices keep
	 * f32 row-major, which their gather decodes into without an op */
	if (!rf_device_host_memory(t->dev[0])) {
		lo.x_dtype = t->rep[0]->act_dtype;
		if (ds->ndim == 2 || ds->ndim == 3 || t->o.image_size)
			lo.x_layout = t->rep[0]->act_layout;
	}
	if (t->o.image_size) {   /* training: RandomResizedCrop + flip; test: centre crop */
		lo.image_size = t->o.image_size;
		lo.image_eval = !shuffle;
		lo.image_scale_min = t->o.crop_scale;
		/* trained on whole images (--crop-scale 1): evaluated on whole ones too */
		lo.image_eval_ratio = t->o.crop_scale == 1.0f ? 1.0f : 0.0f;
		lo.hflip = shuffle;
	} else if (shuffle && t->o.augment) {      /* the training set only */
		lo.crop_pad = RF_TRAIN_AUGMENT_PAD;
		lo.hflip = 1;
	}
	int ret = rf_loader_create(out, t->eng, ds, &lo);

	if (ret < 0)
		rf__trainer_msg(t, "%s", rf_last_error());
	return ret;
}

int rf__make_loaders(struct rf_trainer *t)
{
	int ret = rf__make_loader(t, &t->train_view, 1, &t->train_ld);

	return ret < 0 ? ret : rf__make_loader(t, &t->test_view, 0, &t->test_ld);
}
