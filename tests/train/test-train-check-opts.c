/* test-train-check-opts: rf_trainer_check_opts refuses from the options alone what
 * rf_trainer_create would, without an engine and without opening anything that could
 * block: an unknown model, impossible numbers, https, a FIFO or a device as --data, an
 * IDX file of a --data directory that is a FIFO or a directory, a test set that is no
 * regular file or is given beside IDX data, a .rfrec with a bad header; each with
 * -errno and one message naming the option and the path; a device kind there is not,
 * a learning rate that is negative, NaN, infinite or past 1e6, an init past the
 * enum, a batch or prefetch a loader could not hold, a warm-up that would wrap the
 * schedule, negative BLAS threads, a zero, NaN or infinite --normalize std or mean,
 * an empty --data. A good configuration, and a
 * data directory that is missing (rf_trainer_create says how to install it), pass. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include "train-test.h"
#include "trainer.h"
#include "dataset.h"

static char dir[256];

static void refused(const struct rf_train_opts *o, int want, const char *a, const char *b)
{
	int ret = rf_trainer_check_opts(o);
	if (ret != want || !strstr(rf_last_error(), a) || (b && !strstr(rf_last_error(), b))) {
		fprintf(stderr, "got %d '%s', want %d naming '%s' and '%s'\n", ret, rf_last_error(),
			want, a, b ? b : "");
		exit(1);
	}
}

int main(void)
{
	struct rf_train_opts o = { 0 };
	char p[512], q[512], idx[600];
	int fd;

	snprintf(dir, sizeof(dir), "%s/rf-check-opts.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	CHECK(mkdtemp(dir));

	/* good: a missing directory is left to rf_trainer_create */
	snprintf(p, sizeof(p), "%s/none", dir);
	o.data_dir = p;
	CHECK_OK(rf_trainer_check_opts(&o));
	o.model = "resnet99";
	refused(&o, -EINVAL, "--model resnet99", "lenet");
	o.model = "lenet";
	o.devices = 100;
	refused(&o, -EINVAL, "--devices 100", NULL);
	o.devices = 0;
	o.momentum = -1.0f;
	refused(&o, -EINVAL, "momentum", NULL);
	o.momentum = 0;
	/* what create refused only after opening things, or took and went wrong with */
	o.device = "gpu";
	refused(&o, -EINVAL, "--device gpu", "expected cpu");
	o.device = "";
	refused(&o, -EINVAL, "--device ", "expected cpu");
	o.device = NULL;
	float bad_lr[] = { -0.1f, NAN, INFINITY, 1e30f };
	for (unsigned i = 0; i < 4; i++) {
		o.lr = bad_lr[i];
		refused(&o, -EINVAL, "--lr", "expected a learning rate in (0, 1e6]");
	}
	o.lr = 0;
	o.init = (enum rf_init)99;
	refused(&o, -EINVAL, "init 99", "RF_INIT_KAIMING");
	o.init = (enum rf_init)-5;
	refused(&o, -EINVAL, "init -5", NULL);
	o.init = RF_INIT_DEFAULT;
	o.batch_size = UINT32_MAX;
	refused(&o, -EINVAL, "batch_size 4294967295", NULL);
	o.batch_size = 0;
	o.prefetch = UINT32_MAX;
	refused(&o, -EINVAL, "prefetch 4294967295", NULL);
	o.prefetch = 0;
	o.sched.warmup_epochs = UINT32_MAX;
	refused(&o, -EINVAL, "warm-up 4294967295", NULL);
	o.sched.warmup_epochs = 0;
	o.blas_threads = -3;
	refused(&o, -EINVAL, "blas_threads -3", NULL);
	o.blas_threads = 0;
	o.norm_channels = 1;
	float bad_std[] = { 0.0f, NAN, INFINITY };
	for (unsigned i = 0; i < 3; i++) {
		o.norm_mean[0] = 0.5f;
		o.norm_std[0] = bad_std[i];
		refused(&o, -EINVAL, "--normalize: channel 0", "nonzero std");
	}
	o.norm_std[0] = 0.25f;
	o.norm_mean[0] = INFINITY;
	refused(&o, -EINVAL, "--normalize: channel 0", "finite");
	o.norm_channels = 0;
	o.norm_mean[0] = 0;
	o.data_dir = "";
	refused(&o, -EINVAL, "--data", "empty path");
	snprintf(p, sizeof(p), "%s/none", dir);
	o.data_dir = p;

	/* https, a FIFO and a device as --data */
	o.data_dir = "https://example.invalid/x-train.rfrec";
	refused(&o, -EPROTONOSUPPORT, "https is not supported", "example.invalid");
	snprintf(p, sizeof(p), "%s/fifo", dir);
	CHECK_OK(mkfifo(p, 0600));
	o.data_dir = p;
	refused(&o, -EINVAL, "--data", "is a FIFO, expected a directory");
	o.data_dir = "/dev/null";
	refused(&o, -EINVAL, "/dev/null", "is a character device");

	/* an IDX file of the directory that is a FIFO, or a directory */
	snprintf(p, sizeof(p), "%s/idx", dir);
	CHECK_OK(mkdir(p, 0700));
	snprintf(idx, sizeof(idx), "%s/train-images-idx3-ubyte.gz", p);
	CHECK_OK(mkfifo(idx, 0600));
	o.data_dir = p;
	refused(&o, -EINVAL, "train-images-idx3-ubyte.gz", "is a FIFO");
	CHECK_OK(unlink(idx));
	snprintf(idx, sizeof(idx), "%s/t10k-labels-idx1-ubyte", p);
	CHECK_OK(mkdir(idx, 0700));
	refused(&o, -EINVAL, "t10k-labels-idx1-ubyte", "is a directory");
	CHECK_OK(rmdir(idx));
	CHECK_OK(rf_trainer_check_opts(&o));          /* an empty directory: create's to say */
	o.image_size = 32;                            /* IDX: no images, one channel */
	refused(&o, -EINVAL, "--image-size 32", "IDX files");
	o.image_size = 0;
	o.norm_channels = 3;
	for (int c = 0; c < 3; c++)
		o.norm_std[c] = 0.25f;
	refused(&o, -EINVAL, "--normalize", "for 3 channels");
	o.norm_channels = 0;

	/* test sets: beside IDX data, not a regular file, a bad header */
	snprintf(q, sizeof(q), "%s/x-test.rfrec", dir);
	tt_write_rfrec(q, 4, 10, 0, -1);
	o.test_data = q;
	refused(&o, -EINVAL, "--test-data", "a directory of IDX files holds both sets");
	snprintf(p, sizeof(p), "%s/x-train.rfrec", dir);
	tt_write_rfrec(p, 4, 10, 0, -1);
	o.data_dir = p;
	CHECK_OK(rf_trainer_check_opts(&o));
	snprintf(idx, sizeof(idx), "%s/fifo", dir);
	o.test_data = idx;
	refused(&o, -EINVAL, "--test-data", "is a FIFO, expected a regular file");
	o.test_data = "";
	refused(&o, -EINVAL, "--test-data", "empty path");
	snprintf(q, sizeof(q), "%s/bad.rfrec", dir);
	fd = open(q, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, "not a record file, at all, no", 29) == 29);
	close(fd);
	o.test_data = q;
	refused(&o, -EINVAL, "--test-data", "bad.rfrec");
	o.test_data = NULL;
	o.data_dir = q;
	refused(&o, -EINVAL, "--data", "bad.rfrec");
	printf("rf_trainer_check_opts: every refusal named, nothing blocked\n");
	snprintf(p, sizeof(p), "rm -rf '%s'", dir);
	CHECK(system(p) == 0);
	return 0;
}
