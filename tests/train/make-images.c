/* make-images DIR TRAIN TEST [SEED]: an ImageFolder train set and test set of JPEGs for
 * rf-train's image tests: DIR/train/cK/N.jpg (TRAIN per class) and DIR/test/cK/N.jpg
 * (TEST per class), four classes, each image a colour of its class with per-image
 * jitter and eight squares of random colours, 40..90 pixels a side, quality 85. A
 * model must tell the classes apart by their colour whatever the crop. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <turbojpeg.h>

static uint64_t st;

static unsigned rnd(unsigned n)
{
	st = st * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)((st >> 33) % n);
}

static int clampc(int v)
{
	return v < 0 ? 0 : v > 255 ? 255 : v;
}

int main(int argc, char **argv)
{
	static const int col[4][3] = { { 200, 40, 40 }, { 40, 200, 40 }, { 40, 40, 200 },
				       { 200, 200, 40 } };
	static const char *const split[2] = { "train", "test" };
	tjhandle t = tjInitCompress();
	char p[4096];

	if (argc < 4 || !t) {
		fprintf(stderr, "usage: make-images DIR TRAIN TEST [SEED]\n");
		return 2;
	}
	st = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
	if (mkdir(argv[1], 0755) && errno != EEXIST)
		return perror(argv[1]), 1;
	for (int s = 0; s < 2; s++) {
		unsigned n = (unsigned)atoi(argv[2 + s]);
		snprintf(p, sizeof(p), "%s/%s", argv[1], split[s]);
		mkdir(p, 0755);
		for (int k = 0; k < 4; k++) {
			snprintf(p, sizeof(p), "%s/%s/c%d", argv[1], split[s], k);
			mkdir(p, 0755);
			for (unsigned i = 0; i < n; i++) {
				int w = 40 + (int)rnd(51), h = 40 + (int)rnd(51), c[3];
				uint8_t *px = malloc((size_t)w * h * 3), *jb = NULL;
				unsigned long js = 0;
				FILE *f;
				for (int q = 0; q < 3; q++)
					c[q] = clampc(col[k][q] + (int)rnd(81) - 40);
				for (int y = 0; y < h; y++)
					for (int x = 0; x < w; x++)
						for (int q = 0; q < 3; q++)
							px[(y * w + x) * 3 + q] = (uint8_t)c[q];
				for (int b = 0; b < 8; b++) {
					int x0 = (int)rnd((unsigned)w - 8), y0 = (int)rnd((unsigned)h - 8);
					int bc[3] = { (int)rnd(256), (int)rnd(256), (int)rnd(256) };
					for (int y = y0; y < y0 + 8; y++)
						for (int x = x0; x < x0 + 8; x++)
							for (int q = 0; q < 3; q++)
								px[(y * w + x) * 3 + q] = (uint8_t)bc[q];
				}
				if (tjCompress2(t, px, w, 0, h, TJPF_RGB, &jb, &js, TJSAMP_420, 85, 0))
					return fprintf(stderr, "%s\n", tjGetErrorStr2(t)), 1;
				snprintf(p, sizeof(p), "%s/%s/c%d/%04u.jpg", argv[1], split[s], k, i);
				if (!(f = fopen(p, "wb")) || fwrite(jb, 1, js, f) != js || fclose(f))
					return perror(p), 1;
				tjFree(jb);
				free(px);
			}
		}
	}
	tjDestroy(t);
	return 0;
}
