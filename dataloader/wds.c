/* wds.c -- WebDataset shards (tars of KEY.jpg|.jpeg|.png + KEY.cls members) opened as a
 * dataset of encoded images read where they lie in the tars: each tar's member list
 * (tar.c, cached beside the shard by tar-index.c) gives each sample's image (offset,
 * length) and label, which go into an in-memory index of the layout a version 2
 * .rfrec keeps (16 bytes a record), so a loader reads shards as it reads such a file.
 * One shard is the payload source itself; several are its parts (struct rf_dataset's
 * parts): their virtual concatenation, each at a base aligned to RF_DS_PART_ALIGN, is
 * what the index's offsets address. A brace pattern of names (shards.c) opens a set. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "dataset-impl.h"
#include "http-impl.h"
#include "tar-impl.h"

/* Descriptors left to the rest of the process when a set of shards is opened. */
#define WDS_FD_SPARE 64
/* Threads that read a set's shards (their indexes, or their tars when none is kept) */
#define WDS_OPEN_THREADS 8

/* The index being built, shard after shard. */
struct wds_build {
	const char *const *paths;
	uint32_t num_classes;
	uint8_t *ix;                  /* n entries of RF_REC_INDEX_ENTRY bytes */
	size_t n, cap;
	uint64_t with;                /* labelled samples of the shards before */
	int32_t top;                  /* the largest label */
	uint64_t max_record;
	/* the first labelled sample, and the first without a label while none before had
	 * one: for the refusal of a set labelled in part */
	int lab, nol;
	size_t lab_shard, nol_shard;
	uint64_t lab_off, nol_off;
	char lab_key[96], nol_key[96];
};

/* Shard k's samples sm[0..ns), its bytes at base in the payload, into the index. The
 * messages of a single shard are those of the one-shard open before sets existed. */
static int wds_add(struct wds_build *b, size_t k, const struct rf__wds_sample *sm, size_t ns,
		   uint64_t base)
{
	const char *path = b->paths[k];
	size_t with = 0;

	for (size_t i = 0; i < ns; i++)
		with += sm[i].label >= 0;
	if (b->n + ns > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		uint8_t *ix;
		while (cap < b->n + ns)
			cap *= 2;
		if (cap > SIZE_MAX / RF_REC_INDEX_ENTRY ||
		    !(ix = realloc(b->ix, cap * RF_REC_INDEX_ENTRY)))
			return rf__ds_fail(-ENOMEM, path, "out of memory for the index of %zu "
					   "samples", b->n + ns);
		b->ix = ix;
		b->cap = cap;
	}
	for (size_t i = 0; i < ns; i++) {
		uint8_t *e = b->ix + (b->n + i) * RF_REC_INDEX_ENTRY;
		if (sm[i].img_size == 0 || sm[i].img_size > UINT32_MAX)
			return rf__ds_fail(-EINVAL, path, "offset %" PRIu64 ": sample %s: image of %"
					   PRIu64 " bytes, expected 1 byte to 4 GiB", sm[i].img_off,
					   sm[i].key, sm[i].img_size);
		if (sm[i].label < 0 && b->with)
			return rf__ds_fail(-EINVAL, path, "offset %" PRIu64 ": sample %s has no .cls "
					   "label while %" PRIu64 " samples of the shards before it "
					   "have one (the first: %s in %s, offset %" PRIu64 "): "
					   "expected every sample labelled or none", sm[i].img_off,
					   sm[i].key, b->with, b->lab_key, b->paths[b->lab_shard],
					   b->lab_off);
		if (sm[i].label < 0 && with)
			return rf__ds_fail(-EINVAL, path, "offset %" PRIu64 ": sample %s has no .cls "
					   "label while %zu others have one: expected every sample "
					   "labelled or none", sm[i].img_off, sm[i].key, with);
		if (sm[i].label < 0 && !b->nol) {
			b->nol = 1;
			b->nol_shard = k;
			b->nol_off = sm[i].img_off;
			snprintf(b->nol_key, sizeof(b->nol_key), "%s", sm[i].key);
		}
		if (sm[i].label >= 0 && b->nol)   /* unlabelled ones in a shard before */
			return rf__ds_fail(-EINVAL, b->paths[b->nol_shard], "offset %" PRIu64
					   ": sample %s has no .cls label while sample %s of %s "
					   "(offset %" PRIu64 ") has one: expected every sample "
					   "labelled or none", b->nol_off, b->nol_key, sm[i].key, path,
					   sm[i].img_off);
		if (sm[i].label >= 0 && !b->lab) {
			b->lab = 1;
			b->lab_shard = k;
			b->lab_off = sm[i].img_off;
			snprintf(b->lab_key, sizeof(b->lab_key), "%s", sm[i].key);
		}
		if (b->num_classes && sm[i].label >= 0 && (uint32_t)sm[i].label >= b->num_classes)
			return rf__ds_fail(-ERANGE, path, "offset %" PRIu64 ": sample %s: label %"
					   PRId32 " outside [0, %" PRIu32 ")", sm[i].img_off, sm[i].key,
					   sm[i].label, b->num_classes);
		rf__put_le64(e, base + sm[i].img_off);
		rf__put_le32(e + 8, (uint32_t)sm[i].img_size);
		rf__put_le32(e + 12, (uint32_t)sm[i].label);
		if (sm[i].img_size > b->max_record)
			b->max_record = sm[i].img_size;
		if (sm[i].label > b->top)
			b->top = sm[i].label;
	}
	b->n += ns;
	b->with += with;
	return 0;
}

