#!/bin/sh
# test-env-refusals.sh BUILD_DIR: every program built on the library says why it fails
# when the library refuses a malformed environment variable -- never a silent exit 1
# (rf-manifest printed nothing for a bad RF_FAULT_INJECT: it skipped its own message
# on -EBADMSG, "the ring said why", but the library prints nothing and it installed no
# log sink), never just strerror ("Invalid argument" for RF_RING_SPIN_US=x), never a
# hang. Each program that makes a ring runs with minimal arguments under each bad
# value; each must exit non-zero within 20 s with a stderr line naming the variable.
# The programs that make no ring are listed, and run to success under the same
# environment: a program added to the build without being listed here fails the test
# (the list is checked against BUILD_DIR's executables), so none escapes the class.
set -u
B=${1:?usage: $0 build-dir}
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-env.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
mkdir -p "$T/dir"
head -c 65536 /dev/urandom >"$T/f64k"
echo hello >"$T/dir/a.txt"
printf '[j]\nfilename=%s\nrw=read\nbs=4k\n' "$T/f64k" >"$T/j.fio"
have_data=0
[ -e "$DATA/t10k-images-idx3-ubyte.gz" ] && have_data=1
if [ $have_data = 1 ]; then
	"$B/tools/rf-train" --model mlp --limit 256 --test-limit 256 --epochs 1 --quiet \
		--export "$T/ex" >/dev/null 2>"$T/err" || fail "setup export: $(cat "$T/err")"
fi

# "NAME|ARGS": programs that make a ring (ARGS: minimal, would succeed otherwise)
RING="tools/rf-iobench|--file $T/f64k --rw read --bs 4k --qd 1
tools/rf-iobench|--job $T/j.fio
examples/rf-manifest|$T/dir
examples/rf-httpd|--port 0 $T/dir
bench/rf-bench|engine --n 100 --reps 1
bench/rf-bench|async --n 10
bench/rf-bench|hybridize --n 2 --reps 1
bench/rf-bench|parallel --n 64 --reps 1
bench/rf-bench|copy --n 64 --reps 1
bench/rf-bench|gemm --reps 1
bench/rf-bench|threads --reps 1
bench/rf-bench|loader --file $T/f64k --record-size 4096 --batch 4 --epochs 1"
if [ $have_data = 1 ]; then
	RING="$RING
tools/rf-train|--model mlp --limit 256 --test-limit 256 --epochs 1 --quiet
tools/rf-infer|$T/ex --limit 256"
fi
# programs that make no ring (they read files with pread or run no I/O): they succeed
NORING="tools/rf-pack|--help
bench/rf-bench|flops --model mlp --batch 16"
# the executables that must be classified above (rf-bench allreduce needs mpirun, cqe a
# GPU: both are refused first by their own checks, so they are not run here)
for exe in tools/rf-train tools/rf-infer tools/rf-pack tools/rf-iobench examples/rf-manifest \
	examples/rf-httpd bench/rf-bench; do
	[ -x "$B/$exe" ] || continue
	echo "$RING
$NORING" | grep -q "^$exe|" || fail "$exe is built but not classified in this test"
done
for p in "$B"/tools/rf-* "$B"/examples/rf-*; do
	[ -f "$p" ] && [ -x "$p" ] || continue
	case $p in *.p) continue ;; esac
	exe=${p#"$B"/}
	echo "$RING
$NORING" | grep -q "^$exe|" || fail "$exe: a program of the build this test does not know"
done

n=0
for env in "RF_FAULT_INJECT=bogus=1" "RF_FAULT_INJECT=eio=2" "RF_FAULT_INJECT=eio=0.1;short=0.1" \
	"RF_FAULT_INJECT=ops=disk" "RF_RING_SPIN_US=x" "RF_RING_SPIN_US=10001"; do
	var=${env%%=*}
	echo "$RING" | while IFS='|' read -r exe args; do
		[ -x "$B/$exe" ] || continue
		# shellcheck disable=SC2086 # args: words
		env "$env" timeout 20 "$B/$exe" $args </dev/null >"$T/out" 2>"$T/err"
		rc=$?
		[ $rc = 124 ] && fail "$env $exe $args: hung"
		[ $rc != 0 ] || fail "$env $exe $args: exit 0"
		[ -s "$T/err" ] || fail "$env $exe $args: exit $rc with nothing on stderr"
		grep -q "$var" "$T/err" || fail "$env $exe $args: stderr does not name $var: $(cat "$T/err")"
	done || exit 1
	echo "$NORING" | while IFS='|' read -r exe args; do
		[ -x "$B/$exe" ] || continue
		# shellcheck disable=SC2086
		env "$env" timeout 60 "$B/$exe" $args </dev/null >"$T/out" 2>"$T/err" ||
			fail "$env $exe $args (no ring): exit $?: $(cat "$T/err")"
	done || exit 1
	n=$((n + 1))
done
echo "ok: $(echo "$RING" | wc -l) runs that make a ring refuse each of $n bad values, naming it"
