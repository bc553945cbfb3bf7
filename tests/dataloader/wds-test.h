/* wds-test.h -- WebDataset shards written by the tests (dl-shards, dl-loader-shards,
 * dl-loader-image): ustar members byte by byte, and a shard of samples KEY.jpg
 * (+ KEY.cls when labelled, + a KEY.txt caption) cut from a list, so that a set of
 * shards and one shard of the same samples in the same order can be compared.
 * Include after dl-test.h. */
#ifndef RF_WDS_TEST_H
#define RF_WDS_TEST_H

/* A sample: its image bytes and its label (-1: no .cls member). */
struct w_sample {
	uint8_t *img;
	size_t n;
	int32_t label;
};

/* A ustar member: header, data, zeros to 512. */
static inline void w_member(FILE *f, const char *name, const void *data, size_t n)
{
	uint8_t h[512] = { 0 }, pad[512] = { 0 };
	unsigned sum = 0;

	snprintf((char *)h, 100, "%s", name);
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	snprintf((char *)h + 124, 12, "%011zo", n);
	memcpy(h + 136, "14000000000", 12);
	memset(h + 148, ' ', 8);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	CHECK(fwrite(h, 1, 512, f) == 512);
	CHECK(n == 0 || fwrite(data, 1, n, f) == n);
	CHECK(fwrite(pad, 1, (512 - n % 512) % 512, f) == (512 - n % 512) % 512);
}

/* Samples s[first, first + n) as the shard path. bare: the shard ends right after its
 * last image (that sample's .cls written before it, no end blocks: a file that ends at
 * a block boundary is a whole archive) and not at a multiple of 4096 (a note member
 * first, if need be), so a read of its last image aligned up to 4096 passes the end of
 * the file. Returns path. */
static inline const char *w_shard_(const char *path, const struct w_sample *s, size_t first,
				   size_t n, int bare, int note)
{
	FILE *f = fopen(path, "wb");
	uint8_t zero[1024] = { 0 };

	CHECK(f);
	if (note)
		w_member(f, "note.txt", "not a sample", 12);
	for (size_t i = first; i < first + n; i++) {
		char name[64], cls[16];
		int last = bare && i + 1 == first + n;
		snprintf(cls, sizeof(cls), "%d\n", s[i].label);
		snprintf(name, sizeof(name), "s/%05zu.cls", i);
		if (last && s[i].label >= 0)
			w_member(f, name, cls, strlen(cls));
		snprintf(name, sizeof(name), "s/%05zu.jpg", i);
		w_member(f, name, s[i].img, s[i].n);
		if (last)
			break;
		snprintf(name, sizeof(name), "s/%05zu.cls", i);
		if (s[i].label >= 0)
			w_member(f, name, cls, strlen(cls));
		snprintf(name, sizeof(name), "s/%05zu.txt", i);
		w_member(f, name, "caption", 7);
	}
	if (!bare)
		CHECK(fwrite(zero, 1, sizeof(zero), f) == sizeof(zero));
	long end = ftell(f);
	CHECK(fclose(f) == 0);
	if (bare && !note && end % 4096 == 0)
		return w_shard_(path, s, first, n, bare, 1);
	return path;
}

static inline const char *w_shard(const char *path, const struct w_sample *s, size_t first,
				  size_t n, int bare)
{
	return w_shard_(path, s, first, n, bare, 0);
}

#endif
