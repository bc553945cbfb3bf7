#!/bin/sh
# test-nccl.sh EXE: NCCL collectives on GPU tensors under mpirun: one rank per GPU
# (ranks = GPUs; on a one-GPU machine a single-rank communicator). Exit 77 without a
# GPU or NCCL, and under TSan (see test-comm.sh); a CPU device is refused either way.
set -u
exe=$1
"$exe" --has-mpi || { echo "SKIP: ringflow was built without MPI"; exit 77; }
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (openmpi-bin)"; exit 77; }
case "$(ldd "$exe")" in *libtsan*) echo "SKIP: under TSan"; exit 77 ;; esac
export LSAN_OPTIONS="suppressions=$(dirname "$0")/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"
export OMPI_MCA_mca_base_component_disable_dlclose=1
n=1
if command -v nvidia-smi >/dev/null; then
	g=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
	[ "$g" -gt 1 ] 2>/dev/null && n=$g
fi
timeout 200 mpirun --allow-run-as-root --oversubscribe -np "$n" --mca mpi_yield_when_idle 1 \
	--mca btl_vader_single_copy_mechanism none -x LSAN_OPTIONS \
	-x OMPI_MCA_mca_base_component_disable_dlclose -x ASAN_OPTIONS -x UBSAN_OPTIONS \
	"$exe" nccl
