/* test-train-epoch: whole epochs of the trainer against an independent reference.
 * The MLP trains 2 epochs on 1,000 records with batch 64 (15 full batches and a last
 * one of 40, every epoch in a new order) through everything asynchronous: loader,
 * window of two iterations, per-layer SGD pushed right after each gradient (also with
 * --streams 2: weight gradients and SGD on a second stream), and with --devices 2 the
 * split batches, kv-store sums and lr/K steps. The reference is plain
 * C in float64 here: the same initial weights (read from the trainer before it
 * trains), the records in the order the loader says it uses (rf_loader_order for
 * (seed, epoch)), pixels x = u8 / 255, forward, softmax cross-entropy (mean per batch),
 * backward and w -= lr*g. The trainer's float32 weights must agree to 1e-6 (absolute;
 * the weights are ~0.1; float32 rounding over 32 steps gives ~1e-8), and its reported
 * mean training loss to 1e-5 relative. (This is how the trainer was checked against
 * PyTorch given the same order and initial weights: max |dw| 5.6e-8 after an epoch of
 * 313 steps.) Skips (77) without the dataset. */
#include "train-test.h"
#include "trainer.h"
#include "dataset.h"
#include "loader.h"

enum { LIMIT = 1000, B = 64, EPOCHS = 2 };

static void reference(struct rf_dataset *ds, const uint64_t *ord, unsigned n_total,
		      const struct rf_model_spec *sp, double *W, double lr, double *loss_sum)
{
	double *w1 = W + sp->p[0].offset, *b1 = W + sp->p[1].offset;
	double *w2 = W + sp->p[2].offset, *b2 = W + sp->p[3].offset;
	double *G = calloc(sp->numel, sizeof(double));
	double *g1 = G + sp->p[0].offset, *gb1 = G + sp->p[1].offset;
	double *g2 = G + sp->p[2].offset, *gb2 = G + sp->p[3].offset;
	double x[784], h[256], o[10], dl[10], dh[256];
	uint8_t px[784];
	int32_t lab;

	CHECK(G);
	for (unsigned p0 = 0; p0 < n_total; p0 += B) {
		unsigned n = n_total - p0 < B ? n_total - p0 : B;
		memset(G, 0, sp->numel * sizeof(double));
		for (unsigned i = 0; i < n; i++) {
			CHECK_OK(rf_dataset_read_record(ds, ord[p0 + i], px, &lab));
			for (int j = 0; j < 784; j++)
				x[j] = (float)((float)px[j] * (1.0f / 255.0f)); /* the loader's decode */
			for (int k = 0; k < 256; k++) {
				double s = b1[k];
				for (int j = 0; j < 784; j++)
					s += w1[k * 784 + j] * x[j];
				h[k] = s > 0 ? s : 0;
			}
			double mx = -1e300, se = 0;
			for (int k = 0; k < 10; k++) {
				double s = b2[k];
				for (int j = 0; j < 256; j++)
					s += w2[k * 256 + j] * h[j];
				o[k] = s;
				mx = s > mx ? s : mx;
			}
			for (int k = 0; k < 10; k++)
				se += exp(o[k] - mx);
			*loss_sum += log(se) + mx - o[lab];
			for (int k = 0; k < 10; k++)
				dl[k] = (exp(o[k] - mx) / se - (k == lab)) / n;
			for (int k = 0; k < 10; k++) {
				gb2[k] += dl[k];
				for (int j = 0; j < 256; j++)
					g2[k * 256 + j] += dl[k] * h[j];
			}
			for (int j = 0; j < 256; j++) {
				double s = 0;
				for (int k = 0; k < 10; k++)
					s += dl[k] * w2[k * 256 + j];
				dh[j] = h[j] > 0 ? s : 0;
			}
			for (int k = 0; k < 256; k++) {
				gb1[k] += dh[k];
				if (dh[k] != 0)
					for (int j = 0; j < 784; j++)
						g1[k * 784 + j] += dh[k] * x[j];
			}
		}
		for (size_t i = 0; i < sp->numel; i++)
			W[i] -= lr * G[i];
	}
	free(G);
}

