/* test-train-kvstore: the key-value store of kvstore.h on two CPU devices. push
 * accumulates (the first push of a round overwrites, a second push in the same round
 * adds), pull copies the aggregate into every output, a new round starts after a pull,
 * keys are independent, and the sum is taken left to right in the order the values
 * were given (bitwise equal to a plain C loop doing the same). Everything is pushed
 * through the engine and read back only at the end of each case.
 * Refusals, each with a message naming the argument, and each leaving the store as it
 * was: NULL out/engine/homes/homes[i], a home count out of range, a key out of range,
 * undeclared or declared twice, NULL vals/outs or an element of them, counts 0 and
 * 17, an i32 or shorter tensor (push or pull), a pull before any push (-ENODATA); a
 * pull whose second output is refused, then retried with good ones, gives the round's
 * sum once, and the next push starts a new round. */
#include "train-test.h"
#include "kvstore.h"

enum { N = 1000 };

static void fill(float *v, float base)
{
	for (int i = 0; i < N; i++)
		v[i] = base + (float)i * 0.001f + 1.0f / (float)(i + 3);
}

#define REFUSED(call, code, text) do {                                              \
		CHECK_EQ((call), (code));                                                  \
		CHECK(strstr(rf_last_error(), (text)));                                    \
	} while (0)

static void refusals(struct tt_env *t, struct rf_device **d, struct rf_tensor **a,
		     struct rf_tensor **o)
{
	struct rf_kvstore *kv = (struct rf_kvstore *)1;
	struct rf_device *nd[2] = { d[0], NULL };
	struct rf_tensor *i32, *shrt, *nul[2] = { a[0], NULL }, *bad[2];
	float *h = malloc(N * 4), *got = malloc(N * 4);

