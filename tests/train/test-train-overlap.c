/* test-train-overlap: the gradient reduction of a layer starts while the backward pass
 * is still computing earlier layers (overlap synchronisation with
 * computation). Two LeNet replicas on two CPU devices run forward and backward on
 * synthetic batches. Right after the last layer's gradients are pushed, each replica's
 * compute stream gets a gate: a host op that blocks until a flag is set, so the
 * backward of layers 2, 1, 0 cannot run. The flag is set by a host op on the key-value
 * store's stream that reads the reduced (pushed and pulled) gradient of the last
 * layer. The pass therefore completes only if the reduction of the last layer runs
 * while both backward passes are held mid-way; if reductions waited for the whole
 * backward pass, the gate would time out (20 s) and the test fail. Afterwards the two
 * replicas, updated with the same summed gradients, must be bitwise equal, and the
 * Chrome trace (written to $TMPDIR, kept with KEEP_TRACE=1) must have the kv track
 * with its sums and the compute tracks with the gates. */
#include <stdatomic.h>
#include <time.h>
#include "train-test.h"
#include "model.h"
#include "kvstore.h"

enum { K = 2, N = 64 };

static atomic_int flag, timed_out;

static int gate(void *arg)
{
	struct timespec t0, now, ms = { 0, 1000000 };

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!atomic_load(&flag)) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec > 20) {
			atomic_store(&timed_out, 1);
			return 0;
		}
		nanosleep(&ms, NULL);
	}
	return 0;
}

/* A non-tiny op (1 ms): core's worker stream holds back the completion reports of
 * ops shorter than 5 us while more ops are queued, until a longer op finishes (see
 * core/worker.c, RF__TINY_NS). In a real backward pass the op after a layer's
 * gradients is a GEMM or a convolution; here the gate would otherwise keep the tiny
 * bias-gradient op's completion unreported forever. */
static int pause_1ms(void *arg)
{
	struct timespec ms = { 0, 1000000 };

	(void)arg;
	nanosleep(&ms, NULL);
	return 0;
}

static int release(void *arg)
{
	(void)arg;
	atomic_store(&flag, 1);
	return 0;
}

struct hook_ctx {
	struct rf_tensor *dummy[K];
	struct rf_model *m[K];
	struct rf_model_acts *acts[K];
	unsigned last;
};

static int hook(void *ctx, struct rf_model *m, unsigned layer)
{
	struct hook_ctx *h = ctx;
	unsigned r = m == h->m[0] ? 0 : 1;

	if (layer != h->last)
		return 0;
	/* Both read the iteration's dlogits: an op without inputs would be enqueued (and
	 * run) at once, ahead of the backward ops still waiting for theirs, and reading the
	 * layer's gradients would make the pull (a write of them) wait for the gate. */
	struct rf_tensor *gl[1] = { rf_model_acts_dlogits(h->acts[r]) };
	int ret = rf_host_op(m->s, pause_1ms, NULL, gl, 1, &h->dummy[r], 1, "pause");
	return ret < 0 ? ret : rf_host_op(m->s, gate, NULL, gl, 1, &h->dummy[r], 1, "gate");
}

