/* test-loader-reuse -- loader.h's promise that a batch's tensors hold that batch's
 * records for every op pushed before the prefetch-th following rf_loader_next call
 * that returns a batch, checked over random configurations: record count, a --limit
 * style view (a smaller count over the same file), batch size, prefetch 1..9, the
 * window and chunk size of mode 1, all three modes (memory, chunks, a read per
 * record), drop_last or a tail batch, shuffled or not, 1..3 shards, an engine cap
 * from 1 op to none, the engine's synchronous mode, random rf_loader_seek_epoch
 * calls, and 3 or 4 epochs each. A consumer keeps every batch it is handed and reads
 * it after a random number of further batches, half the time as late as the promise
 * allows (just before the prefetch-th following call, also across the call that
 * returns 0 at the epoch's end): by a host op pushed then (inline or on a worker
 * stream), or by waiting and reading the tensors at once. Every row must be the
 * record rf_loader_order puts at that position of the batch's epoch (index bytes,
 * payload checksum, label), and every pushed check must have run. Numbering the
 * slots afresh each epoch, or one tail slot for epochs of fewer batches than
 * prefetch, hands a batch's slot to the next epoch's first batches and fails here. */
#include "test-loader-util.h"

#define ROUNDS 160

struct pend {
	struct rf_batch b;
	uint64_t *expect;        /* record index of each row */
	unsigned lag, read_at;   /* batches handed out since / when to read it */
	int async;               /* 1: pushed as a host op, checked when it runs */
	int ran;
	const char *cfg;
};

static const struct rf_dataset *g_ds;
static uint64_t *g_ref;          /* checksum per record */
static int32_t *g_lab;
static uint64_t g_bad;

static int check_rows(struct pend *p)
{
	size_t P = g_ds->payload_bytes;
	uint8_t row[512];
	unsigned pos = 0;

	p->ran = 1;
	for (unsigned k = 0; k < p->b.nshards; k++) {
		const float *x = p->b.x[k]->data;
		const int32_t *y = p->b.y[k] ? p->b.y[k]->data : NULL;
		for (unsigned j = 0; j < p->b.shard_n[k]; j++, pos++) {
			uint64_t rec = p->expect[pos], got = 0;
			for (size_t q = 0; q < P; q++)
				row[q] = (uint8_t)lrintf(x[(size_t)j * P + q] * 255.0f);
			for (int q = 0; q < 4; q++)
				got |= (uint64_t)row[q] << (8 * q);
			if (got != (rec & 0xffffffffu) || tl_sum_bytes(row, P) != g_ref[rec] ||
			    (y && y[j] != g_lab[rec])) {
				if (g_bad++ < 5)
					fprintf(stderr, "%s: epoch %" PRIu64 " batch %" PRIu64 " row %u "
						"(read %u batches later): record %" PRIu64 ", expected %"
						PRIu64 "\n", p->cfg, p->b.epoch, p->b.index, pos, p->lag,
						got, rec);
				return 0;
			}
		}
	}
	return 0;
}

static int check_op(void *arg)
{
	return check_rows(arg);
}

static void done_pend(struct pend *p)
{
	free(p->expect);
	free(p);
}

static unsigned long long g_seed = 20260611;

static unsigned rnd(unsigned n)
{
	return (unsigned)(t_splitmix64(&g_seed) % n);
}

/* Read pending batch p now: push the check, or wait and check at once. */
static void read_now(struct tl_env *v, struct rf_loader *l, struct pend *p,
		     struct pend **all, unsigned *nall)
{
	if (p->async) {
		struct rf_tensor *rd[2 * RF_LOADER_MAX_SHARDS];
		unsigned nrd = 0;
		for (unsigned k = 0; k < p->b.nshards; k++) {
			rd[nrd++] = p->b.x[k];
			if (p->b.y[k])
				rd[nrd++] = p->b.y[k];
		}
		struct rf_stream *s = rnd(2) ? rf_device_stream(v->dev[0], 0) : NULL;
		CHECK(rf_host_op(s, check_op, p, rd, nrd, NULL, 0, "check") == 0);
		all[(*nall)++] = p; /* checked (and freed) after the final wait */
	} else {
		CHECK(rf_loader_wait(l, &p->b) == 0);
		check_rows(p);
		done_pend(p);
	}
}

