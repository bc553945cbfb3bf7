#!/bin/sh
# test-two-hosts.sh RF_TRAIN: two "machines" on this one: two network namespaces joined
# by a bridge (veth pairs), mpirun with a hostfile naming their addresses and an rsh
# agent (rsh-netns) that enters the namespace, as ssh would log in; MPI over TCP only
# (no shared memory between the hosts). The training test of dist-train passes across
# them: the weights are bitwise those of --devices 2 in one process. Skips (77) where
# namespaces cannot be made (not root, no ip(8), no bridge support), without MPI or
# Fashion-MNIST, and under TSan.
set -u
RF=${1:?usage: $0 rf-train}
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
here=$(cd "$(dirname "$0")" && pwd)
ldd "$RF" | grep -q libmpi || { echo "SKIP: ringflow was built without MPI"; exit 77; }
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (openmpi-bin)"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: no ip(8) (iproute2)"; exit 77; }
[ -e "$DATA/train-images-idx3-ubyte" ] || [ -e "$DATA/train-images-idx3-ubyte.gz" ] ||
	{ echo "SKIP: no Fashion-MNIST in $DATA"; exit 77; }
case "$(ldd "$RF")" in *libtsan*) echo "SKIP: under TSan (see test-comm.sh)"; exit 77 ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-two-hosts.XXXXXX") || exit 1
NET=10.78.0 BR=rfdbr0
unmake() { for i in 1 2; do ip netns del "rfd-$NET.$i" 2>/dev/null; done; ip link del "$BR" 2>/dev/null; }
unmake    # what a killed run may have left
trap 'unmake; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mk() {
	ip link add "$BR" type bridge && ip addr add "$NET.254/24" dev "$BR" && ip link set "$BR" up || return 1
	for i in 1 2; do
		ip netns add "rfd-$NET.$i" &&
		ip link add "rfdv$i" type veth peer name eth0 netns "rfd-$NET.$i" &&
		ip link set "rfdv$i" master "$BR" up &&
		ip netns exec "rfd-$NET.$i" ip addr add "$NET.$i/24" dev eth0 &&
		ip netns exec "rfd-$NET.$i" ip link set eth0 up &&
		ip netns exec "rfd-$NET.$i" ip link set lo up || return 1
	done
}
mk 2>"$T/mk.err" || { echo "SKIP: cannot make network namespaces here: $(head -1 "$T/mk.err")"; exit 77; }
printf '%s.1 slots=1\n%s.2 slots=1\n' "$NET" "$NET" >"$T/hosts"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"
export OMPI_MCA_mca_base_component_disable_dlclose=1 RF_DIST_CHECK=1
A="--data $DATA --limit 3001 --test-limit 1001 --epochs 2 --quiet --json"
timeout 200 mpirun --allow-run-as-root --hostfile "$T/hosts" -np 2 \
	--mca plm_rsh_agent "$here/rsh-netns" --mca oob_tcp_if_include "$NET.0/24" \
	--mca btl tcp,self --mca btl_tcp_if_include "$NET.0/24" --mca mpi_yield_when_idle 1 \
	-x LSAN_OPTIONS -x OMPI_MCA_mca_base_component_disable_dlclose -x RF_DIST_CHECK \
	-x ASAN_OPTIONS -x UBSAN_OPTIONS -x LD_LIBRARY_PATH \
	"$RF" --dist mpi $A >"$T/two" 2>"$T/two.err" || fail "mpirun across two namespaces: $(tail -5 "$T/two.err")"
timeout 200 "$RF" --devices 2 $A >"$T/one" 2>"$T/one.err" || fail "rf-train --devices 2: $(tail -3 "$T/one.err")"
h2=$(sed -n 's/.*"param_hash": "\([0-9a-f]*\)".*/\1/p' "$T/two")
h1=$(sed -n 's/.*"param_hash": "\([0-9a-f]*\)".*/\1/p' "$T/one")
[ -n "$h2" ] && [ "$h2" = "$h1" ] || fail "two hosts vs --devices 2: parameter hashes $h2 vs $h1"
echo "ok: two hosts (namespaces $NET.1, $NET.2, MPI over TCP): bitwise the weights of --devices 2 ($h2)"
