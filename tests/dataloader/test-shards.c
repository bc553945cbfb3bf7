/* dl-shards: several WebDataset shards opened as one dataset (dataloader/wds.c,
 * shards.c). Three shards made here and one shard of the same 23 samples in the same
 * order (images of 1 byte to 9 KB, some over a page; the last shard ends right after
 * its last image) give the same records: count, lengths, labels and bytes
 * (rf_dataset_read_record), opened as a list, as a brace pattern and one by one; each
 * record lies whole in the shard rf_dataset_part_of names, read there at the real
 * offset; the shards' places are 4096-aligned and apart. The brace expander: ranges
 * with and without padding, steps, descending ranges (allowed: 3, 2, 1), lists with
 * empty items and nested groups, several groups; refusals of {1..}, {, }, {}, {a},
 * a step of 0, 19 digits, each naming the offset, too many names, a pattern too long.
 * rf_dataset_open_file (and _opts, which also bounds an http:// open's requests and
 * refuses a timeout past an hour): a pattern opens the set, a missing shard is named with its
 * place in the set, a shard named twice (a pattern's repeat, two paths to one file) is
 * refused naming both, a file whose name has braces opens as itself, http:// sets are
 * refused. Labels over the set: num_classes 0 is the largest label of any shard + 1,
 * a label out of range names its shard and offset, and a set labelled in part is
 * refused naming the unlabelled sample's shard and offset and a labelled one's shard
 * (either order). Too many shards for RLIMIT_NOFILE and past RF_DS_MAX_SHARDS are
 * refused before anything is opened. A shard cut short after the open fails a read of
 * its records naming that shard and the offset in it. A sample without an image is
 * passed over with a warning naming the shard, the count and the first such member. */
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "rf-config.h"
#include "dl-test.h"
#include "dataset-impl.h"
#include "wds-test.h"

#define NS 23
static struct w_sample smp[NS];
static const size_t cut[4] = { 0, 8, 15, NS };  /* shard k: samples cut[k] .. cut[k+1]-1 */

static void make_samples(void)
{
	unsigned long long seed = 7;
	for (size_t i = 0; i < NS; i++) {
		size_t n = i == 3 ? 1 : i % 4 == 1 ? 5000 + 173 * i : 100 + 37 * i;
		smp[i].img = malloc(n);
		CHECK(smp[i].img);
		for (size_t k = 0; k < n; k++)
			smp[i].img[k] = (uint8_t)t_splitmix64(&seed);
		smp[i].n = n;
		smp[i].label = (int32_t)(i % 4);
	}
	smp[20].label = 6;     /* the largest label, in the last shard only */
}

static size_t shard_of(uint64_t i)
{
	size_t k = 0;
	while (i >= cut[k + 1])
		k++;
	return k;
}

