#!/bin/sh
# test-manifest: the embedding example (examples/rf-manifest.c) reads every file under
# a directory through the ring, hashes each on worker streams with a small recycled
# buffer pool, and writes a manifest; it must equal sha256sum's output for the same
# files (sizes around the SHA block and chunk boundaries, an empty file, nested
# directories), written atomically; a missing directory is a clear error, exit 1.
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
# errors
if "$exe" "$d/nonexistent" 2> "$d/err"; then exit 1; fi
grep -q "nonexistent" "$d/err"
if "$exe" --chunk zero "$d/in" 2> "$d/err"; then exit 1; fi
grep -q -- "--chunk" "$d/err"
echo "manifest matches sha256sum for $(wc -l < "$d/expect") files"
