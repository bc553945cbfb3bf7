#!/bin/sh
# test-ckpt-migrate RF_TRAIN FIXTURE -- checkpoints written before the run state was
# versioned (run state version 1: fixed offsets, 144 bytes) are read.
#
# The bits of a CPU run depend on the machine (doc/training.md, "Same bits"), so no
# hash computed elsewhere is an oracle here. Two files are resumed:
#  - a version-1 file made on this machine: rf-train stops at step 30 (inside epoch 2:
#    batch 6 of 24) with --checkpoint, and the file's run state is rewritten in the
#    version-1 layout (ckpt-runstate-v1.py, header and trailer CRCs made anew).
#    Resumed, it must end at the parameters of the uninterrupted run on this machine,
#    bit for bit, and the checkpoint it writes is version 2 ("RFRS", version 2 at
#    byte 112);
#  - FIXTURE (tests/train/fixtures/lenet-runstate-v1.rfck), written by rf-train at
#    f318510 on another machine during the same run: it resumes (its run state read,
#    the run completed, the file rewritten as version 2), and a setting it records
#    (--augment) is still refused by name when the resume leaves it out.
# And the field version 2 gained since (19, --order): recorded, checked by name.
# The run, on the first 384 training records of Fashion-MNIST (made here):
#   rf-train --data D --model lenet --batch-size 16 --epochs 2 --no-eval --seed 5 \
#     --lr 0.05 --wd 5e-4 --lr-schedule cosine --augment
set -u
RF=$1 FIX=$2
HERE=$(dirname "$0")
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
[ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ] ||
	{ echo "SKIP: no Fashion-MNIST in $DATA"; exit 77; }