	CHECK(h && got);
	REFUSED(rf_kv_create(NULL, t->eng, d, NULL, 2), -EINVAL, "out is NULL");
	REFUSED(rf_kv_create(&kv, NULL, d, NULL, 2), -EINVAL, "the engine is NULL");
	CHECK(kv == NULL);
	REFUSED(rf_kv_create(&kv, t->eng, NULL, NULL, 2), -EINVAL, "homes is NULL");
	REFUSED(rf_kv_create(&kv, t->eng, d, NULL, 0), -EINVAL, "0 homes: expected 1 to 16");
	REFUSED(rf_kv_create(&kv, t->eng, d, NULL, 17), -EINVAL, "17 homes");
	REFUSED(rf_kv_create(&kv, t->eng, nd, NULL, 2), -EINVAL, "homes[1] is NULL");
	CHECK_OK(rf_kv_create(&kv, t->eng, d, NULL, 2));
	REFUSED(rf_kv_init(NULL, 0, a[0]), -EINVAL, "the store is NULL");
	REFUSED(rf_kv_init(kv, 1024, a[0]), -EINVAL, "key 1024: expected 0 to 1023");
	REFUSED(rf_kv_init(kv, -1, a[0]), -EINVAL, "key -1");
	REFUSED(rf_kv_init(kv, 0, NULL), -EINVAL, "like is NULL");
	CHECK_OK(rf_tensor_create(d[0], RF_I32, "i32", RF_DIMS(N), &i32));
	CHECK_OK(rf_tensor_create(d[0], RF_F32, "short", RF_DIMS(N / 2), &shrt));
	REFUSED(rf_kv_init(kv, 0, i32), -EINVAL, "expected an f32 tensor");
	CHECK_OK(rf_kv_init(kv, 3, a[0]));
	REFUSED(rf_kv_init(kv, 3, a[0]), -EINVAL, "key 3 is declared already");
	REFUSED(rf_kv_push(kv, 4, a, 2), -EINVAL, "key 4 was not declared");
	REFUSED(rf_kv_pull(kv, 4, o, 2), -EINVAL, "key 4 was not declared");
	REFUSED(rf_kv_pull(kv, 3, o, 2), -ENODATA, "key 3 has no value");
	REFUSED(rf_kv_push(kv, 3, NULL, 2), -EINVAL, "vals is NULL");
	REFUSED(rf_kv_push(kv, 3, nul, 2), -EINVAL, "vals[1] is NULL");
	REFUSED(rf_kv_push(kv, 3, a, 0), -EINVAL, "0 vals: expected 1 to 16");
	REFUSED(rf_kv_push(kv, 3, a, 17), -EINVAL, "17 vals");
	bad[0] = a[0];
	bad[1] = i32;
	REFUSED(rf_kv_push(kv, 3, bad, 2), -EINVAL, "vals[1] 'i32' is i32 of 1000 elements: "
		"expected f32 of 1000");
	bad[1] = shrt;
	REFUSED(rf_kv_push(kv, 3, bad, 2), -EINVAL, "f32 of 500 elements");
	/* nothing of the refused pushes was summed: the round is a[0] + a[1] */
	CHECK_OK(rf_kv_push(kv, 3, a, 2));
	REFUSED(rf_kv_pull(kv, 3, NULL, 1), -EINVAL, "outs is NULL");
	bad[0] = o[0];
	bad[1] = i32;
	REFUSED(rf_kv_pull(kv, 3, bad, 2), -EINVAL, "outs[1] 'i32' is i32");
	bad[1] = NULL;
	REFUSED(rf_kv_pull(kv, 3, bad, 2), -EINVAL, "outs[1] is NULL");
	/* the key's own value as an output: refused before anything is copied (o[0] was
	 * written and the round ended, so that the next push started a new one) */
	bad[1] = rf_kv_value(kv, 3);
	REFUSED(rf_kv_pull(kv, 3, bad, 2), -EINVAL, "outs[1] 'kv[3]' is the key's own value");
	REFUSED(rf_kv_push(kv, 3, &bad[1], 1), -EINVAL, "vals[0] 'kv[3]' is the key's own value");
	/* a device or a tensor of another engine */
	struct rf_engine *e2;
	struct rf_device *d2;
	struct rf_tensor *o2;
	CHECK_OK(rf_engine_create(&e2, t->ring, NULL));
	CHECK_OK(rf_cpu_open(e2, NULL, &d2));
	CHECK_OK(rf_tensor_create(d2, RF_F32, "o2", RF_DIMS(N), &o2));
	bad[1] = o2;
	REFUSED(rf_kv_pull(kv, 3, bad, 2), -EINVAL, "outs[1] 'o2' is a tensor of another engine");
	struct rf_kvstore *kv2;
	REFUSED(rf_kv_create(&kv2, t->eng, &d2, NULL, 1), -EINVAL, "a device of another engine");
	rf_tensor_destroy(o2);
	rf_device_close(d2);
	rf_engine_destroy(e2);
	CHECK_OK(rf_kv_pull(kv, 3, o, 2));
	float *want = malloc(N * 4), *h1 = malloc(N * 4);
	CHECK(want && h1);
	CHECK_OK(rf_tensor_read(a[0], h));
	CHECK_OK(rf_tensor_read(a[1], h1));
	for (int i = 0; i < N; i++)
		want[i] = h[i] + h1[i];
	CHECK_OK(rf_tensor_read(o[1], got));
	CHECK(tt_bitdiff(got, want, N) < 0);
	/* the pull ended the round: a push starts the next one (a[0] alone) */
	CHECK_OK(rf_kv_push(kv, 3, a, 1));
	CHECK_OK(rf_kv_pull(kv, 3, &o[0], 1));
	CHECK_OK(rf_tensor_read(o[0], got));
	CHECK(tt_bitdiff(got, h, N) < 0);
	/* a 4-D tensor of another layout than the value's: a copy would move its bytes as
	 * they lie (rf_copy refuses it, after the round was pushed) */
	struct rf_tensor *rm, *cl;
	CHECK_OK(rf_tensor_create(d[0], RF_F32, "rm", RF_DIMS(2, 5, 10, 10), &rm));
	CHECK_OK(rf_tensor_create_layout(d[0], RF_F32, RF_LAYOUT_NHWC, "cl", RF_DIMS(2, 5, 10, 10),
					 &cl));
	CHECK_OK(rf_kv_init(kv, 5, rm));
	REFUSED(rf_kv_push(kv, 5, &cl, 1), -EINVAL, "vals[0] 'cl' is channels-last");
	CHECK_OK(rf_kv_push(kv, 5, &rm, 1));
	REFUSED(rf_kv_pull(kv, 5, &cl, 1), -EINVAL, "outs[0] 'cl' is channels-last");
	rf_tensor_destroy(rm);
	rf_tensor_destroy(cl);
	REFUSED(rf_kv_set_comm(NULL, NULL), -EINVAL, "the store is NULL");
	rf_kv_destroy(kv);
	rf_tensor_destroy(i32);
	rf_tensor_destroy(shrt);
	free(h); free(h1); free(got); free(want);
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

	refusals(&t, d, a, o);
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