/* set (any way opened) against one (the single shard): the same records. */
static void same_records(const struct rf_dataset *set, const struct rf_dataset *one,
			 const char *const *paths)
{
	uint8_t *a = malloc(one->max_record), *b = malloc(one->max_record), *c = malloc(one->max_record);
	char d[512];

	CHECK(a && b && c);
	CHECK_EQ(set->count, NS);
	CHECK_EQ(set->count, one->count);
	CHECK(rf_dataset_variable(set) && set->encoding == RF_REC_ENC_IMAGE);
	CHECK_EQ(set->label_kind, RF_LABEL_I32);
	CHECK_EQ(set->num_classes, one->num_classes);
	CHECK_EQ(set->num_classes, 7);
	CHECK_EQ(set->max_record, one->max_record);
	CHECK_EQ(set->nparts, 3);
	CHECK(set->src[0].fd == -1 && set->src[0].mem == NULL);
	CHECK_EQ(set->src[0].data_bytes, set->parts[0].size + set->parts[1].size + set->parts[2].size);
	for (unsigned k = 0; k < 3; k++) {
		CHECK(!strcmp(set->parts[k].path, paths[k]));
		CHECK(set->parts[k].fd >= 0);
		CHECK_EQ(set->parts[k].base % RF_DS_PART_ALIGN, 0);
		CHECK(k == 0 || set->parts[k].base >= set->parts[k - 1].base + set->parts[k - 1].size);
	}
	CHECK_EQ(set->src[0].size, set->parts[2].base + set->parts[2].size);
	CHECK(set->parts[2].size % 4096 != 0);   /* the aligned-up read of its last image passes its end */
	for (uint64_t i = 0; i < NS; i++) {
		struct rf_dataset_loc la, lb;
		int32_t ya, yb;
		unsigned part;
		uint64_t real;
		rf_dataset_payload_loc(set, i, &la);
		rf_dataset_payload_loc(one, i, &lb);
		CHECK_EQ(la.length, lb.length);
		CHECK_EQ(la.length, smp[i].n);
		CHECK_OPEN(rf_dataset_read_record(set, i, a, &ya), rf_last_error());
		CHECK_OPEN(rf_dataset_read_record(one, i, b, &yb), rf_last_error());
		CHECK_EQ(ya, yb);
		CHECK_EQ(ya, smp[i].label);
		CHECK(!memcmp(a, b, la.length) && !memcmp(a, smp[i].img, la.length));
		CHECK_OK(rf_dataset_part_of(set, la.offset, la.length, &part, &real));
		CHECK_EQ(part, shard_of(i));
		CHECK_EQ(real, la.offset - set->parts[part].base);
		CHECK(pread(set->parts[part].fd, c, la.length, (off_t)real) == (ssize_t)la.length);
		CHECK(!memcmp(c, a, la.length));
	}
	/* bytes across the gap before shard 1, past the end: in no one shard */
	unsigned part;
	uint64_t real;
	CHECK_EQ(rf_dataset_part_of(set, set->parts[1].base - 1, 2, &part, &real), -ERANGE);
	CHECK_EQ(rf_dataset_part_of(set, set->parts[0].base + set->parts[0].size - 1, 2, &part,
				    &real), -ERANGE);
	CHECK_EQ(rf_dataset_part_of(set, set->src[0].size, 1, &part, &real), -ERANGE);
	CHECK_OK(rf_dataset_part_of(set, set->parts[2].base, set->parts[2].size, &part, &real));
	CHECK(part == 2 && real == 0);
	rf_dataset_describe(set, d, sizeof(d));
	CHECK(strstr(d, "3 WebDataset shards") && strstr(d, "23 image records"));
	CHECK_OK(rf_dataset_verify(set));
	free(a);
	free(b);
	free(c);
}

