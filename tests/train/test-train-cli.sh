#!/bin/sh
# test-train-cli: the rf-train command line. Bad arguments give one line naming the
# argument and exit 2; a missing dataset gives the apt-get line and exit 1; --device
# cuda without a usable GPU gives one line and exit 1 (checked only where no GPU is
# usable); a short real run writes the --json object (with final_test_acc,
# epoch_seconds, samples_per_s ...), the --metrics CSV, a checkpoint and a Chrome
# trace; --resume continues after the saved epoch and appends to the CSV; a corrupt
# checkpoint is refused with exit 1; a run that diverges (NaN loss) stops with exit 1,
# its checkpoint never overwritten with NaN weights. The asynchrony options (--window, --barrier-every,
# --max-inflight, --stats) parse and reject bad values, and change timing only: a run
# with a barrier every batch, one with no window and no engine cap, and one with a
# window of 1, a tiny cap and a barrier every 3 batches all write byte-for-byte the
# checkpoint of the default run (and the same --json losses); --stats shows how far
# each ran ahead. Also: a non-finite loss is null in --json; param_hash is reported
# when nothing was trained; a full stdout or --metrics file system is an error (exit
# 1); a failed evaluation names its own epoch; SIGTERM/SIGHUP during checkpoints
# leave no CKPT.tmp. Skips (77) without Fashion-MNIST.
# usage: test-train-cli.sh path/to/rf-train
RF=${1:?usage: $0 rf-train}
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-train-cli.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# expect CODE [--] PATTERN args...: exit status CODE, exactly one stderr line matching
# PATTERN (the optional -- lets PATTERN start with a dash; it is not the pattern)
expect() {
	code=$1; shift
	[ "$1" = "--" ] && shift
	pat=$1; shift
	"$RF" "$@" >"$T/out" 2>"$T/err"; rc=$?
	[ "$rc" = "$code" ] || fail "rf-train $*: exit $rc, want $code; stderr: $(cat "$T/err")"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "rf-train $*: want one stderr line, got: $(cat "$T/err")"
	grep -q -- "$pat" "$T/err" || fail "rf-train $*: stderr lacks '$pat': $(cat "$T/err")"
	echo "ok: rf-train $* -> $rc: $(cat "$T/err")"
}

expect 2 -- "--model" --model resnet
expect 2 -- "--epochs" --epochs many
expect 2 -- "--epochs" --epochs
expect 2 -- "--batch-size" --batch-size 0
expect 2 -- "--lr" --lr -1
expect 2 -- "--device" --device tpu
expect 2 -- "--devices" --devices 0
expect 2 -- "--bogus" --bogus
expect 2 -- "--resume" --resume
expect 2 -- "stray" --model mlp stray
expect 2 -- "--window" --window -1
expect 2 -- "--window" --window two
expect 2 -- "--window" --window 65537
expect 2 -- "--window" --window
expect 2 -- "--barrier-every" --barrier-every -3
expect 2 -- "--barrier-every" --barrier-every 1x
expect 2 -- "--barrier-every" --barrier-every 4294967296
expect 2 -- "--max-inflight" --max-inflight lots
expect 2 -- "--max-inflight" --max-inflight -1
expect 2 -- "--max-inflight" --max-inflight ""
expect 2 -- "--stats: takes no value" --stats=1
expect 2 -- "--max-inflight: needs a value" --max-inflight
# a path that is not there is named as such (it said "...gz is missing; apt-get install
# dataset-fashion-mnist", of a typo); a directory without the files says how to get them
expect 1 -- "--data $T/nowhere: No such file or directory" --data "$T/nowhere"
mkdir -p "$T/empty"
expect 1 "$T/empty/train-images-idx3-ubyte.gz is missing; install it with: apt-get install dataset-fashion-mnist" --data "$T/empty"
# a path longer than the trainer keeps is refused, not cut short (it could name another)
long=$(printf '%04100d' 0 | tr 0 a)
expect 1 -- "--data: a path of [0-9]* bytes, expected fewer than 4096" --data "$T/$long"
"$RF" --help | grep -q -- "--devices K" || fail "--help"
for o in "--window N" "--barrier-every N" "--max-inflight N" "--stats"; do
	"$RF" --help | grep -q -- "$o" || fail "--help lacks $o"
