/* test-comm -- collectives on the comm stream, run by test-comm.sh under mpirun.
 *
 *   test-comm --has-mpi           exit 77 where ringflow was built without MPI
 *   test-comm ok SEED NKEYS       random program: every rank pushes its allreduces in
 *                                 the same order, but the producers of their inputs
 *                                 finish in an order shuffled per rank (seed ^ rank,
 *                                 three producer streams, random delays); the sums
 *                                 must be exact
 *   test-comm kv                  the kv-store's distributed mode: a pull returns the
 *                                 sum over ranks, local values and pushes (the seeds'
 *                                 (key, value) store, sum over workers and devices)
 *   test-comm span                one collective over adjacent views of one block (a
 *                                 gradient bucket, padding between them): exact sums;
 *                                 views out of order or of two blocks refused; and
 *                                 the host reductions (sum, min, max; f64, u64)
 *   test-comm nccl                GPU tensors by NCCL (one GPU per rank; exit 77 without
 *                                 a GPU or NCCL): a span of views of a GPU block summed
 *                                 exactly, between two MPI host collectives (one
 *                                 order for both kinds); a CPU device is refused
 *   test-comm nccl-env DIR        the same, launched by RANK / WORLD_SIZE without MPI:
 *                                 the NCCL id through the store directory DIR, the host
 *                                 collectives through the GPU
 *   test-comm misorder SEED       with the order check on, rank 1 pushes two keys
 *                                 swapped: every rank must fail with -EPROTO and a
 *                                 message naming both sides, and none may hang */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "device.h"
#include "kvstore.h"
#include "log.h"
#include "rf-config.h"
#include "../test-util.h"

struct fill {
	struct rf_tensor *t;
	int rank, key;
	long delay_us;
};

/* Producer: sleep, then fill t with (rank+1)*(key+1) + i%7. */
static int fill_fn(void *arg)
{
	struct fill *f = arg;
	struct timespec ts = { 0, f->delay_us * 1000 };
	float *x = f->t->data;
	int32_t *y = f->t->data;

	nanosleep(&ts, NULL);
	for (size_t i = 0; i < f->t->numel; i++) {
		int v = (f->rank + 1) * (f->key + 1) + (int)(i % 7);
		if (f->t->dtype == RF_F32)
			x[i] = (float)v;
		else
			y[i] = v;
	}
	return 0;
}

static void setup_store(struct rf_ring **ring, struct rf_engine **e, struct rf_device **cpu,
			struct rf_comm **c, int check, const char *store_dir)
{
	struct rf_comm_opts co = { .check = check, .store_dir = store_dir };

	CHECK_OK(rf_ring_create(ring, NULL));
	CHECK_OK(rf_engine_create(e, *ring, NULL));
	CHECK_OK(rf_cpu_open(*e, NULL, cpu));
	if (rf_comm_create(*e, &co, c) < 0) {
		fprintf(stderr, "comm: %s\n", rf_last_error());
		exit(1);
	}
}

static void setup(struct rf_ring **ring, struct rf_engine **e, struct rf_device **cpu,
		  struct rf_comm **c, int check)
{
	setup_store(ring, e, cpu, c, check, NULL);
}

static void teardown(struct rf_ring *ring, struct rf_engine *e, struct rf_device *cpu,
		     struct rf_comm *c)
{
	rf_comm_destroy(c);
	rf_device_close(cpu);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
}

