/* pack-folder.c -- the images of an ImageFolder tree, listed in torchvision's order:
 * one subfolder per class, classes sorted by name (byte order, as Python's sorted),
 * label k for the k-th; in each class every file below it whose name ends in .jpg,
 * .jpeg or .png (any case), walked with symbolic links followed, sorted by (folder,
 * name) as sorted(os.walk(...)) then sorted(fnames) give. Other files are counted; a
 * class folder without an image is refused (torchvision's FileNotFoundError). */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <ringflow/dataset.h>
#include <ringflow/log.h>

#include "pack-folder.h"

#define RF__FOLDER_DEPTH 32 /* folders below a class (symbolic links may loop) */

static int rf__cmp_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int rf__is_image_name(const char *n)
{
	const char *dot = strrchr(n, '.');

	return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") ||
		       !strcasecmp(dot, ".png"));
}

static int rf__not_dots(const struct dirent *e)
{
	return strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
}

/* The entries of dir but . and .., by name: their count, or -errno with err set
 * (what: what dir was expected to be, "" or a parenthesised hint). */
static int rf__list(const char *dir, struct dirent ***ents, const char *what, char *err,
		    size_t len)
{
	int n = scandir(dir, ents, rf__not_dots, rf__cmp_name), e = errno;

	if (n < 0)
		snprintf(err, len, "%s: cannot list: %s%s", dir, strerror(e), what);
	return n < 0 ? -e : n;
}

/* dir/name into *p (malloc'd) and its stat (links followed) into *st: 0; 1 when it
 * cannot be stat'ed (a dangling link: *p freed); -ENOMEM. */
static int rf__entry(const char *dir, const char *name, char **p, struct stat *st)
{
	if (asprintf(p, "%s/%s", dir, name) < 0)
		return -ENOMEM;
	if (stat(*p, st) == 0)
		return 0;
	free(*p);
	return 1;
}

static void rf__free_ents(struct dirent **ents, int n)
{
	for (int i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
}

static int rf__push(struct rf__folder *f, char *path, int32_t label, const struct stat *st)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 1024;
		struct rf__folder_file *p = realloc(f->files, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		f->files = p;
		f->cap = cap;
	}
	f->files[f->n] = (struct rf__folder_file){ path, label, (int64_t)st->st_size,
						   (int64_t)st->st_mtim.tv_sec,
						   (int64_t)st->st_mtim.tv_nsec, (int64_t)st->st_ino };
	f->n++;
	return 0;
}

/* The files of folder dir (a class's, or one below it) and then, folder by folder in
 * name order, those of its subfolders: (folder, name) order. */
static int rf__walk(struct rf__folder *f, const char *dir, int32_t label, int depth, char *err,
		    size_t len)
{
	struct dirent **ents = NULL;
	int n = rf__list(dir, &ents, "", err, len), ret = 0;

	if (n < 0)
		return n;
	/* files first (their folder sorts before its subfolders' paths), then folders */
	for (int pass = 0; pass < 2 && !ret; pass++) {
		for (int i = 0; i < n && !ret; i++) {
			const char *nm = ents[i]->d_name;
			struct stat st;
			char *p;
			if ((ret = rf__entry(dir, nm, &p, &st)) != 0) {
				/* a dangling link: not a file of the set */
				f->other += ret == 1 && pass == 0;
				ret = ret == 1 ? 0 : ret;
				continue;
			}
			if (S_ISDIR(st.st_mode)) {
				if (pass == 1 && depth >= RF__FOLDER_DEPTH) {
					snprintf(err, len, "%s: more than %d folders deep below its class "
						 "(a symbolic link loop?)", p, RF__FOLDER_DEPTH);
					ret = -ELOOP;
				} else if (pass == 1) {
					ret = rf__walk(f, p, label, depth + 1, err, len);
				}
				free(p);
			} else if (pass == 0 && S_ISREG(st.st_mode) && rf__is_image_name(nm)) {
				if ((ret = rf__push(f, p, label, &st)) < 0)
					free(p);
			} else {
				if (pass == 0)
					f->other++;
				free(p);
			}
		}
	}
	rf__free_ents(ents, n);
	if (ret == -ENOMEM && !*err)
		snprintf(err, len, "%s: out of memory", dir);
	return ret;
}

