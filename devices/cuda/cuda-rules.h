/* devices/cuda/cuda-rules.h -- every rule that decides what runs on a CUDA device, as
 * plain C that needs neither CUDA nor a GPU: which ops the backend runs (in which
 * dtypes and layouts), which path a convolution takes when cuDNN has or has not a plan
 * for it, which formats the device's compute capability allows, how a stream's
 * completions reach the reactor (the counter's mode, the waker), what a CUDA graph may
 * capture and when a captured graph must be captured again. cuda-compute.c,
 * cuda-graph.c, cudnn.c, cuda-counter.c and cuda.c decide through these; the answers
 * only a GPU or cuDNN can give come in as arguments, so tests/devices/test-cuda-rules.c
 * and tests/train/test-train-cuda-ops.c answer them on machines without a GPU. Built in
 * every configuration (beside the stub backend too). Internal to devices/. */
#ifndef RF_CUDA_RULES_H
#define RF_CUDA_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "../backend-impl.h"
#include "plan-cache.h"

/* ---- what the backend runs ----------------------------------------------------------- */

/* 1 when a CUDA device runs op, else 0 and why says which operand breaks which rule.
 * dnn: cuDNN is loaded (convolutions, batch norm, max and global pooling go through
 * it); dnn_why: why not, for the message (may be NULL). */
int rf__cuda_rule_supports(const struct rf__op *op, int dnn, const char *dnn_why, char *why,
			   size_t len);

/* The device's compute capability (major * 10 + minor; 0: unknown, nothing refused)
 * allows op's formats: bf16 operands need 8.0 (Ampere) or later -- cuBLAS's GemmEx
 * and cuDNN refuse them before, at run time, so a bf16 model on a Turing GPU (7.5)
 * would fail at its first step instead of at push. 1, or 0 and why names the operand. */
int rf__cuda_rule_cc(const struct rf__op *op, int cc, char *why, size_t len);

/* A device's precision (enum rf_precision) on its compute capability (as above): bf16
 * needs 8.0. 1, or 0 and why says so. */
int rf__cuda_rule_precision(int precision, int cc, char *why, size_t len);

/* ---- how a stream's completions reach the reactor ----------------------------------- */

/* How a stream's completion counter is written (cuda-counter.c). */
enum { RF__CTR_OFF, RF__CTR_STREAM, RF__CTR_KERNEL };

/* RF_CUDA_COUNTER's value: -1 unset or empty (the stream's choice), RF__CTR_STREAM,
 * RF__CTR_KERNEL or RF__CTR_OFF; -2 anything else. */
int rf__cuda_env_counter(const char *v);

/* The counter's mode: want (rf__cuda_env_counter's, not -2), have_wv (the driver has
 * cuStreamWriteValue64), trial_ok (a trial write of it succeeded: asked only when
 * have_wv). Stream writes where they work, else the one-thread kernel; -ENOTSUP when
 * stream was asked for and cannot be had. */
int rf__cuda_counter_mode(int want, int have_wv, int trial_ok);

/* RF_CUDA_WAKE's value: 1 unset, empty or "waker" (a waker thread beside the stream
 * when it can be had), 0 "hostfn" (host functions wake the reactor), -1 anything else. */
int rf__cuda_env_wake(const char *v);

/* The three from the environment, each 0 with its value (as the rules above say; the
 * waker's spin in microseconds), or -EINVAL with the message set naming the variable. */
int rf__cuda_env_counter_get(int *want);
int rf__cuda_env_wake_get(int *wake);
int rf__cuda_env_spin_get(uint64_t *us);

/* All three, checked at a device's open before a device is looked for (a typo is
 * reported on any machine): 0, or -EINVAL with the message set. */
int rf__cuda_env_check(void);

/* ---- a GEMM's cuBLAS call ------------------------------------------------------------ */