static int run_ok(unsigned long long seed, int nkeys)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *cpu;
	struct rf_comm *c;
	struct rf_stream *prod[3];
	struct rf_tensor **t = calloc((size_t)nkeys, sizeof(*t));
	struct fill *f = calloc((size_t)nkeys, sizeof(*f));
	unsigned long long shared = seed, mine;
	int rank, P;

	CHECK(t && f);
	setup(&ring, &e, &cpu, &c, 1);
	rank = rf_comm_rank(c);
	P = rf_comm_size(c);
	mine = seed ^ (unsigned long long)(rank + 1) * 0x9e3779b97f4a7c15ULL;
	for (int s = 0; s < 3; s++)
		CHECK_OK(rf_worker_stream_create(e, "producer", 0, &prod[s]));
	for (int k = 0; k < nkeys; k++) {
		/* same sizes and dtypes on every rank; per-rank delays and streams */
		int64_t n = 1 + (int64_t)(t_splitmix64(&shared) % 70000);
		enum rf_tdtype dt = t_splitmix64(&shared) % 4 ? RF_F32 : RF_I32;
		char name[32];
		snprintf(name, sizeof(name), "g%d", k);
		CHECK_OK(rf_tensor_create(cpu, dt, name, RF_DIMS(n), &t[k]));
		f[k] = (struct fill){ t[k], rank, k, (long)(t_splitmix64(&mine) % 2000) };
		CHECK_OK(rf_engine_push_simple(e, fill_fn, &f[k], NULL, 0, &t[k]->var, 1,
					       prod[(k + rank) % 3], "produce"));
		CHECK_OK(rf_comm_allreduce(c, t[k], (uint32_t)k));
	}
	if (rf_comm_wait(c) < 0) {
		fprintf(stderr, "rank %d: %s\n", rank, rf_comm_last_error(c));
		return 1;
	}
	CHECK_EQ(rf_comm_seq(c), nkeys);
	for (int k = 0; k < nkeys; k++) {
		CHECK_OK(rf_engine_wait_var(e, t[k]->var));
		for (size_t i = 0; i < t[k]->numel; i++) {
			long want = (long)(k + 1) * P * (P + 1) / 2 + (long)P * (long)(i % 7);
			long got = t[k]->dtype == RF_F32 ? (long)((float *)t[k]->data)[i]
							 : (long)((int32_t *)t[k]->data)[i];
			if (got != want) {
				fprintf(stderr, "rank %d: key %d element %zu: %ld, expected %ld\n", rank,
					k, i, got, want);
				return 1;
			}
		}
		rf_tensor_destroy(t[k]);
	}
	for (int s = 0; s < 3; s++)
		rf_stream_destroy(prod[s]);
	printf("rank %d of %d: %d allreduces exact, producers finished in a per-rank order\n",
	       rank, P, nkeys);
	teardown(ring, e, cpu, c);
	free(t);
	free(f);
	return 0;
}

static int run_misorder(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *cpu;
	struct rf_comm *c;
	struct rf_tensor *t[4];
	int rank, ret;
	const char *msg;

	setup(&ring, &e, &cpu, &c, 1);
	rank = rf_comm_rank(c);
	for (int k = 0; k < 4; k++) {
		CHECK_OK(rf_tensor_create(cpu, RF_F32, "g", RF_DIMS(100 + k), &t[k]));
		CHECK_OK(rf_tensor_write(t[k], (float[103]){ 0 }));
	}
	CHECK_OK(rf_comm_allreduce(c, t[0], 0));
	CHECK_OK(rf_comm_allreduce(c, t[1], 1));
	CHECK_OK(rf_comm_allreduce(c, t[rank == 1 ? 3 : 2], rank == 1 ? 3 : 2));
	CHECK_OK(rf_comm_allreduce(c, t[rank == 1 ? 2 : 3], rank == 1 ? 2 : 3));
	ret = rf_comm_wait(c);
	msg = rf_comm_last_error(c);
	printf("rank %d: %d: %s\n", rank, ret, msg);
	CHECK_EQ(ret, -EPROTO);
	CHECK(strstr(msg, "allreduce #2") && strstr(msg, "out of order"));
	CHECK(strstr(msg, "rank 0 has key 2") || strstr(msg, "rank 1 has key 3"));
	CHECK(strstr(msg, "rank 0") && strstr(msg, "rank 1"));
	/* the first two went through; the later ones are skipped, not issued */
	for (int k = 0; k < 4; k++)
		rf_tensor_destroy(t[k]);
	teardown(ring, e, cpu, c);
	return 0;
}

