/* pack-folder.c -- the images of an ImageFolder tree, listed in torchvision's order:
 * one subfolder per class, classes sorted by name (byte order, as Python's sorted),
 * label k for the k-th; in each class every file below it whose name ends in .jpg,
 * .jpeg or .png (any case), walked with symbolic links followed, sorted by (folder,
 * name) as sorted(os.walk(...)) then sorted(fnames) give. Other files are counted. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

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

static void rf__free_ents(struct dirent **ents, int n)
{
	for (int i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
}

static int rf__push(struct rf__folder *f, char *path, int32_t label)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 1024;
		struct rf__folder_file *p = realloc(f->files, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		f->files = p;
		f->cap = cap;
	}
	f->files[f->n].path = path;
	f->files[f->n].label = label;
	f->n++;
	return 0;
}

/* The files of folder dir (a class's, or one below it) and then, folder by folder in
 * name order, those of its subfolders: (folder, name) order. */
static int rf__walk(struct rf__folder *f, const char *dir, int32_t label, int depth, char *err,
		    size_t len)
{
	struct dirent **ents = NULL;
	int n = scandir(dir, &ents, NULL, rf__cmp_name), ret = 0;

	if (n < 0) {
		snprintf(err, len, "%s: cannot list: %s", dir, strerror(errno));
		return -errno;
	}
	/* files first (their folder sorts before its subfolders' paths), then folders */
	for (int pass = 0; pass < 2 && !ret; pass++) {
		for (int i = 0; i < n && !ret; i++) {
			const char *nm = ents[i]->d_name;
			struct stat st;
			char *p;
			if (!strcmp(nm, ".") || !strcmp(nm, ".."))
				continue;
			if (asprintf(&p, "%s/%s", dir, nm) < 0) {
				ret = -ENOMEM;
				break;
			}
			if (stat(p, &st) < 0) {   /* a dangling link: not a file of the set */
				f->other++;
				free(p);
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
				if ((ret = rf__push(f, p, label)) < 0)
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

int rf__folder_scan(struct rf__folder *f, const char *root, char *err, size_t len)
{
	struct dirent **ents = NULL;
	int n, ret = 0;

	memset(f, 0, sizeof(*f));
	*err = 0;
	n = scandir(root, &ents, NULL, rf__cmp_name);
	if (n < 0) {
		snprintf(err, len, "%s: cannot list: %s (expected a folder with one subfolder "
			 "per class)", root, strerror(errno));
		return -errno;
	}
	for (int i = 0; i < n && !ret; i++) {
		const char *nm = ents[i]->d_name;
		struct stat st;
		char *p;
		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		if (asprintf(&p, "%s/%s", root, nm) < 0) {
			ret = -ENOMEM;
			break;
		}
		if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode)) {
			f->other++;  /* a file beside the classes is no class */
			free(p);
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
		ret = rf__walk(f, p, (int32_t)f->nclasses, 0, err, len);
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
