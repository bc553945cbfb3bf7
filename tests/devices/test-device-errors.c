/* test-device-errors: failures become poisoned variables with a message.
 *  - softmax cross-entropy with a label out of range fails at run time with -EINVAL:
 *    its outputs are poisoned and name the op, rf_device_last_error says what was
 *    wrong, ops that read the poisoned outputs are skipped (their kernels never run),
 *    rf_tensor_read and rf_engine_wait_all return the error; clearing the poison
 *    makes the tensor usable again.
 *  - a failing host op (-EIO) poisons what it writes, with strerror's text; closing
 *    another device meanwhile (an internal drain) leaves the error for wait_all.
 *  - bad shapes, dtypes, aliasing and NULLs are refused at push time with -EINVAL and
 *    push nothing (batch norm's empty shapes too, which its kernels cannot take); bad
 *    tensor shapes and device names are refused too.
 *  - CUDA without a GPU: rf_cuda_count() is 0 and rf_cuda_open fails cleanly.
 *  - RF_BLAS_THREADS that is not an integer 1..1024: rf_cpu_open refuses, naming it.
 *  - a message may quote the one before it (rf__fail(..., "%s", rf_last_error()),
 *    as rf_model_set_format does with a device's refusal): it arrives whole. */
#include "test-device-suite.h"
#include "rf-internal.h"

static int ran;
static int fail_eio(void *arg) { (void)arg; return -EIO; }
static int mark(void *arg) { (void)arg; ran++; return 0; }