done
# valid values are accepted (the run then fails only for the missing dataset)
expect 1 "apt-get install dataset-fashion-mnist" --data "$T/empty" --window 0 \
	--barrier-every 0 --max-inflight 0 --stats
expect 1 "apt-get install dataset-fashion-mnist" --data "$T/empty" --window 65536 \
	--barrier-every 4294967295 --max-inflight 1

if [ ! -r "$DATA/train-images-idx3-ubyte.gz" ] && [ ! -r "$DATA/train-images-idx3-ubyte" ]; then
	echo "SKIP: Fashion-MNIST not in $DATA (apt-get install dataset-fashion-mnist)"
	exit 77
fi
# CUDA: one clear line and exit 1 when no GPU is usable; a run when there is one
"$RF" --data "$DATA" --device cuda --limit 256 --test-limit 256 --epochs 1 >"$T/out" 2>"$T/err"; rc=$?
if [ $rc -ne 0 ]; then
	[ $rc = 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "CUDA" "$T/err" ||
		fail "--device cuda: exit $rc: $(cat "$T/err")"
	echo "ok: --device cuda -> 1: $(cat "$T/err")"
else
	echo "ok: --device cuda ran: $(tail -1 "$T/out")"
	# ResNet-18 on the GPU (cuDNN: convolutions, batch norm, pooling) in fp32 and NCHW:
	# the loss of one short epoch agrees with the CPU's to float tolerance; in tf32
	# and NHWC (the defaults) and in bf16 to their rounding
	R="--data $DATA --model resnet18 --limit 64 --batch-size 16 --epochs 1 --no-eval --quiet --json"
	"$RF" $R --device cuda --precision fp32 --layout nchw >"$T/rg" 2>"$T/err" ||
		fail "resnet18 on cuda: $(tail -2 "$T/err")"
	for p in "--precision tf32" "--precision bf16"; do
		"$RF" $R --device cuda $p >"$T/rt" 2>"$T/err" || fail "resnet18 on cuda $p: $(tail -2 "$T/err")"
		lt=$(sed -n 's/.*"final_train_loss": \([^,]*\).*/\1/p' "$T/rt")
		lf=$(sed -n 's/.*"final_train_loss": \([^,]*\).*/\1/p' "$T/rg")
		awk -v a="$lt" -v b="$lf" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 0.05 * (b < 0 ? -b : b)) }' ||
			fail "resnet18 on cuda $p: loss $lt, fp32 $lf"
		echo "ok: resnet18 on cuda $p: loss $lt (fp32 $lf): $(grep -o '"layout": "[a-z]*"' "$T/rt")"
	done
	"$RF" $R >"$T/rc" 2>"$T/err" || fail "resnet18 on cpu: $(tail -2 "$T/err")"
	lg=$(sed -n 's/.*"final_train_loss": \([^,]*\).*/\1/p' "$T/rg")
	lc=$(sed -n 's/.*"final_train_loss": \([^,]*\).*/\1/p' "$T/rc")
	awk -v a="$lg" -v b="$lc" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-3 * (b < 0 ? -b : b) + 1e-4) }' ||
		fail "resnet18: loss on cuda $lg, on cpu $lc"
	echo "ok: resnet18 on cuda (cuDNN): loss $lg, cpu $lc"
fi

run() { "$RF" --data "$DATA" --model mlp --limit 1024 --test-limit 512 --seed 3 "$@"; }
run --epochs 2 --json --metrics "$T/m.csv" --checkpoint "$T/c.ckpt" --trace "$T/t.json" \
	>"$T/j" 2>"$T/log" || fail "run: $(cat "$T/log")"
for k in '"final_test_acc"' '"epoch_seconds": \[' '"samples_per_s"' '"model": "mlp"' \
	 '"device": "cpu"' '"devices": 1' '"epochs": 2' '"batch_size": 256' '"lr": 0.1' \
	 '"final_train_loss"' '"final_train_acc"'; do
	grep -q "$k" "$T/j" || fail "--json lacks $k: $(cat "$T/j")"