/* sorted(os.walk(...)) orders the folders by their whole path, then sorted(fnames) the
 * files in each: 'a/f0', 'a-b/f2', 'a/z/f1' ('-' sorts before '/'), where a walk folder
 * by folder gives 'a/z/f1' before 'a-b/f2'. By bytes, as Python's str order is by code
 * point and UTF-8 keeps it. */
static int rf__walk_order(const void *x, const void *y)
{
	const char *p = ((const struct rf__folder_file *)x)->path;
	const char *q = ((const struct rf__folder_file *)y)->path;
	const char *sp = strrchr(p, '/'), *sq = strrchr(q, '/');
	size_t dp = sp ? (size_t)(sp - p) : 0, dq = sq ? (size_t)(sq - q) : 0;
	int c = memcmp(p, q, dp < dq ? dp : dq);

	if (c || dp != dq)
		return c ? c : dp < dq ? -1 : 1;
	return strcmp(p + dp, q + dq);
}

int rf__folder_scan(struct rf__folder *f, const char *root, char *err, size_t len)
{
	char empty[256] = "";
	unsigned nempty = 0;
	struct dirent **ents = NULL;
	int n, ret = 0;

	memset(f, 0, sizeof(*f));
	*err = 0;
	n = rf__list(root, &ents, " (expected a folder with one subfolder per class)", err,
		     len);
	if (n < 0)
		return n;
	for (int i = 0; i < n && !ret; i++) {
		const char *nm = ents[i]->d_name;
		struct stat st;
		char *p;
		if ((ret = rf__entry(root, nm, &p, &st)) < 0)
			break;
		if (ret == 1 || !S_ISDIR(st.st_mode)) {
			f->other++;  /* a file beside the classes is no class */
			if (ret == 0)
				free(p);
			ret = 0;
			continue;
		}
		char **c = realloc(f->classes, (f->nclasses + 1) * sizeof(*c));
		if (!c || !(c[f->nclasses] = strdup(nm))) {
			if (c)
				f->classes = c;
			free(p);
			ret = -ENOMEM;
			break;
		}
		f->classes = c;
		size_t first = f->n;
		ret = rf__walk(f, p, (int32_t)f->nclasses, 0, err, len);
		if (!ret && f->n == first && nempty++ < 3) {  /* named: the first three */
			size_t m = strlen(empty);
			snprintf(empty + m, sizeof(empty) - m, "%s'%.64s'", nempty > 1 ? ", " : "",
				 nm);
		}
		if (!ret && f->n > first)
			qsort(f->files + first, f->n - first, sizeof(*f->files), rf__walk_order);
		f->nclasses++;
		free(p);
	}
	rf__free_ents(ents, n);
	if (ret == -ENOMEM && !*err)
		snprintf(err, len, "%s: out of memory", root);
	if (!ret && !f->nclasses)
		snprintf(err, len, "%s: no subfolders, expected one per class (ImageFolder's "
			 "layout: ROOT/CLASS/IMAGE.jpg)", root), ret = -EINVAL;
	else if (!ret && !f->n)
		snprintf(err, len, "%s: %u class folders but no .jpg, .jpeg or .png file in them",
			 root, f->nclasses), ret = -EINVAL;
	else if (!ret && nempty)  /* a label no sample has: torchvision refuses it too */
		snprintf(err, len, "%s: %u of its %u class folders hold no .jpg, .jpeg or .png "
			 "file: %s%s; expected images in every class (remove the folder, or "
			 "add its images)", root, nempty, f->nclasses, empty,
			 nempty > 3 ? ", ..." : ""), ret = -EINVAL;
	if (ret)
		rf__folder_free(f);
	return ret;
}

void rf__folder_free(struct rf__folder *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->files[i].path);
	for (unsigned k = 0; k < f->nclasses; k++)
		free(f->classes[k]);
	free(f->files);
	free(f->classes);
	memset(f, 0, sizeof(*f));
}

