#!/bin/sh
# test-train-prefetch: training results depend on the seed, the data and the
# hyper-parameters only -- never on how far the loader and the front end run ahead.
# rf-train trains the MLP for two epochs on a few records of Fashion-MNIST (raw IDX
# files, so the loader reads chunks through the ring; and again with --in-memory) and
# every run must write byte-for-byte (cmp) the checkpoint of the most serial one
# (--prefetch 1 --barrier-every 1): --prefetch 2, 4, 7 and 16, --window 0 (none),
# 1 and 5, --max-inflight 0 (no cap), 1 and 9, --barrier-every 3, and the engine's
# synchronous mode (RF_ENGINE_SYNC=1), fewer of them with --in-memory. Two shapes:
# 1190 records in batches of 64 (18 full batches and a tail of 38: 19 per epoch, a
# multiple of none of the prefetch depths) and 150 records (3 batches per epoch,
# fewer than most depths, so the next epoch's batches are queued before this one's
# are used). A loader that hands an epoch's last batches' slots to the next epoch's
# first batches trains on the wrong records there and fails here. Data parallel
# (--devices 2) is compared with itself the same way. LeNet's convolutional part in
# NHWC (--layout nhwc, the CPU's reference path) writes the checkpoint of NCHW, also
# with --hybridize and a window of 0, and (where the CPU has AVX2) with the GEMM an
# AVX2-only machine runs, OpenBLAS's Haswell kernels. No fault injection. Skips (77) without
# Fashion-MNIST.
# usage: test-train-prefetch.sh path/to/rf-train
RF=${1:?usage: $0 rf-train}
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-train-prefetch.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# raw (uncompressed) IDX files: the loader then reads them through the ring
. "$(dirname "$0")/fmnist-raw.sh"
fmnist_raw "$T"

run() { # run NAME ENV ARGS...: train, checkpoint into $T/NAME.bin
	name=$1; envs=$2; shift 2
	env $BASE_ENV $envs "$RF" --data "$T" --quiet --no-eval --seed 3 --checkpoint "$T/$name.bin" \
		"$@" >"$T/out" 2>"$T/err" || fail "rf-train $envs $*: exit $?: $(cat "$T/err")"
}

# same BASE CONFIG...: each config's checkpoint must equal that of the serial run
# (every run with $BASE_ENV in its environment)
n=0
BASE_ENV=
same() {
	base=$1; shift
	run ref "" $base --prefetch 1 --barrier-every 1
	for cfg in "$@"; do
		envs=""
		case $cfg in RF_ENGINE_SYNC=1*) envs=RF_ENGINE_SYNC=1; cfg=${cfg#* };; esac
		run got "$envs" $base $cfg
		cmp -s "$T/ref.bin" "$T/got.bin" ||
			fail "$BASE_ENV $envs rf-train $base $cfg: checkpoint differs from --prefetch 1 --barrier-every 1"
		n=$((n + 1))
	done
	echo "ok: $BASE_ENV $base: $# configurations, each checkpoint identical to the serial run's"
}

same "--epochs 2 --limit 1190 --batch-size 64" \
	"--prefetch 2" "--prefetch 4" "--prefetch 7 --window 5" \
	"--prefetch 16 --window 0 --max-inflight 0" "--prefetch 7 --window 0" \
	"--prefetch 4 --window 1 --max-inflight 1" "--prefetch 4 --max-inflight 0" \
	"--prefetch 7 --max-inflight 9 --barrier-every 3" "RF_ENGINE_SYNC=1 --prefetch 7"
same "--epochs 2 --limit 1190 --batch-size 64 --in-memory" \
	"--prefetch 7 --window 0 --max-inflight 0" "RF_ENGINE_SYNC=1 --prefetch 4"
same "--epochs 2 --limit 150 --batch-size 64" \
	"--prefetch 2" "--prefetch 7" "--prefetch 16 --window 0 --max-inflight 1"
same "--epochs 2 --limit 1190 --batch-size 64 --devices 2" \
	"--prefetch 7 --window 0 --max-inflight 0"
# the layout of the convolutions' activations changes no bit
same "--model lenet --epochs 1 --limit 300 --batch-size 64 --layout nchw" \
	"--layout nhwc" "--layout nhwc --hybridize --window 0" "--layout auto"
# ... also as an AVX2-only machine runs it: OpenBLAS's Haswell sgemm, whose rounding
# depends on the GEMM's width, so NCHW's batch split across two streams must fall
# between the convolution's GEMM groups (rf_conv2d_fwd_group); a split at the half
# gave NHWC a different checkpoint there
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
	BASE_ENV="RF_KERNELS_NO_AVX512=1 OPENBLAS_CORETYPE=Haswell"
	same "--model lenet --epochs 1 --limit 300 --batch-size 64 --layout nchw" "--layout nhwc"
	same "--model lenet --epochs 1 --limit 333 --batch-size 37 --layout nchw" "--layout nhwc"
	BASE_ENV=""
fi
echo "ok: $n runs"
