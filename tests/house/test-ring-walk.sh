#!/bin/bash
# test-ring-walk.sh SRCDIR BUILDDIR -- tools/dev/ring-walk on the working tree: every
# request kind it drives has its push walk and its CQE walk, the retried read two CQE
# walks and a submit-stage walk (its next piece) that reaches the read's prep, no CQE
# walk reaches rf__queue, and -v shows a read's CQE reaching the transfers' complete; tools/dev/
# ring-callgraph prints its two rows and reaches it too.
set -eu
src=$1
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
BUILD=$2 RING_WALK_DIR=$w "$src/tools/dev/ring-walk" -v >"$w/out"
cat "$w/out"
fail=0
count() { grep -cE -- "$1" "$w/out" || true; }
for k in "read +rf_ring_read" "read +rf__handle" "write +rf_ring_write" "write +rf__handle" \
	"timeout +rf_ring_timeout" "timeout +rf__handle" "short +rf_ring_read"; do
	[ "$(count "^  $k +[0-9]+ ")" = 1 ] || { echo "FAIL: expected one row: $k"; fail=1; }
done
[ "$(count "^  short +rf__handle +[0-9]+ ")" -ge 2 ] ||
	{ echo "FAIL: the retried read's CQEs: fewer than 2 walks"; fail=1; }
# its next piece is queued by the submit stage, not under rf__handle
[ "$(count "^  short +rf__resubmit +[0-9]+ ")" -ge 1 ] ||
	{ echo "FAIL: the retried read's next piece: no rf__resubmit walk"; fail=1; }
grep -q "rf__resubmit > .*rf__prep_read" "$w/out" ||
	{ echo "FAIL: the rf__resubmit walk does not reach rf__prep_read"; fail=1; }
grep -q "rf__handle > .*rf__queue" "$w/out" &&
	{ echo "FAIL: a CQE walk reaches rf__queue (completions take no SQE)"; fail=1; }
grep -q "rf__handle > rf__complete_xfer" "$w/out" ||
	{ echo "FAIL: no CQE walk reaches rf__complete_xfer"; fail=1; }
# the static walk: both rows, and the read's reaches the transfers' complete
BUILD=$2 RING_WALK_DIR=$w "$src/tools/dev/ring-callgraph" -v >"$w/cg"
cat "$w/cg"
[ "$(grep -cE '^  rf__handle, (every prep|a read.s prep) *: +[0-9]+ functions in [0-9]+ files' "$w/cg")" = 2 ] ||
	{ echo "FAIL: ring-callgraph: expected its two rows"; fail=1; }
grep -q "rf__complete_xfer(complete.c)" "$w/cg" ||
	{ echo "FAIL: ring-callgraph: rf__handle does not reach rf__complete_xfer"; fail=1; }
exit $fail