/* The index (taken over) -> src[1] and the fields of ds. */
static int wds_finish(struct rf_dataset *ds, struct wds_build *b, const char *name)
{
	struct rf_dataset_src *x = &ds->src[1];

	x->fd = -1;
	x->mem = b->ix;
	b->ix = NULL;
	x->size = x->data_bytes = b->n * RF_REC_INDEX_ENTRY;
	x->stride = RF_REC_INDEX_ENTRY;
	ds->nsrc = 2;
	ds->count = b->n;
	ds->max_record = b->max_record;
	ds->encoding = RF_REC_ENC_IMAGE;
	ds->dtype = RF_DS_DT_U8;
	ds->label_src = RF_DS_SRC_LABEL;
	ds->label_offset = 12;
	ds->label_kind = b->with ? RF_LABEL_I32 : RF_LABEL_NONE;
	ds->num_classes = b->with ? (b->num_classes ? b->num_classes : (uint32_t)b->top + 1) : 0;
	if (!(x->path = strdup(name)))
		return rf__ds_fail(-ENOMEM, name, "out of memory");
	return 0;
}

/* Append " (shard K of N[ of PATTERN])" to the message a shard's open left. */
static int wds_in_set(int ret, size_t k, size_t n, const char *pattern)
{
	char msg[400];

	snprintf(msg, sizeof(msg), "%s", rf_last_error());
	return rf__fail(ret, "%s (shard %zu of %zu%s%.200s)", msg, k + 1, n,
			pattern ? " of " : "", pattern ? pattern : "");
}

/* Refusals of a set as a whole, before any shard is opened. */
static int wds_check_set(const char *const *paths, size_t n, const char *name)
{
	struct rlimit rl;
	char hard[32] = "unlimited";

	if (!paths || !n)
		return rf__ds_fail(-EINVAL, name, "no shard given: expected 1 to %u paths",
				   RF_DS_MAX_SHARDS);
	if (n > RF_DS_MAX_SHARDS)
		return rf__ds_fail(-E2BIG, name, "%zu shards, expected at most %u", n,
				   RF_DS_MAX_SHARDS);
	for (size_t k = 0; k < n; k++) {
		if (!paths[k])
			return rf__ds_fail(-EINVAL, name, "shard %zu of %zu: no path given", k + 1, n);
		if (n > 1 && !strncmp(paths[k], "http://", 7))
			return rf__ds_fail(-ENOTSUP, paths[k], "a remote shard in a set of %zu (shard "
					   "%zu): several WebDataset shards are read from local files "
					   "only; expected a path (or one .rfrec over HTTP: rf-pack "
					   "--webdataset packs shards into one)", n, k + 1);
	}
	if (n < 2 || getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    (rlim_t)(2 * n + WDS_FD_SPARE) <= rl.rlim_cur)
		return 0;
	if (rl.rlim_max != RLIM_INFINITY)
		snprintf(hard, sizeof(hard), "%llu", (unsigned long long)rl.rlim_max);
	return rf__ds_fail(-EMFILE, name, "%zu shards: the dataset keeps each open and a loader "
			   "reopens each (%zu file descriptors), and the limit (RLIMIT_NOFILE) is "
			   "%llu with %d kept for the rest: expected at most %llu shards; raise "
			   "the limit (ulimit -n; the hard limit is %s) or pack the shards into "
			   "one file (rf-pack --webdataset)", n, 2 * n,
			   (unsigned long long)rl.rlim_cur, WDS_FD_SPARE,
			   (unsigned long long)(rl.rlim_cur > WDS_FD_SPARE ?
						(rl.rlim_cur - WDS_FD_SPARE) / 2 : 0), hard);
}