int main(void)
{
	struct tt_env t;
	struct rf_engine_opts eo = { 0 };
	const struct rf_model_spec *sp = rf_model_spec("lenet");
	struct rf_device *d[K];
	struct rf_model *m[K];
	struct rf_model_acts *acts[K];
	struct rf_tensor *x[K], *y[K], *g[K];
	struct rf_kvstore *kv;
	struct rf_prng *prng;
	struct hook_ctx h = { 0 };
	char trace[300];
	const char *tmp = getenv("TMPDIR");

	snprintf(trace, sizeof(trace), "%s/rf-train-overlap-%d.json", tmp ? tmp : "/tmp", (int)getpid());
	CHECK_OK(rf_ring_create(&t.ring, NULL));
	CHECK_OK(rf_engine_create(&t.eng, t.ring, &eo));
	/* started and stopped explicitly: a trace written at rf_engine_destroy, after the
	 * devices closed their streams, would lose the streams' track names */
	CHECK_OK(rf_engine_trace_start(t.eng, trace));
	rf_prng_create(t.eng, 11, "prng", &prng);
	CHECK(prng);
	for (unsigned r = 0; r < K; r++) {
		struct rf_cpu_opts co = { .streams = 1 };
		CHECK_OK(rf_cpu_open(t.eng, &co, &d[r]));
		CHECK_OK(rf_model_create(&m[r], sp, d[r], NULL, r ? "r1" : "r0"));
		rf_tensor_create(d[r], RF_F32, "x", RF_DIMS(N, 1, 28, 28), &x[r]);
		rf_tensor_create(d[r], RF_I32, "y", RF_DIMS(N), &y[r]);
		rf_tensor_create(d[r], RF_F32, "gate", RF_DIMS(1), &h.dummy[r]);
		CHECK(x[r] && y[r] && h.dummy[r]);
		CHECK_OK(rf_rand_uniform(NULL, x[r], prng, 0.0f, 1.0f));
		int32_t lab[N];
		for (int i = 0; i < N; i++)
			lab[i] = (i * 7 + (int)r) % 10;
		CHECK_OK(rf_tensor_write(y[r], lab));
		h.m[r] = m[r];
	}
	h.last = sp->nlayers - 1;
	CHECK_OK(rf_model_init(m[0], prng, RF_INIT_UNIFORM));
	CHECK_OK(rf_copy(m[1]->s, m[1]->params, m[0]->params));
	CHECK_OK(rf_kv_create(&kv, t.eng, d, NULL, K));
	for (unsigned k = 0; k < sp->ntensors; k++)
		CHECK_OK(rf_kv_init(kv, (int)k, m[0]->g[k]));

	/* forward, backward with the gates after the last layer's gradients */
	for (unsigned r = 0; r < K; r++) {
		CHECK_OK(rf_model_forward(m[r], x[r], y[r], NULL, NULL, 1, &acts[r]));
		h.acts[r] = acts[r];
	}
	for (unsigned r = 0; r < K; r++)
		CHECK_OK(rf_model_backward(m[r], acts[r], hook, &h));
	/* reductions, last layer first; the release follows the last layer's pull */
	for (int k = (int)sp->ntensors - 1; k >= 0; k--) {
		for (unsigned r = 0; r < K; r++)
			g[r] = m[r]->g[k];
		CHECK_OK(rf_kv_push(kv, k, g, K));
		CHECK_OK(rf_kv_pull(kv, k, g, K));
		if (k == (int)sp->ntensors - 2)
			CHECK_OK(rf_host_op(rf_kv_stream(kv, k), release, NULL, g, K, NULL, 0, "release"));
		for (unsigned r = 0; r < K; r++)
			CHECK_OK(rf_sgd(m[r]->s, m[r]->p[k], m[r]->g[k], 0.1f, 0.0f));
	}
	CHECK_OK(rf_engine_wait_all(t.eng));
	int failed = atomic_load(&timed_out);
	if (failed)
		fprintf(stderr, "FAIL: the last layer's reduction did not run while the backward "
			"passes were held (gate timed out); trace in %s\n", trace);
	float *p0 = malloc(sp->numel * 4), *p1 = malloc(sp->numel * 4);
	CHECK(p0 && p1);
	CHECK_OK(rf_tensor_read(m[0]->params, p0));
	CHECK_OK(rf_tensor_read(m[1]->params, p1));
	CHECK(tt_bitdiff(p0, p1, sp->numel) < 0);
	if (!failed)
		printf("overlap: last layer reduced while backward held; replicas bitwise equal\n");

	rf_kv_destroy(kv);
	for (unsigned r = 0; r < K; r++) {
		rf_model_destroy(m[r]);
		rf_tensor_destroy(x[r]);
		rf_tensor_destroy(y[r]);
		rf_tensor_destroy(h.dummy[r]);
	}
	rf_prng_destroy(prng);
	rf_engine_wait_all(t.eng);
	CHECK_OK(rf_engine_trace_stop(t.eng));
	for (unsigned r = 0; r < K; r++)
		rf_device_close(d[r]);
	tt_close(&t);
	if (failed)
		return 1;

	/* the trace: a "sum" on the kv track starts before a replica's last op ends */
	FILE *f = fopen(trace, "r");
	CHECK(f);
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *js = malloc((size_t)sz + 1);
	CHECK(js && fread(js, 1, (size_t)sz, f) == (size_t)sz);
	js[sz] = 0;
	fclose(f);
	CHECK(strstr(js, "\"kv\"") && strstr(js, "/s0\"") && strstr(js, "\"sum\"") &&
	      strstr(js, "\"gate\""));
	printf("trace %s: kv stream with sum ops, gates on the compute streams\n", trace);
	free(js);
	free(p0);
	free(p1);
	if (getenv("KEEP_TRACE") == NULL)
		remove(trace);
	return 0;
}
