#!/bin/sh
# test-train-images.sh RF_TRAIN RF_PACK RF_INFER MAKE_IMAGES: rf-train on JPEG images
# (issue's "training on it"). A train and a test folder of four classes of JPEGs of every
# size (make-images: a colour per class, noise squares) are packed by rf-pack
# --image-folder; LeNet at --image-size 32 (RandomResizedCrop + flip, centre crop for
# the test set; 80 images a class, 4 epochs, the lr cosine-annealed: 1.0 on seeds 0-11
# here, with 150 a class too, where a constant lr's last epoch dipped to 0.72-0.94 on
# some seeds) reaches a test accuracy of 0.9 or more, and rf-infer on its export gives
# the run's own final accuracy and loss. The checks of sameness and refusal use a
# smaller set (24 images a class: a run of it costs a sixth, under ThreadSanitizer
# too): the same images as a WebDataset shard (a tar of KEY.jpg + KEY.cls) give the
# same weights as the packed file; ResNet-18 with the ImageNet stem trains a step (of
# 2 images) at 64 and 128 pixels; --normalize changes the weights, is exported and
# applied by rf-infer; a corrupt JPEG fails the run or
# (--skip-bad-images) is counted and named. Refusals name what is wrong:
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
"$MAKE" "$T/img" 80 40 7 || fail "make-images"
"$PACK" --image-folder "$T/img/train" -o "$T/img-train.rfrec" >/dev/null 2>"$T/err" ||
	fail "rf-pack train: $(cat "$T/err")"
"$PACK" --image-folder "$T/img/test" -o "$T/img-test.rfrec" >/dev/null 2>"$T/err" ||
	fail "rf-pack test: $(cat "$T/err")"
acc() { sed -n 's/.*"final_test_acc": \([0-9.]*\).*/\1/p' "$1"; }
loss() { sed -n 's/.*"final_test_loss": \([0-9.]*\).*/\1/p' "$1"; }
hash() { sed -n 's/.*"param_hash": "\([0-9a-f]*\)".*/\1/p' "$1"; }
A="--model lenet --image-size 32 --epochs 4 --lr-schedule cosine --batch-size 16 --lr 0.05 --quiet --json"
"$RF" --data "$T/img-train.rfrec" $A --export "$T/exp" >"$T/run" 2>"$T/err" ||
	fail "rf-train: $(tail -2 "$T/err")"
a=$(acc "$T/run")
awk -v a="$a" 'BEGIN { exit !(a >= 0.9) }' || fail "lenet on images: test accuracy $a, expected >= 0.9"
echo "ok: lenet --image-size 32 on $(ls "$T/img/train"/c0 | wc -l) JPEGs a class: test accuracy $a"
"$INFER" "$T/exp" --data "$T/img-test.rfrec" >"$T/inf" 2>&1 || fail "rf-infer: $(cat "$T/inf")"
grep -q "accuracy $(printf '%.4f' "$a"), loss $(printf '%.4f' "$(loss "$T/run")")" "$T/inf" ||
	fail "rf-infer: $(cat "$T/inf"), rf-train's final accuracy $a loss $(loss "$T/run")"
echo "ok: rf-infer on the export: $(cat "$T/inf")"
# the small set, for every check below
"$MAKE" "$T/sm" 24 8 5 || fail "make-images (small)"
for p in train test; do
	"$PACK" --image-folder "$T/sm/$p" -o "$T/sm-$p.rfrec" >/dev/null 2>"$T/err" ||
		fail "rf-pack $p (small): $(cat "$T/err")"
