#!/bin/sh
# test-iobench-limits: rf-iobench's memory and its clean-up. A run allocates one
# buffer per request in flight and no more in flight than the region has blocks:
# --bs 4m --qd 256 on an 8 MiB file uses 2 buffers (it used to fault in 1 GiB),
# checked in --json (qd_used, buffers, buffer_bytes) and in the peak RSS, against a
# one-buffer run of the same program (the CUDA libraries it loads make up most of
# its RSS), and with /usr/bin/time where installed. Buffers past a quarter of the
# machine's memory (--bs 1g --qd 16384 on a sparse 15 TiB file) are refused in one
# line naming --qd and --bs. A write run that created its file removes it when it
# fails: ENOSPC on a 1 MiB tmpfs (in a private mount namespace, where unshare(1)
# allows one), EFBIG under a file size limit, SIGTERM/SIGINT mid-run; a file it did
# not create is left, and a run that succeeds keeps its file.
# usage: test-iobench-limits.sh path/to/rf-iobench
IOB=${1:?usage: $0 rf-iobench}
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-iobench-limits.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p" "$2"; }
one_line() { # file: exactly one line
	[ "$(wc -l <"$1")" -eq 1 ] || fail "want one stderr line, got: $(cat "$1")"
}

# ---- memory bounded by the blocks in the region ------------------------------------
"$IOB" --file "$T/f8" --rw write --bs 1m --qd 4 --size 8m >/dev/null 2>"$T/err" ||
	fail "creating the 8 MiB file: $(cat "$T/err")"
[ "$(wc -c <"$T/f8")" -eq 8388608 ] || fail "the created file is not 8 MiB"
timeout 60 "$IOB" --file "$T/f8" --rw read --bs 4m --qd 1 --json >"$T/base.j" 2>"$T/err" ||
	fail "baseline run: $(cat "$T/err")"
base=$(field peak_rss_kib "$T/base.j")
for mode in read randread "write --force" "read --fixedbufs" "read --runtime 0.2"; do
	# shellcheck disable=SC2086
	timeout 60 "$IOB" --file "$T/f8" --rw $mode --bs 4m --qd 256 --json >"$T/j" 2>"$T/err" ||
		fail "--rw $mode --bs 4m --qd 256: $(cat "$T/err")"
	[ "$(field qd "$T/j")" = 256 ] && [ "$(field qd_used "$T/j")" = 2 ] &&
		[ "$(field buffers "$T/j")" = 2 ] && [ "$(field buffer_bytes "$T/j")" = 8388608 ] ||
		fail "--rw $mode --bs 4m --qd 256 on 8 MiB: want 2 buffers of 4 MiB: $(cat "$T/j")"
	rss=$(field peak_rss_kib "$T/j")
	# 2 buffers: about 4 MiB more than the baseline's one; 1 GiB before the fix
	[ -n "$rss" ] && [ -n "$base" ] && [ "$rss" -lt $((base + 65536)) ] ||
		fail "--rw $mode: peak RSS $rss KiB, baseline $base KiB (want < +64 MiB)"
	echo "ok: --rw $mode --bs 4m --qd 256 on 8 MiB: 2 buffers, peak RSS $rss KiB (1 buffer: $base KiB)"
done
"$IOB" --file "$T/f8" --rw read --bs 4m --qd 256 >"$T/out" 2>"$T/err" || fail "$(cat "$T/err")"
grep -q "qd=256 (2 in flight: the region's blocks)" "$T/out" || fail "human report: $(cat "$T/out")"
if [ -x /usr/bin/time ]; then
	/usr/bin/time -f "%M" -o "$T/t1" "$IOB" --file "$T/f8" --rw read --bs 4m --qd 1 >/dev/null 2>&1
	/usr/bin/time -f "%M" -o "$T/t2" "$IOB" --file "$T/f8" --rw read --bs 4m --qd 256 >/dev/null 2>&1
	[ "$(tail -1 "$T/t2")" -lt $(( $(tail -1 "$T/t1") + 65536 )) ] ||
		fail "/usr/bin/time: max RSS $(tail -1 "$T/t2") KiB at --qd 256, $(tail -1 "$T/t1") KiB at --qd 1"
	echo "ok: /usr/bin/time agrees: $(tail -1 "$T/t2") KiB at --qd 256, $(tail -1 "$T/t1") KiB at --qd 1"
fi

# ---- absurd sizes refused, naming the options ----------------------------------------
# A rf-iobench that tried (a regression) would fault in terabytes: these runs are
# capped at 6 GiB of address space (under ASan or TSan, which reserve far more address
# space than that at start-up, at 4 GiB of RSS instead). The cap counts RLIMIT_AS, so
# the refusal says 6144 MiB.
if ldd "$IOB" 2>/dev/null | grep -q libasan; then
	capped() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=4096" timeout 60 "$@"; }
elif ldd "$IOB" 2>/dev/null | grep -q libtsan; then
	capped() { TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS }hard_rss_limit_mb=4096" timeout 60 "$@"; }
else
	capped() { (ulimit -v 6291456 && exec timeout 60 "$@"); }
