#!/bin/sh
# test-train-skip.sh RF_TRAIN SOURCE_ROOT: --skip-bad-images counts, per epoch, exactly
# the images skipped in the batches that epoch trained on. The loader queues the next
# epoch's first batches before an epoch ends; their bad images were counted in the
# epoch before (a 1-epoch run said 2 for a shard with 1 bad image) and named in
# warnings of an epoch that never ran. A WebDataset shard of 12 images, BAD of them
# garbage, batch 4, over 1 and 3 epochs and with --prefetch 1..8: every epoch's line
# says BAD, the JSON total is BAD x epochs, and the warnings name only the epochs run.
set -u
RF=${1:?usage: $0 rf-train source-root}
SRC=${2:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-train-skip.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
C="$SRC/fuzz/corpus/image"
# the corpus's files start with the fuzzer's option byte: the image is after it
mk() { # mk DIR IMAGE NBAD: 12 samples KEY.jpg + KEY.cls, the first NBAD garbage
	mkdir "$T/$1" || exit 1
	for i in 0 1 2 3 4 5 6 7 8 9 10 11; do
		k=$(printf '%04d' $i)
		if [ $i -lt "$3" ]; then
			head -c 300 /dev/urandom | tr -d '\377' >"$T/$1/$k.jpg"
		else
			tail -c +2 "$C/$2" >"$T/$1/$k.jpg"
		fi
		echo $((i % 2)) >"$T/$1/$k.cls"
	done
	(cd "$T/$1" && tar --format=ustar -cf "$T/$1.tar" $(ls | sort)) || fail "tar $1"
}
mk test jpeg-baseline-444-flip 0
A="--quiet --batch-size 4 --test-data $T/test.tar --image-size 16 --model lenet --skip-bad-images"
for bad in 1 2 5; do
	rm -rf "$T/train" "$T/train.tar" "$T/train.tar.idx"
	mk train jpeg-baseline-420 $bad
	for ep in 1 3; do
		for pf in 1 2 4 8; do
			what="$bad bad, --epochs $ep --prefetch $pf"
			"$RF" $A --data "$T/train.tar" --epochs $ep --prefetch $pf --json \
				>"$T/out" 2>"$T/err" || fail "$what: $(tail -2 "$T/err")"
			grep -q "\"images_skipped\": $((bad * ep))[,}]" "$T/out" ||
				fail "$what: expected images_skipped $((bad * ep)): $(cat "$T/out")"
			n=$(grep -c "^epoch [0-9]*/$ep: .*, $bad bad images\{0,1\} skipped$" "$T/err")
			[ "$n" = "$ep" ] || fail "$what: expected $ep epoch lines saying $bad skipped: $(cat "$T/err")"
			# each bad image once an epoch, in a warning of an epoch that ran
			w=$(grep "skipped: epoch" "$T/err" | sed 's/.*; \([0-9]*\) images of the batch skipped)$/\1/; t; s/.*/1/' |
				awk '{ s += $1 } END { print s + 0 }')
			[ "$w" = "$((bad * ep))" ] || fail "$what: warnings name $w images, expected $((bad * ep)): $(cat "$T/err")"
			grep "skipped: epoch" "$T/err" | grep -qv "skipped: epoch \($(seq -s '\|' 0 $((ep - 1)))\), " &&
				fail "$what: a warning names an epoch that did not run: $(cat "$T/err")"
		done
	done
	echo "ok: $bad bad images of 12: counted and named once an epoch, 1 and 3 epochs, prefetch 1..8"
done
# every image bad: a batch with no good image still fails
rm -rf "$T/train" "$T/train.tar" "$T/train.tar.idx"
mk train jpeg-baseline-420 12
"$RF" $A --data "$T/train.tar" --epochs 1 >"$T/out" 2>"$T/err" &&
	fail "every image bad: the run did not fail"
grep -q "none of the 4 images of the batch decoded" "$T/err" || fail "every image bad: $(cat "$T/err")"
echo "ok: a batch of bad images only still fails the run"
