#!/bin/sh
# test-data-url.sh RF_TRAIN RF_INFER RF_PACK RF_HTTPD: the same data named by a path or by
# an http:// URL means the same thing in every tool. rf-httpd serves a scratch directory
# of record files; then, each both ways with the figures compared:
#   - rf-train with --data and --test-data in all four local/URL combinations, and with
#     the test set found beside the training file;
#   - rf-infer on an export with --data fm-train.rfrec (that file is evaluated, not the
#     t10k file beside it: before, a URL was taken for a training set and its
#     neighbour evaluated, silently), fm-t10k.rfrec, a name without "train", a missing
#     file (refused both ways);
#   - rf-pack --check (a URL was refused as "No such file").
# And the test set beside an http:// training file that the server has but cannot
# serve (not a record file; a 503) is reported as that file's failure, not as "no test
# set beside it" (which hid the real error); likewise a local one that is a directory.
# RF_HTTP_TIMEOUT_MS=0 is one line naming the variable, from each tool. Skips (77)
# without Fashion-MNIST or without rf-httpd (no libhttp-parser).
set -u
RF=${1:?usage: $0 rf-train rf-infer rf-pack rf-httpd}
INFER=${2:?}
PACK=${3:?}
HTTPD=${4:-}
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
[ -e "$DATA/t10k-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $DATA"; exit 77; }
[ -n "$HTTPD" ] && [ -x "$HTTPD" ] || { echo "SKIP: rf-httpd not built"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-data-url.XXXXXX") || exit 1
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
W="$T/www"
mkdir -p "$W/dir"
chmod 755 "$T" "$W"
"$PACK" --images "$DATA/t10k-images-idx3-ubyte.gz" --labels "$DATA/t10k-labels-idx1-ubyte.gz" \
	--classes 10 -o "$W/fm-t10k.rfrec" >/dev/null 2>"$T/err" || fail "rf-pack: $(cat "$T/err")"
"$PACK" --images "$DATA/train-images-idx3-ubyte.gz" --labels "$DATA/train-labels-idx1-ubyte.gz" \
	--classes 10 -o "$W/fm-train.rfrec" >/dev/null 2>"$T/err" || fail "rf-pack: $(cat "$T/err")"
cp "$W/fm-t10k.rfrec" "$W/eval.rfrec"
"$HTTPD" --port 0 "$W" >"$T/httpd.out" 2>"$T/httpd.err" &
pid=$!
for _ in $(seq 50); do grep -q "http://" "$T/httpd.out" 2>/dev/null && break; sleep 0.1; done
U=$(sed -n 's|.*\(http://[0-9.:]*\)/.*|\1|p' "$T/httpd.out")
[ -n "$U" ] || fail "rf-httpd did not start: $(cat "$T/httpd.err")"
figs() { grep -o '"final_[a-z_]*": [0-9.a-z-]*\|"param_hash": "[0-9a-f]*"\|"samples": [0-9]*\|"accuracy": [0-9.]*\|"loss": [0-9.]*' "$1" | tr '\n' ' '; }

# rf-train: --data and --test-data, each a path or a URL
A="--model mlp --limit 1001 --test-limit 501 --epochs 1 --quiet --json"
ref=
for d in "$W/fm-train.rfrec" "$U/fm-train.rfrec"; do
	for t in "" "$W/eval.rfrec" "$U/eval.rfrec"; do
		"$RF" $A --data "$d" ${t:+--test-data "$t"} >"$T/out" 2>"$T/err" ||
			fail "rf-train --data $d ${t:+--test-data $t}: $(tail -2 "$T/err")"
		f=$(figs "$T/out")
		[ -n "$f" ] || fail "rf-train --data $d: no figures"
		[ -z "$ref" ] && ref=$f
		[ "$f" = "$ref" ] || fail "rf-train --data $d ${t:+--test-data $t}: $f, not $ref"
	done
done
echo "ok: rf-train: --data and --test-data as paths or URLs, beside or named: $ref"

# rf-infer: the file named is the file evaluated, whichever way it is named
"$RF" --model mlp --data "$W/fm-train.rfrec" --limit 512 --test-limit 256 --epochs 1 \
	--quiet --export "$T/ex" >/dev/null 2>"$T/err" || fail "export: $(tail -2 "$T/err")"
for f in fm-train.rfrec fm-t10k.rfrec eval.rfrec; do
	"$INFER" "$T/ex" --data "$W/$f" --limit 1024 --json >"$T/p" 2>"$T/err" ||
		fail "rf-infer --data $W/$f: $(tail -2 "$T/err")"
	"$INFER" "$T/ex" --data "$U/$f" --limit 1024 --json >"$T/u" 2>"$T/err" ||
		fail "rf-infer --data $U/$f: $(tail -2 "$T/err")"
	[ -n "$(figs "$T/p")" ] && [ "$(figs "$T/p")" = "$(figs "$T/u")" ] ||
		fail "rf-infer $f: path $(figs "$T/p"), URL $(figs "$T/u")"
done
# the training file (60,000 records) is evaluated, not the t10k (10,000) beside it
"$INFER" "$T/ex" --data "$U/fm-train.rfrec" --json >"$T/u" 2>"$T/err" ||
	fail "rf-infer URL: $(tail -2 "$T/err")"
grep -q '"samples": 60000' "$T/u" || fail "rf-infer over a URL evaluated another file: $(cat "$T/u")"
for d in "$W/missing.rfrec" "$U/missing.rfrec"; do
	"$INFER" "$T/ex" --data "$d" >/dev/null 2>"$T/err" && fail "rf-infer --data $d ran"
	grep -q "missing.rfrec" "$T/err" || fail "rf-infer --data $d: $(cat "$T/err")"
done
echo "ok: rf-infer: the file named is evaluated, path or URL"

# rf-pack --check
"$PACK" --check "$W/eval.rfrec" >"$T/p" 2>"$T/err" || fail "rf-pack --check path: $(cat "$T/err")"
"$PACK" --check "$U/eval.rfrec" >"$T/u" 2>"$T/err" || fail "rf-pack --check URL: $(cat "$T/err")"
# the same line but for the name it starts with
[ "$(sed 's|^[^ ]*: ||' "$T/p")" = "$(sed 's|^[^ ]*: ||' "$T/u")" ] ||
	fail "rf-pack --check: $(cat "$T/p") / $(cat "$T/u")"
echo "ok: rf-pack --check: a path and a URL alike"

# a test set beside it that is there but unusable is reported as such
head -c 5000 /dev/urandom >"$W/bad-t10k.rfrec"
cp "$W/fm-train.rfrec" "$W/bad-train.rfrec"
chmod 644 "$W"/*.rfrec
"$RF" $A --data "$U/bad-train.rfrec" >/dev/null 2>"$T/err" && fail "ran with a broken test set"
grep -q "bad-t10k.rfrec" "$T/err" && ! grep -q "no test set beside" "$T/err" ||
	fail "a broken test set beside a URL: $(cat "$T/err")"
cp "$W/fm-train.rfrec" "$W/dir/x-train.rfrec"
mkdir "$W/dir/x-t10k.rfrec"
"$RF" $A --data "$W/dir/x-train.rfrec" >/dev/null 2>"$T/err" && fail "ran with a directory as test set"
grep -q "x-t10k.rfrec" "$T/err" || fail "a test set that is a directory: $(cat "$T/err")"
echo "ok: a test set beside it that cannot be read is named with why"

# RF_HTTP_TIMEOUT_MS: one line naming it, from every tool that reads a URL
for v in 0 x "" 3600001 " 5" +5; do
	RF_HTTP_TIMEOUT_MS=$v "$RF" $A --data "$U/fm-train.rfrec" >/dev/null 2>"$T/err" &&
		fail "rf-train ran with RF_HTTP_TIMEOUT_MS='$v'"
	[ "$(wc -l <"$T/err")" = 1 ] && grep -q "RF_HTTP_TIMEOUT_MS=$v" "$T/err" &&
		! grep -q -- "--data RF_" "$T/err" || fail "rf-train, RF_HTTP_TIMEOUT_MS='$v': $(cat "$T/err")"
	RF_HTTP_TIMEOUT_MS=$v "$INFER" "$T/ex" --data "$U/eval.rfrec" >/dev/null 2>"$T/err" &&
		fail "rf-infer ran with RF_HTTP_TIMEOUT_MS='$v'"
	grep -q "RF_HTTP_TIMEOUT_MS=$v" "$T/err" || fail "rf-infer, RF_HTTP_TIMEOUT_MS='$v': $(cat "$T/err")"
	RF_HTTP_TIMEOUT_MS=$v "$PACK" --check "$U/eval.rfrec" >/dev/null 2>"$T/err" &&
		fail "rf-pack ran with RF_HTTP_TIMEOUT_MS='$v'"
	grep -q "RF_HTTP_TIMEOUT_MS=$v" "$T/err" || fail "rf-pack, RF_HTTP_TIMEOUT_MS='$v': $(cat "$T/err")"
done
echo "ok: a bad RF_HTTP_TIMEOUT_MS is one line naming it"
