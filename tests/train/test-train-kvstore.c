/* test-train-kvstore: the key-value store of kvstore.h on two CPU devices. push
 * accumulates (the first push of a round overwrites, a second push in the same round
 * adds), pull copies the aggregate into every output, a new round starts after a pull,
 * keys are independent, and the sum is taken left to right in the order the values
 * were given (bitwise equal to a plain C loop doing the same). Everything is pushed
 * through the engine and read back only at the end of each case. */
#include "train-test.h"
#include "kvstore.h"

enum { N = 1000 };

static void fill(float *v, float base)
{
	for (int i = 0; i < N; i++)
		v[i] = base + (float)i * 0.001f + 1.0f / (float)(i + 3);
}

int main(void)
{
	struct tt_env t;
	struct rf_device *d[2];
	struct rf_kvstore *kv;
	struct rf_tensor *a[2], *b[2], *o[2];
	float *ha = malloc(N * 4), *hb = malloc(N * 4), *got = malloc(N * 4), *want = malloc(N * 4);
	CHECK(ha && hb && got && want);

	tt_open(&t);
	for (int r = 0; r < 2; r++) {
		struct rf_cpu_opts co = { .streams = 1 };
		CHECK_OK(rf_cpu_open(t.eng, &co, &d[r]));
		rf_tensor_create(d[r], RF_F32, "a", RF_DIMS(N), &a[r]);
		rf_tensor_create(d[r], RF_F32, "b", RF_DIMS(N), &b[r]);
		rf_tensor_create(d[r], RF_F32, "o", RF_DIMS(N), &o[r]);
		CHECK(a[r] && b[r] && o[r]);
	}
	CHECK_OK(rf_kv_create(&kv, t.eng, d, NULL, 2));
	CHECK_OK(rf_kv_init(kv, 0, a[0]));
	CHECK_OK(rf_kv_init(kv, 1, a[0]));
	CHECK(rf_kv_init(kv, 1, a[0]) == -EINVAL);       /* twice */
	CHECK(rf_kv_push(kv, 7, a, 2) == -EINVAL);       /* unknown key */
	CHECK(rf_kv_value(kv, 0)->dev == d[0] && rf_kv_value(kv, 1)->dev == d[1]); /* homes */

	/* round 1: key 0 = a0 + a1 */
	fill(ha, 1.0f);
	fill(hb, -0.5f);
	CHECK_OK(rf_tensor_write(a[0], ha));
	CHECK_OK(rf_tensor_write(a[1], hb));
	CHECK_OK(rf_kv_push(kv, 0, a, 2));
	CHECK_OK(rf_kv_pull(kv, 0, o, 2));
	for (int i = 0; i < N; i++)
		want[i] = ha[i] + hb[i];
	for (int r = 0; r < 2; r++) {
		CHECK_OK(rf_tensor_read(o[r], got));
		CHECK(tt_bitdiff(got, want, N) < 0);
	}
	/* round 2 overwrites; two pushes in one round add: (a0 + a1) + b0 */
	fill(ha, 3.0f);
	CHECK_OK(rf_tensor_write(a[0], ha));
	fill(hb, 7.0f);
	CHECK_OK(rf_tensor_write(b[0], hb));
	float *ha1 = malloc(N * 4);
	CHECK(ha1);
	CHECK_OK(rf_tensor_read(a[1], ha1));
	CHECK_OK(rf_kv_push(kv, 0, a, 2));
	CHECK_OK(rf_kv_push(kv, 0, b, 1));
	/* key 1 in between, independent */
	CHECK_OK(rf_kv_push(kv, 1, &b[0], 1));
	CHECK_OK(rf_kv_pull(kv, 0, o, 2));
	CHECK_OK(rf_kv_pull(kv, 1, &b[1], 1));
	for (int i = 0; i < N; i++)
		want[i] = (ha[i] + ha1[i]) + hb[i];
	for (int r = 0; r < 2; r++) {
		CHECK_OK(rf_tensor_read(o[r], got));
		CHECK(tt_bitdiff(got, want, N) < 0);
	}
	CHECK_OK(rf_tensor_read(b[1], got));
	CHECK(tt_bitdiff(got, hb, N) < 0);
	/* the pushes must not have touched the values pushed */
	CHECK_OK(rf_tensor_read(a[0], got));
	CHECK(tt_bitdiff(got, ha, N) < 0);

	rf_kv_destroy(kv);
	for (int r = 0; r < 2; r++) {
		rf_tensor_destroy(a[r]);
		rf_tensor_destroy(b[r]);
		rf_tensor_destroy(o[r]);
	}
	rf_engine_wait_all(t.eng);
	for (int r = 0; r < 2; r++)
		rf_device_close(d[r]);
	tt_close(&t);
	free(ha); free(hb); free(ha1); free(got); free(want);
	printf("kvstore: push accumulates, pull broadcasts, rounds and keys independent\n");
	return 0;
}
