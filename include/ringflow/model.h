/* ringflow/model.h -- the models of rf-train (an MLP, LeNet, ResNet-18), each a table
 * of layers, as replicas on a device: parameters, init, forward, backward and the
 * optimiser's update, all pushed as engine ops. Nothing waits. Reactor thread only.
 * Functions return 0 or -errno. The tables, the parameter layout and the loss:
 * train/README.md.
 */
#ifndef RINGFLOW_MODEL_H
#define RINGFLOW_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "engine.h"
#include "device.h"
#include "tensor.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RF_MODEL_MAX_TENSORS 128 /* parameter tensors */
#define RF_MODEL_MAX_LAYERS 64   /* layers with parameters */
#define RF_MODEL_MAX_BUFFERS 64  /* running statistics */
#define RF_MODEL_MAX_TABLE 96    /* layers of any kind */

/* One layer of a model's table. A layer reads one node (two for ADD) and makes the
 * next one: node 0 is the model's input (n, c, h, w) (spec->in: Fashion-MNIST's
 * (n, 1, 28, 28) by default), node i+1 layer i's output. */
enum rf_layer_kind {
	RF_LAYER_DENSE,   /* y (n, out) = x (n, features) * w^T + b; w (out, features) */
	RF_LAYER_CONV,    /* conv2d, w (out, c, k, k), b (out) when bias, stride, pad */
	RF_LAYER_BN,      /* batch norm over channels: gamma, beta; running mean, var */
	RF_LAYER_RELU,
	RF_LAYER_AVGPOOL, /* k x k at stride k */
	RF_LAYER_MAXPOOL, /* k x k at stride `stride` */
	RF_LAYER_GAP,     /* global average pool: (n, c, h, w) -> (n, c) */
	RF_LAYER_ADD,     /* y = node in + node in2 (a residual connection) */
	RF_LAYER_FLATTEN, /* (n, c, h, w) -> (n, c*h*w) */
};

#define RF_NODE_INPUT (-1)            /* rf_layer.in / in2: the model's input (node 0) */
struct rf_layer {
	enum rf_layer_kind kind;
	int in, in2;                  /* input nodes: 0 the previous layer's output (in
				       * only), k > 0 node k, RF_NODE_INPUT node 0 */
	int out, k, stride, pad, bias;
	const char *wname, *bname;    /* parameter names (weight / gamma, bias / beta) */
	const char *rmname, *rvname;  /* BN: running statistics' names */
};

/* What a table's layer became: its output node's shape and its tensors. */
struct rf_layer_info {
	int in, in2;                  /* resolved input nodes (in2 -1: none) */
	int c, h, w;                  /* output (n, c, h, w); a 2-D output has h = w = 0 */
	int pl;                       /* index among the layers with parameters, or -1 */
	int p0, np;                   /* its parameter tensors p0 .. p0+np-1 */
	int b0;                       /* BN: its running mean (b0) and var (b0+1) */
	int uses;                     /* layers that read its output node */
};

enum rf_param_role { RF_PARAM_WEIGHT = 0, RF_PARAM_BIAS, RF_PARAM_GAMMA, RF_PARAM_BETA,
		     RF_PARAM_RUN_MEAN, RF_PARAM_RUN_VAR };

struct rf_param_spec {
	const char *name;             /* "w1", "c1.w", "layer1.0.bn1.weight" */
	int ndim;
	int64_t shape[4];
	int fan_in;                   /* of its layer (a bias uses its weight's) */
	int layer;                    /* layer with parameters it belongs to */
	size_t offset, numel;         /* in floats, within the parameter block */
	int role;                     /* enum rf_param_role */
};

/* What a model is made for: its input (n, c, h, w), its classes and, for ResNet-18, its
 * stem. The default (rf_model_spec): Fashion-MNIST's (1, 28, 28), 10 classes, the
 * small-image stem. */
enum rf_stem {
	RF_STEM_SMALL = 0,    /* ResNet-18: a 3x3 convolution of 64, stride 1, no pooling
			       * (for small images: 28x28, 32x32) */
	RF_STEM_IMAGENET = 1  /* ResNet-18: torchvision's 7x7 convolution of 64 at stride 2,
			       * pad 3, then 3x3 max pooling at stride 2 (unpadded here: 55x55
			       * after it at 224 where torchvision pads to 56) */
};
#define RF_MODEL_NORM_MAX 4  /* channels rf_model_input's mean and std cover */
#define RF_MODEL_MAX_CLASSES 100000 /* the most classes a model's last layer has */

