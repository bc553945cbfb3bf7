/* ringflow/export.h -- a trained model that leaves the training process for another
 * program to load: a directory with a graph description, model.json (layers,
 * attributes, each node's shape, the parameter tensors), and the parameters,
 * params.rfck (a checkpoint file: header, per-tensor CRC, written atomically).
 * Other front ends read the two (tools/rf-export-torch.py loads them into PyTorch).
 * Reactor thread only; functions return 0 or -errno with one line in rf_last_error()
 * naming the file and what was expected. The format: train/README.md, "Export". */
#ifndef RINGFLOW_EXPORT_H
#define RINGFLOW_EXPORT_H

#include <stdint.h>
#include "ring.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_EXPORT_FORMAT "ringflow-export"
#define RF_EXPORT_VERSION 1

/* Write replica m's parameters and running statistics to dir (created if missing):
 * model.json naming their FNV-1a 64 hash and params.rfck, each written whole under a
 * temporary name and synced -- model.json's first -- then params.rfck and model.json
 * renamed into place: a failure before those renames (a full disk, an I/O error)
 * leaves an export already in dir whole. ring: as rf_ckpt_save's (NULL: a private
 * one). Waits for the writes pushed to m so far. */
int rf_model_export(struct rf_ring *ring, struct rf_model *m, const char *dir);
/* rf_model_export with the class names of the data m was trained on (label k's at
 * [k]; n of them, m's class count), written into model.json as "class_names" so that
 * data of other classes can be refused (rf_export_check_classes). names NULL: none
 * written, as rf_model_export. -EINVAL, nothing written, for n other than the class
 * count or names rf_export_check_names refuses. */
int rf_model_export_named(struct rf_ring *ring, struct rf_model *m, const char *dir,
			  const char *const *names, unsigned n);
/* Whether names[0..n) can be recorded: each 1 to 4095 bytes of UTF-8 (a JSON string;
 * a folder's Latin-1 name is not). 0, or -EINVAL naming the first that cannot. Asked
 * before a long run, so that its export does not fail at the end. */
int rf_export_check_names(const char *const *names, unsigned n);

/* An export, as read and checked by rf_export_open. */
struct rf_export {
	char dir[4096];
	const struct rf_model_spec *spec; /* the model model.json names, its table checked */
	uint64_t param_hash;              /* what params.rfck must hash to */
	unsigned nclass_names;            /* its class_names (0: it has none) ... */
	uint64_t class_names_hash;        /* ... and their FNV-1a, each with its NUL */
};

/* Read dir/model.json and check it against the table of the model it names: every
 * layer's kind, inputs and attributes, every node's shape, every tensor's name and
 * shape must be the table's (ringflow runs the models it has tables for: mlp, lenet,
 * resnet18). -ENOENT no such file, -EBADMSG not JSON or not an export, -EINVAL a
 * mismatch (the message names the field). */
int rf_export_open(const char *dir, struct rf_export *x);

/* Load the export's parameters and running statistics into replica m (of x->spec),
 * after checking params.rfck (as rf_ckpt_load does) and its hash against model.json's
 * (a params.rfck of another export is refused with -EINVAL). m NULL: check only. The
 * hash is over the tensors' bytes in table order, not the --json param_hash of
 * rf-train (which hashes the whole parameter block, padding included). */
int rf_export_load(struct rf_ring *ring, const struct rf_export *x, struct rf_model *m);

/* Whether data whose classes are names[0..n) (label k's at [k]) suits export x: 0 where
 * x's model.json recorded the same names in the same order (as rf_export_open read
 * them), or where either side has none (only the class count can then be compared);
 * -EINVAL naming the first difference (model.json is read again for the names;
 * -ESTALE where it changed since rf_export_open). */
int rf_export_check_classes(const struct rf_export *x, const char *const *names, unsigned n);

#ifdef __cplusplus
}
#endif
#endif
