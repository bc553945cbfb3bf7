/* train/export.c -- a model that leaves the training process: model.json (jansson
 * writes and reads it) and params.rfck (a checkpoint file), and the checks that an
 * export read back is the table it names and the parameters it was written with. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt-impl.h"
#include "export.h"
#include "trainer-impl.h"
#include "tensor.h"

static const char *const rf__kind_names[] = {
	[RF_LAYER_DENSE] = "dense", [RF_LAYER_CONV] = "conv", [RF_LAYER_BN] = "batchnorm",
	[RF_LAYER_RELU] = "relu", [RF_LAYER_AVGPOOL] = "avgpool", [RF_LAYER_MAXPOOL] = "maxpool",
	[RF_LAYER_GAP] = "gap", [RF_LAYER_ADD] = "add", [RF_LAYER_FLATTEN] = "flatten",
};

static const char *const rf__role_names[] = {
	[RF_PARAM_WEIGHT] = "weight", [RF_PARAM_BIAS] = "bias", [RF_PARAM_GAMMA] = "gamma",
	[RF_PARAM_BETA] = "beta", [RF_PARAM_RUN_MEAN] = "running_mean",
	[RF_PARAM_RUN_VAR] = "running_var",
};

/* The stride a layer runs with (the table's 0 is the kind's default). */
static int rf__ex_stride(const struct rf_layer *l)
{
	switch (l->kind) {
	case RF_LAYER_CONV:
		return l->stride > 0 ? l->stride : 1;
	case RF_LAYER_MAXPOOL:
		return l->stride > 0 ? l->stride : l->k;
	case RF_LAYER_AVGPOOL:
		return l->k;
	default:
		return 0;
	}
}

#define RF__EX_JSON "model.json"
#define RF__EX_SCALE (1.0 / 255.0) /* u8 pixels to the model's input, as rf-train feeds them */
#define RF__EX_PARAMS "params.rfck"
#define RF__EX_NAME_MAX 4095       /* bytes of a class name (an .rfrec's most) */


/* FNV-1a 64 of the tensors' data, in spec order (padding between views excluded). */
static uint64_t rf__ex_hash(const struct rf_model_spec *sp, const float *params)
{
	uint64_t h = RF__FNV0;

	for (unsigned i = 0; i < sp->ntensors; i++)
		h = rf__fnv(h, params + sp->p[i].offset, sp->p[i].numel * sizeof(float));
	return h;
}

/* dir/name.tmp, whole and synced, left for rf__ex_commit: written before params.rfck
 * is replaced, so that a full disk or an I/O error here leaves the old export whole. */
static int rf__ex_write(const char *dir, const char *name, const char *text, size_t len)
{
	char tmp[4210];
	const char *step;
	int ret;

	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, name);
	if ((ret = rf__write_whole(NULL, tmp, text, len, 1, &step)) < 0)
		return rf__fail(ret, "export %s: cannot %s %s: %s (the export there left as it "
				"was)", dir, step, tmp, strerror(-ret));
	return 0;
}

/* dir/name.tmp renamed into place, the directory synced. */
static int rf__ex_commit(const char *dir, const char *name)
{
	char path[4200], tmp[4210];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return rf__fail(-e, "export %s: cannot rename %s to %s: %s (params.rfck is the "
				"new one: the pair does not load)", dir, tmp, path, strerror(e));
	}
	rf__sync_dir(path);
	return 0;
}

static void rf__ex_drop(const char *dir, const char *name)
{
	char tmp[4210];

	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, name);
	unlink(tmp);
}

static json_t *rf__ex_shape(int ndim, const int64_t *shape)
{
	json_t *a = json_array();

	for (int i = 0; a && i < ndim; i++)
		json_array_append_new(a, json_integer(shape[i]));
	return a;
}

/* A layer's output node shape: (c, h, w), or (c) for a 2-D output. */
static json_t *rf__ex_node_shape(const struct rf_layer_info *in)
{
	int64_t s[3] = { in->c, in->h, in->w };

	return rf__ex_shape(in->h || in->w ? 3 : 1, s);
}