static int run_kv(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *cpu;
	struct rf_comm *c;
	struct rf_kvstore *kv;
	struct rf_device *homes[2];
	struct rf_tensor *v[2], *out[2];
	float buf[64];
	int rank, P;

	setup(&ring, &e, &cpu, &c, 1);
	rank = rf_comm_rank(c);
	P = rf_comm_size(c);
	homes[0] = homes[1] = cpu;
	CHECK_OK(rf_kv_create(&kv, e, homes, NULL, 2));
	CHECK_OK(rf_kv_set_comm(kv, c));
	for (int j = 0; j < 2; j++) {
		CHECK_OK(rf_tensor_create(cpu, RF_F32, "v", RF_DIMS(64), &v[j]));
		CHECK_OK(rf_tensor_create(cpu, RF_F32, "out", RF_DIMS(64), &out[j]));
	}
	struct rf_tensor *shrt;
	CHECK_OK(rf_tensor_create(cpu, RF_F32, "short", RF_DIMS(8), &shrt));
	for (int key = 0; key < 3; key++)
		CHECK_OK(rf_kv_init(kv, key, v[0]));
	for (int round = 0; round < 2; round++) {
		for (int key = 0; key < 3; key++) {
			/* two pushes of two local values: (rank+1)(j+1)(key+1)(push+1) + i */
			for (int push = 0; push < 2; push++) {
				for (int j = 0; j < 2; j++) {
					for (int i = 0; i < 64; i++)
						buf[i] = (float)((rank + 1) * (j + 1) * (key + 1) *
								 (push + 1 + round) + i);
					CHECK_OK(rf_tensor_write(v[j], buf));
				}
				CHECK_OK(rf_kv_push(kv, key, v, 2));
			}
			if (key == 1) {
				/* a pull refused for its second output is not the round's first
				 * pull: the good one after it sums over the ranks once */
				struct rf_tensor *bad[2] = { out[0], shrt };
				CHECK(rf_kv_pull(kv, key, bad, 2) == -EINVAL);
			}
			CHECK_OK(rf_kv_pull(kv, key, out, 2));
		}
		for (int key = 0; key < 3; key++) {
			CHECK_OK(rf_kv_pull(kv, key, out, 2)); /* a second pull: no new collective */
			for (int j = 0; j < 2; j++) {
				CHECK_OK(rf_tensor_read(out[j], buf));
				for (int i = 0; i < 64; i++) {
					/* sum over ranks r, values j, pushes p */
					long want = 0;
					for (int r = 0; r < P; r++)
						for (int jj = 0; jj < 2; jj++)
							for (int p = 0; p < 2; p++)
								want += (long)(r + 1) * (jj + 1) * (key + 1) *
									(p + 1 + round) + i;
					if ((long)buf[i] != want) {
						fprintf(stderr, "rank %d round %d key %d [%d]: %g, expected %ld\n",
							rank, round, key, i, buf[i], want);
						return 1;
					}
				}
			}
		}
	}
	CHECK_EQ(rf_comm_seq(c), 6);    /* one collective per key and round */
	printf("rank %d of %d: kv-store pulls are sums over %d ranks, 2 values, 2 pushes\n",
	       rank, P, P);
	for (int j = 0; j < 2; j++) {
		rf_tensor_destroy(v[j]);
		rf_tensor_destroy(out[j]);
	}
	rf_tensor_destroy(shrt);
	rf_kv_destroy(kv);
	teardown(ring, e, cpu, c);
	return 0;
}

