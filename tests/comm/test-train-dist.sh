#!/bin/sh
# test-train-dist.sh RF_TRAIN RF_DIST_RUN: rf-train --dist mpi under mpirun.
#  - P = 2 processes give bitwise the weights of --devices 2 in one process (the sum of
#    two gradients is a+b either way): the MLP with an uneven last batch, one whose
#    last batch leaves rank 0 empty, LeNet, and with all layers in one bucket;
#  - P = 4 (oversubscribed on 2 cores) matches --devices 4 within a stated tolerance
#    (the sums associate differently): |loss difference| < 1e-4, accuracy within 0.002;
#  - every epoch checks the replicas bitwise equal across ranks (a parameter hash,
#    allreduced as min and max; a mismatch fails the run);
#  - faults: a rank killed mid-epoch ends the job non-zero within 30 s naming the
#    rank; a stalled rank trips --dist-timeout; a failed collective is named; and
#    rf-dist-run resumes a killed job to the uninterrupted run's weights, from an
#    epoch's end and (--checkpoint-every) from inside an epoch; ResNet-18 stopped by
#    --max-steps inside an epoch resumes to the straight run's checkpoint;
#  - ranks given different settings (epochs, limits, evaluation, augmentation, model,
#    device kind, resuming or not, resuming from different places) stop before
#    training, exit 2, with one line naming what differs.
# Skips (77) without MPI, mpirun or Fashion-MNIST, and under TSan (see test-comm.sh).
set -u
# mpirun forwards stdin to rank 0: from a terminal it would stop (SIGTTIN) under
# timeout; nothing here reads stdin
exec </dev/null
RF=${1:?usage: $0 rf-train rf-dist-run}
DR=${2:?usage: $0 rf-train rf-dist-run}
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
supp=$(dirname "$0")/lsan.supp
ldd "$RF" | grep -q libmpi || { echo "SKIP: ringflow was built without MPI"; exit 77; }
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (openmpi-bin)"; exit 77; }
[ -e "$DATA/train-images-idx3-ubyte" ] || [ -e "$DATA/train-images-idx3-ubyte.gz" ] ||
	{ echo "SKIP: no Fashion-MNIST in $DATA"; exit 77; }
case "$(ldd "$RF")" in
*libtsan*) echo "SKIP: under TSan, Open MPI's own transports report races inside themselves"
	exit 77 ;;
esac
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-train-dist.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0:fast_unwind_on_malloc=0"
export OMPI_MCA_mca_base_component_disable_dlclose=1
export RF_DIST_CHECK=1
fail() { echo "FAIL: $*"; exit 1; }
MPI="mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1 \
--mca btl_vader_single_copy_mechanism none -x LSAN_OPTIONS -x RF_DIST_CHECK \
-x OMPI_MCA_mca_base_component_disable_dlclose -x ASAN_OPTIONS -x UBSAN_OPTIONS"
# field NAME FILE: a number or string of the --json object
field() { sed -n "s/.*\"$1\": \"\{0,1\}\([^\",}]*\).*/\1/p" "$2"; }

# dist NP OUT ARGS...: mpirun -np NP rf-train --dist mpi ARGS, --json to OUT
dist() {
	np=$1 out=$2; shift 2
	timeout 200 $MPI -np "$np" "$RF" --dist mpi --data "$DATA" --quiet --json "$@" \
		>"$out" 2>"$out.err" || fail "mpirun -np $np rf-train --dist mpi $*: $(tail -5 "$out.err")"
}
local_run() {
	out=$1; shift
	timeout 200 "$RF" --data "$DATA" --quiet --json "$@" >"$out" 2>"$out.err" ||
		fail "rf-train $*: $(tail -5 "$out.err")"
}
# same_weights WHAT A B: the two runs' parameter hashes are equal (and not empty)
same_weights() {
	ha=$(field param_hash "$2") hb=$(field param_hash "$3")
	[ -n "$ha" ] && [ "$ha" = "$hb" ] || fail "$1: parameter hashes differ: $ha vs $hb"
	echo "ok: $1: bitwise the same weights ($ha)"
}

# --- P = 2 vs --devices 2, bitwise ---
A="--limit 3001 --test-limit 1001 --epochs 2"      # last batch 185: shards 92 / 93
dist 2 "$T/p2" $A
local_run "$T/k2" --devices 2 $A
same_weights "mlp, 2 processes vs --devices 2" "$T/p2" "$T/k2"
[ "$(field final_test_acc "$T/p2")" = "$(field final_test_acc "$T/k2")" ] ||
	fail "test accuracy differs: $(field final_test_acc "$T/p2") vs $(field final_test_acc "$T/k2")"
