/* devices/cuda/cudnn-dl.c -- libcudnn.so.9 opened and its calls resolved once
 * (cudnn-dl.h), and the streams' cuDNN handles. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "cuda-impl.h"
#include "cudnn-dl.h"
#include "cudnn-impl.h"
#include "rf-internal.h"

struct rf__dn_calls rf__dn;
static pthread_once_t rf__dn_once = PTHREAD_ONCE_INIT;

static void rf__dn_load(void)
{
	/* the major version the header describes: another one's calls differ */
	static const char *const libs[] = { "libcudnn.so.9", NULL };
	size_t (*version)(void);
	const struct rf__dlsym ver[] = { { "cudnnGetVersion", (void **)&version } };
	const struct rf__dlsym syms[] = {
		{ "cudnnCreate", (void **)&rf__dn.create },
		{ "cudnnDestroy", (void **)&rf__dn.destroy },
		{ "cudnnSetStream", (void **)&rf__dn.set_stream },
		{ "cudnnGetErrorString", (void **)&rf__dn.error_string },
		{ "cudnnCreateTensorDescriptor", (void **)&rf__dn.create_tensor },
		{ "cudnnDestroyTensorDescriptor", (void **)&rf__dn.destroy_tensor },
		{ "cudnnSetTensor4dDescriptor", (void **)&rf__dn.set_tensor4d },
		{ "cudnnCreateFilterDescriptor", (void **)&rf__dn.create_filter },
		{ "cudnnDestroyFilterDescriptor", (void **)&rf__dn.destroy_filter },
		{ "cudnnSetFilter4dDescriptor", (void **)&rf__dn.set_filter4d },
		{ "cudnnCreateConvolutionDescriptor", (void **)&rf__dn.create_conv },
		{ "cudnnDestroyConvolutionDescriptor", (void **)&rf__dn.destroy_conv },
		{ "cudnnSetConvolution2dDescriptor", (void **)&rf__dn.set_conv2d },
		{ "cudnnSetConvolutionMathType", (void **)&rf__dn.set_conv_math },
		{ "cudnnGetConvolutionForwardAlgorithm_v7", (void **)&rf__dn.fwd_algos },
		{ "cudnnGetConvolutionBackwardDataAlgorithm_v7", (void **)&rf__dn.bwd_data_algos },
		{ "cudnnGetConvolutionBackwardFilterAlgorithm_v7", (void **)&rf__dn.bwd_filter_algos },
		{ "cudnnConvolutionForward", (void **)&rf__dn.conv_fwd },
		{ "cudnnConvolutionBackwardData", (void **)&rf__dn.conv_bwd_data },
		{ "cudnnConvolutionBackwardFilter", (void **)&rf__dn.conv_bwd_filter },
		{ "cudnnConvolutionBackwardBias", (void **)&rf__dn.conv_bwd_bias },
		{ "cudnnAddTensor", (void **)&rf__dn.add_tensor },
		{ "cudnnBatchNormalizationForwardTraining", (void **)&rf__dn.bn_train },
		{ "cudnnBatchNormalizationForwardInference", (void **)&rf__dn.bn_infer },
		{ "cudnnBatchNormalizationBackward", (void **)&rf__dn.bn_bwd },
		{ "cudnnCreatePoolingDescriptor", (void **)&rf__dn.create_pool },
		{ "cudnnDestroyPoolingDescriptor", (void **)&rf__dn.destroy_pool },
		{ "cudnnSetPooling2dDescriptor", (void **)&rf__dn.set_pool2d },
		{ "cudnnPoolingForward", (void **)&rf__dn.pool_fwd },
		{ "cudnnPoolingBackward", (void **)&rf__dn.pool_bwd },
	};
	void *h = rf__dl_open(libs, ver, 1, rf__dn.err, sizeof(rf__dn.err));

	if (!h)
		return;
	if (version() / 10000 != CUDNN_MAJOR) {
		snprintf(rf__dn.err, sizeof(rf__dn.err), "libcudnn.so.9 is version %zu, ringflow "
			 "was built for %d.x", version(), CUDNN_MAJOR);
		dlclose(h);
		return;
	}
	/* h and the handle of this second open stay open for the process's life */
	rf__dn.ok = rf__dl_open(libs, syms, sizeof(syms) / sizeof(syms[0]), rf__dn.err,
				sizeof(rf__dn.err)) != NULL;
}

int rf__dnn_ok(const char **why)
{
	pthread_once(&rf__dn_once, rf__dn_load);
	if (why)
		*why = rf__dn.ok ? NULL : rf__dn.err;
	return rf__dn.ok;
}

struct rf__dnn {
	cudnnHandle_t h;
};

void rf__dnn_destroy(struct rf__dnn *h)
{
	if (!h)
		return;
	rf__dn.destroy(h->h);
	free(h);
}

cudnnHandle_t rf__dnn_handle(struct rf__dnn **hp, void *cs, char *err, size_t len)
{
	cudnnStatus_t st;

	if (*hp)
		return (*hp)->h;
	if (!rf__dnn_ok(NULL)) {
		snprintf(err, len, "cuDNN: %.150s", rf__dn.err);
		return NULL;
	}
	struct rf__dnn *h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, len, "cuDNN handle: out of memory");
		return NULL;
	}
	if ((st = rf__dn.create(&h->h)) != CUDNN_STATUS_SUCCESS) {
		snprintf(err, len, "cudnnCreate: %s", rf__dn.error_string(st));
		free(h);
		return NULL;
	}
	if ((st = rf__dn.set_stream(h->h, (cudaStream_t)cs)) != CUDNN_STATUS_SUCCESS) {
		snprintf(err, len, "cudnnSetStream: %s", rf__dn.error_string(st));
		rf__dn.destroy(h->h);
		free(h);
		return NULL;
	}
	*hp = h;
	return h->h;
}
