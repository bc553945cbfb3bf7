#!/bin/bash
# test-bench-find: the benchmarks time an optimized build without sanitizers, never a
# build-test-asan or a debug build that happens to sort first (bench/loader-vs-peers
# once printed 0.64 CPU s/GB, the ASan build's, for what the release build does in
# 0.35; httpd-vs-nginx, iobench-vs-fio and shard-open took the first build*/ too).
# 1. bench/find-bench.sh on a made tree: build-a (ASan), build-b (meson's debug
#    buildtype), build-c (release), build-d (b_sanitize=thread, its ELF uninstrumented):
#    rf_find_prog takes build-c's; with build-c gone, nothing; rf_timing_check warns
#    and fails on each of the others; $RF_BENCH named is used with the warning -- in
#    sh (dash) and bash, since #!/bin/sh benchmarks source it too.
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

# The finder is sourced by #!/bin/sh (dash) and bash benchmarks alike: the checks run
# in both shells (a bash-only construct in it once broke every #!/bin/sh benchmark).
cat >"$T/check.sh" <<'CHECK_EOF'
src=$1 T=$2
fail() { echo "FAIL ($SHELL_NAME): $*"; exit 1; }
# shellcheck source=/dev/null
. "$src/bench/find-bench.sh"
PATH=/usr/bin:/bin     # no rf-bench on PATH
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
rf_timing_check "$T/r/build-a/bench/rf-bench" >"$T/err" 2>&1
grep -q "sanitizer build" "$T/err" || fail "build-a's warning does not say sanitizer"
RF_BENCH=$T/r/build-a/bench/rf-bench rf_find_bench "$T/r" >"$T/out" 2>"$T/err"
[ "$(cat "$T/out")" = "$T/r/build-a/bench/rf-bench" ] || fail "RF_BENCH not used: $(cat "$T/out")"
grep -q "mean nothing" "$T/err" || fail "RF_BENCH (ASan) used without a warning"
mv "$T/r/build-c" "$T/r/gone-c"
got=$(rf_find_prog "$T/r" bench/rf-bench rf-bench)
mv "$T/r/gone-c" "$T/r/build-c"
[ -z "$got" ] || fail "with only sanitizer and debug builds, rf_find_prog chose '$got'"
# a program outside any build directory (installed): nothing to say against it
rf_timing_check "$T/plain" 2>"$T/err" || fail "an installed program refused: $(cat "$T/err")"
exit 0
CHECK_EOF
shells=0
for sh in sh dash bash; do
	command -v "$sh" >/dev/null || continue
	SHELL_NAME=$sh "$sh" "$T/check.sh" "$src" "$T" || exit 1
	shells=$((shells + 1))
done
[ $shells -ge 2 ] || fail "the finder was checked in $shells shell(s)"

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
	# a shell script's own interpreter (its #! line) reads the finder without an error
	case $(head -n 1 "$f") in
	'#!/bin/sh'*) interp=sh ;;
	*bash*) interp=bash ;;
	*) interp= ;;
	esac
	if [ -n "$interp" ]; then
		"$interp" -c '. "$1" && command -v rf_find >/dev/null' x "$src/bench/find-bench.sh" \
			2>"$T/err" || fail "$(basename "$f") ($interp) cannot source find-bench.sh: $(cat "$T/err")"
	fi
	n=$((n + 1))
done
[ $n -ge 15 ] || fail "only $n benchmarks checked: the script list moved?"

# 3. The Python benchmarks and peers find the files they add to sys.path (a fixture
#    that moved once left the ResNet-18 peer unable to import its model).
python3 - "$src" <<'PYEOF' || fail "a benchmark's sys.path names a missing directory"
import ast, glob, os, sys
src = sys.argv[1]
bad, seen = [], 0
for f in sorted(glob.glob(os.path.join(src, "bench", "**", "*.py"), recursive=True)) + \
        [g for g in glob.glob(os.path.join(src, "bench", "*")) if os.path.isfile(g) and
         open(g, "rb").read(64).startswith(b"#!/usr/bin/python3")]:
    ns = {"os": os, "sys": sys, "__file__": os.path.abspath(f)}
    # the module's top level in order: names assigned from os and __file__, then each
    # sys.path.insert(0, EXPR) evaluated with them
    for stmt in ast.parse(open(f).read(), f).body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name):
            try:
                ns[stmt.targets[0].id] = eval(compile(ast.Expression(stmt.value), f, "eval"), ns)
            except Exception:
                pass
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and
                call.func.attr == "insert" and ast.unparse(call.func.value) == "sys.path"):
            d = eval(compile(ast.Expression(call.args[1]), f, "eval"), ns)
            seen += 1
            if not os.path.isdir(d):
                bad.append(f"{os.path.relpath(f, src)}: sys.path gets {d}, not a directory")
print("\n".join(bad) if bad else f"ok: {seen} sys.path entries of the Python benchmarks exist")
sys.exit(1 if bad else 0)
PYEOF
echo "ok: build-c chosen over an ASan, a debug and a TSan build in $shells shells; $n benchmarks use find-bench.sh, each readable by its own shell"