static void run(struct tt_env *t, unsigned K, unsigned streams)
{
	const struct rf_model_spec *sp = rf_model_spec("mlp");
	struct rf_train_opts o = { 0 };
	struct rf_trainer *tr;
	struct rf_epoch_stats st;
	struct rf_dataset ds, view;
	struct rf_loader *ld;
	struct rf_device *cpu;
	struct rf_loader_opts lo = { 0 };
	char p[2][600];
	float *P = malloc(sp->numel * 4);
	double *W = malloc(sp->numel * sizeof(double));
	uint64_t *ord = malloc(LIMIT * sizeof(uint64_t));

	CHECK(P && W && ord);
	o.model = "mlp";
	o.data_dir = tt_data_dir();
	o.seed = 9;
	o.limit = LIMIT;
	o.batch_size = B;
	o.devices = K;
	o.streams = streams;
	o.no_eval = 1;
	if (rf_trainer_create(&tr, t->eng, &o) < 0) {
		fprintf(stderr, "trainer: %s\n", rf_last_error());
		exit(1);
	}
	CHECK_OK(rf_trainer_read_params(tr, 0, P));
	for (size_t i = 0; i < sp->numel; i++)
		W[i] = P[i];

	/* the same records: a loader with the trainer's options tells the order */
	for (int i = 0; i < 2; i++) {
		static const char *nm[2] = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte" };
		snprintf(p[i], sizeof(p[i]), "%s/%s", o.data_dir, nm[i]);
		if (access(p[i], R_OK) != 0)
			snprintf(p[i], sizeof(p[i]), "%s/%s.gz", o.data_dir, nm[i]);
	}
	if (rf_dataset_open_idx_pair(&ds, p[0], p[1], 10, 0) < 0) {
		fprintf(stderr, "%s\n", rf_last_error());
		exit(1);
	}
	view = ds;
	view.count = LIMIT;
	CHECK_OK(rf_cpu_open(t->eng, NULL, &cpu));
	lo.batch = B;
	lo.seed = o.seed;
	lo.devices = &cpu;
	lo.ndevices = 1;
	CHECK_OK(rf_loader_create(&ld, t->eng, &view, &lo));

	for (unsigned e = 0; e < EPOCHS; e++) {
		double ref_loss = 0, dmax = 0, wmax = 0;
		CHECK_OK(rf_trainer_epoch(tr, &st));
		CHECK_OK(rf_trainer_read_params(tr, 0, P));
		CHECK_OK(rf_loader_order(ld, e, ord, LIMIT));
		reference(&ds, ord, LIMIT, sp, W, o.lr ? o.lr : 0.1f, &ref_loss);
		for (size_t i = 0; i < sp->numel; i++) {
			dmax = fmax(dmax, fabs(W[i] - P[i]));
			wmax = fmax(wmax, fabs(W[i]));
		}
		ref_loss /= LIMIT;
		printf("K=%u streams=%u epoch %u: max|w - w_ref| %.2e (max|w| %.3f), loss %.7f (ref %.7f)\n", K,
		       streams, e + 1, dmax, wmax, st.train_loss, ref_loss);
		if (!(dmax <= 1e-6) || !(fabs(st.train_loss - ref_loss) <= 1e-5 * ref_loss)) {
			fprintf(stderr, "FAIL: K=%u epoch %u differs from the float64 reference\n", K, e + 1);
			exit(1);
		}
	}
	rf_loader_destroy(ld);
	rf_trainer_destroy(tr);
	rf_device_close(cpu);
	rf_dataset_close(&ds);
	free(P);
	free(W);
	free(ord);
}

int main(void)
{
	struct tt_env t;

	tt_data_dir();
	tt_open(&t);
	run(&t, 1, 1);
	run(&t, 1, 2);   /* weight gradients and SGD on a second stream */
	run(&t, 2, 1);
	tt_close(&t);
	return 0;
}
