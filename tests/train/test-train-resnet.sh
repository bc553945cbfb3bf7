#!/bin/sh
# test-train-resnet.sh RF_TRAIN: ResNet-18 in rf-train, short: on 32 Fashion-MNIST
# images (batch 16) the training loss falls over 3 epochs, and with two replicas
# 1 epoch + --resume gives bitwise the weights and running statistics of 2 straight
# epochs (the checkpoint holds the BN running statistics, averaged over the replicas
# at each epoch's end), and so does a run stopped inside epoch 2 (--max-steps) and
# resumed there (the file then holds every replica's statistics; another replica
# count is refused). The straight run saves after every batch (--checkpoint-every 1),
# which must change nothing. The per-layer and one-step numerics are train-resnet-ref's.
# Skips (77) without Fashion-MNIST.
set -u
RF=${1:?usage: $0 rf-train}
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
[ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ] ||
	{ echo "SKIP: no Fashion-MNIST in $DATA"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-train-resnet.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# The whole script in every build: under TSan it takes ~70 s here (a ResNet-18 process
# spends ~15 s faulting in the shadow of its ~300 MB, each page's first write a TLB
# shootdown on every core), under ASan ~50 s. Until 2026-11-30 the sanitizer builds
# skipped the loss run and the byte comparisons.
B="--model resnet18 --data $DATA --test-limit 16 --lr 0.05 --seed 4 --quiet"
"$RF" $B --limit 32 --batch-size 16 --epochs 3 --no-eval --metrics "$T/m.csv" \
	>/dev/null 2>"$T/err" || fail "3 epochs: $(tail -2 "$T/err")"
l1=$(sed -n 2p "$T/m.csv" | cut -d, -f2)
l3=$(sed -n 4p "$T/m.csv" | cut -d, -f2)
awk -v a="$l1" -v b="$l3" 'BEGIN { exit !(b < a) }' ||
	fail "training loss did not fall: epoch 1 $l1, epoch 3 $l3"
echo "ok: training loss $l1 (epoch 1) -> $l3 (epoch 3)"
A="$B --limit 16 --batch-size 8"
"$RF" $A --devices 2 --epochs 2 --checkpoint "$T/straight" --checkpoint-every 1 \
	>/dev/null 2>"$T/err" || fail "2 epochs: $(tail -2 "$T/err")"
# inside an epoch: each replica's running statistics are in the file; stopped after
# step 3 (epoch 2, batch 1 of 2) and resumed, the same bytes as the straight run
"$RF" $A --devices 2 --epochs 2 --checkpoint "$T/mid" --max-steps 3 >/dev/null 2>"$T/err" ||
	fail "--max-steps 3: $(tail -2 "$T/err")"
"$RF" $A --devices 1 --epochs 2 --checkpoint "$T/mid" --resume >/dev/null 2>"$T/err" &&
	fail "a file of 2 replicas' statistics resumed with --devices 1"
grep -q "2 replicas.*this run has 1 x 1" "$T/err" || fail "refusal: $(cat "$T/err")"
"$RF" $A --devices 2 --epochs 2 --checkpoint "$T/mid" --resume >"$T/out" 2>"$T/err" ||
	fail "resumed inside epoch 2: $(tail -2 "$T/err")"
grep -q "in epoch 2 after batch 1/2" "$T/out" || fail "not resumed inside epoch 2: $(cat "$T/out")"
cmp "$T/straight" "$T/mid" >/dev/null || fail "stopped inside epoch 2 + --resume differs"
echo "ok: --devices 2, stopped inside epoch 2 + --resume = 2 epochs, byte for byte"
"$RF" $A --devices 2 --epochs 1 --checkpoint "$T/ck" >/dev/null 2>"$T/err" ||
	fail "1 epoch: $(tail -2 "$T/err")"
"$RF" $A --devices 2 --epochs 2 --checkpoint "$T/ck" --resume >/dev/null 2>"$T/err" ||
	fail "resumed: $(tail -2 "$T/err")"
cmp "$T/straight" "$T/ck" >/dev/null || fail "1 epoch + --resume differs from 2 epochs"
echo "ok: --devices 2, 1 epoch + --resume = 2 epochs, byte for byte"
