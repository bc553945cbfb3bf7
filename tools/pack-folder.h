/* pack-folder.h -- rf-pack's view of an ImageFolder tree (pack-folder.c). */
#ifndef RF_PACK_FOLDER_H
#define RF_PACK_FOLDER_H

#include <stddef.h>
#include <stdint.h>

struct rf__folder_file {
	char *path;               /* ROOT/CLASS/.../NAME.jpg */
	int32_t label;            /* the class's index */
	int64_t size, mtime_s, mtime_ns, ino; /* as the scan found it (rf__folder_key) */
};

struct rf__folder {
	char **classes;           /* nclasses folder names, sorted */
	unsigned nclasses;
	struct rf__folder_file *files; /* n, class by class, each class's in (folder, name) order */
	size_t n, cap;
	size_t other;             /* entries passed over: not .jpg/.jpeg/.png, not a regular
				   * file, a dangling link, a file beside the class folders */
};

/* List root's classes and images into f (zeroed first). 0, or -errno with one line in
 * err (len bytes) naming the folder and what was expected; f is then empty. */
int rf__folder_scan(struct rf__folder *f, const char *root, char *err, size_t len);
void rf__folder_free(struct rf__folder *f);

struct rf_rec_writer;
/* f's images appended to w in f's order, each file read whole; one whose first bytes
 * are not a JPEG's or a PNG's is refused (-EINVAL, the file named in err), or with
 * skip_bad passed over and counted in *bad. *packed counts the records written. 0, or
 * -errno with one line in err (len bytes); w is the caller's to finish or abort. */
int rf__folder_write(const struct rf__folder *f, struct rf_rec_writer *w, int skip_bad,
		     size_t *packed, size_t *bad, char *err, size_t len);

/* FNV-1a 64 of f's listing: each file's path, size, mtime (ns), inode and label as the
 * scan found them, and the class names -- what a packed copy of the tree is kept
 * under. */
uint64_t rf__folder_key(const struct rf__folder *f);

#endif
