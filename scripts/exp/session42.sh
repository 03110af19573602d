#!/usr/bin/env bash
# Session 42's pass (carry `carry/bin`, `carry/ptx`; builds nothing here).
# On any card: issue 7's B = 1 question with the tile pinned. Session 41's A/B left the tile to
# the library, and `--stream-k off` moved GeMM1 from the 128 x 16 tile to 128 x 64 (H100 run
# of session 42), so this time both arms force `--kernel wg128x16`: tile-aligned stream-K (the
# library's cut) against split-K 2 (the stage's cut), two rounds each, alternating.
# On any card, then: one traced pipelined 2-layer launch (`run layers --trace`).
# On the H200 (on any card with `any`, its figures labelled as that card's):
# 1. issue 5's 2-layer stack with the paired-by-round ratios (`run layers`, 21 rounds);
# 2. the 4- and 8-layer stacks (11 rounds);
# 3. issue 5's "every M" at 2 layers: M = 1024, 4096, 32768 (7 rounds);
# 4. issue 7's `cusync bench --samples 21` if BUDGET (default 540) leaves 120 s.
# First, on any card: `gemm::path2_tile16` (the pinned tile's division).
# H200_ONLY=1 leaves out the other any-card steps (done on an H100 in session 42: runs 2-3).
# With H200_ONLY=1, TILE16=0 also leaves that test out on another card (passed on an H100: run 3).
# Usage: [BUDGET=seconds] [H200_ONLY=1 [TILE16=0]] bash scripts/exp/session42.sh [any]
set -uo pipefail
cd "$(dirname "$0")/../.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
source scripts/exp/session39-steps.sh
exp_start /tmp/c42.cubin
# Any card: the GPU test of the pinned 128 x 16 tile's division (64ba74a).
case "$gpu" in *H200*) ;; *) [ -n "${H200_ONLY:-}" ] && [ "${TILE16:-1}" = 0 ] && { echo "not an H200 ($gpu): nothing run"; exit 3; } ;; esac
gpu_tests test-tile16.log 120 gemm::path2_tile16
grep -E "pinned|^test |^gpu:" "$OUT/test-tile16.log" | cut -c1-200
case "$gpu" in *H200*) ;; *) [ -n "${H200_ONLY:-}" ] && { echo "not an H200 ($gpu): the rest is left for the H200"; summary; exit 3; } ;; esac
if [ -z "${H200_ONLY:-}" ]; then
gemm1="run gemm --m 1 --n 6144 --k 12288 --gelu --iters 200 --kernel wg128x16"
for r in 1 2; do
  for cut in stream-k split-k; do
    extra=""; [ $cut = split-k ] && extra="--stream-k off --split-k 2"
    echo "--- $cut, round $r: cusync $gemm1 $extra" >> "$OUT/gemm1.txt"
    timeout 60 carry/bin/cusync $gemm1 $extra >> "$OUT/gemm1.txt" 2>&1
    row "GeMM1 B=1 wg128x16 $cut ($r)" "$?" "$(grep -E '^  ours ' "$OUT/gemm1.txt" | tail -1 | cut -c1-40)"
  done
done
echo "=== GeMM1 B=1 A/B (plain kernel, 128 x 16 pinned) ==="; grep -E "^---|^  ours|cuBLAS|traced" "$OUT/gemm1.txt" | cut -c1-200
# Any card: one traced pipelined 2-layer launch (where do the pipelined megakernel's blocks
# lose time against deps met?), analysed here with `cusync trace analyze`.
timeout 90 carry/bin/cusync run layers --m 16384 --layers 2 --iters 3 --no-microbatch --trace /tmp/tl > "$OUT/layers-traced.txt" 2>&1
row "run layers 2 --trace" "$?" "$(ls /tmp/tl 2>/dev/null | wc -l) files"
tar czf "$OUT/trace-layers.tgz" --exclude='*.svg' -C /tmp tl 2>/dev/null
fi
case "$gpu" in
  *H200*) ;;
  *) [ "${1:-}" = any ] || { echo "not an H200 ($gpu): issue 5's figures are left for the H200"; summary; exit 3; }
     echo "not an H200 ($gpu): its figures are this card's, not the H200's" ;;
esac
timeout 150 carry/bin/cusync run layers --m 16384 --layers 2 --iters 21 --csv "$OUT/layers2.csv" > "$OUT/layers.txt" 2>&1
row "run layers 2 x21" "$?" "$(grep -c . "$OUT/layers.txt") lines"
timeout 150 carry/bin/cusync run layers --m 16384 --layers 4,8 --iters 11 >> "$OUT/layers.txt" 2>&1
row "run layers 4,8 x11" "$?" "$(grep -c . "$OUT/layers.txt") lines"
timeout 150 carry/bin/cusync run layers --m 1024,4096,32768 --layers 2 --iters 7 > "$OUT/layers-m.txt" 2>&1
row "run layers M x7" "$?" "$(grep -c . "$OUT/layers-m.txt") lines"
lim=$((${BUDGET:-540} - (SECONDS - t0)))
if [ $lim -gt 120 ]; then bench_traced 21; rm -f "$OUT/bench-traces.tgz"; fi   # at most 8 files come back
echo "=== run layers ==="; grep -E "^[0-9]+-layer|paired|protocol overhead|/ single|/ cuBLAS|micro-batching:|SM clock" -A0 "$OUT/layers.txt" "$OUT/layers-m.txt" | grep -v "^ *measuring" | cut -c1-200
[ -f "$OUT/bench.txt" ] && { echo "=== bench ==="; grep -E "paired|post|wait|\+|-" "$OUT/bench.txt" | head -40 | cut -c1-200; }
summary
