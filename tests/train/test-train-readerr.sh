#!/bin/sh
# test-train-readerr: when the loader's reads fail, rf-train says which file and
# where, however it runs. Fashion-MNIST as raw IDX files (so the training images are
# read through the ring) and RF_FAULT_INJECT="eio=1" (every ring read fails): under
# --prefetch 1 and 7 x --window 0 (none) and 2 x --max-inflight 0 (no cap) and 1, the
# defaults, --barrier-every 1 and RF_ENGINE_SYNC=1, rf-train must exit 1 with one
# stderr line that names the images file, the offset and the records the read was for
# ("FILE: offset O: read of L bytes for records A..B failed: Input/output error", or
# "for record R" where each record is read by itself, as the uniform order does).
# Without a window the failure surfaces only at the epoch's end, where the message
# used to be a bare "Input/output error". Skips (77) without Fashion-MNIST.
# usage: test-train-readerr.sh path/to/rf-train
RF=${1:?usage: $0 rf-train}
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-train-readerr.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

. "$(dirname "$0")/fmnist-raw.sh"
fmnist_raw "$T"

IMG="$T/train-images-idx3-ubyte"
n=0
check() { # check ENV ARGS...
	envs=$1; shift
	env RF_FAULT_INJECT=eio=1 $envs "$RF" --data "$T" --quiet --no-eval --epochs 1 \
		--limit 2000 --batch-size 64 "$@" >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" = 1 ] || fail "rf-train $envs $*: exit $rc, want 1; stderr: $(cat "$T/err")"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "rf-train $envs $*: want one stderr line: $(cat "$T/err")"
	grep -Eq "$IMG: offset [0-9]+: read of [0-9]+ bytes for (records [0-9]+\.\.[0-9]+|record [0-9]+) failed" \
		"$T/err" || fail "rf-train $envs $*: the message lacks the file, offset or records: $(cat "$T/err")"
	n=$((n + 1))
}

for p in 1 7; do
	for w in 0 2; do
		for cap in "--max-inflight 0" "--max-inflight 1"; do
			check "" --prefetch $p --window $w $cap
		done
	done
done
check "" --prefetch 4
check "" --barrier-every 1
check RF_ENGINE_SYNC=1 --window 0 --max-inflight 0
echo "ok: $n configurations, each failure names the file, the offset and the records: $(cat "$T/err")"
