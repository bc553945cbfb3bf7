/* devices/cuda/kernels_cuda_optim.cu -- the optimiser updates on CUDA: SGD (with weight
 * decay, momentum, Nesterov) and AdamW, rounded op by op as torch.optim's CPU code with
 * the _rn intrinsics (kernels.h: rf__k_sgd, rf__k_sgd_momentum, rf_adamw_params). */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "kernels-cuda-common.cuh"

namespace {

__global__ void k_sgd(float *w, const float *g, size_t n, float lr, float wd)
{
	GRID_STRIDE(i, n) {
		if (wd == 0.0f)
			w[i] = __fmaf_rn(-lr, g[i], w[i]); /* one rounding, as PyTorch */
		else    /* d = g + wd*w, then w - lr*d: one rounding each, as PyTorch */
			w[i] = __fmaf_rn(-lr, __fmaf_rn(wd, w[i], g[i]), w[i]);
	}
}

/* rounded as torch.optim.SGD: each add(alpha) one fused multiply-add, mul_ alone */
__global__ void k_sgd_momentum(float *w, float *v, const float *g, size_t n, float lr,
			       float mom, float wd, int nesterov)
{
	GRID_STRIDE(i, n) {
		float d = wd != 0.0f ? __fmaf_rn(wd, w[i], g[i]) : g[i];
		float vi = __fadd_rn(__fmul_rn(mom, v[i]), d);
		v[i] = vi;
		w[i] = __fmaf_rn(-lr, nesterov ? __fmaf_rn(mom, vi, d) : vi, w[i]);
	}
}

/* rounded as torch.optim.AdamW on the CPU, op by op (rf_adamw_params) */
__global__ void k_adamw(float *w, float *m, float *v, const float *g, size_t n, float decay,
			float b1, float c1, float b2, float c2, float step_size, float bc2,
			float eps)
{
	GRID_STRIDE(i, n) {
		float wd = __fmul_rn(w[i], decay);
		float mi = __fmaf_rn(c1, g[i], __fmul_rn(m[i], b1));
		float vi = __fmaf_rn(__fmul_rn(c2, g[i]), g[i], __fmul_rn(v[i], b2));
		float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2), eps);
		m[i] = mi;
		v[i] = vi;
		w[i] = __fadd_rn(wd, __fdiv_rn(__fmul_rn(-step_size, mi), den));
	}
}

} // namespace

extern "C" {

int rf__kc_sgd(void *stream, float *w, const float *g, size_t n, float lr,
	      float weight_decay)
{
	if (!n)
		return 0;
	k_sgd<<<blocks_for(n), kThreads, 0, S(stream)>>>(w, g, n, lr, weight_decay);
	return launch_rc();
}

int rf__kc_sgd_momentum(void *stream, float *w, float *v, const float *g, size_t n,
		       float lr, float momentum, float weight_decay, int nesterov)
{
	if (!n)
		return 0;
	k_sgd_momentum<<<blocks_for(n), kThreads, 0, S(stream)>>>(w, v, g, n, lr, momentum,
								  weight_decay, nesterov);
	return launch_rc();
}

int rf__kc_adamw(void *stream, float *w, float *m, float *v, const float *g, size_t n,
		 const struct rf_adamw_params *p)
{
	double lr = p->lr, st = (double)p->step;

	if (!n)
		return 0;
	k_adamw<<<blocks_for(n), kThreads, 0, S(stream)>>>(w, m, v, g, n,
		(float)(1.0 - lr * p->weight_decay), (float)p->beta1, (float)(1.0 - p->beta1),
		(float)p->beta2, (float)(1.0 - p->beta2), (float)(lr / (1.0 - pow(p->beta1, st))),
		(float)sqrt(1.0 - pow(p->beta2, st)), (float)p->eps);
	return launch_rc();
}

} // extern "C"
