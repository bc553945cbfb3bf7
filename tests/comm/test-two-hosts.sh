#!/bin/sh
# test-two-hosts.sh RF_TRAIN: two "machines" on this one: two network namespaces joined
# by one veth pair (a cable between two hosts: no bridge, so nothing of this machine's
# own network or firewall is crossed), mpirun started on the first host with a hostfile
# naming both addresses and an rsh agent (rsh-netns) that enters the second namespace,
# as ssh would log in; MPI over TCP only (no shared memory between the hosts). The
# training test of comm-train passes across them: the weights are bitwise those of
# --devices 2 in one process. Skips (77) where namespaces cannot be made (not root, no
# ip(8)) or the two cannot reach each other, without MPI or Fashion-MNIST, and under
# TSan.
set -u
# mpirun forwards stdin to rank 0: from a terminal it would stop (SIGTTIN) under
# timeout; nothing here reads stdin
exec </dev/null
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
NET=10.78.0 N1=rfd-10.78.0.1 N2=rfd-10.78.0.2
unmake() { ip netns del "$N1" 2>/dev/null; ip netns del "$N2" 2>/dev/null; }
unmake    # what a killed run may have left
trap 'unmake; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mk() {
	ip netns add "$N1" && ip netns add "$N2" &&
	ip link add eth0 netns "$N1" type veth peer name eth0 netns "$N2" || return 1
	for i in 1 2; do
		ip netns exec "rfd-$NET.$i" ip addr add "$NET.$i/24" dev eth0 &&
		ip netns exec "rfd-$NET.$i" ip link set eth0 up &&
		ip netns exec "rfd-$NET.$i" ip link set lo up || return 1
	done
}
mk 2>"$T/mk.err" || { echo "SKIP: cannot make network namespaces here: $(head -1 "$T/mk.err")"; exit 77; }
# The cable works before MPI is asked to use it: a TCP connection from host 2 to host 1
# (python3 where there is one; mpirun's own failure says less).
if command -v python3 >/dev/null; then
	ip netns exec "$N1" timeout 20 python3 -c '
import socket; s = socket.socket(); s.bind(("'$NET.1'", 0)); s.listen(1)
print(s.getsockname()[1], flush=True); s.settimeout(15); s.accept()' >"$T/port" 2>"$T/listen.err" &
	lp=$!; i=0
	while [ ! -s "$T/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	port=$(cat "$T/port")
	ip netns exec "$N2" timeout 15 python3 -c '
import socket; socket.create_connection(("'$NET.1'", '"${port:-1}"'), timeout=10)' 2>"$T/conn.err"
	c=$?; wait $lp
	[ $c -eq 0 ] || { echo "SKIP: the two namespaces cannot reach each other over TCP: $(tail -1 "$T/conn.err") $(tail -1 "$T/listen.err")"; exit 77; }
fi
# Run a command on host 1, under its own host name as rsh-netns gives host 2 its own.
on1() {
	if unshare --uts true 2>/dev/null; then
		ip netns exec "$N1" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$N1" "$@"
	else
		ip netns exec "$N1" "$@"
	fi
}
printf '%s.1 slots=1\n%s.2 slots=1\n' "$NET" "$NET" >"$T/hosts"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"
export OMPI_MCA_mca_base_component_disable_dlclose=1 RF_DIST_CHECK=1
A="--data $DATA --limit 3001 --test-limit 1001 --epochs 2 --quiet --json"
on1 timeout 200 mpirun --allow-run-as-root --hostfile "$T/hosts" -np 2 \
	--mca plm_rsh_agent "$here/rsh-netns" --mca oob_tcp_if_include "$NET.0/24" \
	--mca btl tcp,self --mca btl_tcp_if_include "$NET.0/24" --mca mpi_yield_when_idle 1 \
	--mca routed direct \
	-x LSAN_OPTIONS -x OMPI_MCA_mca_base_component_disable_dlclose -x RF_DIST_CHECK \
	-x ASAN_OPTIONS -x UBSAN_OPTIONS -x LD_LIBRARY_PATH \
	"$RF" --dist mpi $A >"$T/two" 2>"$T/two.err" || fail "mpirun across two namespaces: $(tail -5 "$T/two.err")"
timeout 200 "$RF" --devices 2 $A >"$T/one" 2>"$T/one.err" || fail "rf-train --devices 2: $(tail -3 "$T/one.err")"
h2=$(sed -n 's/.*"param_hash": "\([0-9a-f]*\)".*/\1/p' "$T/two")
h1=$(sed -n 's/.*"param_hash": "\([0-9a-f]*\)".*/\1/p' "$T/one")
[ -n "$h2" ] && [ "$h2" = "$h1" ] || fail "two hosts vs --devices 2: parameter hashes $h2 vs $h1"
echo "ok: two hosts (namespaces $NET.1, $NET.2, MPI over TCP): bitwise the weights of --devices 2 ($h2)"
