# bench/find-bench.sh -- sourced by the shell benchmarks. rf_find_bench HERE prints the
# rf-bench to measure: $RF_BENCH if set, else rf-bench on PATH, else the first of
# HERE/build/bench/rf-bench and HERE/build*/bench/rf-bench that no sanitizer
# instruments (a build-asan or build-tsan beside build would otherwise be timed: its
# figures mean nothing). Nothing printed: none found. A sanitized RF_BENCH is used,
# with a warning on stderr.
rf_sanitized() {
	readelf -d "$1" 2>/dev/null | grep -qE 'NEEDED.*lib(asan|tsan|ubsan|lsan|msan)\.'
}

rf_find_bench() {
	local here=$1 b
	if [[ -n ${RF_BENCH:-} ]]; then
		rf_sanitized "$RF_BENCH" &&
			echo "note: RF_BENCH=$RF_BENCH is a sanitizer build: its timings mean nothing" >&2
		echo "$RF_BENCH"
		return
	fi
	for b in "$(command -v rf-bench || true)" "$here"/build/bench/rf-bench \
		 "$here"/build*/bench/rf-bench; do
		[[ -n $b && -x $b ]] && ! rf_sanitized "$b" && { echo "$b"; return; }
	done
}
