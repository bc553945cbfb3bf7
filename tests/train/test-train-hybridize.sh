#!/bin/sh
# test-train-hybridize.sh RF_TRAIN: --hybridize (the seeds' hybridize, section 12.1)
# captures the training step at the first batch and replays it, and ends with bitwise
# the weights, losses and accuracies of the op-by-op run: MLP and LeNet (two compute
# streams), one and two devices, SGD, momentum under a cosine schedule with warm-up (lr
# passed per launch, changing by epoch) and AdamW (its step passed per launch). 1001
# records in batches of 256 make a last batch of 233 that is pushed op by op: the
# replays (graph launches in --stats) are the full batches only. Skips (77) without
# Fashion-MNIST. The engine's synchronous mode (RF_ENGINE_SYNC=1) and the trace work
# with replays; a run resumed at an epoch's short last batch captures at the next
# full one. The default in one process on the CPU: LeNet captured, the MLP op by op.
set -u
RF=${1:?usage: $0 rf-train}
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
[ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ] ||
	{ echo "SKIP: no Fashion-MNIST in $DATA"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-train-hybridize.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
figs() { grep -o '"final_[a-z_]*": [0-9.-]*\|"param_hash": "[0-9a-f]*"' "$1" | tr '\n' ' '; }
launches() { sed -n 's/.*"graph_launches": \([0-9]*\).*/\1/p' "$1"; }
A="--data $DATA --limit 1001 --test-limit 201 --quiet --json --stats --epochs 2"
SETTINGS='--model mlp
--model lenet
--model mlp --devices 2 --momentum 0.9 --lr-schedule cosine:2 --warmup-epochs 1
--model lenet --devices 2 --optimizer adamw --lr 0.001'
echo "$SETTINGS" | while read -r o; do
	"$RF" $A $o --no-hybridize >"$T/op" 2>"$T/err" || fail "$o: $(tail -2 "$T/err")"
	"$RF" $A $o --hybridize >"$T/hy" 2>"$T/err" || fail "$o --hybridize: $(tail -2 "$T/err")"
	[ -n "$(figs "$T/op")" ] && [ "$(figs "$T/op")" = "$(figs "$T/hy")" ] ||
		fail "$o: op by op $(figs "$T/op"), hybridized $(figs "$T/hy")"
	[ "$(launches "$T/op")" = 0 ] && [ "$(launches "$T/hy")" = 6 ] ||
		fail "$o: graph launches $(launches "$T/op") and $(launches "$T/hy"), expected 0 and 6"
	echo "ok: $o: 6 replays, bitwise the op-by-op run: $(figs "$T/hy")"
done || exit 1
grep -q '"hybridize": true' "$T/hy" || fail "the JSON does not say hybridize"
grep -q '"hybridize": false' "$T/op" || fail "--no-hybridize: the JSON says hybridize"
# the CPU's default: the MLP op by op (the batch copy into the graph costs more than
# replaying saves there); --no-hybridize says op by op on any device; the last flag wins
"$RF" $A --model mlp >"$T/def" 2>"$T/err" || fail "the default: $(tail -2 "$T/err")"
grep -q '"hybridize": false' "$T/def" && [ "$(launches "$T/def")" = 0 ] ||
	fail "the MLP's default on the CPU is not op by op ($(launches "$T/def") launches)"
"$RF" $A --model mlp --hybridize --no-hybridize >"$T/no" 2>"$T/err" ||
	fail "--no-hybridize: $(tail -2 "$T/err")"
grep -q '"hybridize": false' "$T/no" && [ "$(launches "$T/no")" = 0 ] ||
	fail "--hybridize --no-hybridize still replays"
# ... and a model with convolutions (LeNet) captured: bitwise its op-by-op run, above
"$RF" $A --model lenet >"$T/def" 2>"$T/err" || fail "lenet's default: $(tail -2 "$T/err")"
grep -q '"hybridize": true' "$T/def" && [ "$(launches "$T/def")" = 6 ] ||
	fail "LeNet's default on the CPU is not the captured step ($(launches "$T/def") launches)"
echo "ok: the CPU's default: the MLP op by op, LeNet captured"
# the engine's synchronous debug mode and the trace still work with replays
B="--data $DATA --limit 1001 --test-limit 201 --quiet --json --epochs 1 --model mlp"
"$RF" $B --no-hybridize >"$T/op" 2>"$T/err" || fail "mlp: $(tail -2 "$T/err")"
RF_ENGINE_SYNC=1 "$RF" $B --hybridize --trace "$T/trace.json" >"$T/hy" 2>"$T/err" ||
	fail "RF_ENGINE_SYNC=1 --hybridize --trace: $(tail -2 "$T/err")"
[ "$(figs "$T/op")" = "$(figs "$T/hy")" ] || fail "synchronous replays: $(figs "$T/hy")"
n=$(grep -o '"name": *"graph launch"' "$T/trace.json" | wc -l)
[ "$n" -ge 3 ] || fail "the trace shows $n graph launches, expected 3"
echo "ok: synchronous mode and the trace with replays ($n launches traced)"
# a run resumed at an epoch's last (short) batch captures at the next full one
C="--data $DATA --limit 1001 --test-limit 201 --quiet --json --stats --model mlp --momentum 0.9"
"$RF" $C --epochs 2 --max-steps 3 --checkpoint "$T/ck" >/dev/null 2>"$T/err" || fail "3 steps: $(tail -2 "$T/err")"
cp "$T/ck" "$T/ck2"
"$RF" $C --epochs 2 --checkpoint "$T/ck" --resume --no-hybridize >"$T/op" 2>"$T/err" || fail "resumed: $(tail -2 "$T/err")"
"$RF" $C --epochs 2 --checkpoint "$T/ck2" --resume --hybridize >"$T/hy" 2>"$T/err" ||
	fail "resumed --hybridize: $(tail -2 "$T/err")"
[ "$(figs "$T/op")" = "$(figs "$T/hy")" ] && [ "$(launches "$T/hy")" = 3 ] ||
	fail "resumed at a tail: $(launches "$T/hy") replays (expected 3): $(figs "$T/hy") vs $(figs "$T/op")"
echo "ok: resumed at an epoch's tail, the next epoch's 3 full batches replayed, bitwise"
