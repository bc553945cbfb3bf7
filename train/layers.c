/* train/layers.c -- the models as tables of layers (model.h), and what a table
 * compiles to once: each node's shape, the parameter tensors with their offsets in
 * the parameter block, and the running statistics of the batch norms. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "rf-internal.h"

/* Views start at multiples of 16 floats (64 bytes) in the blocks. */
#define RF__ALIGN_F 16

#define L(kind_, ...) { .kind = RF_LAYER_##kind_, __VA_ARGS__ }

/* The MLP: 784 -> 256 (ReLU) -> 10. */
static const struct rf_layer rf__mlp_t[] = {
	L(FLATTEN),
	L(DENSE, .out = 256, .bias = 1, .wname = "w1", .bname = "b1"),
	L(RELU),
	L(DENSE, .out = 10, .bias = 1, .wname = "w2", .bname = "b2"),
};

/* LeNet as rf-train has always trained it: conv 3x3 20, avgpool 2, conv 5x5 50,
 * avgpool 2, dense 128, dense 10, ReLU after each hidden layer. */
static const struct rf_layer rf__lenet_t[] = {
	L(CONV, .out = 20, .k = 3, .bias = 1, .wname = "c1.w", .bname = "c1.b"),
	L(RELU),
	L(AVGPOOL, .k = 2),
	L(CONV, .out = 50, .k = 5, .bias = 1, .wname = "c2.w", .bname = "c2.b"),
	L(RELU),
	L(AVGPOOL, .k = 2),
	L(FLATTEN),
	L(DENSE, .out = 128, .bias = 1, .wname = "f1.w", .bname = "f1.b"),
	L(RELU),
	L(DENSE, .out = 10, .bias = 1, .wname = "f2.w", .bname = "f2.b"),
};

/* ResNet-18, with the default small-image stem (28x28, 32x32): a 3x3 conv of 64, BN,
 * ReLU, no max pool; four stages of two residual blocks (64, 128, 256, 512 channels),
 * the first block of stages 2-4 with stride 2 and a 1x1 projection (with bias, no BN,
 * on the shortcut); global average pool; dense `classes`. Convolutions followed
 * by a BN have no bias (the BN's mean removes it; its gradient would be rounding
 * noise). With the ImageNet stem the first convolution is 7x7 at stride 2 (pad 3) and
 * a 3x3 max pool at stride 2 follows its ReLU, as torchvision's resnet18. Names are
 * PyTorch's state_dict names of tests/train/ref/make_resnet_reference.py. */
static unsigned rf__resnet_build(struct rf_layer *t, char (*names)[48], int classes,
				 enum rf_stem stem)
{
	unsigned n = 0, nn = 0;
	int node, x, s, b;
	char pre[12];

#define NAME(...) (snprintf(names[nn], sizeof(names[nn]), __VA_ARGS__), names[nn++])
#define ADD(...) (n < RF_MODEL_MAX_TABLE ? (t[n++] = (struct rf_layer)L(__VA_ARGS__), \
						  (int)n) : (int)n)
/* the names first, one after another (in one initializer their order -- each takes
 * the next slot -- would be unspecified) */
#define BN(p, i) ({ const char *w_ = NAME("%sbn%d.weight", p, i),                   \
			       *b_ = NAME("%sbn%d.bias", p, i),                     \
			       *m_ = NAME("%sbn%d.running_mean", p, i),             \
			       *v_ = NAME("%sbn%d.running_var", p, i);              \
		    ADD(BN, .wname = w_, .bname = b_, .rmname = m_, .rvname = v_); })
	if (stem == RF_STEM_IMAGENET)
		ADD(CONV, .out = 64, .k = 7, .stride = 2, .pad = 3, .wname = "conv1.weight");
	else
		ADD(CONV, .out = 64, .k = 3, .stride = 1, .pad = 1, .wname = "conv1.weight");
	BN("", 1);
	node = ADD(RELU);
	if (stem == RF_STEM_IMAGENET)
		node = ADD(MAXPOOL, .k = 3, .stride = 2);
	for (s = 1; s <= 4; s++)
		for (b = 0; b < 2; b++) {
			int c = 64 << (s - 1), st = (s > 1 && b == 0) ? 2 : 1, main;
			snprintf(pre, sizeof(pre), "layer%d.%d.", s, b);
			x = node;
			ADD(CONV, .in = x, .out = c, .k = 3, .stride = st, .pad = 1,
			    .wname = NAME("%sconv1.weight", pre));
			BN(pre, 1);
			ADD(RELU);
			ADD(CONV, .out = c, .k = 3, .stride = 1, .pad = 1,
			    .wname = NAME("%sconv2.weight", pre));
			main = BN(pre, 2);
			if (st != 1) {
				const char *w3 = NAME("%sconv3.weight", pre),
					   *b3 = NAME("%sconv3.bias", pre);
				x = ADD(CONV, .in = x, .out = c, .k = 1, .stride = st, .bias = 1,
					.wname = w3, .bname = b3);
			}
			ADD(ADD, .in = main, .in2 = x);
			node = ADD(RELU);
		}
	ADD(GAP);
	ADD(DENSE, .out = classes, .bias = 1, .wname = "fc.weight", .bname = "fc.bias");