static void test_set(void)
{
	const char *paths[3], *one = w_shard(t_path("one.tar"), smp, 0, NS, 0);
	struct rf_dataset s1, sl, sp;
	char name[512], pat[512];

	paths[0] = w_shard(t_path("sh-0.tar"), smp, cut[0], cut[1] - cut[0], 0);
	paths[1] = w_shard(t_path("sh-1.tar"), smp, cut[1], cut[2] - cut[1], 0);
	paths[2] = w_shard(t_path("sh-2.tar"), smp, cut[2], cut[3] - cut[2], 1);
	CHECK_OPEN(rf_dataset_open_wds(&s1, one, 0, RF_DS_VERIFY), rf_last_error());
	CHECK(s1.nparts == 0 && s1.parts == NULL && s1.src[0].fd >= 0);
	CHECK_OPEN(rf_dataset_open_wds_list(&sl, paths, 3, 0, RF_DS_VERIFY), rf_last_error());
	snprintf(name, sizeof(name), "%s and 2 more shards", paths[0]);
	CHECK(!strcmp(sl.src[0].path, name));
	same_records(&sl, &s1, paths);
	rf_dataset_close(&sl);
	rf_dataset_close(&sl);           /* twice: zeroed */
	snprintf(pat, sizeof(pat), "%s/sh-{0..2}.tar", t_dir);
	CHECK(rf_dataset_is_shard_pattern(pat));
	CHECK_OPEN(rf_dataset_open_file(&sp, pat, 0), rf_last_error());
	CHECK(!strcmp(sp.src[0].path, pat));
	same_records(&sp, &s1, paths);
	rf_dataset_close(&sp);
	/* a list of one is the one-shard open */
	CHECK_OPEN(rf_dataset_open_wds_list(&sl, paths + 2, 1, 0, 0), rf_last_error());
	CHECK(sl.nparts == 0 && sl.src[0].fd >= 0 && !strcmp(sl.src[0].path, paths[2]));
	CHECK_EQ(sl.count, cut[3] - cut[2]);
	rf_dataset_close(&sl);
	/* a pattern of one name: that shard */
	snprintf(pat, sizeof(pat), "%s/sh-{1..1}.tar", t_dir);
	CHECK_OPEN(rf_dataset_open_file(&sp, pat, 0), rf_last_error());
	CHECK(sp.nparts == 0 && !strcmp(sp.src[0].path, paths[1]));
	rf_dataset_close(&sp);
	/* rf_dataset_open_file_opts: the same open (flags passed on); NULL options are all
	 * 0; a timeout past 3600000 ms is refused naming it, the struct left zeroed */
	snprintf(pat, sizeof(pat), "%s/sh-{0..2}.tar", t_dir);
	struct rf_dataset_open_opts oo = { .flags = RF_DS_VERIFY, .http_timeout_ms = 250 };
	CHECK_OPEN(rf_dataset_open_file_opts(&sp, pat, &oo), rf_last_error());
	same_records(&sp, &s1, paths);
	rf_dataset_close(&sp);
	CHECK_OPEN(rf_dataset_open_file_opts(&sp, paths[1], NULL), rf_last_error());
	CHECK(sp.nparts == 0 && !strcmp(sp.src[0].path, paths[1]));
	rf_dataset_close(&sp);
	oo.http_timeout_ms = 3600001;
	CHECK_EQ(rf_dataset_open_file_opts(&sp, pat, &oo), -EINVAL);
	CHECK(strstr(rf_last_error(), "http_timeout_ms 3600001") &&
	      strstr(rf_last_error(), "expected 1 to 3600000"));
	CHECK(sp.src[0].fd == -1 && sp.count == 0);
	rf_dataset_close(&sp);
	rf_dataset_close(&s1);
}

static int intr_calls;

static int intr_third(void *arg)
{
	CHECK(arg == &intr_calls);
	return ++intr_calls >= 3;
}

/* rf_dataset_open_opts.interrupt: an open of a server that accepts and never answers
 * (a listening socket nobody accepts on: the kernel completes the connect), with a
 * timeout of an hour, ends when the interrupt says so (asked between turns of the
 * open's wait), with -EINTR naming the URL, the struct zeroed; a local open never
 * asks it. */
static void test_interrupt(void)
{
	struct rf_dataset ds;
#if RF_HAVE_HTTP_PARSER
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	char url[64];

	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	      listen(fd, 8) == 0 && getsockname(fd, (struct sockaddr *)&a, &al) == 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/x.rfrec", ntohs(a.sin_port));
	struct rf_dataset_open_opts oo = { .http_timeout_ms = 3600000, .interrupt = intr_third,
					   .interrupt_arg = &intr_calls };
	CHECK_EQ(rf_dataset_open_file_opts(&ds, url, &oo), -EINTR);
	CHECK_EQ(intr_calls, 3);
	CHECK(strstr(rf_last_error(), url) && strstr(rf_last_error(), "interrupted"));
	CHECK(ds.count == 0 && ds.nsrc == 0);
	rf_dataset_close(&ds);
	close(fd);
#endif
	char path[512];
	snprintf(path, sizeof(path), "%s/sh-1.tar", t_dir);
	intr_calls = 0;
	struct rf_dataset_open_opts lo = { .interrupt = intr_third, .interrupt_arg = &intr_calls };
	CHECK_OPEN(rf_dataset_open_file_opts(&ds, path, &lo), rf_last_error());
	CHECK_EQ(intr_calls, 0);
	rf_dataset_close(&ds);
}

/* pat expands to the names want[] (NULL-terminated). */
static void expands(const char *pat, const char *const *want)
{
	char **out, why[400];
	size_t n, k = 0;
	int ret = rf__brace_expand(pat, 1000, &out, &n, why, sizeof(why));
	if (ret) {
		fprintf(stderr, "'%s': %d: %s\n", pat, ret, why);
		exit(1);
	}
	for (; want[k]; k++)
		if (k >= n || strcmp(out[k], want[k])) {
			fprintf(stderr, "'%s': name %zu is '%s', expected '%s'\n", pat, k,
				k < n ? out[k] : "(none)", want[k]);
			exit(1);
		}
	CHECK_EQ(n, k);
	free(out);
}

