/* test-device-grad: the backward ops, checked by finite differences of the forward
 * ops -- all pushed through the engine on the CPU device's streams. A small LeNet-like
 * net, x (2,1,8,8) -> conv 3x3 (3 channels) + bias -> ReLU -> avgpool 2 -> flatten
 * (2, 27) -> linear (4) + bias -> softmax cross-entropy (mean), has its gradients
 * computed by rf_softmax_xent's dlogits, rf_gemm (both transposes), rf_bias_grad,
 * rf_avgpool2d_bwd, rf_relu_bwd, rf_conv2d_bwd_filter and rf_conv2d_bwd_data, with
 * the weight gradients on stream 1 and the data gradients on stream 0. Each gradient
 * entry (every one of the parameters and input) is compared with a central difference
 * (f(p+h) - f(p-h)) / 2h of the loss evaluated by the forward ops. */
#include <math.h>
#include "test-device-suite.h"

enum { N = 2, C = 1, H = 8, W = 8, O = 3, K = 3, OH = 6, PH = 3, F = O * PH * PH, L = 4 };

struct net {
	struct rf_device *d;
	struct rf_stream *s0, *s1;
	struct rf_tensor *x, *cw, *cb, *y1, *r1, *p1, *lw, *lb, *lg, *lab, *loss;
	struct rf_tensor *dlg, *dlw, *dlb, *dp1, *dr1, *dy1, *dcw, *dcb, *dx;
};

static float forward(struct net *n)
{
	float loss;

	CHECK_OK(rf_tensor_reshape(n->p1, RF_DIMS(N, O, PH, PH)));
	CHECK_OK(rf_conv2d_fwd(n->s0, n->y1, n->x, n->cw, n->cb, 1, 0));
	CHECK_OK(rf_relu_fwd(n->s0, n->r1, n->y1));
	CHECK_OK(rf_avgpool2d_fwd(n->s0, n->p1, n->r1, 2));
	CHECK_OK(rf_tensor_reshape(n->p1, RF_DIMS(N, F)));
	CHECK_OK(rf_gemm(n->s0, 0, 1, 1.0f, n->p1, n->lw, 0.0f, n->lg));
	CHECK_OK(rf_bias_add(n->s0, n->lg, n->lb));
	CHECK_OK(rf_softmax_xent(n->s0, n->dlg, n->loss, NULL, n->lg, n->lab));
	CHECK_OK(rf_tensor_read(n->loss, &loss));
	return loss / N;
}

static void backward(struct net *n)
{
	/* weights on s1, data on s0: the engine orders them by their variables */
	CHECK_OK(rf_gemm(n->s1, 1, 0, 1.0f, n->dlg, n->p1, 0.0f, n->dlw));
	CHECK_OK(rf_bias_grad(n->s1, n->dlb, n->dlg, 0));
	CHECK_OK(rf_gemm(n->s0, 0, 0, 1.0f, n->dlg, n->lw, 0.0f, n->dp1));
	CHECK_OK(rf_tensor_reshape(n->dp1, RF_DIMS(N, O, PH, PH)));
	CHECK_OK(rf_avgpool2d_bwd(n->s0, n->dr1, n->dp1, 2));
	CHECK_OK(rf_tensor_reshape(n->dp1, RF_DIMS(N, F)));
	CHECK_OK(rf_relu_bwd(n->s0, n->dy1, n->dr1, n->r1));
	CHECK_OK(rf_conv2d_bwd_filter(n->s1, n->dcw, n->dcb, n->dy1, n->x, 0, 1, 0));
	CHECK_OK(rf_conv2d_bwd_data(n->s0, n->dx, n->dy1, n->cw, 1, 0));
}

/* Compare the analytic gradient g of tensor t with central differences. */
static void check(struct net *n, const char *what, struct rf_tensor *t, struct rf_tensor *g)
{
	float *p = malloc(t->nbytes), *ga = malloc(g->nbytes);
	const float h = 1e-3f;
	int bad = 0;

	CHECK_OK(rf_tensor_read(t, p));
	CHECK_OK(rf_tensor_read(g, ga));
	for (size_t i = 0; i < t->numel; i++) {
		float keep = p[i], fp, fm;
		double fd;
		p[i] = keep + h;
		CHECK_OK(rf_tensor_write(t, p));
		fp = forward(n);
		p[i] = keep - h;
		CHECK_OK(rf_tensor_write(t, p));
		fm = forward(n);
		p[i] = keep;
		CHECK_OK(rf_tensor_write(t, p));
		fd = ((double)fp - fm) / (2.0 * h);
		if (fabs(fd - ga[i]) > 2e-3 + 3e-2 * fabs(ga[i])) {
			fprintf(stderr, "%s[%zu]: analytic %.6g, finite difference %.6g\n", what, i,
				(double)ga[i], fd);
			bad++;
		}
	}
	CHECK(bad == 0);
	fprintf(stderr, "%s: %zu gradients match finite differences\n", what, t->numel);
	free(p);
	free(ga);
}