done
[ "$(wc -l <"$T/j")" -eq 1 ] || fail "--json: stdout is not one line"
if command -v python3 >/dev/null; then
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['epoch_seconds'])==2 and 0<=d['final_test_acc']<=1" "$T/j" || fail "--json does not parse"
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['traceEvents']" "$T/t.json" || fail "--trace does not parse"
fi
head -1 "$T/m.csv" | grep -qx "epoch,train_loss,train_acc,test_acc,seconds,samples_per_s" || fail "csv header: $(head -1 "$T/m.csv")"
[ "$(wc -l <"$T/m.csv")" -eq 3 ] || fail "csv rows: $(cat "$T/m.csv")"
grep -q "^2," "$T/m.csv" || fail "csv epoch 2"
if command -v python3 >/dev/null; then # not evaluated: null, not -1
	run --epochs 1 --no-eval --json --quiet 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); assert d['final_test_acc'] is None and d['final_test_loss'] is None" ||
		fail "--no-eval --json: final_test_acc is not null"
fi
echo "ok: --json, --metrics, --checkpoint, --trace"

run --epochs 3 --resume --metrics "$T/m.csv" --checkpoint "$T/c.ckpt" >"$T/out" 2>"$T/err" ||
	fail "resume: $(cat "$T/err")"
grep -q "resumed from .* after epoch 2" "$T/out" || fail "resume message: $(cat "$T/out")"
grep -q "^epoch 3/3" "$T/out" || fail "resume epoch 3: $(cat "$T/out")"
[ "$(wc -l <"$T/m.csv")" -eq 4 ] && grep -q "^3," "$T/m.csv" || fail "resume csv: $(cat "$T/m.csv")"
echo "ok: --resume continues at epoch 3"

head -c 1000 "$T/c.ckpt" >"$T/bad.ckpt"
run --epochs 4 --resume --checkpoint "$T/bad.ckpt" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "bad.ckpt" "$T/err" || fail "truncated checkpoint: exit $rc: $(cat "$T/err")"
echo "ok: truncated checkpoint refused: $(cat "$T/err")"
"$RF" --data "$DATA" --model lenet --limit 256 --epochs 1 --resume --checkpoint "$T/c.ckpt" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "model" "$T/err" || fail "lenet from an mlp checkpoint: exit $rc: $(cat "$T/err")"
echo "ok: other model refused: $(cat "$T/err")"
# One output named by two options: the export's files against the checkpoint and the
# CSV (the export overwrote the checkpoint, exit 0; its --resume then failed).
mkdir -p "$T/exp" || fail mkdir
expect 1 "the same file as --checkpoint writes" --data "$DATA" --limit 256 --epochs 1 \
	--export "$T/exp" --checkpoint "$T/exp/params.rfck"
expect 1 "the same file as --metrics writes" --data "$DATA" --limit 256 --epochs 1 \
	--export "$T/exp" --metrics "$T/exp/model.json"
# RF_TRACE (read by the engine) at a FIFO is refused at once, naming it (it hung at
# the end of the run); a device (/dev/full: the run trained, then failed writing the
# trace) or a path whose directory is missing too, before anything runs, as --trace
# is; with --trace too, the message says RF_TRACE is already tracing.
mkfifo "$T/trace.fifo" || fail mkfifo
RF_TRACE="$T/trace.fifo" timeout 60 "$RF" --data "$DATA" --limit 256 --epochs 1 --quiet \
	>/dev/null 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "RF_TRACE .*trace.fifo: is a FIFO" "$T/err" ||
	fail "RF_TRACE at a FIFO: exit $rc: $(cat "$T/err")"
