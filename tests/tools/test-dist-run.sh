#!/bin/sh
# test-dist-run RF_DIST_RUN: tools/rf-dist-run's rules on a stand-in job (a shell script
# that counts its runs), no MPI needed: a failing job is run again, with --resume added
# once the checkpoint exists (to every program of an MPMD line), until it succeeds or the retries are spent (the last
# status); status 2 (a bad argument) is not retried; a job ended by SIGINT or SIGTERM
# (130, 143: Ctrl-C, a scheduler's stop) is not run again (each was rerun up to the
# retries); --retries is a count from 0 to 9999; a command without --checkpoint is
# refused. The multi-process resume itself: tests/comm/test-train-dist.sh.
set -u
DR=${1:?usage: $0 rf-dist-run}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# job: appends its arguments to $d/runs, then exits with the status listed for its run
# number in $d/plan (one per line; a signal name ends it by that signal)
cat > "$d/job" <<'JOB'
#!/bin/sh
d=$(dirname "$0")
echo "$*" >> "$d/runs"
n=$(wc -l < "$d/runs")
what=$(sed -n "${n}p" "$d/plan")
case "$what" in
INT|TERM) kill -s "$what" $$; sleep 5; exit 99 ;;
ckpt) : > "$d/c.ckpt"; exit 1 ;;
*) exit "${what:-0}" ;;
esac
JOB
chmod +x "$d/job"
run() { # run PLAN ARGS...: rf-dist-run on the job with PLAN; sets rc and n (runs made)
	printf '%s\n' $1 > "$d/plan"; shift
	rm -f "$d/runs" "$d/c.ckpt"
	rc=0
	timeout 60 "$DR" "$@" > "$d/out" 2> "$d/err" || rc=$?
	n=$(cat "$d/runs" 2>/dev/null | wc -l)
}
run "ckpt 1 0" -- "$d/job" --checkpoint "$d/c.ckpt"
[ $rc = 0 ] && [ $n = 3 ] || fail "fails twice, then succeeds: exit $rc after $n runs: $(cat "$d/err")"
[ "$(sed -n 1p "$d/runs")" = "--checkpoint $d/c.ckpt" ] &&
	[ "$(sed -n 2p "$d/runs")" = "--checkpoint $d/c.ckpt --resume" ] ||
	fail "--resume only once the checkpoint exists: $(cat "$d/runs")"
grep -q "resuming from $d/c.ckpt" "$d/err" || fail "the rerun says it resumes: $(cat "$d/err")"
# an MPMD command line: --resume for every program (it went to the last one only)
run "ckpt 0" -- "$d/job" -np 1 A --checkpoint "$d/c.ckpt" : -np 1 B --checkpoint "$d/c.ckpt"
[ "$(sed -n 2p "$d/runs")" = "-np 1 A --checkpoint $d/c.ckpt --resume : -np 1 B --checkpoint $d/c.ckpt --resume" ] ||
	fail "MPMD: --resume for each program: $(sed -n 2p "$d/runs")"
run "1 1 1 1" --retries 2 -- "$d/job" --checkpoint "$d/c.ckpt"
[ $rc = 1 ] && [ $n = 3 ] || fail "--retries 2: exit $rc after $n runs (want 1 after 3)"
grep -q "giving up after 3 runs" "$d/err" || fail "gives up: $(cat "$d/err")"
run "1 0" --retries=0 -- "$d/job" --checkpoint "$d/c.ckpt"
[ $rc = 1 ] && [ $n = 1 ] || fail "--retries=0: exit $rc after $n runs"
run "2 0" -- "$d/job" --checkpoint "$d/c.ckpt"
[ $rc = 2 ] && [ $n = 1 ] || fail "status 2 is not retried: exit $rc after $n runs"
for sig in INT:130 TERM:143; do
	run "${sig%:*} 0" -- "$d/job" --checkpoint "$d/c.ckpt"
	[ $rc = "${sig#*:}" ] && [ $n = 1 ] ||
		fail "a job ended by SIG${sig%:*}: exit $rc after $n runs (want ${sig#*:} after 1)"
	grep -q "stopped by a signal" "$d/err" || fail "SIG${sig%:*}: says why: $(cat "$d/err")"
done
for v in x -1 "" 10000 99999999999999999999 " 1"; do
	run "0" --retries "$v" -- "$d/job" --checkpoint "$d/c.ckpt"
	[ $rc = 2 ] && [ $n = 0 ] && grep -q "expected a count from 0 to 9999" "$d/err" ||
		fail "--retries '$v': exit $rc, $n runs: $(cat "$d/err")"
done
run "0" -- "$d/job"
[ $rc = 2 ] && [ $n = 0 ] && grep -q "no --checkpoint" "$d/err" ||
	fail "no --checkpoint: exit $rc: $(cat "$d/err")"
echo "rf-dist-run: reruns, --resume, retries, status 2, SIGINT/SIGTERM and --retries checked"
