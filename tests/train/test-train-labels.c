/* test-train-labels: a .rfrec whose header leaves its class count open (num_classes 0,
 * which the writer allows) and holds a label outside the models' 10 classes. Training
 * and evaluating on it must fail with one message naming the file and the record --
 * not reach the loss kernel, whose error could only say "a label is outside [0, 10)".
 * The same files with every label in range train. A file with no test set named or
 * beside it is refused for want of one, unless nothing is evaluated (no_eval: it trains,
 * and rf_trainer_evaluate says -ENOENT). No dataset needed: the records are written
 * here (zeros, labels i % 10). */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include "train-test.h"
#include "trainer.h"
#include "dataset.h"

static char dir[256];

/* A set of n records labelled i % 10 (bad_at: 200), not saying its class count. */
static void write_set(const char *path, unsigned n, int bad_at)
{
	tt_write_rfrec(path, n, 0, 0, bad_at);
}

/* Train one epoch of the MLP on train_path (test set beside it); the result. */
static int run(struct tt_env *t, const char *train_path, int eval, char *msg, size_t len)
{
	struct rf_train_opts o = { 0 };
	struct rf_trainer *tr;
	struct rf_epoch_stats st;
	int ret;

	o.model = "mlp";
	o.data_dir = train_path;
	o.batch_size = 64;
	o.no_eval = !eval;
	if ((ret = rf_trainer_create(&tr, t->eng, &o)) < 0) {
		snprintf(msg, len, "%s", rf_last_error());
		return ret;
	}
	ret = rf_trainer_epoch(tr, &st);
	snprintf(msg, len, "%s", ret < 0 ? rf_trainer_last_error(tr) : "");
	rf_trainer_destroy(tr);
	return ret;
}

int main(void)
{
	struct tt_env t;
	const char *tmp = getenv("TMPDIR");
	char tr[300], te[300], msg[1024];
	int ret;

	snprintf(dir, sizeof(dir), "%s/rf-train-labels-XXXXXX", tmp ? tmp : "/tmp");
	CHECK(mkdtemp(dir));
	snprintf(tr, sizeof(tr), "%s/set-train.rfrec", dir);
	snprintf(te, sizeof(te), "%s/set-t10k.rfrec", dir);
	tt_open(&t);

	/* in range: trains */
	write_set(tr, 256, -1);
	write_set(te, 128, -1);
	ret = run(&t, tr, 1, msg, sizeof(msg));
	printf("  labels in range      -> %d %s\n", ret, msg);
	CHECK_OK(ret);

	/* record 77 of the training set has label 200 */
	write_set(tr, 256, 77);
	ret = run(&t, tr, 0, msg, sizeof(msg));
	printf("  training label 200   -> %d: %s\n", ret, msg);
	CHECK(ret < 0);
	CHECK(strstr(msg, "set-train.rfrec") && strstr(msg, "record 77") &&
	      strstr(msg, "outside [0, 10)"));

	/* the same in the test set, at evaluation */
	write_set(tr, 256, -1);
	write_set(te, 128, 5);
	ret = run(&t, tr, 1, msg, sizeof(msg));
	printf("  test-set label 200   -> %d: %s\n", ret, msg);
	CHECK(ret < 0);
	CHECK(strstr(msg, "set-t10k.rfrec") && strstr(msg, "record 5"));

	/* a file with no test set named or beside it: refused for want of one, unless
	 * nothing is evaluated (no_eval: it trains; an evaluation asked says why not) */
	{
		char lone[300];
		struct rf_train_opts o = { 0 };
		struct rf_trainer *x;
		struct rf_epoch_stats st;
		double acc, loss;
		snprintf(lone, sizeof(lone), "%s/alone.rfrec", dir);
		write_set(lone, 128, -1);
		ret = run(&t, lone, 1, msg, sizeof(msg));
		CHECK(ret == -ENOENT && strstr(msg, "no test set"));
		o.model = "mlp";
		o.data_dir = lone;
		o.batch_size = 64;
		o.no_eval = 1;
		CHECK_OK(rf_trainer_create(&x, t.eng, &o));
		CHECK_OK(rf_trainer_epoch(x, &st));
		CHECK_EQ(rf_trainer_test_samples(x), 0);
		CHECK_EQ(rf_trainer_evaluate(x, &acc, &loss), -ENOENT);
		CHECK(strstr(rf_trainer_last_error(x), "no test set (no_eval"));
		rf_trainer_destroy(x);
		unlink(lone);
		printf("  no test set, no_eval -> trains; evaluate: -ENOENT\n");
	}
	/* the same for a Fashion-MNIST directory holding the training files only (where
	 * the data is installed: not needed otherwise) */
	{
		const char *fm = getenv("RF_FASHION_MNIST");
		char d[300], src[600], dst[600];
		struct rf_train_opts o = { 0 };
		struct rf_trainer *x;
		struct rf_epoch_stats st;
		static const char *const f[2] = { "train-images-idx3-ubyte.gz",
						  "train-labels-idx1-ubyte.gz" };
		snprintf(src, sizeof(src), "%s/%s", fm ? fm : "", f[0]);
		if (fm && access(src, R_OK) == 0) {
			snprintf(d, sizeof(d), "%s/idx", dir);
			CHECK(mkdir(d, 0755) == 0);
			for (int i = 0; i < 2; i++) {
				snprintf(src, sizeof(src), "%s/%s", fm, f[i]);
				snprintf(dst, sizeof(dst), "%s/%s", d, f[i]);
				CHECK(symlink(src, dst) == 0);
			}
			o.model = "mlp";
			o.data_dir = d;
			o.batch_size = 64;
			o.limit = 256;
			CHECK_EQ(rf_trainer_create(&x, t.eng, &o), -ENOENT);  /* evaluation wants it */
			o.no_eval = 1;
			CHECK_OK(rf_trainer_create(&x, t.eng, &o));
			CHECK_OK(rf_trainer_epoch(x, &st));
			CHECK_EQ(rf_trainer_test_samples(x), 0);
			rf_trainer_destroy(x);
			for (int i = 0; i < 2; i++) {
				snprintf(dst, sizeof(dst), "%s/%s", d, f[i]);
				unlink(dst);
			}
			rmdir(d);
			printf("  IDX files without t10k, no_eval -> trains\n");
		}
	}

	tt_close(&t);
	unlink(tr);
	unlink(te);
	rmdir(dir);
	return 0;
}