struct rf_model_input {
	int c, h, w;                  /* 1..4096 each */
	int classes;                  /* 2..RF_MODEL_MAX_CLASSES */
	enum rf_stem stem;
	/* How u8 pixels become the input: x = (u8 / 255 - mean[ch]) / std[ch] for channel
	 * ch of c (norm_channels = c, at most RF_MODEL_NORM_MAX; every std finite and
	 * nonzero), or x = u8 / 255 (norm_channels 0). Part of the model an export
	 * records: what it was trained on is what it must be fed. */
	unsigned norm_channels;
	float mean[RF_MODEL_NORM_MAX], std[RF_MODEL_NORM_MAX];
};

struct rf_model_spec {
	const char *name;             /* "mlp", "lenet", "resnet18" */
	struct rf_model_input in;     /* its input and classes */
	float default_lr;             /* SGD's, at batch 256: 0.1, 0.2, 0.1 */
	unsigned ntensors;            /* parameter tensors */
	unsigned nlayers;             /* layers with parameters */
	size_t numel;                 /* floats of all parameters */
	const struct rf_param_spec *p;
	unsigned nbufs;               /* running statistics (not trained, but saved) */
	size_t buf_numel;
	const struct rf_param_spec *b;
	unsigned ntable;              /* the layer table */
	const struct rf_layer *table;
	const struct rf_layer_info *info;
	unsigned lfirst[RF_MODEL_MAX_LAYERS + 1]; /* layer l's tensors: lfirst[l] ..
						   * lfirst[l+1]-1 */
	int default_init;             /* enum rf_init: kaiming, kaiming, uniform */
};

/* The spec of "mlp", "lenet" or "resnet18" for Fashion-MNIST ((1, 28, 28), 10 classes);
 * NULL for another name. Static storage. */
const struct rf_model_spec *rf_model_spec(const char *name);
/* The spec of model `name` for input in (NULL: the default above): the last layer has
 * in->classes outputs, ResNet-18 takes in->stem (LeNet and the MLP have the small
 * one only). NULL, with a message in rf_last_error(), for another name, an input
 * outside the ranges, a shape the model's layers cannot take (LeNet below 12x12) or
 * no memory. Specs live until the process ends (at most 32 distinct ones). Reactor
 * thread only. */
const struct rf_model_spec *rf_model_spec_for(const char *name, const struct rf_model_input *in);
/* The names rf_model_spec takes, separated by '|' (for messages). */
const char *rf_model_names(void);

enum rf_init {
	RF_INIT_DEFAULT = 0, /* the model's (spec->default_init): kaiming for the MLP and
			      * LeNet, uniform for ResNet-18 */
	RF_INIT_UNIFORM = 1, /* PyTorch's default for Linear/Conv2d: weights and biases
			      * uniform in +-1/sqrt(fan_in). ResNet-18's: with momentum 0.9
			      * and lr 0.05 kaiming diverges in its first steps (loss 3.3 ->
			      * 8.7 in 8 steps; PyTorch's ResNet so initialised: 4.7 -> 17),
			      * this one does not (2.36 -> 1.48) */
	RF_INIT_NORMAL = 2,  /* weights N(0, 0.01^2), biases 0 */
	RF_INIT_XAVIER = 3,  /* Glorot & Bengio 2010, PyTorch's xavier_uniform_: weights uniform
			      * in +-sqrt(6/(fan_in + fan_out)), biases 0 */
	RF_INIT_KAIMING = 4, /* He et al. 2015, for ReLU networks: weights uniform in
			      * +-sqrt(6/fan_in) (variance 2/fan_in), biases 0. The MLP's
			      * and LeNet's: over seeds 0-4, other settings the same, it ends
			      * LeNet's 10 epochs ~2 points above PyTorch's default (README) */
};

