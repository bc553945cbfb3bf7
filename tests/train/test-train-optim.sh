#!/bin/sh
# test-train-optim.sh RF_TRAIN: SGD with momentum, weight decay and Nesterov in a run:
# the momentum buffers live in the checkpoint, so 2 epochs + --resume to 3 ends with
# bitwise the weights of 3 straight epochs (momentum with weight decay and Nesterov,
# two devices, under step and cosine lr schedules, and AdamW on one device and two;
# --update fused equals per-layer bit for bit, for each rule;
# the update rules themselves are train-sgd-ref's); resuming under
# another optimiser setting or schedule is refused with both named; an epoch's lr is
# the schedule's; momentum trains (test accuracy over 0.6 in 3 epochs on
# 2001 records). Skips (77) without Fashion-MNIST.
set -u
RF=${1:?usage: $0 rf-train}
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
[ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ] ||
	{ echo "SKIP: no Fashion-MNIST in $DATA"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-train-optim.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
hash() { sed -n 's/.*"param_hash": "\([0-9a-f]*\)".*/\1/p' "$1"; }
A="--data $DATA --limit 2001 --test-limit 501 --quiet --json --lr 0.02"
SETTINGS='--optimizer adamw --wd 0.01 --lr 0.001
--optimizer adamw --lr 0.002 --devices 2 --lr-schedule cosine:3
--momentum 0.9 --wd 5e-4 --nesterov
--momentum 0.5 --wd 1e-3 --devices 2
--momentum 0.9 --lr-schedule cosine:3 --warmup-epochs 1
--momentum 0.9 --lr-schedule step:1:0.5'
echo "$SETTINGS" | while read -r o; do
	[ -e "$T/ck" ] && [ ! -e "$T/adamw.ck" ] && cp "$T/ck" "$T/adamw.ck"   # for the refusal
	rm -f "$T/ck"
	"$RF" $A $o --epochs 3 >"$T/straight" 2>"$T/err" || fail "$o: $(tail -2 "$T/err")"
	"$RF" $A $o --epochs 2 --checkpoint "$T/ck" >/dev/null 2>"$T/err" ||
		fail "$o, 2 epochs: $(tail -2 "$T/err")"
	"$RF" $A $o --epochs 3 --checkpoint "$T/ck" --resume >"$T/resumed" 2>"$T/err" ||
		fail "$o, resumed: $(tail -2 "$T/err")"
	[ -n "$(hash "$T/straight")" ] && [ "$(hash "$T/straight")" = "$(hash "$T/resumed")" ] ||
		fail "$o: resumed $(hash "$T/resumed"), straight $(hash "$T/straight")"
	acc=$(sed -n 's/.*"final_test_acc": \([0-9.]*\).*/\1/p' "$T/straight")
	awk -v a="$acc" 'BEGIN { exit !(a > 0.6) }' || fail "$o: test accuracy $acc after 3 epochs"
	echo "ok: $o: 2 epochs + --resume = 3 epochs, bitwise ($(hash "$T/straight")); test acc $acc"
done || exit 1
# --update fused (one op over every parameter after backward; the default on a GPU)
# gives the bits of the per-layer updates, for each update rule, and hybridized too
# (LeNet on 512 records, 2 steps: its convolutions were half the test under TSan)
for o in "" "--momentum 0.9 --wd 5e-4 --nesterov" "--optimizer adamw --wd 0.01 --lr 0.001" \
	"--model lenet --momentum 0.9 --limit 512" "--momentum 0.9 --hybridize"; do
	"$RF" $A $o --epochs 1 --update per-layer >"$T/layer" 2>"$T/err" || fail "$o: $(tail -2 "$T/err")"
	"$RF" $A $o --epochs 1 --update fused >"$T/fused" 2>"$T/err" || fail "$o: $(tail -2 "$T/err")"
	[ -n "$(hash "$T/layer")" ] && [ "$(hash "$T/layer")" = "$(hash "$T/fused")" ] ||
		fail "$o: --update fused $(hash "$T/fused"), per-layer $(hash "$T/layer")"
	echo "ok: $o: --update fused = per-layer, bitwise ($(hash "$T/fused"))"
done || exit 1
"$RF" $A --momentum 0.5 --epochs 3 --checkpoint "$T/ck" --resume >/dev/null 2>"$T/err" &&
	fail "resumed under another momentum"
grep -q "saved by a run with --momentum 0.9 --wd 0, this run has --momentum 0.5 --wd 0" \
	"$T/err" || fail "the refusal does not name both settings: $(cat "$T/err")"
echo "ok: another optimiser setting is refused: $(cat "$T/err")"
"$RF" $A --momentum 0.9 --lr-schedule cosine --epochs 3 --checkpoint "$T/ck" --resume \
	>/dev/null 2>"$T/err" && fail "resumed under another lr schedule"
grep -q "saved by a run with --lr-schedule step (step 1, gamma 0.5" "$T/err" ||
	fail "the schedule refusal does not name the saved one: $(cat "$T/err")"
echo "ok: another lr schedule is refused"
"$RF" $A --epochs 3 --checkpoint "$T/adamw.ck" --resume --wd 0.01 --lr 0.001 >/dev/null \
	2>"$T/err" && fail "resumed AdamW state under SGD"
grep -q "saved by a run with --optimizer adamw, this run has sgd" "$T/err" ||
	fail "the optimizer refusal: $(cat "$T/err")"
echo "ok: an AdamW checkpoint is refused to SGD"
# the rates an epoch reports are the schedule's: cosine over 4 epochs after 1 of warm-up
"$RF" $A --lr 0.1 --lr-schedule cosine --warmup-epochs 1 --epochs 5 --no-eval >/dev/null \
	2>"$T/err" || fail "cosine run: $(tail -2 "$T/err")"
lrs=$(sed -n 's/.*, lr \([0-9.e-]*\)$/\1/p' "$T/err" | tr '\n' ' ')
[ "$lrs" = "0.05 0.1 0.0853553 0.05 0.0146447 " ] || fail "cosine rates per epoch: $lrs"
echo "ok: the epochs' rates: $lrs"
