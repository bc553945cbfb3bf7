/* test-cudnn-dl: the CUDA backend opens cuDNN with dlopen on first use
 * (devices/cuda/cudnn-dl.c: libcudnn.so.9), checks that its major version is the one
 * the header describes and resolves every call it makes; a missing symbol or another
 * major version would refuse every convolution on a GPU's first run. Loading and
 * resolving touch no device, so this runs here. Skips (77) where the library cannot
 * be loaded (a toolkit without cuDNN at run time: the backend then refuses
 * convolutions by name, which test-cuda-rules checks). */
#include <stdio.h>
#include <string.h>

#include "../../devices/cuda/cudnn-dl.h"
#include "../../devices/cuda/cudnn-impl.h"

int main(void)
{
	const char *why = NULL;

	if (!rf__dnn_ok(&why)) {
		if (why && strstr(why, "cannot load")) {
			printf("SKIP: %s\n", why);
			return 77;
		}
		fprintf(stderr, "FAIL: %s\n", why && *why ? why : "rf__dnn_ok failed, no reason");
		return 1;
	}
	if (why) {
		fprintf(stderr, "FAIL: loaded, yet a reason: %s\n", why);
		return 1;
	}
	/* a second ask answers from the first load (pthread_once), the same way */
	if (!rf__dnn_ok(&why) || why) {
		fprintf(stderr, "FAIL: a second rf__dnn_ok differs\n");
		return 1;
	}
	printf("cudnn-dl: libcudnn.so.9 loaded, version %d.x, every call resolved: ok\n",
	       CUDNN_MAJOR);
	return 0;
}
