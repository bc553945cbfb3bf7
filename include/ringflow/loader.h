/* ringflow/loader.h -- a dataset (dataset.h) served as batches of device tensors that
 * are engine variables: rf_loader_next() only pushes the ops (read through the ring,
 * gather, decode) and returns, so I/O, decoding and compute overlap.
 * Reactor thread only -- the loader's own thread -- but for rf_loader_unref (any
 * thread) and rf_loader_ref and rf_loader_refs (see theirs). Order, memory and
 * errors: dataloader/README.md.
 */
#ifndef RINGFLOW_LOADER_H
#define RINGFLOW_LOADER_H

#include <stddef.h>
#include <stdint.h>
#include "engine.h"
#include "device.h"
#include "tensor.h"
#include "dataset.h"
#include "log.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rf_loader;

#define RF_LOADER_MAX_SHARDS 16

enum { RF_LOADER_ORDER_UNIFORM = 0, RF_LOADER_ORDER_WINDOWED = 1 };

#define RF_LOADER_NORM_MAX_CH 4 /* channels a mean and std per channel covers */

struct rf_loader_opts {
	unsigned batch;           /* records per batch, all shards together (>= 1) */
	unsigned prefetch;        /* batch slots N (batches in flight); 0: 4 */
	unsigned tail_slots;      /* slots for the last partial batch, at least (0..64): a
				   * consumer that keeps the tails of several epochs
				   * (rf_loader_ref) asks for that many; 0: enough for
				   * prefetch alone */
	uint64_t seed;            /* shuffle seed */
	int no_shuffle;           /* 1: file order every epoch */
	int drop_last;            /* 1: drop the last partial batch; 0: keep it (smaller) */
	/* Shard i of every batch goes to devices[i] (data parallel). ndevices 1..16. */
	struct rf_device *const *devices;
	unsigned ndevices;
	/* Several processes: a batch is cut into shard_total shards (rows [n*i/T,
	 * n*(i+1)/T) of its n records, so sizes differ by at most one) and this loader
	 * delivers shards shard_base .. shard_base+ndevices-1 of them, reading only their
	 * records. Every process uses the same seed, so all see the same order.
	 * shard_total 0: ndevices (this loader delivers the whole batch). */
	unsigned shard_base, shard_total;
	/* A CPU device for host staging tensors; needed when a device is CUDA. NULL:
	 * devices[0] (which must then be a CPU device). Borrowed. */
	struct rf_device *host;
	float scale;              /* decode: x = (u8 * scale - mean) / std; 0: 1/255 */
	float mean, std;          /* std 0: 1 */
	/* A mean and std per channel (torchvision's Normalize after ToTensor): with
	 * norm_channels C > 0, x = (u8 * scale - channel_mean[c]) / channel_std[c] for
	 * channel c of each (C, H, W) record -- C the records' channels (3 for image
	 * records, RGB; 1 for (H, W) records), at most RF_LOADER_NORM_MAX_CH. Every std
	 * finite and nonzero; mean and std above then left 0. The same bits as the one
	 * mean and std when all channels agree. Not with x_dtype RF_U8. */
	unsigned norm_channels;
	float channel_mean[RF_LOADER_NORM_MAX_CH], channel_std[RF_LOADER_NORM_MAX_CH];
	/* The shuffled order of records read from a file or URL (in memory, and for
	 * records of large_record bytes or more, it is always uniform):
	 *   RF_LOADER_ORDER_UNIFORM (0): every permutation equally likely, each record
	 *     read by itself (a read of its aligned span) at the device's random-read
	 *     rate, bounded by read_bytes in flight;
	 *   RF_LOADER_ORDER_WINDOWED: chunks of chunk_bytes read whole, in a shuffled
	 *     order, and the records of window_chunks chunks shuffled together (FFCV's
	 *     quasi-random order). Sequential reads, far fewer bytes per record -- but a
	 *     batch draws from a few windows only: on a file sorted by class a batch of
	 *     256 holds ~6 of Fashion-MNIST's 10 classes, and training suffers. */
	int order;
	size_t chunk_bytes;       /* windowed: bytes per chunk read; 0: 512 KiB */
	unsigned window_chunks;   /* windowed: chunks shuffled together; 0: 8. Doubled
				   * until one batch spans at most 8 windows. */
	size_t large_record;      /* stride >= this: one read per record; 0: 64 KiB */
	int in_memory;            /* 1: read the whole payload file into memory at create */
	int buffered;             /* 1: page-cache reads instead of O_DIRECT */
	int no_register;          /* 1: don't register the fetch buffers with the ring */
	unsigned http_conns;      /* an http:// dataset: keep-alive connections, each with
				   * one Range request in flight; 0: 4 */
	unsigned http_timeout_ms; /* an http:// dataset: per connect, send, receive and
				   * response head, 1..3600000; 0: RF_HTTP_TIMEOUT_MS, else
				   * 10 s. rf_loader_destroy cancels what is in flight at
				   * once whatever it is. */
	/* Augmentation of image records ((H, W) or (C, H, W) u8), done as the gather op
	 * copies each record into its batch, on the loader's worker stream: a random crop
	 * of the image padded by crop_pad zeros on every side (torchvision's
	 * RandomCrop(size, padding=crop_pad)), then, with hflip, a horizontal flip with
	 * probability 1/2 (RandomHorizontalFlip). Each record's draw is a function of
	 * (seed, epoch, record index) only: rf_loader_augment_of. 0: none. */
	unsigned crop_pad;        /* 0..64 */
	int hflip;
	/* Reads in flight are bounded in bytes, not by the batch or the prefetch depth:
	 * the requests of every batch pushed wait in one queue and go to the ring (or the
	 * HTTP connections) in order while at most read_bytes are outstanding (one read
	 * always may be, whatever its size). 0: 8 MiB, a queue depth of ~55 for 150 KB
	 * records and 16 for 512 KiB chunks. Reads of a local file are also never more
	 * than the queue depth of its disk (sysfs queue/nr_requests, 256 on a virtio
	 * disk): past it they would wait in the kernel for a tag inside the reactor's
	 * submit and go out one doorbell each, at up to twice the CPU for the same rate
	 * (small records in the uniform order: 1280 reads in flight under 8 MiB). */
	size_t read_bytes;
	/* The batch's x in the format its consumer computes in, so that the decode is the
	 * batch's only conversion (a model's first layer reads it as it is): dtype RF_F32
	 * (0 means it), RF_BF16 or RF_F16, rounded to nearest even from the f32 decode --
	 * or RF_U8 (row-major only): the records' bytes as they are (an image's 3 x S x S
	 * sample), no decode, scale, mean and std unused; on a host device x is then the
	 * gather's own staging, on a GPU the u8 copy of it;
	 * layout RF_LAYOUT_NHWC makes x 4-D, (n, c, h, w) from records of (h, w) (c = 1)
	 * or (c, h, w). Defaults: f32 row-major, (n, record shape...). Host devices decode
	 * f32 row-major in the gather; any other format there is decoded by an op. */
	enum rf_tdtype x_dtype;
	enum rf_layout x_layout;
	/* Records that are encoded images (a version 2 .rfrec of RF_REC_ENC_IMAGE: JPEG or
	 * PNG): each is decoded and augmented by the gather into a (3, image_size,
	 * image_size) u8 RGB sample, which is then served as any u8 record is (x in f32,
	 * bf16, NCHW or NHWC as asked). Training (image_eval 0): torchvision's
	 * RandomResizedCrop (scale 0.08..1, ratio 3/4..4/3) to image_size, flipped with
	 * probability 1/2 with hflip; evaluation (image_eval 1): the shorter side resized
	 * to image_size * 256/224, then the centre crop. Every random choice is a function
	 * of (seed, epoch, record) only. Required (1..4096) for such a dataset, refused
	 * for any other. */
	unsigned image_size;
	int image_eval;
	/* Training: the smallest fraction of an image's area RandomResizedCrop takes, in
	 * (0, 1]: 0 means torchvision's 0.08; 1 resizes the whole image (small images,
	 * where a crop of 8 % of 28x28 pixels leaves little to learn from). */
	float image_scale_min;
	/* Evaluation: the shorter side is resized to image_size * this before the centre
	 * crop, 1 to 8; 0: 256/224 (ImageNet's convention); 1: no crop (the whole image,
	 * for models trained on whole images). */
	float image_eval_ratio;
	/* 1: decode every JPEG at full size (no DCT scaling: the pixels of a decoder
	 * without that shortcut); 0: decode at 1/2, 1/4 or 1/8 where the crop is shrunk
	 * at least that much (as DALI and FFCV do). */
	int image_exact;
	/* Gather streams (worker threads) for image datasets: batch t is decoded on
	 * stream t mod workers, so that batches decode side by side. 0: one per CPU the
	 * process may run on (its affinity: taskset, a cpuset), at most 16. Other
	 * datasets use one. */
	unsigned workers;
	/* Image records that fail to decode (corrupt, truncated, not a JPEG or PNG, too
	 * large): 0 fails the batch, its error naming the file, record and offset; 1 keeps
	 * the batch whole -- each bad image's row and label become those of the nearest
	 * good image before it in the batch (after it, for the first), the image is
	 * counted (stats' images_skipped, and per batch rf_loader_images_skipped) and a
	 * warning names it once the batch is the consumer's (rf_loader_wait on it, or
	 * rf_loader_images_skipped over it: a batch pushed ahead and never used is not
	 * named); a batch with no good image still fails. Deterministic: the same rows
	 * whatever workers or prefetch. */
	int skip_bad_images;
};