/* How a GEMM the backend runs (A and B of one dtype, C that or f32) goes to cuBLAS
 * (enum rf__kc_gemm_call, kernels-cuda-impl.h), in TF32 math (tf32 1) or full fp32:
 * every operand f32 -> cublasSgemm in fp32, CUBLAS_COMPUTE_32F_FAST_TF32 in tf32;
 * 16-bit inputs -> CUBLAS_COMPUTE_32F in either (cublasGemmEx takes FAST_TF32 with f32
 * operands only: a bf16 GEMM at the default precision was CUBLAS_STATUS_NOT_SUPPORTED). */
int rf__cuda_gemm_call(int adt, int bdt, int cdt, int tf32);

/* ---- batch norm's path --------------------------------------------------------------- */

/* 1 when batch-norm op (any of the six, with or without its ReLU) runs our kernels
 * (kernels_cuda_norm.cu): its data tensors are NHWC, which cuDNN's batch norm reads
 * with a stride of C (76 % of a ResNet-18 step on an H200). 0: cuDNN's (NCHW, whose
 * planes it reads contiguously), or op is no batch norm. */
int rf__cuda_bn_ours(const struct rf__op *op);
/* The device workspace op takes on that path: our kernels' partial sums
 * (rf__kc_bn_nhwc_ws of its n*h*w rows and c channels; the fused backward's ReLU mask is
 * read in place, no copy of dy), else 0. */
size_t rf__cuda_bn_ws(const struct rf__op *op);

/* 1 when convolution op's bias gradient runs our column sum (kernels_cuda_norm.cu):
 * a filter gradient with a db, its dy NHWC (cuDNN's NHWC bias gradient took 192 us a
 * call on an H200; our bf16/f16 kernel read NHWC with a stride of C). 0: cuDNN's
 * (f32 NCHW) or ours by planes (bf16/f16 NCHW), or no bias gradient. */
int rf__cuda_bias_grad_ours(const struct rf__op *op);
/* Its workspace then (rf__kc_colsum_nhwc_ws of n*oh*ow rows and o channels), else 0. */
size_t rf__cuda_bias_grad_ws(const struct rf__op *op);

/* ---- a convolution's path ------------------------------------------------------------ */

enum rf__conv_path {
	RF__CONV_DNN,        /* cuDNN's plan */
	RF__CONV_IM2COL,     /* im2col + cuBLAS: f32 row-major operands only */
	RF__CONV_REFUSE,     /* neither: an error that names the op, shape and format */
};

/* The path of convolution op. dnn: cuDNN is loaded; dnn_no: cuDNN was asked and has no
 * plan that runs it (no deterministic algorithm within the workspace budget, the
 * chosen one refused at run time, or a shape cuDNN takes not: an empty dimension);
 * fallback_ok: the device takes a fallback path (im2col where cuDNN is loaded but has
 * no plan; rf_device_opts.no_fallback, RF_CUDA_ALLOW_FALLBACK). im2col computes f32
 * row-major tensors only: a bf16, f16 or NHWC convolution cuDNN cannot run is refused,
 * never computed on data it misreads. RF__CONV_REFUSE leaves the reason in why. */
enum rf__conv_path rf__cuda_conv_path(const struct rf__op *op, int dnn, int dnn_no,
				      int fallback_ok, char *why, size_t len);

/* 1 when convolution op has an empty dimension (batch, channels in or out, height or
 * width): cuDNN takes none, im2col computes what there is (the bias, zeroed
 * gradients); that is no fallback -- not counted, and taken on a device that takes
 * none (its f32 row-major operands; else refused as any). */
int rf__cuda_conv_empty(const struct rf__op *op);

/* What a convolution's cuDNN call becomes: ran -> 0; refused (a status whose
 * category is BAD_PARAM or NOT_SUPPORTED: this algorithm will not run this call, in
 * any math -- the heuristics can rank one that then refuses, as with beta = 1)
 * -> -ENOTSUP, the plan dropped and rf__cuda_conv_path deciding between im2col and a
 * refusal that names the op; anything else (an execution failure) -> -EIO. Before,
 * only a plan borrowed from another math type fell back; a tf32 refusal failed the
 * op (-EIO) where im2col could have run it. */
