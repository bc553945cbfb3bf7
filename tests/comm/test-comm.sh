#!/bin/sh
# test-comm.sh EXE: the comm test under mpirun: random programs on 2 and 4 ranks (4 on
# a 2-core machine is oversubscribed), the kv-store's distributed mode on 2 and 3, and
# a misordered program that must fail on every rank, never hang.
set -u
# mpirun forwards stdin to rank 0: from a terminal it would stop (SIGTTIN) under
# timeout; nothing here reads stdin
exec </dev/null
exe=$1
supp=$(dirname "$0")/lsan.supp
"$exe" --has-mpi || { echo "SKIP: ringflow was built without MPI"; exit 77; }
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (openmpi-bin)"; exit 77; }
case "$(ldd "$exe")" in
*libtsan*) echo "SKIP: under TSan, Open MPI's own transports report races inside themselves"
	exit 77 ;;
esac
export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0:fast_unwind_on_malloc=0"
# Open MPI unloads its plugins at MPI_Finalize, and a leak report from an unloaded
# module names no library to suppress: keep them loaded.
export OMPI_MCA_mca_base_component_disable_dlclose=1
# Root, more ranks than cores, a container: the flags PLATFORM notes name.
run() {
	np=$1; shift
	timeout 100 mpirun --allow-run-as-root --oversubscribe -np "$np" \
		--mca mpi_yield_when_idle 1 --mca btl_vader_single_copy_mechanism none \
		-x LSAN_OPTIONS -x OMPI_MCA_mca_base_component_disable_dlclose -x ASAN_OPTIONS -x UBSAN_OPTIONS "$exe" "$@"
}
fail=0
for seed in 1 2; do
	run 2 ok "$seed" 40 || { echo "FAIL: 2 ranks, seed $seed"; fail=1; }
done
run 4 ok 3 24 || { echo "FAIL: 4 ranks"; fail=1; }
run 2 kv || { echo "FAIL: kv-store, 2 ranks"; fail=1; }
run 3 kv || { echo "FAIL: kv-store, 3 ranks"; fail=1; }
run 2 span || { echo "FAIL: span and host collectives, 2 ranks"; fail=1; }
run 3 span || { echo "FAIL: span and host collectives, 3 ranks"; fail=1; }
run 2 misorder 1 || { echo "FAIL: the misordered program was not refused on every rank"; fail=1; }
exit $fail