#undef BN
#undef ADD
#undef NAME
	return n;
}

/* ---- compiling a table ------------------------------------------------------------ */

struct rf__model_store {
	struct rf_model_spec spec;
	struct rf_param_spec p[RF_MODEL_MAX_TENSORS], b[RF_MODEL_MAX_BUFFERS];
	struct rf_layer_info info[RF_MODEL_MAX_TABLE];
	struct rf_layer table[RF_MODEL_MAX_TABLE];
	char names[64 * 4][48];    /* ResNet-18's parameter names */
};

#define RF__MAX_SPECS 32
static struct rf__model_store *rf__models[RF__MAX_SPECS];

static int rf__add_tensor(struct rf_param_spec *arr, unsigned *n, unsigned cap, size_t *off,
			  const char *name, int role, int layer, int fan_in, int ndim,
			  int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
	struct rf_param_spec *p;

	if (*n >= cap || !name)
		return -EINVAL;
	p = &arr[(*n)++];
	*p = (struct rf_param_spec){ .name = name, .ndim = ndim, .shape = { d0, d1, d2, d3 },
				     .fan_in = fan_in, .layer = layer, .role = role };
	p->numel = 1;
	for (int d = 0; d < ndim; d++)
		p->numel *= (size_t)p->shape[d];
	p->offset = *off;
	*off += (p->numel + RF__ALIGN_F - 1) / RF__ALIGN_F * RF__ALIGN_F;
	return 0;
}

