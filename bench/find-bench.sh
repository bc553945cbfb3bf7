# bench/find-bench.sh -- sourced by the shell benchmarks: which of our programs to time.
# POSIX sh (dash sources it for the #!/bin/sh benchmarks; bash for the others).
# A build-test-asan or build-tsan beside build would otherwise be timed (its figures
# mean nothing: seen, a loader at 0.64 CPU s/GB that the release build runs at 0.35).
#
# rf_find_prog HERE REL NAME: the program to measure -- NAME on PATH, else the first of
#   HERE/build/REL and HERE/build*/REL that no sanitizer instruments. Nothing printed:
#   none found.
# rf_find VAR HERE REL NAME: the program $VAR names, if set (checked: a warning when
#   it is a sanitizer or debug build, and it runs), else rf_find_prog HERE REL NAME.
# rf_find_bench HERE: rf_find for rf-bench ($RF_BENCH).
# rf_timing_check PROG: warns on stderr, and returns 1, when PROG's figures would mean
#   nothing: a sanitizer build (its ELF needs lib*san), or a build directory whose
#   meson options say debug, -O0 or -Og. For a program a user named (an environment
#   variable, a BUILD_DIR argument): it still runs, with the warning.
rf_sanitized() {
	readelf -d "$1" 2>/dev/null | grep -qE 'NEEDED.*lib(asan|tsan|ubsan|lsan|msan|hwasan)\.'
}

# The meson build directory PROG lies in (its meson-info/), or nothing.
rf_build_dir() {
	local d
	d=$(cd "$(dirname "$1")" 2>/dev/null && pwd) || return 0
	while [ -n "$d" ] && [ "$d" != / ]; do
		[ -f "$d/meson-info/intro-buildoptions.json" ] && { echo "$d"; return; }
		d=$(dirname "$d")
	done
}

# "buildtype optimization b_sanitize" of build directory D, from meson's introspection.
rf_build_opts() {
	python3 - "$1/meson-info/intro-buildoptions.json" <<'PYEOF' 2>/dev/null
import json, sys
o = {x["name"]: x["value"] for x in json.load(open(sys.argv[1]))}
print(o.get("buildtype", "?"), o.get("optimization", "?"), o.get("b_sanitize", "none"))
PYEOF
}

rf_timing_check() {
	local prog=$1 d opts bt opt san
	if rf_sanitized "$prog"; then
		echo "note: $prog is a sanitizer build: its timings mean nothing" >&2
		return 1
	fi
	d=$(rf_build_dir "$prog")
	[ -n "$d" ] || return 0
	opts=$(rf_build_opts "$d") || return 0
	# shellcheck disable=SC2086 # three words
	set -- $opts
	bt=${1:-?} opt=${2:-?} san=${3:-none}
	if [ "$san" != none ] || [ "$bt" = debug ] || [ "$opt" = 0 ] || [ "$opt" = g ]; then
		echo "note: $prog comes from $d (buildtype $bt, optimization $opt, b_sanitize $san): its timings mean nothing" >&2
		return 1
	fi
	return 0
}

rf_find_prog() {
	local here=$1 rel=$2 name=$3 b
	for b in "$(command -v "$name" || true)" "$here/build/$rel" "$here"/build*/"$rel"; do
		[ -n "$b" ] && [ -x "$b" ] || continue
		rf_timing_check "$b" 2>/dev/null && { echo "$b"; return; }
	done
}

rf_find() {
	local var=$1 val
	shift
	eval "val=\${$var:-}"
	if [ -n "$val" ]; then
		rf_timing_check "$val" || true
		echo "$val"
		return
	fi
	rf_find_prog "$@"
}

rf_find_bench() {
	rf_find RF_BENCH "$1" bench/rf-bench rf-bench
}
