#!/bin/sh
# test-nccl.sh EXE: NCCL collectives on GPU tensors, one rank per GPU (ranks = GPUs;
# on a one-GPU machine a single-rank communicator): first launched by the environment
# (RANK / WORLD_SIZE, the NCCL id through a store directory, no MPI), then under
# mpirun. Exit 77 without a GPU or NCCL, and under TSan (see test-comm.sh); a CPU
# device is refused either way.
set -u
# mpirun forwards stdin to rank 0: from a terminal it would stop (SIGTTIN) under
# timeout; nothing here reads stdin
exec </dev/null
exe=$1
case "$(ldd "$exe")" in *libtsan*) echo "SKIP: under TSan"; exit 77 ;; esac
export LSAN_OPTIONS="suppressions=$(dirname "$0")/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"
export OMPI_MCA_mca_base_component_disable_dlclose=1
n=1
if command -v nvidia-smi >/dev/null; then
	g=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
	[ "$g" -gt 1 ] 2>/dev/null && n=$g
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-nccl.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
pids="" r=0
while [ $r -lt "$n" ]; do
	RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n timeout 200 "$exe" nccl-env "$T/store" &
	pids="$pids $!" r=$((r + 1))
done
rc=0
for p in $pids; do wait "$p"; x=$?; [ $x -ne 0 ] && rc=$x; done
[ $rc -eq 0 ] || exit $rc
"$exe" --has-mpi || { echo "SKIP (the MPI half): ringflow was built without MPI"; exit 0; }
command -v mpirun >/dev/null || { echo "SKIP (the MPI half): no mpirun"; exit 0; }
timeout 200 mpirun --allow-run-as-root --oversubscribe -np "$n" --mca mpi_yield_when_idle 1 \
	--mca btl_vader_single_copy_mechanism none -x LSAN_OPTIONS \
	-x OMPI_MCA_mca_base_component_disable_dlclose -x ASAN_OPTIONS -x UBSAN_OPTIONS \
	"$exe" nccl
