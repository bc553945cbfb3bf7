#!/bin/sh
# test-plot-metrics: tools/plot-metrics turns an rf-train --metrics CSV into the seeds'
# curves -- a PNG (checked by its signature) and the same plot as text on the terminal
# (checked for its legend) -- and refuses a malformed CSV with one line naming the file
# and exit 1. Skipped (77) where gnuplot is missing.
set -eu
src=$1
command -v gnuplot >/dev/null || exit 77
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$src/tools/plot-metrics" "$src/doc/mlp-metrics.csv" "$d/m.png" > "$d/out"
head -c 8 "$d/m.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a"
grep -q "test acc" "$d/out"
grep -q "wrote $d/m.png (10 epochs)" "$d/out"
printf 'epoch,train_loss,train_acc,test_acc\n1,0.5,zero,0.7\n' > "$d/bad.csv"
if "$src/tools/plot-metrics" "$d/bad.csv" "$d/bad.png" 2> "$d/err"; then exit 1; fi
grep -q "bad.csv" "$d/err"
test ! -e "$d/bad.png"
echo "plot-metrics ok"
