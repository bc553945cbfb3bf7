/* fuzz-export: rf-infer's model.json reader (train/export.c, rf_export_open): what opens
 * names a model of the table, for the input it records. (The params.rfck beside it is read by the checkpoint
 * reader, which fuzz-ckpt covers; a real one is 0.8 MB and more, past what a mutation
 * run explores well.) The corpus holds the exports' model.json of the MLP, LeNet and
 * ResNet-18 as rf-train --export writes them. */
#include "fuzz.h"

#include <errno.h>

#include "export.h"
#include "model.h"

static char dir[64];

/* the directory and its one file, gone at exit (the tests run this harness often) */
static void rm_dir(void)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/model.json", dir);
	unlink(p);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/tmp/rf-fuzz-export-XXXXXX");
	if (!mkdtemp(dir))
		abort();
	atexit(rm_dir);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct rf_export x;
	char p[128];
	snprintf(p, sizeof(p), "%s/model.json", dir);
	FILE *f = fopen(p, "wb");
	FZ_ASSERT(f);
	if (n)
		FZ_ASSERT(fwrite(d, 1, n, f) == n);
	fclose(f);
	if (rf_export_open(dir, &x) == 0) {
		/* the model it names, for the input it says (specs are interned) */
		FZ_ASSERT(x.spec && rf_model_spec_for(x.spec->name, &x.spec->in) == x.spec);
		/* its class names against a data set's: 0 or -EINVAL, never more */
		static const char *const names[2] = { "a", "b" };
		int r = rf_export_check_classes(&x, names, 2);
		FZ_ASSERT(r == 0 || r == -EINVAL);
	}
	return 0;
}
