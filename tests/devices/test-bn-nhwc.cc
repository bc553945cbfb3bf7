/* test-bn-nhwc: the NHWC batch-norm and column-sum kernels' bodies
 * (devices/cuda/bn-nhwc-body.h) run on
 * the host, on machines without a GPU, in every build.
 *
 * An emulated grid runs each launch of kernels_cuda_norm.cu, in the order it launches
 * them: blocks one after another, every thread of a block through the phase before
 * the barrier, then every thread through the phase after it. Shared memory and the
 * workspace start as NaN and the workspace is exactly rf__kc_bn_nhwc_ws bytes (ASan's
 * build catches a write past it), so a read of anything not written first, or a write
 * out of place, shows. Checked, in f32 and bf16 (values read and stored as the kernels
 * do), against formulas in double:
 *  - training: y, the saved mean and invstd, the running mean and (unbiased) variance;
 *    evaluation: y from the running statistics; the backward: dx, dgamma, dbeta.
 *  - shapes with C below, at and above 32 and not a multiple of it, one chunk of rows
 *    and several, and 2.1 million rows: chunks of more than 512 rows (4044 of them) and
 *    elementwise passes that loop over their grid (more than 4096 groups of 8 rows).
 *  - the fused ReLU: the bits of the batch norm and then the ReLU (forward), and of the
 *    backward on dy masked by y > 0 beforehand.
 *  - the column sum (an NHWC convolution's bias gradient): written, then accumulated;
 *    the bias itself added along the rows, every element once, k_bias4's bits.
 *  - a short workspace, an empty channel count or an unknown dtype is refused.
 * What it cannot check: the CUDA launch itself, and the device's rounding (fused
 * multiply-add); test-dnn-cuda and test-device-cuda do on a GPU. C++: the bodies are. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

namespace {

struct hbf16 {
	uint16_t v;
};

inline float ld(const float *p, size_t i) { return p[i]; }
inline void st(float *p, size_t i, float v) { p[i] = v; }
inline float bf16_to_f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}
inline uint16_t f_to_bf16(float f) /* round to nearest even, as __float2bfloat16_rn */
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}
inline float ld(const hbf16 *p, size_t i) { return bf16_to_f(p[i].v); }
inline void st(hbf16 *p, size_t i, float v) { p[i].v = f_to_bf16(v); }

} // namespace

#define RF_KB inline
#include "cuda/bn-nhwc-body.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
	__LINE__, #c); exit(1); } } while (0)

