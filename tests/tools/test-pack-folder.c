/* test-pack-folder: rf-pack's view of an ImageFolder tree (tools/pack-folder.c) against
 * torchvision's ImageFolder, which lists a class's files by sorted(os.walk(...)) and
 * then sorted(fnames):
 *  - the order: folders by their whole path, then names -- 'a/f0', 'a-b/f2', 'a/z/f1'
 *    ('-' sorts before '/'; a walk folder by folder put 'a/z/f1' before 'a-b/f2', so
 *    record i was not torchvision's sample i), and files before their subfolders';
 *  - labels: the class folders sorted, one label each;
 *  - a class folder without an image is refused, naming it (torchvision raises
 *    FileNotFoundError); before, it silently became a label no sample had. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../tools/pack-folder.h"
#include "../test-util.h"

static char root[256];

static void touch(const char *rel)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	for (char *s = strchr(p + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		mkdir(p, 0755);
		*s = '/';
	}
	CHECK((f = fopen(p, "wb")) != NULL);
	fputs("\xff\xd8\xff", f);
	fclose(f);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	struct rf__folder f;
	char err[512], cmd[1024];

	snprintf(root, sizeof(root), "%s/rf-pack-folder-XXXXXX", tmp ? tmp : "/tmp");
	CHECK(mkdtemp(root));
	/* class x: files at the top, in a, a-b, a/z and b; class w sorts first */
	const char *made[] = { "x/a/z/f1.jpg", "x/a-b/f2.jpg", "x/a/f0.jpg", "x/top.png",
			       "x/b/f3.JPEG", "x/a/e.jpg", "w/one.jpg" };
	for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++)
		touch(made[i]);
	/* torchvision's order (sorted(os.walk()), then sorted(fnames)), labels w 0, x 1 */
	const char *want[] = { "w/one.jpg", "x/top.png", "x/a/e.jpg", "x/a/f0.jpg",
			       "x/a-b/f2.jpg", "x/a/z/f1.jpg", "x/b/f3.JPEG" };
	const int32_t label[] = { 0, 1, 1, 1, 1, 1, 1 };
	CHECK_EQ(rf__folder_scan(&f, root, err, sizeof(err)), 0);
	CHECK_EQ(f.n, sizeof(want) / sizeof(want[0]));
	CHECK(f.nclasses == 2 && !strcmp(f.classes[0], "w") && !strcmp(f.classes[1], "x"));
	for (size_t i = 0; i < f.n; i++) {
		const char *rel = f.files[i].path + strlen(root) + 1;
		if (strcmp(rel, want[i]) || f.files[i].label != label[i]) {
			fprintf(stderr, "record %zu: %s (label %d), want %s (label %d)\n", i, rel,
				f.files[i].label, want[i], label[i]);
			return 1;
		}
	}
	rf__folder_free(&f);
	printf("order: as sorted(os.walk()) and sorted(fnames): ok\n");
	/* an empty class folder, and one holding only other files: refused, named */
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/v %s/y && echo t > %s/y/notes.txt", root, root,
		 root);
	CHECK(system(cmd) == 0);
	CHECK_EQ(rf__folder_scan(&f, root, err, sizeof(err)), -EINVAL);
	printf("refused: %s\n", err);
	CHECK(strstr(err, "2 of its 4 class folders hold no .jpg, .jpeg or .png file: 'v', 'y'"));
	CHECK(f.n == 0 && f.files == NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	CHECK(system(cmd) == 0);
	return 0;
}
