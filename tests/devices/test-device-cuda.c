/* test-device-cuda: the op suite of test-device-ops on every CUDA device present
 * (tensors in device memory, uploads through the h2d stream, reads through d2h), so
 * every op is compared with the same references as on the CPU -- and the PRNG's
 * numbers with the CPU kernel's, bit for bit for uniform. Then: host <-> device
 * copies from pinned staging memory and between the CPU and the GPU in one graph
 * (a GEMM on each, the CPU result copied over and summed on the GPU), a copy on the
 * d2h stream chained after compute, fills of i32 and bf16 with the CPU's bits, and an
 * op the backend does not run (bias_add on a 4-D NHWC tensor) refused at push with a
 * message, nothing poisoned. Exits 77 without a GPU (here,
 * cudaGetDeviceCount fails: no driver). */
#include "test-device-suite.h"

int main(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *cpu;
	int n = rf_cuda_count();

	if (n <= 0) {
		fprintf(stderr, "no CUDA device: skip\n");
		return T_SKIP;
	}
	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	CHECK_OK(rf_cpu_open(e, NULL, &cpu));
	for (int g = 0; g < n; g++) {
		struct rf_device *d;
		struct rf_mem_stats ms;
		/* fp32: the suite compares with references in double to float tolerances */
		CHECK_OK(rf_cuda_open(e, g, &(struct rf_cuda_opts){ .streams = 2,
							      .precision = RF_PRECISION_FP32 }, &d));
		CHECK_EQ(rf_device_kind(d), RF_DEVICE_CUDA);
		CHECK(rf_device_h2d_stream(d) != rf_device_d2h_stream(d));
		ts_all(d);

		/* CPU and GPU in one graph, through pinned memory */
		{
			enum { M = 64, K = 48 };
			struct rf_pinned *p;
			float *a = ts_randv(M * K), *got;
			double want[M * M];
			CHECK_OK(rf_pinned_create(1 << 20, &p));
			CHECK_EQ(rf_pinned_is_registered(p), 1);
			struct rf_tensor *ha;
			rf_tensor_create_pinned(cpu, p, RF_F32, "ha", RF_DIMS(M, K), &ha);
			struct rf_tensor *hc;
			rf_tensor_create(cpu, RF_F32, "hc", RF_DIMS(M, M), &hc);
			struct rf_tensor *hc_pin;
			rf_tensor_create_pinned(cpu, p, RF_F32, "hcp", RF_DIMS(M, M), &hc_pin);
			struct rf_tensor *da;
			rf_tensor_create(d, RF_F32, "da", RF_DIMS(M, K), &da);
			struct rf_tensor *dc;
			rf_tensor_create(d, RF_F32, "dc", RF_DIMS(M, M), &dc);
			struct rf_tensor *dc2;
			rf_tensor_create(d, RF_F32, "dc2", RF_DIMS(M, M), &dc2);
			CHECK_OK(rf_tensor_write(ha, a));
			CHECK_OK(rf_copy(NULL, da, ha));                           /* h2d */
			CHECK_OK(rf_gemm(NULL, 0, 1, 1.0f, ha, ha, 0.0f, hc));     /* on the CPU */
			CHECK_OK(rf_gemm(NULL, 0, 1, 1.0f, da, da, 0.0f, dc));     /* on the GPU */
			CHECK_OK(rf_copy(NULL, dc2, hc));                          /* h2d (pageable) */
			{
				struct rf_tensor *in[2] = { dc, dc2 };
				CHECK_OK(rf_sum(NULL, dc, in, 2));
			}
			CHECK_OK(rf_copy(NULL, hc_pin, dc));                       /* d2h, pinned */
			for (int i = 0; i < M; i++)
				for (int j = 0; j < M; j++) {
					double s = 0;
					for (int k = 0; k < K; k++)
						s += (double)a[i * K + k] * a[j * K + k];
					want[i * M + j] = 2 * s;
				}
			got = ts_download(hc_pin);
			ts_close("cpu+gpu gemm sum", got, want, M * M, 1e-3, 1e-4);
			free(got);
			rf_tensor_destroy(ha); rf_tensor_destroy(hc); rf_tensor_destroy(hc_pin);
			rf_tensor_destroy(da); rf_tensor_destroy(dc); rf_tensor_destroy(dc2);
			CHECK_OK(rf_engine_wait_all(e));
			rf_pinned_destroy(p);
			free(a);
			fprintf(stderr, "%s: cpu<->gpu copies and pinned memory ok\n", rf_device_name(d));
		}
		/* an op the CUDA device does not run is refused when pushed (the rules of
		 * cuda-rules.c, asked at push since d403bf8): nothing queued, nothing
		 * poisoned, the reason in rf_last_error */
		{
			struct rf_tensor *t, *h, *y, *b;
			int32_t iv[10];
			uint16_t hv[10];
			const char *who = NULL;
			/* fills in any dtype and value: rf__fill_bits's bits */
			CHECK_OK(rf_tensor_create(d, RF_I32, "t", RF_DIMS(10), &t));
			CHECK_OK(rf_tensor_create(d, RF_BF16, "h", RF_DIMS(10), &h));
			CHECK_OK(rf_fill(NULL, t, -3.75f));
			CHECK_OK(rf_fill(NULL, h, 0.3f));
			CHECK_OK(rf_tensor_read(t, iv));
			CHECK_OK(rf_tensor_read(h, hv));
			for (int i = 0; i < 10; i++) {
				CHECK_EQ(iv[i], -3);
				CHECK_EQ(hv[i], 0x3e9a);          /* 0.3 in bf16, to nearest */
			}
			rf_tensor_destroy(t);
			rf_tensor_destroy(h);
			/* bias_add on a 4-D NHWC tensor: refused, nothing pushed or poisoned */
			CHECK_OK(rf_tensor_create_layout(d, RF_F32, RF_LAYOUT_NHWC, "y",
							 RF_DIMS(2, 3, 2, 2), &y));
			CHECK_OK(rf_tensor_create(d, RF_F32, "b", RF_DIMS(12), &b));
			CHECK_EQ(rf_bias_add(NULL, y, b), -ENOTSUP);
			CHECK(strstr(rf_last_error(), "bias_add") && strstr(rf_last_error(), "nhwc"));
			CHECK_OK(rf_tensor_wait(y));
			CHECK_OK(rf_var_error(y->var, &who));
			CHECK_OK(rf_engine_wait_all(e));
			CHECK_OK(rf_fill(NULL, y, 0.0f));       /* the tensor still takes ops */
			CHECK_OK(rf_tensor_wait(y));
			rf_tensor_destroy(y);
			rf_tensor_destroy(b);
			fprintf(stderr, "%s: fills, refusal at push ok\n", rf_device_name(d));
		}
		CHECK_OK(rf_engine_wait_all(e));
		rf_device_mem_stats(d, &ms);
		CHECK_EQ(ms.in_use, 0);
		CHECK(ms.reuses > 0);
		rf_device_close(d);
	}
	rf_device_close(cpu);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
