#!/usr/bin/env bash
# Session 11, run 5: `run layers --csv` on the issue-5 stacks (M = 16384 over 2, 4 and 8 layers,
# and 2 layers over M), for the charts in docs/figures.
source "$(dirname "$0")/env.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
carry/bin/cusync run layers --m 16384 --layers 2,4,8 --iters 5 --csv "$OUT/layers-16384.csv" > "$OUT/layers-16384.txt" 2>&1; rc=$?
carry/bin/cusync run layers --m 1024,2048,4096,8192,16384,32768 --layers 2 --iters 3 --csv "$OUT/layers-m.csv" > "$OUT/layers-m.txt" 2>&1 || rc=1
grep -E '^[0-9]-layer|single GeMMs =|micro-batching:' "$OUT"/layers-*.txt
echo "== done (${SECONDS}s), rc=$rc"
exit $rc
