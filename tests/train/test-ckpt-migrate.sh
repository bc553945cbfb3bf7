#!/bin/sh
# test-ckpt-migrate RF_TRAIN FIXTURE -- checkpoints written before the run state was
# versioned are read: FIXTURE (tests/train/fixtures/lenet-runstate-v1.rfck) was
# written by rf-train at f318510 (run state version 1: fixed offsets, 144 bytes) during
#   rf-train --data D --model lenet --batch-size 16 --epochs 2 --no-eval --seed 5 \
#     --lr 0.05 --wd 5e-4 --lr-schedule cosine --augment --checkpoint F --checkpoint-every 30
# on the first 384 training records of Fashion-MNIST (D, made here), stopped inside
# epoch 2 (after step 30, batch 6 of 24). Resumed, it must end at the parameters that
# rf-train had then -- and an uninterrupted run has -- param_hash c4d96cf289f6f71e; the
# checkpoint it writes is run state version 2 ("RFRS", version 2 at byte 112).
set -u
RF=$1 FIX=$2
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
WANT=c4d96cf289f6f71e
[ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ] ||
	{ echo "SKIP: no Fashion-MNIST in $DATA"; exit 77; }
T=$(mktemp -d /tmp/rf-ckpt-migrate.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
python3 "$(dirname "$0")/small-fmnist.py" "$DATA" "$T" || fail "cannot make the small data set"
cp "$FIX" "$T/c.rfck"
args="--data $T --model lenet --batch-size 16 --epochs 2 --no-eval --quiet --seed 5 --lr 0.05 --wd 5e-4 --lr-schedule cosine --augment"
"$RF" $args --json >"$T/u.json" 2>"$T/err" || fail "uninterrupted run: $(cat "$T/err")"
grep -q "\"param_hash\": *\"$WANT\"" "$T/u.json" || fail "the uninterrupted run: $(cat "$T/u.json"), expected $WANT"
"$RF" $args --checkpoint "$T/c.rfck" --resume --json >"$T/r.json" 2>"$T/err" ||
	fail "resuming the version-1 file: $(cat "$T/err")"
grep -q "\"param_hash\": *\"$WANT\"" "$T/r.json" || fail "resumed from the version-1 file: $(cat "$T/r.json"), expected $WANT"
python3 -c 'import sys; h = open(sys.argv[1], "rb").read()[112:120]
assert h[:4] == b"RFRS" and int.from_bytes(h[4:6], "little") == 2, h' "$T/c.rfck" ||
	fail "the checkpoint written after the resume is not run state version 2"
# a different setting is still refused by name from a version-1 file
cp "$FIX" "$T/c.rfck"
"$RF" $(echo $args | sed 's/--augment//') --checkpoint "$T/c.rfck" --resume >/dev/null 2>"$T/err" &&
	fail "a version-1 file with --augment resumed without it"
grep -q -- "--augment" "$T/err" || fail "refusal without naming --augment: $(cat "$T/err")"
echo "ok: a version-1 checkpoint resumes to $WANT (as uninterrupted) and is rewritten as version 2; its --augment is still checked"
