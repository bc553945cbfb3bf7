/* ringflow/device.h -- compute devices, CPU (OpenBLAS + worker streams) and CUDA, each
 * run by a backend: opening and closing them, what they run, their streams, memory
 * and pinned staging arenas.
 * A device belongs to one engine and is used on that engine's reactor thread; close
 * it after freeing its tensors and before rf_engine_destroy. Streams, memory and the
 * OpenBLAS threading policy: devices/README.md.
 */
#ifndef RINGFLOW_DEVICE_H
#define RINGFLOW_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rf_device;

enum rf_device_kind { RF_DEVICE_CPU = 0, RF_DEVICE_CUDA = 1 };

/* The math of a device's float products (convolutions and GEMMs), as PyTorch users know
 * it. A seed gives the same bits run after run in every precision on the same device.
 * The CPU computes in full float32 whatever is asked (its precision reads fp32). */
enum rf_precision {
	RF_PRECISION_DEFAULT = 0,  /* the device's: tf32 on CUDA, fp32 on the CPU */
	RF_PRECISION_FP32,         /* full float32 products (FMA only): bit-comparisons with
				    * the CPU */
	RF_PRECISION_TF32,         /* tensor cores on TF32 inputs, float32 accumulation
				    * (PyTorch's default for cuDNN convolutions) */
	RF_PRECISION_BF16,         /* mixed precision: the model's activations in bf16 on
				    * tensor cores; weights, optimizer state and the loss in
				    * float32 (rf_model_create reads it); f32 products as tf32 */
};
/* "fp32", "tf32", "bf16", "default" (static) */
const char *rf_precision_name(enum rf_precision p);

struct rf_cpu_opts {
	unsigned streams;     /* compute worker streams; 0: 1 */
	int blas_threads;     /* OpenBLAS threads; 0: policy above; -1: leave as is */
	unsigned queue;       /* worker queue capacity (ops); 0: core's default */
};

struct rf_cuda_opts {
	unsigned streams;     /* compute streams; 0: 1 */
	unsigned watchdog_ms; /* period of the stuck-stream check; 0: 2000 (RF_CUDA_WATCHDOG_MS) */
	unsigned hang_ms;     /* fail pending ops with -ETIMEDOUT after this long without
			       * progress on a live context; 0: 600000 */
	enum rf_precision precision; /* 0: tf32 */
};

/* Open the CPU device on engine e (borrowed; must outlive the device). opts may be
 * NULL. Several CPU devices may be open at once (data parallel on one host): they
 * share host memory, so CPU ops accept tensors of any CPU device. *out is owned by
 * the caller: rf_device_close. Returns 0 or -errno. */
int rf_cpu_open(struct rf_engine *e, const struct rf_cpu_opts *opts, struct rf_device **out);
/* Which kernels the CPU device runs, for reports: ringflow's own ("avx512" where the CPU
 * has it and RF_KERNELS_NO_AVX512 is not set, else "portable") and OpenBLAS's core
 * ("OpenBLAS Haswell", as its OPENBLAS_CORETYPE or its own detection chose; "no
 * OpenBLAS" without it). Into buf (len bytes); returns buf. */
const char *rf_cpu_kernels(char *buf, size_t len);

/* Number of usable CUDA devices: 0 in a build without CUDA, and when
 * cudaGetDeviceCount fails (no driver, no GPU). Never negative. */
int rf_cuda_count(void);

/* 1 when CUDA devices run convolutions, batch norm and pooling through cuDNN: built
 * with it (meson -Dcudnn), libcudnn.so.9 loads (the first call opens it) and RF_CUDNN
 * is not "0". Else 0 and *why (if why; static text) says which; CUDA devices then
 * convolve by im2col and refuse batch norm, max and global average pooling. */
int rf_cuda_dnn_available(const char **why);

/* Open CUDA device `ordinal`. -ENODEV if it does not exist (or no CUDA), -ENOTSUP in
 * a build without CUDA, or another -errno. opts may be NULL. */
int rf_cuda_open(struct rf_engine *e, int ordinal, const struct rf_cuda_opts *opts,
		 struct rf_device **out);

/* The cudaStream_t of a CUDA device's stream s (as void *), or NULL for any other
 * stream: for libraries that launch their own work into it (NCCL). Work launched
 * there by an op's fn, which runs when the op is dispatched, is ordered like the
 * stream's kernels and completes the op with them. */
void *rf_cuda_stream_handle(const struct rf_stream *s);

/* How the reactor learns that a CUDA stream's work finished (static text), or NULL
 * for a stream that is not a CUDA device's: "counter (cuStreamWriteValue64)" or
 * "counter (kernel)" -- the stream writes a counter into pinned host memory that the
 * reactor reads at every turn, and a host function wakes it when it sleeps -- or
 * "host function" (the counter is turned off: RF_CUDA_COUNTER=off, or its memory could
 * not be had). RF_CUDA_COUNTER=stream|kernel|off chooses; default: the stream write
 * where the device takes it, else the kernel. */
const char *rf_cuda_completion(const struct rf_stream *s);

