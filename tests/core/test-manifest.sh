#!/bin/sh
# test-manifest: the embedding example (examples/rf-manifest.c) reads every file under
# a directory through the ring, hashes each on worker streams with a small recycled
# buffer pool, and writes a manifest; it must equal sha256sum's output for the same
# files (sizes around the SHA block and chunk boundaries, an empty file, nested
# directories), written atomically; a missing directory is a clear error, exit 1, and
# leaves OUT as it was; OUT must be a regular file, OUT.tmp new; every number has a
# range; --help and a full stdout.
set -eu
exe=$1
command -v sha256sum >/dev/null || exit 77
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/in/sub/deeper"
: > "$d/in/empty"
for n in 1 55 56 63 64 65 4095 65535 65536 65537 1000003; do
	head -c $n /dev/urandom > "$d/in/f$n"
done
head -c 3000000 /dev/urandom > "$d/in/sub/big"
echo hello > "$d/in/sub/deeper/hello.txt"
"$exe" --workers 2 --chunk 65536 --buffers 3 "$d/in" "$d/manifest"
test ! -e "$d/manifest.tmp"
(cd / && find "$d/in" -type f | LC_ALL=C sort | xargs sha256sum) > "$d/expect"
if ! cmp "$d/manifest" "$d/expect"; then
	diff "$d/manifest" "$d/expect" | head
	exit 1
fi
# to stdout, one worker, one buffer: same result
"$exe" --workers 1 --chunk 4096 --buffers 1 "$d/in" > "$d/manifest2"
cmp "$d/manifest2" "$d/expect"
# chunks that are not multiples of SHA-256's 64-byte block: the hash is fed pieces that
# leave part of a block buffered (a chunk of 65 hashed wrong: the buffered bytes were
# dropped when the next piece did not fill the block), on files around the block sizes
mkdir -p "$d/odd"
for n in 0 1 6 55 56 63 64 65 127 128 129 1000 4099; do
	head -c $n /dev/urandom > "$d/odd/f$n"
done
(cd / && find "$d/odd" -type f | LC_ALL=C sort | xargs sha256sum) > "$d/expect-odd"
for c in 1 3 5 55 63 65 100 129 4097; do
	"$exe" --workers 2 --chunk $c --buffers 4 "$d/odd" > "$d/m-odd"
	cmp -s "$d/m-odd" "$d/expect-odd" || { echo "--chunk $c: not sha256sum's"; diff "$d/m-odd" "$d/expect-odd" | head -4; exit 1; }