T=$(mktemp -d /tmp/rf-ckpt-migrate.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
hash_of() { sed -n 's/.*"param_hash": *"\([0-9a-f]*\)".*/\1/p' "$1"; }
is_v2() {
	python3 -c 'import sys; h = open(sys.argv[1], "rb").read()[112:120]
assert h[:4] == b"RFRS" and int.from_bytes(h[4:6], "little") == 3, h' "$1"
}
python3 "$HERE/small-fmnist.py" "$DATA" "$T" || fail "cannot make the small data set"
args="--data $T --model lenet --batch-size 16 --epochs 2 --no-eval --quiet --seed 5 --lr 0.05 --wd 5e-4 --lr-schedule cosine --augment"

# the oracle: the uninterrupted run, here
"$RF" $args --json >"$T/u.json" 2>"$T/err" || fail "uninterrupted run: $(cat "$T/err")"
WANT=$(hash_of "$T/u.json")
[ -n "$WANT" ] || fail "no param_hash in $(cat "$T/u.json")"

# a version-1 file of this machine's run, stopped at step 30
"$RF" $args --checkpoint "$T/l.rfck" --max-steps 30 >/dev/null 2>"$T/err" ||
	fail "the run stopped at step 30: $(cat "$T/err")"
is_v2 "$T/l.rfck" || fail "rf-train did not write run state version 3"
python3 "$HERE/ckpt-runstate-v1.py" "$T/l.rfck" || fail "cannot rewrite the run state as version 1"
python3 -c 'import sys; d = open(sys.argv[1], "rb").read()
assert d[112:116] != b"RFRS" and int.from_bytes(d[104:108], "little") == 144' "$T/l.rfck" ||
	fail "the rewritten file is not version 1"
"$RF" $args --checkpoint "$T/l.rfck" --resume --json >"$T/r.json" 2>"$T/err" ||
	fail "resuming this machine's version-1 file: $(cat "$T/err")"
[ "$(hash_of "$T/r.json")" = "$WANT" ] ||
	fail "resumed from this machine's version-1 file: $(cat "$T/r.json"), expected $WANT (the uninterrupted run)"
is_v2 "$T/l.rfck" || fail "the checkpoint written after the resume is not run state version 3"

# the run state's --order (field 19): a file that records one refuses the other by
# name; a file from before the field resumes under either
"$RF" $args --order windowed --checkpoint "$T/w.rfck" --max-steps 30 >/dev/null 2>"$T/err" ||
	fail "the windowed run stopped at step 30: $(cat "$T/err")"
"$RF" $args --checkpoint "$T/w.rfck" --resume >/dev/null 2>"$T/err" &&
	fail "a --order windowed checkpoint resumed under the uniform order"
grep -q -- "--order windowed" "$T/err" || fail "refusal without naming --order: $(cat "$T/err")"
python3 "$HERE/ckpt-runstate-v1.py" "$T/w.rfck" || fail "cannot rewrite the run state as version 1"
"$RF" $args --order windowed --checkpoint "$T/w.rfck" --resume >/dev/null 2>"$T/err" ||
	fail "a version-1 file (no --order field) did not resume with --order windowed: $(cat "$T/err")"

# numbers whose CRCs hold but which no run reaches: a step of 2^60 (it wrapped the
# step count, and with it --max-steps), an --init kind of 2^64 - 1 (it loaded as none
# of the documented ones), a run state of 7 bytes (it loaded as version 1 with every
# field missing): refused by name
patch() { # patch FILE WHAT: set WHAT (step, init) absurd, header CRC and trailer anew
	python3 - "$1" "$2" <<'EOF'
import struct, sys, zlib
p, what = sys.argv[1], sys.argv[2]
d = bytearray(open(p, "rb").read())
n = struct.unpack_from("<I", d, 24)[0]
if what == "step":
    struct.pack_into("<Q", d, 80, 1 << 60)
elif what == "len":     # a run state of 7 bytes: no version-2 header, no whole field
    struct.pack_into("<I", d, 104, 7)
else:                   # run state v2: "RFRS", u16 version, u16 count, (tag, len, value)
    count, o = struct.unpack_from("<H", d, 118)[0], 120
    for _ in range(count):
        tag, ln = struct.unpack_from("<HH", d, o)
        if tag == 3:    # RF__RS_INIT
            struct.pack_into("<Q", d, o + 4, (1 << 64) - 1)
        o += 4 + ln
hend = 384 + 128 * n
struct.pack_into("<I", d, hend, zlib.crc32(bytes(d[:hend])))
t = len(d) - 32
struct.pack_into("<I", d, t + 16, zlib.crc32(bytes(d[:hend])))
struct.pack_into("<I", d, t + 28, zlib.crc32(bytes(d[t:t + 28])))
open(p, "wb").write(d)
EOF
}
for w in "step:step 1152921504606846976" "init:the --init kind 18446744073709551615" \
	 "len:run state of 7 bytes"; do
	"$RF" $args --checkpoint "$T/z.rfck" --max-steps 5 >/dev/null 2>"$T/err" ||
		fail "a run to patch: $(cat "$T/err")"
	patch "$T/z.rfck" "${w%%:*}" || fail "cannot patch the checkpoint's ${w%%:*}"
	"$RF" $args --checkpoint "$T/z.rfck" --resume >/dev/null 2>"$T/err" &&
		fail "a checkpoint with an absurd ${w%%:*} resumed"
	grep -qF -- "${w#*:}" "$T/err" || fail "absurd ${w%%:*}: refused without naming it: $(cat "$T/err")"
done

# the checked-in version-1 file of another machine: it resumes and is rewritten
cp "$FIX" "$T/c.rfck"
"$RF" $args --checkpoint "$T/c.rfck" --resume --json >"$T/f.json" 2>"$T/err" ||
	fail "resuming the checked-in version-1 file: $(cat "$T/err")"
grep -q '"epochs_run": 1' "$T/f.json" || fail "the checked-in file did not resume inside epoch 2: $(cat "$T/f.json")"
is_v2 "$T/c.rfck" || fail "the checked-in file was not rewritten as run state version 3"
# a different setting is still refused by name from a version-1 file
cp "$FIX" "$T/c.rfck"
"$RF" $(echo $args | sed 's/--augment//') --checkpoint "$T/c.rfck" --resume >/dev/null 2>"$T/err" &&
	fail "a version-1 file with --augment resumed without it"
grep -q -- "--augment" "$T/err" || fail "refusal without naming --augment: $(cat "$T/err")"
echo "ok: version-1 checkpoints resume (this machine's to $WANT, as uninterrupted) and are rewritten as version 3; their --augment is still checked"
