/* devices/op-impl.h -- the op builder shared by the ops files (op-builder.c):
 * collect the variables an op reads and writes, check its tensors, pick the
 * executing device and stream, push one engine op. Not installed. */
#ifndef RF_OP_IMPL_H
#define RF_OP_IMPL_H

#include "device-impl.h"

/* a growable list of variables, 16 inline */
struct rf__vl {
	struct rf_var **v;
	unsigned n, cap;
	struct rf_var *inl[16];
};

#define RF__MAXT 64

struct rf__b {
	struct rf__opctx *c;
	const char *fn;                  /* public function name, for messages */
	struct rf_tensor *ts[RF__MAXT];  /* every tensor, for the device check */
	unsigned nt;
	int err;
	struct rf__vl r, w;              /* (rf__b_init clears everything before r) */
};

#define RF__TRY(x) do { int _r = (x); if (_r < 0) return _r; } while (0)

void rf__vl_init(struct rf__vl *l);
int rf__vl_add(struct rf__vl *l, struct rf_var *v);
int rf__vl_add_tensor(struct rf__vl *l, struct rf_tensor *t); /* t and its live views */
void rf__vl_fini(struct rf__vl *l);

/* Record "fn: fmt..." as rf_last_error() and return -EINVAL. */
int rf__bad(const char *fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A builder holds one op context (extra bytes follow it) and its variable lists. */
int rf__b_init(struct rf__b *b, const char *fn, int code, const char *name, size_t extra);
void rf__b_tensor(struct rf__b *b, struct rf_tensor *t, int write); /* read or written */
void rf__b_live(struct rf__b *b, struct rf_var *v); /* read: live hyperparameters' (NULL: none) */
void rf__b_fail(struct rf__b *b);  /* drop the context and lists; nothing pushed */
/* Pick the executing device and stream (home: the output's device) and check that
 * every tensor is on it. */
int rf__resolve(struct rf__b *b, struct rf_stream *s, struct rf_device *home);
/* Resolve, then push the engine op; the builder is spent either way. */
int rf__b_push(struct rf__b *b, struct rf_stream *s, struct rf_device *home);
/* The engine op's function and done callback (op contexts of every kind). */
int rf__op_fn(void *arg);
void rf__op_done(void *arg, int status);

/* Argument checks, each recording its message via rf__bad. */
int rf__need(const char *fn, const char *what, const struct rf_tensor *t,
	     enum rf_tdtype dt, int ndim);      /* ndim < 0: any */
int rf__same_numel(const char *fn, const struct rf_tensor *a, const struct rf_tensor *b);
int rf__rows_cols(const struct rf_tensor *t, int *rows, int *cols);

#endif
