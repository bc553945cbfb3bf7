#!/bin/sh
# test-train-baddata: rf-train on a data directory with one bad file refuses at once
# with one stderr line naming that file (not another one) and what is wrong with it:
# a FIFO in place of the training images (open() used to block forever; a hang is
# killed by timeout and fails), a directory in place of the test labels, /dev/null as
# the training labels, test images of 56x14 instead of 28x28 (the shape found must be
# named, against the test file), training images likewise, and truncated test labels.
# The other three files are the real Fashion-MNIST ones, raw. Skips (77) without it.
# usage: test-train-baddata.sh path/to/rf-train
RF=${1:?usage: $0 rf-train}
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-train-baddata.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
TI=train-images-idx3-ubyte TL=train-labels-idx1-ubyte
EI=t10k-images-idx3-ubyte EL=t10k-labels-idx1-ubyte

mkdir "$T/good" || exit 1
. "$(dirname "$0")/fmnist-raw.sh"
fmnist_raw "$T/good"

# case NAME BADFILE PATTERN: $T/NAME holds the good files but BADFILE (made by the
# caller in $T/NAME); rf-train must exit 1 with one line naming it and matching PATTERN
mk() {
	mkdir "$T/$1" || exit 1
	for n in $TI $TL $EI $EL; do
		ln -s "$T/good/$n" "$T/$1/$n" || exit 1
	done
	rm -f "$T/$1/$2"
}
expect() {
	d=$1; f=$2; pat=$3
	timeout 60 "$RF" --data "$T/$d" --epochs 1 --limit 256 --quiet >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" = 124 ] && fail "$d: rf-train hung on $f (killed after 60 s)"
	[ "$rc" = 1 ] || fail "$d: exit $rc, want 1; stderr: $(cat "$T/err")"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "$d: want one stderr line: $(cat "$T/err")"
	grep -q -- "$T/$d/$f: " "$T/err" || fail "$d: the message does not name $f: $(cat "$T/err")"
	grep -q -- "$pat" "$T/err" || fail "$d: the message lacks '$pat': $(cat "$T/err")"
	echo "ok: $d: $(cat "$T/err")"
}

# a 56x14 copy of an images file: the same bytes, other dims in the header
reshape() { # reshape SRC DST
	{ head -c 8 "$1"; printf '\000\000\000\070\000\000\000\016'; tail -c +17 "$1"; } >"$2"
}

mk fifo $TI && mkfifo "$T/fifo/$TI" || fail mkfifo
# rf-train refuses non-regular data files before anything runs (naming --data); the
# dataloader's own refusal of them is tested by dl-nonregular
expect fifo $TI "is a FIFO, expected a regular file"
mk dir $EL && mkdir "$T/dir/$EL" || fail mkdir
expect dir $EL "is a directory, expected a regular file"
mk null $TL && ln -s /dev/null "$T/null/$TL" || fail ln
expect null $TL "is a character device"
mk testshape $EI && reshape "$T/good/$EI" "$T/testshape/$EI" || fail reshape
expect testshape $EI "images of 56x14, expected 28x28"
mk trainshape $TI && reshape "$T/good/$TI" "$T/trainshape/$TI" || fail reshape
expect trainshape $TI "images of 56x14, expected 28x28"
mk cut $EL && head -c 5000 "$T/good/$EL" >"$T/cut/$EL" || fail head
expect cut $EL "truncated"
