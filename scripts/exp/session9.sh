#!/usr/bin/env bash
# Session 9's pass on the GPU machine (device tool, carry ["carry"]): the stream stages' post
# warp and look-ahead acquire, and suspended mbarrier waits. Sides, all run by this binary
# (the host side and every kernel's parameters are the same in the three builds, so each
# carried cubin's fingerprint file names this binary's PTX):
#   a:  session 8's cubin (carry/ab)
#   b1: the post warp and look-ahead, post-ring waits suspended (carry/b1)
#   b2: this build (carry/ptx): b1, and every pipeline wait suspended too
# (scripts/exp/sides.sh). Prints the GPU suite (b2), then the protocol rows, traced MLP tile periods, GeMM timings and
# the MLP sweep for every side, alternated.
source "$(dirname "$0")/env.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
source scripts/exp/sides.sh
b2() { "$@"; }
SIDES="b2"
add_side b1 carry/b1; add_side a carry/ab
echo "sides: $SIDES"

echo "== GPU suite (b2)"
timeout ${SUITE_S:-300} carry/bin/test-gpu-test --test-threads=1 ${SUITE_FILTER:-} > "$OUT/gpu-suite.log" 2>&1; rc=$?
grep -E "FAIL|panicked|^gpu:" "$OUT/gpu-suite.log" | tail -8
grep -E "delayed|skipped post" "$OUT/gpu-suite.log" | head -6

for side in $SIDES; do
  echo "== [$side] bench (${SECONDS}s)"
  $side carry/bin/cusync bench --samples 11 > "$OUT/bench-$side.txt" 2>/dev/null
  grep -E 'stream stage|persistent pair \(|post->wait' "$OUT/bench-$side.txt"
done
for side in $SIDES; do trace_periods $side; done
echo "== run gemm (${SECONDS}s)"
for r in 1 2; do
  while read -r args; do
    for side in $SIDES; do
      t=$($side timeout 60 carry/bin/cusync run gemm $args --iters 20 2>/dev/null | grep -E "ours / cuBLAS|^  ours" | tr -s ' ' | tr '\n' ' ')
      echo "[$side] $args: $t"
    done
  done <<'LIST'
--m 8192 --n 8192 --k 8192
--m 1024 --n 6144 --k 12288 --gelu
--m 1024 --n 12288 --k 6144
--m 64 --n 12288 --k 6144
LIST
done
for side in $SIDES; do
  echo "== [$side] sweep mlp (${SECONDS}s)"
  $side carry/bin/cusync sweep mlp --samples 10 2>/dev/null > "$OUT/sweep-$side.txt"
  tail -9 "$OUT/sweep-$side.txt" | cut -c1-200
done
echo "== suite rc=$rc (${SECONDS}s)"
exit $rc
