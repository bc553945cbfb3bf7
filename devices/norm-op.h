/* devices/norm-op.h -- the context of a normalisation or pooling op (ops-norm.c): a
 * CPU host op runs it with the kernels of kernels.h, a CUDA stream with cuDNN
 * (cuda/cudnn.c). Internal to devices/. */
#ifndef RF_NORM_OP_H
#define RF_NORM_OP_H

#include "kernels.h"

/* Pointers by kind (x (n, c, h, w); k, st: the max-pooling window and stride):
 *   BN_TRAIN  out=y out2=mean out3=invstd out4=run_mean out5=run_var (or NULL)
 *             in=x in2=gamma in3=beta
 *   BN_EVAL   out=y in=x in2=gamma in3=beta in4=run_mean in5=run_var
 *   BN_BWD    out=dx out2=dgamma out3=dbeta in=dy in2=x in3=mean in4=invstd in5=gamma
 *   MAX_FWD   out=y in=x;  MAX_BWD out=dx in=dy in2=x
 *   GAP_FWD   out=y in=x;  GAP_BWD out=dx in=dy */
struct rf__norm_op {
	int kind;                       /* RF__N_* below */
	struct rf_k_bn bn;
	int n, c, h, w, k, st;
	float *out, *out2, *out3, *out4, *out5;
	const float *in, *in2, *in3, *in4, *in5;
};

enum { RF__N_BN_TRAIN, RF__N_BN_EVAL, RF__N_BN_BWD, RF__N_MAX_FWD, RF__N_MAX_BWD,
       RF__N_GAP_FWD, RF__N_GAP_BWD };

#endif