/* Open by name: "cpu", "cpu:N" (N only names it), "cuda", "cuda:N". */
int rf_device_open(struct rf_engine *e, const char *spec, struct rf_device **out);

/* Options of any kind of device, for rf_device_open_opts; zero means the default. */
struct rf_device_opts {
	unsigned streams;     /* compute streams; 0: 1 */
	unsigned queue;       /* CPU: worker queue capacity (ops); 0: core's default */
	int blas_threads;     /* CPU: OpenBLAS threads; 0: the policy; -1: leave as is */
	unsigned watchdog_ms; /* CUDA: as rf_cuda_opts */
	unsigned hang_ms;     /* CUDA: as rf_cuda_opts */
	size_t mem_limit;     /* bytes the device's caching allocator may hold (0: what the
			       * backend gives). An allocation that finds none waits for
			       * the work in flight to give memory back, then fails. */
	enum rf_precision precision; /* 0: the device's default (above) */
	int no_fallback;      /* 1: an op the device's fast library cannot run fails with a
			       * message instead of taking a slower fallback path (CUDA: a
			       * convolution cuDNN has no deterministic plan for, which
			       * im2col + cuBLAS would run; RF_CUDA_ALLOW_FALLBACK=1 allows
			       * it all the same). 0: fallbacks run, counted and logged. */
};
/* rf_device_open with options (opts may be NULL): what rf_cpu_open and rf_cuda_open
 * do, by name. -EINVAL for a malformed spec or an unknown kind, -ENODEV for an
 * ordinal past rf_device_count, -ENOTSUP for a kind this build lacks; the message is
 * in rf_last_error(). */
int rf_device_open_opts(struct rf_engine *e, const char *spec, const struct rf_device_opts *opts,
			struct rf_device **out);
/* Devices of a kind ("cpu": 1, "cuda": rf_cuda_count()): >= 0, or -EINVAL for a kind
 * no backend has (rf_last_error() lists those there are). */
int rf_device_count(const char *kind);
/* The kinds of this build, ", "-separated ("cpu, cuda"; static). */
const char *rf_device_kinds(void);
/* 1 when d's memory is host memory (host code and CPU ops may touch a tensor's data
 * after a wait), 0 when it is a device's own (reach it with rf_copy). */
int rf_device_host_memory(const struct rf_device *d);
/* The same for any device of a kind: 1, 0, or -EINVAL for an unknown kind. */
int rf_device_kind_host_memory(const char *kind);


/* Wait for all the engine's work (rf_engine_wait_idle: an error pending for the
 * user's next rf_engine_wait_all stays there), destroy the device's streams and give cached memory back.
 * Every tensor of the device must have been freed (a warning names the bytes still
 * held otherwise). NULL is ignored. */
void rf_device_close(struct rf_device *d);

/* What a device is (RF_DEVICE_CPU or RF_DEVICE_CUDA), and its name ("cpu:0",
 * "cuda:1"; owned by the device). */
enum rf_device_kind rf_device_kind(const struct rf_device *d);
/* d's name, its kind and ordinal ("cpu:0", "cuda:1"; owned by the device). */
const char *rf_device_name(const struct rf_device *d);    /* "cpu:0", "cuda:1" */
/* The precision d computes in (never RF_PRECISION_DEFAULT). */
enum rf_precision rf_device_precision(const struct rf_device *d);
/* The engine d was opened on (borrowed). */
struct rf_engine *rf_device_engine(const struct rf_device *d);
/* d's number among the devices of its kind (1 for "cuda:1"). */
int rf_device_ordinal(const struct rf_device *d);

/* Streams (owned by the device; valid until rf_device_close). i < rf_device_nstreams. */
unsigned rf_device_nstreams(const struct rf_device *d);
/* Compute stream i of d (owned by the device; valid until rf_device_close), NULL for
 * i >= rf_device_nstreams(d). */
struct rf_stream *rf_device_stream(struct rf_device *d, unsigned i);
/* The stream of d's host-to-device copies (CUDA: a stream of its own; CPU: the copy
 * stream, shared with rf_device_d2h_stream). Owned by the device; NULL if it has none. */
struct rf_stream *rf_device_h2d_stream(struct rf_device *d); /* CPU: the copy stream */
/* The stream of d's device-to-host copies (CUDA: a stream of its own; CPU: the copy
 * stream, shared with rf_device_h2d_stream). Owned by the device; NULL if it has none. */
struct rf_stream *rf_device_d2h_stream(struct rf_device *d); /* CPU: the copy stream */

/* What ran how on d since it was opened (each backend fills what it has: the CPU has
 * no device graphs, plans or fallbacks). */