static json_t *rf__ex_layer(const struct rf_model_spec *sp, unsigned i)
{
	const struct rf_layer *l = &sp->table[i];
	const struct rf_layer_info *in = &sp->info[i];
	json_t *o = json_object(), *p = json_array(), *b = json_array();

	json_object_set_new(o, "kind", json_string(rf__kind_names[l->kind]));
	json_object_set_new(o, "in", json_integer(in->in));
	json_object_set_new(o, "in2", json_integer(in->in2));
	json_object_set_new(o, "out", json_integer(l->out));
	json_object_set_new(o, "k", json_integer(l->k));
	json_object_set_new(o, "stride", json_integer(rf__ex_stride(l)));
	json_object_set_new(o, "pad", json_integer(l->pad));
	json_object_set_new(o, "bias", json_boolean(l->bias));
	json_object_set_new(o, "output", rf__ex_node_shape(in));
	for (int k = 0; k < in->np; k++)
		json_array_append_new(p, json_string(sp->p[in->p0 + k].name));
	if (l->kind == RF_LAYER_BN) {
		json_array_append_new(b, json_string(sp->b[in->b0].name));
		json_array_append_new(b, json_string(sp->b[in->b0 + 1].name));
	}
	json_object_set_new(o, "params", p);
	json_object_set_new(o, "buffers", b);
	return o;
}

