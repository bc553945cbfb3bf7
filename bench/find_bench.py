"""bench/find_bench.py -- for the Python benchmarks: the rf-bench to time, as the shell
benchmarks find it (bench/find-bench.sh, the one finder): $RF_BENCH (a sanitizer or
debug build named there runs, with a warning), else rf-bench on PATH, else the first
optimized build here without sanitizers (a build-test-asan beside build would
otherwise be timed)."""
import os
import subprocess
import sys


def find_bench(here):
    r = subprocess.run(["bash", "-c", '. "$1/bench/find-bench.sh" && rf_find_bench "$1"', "-",
                        here], capture_output=True, text=True)
    sys.stderr.write(r.stderr)
    return r.stdout.strip() or os.path.join(here, "build", "bench", "rf-bench")
