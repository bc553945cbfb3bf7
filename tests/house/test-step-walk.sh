#!/bin/bash
# test-step-walk.sh SRCDIR -- tools/dev/step-walk's tracer and statistics on a small
# program laid out in the library's layers (tests/house/walk): the marked function's
# second call is the one counted, calls into lower layers and up again are told apart.
set -eu
src=$1
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
cp -r "$src/tests/house/walk" "$w/root"
cc -O0 -fPIC -shared -o "$w/trace.so" "$src/tools/dev/step-walk-trace.c" -ldl
cc -O0 -g -finstrument-functions -o "$w/prog" "$w/root/train/step.c" "$w/root/devices/op.c" \
	"$w/root/core/push.c" "$w/trace.so" -Wl,-rpath,"$w"
off=$(nm "$w/prog" | awk '$3 == "rf__train_iter" { print $1 }')
RF_WALK_OBJ=prog RF_WALK_OFF=$off RF_WALK_OUT="$w/trace.txt" "$w/prog" >/dev/null
python3 "$src/tools/dev/step-walk-stats.py" "$w/trace.txt" "$w/root" -v >"$w/out"
cat "$w/out"
fail=0
expect() { grep -qF -- "$1" "$w/out" || { echo "FAIL: expected: $1"; fail=1; }; }
# step 2: rf__train_iter, dev_gemm x2, core_push x2, dev_kernel x2 = 7 calls
expect "call: 4 functions in 3 files, 7 calls; train -> lower layers 2 calls (1 edges); lower -> higher 2 calls (1 edges)"
expect "functions per layer: core 1, devices 2, train 1"
expect "up     2  core/push.c: core_push -> devices/op.c: dev_kernel"
# the window: also what ran after the step, up to (not including) step 3's entry
expect "window: 5 functions in 3 files, 8 calls"
if grep -q "before" "$w/out"; then echo "FAIL: a call before the step was counted"; fail=1; fi
exit $fail