namespace {

using rf_bn::at;
using rf_bn::geo;
using rf_bn::kCols;
using rf_bn::kRows;

struct shared {
	float sa[kRows][kCols + 1], sb[kRows][kCols + 1];
	double ta[kRows][kCols + 1], tb[kRows][kCols + 1];
};

/* blocks (gx, gy) of kCols x kRows threads: lane(t, sh) for every thread of a block,
 * then fold(t, sh) for every thread of it; shared memory NaN at each block's start */
template <class L, class F> void grid(unsigned gx, unsigned gy, L lane, F fold)
{
	shared sh;
	for (unsigned by = 0; by < gy; by++)
		for (unsigned bx = 0; bx < gx; bx++) {
			for (int i = 0; i < kRows; i++)
				for (int j = 0; j < kCols + 1; j++)
					sh.sa[i][j] = sh.sb[i][j] = NAN, sh.ta[i][j] = sh.tb[i][j] = NAN;
			for (int ty = 0; ty < kRows; ty++)
				for (int tx = 0; tx < kCols; tx++)
					lane(at{ tx, ty, (int)bx, (int)by, (int)gy }, sh);
			for (int ty = 0; ty < kRows; ty++)
				for (int tx = 0; tx < kCols; tx++)
					fold(at{ tx, ty, (int)bx, (int)by, (int)gy }, sh);
		}
}
const auto none = [](const at &, shared &) {};

/* kernels_cuda_norm.cu's k_bn_partial: chunks' partial sums into g.pa / g.pb */
template <typename T, int MODE>
void partial(const geo &g, const T *x, const T *dy, const T *y, const float *mf)
{
	grid(g.part_x, g.part_y,
	     [&](const at &t, shared &s) {
		     rf_bn::partial_lane<T, MODE>(t, x, dy, y, mf, g.M, g.C, g.chunk, s.sa, s.sb);
	     },
	     [&](const at &t, shared &s) {
		     rf_bn::partial_fold<MODE>(t, g.C, s.sa, s.sb, MODE != 1 ? g.pa : nullptr,
					       MODE != 0 ? g.pb : nullptr);
	     });
}

/* kernels_cuda_norm.cu's k_bn_chan: the partials' sums per channel, then f(c, sa, sb) */
template <class F> void chan(const geo &g, const float *pa, const float *pb, F f)
{
	grid(g.chan_x, 1, [&](const at &t, shared &s) {
		rf_bn::colsum_lane(t, pa, pb, g.R, g.C, s.ta, s.tb);
	}, [&](const at &t, shared &s) {
		double a, b;
		if (rf_bn::colsum_fold(t, g.C, s.ta, s.tb, &a, &b))
			f(t.bx * kCols + t.tx, a, b);
	});
}

/* the workspace: exactly its size, NaN */
struct wsbuf {
	size_t bytes;
	float *p;
	wsbuf(int64_t M, int C, int eval) : bytes(rf__kc_bn_nhwc_ws(M, C, eval))
	{
		p = (float *)malloc(bytes);
		CHECK(p);
		for (size_t i = 0; i < bytes / sizeof(float); i++)
			p[i] = NAN;
	}
	~wsbuf() { free(p); }
};

/* kernels_cuda_norm.cu's train(), eval() and bwd(), launch by launch */
template <typename T>
int train(T *y, const T *x, const float *gamma, const float *beta, float *mean, float *invstd,
	  float *rm, float *rv, int64_t M, int C, float eps, float mom, int relu, void *ws,
	  size_t wsb)
{
	if (M < 2 || !(eps > 0.0f) || rf_bn::check(M, C, wsb, RF_F32, 0) < 0)
		return -EINVAL;
	const geo g = rf_bn::make_geo(M, C, ws, rf_bn::TRAIN);
	partial<T, 0>(g, x, nullptr, nullptr, nullptr);
	chan(g, g.pa, nullptr, [&](int c, double a, double) { rf_bn::mean_of(c, a, M, mean); });
	partial<T, 1>(g, x, nullptr, nullptr, mean);
	chan(g, g.pa, g.pb, [&](int c, double a, double b) {
		rf_bn::stats_of(c, a, b, M, eps, mom, mean, invstd, rm, rv, gamma, g.f);
	});
	grid(g.elt_x, g.elt_y, [&](const at &t, shared &) {
		rf_bn::apply_rows<T>(t, y, x, mean, g.f, beta, M, C, relu);
	}, none);
	return 0;
}

template <typename T>
int eval(T *y, const T *x, const float *gamma, const float *beta, const float *rm,
	 const float *rv, int64_t M, int C, float eps, int relu, void *ws, size_t wsb)
{
	if (!(eps > 0.0f) || rf_bn::check(M, C, wsb, RF_F32, 1) < 0)
		return -EINVAL;
	const geo g = rf_bn::make_geo(M, C, ws, rf_bn::EVAL);
	for (int c = 0; c < C; c++)     /* k_bn_eval_k: a thread per channel */
		rf_bn::eval_k_of(c, eps, gamma, rv, g.f);
	grid(g.elt_x, g.elt_y, [&](const at &t, shared &) {
		rf_bn::apply_rows<T>(t, y, x, rm, g.f, beta, M, C, relu);
	}, none);
	return 0;
}

template <typename T>
int bwd(T *dx, float *dgamma, float *dbeta, const T *dy, const T *y, const T *x,
	const float *mean, const float *invstd, const float *gamma, int64_t M, int C, void *ws,
	size_t wsb)
{
	if (rf_bn::check(M, C, wsb, RF_F32, 0) < 0)
		return -EINVAL;
	const geo g = rf_bn::make_geo(M, C, ws, rf_bn::TRAIN);
	partial<T, 2>(g, x, dy, y, mean);
	chan(g, g.pa, g.pb, [&](int c, double a, double b) {
		rf_bn::bwd_of(c, a, b, C, M, invstd, gamma, dgamma, dbeta, g.f);
	});
	grid(g.elt_x, g.elt_y, [&](const at &t, shared &) {
		rf_bn::dx_rows<T>(t, dx, dy, y, x, mean, g.f, M, C);
	}, none);
	return 0;
}

/* kernels_cuda_norm.cu's colsum(): the bias gradient's two launches */
template <typename T> int colsum(T *out, const T *x, int64_t M, int C, int acc, void *ws, size_t wsb)
{
	if (rf_bn::check_shape(M, C, RF_F32) < 0 || wsb < rf__kc_colsum_nhwc_ws(M, C))
		return -EINVAL;
	const geo g = rf_bn::make_geo(M, C, ws, rf_bn::COLSUM);
	partial<T, 0>(g, x, nullptr, nullptr, nullptr);
	chan(g, g.pa, nullptr,
	     [&](int c, double a, double) { rf_bn::colsum_store<T>(c, a, out, acc); });
	return 0;
}

uint64_t rng = 0x9e3779b97f4a7c15ull;
float urand() /* in [-1, 1) */
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (float)((rng >> 40) * 0x1p-24) * 2.0f - 1.0f;
}

