/* fuzz/standalone.c -- a driver for a harness without libFuzzer: the regression run.
 *
 *   fuzz-NAME [-runs=N] [-seed=S] [-max_len=L] CORPUS_DIR_OR_FILE...
 *
 * Runs every corpus file once, then N inputs (default 0) made from them by 1 to 4
 * deterministic mutations each (seeded by S: the same run every time) -- bit flips,
 * bytes set to values parsers care about (0, 0xff, CR, LF, space, ':', '-', '/', '=',
 * '[', digits), erased, inserted, duplicated or swapped ranges, truncations, and
 * splices of two inputs -- of at most L bytes (default 65536). A sanitizer or a
 * harness's oracle aborts on a finding; the input that did it is written to
 * ./fuzz-crash-NAME first. Prints how many inputs ran. The same command line works
 * with libFuzzer (tools/fuzz), where -runs=N counts its own mutations. */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

struct input {
	uint8_t *d;
	size_t n;
};

static struct input *in;
static size_t nin, capin;
static const uint8_t *cur;
static size_t curn;
static const char *self;

static void add(uint8_t *d, size_t n)
{
	if (nin == capin) {
		capin = capin ? capin * 2 : 64;
		in = realloc(in, capin * sizeof(*in));
		if (!in)
			abort();
	}
	in[nin].d = d;
	in[nin++].n = n;
}

static void load_file(const char *path, size_t max_len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "fuzz: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	uint8_t *d = malloc(max_len ? max_len : 1);
	size_t n = fread(d, 1, max_len, f);
	fclose(f);
	add(d, n);
}

static void load(const char *path, size_t max_len)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "fuzz: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	if (!S_ISDIR(st.st_mode)) {
		load_file(path, max_len);
		return;
	}
	struct dirent **ents;
	int n = scandir(path, &ents, NULL, alphasort); /* a fixed order: a fixed run */
	for (int i = 0; i < n; i++) {
		char p[4096];
		if (ents[i]->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", path, ents[i]->d_name);
			if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
				load_file(p, max_len);
		}
		free(ents[i]);
	}
	free(ents);
}

static uint64_t rng;
static uint64_t rnd(void)
{
	rng += 0x9e3779b97f4a7c15ull;
	uint64_t z = rng;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* One mutation of b[0..*n) in place (capacity cap). */
static void mutate(uint8_t *b, size_t *n, size_t cap)
{
	static const uint8_t vals[] = { 0, 0xff, '\r', '\n', ' ', ':', '-', '/', '=', '[', ']',
					'0', '1', '9', '\t', ',', '*', '%', '.', 0x7f, 0x80 };
	size_t len = *n, a, k;
	switch (rnd() % 9) {
	case 0: /* flip a bit */
		if (len)
			b[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
		break;
	case 1: /* a value parsers care about */
		if (len)
			b[rnd() % len] = vals[rnd() % sizeof(vals)];
		break;
	case 2: /* erase a range */
		if (len) {
			a = rnd() % len;
			k = 1 + rnd() % (len - a < 16 ? len - a : 16);
			memmove(b + a, b + a + k, len - a - k);
			*n = len - k;
		}
		break;
	case 3: /* insert random bytes */
		k = 1 + rnd() % 8;
		if (len + k <= cap) {
			a = len ? rnd() % (len + 1) : 0;
			memmove(b + a + k, b + a, len - a);
			for (size_t i = 0; i < k; i++)
				b[a + i] = (uint8_t)rnd();
			*n = len + k;
		}
		break;
	case 4: /* duplicate a range */
		if (len) {
			a = rnd() % len;
			k = 1 + rnd() % (len - a < 32 ? len - a : 32);
			if (len + k <= cap) {
				size_t at = rnd() % (len + 1);
				uint8_t tmp[32];
				memcpy(tmp, b + a, k);
				memmove(b + at + k, b + at, len - at);
				memcpy(b + at, tmp, k);
				*n = len + k;
			}
		}
		break;
	case 5: /* truncate */
		if (len)
			*n = rnd() % len;
		break;
	case 6: /* splice with another input */
		if (nin) {
			const struct input *o = &in[rnd() % nin];
			if (o->n) {
				a = len ? rnd() % len : 0;
				size_t from = rnd() % o->n, m = o->n - from;
				if (a + m > cap)
					m = cap - a;
				memcpy(b + a, o->d + from, m);
				*n = a + m > len ? a + m : len;
			}
		}
		break;
	case 7: /* a digit string grown or changed (numbers in headers) */
		if (len) {
			a = rnd() % len;
			b[a] = (uint8_t)('0' + rnd() % 10);
		}
		break;
	default: /* swap two bytes */
		if (len > 1) {
			a = rnd() % len;
			k = rnd() % len;
			uint8_t t = b[a];
			b[a] = b[k];
			b[k] = t;
		}
		break;
	}
}

/* On a crash, the input that did it */
static void on_abort(int sig)
{
	char name[256];
	const char *base = strrchr(self, '/');
	snprintf(name, sizeof(name), "fuzz-crash-%s", base ? base + 1 : self);
	FILE *f = fopen(name, "wb");
	if (f) {
		fwrite(cur, 1, curn, f);
		fclose(f);
		fprintf(stderr, "fuzz: the input (%zu bytes) is in %s\n", curn, name);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static void run(const uint8_t *d, size_t n)
{
	cur = d;
	curn = n;
	LLVMFuzzerTestOneInput(d, n);
}

int main(int argc, char **argv)
{
	unsigned long long runs = 0, seed = 1;
	size_t max_len = 65536;
	int nfiles = 0;

	self = argv[0];
	LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "-runs=", 6))
			runs = strtoull(argv[i] + 6, NULL, 10);
		else if (!strncmp(argv[i], "-seed=", 6))
			seed = strtoull(argv[i] + 6, NULL, 10);
		else if (!strncmp(argv[i], "-max_len=", 9))
			max_len = strtoull(argv[i] + 9, NULL, 10);
		else if (argv[i][0] == '-')
			continue; /* a libFuzzer flag: not this driver's */
		else {
			load(argv[i], max_len);
			nfiles++;
		}
	}
	if (!nfiles) {
		fprintf(stderr, "usage: %s [-runs=N] [-seed=S] [-max_len=L] CORPUS...\n", argv[0]);
		return 2;
	}
	signal(SIGABRT, on_abort);
	signal(SIGSEGV, on_abort);
	for (size_t i = 0; i < nin; i++)
		run(in[i].d, in[i].n);
	rng = seed;
	uint8_t *b = malloc(max_len + 1);
	for (unsigned long long r = 0; r < runs && nin; r++) {
		const struct input *src = &in[rnd() % nin];
		size_t n = src->n < max_len ? src->n : max_len;
		memcpy(b, src->d, n);
		for (unsigned m = 1 + rnd() % 4; m--;)
			mutate(b, &n, max_len);
		run(b, n);
	}
	printf("fuzz: %zu corpus inputs and %llu mutations ran\n", nin, runs);
	free(b);
	for (size_t i = 0; i < nin; i++)
		free(in[i].d);
	free(in);
	return 0;
}