static json_t *rf__ex_tensors(const struct rf_param_spec *ps, unsigned n)
{
	json_t *a = json_array();

	for (unsigned i = 0; i < n; i++) {
		json_t *o = json_object();
		json_object_set_new(o, "name", json_string(ps[i].name));
		json_object_set_new(o, "shape", rf__ex_shape(ps[i].ndim, ps[i].shape));
		json_object_set_new(o, "role", json_string(rf__role_names[ps[i].role]));
		json_object_set_new(o, "layer", json_integer(ps[i].layer));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *rf__ex_describe(const struct rf_model_spec *sp, uint64_t hash,
				const char *const *names)
{
	json_t *o = json_object(), *layers = json_array();
	int64_t input[3] = { sp->in.c, sp->in.h, sp->in.w };
	char hx[24];

	snprintf(hx, sizeof(hx), "%016" PRIx64, hash);
	json_object_set_new(o, "format", json_string(RF_EXPORT_FORMAT));
	json_object_set_new(o, "version", json_integer(RF_EXPORT_VERSION));
	json_object_set_new(o, "model", json_string(sp->name));
	json_object_set_new(o, "input", rf__ex_shape(3, input));
	json_object_set_new(o, "input_scale", json_real(RF__EX_SCALE));
	if (sp->in.norm_channels) {   /* x = (u8 * input_scale - mean[c]) / std[c] */
		json_t *m = json_array(), *s = json_array();
		for (unsigned k = 0; k < sp->in.norm_channels; k++) {
			json_array_append_new(m, json_real(sp->in.mean[k]));
			json_array_append_new(s, json_real(sp->in.std[k]));
		}
		json_object_set_new(o, "input_mean", m);
		json_object_set_new(o, "input_std", s);
	}
	json_object_set_new(o, "classes", json_integer(sp->in.classes));
	if (names) {                   /* label k is names[k] */
		json_t *a = json_array();
		for (int k = 0; k < sp->in.classes; k++)
			json_array_append_new(a, json_string(names[k]));
		json_object_set_new(o, "class_names", a);
	}
	json_object_set_new(o, "stem", json_string(sp->in.stem == RF_STEM_IMAGENET ? "imagenet"
										  : "small"));
	json_object_set_new(o, "loss", json_string("softmax_cross_entropy"));
	json_object_set_new(o, "batchnorm", json_pack("{s:f,s:f}", "eps", 1e-5, "momentum", 0.1));
	json_object_set_new(o, "params_file", json_string(RF__EX_PARAMS));
	json_object_set_new(o, "params_fnv1a64", json_string(hx));
	for (unsigned i = 0; i < sp->ntable; i++)
		json_array_append_new(layers, rf__ex_layer(sp, i));
	json_object_set_new(o, "layers", layers);
	json_object_set_new(o, "tensors", rf__ex_tensors(sp->p, sp->ntensors));
	json_object_set_new(o, "buffers", rf__ex_tensors(sp->b, sp->nbufs));
	return o;
}

/* The blobs of the parameters and buffers, pointing into the two host blocks. */
static struct rf_ckpt_blob *rf__ex_blobs(const struct rf_model_spec *sp, float *params,
					 float *bufs)
{
	struct rf_ckpt_blob *bl = calloc((size_t)sp->ntensors + sp->nbufs + 1, sizeof(*bl));

	for (unsigned i = 0; bl && i < sp->ntensors + sp->nbufs; i++) {
		const struct rf_param_spec *ps = i < sp->ntensors ? &sp->p[i] : &sp->b[i - sp->ntensors];
		rf__param_blob(&bl[i], ps->name, ps, (i < sp->ntensors ? params : bufs) + ps->offset);
	}
	return bl;
}

/* FNV-1a 64 of names[0..n), each with its NUL. */
static uint64_t rf__ex_names_hash(const char *const *names, unsigned n)
{
	uint64_t h = RF__FNV0;

	for (unsigned k = 0; k < n; k++)
		h = rf__fnv(h, names[k], strlen(names[k]) + 1);
	return h;
}

/* The same of model.json's class_names (rf__ex_check made them strings without a NUL;
 * in a file changed since, what is not one hashes as ""), their count in *n. */
static uint64_t rf__ex_json_names_hash(json_t *root, unsigned *n)
{
	json_t *cn = json_object_get(root, "class_names");
	uint64_t h = RF__FNV0;

	*n = json_is_array(cn) ? (unsigned)json_array_size(cn) : 0;
	for (unsigned k = 0; k < *n; k++) {
		const char *v = json_string_value(json_array_get(cn, k));
		h = rf__fnv(h, v ? v : "", strlen(v ? v : "") + 1);
	}
	return h;
}

int rf_export_check_names(const char *const *names, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		json_t *js = names && names[k] ? json_string(names[k]) : NULL; /* NULL: not UTF-8 */
		size_t len = js ? strlen(names[k]) : 0;
		json_decref(js);
		if (!js || !len || len > RF__EX_NAME_MAX)
			return rf__fail(-EINVAL, "class %u's name: %s, expected 1 to %d bytes of "
					"UTF-8 (a JSON string)", k, !names || !names[k] ? "none" :
					!js ? "not UTF-8" : !len ? "empty" : "too long",
					RF__EX_NAME_MAX);
	}
	return 0;
}

int rf_model_export(struct rf_ring *ring, struct rf_model *m, const char *dir)
{
	return rf_model_export_named(ring, m, dir, NULL, 0);
}

int rf_model_export_named(struct rf_ring *ring, struct rf_model *m, const char *dir,
			  const char *const *names, unsigned n)
{
	const struct rf_model_spec *sp = m->spec;
	float *params = calloc(sp->numel + 1, sizeof(float));
	float *bufs = calloc(sp->buf_numel + 1, sizeof(float));
	struct rf_ckpt_blob *bl = NULL;
	struct rf_ckpt_meta meta = { 0 };
	char path[4200], *text = NULL;
	json_t *desc = NULL;
	int ret;

	if (names && n != (unsigned)sp->in.classes) {
		ret = rf__fail(-EINVAL, "export %s: %u class names for a model of %d classes", dir,
			       n, sp->in.classes);
		goto out;
	}
	if (names && (ret = rf_export_check_names(names, n)) < 0) {
		rf__fail(ret, "export %s: %s", dir, rf_last_error());
		goto out;
	}
	if (!params || !bufs || !(bl = rf__ex_blobs(sp, params, bufs))) {
		ret = rf__fail(-ENOMEM, "export %s: out of memory", dir);
		goto out;
	}
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		ret = rf__fail(-errno, "export %s: cannot create the directory: %s", dir,
			       strerror(errno));
		goto out;
	}
	if ((ret = rf_tensor_read(m->params, params)) < 0 ||
	    (m->bufs && (ret = rf_tensor_read(m->bufs, bufs)) < 0)) {
		rf__fail(ret, "export %s: reading the parameters back failed (%d)", dir, ret);
		goto out;
	}
	snprintf(meta.model, sizeof(meta.model), "%s", sp->name);
	snprintf(path, sizeof(path), "%s/%s", dir, RF__EX_PARAMS);
	if (!(desc = rf__ex_describe(sp, rf__ex_hash(sp, params), names)) ||
	    !(text = json_dumps(desc, JSON_INDENT(1) | JSON_PRESERVE_ORDER))) {
		ret = rf__fail(-ENOMEM, "export %s: out of memory", dir);
		goto out;
	}
	/* model.json whole under its .tmp first, then params.rfck replaced, then model.json:
	 * until that last rename every failure (a full disk, an I/O error) leaves the old
	 * pair as it was; a crash between the two renames leaves a pair that does not
	 * load (its hash differs) */
	if ((ret = rf__ex_write(dir, RF__EX_JSON, text, strlen(text))) < 0)
		goto out;
	int published;
	if ((ret = rf__ckpt_save(ring, path, &meta, bl, sp->ntensors + sp->nbufs,
				 &published)) < 0 && !published) {
		rf__ex_drop(dir, RF__EX_JSON);
		goto out;
	}
	if (ret < 0) { /* params.rfck is the new one (only its directory's fsync failed):
			* model.json must follow it, or the pair does not load */
		char why[400];
		snprintf(why, sizeof(why), "%s", rf_last_error());
		if (rf__ex_commit(dir, RF__EX_JSON) == 0)
			rf__fail(ret, "export %s: %s (both files are the new export's)", dir, why);
		goto out;
	}
	ret = rf__ex_commit(dir, RF__EX_JSON);
out:
	json_decref(desc);
	free(text);
	free(bl);
	free(params);
	free(bufs);
	return ret;
}