[ "$(field world_size "$T/p2")" = 2 ] || fail "--json world_size: $(field world_size "$T/p2"), want 2"
dist 2 "$T/p2b" --bucket-kb 100000 $A
same_weights "mlp, one bucket for all layers" "$T/p2b" "$T/k2"

B="--limit 2049 --epochs 1 --no-eval"              # last batch 1 record: rank 0 empty
dist 2 "$T/p2e" $B
local_run "$T/k2e" --devices 2 $B
same_weights "mlp, a last batch that leaves rank 0 without records" "$T/p2e" "$T/k2e"

L="--model lenet --limit 1001 --test-limit 300 --epochs 1"
dist 2 "$T/p2l" $L
local_run "$T/k2l" --devices 2 $L
same_weights "lenet, 2 processes vs --devices 2" "$T/p2l" "$T/k2l"

# --- P = 4 vs --devices 4, within a tolerance ---
C="--limit 3001 --test-limit 1001 --epochs 2"
dist 4 "$T/p4" $C
local_run "$T/k4" --devices 4 $C
awk -v a="$(field final_train_loss "$T/p4")" -v b="$(field final_train_loss "$T/k4")" \
    -v x="$(field final_test_acc "$T/p4")" -v y="$(field final_test_acc "$T/k4")" \
    'BEGIN { d = a - b; e = x - y; exit !(a != "" && d < 1e-4 && d > -1e-4 && e <= 0.002 && e >= -0.002) }' ||
	fail "4 processes vs --devices 4: loss $(field final_train_loss "$T/p4") vs $(field final_train_loss "$T/k4"), acc $(field final_test_acc "$T/p4") vs $(field final_test_acc "$T/k4")"
echo "ok: 4 processes vs --devices 4 within tolerance (loss $(field final_train_loss "$T/p4") vs $(field final_train_loss "$T/k4"))"

# --- faults ---
F="--limit 3000 --test-limit 1000 --epochs 3"      # 12 batches, 2 collectives each, 3 per epoch end
# fault RC_WANT PATTERN ENV: the run ends with a non-zero status within 30 s, PATTERN in its output
fault() {
	pat=$1 env=$2; shift 2
	s=$(date +%s)
	env $env timeout 60 $MPI -x RF_DIST_FAULT -np 2 "$RF" --dist mpi --data "$DATA" --quiet $F "$@" \
		>"$T/f.out" 2>&1; rc=$?
	el=$(( $(date +%s) - s ))
	[ $rc != 0 ] && [ $rc != 124 ] || fail "$env: exit $rc (124: a hang), want a failure: $(tail -5 "$T/f.out")"
	[ $el -le 30 ] || fail "$env: took $el s, want <= 30"
	grep -q -- "$pat" "$T/f.out" || fail "$env: output lacks '$pat': $(tail -8 "$T/f.out")"
	echo "ok: $env $*: exit $rc after $el s, '$pat' said"
}
fault "rank 1" RF_DIST_FAULT=kill:1:30
fault "outstanding for" RF_DIST_FAULT=stall:1:30 --dist-timeout 2
fault "allreduce #31 (key 0, 803840 bytes, rank 1 of 2)" RF_DIST_FAULT=fail:1:31

# --- ranks given different settings: stopped before the first step, together, exit 2,
# naming the setting (they hung, failed steps later, or trained a mix silently) ---
# apart WHAT ARGS0 -- ARGS1: rank 0 with the common arguments and ARGS0, rank 1 with ARGS1
M="--limit 512 --test-limit 256 --batch-size 64 --epochs 1"
apart() {
	want=$1; shift
	a0=""; while [ "$1" != -- ]; do a0="$a0 $1"; shift; done; shift
	timeout 60 $MPI -np 1 "$RF" --dist mpi --data "$DATA" --quiet $M $a0 \
		: -np 1 "$RF" --dist mpi --data "$DATA" --quiet $M "$@" >"$T/a.out" 2>&1; rc=$?
	[ $rc = 2 ] || fail "ranks apart ($a0 vs $*): exit $rc, want 2: $(tail -5 "$T/a.out")"
	grep -q -- "$want" "$T/a.out" || fail "ranks apart ($a0 vs $*): no '$want': $(tail -5 "$T/a.out")"
	[ "$(grep -c "different settings" "$T/a.out")" = 1 ] ||
		fail "ranks apart ($a0 vs $*): one line expected: $(grep "different" "$T/a.out")"
	echo "ok: ranks apart ($a0 vs $*): exit 2, '$want'"
}
apart "epochs 1 to 2" --epochs 2 --
apart "test records (test_limit) 128 to 256" --test-limit 128 --
apart "no_eval 0 to 1" --no-eval --
apart "training records (limit) 500 to 512" -- --limit 500
apart "augment 0 to 1" -- --augment
apart "model differs" --model lenet --
# another device kind: compared before any device is opened (a CUDA rank was in NCCL's
# set-up, the CPU one in the comparison: each waited for the other); without a GPU,
# rank 1 would otherwise fail alone opening it
# (a build without CUDA refuses --device cuda in the option check, before any comparison)
if ! "$RF" --device cuda --data "$DATA" --limit 64 --epochs 1 --quiet 2>&1 |
	grep -q "built without CUDA"; then
	apart "device differs" -- --device cuda