bool is_bf16(const float *) { return false; }
bool is_bf16(const hbf16 *) { return true; }

/* got within tol of want: tol = rel * |want| + abs */
void near(const char *what, size_t i, double got, double want, double rel, double abs_)
{
	if (fabs(got - want) <= rel * fabs(want) + abs_)
		return;
	fprintf(stderr, "FAIL %s: element %zu: got %.9g, want %.9g\n", what, i, got, want);
	exit(1);
}

template <typename T> void one(int n, int C, int h, int w, int relu)
{
	const int64_t M = (int64_t)n * h * w;
	const size_t N = (size_t)M * C;
	const float eps = 1e-5f, mom = 0.1f;
	const double out = is_bf16((T *)nullptr) ? 0x1p-8 : 0x1p-20; /* one rounding, and f32's */
	std::vector<T> x(N), y(N), y2(N), dy(N), dm(N), dx(N), dx2(N), ye(N);
	std::vector<float> gamma(C), beta(C), mean(C), inv(C), rm(C, 0.25f), rv(C, 2.0f), dg(C),
		db(C), dg2(C), db2(C), mean2(C), inv2(C), rm2(C, 0.25f), rv2(C, 2.0f);
	char what[96];

	for (size_t i = 0; i < N; i++) {
		const int c = (int)(i % C);
		st(x.data(), i, 3.0f * urand() + 0.5f * c); /* a mean far from 0 in some */
		st(dy.data(), i, urand());
	}
	for (int c = 0; c < C; c++)
		gamma[c] = 1.0f + 0.5f * urand(), beta[c] = 0.5f * urand();
	{
		wsbuf ws(M, C, 0);
		CHECK(train<T>(y.data(), x.data(), gamma.data(), beta.data(), mean.data(), inv.data(),
			       rm.data(), rv.data(), M, C, eps, mom, relu, ws.p, ws.bytes) == 0);
		CHECK(train<T>(nullptr, x.data(), gamma.data(), beta.data(), mean.data(), inv.data(),
			       rm.data(), rv.data(), M, C, eps, mom, relu, ws.p, ws.bytes - 4) ==
		      -EINVAL);
	}
	/* the reference, per channel in double over the values as stored */
	for (int c = 0; c < C; c++) {
		double s = 0, q = 0;
		for (int64_t r = 0; r < M; r++)
			s += ld(x.data(), (size_t)r * C + c);
		const double mu = s / (double)M;
		for (int64_t r = 0; r < M; r++) {
			const double d = ld(x.data(), (size_t)r * C + c) - mu;
			q += d * d;
		}
		const double var = q / (double)M, is = 1.0 / sqrt(var + eps);
		snprintf(what, sizeof(what), "%dx%dx%dx%d%s: mean", n, C, h, w, relu ? " relu" : "");
		near(what, (size_t)c, mean[c], mu, 1e-6, 1e-6);
		near("invstd", (size_t)c, inv[c], is, 1e-5, 0);
		near("running mean", (size_t)c, rm[c], 0.9 * 0.25 + 0.1 * mu, 1e-6, 1e-7);
		near("running var", (size_t)c, rv[c], 0.9 * 2.0 + 0.1 * var * M / (M - 1), 1e-5, 0);
		for (int64_t r = 0; r < M; r++) {
			const size_t i = (size_t)r * C + c;
			double v = (ld(x.data(), i) - mu) * is * gamma[c] + beta[c];
			v = relu && v < 0 ? 0 : v;
			near("train y", i, ld(y.data(), i), v, out, 2e-5);
		}
	}
	/* the backward of what was computed, against the formula on the same mean, invstd */
	{
		wsbuf ws(M, C, 0);
		CHECK(bwd<T>(dx.data(), dg.data(), db.data(), dy.data(), relu ? y.data() : nullptr,
			     x.data(), mean.data(), inv.data(), gamma.data(), M, C, ws.p,
			     ws.bytes) == 0);
	}
	for (int c = 0; c < C; c++) {
		double sg = 0, sgx = 0, mx = 0;
		for (int64_t r = 0; r < M; r++) {
			const size_t i = (size_t)r * C + c;
			const double g = relu && !(ld(y.data(), i) > 0) ? 0 : ld(dy.data(), i);
			sg += g;
			sgx += g * (ld(x.data(), i) - mean[c]);
			mx = fmax(mx, fabs(g));
		}
		const double is = inv[c];
		near("dbeta", (size_t)c, db[c], sg, 1e-5, 1e-5 * mx * sqrt((double)M));
		near("dgamma", (size_t)c, dg[c], sgx * is, 1e-5, 1e-5 * mx * sqrt((double)M));
		for (int64_t r = 0; r < M; r++) {
			const size_t i = (size_t)r * C + c;
			const double g = relu && !(ld(y.data(), i) > 0) ? 0 : ld(dy.data(), i);
			const double v = gamma[c] * is *
					 (g - sg / M - (ld(x.data(), i) - mean[c]) * is * is * sgx / M);
			near("dx", i, ld(dx.data(), i), v, out, 2e-5 * gamma[c] * is * (mx + 1));
		}
	}
	/* the fused ReLU: the bits of the two separate ops */
	if (relu) {
		wsbuf ws(M, C, 0);
		CHECK(train<T>(y2.data(), x.data(), gamma.data(), beta.data(), mean2.data(),
			       inv2.data(), rm2.data(), rv2.data(), M, C, eps, mom, 0, ws.p,
			       ws.bytes) == 0);
		for (size_t i = 0; i < N; i++) /* rf_relu_fwd on what was stored */
			st(y2.data(), i, ld(y2.data(), i) > 0.0f ? ld(y2.data(), i) : 0.0f);
		CHECK(memcmp(y2.data(), y.data(), N * sizeof(T)) == 0);
		CHECK(memcmp(mean2.data(), mean.data(), C * 4) == 0);
		CHECK(memcmp(inv2.data(), inv.data(), C * 4) == 0);
		CHECK(memcmp(rv2.data(), rv.data(), C * 4) == 0);
		for (size_t i = 0; i < N; i++) /* rf_relu_bwd */
			st(dm.data(), i, ld(y.data(), i) > 0.0f ? ld(dy.data(), i) : 0.0f);
		CHECK(bwd<T>(dx2.data(), dg2.data(), db2.data(), dm.data(), nullptr, x.data(),
			     mean.data(), inv.data(), gamma.data(), M, C, ws.p, ws.bytes) == 0);
		CHECK(memcmp(dx2.data(), dx.data(), N * sizeof(T)) == 0);
		CHECK(memcmp(dg2.data(), dg.data(), C * 4) == 0);
		CHECK(memcmp(db2.data(), db.data(), C * 4) == 0);
	}
	/* evaluation from the running statistics */
	{
		wsbuf ws(M, C, 1);
		CHECK(eval<T>(ye.data(), x.data(), gamma.data(), beta.data(), rm.data(), rv.data(), M,
			      C, eps, relu, ws.p, ws.bytes) == 0);
		CHECK(eval<T>(ye.data(), x.data(), gamma.data(), beta.data(), rm.data(), rv.data(), M,
			      C, eps, relu, ws.p, ws.bytes - 4) == -EINVAL);
	}
	for (size_t i = 0; i < N; i++) {
		const int c = (int)(i % C);
		double v = (ld(x.data(), i) - rm[c]) * gamma[c] / sqrt((double)rv[c] + eps) + beta[c];
		v = relu && v < 0 ? 0 : v;
		near("eval y", i, ld(ye.data(), i), v, out, 2e-5);
	}
	/* the bias gradient of dy (the column sum), written and then accumulated */
	{
		const size_t wsb = rf__kc_colsum_nhwc_ws(M, C);
		float *wsp = (float *)malloc(wsb);
		std::vector<T> db(C);
		std::vector<double> want(C, 0.0);
		CHECK(wsp);
		for (size_t i = 0; i < wsb / sizeof(float); i++)
			wsp[i] = NAN;
		for (size_t i = 0; i < N; i++)
			want[i % C] += ld(dy.data(), i);
		CHECK(colsum<T>(db.data(), dy.data(), M, C, 0, wsp, wsb) == 0);
		for (int c = 0; c < C; c++)
			near("db", (size_t)c, ld(db.data(), c), want[c], out, 1e-5 * sqrt((double)M));
		std::vector<T> db0(db);
		CHECK(colsum<T>(db.data(), dy.data(), M, C, 1, wsp, wsb) == 0);
		for (int c = 0; c < C; c++) /* the old value plus the sum, rounded once */
			near("db accumulated", (size_t)c, ld(db.data(), c),
			     (double)ld(db0.data(), c) + want[c], 2 * out, 2e-5 * sqrt((double)M));
		CHECK(colsum<T>(db.data(), dy.data(), M, C, 0, wsp, wsb - 4) == -EINVAL);
		free(wsp);
	}
	/* a convolution's bias along the rows: every element once, one rounding; or y
	 * filled with it (acc 0), before a convolution adds its sums */
	for (int acc = 0; acc < 2; acc++) {
		const geo g = rf_bn::make_geo(M, C, nullptr, rf_bn::EVAL);
		std::vector<T> yb(x), bb(C);
		for (int c = 0; c < C; c++)
			st(bb.data(), c, urand());
		grid(g.elt_x, g.elt_y, [&](const at &t, shared &) {
			rf_bn::bias_rows<T>(t, yb.data(), bb.data(), M, C, acc);
		}, none);
		for (size_t i = 0; i < N; i++) {
			T want;
			st(&want, 0, (acc ? ld(x.data(), i) : 0.0f) + ld(bb.data(), i % C));
			CHECK(memcmp(&want, &yb[i], sizeof(T)) == 0);
		}
	}
	fprintf(stderr, "%s %dx%dx%dx%d%s (%lld rows, %d chunks of %lld): ok\n",
		is_bf16((T *)nullptr) ? "bf16" : "f32", n, C, h, w, relu ? " +relu" : "",
		(long long)M, (int)((M + rf__kc_bn_nhwc_chunk(M) - 1) / rf__kc_bn_nhwc_chunk(M)),
		(long long)rf__kc_bn_nhwc_chunk(M));
}

} // namespace

int main()
{
	static const int shapes[][4] = { { 3, 5, 7, 9 }, { 2, 40, 5, 5 }, { 8, 3, 16, 16 },
					 { 1, 33, 64, 70 }, { 4, 64, 14, 14 } };
	for (const auto &s : shapes)
		for (int relu = 0; relu < 2; relu++) {
			one<float>(s[0], s[1], s[2], s[3], relu);
			one<hbf16>(s[0], s[1], s[2], s[3], relu);
		}
	/* 2.1 million rows: chunks of 520 rows, more than 4096 row groups per pass */
	one<float>(1, 2, 1450, 1450, 1);
	CHECK(rf_bn::check(100, 0, 1 << 20, RF_F32, 0) == -EINVAL);
	CHECK(rf_bn::check(100, 4, 1 << 20, RF_I32, 0) == -EINVAL);
	CHECK(rf_bn::check(100, 4, 1 << 20, RF_BF16, 0) == 0 && rf_bn::check(0, 4, 1 << 20, RF_F16, 0));
	return 0;
}