/* ---- reading an export back ---- */

struct rf__exr {
	const char *file;
	json_t *root;
};

static int rf__ex_bad(const struct rf__exr *r, const char *fmt, ...) RF__PRINTF(2, 3);
static int rf__ex_bad(const struct rf__exr *r, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rf__fail(-EINVAL, "%s: %s", r->file, msg);
}

/* an integer member (missing or not an integer: -1 with *ok 0) */
/* What a JSON value is, for messages: "missing", "a string", ... */
static const char *rf__ex_kind(const json_t *v)
{
	if (!v)
		return "missing";
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a real number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

static long long rf__ex_int(json_t *o, const char *key, int *ok)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v)) {
		*ok = 0;
		return -1;
	}
	return json_integer_value(v);
}

/* input_mean and input_std (both or neither: arrays of one number per input channel)
 * into in's norm. */
static int rf__ex_norm(const struct rf__exr *r, json_t *o, struct rf_model_input *in)
{
	json_t *m = json_object_get(o, "input_mean"), *s = json_object_get(o, "input_std");
	size_t n = json_array_size(m);

	if (!m && !s)
		return 0;
	if (!json_is_array(m) || !json_is_array(s) || n != json_array_size(s) ||
	    n != (size_t)in->c || n > RF_MODEL_NORM_MAX)
		return rf__ex_bad(r, "input_mean, input_std: expected two arrays of one number per "
				  "input channel (%d)", in->c);
	for (size_t k = 0; k < n; k++) {
		json_t *a = json_array_get(m, k), *b = json_array_get(s, k);
		if (!json_is_number(a) || !json_is_number(b))
			return rf__ex_bad(r, "input_mean[%zu], input_std[%zu]: expected numbers", k, k);
		in->mean[k] = (float)json_number_value(a);
		in->std[k] = (float)json_number_value(b);
	}
	in->norm_channels = (unsigned)n;
	return 0;
}

static int rf__ex_check_shape(const struct rf__exr *r, json_t *a, int ndim, const int64_t *shape,
			      const char *what)
{
	int ok = json_is_array(a) && (int)json_array_size(a) == ndim;

	for (int d = 0; ok && d < ndim; d++)
		ok = json_is_integer(json_array_get(a, (size_t)d)) &&
		     json_integer_value(json_array_get(a, (size_t)d)) == shape[d];
	return ok ? 0 : rf__ex_bad(r, "%s: the shape is not the table's", what);
}