/* The augmentation record `index` gets in epoch `epoch` with these options: the crop's
 * offset (dy, dx), each in [-crop_pad, crop_pad] (out[y][x] = in[y+dy][x+dx], 0
 * outside), and whether it is then flipped (out[y][x] = cropped[y][W-1-x]). */
void rf_loader_augment_of(const struct rf_loader_opts *o, uint64_t epoch, uint64_t index,
			  int *dy, int *dx, int *flip);

/* One batch: tensors owned by the loader. They stay valid, and hold this batch's
 * data for every op pushed before the prefetch-th following rf_loader_next() call
 * that returns a batch (calls that return 0 at the end of an epoch do not count;
 * epoch boundaries and rf_loader_seek_epoch change nothing). That call may reuse the
 * slot; the engine orders the overwrite after those ops. A slot with references
 * (rf_loader_ref) is not reused at all until they are let go. */
struct rf_batch {
	uint64_t epoch;           /* 0-based */
	uint64_t index;           /* batch number within the epoch */
	unsigned n;               /* records this loader delivers (sum of shard_n) */
	unsigned global_n;        /* records of the whole batch, every shard_total shard
				   * (<= opts.batch; == n without shard_total) */
	unsigned nshards;
	unsigned shard_n[RF_LOADER_MAX_SHARDS];      /* records of each shard, sum n */
	struct rf_tensor *x[RF_LOADER_MAX_SHARDS];   /* (shard_n, record shape...) f32, or
						      * opts.x_dtype / x_layout */
	struct rf_tensor *y[RF_LOADER_MAX_SHARDS];   /* (shard_n) i32; NULL: no labels */
	unsigned slot;            /* the batch slot holding it (rf_loader_slots) */
};

