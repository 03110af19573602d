#!/usr/bin/env bash
# Session 10: the stream stages' first ticket at block entry, their first dependency wait made
# while the tile's first pipeline stage drains, and no per-tile consumer barrier in a stage that
# posts nothing. Sides (scripts/exp/sides.sh), run by this binary: b = this build, a = session
# 8's cubin (c1bb63c, in carry/ab). The GPU suite on b; the protocol table's stream-stage rows
# and the MLP sweep on both, alternated; `run layers` (every variant side by side) on b.
source "$(dirname "$0")/env.sh"
source scripts/exp/sides.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
b() { "$@"; }
SIDES="b"
add_side a carry/ab
echo "sides: $SIDES"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
carry/bin/test-gpu-test --test-threads=1 > "$OUT/gpu-suite.log" 2>&1; rc=$?
grep -E "FAIL|panicked|^gpu:|test result" "$OUT/gpu-suite.log" | tail -6
for r in 1 2; do
  for side in $SIDES; do
    echo "== [$side] bench (round $r, ${SECONDS}s)"
    $side carry/bin/cusync bench --samples 11 2>/dev/null | grep -E 'stream stage:|post->wait'
  done
done
for side in $SIDES; do
  echo "== [$side] sweep mlp (${SECONDS}s)"
  $side carry/bin/cusync sweep mlp --samples 10 2>/dev/null | grep -E '^ +[0-9]+ wg' | cut -c1-200
done
for side in a b; do
  echo "== [$side] sweep mlp --batches 64,256,1024 (round 2, ${SECONDS}s)"
  $side carry/bin/cusync sweep mlp --batches 64,256,1024 --samples 10 2>/dev/null | grep -E '^ +[0-9]+ wg' | cut -c1-200
done
for r in 1 2; do
  echo "== run layers --m 16384 --layers 2,4,8 --iters 5 (round $r, ${SECONDS}s)"
  carry/bin/cusync run layers --m 16384 --layers 2,4,8 --iters 5 2>&1 | grep -vE '^$'
done
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
echo "== done (${SECONDS}s), suite rc=$rc"
exit $rc
