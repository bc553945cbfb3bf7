/* fuzz-jobfile: rf-iobench's --job files (tools/iobench-jobparse.c): the text parsed into
 * sections, or one line naming the file and the line; every key kept is one of the
 * table's, every value fits its field, every line number is a line of the file. */
#include "fuzz.h"

#include "iobench-jobparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct jp_file jf;
	char err[1400];
	FILE *f = fmemopen((void *)d, n ? n : 1, "r");
	if (!f)
		return 0;
	if (!n)
		fgetc(f); /* an empty file: read nothing */
	int lines = 1;
	for (size_t i = 0; i < n; i++)
		lines += d[i] == '\n';
	if (jp_parse(f, "fuzz.fio", &jf, err, sizeof(err)) < 0) {
		FZ_ASSERT(!strncmp(err, "--job fuzz.fio", 14) && !strchr(err, '\n'));
	} else {
		for (unsigned s = 0; s < jf.n; s++) {
			FZ_ASSERT(jf.secs[s].line >= 1 && jf.secs[s].line <= lines && jf.secs[s].name[0]);
			for (unsigned k = 0; k < jf.secs[s].n; k++) {
				const struct kv *e = &jf.secs[s].kv[k];
				FZ_ASSERT(lookup(e->key) >= 0 && e->line > jf.secs[s].line &&
					  e->line <= lines);
			}
		}
	}
	jp_free(&jf);
	fclose(f);
	return 0;
}