struct rf_device_stats {
	uint64_t graph_captures;  /* device graphs captured (CUDA graphs of graph launches) */
	uint64_t graph_replays;   /* captured device graphs launched again */
	uint64_t graph_failures;  /* captures, instantiations or launches that failed: their
				   * ops ran op by op (each one also logged, RF_LOG_WARN) */
	uint64_t graph_stale;     /* captured graphs dropped to be captured again (a
				   * workspace they read was replaced) */
	uint64_t fallbacks;       /* ops run by a slower fallback path (CUDA: convolutions
				   * by im2col + cuBLAS though cuDNN is loaded) */
	unsigned plans;           /* convolution plans made (rf_device_plan_json) */
};
/* 0, or -EINVAL without d or out. */
int rf_device_get_stats(const struct rf_device *d, struct rf_device_stats *out);
/* Convolution plan i (0 .. plans - 1) of d as one JSON object into buf: {"op":
 * "conv2d_fwd", "shape": "NxCxHxW k KxK s S p P -> O", "dtype", "layout", "algo" (the
 * library's number; -1: none), "math" ("fma", "tensor_op", "tensor_op_conv",
 * "default"), "workspace" (bytes), "uses", "fallback" (true: not run by the library)}.
 * Its length, -ENOENT past the last plan, -ENOSPC when buf is too small. */
int rf_device_plan_json(const struct rf_device *d, unsigned i, char *buf, size_t len);

/* The last op error of this device as text ("op gemm on cuda:0/s0: CUBLAS_STATUS_..."),
 * "" if none. Every failing op also hands it to the log callback (RF_LOG_ERROR).
 * Static storage of d. */
const char *rf_device_last_error(const struct rf_device *d);

/* ---- memory ---------------------------------------------------------------------- */

struct rf_mem_stats {
	size_t in_use;        /* bytes held by live tensors and op workspaces (class size) */
	size_t cached;        /* bytes in the free lists, ready for reuse */
	size_t peak;          /* max of in_use */
	uint64_t allocs;      /* allocator requests */
	uint64_t reuses;      /* requests served from the cache */
	uint64_t backend_allocs, backend_frees; /* aligned_alloc/cudaMalloc, free/cudaFree */
	uint64_t mem_waits;   /* allocations that found no memory and waited for the work in
			       * flight to give some back (then tried again) */
	size_t limit;         /* the device's mem_limit (0: none) */
};
/* Copy d's allocator counters into *st (limit: the device's mem_limit); d NULL: *st
 * zeroed and rf_last_error() says so. */
void rf_device_mem_stats(const struct rf_device *d, struct rf_mem_stats *st);
/* Give cached (unused) blocks back to the backend. Returns the bytes released. */
size_t rf_device_mem_trim(struct rf_device *d);
/* Raw device memory from the caching allocator, for callers that manage their own
 * buffers (reactor thread). bytes is rounded up to a size class; free with the same
 * bytes. Most code uses tensors instead. Returns 0 or -ENOMEM. */
int rf_device_alloc(struct rf_device *d, size_t bytes, void **out);
/* Give back p from rf_device_alloc, with the bytes it was asked for, at once (not
 * ordered after ops that use it): its block goes to the cache (rf_device_mem_trim
 * returns it to the backend). NULL d or p is ignored. */
void rf_device_free(struct rf_device *d, void *p, size_t bytes);

/* ---- pinned staging memory ---------------------------------------------------------
 * An mmap'd arena, page-locked for CUDA by cudaHostRegister (portable: every GPU)
 * when a CUDA device exists, so host<->device copies from it are truly asynchronous
 * DMA. The same memory can be registered with the ring as fixed buffers:
 *     void *b = rf_pinned_base(p); size_t n = rf_pinned_size(p);
 *     rf_ring_register_memory(ring, &b, &n, 1);       (then RF_IO_FIXED_BUF reads)
 * Carve it with rf_pinned_alloc, or make tensors in it with rf_tensor_create_pinned. */
struct rf_pinned;
/* bytes rounded up to 2 MiB. Returns 0 or -errno (mmap). */
int rf_pinned_create(size_t bytes, struct rf_pinned **out);
/* Unregisters and unmaps. Every allocation from it must have been freed (tensors
 * deleted, i.e. their deletion ops ran) and the ring must no longer use it. */
void rf_pinned_destroy(struct rf_pinned *p);
/* The arena's first byte (page-aligned). */
void *rf_pinned_base(const struct rf_pinned *p);
/* The arena's size in bytes: the bytes asked of rf_pinned_create, rounded up to 2 MiB. */
size_t rf_pinned_size(const struct rf_pinned *p);
/* 1 if a backend page-locked the arena when it was created (CUDA: cudaHostRegister),
 * else 0 (no such device, or the registration failed). */
int rf_pinned_is_registered(const struct rf_pinned *p); /* 1 if cudaHostRegister'ed */
/* First-fit allocation of bytes aligned to align (power of two; 0: 4096, O_DIRECT
 * friendly). Reactor thread. Returns 0, -ENOMEM, or -EINVAL (p or out NULL, align not a
 * power of two). */
int rf_pinned_alloc(struct rf_pinned *p, size_t bytes, size_t align, void **out);
/* Give back ptr from rf_pinned_alloc, with the bytes it was asked for (neighbouring
 * free extents merge). NULL ptr is ignored. Reactor thread, as rf_pinned_alloc. */
void rf_pinned_free(struct rf_pinned *p, void *ptr, size_t bytes);
/* Bytes allocated from p and not yet freed (each allocation counted rounded up to 64
 * bytes; alignment padding not counted). */
size_t rf_pinned_in_use(const struct rf_pinned *p);

#ifdef __cplusplus
}
#endif
#endif
