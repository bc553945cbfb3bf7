#!/bin/sh
# test-bench-cli: rf-bench's command line. Every subcommand's --help prints its usage
# on stdout and exits 0 (it was "unknown argument", exit 2); a bad value -- junk,
# trailing junk ("--batch abc" was taken as 0 by atoi), a sign, overflow, one past a
# range (--prefetch 100000 took 9 GB, --batch 16777216k wrapped to 0, --n 99999999999
# failed with no message) -- and an unknown --pattern (it ran nothing and exited 0)
# exit 2 with one stderr line naming the subcommand and the option, nothing on stdout;
# options that would ask for more than half the memory are refused before anything is
# allocated; a result to a full stdout exits 1; a short engine run gives JSON.
# usage: test-bench-cli.sh path/to/rf-bench
EXE=${1:?usage: $0 path/to/rf-bench}
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-bench-cli.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v timeout >/dev/null || { echo "SKIP: no timeout(1)"; exit 77; }
n=0

# bad TEXT args...: exit 2 within 20 s, one stderr line holding TEXT, nothing on stdout
bad() {
	text=$1; shift
	timeout 20 "$EXE" "$@" </dev/null >"$T/out" 2>"$T/err"; rc=$?
	[ $rc = 2 ] || fail "rf-bench $*: exit $rc, want 2; stderr: $(cat "$T/err")"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "rf-bench $*: want one stderr line: $(cat "$T/err")"
	grep -qF -- "$text" "$T/err" || fail "rf-bench $*: stderr lacks '$text': $(cat "$T/err")"
	[ -s "$T/out" ] && fail "rf-bench $*: wrote to stdout: $(head -2 "$T/out")"
	n=$((n + 1))
}

for c in engine async parallel copy gemm threads loader open flops hybridize allreduce cqe; do
	timeout 20 "$EXE" $c --help >"$T/out" 2>"$T/err" ||
		fail "rf-bench $c --help: exit $?: $(cat "$T/err")"
	grep -q "^usage: .*rf-bench $c" "$T/out" || fail "rf-bench $c --help: $(head -2 "$T/out")"
	[ -s "$T/err" ] && fail "rf-bench $c --help wrote to stderr: $(cat "$T/err")"
	bad "rf-bench $c: '--bogus': unknown argument" $c --bogus
done
for v in "" abc 8x " 8" -1 0 99999999999999999999999; do
	bad "rf-bench flops: --batch: got '$v', expected an integer from 1 to 4096" flops --batch "$v"
	bad "rf-bench engine: --n: got '$v', expected an integer from 1 to 10000000" engine --n "$v"
done
bad "rf-bench engine: --pattern: got 'bogus', expected chain" engine --pattern bogus
bad "rf-bench engine: --pattern: got '(nothing)'" engine --pattern
bad "rf-bench engine: --reps needs a value" engine --reps
bad "rf-bench async: --len: got '16777217', expected an integer from 1 to 16777216" async --len 16777217
bad "rf-bench parallel: --n: got '99999999999', expected an integer from 1 to 16384" parallel --cpu --n 99999999999
bad "rf-bench copy: --count: got '9223372036854775807', expected an integer from 1 to 10000" copy --cpu --count 9223372036854775807
bad "rf-bench parallel: --n x --count" parallel --cpu --n 16384 --count 10000
bad "rf-bench gemm: --threads: got '1025'" gemm --threads 1025
bad "rf-bench threads: --reps: got '0'" threads --reps 0
bad "rf-bench loader: --prefetch: got '100000', expected an integer from 1 to 16" loader --prefetch 100000 --fmnist
bad "rf-bench loader: --batch: got '-1'" loader --batch -1 --fmnist
bad "rf-bench loader: --batch: got '16777216k'" loader --batch 16777216k --fmnist
bad "rf-bench loader: --record-size: got '2g'" loader --file /dev/null --record-size 2g
bad "rf-bench loader: --chunk: got '1k'" loader --fmnist --chunk 1k
bad "rf-bench loader: --prefetch x --batch x --record-size" loader --file /dev/null \
	--record-size 1024m --batch 65536 --prefetch 16
bad "rf-bench loader: --read-bytes: got '1k'" loader --fmnist --read-bytes 1k
bad "rf-bench loader: --read-bytes: got '2g'" loader --fmnist --read-bytes 2g
bad "rf-bench hybridize: --device: got 'gpu'" hybridize --device gpu
bad "rf-bench hybridize: --n: got '1.5'" hybridize --n 1.5
bad "rf-bench cqe: --count: got '99'" cqe --count 99
bad "rf-bench open: --repeat: got '1001', expected an integer from 1 to 1000" open --repeat 1001 x
bad "rf-bench open: --repeat: got '0'" open --repeat 0 x
bad "rf-bench open: no PATH" open --repeat 2
bad "rf-bench open: 'b': unknown argument" open a b
bad "rf-bench allreduce: --max-mib: got '0'" allreduce --max-mib 0
# a short run: its JSON parses (and a number too large or small to be one is null)
timeout 60 "$EXE" engine --n 1000 --reps 1 --pattern chain --json >"$T/out" 2>"$T/err" ||
	fail "rf-bench engine --json: $(cat "$T/err")"
python3 -c 'import json,sys
def no(c): raise ValueError("JSON has no " + c)
d = json.loads(open(sys.argv[1]).read(), parse_constant=no)
assert d["pattern"] == "chain" and d["nodes"] == 1000, d' "$T/out" ||
	fail "rf-bench engine --json: $(cat "$T/out")"
# queued holds the DAG's root behind a gate: it refuses to time a run in which any op
# ran at push (the row that stands for oneTBB's same work must queue every op)
timeout 60 "$EXE" engine --n 2000 --reps 1 --pattern queued --json >"$T/out" 2>"$T/err" ||
	fail "rf-bench engine --pattern queued: $(cat "$T/err")"
# the loader's JSON: the reads' bound and what they did, CPU per GB
head -c $((4096 + 64 * 70000)) /dev/urandom >"$T/recs"
timeout 60 "$EXE" loader --file "$T/recs" --record-size 70000 --header 4096 --batch 16 \
	--read-bytes 200k --json >"$T/out" 2>"$T/err" || fail "rf-bench loader --json: $(cat "$T/err")"
python3 -c 'import json,sys
d = json.loads(open(sys.argv[1]).read())
assert d["read_limit"] == 204800 and 1 <= d["max_reads_inflight"] <= 2, d
assert d["max_bytes_inflight"] <= 204800 and d["read_queued"] > 0, d
assert d["cpu_user_s_per_GB"] is None or d["cpu_user_s_per_GB"] >= 0, d
assert d["reads_per_enter"] is None or d["reads_per_enter"] > 0, d' "$T/out" ||
	fail "rf-bench loader --json: $(cat "$T/out")"
# a result or a usage that cannot be written (a full disk): exit 1, saying so
if [ -w /dev/full ]; then
	for a in "engine --help" "engine --n 1000 --reps 1 --pattern chain"; do
		timeout 60 "$EXE" $a >/dev/full 2>"$T/err"; rc=$?
		[ $rc = 1 ] && grep -q "^rf-bench: stdout: No space left on device" "$T/err" ||
			fail "rf-bench $a >/dev/full: exit $rc: $(cat "$T/err")"
	done
fi
echo "ok: rf-bench: $n refusals, each one line; every subcommand's --help; JSON; a full stdout"