struct rf_model {
	const struct rf_model_spec *spec;
	struct rf_device *dev;        /* borrowed */
	struct rf_stream *s;          /* compute stream (borrowed; NULL: the device's first) */
	struct rf_stream *s2;         /* optional second stream (borrowed; NULL: s) for the
				       * weight gradients and their SGD, which then run
				       * beside the data gradients on s */
	struct rf_tensor *params;     /* (numel) f32 block: all parameters */
	struct rf_tensor *grads;      /* (numel) f32 block: all gradients */
	struct rf_tensor *p[RF_MODEL_MAX_TENSORS]; /* views of params, spec order */
	struct rf_tensor *g[RF_MODEL_MAX_TENSORS]; /* views of grads, same shapes */
	struct rf_tensor *mom;        /* (numel) f32 block: momentum buffers, or NULL
				       * (rf_model_momentum makes it, zeroed) */
	struct rf_tensor *v[RF_MODEL_MAX_TENSORS]; /* views of mom, same shapes */
	struct rf_tensor *mom2;       /* AdamW's second moments (exp_avg_sq; mom holds
				       * exp_avg), or NULL */
	struct rf_tensor *v2[RF_MODEL_MAX_TENSORS]; /* views of mom2 */
	struct rf_tensor *bufs;       /* (buf_numel) f32 block: running statistics, or NULL */
	struct rf_tensor *b[RF_MODEL_MAX_BUFFERS]; /* views of bufs, spec order */
	int keep_acts;                /* set while an iteration is captured (engine.h):
				       * rf_model_forward's acts are kept -- rf_model_backward
				       * then frees neither them nor the gradients it is done
				       * with (each an engine deletion, which a capture
				       * refuses) -- and, on an error, handed to the caller
				       * through *acts; the caller frees them with
				       * rf_model_acts_destroy once the capture has ended */
	/* The convolutional part's compute format (rf_model_set_format): its 4-D
	 * activations in this dtype and layout; the parameters, their gradients, the
	 * dense layers and the loss stay f32 row-major (mixed precision). */
	enum rf_tdtype act_dtype;     /* RF_F32 unless set */
	enum rf_layout act_layout;    /* RF_LAYOUT_ROWMAJOR unless set */
	/* private: the convolutions' parameters and gradients in the compute format
	 * (NULL: p[k] and g[k] themselves), refreshed from p[k] by every forward and
	 * converted into g[k] by the backward */
	struct rf_tensor *q[RF_MODEL_MAX_TENSORS];
	struct rf_tensor *gq[RF_MODEL_MAX_TENSORS];
};

/* The optimiser, torch.optim.SGD's: momentum 0 and weight_decay 0 is plain SGD
 * (rf_sgd); momentum > 0 keeps a buffer per parameter (rf_sgd_momentum). */
struct rf_optim {
	float lr, momentum, weight_decay;
	int nesterov;
	int adamw;                 /* 1: torch.optim.AdamW (ops.h rf_adamw): lr, weight_decay,
				    * betas, eps and step below; momentum unused */
	double beta1, beta2, eps;
	uint64_t step;             /* AdamW: the step this update makes (1-based) */
	const struct rf_live_hyper *live; /* non-NULL: lr and step are read from *live when
					   * the updates run (ops.h, the _live updates: a
					   * captured graph's arguments), ordered by live_var */
	struct rf_var *live_var;
};

/* One iteration's activations, made by rf_model_forward (train != 0) and consumed by
 * rf_model_backward (train/net.c). Tensors are allocated per call from the device's
 * caching allocator, so the last batch may be smaller and two iterations in flight do
 * not share buffers; freeing them is an engine deletion ordered after their last
 * reader. */
struct rf_model_acts;
/* After the forward: the gradient of the loss with respect to the logits (n, classes). */
struct rf_tensor *rf_model_acts_dlogits(struct rf_model_acts *acts);

/* Called by rf_model_backward right after the ops that compute the gradients of layer
 * `layer`'s tensors (g[spec->lfirst[layer]] .. g[spec->lfirst[layer + 1] - 1]) AND
 * every op that reads that layer's
 * weights have been pushed: the hook may push an update of those weights. Layers come
 * last to first. Returns 0 or -errno (then backward stops and returns it). */
typedef int (*rf_grad_hook)(void *ctx, struct rf_model *m, unsigned layer);

/* A replica of spec on device d with compute stream s (NULL: the device's stream 0).
 * Parameters and gradients are allocated but not initialised. *out owned by the
 * caller: rf_model_destroy. */