int main(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct net n;
	int32_t lab[N] = { 1, 3 };

	CHECK_OK(rf_ring_create(&ring, NULL));
	CHECK_OK(rf_engine_create(&e, ring, NULL));
	CHECK_OK(rf_cpu_open(e, &(struct rf_cpu_opts){ .streams = 2 }, &n.d));
	n.s0 = rf_device_stream(n.d, 0);
	n.s1 = rf_device_stream(n.d, 1);
	{
		float *x, *cw, *cb, *lw = ts_randv(L * F), *lb = ts_randv(L);
		int tries = 0;
		/* A finite difference across a ReLU kink is meaningless: draw the input and
		 * the conv until no pre-activation is within 0.02 of zero (a step of h moves
		 * them by at most 9*h). */
		for (;;) {
			double mn = 1e30;
			x = ts_randv(N * C * H * W);
			cw = ts_randv(O * C * K * K);
			cb = ts_randv(O);
			for (int b = 0; b < N; b++)
				for (int o = 0; o < O; o++)
					for (int i = 0; i < OH; i++)
						for (int j = 0; j < OH; j++) {
							double a = cb[o];
							for (int p = 0; p < K; p++)
								for (int q = 0; q < K; q++)
									a += (double)x[(b * H + i + p) * W + j + q] *
									     cw[(o * K + p) * K + q];
							if (fabs(a) < mn)
								mn = fabs(a);
						}
			if (mn > 0.02)
				break;
			free(x); free(cw); free(cb);
			CHECK(++tries < 10000);
		}
		n.x = ts_upload(n.d, RF_F32, x, "x", RF_DIMS(N, C, H, W));
		n.cw = ts_upload(n.d, RF_F32, cw, "conv.w", RF_DIMS(O, C, K, K));
		n.cb = ts_upload(n.d, RF_F32, cb, "conv.b", RF_DIMS(O));
		n.lw = ts_upload(n.d, RF_F32, lw, "fc.w", RF_DIMS(L, F));
		n.lb = ts_upload(n.d, RF_F32, lb, "fc.b", RF_DIMS(L));
		free(x); free(cw); free(cb); free(lw); free(lb);
	}
	n.lab = ts_upload(n.d, RF_I32, lab, "labels", RF_DIMS(N));
	rf_tensor_create(n.d, RF_F32, "y1", RF_DIMS(N, O, OH, OH), &n.y1);
	rf_tensor_create(n.d, RF_F32, "r1", RF_DIMS(N, O, OH, OH), &n.r1);
	rf_tensor_create(n.d, RF_F32, "p1", RF_DIMS(N, F), &n.p1);
	rf_tensor_create(n.d, RF_F32, "logits", RF_DIMS(N, L), &n.lg);
	rf_tensor_create(n.d, RF_F32, "loss", RF_DIMS(1), &n.loss);
	rf_tensor_create(n.d, RF_F32, "dlogits", RF_DIMS(N, L), &n.dlg);
	rf_tensor_create(n.d, RF_F32, "dfc.w", RF_DIMS(L, F), &n.dlw);
	rf_tensor_create(n.d, RF_F32, "dfc.b", RF_DIMS(L), &n.dlb);
	rf_tensor_create(n.d, RF_F32, "dp1", RF_DIMS(N, F), &n.dp1);
	rf_tensor_create(n.d, RF_F32, "dr1", RF_DIMS(N, O, OH, OH), &n.dr1);
	rf_tensor_create(n.d, RF_F32, "dy1", RF_DIMS(N, O, OH, OH), &n.dy1);
	rf_tensor_create(n.d, RF_F32, "dconv.w", RF_DIMS(O, C, K, K), &n.dcw);
	rf_tensor_create(n.d, RF_F32, "dconv.b", RF_DIMS(O), &n.dcb);
	rf_tensor_create(n.d, RF_F32, "dx", RF_DIMS(N, C, H, W), &n.dx);

	fprintf(stderr, "loss %.6f\n", (double)forward(&n));
	backward(&n);
	/* the gradients are fixed now: copy them so the forward passes below do not
	 * overwrite the ones still to be checked */
	{
		struct rf_tensor *g[5] = { n.dlw, n.dlb, n.dcw, n.dcb, n.dx }, *t[5] = { n.lw, n.lb, n.cw, n.cb, n.x };
		const char *nm[5] = { "fc.w", "fc.b", "conv.w", "conv.b", "x" };
		struct rf_tensor *keep[5];
		for (int i = 0; i < 5; i++) {
			rf_tensor_create(n.d, RF_F32, nm[i], g[i]->ndim, g[i]->shape, &keep[i]);
			CHECK_OK(rf_copy(NULL, keep[i], g[i]));
		}
		for (int i = 0; i < 5; i++) {
			check(&n, nm[i], t[i], keep[i]);
			rf_tensor_destroy(keep[i]);
		}
	}
	{
		struct rf_tensor *all[] = { n.x, n.cw, n.cb, n.y1, n.r1, n.p1, n.lw, n.lb, n.lg, n.lab,
			n.loss, n.dlg, n.dlw, n.dlb, n.dp1, n.dr1, n.dy1, n.dcw, n.dcb, n.dx };
		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
			rf_tensor_destroy(all[i]);
	}
	CHECK_OK(rf_engine_wait_all(e));
	rf_device_close(n.d);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	return 0;
}