/* Shapes, tensors and uses of table t (n layers); 0 or -EINVAL for a wrong table. */
static int rf__compile(struct rf__model_store *m, const char *name, const struct rf_layer *t,
		       unsigned n)
{
	struct rf_model_spec *s = &m->spec;
	size_t off = 0, boff = 0;
	unsigned np = 0, nb = 0, pl = 0;

	if (n > RF_MODEL_MAX_TABLE)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		const struct rf_layer *l = &t[i];
		struct rf_layer_info *f = &m->info[i];
		int in = l->in == 0 ? (int)i : l->in < 0 ? 0 : l->in, c, h, w, feat;
		int in2 = l->in2 < 0 ? 0 : l->in2;
		const struct rf_layer_info *src = in ? &m->info[in - 1] : NULL;
		int ret = 0;

		if (in > (int)i || (l->kind == RF_LAYER_ADD && (l->in2 == 0 || in2 > (int)i)))
			return -EINVAL;
		c = src ? src->c : s->in.c;
		h = src ? src->h : s->in.h;
		w = src ? src->w : s->in.w;
		feat = c * (h ? h : 1) * (w ? w : 1);
		*f = (struct rf_layer_info){ .in = in, .in2 = l->kind == RF_LAYER_ADD ? in2 : -1,
					    .c = c, .h = h, .w = w, .pl = -1, .p0 = (int)np, .b0 = -1 };
		switch (l->kind) {
		case RF_LAYER_DENSE:
			if (h)                  /* a 4-D node goes through FLATTEN first */
				return -EINVAL;
			*f = (struct rf_layer_info){ .in = in, .in2 = -1, .c = l->out, .pl = (int)pl,
						    .p0 = (int)np, .b0 = -1 };
			ret = rf__add_tensor(m->p, &np, RF_MODEL_MAX_TENSORS, &off, l->wname,
					     RF_PARAM_WEIGHT, (int)pl, feat, 2, l->out, feat, 0, 0);
			if (ret == 0 && l->bias)
				ret = rf__add_tensor(m->p, &np, RF_MODEL_MAX_TENSORS, &off, l->bname,
						     RF_PARAM_BIAS, (int)pl, feat, 1, l->out, 0, 0, 0);
			break;
		case RF_LAYER_CONV: {
			int st = l->stride > 0 ? l->stride : 1;
			if (!h || l->k < 1 || l->pad < 0 || l->pad >= l->k || h + 2 * l->pad < l->k ||
			    w + 2 * l->pad < l->k)
				return -EINVAL;
			f->c = l->out;
			f->h = (h + 2 * l->pad - l->k) / st + 1;
			f->w = (w + 2 * l->pad - l->k) / st + 1;
			f->pl = (int)pl;
			ret = rf__add_tensor(m->p, &np, RF_MODEL_MAX_TENSORS, &off, l->wname,
					     RF_PARAM_WEIGHT, (int)pl, c * l->k * l->k, 4, l->out, c,
					     l->k, l->k);
			if (ret == 0 && l->bias)
				ret = rf__add_tensor(m->p, &np, RF_MODEL_MAX_TENSORS, &off, l->bname,
						     RF_PARAM_BIAS, (int)pl, c * l->k * l->k, 1, l->out,
						     0, 0, 0);
			break;
		}
		case RF_LAYER_BN:
			if (!h)
				return -EINVAL;
			f->pl = (int)pl;
			f->b0 = (int)nb;
			ret = rf__add_tensor(m->p, &np, RF_MODEL_MAX_TENSORS, &off, l->wname,
					     RF_PARAM_GAMMA, (int)pl, c, 1, c, 0, 0, 0);
			if (ret == 0)
				ret = rf__add_tensor(m->p, &np, RF_MODEL_MAX_TENSORS, &off, l->bname,
						     RF_PARAM_BETA, (int)pl, c, 1, c, 0, 0, 0);
			if (ret == 0)
				ret = rf__add_tensor(m->b, &nb, RF_MODEL_MAX_BUFFERS, &boff, l->rmname,
						     RF_PARAM_RUN_MEAN, (int)pl, c, 1, c, 0, 0, 0);
			if (ret == 0)
				ret = rf__add_tensor(m->b, &nb, RF_MODEL_MAX_BUFFERS, &boff, l->rvname,
						     RF_PARAM_RUN_VAR, (int)pl, c, 1, c, 0, 0, 0);
			break;
		case RF_LAYER_RELU:
			break;
		case RF_LAYER_AVGPOOL:
			if (!h || l->k < 1 || l->k > h || l->k > w)
				return -EINVAL;
			f->h = h / l->k;
			f->w = w / l->k;
			break;
		case RF_LAYER_MAXPOOL: {
			int st = l->stride > 0 ? l->stride : l->k;
			if (!h || l->k < 1 || l->k > h || l->k > w)
				return -EINVAL;
			f->h = (h - l->k) / st + 1;
			f->w = (w - l->k) / st + 1;
			break;
		}
		case RF_LAYER_GAP:
			if (!h)
				return -EINVAL;
			f->h = f->w = 0;
			break;
		case RF_LAYER_ADD: {
			int oc = in2 ? m->info[in2 - 1].c : s->in.c;
			int oh = in2 ? m->info[in2 - 1].h : s->in.h;
			int ow = in2 ? m->info[in2 - 1].w : s->in.w;
			if (oc != c || oh != h || ow != w)
				return -EINVAL;
			break;
		}
		case RF_LAYER_FLATTEN:
			f->c = feat;
			f->h = f->w = 0;
			break;
		default:
			return -EINVAL;
		}
		if (ret < 0)
			return ret;
		f->np = (int)np - f->p0;
		if (f->pl >= 0) {
			if (pl >= RF_MODEL_MAX_LAYERS)
				return -EINVAL;
			s->lfirst[pl++] = (unsigned)f->p0;
		}
		if (in)
			m->info[in - 1].uses++;
		if (f->in2 > 0)
			m->info[f->in2 - 1].uses++;
	}
	if (n == 0 || m->info[n - 1].c != s->in.classes || m->info[n - 1].h)
		return -EINVAL;
	s->lfirst[pl] = np;
	s->name = name;
	s->default_lr = strcmp(name, "lenet") == 0 ? 0.2f : 0.1f;
	s->default_init = strcmp(name, "resnet18") == 0 ? RF_INIT_UNIFORM : RF_INIT_KAIMING;
	s->ntensors = np;
	s->nlayers = pl;
	s->numel = off;
	s->p = m->p;
	s->nbufs = nb;
	s->buf_numel = boff;
	s->b = m->b;
	s->ntable = n;
	s->table = t;
	s->info = m->info;
	return 0;
}

static const char *const rf__names[3] = { "mlp", "lenet", "resnet18" };

const char *rf_model_names(void)
{
	return "mlp|lenet|resnet18";
}

