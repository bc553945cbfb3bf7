/* train-export-fail: an export that fails leaves the export already there whole. An MLP
 * is exported; its parameters change (another seed); the second export into the same
 * directory then fails -- model.json.tmp cannot be created (a directory stands there,
 * as a full disk or an I/O error would stop the write), or params.rfck.tmp cannot --
 * and the directory must still hold the first export, which loads: before, params.rfck
 * was replaced first and a failed model.json write left a pair that did not load (both
 * exports lost). No temporary file stays behind; with the obstacles gone the second
 * export is written and loads with its own hash. */
#include <sys/stat.h>

#include "train-test.h"
#include "model.h"
#include "export.h"

static char dir[4096];

static uint64_t loads(void)
{
	struct rf_export x;

	CHECK_OK(rf_export_open(dir, &x));
	CHECK_OK(rf_export_load(NULL, &x, NULL));  /* params.rfck checked against model.json */
	return x.param_hash;
}

static void init(struct tt_env *t, struct rf_model *m, uint64_t seed)
{
	struct rf_prng *g = NULL;

	CHECK_OK(rf_prng_create(t->eng, seed, "init", &g));
	CHECK_OK(rf_model_init(m, g, RF_INIT_DEFAULT));
	rf_prng_destroy(g);
}

static void no_tmp(void)
{
	char p[4200];
	struct stat st;

	snprintf(p, sizeof(p), "%s/model.json.tmp", dir);
	CHECK(lstat(p, &st) < 0 && errno == ENOENT);
	snprintf(p, sizeof(p), "%s/params.rfck.tmp", dir);
	CHECK(lstat(p, &st) < 0 && errno == ENOENT);
}

/* The second export fails with obstacle (a directory) at dir/name: the first stays. */
static void blocked(struct rf_model *m, const char *name, uint64_t first)
{
	char p[4200];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	CHECK_OK(mkdir(p, 0755));
	int ret = rf_model_export(NULL, m, dir);
	CHECK(ret < 0);
	printf("blocked at %s: %s\n", name, rf_last_error());
	CHECK(strstr(rf_last_error(), name));
	CHECK_OK(rmdir(p));
	CHECK_EQ(loads(), first);
	no_tmp();
}

int main(void)
{
	struct tt_env t;
	struct rf_device *d;
	struct rf_model *m = NULL;
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/rf-export-fail.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	CHECK(mkdtemp(dir));
	tt_open(&t);
	CHECK_OK(rf_cpu_open(t.eng, NULL, &d));
	CHECK_OK(rf_model_create(&m, rf_model_spec("mlp"), d, NULL, NULL));
	init(&t, m, 1);
	CHECK_OK(rf_model_export(NULL, m, dir));
	uint64_t first = loads();
	no_tmp();

	init(&t, m, 2);  /* other parameters: another hash */
	blocked(m, "model.json.tmp", first);
	CHECK(strstr(rf_last_error(), "left as it was"));
	blocked(m, "params.rfck.tmp", first);

	CHECK_OK(rf_model_export(NULL, m, dir));
	uint64_t second = loads();
	CHECK(second != first);
	no_tmp();

	rf_model_destroy(m);
	rf_device_close(d);
	tt_close(&t);
	char p[4200];
	snprintf(p, sizeof(p), "%s/model.json", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/params.rfck", dir);
	unlink(p);
	rmdir(dir);
	printf("train-export-fail: a failed export left the one before it whole\n");
	return 0;
}