static int run_span(void)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *cpu;
	struct rf_comm *c;
	struct rf_tensor *blk, *other, *v[3];
	struct fill f[3];
	/* views at 0, 1000 (after 3 floats of padding) and 2000 */
	static const size_t off[3] = { 0, 1000, 2000 };
	static const int64_t len[3] = { 997, 1000, 500 };
	int rank, P;

	setup(&ring, &e, &cpu, &c, 1);
	rank = rf_comm_rank(c);
	P = rf_comm_size(c);
	CHECK_OK(rf_tensor_create(cpu, RF_F32, "blk", RF_DIMS(2500), &blk));
	CHECK_OK(rf_tensor_create(cpu, RF_F32, "other", RF_DIMS(100), &other));
	for (int k = 0; k < 3; k++) {
		CHECK_OK(rf_tensor_view(blk, off[k], RF_F32, "v", 1, &len[k], &v[k]));
		f[k] = (struct fill){ v[k], rank, k, 0 };
		CHECK_OK(rf_engine_push_simple(e, fill_fn, &f[k], NULL, 0, &v[k]->var, 1, NULL,
					       "produce"));
	}
	CHECK_OK(rf_comm_allreduce_span(c, v, 3, 7));
	/* refused, nothing pushed: out of order, and views of two blocks */
	struct rf_tensor *rev[2] = { v[1], v[0] }, *two[2] = { v[2], other };
	CHECK_EQ(rf_comm_allreduce_span(c, rev, 2, 8), -EINVAL);
	CHECK_EQ(rf_comm_allreduce_span(c, two, 2, 9), -EINVAL);
	CHECK_OK(rf_comm_wait(c));
	CHECK_EQ(rf_comm_seq(c), 1);
	for (int k = 0; k < 3; k++) {
		CHECK_OK(rf_engine_wait_var(e, v[k]->var));
		for (int64_t i = 0; i < len[k]; i++) {
			long want = (long)(k + 1) * P * (P + 1) / 2 + (long)P * (long)(i % 7);
			CHECK_EQ((long)((float *)v[k]->data)[i], want);
		}
	}
	/* host reductions: ordered with the others, waited for */
	double d[2] = { rank + 0.5, 1.0 };
	uint64_t u[2] = { (uint64_t)rank * 10 + 3, ~((uint64_t)rank * 10 + 3) };
	CHECK_OK(rf_comm_allreduce_host(c, d, 2, RF_COMM_F64, RF_COMM_SUM, 1));
	CHECK(d[0] == P * (P - 1) / 2.0 + 0.5 * P && d[1] == P);
	CHECK_OK(rf_comm_allreduce_host(c, u, 2, RF_COMM_U64, RF_COMM_MIN, 2));
	CHECK(u[0] == 3 && ~u[1] == (uint64_t)(P - 1) * 10 + 3);
	u[0] = (uint64_t)rank;
	CHECK_OK(rf_comm_allreduce_host(c, u, 1, RF_COMM_U64, RF_COMM_MAX, 3));
	CHECK_EQ(u[0], (uint64_t)(P - 1));
	CHECK_EQ(rf_comm_allreduce_host(c, u, 0, RF_COMM_U64, RF_COMM_MAX, 3), -EINVAL);
	CHECK_EQ(rf_comm_seq(c), 4);
	/* rf_comm_agree: the same settings agree; different ones fail on every rank,
	 * naming the first four that differ with their range (reals as numbers, hashes
	 * only as differing) and this rank's values */
	struct rf_comm_setting st[6];
	double lr = 0.5 + rank;
	memcpy(&st[1].value, &lr, sizeof(lr));
	st[0] = (struct rf_comm_setting){ "same", 42, RF_COMM_SET_INT };
	st[1].name = "lr";
	st[1].kind = RF_COMM_SET_REAL;
	st[2] = (struct rf_comm_setting){ "epochs", 1 + (uint64_t)rank, RF_COMM_SET_INT };
	st[3] = (struct rf_comm_setting){ "model", 7 * (uint64_t)rank, RF_COMM_SET_HASH };
	st[4] = (struct rf_comm_setting){ "seed", (uint64_t)rank, RF_COMM_SET_INT };
	st[5] = (struct rf_comm_setting){ "limit", (uint64_t)rank, RF_COMM_SET_INT };
	CHECK_EQ(rf_comm_host_ready(c), 1);  /* MPI: host values go now */
	CHECK_OK(rf_comm_agree(c, "t", st, 1, 4));
	CHECK_EQ(rf_comm_agree(c, "t", st, 6, 5), P > 1 ? -EPROTO : 0);
	char want[400];
	snprintf(want, sizeof(want), "t: the %d processes were given different settings: lr 0.5 "
		 "to %g, epochs 1 to %d, model differs, seed 0 to %d, and more (this rank, %d: "
		 "lr %g, epochs %d, seed %d)", P, P - 0.5, P, P - 1, rank, lr, rank + 1, rank);
	CHECK(P == 1 || !strcmp(rf_last_error(), want));
	CHECK_EQ(rf_comm_agree(c, "t", st, 0, 6), -EINVAL);
	CHECK_EQ(rf_comm_seq(c), 6);
	printf("rank %d of %d: a span of 3 views in one collective, host sum/min/max exact, "
	       "settings agreed or named\n", rank, P);
	for (int k = 0; k < 3; k++)
		rf_tensor_destroy(v[k]);
	rf_tensor_destroy(blk);
	rf_tensor_destroy(other);
	teardown(ring, e, cpu, c);
	return 0;
}