for rt in /dev/full /dev/null "$T/no-such-dir/t.json" "$T"; do
	RF_TRACE=$rt "$RF" --data "$DATA" --limit 256 --epochs 1 --quiet >"$T/out" \
		2>"$T/err"; rc=$?
	[ $rc = 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && [ ! -s "$T/out" ] &&
		grep -q "^rf-train: RF_TRACE $rt: " "$T/err" ||
		fail "RF_TRACE=$rt: exit $rc, expected a refusal before the run: $(cat "$T/err" "$T/out")"
	echo "ok: RF_TRACE=$rt refused before the run: $(cat "$T/err")"
done
RF_TRACE="$T/rt.json" "$RF" --data "$DATA" --limit 256 --epochs 1 --quiet --trace "$T/t2.json" \
	>/dev/null 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "already tracing to .*rt.json (RF_TRACE set?)" "$T/err" ||
	fail "RF_TRACE with --trace: exit $rc: $(cat "$T/err")"
# Outputs whose checks passed while the write could not work (as root, access()
# allows /proc): the checkpoint failed after epoch 1 ("cannot create
# /proc/version.tmp"). Each output's first write is tried before the run: PATH.tmp
# beside the checkpoint, the export's directory and its NAME.tmp files, the CSV and
# the trace; every probe is removed again.
if [ -d /proc/sys ]; then
	expect 1 "^rf-train: --checkpoint /proc/version" --data "$DATA" --limit 256 --epochs 1 \
		--checkpoint /proc/version
	expect 1 "^rf-train: --checkpoint /proc/new.ck" --data "$DATA" --limit 256 --epochs 1 \
		--checkpoint /proc/new.ck
	expect 1 "^rf-train: --export /proc/new-export" --data "$DATA" --limit 256 --epochs 1 \
		--export /proc/new-export
	expect 1 "^rf-train: --export /proc/sys" --data "$DATA" --limit 256 --epochs 1 \
		--export /proc/sys
	expect 1 "^rf-train: --metrics /proc/new.csv" --data "$DATA" --limit 256 --epochs 1 \
		--metrics /proc/new.csv
	expect 1 "^rf-train: --trace /proc/new.json" --data "$DATA" --limit 256 --epochs 1 \
		--trace /proc/new.json
fi
# the probes leave nothing: a run refused after them (RF_TRACE the checkpoint's file)
# has created no checkpoint, CKPT.tmp, export directory, CSV or trace
RF_TRACE="$T/p.ck" "$RF" --data "$DATA" --limit 256 --epochs 1 --checkpoint "$T/p.ck" \
	--export "$T/p-exp" --metrics "$T/p.csv" --trace "$T/p.json" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "RF_TRACE .*the same file as --checkpoint" "$T/err" ||
	fail "RF_TRACE at the checkpoint: exit $rc: $(cat "$T/err")"
for f in p.ck p.ck.tmp p-exp p.csv p.json; do
	[ ! -e "$T/$f" ] || fail "a refused run left $T/$f"
done
echo "ok: RF_TRACE at a FIFO, on a full disk, beside --trace"
# A run that diverges (lr 1e6: the loss is NaN in the first epoch) stops with exit 1
# and one line saying so; its checkpoint keeps the last good state byte for byte, at
# an epoch's end and inside one (--checkpoint-every), and without --checkpoint too.
cp "$T/c.ckpt" "$T/keep.ckpt" || fail cp
for every in 0 2; do
	ev=; [ $every = 0 ] || ev="--checkpoint-every $every"
	cp "$T/keep.ckpt" "$T/div.ckpt" || fail cp
	"$RF" --data "$DATA" --limit 2048 --test-limit 256 --epochs 2 --lr 1e6 --quiet \
		--checkpoint "$T/div.ckpt" $ev >"$T/out" 2>"$T/err"; rc=$?
	[ $rc = 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "the run diverged" "$T/err" &&
		grep -q "div.ckpt" "$T/err" ||
		fail "diverged run (--checkpoint-every $every): exit $rc: $(cat "$T/err")"
	if [ $every = 0 ]; then
		cmp -s "$T/keep.ckpt" "$T/div.ckpt" || fail "a diverged run overwrote its checkpoint"
	fi
	# inside the epoch the file holds the last finite batch's state
	[ $every = 0 ] || "$RF" --data "$DATA" --limit 2048 --epochs 3 --lr 1e6 --resume --checkpoint "$T/div.ckpt" \
		--checkpoint-every 2 --quiet --no-eval >/dev/null 2>"$T/err2"
	grep -q "is nan: the run that wrote it diverged" "$T/err2" &&
		fail "a diverged run left NaN weights in its checkpoint: $(cat "$T/err2")"
	echo "ok: diverged run (--checkpoint-every $every) refused: $(cat "$T/err")"
done
"$RF" --data "$DATA" --limit 2048 --test-limit 256 --epochs 3 --lr 1e6 --quiet >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "epoch 1: the training loss is nan: the run diverged" "$T/err" ||
	fail "diverged run without a checkpoint: exit $rc: $(cat "$T/err")"
grep -q "^epoch 2" "$T/out" && fail "a diverged run went on: $(cat "$T/out")"
echo "ok: diverged run stops: $(cat "$T/err")"
# JSON has no NaN: a test loss that overflowed (weights blown up by --lr 1e6 --wd 10 in
# the epoch's last step) is null, and the object parses with a strict reader.
"$RF" --data "$DATA" --limit 768 --test-limit 1000 --epochs 1 --lr 1e6 --wd 10 --quiet --json \
	>"$T/nan.j" 2>"$T/err" || fail "overflowing run: $(cat "$T/err")"
python3 -c 'import json,sys
def no(c): raise ValueError("JSON has no " + c)
d = json.loads(open(sys.argv[1]).read(), parse_constant=no)
assert d["final_test_loss"] is None, d["final_test_loss"]' "$T/nan.j" ||
	fail "--json with a non-finite test loss: $(cat "$T/nan.j")"
echo "ok: a non-finite loss is null in --json"
# param_hash is the weights' even when nothing is trained: --epochs 0, or a resumed run
# already at --epochs, reports the hash of the weights it has (it printed 0 before)
hash() { sed -n 's/.*"param_hash": "\([0-9a-f]*\)".*/\1/p' "$1"; }
run --epochs 1 --json --quiet --checkpoint "$T/h.ckpt" >"$T/h1.j" 2>"$T/err" || fail "h1: $(cat "$T/err")"
run --epochs 1 --json --quiet --checkpoint "$T/h.ckpt" --resume >"$T/h2.j" 2>"$T/err" ||
	fail "h2: $(cat "$T/err")"
run --epochs 0 --json --quiet --no-eval >"$T/h0.j" 2>"$T/err" || fail "h0: $(cat "$T/err")"
[ -n "$(hash "$T/h1.j")" ] && [ "$(hash "$T/h2.j")" = "$(hash "$T/h1.j")" ] ||
	fail "resumed at --epochs: param_hash $(hash "$T/h2.j"), the run's $(hash "$T/h1.j")"
h0=$(hash "$T/h0.j")
[ -n "$h0" ] && [ "$h0" != 0000000000000000 ] && [ "$h0" != "$(hash "$T/h1.j")" ] ||
	fail "--epochs 0: param_hash '$h0'"
echo "ok: param_hash of an untrained ($h0) and a resumed ($(hash "$T/h2.j")) run"
# stdout that cannot be written (a full disk): exit 1 and one line saying so
if [ -w /dev/full ]; then
	run --epochs 1 --json --quiet >/dev/full 2>"$T/err"; rc=$?
	[ $rc = 1 ] && grep -q "^rf-train: stdout: No space left on device" "$T/err" ||
		fail "--json >/dev/full: exit $rc: $(cat "$T/err")"
	echo "ok: --json on a full stdout: $(tail -1 "$T/err")"
fi
# A write error on --metrics (its file system full) ends the run with exit 1 naming
# the file, rather than an empty CSV and exit 0: a tmpfs of one page, filled, in a
# private mount namespace where one can be had.
. "$(dirname "$0")/../private-ns.sh"
mkdir "$T/mnt"
if [ -n "$ns" ] && $ns sh -c 'mount -t tmpfs -o size=4k none "$1"' sh "$T/mnt" 2>/dev/null; then
	$ns sh -c 'mount -t tmpfs -o size=4k none "$1" || exit 99
		head -c 4096 /dev/zero >"$1/fill" 2>/dev/null
		shift
		exec "$@"' sh "$T/mnt" "$RF" --data "$DATA" --limit 512 --test-limit 256 --epochs 1 \
		--quiet --metrics "$T/mnt/m.csv" >"$T/out" 2>"$T/err"; rc=$?
	[ $rc = 99 ] && fail "tmpfs mount failed in $ns"
	[ $rc = 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] &&
		grep -q -- "--metrics $T/mnt/m.csv: cannot write: No space left on device" "$T/err" ||
		fail "--metrics on a full disk: exit $rc: $(cat "$T/err")"
	echo "ok: --metrics on a full disk: $(cat "$T/err")"
else
	echo "note: no private mount namespace (unshare -m / -rm): full-disk --metrics not run"
fi
# A failed evaluation is named by the epoch it followed (it said "epoch 2" in a run
# of one): the training files gzip'd (read into memory), the test set raw (read
# through the ring, where RF_FAULT_INJECT=eio=1 fails every read).
mkdir "$T/ev"
ln -s "$DATA"/train-*-ubyte.gz "$T/ev/" 2>/dev/null || cp "$DATA"/train-* "$T/ev/"
for f in t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
	gzip -dc "$DATA/$f.gz" >"$T/ev/$f" 2>/dev/null || cp "$DATA/$f" "$T/ev/$f"
done
if [ -e "$T/ev/train-images-idx3-ubyte.gz" ]; then
	RF_FAULT_INJECT=eio=1 "$RF" --data "$T/ev" --limit 512 --test-limit 256 --epochs 1 --quiet \
		>"$T/out" 2>"$T/err"; rc=$?
	[ $rc = 1 ] && grep -q "^rf-train: epoch 1: evaluation failed" "$T/err" ||
		fail "a failed evaluation in a 1-epoch run: exit $rc: $(cat "$T/err")"
	echo "ok: a failed evaluation names its epoch: $(cut -c1-60 "$T/err")..."
fi
rm -rf "$T/ev"
# SIGTERM or SIGHUP in a run that checkpoints after every batch (most of its time spent
# in saves): the run ends of the signal, and never leaves CKPT.tmp behind (it did about
# every other time). Each signal is sent once the checkpoint exists, mid-run.
# The last two send it twice at once, as timeout(1) does (child, then its group): a
# repeat within a second is not "the user insists" (that killed mid-save, 4 in 12).
# The run gets the signals' default actions whatever the test's caller set: under
# nohup SIGHUP arrives ignored, and an ignored signal stays ignored (rf-train keeps
# it so, as POSIX programs do) -- this case failed there, exit 0.
dflt() { # dflt SIGS COMMAND...: run COMMAND with SIGS' default actions (a subshell's exec)
	sigs=$1; shift
	if env --default-signal="$sigs" true 2>/dev/null; then
		exec env --default-signal="$sigs" "$@"
	fi
	exec python3 -c 'import os, signal, sys
for s in sys.argv[1].split(","):
    signal.signal(getattr(signal, "SIG" + s), signal.SIG_DFL)
os.execv(sys.argv[2], sys.argv[2:])' "$sigs" "$@"
}
blocked() { # the caller blocked SIGHUP or SIGTERM: no tool can undo that for a child
	m=$(sed -n 's/^SigBlk:[[:space:]]*//p' /proc/$$/status 2>/dev/null)
	[ -n "$m" ] && [ $(( (0x$m >> 0) & 1 || (0x$m >> 14) & 1 )) = 1 ]
}
if blocked; then
	echo "SKIP: SIGHUP or SIGTERM is blocked by the test's caller: the signal cases"
else
for sig in 15 1 15 1 15 1 15x2 1x2; do   # SIGTERM, SIGHUP
	twice=${sig#*x}; sig=${sig%x*}
	rm -f "$T/sig.ckpt" "$T/sig.ckpt.tmp"
	(dflt HUP,TERM "$RF" --data "$DATA" --limit 20000 --batch-size 16 --epochs 5 --no-eval \
		--quiet --checkpoint "$T/sig.ckpt" --checkpoint-every 1 >/dev/null 2>"$T/err") &
	pid=$!
	i=0
	while ! [ -e "$T/sig.ckpt" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
	kill -$sig $pid
	[ "$twice" = 2 ] && kill -$sig $pid 2>/dev/null
	wait $pid; rc=$?
	[ $rc = $((128 + sig)) ] || fail "signal $sig mid-run: exit $rc: $(cat "$T/err")"
	[ -e "$T/sig.ckpt.tmp" ] && fail "signal $sig mid-run left $T/sig.ckpt.tmp"
	[ -s "$T/sig.ckpt" ] || fail "signal $sig mid-run: no checkpoint left"
done
echo "ok: SIGTERM/SIGHUP (once, twice at once) during --checkpoint-every: no CKPT.tmp left"
# and where SIGHUP arrives ignored (nohup), it stays ignored: the run goes on, and a
# SIGTERM then ends it as before
rm -f "$T/sig.ckpt" "$T/sig.ckpt.tmp"
(env --ignore-signal=HUP --default-signal=TERM "$RF" --data "$DATA" --limit 20000 \
	--batch-size 16 --epochs 5 --no-eval --quiet --checkpoint "$T/sig.ckpt" \
	--checkpoint-every 1 >/dev/null 2>"$T/err") &
pid=$!
i=0
while ! [ -e "$T/sig.ckpt" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
kill -1 $pid
sleep 0.5
kill -0 $pid 2>/dev/null || fail "an ignored SIGHUP ended the run: $(cat "$T/err")"
kill -15 $pid
wait $pid; rc=$?
[ $rc = 143 ] && ! [ -e "$T/sig.ckpt.tmp" ] || fail "SIGTERM after an ignored SIGHUP: exit $rc"
echo "ok: a SIGHUP ignored on entry stays ignored (nohup); SIGTERM still ends the run"
fi
# RF_TRACE is an output too: the engine truncates its file when created (a checkpoint
# there was lost before --resume read it)
cp "$T/sig.ckpt" "$T/rt.ckpt" || fail cp
RF_TRACE="$T/rt.ckpt" "$RF" --data "$DATA" --limit 20000 --batch-size 16 --epochs 9 --no-eval \
	--quiet --resume --checkpoint "$T/rt.ckpt" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "RF_TRACE .*the same file as --checkpoint" "$T/err" ||
	fail "RF_TRACE at the checkpoint: exit $rc: $(cat "$T/err")"
cmp -s "$T/sig.ckpt" "$T/rt.ckpt" || fail "RF_TRACE at the checkpoint truncated it"
echo "ok: RF_TRACE at the checkpoint refused, the checkpoint kept"
# Barriers, windows and caps change timing, never results: every configuration writes
# the default run's checkpoint byte for byte (2 epochs: across the epoch boundary too).
async_run() { # name, options...
	n=$1; shift
	run --epochs 2 --limit 4096 --json --stats --quiet --checkpoint "$T/$n.ckpt" "$@" \
		>"$T/$n.j" 2>"$T/$n.log" || fail "run $n ($*): $(cat "$T/$n.log")"
	grep -q "rf-train: engine: .* max in flight" "$T/$n.log" || fail "--stats line ($n): $(cat "$T/$n.log")"
	grep -q '"max_inflight_seen": [0-9]' "$T/$n.j" || fail "--stats json ($n): $(cat "$T/$n.j")"
}
seen() { sed 's/.*"max_inflight_seen": \([0-9]*\).*/\1/' "$T/$1.j"; }
loss() { sed 's/.*\("final_train_loss": [^,]*\).*\("final_test_acc": [^,]*\).*/\1 \2/' "$T/$1.j"; }
async_run base
async_run barrier --barrier-every 1
async_run free --window 0 --max-inflight 0
async_run tight --window 1 --max-inflight 8 --barrier-every 3
async_run wide --window 7 --max-inflight 100000
for n in barrier free tight wide; do
	cmp -s "$T/base.ckpt" "$T/$n.ckpt" || fail "$n: the checkpoint differs from the default run's"
	[ "$(loss $n)" = "$(loss base)" ] || fail "$n: $(loss $n), default run: $(loss base)"
done
# how far each ran ahead: no window and no cap > the default (window 2) > a cap of 8
[ "$(seen free)" -gt "$(seen base)" ] || fail "--window 0 --max-inflight 0 ran no further ahead ($(seen free)) than the default ($(seen base))"
[ "$(seen tight)" -lt "$(seen base)" ] || fail "--max-inflight 8: max in flight $(seen tight) (default run: $(seen base))"
grep -q "cap none), window none, barrier every 0" "$T/free.log" || fail "--stats line: $(cat "$T/free.log")"
echo "ok: --barrier-every/--window/--max-inflight give the default run's checkpoint byte for byte ($(loss base); max in flight: default $(seen base), no window/cap $(seen free), window 1/cap 8 $(seen tight))"
exit 0
