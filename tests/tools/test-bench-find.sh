#!/bin/bash
# test-bench-find: the benchmarks time an optimized build without sanitizers, never a
# build-test-asan or a debug build that happens to sort first (bench/loader-vs-peers
# once printed 0.64 CPU s/GB, the ASan build's, for what the release build does in
# 0.35; httpd-vs-nginx, iobench-vs-fio and shard-open took the first build*/ too).
# 1. bench/find-bench.sh on a made tree: build-a (ASan), build-b (meson's debug
#    buildtype), build-c (release), build-d (b_sanitize=thread, its ELF uninstrumented):
#    rf_find_prog takes build-c's; with build-c gone, nothing; rf_timing_check warns
#    and fails on each of the others; $RF_BENCH named is used with the warning.
# 2. Every benchmark in bench/ that runs our programs finds or checks them through
#    find-bench.sh: none loops over build*/ itself, each one sources it (the Python
#    ones through bench/find_bench.py).
# usage: test-bench-find.sh SOURCE_ROOT
set -u
src=${1:?usage: $0 SOURCE_ROOT}
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-bench-find.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v readelf >/dev/null || { echo "SKIP: no readelf"; exit 77; }
cc=${CC:-cc}
echo 'int main(void) { return 0; }' >"$T/m.c"
"$cc" -o "$T/plain" "$T/m.c" || { echo "SKIP: no C compiler"; exit 77; }
"$cc" -fsanitize=address -o "$T/asan" "$T/m.c" 2>/dev/null || { echo "SKIP: no ASan"; exit 77; }

# build dir D with meson's introspection saying BUILDTYPE OPT SAN, rf-bench = ELF
mk() {
	mkdir -p "$T/r/$1/bench" "$T/r/$1/meson-info"
	cp "$T/$5" "$T/r/$1/bench/rf-bench"
	printf '[{"name": "buildtype", "value": "%s"}, {"name": "optimization", "value": "%s"}, {"name": "b_sanitize", "value": "%s"}]\n' \
		"$2" "$3" "$4" >"$T/r/$1/meson-info/intro-buildoptions.json"
}
mk build-a debugoptimized 2 address,undefined asan
mk build-b debug 0 none plain
mk build-c release 3 none plain
mk build-d debugoptimized 2 thread plain

# shellcheck source=/dev/null
. "$src/bench/find-bench.sh"
export PATH=/usr/bin:/bin     # no rf-bench on PATH
unset RF_BENCH
got=$(rf_find_prog "$T/r" bench/rf-bench rf-bench)
[ "$got" = "$T/r/build-c/bench/rf-bench" ] || fail "rf_find_prog chose '$got', want build-c's"
got=$(rf_find_bench "$T/r")
[ "$got" = "$T/r/build-c/bench/rf-bench" ] || fail "rf_find_bench chose '$got', want build-c's"
rf_timing_check "$T/r/build-c/bench/rf-bench" 2>"$T/err" || fail "release build refused: $(cat "$T/err")"
[ -s "$T/err" ] && fail "release build warned: $(cat "$T/err")"
for b in build-a build-b build-d; do
	rf_timing_check "$T/r/$b/bench/rf-bench" 2>"$T/err" && fail "$b passed the timing check"
	grep -q "mean nothing" "$T/err" || fail "$b: no warning: $(cat "$T/err")"
done
grep -q "sanitizer build" < <(rf_timing_check "$T/r/build-a/bench/rf-bench" 2>&1) ||
	fail "build-a's warning does not say sanitizer"
RF_BENCH=$T/r/build-a/bench/rf-bench rf_find_bench "$T/r" >"$T/out" 2>"$T/err"
[ "$(cat "$T/out")" = "$T/r/build-a/bench/rf-bench" ] || fail "RF_BENCH not used: $(cat "$T/out")"
grep -q "mean nothing" "$T/err" || fail "RF_BENCH (ASan) used without a warning"
rm -rf "$T/r/build-c"
got=$(rf_find_prog "$T/r" bench/rf-bench rf-bench)
[ -z "$got" ] || fail "with only sanitizer and debug builds, rf_find_prog chose '$got'"
# a program outside any build directory (installed): nothing to say against it
rf_timing_check "$T/plain" 2>"$T/err" || fail "an installed program refused: $(cat "$T/err")"

# 2. the scripts
n=0
for f in "$src"/bench/*; do
	[ -f "$f" ] && [ -x "$f" ] || continue
	case $f in *.c | *.h | */find-bench.sh) continue ;; esac
	grep -qE 'rf-(bench|train|iobench|httpd)' "$f" || continue
	if grep -nE 'for [a-z_]+ in .*build\*/' "$f" >"$T/g"; then
		fail "$(basename "$f") looks for builds itself: $(cat "$T/g")"
	fi
	case $(basename "$f") in fmnist-jpeg-accuracy) continue ;; esac  # accuracy, not time
	# shell: sources it; Python: imports bench/find_bench.py, which runs it
	grep -qE '^[^#]*\. .*find-bench\.sh|^from find_bench import' "$f" ||
		fail "$(basename "$f") runs our programs without bench/find-bench.sh"
	n=$((n + 1))
done
[ $n -ge 15 ] || fail "only $n benchmarks checked: the script list moved?"
echo "ok: build-c chosen over an ASan, a debug and a TSan build; $n benchmarks use find-bench.sh"
