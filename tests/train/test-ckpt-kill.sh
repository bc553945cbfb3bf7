#!/bin/sh
# test-ckpt-kill RF_TRAIN -- kill -9 at random instants of a run that checkpoints after
# every batch (most of its time in saves): each time, the directory holds the last
# checkpoint whole -- or none yet -- and nothing else (the file is written unnamed and
# named only by a link and a rename, train/checkpoint.c); and --resume from it ends at
# the parameters of a run never interrupted, bit for bit (param_hash). The one instant
# that leaves more is a SIGKILL between the link and the rename (two system calls,
# signals blocked, well under 1 % of a save): then c.tmp is the next checkpoint, whole,
# and must resume bit-exact too; the next save replaces it. TRIALS (default 50) kills.
set -u
RF=$1
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
TRIALS=${TRIALS:-50}
[ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ] ||
	{ echo "SKIP: no Fashion-MNIST in $DATA"; exit 77; }
T=$(mktemp -d /tmp/rf-ckpt-kill.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# The training set: 384 records in memory (uncompressed IDX, a fraction of a second to
# load), 24 batches of 16, each followed by a save.
python3 "$(dirname "$0")/small-fmnist.py" "$DATA" "$T" || fail "cannot make the small data set"
args="--data $T --model mlp --batch-size 16 --epochs 2 --no-eval --quiet --seed 3"
hash_of() { sed -n 's/.*"param_hash": *"\([0-9a-f]*\)".*/\1/p' "$1"; }
"$RF" $args --json >"$T/ref.json" 2>"$T/err" || fail "reference run: $(cat "$T/err")"
ref=$(hash_of "$T/ref.json")
[ -n "$ref" ] || fail "no param_hash in $(cat "$T/ref.json")"
mkdir "$T/ck"
none=0 i=0 window=0
while [ $i -lt "$TRIALS" ]; do
	i=$((i + 1))
	rm -f "$T/ck/"*
	"$RF" $args --checkpoint "$T/ck/c" --checkpoint-every 1 >/dev/null 2>&1 &
	pid=$!
	# a random instant: 0-300 ms after start (the saves start after ~50-150 ms)
	sleep "0.$(od -An -N2 -tu2 /dev/urandom | awk '{ printf "%03d", $1 % 300 }')"
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	left=$(ls -A "$T/ck" | tr '\n' ' ')
	case $left in
	"") none=$((none + 1)); continue ;;
	"c ") ;;
	"c c.tmp " | "c.tmp ")
		window=$((window + 1))
		cp "$T/ck/c.tmp" "$T/ck2"
		"$RF" $args --checkpoint "$T/ck2" --resume --json >"$T/res.json" 2>"$T/err" ||
			fail "trial $i: the c.tmp a kill -9 between link and rename left: $(cat "$T/err")"
		[ "$(hash_of "$T/res.json")" = "$ref" ] || fail "trial $i: c.tmp resumed elsewhere"
		rm -f "$T/ck2"
		[ "$left" = "c.tmp " ] && continue ;;
	*) fail "trial $i: killed -9, the directory holds: $left" ;;
	esac
	"$RF" $args --checkpoint "$T/ck/c" --resume --json >"$T/res.json" 2>"$T/err" ||
		fail "trial $i: --resume from the checkpoint a kill -9 left: $(cat "$T/err")"
	got=$(hash_of "$T/res.json")
	[ "$got" = "$ref" ] || fail "trial $i: resumed to param_hash $got, the uninterrupted run has $ref"
done
echo "ok: $TRIALS kills -9: never a partial file; $((TRIALS - none)) resumed bit-exact to $ref, $none before the first save; $window between link and rename (a whole c.tmp, resumed bit-exact too)"
