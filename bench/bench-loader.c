/* bench/bench-loader.c -- the dataloader's throughput (loader.h).
 *
 * rf-bench loader --file F --record-size S [--header H] [--batch B] [--epochs N]
 *                 [--prefetch N] [--streams N] [--seed S] [--chunk BYTES] [--window W]
 *                 [--read-bytes BYTES] [--in-memory] [--buffered] [--no-shuffle] [--json]
 *   Full epochs over a raw file of fixed-size u8 records (no labels): O_DIRECT reads
 *   through the ring in a shuffled order, gathered and decoded to f32 by the loader's
 *   gather stream (a worker thread of its own) into batches on the CPU device, opened
 *   with --streams compute streams (default 2), which a host device's batches do not
 *   use: the flag stays for scripts that pass it.
 *   The front end pushes every batch without waiting, then waits once at the end of
 *   the epoch. Per epoch: seconds, MB/s of record bytes, samples/s. With --json one
 *   object: "MBps" and "samples_per_s" over the epochs after the first (all of them
 *   when --epochs 1), and "per_epoch": [{"epoch", "seconds", "MBps", ...}]; what the
 *   reads did: "read_limit" (--read-bytes in effect), "max_reads_inflight",
 *   "max_bytes_inflight", "read_queued" (reads that waited for room), "reads_per_enter"
 *   (the loader's reads over the ring's io_uring_enter calls); and the process's CPU
 *   time per GB of records delivered, all epochs and the loader's creation included
 *   (getrusage: "cpu_user_s_per_GB", "cpu_sys_s_per_GB"); "create_s", the loader's
 *   creation (buffers mapped, registered with the ring and touched), and "buffer_MiB".
 *
 * rf-bench loader --fmnist [DIR] [--batch B] [--epochs N] [--json]
 * rf-bench loader --rfrec FILE|URL [--http-conns N] [...]: an .rfrec, local or over
 *   HTTP (http://HOST:PORT/PATH: record spans by Range requests)
 *   Samples/s of full Fashion-MNIST training epochs (the gzip'd IDX pair in DIR,
 *   default /usr/share/datasets/fashion-mnist, served from memory) with decode.
 * rf-bench loader --rfrec IMAGES.rfrec|--tar SHARD.tar --image-size S [--workers N]
 *                 [--eval] [--exact]: JPEG/PNG records decoded and augmented to
 *   3 x S x S (RandomResizedCrop + flip, or resize + centre crop) then to f32; MB/s
 *   counts the decoded samples' bytes (3 S^2 each). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sys/resource.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringflow/loader.h>
#include "bench.h"
#include "bench-args.h"

static const char usage[] =
	"usage: rf-bench loader --file F --record-size S [--header H] [options]\n"
	"       rf-bench loader --fmnist [DIR] [options]\n"
	"       rf-bench loader --rfrec FILE|URL [--http-conns N] [options]\n"
	"  --record-size S  bytes per record, 1 to 1024m (k, m suffixes: KiB, MiB)\n"
	"  --header H       bytes before the first record, 0 to 1048576m (default 0)\n"
	"  --batch B        records per batch, 1..65536 (default 256)\n"
	"  --epochs N       1..10000 (default 1)\n"
	"  --prefetch N     batch slots in flight, 1..16 (default 4)\n"
	"  --streams N      the CPU device's compute streams, 1..16 (default 2; the\n"
	"                   decode runs on the loader's own gather stream, not these)\n"
	"  --seed S         the shuffle's seed (default 1)\n"
	"  --order O        uniform (default: every order equally likely, small records\n"
	"                   read one by one) or windowed (chunks shuffled in windows)\n"
	"  --chunk BYTES    windowed: bytes per read, 4k..256m (default 512k)\n"
	"  --window W       windowed: chunks shuffled together, 1..4096 (default 8)\n"
	"  --http-conns N   connections for an http:// --rfrec, 1..64 (default 4)\n"
	"  --read-bytes B   bytes of reads in flight at most, 4k..1g (default 8m)\n"
	"  --tar SHARD      a WebDataset shard of images (read where they lie)\n"
	"  --image-size S   the records are JPEG/PNG images: decoded, RandomResizedCrop +\n"
	"                   flip to 3 x S x S (--eval: resize + centre crop), 1..4096\n"
	"  --workers N      image decode streams, 1..16 (default: one per CPU)\n"
	"  --exact          images: no DCT-scaled decode\n"
	"  --u8             serve x as the records' u8 bytes (no decode to f32)\n"
	"  --in-memory --buffered --no-shuffle --json --eval\n";

int rf_bench_loader(int argc, char **argv)
{
	const char *file = NULL, *fmdir = NULL, *rfrec = NULL;
	uint64_t rec = 0, hdr = 0, batch = 256, epochs = 1, prefetch = 0, streams = 2, seed = 1, conns = 0;
	uint64_t chunk = 0, window = 0, rbytes = 0, all_n = 0, isize = 0, workers = 0;
	int eval = 0, exact = 0, u8 = 0;
	const char *tar = NULL;
	int json = 0, fmnist = 0, in_memory = 0, buffered = 0, no_shuffle = 0, i, ret, rc = 1;
	int order = RF_LOADER_ORDER_UNIFORM;
	struct rf_ring *ring = NULL;
	struct rf_engine *e = NULL;
	struct rf_device *dev = NULL;
	struct rf_dataset ds;
	struct rf_loader *l = NULL;
	struct rf_loader_opts o = { 0 };
	struct rf_loader_stats st;
	double tot_s = 0, steady_s = 0;
	char jep[8192] = "";
	size_t jlen = 0;
	uint64_t steady_n = 0, create_ns = 0;

	memset(&ds, 0, sizeof(ds));
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t *u = NULL, lo = 1, hi = 0;
		int sizes = 0;
		if (bench_is_help(a)) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(a, "--json"))
			json = 1;
		else if (!strcmp(a, "--in-memory"))
			in_memory = 1;
		else if (!strcmp(a, "--buffered"))
			buffered = 1;
		else if (!strcmp(a, "--no-shuffle"))
			no_shuffle = 1;
		else if (!strcmp(a, "--eval"))
			eval = 1;
		else if (!strcmp(a, "--exact"))
			exact = 1;
		else if (!strcmp(a, "--u8"))
			u8 = 1;
		else if (!strcmp(a, "--tar")) {
			if (!v) {
				fprintf(stderr, "rf-bench loader: --tar needs a path\n");
				return 2;
			}
			tar = v;
			i++;
		} else if (!strcmp(a, "--image-size"))
			u = &isize, hi = 4096;
		else if (!strcmp(a, "--workers"))
			u = &workers, hi = 16;
		else if (!strcmp(a, "--fmnist")) {
			fmnist = 1;
			if (v && v[0] != '-') {
				fmdir = v;
				i++;
			}
		} else if (!strcmp(a, "--file")) {
			if (!v) {
				fprintf(stderr, "rf-bench loader: --file needs a path\n");
				return 2;
			}
			file = v;
			i++;
		} else if (!strcmp(a, "--rfrec")) {
			if (!v) {
				fprintf(stderr, "rf-bench loader: --rfrec needs a path or URL\n");
				return 2;
			}
			rfrec = v;
			i++;
		/* each a range: --prefetch 100000 took 9 GB, --batch 16777216k wrapped to 0 */
		} else if (!strcmp(a, "--http-conns"))
			u = &conns, hi = 64;
		else if (!strcmp(a, "--record-size"))
			u = &rec, hi = 1ull << 30, sizes = 1;
		else if (!strcmp(a, "--header"))
			u = &hdr, lo = 0, hi = 1ull << 40, sizes = 1;
		else if (!strcmp(a, "--batch"))
			u = &batch, hi = 65536;
		else if (!strcmp(a, "--epochs"))
			u = &epochs, hi = 10000;
		else if (!strcmp(a, "--prefetch"))
			u = &prefetch, hi = 16;
		else if (!strcmp(a, "--streams"))
			u = &streams, hi = 16;
		else if (!strcmp(a, "--seed"))
			u = &seed, lo = 0, hi = UINT64_MAX;
		else if (!strcmp(a, "--chunk"))
			u = &chunk, lo = 4096, hi = 256ull << 20, sizes = 1;
		else if (!strcmp(a, "--read-bytes"))
			u = &rbytes, lo = 4096, hi = 1ull << 30, sizes = 1;
		else if (!strcmp(a, "--window"))
			u = &window, hi = 4096;
		else if (!strcmp(a, "--order")) {
			const char *v = i + 1 < argc ? argv[++i] : "";
			if (!strcmp(v, "uniform") || !strcmp(v, "windowed")) {
				order = !strcmp(v, "windowed");
			} else {
				fprintf(stderr, "rf-bench loader: --order: got '%s', expected uniform or "
					"windowed\n", v);
				return 2;
			}
		} else
			return bench_unknown("loader", a);
		if (u) {
			int rc = bench_u64("loader", argc, argv, &i, lo, hi, sizes, u);
			if (rc)
				return rc;
		}
	}
	if (!fmnist && !rfrec && !tar && (!file || !rec)) {
		fprintf(stderr,
			"rf-bench loader: need --file F --record-size S (or --fmnist [DIR], "
			"or --rfrec FILE|URL; see rf-bench loader --help)\n");
		return 2;
	}
	/* the batch slots: prefetch x batch records, decoded to floats */
	if ((ret = bench_mem("loader", "--prefetch x --batch x --record-size",
			     (double)(prefetch ? prefetch : 4) * (double)batch *
			     (double)(isize ? 3 * isize * isize : rec ? rec : 784) * 5.0)))
		return ret;

	if (tar) {
		ret = rf_dataset_open_wds(&ds, tar, 0, 0);
	} else if (rfrec) {
		ret = rf_dataset_open_rfrec(&ds, rfrec, 0);
	} else if (fmnist) {
		char ip[512], lp[512];
		if (!fmdir)
			fmdir = "/usr/share/datasets/fashion-mnist";
		snprintf(ip, sizeof(ip), "%s/train-images-idx3-ubyte.gz", fmdir);
		snprintf(lp, sizeof(lp), "%s/train-labels-idx1-ubyte.gz", fmdir);
		ret = rf_dataset_open_idx_pair(&ds, ip, lp, 10, 0);
	} else {
		struct rf_raw_desc d = { 0 };
		d.header_bytes = hdr;
		d.record_bytes = rec;
		ret = rf_dataset_open_raw(&ds, file, &d, RF_DS_ALLOW_TAIL);
	}
	if (ret < 0) {
		fprintf(stderr, "rf-bench loader: %s\n", rf_last_error());
		return 1;
	}
	if ((ret = rf_ring_create(&ring, NULL)) < 0 ||
	    (ret = rf_engine_create(&e, ring, NULL)) < 0 ||
	    (ret = rf_cpu_open(e, &(struct rf_cpu_opts){ .streams = (unsigned)streams }, &dev)) < 0) {
		fprintf(stderr, "rf-bench loader: setup failed: %s\n", rf_last_error());
		goto out;
	}
	o.batch = (unsigned)batch;
	o.prefetch = (unsigned)prefetch;
	o.seed = seed;
	o.no_shuffle = no_shuffle;
	o.devices = &dev;
	o.ndevices = 1;
	o.chunk_bytes = chunk;
	o.window_chunks = (unsigned)window;
	o.order = order;
	o.in_memory = in_memory;
	o.buffered = buffered;
	o.http_conns = (unsigned)conns;
	o.read_bytes = (size_t)rbytes;
	o.image_size = (unsigned)isize;
	o.image_eval = eval;
	o.image_exact = exact;
	o.hflip = isize && !eval;
	o.workers = (unsigned)workers;
	o.x_dtype = u8 ? RF_U8 : RF_F32;
	/* MB/s of what a batch holds: the records, or the decoded images */
	uint64_t pbytes = isize ? 3 * isize * isize : ds.payload_bytes;
	create_ns = rf_now_ns();
	ret = rf_loader_create(&l, e, &ds, &o);
	create_ns = rf_now_ns() - create_ns;
	if (ret < 0) {
		fprintf(stderr, "rf-bench loader: %s\n", rf_last_error());
		goto out;
	}
	rf_loader_get_stats(l, &st);
	if (!json) {
		char desc[256];
		rf_dataset_describe(&ds, desc, sizeof(desc));
		printf("%s\nmode %s, batch %" PRIu64 ", prefetch %u, %" PRIu64 " device streams, "
		       "O_DIRECT %d, registered %d, %.1f MiB of buffers\n", desc,
		       st.mode == 0 ? "memory" : st.mode == 1 ? "chunks" : "per-record reads", batch,
		       prefetch ? (unsigned)prefetch : 4, streams, st.direct, st.registered,
		       st.buffer_bytes / 1048576.0);
	}
	for (uint64_t ep = 0; ep < epochs; ep++) {
		uint64_t t0 = rf_now_ns(), n = 0;
		struct rf_batch b;
		double s, mb;
		while ((ret = rf_loader_next(l, &b)) == 1)
			n += b.n;
		if (ret < 0) {
			fprintf(stderr, "rf-bench loader: rf_loader_next: %s\n", strerror(-ret));
			goto out;
		}
		ret = rf_engine_wait_all(e);
		s = (double)(rf_now_ns() - t0) / 1e9;
		if (ret < 0) {
			fprintf(stderr, "rf-bench loader: epoch %" PRIu64 " failed: %s: %s\n", ep,
				strerror(-ret), rf_loader_last_error(l));
			goto out;
		}
		mb = (double)n * pbytes / 1e6;
		all_n += n;
		tot_s += s;
		if (ep > 0 || epochs == 1) {
			steady_s += s;
			steady_n += n;
		}
		if (json)
			jlen += (size_t)snprintf(jep + jlen, jlen < sizeof(jep) ? sizeof(jep) - jlen : 0,
						 "%s{\"epoch\":%" PRIu64 ",\"seconds\":%.4f,\"records\":%"
						 PRIu64 ",\"MBps\":%s,\"samples_per_s\":%s}",
						 ep ? "," : "", ep, s, n, BJ("%.1f", mb / s),
						 BJ("%.0f", n / s));
		else
			printf("epoch %" PRIu64 ": %" PRIu64 " records in %.3f s: %.1f MB/s, %.0f samples/s\n",
			       ep, n, s, mb / s, n / s);
		fflush(stdout);
	}
	rf_loader_get_stats(l, &st);
	{
		double mb = (double)steady_n * pbytes / 1e6;
		double gb = (double)all_n * pbytes / 1e9, usr, sys;
		struct rf_ring_stats rs;
		struct rusage ru;
		char extra[512];
		getrusage(RUSAGE_SELF, &ru);
		usr = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
		sys = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
		rf_ring_get_stats(ring, &rs);
		snprintf(extra, sizeof(extra),
			 "\"read_limit\":%zu,\"max_reads_inflight\":%u,\"max_bytes_inflight\":%zu,"
			 "\"read_queued\":%" PRIu64 ",\"reads_per_enter\":%s,"
			 "\"cpu_user_s_per_GB\":%s,\"cpu_sys_s_per_GB\":%s,\"create_s\":%.4f,"
			 "\"buffer_MiB\":%.1f,\"spins\":%" PRIu64 ",\"spin_hits\":%" PRIu64
			 ",\"spin_s\":%.4f", st.read_limit,
			 st.max_reads_inflight, st.max_bytes_inflight, st.read_queued,
			 BJ("%.2f", rs.enters ? (double)st.reads / (double)rs.enters : NAN),
			 BJ("%.3f", gb > 0 ? usr / gb : NAN), BJ("%.3f", gb > 0 ? sys / gb : NAN),
			 (double)create_ns / 1e9, st.buffer_bytes / 1048576.0, rs.spins,
			 rs.spin_hits, (double)rs.spin_ns / 1e9);
		if (json)
			printf("{\"what\":\"%s\",\"epochs\":%" PRIu64 ",\"batch\":%" PRIu64 ",\"record_bytes\":%"
			       PRIu64 ",\"records\":%" PRIu64 ",\"MBps\":%s,\"samples_per_s\":%s,"
			       "\"seconds\":%.4f,\"reads\":%" PRIu64 ",\"read_MB\":%.1f,\"direct\":%d,"
			       "\"registered\":%d,\"mode\":%d,%s,\"per_epoch\":[%s]}\n",
			       fmnist ? "fmnist" : isize ? "images" : "file", epochs, batch, pbytes,
			       ds.count, BJ("%.1f", mb / steady_s), BJ("%.0f", steady_n / steady_s),
			       tot_s, st.reads,
			       st.read_bytes / 1e6, st.direct, st.registered, st.mode, extra,
			       jlen < sizeof(jep) ? jep : "");
		else
			printf("%s: %.1f MB/s, %.0f samples/s (epochs %s), %" PRIu64 " reads, %.1f MB read\n"
			       "reads in flight: at most %u (%zu bytes; bound %zu), %" PRIu64 " waited; "
			       "%.1f reads per io_uring_enter; CPU %.3f s user + %.3f s system per GB\n",
			       fmnist ? "fashion-mnist" : tar ? tar : rfrec ? rfrec : file, mb / steady_s, steady_n / steady_s,
			       epochs > 1 ? "after the first" : "all", st.reads, st.read_bytes / 1e6,
			       st.max_reads_inflight, st.max_bytes_inflight, st.read_limit, st.read_queued,
			       rs.enters ? (double)st.reads / (double)rs.enters : 0.0,
			       gb > 0 ? usr / gb : 0.0, gb > 0 ? sys / gb : 0.0);
	}
	rc = 0;
out:
	rf_loader_destroy(l);
	rf_device_close(dev);
	if (e)
		rf_engine_destroy(e);
	if (ring)
		rf_ring_destroy(ring);
	rf_dataset_close(&ds);
	return rc;
}