static int rf__ex_check_layer(const struct rf__exr *r, const struct rf_model_spec *sp,
			      json_t *o, unsigned i)
{
	const struct rf_layer *l = &sp->table[i];
	const struct rf_layer_info *in = &sp->info[i];
	const char *kind = json_string_value(json_object_get(o, "kind"));
	const char *keys[] = { "in", "in2", "out", "k", "stride", "pad" };
	long long want[] = { in->in, in->in2, l->out, l->k, rf__ex_stride(l), l->pad };
	int64_t s[3] = { in->c, in->h, in->w };
	char what[64];
	int ok = 1;

	if (!kind || strcmp(kind, rf__kind_names[l->kind]) != 0)
		return rf__ex_bad(r, "layers[%u].kind is %s%s%s, the %s table has \"%s\"", i,
				  kind ? "\"" : "", kind ? kind : "missing", kind ? "\"" : "",
				  sp->name, rf__kind_names[l->kind]);
	for (unsigned k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		long long v = rf__ex_int(o, keys[k], &ok);
		if (!ok || v != want[k])
			return rf__ex_bad(r, "layers[%u].%s is %s%lld, the %s table has %lld", i,
					  keys[k], ok ? "" : "missing or not an integer: ", v,
					  sp->name, want[k]);
	}
	if (!json_is_boolean(json_object_get(o, "bias")) ||
	    json_is_true(json_object_get(o, "bias")) != (l->bias != 0))
		return rf__ex_bad(r, "layers[%u].bias: expected %s", i, l->bias ? "true" : "false");
	snprintf(what, sizeof(what), "layers[%u].output", i);
	if ((ok = rf__ex_check_shape(r, json_object_get(o, "output"), in->h || in->w ? 3 : 1, s,
				     what)) < 0)
		return ok;
	for (int pass = 0; pass < 2; pass++) {
		json_t *a = json_object_get(o, pass ? "buffers" : "params");
		int n = pass ? (l->kind == RF_LAYER_BN ? 2 : 0) : in->np;
		const struct rf_param_spec *ps = pass ? sp->b + (n ? in->b0 : 0) : sp->p + in->p0;
		int same = json_is_array(a) && (int)json_array_size(a) == n;
		for (int k = 0; same && k < n; k++) {
			const char *nm = json_string_value(json_array_get(a, (size_t)k));
			same = nm && strcmp(nm, ps[k].name) == 0;
		}
		if (!same)
			return rf__ex_bad(r, "layers[%u].%s: expected the %d names the %s table "
					  "gives that layer", i, pass ? "buffers" : "params", n,
					  sp->name);
	}
	return 0;
}

static int rf__ex_check_tensors(const struct rf__exr *r, json_t *a, const struct rf_param_spec *ps,
				unsigned n, const char *key)
{
	char what[96];
	int ret;

	if (!json_is_array(a) || json_array_size(a) != n)
		return rf__ex_bad(r, "%s: expected an array of %u tensors", key, n);
	for (unsigned i = 0; i < n; i++) {
		json_t *o = json_array_get(a, i);
		const char *name = json_string_value(json_object_get(o, "name"));
		if (!name || strcmp(name, ps[i].name) != 0)
			return rf__ex_bad(r, "%s[%u].name is \"%s\", expected \"%s\"", key, i,
					  name ? name : "(missing)", ps[i].name);
		snprintf(what, sizeof(what), "%s[%u] (%s)", key, i, name);
		if ((ret = rf__ex_check_shape(r, json_object_get(o, "shape"), ps[i].ndim,
					      ps[i].shape, what)) < 0)
			return ret;
		const char *role = json_string_value(json_object_get(o, "role"));
		int ok = 1;
		long long layer = rf__ex_int(o, "layer", &ok);
		if (!role || strcmp(role, rf__role_names[ps[i].role]) != 0 || !ok ||
		    layer != ps[i].layer)
			return rf__ex_bad(r, "%s: expected role \"%s\" and layer %d", what,
					  rf__role_names[ps[i].role], ps[i].layer);
	}
	return 0;
}