struct rf_loader_stats {
	uint64_t batches, records;
	uint64_t reads, read_bytes;   /* ring reads issued, bytes they asked for */
	uint64_t read_errors;         /* fetches that failed */
	int direct;                   /* 1: O_DIRECT */
	int registered;               /* 1: fetch buffers are ring-registered (fixed) */
	size_t buffer_bytes;          /* fetch + staging memory (excluding device tensors) */
	int mode;                     /* 0 memory; 1 small records in chunks (windowed order,
				       * or no shuffle); 2 records read one by one (large ones,
				       * small ones in the uniform order, variable-length) */
	uint64_t chunk_records;       /* mode 1: records per chunk (R) */
	unsigned window_chunks;       /* mode 1: chunks per window (W), after widening */
	unsigned fetch_units;         /* fetch buffers (windows or batches in flight) */
	size_t read_limit;            /* opts.read_bytes in effect */
	unsigned max_reads_inflight;  /* the most reads outstanding at once */
	size_t max_bytes_inflight;    /* the most bytes outstanding at once */
	uint64_t read_queued;         /* reads that waited for the bound before issue */
	size_t largest_read;          /* bytes of the largest read (records next to each
				       * other in an unshuffled batch share one read) */
	uint64_t images_skipped;      /* skip_bad_images: images that failed to decode in
				       * every batch gathered, those pushed ahead included
				       * (a bad file counts once per epoch that reads it;
				       * per batch delivered: rf_loader_images_skipped) */
};

