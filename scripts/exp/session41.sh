#!/usr/bin/env bash
# Session 41's pass (carry `carry/bin`, `carry/ptx`; builds nothing here).
# On any card: the extended `persistent::timing…` GPU test (`run layers`' rounds and paired
# ratios). On the H200 (on any card with `any`, its figures labelled as that card's):
# 1. issue 5's 2-layer stack with the paired-by-round ratios (`run layers`, 21 rounds);
# 2. issue 7's B = 1 question: does GeMM1's plain kernel (tile-aligned stream-K, the library's
#    choice) run faster than the same kernel cut as the stream stage cuts it (split-K 2)? Two
#    rounds of each, alternating;
# 3. the 4- and 8-layer stacks (11 rounds), then the whole GPU suite.
# Usage: [BUDGET=seconds] bash scripts/exp/session41.sh [any]   (any: all of it on whatever card
# came; the GPU suite runs only if more than 250 s of BUDGET, default 570, are left)
set -uo pipefail
cd "$(dirname "$0")/../.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
source scripts/exp/session39-steps.sh
exp_start /tmp/c41.cubin
gpu_tests test-timing.log 120 persistent::timing
grep -E "side by side|^test |^gpu:" "$OUT/test-timing.log" | cut -c1-300
case "$gpu" in
  *H200*) ;;
  *) [ "${1:-}" = any ] || { echo "not an H200 ($gpu): issue 5's figures and the suite are left for the H200"; summary; exit 3; }
     echo "not an H200 ($gpu): its figures are this card's, not the H200's" ;;
esac
timeout 240 carry/bin/cusync run layers --m 16384 --layers 2 --iters 21 --csv "$OUT/layers2.csv" > "$OUT/layers.txt" 2>&1
row "run layers 2 x21" "$?" "$(grep -c . "$OUT/layers.txt") lines"
gemm1="run gemm --m 1 --n 6144 --k 12288 --gelu --iters 200"
for r in 1 2; do
  for cut in stream-k split-k; do
    extra=""; [ $cut = split-k ] && extra="--stream-k off --split-k 2"
    echo "--- $cut, round $r: cusync $gemm1 $extra" >> "$OUT/gemm1.txt"
    timeout 60 carry/bin/cusync $gemm1 $extra >> "$OUT/gemm1.txt" 2>&1
    row "GeMM1 B=1 $cut ($r)" "$?" ""
  done
done
echo "=== GeMM1 B=1 A/B (plain kernel) ==="; grep -v "^ *measuring" "$OUT/gemm1.txt" | cut -c1-200
timeout 240 carry/bin/cusync run layers --m 16384 --layers 4,8 --iters 11 >> "$OUT/layers.txt" 2>&1
row "run layers 4,8 x11" "$?" "$(grep -c . "$OUT/layers.txt") lines"
lim=$((${BUDGET:-570} - (SECONDS - t0)))   # BUDGET: the seconds this call may take (the device call's 600 s, less the table's margin)
if [ $lim -gt 250 ]; then
  gpu_tests test-gpu.log $lim
  grep -E "FAILED|^gpu:" "$OUT/test-gpu.log" | head -5
fi
echo "=== run layers ==="; grep -v "^ *measuring" "$OUT/layers.txt" | cut -c1-220
summary
