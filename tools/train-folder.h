/* tools/train-folder.h -- an image folder given to rf-train or rf-infer as --data: packed
 * once into a cached .rfrec (train-folder.c), which the trainer then reads. */
#ifndef RF_TOOLS_TRAIN_FOLDER_H
#define RF_TOOLS_TRAIN_FOLDER_H

#include <stddef.h>

/* 1 if path is a directory of images (torchvision's ImageFolder layout: one folder per
 * class) rather than one of Fashion-MNIST's IDX files: a directory without
 * train-images-idx3-ubyte(.gz) or t10k-images-idx3-ubyte(.gz). */
int rf_folder_is_images(const char *path);

/* The .rfrec that holds dir's images as rf-pack --image-folder writes them, packed now
 * if the cache lacks it: $XDG_CACHE_HOME/ringflow/folders/KEY.rfrec (else
 * ~/.cache/...), KEY the hash of the tree's listing (each file's path, size, mtime and
 * inode, and the class names), so a changed tree is packed again. Concurrent runs (the
 * ranks of one job) wait on a lock in that folder and the first packs. skip_bad: files
 * that are not JPEG or PNG are passed over. quiet 0: one line on stderr says what was
 * packed, or which cached file is read. Returns 0 with the path in out (len bytes), or
 * 1 after one line naming opt, the folder and what went wrong. */
int rf_folder_packed(const char *prog, const char *opt, const char *dir, int skip_bad,
		     int quiet, char *out, size_t len);
struct rf__folder;
/* The same for a folder its caller has listed (rf__folder_scan of dir, pack-folder.h:
 * listed once where the caller compares it with another first); f stays the caller's. */
int rf_folder_packed_scanned(const char *prog, const char *opt, const char *dir,
			     const struct rf__folder *f, int skip_bad, int quiet, char *out,
			     size_t len);

/* The test set beside a training folder named "train": its sibling "val", else "test"
 * (ImageNet's and most ImageFolder trees' layout). 0 with the path in out, or -1 when
 * there is none. */
int rf_folder_test_sibling(const char *train, char *out, size_t len);

#endif