static int rf__same_input(const struct rf_model_input *a, const struct rf_model_input *b)
{
	if (a->c != b->c || a->h != b->h || a->w != b->w || a->classes != b->classes ||
	    a->stem != b->stem || a->norm_channels != b->norm_channels)
		return 0;
	for (unsigned k = 0; k < a->norm_channels; k++)
		if (a->mean[k] != b->mean[k] || a->std[k] != b->std[k])
			return 0;
	return 1;
}

/* Model i's table for input in, into m (its table and names): the row count. */
static unsigned rf__table_of(struct rf__model_store *m, unsigned i, const struct rf_model_input *in)
{
	const struct rf_layer *t = i == 0 ? rf__mlp_t : rf__lenet_t;
	unsigned n = i == 0 ? sizeof(rf__mlp_t) / sizeof(rf__mlp_t[0])
			    : sizeof(rf__lenet_t) / sizeof(rf__lenet_t[0]);

	if (i == 2)
		return rf__resnet_build(m->table, m->names, in->classes, in->stem);
	memcpy(m->table, t, n * sizeof(*t));
	m->table[n - 1].out = in->classes;     /* the last layer: one output per class */
	return n;
}

/* Reactor thread (each table is compiled once, on first use). */
const struct rf_model_spec *rf_model_spec_for(const char *name, const struct rf_model_input *in)
{
	static const struct rf_model_input fmnist = { 1, 28, 28, 10, RF_STEM_SMALL };
	unsigned i, k;

	if (!in)
		in = &fmnist;
	for (i = 0; name && i < 3 && strcmp(rf__names[i], name); i++)
		;
	if (!name || i == 3) {
		rf__fail(-EINVAL, "model %s: expected %s", name ? name : "(none)", rf_model_names());
		return NULL;
	}
	if (in->c < 1 || in->c > 4096 || in->h < 1 || in->h > 4096 || in->w < 1 ||
	    in->w > 4096 || in->classes < 2 || in->classes > RF_MODEL_MAX_CLASSES ||
	    (in->stem != RF_STEM_SMALL && (i != 2 || in->stem != RF_STEM_IMAGENET))) {
		rf__fail(-EINVAL, "model %s: input (%d, %d, %d), %d classes, stem %d: expected "
			 "1..4096 on each side, 2..%d classes, and the ImageNet stem for "
			 "resnet18 only", name, in->c, in->h, in->w, in->classes, (int)in->stem,
			 RF_MODEL_MAX_CLASSES);
		return NULL;
	}
	if (in->norm_channels && (in->norm_channels != (unsigned)in->c ||
				  in->norm_channels > RF_MODEL_NORM_MAX)) {
		rf__fail(-EINVAL, "model %s: a mean and std for %u channels, and an input of %d: "
			 "expected one per input channel (at most %d)", name, in->norm_channels,
			 in->c, RF_MODEL_NORM_MAX);
		return NULL;
	}
	for (k = 0; k < in->norm_channels; k++)
		if (!isfinite(in->mean[k]) || !isfinite(in->std[k]) || in->std[k] == 0.0f) {
			rf__fail(-EINVAL, "model %s: channel %u: mean %g, std %g: expected finite "
				 "numbers and a nonzero std", name, k, (double)in->mean[k],
				 (double)in->std[k]);
			return NULL;
		}
	for (k = 0; k < RF__MAX_SPECS && rf__models[k]; k++)
		if (!strcmp(rf__models[k]->spec.name, rf__names[i]) &&
		    rf__same_input(&rf__models[k]->spec.in, in))
			return &rf__models[k]->spec;
	if (k == RF__MAX_SPECS) {
		rf__fail(-ENOSPC, "model %s: %d distinct model shapes made already", name,
			 RF__MAX_SPECS);
		return NULL;
	}
	struct rf__model_store *m = calloc(1, sizeof(*m));
	if (!m) {
		rf__fail(-ENOMEM, "model %s: out of memory", name);
		return NULL;
	}
	m->spec.in = *in;
	if (rf__compile(m, rf__names[i], m->table, rf__table_of(m, i, in)) < 0) {
		rf__fail(-EINVAL, "model %s: its layers cannot take an input of (%d, %d, %d) "
			 "(too small for its convolutions and pooling)", name, in->c, in->h, in->w);
		free(m);
		return NULL;
	}
	rf__models[k] = m;
	return &m->spec;
}

const struct rf_model_spec *rf_model_spec(const char *name)
{
	int i;

	/* an unknown name: NULL, rf_last_error() untouched (callers say what they expect) */
	for (i = 0; name && i < 3 && strcmp(rf__names[i], name); i++)
		;
	return name && i < 3 ? rf_model_spec_for(name, NULL) : NULL;
}
