/* tools/train-folder.c -- an image folder as --data: its listing hashed, packed once into
 * a cached .rfrec under a lock, the cached file reused while the listing is the same
 * (train-folder.h). The packing is rf-pack --image-folder's (pack-folder.c). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringflow/dataset.h>

#include "cli.h"
#include "pack-folder.h"
#include "train-folder.h"

static int rf__exists(const char *dir, const char *name)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return stat(p, &st) == 0;
}

int rf_folder_is_images(const char *path)
{
	struct stat st;
	char gz[64];

	if (!path || strstr(path, "://") || stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	for (int test = 0; test < 2; test++) { /* the IDX images, raw or .gz: not a folder */
		const char *name = rf_dataset_fmnist_name(test, 0);
		snprintf(gz, sizeof(gz), "%s.gz", name);
		if (rf__exists(path, name) || rf__exists(path, gz))
			return 0;
	}
	return 1;
}

int rf_folder_test_sibling(const char *train, char *out, size_t len)
{
	static const char *const names[2] = { "val", "test" };
	char d[PATH_MAX];
	size_t n = (size_t)snprintf(d, sizeof(d), "%s", train);
	const char *base;

	while (n > 1 && d[n - 1] == '/')
		d[--n] = 0;
	base = strrchr(d, '/');
	if (strcmp(base ? base + 1 : d, "train"))
		return -1;
	for (int i = 0; i < 2; i++) {
		struct stat st;
		snprintf(out, len, "%.*s%s", base ? (int)(base - d + 1) : 0, d, names[i]);
		if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
			return 0;
	}
	return -1;
}

/* mkdir -p of path's folders and path itself. 0 or -errno. */
static int rf__mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int r = mkdir(path, 0755);
		*p = '/';
		if (r < 0 && errno != EEXIST)
			return -errno;
	}
	return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

/* The cache folder: $XDG_CACHE_HOME/ringflow/folders or ~/.cache/ringflow/folders. */
static int rf__cache_dir(char *out, size_t len)
{
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");

	int n;

	if (x && x[0] == '/')
		n = snprintf(out, len, "%s/ringflow/folders", x);
	else if (h && h[0] == '/')
		n = snprintf(out, len, "%s/.cache/ringflow/folders", h);
	else
		return -ENOENT;
	if (n < 0 || (size_t)n >= len)  /* cut short it would name another folder */
		return -ENAMETOOLONG;
	return rf__mkdirs(out);
}

/* f packed into path (through path.tmp). 0 or -errno with err set. */
static int rf__pack(const struct rf__folder *f, const char *path, int skip_bad, size_t *packed,
		    size_t *bad, char *err, size_t len)
{
	struct rf_rec_layout lay = { .variable = 1, .encoding = RF_REC_ENC_IMAGE,
				     .label_kind = RF_LABEL_I32 };
	struct rf_rec_writer *w;
	int ret;

	lay.num_classes = f->nclasses;
	lay.classes = (const char *const *)f->classes;
	if ((ret = rf_rec_writer_open(&w, path, &lay, RF_REC_OVERWRITE)) < 0) {
		snprintf(err, len, "%s", rf_last_error());
		return ret;
	}
	if ((ret = rf__folder_write(f, w, skip_bad, packed, bad, err, len)) < 0) {
		rf_rec_writer_abort(w);
		return ret;
	}
	if (!*packed) {
		rf_rec_writer_abort(w);
		snprintf(err, len, "no JPEG or PNG image in its %zu files", f->n);
		return -EINVAL;
	}
	if ((ret = rf_rec_writer_finish(w)) < 0)
		snprintf(err, len, "%s", rf_last_error());
	return ret;
}

int rf_folder_packed(const char *prog, const char *opt, const char *dir, int skip_bad,
		     int quiet, char *out, size_t len)
{
	struct rf__folder f;
	char err[8400];
	int rc;

	if (rf__folder_scan(&f, dir, err, sizeof(err)) < 0) {
		rf_cli_say(prog, "%s %s", opt, err);
		return 1;
	}
	rc = rf_folder_packed_scanned(prog, opt, dir, &f, skip_bad, quiet, out, len);
	rf__folder_free(&f);
	return rc;
}