/* store_dir NULL: under mpirun; else launched by RANK / WORLD_SIZE, no MPI */
static int run_nccl(const char *store_dir)
{
	struct rf_ring *ring;
	struct rf_engine *e;
	struct rf_device *cpu, *gpu;
	struct rf_comm *c;
	struct rf_tensor *blk, *v[2];
	static const int64_t len[2] = { 1000, 3000 };
	float *host = malloc(4000 * sizeof(float));
	int rank, P, n = rf_cuda_count(), ret;
	double d;

	CHECK(host);
	setup_store(&ring, &e, &cpu, &c, 1, store_dir);   /* the order check on: NCCL's too */
	rank = rf_comm_rank(c);
	P = rf_comm_size(c);
	/* refused everywhere: a host device's collectives go by the host transport */
	CHECK_EQ(rf_comm_use_gpu(c, cpu, rf_device_stream(cpu, 0)), -EINVAL);
	CHECK(strstr(rf_last_error(), "works in host memory"));
	if (!RF_HAVE_NCCL || n <= 0) {
		printf("SKIP: %s\n", RF_HAVE_NCCL ? "no usable GPU" : "built without NCCL");
		teardown(ring, e, cpu, c);
		free(host);
		return T_SKIP;
	}
	struct rf_cuda_opts co = { .streams = 2 };
	CHECK_OK(rf_cuda_open(e, rf_comm_local_rank(c) % n, &co, &gpu));
	ret = rf_comm_use_gpu(c, gpu, rf_device_stream(gpu, 1));
	if (ret < 0) {
		fprintf(stderr, "rank %d: rf_comm_use_gpu: %s\n", rank, rf_last_error());
		return 1;
	}
	CHECK_OK(rf_tensor_create(gpu, RF_F32, "gblk", RF_DIMS(4000), &blk));
	CHECK_OK(rf_tensor_view(blk, 0, RF_F32, "g0", 1, &len[0], &v[0]));
	CHECK_OK(rf_tensor_view(blk, 1000, RF_F32, "g1", 1, &len[1], &v[1]));
	for (int i = 0; i < 4000; i++)
		host[i] = (float)((rank + 1) * (i % 13));
	CHECK_OK(rf_tensor_write(blk, host));
	d = 1;
	CHECK_OK(rf_comm_allreduce_host(c, &d, 1, RF_COMM_F64, RF_COMM_SUM, 1));
	CHECK_OK(rf_comm_allreduce_span(c, v, 2, 2));     /* on the GPU stream, by NCCL */
	d = 1;
	CHECK_OK(rf_comm_allreduce_host(c, &d, 1, RF_COMM_F64, RF_COMM_SUM, 3));
	CHECK(d == P);
	uint64_t u[2] = { 100 + (uint64_t)rank, 100 + (uint64_t)rank };
	CHECK_OK(rf_comm_allreduce_host(c, u, 1, RF_COMM_U64, RF_COMM_MIN, 4));
	CHECK_OK(rf_comm_allreduce_host(c, u + 1, 1, RF_COMM_U64, RF_COMM_MAX, 5));
	CHECK(u[0] == 100 && u[1] == 100 + (uint64_t)P - 1);
	CHECK_OK(rf_comm_wait(c));
	CHECK_OK(rf_tensor_read(blk, host));
	for (int i = 0; i < 4000; i++)
		if (host[i] != (float)(P * (P + 1) / 2 * (i % 13))) {
			fprintf(stderr, "rank %d: element %d: %g, expected %d\n", rank, i,
				(double)host[i], P * (P + 1) / 2 * (i % 13));
			return 1;
		}
	printf("rank %d of %d: NCCL allreduce of a span of GPU views exact, between %s host "
	       "collectives (order check on)\n", rank, P, store_dir ? "NCCL" : "MPI");
	rf_tensor_destroy(v[0]);
	rf_tensor_destroy(v[1]);
	rf_tensor_destroy(blk);
	rf_comm_destroy(c);
	rf_device_close(gpu);
	rf_device_close(cpu);
	rf_engine_destroy(e);
	rf_ring_destroy(ring);
	free(host);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--has-mpi"))
		return RF_HAVE_MPI ? 0 : T_SKIP;
	if (argc == 4 && !strcmp(argv[1], "ok"))
		return run_ok(strtoull(argv[2], NULL, 0), atoi(argv[3]));
	if (argc == 2 && !strcmp(argv[1], "kv"))
		return run_kv();
	if (argc == 2 && !strcmp(argv[1], "nccl"))
		return run_nccl(NULL);
	if (argc == 3 && !strcmp(argv[1], "nccl-env"))
		return run_nccl(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "span"))
		return run_span();
	if (argc == 3 && !strcmp(argv[1], "misorder"))
		return run_misorder();
	fprintf(stderr, "usage: test-comm --has-mpi | ok SEED NKEYS | kv | span | nccl | nccl-env DIR | misorder SEED\n");
	return 2;
}
