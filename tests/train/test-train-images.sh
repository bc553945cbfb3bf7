#!/bin/sh
# test-train-images.sh RF_TRAIN RF_PACK RF_INFER MAKE_IMAGES: rf-train on JPEG images
# (issue's "training on it"). A train and a test folder of four classes of JPEGs of every
# size (make-images: a colour per class, noise squares) are packed by rf-pack
# --image-folder; LeNet at --image-size 32 (RandomResizedCrop + flip, centre crop for
# the test set) reaches a test accuracy of 0.9 or more, and rf-infer on its export
# gives the run's own final accuracy and loss; the same images as a WebDataset shard
# (a tar of KEY.jpg + KEY.cls) give the same weights as the packed file; ResNet-18 with
# the ImageNet stem trains a step at 64 and 128 pixels. Refusals name what is wrong:
# images without --image-size, --image-size on Fashion-MNIST's records, the ImageNet
# stem on LeNet, a test set of other classes, a checkpoint as the test set.
set -u
RF=${1:?usage: $0 rf-train rf-pack rf-infer make-images}
PACK=${2:?}
INFER=${3:?}
MAKE=${4:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-train-images.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$MAKE" "$T/img" 150 40 7 || fail "make-images"
"$PACK" --image-folder "$T/img/train" -o "$T/img-train.rfrec" >/dev/null 2>"$T/err" ||
	fail "rf-pack train: $(cat "$T/err")"
"$PACK" --image-folder "$T/img/test" -o "$T/img-test.rfrec" >/dev/null 2>"$T/err" ||
	fail "rf-pack test: $(cat "$T/err")"
acc() { sed -n 's/.*"final_test_acc": \([0-9.]*\).*/\1/p' "$1"; }
loss() { sed -n 's/.*"final_test_loss": \([0-9.]*\).*/\1/p' "$1"; }
hash() { sed -n 's/.*"param_hash": "\([0-9a-f]*\)".*/\1/p' "$1"; }
A="--model lenet --image-size 32 --epochs 12 --batch-size 16 --lr 0.05 --quiet --json"
"$RF" --data "$T/img-train.rfrec" $A --export "$T/exp" >"$T/run" 2>"$T/err" ||
	fail "rf-train: $(tail -2 "$T/err")"
a=$(acc "$T/run")
awk -v a="$a" 'BEGIN { exit !(a >= 0.9) }' || fail "lenet on images: test accuracy $a, expected >= 0.9"
echo "ok: lenet --image-size 32 on $(ls "$T/img/train"/c0 | wc -l) JPEGs a class: test accuracy $a"
"$INFER" "$T/exp" --data "$T/img-test.rfrec" >"$T/inf" 2>&1 || fail "rf-infer: $(cat "$T/inf")"
grep -q "accuracy $(printf '%.4f' "$a"), loss $(printf '%.4f' "$(loss "$T/run")")" "$T/inf" ||
	fail "rf-infer: $(cat "$T/inf"), rf-train's final accuracy $a loss $(loss "$T/run")"
echo "ok: rf-infer on the export: $(cat "$T/inf")"
# the same records as a WebDataset shard, in the packed file's order
mkdir "$T/wds" && n=0
for k in 0 1 2 3; do
	for f in "$T/img/train/c$k"/*.jpg; do
		key=$(printf '%05d' $n); cp "$f" "$T/wds/$key.jpg"; echo $k >"$T/wds/$key.cls"
		n=$((n + 1))
	done
done
(cd "$T/wds" && tar --format=ustar -cf "$T/img-train.tar" $(ls | sort)) || fail "tar"
B="--model lenet --image-size 32 --epochs 1 --batch-size 16 --lr 0.05 --quiet --json"
"$RF" --data "$T/img-train.rfrec" $B >"$T/r1" 2>"$T/err" || fail "rfrec run: $(tail -2 "$T/err")"
"$RF" --data "$T/img-train.tar" --test-data "$T/img-test.rfrec" $B >"$T/r2" 2>"$T/err" ||
	fail "shard run: $(tail -2 "$T/err")"
[ -n "$(hash "$T/r1")" ] && [ "$(hash "$T/r1")" = "$(hash "$T/r2")" ] ||
	fail "the shard's weights $(hash "$T/r2"), the packed file's $(hash "$T/r1")"
echo "ok: a WebDataset shard of the same images: the same weights ($(hash "$T/r1"))"
for s in 64 128; do
	"$RF" --data "$T/img-train.rfrec" --model resnet18 --image-size $s --stem imagenet \
		--epochs 1 --batch-size 8 --limit 16 --test-limit 8 --quiet --json >"$T/rn" 2>"$T/err" ||
		fail "resnet18 --stem imagenet --image-size $s: $(tail -2 "$T/err")"
done
echo "ok: resnet18 with the ImageNet stem at 64 and 128 pixels"
refuse() { # refuse EXPECTED-TEXT ARGS...
	want=$1; shift
	"$RF" "$@" --epochs 1 --quiet >"$T/out" 2>"$T/err" && fail "ran: $*"
	grep -q "$want" "$T/err" || fail "$*: expected '$want' in: $(cat "$T/err")"
}
refuse "give --image-size" --data "$T/img-train.rfrec"
refuse "not an .rfrec file" --data "$T/img-train.tar" --test-data "$T/exp/params.rfck" \
	--image-size 32
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
[ -e "$DATA/train-images-idx3-ubyte.gz" ] &&
	refuse "fixed-size records, expected encoded images" --data "$DATA" --image-size 32
refuse "stem" --data "$T/img-train.rfrec" --image-size 32 --model lenet --stem imagenet
"$MAKE" "$T/few" 2 2 3 && rm -rf "$T/few/test/c3" &&
	"$PACK" --image-folder "$T/few/test" -o "$T/few-test.rfrec" >/dev/null ||
	fail "a three-class test set"
refuse "expected the same classes" --data "$T/img-train.rfrec" --test-data "$T/few-test.rfrec" \
	--image-size 32
echo "ok: refusals name what is wrong"