static void refused(const char *pat, size_t max, int code, const char *what)
{
	char **out, why[400];
	size_t n;
	int ret = rf__brace_expand(pat, max, &out, &n, why, sizeof(why));
	if (ret != code || !strstr(why, what) || out || n) {
		fprintf(stderr, "'%.60s': %d (%s), expected %d and \"%s\"\n", pat, ret, why, code,
			what);
		exit(1);
	}
	printf("refused '%.40s': %s\n", pat, why);
}

static void test_braces(void)
{
	expands("plain.tar", (const char *[]){ "plain.tar", NULL });
	expands("a{1..3}b", (const char *[]){ "a1b", "a2b", "a3b", NULL });
	expands("t-{000..003}.tar", (const char *[]){ "t-000.tar", "t-001.tar", "t-002.tar",
						      "t-003.tar", NULL });
	expands("{08..11}", (const char *[]){ "08", "09", "10", "11", NULL });
	expands("{9..11}", (const char *[]){ "9", "10", "11", NULL });
	expands("{0..3}", (const char *[]){ "0", "1", "2", "3", NULL });  /* "0": no padding */
	expands("{0..10..5}", (const char *[]){ "0", "5", "10", NULL });
	expands("{3..1}", (const char *[]){ "3", "2", "1", NULL });
	expands("{10..01..4}", (const char *[]){ "10", "06", "02", NULL });
	expands("{7..7}", (const char *[]){ "7", NULL });
	expands("{a,b}{1,2}", (const char *[]){ "a1", "a2", "b1", "b2", NULL });
	expands("x{a,,b}y", (const char *[]){ "xay", "xy", "xby", NULL });
	expands("{x{1,2},y}z", (const char *[]){ "x1z", "x2z", "yz", NULL });
	expands("d/{a,b}/s-{0..1}.tar", (const char *[]){ "d/a/s-0.tar", "d/a/s-1.tar",
							 "d/b/s-0.tar", "d/b/s-1.tar", NULL });
	refused("s-{1..}.tar", 10, -EINVAL, "offset 2: '{1..}': LAST is empty");
	refused("s-{..3}.tar", 10, -EINVAL, "FIRST is empty");
	refused("s-{.tar", 10, -EINVAL, "offset 2: '{' without its '}'");
	refused("s-}.tar", 10, -EINVAL, "offset 2: '}' without a '{'");
	refused("{a,b}{", 10, -EINVAL, "offset 5");
	refused("s-{}.tar", 10, -EINVAL, "neither a range");
	refused("s-{a}.tar", 10, -EINVAL, "neither a range");
	refused("s-{a..c}.tar", 10, -EINVAL, "FIRST is 'a'");
	refused("s-{1..3..0}.tar", 10, -EINVAL, "step 0");
	refused("s-{1..3..}.tar", 10, -EINVAL, "STEP is empty");
	refused("{1234567890123456789..1}", 10, -EINVAL, "1 to 18 digits");
	refused("{a,{b}}", 10, -EINVAL, "offset 3: '{b}'");
	refused("{0..99999}", 65536, -E2BIG, "more than 65536 names");
	refused("{0..9}{0..9}", 99, -E2BIG, "more than 99 names");
	refused("x", 0, -E2BIG, "limit 0");
	char *lng = malloc(5000);
	CHECK(lng);
	memset(lng, 'n', 4999);
	lng[4999] = 0;
	refused(lng, 10, -ENAMETOOLONG, "pattern of 4999 bytes");
	free(lng);     /* a name is never longer than its pattern: that refusal is the one */
}

