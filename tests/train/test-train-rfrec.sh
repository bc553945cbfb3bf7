#!/bin/sh
# test-train-rfrec.sh RF_TRAIN RF_PACK: rf-train --data FILE.rfrec trains from rf-pack's
# record files. Read into memory (--in-memory: the same full permutation as the IDX
# files) or from disk (the default uniform order: each record read by itself, the same
# permutation) it reaches bitwise the weights of the IDX run; with --order windowed
# (chunks shuffled in windows, another order) it trains to a comparable accuracy. The test set
# is found beside the training file ("train" made "t10k"), or named by --test-data;
# without either the run refuses, naming what it looked for. Skips (77) without
# Fashion-MNIST.
set -u
RF=${1:?usage: $0 rf-train rf-pack}
PACK=${2:?usage: $0 rf-train rf-pack}
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
[ -e "$DATA/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $DATA"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-train-rfrec.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
for s in train t10k; do
	"$PACK" --images "$DATA/$s-images-idx3-ubyte.gz" --labels "$DATA/$s-labels-idx1-ubyte.gz" \
		--classes 10 -o "$T/fm-$s.rfrec" >/dev/null 2>"$T/pack.err" ||
		fail "rf-pack $s: $(cat "$T/pack.err")"
done
A="--limit 3001 --test-limit 1001 --epochs 2 --quiet --json"
hash() { sed -n 's/.*"param_hash": "\([0-9a-f]*\)".*/\1/p' "$1"; }
acc() { sed -n 's/.*"final_test_acc": \([0-9.]*\).*/\1/p' "$1"; }
"$RF" --data "$DATA" $A >"$T/idx" 2>"$T/err" || fail "IDX run: $(tail -2 "$T/err")"
"$RF" --data "$T/fm-train.rfrec" --in-memory $A >"$T/mem" 2>"$T/err" ||
	fail "rfrec run (in memory): $(tail -2 "$T/err")"
[ -n "$(hash "$T/idx")" ] && [ "$(hash "$T/idx")" = "$(hash "$T/mem")" ] ||
	fail "rfrec in memory vs IDX: parameter hashes $(hash "$T/mem") vs $(hash "$T/idx")"
echo "ok: --data fm-train.rfrec --in-memory: bitwise the weights of the IDX run ($(hash "$T/idx"))"
"$RF" --data "$T/fm-train.rfrec" $A >"$T/uni" 2>"$T/err" || fail "rfrec run: $(tail -2 "$T/err")"
[ "$(hash "$T/uni")" = "$(hash "$T/idx")" ] ||
	fail "rfrec from disk (uniform order) vs IDX: parameter hashes $(hash "$T/uni") vs $(hash "$T/idx")"
echo "ok: --data fm-train.rfrec from disk: bitwise the weights of the IDX run"
"$RF" --data "$T/fm-train.rfrec" --order windowed $A >"$T/disk" 2>"$T/err" ||
	fail "rfrec run (windowed): $(tail -2 "$T/err")"
a=$(acc "$T/disk") b=$(acc "$T/idx")
awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > b - 0.05 && a > 0.6) }' ||
	fail "rfrec from disk: test accuracy $a, the IDX run's $b"
echo "ok: --data fm-train.rfrec --order windowed (chunk-window order): test accuracy $a (IDX: $b)"
mv "$T/fm-t10k.rfrec" "$T/eval.rfrec"
"$RF" --data "$T/fm-train.rfrec" $A >"$T/out" 2>"$T/err" && fail "ran without a test set"
grep -q "no test set beside it: neither $T/fm-t10k.rfrec" "$T/err" ||
	fail "the missing test set is not named: $(cat "$T/err")"
"$RF" --data "$T/fm-train.rfrec" --test-data "$T/eval.rfrec" --in-memory $A >"$T/named" \
	2>"$T/err" || fail "--test-data: $(tail -2 "$T/err")"
[ "$(hash "$T/named")" = "$(hash "$T/mem")" ] || fail "--test-data changed the weights"
echo "ok: --test-data names the test set; without it, the one looked for is named"
# --verify: a flipped payload byte is refused at start naming the file and its CRC;
# without it the header alone is checked (documented) and the run goes on
python3 -c 'import sys; p = sys.argv[1]; d = bytearray(open(p, "rb").read())
d[len(d) // 2] ^= 0x40; open(p, "wb").write(bytes(d))' "$T/fm-train.rfrec"
"$RF" --data "$T/fm-train.rfrec" --test-data "$T/eval.rfrec" --verify $A >"$T/out" 2>"$T/err" &&
	fail "--verify trained on a file with a flipped byte"
grep -q "fm-train.rfrec.*CRC" "$T/err" || fail "--verify: the refusal names neither file nor CRC: $(cat "$T/err")"
"$RF" --data "$T/fm-train.rfrec" --test-data "$T/eval.rfrec" --verify --epochs 1 --limit 64 \
	--quiet --json >/dev/null 2>&1 && fail "--verify ignored"
echo "ok: --verify refuses a flipped byte: $(head -1 "$T/err")"