/* "JPEG" or "PNG" by the first bytes, else NULL. */
static const char *rf__image_kind(const uint8_t *b, size_t n)
{
	static const uint8_t png[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

	if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
		return "JPEG";
	if (n >= 8 && !memcmp(b, png, 8))
		return "PNG";
	return NULL;
}

/* path whole into *buf (grown; *cap its size): 0 with *n its bytes, or -errno. */
static int rf__read_whole(const char *path, uint8_t **buf, size_t *cap, size_t *n, char *err,
			  size_t len)
{
	FILE *fp = fopen(path, "rb");
	struct stat st;
	int e;

	if (!fp || fstat(fileno(fp), &st) < 0) {
		e = errno;
		snprintf(err, len, "%s: cannot read: %s", path, strerror(e));
		if (fp)
			fclose(fp);
		return -e;
	}
	if (st.st_size < 1 || (uint64_t)st.st_size > UINT32_MAX) {
		snprintf(err, len, "%s: %jd bytes, expected an image of 1 byte to 4 GiB%s", path,
			 (intmax_t)st.st_size, st.st_size < 1 ? " (--skip-bad-images passes over "
			 "an empty one)" : "");
		fclose(fp);
		return st.st_size < 1 ? -ENODATA : -EINVAL;
	}
	if ((size_t)st.st_size > *cap || !*buf) {
		uint8_t *nb = realloc(*buf, (size_t)st.st_size + 1);
		if (!nb) {
			fclose(fp);
			snprintf(err, len, "%s: out of memory for its %jd bytes", path,
				 (intmax_t)st.st_size);
			return -ENOMEM;
		}
		*buf = nb;
		*cap = (size_t)st.st_size;
	}
	*n = fread(*buf, 1, (size_t)st.st_size, fp);
	fclose(fp);
	if (*n != (size_t)st.st_size) {
		snprintf(err, len, "%s: read %zu of its %jd bytes (it changed while read?)", path,
			 *n, (intmax_t)st.st_size);
		return -EIO;
	}
	return 0;
}

int rf__folder_write(const struct rf__folder *f, struct rf_rec_writer *w, int skip_bad,
		     size_t *packed, size_t *bad, char *err, size_t len)
{
	uint8_t *buf = NULL;
	size_t cap = 0, n = 0;
	int ret = 0;

	*packed = *bad = 0;
	for (size_t i = 0; i < f->n && !ret; i++) {
		if ((ret = rf__read_whole(f->files[i].path, &buf, &cap, &n, err, len)) < 0) {
			if (ret == -ENODATA && skip_bad) {   /* empty: as bad as any other */
				(*bad)++;
				ret = 0;
				continue;
			}
			break;
		}
		if (!rf__image_kind(buf, n)) {
			if (skip_bad) {
				(*bad)++;
				continue;
			}
			snprintf(err, len, "%s: not a JPEG or PNG (first bytes %02x %02x %02x %02x); "
				 "--skip-bad-images passes over such files", f->files[i].path,
				 n ? buf[0] : 0, n > 1 ? buf[1] : 0, n > 2 ? buf[2] : 0,
				 n > 3 ? buf[3] : 0);
			ret = -EINVAL;
			break;
		}
		if ((ret = rf_rec_writer_append_bytes(w, buf, n, f->files[i].label)) < 0) {
			snprintf(err, len, "%s", rf_last_error());
			break;
		}
		(*packed)++;
	}
	free(buf);
	return ret;
}

static uint64_t rf__fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

uint64_t rf__folder_key(const struct rf__folder *f)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (unsigned k = 0; k < f->nclasses; k++)
		h = rf__fnv(h, f->classes[k], strlen(f->classes[k]) + 1);
	for (size_t i = 0; i < f->n; i++) {
		const struct rf__folder_file *x = &f->files[i];
		int64_t v[5] = { x->size, x->mtime_s, x->mtime_ns, x->ino, x->label };
		h = rf__fnv(h, x->path, strlen(x->path) + 1);
		h = rf__fnv(h, v, sizeof(v));
	}
	return h;
}