static void test_open_file(void)
{
	struct rf_dataset ds;
	char pat[512], err[1024], lit[512], want[600];

	/* a shard whose name ends in upper case (SHARD.TAR) is a shard, not a bad .rfrec;
	 * so is a pattern of them */
	snprintf(lit, sizeof(lit), "%s/UP-0.TAR", t_dir);
	w_shard(lit, smp, 0, 3, 0);
	CHECK_OPEN(rf_dataset_open_file(&ds, lit, 0), rf_last_error());
	CHECK_EQ(ds.count, 3);
	rf_dataset_close(&ds);
	snprintf(pat, sizeof(pat), "%s/UP-{0..0}.TAR", t_dir);
	CHECK(rf_dataset_is_shard_pattern(pat));
	/* a missing shard: named, with its place */
	snprintf(pat, sizeof(pat), "%s/sh-{0..3}.tar", t_dir);
	snprintf(want, sizeof(want), "(shard 4 of 4 of %s)", pat);
	EXPECT_FAIL(t_msg(rf_dataset_open_file(&ds, pat, 0), err, sizeof(err)), -ENOENT, err,
		    "sh-3.tar", want);
	printf("refused: %s\n", err);
	CHECK(ds.kind == RF_DS_NONE && ds.parts == NULL && ds.src[0].fd == -1);
	/* three missing (the shards are read on several threads): the first in the set's
	 * order is the one named, whichever thread met its failure first */
	snprintf(pat, sizeof(pat), "%s/sh-{0..5}.tar", t_dir);
	snprintf(want, sizeof(want), "(shard 4 of 6 of %s)", pat);
	for (int rep = 0; rep < 20; rep++)
		EXPECT_FAIL(t_msg(rf_dataset_open_file(&ds, pat, 0), err, sizeof(err)), -ENOENT,
			    err, "sh-3.tar", want);
	CHECK(ds.kind == RF_DS_NONE && ds.parts == NULL && ds.src[0].fd == -1);
	/* malformed: the pattern and the group's offset */
	snprintf(pat, sizeof(pat), "%s/sh-{1..}.tar", t_dir);
	snprintf(want, sizeof(want), "offset %zu: '{1..}'", strlen(t_dir) + 4);
	EXPECT_FAIL(t_msg(rf_dataset_open_file(&ds, pat, 0), err, sizeof(err)), -EINVAL, err,
		    pat, want, "LAST is empty");
	printf("refused: %s\n", err);
	snprintf(pat, sizeof(pat), "%s/sh-{3..1}.tar", t_dir);   /* descending: 3 first */
	EXPECT_FAIL(t_msg(rf_dataset_open_file(&ds, pat, 0), err, sizeof(err)), -ENOENT, err,
		    "sh-3.tar", "(shard 1 of 3");
	/* remote sets */
	CHECK(rf_dataset_is_shard_pattern("http://h/s-{0..2}.tar"));
	EXPECT_FAIL(t_msg(rf_dataset_open_file(&ds, "http://h/s-{0..2}.tar", 0), err,
			  sizeof(err)), -ENOTSUP, err, "http://h/s-{0..2}.tar", "local files only");
	const char *mixed[2] = { t_path("sh-0.tar"), "http://h/s-1.tar" };
	EXPECT_FAIL(t_msg(rf_dataset_open_wds_list(&ds, mixed, 2, 0, 0), err, sizeof(err)),
		    -ENOTSUP, err, "http://h/s-1.tar", "shard 2");
	/* a shard named twice -- by a pattern's repeat, in a list, or by two paths to one
	 * file -- is refused naming both, before any shard is indexed */
	snprintf(pat, sizeof(pat), "%s/sh-{0,1,0}.tar", t_dir);
	EXPECT_FAIL(t_msg(rf_dataset_open_file(&ds, pat, 0), err, sizeof(err)), -EINVAL, err,
		    "shards 1 (", "and 3 (", "sh-0.tar", "are one file", pat);
	printf("refused: %s\n", err);
	CHECK(ds.kind == RF_DS_NONE && ds.parts == NULL && ds.src[0].fd == -1);
	char dot[512];
	snprintf(dot, sizeof(dot), "%s/./sh-1.tar", t_dir);
	const char *twice[3] = { t_path("sh-1.tar"), t_path("sh-0.tar"), dot };
	EXPECT_FAIL(t_msg(rf_dataset_open_wds_list(&ds, twice, 3, 0, 0), err, sizeof(err)),
		    -EINVAL, err, "shards 1 (", "and 3 (", "/./sh-1.tar", "are one file");
	/* a file whose name has braces is itself */
	snprintf(lit, sizeof(lit), "%s/lit{1}.tar", t_dir);
	w_shard(lit, smp, 0, 2, 0);
	CHECK(!rf_dataset_is_shard_pattern(lit));
	CHECK_OPEN(rf_dataset_open_file(&ds, lit, 0), rf_last_error());
	CHECK(ds.count == 2 && ds.nparts == 0);
	rf_dataset_close(&ds);
	CHECK(!rf_dataset_is_shard_pattern("x-{0..2}.rfrec"));
	CHECK(!rf_dataset_is_shard_pattern("x-0.tar"));
	CHECK(!rf_dataset_is_shard_pattern(NULL));
	/* no list, too many shards: refused before any open */
	EXPECT_FAIL(t_msg(rf_dataset_open_wds_list(&ds, NULL, 0, 0, 0), err, sizeof(err)),
		    -EINVAL, err, "no shard given");
	const char **many = malloc((RF_DS_MAX_SHARDS + 1) * sizeof(*many));
	CHECK(many);
	for (size_t i = 0; i <= RF_DS_MAX_SHARDS; i++)
		many[i] = "/nonexistent.tar";
	EXPECT_FAIL(t_msg(rf_dataset_open_wds_list(&ds, many, RF_DS_MAX_SHARDS + 1, 0, 0), err,
			  sizeof(err)), -E2BIG, err, "65537 shards, expected at most 65536");
	free(many);
}

