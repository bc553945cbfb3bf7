/* test-train-broken: a pass that fails after pushing leaves the trainer's state
 * poisoned (markers, slots, and in training the weights, as of a step it cannot name).
 * Every later pass is refused at once with -EIO and a message that names the first
 * failure and says how to go on (a new trainer and a checkpoint) -- before, each
 * failed again in a stale op ("iteration failed in op loader_read") even once the
 * data were whole again. After a failed training epoch: epoch, evaluate, load, save,
 * the parameter hash and reads refused. After a failed evaluation (the test set cut
 * short): epochs refused, but save and the hash work (the weights are as trained), and
 * a new trainer loads that checkpoint and trains on. read_params' own refusals name
 * the replica; a call from another thread is refused with a message (-EDEADLK). */
#include <pthread.h>
#include <sys/stat.h>
#include "train-test.h"
#include "trainer.h"
#include "dataset.h"

static char dir[256];

static void cut(const char *path)
{
	struct stat sb;
	CHECK_OK(stat(path, &sb));
	CHECK_OK(truncate(path, sb.st_size / 3));
}

static void refused_broken(struct rf_trainer *t, int ret, const char *first)
{
	const char *m = rf_trainer_last_error(t);
	if (ret != -EIO || !strstr(m, "a pass failed before") || !strstr(m, first) ||
	    !strstr(m, "rf_trainer_load a checkpoint")) {
		fprintf(stderr, "got %d '%s', want -EIO naming '%s'\n", ret, m, first);
		exit(1);
	}
}

static int other_ret;
static char other_msg[512];

static void *other(void *arg)
{
	struct rf_trainer *t = arg;
	double acc, loss;

	other_ret = rf_trainer_evaluate(t, &acc, &loss);
	snprintf(other_msg, sizeof(other_msg), "%s", rf_trainer_last_error(t));
	return NULL;
}

int main(void)
{
	struct tt_env env;
	char tr[300], te[300], ck[300];
	struct rf_epoch_stats st;
	struct rf_trainer *t;
	double acc, loss;
	uint64_t h;
	float *w;

	snprintf(dir, sizeof(dir), "%s/rf-broken.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	CHECK(mkdtemp(dir));
	snprintf(tr, sizeof(tr), "%s/x-train.rfrec", dir);
	snprintf(te, sizeof(te), "%s/x-test.rfrec", dir);
	snprintf(ck, sizeof(ck), "%s/c.ckpt", dir);
	tt_write_rfrec(tr, 512, 10, 1, -1);
	tt_write_rfrec(te, 256, 10, 1, -1);
	tt_open(&env);
	struct rf_train_opts o = { .model = "mlp", .data_dir = tr, .test_data = te,
				   .batch_size = 32, .seed = 5 };

	/* a training epoch fails: the data cut short */
	CHECK_OK(rf_trainer_create(&t, env.eng, &o));
	CHECK_OK(rf_trainer_epoch(t, &st));
	CHECK_OK(rf_trainer_save(t, ck));
	cut(tr);
	CHECK(rf_trainer_epoch(t, &st) < 0);
	CHECK(strstr(rf_trainer_last_error(t), "x-train.rfrec"));
	tt_write_rfrec(tr, 512, 10, 1, -1);        /* whole again: still refused */
	refused_broken(t, rf_trainer_epoch(t, &st), "x-train.rfrec");
	refused_broken(t, rf_trainer_evaluate(t, &acc, &loss), "x-train.rfrec");
	refused_broken(t, rf_trainer_save(t, ck), "x-train.rfrec");
	refused_broken(t, rf_trainer_param_hash(t, &h), "x-train.rfrec");
	refused_broken(t, rf_trainer_load(t, ck), "x-train.rfrec");
	CHECK(w = malloc(rf_trainer_spec(t)->numel * sizeof(float)));
	refused_broken(t, rf_trainer_read_params(t, 0, w), "x-train.rfrec");
	CHECK_EQ(rf_trainer_read_params(t, 1, w), -EINVAL);
	CHECK(strstr(rf_trainer_last_error(t), "replica 1 of 1"));
	CHECK_EQ(rf_trainer_read_params(t, 0, NULL), -EINVAL);
	CHECK(strstr(rf_trainer_last_error(t), "dst NULL"));
	rf_trainer_destroy(t);
	/* the way on: a new trainer loads the checkpoint and trains */
	CHECK_OK(rf_trainer_create(&t, env.eng, &o));
	CHECK_OK(rf_trainer_load(t, ck));
	CHECK_OK(rf_trainer_epoch(t, &st));
	CHECK_EQ(rf_trainer_epochs_done(t), 2);
	rf_trainer_destroy(t);

	/* an evaluation fails (the test set cut short): the weights are as trained */
	CHECK_OK(rf_trainer_create(&t, env.eng, &o));
	cut(te);
	CHECK(rf_trainer_epoch(t, &st) < 0);
	CHECK(strstr(rf_trainer_last_error(t), "x-test.rfrec"));
	tt_write_rfrec(te, 256, 10, 1, -1);
	refused_broken(t, rf_trainer_epoch(t, &st), "x-test.rfrec");
	refused_broken(t, rf_trainer_evaluate(t, &acc, &loss), "x-test.rfrec");
	CHECK_OK(rf_trainer_param_hash(t, &h));
	CHECK_OK(rf_trainer_read_params(t, 0, w));
	CHECK_OK(rf_trainer_save(t, ck));
	rf_trainer_destroy(t);
	CHECK_OK(rf_trainer_create(&t, env.eng, &o));
	CHECK_OK(rf_trainer_load(t, ck));
	uint64_t h2;
	CHECK_OK(rf_trainer_param_hash(t, &h2));
	CHECK_EQ(h2, h);
	CHECK_OK(rf_trainer_evaluate(t, &acc, &loss));
	CHECK_OK(rf_trainer_epoch(t, &st));
	rf_trainer_destroy(t);

	/* from another thread: refused with a message (it was a bare EPERM) */
	CHECK_OK(rf_trainer_create(&t, env.eng, &o));
	pthread_t th;
	CHECK(pthread_create(&th, NULL, other, t) == 0);
	CHECK(pthread_join(th, NULL) == 0);
	CHECK_EQ(other_ret, -EDEADLK);
	CHECK(strstr(other_msg, "the trainer called from a thread other than the engine's"));
	rf_trainer_destroy(t);

	free(w);
	tt_close(&env);
	snprintf(ck, sizeof(ck), "rm -rf '%s'", dir);
	CHECK(system(ck) == 0);
	printf("trainer: a failed pass refuses what follows, naming it; a checkpoint goes on\n");
	return 0;
}
