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

# rf_openblas_core: OpenBLAS 0.3.21 (Debian's, under PyTorch and ours) does not know every
#   newer CPU: on a 2-vCPU "Intel(R) Xeon(R) Processor" with AVX-512 it fell back to its
#   Prescott (SSE3) kernels, and PyTorch's MLP epoch ran 2-3x slower than with the
#   SkylakeX ones (2026-12-01) -- a peer handicapped by its library's detection, not by
#   the machine. Where OpenBLAS's own choice (OPENBLAS_CORETYPE unset) is below what the
#   CPU runs, this exports OPENBLAS_CORETYPE=SkylakeX (AVX-512 F/BW/DQ/VL) or Haswell
#   (AVX2 and FMA) for every command after it, ours and the peer's alike; a choice that
#   fits is left alone. Prints one line saying which.
rf_openblas_core() {
	local got flags want=
	got=$(env -u OPENBLAS_CORETYPE /usr/bin/python3 -c 'import ctypes
ob = ctypes.CDLL("libopenblas.so.0"); ob.openblas_get_corename.restype = ctypes.c_char_p
print(ob.openblas_get_corename().decode())' 2>/dev/null) || got=
	[ -n "$got" ] || { echo "OpenBLAS core: no libopenblas.so.0 (nothing set)"; return 0; }
	flags=" $(grep -m1 '^flags' /proc/cpuinfo) "
	rf__has() { case "$flags" in *" $1 "*) return 0 ;; esac; return 1; }
	if rf__has avx512f && rf__has avx512dq && rf__has avx512bw && rf__has avx512vl; then
		case $got in SkylakeX|Cooperlake|SapphireRapids) ;; *) want=SkylakeX ;; esac
	elif rf__has avx2 && rf__has fma; then
		case $got in Haswell|Zen|SkylakeX|Cooperlake|SapphireRapids) ;; *) want=Haswell ;; esac
	fi
	if [ -n "$want" ]; then
		OPENBLAS_CORETYPE=$want
		export OPENBLAS_CORETYPE
		echo "OpenBLAS core: its detection chose $got, below this CPU: OPENBLAS_CORETYPE=$want for both sides"
	else
		echo "OpenBLAS core: $got (its own detection, kept)"
	fi
}