/* paths[0..n) into ds; name is what src[0].path says of a set (n >= 2), pattern the
 * brace pattern they came from (NULL: a list). */
struct wds_ident {
	dev_t dev;
	ino_t ino;
	size_t k;
};

static int wds_ident_cmp(const void *a, const void *b)
{
	const struct wds_ident *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

/* Each shard of a set is a file of its own: one named twice (a pattern like {a,a}, a
 * list with a repeat, or two paths to one file) would be read twice an epoch and its
 * samples drawn twice as often. Compared by device and inode before any shard is
 * indexed; a path stat cannot reach is left to its open, which says why. */
static int wds_distinct(const char *const *paths, size_t n, const char *name)
{
	struct wds_ident *id = calloc(n, sizeof(*id));
	size_t m = 0;
	int ret = 0;

	if (!id)
		return rf__ds_fail(-ENOMEM, name, "out of memory for %zu shards", n);
	for (size_t k = 0; k < n; k++) {
		struct stat st;
		if (stat(paths[k], &st) == 0)
			id[m++] = (struct wds_ident){ st.st_dev, st.st_ino, k };
	}
	qsort(id, m, sizeof(*id), wds_ident_cmp);
	for (size_t k = 1; k < m && !ret; k++)
		if (id[k].dev == id[k - 1].dev && id[k].ino == id[k - 1].ino)
			ret = rf__ds_fail(-EINVAL, name, "shards %zu (%s) and %zu (%s) of %zu are "
					  "one file: expected each shard once (its samples would "
					  "be read twice an epoch)", id[k - 1].k + 1,
					  paths[id[k - 1].k], id[k].k + 1, paths[id[k].k], n);
	free(id);
	return ret;
}

/* One shard's first phase: its member list (from its index, else a scan of the tar),
 * its samples and, after a scan, its index written. The message of a failure is kept
 * here: the phase may run on another thread, whose rf_last_error() is its own. */
struct wds_scan {
	struct rf__tar t;
	struct rf__wds_sample *sm;
	size_t ns, noimg;
	char noimg_first[300];  /* the first sample passed over: its first member, offset */
	int ret;
	char err[512];
};

static void wds_scan_one(const char *path, struct wds_scan *s)
{
	int ret;

	size_t first = 0;

	if ((ret = rf__tar_index_load_or_scan(&s->t, path)) == 0)
		ret = rf__wds_samples(&s->t, rf__tar_read_at, &s->t, &s->sm, &s->ns, &s->noimg,
				      &first);
	if (!ret && s->noimg && first < s->t.n)
		snprintf(s->noimg_first, sizeof(s->noimg_first), "'%s' at offset %" PRIu64,
			 s->t.m[first].name, s->t.m[first].offset);
	if (!ret && !s->ns)
		ret = rf__ds_fail(-EINVAL, path, "no sample with a .jpg, .jpeg or .png member "
				  "(%zu members, %zu samples without an image): expected a "
				  "WebDataset shard of images", s->t.n, s->noimg);
	/* the index only of a shard that opened as one: an empty file (a valid empty
	 * archive, as tar(1) reads it) or a tar of no image is refused, and leaves no
	 * PATH.idx behind */
	if (!ret)
		ret = rf__tar_index_save(&s->t, path);
	if ((s->ret = ret))
		snprintf(s->err, sizeof(s->err), "%s", rf_last_error());
}

struct wds_pool {
	const char *const *paths;
	struct wds_scan *sc;
	size_t n;
	_Atomic size_t next;
};

static void *wds_scan_thread(void *arg)
{
	struct wds_pool *p = arg;
	size_t k;

	while ((k = atomic_fetch_add(&p->next, 1)) < p->n)
		wds_scan_one(p->paths[k], &p->sc[k]);
	return NULL;
}

/* The first phase of every shard of a set, on up to WDS_OPEN_THREADS threads (the
 * caller's among them): a first open scans each tar, and a scan is a chain of small
 * reads, one header after another -- sixteen at once took 1.33-1.41 s where one after
 * another took 2.99-3.39 s (shard-open, cold cache). A thread that cannot be started
 * leaves its share to the others. */
static void wds_scan_all(const char *const *paths, struct wds_scan *sc, size_t n)
{
	struct wds_pool p = { .paths = paths, .sc = sc, .n = n };
	pthread_t th[WDS_OPEN_THREADS - 1];
	size_t nt = 0;

	while (nt + 1 < WDS_OPEN_THREADS && nt + 1 < n &&
	       pthread_create(&th[nt], NULL, wds_scan_thread, &p) == 0)
		nt++;
	wds_scan_thread(&p);
	for (size_t i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
}

static int wds_open_set(struct rf_dataset *ds, const char *const *paths, size_t n,
			uint32_t num_classes, unsigned flags, const char *name,
			const char *pattern)
{
	struct wds_build b = { .paths = paths, .num_classes = num_classes, .top = -1 };
	struct wds_scan *sc;
	uint64_t end = 0, tar_bytes = 0;
	int ret;

	if ((ret = wds_check_set(paths, n, name)) < 0 ||
	    (n > 1 && (ret = wds_distinct(paths, n, name)) < 0))
		return ret;
	if (!(sc = calloc(n, sizeof(*sc))))
		return rf__ds_fail(-ENOMEM, name, "out of memory for %zu shards", n);
	wds_scan_all(paths, sc, n);   /* one shard: on this thread alone */
	if (n > 1) {
		if (!(ds->parts = calloc(n, sizeof(*ds->parts)))) {
			ret = rf__ds_fail(-ENOMEM, name, "out of memory for %zu shards", n);
			goto out;
		}
		ds->nparts = (unsigned)n;
		for (size_t k = 0; k < n; k++)
			ds->parts[k].fd = -1;
	}
	ds->kind = RF_DS_TAR;
	ds->nsrc = 1;
	/* then, in order, each shard into the set: the first that failed is the one
	 * reported, with its own message */
	for (size_t k = 0; k < n; k++) {
		struct rf__tar t = sc[k].t;
		struct rf__wds_sample *sm = sc[k].sm;
		size_t ns = sc[k].ns;
		uint64_t base = 0;
		memset(&sc[k].t, 0, sizeof(sc[k].t));
		sc[k].sm = NULL;
		if ((ret = sc[k].ret))
			rf__fail(ret, "%s", sc[k].err);
		if (!ret && n == 1) {
			ds->src[0].fd = t.fd;      /* the tar, kept open: the dataset's now */
			t.has_fd = 0;
		} else if (!ret) {
			struct rf_dataset_part *p = &ds->parts[k];
			base = (end + RF_DS_PART_ALIGN - 1) / RF_DS_PART_ALIGN * RF_DS_PART_ALIGN;
			p->base = base;
			p->size = t.size;
			p->fd = t.fd;
			t.has_fd = 0;
			end = base + t.size;
			if (!(p->path = strdup(paths[k])))
				ret = rf__ds_fail(-ENOMEM, paths[k], "out of memory");
		}
		tar_bytes += t.size;
		if (!ret && sc[k].noimg)
			/* not silently: a sample labelled but without an image a decoder
			 * takes is one the user expected to train on */
			rf__log(RF_LOG_WARN, "%s: %zu sample%s passed over: no .jpg, .jpeg or "
				".png member that is not empty (the first: %s). A key ends at the first dot of a "
				"member's name (WebDataset): 'a.b.jpg' is key 'a', member 'b.jpg'; "
				"GIFs and tar links are no images here", paths[k], sc[k].noimg,
				sc[k].noimg == 1 ? "" : "s", sc[k].noimg_first);
		if (!ret)
			ret = wds_add(&b, k, sm, ns, base);
		free(sm);
		rf__tar_close(&t);
		if (ret < 0) {
			if (n > 1)
				wds_in_set(ret, k, n, pattern);
			goto out;
		}
	}
	/* a set: src[0] is the virtual payload, read through the parts */
	ds->src[0].size = n == 1 ? tar_bytes : end;
	ds->src[0].data_offset = 0;
	ds->src[0].data_bytes = tar_bytes;
	ds->src[0].stride = 0;
	if (!(ds->src[0].path = strdup(n == 1 ? paths[0] : name))) {
		ret = rf__ds_fail(-ENOMEM, name, "out of memory");
		goto out;
	}
	if ((ret = wds_finish(ds, &b, n == 1 ? paths[0] : name)) == 0 && (flags & RF_DS_VERIFY))
		ret = rf_dataset_verify(ds);
out:
	for (size_t k = 0; k < n; k++) {   /* the shards after a failed one */
		rf__tar_close(&sc[k].t);
		free(sc[k].sm);
	}
	free(sc);
	free(b.ix);
	if (ret)
		rf_dataset_close(ds);
	return ret;
}

/* A zeroed dataset (fds -1), as every open leaves one it refuses. */
static void wds_zero(struct rf_dataset *ds)
{
	memset(ds, 0, sizeof(*ds));
	ds->src[0].fd = ds->src[1].fd = -1;
}

int rf_dataset_open_wds(struct rf_dataset *ds, const char *path, uint32_t num_classes,
			unsigned flags)
{
	int aret = rf__ds_open_args(ds, flags, __func__);
	if (aret < 0)
		return aret;
	wds_zero(ds);
	if (!path)
		return rf__ds_fail(-EINVAL, path, "no path given");
	return wds_open_set(ds, &path, 1, num_classes, flags, path, NULL);
}

int rf_dataset_open_wds_list(struct rf_dataset *ds, const char *const *paths, size_t n,
			     uint32_t num_classes, unsigned flags)
{
	int aret = rf__ds_open_args(ds, flags, __func__);
	if (aret < 0)
		return aret;
	char name[RF__NAME_MAX + 64];

	wds_zero(ds);
	if (paths && n >= 1 && paths[0])
		snprintf(name, sizeof(name), "%s and %zu more shard%s", paths[0], n - 1,
			 n == 2 ? "" : "s");
	else
		snprintf(name, sizeof(name), "(shards)");
	return wds_open_set(ds, paths, n, num_classes, flags, n == 1 && paths && paths[0] ?
			    paths[0] : name, NULL);
}

/* A brace pattern of shards (rf_dataset_is_shard_pattern). */
static int wds_open_pattern(struct rf_dataset *ds, const char *pat, unsigned flags)
{
	char why[400], **names;
	size_t n;
	int ret;

	wds_zero(ds);
	if (!strncmp(pat, "http://", 7))
		return rf__ds_fail(-ENOTSUP, pat, "a brace pattern of remote shards: several "
				   "WebDataset shards are read from local files only; expected a "
				   "path (or one .rfrec over HTTP: rf-pack --webdataset packs shards "
				   "into one)");
	if ((ret = rf__brace_expand(pat, RF_DS_MAX_SHARDS, &names, &n, why, sizeof(why))) < 0)
		return rf__ds_fail(ret, pat, "%s", why);
	ret = wds_open_set(ds, (const char *const *)names, n, 0, flags, n == 1 ? names[0] : pat,
			   pat);
	free(names);
	return ret;
}

int rf_dataset_open_file(struct rf_dataset *ds, const char *path, unsigned flags)
{
	int aret = rf__ds_open_args(ds, flags, __func__);
	if (aret < 0)
		return aret;
	size_t n = path ? strlen(path) : 0;

	if (rf_dataset_is_shard_pattern(path))
		return wds_open_pattern(ds, path, flags);
	if (n > 4 && !strcasecmp(path + n - 4, ".tar") && strncmp(path, "http://", 7))
		return rf_dataset_open_wds(ds, path, 0, flags);
	return rf_dataset_open_rfrec(ds, path, flags);
}

int rf_dataset_open_file_opts(struct rf_dataset *ds, const char *path,
			      const struct rf_dataset_open_opts *o)
{
	if (!ds)
		return rf__fail(-EINVAL, "%s: ds is NULL", __func__);
	struct rf_dataset_open_opts d = { 0 };
	struct rf__http_intr oldi;
	uint64_t old;
	int ret;

	if (!o)
		o = &d;
	if (o->http_timeout_ms > 3600000u) {
		wds_zero(ds);
		return rf__ds_fail(-EINVAL, path ? path : "(null)", "http_timeout_ms %u: expected "
				   "1 to 3600000 (0: RF_HTTP_TIMEOUT_MS, else 10000)",
				   o->http_timeout_ms);
	}
	old = rf__http_open_timeout((uint64_t)o->http_timeout_ms * 1000000ull);
	oldi = rf__http_open_interrupt((struct rf__http_intr){ o->interrupt, o->interrupt_arg });
	ret = rf_dataset_open_file(ds, path, o->flags);
	rf__http_open_interrupt(oldi);
	rf__http_open_timeout(old);
	return ret;
}