done
# errors
if "$exe" "$d/nonexistent" 2> "$d/err"; then exit 1; fi
grep -q "nonexistent" "$d/err"
if "$exe" --chunk zero "$d/in" 2> "$d/err"; then exit 1; fi
grep -q -- "--chunk" "$d/err"
# OUT is replaced only by a whole manifest of a run without errors: a walk that fails
# (it renamed an empty OUT.tmp over OUT) and a read that fails leave it as it was
cp "$d/manifest" "$d/keep"
if "$exe" "$d/nonexistent" "$d/manifest" 2> "$d/err"; then exit 1; fi
cmp -s "$d/keep" "$d/manifest" || { echo "a failed walk replaced OUT"; exit 1; }
grep -q "not written" "$d/err" || { cat "$d/err"; exit 1; }
if RF_FAULT_INJECT=eio=1 "$exe" "$d/in" "$d/manifest" 2> "$d/err"; then exit 1; fi
cmp -s "$d/keep" "$d/manifest" || { echo "a failed read replaced OUT"; exit 1; }
test ! -e "$d/manifest.tmp"
# OUT must be a regular file (as root, the rename replaced a device node: /dev/null
# itself); OUT.tmp is created new, so a FIFO there (it hung), a link or another run's
# file is refused, and left alone
fails() { # fails CODE TEXT args...: exit CODE within 20 s, one stderr line with TEXT
	code=$1 text=$2; shift 2
	rc=0
	timeout 20 "$exe" "$@" > "$d/out" 2> "$d/err" || rc=$?
	[ $rc = "$code" ] && [ "$(wc -l < "$d/err")" -eq 1 ] && grep -qF -- "$text" "$d/err" ||
		{ echo "rf-manifest $*: exit $rc (want $code), stderr: $(cat "$d/err")"; exit 1; }
}
node=/dev/null
[ "$(id -u)" = 0 ] && mknod "$d/null" c 1 3 2>/dev/null && node=$d/null
fails 1 "$node: is not a regular file (a character device)" "$d/in" "$node"
[ -c "$node" ] || { echo "rf-manifest replaced the device node $node"; exit 1; }
# an existing OUT inside DIR is one of the files hashed: it was replaced, listed
# with its old hash
f1=$(cd "$d/in" && find . -type f | head -1)
cp "$d/in/$f1" "$d/keep1"
fails 1 "a file inside DIR" "$d/in" "$d/in/$f1"
cmp -s "$d/keep1" "$d/in/$f1" || { echo "rf-manifest replaced an input file"; exit 1; }
# a link outside DIR that leads into it is replaced itself, not what it leads to: fine
ln -s "$d/in/$f1" "$d/outlink"
"$exe" "$d/in" "$d/outlink" 2> "$d/err" || { echo "a link at OUT refused: $(cat "$d/err")"; exit 1; }
[ -f "$d/outlink" ] && ! [ -L "$d/outlink" ] && cmp -s "$d/keep1" "$d/in/$f1" ||
	{ echo "rf-manifest wrote through the link at OUT"; exit 1; }
mkfifo "$d/f.tmp"
fails 1 "$d/f.tmp: exists" "$d/in" "$d/f"
[ -p "$d/f.tmp" ] && ! [ -e "$d/f" ] || { echo "rf-manifest touched f.tmp or made f"; exit 1; }
echo keep > "$d/target"
ln -s "$d/target" "$d/l.tmp"
fails 1 "$d/l.tmp: exists" "$d/in" "$d/l"
[ "$(cat "$d/target")" = keep ] || { echo "rf-manifest wrote through a link"; exit 1; }
mkdir "$d/dirout"
fails 1 "$d/dirout: is not a regular file (a directory)" "$d/in" "$d/dirout"
fails 1 "is not a writable directory" "$d/in" "$d/nodir/m"
# every number bounded, with its range in the message (--buffers 2^62 crashed,
# --chunk 2^63-1 exited 1 silently, --workers 10^20 was taken); --help is not an error
for o in "--workers 64" "--chunk 67108864" "--buffers 4096"; do
	opt=${o% *} max=${o#* }
	for v in 0 $((max + 1)) 99999999999999999999 4611686018427387904 -1 " 1" 1x x ""; do
		fails 2 "$opt: got '$v', expected an integer from 1 to $max" $opt "$v" "$d/in"
	done
	fails 2 "$opt needs a value" "$d/in" $opt
done
fails 2 "1088 MiB of buffers, expected at most 1024 MiB" --chunk 67108864 --buffers 17 "$d/in"
fails 2 "--bogus: unknown option" --bogus "$d/in"
fails 2 "unexpected argument" "$d/in" "$d/m1" "$d/m2"
"$exe" --help > "$d/out" 2> "$d/err" && grep -q "^usage: rf-manifest" "$d/out" && ! [ -s "$d/err" ] ||
	{ echo "rf-manifest --help: $(cat "$d/err")"; exit 1; }
# a manifest (or the usage) that cannot be written to stdout is an error (it exited 0)
if [ -w /dev/full ]; then
	for a in --help "$d/in"; do
		! "$exe" $a > /dev/full 2> "$d/err" || { echo "rf-manifest $a >/dev/full: exit 0"; exit 1; }
		grep -q "stdout: No space left on device" "$d/err" || { cat "$d/err"; exit 1; }
	done
fi
echo "manifest matches sha256sum for $(wc -l < "$d/expect") files; OUT kept on errors"