done
# the same records as a WebDataset shard, in the packed file's order
mkdir "$T/wds" && n=0
for k in 0 1 2 3; do
	for f in "$T/sm/train/c$k"/*.jpg; do
		key=$(printf '%05d' $n); cp "$f" "$T/wds/$key.jpg"; echo $k >"$T/wds/$key.cls"
		n=$((n + 1))
	done
done
(cd "$T/wds" && tar --format=ustar -cf "$T/img-train.tar" $(ls | sort)) || fail "tar"
B="--model lenet --image-size 32 --epochs 1 --batch-size 16 --lr 0.05 --quiet --json"
"$RF" --data "$T/sm-train.rfrec" $B >"$T/r1" 2>"$T/err" || fail "rfrec run: $(tail -2 "$T/err")"
"$RF" --data "$T/img-train.tar" --test-data "$T/sm-test.rfrec" $B >"$T/r2" 2>"$T/err" ||
	fail "shard run: $(tail -2 "$T/err")"
[ -n "$(hash "$T/r1")" ] && [ "$(hash "$T/r1")" = "$(hash "$T/r2")" ] ||
	fail "the shard's weights $(hash "$T/r2"), the packed file's $(hash "$T/r1")"
echo "ok: a WebDataset shard of the same images: the same weights ($(hash "$T/r1"))"
# the same samples in three shards named by a brace pattern: the same weights again
(cd "$T/wds" && ls | sort >"$T/members" && n=$(wc -l <"$T/members") &&
	for k in 0 1 2; do
		sed -n "$((k * n / 3 + 1)),$(((k + 1) * n / 3))p" "$T/members" >"$T/m$k"
		tar --format=ustar -cf "$T/img-train-$k.tar" -T "$T/m$k" || exit 1
	done) || fail "three shards"
"$RF" --data "$T/img-train-{0..2}.tar" --test-data "$T/sm-test.rfrec" $B >"$T/r3" 2>"$T/err" ||
	fail "a brace pattern of shards: $(tail -2 "$T/err")"
[ "$(hash "$T/r3")" = "$(hash "$T/r1")" ] ||
	fail "three shards' weights $(hash "$T/r3"), the packed file's $(hash "$T/r1")"
echo "ok: three shards by a brace pattern: the same weights"
# the folders themselves: packed once into the cache (the test set: "test" beside
# "train"), the same weights; the second run reads the cached copy
export XDG_CACHE_HOME="$T/cache"
Bv=$(echo "$B" | sed 's/ --quiet//')
"$RF" --data "$T/sm/train" $Bv >"$T/rf1" 2>"$T/err" || fail "a folder: $(tail -2 "$T/err")"
grep -q "packing 96 images of 4 classes once" "$T/err" || fail "a folder: $(cat "$T/err")"
[ "$(hash "$T/rf1")" = "$(hash "$T/r1")" ] ||
	fail "the folder's weights $(hash "$T/rf1"), the packed file's $(hash "$T/r1")"
"$RF" --data "$T/sm/train/" $Bv >"$T/rf2" 2>"$T/err" || fail "a folder again: $(tail -2 "$T/err")"
grep -q "packed before" "$T/err" && [ "$(hash "$T/rf2")" = "$(hash "$T/r1")" ] ||
	fail "a folder the second time: $(cat "$T/err")"
# a damaged packed copy is packed again, not read (the same weights)
for f in "$T/cache/ringflow/folders/"*.rfrec; do printf XXXX | dd of="$f" conv=notrunc 2>/dev/null; done
"$RF" --data "$T/sm/train" $Bv >"$T/rf2b" 2>"$T/err" || fail "a damaged copy: $(tail -2 "$T/err")"
grep -q "cannot be used (.*bad magic.*): packing it again" "$T/err" &&
	[ "$(hash "$T/rf2b")" = "$(hash "$T/r1")" ] || fail "a damaged packed copy: $(cat "$T/err")"
# folders of other classes: refused before packing, naming the folders
mv "$T/sm/test/c3" "$T/sm/test/d3"
"$RF" --data "$T/sm/train" $B >"$T/rf3" 2>"$T/err" && fail "other test classes: ran"
grep -q -- "--data $T/sm/train: class 3 (sorted by name) is \"c3\", and in its test set $T/sm/test \"d3\"" \
	"$T/err" || fail "other test classes: $(cat "$T/err")"
mv "$T/sm/test/d3" "$T/sm/test/c3"
"$INFER" "$T/exp" --data "$T/sm/test" --quiet 2>"$T/err" || fail "rf-infer on a folder: $(cat "$T/err")"
# a class folder named in Latin-1 (no JSON string): said before the training, and the
# export has no class_names
mkdir "$T/l1" && cp -r "$T/sm/train" "$T/sm/test" "$T/l1/" || fail "cp"
for s in train test; do mv "$T/l1/$s/c0" "$T/l1/$s/caf$(printf '\351')" || fail "mv"; done
"$RF" --data "$T/l1/train" $B --export "$T/expl1" >/dev/null 2>"$T/err" ||
	fail "a Latin-1 class name: $(cat "$T/err")"
grep -q "class 3's name: not UTF-8.*the export records no class names" "$T/err" &&
	[ -e "$T/expl1/model.json" ] && ! grep -q class_names "$T/expl1/model.json" ||
	fail "a Latin-1 class name: $(cat "$T/err")"
# data of other classes than the export's: refused, naming the data and both counts
mkdir "$T/three" && cp -r "$T/sm/test/c0" "$T/sm/test/c1" "$T/sm/test/c2" "$T/three/" || fail "cp"
"$INFER" "$T/exp" --data "$T/three" --quiet 2>"$T/err" && fail "rf-infer on 3 classes: ran"
grep -q -- "--data $T/three: 3 classes, and the export $T/exp was trained on 4" "$T/err" ||
	fail "rf-infer on 3 classes: $(cat "$T/err")"
# as many classes, named otherwise: the export's class_names (the packed folder's) refuse it
grep -q '"class_names"' "$T/exp/model.json" || fail "the export has no class_names"
mkdir "$T/named" && for k in 0 1 2 3; do cp -r "$T/sm/test/c$k" "$T/named/d$k"; done || fail "cp"
"$INFER" "$T/exp" --data "$T/named" --quiet 2>"$T/err" && fail "rf-infer on other class names: ran"
grep -q -- "--data $T/named: export $T/exp: class 0 is \"c0\", and in the data \"d0\"" "$T/err" ||
	fail "rf-infer on other class names: $(cat "$T/err")"
mkdir "$T/wbig" && cp "$T/sm/test/c0/0000.jpg" "$T/wbig/0.jpg" && echo 1000000 >"$T/wbig/0.cls" &&
	(cd "$T/wbig" && tar --format=ustar -cf "$T/big.tar" 0.jpg 0.cls) || fail "tar of a big label"
"$INFER" "$T/exp" --data "$T/big.tar" --quiet 2>"$T/err" && fail "rf-infer on label 1000000: ran"
grep -q -- "$T/big.tar: labels up to 1000000 (1000001 classes" "$T/err" ||
	fail "rf-infer on label 1000000: $(cat "$T/err")"
touch "$T/sm/train/c0/new.jpg"
"$RF" --data "$T/sm/train" $B >"$T/rf3" 2>"$T/err" && fail "an empty file in the folder: ran"
grep -q "new.jpg: 0 bytes" "$T/err" || fail "an empty file: $(cat "$T/err")"
rm "$T/sm/train/c0/new.jpg"
mv "$T/sm/train" "$T/sm/tr"
"$RF" --data "$T/sm/tr" $B >"$T/rf3" 2>"$T/err" && fail "a folder without a test set: ran"
grep -q "expected --test-data, a folder val or test" "$T/err" || fail "no test set: $(cat "$T/err")"
mv "$T/sm/tr" "$T/sm/train"
unset XDG_CACHE_HOME
echo "ok: image folders as --data: packed once, the same weights, then read from the cache"
# --normalize: other weights than the plain run; the export says the mean and std and
# rf-infer feeds its model so (its accuracy and loss are the run's own)
"$RF" --data "$T/sm-train.rfrec" $B --normalize imagenet --export "$T/expn" >"$T/rn1" \
	2>"$T/err" || fail "--normalize imagenet: $(tail -2 "$T/err")"
[ "$(hash "$T/rn1")" != "$(hash "$T/r1")" ] || fail "--normalize changed no weight"
tr -d ' \n' <"$T/expn/model.json" >"$T/mj"
grep -q '"input_mean":\[0.48' "$T/mj" && grep -q '"input_std":\[0.22' "$T/mj" ||
	fail "the export does not say the mean and std"
"$INFER" "$T/expn" --data "$T/sm-test.rfrec" >"$T/inf" 2>&1 || fail "rf-infer: $(cat "$T/inf")"
grep -q "accuracy $(printf '%.4f' "$(acc "$T/rn1")"), loss $(printf '%.4f' "$(loss "$T/rn1")")" \
	"$T/inf" || fail "rf-infer --normalize: $(cat "$T/inf"), rf-train's $(acc "$T/rn1")"
"$RF" --data "$T/sm-train.rfrec" $B --normalize 0.5,0.5,0.5/0.25,0.25,0.25 >"$T/rn2" \
	2>"$T/err" || fail "--normalize per channel: $(tail -2 "$T/err")"
"$RF" --data "$T/sm-train.rfrec" $B --normalize 0.5/0.25 >"$T/rn3" 2>"$T/err" ||
	fail "--normalize one for all: $(tail -2 "$T/err")"
[ "$(hash "$T/rn2")" = "$(hash "$T/rn3")" ] || fail "0.5/0.25 is not 0.5,0.5,0.5/0.25,0.25,0.25"
# the checkpoint records it: a resume with another mean and std, or none, is refused
"$RF" --data "$T/sm-train.rfrec" $B --normalize imagenet --checkpoint "$T/n.ck" >/dev/null \
	2>"$T/err" || fail "--normalize --checkpoint: $(tail -2 "$T/err")"
for n in "" "--normalize 0.5/0.25"; do
	"$RF" --data "$T/sm-train.rfrec" $B $n --checkpoint "$T/n.ck" --resume --epochs 2 \
		>/dev/null 2>"$T/err" && fail "resumed with '$n' a run saved with --normalize imagenet"
	grep -q "saved by a run with --normalize" "$T/err" || fail "resume '$n': $(cat "$T/err")"
done
"$RF" --data "$T/sm-train.rfrec" $B --normalize imagenet --checkpoint "$T/n.ck" --resume \
	--epochs 2 >/dev/null 2>"$T/err" || fail "resume with the same --normalize: $(tail -2 "$T/err")"
echo "ok: --normalize: exported, applied by rf-infer ($(cat "$T/inf"))"
# a JPEG whose data are garbage after its headers: the run fails naming its record, or
# with --skip-bad-images goes on and counts it. The garbage has no 0xff byte, so no
# marker: random bytes held an end-of-image marker (ff d9) about one time in twenty,
# and data that only warn ("Corrupt JPEG data") but end properly decode, as PIL's do.
cp -r "$T/sm/train" "$T/badtree"
f=$(ls "$T/badtree/c2"/*.jpg | head -1)
head -c 700 "$f" >"$T/b.jpg" && head -c 3000 /dev/urandom | tr -d '\377' >>"$T/b.jpg" &&
	mv "$T/b.jpg" "$f"
"$PACK" --image-folder "$T/badtree" -o "$T/bad.rfrec" >/dev/null 2>"$T/err" ||
	fail "rf-pack of the tree with a corrupt JPEG: $(cat "$T/err")"
"$RF" --data "$T/bad.rfrec" --test-data "$T/sm-test.rfrec" $B >"$T/out" 2>"$T/err" &&
	fail "a corrupt image: the run did not fail"
grep -q "bad.rfrec: record" "$T/err" || fail "a corrupt image: $(cat "$T/err")"
"$RF" --data "$T/bad.rfrec" --test-data "$T/sm-test.rfrec" $B --skip-bad-images >"$T/out" \
	2>"$T/err" || fail "--skip-bad-images: $(tail -2 "$T/err")"
grep -q '"images_skipped": 1' "$T/out" || fail "--skip-bad-images: $(cat "$T/out")"
grep -q "bad.rfrec: record .*skipped" "$T/err" || fail "no warning names it: $(cat "$T/err")"
echo "ok: a corrupt JPEG fails the run, or with --skip-bad-images is counted and named"
for s in 64 128; do
	"$RF" --data "$T/sm-train.rfrec" --model resnet18 --image-size $s --stem imagenet \
		--epochs 1 --batch-size 2 --limit 2 --test-limit 2 --quiet --json >"$T/rn" 2>"$T/err" ||
		fail "resnet18 --stem imagenet --image-size $s: $(tail -2 "$T/err")"
done
echo "ok: resnet18 with the ImageNet stem at 64 and 128 pixels"
refuse() { # refuse EXPECTED-TEXT ARGS...
	want=$1; shift
	"$RF" "$@" --epochs 1 --quiet >"$T/out" 2>"$T/err" && fail "ran: $*"
	grep -q "$want" "$T/err" || fail "$*: expected '$want' in: $(cat "$T/err")"
}
refuse "give --image-size" --data "$T/sm-train.rfrec"
refuse "not an .rfrec file" --data "$T/img-train.tar" --test-data "$T/exp/params.rfck" \
	--image-size 32
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
[ -e "$DATA/train-images-idx3-ubyte.gz" ] &&
	refuse "fixed-size records, expected encoded images" --data "$DATA" --image-size 32
refuse "stem" --data "$T/sm-train.rfrec" --image-size 32 --model lenet --stem imagenet
"$MAKE" "$T/few" 2 2 3 && rm -rf "$T/few/test/c3" &&
	"$PACK" --image-folder "$T/few/test" -o "$T/few-test.rfrec" >/dev/null ||
	fail "a three-class test set"
refuse "expected the same classes" --data "$T/sm-train.rfrec" --test-data "$T/few-test.rfrec" \
	--image-size 32
# --no-eval needs no test set: a folder with no val/test beside it, an .rfrec with none
# named or beside it, and shards whose pattern beside (img-test-{0..2}.tar) names none,
# train (all refused for want of one before); without it refused naming --no-eval
"$MAKE" "$T/lone" 2 2 2 && mv "$T/lone/train" "$T/lone/set" && rm -rf "$T/lone/test" ||
	fail "a folder without a test set"
refuse "or --no-eval" --data "$T/lone/set" --image-size 16 --model lenet
cp "$T/img-train.rfrec" "$T/alone.rfrec"
for d in "$T/lone/set" "$T/alone.rfrec" "$T/img-train-{0..2}.tar"; do
	"$RF" --data "$d" --image-size 16 --model lenet --batch-size 4 --epochs 1 --limit 8 \
		--no-eval --quiet --json >"$T/out" 2>"$T/err" || fail "--no-eval on $d: $(cat "$T/err")"
	grep -q '"final_test_acc": null' "$T/out" || fail "--no-eval on $d: $(cat "$T/out")"
done
echo "ok: refusals name what is wrong; --no-eval needs no test set"
