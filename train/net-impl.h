/* train/net-impl.h -- what the forward (net.c) and the backward (net-bwd.c) of a
 * layer table share: the activations of one iteration. Not installed. */
#ifndef RF_NET_IMPL_H
#define RF_NET_IMPL_H

#include "model.h"

struct rf_model_acts {
	int n, train;
	struct rf_tensor *x;          /* borrowed input; its shape is restored on destroy */
	int x_ndim;
	int64_t x_shape[4];
	unsigned nt;                  /* layers */
	struct rf_tensor **node;      /* nt + 1: node[0] = x; in-place layers alias */
	int *root;                    /* nt + 1: the node whose tensor node[j] is */
	struct rf_tensor **mean, **invstd; /* nt: a BN's batch statistics */
	unsigned char *fused;         /* nt: done together with the layer before */
	unsigned char *need;          /* nt + 1: the loss's gradient at node j is needed */
	struct rf_tensor **own;       /* what destroy frees (at most 3 per layer) */
	unsigned nown;
	struct rf_tensor **views;     /* views for the split forward (x's first) */
	unsigned nviews, nxviews;
	struct rf_tensor **dg;        /* nt + 1: backward's gradient at each node */
	struct rf_tensor **gapc;      /* nt: a global pooling's output in the compute dtype,
				       * where that is not f32 (then converted into its node) */
	int keep;                     /* model.h keep_acts: backward frees nothing */
	int keep_err;                 /* -ENOMEM: a tensor could not be kept */
	struct rf_tensor **kept;      /* gradients backward was done with, kept: freed by */
	unsigned nkept, capkept;      /* rf_model_acts_destroy */
};

/* Free t, a tensor backward is done with, or (kept acts) hold it until they are
 * destroyed. */
void rf__acts_free(struct rf_model_acts *a, struct rf_tensor *t);

/* Evaluate x into the caller's `ret` and return it when negative (devices/op-impl.h's
 * RF__TRY returns without keeping it). */
#define RF__TRY_RET(x) do { if ((ret = (x)) < 0) return ret; } while (0)

/* A new tensor named "L<i>.<what>" on m's device, owned by the acts: a 4-D one in
 * the model's compute format (act_dtype, act_layout), any other f32 row-major. */
int rf__net_new(struct rf_model *m, struct rf_model_acts *a, const char *what, unsigned i,
		int ndim, const int64_t *shape, struct rf_tensor **out);
/* A new tensor of that format (not owned by the acts). */
int rf__net_tensor(struct rf_model *m, const char *name, int ndim, const int64_t *shape,
		   struct rf_tensor **out);
/* 1 when m computes in another format than f32 row-major (rf_model_set_format). */
static inline int rf__net_formatted(const struct rf_model *m)
{
	return m->act_dtype != RF_F32 || m->act_layout != RF_LAYOUT_ROWMAJOR;
}
/* Node j's shape for n rows; returns its ndim. */
int rf__node_shape(const struct rf_model_spec *sp, unsigned j, int64_t n, int64_t *sh);
/* The ops (ops.h's names without rf_) a layer of kind k pushes forward and backward,
 * into ops[0 .. 3]; returns how many. */
unsigned rf__layer_ops(enum rf_layer_kind k, const char *ops[4]);

#endif
