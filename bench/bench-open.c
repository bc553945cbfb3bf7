/* rf-bench open: what opening a dataset costs -- rf_dataset_open_file on a path or a
 * brace pattern of WebDataset shards, --repeat times, each open's seconds and the
 * records it found (bench/shard-open drops the page cache between runs and compares a
 * shard set's first open, which scans the tars and writes their indexes, with later
 * ones, which read the indexes, and with Python's tarfile scanning the same shards). */
#include <stdio.h>
#include <string.h>

#include <ringflow/dataset.h>
#include <ringflow/ring.h>

#include "bench-args.h"
#include "bench.h"

static const char usage[] =
	"usage: rf-bench open [--repeat N] [--json] PATH\n"
	"  PATH        a dataset rf_dataset_open_file opens: an .rfrec (or http:// URL), a\n"
	"              WebDataset shard, or a brace pattern of shards (quote it:\n"
	"              'DIR/shard-{0..15}.tar')\n"
	"  --repeat N  opens one after the other, 1..1000 (default 1)\n"
	"  --json      one line of JSON: path, records, seconds of each open\n";

int rf_bench_open(int argc, char **argv)
{
	const char *path = NULL;
	uint64_t repeat = 1;
	int json = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (bench_is_help(a)) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(a, "--repeat")) {
			int rc = bench_u64("open", argc, argv, &i, 1, 1000, 0, &repeat);
			if (rc)
				return rc;
		} else if (!strcmp(a, "--json")) {
			json = 1;
		} else if (a[0] == '-' || path) {
			return bench_unknown("open", a);
		} else {
			path = a;
		}
	}
	if (!path) {
		fprintf(stderr, "rf-bench open: no PATH (see rf-bench open --help)\n");
		return 2;
	}
	if (json)
		printf("{\"what\":\"open\",\"seconds\":[");
	uint64_t records = 0;
	for (uint64_t k = 0; k < repeat; k++) {
		struct rf_dataset ds;
		uint64_t t0 = rf_now_ns();
		if (rf_dataset_open_file(&ds, path, 0) < 0) {
			if (json)
				printf("]}\n");
			fprintf(stderr, "rf-bench open: %s\n", rf_last_error());
			return 1;
		}
		double s = (double)(rf_now_ns() - t0) / 1e9;
		records = ds.count;
		rf_dataset_close(&ds);
		if (json)
			printf("%s%.6f", k ? "," : "", s);
		else
			printf("open %" PRIu64 ": %.6f s, %" PRIu64 " records\n", k + 1, s, records);
	}
	if (json)
		printf("],\"records\":%" PRIu64 "}\n", records);
	return 0;
}
