#!/usr/bin/env bash
# Session 11, run 2: band sizes and the scheduler's priority for the megakernel's GeMM stacks.
# The path-2 chain test (banded edges under both priorities), then `run layers` with bands of 8
# and 16 rows and RowSync, each downstream first and upstream first, side by side with the
# twin, the dependencies-met launch, our single GeMMs, cuBLAS and the best micro-batching
# chunk; a traced banded upstream-first launch; and the 2-layer stack over M.
source "$(dirname "$0")/env.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
carry/bin/test-gpu-test --test-threads=1 persistent::sm90 > "$OUT/persistent-sm90.log" 2>&1; rc=$?
grep -E "FAIL|panicked|^gpu:" "$OUT/persistent-sm90.log" | tail -4
grep -E "RowBandSync8, upstream" "$OUT/persistent-sm90.log" | head -2
echo "== run layers --m 16384 --layers 2,4,8 --iters 5 --policy band,band16,rowsync --priority up,down (${SECONDS}s)"
carry/bin/cusync run layers --m 16384 --layers 2,4,8 --iters 5 --policy band,band16,rowsync --priority up,down \
  --trace "$OUT/trace" 2>&1 | grep -v '^wrote' | grep -v -E '^ +[0-9.]+ - +[0-9.]+ us|^    layer'
rm -f "$OUT"/trace/*.json
echo "== run layers --m 1024,4096,32768 --layers 2 --iters 3 --policy band --priority up,down (${SECONDS}s)"
carry/bin/cusync run layers --m 1024,4096,32768 --layers 2 --iters 3 --policy band --priority up,down 2>&1
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
echo "== done (${SECONDS}s), suite rc=$rc"
exit $rc