/* Create a loader over ds (borrowed: must stay open until rf_loader_destroy) on
 * engine e (borrowed). Allocates every buffer it will ever use. On failure leaves
 * one line in rf_last_error() and returns -errno (-EINVAL bad options, -ENOTSUP
 * a payload dtype other than u8, -EIO/-errno reading labels or the in-memory copy).
 * *out is owned by the caller: rf_loader_destroy. */
int rf_loader_create(struct rf_loader **out, struct rf_engine *e, const struct rf_dataset *ds,
		     const struct rf_loader_opts *opts);

/* Waits for all the engine's work (rf_engine_wait_idle: an error pending for the
 * user's next rf_engine_wait_all stays there), frees the tensors and buffers. NULL is
 * ignored. From another thread, or inside an op or callback (where it cannot wait),
 * it is refused: the loader is left as it was, the reason logged. */
void rf_loader_destroy(struct rf_loader *l);
/* Stop reading for good, now: what is still to be read -- queued or in flight, an
 * HTTP request stalled on a server, a retry -- ends at once, and the batches it was
 * for fail quietly (-ECANCELED, no error of the caller's), instead of every prefetched
 * batch running its retries and timeouts out before a teardown's wait ends. What a
 * failed run calls before it waits; the loader then only goes to rf_loader_destroy.
 * Reactor thread. NULL is ignored. */
void rf_loader_cancel(struct rf_loader *l);

/* Push the ops of the next batch into *b and return 1; or return 0 when the epoch
 * is over (b untouched; the following call starts the next epoch, in a new order);
 * or -errno if pushing failed, with a line in rf_last_error() saying what failed.
 * Never waits for I/O; it may turn the reactor when the engine's in-flight cap is
 * reached (bounded asynchrony). */
int rf_loader_next(struct rf_loader *l, struct rf_batch *b);

/* The loader's batch slots: a batch's tensors are its slot's (rf_batch.slot, 0 ..
 * rf_loader_slots() - 1), which a later batch of the same slot overwrites (ordered
 * after every op pushed on them before that rf_loader_next call). A consumer that
 * keeps batches (zero-copy views, Python's DLPack exports) takes a reference to each
 * kept batch's slot (rf_loader_ref, right after the rf_loader_next that returned it)
 * and lets it go when done (rf_loader_unref, on any thread); rf_loader_next writes
 * only slots without references. */
unsigned rf_loader_slots(const struct rf_loader *l);
/* The slot the next rf_loader_next will write, or -1 when every slot it could take has
 * references (rf_loader_next then fails with -EBUSY). Other threads can only let
 * references go meanwhile, so a slot returned here stays free until that call -- which
 * may instead take a slot before it in the rotation that another thread freed -- and a
 * -1 may be out of date by the time it is read. */
int rf_loader_next_slot(const struct rf_loader *l);
/* One more reference to batch slot `slot` (0 .. rf_loader_slots() - 1): rf_loader_next
 * passes over a slot with references (the rotation goes on with the next free slot) and
 * fails with -EBUSY when every slot it could take has some, so the slot's batch keeps
 * its bytes until the last reference is let go (rf_loader_unref). Call it on the
 * loader's own thread (the one that calls rf_loader_next), or on another thread only
 * while holding a reference to the slot already: a slot without references may be the
 * one rf_loader_next is choosing at that moment. Returns 0, or -EINVAL (no such slot)
 * or -EOVERFLOW (UINT_MAX references already) with a message in rf_last_error(). */