static void run_config(const struct rf_dataset *file, int round)
{
	struct rf_dataset view = *file;
	struct rf_loader_opts o = { 0 };
	struct tl_env v;
	struct rf_loader *l;
	char err[512] = "", cfg[320];
	uint64_t count, nb, **orders, cur_epoch = 0, t = 0, handed = 0;
	unsigned ndev = 1 + (rnd(4) == 0) + (rnd(6) == 0), nepochs = 3 + rnd(2), mode, N;
	struct pend *q[16];
	unsigned nq = 0;
	struct pend **all;
	unsigned nall = 0;
	int sync = rnd(8) == 0;

	/* the view: a limit over the file's first records */
	count = rnd(3) ? 1 + rnd((unsigned)file->count) : file->count;
	o.batch = rnd(4) == 0 ? 1 + rnd((unsigned)count + 20) : 1 + rnd(rnd(2) ? 16 : 200);
	o.drop_last = rnd(3) == 0;
	o.prefetch = rnd(6) == 0 ? 0 : 1 + rnd(9);
	N = o.prefetch ? o.prefetch : 4;
	o.no_shuffle = rnd(5) == 0;
	o.seed = t_splitmix64(&g_seed);
	mode = rnd(3);
	if (mode == 0) {
		o.in_memory = 1;
	} else if (mode == 1) {
		o.chunk_bytes = (size_t)(1 + rnd(8)) * 1024 + rnd(2) * 100;
		o.window_chunks = 1 + rnd(8);
	} else {
		o.large_record = 16; /* every record is "large": one read each */
		o.buffered = rnd(2);
		if (count > 600)
			count = 1 + rnd(600);
		if (o.batch > 64) /* a read buffer of 8 KiB per record, per slot */
			o.batch = 1 + rnd(64);
	}
	view.count = count;
	for (unsigned s = 0; s < view.nsrc; s++)
		view.src[s].data_bytes = count * view.src[s].stride;
	if (o.batch < ndev)
		o.batch = ndev;
	if (o.drop_last && o.batch > count)
		o.drop_last = 0;
	tl_max_inflight = rnd(3) == 0 ? 1 + rnd(40) : 0;
	tl_sync = sync;
	snprintf(cfg, sizeof(cfg), "round %d: %" PRIu64 " records, batch %u, prefetch %u, %s, "
		 "%s, mode %u (chunk %zu, window %u, buffered %d), %u shards, cap %u, sync %d, "
		 "%u epochs", round, count, o.batch, o.prefetch, o.drop_last ? "drop_last" : "tail",
		 o.no_shuffle ? "file order" : "shuffled", mode, o.chunk_bytes, o.window_chunks,
		 o.buffered, ndev, tl_max_inflight, sync, nepochs);

	tl_open(&v, ndev);
	o.devices = v.dev;
	o.ndevices = ndev;
	int ret = t_msg(rf_loader_create(&l, v.e, &view, &o), err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "%s: create: %s\n", cfg, err);
		exit(1);
	}
	nb = rf_loader_batches_per_epoch(l);
	orders = calloc(nepochs + 8, sizeof(*orders));
	all = calloc((size_t)(nepochs + 8) * nb + 16, sizeof(*all));
	CHECK(orders && all);

	uint64_t epochs_left = nepochs, seeks = 0;
	while (epochs_left) {
		struct rf_batch b;
		int will_end = t == nb;
		/* the consumer reads what is due (lag == N - 1 at the latest); before the
		 * call that returns 0 it may also wait, since that call does not count */
		for (unsigned i = 0; i < nq;) {
			struct pend *p = q[i];
			if (p->lag >= p->read_at && !(will_end && rnd(2))) {
				read_now(&v, l, p, all, &nall);
				q[i] = q[--nq];
			} else {
				i++;
			}
		}
		/* now and then the front end starts another epoch early */
		if (!will_end && t > 0 && seeks < 2 && rnd(97) == 0) {
			cur_epoch += 1 + rnd(2);
			rf_loader_seek_epoch(l, cur_epoch);
			t = 0;
			seeks++;
			epochs_left--;
			if (!epochs_left)
				break;
			continue;
		}
		ret = rf_loader_next(l, &b);
		CHECK(ret >= 0);
		if (ret == 0) {
			CHECK(will_end);
			cur_epoch++;
			t = 0;
			epochs_left--;
			continue;
		}
		CHECK(!will_end);
		CHECK_EQ(b.epoch, cur_epoch);
		CHECK_EQ(b.index, t);
		for (unsigned i = 0; i < nq; i++)
			q[i]->lag++;
		handed++;
		if (!orders[cur_epoch % (nepochs + 8)] || t == 0) {
			uint64_t **op = &orders[cur_epoch % (nepochs + 8)];
			free(*op);
			*op = malloc(view.count * sizeof(**op));
			CHECK(*op);
			CHECK(rf_loader_order(l, cur_epoch, *op, view.count) == 0);
		}
		struct pend *p = calloc(1, sizeof(*p));
		CHECK(p);
		p->b = b;
		p->cfg = cfg;
		p->expect = malloc(b.n * sizeof(*p->expect));
		CHECK(p->expect);
		memcpy(p->expect, orders[cur_epoch % (nepochs + 8)] + t * o.batch,
		       b.n * sizeof(*p->expect));
		p->read_at = rnd(2) ? N - 1 : rnd(N);
		p->async = rnd(5) != 0;
		CHECK(nq < 16);
		q[nq++] = p;
		t++;
	}
	for (unsigned i = 0; i < nq; i++)
		read_now(&v, l, q[i], all, &nall);
	CHECK(rf_engine_wait_all(v.e) == 0);
	for (unsigned i = 0; i < nall; i++) {
		if (!all[i]->ran) {
			fprintf(stderr, "%s: the check of epoch %" PRIu64 " batch %" PRIu64
				" never ran\n", cfg, all[i]->b.epoch, all[i]->b.index);
			exit(1);
		}
		done_pend(all[i]);
	}
	if (g_bad) {
		fprintf(stderr, "FAIL %s: %" PRIu64 " batches held other records\n", cfg, g_bad);
		exit(1);
	}
	if (round < 8 || round % 20 == 0)
		printf("ok %s: %" PRIu64 " batches\n", cfg, handed);
	rf_loader_destroy(l);
	for (unsigned e = 0; e < nepochs + 8; e++)
		free(orders[e]);
	free(orders);
	free(all);
	tl_close(&v);
}

int main(int argc, char **argv)
{
	struct rf_dataset ds;
	const char *path;
	int rounds = argc > 1 ? atoi(argv[1]) : ROUNDS;
	uint8_t row[64];

	t_mkdir("loader-reuse");
	path = tl_make_rfrec("reuse.rfrec", 2500, 40, RF_LABEL_I32);
	CHECK_OPEN(rf_dataset_open_rfrec(&ds, path, 0), rf_last_error());
	g_ds = &ds;
	g_ref = malloc(ds.count * sizeof(*g_ref));
	g_lab = malloc(ds.count * sizeof(*g_lab));
	CHECK(g_ref && g_lab && ds.payload_bytes <= sizeof(row));
	for (uint64_t i = 0; i < ds.count; i++) {
		CHECK(rf_dataset_read_record(&ds, i, row, &g_lab[i]) == 0);
		g_ref[i] = tl_sum_bytes(row, ds.payload_bytes);
	}
	for (int r = 0; r < rounds; r++)
		run_config(&ds, r);
	printf("%d random configurations: every batch intact until the prefetch-th "
	       "following batch\n", rounds);
	free(g_ref);
	free(g_lab);
	rf_dataset_close(&ds);
	return 0;
}