/* Labels over a set, and the file descriptor limit. */
static void test_labels(void)
{
	struct rf_dataset ds;
	char err[1024], off[64];
	struct w_sample u[3], l2[2];
	const char *sh[3] = { t_path("sh-0.tar"), t_path("sh-1.tar"), t_path("sh-2.tar") };

	/* num_classes given: sample 20 (label 6) is out of range, named in its shard */
	EXPECT_FAIL(t_msg(rf_dataset_open_wds_list(&ds, sh, 3, 5, 0), err, sizeof(err)), -ERANGE,
		    err, sh[2], "sample s/00020: label 6 outside [0, 5)", "offset",
		    "(shard 3 of 3)");
	printf("refused: %s\n", err);
	CHECK_OPEN(rf_dataset_open_wds_list(&ds, sh, 3, 7, 0), rf_last_error());
	CHECK_EQ(ds.num_classes, 7);
	rf_dataset_close(&ds);

	/* a shard without labels beside labelled ones, after them and before them */
	for (int i = 0; i < 3; i++) {
		u[i] = smp[i];
		u[i].label = -1;
	}
	l2[0] = smp[5];
	l2[1] = smp[6];
	const char *un = w_shard(t_path("unlab.tar"), u, 0, 3, 0);
	const char *lab = w_shard(t_path("lab.tar"), l2, 0, 2, 0);
	const char *after[2] = { lab, un }, *before[2] = { un, lab };
	struct rf_dataset one;
	CHECK_OPEN(rf_dataset_open_wds(&one, un, 0, 0), rf_last_error());
	CHECK(one.label_kind == RF_LABEL_NONE && one.num_classes == 0);
	struct rf_dataset_loc loc;
	rf_dataset_payload_loc(&one, 0, &loc);   /* the first unlabelled image's offset */
	snprintf(off, sizeof(off), "offset %" PRIu64 ": sample s/00000 has no .cls label",
		 loc.offset);
	rf_dataset_close(&one);
	EXPECT_FAIL(t_msg(rf_dataset_open_wds_list(&ds, after, 2, 0, 0), err, sizeof(err)),
		    -EINVAL, err, un, off, lab, "expected every sample labelled or none",
		    "(shard 2 of 2)");
	printf("refused: %s\n", err);
	EXPECT_FAIL(t_msg(rf_dataset_open_wds_list(&ds, before, 2, 0, 0), err, sizeof(err)),
		    -EINVAL, err, un, off, lab, "expected every sample labelled or none",
		    "(shard 2 of 2)");
	printf("refused: %s\n", err);
	CHECK(ds.kind == RF_DS_NONE && ds.parts == NULL);
	/* none labelled: a set without labels */
	const char *both[2] = { un, w_shard(t_path("unlab2.tar"), u, 0, 3, 0) };
	CHECK_OPEN(rf_dataset_open_wds_list(&ds, both, 2, 0, 0), rf_last_error());
	CHECK(ds.label_kind == RF_LABEL_NONE && ds.num_classes == 0 && ds.count == 6);
	int32_t y = 0;
	CHECK_OPEN(rf_dataset_read_record(&ds, 4, NULL, &y), rf_last_error());
	CHECK_EQ(y, -1);
	rf_dataset_close(&ds);

	/* descriptors: a set needs 2 per shard and 64 spare */
	struct rlimit rl, low;
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 2 * 3 + 64) {
		low = rl;
		low.rlim_cur = 2 * 3 + 64 - 1;
		CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
		EXPECT_FAIL(t_msg(rf_dataset_open_wds_list(&ds, sh, 3, 0, 0), err, sizeof(err)),
			    -EMFILE, err, "3 shards", "RLIMIT_NOFILE", "is 69", "at most 2 shards",
			    "ulimit -n");
		printf("refused: %s\n", err);
		low.rlim_cur = 2 * 3 + 64;
		CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
		CHECK_OPEN(rf_dataset_open_wds_list(&ds, sh, 3, 0, 0), rf_last_error());
		rf_dataset_close(&ds);
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	}
}