int rf__cuda_dnn_outcome(int ran, int refused);

/* Whether a destroyed stream's CUDA state (stream, handles, workspaces) is freed (1) or
 * left allocated, leaked (0): after its own watchdog timeout, freed only once nothing
 * is queued on the stuck GPU for it (host functions owed, a waker blocked in the
 * driver); after another stream of its GPU hung (device_hung), never -- cudnnDestroy
 * and cudaFree synchronise the whole device and would wait for the stuck one for good. */
int rf__cuda_stream_frees(int own_timeout, int device_hung, unsigned owed, int waker_joined);

/* 1 when im2col + cuBLAS computes op's operands as they are (every float operand f32,
 * every 4-D one row-major). */
int rf__cuda_im2col_ok(const struct rf__op *op);

/* One entry of cuDNN's heuristic list of a convolution's algorithms (any direction's),
 * read into plain C by cudnn.c. */
struct rf__algo_perf {
	int algo;
	int usable;          /* its status CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC */
	int math;            /* its mathType as RF__PLAN_MATH_* (plan-cache.h) */
	size_t memory;       /* the workspace it wants */
};

/* The math type a convolution's descriptor asks of cuDNN, so the one its heuristics
 * rank under (RF__PLAN_MATH_*), as PyTorch asks: f32 data in fp32 FMA, f32 data in
 * tf32 the default math (TF32 tensor cores allowed), bf16 and f16 data tensor-op math.
 * Under the default math cuDNN does not seek tensor cores for bf16 and f16: on an H200
 * (cuDNN 9.19) its first entries then were FMA engines on f32 NCHW copies and a direct
 * data-gradient kernel of 23 ms a call -- a ResNet-18 bf16 step 60x its tf32 one. */
int rf__cuda_conv_math(enum rf_tdtype dt, int tf32);

/* The first entry of a heuristic list (perf, n entries) that is usable and whose
 * workspace fits budget, or -1; want: rf__cuda_conv_math's. FMA: an FMA entry, else
 * (pass 2, *other = 1) an algorithm reported only with another math type, to run in FMA
 * math -- as PyTorch does with TF32 off (filtering on FMA alone could leave nothing
 * where cuDNN reports its FP32 algorithms as CUDNN_DEFAULT_MATH). DEFAULT (tf32): a
 * non-FMA entry first, then any. TENSOR (bf16, f16): a tensor-op entry first, then any
 * but FMA ones, then any. */
int rf__cuda_pick_algo(const struct rf__algo_perf *perf, int n, size_t budget, int want,
		       int *other);

/* The math the chosen entry runs in: FMA when FMA is wanted (even for another math
 * type's entry), else the entry's own, but never the default math for bf16 and f16
 * data (want TENSOR): tensor-op math there. */
int rf__cuda_run_math(int want, int entry_math);

/* ---- CUDA graphs --------------------------------------------------------------------- */

/* What capturing an op depends on: never (it reads host state when it runs: a live
 * learning rate, a PRNG's counter, a host function), always (kernels and cuBLAS on
 * pointers fixed at push), once cuDNN's handle and the op's plan exist and the plan
 * fits the stream's workspace as it is (a capture must not choose or allocate), or
 * when both ends of a copy are device or page-locked memory. */
enum rf__cap_need { RF__CAP_NEVER, RF__CAP_ALWAYS, RF__CAP_DNN_READY, RF__CAP_PINNED };
enum rf__cap_need rf__cuda_cap_need(const struct rf__op *op, int dnn);

/* A captured graph bakes in the stream's cuDNN workspace pointer. The stream counts
 * its workspace's generations (each growth frees the old buffer once the op that grew
 * it is done); a graph recorded at generation `rec` may be replayed only while the
 * stream is still at it. */
static inline int rf__cg_replayable(uint64_t rec, uint64_t now)
{
	return rec == now;
}

#endif