int rf_model_create(struct rf_model **out, const struct rf_model_spec *spec,
		    struct rf_device *d, struct rf_stream *s, const char *tag);
/* Frees the tensors (deletions pushed after their last ops) and m. NULL ignored. */
void rf_model_destroy(struct rf_model *m);
/* The compute format of m's convolutional part: its 4-D activations (and the
 * convolutions' weights, as copies of the f32 masters) in dtype dt (a float one) and
 * layout (RF_LAYOUT_NHWC: channels last, as cuDNN's fast kernels want them), converted
 * once at the model's edges -- the input, and where the 4-D part ends (flatten, global
 * pooling): the dense layers, the loss, the parameters, their gradients and the
 * optimizer state stay f32 row-major. RF_BF16 is mixed precision. f32 row-major (the
 * default) adds nothing. Between iterations; the device must run the model's ops so
 * (rf_device_supports). Returns 0, -EINVAL or -ENOTSUP (message in rf_last_error()). */
int rf_model_set_format(struct rf_model *m, enum rf_tdtype dt, enum rf_layout layout);

/* Push the initialisation of every parameter from g (borrowed), in spec order. */
int rf_model_init(struct rf_model *m, struct rf_prng *g, enum rf_init init);

/* Forward pass on x (n, c, h, w) f32 of spec->in ((n, 1, 28, 28) or (n, 784) by
 * default; any shape of n * c * h * w elements) with labels y (n) i32, both on
 * m's device (borrowed; x may be reshaped). loss (1) f32 / correct (1) i32 or NULL get
 * the SUM of the per-row losses and the number of rows whose argmax is the label
 * (overwritten, on m's device). train != 0: *acts (owned by the caller until
 * rf_model_backward or rf_model_acts_destroy) keeps what the backward pass needs and the
 * logits hold dlogits; train == 0: acts may be NULL and nothing is kept. */
int rf_model_forward(struct rf_model *m, struct rf_tensor *x, struct rf_tensor *y,
		     struct rf_tensor *loss, struct rf_tensor *correct, int train,
		     struct rf_model_acts **acts);
/* Backward pass from acts (consumed and freed, also on error): writes every g[k]
 * (overwritten). hook (may be NULL) is called once per layer, last layer first. */
int rf_model_backward(struct rf_model *m, struct rf_model_acts *acts, rf_grad_hook hook,
		      void *ctx);
/* Free acts without a backward pass (a training forward whose backward will not run):
 * the deletions of its tensors are pushed after their last readers, and a reshaped
 * input x gets its shape back. NULL is ignored. */
void rf_model_acts_destroy(struct rf_model_acts *acts);

/* Push w -= lr*g (rf_sgd: plain SGD) for the weight and bias of one layer. */
int rf_model_sgd_layer(struct rf_model *m, unsigned layer, float lr);
/* Push the update of o for the weight and bias of one layer (on the weight-gradient
 * stream), or for parameter tensor k alone on stream s. With momentum the buffers are
 * made (zeroed) on first use. */
int rf_model_update_layer(struct rf_model *m, unsigned layer, const struct rf_optim *o);
/* Push the update of o for parameter tensor k alone (spec order; k < spec->ntensors, else
 * -EINVAL) on stream s, making o's state first if it is not there (rf_model_optim_state). */
int rf_model_update(struct rf_model *m, unsigned k, const struct rf_optim *o,
		    struct rf_stream *s);
/* The update of o for every parameter at once (on the weight-gradient stream): one
 * op over the parameter, gradient and state blocks -- one kernel instead of one per
 * tensor, the same bits (the updates are elementwise, with the same hyperparameters
 * for every tensor). */
int rf_model_update_all(struct rf_model *m, const struct rf_optim *o);
/* Make the momentum buffers (zeroed) if there are none: before loading saved ones. */
int rf_model_momentum(struct rf_model *m);
/* Make AdamW's state (zeroed) where it is missing: the first-moment block (the momentum
 * buffers, if there are some already) and the second-moment block. 0 or -errno. */
int rf_model_moments(struct rf_model *m);
/* Make the state o's update needs, if it is not there yet (rf_model_update does so
 * itself on first use): AdamW's moments, momentum's buffers, nothing for plain SGD. */
int rf_model_optim_state(struct rf_model *m, const struct rf_optim *o);

#ifdef __cplusplus
}
#endif
#endif