/* A sample without an image a decoder takes (here a note; a key with a dot, a GIF, a tar
 * link elsewhere) is passed over with a warning naming its shard, the count and the
 * first one -- it was dropped silently, labelled or not. */
static char warned[1024];

static void keep_warning(enum rf_log_level level, const char *msg, void *user)
{
	(void)user;
	if (level == RF_LOG_WARN)
		snprintf(warned, sizeof(warned), "%s", msg);
}

static void test_passed_over(void)
{
	struct rf_dataset ds;
	const char *p = w_shard_(t_path("noted.tar"), smp, 0, 3, 0, 1);

	warned[0] = 0;
	rf_log_set(keep_warning, NULL);
	CHECK_OPEN(rf_dataset_open_wds(&ds, p, 0, 0), rf_last_error());
	rf_log_set(NULL, NULL);
	CHECK_EQ(ds.count, 3);
	rf_dataset_close(&ds);
	printf("warned: %s\n", warned);
	CHECK(strstr(warned, p) && strstr(warned, "1 sample passed over") &&
	      strstr(warned, "'note.txt' at offset 512") && strstr(warned, "first dot"));
}

/* A shard cut short after the open: a read of its records names it and the offset. */
static void test_cut(void)
{
	const char *sh[3] = { t_path("c-0.tar"), t_path("c-1.tar"), t_path("c-2.tar") };
	struct rf_dataset ds;
	struct rf_dataset_loc loc;
	uint8_t buf[16384];
	char err[1024], want[128];
	unsigned part;
	uint64_t real;

	for (int k = 0; k < 3; k++)
		w_shard(sh[k], smp, cut[k], cut[k + 1] - cut[k], k == 2);
	CHECK_OPEN(rf_dataset_open_wds_list(&ds, sh, 3, 0, 0), rf_last_error());
	rf_dataset_payload_loc(&ds, 13, &loc);       /* shard 1's sample 13 */
	CHECK_OK(rf_dataset_part_of(&ds, loc.offset, loc.length, &part, &real));
	CHECK_EQ(part, 1);
	CHECK(truncate(sh[1], (off_t)real + 10) == 0);
	snprintf(want, sizeof(want), "record 13: payload bytes [%" PRIu64 ", %" PRIu64 ")", real,
		 real + loc.length);
	EXPECT_FAIL(t_msg(rf_dataset_read_record(&ds, 13, buf, NULL), err, sizeof(err)), -EIO,
		    err, sh[1], want, "short read");
	printf("refused: %s\n", err);
	CHECK_OPEN(rf_dataset_read_record(&ds, 16, buf, NULL), rf_last_error());  /* shard 2 */
	rf_dataset_close(&ds);
}

int main(void)
{
	t_mkdir("shards");
	make_samples();
	test_set();
	test_braces();
	test_open_file();
	test_labels();
	test_passed_over();
	test_cut();
	test_interrupt();
	for (size_t i = 0; i < NS; i++)
		free(smp[i].img);
	printf("dl-shards: ok\n");
	return 0;
}