fi
# resuming or not, and resumed from checkpoints of different places (each rank reads
# its own file)
dist 2 "$T/m1" $M --checkpoint "$T/m1.ckpt"
apart "--resume 0 to 1" --checkpoint "$T/m1.ckpt" --epochs 2 \
	-- --checkpoint "$T/m1.ckpt" --resume --epochs 2
cp "$T/m1.ckpt" "$T/m2.ckpt"
dist 2 "$T/m2" $M --checkpoint "$T/m2.ckpt" --resume --epochs 2
apart "epochs done 1 to 2" --checkpoint "$T/m1.ckpt" --resume --epochs 3 \
	-- --checkpoint "$T/m2.ckpt" --resume --epochs 3

# --- resume: a job killed in epoch 2 and rerun by rf-dist-run ends with the weights of
# an uninterrupted run ---
dist 2 "$T/full" $F
RF_DIST_FAULT=kill:1:30 RF_DIST_FAULT_ONCE="$T/once" timeout 200 "$DR" --retries 2 -- \
	$MPI -x RF_DIST_FAULT -x RF_DIST_FAULT_ONCE -np 2 "$RF" --dist mpi --data "$DATA" --quiet \
	--json $F --checkpoint "$T/c.ckpt" >"$T/resumed" 2>"$T/resumed.err" ||
	fail "rf-dist-run: $(tail -5 "$T/resumed.err")"
[ -e "$T/once" ] || fail "the fault was never injected"
grep -q "resuming from" "$T/resumed.err" || fail "rf-dist-run did not resume: $(cat "$T/resumed.err")"
same_weights "killed in epoch 2, resumed by rf-dist-run vs uninterrupted" "$T/resumed" "$T/full"

# --- inside an epoch: with --checkpoint-every 2 the killed job goes on from the last
# batch saved (every rank continues its shard there), not from the epoch's start ---
rm -f "$T/once" "$T/c.ckpt"
RF_DIST_FAULT=kill:1:50 RF_DIST_FAULT_ONCE="$T/once" timeout 200 "$DR" --retries 2 -- \
	$MPI -x RF_DIST_FAULT -x RF_DIST_FAULT_ONCE -np 2 "$RF" --dist mpi --data "$DATA" --quiet \
	--json $F --checkpoint "$T/c.ckpt" --checkpoint-every 2 >"$T/resumed" 2>"$T/resumed.err" ||
	fail "rf-dist-run, --checkpoint-every 2: $(tail -5 "$T/resumed.err")"
[ -e "$T/once" ] || fail "the fault was never injected"
grep -q "resumed from .* in epoch 2 after batch" "$T/resumed.err" ||
	fail "not resumed inside epoch 2: $(grep resum "$T/resumed.err")"
same_weights "killed inside epoch 2, resumed at its last saved batch vs uninterrupted" \
	"$T/resumed" "$T/full"

# --- ResNet-18 (running statistics per process) stopped by --max-steps inside an
# epoch and resumed: the uninterrupted run's checkpoint, byte for byte ---
# (2 steps an epoch: a step of ResNet-18 is mostly its 11 M parameters' fixed costs,
# 45 MB of gradients allreduced, which batch size hardly changes)
R="--model resnet18 --limit 16 --batch-size 8 --epochs 2 --no-eval --lr 0.05"
dist 2 "$T/r1" $R --checkpoint "$T/r-straight.ckpt"
dist 2 "$T/r2" $R --checkpoint "$T/r.ckpt" --max-steps 3
dist 2 "$T/r3" $R --checkpoint "$T/r.ckpt" --resume
cmp "$T/r-straight.ckpt" "$T/r.ckpt" >/dev/null ||
	fail "resnet18, 2 processes: stopped after step 3 and resumed differs from 2 epochs"
echo "ok: resnet18, 2 processes: stopped inside epoch 2 + --resume = 2 epochs, byte for byte"
exit 0
