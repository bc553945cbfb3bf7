#!/bin/sh
# test-limits: the tools under a process's resource limits. Past RLIMIT_FSIZE a write
# killed rf-train and rf-pack by SIGXFSZ -- exit 153, no word, a partial --metrics file
# and temporary files left (model.json.tmp, the trace's, the .rfrec's): every output
# now fails with one line naming it and "File too large", exit 1, no temporary left.
# Under RLIMIT_AS, rf-train (linked with jemalloc) crashed now and then (jemalloc 5.3,
# a new thread's arena unmapped: issue 2289): it runs again with one arena and says
# which tensor or loader buffer did not fit, exit 1, every time (or fits, exit 0, with
# glibc's malloc). Not under a sanitizer (its shadow memory needs the address space),
# where that part skips. And a ring refused for RLIMIT_MEMLOCK names the limit, and a
# thread refused under RLIMIT_NPROC says so too.
# Usage: test-limits.sh RF-TRAIN RF-PACK
set -u
TRAIN=$1 PACK=$2
command -v prlimit >/dev/null || { echo "SKIP: no prlimit (util-linux)"; exit 77; }
D=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect EXIT TEXT CMD...: the exit status, one stderr line holding TEXT
expect() {
	want=$1 text=$2; shift 2
	# through a pipe: a file for stderr would itself be cut at the size limit
	err=$("$@" 2>&1 >/dev/null); rc=$?
	[ "$rc" = "$want" ] || fail "$*: exit $rc, want $want: $err"
	case $err in *"$text"*) ;; *) fail "$*: stderr lacks '$text': $err" ;; esac
}
small="--limit 256 --test-limit 256 --epochs 1 --quiet"
expect 1 "--metrics m.csv: cannot write: File too large" \
	prlimit --fsize=50 "$TRAIN" --model mlp $small --metrics m.csv
expect 1 "File too large" prlimit --fsize=10000 "$TRAIN" --model mlp $small --trace tr.json
expect 1 "File too large" prlimit --fsize=1000 "$TRAIN" --model mlp $small --export exp
expect 1 "File too large" prlimit --fsize=1000000 "$PACK" --images "$D/t10k-images-idx3-ubyte.gz" \
	--labels "$D/t10k-labels-idx1-ubyte.gz" -o p.rfrec
left=$(ls -A . exp 2>/dev/null | grep -E '\.tmp' || true)
[ -z "$left" ] || fail "temporary files left: $left"
[ -e p.rfrec ] && fail "p.rfrec written in part"
# a ring's memory counts against RLIMIT_MEMLOCK for a user without CAP_IPC_LOCK: the
# refusal says so (it said "Cannot allocate memory" alone). As nobody, where nobody can
# run the program from here.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	out=$(prlimit --memlock=0 setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$TRAIN" --model mlp $small 2>&1 >/dev/null)
	case $out in
	*io_uring_setup*)
		case $out in *RLIMIT_MEMLOCK*) ;; *) fail "memlock 0: $out" ;; esac ;;
	*) echo "RLIMIT_MEMLOCK: skipped (nobody cannot run $TRAIN here: $out)" ;;
	esac
	# no thread to start: the stream that wanted one, and the limit
	out=$(prlimit --nproc=3 setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$TRAIN" --model mlp $small 2>&1 >/dev/null)
	case $out in
	*"cannot start"*)
		case $out in *"ulimit -u"*) ;; *) fail "nproc 3: $out" ;; esac ;;
	*) echo "RLIMIT_NPROC: skipped (nobody cannot run $TRAIN here: $out)" ;;
	esac
fi
n=4
case "$(ldd "$TRAIN")" in
*libasan*|*libtsan*) echo "RLIMIT_AS: skipped (a sanitizer's shadow memory)"; n=0 ;;
esac
i=0
while [ $i -lt $n ]; do
	# glibc's malloc (a build without jemalloc) fits the run in the limit, exit 0, or
	# not, where the allocation that failed may be the loader's: each says what it was
	# (a bare "loader: Cannot allocate memory" came from 8 places until 2026-12-01)
	err=$(prlimit --as=268435456 "$TRAIN" --model lenet $small 2>&1 >/dev/null); rc=$?
	case $rc:$err in
	0:*|1:*"out of cpu:0 memory"*|1:*"loader: no memory for "*|1:*"loader: cannot map "*) ;;
	*) fail "RLIMIT_AS 256 MiB: exit $rc (139: a crash; 1: a message that does not say what did not fit): $err" ;;
	esac
	i=$((i + 1))
done
[ $fails = 0 ] || exit 1
echo "limits: outputs past RLIMIT_FSIZE said and cleaned up; RLIMIT_AS said ($n runs)"
