/* test-train-determinism: two trainings with the same seed give the same weights bit
 * for bit, and another seed gives different ones. Each model trains on a subset of
 * Fashion-MNIST (MLP: 2 epochs of 2048 records; LeNet: 1 epoch of 1024, in every
 * build) through the whole asynchronous path: loader shuffle from (seed,
 * epoch), Philox init, two iterations in flight, SGD per layer right after its
 * gradient. Skips (77) when the dataset is not installed. */
#include "train-test.h"
#include "trainer.h"

static void train(struct tt_env *t, const char *model, uint64_t seed, uint64_t limit,
		  unsigned epochs, float *out, double *loss)
{
	struct rf_train_opts o = { 0 };
	struct rf_trainer *tr;
	struct rf_epoch_stats st;

	o.model = model;
	o.data_dir = tt_data_dir();
	o.seed = seed;
	o.limit = limit;
	o.no_eval = 1;
	if (rf_trainer_create(&tr, t->eng, &o) < 0) {
		fprintf(stderr, "trainer: %s\n", rf_last_error());
		exit(1);
	}
	for (unsigned e = 0; e < epochs; e++) {
		if (rf_trainer_epoch(tr, &st) < 0) {
			fprintf(stderr, "epoch: %s\n", rf_last_error());
			exit(1);
		}
	}
	*loss = st.train_loss;
	CHECK_OK(rf_trainer_read_params(tr, 0, out));
	rf_trainer_destroy(tr);
}

static void check(struct tt_env *t, const char *model, uint64_t limit, unsigned epochs)
{
	size_t n = rf_model_spec(model)->numel;
	float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
	double la, lb, lc;
	long d;

	CHECK(a && b && c);
	train(t, model, 42, limit, epochs, a, &la);
	train(t, model, 42, limit, epochs, b, &lb);
	train(t, model, 43, limit, epochs, c, &lc);
	d = tt_bitdiff(a, b, n);
	if (d >= 0) {
		fprintf(stderr, "FAIL: %s: same seed, weights differ at %ld: %.9g vs %.9g\n",
			model, d, a[d], b[d]);
		exit(1);
	}
	CHECK(la == lb);
	CHECK(tt_bitdiff(a, c, n) >= 0);
	printf("%s: seed 42 twice: %zu floats bitwise equal, loss %.6f both; seed 43: loss %.6f, "
	       "weights differ\n", model, n, la, lc);
	free(a);
	free(b);
	free(c);
}

int main(void)
{
	struct tt_env t;

	tt_data_dir();
	tt_open(&t);
	check(&t, "mlp", 2048, 2);
	check(&t, "lenet", 1024, 1);
	tt_close(&t);
	return 0;
}