int rf_loader_ref(struct rf_loader *l, unsigned slot);
/* One reference to slot `slot` less, on any thread, with no lock: what the calling
 * thread did with the slot's batch before the call happens before the loader's next
 * write of that slot. The loader must outlive the call (rf_loader_destroy after every
 * thread's last unref). Returns 0, or -EINVAL with a message in rf_last_error() for no
 * such slot or one without references (a count never goes below 0). */
int rf_loader_unref(struct rf_loader *l, unsigned slot);
/* The references slot `slot` has now; 0 for no such slot. Any thread: other threads'
 * rf_loader_unref (and rf_loader_ref by those holding one) may change it at once. */
unsigned rf_loader_refs(const struct rf_loader *l, unsigned slot);
/* Batches per epoch (drop_last counted). */
uint64_t rf_loader_batches_per_epoch(const struct rf_loader *l);
/* Start epoch `epoch` at its first batch on the next rf_loader_next call. */
void rf_loader_seek_epoch(struct rf_loader *l, uint64_t epoch);
/* Start epoch `epoch` at batch `batch` (0 <= batch <= batches per epoch; at the end:
 * the next call returns 0) on the next rf_loader_next call: that batch and the ones
 * after it hold the records they hold when the epoch is read from its start (the
 * order is a function of seed and epoch), and only their reads are issued. Returns 0
 * or -ERANGE, -EINVAL (l NULL) or -EDEADLK (off the reactor thread, or inside an op
 * or callback), a message in rf_last_error(). */
int rf_loader_seek(struct rf_loader *l, uint64_t epoch, uint64_t batch);

/* Record index (in the dataset) of the j-th record of the epoch's order, computed
 * as the loader computes it (for tests and tools). Returns 0, -ERANGE (n more than an
 * epoch's records), -EINVAL (NULL) or -ENOMEM, a message in rf_last_error(). */
int rf_loader_order(struct rf_loader *l, uint64_t epoch, uint64_t *order, uint64_t n);

/* Wait until b's tensors are written. Returns 0 or the poison error (-EIO ...), or
 * -EINTR when the engine's interrupt (rf_engine_set_interrupt) ended the wait first:
 * b is not ready yet; wait for it again, or tear down. -EINVAL for a NULL l or b. */
int rf_loader_wait(struct rf_loader *l, const struct rf_batch *b);

/* Message of b's failure ("FILE: offset O: ... (epoch E, batch T)"), "" if none is
 * known (yet: call after rf_loader_wait). The loader keeps the messages of the latest
 * 256 failed batches. Owned by the loader. */
const char *rf_loader_batch_error(const struct rf_loader *l, const struct rf_batch *b);
/* skip_bad_images: the images skipped in batches first..end-1 of epoch `epoch`
 * (0-based), counting only batches pushed since the last rf_loader_seek or
 * rf_loader_seek_epoch (what a seek drops is not delivered) whose gathers have
 * finished -- wait for them first (any op after them, e.g. the step that read the
 * last); the warnings of those batches not yet given are logged now. Kept for the
 * last two epochs gathered. 0 without skip_bad_images. Unlike stats' images_skipped,
 * which counts every batch gathered, a batch pushed ahead into the next epoch is
 * not counted here for this one. */
uint64_t rf_loader_images_skipped(struct rf_loader *l, uint64_t epoch, uint64_t first,
				  uint64_t end);
/* The last read failure of this loader as text, "" if none. Owned by the loader. */
const char *rf_loader_last_error(const struct rf_loader *l);

/* A snapshot of the loader's counters (reads, bytes, waits, mode) into *st. */
void rf_loader_get_stats(const struct rf_loader *l, struct rf_loader_stats *st);

#ifdef __cplusplus
}
#endif
#endif