fi
if truncate -s 15t "$T/huge" 2>/dev/null; then
	for args in "--bs 1g --qd 16384" "--bs 1g --qd 16384 --fixedbufs" "--bs 64m --qd 16384 --runtime 1"; do
		# shellcheck disable=SC2086
		capped "$IOB" --file "$T/huge" --rw read $args >"$T/out" 2>"$T/err"; rc=$?
		[ $rc = 2 ] || fail "$args on 15 TiB: exit $rc, want 2: $(cat "$T/err")"
		one_line "$T/err"
		grep -q -- "--qd 16384 x --bs .*more than the .* MiB allowed.*lower --qd or --bs" "$T/err" ||
			fail "$args: $(cat "$T/err")"
	done
	echo "ok: absurd buffers refused: $(cat "$T/err")"
	rm -f "$T/huge"
else
	echo "note: no sparse 15 TiB file here: absurd-size case not run"
fi

# ---- a run that created its file removes it when it fails --------------------------
# EFBIG: a file size limit below --size (posix_fallocate refuses it)
(ulimit -f 64 && exec "$IOB" --file "$T/new" --rw write --bs 64k --qd 4 --size 8m) \
	>"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] || fail "write past the file size limit: exit $rc: $(cat "$T/err")"
one_line "$T/err"
grep -q "new: cannot extend to 8388608 bytes (--size): File too large (removed " "$T/err" ||
	fail "EFBIG: $(cat "$T/err")"
! [ -e "$T/new" ] || fail "EFBIG: the created file was left behind"
echo "ok: EFBIG: $(cat "$T/err")"
# ... but a file it did not create stays
head -c 65536 /dev/zero >"$T/mine"
(ulimit -f 64 && exec "$IOB" --file "$T/mine" --rw write --force --bs 64k --qd 4 --size 8m) \
	>"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] && [ -e "$T/mine" ] || fail "--force into an existing file: exit $rc, exists: $(ls "$T")"
one_line "$T/err"
grep -q "removed" "$T/err" && fail "removed a file it did not create: $(cat "$T/err")"
echo "ok: a file it did not create is kept: $(cat "$T/err")"
# a signal mid-run. The shell starts a background job with SIGINT ignored, and a
# signal ignored at start stays ignored (as under nohup): SIGINT is made the default
# again for its run.
dfl() { # dfl SIG COMMAND...: run COMMAND with SIG's default action
	sig=$1; shift
	if env --default-signal=$sig true 2>/dev/null; then
		exec env --default-signal=$sig "$@"
	fi
	exec python3 -c 'import os, signal, sys
signal.signal(getattr(signal, "SIG" + sys.argv[1]), signal.SIG_DFL)
os.execv(sys.argv[2], sys.argv[2:])' "$sig" "$@"
}
for sig in TERM INT; do
	(dfl $sig "$IOB" --file "$T/sig" --rw randwrite --bs 4k --qd 8 --size 16m --runtime 30 \
		>/dev/null 2>"$T/err") &
	pid=$!
	i=0
	while ! [ -s "$T/sig" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	sleep 0.3
	kill -$sig $pid
	wait $pid; rc=$?
	[ $rc -gt 128 ] || fail "SIG$sig: exit $rc: $(cat "$T/err")"
	! [ -e "$T/sig" ] || fail "SIG$sig mid-run: the created file was left behind"
	echo "ok: SIG$sig mid-run: exit $rc, the file it created is gone"
done
# ignored at start, SIGINT stays ignored (a handler for it would end the job); made so
# here, not left to how the caller's shell starts background jobs
(env --ignore-signal=INT --default-signal=TERM "$IOB" --file "$T/sig" --rw randwrite --bs 4k \
	--qd 8 --size 16m --runtime 30 >/dev/null 2>"$T/err") &
pid=$!
i=0
while ! [ -s "$T/sig" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill -INT $pid
sleep 0.5
kill -0 $pid 2>/dev/null || fail "an ignored SIGINT ended the run: $(cat "$T/err")"
kill -TERM $pid
wait $pid
! [ -e "$T/sig" ] || fail "SIGTERM after an ignored SIGINT: the created file was left behind"
echo "ok: an ignored SIGINT stays ignored"
# a run that succeeds keeps its file
"$IOB" --file "$T/keep" --rw write --bs 64k --qd 4 --size 1m >/dev/null 2>"$T/err" ||
	fail "write: $(cat "$T/err")"
[ "$(wc -c <"$T/keep")" -eq 1048576 ] || fail "a successful write run did not keep its 1 MiB file"
# ENOSPC on a 1 MiB tmpfs, where a private mount namespace can be had
. "$(dirname "$0")/../private-ns.sh"
mkdir "$T/mnt"
if [ -n "$ns" ] && $ns sh -c 'mount -t tmpfs -o size=1m none "$1"' sh "$T/mnt" 2>/dev/null; then
	$ns sh -c '
		mount -t tmpfs -o size=1m none "$2" || exit 99
		"$1" --file "$2/f" --rw write --bs 64k --qd 4 --size 8m >/dev/null 2>"$3/err"
		rc=$?
		ls -A "$2" >"$3/left"
		exit $rc' sh "$IOB" "$T/mnt" "$T"; rc=$?
	[ $rc = 99 ] && fail "tmpfs mount failed in $ns"
	[ $rc = 1 ] || fail "ENOSPC: exit $rc: $(cat "$T/err")"
	one_line "$T/err"
	grep -q "No space left on device (removed " "$T/err" || fail "ENOSPC: $(cat "$T/err")"
	[ -s "$T/left" ] && fail "ENOSPC: left on the tmpfs: $(cat "$T/left")"
	echo "ok: ENOSPC on a 1 MiB tmpfs: $(cat "$T/err")"
else
	echo "note: no private mount namespace here (unshare -m / -rm): ENOSPC case not run"
fi
exit 0