int main(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *d;
	struct rf_engine_stats st0, st1;

	CHECK_EQ(rf__fail(-ENOTSUP, "inner %d: %s", 7, "a reason long enough to overlap"),
		 -ENOTSUP);
	CHECK_EQ(rf__fail(-EINVAL, "outer: %s", rf_last_error()), -EINVAL);
	CHECK(!strcmp(rf_last_error(), "outer: inner 7: a reason long enough to overlap"));
	const char *who = NULL;
	float lg[3 * 4] = { 0 }, loss;
	int32_t lab[3] = { 0, 7, 1 };

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, &(struct rf_engine_opts){ .sync = 0 }));
	CHECK_OK(rf_cpu_open(e, &(struct rf_cpu_opts){ .streams = 2 }, &d));
	CHECK_EQ(rf_device_last_error(d)[0], 0);

	{
		struct rf_tensor *L = ts_upload(d, RF_F32, lg, "logits", RF_DIMS(3, 4));
		struct rf_tensor *Lab = ts_upload(d, RF_I32, lab, "labels", RF_DIMS(3));
		struct rf_tensor *DL;
		rf_tensor_create(d, RF_F32, "dlogits", RF_DIMS(3, 4), &DL);
		struct rf_tensor *Ls;
		rf_tensor_create(d, RF_F32, "loss", RF_DIMS(1), &Ls);
		struct rf_tensor *Y;
		rf_tensor_create(d, RF_F32, "y", RF_DIMS(3, 4), &Y);
		CHECK_OK(rf_softmax_xent(rf_device_stream(d, 0), DL, Ls, NULL, L, Lab));
		CHECK_OK(rf_relu_fwd(rf_device_stream(d, 1), Y, DL));          /* skipped */
		CHECK_OK(rf_host_op(NULL, mark, NULL, &Y, 1, NULL, 0, "mark")); /* skipped */
		CHECK_EQ(rf_tensor_read(Ls, &loss), -EINVAL);
		CHECK_EQ(rf_var_error(Ls->var, &who), -EINVAL);
		CHECK(who && !strcmp(who, "softmax_xent"));
		CHECK_EQ(rf_tensor_wait(Y), -EINVAL);
		CHECK_EQ(rf_var_error(Y->var, &who), -EINVAL);
		CHECK(who && !strcmp(who, "softmax_xent")); /* the poison names the culprit */
		CHECK(strstr(rf_device_last_error(d), "softmax_xent"));
		CHECK(strstr(rf_device_last_error(d), "label"));
		CHECK_EQ(rf_engine_wait_all(e), -EINVAL);
		CHECK_EQ(ran, 0);
		/* fix the labels, clear the poison, run again */
		lab[1] = 3;
		CHECK_OK(rf_tensor_write(Lab, lab));
		CHECK_OK(rf_var_clear_error(e, Ls->var));
		CHECK_OK(rf_var_clear_error(e, DL->var));
		CHECK_OK(rf_softmax_xent(NULL, DL, Ls, NULL, L, Lab));
		CHECK_OK(rf_tensor_read(Ls, &loss));
		CHECK(fabsf(loss - 3 * logf(4)) < 1e-5f);
		rf_tensor_destroy(L); rf_tensor_destroy(Lab); rf_tensor_destroy(DL); rf_tensor_destroy(Ls);
		rf_tensor_destroy(Y);
		CHECK_OK(rf_engine_wait_all(e));
		fprintf(stderr, "runtime error -> poison, skip, message, clear: ok\n");
	}
	{
		struct rf_tensor *t;
		rf_tensor_create(d, RF_F32, "t", RF_DIMS(4), &t);
		CHECK_OK(rf_host_op(rf_device_stream(d, 1), fail_eio, NULL, NULL, 0, &t, 1, "writer"));
		CHECK_EQ(rf_tensor_wait(t), -EIO);
		CHECK(strstr(rf_device_last_error(d), "writer"));
		CHECK(strstr(rf_device_last_error(d), strerror(EIO)));
		CHECK_EQ(rf_engine_wait_all(e), -EIO);
		/* closing another device (and freeing a tensor) drains the engine but
		 * leaves a pending error for the user's wait_all */
		{
			struct rf_device *d2;
			CHECK_OK(rf_host_op(rf_device_stream(d, 1), fail_eio, NULL, NULL, 0, &t, 1, "again"));
			CHECK_OK(rf_cpu_open(e, &(struct rf_cpu_opts){ .streams = 1 }, &d2));
			rf_device_close(d2);
			rf_tensor_destroy(t);
			CHECK_EQ(rf_engine_wait_all(e), -EIO);
			CHECK_EQ(rf_engine_wait_all(e), 0);
		}
		fprintf(stderr, "host op error: ok\n");
	}
	{
		struct rf_tensor *A;
		rf_tensor_create(d, RF_F32, "A", RF_DIMS(4, 5), &A);
		struct rf_tensor *B;
		rf_tensor_create(d, RF_F32, "B", RF_DIMS(5, 6), &B);
		struct rf_tensor *C;
		rf_tensor_create(d, RF_F32, "C", RF_DIMS(4, 6), &C);
		struct rf_tensor *I;
		rf_tensor_create(d, RF_I32, "I", RF_DIMS(4, 6), &I);
		struct rf_tensor *X4;
		rf_tensor_create(d, RF_F32, "x4", RF_DIMS(1, 1, 4, 4), &X4);
		struct rf_tensor *W4;
		rf_tensor_create(d, RF_F32, "w4", RF_DIMS(2, 3, 3, 3), &W4);
		struct rf_tensor *Y4;
		rf_tensor_create(d, RF_F32, "y4", RF_DIMS(1, 2, 2, 2), &Y4);
		struct rf_tensor *T = NULL;
		struct rf_tensor *W1, *V2, *Y2, *Z2;
		rf_tensor_create(d, RF_F32, "w1", RF_DIMS(2, 1, 3, 3), &W1);
		rf_tensor_create(d, RF_F32, "v2", RF_DIMS(2), &V2);
		rf_tensor_create(d, RF_F32, "y2", RF_DIMS(1, 2, 4, 4), &Y2);
		rf_tensor_create(d, RF_F32, "z2", RF_DIMS(1, 2, 4, 4), &Z2);
		struct rf_tensor *E0, *C0;
		rf_tensor_create(d, RF_F32, "e0", RF_DIMS(0, 2, 4, 4), &E0);
		rf_tensor_create(d, RF_F32, "c0", RF_DIMS(1, 0, 4, 4), &C0);
		rf_engine_get_stats(e, &st0);
		CHECK_EQ(rf_gemm(NULL, 0, 0, 1, A, A, 0, C), -EINVAL);   /* inner dims */
		CHECK(!strncmp(rf_last_error(), "rf_gemm: ", 9));
		CHECK_EQ(rf_gemm(NULL, 1, 0, 1, A, B, 0, C), -EINVAL);   /* A transposed */
		CHECK_EQ(rf_gemm(NULL, 0, 0, 1, A, B, 0, I), -EINVAL);   /* dtype */
		CHECK_EQ(rf_gemm(NULL, 0, 0, 1, C, B, 0, C), -EINVAL);   /* aliasing */
		CHECK_EQ(rf_bias_add(NULL, C, A), -EINVAL);
		CHECK_EQ(rf_relu_fwd(NULL, C, A), -EINVAL);
		/* the op signature's checks (op-sig.c): each names the function, the
		 * argument and what was expected */
		CHECK(strstr(rf_last_error(), "rf_relu_fwd: y C (4, 6) f32 cpu:0 and x A (4, 5)"));
		CHECK(strstr(rf_last_error(), "differ in size"));
		CHECK_EQ(rf_gemm(NULL, 0, 0, 1, A, B, 0, I), -EINVAL);
		CHECK(strstr(rf_last_error(), "rf_gemm: C I (4, 6) i32 cpu:0: expected a float tensor"));
		CHECK_EQ(rf_gemm(NULL, 0, 0, 1, A, X4, 0, C), -EINVAL);
		CHECK(strstr(rf_last_error(), "rf_gemm: B x4 (1, 1, 4, 4) f32 cpu:0: expected 2 dim"));
		CHECK_EQ(rf_sgd(NULL, NULL, C, 0.1f, 0), -EINVAL);
		CHECK(strstr(rf_last_error(), "rf_sgd: w is NULL"));
		CHECK_EQ(rf_u8_to_i32(NULL, C, C), -EINVAL);
		CHECK(strstr(rf_last_error(), "rf_u8_to_i32: out C (4, 6) f32 cpu:0: expected i32"));
		CHECK_EQ(rf_sum(NULL, C, (struct rf_tensor *[]){ C, A }, 2), -EINVAL);
		CHECK(strstr(rf_last_error(), "rf_sum: out C") && strstr(rf_last_error(), "in[1] A"));
		CHECK_EQ(rf_batchnorm_fwd(NULL, Z2, V2, V2, NULL, NULL, Y2, V2, C, 1, 1e-5f, 0.1f),
			 -EINVAL);                                                /* beta 24 */
		CHECK(strstr(rf_last_error(), "rf_batchnorm_fwd: beta has 24 elements, 2 expected "
			     "(one per channel of x)"));
		CHECK_EQ(rf_maxpool2d_bwd(NULL, Y4, Z2, Y2, 1, 1), -EINVAL);     /* dx is not x's */
		CHECK(strstr(rf_last_error(), "rf_maxpool2d_bwd: x y2 (1, 2, 4, 4) f32 cpu:0 and dx y4"));
		CHECK(strstr(rf_last_error(), "differ in shape"));
		CHECK_EQ(rf_conv2d_fwd(NULL, Y4, X4, W4, NULL, 1, 0), -EINVAL); /* channels */
		CHECK_EQ(rf_avgpool2d_fwd(NULL, Y4, X4, 3), -EINVAL);
		/* strides, padding and the layers of ResNet: every bad argument refused,
		 * nothing pushed, the message names the function and what was expected */
		CHECK_EQ(rf_conv2d_fwd(NULL, Y4, X4, W1, NULL, 0, 0), -EINVAL);   /* stride 0 */
		CHECK(strstr(rf_last_error(), "rf_conv2d_fwd: stride 0, pad 0: a stride >= 1"));
		CHECK_EQ(rf_conv2d_fwd(NULL, Y4, X4, W1, NULL, 1, 3), -EINVAL);   /* pad >= kernel */
		CHECK(strstr(rf_last_error(), "the pad must be smaller than the kernel"));
		CHECK_EQ(rf_conv2d_fwd(NULL, Y4, X4, W1, NULL, 1, 1), -EINVAL);   /* y is 2x2, not 4x4 */
		CHECK(strstr(rf_last_error(), "stride 1 and pad 1"));
		CHECK_EQ(rf_conv2d_bwd_data(NULL, X4, Y2, W1, 2, 1), -EINVAL);    /* 4x4 is stride 1 */
		CHECK_EQ(rf_batchnorm_fwd(NULL, Y4, V2, V2, NULL, NULL, X4, V2, V2, 1, 1e-5f, 0.1f),
			 -EINVAL);                                                /* x 1 channel, gamma 2 */
		CHECK(strstr(rf_last_error(), "rf_batchnorm_fwd: "));
		CHECK_EQ(rf_batchnorm_fwd(NULL, Z2, V2, V2, NULL, NULL, Y2, V2, V2, 0, 1e-5f, 0.1f),
			 -EINVAL);                                                /* eval: no stats */
		CHECK(strstr(rf_last_error(), "evaluation needs run_mean and run_var"));
		CHECK_EQ(rf_batchnorm_fwd(NULL, Z2, V2, V2, V2, NULL, Y2, V2, V2, 1, 1e-5f, 0.1f),
			 -EINVAL);                                                /* one of the pair */
		CHECK_EQ(rf_batchnorm_fwd(NULL, Z2, V2, V2, NULL, NULL, Y2, V2, V2, 1, 0.0f, 0.1f),
			 -EINVAL);                                                /* eps 0 */
		CHECK_EQ(rf_batchnorm_fwd(NULL, Y2, V2, V2, NULL, NULL, Y2, V2, V2, 1, 1e-5f, 0.1f),
			 -EINVAL);                                                /* y is x */
		CHECK(strstr(rf_last_error(), "y must not be x"));
		CHECK_EQ(rf_maxpool2d_bwd(NULL, Y2, Z2, Y2, 1, 1), -EINVAL);     /* dx is x */
		CHECK(strstr(rf_last_error(), "dx must not alias x or dy"));
		CHECK_EQ(rf_batchnorm_bwd(NULL, Y2, V2, V2, Y2, Y2, V2, V2, V2), -EINVAL); /* alias */
		CHECK(strstr(rf_last_error(), "dx must not alias dy or x"));
		/* empty shapes the batch-norm kernels cannot take: refused before a push,
		 * so that no device computes them its own way */
		CHECK_EQ(rf_batchnorm_bwd(NULL, E0, V2, V2, E0, E0, V2, V2, V2), -EINVAL);
		CHECK(strstr(rf_last_error(), "x is 0 x 2 x 4 x 4: no empty dimension expected"));
		CHECK_EQ(rf_batchnorm_fwd(NULL, Z2, V2, V2, V2, V2, C0, V2, V2, 0, 1e-5f, 0.1f),
			 -EINVAL);                                                /* no channel */
		CHECK(strstr(rf_last_error(), "x is 1 x 0 x 4 x 4: channels and planes"));
		CHECK_EQ(rf_maxpool2d_fwd(NULL, Y4, X4, 5, 1), -EINVAL);          /* window > 4 */
		CHECK(strstr(rf_last_error(), "rf_maxpool2d_fwd: window 5, stride 1"));
		CHECK_EQ(rf_maxpool2d_fwd(NULL, Y4, X4, 2, 1), -EINVAL);          /* 2 channels vs 1 */
		CHECK_EQ(rf_gavgpool_fwd(NULL, V2, X4), -EINVAL);                 /* (2) is not (1, 1) */
		CHECK(strstr(rf_last_error(), "rf_gavgpool_fwd: "));
		CHECK_EQ(rf_softmax_xent(NULL, NULL, NULL, NULL, C, I), -EINVAL);
		CHECK_EQ(rf_sum(NULL, C, NULL, 0), -EINVAL);
		CHECK_EQ(rf_copy(NULL, C, NULL), -EINVAL);
		CHECK_EQ(rf_u8_to_f32(NULL, C, C, 1, 0, 1), -EINVAL);
		{
			static const float m[5] = { 0, 0, 0, 0, 0 }, sd[5] = { 1, 1, 0, 1, 1 };
			float nan = __builtin_nanf("");
			CHECK_EQ(rf_u8_normalize(NULL, C, C, 1, 0, 1, m, sd), -EINVAL);
			CHECK(strstr(rf_last_error(), "rf_u8_normalize: nch 0: expected 1 to 4"));
			CHECK_EQ(rf_u8_normalize(NULL, C, C, 1, 5, 1, m, sd), -EINVAL);
			CHECK_EQ(rf_u8_normalize(NULL, C, C, 1, 2, 0, m, sd), -EINVAL);
			CHECK(strstr(rf_last_error(), "plane 0"));
			CHECK_EQ(rf_u8_normalize(NULL, C, C, 1, 2, 1, NULL, sd), -EINVAL);
			CHECK(strstr(rf_last_error(), "mean is NULL"));
			CHECK_EQ(rf_u8_normalize(NULL, C, C, 1, 3, 1, m, sd), -EINVAL);
			CHECK(strstr(rf_last_error(), "std[2] 0: expected a finite nonzero"));
			CHECK_EQ(rf_u8_normalize(NULL, C, C, nan, 1, 1, m, sd), -EINVAL);
			CHECK(strstr(rf_last_error(), "scale nan"));
			CHECK_EQ(rf_u8_normalize(NULL, C, C, 1, 1, 5, m, sd), -EINVAL); /* 24 % 5 */
			CHECK_EQ(rf_u8_normalize(NULL, C, C, 1, 2, 1, m, sd), -EINVAL); /* C is f32 */
			CHECK(strstr(rf_last_error(), "in"));
		}
		CHECK_EQ(rf_rand_uniform(NULL, C, NULL, 0, 1), -EINVAL);
		CHECK_OK(rf_gemm(NULL, 0, 0, 1, A, B, 0, C));
		rf_engine_get_stats(e, &st1);
		CHECK_EQ(st1.pushed, st0.pushed + 1);
		CHECK_EQ(rf_tensor_reshape(C, RF_DIMS(5, 5)), -EINVAL);
		CHECK_OK(rf_tensor_reshape(C, RF_DIMS(24)));
		CHECK(rf_tensor_create(d, RF_F32, "neg", RF_DIMS(-1), &T) == -EINVAL && !T);
		CHECK(strstr(rf_last_error(), "tensor neg: bad shape"));
		CHECK(rf_tensor_create(d, RF_F32, "5d", RF_DIMS(1, 1, 1, 1, 1), &T) == -EINVAL && !T);
		CHECK(rf_tensor_create(d, (enum rf_tdtype)99, "dt", RF_DIMS(1), &T) == -EINVAL && !T);
		rf_tensor_destroy(A); rf_tensor_destroy(B); rf_tensor_destroy(C); rf_tensor_destroy(I);
		rf_tensor_destroy(X4); rf_tensor_destroy(W4); rf_tensor_destroy(Y4);
		rf_tensor_destroy(W1); rf_tensor_destroy(V2); rf_tensor_destroy(Y2); rf_tensor_destroy(Z2);
		rf_tensor_destroy(E0); rf_tensor_destroy(C0);
		CHECK_OK(rf_engine_wait_all(e));
		fprintf(stderr, "refused at push: ok\n");
	}
	{
		struct rf_device *x = NULL;
		CHECK_EQ(rf_device_open(e, "gpu", &x), -EINVAL);
		CHECK(strstr(rf_last_error(), "device 'gpu': expected cpu, cpu:N, cuda or cuda:N"));
		CHECK_EQ(rf_device_open(e, "cpu:x", &x), -EINVAL);
		if (rf_cuda_count() == 0) {
			int r = rf_cuda_open(e, 0, NULL, &x);
			CHECK(r == -ENODEV || r == -ENOTSUP);
			CHECK(rf_device_open(e, "cuda:0", &x) < 0);
		}
		/* RF_CUDA_WATCHDOG_MS was read with atoi ("5x" was 5, "abc" the default): a
		 * malformed value is refused by name, on any machine (before a device is
		 * looked for); a build without CUDA says so instead */
		static const char *const badwd[] = { "abc", "5x", "-5", "0", "", " 7", "3600001" };
		for (unsigned i = 0; i < sizeof(badwd) / sizeof(badwd[0]); i++) {
			char want[96];
			setenv("RF_CUDA_WATCHDOG_MS", badwd[i], 1);
			int r = rf_device_open(e, "cuda:0", &x);
			CHECK(r < 0 && !x);
			snprintf(want, sizeof(want), "RF_CUDA_WATCHDOG_MS=%s in the environment: "
				 "expected", badwd[i]);
			CHECK(r == -ENOTSUP ? !!strstr(rf_last_error(), "without CUDA")
					    : r == -EINVAL && strstr(rf_last_error(), want));
		}
		/* so are the completion path's (cuda-counter.c read them at a stream's
		 * creation: a typo showed only on a GPU) */
		static const char *const badcv[][2] = {
			{ "RF_CUDA_COUNTER", "strem" }, { "RF_CUDA_WAKE", "sometimes" },
			{ "RF_CUDA_WAKER_SPIN_US", "5us" } };
		unsetenv("RF_CUDA_WATCHDOG_MS");   /* the loop above left a bad one */
		for (unsigned i = 0; i < sizeof(badcv) / sizeof(badcv[0]); i++) {
			char want[96];
			setenv(badcv[i][0], badcv[i][1], 1);
			int r = rf_device_open(e, "cuda:0", &x);
			CHECK(r < 0 && !x);
			snprintf(want, sizeof(want), "%s=%s in the environment: expected", badcv[i][0],
				 badcv[i][1]);
			CHECK(r == -ENOTSUP ? !!strstr(rf_last_error(), "without CUDA")
					    : r == -EINVAL && strstr(rf_last_error(), want));
			unsetenv(badcv[i][0]);
		}
		setenv("RF_CUDA_WATCHDOG_MS", "250", 1);   /* well-formed: no device here */
		if (rf_cuda_count() == 0)
			CHECK(rf_device_open(e, "cuda:0", &x) != -EINVAL);
		unsetenv("RF_CUDA_WATCHDOG_MS");
		CHECK_OK(rf_device_open(e, "cpu:3", &x));
		CHECK(!strcmp(rf_device_name(x), "cpu:3"));
		rf_device_close(x);
		fprintf(stderr, "device names: ok\n");
	}
	{
		/* RF_BLAS_THREADS: junk, a sign, overflow, 0 and past 1024 are refused naming
		 * the variable (they were read with atoi and ignored); a number is taken */
		static const char *const bad[] = { "abc", "-5", "99999999999", "", "0", "1025",
						   " 2", "2x" };
		const char *was = getenv("RF_BLAS_THREADS");
		char keep[32];
		struct rf_device *x = NULL;
		char want[64];
		snprintf(keep, sizeof(keep), "%s", was ? was : "");
		for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			setenv("RF_BLAS_THREADS", bad[i], 1);
			CHECK_EQ(rf_cpu_open(e, NULL, &x), -EINVAL);
			snprintf(want, sizeof(want), "RF_BLAS_THREADS=%s in the environment: expected",
				 bad[i]);
			CHECK(strstr(rf_last_error(), want));
		}
		setenv("RF_BLAS_THREADS", "1", 1);
		CHECK_OK(rf_cpu_open(e, NULL, &x));
		rf_device_close(x);
		if (was)
			setenv("RF_BLAS_THREADS", keep, 1);
		else
			unsetenv("RF_BLAS_THREADS");
		fprintf(stderr, "RF_BLAS_THREADS checked: ok\n");
	}
	{
		/* RF_CPU_HELPERS (devices/cpu/par.h): a bad value fails a CPU device's open,
		 * naming it, whether or not another one holds the helpers already */
		struct rf_device *x = NULL;
		setenv("RF_CPU_HELPERS", "lots", 1);
		CHECK_EQ(rf_cpu_open(e, NULL, &x), -EINVAL);
		CHECK(strstr(rf_last_error(), "RF_CPU_HELPERS=lots in the environment: expected"));
		setenv("RF_CPU_HELPERS", "0", 1);
		CHECK_OK(rf_cpu_open(e, NULL, &x));
		rf_device_close(x);
		unsetenv("RF_CPU_HELPERS");
		fprintf(stderr, "RF_CPU_HELPERS checked: ok\n");
	}
	rf_device_close(d);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
