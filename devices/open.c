/* devices/open.c -- opening a device by name (a backend's kind, "KIND" or "KIND:N"
 * with an ordinal), counting devices of a kind, and asking whether a device or a kind
 * runs an op. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-impl.h"

/* "a, a:N, b or b:N": the specs of every registered kind */
static const char *rf__specs(void)
{
	static char buf[256];
	unsigned n = 0, i;
	size_t o = 0;

	if (buf[0])
		return buf;
	while (rf__backends[n])
		n++;
	/* items K, K:N for each kind; the last two joined by " or " */
	for (i = 0; i < 2 * n && o < sizeof(buf); i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s%s", !i ? "" :
				      i + 1 == 2 * n ? " or " : ", ", rf__backends[i / 2]->kind,
				      i % 2 ? ":N" : "");
	return buf;
}

const char *rf_device_kinds(void)
{
	static char buf[128];
	size_t o = 0;

	if (!buf[0])
		for (unsigned i = 0; rf__backends[i] && o < sizeof(buf); i++)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", i ? ", " : "",
					      rf__backends[i]->kind);
	return buf;
}

int rf_device_open_opts(struct rf_engine *e, const char *spec, const struct rf_device_opts *opts,
			struct rf_device **out)
{
	const struct rf__backend *be;
	const char *colon;
	int n = 0;
	size_t klen;

	if (!e || !spec || !out)
		return rf__fail(-EINVAL, "rf_device_open: an engine, a spec and an out pointer "
				"are required");
	*out = NULL;
	colon = strchr(spec, ':');
	klen = colon ? (size_t)(colon - spec) : strlen(spec);
	if (colon) {
		char *end;
		long v = strtol(colon + 1, &end, 10);
		if (end == colon + 1 || *end || v < 0 || v > 1024 || colon[1] == '-' ||
		    colon[1] == '+' || colon[1] == ' ')
			return rf__fail(-EINVAL, "device '%s': expected %s", spec, rf__specs());
		n = (int)v;
	}
	be = rf__backend_find(spec, klen);
	if (!be)
		return rf__fail(-EINVAL, "device '%s': expected %s", spec, rf__specs());
	return be->open(e, n, opts, out);
}

int rf_device_open(struct rf_engine *e, const char *spec, struct rf_device **out)
{
	return rf_device_open_opts(e, spec, NULL, out);
}

int rf_device_count(const char *kind)
{
	const struct rf__backend *be = kind ? rf__backend_find(kind, strlen(kind)) : NULL;

	if (!be)
		return rf__fail(-EINVAL, "device kind '%s': expected one of %s", kind ? kind : "(null)",
				rf_device_kinds());
	return be->count();
}

int rf_device_kind_host_memory(const char *kind)
{
	const struct rf__backend *be = kind ? rf__backend_find(kind, strlen(kind)) : NULL;

	if (!be)
		return rf__fail(-EINVAL, "device kind '%s': expected one of %s", kind ? kind : "(null)",
				rf_device_kinds());
	return be->hostmem;
}

/* An op of opcode code whose operands are all present, float ones of dtype dt (4-D
 * ones in layout lay) and per-channel ones f32, as a model computing in (dt, lay)
 * pushes them (those of any rank 4-D), on device d (may be NULL): what
 * rf_device_supports asks. */
void rf__probe_op(struct rf__op *op, struct rf__tref *sum_in, int code, struct rf_device *d,
		  enum rf_tdtype dt, enum rf_layout lay)
{
	const struct rf__opsig *g = &rf__opsigs[code];

	memset(op, 0, sizeof(*op));
	op->code = (enum rf__opcode)code;
	op->name = g->name;
	op->xdev = d;
	op->nt = (unsigned)(g->nout + g->nin);
	if (code == RF__OP_SUM) {
		op->p.sum.in = sum_in;
		op->p.sum.k = 1;
	}
	for (unsigned i = 0; i < op->nt; i++) {
		struct rf__tref *t = rf__op_t(op, i);
		const struct rf__osig *o = &g->o[code == RF__OP_SUM && i ? 1 : i];
		t->dev = d;
		t->dtype = o->kind == RF__OK_I32 ? RF_I32 : o->kind == RF__OK_U8 ? RF_U8
			 : o->kind == RF__OK_CHAN ? RF_F32 : dt;
		/* an operand of any rank is asked as a 4-D one, in the layout asked: a
		 * push may give it one (bias_add on a convolution's output), and a claim
		 * must cover what a push can bring (test-op-table checks it) */
		t->ndim = o->ndim ? o->ndim : o->kind == RF__OK_FLOAT ? 4 : 1;
		t->layout = t->ndim == 4 ? lay : RF_LAYOUT_ROWMAJOR;
		for (int k = 0; k < RF_TENSOR_MAX_DIMS; k++)
			t->shape[k] = 1;
		t->numel = 1;
	}
}

static int rf__supports(const struct rf__backend *be, struct rf_device *d, const char *who,
			const char *opname, enum rf_tdtype dt, enum rf_layout lay)
{
	struct rf__op op;
	struct rf__tref in1;
	char why[200] = "";
	int code = rf__opcode_of(opname);

	if (code < 0)
		return rf__fail(-EINVAL, "%s: no op named '%s' (ops.h's functions without rf_)",
				who, opname ? opname : "(null)");
	if (!rf__is_float(dt) || (lay != RF_LAYOUT_ROWMAJOR && lay != RF_LAYOUT_NHWC))
		return rf__fail(-EINVAL, "%s: %s: dtype %s, layout %d: the float dtype (f32, bf16, "
				"f16) and the layout of its float tensors expected", who, opname,
				rf_tdtype_name(dt), (int)lay);
	memset(&in1, 0, sizeof(in1));
	rf__probe_op(&op, &in1, code, d, dt, lay);
	if ((be->supports_op && !be->supports_op(d, &op, why, sizeof(why))) ||
	    (d && d->admit && !d->admit(d->admit_ctx, &op, why, sizeof(why))))
		return rf__fail(-ENOTSUP, "%s does not run %s: %s", who, opname,
				why[0] ? why : "not supported");
	return 0;
}

int rf_device_supports(const struct rf_device *d, const char *op, enum rf_tdtype dt,
		       enum rf_layout layout)
{
	if (!d)
		return rf__fail(-EINVAL, "rf_device_supports: no device");
	return rf__supports(d->be, (struct rf_device *)d, d->name, op, dt, layout);
}

int rf_device_kind_supports(const char *kind, const char *op, enum rf_tdtype dt,
			    enum rf_layout layout)
{
	const struct rf__backend *be = kind ? rf__backend_find(kind, strlen(kind)) : NULL;
	char who[48];

	if (!be)
		return rf__fail(-EINVAL, "device kind '%s': expected one of %s", kind ? kind : "(null)",
				rf_device_kinds());
	snprintf(who, sizeof(who), "a %s device", be->kind);
	return rf__supports(be, NULL, who, op, dt, layout);
}
