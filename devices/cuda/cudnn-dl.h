/* devices/cuda/cudnn-dl.h -- the cuDNN calls ringflow makes, resolved once from
 * libcudnn.so.9 opened with dlopen on first use (rf__dnn_ok, cudnn-impl.h), not linked:
 * libcudnn (and the sub-libraries it opens itself, some hundreds of MB) would otherwise
 * be mapped at the start of every program that links ringflow, and a build with it
 * would not start where it is missing. cudnn.h gives the types. Internal to
 * devices/cuda/: cudnn.c makes the calls. */
#ifndef RF_CUDNN_DL_H
#define RF_CUDNN_DL_H

#include <cudnn.h>

struct rf__dn_calls {
	cudnnStatus_t (*create)(cudnnHandle_t *);
	cudnnStatus_t (*destroy)(cudnnHandle_t);
	cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t);
	const char *(*error_string)(cudnnStatus_t);
	cudnnStatus_t (*create_tensor)(cudnnTensorDescriptor_t *);
	cudnnStatus_t (*destroy_tensor)(cudnnTensorDescriptor_t);
	cudnnStatus_t (*set_tensor4d)(cudnnTensorDescriptor_t, cudnnTensorFormat_t,
				      cudnnDataType_t, int, int, int, int);
	cudnnStatus_t (*create_filter)(cudnnFilterDescriptor_t *);
	cudnnStatus_t (*destroy_filter)(cudnnFilterDescriptor_t);
	cudnnStatus_t (*set_filter4d)(cudnnFilterDescriptor_t, cudnnDataType_t,
				      cudnnTensorFormat_t, int, int, int, int);
	cudnnStatus_t (*create_conv)(cudnnConvolutionDescriptor_t *);
	cudnnStatus_t (*destroy_conv)(cudnnConvolutionDescriptor_t);
	cudnnStatus_t (*set_conv2d)(cudnnConvolutionDescriptor_t, int, int, int, int, int, int,
				    cudnnConvolutionMode_t, cudnnDataType_t);
	cudnnStatus_t (*set_conv_math)(cudnnConvolutionDescriptor_t, cudnnMathType_t);
	cudnnStatus_t (*fwd_algos)(cudnnHandle_t, cudnnTensorDescriptor_t,
				   cudnnFilterDescriptor_t, cudnnConvolutionDescriptor_t,
				   cudnnTensorDescriptor_t, int, int *,
				   cudnnConvolutionFwdAlgoPerf_t *);
	cudnnStatus_t (*bwd_data_algos)(cudnnHandle_t, cudnnFilterDescriptor_t,
					cudnnTensorDescriptor_t, cudnnConvolutionDescriptor_t,
					cudnnTensorDescriptor_t, int, int *,
					cudnnConvolutionBwdDataAlgoPerf_t *);
	cudnnStatus_t (*bwd_filter_algos)(cudnnHandle_t, cudnnTensorDescriptor_t,
					  cudnnTensorDescriptor_t, cudnnConvolutionDescriptor_t,
					  cudnnFilterDescriptor_t, int, int *,
					  cudnnConvolutionBwdFilterAlgoPerf_t *);
	cudnnStatus_t (*conv_fwd)(cudnnHandle_t, const void *, cudnnTensorDescriptor_t,
				  const void *, cudnnFilterDescriptor_t, const void *,
				  cudnnConvolutionDescriptor_t, cudnnConvolutionFwdAlgo_t, void *,
				  size_t, const void *, cudnnTensorDescriptor_t, void *);
	cudnnStatus_t (*conv_bwd_data)(cudnnHandle_t, const void *, cudnnFilterDescriptor_t,
				       const void *, cudnnTensorDescriptor_t, const void *,
				       cudnnConvolutionDescriptor_t, cudnnConvolutionBwdDataAlgo_t,
				       void *, size_t, const void *, cudnnTensorDescriptor_t,
				       void *);
	cudnnStatus_t (*conv_bwd_filter)(cudnnHandle_t, const void *, cudnnTensorDescriptor_t,
					 const void *, cudnnTensorDescriptor_t, const void *,
					 cudnnConvolutionDescriptor_t,
					 cudnnConvolutionBwdFilterAlgo_t, void *, size_t,
					 const void *, cudnnFilterDescriptor_t, void *);
	cudnnStatus_t (*conv_bwd_bias)(cudnnHandle_t, const void *, cudnnTensorDescriptor_t,
				       const void *, const void *, cudnnTensorDescriptor_t, void *);
	cudnnStatus_t (*add_tensor)(cudnnHandle_t, const void *, cudnnTensorDescriptor_t,
				    const void *, const void *, cudnnTensorDescriptor_t, void *);
	cudnnStatus_t (*bn_train)(cudnnHandle_t, cudnnBatchNormMode_t, const void *, const void *,
				  cudnnTensorDescriptor_t, const void *, cudnnTensorDescriptor_t,
				  void *, cudnnTensorDescriptor_t, const void *, const void *,
				  double, void *, void *, double, void *, void *);
	cudnnStatus_t (*bn_infer)(cudnnHandle_t, cudnnBatchNormMode_t, const void *, const void *,
				  cudnnTensorDescriptor_t, const void *, cudnnTensorDescriptor_t,
				  void *, cudnnTensorDescriptor_t, const void *, const void *,
				  const void *, const void *, double);
	cudnnStatus_t (*bn_bwd)(cudnnHandle_t, cudnnBatchNormMode_t, const void *, const void *,
				const void *, const void *, cudnnTensorDescriptor_t, const void *,
				cudnnTensorDescriptor_t, const void *, cudnnTensorDescriptor_t,
				void *, cudnnTensorDescriptor_t, const void *, void *, void *,
				double, const void *, const void *);
	cudnnStatus_t (*create_pool)(cudnnPoolingDescriptor_t *);
	cudnnStatus_t (*destroy_pool)(cudnnPoolingDescriptor_t);
	cudnnStatus_t (*set_pool2d)(cudnnPoolingDescriptor_t, cudnnPoolingMode_t,
				    cudnnNanPropagation_t, int, int, int, int, int, int);
	cudnnStatus_t (*pool_fwd)(cudnnHandle_t, cudnnPoolingDescriptor_t, const void *,
				  cudnnTensorDescriptor_t, const void *, const void *,
				  cudnnTensorDescriptor_t, void *);
	cudnnStatus_t (*pool_bwd)(cudnnHandle_t, cudnnPoolingDescriptor_t, const void *,
				  cudnnTensorDescriptor_t, const void *, cudnnTensorDescriptor_t,
				  const void *, cudnnTensorDescriptor_t, const void *, const void *,
				  cudnnTensorDescriptor_t, void *);
	int ok;
	char err[256];
};
/* filled once by rf__dnn_ok; ok says whether every call was found, err why not */
extern struct rf__dn_calls rf__dn;

struct rf__dnn;
/* A stream's handle, made at first use on stream cs and kept in *hp (rf__dnn_destroy
 * frees it). NULL with err set when cuDNN is missing or refuses. */
cudnnHandle_t rf__dnn_handle(struct rf__dnn **hp, void *cs, char *err, size_t len);

#endif
