/* devices/op-impl.h -- the op builder the front ends share (op.c): fill an op's
 * operands from tensors while collecting the variables it reads and writes, pick the
 * executing device and stream, ask its backend, size the workspace, push one engine
 * op. Not installed. */
#ifndef RF_OP_IMPL_H
#define RF_OP_IMPL_H

#include "backend-impl.h"

/* a growable list of variables, 16 inline */
struct rf__vl {
	struct rf_var **v;
	unsigned n, cap;
	struct rf_var *inl[16];
};

#define RF__MAXT 64

struct rf__b {
	struct rf__op *c;
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

/* A builder holds one op (code; name for traces, NULL: the signature's) and its
 * variable lists; nsum: RF__OP_SUM's inputs (else 0). */
int rf__b_init(struct rf__b *b, const char *fn, enum rf__opcode code, const char *name,
	       unsigned nsum);
/* Operand slot t of the op (one of b->c->o's, or p.sum.in[i]) from tensor x (NULL:
 * left out), read or written as the opcode's signature says. */
void rf__b_set(struct rf__b *b, struct rf__tref *t, struct rf_tensor *x);
/* A tensor the op reads or writes that is no operand (a host op's). */
void rf__b_tensor(struct rf__b *b, struct rf_tensor *x, int write);
/* A snapshot of x into t, without variables (copies of raw memory). */
void rf__tref_of(struct rf__tref *t, const struct rf_tensor *x);
void rf__b_var(struct rf__b *b, struct rf_var *v, int write); /* another variable (NULL: none) */
void rf__b_fail(struct rf__b *b);  /* drop the op and lists; nothing pushed */
/* Pick the executing device and stream (home: the output's device) and check that
 * every tensor is on it. */
int rf__resolve(struct rf__b *b, struct rf_stream *s, struct rf_device *home);
/* After rf__resolve: the backend runs it? its workspace; then the engine op. The
 * builder is spent either way. */
int rf__b_submit(struct rf__b *b, struct rf_stream *s);
/* rf__resolve, then rf__b_submit. */
int rf__b_push(struct rf__b *b, struct rf_stream *s, struct rf_device *home);
/* The engine op's function and done callback (ops of every kind). */
int rf__op_fn(void *arg);
void rf__op_done(void *arg, int status);

/* Argument checks, each recording its message via rf__bad. */

/* What rf__sig_check checks: each operand on its own (present unless optional, its
 * dtype, its rank), and how their shapes follow one another (enum rf__orel). */
#define RF__SIG_OWN 1u
#define RF__SIG_REL 2u
#define RF__SIG_ALL (RF__SIG_OWN | RF__SIG_REL)

/* Check an op's tensor arguments t against opcode code's signature (op-sig.c), as
 * `what` says, before the op is built: t in the signature's order (outputs first;
 * NULL: left out), n of them (RF__OP_SUM: out and its inputs; any other opcode has
 * its signature's count). 0, or -EINVAL with "fn: <operand> ...: expected ..." as
 * rf_last_error(). */
int rf__sig_check(const char *fn, enum rf__opcode code, struct rf_tensor *const *t, unsigned n,
		  unsigned what);
/* rf__sig_check of every fact, the operands listed in the signature's order. */
#define RF__SIG(fn, code, ...) \
	rf__sig_check(fn, code, (struct rf_tensor *const[]){ __VA_ARGS__ }, \
		      sizeof((struct rf_tensor *const[]){ __VA_ARGS__ }) / \
		      sizeof(struct rf_tensor *), RF__SIG_ALL)

/* rows = shape[0], cols = numel / rows; -EINVAL where they do not fit an int. */
int rf__rows_cols(const struct rf_tensor *t, int *rows, int *cols);

#endif