static int rf__ex_check(const struct rf__exr *r, struct rf_export *x)
{
	json_t *o = r->root, *layers = json_object_get(o, "layers");
	const char *fmt = json_string_value(json_object_get(o, "format"));
	const char *model = json_string_value(json_object_get(o, "model"));
	const char *hash = json_string_value(json_object_get(o, "params_fnv1a64"));
	const char *pf = json_string_value(json_object_get(o, "params_file"));
	const struct rf_model_spec *sp;
	int ok = 1, ret;
	long long ver = rf__ex_int(o, "version", &ok);
	char *end;

	if (!fmt || strcmp(fmt, RF_EXPORT_FORMAT) != 0)
		return rf__fail(-EBADMSG, "%s: not a ringflow export (\"format\" is not \"%s\")",
				r->file, RF_EXPORT_FORMAT);
	if (!ok)
		return rf__ex_bad(r, "\"version\" is %s: expected the integer %d",
				  rf__ex_kind(json_object_get(o, "version")), RF_EXPORT_VERSION);
	if (ver != RF_EXPORT_VERSION)
		return rf__ex_bad(r, "version %lld: this ringflow reads version %d", ver,
				  RF_EXPORT_VERSION);
	if (!model)
		return rf__ex_bad(r, "\"model\" is %s: expected a string, one of %s",
				  rf__ex_kind(json_object_get(o, "model")), rf_model_names());
	if (!rf_model_spec(model))
		return rf__ex_bad(r, "model \"%s\": expected one of %s", model, rf_model_names());
	/* the input, classes and stem it was made for (exports before them: Fashion-MNIST's) */
	struct rf_model_input in = { 1, 28, 28, 10, RF_STEM_SMALL };
	json_t *ia = json_object_get(o, "input");
	const char *stem = json_string_value(json_object_get(o, "stem"));
	int chw[3];
	for (int d = 0; d < 3; d++) {
		json_t *v = json_array_get(ia, (size_t)d);
		if (!json_is_array(ia) || json_array_size(ia) != 3 || !json_is_integer(v) ||
		    json_integer_value(v) < 1 || json_integer_value(v) > 4096)
			return rf__ex_bad(r, "input: expected [c, h, w], each 1 to 4096");
		chw[d] = (int)json_integer_value(v);
	}
	in.c = chw[0];
	in.h = chw[1];
	in.w = chw[2];
	in.classes = (int)rf__ex_int(o, "classes", &ok);
	if (!ok || in.classes < 2 || in.classes > RF_MODEL_MAX_CLASSES)
		return rf__ex_bad(r, "classes: expected an integer from 2 to %d",
				  RF_MODEL_MAX_CLASSES);
	if (stem && strcmp(stem, "small") && strcmp(stem, "imagenet"))
		return rf__ex_bad(r, "stem \"%s\": expected \"small\" or \"imagenet\"", stem);
	in.stem = stem && !strcmp(stem, "imagenet") ? RF_STEM_IMAGENET : RF_STEM_SMALL;
	if ((ret = rf__ex_norm(r, o, &in)) < 0)
		return ret;
	json_t *cn = json_object_get(o, "class_names");
	if (cn && !json_is_array(cn))
		return rf__ex_bad(r, "class_names: expected an array of the %d classes' names",
				  in.classes);
	if (cn && json_array_size(cn) != (size_t)in.classes)
		return rf__ex_bad(r, "class_names: %zu names, expected %d (classes)",
				  json_array_size(cn), in.classes);
	for (size_t k = 0; cn && k < json_array_size(cn); k++) {
		json_t *v = json_array_get(cn, k);
		if (!json_is_string(v) || !json_string_length(v) ||
		    json_string_length(v) > RF__EX_NAME_MAX ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return rf__ex_bad(r, "class_names[%zu]: expected a string of 1 to %d bytes",
					  k, RF__EX_NAME_MAX);
	}
	if (!(sp = rf_model_spec_for(model, &in)))
		return rf__ex_bad(r, "%s", rf_last_error());
	if (!pf || strcmp(pf, RF__EX_PARAMS) != 0)
		return rf__ex_bad(r, "params_file: expected \"%s\"", RF__EX_PARAMS);
	if (!hash || strlen(hash) != 16 || strspn(hash, "0123456789abcdef") != 16)
		return rf__ex_bad(r, "params_fnv1a64: expected 16 lowercase hex digits");
	x->param_hash = strtoull(hash, &end, 16);
	/* the one loss ringflow trains and evaluates with: another is not computed as
	 * its name says (rf-infer's loss would be softmax cross-entropy whatever it read) */
	json_t *loss = json_object_get(o, "loss");
	if (loss && (!json_is_string(loss) ||
		     strcmp(json_string_value(loss), "softmax_cross_entropy") != 0))
		return rf__ex_bad(r, "loss%s%s%s: expected \"softmax_cross_entropy\" (the one loss "
				  "ringflow computes)", json_is_string(loss) ? " \"" : "",
				  json_is_string(loss) ? json_string_value(loss) : " (not a string)",
				  json_is_string(loss) ? "\"" : "");
	json_t *bn = json_object_get(o, "batchnorm");
	if (json_real_value(json_object_get(o, "input_scale")) != RF__EX_SCALE)
		return rf__ex_bad(r, "input_scale: expected 1/255 (%.17g)", RF__EX_SCALE);
	if (json_real_value(json_object_get(bn, "eps")) != 1e-5 ||
	    json_real_value(json_object_get(bn, "momentum")) != 0.1)
		return rf__ex_bad(r, "batchnorm: expected eps 1e-05 and momentum 0.1 (what ringflow "
				  "trains and runs with)");
	if (!json_is_array(layers) || json_array_size(layers) != sp->ntable)
		return rf__ex_bad(r, "layers: expected the %u layers of the %s table", sp->ntable,
				  sp->name);
	for (unsigned i = 0; i < sp->ntable; i++)
		if ((ret = rf__ex_check_layer(r, sp, json_array_get(layers, i), i)) < 0)
			return ret;
	if ((ret = rf__ex_check_tensors(r, json_object_get(o, "tensors"), sp->p, sp->ntensors,
					"tensors")) < 0 ||
	    (ret = rf__ex_check_tensors(r, json_object_get(o, "buffers"), sp->b, sp->nbufs,
					"buffers")) < 0)
		return ret;
	x->spec = sp;
	return 0;
}

/* dir/model.json into *root (a JSON object; path: its name, len bytes). 0 or -errno
 * with the message set. */
static int rf__ex_read(const char *dir, char *path, size_t len, json_t **root)
{
	json_error_t je;
	struct stat st;

	*root = NULL;
	snprintf(path, len, "%s/%s", dir, RF__EX_JSON);
	if (stat(path, &st) < 0 || access(path, R_OK) < 0)
		return rf__fail(-errno, "%s: %s (an export directory holds model.json and "
				"params.rfck, as rf-train --export writes them)", path,
				strerror(errno));
	if (!S_ISREG(st.st_mode)) /* a FIFO would block the read */
		return rf__fail(S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL, "%s: is %s, expected "
				"a regular file", path, rf__ftype(st.st_mode));
	if (!(*root = json_load_file(path, JSON_REJECT_DUPLICATES, &je)))
		return rf__fail(-EBADMSG, "%s: not JSON at line %d, column %d: %s", path, je.line,
				je.column, je.text);
	if (!json_is_object(*root)) {
		json_decref(*root);
		*root = NULL;
		return rf__fail(-EBADMSG, "%s: expected a JSON object", path);
	}
	return 0;
}

int rf_export_open(const char *dir, struct rf_export *x)
{
	char path[4200];
	struct rf__exr r = { path, NULL };
	int ret;

	memset(x, 0, sizeof(*x));
	if (!dir || strlen(dir) >= sizeof(x->dir))
		return rf__fail(-EINVAL, "export: bad directory name");
	snprintf(x->dir, sizeof(x->dir), "%s", dir);
	if ((ret = rf__ex_read(dir, path, sizeof(path), &r.root)) < 0)
		return ret;
	ret = rf__ex_check(&r, x);
	if (ret == 0)        /* its class names, checked: their count and hash */
		x->class_names_hash = rf__ex_json_names_hash(r.root, &x->nclass_names);
	json_decref(r.root);
	return ret;
}

int rf_export_check_classes(const struct rf_export *x, const char *const *names, unsigned n)
{
	char path[4200];
	unsigned m;
	json_t *root;
	int ret = 0;

	if (!names || !n || !x->nclass_names)
		return 0;       /* one side names none: the class count alone is compared */
	for (unsigned k = 0; k < n; k++)
		if (!names[k])
			return rf__fail(-EINVAL, "rf_export_check_classes: names[%u] is NULL", k);
	if (n != x->nclass_names)
		return rf__fail(-EINVAL, "export %s: a model of %u classes, and the data have %u: "
				"expected data of its classes", x->dir, x->nclass_names, n);
	if (rf__ex_names_hash(names, n) == x->class_names_hash)
		return 0;
	/* they differ: which one, from model.json again (as it was when opened) */
	if ((ret = rf__ex_read(x->dir, path, sizeof(path), &root)) < 0)
		return ret;
	if (rf__ex_json_names_hash(root, &m) != x->class_names_hash || m != n)
		ret = rf__fail(-ESTALE, "%s: its class_names changed since the export was opened",
			       path);
	json_t *cn = json_object_get(root, "class_names");
	for (unsigned k = 0; !ret && k < n; k++) {
		const char *mine = json_string_value(json_array_get(cn, k));
		if (!mine)      /* (the hash matched: cannot happen but by a collision) */
			mine = "";
		if (strcmp(mine, names[k]))
			ret = rf__fail(-EINVAL, "export %s: class %u is \"%s\", and in the data "
				       "\"%s\": expected the classes it was trained on, in the same "
				       "order", x->dir, k, mine, names[k]);
	}
	json_decref(root);
	return ret;
}

/* "lenet of 3 classes on (3, 16, 16) inputs, small stem, normalized" for a refusal. */
static void rf__ex_spec_say(const struct rf_model_spec *sp, char *buf, size_t len)
{
	snprintf(buf, len, "%s of %d classes on (%d, %d, %d) inputs%s%s", sp->name,
		 sp->in.classes, sp->in.c, sp->in.h, sp->in.w,
		 sp->in.stem == RF_STEM_IMAGENET ? ", ImageNet stem" : "",
		 sp->in.norm_channels ? ", normalized" : "");
}

int rf_export_load(struct rf_ring *ring, const struct rf_export *x, struct rf_model *m)
{
	const struct rf_model_spec *sp = x->spec;
	float *params = calloc(sp->numel + 1, sizeof(float));
	float *bufs = calloc(sp->buf_numel + 1, sizeof(float));
	struct rf_ckpt_blob *bl = NULL;
	struct rf_ckpt_meta meta = { 0 };
	char path[4200];
	uint64_t h;
	int ret;

	if (m && m->spec != sp) {
		char have[160], want[160];
		rf__ex_spec_say(sp, have, sizeof(have));
		rf__ex_spec_say(m->spec, want, sizeof(want));
		ret = rf__fail(-EINVAL, "export %s: a model %s cannot go into a model %s", x->dir,
			       have, want);
		goto out;
	}
	if (!params || !bufs || !(bl = rf__ex_blobs(sp, params, bufs))) {
		ret = rf__fail(-ENOMEM, "export %s: out of memory", x->dir);
		goto out;
	}
	snprintf(meta.model, sizeof(meta.model), "%s", sp->name);
	snprintf(path, sizeof(path), "%s/%s", x->dir, RF__EX_PARAMS);
	if ((ret = rf_ckpt_load(ring, path, &meta, bl, sp->ntensors + sp->nbufs)) < 0)
		goto out;
	if ((h = rf__ex_hash(sp, params)) != x->param_hash) {
		ret = rf__fail(-EINVAL, "%s: its parameters hash to %016" PRIx64 ", %s/%s names "
			       "%016" PRIx64 ": the two files are not of one export", path, h,
			       x->dir, RF__EX_JSON, x->param_hash);
		goto out;
	}
	if (m && ((ret = rf_tensor_write(m->params, params)) < 0 ||
		  (m->bufs && (ret = rf_tensor_write(m->bufs, bufs)) < 0)))
		rf__fail(ret, "export %s: writing the parameters failed (%d)", x->dir, ret);
out:
	free(bl);
	free(params);
	free(bufs);
	return ret;
}