int rf_folder_packed_scanned(const char *prog, const char *opt, const char *dir,
			     const struct rf__folder *fp, int skip_bad, int quiet, char *out,
			     size_t len)
{
	char cache[PATH_MAX], lock[PATH_MAX + 16], err[8400];
	const struct rf__folder f = *fp;   /* read only: the caller frees it */
	struct stat st;
	uint64_t key;
	size_t packed = 0, bad = 0;
	int lfd = -1, ret;

	key = rf__folder_key(&f);
	if ((ret = rf__cache_dir(cache, sizeof(cache))) < 0) {
		snprintf(err, sizeof(err), "%s: no folder to keep its packed copy in (HOME or "
			 "XDG_CACHE_HOME unset, or %s): pack it with rf-pack --image-folder and "
			 "give the .rfrec", dir, strerror(-ret));
		goto fail;
	}
	int on = snprintf(out, len, "%s/%016" PRIx64 "%s.rfrec", cache, key, skip_bad ? "-skip" : "");
	int ln = snprintf(lock, sizeof(lock), "%s.lock", out);
	if (on < 0 || (size_t)on >= len || ln < 0 || (size_t)ln >= sizeof(lock)) {
		ret = -ENAMETOOLONG;   /* cut short, two folders' copies could share a name */
		snprintf(err, sizeof(err), "%s: the cache folder's path %s is too long for its "
			 "packed copy's name", dir, cache);
		goto fail;
	}
	if ((lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0 || flock(lfd, LOCK_EX) < 0) {
		ret = -errno;
		snprintf(err, sizeof(err), "%s: cannot lock: %s", lock, strerror(-ret));
		goto fail;
	}
	if (stat(out, &st) == 0) {      /* packed before, from the same listing */
		struct rf_dataset ds;
		char why[PATH_MAX + 512] = "";
		/* its header and index, and what it holds: else packed again */
		if (rf_dataset_open_rfrec(&ds, out, 0) < 0) {
			snprintf(why, sizeof(why), "%s", rf_last_error());
		} else {
			if (ds.num_classes != f.nclasses || ds.count > f.n || (!skip_bad && ds.count != f.n))
				snprintf(why, sizeof(why), "%" PRIu64 " records of %u classes, the "
					 "folder %zu images of %u", ds.count, ds.num_classes, f.n,
					 f.nclasses);
			rf_dataset_close(&ds);
		}
		if (!why[0]) {
			if (!quiet)
				fprintf(stderr, "%s: %s %s: %zu images of %u classes, packed before: "
					"%s\n", prog, opt, dir, f.n, f.nclasses, out);
			ret = 0;
			goto done;
		}
		fprintf(stderr, "%s: %s %s: its packed copy %s cannot be used (%s): packing "
			"it again\n", prog, opt, dir, out, why);
		if (unlink(out) < 0 && errno != ENOENT) {
			ret = -errno;
			snprintf(err, sizeof(err), "%s: cannot remove the damaged copy: %s", out,
				 strerror(-ret));
			goto fail;
		}
	}
	if (!quiet)
		fprintf(stderr, "%s: %s %s: packing %zu images of %u classes once into %s\n", prog,
			opt, dir, f.n, f.nclasses, out);
	if ((ret = rf__pack(&f, out, skip_bad, &packed, &bad, err, sizeof(err))) < 0)
		goto fail;
	if (!quiet && bad)
		fprintf(stderr, "%s: %s %s: %zu files passed over as not JPEG or PNG\n", prog, opt,
			dir, bad);
	goto done;
fail:
	rf_cli_say(prog, "%s %s", opt, err);
	ret = 1;
done:
	if (lfd >= 0)
		close(lfd);             /* the lock goes with it */
	return ret ? 1 : 0;
}
